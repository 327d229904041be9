//! Protobuf compatibility as Confluent's registry decides it
//! (`io.confluent.kafka.schemaregistry.protobuf.diff`): a diff from the
//! original schema to the update over the compiled descriptors, each
//! difference typed (`FIELD_KIND_CHANGED`, `ONEOF_FIELD_REMOVED`, ...), and
//! the update compatible when every difference is in Confluent's
//! [`COMPATIBLE`] set. Messages and enums are matched by name, fields and
//! enum values by number; a field's kind (scalar, message, map), its scalar
//! group (`int32`/`int64`/`uint32`/`uint64`/`bool`/enums are one wire
//! group; `sint32`/`sint64`; `string`/`bytes`; `fixed32`/`sfixed32`;
//! `fixed64`/`sfixed64`; `float`; `double`), its label among numeric
//! fields, and its message type's name (without package) must hold; a
//! message type from another file (a reference) is compared field by field
//! too. Reserved ranges and syntax are not compared (Confluent does not).
//!
//! Bounds: a message already being compared is not compared again inside
//! itself (as Confluent); comparisons count against [`STEPS_MAX`] and
//! nest at most [`DEPTH_MAX`] deep; past either the update is refused as
//! incompatible (`COMPARISON_TOO_COMPLEX`).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use prost_reflect::{
    Cardinality, EnumDescriptor, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor, Syntax,
};

use super::proto::Proto;

/// Most fields, types and values one diff compares.
pub const STEPS_MAX: usize = 200_000;
/// Deepest chain of message types compared through fields.
pub const DEPTH_MAX: usize = 64;

/// Confluent's compatible changes.
pub const COMPATIBLE: &[&str] = &[
    "MESSAGE_ADDED",
    "MESSAGE_MOVED",
    "ENUM_ADDED",
    "ENUM_REMOVED",
    "ENUM_CONST_ADDED",
    "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED",
    "FIELD_ADDED",
    "FIELD_REMOVED",
    "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
    "ONEOF_ADDED",
    "ONEOF_REMOVED",
    "ONEOF_FIELD_ADDED",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
];

pub fn compatible(kind: &str) -> bool {
    COMPATIBLE.contains(&kind)
}

/// One difference; `path` is Confluent's, without its leading `#/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub kind: &'static str,
    pub path: String,
}

impl Difference {
    /// Confluent's sentence, `update` and `original` naming the two schemas.
    pub fn describe(&self, update: &str, original: &str) -> String {
        let p = format!("#/{}", self.path);
        let d = match self.kind {
            "PACKAGE_CHANGED" => format!("The package at '{p}' in the {update} schema does not match the package in the {original} schema"),
            "MESSAGE_REMOVED" => format!("The {update} schema is missing a MESSAGE type at path '{p}' in the {original} schema"),
            "FIELD_KIND_CHANGED" => format!("The type of a field at path '{p}' in the {update} schema does not match the {original} schema"),
            "FIELD_SCALAR_KIND_CHANGED" => format!("The kind of a SCALAR field at path '{p}' in the {update} schema does not match its kind in the {original} schema"),
            "FIELD_NAMED_TYPE_CHANGED" => format!("The type of a MESSAGE field at path '{p}' in the {update} schema does not match its type in the {original} schema"),
            "FIELD_NUMERIC_LABEL_CHANGED" => format!("The label for a NUMERIC field at path '{p}' in the {update} schema does not match its label in the {original} schema"),
            "REQUIRED_FIELD_ADDED" => format!("A required field  at path '{p}' in the {update} schema is missing in the {original} schema"),
            "REQUIRED_FIELD_REMOVED" => format!("The {update} schema is missing a required field at path: '{p}' in the {original} schema"),
            "ONEOF_FIELD_REMOVED" => format!("The {update} schema is missing a oneof field at path '{p}' in the {original} schema"),
            "MULTIPLE_FIELDS_MOVED_TO_ONEOF" => format!("Multiple fields in the oneof at path '{p}' in the {update} schema are outside a oneof in the {original} schema"),
            "FIELD_MOVED_TO_EXISTING_ONEOF" => format!("A field in the oneof at path '{p}' in the {update} schema is outside an existing oneof in the {original} schema"),
            "COMPARISON_TOO_COMPLEX" => format!("The {update} and {original} schema could not be compared within this registry's limits"),
            _ => String::new(),
        };
        format!("{{errorType:\"{}\", description:\"{d}\"}}", self.kind)
    }
}

/// Every difference from `original` to `update`.
pub fn differences(original: &Proto, update: &Proto) -> Vec<Difference> {
    let (Some(of), Some(uf)) = (original.file(), update.file()) else {
        return Vec::new();
    };
    let mut ctx = Ctx {
        path: Vec::new(),
        diffs: Vec::new(),
        visiting: HashSet::new(),
        steps: 0,
        depth: 0,
        exhausted: false,
        main: (original.main.clone(), update.main.clone()),
    };
    if of.package_name() != uf.package_name() {
        ctx.add("PACKAGE_CHANGED");
    }
    ctx.compare_types(
        of.messages().collect(),
        of.enums().collect(),
        uf.messages().collect(),
        uf.enums().collect(),
    );
    if ctx.exhausted {
        return vec![Difference {
            kind: "COMPARISON_TOO_COMPLEX",
            path: String::new(),
        }];
    }
    ctx.diffs
}

/// The differences from `original` to `update` that are not compatible.
pub fn incompatible(original: &Proto, update: &Proto) -> Vec<Difference> {
    let mut d = differences(original, update);
    d.retain(|d| !compatible(d.kind));
    d
}

struct Ctx {
    path: Vec<String>,
    diffs: Vec<Difference>,
    /// Original messages being compared (Confluent's schema scope).
    visiting: HashSet<String>,
    steps: usize,
    depth: usize,
    exhausted: bool,
    /// The schemas' own file names: types defined elsewhere are references.
    main: (String, String),
}

/// Wire's label of a field: None where the `.proto` text writes none
/// (proto3 singular fields, oneof members, map fields).
fn label(f: &FieldDescriptor) -> Option<Cardinality> {
    if f.is_map() {
        return None;
    }
    let proto = f.field_descriptor_proto();
    if proto.proto3_optional() {
        return Some(Cardinality::Optional);
    }
    if f.containing_oneof().is_some() {
        return None;
    }
    match f.cardinality() {
        Cardinality::Optional if f.parent_file().syntax() != Syntax::Proto2 => None,
        c => Some(c),
    }
}

/// A oneof that the text declares (not proto3 `optional`'s synthetic one).
fn real_oneof(f: &FieldDescriptor) -> Option<String> {
    if f.field_descriptor_proto().proto3_optional() {
        return None;
    }
    f.containing_oneof().map(|o| o.name().to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldKind {
    Scalar,
    Map,
    Message,
}

/// Confluent's scalar groups: values of one group share a wire encoding.
fn scalar_group(k: &Kind) -> u8 {
    match k {
        Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => 0,
        Kind::Sint32 | Kind::Sint64 => 1,
        Kind::String | Kind::Bytes => 2,
        Kind::Fixed32 | Kind::Sfixed32 => 3,
        Kind::Fixed64 | Kind::Sfixed64 => 4,
        Kind::Float => 5,
        Kind::Double => 6,
        Kind::Message(_) => 7,
    }
}

/// A message's name without its file's package.
fn local_name(m: &MessageDescriptor) -> String {
    let package = m.package_name();
    let full = m.full_name();
    match full.strip_prefix(package).and_then(|r| r.strip_prefix('.')) {
        Some(local) if !package.is_empty() => local.to_string(),
        _ => full.to_string(),
    }
}

fn is_map_entry(m: &MessageDescriptor) -> bool {
    m.is_map_entry()
}

impl Ctx {
    fn add(&mut self, kind: &'static str) {
        self.diffs.push(Difference {
            kind,
            path: self.path.join("/"),
        });
    }

    fn at(&mut self, seg: &str, f: impl FnOnce(&mut Self)) {
        self.path.push(seg.to_string());
        f(self);
        self.path.pop();
    }

    /// Spends one step; false once the budget is spent.
    fn step(&mut self) -> bool {
        self.steps += 1;
        if self.steps > STEPS_MAX {
            self.exhausted = true;
        }
        !self.exhausted
    }

    fn compare_types(
        &mut self,
        om: Vec<MessageDescriptor>,
        oe: Vec<EnumDescriptor>,
        um: Vec<MessageDescriptor>,
        ue: Vec<EnumDescriptor>,
    ) {
        let index = |ms: &[MessageDescriptor]| -> BTreeMap<String, (usize, MessageDescriptor)> {
            ms.iter()
                .filter(|m| !is_map_entry(m))
                .enumerate()
                .map(|(i, m)| (m.name().to_string(), (i, m.clone())))
                .collect()
        };
        let (omap, umap) = (index(&om), index(&um));
        let names: BTreeSet<&String> = omap.keys().chain(umap.keys()).collect();
        for name in names {
            if !self.step() {
                return;
            }
            self.at(name, |s| match (omap.get(name), umap.get(name)) {
                (Some(_), None) => s.add("MESSAGE_REMOVED"),
                (None, Some(_)) => s.add("MESSAGE_ADDED"),
                (Some((oi, o)), Some((ui, u))) => {
                    s.compare_message(o, u);
                    if oi != ui {
                        s.add("MESSAGE_MOVED");
                    }
                }
                (None, None) => {}
            });
        }
        let eindex = |es: &[EnumDescriptor]| -> BTreeMap<String, EnumDescriptor> {
            es.iter()
                .map(|e| (e.name().to_string(), e.clone()))
                .collect()
        };
        let (omap, umap) = (eindex(&oe), eindex(&ue));
        let names: BTreeSet<&String> = omap.keys().chain(umap.keys()).collect();
        for name in names {
            self.at(name, |s| match (omap.get(name), umap.get(name)) {
                (Some(_), None) => s.add("ENUM_REMOVED"),
                (None, Some(_)) => s.add("ENUM_ADDED"),
                (Some(o), Some(u)) => s.compare_enum(o, u),
                (None, None) => {}
            });
        }
    }

    fn compare_enum(&mut self, o: &EnumDescriptor, u: &EnumDescriptor) {
        let by_number = |e: &EnumDescriptor| -> BTreeMap<i32, String> {
            e.values()
                .map(|v| (v.number(), v.name().to_string()))
                .collect()
        };
        let (ov, uv) = (by_number(o), by_number(u));
        let numbers: BTreeSet<&i32> = ov.keys().chain(uv.keys()).collect();
        for n in numbers {
            if !self.step() {
                return;
            }
            self.at(&n.to_string(), |s| match (ov.get(n), uv.get(n)) {
                (Some(_), None) => s.add("ENUM_CONST_REMOVED"),
                (None, Some(_)) => s.add("ENUM_CONST_ADDED"),
                (Some(a), Some(b)) if a != b => s.add("ENUM_CONST_CHANGED"),
                _ => {}
            });
        }
    }

    fn compare_message(&mut self, o: &MessageDescriptor, u: &MessageDescriptor) {
        if self.depth >= DEPTH_MAX {
            self.exhausted = true;
            return;
        }
        self.depth += 1;
        if self.visiting.insert(o.full_name().to_string()) {
            self.compare_fields(o, u);
            self.visiting.remove(o.full_name());
        }
        self.compare_types(
            o.child_messages().collect(),
            o.child_enums().collect(),
            u.child_messages().collect(),
            u.child_enums().collect(),
        );
        self.depth -= 1;
    }

    fn compare_fields(&mut self, o: &MessageDescriptor, u: &MessageDescriptor) {
        let by_tag = |m: &MessageDescriptor| -> BTreeMap<u32, FieldDescriptor> {
            m.fields().map(|f| (f.number(), f)).collect()
        };
        let oneofs = |m: &MessageDescriptor| -> BTreeMap<String, Vec<u32>> {
            let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
            for f in m.fields() {
                if let Some(name) = real_oneof(&f) {
                    out.entry(name).or_default().push(f.number());
                }
            }
            out
        };
        let (of, uf) = (by_tag(o), by_tag(u));
        let (oo, uo) = (oneofs(o), oneofs(u));
        let tag_oneof = |f: Option<&FieldDescriptor>| f.and_then(real_oneof);
        // Oneofs gone whose every member is gone too.
        let deleted: BTreeSet<&String> = oo
            .iter()
            .filter(|(name, tags)| {
                !uo.contains_key(*name) && tags.iter().all(|t| !uf.contains_key(t))
            })
            .map(|(name, _)| name)
            .collect();
        // Fields moved into a oneof of the update.
        for (name, tags) in &uo {
            let mut groups = BTreeSet::new();
            let mut top_level_in = 0;
            for t in tags {
                if let Some(from) = tag_oneof(of.get(t)) {
                    groups.insert(format!("oneof:{from}"));
                } else if of.contains_key(t) {
                    groups.insert(format!("field:{t}"));
                    top_level_in += 1;
                }
            }
            if groups.len() > 1 {
                self.at(name, |s| {
                    s.add(if top_level_in > 1 {
                        "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
                    } else {
                        "FIELD_MOVED_TO_EXISTING_ONEOF"
                    })
                });
            }
        }
        let names: BTreeSet<&String> = oo.keys().chain(uo.keys()).collect();
        for name in names {
            match (oo.contains_key(name), uo.contains_key(name)) {
                (true, false) => self.at(name, |s| s.add("ONEOF_REMOVED")),
                (false, true) => self.at(name, |s| s.add("ONEOF_ADDED")),
                _ => {}
            }
        }
        let tags: BTreeSet<&u32> = of.keys().chain(uf.keys()).collect();
        for tag in tags {
            if !self.step() {
                return;
            }
            let (ofield, ufield) = (of.get(tag), uf.get(tag));
            let (ooneof, uoneof) = (tag_oneof(ofield), tag_oneof(ufield));
            let t = tag.to_string();
            match (ofield, ufield) {
                (Some(f), None) => match ooneof {
                    Some(one) if deleted.contains(&one) => {}
                    Some(one) => self.at(&one, |s| s.at(&t, |s| s.add("ONEOF_FIELD_REMOVED"))),
                    None => self.at(&t, |s| {
                        s.add(if f.cardinality() == Cardinality::Required {
                            "REQUIRED_FIELD_REMOVED"
                        } else {
                            "FIELD_REMOVED"
                        })
                    }),
                },
                (None, Some(f)) => match uoneof {
                    Some(one) => self.at(&one, |s| s.at(&t, |s| s.add("ONEOF_FIELD_ADDED"))),
                    None => self.at(&t, |s| {
                        s.add(if f.cardinality() == Cardinality::Required {
                            "REQUIRED_FIELD_ADDED"
                        } else {
                            "FIELD_ADDED"
                        })
                    }),
                },
                (Some(a), Some(b)) => {
                    if ooneof.is_some() && uoneof.is_none() {
                        self.at(&t, |s| s.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL"));
                    }
                    match &uoneof {
                        Some(one) => self.at(one, |s| s.at(&t, |s| s.compare_field(a, b))),
                        None => self.at(&t, |s| s.compare_field(a, b)),
                    }
                }
                (None, None) => {}
            }
        }
    }

    fn compare_field(&mut self, o: &FieldDescriptor, u: &FieldDescriptor) {
        if o.name() != u.name() {
            self.add("FIELD_NAME_CHANGED");
        }
        self.compare_labels_and_types(label(o), label(u), o, u);
    }

    fn field_kind(f: &FieldDescriptor) -> FieldKind {
        if f.is_map() {
            FieldKind::Map
        } else if matches!(f.kind(), Kind::Message(_)) {
            FieldKind::Message
        } else {
            FieldKind::Scalar
        }
    }

    fn compare_labels_and_types(
        &mut self,
        ol: Option<Cardinality>,
        ul: Option<Cardinality>,
        o: &FieldDescriptor,
        u: &FieldDescriptor,
    ) {
        let (ok, uk) = (Self::field_kind(o), Self::field_kind(u));
        if ok != uk {
            return self.add("FIELD_KIND_CHANGED");
        }
        match ok {
            FieldKind::Scalar => self.compare_scalars(ol, ul, &o.kind(), &u.kind()),
            FieldKind::Message => {
                if let (Kind::Message(om), Kind::Message(um)) = (o.kind(), u.kind()) {
                    self.compare_message_types(&om, &um);
                }
            }
            FieldKind::Map => {
                if let (Kind::Message(om), Kind::Message(um)) = (o.kind(), u.kind()) {
                    for (a, b) in [
                        (om.map_entry_key_field(), um.map_entry_key_field()),
                        (om.map_entry_value_field(), um.map_entry_value_field()),
                    ] {
                        self.compare_labels_and_types(None, None, &a, &b);
                    }
                }
            }
        }
    }

    fn compare_scalars(
        &mut self,
        ol: Option<Cardinality>,
        ul: Option<Cardinality>,
        o: &Kind,
        u: &Kind,
    ) {
        let (og, ug) = (scalar_group(o), scalar_group(u));
        if og != ug {
            return self.add("FIELD_SCALAR_KIND_CHANGED");
        }
        if let (Some(a), Some(b)) = (ol, ul) {
            if a != b {
                self.add(if og == 2 {
                    "FIELD_STRING_OR_BYTES_LABEL_CHANGED"
                } else {
                    "FIELD_NUMERIC_LABEL_CHANGED"
                });
            }
        }
    }

    fn compare_message_types(&mut self, o: &MessageDescriptor, u: &MessageDescriptor) {
        let (ol, ul) = (local_name(o), local_name(u));
        if ol != ul {
            return self.add("FIELD_NAMED_TYPE_CHANGED");
        }
        let defined_in = |m: &MessageDescriptor| -> FileDescriptor { m.parent_file() };
        let in_main = defined_in(o).name() == self.main.0 && defined_in(u).name() == self.main.1;
        if in_main {
            // Compared where the schema defines it.
            return;
        }
        // A type of another file (a reference): compared field by field,
        // its differences at its own name, as Confluent's sub-context.
        let saved_path =
            std::mem::replace(&mut self.path, ol.split('.').map(String::from).collect());
        let saved = std::mem::take(&mut self.diffs);
        self.compare_message(o, u);
        let got = std::mem::replace(&mut self.diffs, saved);
        self.path = saved_path;
        let ok = got.iter().all(|d| compatible(d.kind));
        self.diffs.extend(got);
        if !ok {
            self.add("FIELD_NAMED_TYPE_CHANGED");
        }
    }
}
