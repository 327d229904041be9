//! Rebuilds es-broker when the console's built assets change: they are
//! embedded in the binary (src/admin/console.rs, rust-embed), and a new or
//! removed file must show in the next build. A missing `console/dist` (no
//! Node.js to build it) is fine: the console serves a plain page then.

fn main() {
    let console = std::path::Path::new("../../console");
    let dist = console.join("dist");
    // Cargo scans a watched directory for any change. A watched path that
    // does not exist would rebuild every time: without dist, watch the
    // folder it appears in (or this script, when there is no console).
    if dist.is_dir() {
        println!("cargo:rerun-if-changed={}", dist.display());
    } else if console.is_dir() {
        println!("cargo:rerun-if-changed={}", console.display());
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
}
