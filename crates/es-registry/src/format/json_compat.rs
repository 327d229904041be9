//! JSON Schema compatibility as Confluent's registry decides it: a diff
//! from the original schema to the update, each difference typed
//! (`TYPE_CHANGED`, `PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`,
//! `REQUIRED_ATTRIBUTE_ADDED`, ...), and the update compatible when every
//! difference is one of Confluent's strict compatible changes
//! ([`COMPATIBLE`]). BACKWARD diffs the old schema to the new; FORWARD the
//! new to the old. Objects and arrays are compared in
//! [`super::json_shapes`].
//!
//! Schemas are read into Confluent's (everit's) model one level at a time
//! ([`build`]): a `type` names one kind (a list of types is an `anyOf` of
//! kinds), a schema without `type` takes its kind from its keywords, and a
//! schema with several kinds (`type` with `enum`) is an `allOf` of them.
//! `$ref`s are followed inside the document and into referenced schemas
//! by name.
//!
//! Bounds (the diff runs on untrusted input): each pair of schemas is
//! compared once and remembered; a pair met again inside itself (a
//! recursive schema) is taken as compatible for the moment and the diff is
//! rerun with the pairs found incompatible until nothing changes, as
//! Confluent does, at most [`ROUNDS_MAX`] times. Every comparison counts
//! against [`STEPS_MAX`], every difference's bytes against
//! [`DIFF_BYTES_MAX`], nesting against [`DEPTH_MAX`]; past any of them the
//! update is refused as incompatible (`COMPARISON_TOO_COMPLEX`), never
//! computed for ever.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_json::{Map, Value};

use super::json_shapes::bound_kinds;

/// Deepest nesting of comparisons (each level is a few stack frames).
pub const DEPTH_MAX: usize = 64;
/// Most pairs of schemas one diff compares.
pub const STEPS_MAX: usize = 200_000;
/// Most bytes of differences (paths) one diff may hold.
pub const DIFF_BYTES_MAX: usize = 32 * 1024 * 1024;
/// Most reruns for recursive schemas.
pub const ROUNDS_MAX: usize = 8;
/// Longest chain of `$ref`s to `$ref`s followed.
const REF_HOPS_MAX: usize = 32;
/// Bytes of subschema text that count as one step of the budget when
/// duplicates are looked for.
const DEDUP_BYTES_PER_STEP: usize = 1024;

/// A parsed JSON Schema with the schemas it references, by name.
#[derive(Debug, Clone)]
pub struct Json {
    pub root: Value,
    pub referenced: HashMap<String, Value>,
}

/// One difference between two schemas; `path` is relative to the root,
/// without its leading `#/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub kind: &'static str,
    pub path: String,
}

/// Confluent's strict set of compatible changes.
pub const COMPATIBLE: &[&str] = &[
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
    "DEPENDENCY_ARRAY_NARROWED",
    "DEPENDENCY_ARRAY_REMOVED",
    "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED",
    "MAX_PROPERTIES_REMOVED",
    "MIN_PROPERTIES_DECREASED",
    "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED",
    "ADDITIONAL_PROPERTIES_EXTENDED",
    "UNEVALUATED_PROPERTIES_ADDED",
    "UNEVALUATED_PROPERTIES_EXTENDED",
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
    "MAX_CONTAINS_INCREASED",
    "MAX_CONTAINS_REMOVED",
    "MIN_CONTAINS_DECREASED",
    "MIN_CONTAINS_REMOVED",
    "UNIQUE_ITEMS_REMOVED",
    "ADDITIONAL_ITEMS_ADDED",
    "ADDITIONAL_ITEMS_EXTENDED",
    "UNEVALUATED_ITEMS_ADDED",
    "UNEVALUATED_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED",
    "PRODUCT_TYPE_NARROWED",
    "SUM_TYPE_EXTENDED",
    "NOT_TYPE_NARROWED",
];

pub fn compatible(kind: &str) -> bool {
    COMPATIBLE.contains(&kind)
}

impl Difference {
    /// Confluent's sentence, `update` and `original` naming the two
    /// schemas ("new" and "old").
    pub fn describe(&self, update: &str, original: &str) -> String {
        let path = format!("#/{}", self.path);
        super::json_messages::describe(self.kind, &path, update, original)
    }
}

/// Every difference from `original` to `update`, compatible or not.
pub fn differences(original: &Json, update: &Json) -> Vec<Difference> {
    let mut seed: HashMap<PairKey, Rc<Vec<Difference>>> = HashMap::new();
    let mut budget = Budget::default();
    for _ in 0..ROUNDS_MAX {
        let mut ctx = Ctx {
            path: Vec::new(),
            diffs: Vec::new(),
            memo: HashMap::new(),
            in_progress: HashSet::new(),
            dedup_cache: HashMap::new(),
            seed: &seed,
            optimistic: false,
            depth: 0,
            budget: &mut budget,
            _marker: std::marker::PhantomData,
        };
        let o = build(&original.root, &original.root, original);
        let u = build(&update.root, &update.root, update);
        if o.is_none() || u.is_none() {
            // A root that is a cycle of bare $refs: nothing to compare.
            ctx.budget.exhausted = true;
        }
        ctx.compare(o.as_ref(), u.as_ref());
        if ctx.budget.exhausted {
            return vec![Difference {
                kind: "COMPARISON_TOO_COMPLEX",
                path: String::new(),
            }];
        }
        let incompatible: HashMap<PairKey, Rc<Vec<Difference>>> = ctx
            .memo
            .iter()
            .filter(|(_, d)| d.iter().any(|d| !compatible(d.kind)))
            .map(|(k, d)| (*k, d.clone()))
            .collect();
        let same =
            incompatible.len() == seed.len() && incompatible.keys().all(|k| seed.contains_key(k));
        if !ctx.optimistic || same {
            return ctx.diffs;
        }
        seed = incompatible;
    }
    // Still changing after every round: refuse rather than guess.
    vec![Difference {
        kind: "COMPARISON_TOO_COMPLEX",
        path: String::new(),
    }]
}

/// The differences from `original` to `update` that are not compatible.
pub fn incompatible(original: &Json, update: &Json) -> Vec<Difference> {
    let mut d = differences(original, update);
    d.retain(|d| !compatible(d.kind));
    d
}

/// Identifies a node across a diff: the address of the JSON value it was
/// read from and which part of that value it is.
pub(super) type NodeKey = (usize, u32);
type PairKey = (NodeKey, NodeKey);

/// A schema in everit's model, one level deep.
#[derive(Debug, Clone)]
pub(super) struct Node<'a> {
    pub key: NodeKey,
    /// The JSON object it was read from (None for `true` and `false`).
    pub map: Option<&'a Map<String, Value>>,
    /// The document it lives in, for its `$ref`s.
    pub doc: &'a Value,
    /// The schema (with its references) it belongs to.
    pub json: &'a Json,
    pub kind: Kind<'a>,
}

#[derive(Debug, Clone)]
pub(super) enum Kind<'a> {
    True,
    False,
    Empty,
    Str,
    Num { integer: bool },
    Bool,
    Null,
    Obj,
    Arr,
    Enum(&'a [Value]),
    Const(&'a Value),
    Not(&'a Value),
    Combined(Criterion, Vec<Part<'a>>),
}

/// A subschema of a combination: a JSON value not read yet, or a part of
/// the same object (a synthesised combination).
#[derive(Debug, Clone)]
pub(super) enum Part<'a> {
    Raw(&'a Value),
    Built(Node<'a>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Criterion {
    All,
    Any,
    One,
}

impl Criterion {
    fn word(self) -> &'static str {
        match self {
            Criterion::All => "allOf",
            Criterion::Any => "anyOf",
            Criterion::One => "oneOf",
        }
    }
}

impl Kind<'_> {
    /// everit's class: two schemas of different classes are different types.
    fn class(&self) -> u8 {
        match self {
            Kind::True => 0,
            Kind::False => 1,
            Kind::Empty => 2,
            Kind::Str => 3,
            Kind::Num { .. } => 4,
            Kind::Bool => 5,
            Kind::Null => 6,
            Kind::Obj => 7,
            Kind::Arr => 8,
            Kind::Enum(_) => 9,
            Kind::Const(_) => 10,
            Kind::Not(_) => 11,
            Kind::Combined(..) => 12,
        }
    }

    /// everit's `instanceof EmptySchema` (`true` is one).
    pub(super) fn is_empty(&self) -> bool {
        matches!(self, Kind::True | Kind::Empty)
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
    "dependentRequired",
    "dependentSchemas",
    "propertyNames",
];
const ARRAY_KEYWORDS: &[&str] = &[
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
];

/// Follows `$ref`s from `v` (in `doc` of `json`): the schema and its
/// document, or None if a reference does not resolve or the chain is too long.
pub(super) fn deref<'a>(
    mut v: &'a Value,
    mut doc: &'a Value,
    json: &'a Json,
) -> Option<(&'a Value, &'a Value)> {
    for _ in 0..REF_HOPS_MAX {
        match v.as_object().and_then(|m| m.get("$ref")) {
            Some(Value::String(r)) => (v, doc) = resolve(r, doc, json)?,
            _ => return Some((v, doc)),
        }
    }
    None
}

/// Reads `v` (inside `doc` of `json`) one level into everit's model; None
/// if it is a `$ref` that does not resolve.
pub(super) fn build<'a>(v: &'a Value, doc: &'a Value, json: &'a Json) -> Option<Node<'a>> {
    let (v, doc) = deref(v, doc, json)?;
    let addr = v as *const Value as usize;
    let node = |tag: u32, map, kind| Node {
        key: (addr, tag),
        map,
        doc,
        json,
        kind,
    };
    let m = match v {
        Value::Bool(true) => return Some(node(0, None, Kind::True)),
        Value::Bool(false) => return Some(node(0, None, Kind::False)),
        Value::Object(m) => m,
        _ => return Some(node(0, None, Kind::Empty)),
    };
    let typed = |t: &str, tag: u32| -> Option<Node<'a>> {
        let kind = match t {
            "string" => Kind::Str,
            "integer" => Kind::Num { integer: true },
            "number" => Kind::Num { integer: false },
            "boolean" => Kind::Bool,
            "null" => Kind::Null,
            "object" => Kind::Obj,
            "array" => Kind::Arr,
            _ => return None,
        };
        Some(node(tag, Some(m), kind))
    };
    let mut parts = Vec::new();
    match m.get("type") {
        Some(Value::String(t)) => parts.extend(typed(t, 1)),
        Some(Value::Array(ts)) => {
            let mut kinds: Vec<Node<'a>> = ts
                .iter()
                .zip(16u32..)
                .filter_map(|(t, tag)| t.as_str().and_then(|t| typed(t, tag)))
                .collect();
            if kinds.len() == 1 {
                parts.append(&mut kinds);
            } else if !kinds.is_empty() {
                let subs = kinds.into_iter().map(Part::Built).collect();
                parts.push(node(2, Some(m), Kind::Combined(Criterion::Any, subs)));
            }
        }
        _ => {
            let has = |kws: &[&str]| kws.iter().any(|k| m.contains_key(*k));
            if has(OBJECT_KEYWORDS) {
                parts.push(node(3, Some(m), Kind::Obj));
            }
            if has(ARRAY_KEYWORDS) {
                parts.push(node(4, Some(m), Kind::Arr));
            }
            if has(STRING_KEYWORDS) {
                parts.push(node(5, Some(m), Kind::Str));
            }
            if has(NUMBER_KEYWORDS) {
                parts.push(node(6, Some(m), Kind::Num { integer: false }));
            }
        }
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        parts.push(node(7, Some(m), Kind::Enum(values)));
    }
    if let Some(c) = m.get("const") {
        parts.push(node(8, Some(m), Kind::Const(c)));
    }
    if let Some(n) = m.get("not") {
        parts.push(node(9, Some(m), Kind::Not(n)));
    }
    for (kw, c, tag) in [
        ("allOf", Criterion::All, 10),
        ("anyOf", Criterion::Any, 11),
        ("oneOf", Criterion::One, 12),
    ] {
        if let Some(Value::Array(subs)) = m.get(kw) {
            let subs = subs.iter().map(Part::Raw).collect();
            parts.push(node(tag, Some(m), Kind::Combined(c, subs)));
        }
    }
    Some(match parts.len() {
        0 => node(0, Some(m), Kind::Empty),
        1 => parts.pop()?,
        _ => node(
            0,
            Some(m),
            Kind::Combined(Criterion::All, parts.into_iter().map(Part::Built).collect()),
        ),
    })
}

/// Resolves a `$ref`: a pointer into `doc` (`#/definitions/x`), or a
/// referenced schema's name with an optional pointer (`other.json#/x`).
pub(super) fn resolve<'a>(
    r: &str,
    doc: &'a Value,
    json: &'a Json,
) -> Option<(&'a Value, &'a Value)> {
    let (base, fragment) = r.split_once('#').unwrap_or((r, ""));
    let target_doc = if base.is_empty() {
        doc
    } else {
        json.referenced.get(base).or_else(|| {
            json.referenced
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

/// What one diff may still spend, across its rounds.
#[derive(Debug, Default)]
struct Budget {
    steps: usize,
    diff_bytes: usize,
    exhausted: bool,
}

pub(super) struct Ctx<'a, 's> {
    /// The path below the pair being compared (relative, as memoised).
    path: Vec<String>,
    diffs: Vec<Difference>,
    memo: HashMap<PairKey, Rc<Vec<Difference>>>,
    in_progress: HashSet<PairKey>,
    /// Which subschemas of each combination are kept (not duplicates).
    dedup_cache: HashMap<NodeKey, Vec<usize>>,
    /// Pairs an earlier round found incompatible.
    seed: &'s HashMap<PairKey, Rc<Vec<Difference>>>,
    /// A recursive pair was taken as compatible in this round.
    optimistic: bool,
    depth: usize,
    budget: &'s mut Budget,
    #[allow(dead_code)]
    _marker: std::marker::PhantomData<&'a ()>,
}

pub(super) fn num(m: &Map<String, Value>, k: &str) -> Option<f64> {
    m.get(k).and_then(Value::as_f64)
}

impl<'a, 's> Ctx<'a, 's> {
    fn rel_path(&self) -> String {
        self.path.join("/")
    }

    fn push_diff(&mut self, kind: &'static str, path: String) {
        self.budget.diff_bytes += path.len() + 32;
        if self.budget.diff_bytes > DIFF_BYTES_MAX {
            self.budget.exhausted = true;
            return;
        }
        self.diffs.push(Difference { kind, path });
    }

    pub(super) fn add(&mut self, kind: &'static str) {
        let p = self.rel_path();
        self.push_diff(kind, p);
    }

    pub(super) fn add_at(&mut self, attr: &str, kind: &'static str) {
        self.path.push(attr.to_string());
        self.add(kind);
        self.path.pop();
    }

    /// Appends differences (already relative to the current path).
    pub(super) fn extend(&mut self, diffs: Vec<Difference>) {
        for d in diffs {
            self.push_diff(d.kind, d.path);
        }
    }

    /// Runs `f` with `seg` on the path.
    pub(super) fn at(&mut self, seg: &str, f: impl FnOnce(&mut Self)) {
        self.path.push(seg.to_string());
        f(self);
        self.path.pop();
    }

    /// Spends one step of the budget; false once it is spent.
    pub(super) fn spend(&mut self) -> bool {
        self.budget.steps += 1;
        if self.budget.steps > STEPS_MAX {
            self.budget.exhausted = true;
        }
        !self.budget.exhausted
    }

    pub(super) fn exhausted(&self) -> bool {
        self.budget.exhausted
    }

    /// Compares in a sub-context: its differences and whether all are compatible.
    pub(super) fn sub(&mut self, f: impl FnOnce(&mut Self)) -> (Vec<Difference>, bool) {
        let saved = std::mem::take(&mut self.diffs);
        f(self);
        let got = std::mem::replace(&mut self.diffs, saved);
        let ok = got.iter().all(|d| compatible(d.kind));
        (got, ok)
    }

    /// Compares two raw values (each in its document and schema).
    pub(super) fn compare_values(
        &mut self,
        o: Option<(&'a Value, &'a Value, &'a Json)>,
        u: Option<(&'a Value, &'a Value, &'a Json)>,
    ) {
        let on = o.map(|(v, d, j)| build(v, d, j));
        let un = u.map(|(v, d, j)| build(v, d, j));
        match (on, un) {
            // A $ref that does not resolve (the parser refuses those; a
            // chain too long or a cycle of bare $refs ends here): not
            // comparable, so not shown compatible.
            (Some(None), _) | (_, Some(None)) => self.budget.exhausted = true,
            (o, u) => self.compare(o.flatten().as_ref(), u.flatten().as_ref()),
        }
    }

    pub(super) fn compare(&mut self, o: Option<&Node<'a>>, u: Option<&Node<'a>>) {
        if self.budget.exhausted {
            return;
        }
        let (o, u) = match (o, u) {
            (None, None) => return,
            (None, Some(_)) => return self.add("SCHEMA_ADDED"),
            (Some(_), None) => return self.add("SCHEMA_REMOVED"),
            (Some(o), Some(u)) => (o, u),
        };
        self.budget.steps += 1;
        if self.budget.steps > STEPS_MAX {
            self.budget.exhausted = true;
            return;
        }
        let key = (o.key, u.key);
        let found = if let Some(d) = self.memo.get(&key) {
            Some(d.clone())
        } else if self.in_progress.contains(&key) {
            Some(match self.seed.get(&key) {
                Some(d) => d.clone(),
                None => {
                    self.optimistic = true;
                    Rc::new(Vec::new())
                }
            })
        } else {
            None
        };
        let relative = match found {
            Some(d) => d,
            None => {
                if self.depth >= DEPTH_MAX {
                    self.budget.exhausted = true;
                    return;
                }
                self.in_progress.insert(key);
                let saved_path = std::mem::take(&mut self.path);
                let saved_diffs = std::mem::take(&mut self.diffs);
                self.depth += 1;
                self.compare_types(o, u);
                self.depth -= 1;
                self.path = saved_path;
                let got = Rc::new(std::mem::replace(&mut self.diffs, saved_diffs));
                self.in_progress.remove(&key);
                self.memo.insert(key, got.clone());
                got
            }
        };
        let prefix = self.rel_path();
        for d in relative.iter() {
            let path = match (prefix.is_empty(), d.path.is_empty()) {
                (true, _) => d.path.clone(),
                (false, true) => prefix.clone(),
                (false, false) => format!("{prefix}/{}", d.path),
            };
            self.push_diff(d.kind, path);
        }
    }

    /// A part of a combination, read if need be, in `of`'s document.
    /// The subschemas of a combination without duplicates (Confluent keeps
    /// them in a set), found by their JSON text: each combination's once
    /// per round, its bytes counted against the budget.
    fn dedup<'p>(&mut self, key: NodeKey, parts: &'p [Part<'a>]) -> Vec<&'p Part<'a>> {
        let keep = match self.dedup_cache.get(&key) {
            Some(keep) => keep.clone(),
            None => {
                let mut seen = HashSet::new();
                let mut keep = Vec::with_capacity(parts.len());
                for (i, p) in parts.iter().enumerate() {
                    match p {
                        Part::Raw(v) => {
                            let text = v.to_string();
                            self.budget.steps += text.len() / DEDUP_BYTES_PER_STEP;
                            if !self.spend() {
                                break;
                            }
                            if seen.insert(text) {
                                keep.push(i);
                            }
                        }
                        Part::Built(_) => keep.push(i),
                    }
                }
                self.dedup_cache.insert(key, keep.clone());
                keep
            }
        };
        keep.iter().filter_map(|i| parts.get(*i)).collect()
    }

    /// (None, and the diff given up, if it is a `$ref` that cannot be followed.)
    fn part(&mut self, p: &Part<'a>, of: &Node<'a>) -> Option<Node<'a>> {
        let n = match p {
            Part::Built(n) => Some(n.clone()),
            Part::Raw(v) => build(v, of.doc, of.json),
        };
        if n.is_none() {
            self.budget.exhausted = true;
        }
        n
    }

    fn compare_types(&mut self, o: &Node<'a>, u: &Node<'a>) {
        match (&o.kind, &u.kind) {
            (ok, Kind::Combined(c, subs)) if !matches!(ok, Kind::Combined(..)) => {
                if subs.len() == 1 {
                    let sub = subs.first().and_then(|p| self.part(p, u));
                    let (d, ok) = self.sub(|s| s.compare(Some(o), sub.as_ref()));
                    if ok {
                        return self.extend(d);
                    }
                } else if *c != Criterion::All {
                    for p in subs {
                        let sub = self.part(p, u);
                        let (d, ok) = self.sub(|s| s.compare(Some(o), sub.as_ref()));
                        if ok {
                            self.extend(d);
                            return self.add("SUM_TYPE_EXTENDED");
                        }
                    }
                }
            }
            (Kind::Combined(c, subs), uk) if !matches!(uk, Kind::Combined(..)) => {
                if subs.len() == 1 {
                    let sub = subs.first().and_then(|p| self.part(p, o));
                    let (d, ok) = self.sub(|s| s.compare(sub.as_ref(), Some(u)));
                    if ok {
                        return self.extend(d);
                    }
                } else if *c == Criterion::All {
                    for p in subs {
                        let sub = self.part(p, o);
                        let (d, ok) = self.sub(|s| s.compare(sub.as_ref(), Some(u)));
                        if ok {
                            self.extend(d);
                            return self.add("PRODUCT_TYPE_NARROWED");
                        }
                    }
                }
            }
            _ => {}
        }
        if o.kind.class() != u.kind.class() {
            if matches!(o.kind, Kind::False) || u.kind.is_empty() {
                return;
            }
            let connect =
                |n: &Node| n.map.and_then(|m| m.get("connect.type")) == Some(&Value::from("bytes"));
            if connect(o) && connect(u) {
                return;
            }
            return self.add("TYPE_CHANGED");
        }
        if let (Some(om), Some(um)) = (o.map, u.map) {
            let id = |m: &'a Map<String, Value>| m.get("$id").or_else(|| m.get("id"));
            for (a, b, kind) in [
                (id(om), id(um), "ID_CHANGED"),
                (om.get("title"), um.get("title"), "TITLE_CHANGED"),
                (
                    om.get("description"),
                    um.get("description"),
                    "DESCRIPTION_CHANGED",
                ),
                (om.get("default"), um.get("default"), "DEFAULT_CHANGED"),
            ] {
                if a != b {
                    self.add(kind);
                }
            }
        }
        match (&o.kind, &u.kind) {
            (Kind::Str, Kind::Str) => {
                if let (Some(om), Some(um)) = (o.map, u.map) {
                    self.compare_string(om, um)
                }
            }
            (Kind::Num { integer: oi }, Kind::Num { integer: ui }) => {
                if let (Some(om), Some(um)) = (o.map, u.map) {
                    self.compare_number(om, um);
                }
                if oi != ui {
                    self.add(if *oi {
                        "TYPE_EXTENDED"
                    } else {
                        "TYPE_NARROWED"
                    });
                }
            }
            (Kind::Enum(ov), Kind::Enum(uv)) => {
                // As sets of their JSON texts: enums may be long.
                let set =
                    |vs: &[Value]| -> HashSet<String> { vs.iter().map(Value::to_string).collect() };
                let (os, us) = (set(ov), set(uv));
                let contains_all = |a: &HashSet<String>, b: &HashSet<String>| b.is_subset(a);
                let (ov, uv) = (&os, &us);
                let same = contains_all(ov, uv) && contains_all(uv, ov);
                if !same {
                    let kind = if contains_all(uv, ov) {
                        "ENUM_ARRAY_EXTENDED"
                    } else if contains_all(ov, uv) {
                        "ENUM_ARRAY_NARROWED"
                    } else {
                        "ENUM_ARRAY_CHANGED"
                    };
                    self.add_at("enum", kind);
                }
            }
            (Kind::Const(ov), Kind::Const(uv)) if ov != uv => {
                self.add_at("const", "ENUM_ARRAY_CHANGED");
            }
            (Kind::Not(ov), Kind::Not(uv)) => {
                let (ov, uv) = (*ov, *uv);
                self.at("not", |s| {
                    // The wrapped schemas compare the other way round.
                    let (_, ok) = s.sub(|s| {
                        s.compare_values(Some((uv, u.doc, u.json)), Some((ov, o.doc, o.json)))
                    });
                    s.add(if ok {
                        "NOT_TYPE_NARROWED"
                    } else {
                        "NOT_TYPE_EXTENDED"
                    });
                });
            }
            (Kind::Combined(oc, os), Kind::Combined(uc, us)) => {
                self.compare_combined(o, *oc, os, u, *uc, us)
            }
            (Kind::Obj, Kind::Obj) => self.compare_object(o, u),
            (Kind::Arr, Kind::Arr) => self.compare_array(o, u),
            _ => {}
        }
    }

    /// Compares an optional numeric keyword.
    pub(super) fn compare_bound(
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
        for (attr, name) in [("maxLength", "MAX_LENGTH"), ("minLength", "MIN_LENGTH")] {
            self.compare_bound(attr, num(o, attr), num(u, attr), bound_kinds(name));
        }
        match (o.get("pattern"), u.get("pattern")) {
            (None, Some(_)) => self.add_at("pattern", "PATTERN_ADDED"),
            (Some(_), None) => self.add_at("pattern", "PATTERN_REMOVED"),
            (Some(a), Some(b)) if a != b => self.add_at("pattern", "PATTERN_CHANGED"),
            _ => {}
        }
    }

    fn compare_number(&mut self, o: &Map<String, Value>, u: &Map<String, Value>) {
        for (attr, name) in [
            ("maximum", "MAXIMUM"),
            ("minimum", "MINIMUM"),
            ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"),
            ("exclusiveMinimum", "EXCLUSIVE_MINIMUM"),
        ] {
            self.compare_bound(attr, num(o, attr), num(u, attr), bound_kinds(name));
        }
        match (num(o, "multipleOf"), num(u, "multipleOf")) {
            (None, Some(_)) => self.add_at("multipleOf", "MULTIPLE_OF_ADDED"),
            (Some(_), None) => self.add_at("multipleOf", "MULTIPLE_OF_REMOVED"),
            (Some(a), Some(b)) if a != b => {
                let divides = |x: f64, y: f64| {
                    y != 0.0 && {
                        let q = x / y;
                        q.is_finite() && (q - q.round()).abs() < 1e-9
                    }
                };
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

    fn compare_combined(
        &mut self,
        on: &Node<'a>,
        oc: Criterion,
        os: &[Part<'a>],
        un: &Node<'a>,
        uc: Criterion,
        us: &[Part<'a>],
    ) {
        let os = self.dedup(on.key, os);
        let us = self.dedup(un.key, us);
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
        let unodes: Vec<Option<Node<'a>>> = us.iter().map(|p| self.part(p, un)).collect();
        // Which (original, update) pairs are compatible, with their differences.
        let mut edges: Vec<Vec<Option<Vec<Difference>>>> = Vec::with_capacity(os.len());
        for (i, p) in os.iter().enumerate() {
            if self.exhausted() {
                return;
            }
            let onode = self.part(p, on);
            let mut row = Vec::with_capacity(unodes.len());
            self.path.push(format!("{}/{i}", oc.word()));
            for unode in &unodes {
                let (d, ok) = self.sub(|s| s.compare(onode.as_ref(), unode.as_ref()));
                row.push(ok.then_some(d));
            }
            self.path.pop();
            edges.push(row);
        }
        // A maximum matching of originals to updates (augmenting paths).
        let mut owner: Vec<Option<usize>> = vec![None; unodes.len()];
        for i in 0..os.len() {
            let mut seen = vec![false; unodes.len()];
            augment(i, &edges, &mut owner, &mut seen);
        }
        let matched = owner.iter().flatten().count();
        for (j, o) in owner.iter().enumerate() {
            if let Some(i) = o {
                if let Some(Some(d)) = edges.get(*i).and_then(|r| r.get(j)) {
                    self.extend(d.clone());
                }
            }
        }
        if matched < os.len().min(us.len()) {
            self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED");
        }
    }
}

/// Kuhn's augmenting path from original `i`. Its recursion is at most as
/// deep as the smaller side, which the step budget keeps small.
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
        if e.is_none() || seen.get(j).copied().unwrap_or(true) {
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
