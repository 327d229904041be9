// Schemas: the built-in registry's subjects, their versions, the latest
// schema (pretty-printed when it is JSON) and the compatibility level. Empty
// when the broker runs without its registry.
import { api } from '../api.js';
import { h, fill, table, badge } from '../ui.js';

export function schemasPage(root, ctx) {
  const errors = h('div');
  const box = h('div');
  const detail = h('div', { testid: 'schema-detail' });
  const filter = h('input', { type: 'search', placeholder: 'Filter subjects', testid: 'schemas-filter', class: 'filter', value: ctx.query.get('subject') || '' });
  let latest = [];
  root.append(h('h1', {}, 'Schemas'), errors, h('div', { class: 'toolbar' }, filter), box, detail);

  function show(s) {
    let text = s.latest?.schema ?? '';
    try {
      text = JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      // Protobuf schemas are not JSON: shown as they are.
    }
    fill(detail, h('h2', {}, `${s.subject}, version ${s.latest?.version} (id ${s.latest?.id})`), h('pre', { class: 'schema' }, text));
  }

  function draw() {
    const q = filter.value.trim().toLowerCase();
    const rows = latest.filter((s) => !q || s.subject.toLowerCase().includes(q)).sort((a, b) => a.subject.localeCompare(b.subject));
    fill(
      box,
      table(
        [
          { label: 'Subject', value: (s) => h('button', { type: 'button', class: 'linklike', onclick: () => show(s) }, s.subject), col: 'subject' },
          { label: 'Type', value: (s) => badge(s.latest?.type || 'AVRO'), col: 'type' },
          { label: 'Versions', value: (s) => (s.versions || []).join(', '), col: 'versions' },
          { label: 'Latest', value: (s) => `v${s.latest?.version} (id ${s.latest?.id})`, col: 'latest' },
          { label: 'Compatibility', value: (s) => s.compatibility || '–', col: 'compatibility' },
        ],
        rows,
        { testid: 'schemas-table', rowKey: (s) => s.subject, empty: latest.length ? 'No subject matches.' : 'No schemas (or the registry does not run on this broker).' },
      ),
    );
    if (rows.length === 1 && q) show(rows[0]);
  }
  filter.addEventListener('input', draw);
  ctx.poll(async () => {
    latest = await api('/schemas');
    if (ctx.alive()) draw();
  }, 10000, errors);
}
