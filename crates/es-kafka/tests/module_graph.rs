//! es-kafka's modules depend on each other in one direction only: the test
//! reads `src/**/*.rs`, collects the `crate::` paths (and, inside a directory
//! module, the `super::` paths to siblings) of the code outside
//! `#[cfg(test)]` modules and `*_tests.rs` files, and asserts two graphs
//! acyclic:
//!
//! - the crate's top-level modules (`broker`, `config`, `handlers`, ...; a
//!   directory module with all its submodules is one node);
//! - within each directory module, its submodules (`handlers::fetch`,
//!   `handlers::produce`, ...). A submodule's use of its parent (the shared
//!   request context in `handlers/mod.rs`) is no edge here: the parent
//!   declares its children and is their common ground.
//!
//! Test code is left out: a unit test may use any module to set up what it
//! checks. Comments and string literals are stripped before paths are read,
//! so a doc link (`[`crate::topics`]`) is no dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside the crate, `["handlers", "fetch"]` for
/// `src/handlers/fetch.rs` or `src/handlers/fetch/mod.rs`.
type ModPath = Vec<String>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn module_of(file: &Path) -> ModPath {
    let rel = file.strip_prefix(src_dir()).expect("under src");
    let mut parts: ModPath = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The source without comments, string and char literals (their contents
/// replaced by nothing), so that only code is searched for paths.
fn strip_comments_and_strings(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"') | Some(b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // A raw string r"..." or r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                j += 1;
                loop {
                    if j >= b.len() {
                        break;
                    }
                    if b[j] == b'"'
                        && b[j + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&c| c == b'#')
                            .count()
                            == hashes
                    {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' => {
                // A char literal ('x', '\n', '\''), or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    let mut j = i + 2;
                    while j < b.len() && b[j] != b'\'' {
                        j += 1;
                    }
                    i = j + 1;
                    out.push_str("' '");
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                    out.push_str("' '");
                } else {
                    out.push('\'');
                    i += 1;
                }
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// The source without `#[cfg(test)]` items (a test module with its body, or
/// an item such as `#[cfg(test)] mod tests;`).
fn strip_test_items(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let b = after.as_bytes();
        // The item ends at its first `;` outside braces or at the brace
        // that closes its body.
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, &c) in b.iter().enumerate().skip("#[cfg(test)]".len()) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path that follows `prefix::` (`crate::` or `super::`), expanded out
/// of `use` groups: `crate::{a::b, c::{d, e}}` gives `a::b`, `c::d`, `c::e`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(off) = code[from..].find(prefix) {
        let at = from + off;
        from = at + prefix.len();
        if at > 0 && code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        expand(&code[from..], Vec::new(), &mut out);
    }
    out
}

/// Expands the path at the start of `s` (after a `::`) onto `base`.
fn expand(s: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) {
    let s = s.trim_start();
    if let Some(inner) = s.strip_prefix('{') {
        // Split the group at top-level commas.
        let mut depth = 0usize;
        let mut start = 0;
        for (k, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand(&inner[start..k], base.clone(), out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..k], base.clone(), out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let ident: String = s.chars().take_while(|&c| is_ident(c)).collect();
    if ident.is_empty() {
        if !base.is_empty() {
            out.push(base);
        }
        return;
    }
    let mut path = base;
    path.push(ident.clone());
    let rest = s[ident.len()..].trim_start();
    match rest.strip_prefix("::") {
        Some(r) => expand(r, path, out),
        None => out.push(path),
    }
}

/// The module a path names: its longest prefix that is a module of the crate.
fn target(path: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

/// Each module's non-test code.
fn sources() -> BTreeMap<ModPath, String> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        let name = f.file_name().expect("name").to_string_lossy().to_string();
        if name.ends_with("_tests.rs") {
            continue;
        }
        let src = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let code = strip_test_items(&strip_comments_and_strings(&src));
        out.insert(module_of(&f), code);
    }
    out
}

/// Every edge `from -> to` between modules the code names.
fn edges(sources: &BTreeMap<ModPath, String>) -> BTreeSet<(ModPath, ModPath)> {
    let modules: BTreeSet<ModPath> = sources.keys().cloned().collect();
    let mut out = BTreeSet::new();
    for (m, code) in sources {
        for p in paths_after(code, "crate::") {
            if let Some(t) = target(&p, &modules) {
                out.insert((m.clone(), t));
            }
        }
        // `super::x` in a module file is relative to its parent.
        if let Some((_, parent)) = m.split_last() {
            for p in paths_after(code, "super::") {
                let full: Vec<String> = parent.iter().cloned().chain(p).collect();
                if let Some(t) = target(&full, &modules) {
                    out.insert((m.clone(), t));
                }
            }
        }
    }
    out
}

/// A cycle in `graph`, if there is one, as the list of nodes on it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(n) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let at = stack.iter().position(|s| s == n).unwrap_or(0);
                let mut cycle = stack[at..].to_vec();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(n.to_string(), Mark::Open);
        stack.push(n.to_string());
        for next in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, graph, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(n.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in graph.keys() {
        let mut stack = Vec::new();
        if let Some(c) = visit(n, graph, &mut marks, &mut stack) {
            return Some(c);
        }
    }
    None
}

fn describe(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    graph
        .iter()
        .map(|(k, v)| {
            format!(
                "  {k} -> {}",
                v.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn top_level_modules_form_no_cycle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges(&sources()) {
        let (Some(f), Some(t)) = (from.first(), to.first()) else {
            continue;
        };
        if f != t {
            graph.entry(f.clone()).or_default().insert(t.clone());
        }
    }
    // The graph is not empty: the parser found the crate's dependencies.
    assert!(
        graph
            .get("connection")
            .is_some_and(|s| s.contains("handlers")),
        "connection -> handlers not found; the parser is broken:\n{}",
        describe(&graph)
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "top-level module cycle: {}\n{}",
            cycle.join(" -> "),
            describe(&graph)
        );
    }
}

#[test]
fn submodules_form_no_cycle() {
    let edges = edges(&sources());
    let parents: BTreeSet<ModPath> = edges
        .iter()
        .flat_map(|(f, t)| [f, t])
        .filter(|m| m.len() > 1)
        .map(|m| m[..m.len() - 1].to_vec())
        .collect();
    assert!(
        parents.contains(&vec!["handlers".to_string()]),
        "no handlers submodule edges found; the parser is broken"
    );
    for parent in parents {
        let depth = parent.len() + 1;
        let child = |m: &ModPath| {
            (m.len() >= depth && m[..parent.len()] == parent[..]).then(|| m[..depth].join("::"))
        };
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in &edges {
            if let (Some(f), Some(t)) = (child(from), child(to)) {
                if f != t {
                    graph.entry(f).or_default().insert(t);
                }
            }
        }
        if let Some(cycle) = find_cycle(&graph) {
            panic!(
                "cycle among the submodules of {}: {}\n{}",
                parent.join("::"),
                cycle.join(" -> "),
                describe(&graph)
            );
        }
    }
}

#[test]
fn the_parser_reads_use_groups_and_skips_comments_and_tests() {
    let code = strip_test_items(&strip_comments_and_strings(
        "use crate::{a::B, c::{d, e::F}};\n// crate::x\nlet s = \"crate::y\";\n\
         #[cfg(test)]\nmod tests { use crate::z; }\nfn f() { crate::g::h(); }",
    ));
    let got: Vec<String> = paths_after(&code, "crate::")
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(got, ["a::B", "c::d", "c::e::F", "g::h"]);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("b".into()).or_default().insert("a".into());
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
}
