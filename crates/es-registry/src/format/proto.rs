//! Protobuf schemas: `.proto` text compiled by `protox` into descriptors
//! (`prost-reflect`), its imports resolved through the schema's references
//! (a reference's name is the import path, as Confluent's) and Google's
//! well-known types (`google/protobuf/*.proto`, built in). Before the
//! compiler sees the text it is scanned once ([`normal_form`]): brackets
//! nested deeper than [`NESTING_MAX`] are refused, so no parser recursion
//! depends on the input, and the same scan gives the text without comments
//! and insignificant white space, the schema's identity.

use std::collections::HashMap;

use prost_reflect::DescriptorPool;
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

/// Deepest nesting of `{`, `[`, `(` and `<` in a `.proto` text.
pub const NESTING_MAX: usize = 64;
/// The name the registered schema's own file is compiled under (a
/// reference cannot be named this: the registry's own prefix).
pub const MAIN_FILE: &str = "__es_registry_schema__.proto";

/// A compiled Protobuf schema: every file it imports, and its own.
#[derive(Debug, Clone)]
pub struct Proto {
    pub pool: DescriptorPool,
    pub main: String,
}

impl Proto {
    /// The schema's own file.
    pub fn file(&self) -> Option<prost_reflect::FileDescriptor> {
        self.pool.get_file_by_name(&self.main)
    }
}

/// Files by name, from the schema and its references.
struct Sources(HashMap<String, String>);

impl FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(text) => File::from_source(name, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// Compiles `text`; `deps` are (import path, text) of the schemas it
/// references (all of them, transitively).
pub fn parse(text: &str, deps: &[(&str, &str)]) -> Result<Proto, String> {
    normal_form(text)?;
    let mut sources = HashMap::with_capacity(deps.len() + 1);
    for (name, dep) in deps {
        normal_form(dep).map_err(|e| format!("referenced schema {name:?}: {e}"))?;
        sources.insert((*name).to_string(), (*dep).to_string());
    }
    sources.insert(MAIN_FILE.to_string(), text.to_string());
    let mut resolver = ChainFileResolver::new();
    resolver.add(Sources(sources));
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true);
    compiler.open_file(MAIN_FILE).map_err(|e| e.to_string())?;
    let proto = Proto {
        pool: compiler.descriptor_pool(),
        main: MAIN_FILE.to_string(),
    };
    // A schema names a message or an enum (Confluent's schema name).
    let file = proto.file().ok_or("the schema's file is missing")?;
    if file.messages().len() == 0 && file.enums().len() == 0 {
        return Err("Protobuf schema definition contains no type definitions".into());
    }
    Ok(proto)
}

/// `text` without comments and without white space except where it
/// separates two words; an error if brackets nest deeper than
/// [`NESTING_MAX`] or a string or comment is not closed.
pub fn normal_form(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut depth = 0usize;
    let mut pending_space = false;
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '.' || c == '"' || c == '\'';
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                pending_space = true;
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                let mut closed = false;
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    prev = c;
                }
                if !closed {
                    return Err("a comment is not closed".into());
                }
                pending_space = true;
            }
            '"' | '\'' => {
                if pending_space && out.chars().last().is_some_and(word) {
                    out.push(' ');
                }
                pending_space = false;
                out.push(c);
                let mut escaped = false;
                let mut closed = false;
                for s in chars.by_ref() {
                    out.push(s);
                    if escaped {
                        escaped = false;
                    } else if s == '\\' {
                        escaped = true;
                    } else if s == c {
                        closed = true;
                        break;
                    } else if s == '\n' {
                        break;
                    }
                }
                if !closed {
                    return Err("a string is not closed".into());
                }
            }
            c if c.is_whitespace() => pending_space = true,
            c => {
                if pending_space && word(c) && out.chars().last().is_some_and(word) {
                    out.push(' ');
                }
                pending_space = false;
                match c {
                    '{' | '[' | '(' | '<' => {
                        depth += 1;
                        if depth > NESTING_MAX {
                            return Err(format!("brackets nest deeper than {NESTING_MAX}"));
                        }
                    }
                    '}' | ']' | ')' | '>' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push(c);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_form_drops_comments_and_spacing() {
        let a = "syntax = \"proto3\";\n// c\nmessage  M {\n  int32 a = 1; /* x */\n}\n";
        let b = "syntax=\"proto3\"; message M{int32 a=1;}";
        assert_eq!(normal_form(a), normal_form(b));
        assert_eq!(
            normal_form(b).as_deref(),
            Ok("syntax=\"proto3\";message M{int32 a=1;}")
        );
        assert!(normal_form(&"{".repeat(NESTING_MAX + 1)).is_err());
        assert!(normal_form("/* open").is_err());
        assert!(normal_form("\"open").is_err());
    }

    #[test]
    fn imports_resolve_through_references_and_well_known_types() {
        let dep = "syntax = \"proto3\"; package a; message Addr { string city = 1; }";
        let main = "syntax = \"proto3\"; import \"a/addr.proto\"; import \"google/protobuf/timestamp.proto\"; message M { a.Addr home = 1; google.protobuf.Timestamp at = 2; }";
        let p = parse(main, &[("a/addr.proto", dep)]).expect("compiles");
        assert!(p.pool.get_message_by_name("M").is_some());
        assert!(parse(main, &[]).is_err());
        assert!(parse("message {", &[]).is_err());
    }
}
