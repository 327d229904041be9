//! (Not yet wired: see `format::parse`.)
//! JSON Schema compatibility as Confluent's registry decides it: a diff
//! from the original schema to the update, each difference typed
//! (`TYPE_CHANGED`, `PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`,
//! `REQUIRED_ATTRIBUTE_ADDED`, ...), and the update compatible when every
//! difference is one of Confluent's strict compatible changes. BACKWARD
//! diffs the old schema to the new; FORWARD the new to the old.
//!
//! Schemas are read into Confluent's (everit's) model first: a `type`
//! names one kind (a list of types is an `anyOf` of kinds), a schema
//! without `type` takes its kind from its keywords, and a schema with
//! several kinds (`type` with `enum`) is an `allOf` of them. `$ref`s are
//! resolved inside the document and into referenced schemas by name.
//!
//! Covered: types, strings, numbers, enums, consts, objects (properties,
//! required, open, closed and partially open content models,
//! additionalProperties, min/maxProperties), arrays (items,
//! min/maxItems, uniqueItems), allOf/anyOf/oneOf, not. Not covered yet:
//! dependencies, unevaluated*, contains, tuple items (`items` as a list,
//! `prefixItems`), which are compared as unchanged.

#![allow(clippy::collapsible_match)]

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

/// Deepest nesting the diff follows (a bound on recursion).
const DEPTH_MAX: usize = 200;
/// Most schema pairs one diff compares: `anyOf`s of recursive `$ref`s can
/// make the comparison exponential; past this the update is refused as
/// incompatible (`COMPARISON_TOO_COMPLEX`) rather than computed for ever.
const STEPS_MAX: usize = 100_000;

/// The properties of an object schema without `properties`.
static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

/// A parsed JSON Schema with the schemas it references, by name.
#[derive(Debug, Clone)]
pub struct Json {
    pub root: Value,
    pub referenced: HashMap<String, Value>,
}

/// One difference between two schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub kind: &'static str,
    pub path: String,
}

/// Confluent's strict set of compatible changes.
const COMPATIBLE: &[&str] = &[
    "ID_CHANGED",
    "DESCRIPTION_CHANGED",
    "TITLE_CHANGED",
    "DEFAULT_CHANGED",
    "SCHEMA_REMOVED",
    "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED",
    "MAX_LENGTH_REMOVED",
    "MIN_LENGTH_DECREASED",
    "MIN_LENGTH_REMOVED",
    "PATTERN_REMOVED",
    "MAXIMUM_INCREASED",
    "MAXIMUM_REMOVED",
    "MINIMUM_DECREASED",
    "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED",
    "EXCLUSIVE_MAXIMUM_REMOVED",
    "EXCLUSIVE_MINIMUM_DECREASED",
    "EXCLUSIVE_MINIMUM_REMOVED",
    "MULTIPLE_OF_REDUCED",
    "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
    "REQUIRED_ATTRIBUTE_REMOVED",
    "MAX_PROPERTIES_INCREASED",
    "MAX_PROPERTIES_REMOVED",
    "MIN_PROPERTIES_DECREASED",
    "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED",
    "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED",
    "MAX_ITEMS_REMOVED",
    "MIN_ITEMS_DECREASED",
    "MIN_ITEMS_REMOVED",
    "UNIQUE_ITEMS_REMOVED",
    "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED",
    "PRODUCT_TYPE_NARROWED",
    "SUM_TYPE_EXTENDED",
    "NOT_TYPE_NARROWED",
];

fn compatible(kind: &str) -> bool {
    COMPATIBLE.contains(&kind)
}

impl Difference {
    /// Confluent's sentence, `update` and `original` naming the two
    /// schemas ("new" and "old").
    pub fn describe(&self, update: &str, original: &str) -> String {
        let p = &self.path;
        let k = self.kind;
        let description = if k.ends_with("_ADDED")
            && !k.contains("PROPERTY")
            && !k.contains("ATTRIBUTE")
        {
            format!("The keyword at path '{p}' in the {update} schema is not present in the {original} schema")
        } else if k.ends_with("_DECREASED") || k.ends_with("_NARROWED") && !k.contains("TYPE") {
            format!("The value at path '{p}' in the {update} schema is less than its value in the {original} schema")
        } else if k.ends_with("_CHANGED") && k != "TYPE_CHANGED" {
            format!(
                "The value at path '{p}' is different between the {update} and {original} schema"
            )
        } else if k.ends_with("_INCREASED") {
            format!("The value at path '{p}' in the {update} schema is more than its value in the {original} schema")
        } else if k.contains("TYPE_NARROWED") {
            format!("An array or combined type at path '{p}' has fewer elements in the {update} schema than the {original} schema")
        } else if k.contains("TYPE_EXTENDED") {
            format!("An array or combined type at path '{p}' has more elements in the {update} schema than the {original} schema")
        } else if k == "TYPE_CHANGED" {
            format!("A type at path '{p}' is different between the {update} schema and the {original} schema")
        } else if k.contains("ADDED_TO_OPEN_CONTENT_MODEL") {
            format!("The {update} schema has an open content model and has a property or item at path '{p}' which is missing in the {original} schema")
        } else if k == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
            || k == "REQUIRED_ATTRIBUTE_ADDED"
        {
            format!("The {update} schema has an unopen content model and has a required property at path '{p}' which is missing in the {original} schema")
        } else if k == "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" {
            format!("The {update} has a closed content model and is missing a property or item present at path '{p}' in the {original} schema")
        } else if k.contains("NOT_COVERED") {
            format!("A property or item at path '{p}' is not covered by the partially open content model of the {update} schema")
        } else {
            format!("A change at path '{p}' between the {original} and {update} schema")
        };
        format!("{{errorType:\"{k}\", description:\"{description}\"}}")
    }
}

/// The differences from `original` to `update` that are not compatible.
pub fn incompatible(original: &Json, update: &Json) -> Vec<Difference> {
    let mut ctx = Ctx {
        original,
        update,
        path: vec!["#".to_string()],
        diffs: Vec::new(),
        in_progress: HashSet::new(),
        depth: 0,
        steps: 0,
    };
    let o = build(&original.root, &original.root, original, 0);
    let u = build(&update.root, &update.root, update, 0);
    ctx.compare(Some(&o), Some(&u));
    ctx.diffs.retain(|d| !compatible(d.kind));
    ctx.diffs
}

/// A schema in everit's model.
#[derive(Debug, Clone)]
enum Node<'a> {
    True,
    False,
    Empty,
    Str(&'a Map<String, Value>),
    Num(&'a Map<String, Value>, bool),
    Bool,
    Null,
    Obj(&'a Map<String, Value>, &'a Value),
    Arr(&'a Map<String, Value>, &'a Value),
    Enum(&'a [Value]),
    Const(&'a Value),
    Not(&'a Value, &'a Value),
    Combined(Criterion, Vec<Node<'a>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Criterion {
    All,
    Any,
    One,
}

impl Node<'_> {
    fn class(&self) -> u8 {
        match self {
            Node::True => 0,
            Node::False => 1,
            Node::Empty => 2,
            Node::Str(_) => 3,
            Node::Num(..) => 4,
            Node::Bool => 5,
            Node::Null => 6,
            Node::Obj(..) => 7,
            Node::Arr(..) => 8,
            Node::Enum(_) => 9,
            Node::Const(_) => 10,
            Node::Not(..) => 11,
            Node::Combined(..) => 12,
        }
    }
}

const STRING_KEYWORDS: &[&str] = &["minLength", "maxLength", "pattern", "format"];
const NUMBER_KEYWORDS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];
const OBJECT_KEYWORDS: &[&str] = &[
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "dependencies",
    "propertyNames",
];
const ARRAY_KEYWORDS: &[&str] = &[
    "items",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
];

/// Reads `v` (inside document `doc` of `schema`) into everit's model.
fn build<'a>(v: &'a Value, doc: &'a Value, schema: &'a Json, depth: usize) -> Node<'a> {
    let m = match v {
        Value::Bool(true) => return Node::True,
        Value::Bool(false) => return Node::False,
        Value::Object(m) => m,
        _ => return Node::Empty,
    };
    if let Some(Value::String(r)) = m.get("$ref") {
        if depth < DEPTH_MAX {
            if let Some((target, tdoc)) = resolve(r, doc, schema) {
                return build(target, tdoc, schema, depth + 1);
            }
        }
        return Node::Empty;
    }
    let typed = |t: &str| -> Option<Node<'a>> {
        Some(match t {
            "string" => Node::Str(m),
            "integer" => Node::Num(m, true),
            "number" => Node::Num(m, false),
            "boolean" => Node::Bool,
            "null" => Node::Null,
            "object" => Node::Obj(m, doc),
            "array" => Node::Arr(m, doc),
            _ => return None,
        })
    };
    let mut parts = Vec::new();
    match m.get("type") {
        Some(Value::String(t)) => parts.extend(typed(t)),
        Some(Value::Array(ts)) => {
            let kinds: Vec<Node<'a>> = ts
                .iter()
                .filter_map(|t| t.as_str().and_then(typed))
                .collect();
            if kinds.len() == 1 {
                parts.extend(kinds);
            } else if !kinds.is_empty() {
                parts.push(Node::Combined(Criterion::Any, kinds));
            }
        }
        _ => {
            let has = |kws: &[&str]| kws.iter().any(|k| m.contains_key(*k));
            if has(OBJECT_KEYWORDS) {
                parts.push(Node::Obj(m, doc));
            }
            if has(ARRAY_KEYWORDS) {
                parts.push(Node::Arr(m, doc));
            }
            if has(STRING_KEYWORDS) {
                parts.push(Node::Str(m));
            }
            if has(NUMBER_KEYWORDS) {
                parts.push(Node::Num(m, false));
            }
        }
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        parts.push(Node::Enum(values));
    }
    if let Some(c) = m.get("const") {
        parts.push(Node::Const(c));
    }
    if let Some(n) = m.get("not") {
        parts.push(Node::Not(n, doc));
    }
    for (kw, c) in [
        ("allOf", Criterion::All),
        ("anyOf", Criterion::Any),
        ("oneOf", Criterion::One),
    ] {
        if let Some(Value::Array(subs)) = m.get(kw) {
            if depth < DEPTH_MAX {
                parts.push(Node::Combined(
                    c,
                    subs.iter()
                        .map(|s| build(s, doc, schema, depth + 1))
                        .collect(),
                ));
            }
        }
    }
    match parts.len() {
        0 => Node::Empty,
        1 => parts.pop().unwrap_or(Node::Empty),
        _ => Node::Combined(Criterion::All, parts),
    }
}

/// Resolves a `$ref`: a pointer into `doc` (`#/definitions/x`), or a
/// referenced schema's name with an optional pointer (`other.json#/x`).
fn resolve<'a>(r: &str, doc: &'a Value, schema: &'a Json) -> Option<(&'a Value, &'a Value)> {
    let (base, fragment) = r.split_once('#').unwrap_or((r, ""));
    let target_doc = if base.is_empty() {
        doc
    } else {
        schema.referenced.get(base).or_else(|| {
            schema
                .referenced
                .iter()
                .find(|(name, _)| base.ends_with(name.as_str()))
                .map(|(_, v)| v)
        })?
    };
    let target = if fragment.is_empty() {
        target_doc
    } else {
        target_doc.pointer(fragment)?
    };
    Some((target, target_doc))
}

struct Ctx<'a> {
    original: &'a Json,
    update: &'a Json,
    path: Vec<String>,
    diffs: Vec<Difference>,
    /// Pairs of schemas being compared (by address): a pair met again
    /// inside itself (a recursive schema) is taken as compatible.
    in_progress: HashSet<(usize, usize)>,
    depth: usize,
    steps: usize,
}

fn num(m: &Map<String, Value>, k: &str) -> Option<f64> {
    m.get(k).and_then(Value::as_f64)
}

impl<'a> Ctx<'a> {
    fn add(&mut self, kind: &'static str) {
        self.diffs.push(Difference {
            kind,
            path: self.path.join("/"),
        });
    }

    fn add_at(&mut self, attr: &str, kind: &'static str) {
        self.path.push(attr.to_string());
        self.add(kind);
        self.path.pop();
    }

    /// Runs `f` with `seg` on the path.
    fn at(&mut self, seg: &str, f: impl FnOnce(&mut Self)) {
        self.path.push(seg.to_string());
        f(self);
        self.path.pop();
    }

    /// Compares in a sub-context: its differences and whether all are compatible.
    fn sub(&mut self, f: impl FnOnce(&mut Self)) -> (Vec<Difference>, bool) {
        let saved = std::mem::take(&mut self.diffs);
        f(self);
        let got = std::mem::replace(&mut self.diffs, saved);
        let ok = got.iter().all(|d| compatible(d.kind));
        (got, ok)
    }

    fn build_o(&self, v: &'a Value, doc: &'a Value) -> Node<'a> {
        build(v, doc, self.original, 0)
    }

    fn build_u(&self, v: &'a Value, doc: &'a Value) -> Node<'a> {
        build(v, doc, self.update, 0)
    }

    fn compare(&mut self, o: Option<&Node<'a>>, u: Option<&Node<'a>>) {
        let (o, u) = match (o, u) {
            (None, None) => return,
            (None, Some(_)) => return self.add("SCHEMA_ADDED"),
            (Some(_), None) => return self.add("SCHEMA_REMOVED"),
            (Some(o), Some(u)) => (o, u),
        };
        if self.depth >= DEPTH_MAX {
            return;
        }
        self.steps += 1;
        if self.steps > STEPS_MAX {
            if self.steps == STEPS_MAX + 1 {
                self.add("COMPARISON_TOO_COMPLEX");
            }
            return;
        }
        let key = (o as *const Node as usize, u as *const Node as usize);
        let key = match (o, u) {
            (Node::Obj(om, _), Node::Obj(um, _)) | (Node::Arr(om, _), Node::Arr(um, _)) => (
                *om as *const Map<String, Value> as usize,
                *um as *const Map<String, Value> as usize,
            ),
            _ => key,
        };
        if !self.in_progress.insert(key) {
            return;
        }
        self.depth += 1;
        self.compare_types(o, u);
        self.depth -= 1;
        self.in_progress.remove(&key);
    }

    fn compare_types(&mut self, o: &Node<'a>, u: &Node<'a>) {
        match (o, u) {
            (o, Node::Combined(c, subs)) if !matches!(o, Node::Combined(..)) => {
                if subs.len() == 1 {
                    let (d, ok) = self.sub(|s| s.compare(Some(o), subs.first()));
                    if ok {
                        self.diffs.extend(d);
                        return;
                    }
                } else if *c != Criterion::All {
                    for sub in subs {
                        let (d, ok) = self.sub(|s| s.compare(Some(o), Some(sub)));
                        if ok {
                            self.diffs.extend(d);
                            self.add("SUM_TYPE_EXTENDED");
                            return;
                        }
                    }
                }
            }
            (Node::Combined(c, subs), u) if !matches!(u, Node::Combined(..)) => {
                if subs.len() == 1 {
                    let (d, ok) = self.sub(|s| s.compare(subs.first(), Some(u)));
                    if ok {
                        self.diffs.extend(d);
                        return;
                    }
                } else if *c == Criterion::All {
                    for sub in subs {
                        let (d, ok) = self.sub(|s| s.compare(Some(sub), Some(u)));
                        if ok {
                            self.diffs.extend(d);
                            self.add("PRODUCT_TYPE_NARROWED");
                            return;
                        }
                    }
                }
            }
            _ => {}
        }
        if o.class() != u.class() {
            // Nothing to read from false; everything fits true or {}.
            if matches!(o, Node::False) || matches!(u, Node::True | Node::Empty) {
                return;
            }
            return self.add("TYPE_CHANGED");
        }
        match (o, u) {
            (Node::Str(om), Node::Str(um)) => self.compare_string(om, um),
            (Node::Num(om, oi), Node::Num(um, ui)) => {
                self.compare_number(om, um);
                if oi != ui {
                    self.add(if *oi {
                        "TYPE_EXTENDED"
                    } else {
                        "TYPE_NARROWED"
                    });
                }
            }
            (Node::Enum(ov), Node::Enum(uv)) => {
                if ov != uv {
                    let kind = if ov.iter().all(|v| uv.contains(v)) {
                        "ENUM_ARRAY_EXTENDED"
                    } else if uv.iter().all(|v| ov.contains(v)) {
                        "ENUM_ARRAY_NARROWED"
                    } else {
                        "ENUM_ARRAY_CHANGED"
                    };
                    self.add_at("enum", kind);
                }
            }
            (Node::Const(ov), Node::Const(uv)) => {
                if ov != uv {
                    self.add_at("const", "ENUM_ARRAY_CHANGED");
                }
            }
            (Node::Not(ov, od), Node::Not(uv, ud)) => {
                let (on, un) = (self.build_o(ov, od), self.build_u(uv, ud));
                self.at("not", |s| {
                    // The wrapped schemas compare the other way round.
                    let (_, ok) = s.sub(|s| s.compare(Some(&un), Some(&on)));
                    s.add(if ok {
                        "NOT_TYPE_NARROWED"
                    } else {
                        "NOT_TYPE_EXTENDED"
                    });
                });
            }
            (Node::Combined(oc, os), Node::Combined(uc, us)) => {
                self.compare_combined(*oc, os, *uc, us)
            }
            (Node::Obj(om, od), Node::Obj(um, ud)) => self.compare_object(om, od, um, ud),
            (Node::Arr(om, od), Node::Arr(um, ud)) => self.compare_array(om, od, um, ud),
            _ => {}
        }
    }

    fn compare_bound(
        &mut self,
        attr: &str,
        o: Option<f64>,
        u: Option<f64>,
        kinds: [&'static str; 4],
    ) {
        let [added, removed, increased, decreased] = kinds;
        match (o, u) {
            (None, Some(_)) => self.add_at(attr, added),
            (Some(_), None) => self.add_at(attr, removed),
            (Some(a), Some(b)) if a < b => self.add_at(attr, increased),
            (Some(a), Some(b)) if a > b => self.add_at(attr, decreased),
            _ => {}
        }
    }

    fn compare_string(&mut self, o: &Map<String, Value>, u: &Map<String, Value>) {
        self.compare_bound(
            "maxLength",
            num(o, "maxLength"),
            num(u, "maxLength"),
            [
                "MAX_LENGTH_ADDED",
                "MAX_LENGTH_REMOVED",
                "MAX_LENGTH_INCREASED",
                "MAX_LENGTH_DECREASED",
            ],
        );
        self.compare_bound(
            "minLength",
            num(o, "minLength"),
            num(u, "minLength"),
            [
                "MIN_LENGTH_ADDED",
                "MIN_LENGTH_REMOVED",
                "MIN_LENGTH_INCREASED",
                "MIN_LENGTH_DECREASED",
            ],
        );
        match (o.get("pattern"), u.get("pattern")) {
            (None, Some(_)) => self.add_at("pattern", "PATTERN_ADDED"),
            (Some(_), None) => self.add_at("pattern", "PATTERN_REMOVED"),
            (Some(a), Some(b)) if a != b => self.add_at("pattern", "PATTERN_CHANGED"),
            _ => {}
        }
    }

    fn compare_number(&mut self, o: &Map<String, Value>, u: &Map<String, Value>) {
        self.compare_bound(
            "maximum",
            num(o, "maximum"),
            num(u, "maximum"),
            [
                "MAXIMUM_ADDED",
                "MAXIMUM_REMOVED",
                "MAXIMUM_INCREASED",
                "MAXIMUM_DECREASED",
            ],
        );
        self.compare_bound(
            "minimum",
            num(o, "minimum"),
            num(u, "minimum"),
            [
                "MINIMUM_ADDED",
                "MINIMUM_REMOVED",
                "MINIMUM_INCREASED",
                "MINIMUM_DECREASED",
            ],
        );
        self.compare_bound(
            "exclusiveMaximum",
            num(o, "exclusiveMaximum"),
            num(u, "exclusiveMaximum"),
            [
                "EXCLUSIVE_MAXIMUM_ADDED",
                "EXCLUSIVE_MAXIMUM_REMOVED",
                "EXCLUSIVE_MAXIMUM_INCREASED",
                "EXCLUSIVE_MAXIMUM_DECREASED",
            ],
        );
        self.compare_bound(
            "exclusiveMinimum",
            num(o, "exclusiveMinimum"),
            num(u, "exclusiveMinimum"),
            [
                "EXCLUSIVE_MINIMUM_ADDED",
                "EXCLUSIVE_MINIMUM_REMOVED",
                "EXCLUSIVE_MINIMUM_INCREASED",
                "EXCLUSIVE_MINIMUM_DECREASED",
            ],
        );
        match (num(o, "multipleOf"), num(u, "multipleOf")) {
            (None, Some(_)) => self.add_at("multipleOf", "MULTIPLE_OF_ADDED"),
            (Some(_), None) => self.add_at("multipleOf", "MULTIPLE_OF_REMOVED"),
            (Some(a), Some(b)) if a != b => {
                let divides = |x: f64, y: f64| y != 0.0 && (x / y - (x / y).round()).abs() < 1e-9;
                let kind = if divides(b, a) {
                    "MULTIPLE_OF_EXPANDED"
                } else if divides(a, b) {
                    "MULTIPLE_OF_REDUCED"
                } else {
                    "MULTIPLE_OF_CHANGED"
                };
                self.add_at("multipleOf", kind);
            }
            _ => {}
        }
    }

    fn compare_combined(&mut self, oc: Criterion, os: &[Node<'a>], uc: Criterion, us: &[Node<'a>]) {
        if oc != uc {
            let extended = uc == Criterion::Any
                || (os.len() == 1 && us.len() == 1)
                || (os.len() == 1 && uc == Criterion::One)
                || (us.len() == 1 && oc == Criterion::All);
            if !extended {
                return self.add("COMBINED_TYPE_CHANGED");
            }
            self.add("COMBINED_TYPE_EXTENDED");
        }
        if os.len() < us.len() {
            self.add(if uc == Criterion::All {
                "PRODUCT_TYPE_EXTENDED"
            } else {
                "SUM_TYPE_EXTENDED"
            });
        } else if os.len() > us.len() {
            self.add(if oc == Criterion::All {
                "PRODUCT_TYPE_NARROWED"
            } else {
                "SUM_TYPE_NARROWED"
            });
        }
        let crit = match oc {
            Criterion::All => "allOf",
            Criterion::Any => "anyOf",
            Criterion::One => "oneOf",
        };
        // Which (original, update) pairs are compatible, with their differences.
        let mut edges: Vec<Vec<Option<Vec<Difference>>>> = Vec::with_capacity(os.len());
        for (i, o) in os.iter().enumerate() {
            let mut row = Vec::with_capacity(us.len());
            self.path.push(format!("{crit}/{i}"));
            for u in us {
                let (d, ok) = self.sub(|s| s.compare(Some(o), Some(u)));
                row.push(ok.then_some(d));
            }
            self.path.pop();
            edges.push(row);
        }
        // A maximum matching of originals to updates (augmenting paths).
        let mut owner: Vec<Option<usize>> = vec![None; us.len()];
        for i in 0..os.len() {
            let mut seen = vec![false; us.len()];
            augment(i, &edges, &mut owner, &mut seen);
        }
        let matched = owner.iter().flatten().count();
        for (j, o) in owner.iter().enumerate() {
            if let Some(i) = o {
                if let Some(Some(d)) = edges.get(*i).and_then(|r| r.get(j)) {
                    self.diffs.extend(d.iter().cloned());
                }
            }
        }
        if matched < os.len().min(us.len()) {
            self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED");
        }
    }

    fn compare_object(
        &mut self,
        o: &'a Map<String, Value>,
        od: &'a Value,
        u: &'a Map<String, Value>,
        ud: &'a Value,
    ) {
        let props = |m: &'a Map<String, Value>| {
            m.get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&EMPTY)
        };
        let (op, up) = (props(o), props(u));
        let required = |m: &Map<String, Value>, k: &str| {
            m.get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(k)))
        };
        let has_default = |v: &Value| v.as_object().is_some_and(|m| m.contains_key("default"));
        // Required.
        self.at("required", |s| {
            for k in op.keys() {
                if let Some(uv) = up.get(k) {
                    let (or, ur) = (required(o, k), required(u, k));
                    if or && !ur {
                        s.add_at(k, "REQUIRED_ATTRIBUTE_REMOVED");
                    } else if !or && ur {
                        s.add_at(
                            k,
                            if has_default(uv) {
                                "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                            } else {
                                "REQUIRED_ATTRIBUTE_ADDED"
                            },
                        );
                    }
                }
            }
        });
        // Properties.
        let mut keys: Vec<&String> = op.keys().chain(up.keys()).collect();
        keys.sort();
        keys.dedup();
        self.path.push("properties".into());
        for k in keys {
            self.path.push(k.clone());
            match (op.get(k), up.get(k)) {
                (Some(ov), None) => {
                    if open_content(u) {
                        self.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL");
                    } else if let Some(partial) = partial_schema(u, k) {
                        let (on, un) = (self.build_o(ov, od), self.build_u(partial, ud));
                        let (d, ok) = self.sub(|s| s.compare(Some(&on), Some(&un)));
                        self.diffs.extend(d);
                        self.add(if ok {
                            "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        } else {
                            "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        });
                    } else if *ov == Value::Bool(false) {
                        self.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                    } else {
                        self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                    }
                }
                (None, Some(uv)) => {
                    let is_empty = matches!(self.build_u(uv, ud), Node::Empty | Node::True);
                    if open_content(o) {
                        if is_empty {
                            self.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL");
                        } else if required(u, k) {
                            self.add(if has_default(uv) {
                                "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                            } else {
                                "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                            });
                        } else {
                            self.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL");
                        }
                    } else {
                        if let Some(partial) = partial_schema(o, k) {
                            let (on, un) = (self.build_o(partial, od), self.build_u(uv, ud));
                            let (d, ok) = self.sub(|s| s.compare(Some(&on), Some(&un)));
                            self.diffs.extend(d);
                            self.add(if ok {
                                "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                            } else {
                                "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                            });
                        }
                        if required(u, k) {
                            self.add(if has_default(uv) {
                                "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                            } else {
                                "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                            });
                        } else {
                            self.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL");
                        }
                    }
                }
                (Some(ov), Some(uv)) => {
                    let (on, un) = (self.build_o(ov, od), self.build_u(uv, ud));
                    self.compare(Some(&on), Some(&un));
                }
                (None, None) => {}
            }
            self.path.pop();
        }
        self.path.pop();
        // additionalProperties.
        self.path.push("additionalProperties".into());
        let (opermits, upermits) = (permits_additional(o), permits_additional(u));
        let (oschema, uschema) = (additional_schema(o), additional_schema(u));
        if opermits != upermits {
            self.add(if upermits {
                "ADDITIONAL_PROPERTIES_ADDED"
            } else {
                "ADDITIONAL_PROPERTIES_REMOVED"
            });
        } else {
            match (oschema, uschema) {
                (None, Some(_)) => self.add("ADDITIONAL_PROPERTIES_NARROWED"),
                (Some(_), None) => self.add("ADDITIONAL_PROPERTIES_EXTENDED"),
                (Some(ov), Some(uv)) => {
                    let (on, un) = (self.build_o(ov, od), self.build_u(uv, ud));
                    self.compare(Some(&on), Some(&un));
                }
                (None, None) => {}
            }
        }
        self.path.pop();
        self.compare_bound(
            "maxProperties",
            num(o, "maxProperties"),
            num(u, "maxProperties"),
            [
                "MAX_PROPERTIES_ADDED",
                "MAX_PROPERTIES_REMOVED",
                "MAX_PROPERTIES_INCREASED",
                "MAX_PROPERTIES_DECREASED",
            ],
        );
        self.compare_bound(
            "minProperties",
            num(o, "minProperties"),
            num(u, "minProperties"),
            [
                "MIN_PROPERTIES_ADDED",
                "MIN_PROPERTIES_REMOVED",
                "MIN_PROPERTIES_INCREASED",
                "MIN_PROPERTIES_DECREASED",
            ],
        );
    }

    fn compare_array(
        &mut self,
        o: &'a Map<String, Value>,
        od: &'a Value,
        u: &'a Map<String, Value>,
        ud: &'a Value,
    ) {
        // `items` as one schema for every item.
        let items = |m: &'a Map<String, Value>| m.get("items").filter(|v| !v.is_array());
        let on = items(o).map(|v| self.build_o(v, od));
        let un = items(u).map(|v| self.build_u(v, ud));
        self.at("items", |s| s.compare(on.as_ref(), un.as_ref()));
        self.compare_bound(
            "maxItems",
            num(o, "maxItems"),
            num(u, "maxItems"),
            [
                "MAX_ITEMS_ADDED",
                "MAX_ITEMS_REMOVED",
                "MAX_ITEMS_INCREASED",
                "MAX_ITEMS_DECREASED",
            ],
        );
        self.compare_bound(
            "minItems",
            num(o, "minItems"),
            num(u, "minItems"),
            [
                "MIN_ITEMS_ADDED",
                "MIN_ITEMS_REMOVED",
                "MIN_ITEMS_INCREASED",
                "MIN_ITEMS_DECREASED",
            ],
        );
        let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(o), unique(u)) {
            (true, false) => self.add_at("uniqueItems", "UNIQUE_ITEMS_REMOVED"),
            (false, true) => self.add_at("uniqueItems", "UNIQUE_ITEMS_ADDED"),
            _ => {}
        }
    }
}

/// Kuhn's augmenting path from original `i` (sizes are a schema's
/// subschema counts, bounded by the request size).
fn augment(
    i: usize,
    edges: &[Vec<Option<Vec<Difference>>>],
    owner: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    let Some(row) = edges.get(i) else {
        return false;
    };
    for (j, e) in row.iter().enumerate() {
        if e.is_none() || seen[j] {
            continue;
        }
        seen[j] = true;
        let free = match owner[j] {
            None => true,
            Some(k) => augment(k, edges, owner, seen),
        };
        if free {
            owner[j] = Some(i);
            return true;
        }
    }
    false
}

/// additionalProperties is not `false`.
fn permits_additional(m: &Map<String, Value>) -> bool {
    m.get("additionalProperties") != Some(&Value::Bool(false))
}

/// The schema of additional properties, if one (not `true`) is given.
fn additional_schema(m: &Map<String, Value>) -> Option<&Value> {
    m.get("additionalProperties").filter(|v| v.is_object())
}

/// Any property may appear with any value.
fn open_content(m: &Map<String, Value>) -> bool {
    permits_additional(m)
        && additional_schema(m).is_none()
        && m.get("patternProperties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.is_empty())
}

/// The schema a partially open content model gives property `k`.
fn partial_schema<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    if let Some(pp) = m.get("patternProperties").and_then(Value::as_object) {
        for (pattern, s) in pp {
            if regex::Regex::new(pattern).is_ok_and(|re| re.is_match(k)) {
                return Some(s);
            }
        }
    }
    additional_schema(m)
}
