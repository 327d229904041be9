//! Avro schemas through the `apache-avro` crate: parsing (with the schemas
//! a schema references, which define the named types it uses), and the
//! table of named types the compatibility check ([`super::avro_compat`])
//! resolves references through.

use std::collections::HashMap;

use apache_avro::Schema;

/// A parsed Avro schema and the referenced schemas that define the named
/// types it may use.
#[derive(Debug, Clone)]
pub struct Avro {
    pub schema: Schema,
    pub referenced: Vec<Schema>,
}

/// Parses `text`, whose named types may come from `deps` (the referenced
/// schemas' texts, each a named type).
pub fn parse(text: &str, deps: &[&str]) -> Result<Avro, String> {
    let parsed = if deps.is_empty() {
        Schema::parse_str(text).map(|s| (s, Vec::new()))
    } else {
        Schema::parse_str_with_list(text, deps.iter().copied())
    };
    let (schema, referenced) = parsed.map_err(|e| e.to_string())?;
    Ok(Avro { schema, referenced })
}

impl Avro {
    /// Records, enums and fixed types by full name, from the schema and its
    /// references (borrowed: built for one check, never cloned).
    pub fn names(&self) -> HashMap<String, &Schema> {
        let mut names = HashMap::new();
        for s in self.referenced.iter().chain(std::iter::once(&self.schema)) {
            collect_names(s, &mut names);
        }
        names
    }
}

/// Adds every named type defined inside `s` to `names`.
fn collect_names<'a>(s: &'a Schema, names: &mut HashMap<String, &'a Schema>) {
    match s {
        Schema::Record(r) => {
            names.insert(r.name.fullname(None), s);
            for f in &r.fields {
                collect_names(&f.schema, names);
            }
        }
        Schema::Enum(e) => {
            names.insert(e.name.fullname(None), s);
        }
        Schema::Fixed(f) => {
            names.insert(f.name.fullname(None), s);
        }
        Schema::Decimal(d) => collect_names(&d.inner, names),
        Schema::Array(a) => collect_names(&a.items, names),
        Schema::Map(m) => collect_names(&m.types, names),
        Schema::Union(u) => {
            for v in u.variants() {
                collect_names(v, names);
            }
        }
        _ => {}
    }
}
