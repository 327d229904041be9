// Vite builds the console into dist/, which es-broker embeds (rust-embed) and
// serves from its admin listener. `base: './'` makes every asset URL relative,
// so the console loads from whatever path the listener (or a proxy) puts it at.
import { defineConfig } from 'vite';

export default defineConfig({
  base: './',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // One small bundle; no source maps shipped inside the broker binary.
    sourcemap: false,
    chunkSizeWarningLimit: 200,
  },
});
