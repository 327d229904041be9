//! The object and array halves of the JSON Schema diff
//! ([`super::json_compat`]), as Confluent's `ObjectSchemaDiff` and
//! `ArraySchemaDiff` decide them: required properties, properties added to
//! or removed from open, closed and partially open content models
//! (`additionalProperties`, `patternProperties`, `unevaluatedProperties`),
//! dependencies and property counts; for arrays the schema of every item,
//! tuples (`items` as a list or `prefixItems`) against open and closed
//! models (`additionalItems`, `unevaluatedItems`), and item counts.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::json_compat::{build, deref, num, Ctx, Json, Node};

/// Largest compiled `patternProperties` regular expression.
const PATTERN_BYTES_MAX: usize = 1 << 20;

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

type At<'a> = (&'a Value, &'a Value, &'a Json);

fn properties(m: &Map<String, Value>) -> &Map<String, Value> {
    m.get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&EMPTY)
}

/// The names `required` lists (a set: objects may list many).
fn required(m: &Map<String, Value>) -> HashSet<&str> {
    m.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The schema at `v` (after its `$ref`s) has a default value.
fn has_default(v: &Value, doc: &Value, json: &Json) -> bool {
    deref(v, doc, json)
        .and_then(|(v, _)| v.as_object())
        .is_some_and(|m| m.contains_key("default"))
}

/// everit's `instanceof EmptySchema` for the schema at `v`.
fn is_empty_schema(v: &Value, doc: &Value, json: &Json) -> bool {
    build(v, doc, json).is_some_and(|n| n.kind.is_empty())
}

fn is_false(v: &Value, doc: &Value, json: &Json) -> bool {
    deref(v, doc, json).is_some_and(|(v, _)| *v == Value::Bool(false))
}

/// A keyword that holds a schema other than `true`/`false` when it is an object.
fn schema_of<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    m.get(k).filter(|v| v.is_object())
}

/// A keyword that holds a schema (`true` and `false` included).
fn any_schema<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    m.get(k).filter(|v| v.is_object() || v.is_boolean())
}

fn permits_additional(m: &Map<String, Value>) -> bool {
    m.get("additionalProperties") != Some(&Value::Bool(false))
}

/// Any property may appear with any value.
fn open_object(n: &Node) -> bool {
    let Some(m) = n.map else { return true };
    permits_additional(m)
        && schema_of(m, "additionalProperties").is_none()
        && m.get("patternProperties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.is_empty())
        && any_schema(m, "unevaluatedProperties").is_none_or(|v| is_empty_schema(v, n.doc, n.json))
}

/// The schema a partially open content model gives property `k`.
fn object_partial<'a>(ctx: &mut Ctx, n: &Node<'a>, k: &str) -> Option<&'a Value> {
    let m = n.map?;
    if let Some(pp) = m.get("patternProperties").and_then(Value::as_object) {
        for (pattern, s) in pp {
            // Each pattern compiled is a step of the diff's budget.
            if !ctx.spend() {
                return None;
            }
            let re = regex::RegexBuilder::new(pattern)
                .size_limit(PATTERN_BYTES_MAX)
                .build();
            if re.is_ok_and(|re| re.is_match(k)) {
                return Some(s);
            }
        }
    }
    if let Some(s) = schema_of(m, "additionalProperties") {
        return Some(s);
    }
    if permits_additional(m) {
        if let Some(u) = any_schema(m, "unevaluatedProperties") {
            if !is_false(u, n.doc, n.json) && !is_empty_schema(u, n.doc, n.json) {
                return Some(u);
            }
        }
    }
    None
}

/// The array keywords of draft 4-2019 and 2020-12, in one shape: the
/// schema of every item, the tuple's schemas, and what follows the tuple.
struct ArrayShape<'a> {
    all: Option<&'a Value>,
    tuple: &'a [Value],
    additional: Option<&'a Value>,
}

fn array_shape(m: &Map<String, Value>) -> ArrayShape<'_> {
    if let Some(Value::Array(prefix)) = m.get("prefixItems") {
        return ArrayShape {
            all: None,
            tuple: prefix,
            additional: m.get("items"),
        };
    }
    match m.get("items") {
        Some(Value::Array(tuple)) => ArrayShape {
            all: None,
            tuple,
            additional: m.get("additionalItems"),
        },
        items => ArrayShape {
            all: items,
            tuple: &[],
            additional: m.get("additionalItems"),
        },
    }
}

fn open_array(n: &Node) -> bool {
    let Some(m) = n.map else { return true };
    let shape = array_shape(m);
    shape.additional != Some(&Value::Bool(false))
        && shape.additional.is_none_or(|v| !v.is_object())
        && any_schema(m, "unevaluatedItems").is_none_or(|v| is_empty_schema(v, n.doc, n.json))
}

fn array_partial<'a>(n: &Node<'a>) -> Option<&'a Value> {
    let m = n.map?;
    let shape = array_shape(m);
    if let Some(s) = shape.additional.filter(|v| v.is_object()) {
        return Some(s);
    }
    if shape.additional != Some(&Value::Bool(false)) {
        if let Some(u) = any_schema(m, "unevaluatedItems") {
            if !is_false(u, n.doc, n.json) && !is_empty_schema(u, n.doc, n.json) {
                return Some(u);
            }
        }
    }
    None
}

impl<'a> Ctx<'a, '_> {
    fn compare_in(&mut self, o: At<'a>, u: At<'a>) {
        self.compare_values(Some(o), Some(u));
    }

    pub(super) fn compare_object(&mut self, o: &Node<'a>, u: &Node<'a>) {
        let (om, um) = (o.map.unwrap_or(&EMPTY), u.map.unwrap_or(&EMPTY));
        let (op, up) = (properties(om), properties(um));
        let (oreq, ureq) = (required(om), required(um));
        self.at("required", |s| {
            for k in op.keys() {
                if let Some(uv) = up.get(k) {
                    let (or, ur) = (oreq.contains(k.as_str()), ureq.contains(k.as_str()));
                    if or && !ur {
                        s.add_at(k, "REQUIRED_ATTRIBUTE_REMOVED");
                    } else if !or && ur {
                        s.add_at(
                            k,
                            if has_default(uv, u.doc, u.json) {
                                "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                            } else {
                                "REQUIRED_ATTRIBUTE_ADDED"
                            },
                        );
                    }
                }
            }
        });
        let mut keys: Vec<&String> = op.keys().chain(up.keys()).collect();
        keys.sort();
        keys.dedup();
        self.at("properties", |s| {
            for k in keys {
                if s.exhausted() {
                    return;
                }
                s.at(k, |s| s.compare_property(o, u, k, &ureq));
            }
        });
        self.compare_dependencies(o, u);
        self.at("additionalProperties", |s| {
            let (op, upm) = (permits_additional(om), permits_additional(um));
            let (os, us) = (
                schema_of(om, "additionalProperties"),
                schema_of(um, "additionalProperties"),
            );
            if op != upm {
                s.add(if upm {
                    "ADDITIONAL_PROPERTIES_ADDED"
                } else {
                    "ADDITIONAL_PROPERTIES_REMOVED"
                });
            } else {
                match (os, us) {
                    (None, Some(_)) => s.add("ADDITIONAL_PROPERTIES_NARROWED"),
                    (Some(_), None) => s.add("ADDITIONAL_PROPERTIES_EXTENDED"),
                    (Some(ov), Some(uv)) => s.compare_in((ov, o.doc, o.json), (uv, u.doc, u.json)),
                    (None, None) => {}
                }
            }
        });
        self.compare_unevaluated(o, u, "unevaluatedProperties", "UNEVALUATED_PROPERTIES");
        for (attr, name) in [
            ("maxProperties", "MAX_PROPERTIES"),
            ("minProperties", "MIN_PROPERTIES"),
        ] {
            self.compare_bound(attr, num(om, attr), num(um, attr), bound_kinds(name));
        }
    }

    fn compare_property(&mut self, o: &Node<'a>, u: &Node<'a>, k: &str, ureq: &HashSet<&str>) {
        let (om, um) = (o.map.unwrap_or(&EMPTY), u.map.unwrap_or(&EMPTY));
        match (properties(om).get(k), properties(um).get(k)) {
            (Some(ov), None) => {
                if open_object(u) {
                    self.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL");
                } else if let Some(partial) = object_partial(self, u, k) {
                    let (d, ok) =
                        self.sub(|s| s.compare_in((ov, o.doc, o.json), (partial, u.doc, u.json)));
                    self.extend(d);
                    self.add(if ok {
                        "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    } else {
                        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    });
                } else if is_false(ov, o.doc, o.json) {
                    self.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                } else {
                    self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                }
            }
            (None, Some(uv)) => {
                let default = has_default(uv, u.doc, u.json);
                if open_object(o) {
                    if is_empty_schema(uv, u.doc, u.json) {
                        self.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL");
                    } else if ureq.contains(k) {
                        self.add(if default {
                            "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                        } else {
                            "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                        });
                    } else {
                        self.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL");
                    }
                } else {
                    if let Some(partial) = object_partial(self, o, k) {
                        let (d, ok) = self
                            .sub(|s| s.compare_in((partial, o.doc, o.json), (uv, u.doc, u.json)));
                        self.extend(d);
                        self.add(if ok {
                            "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        } else {
                            "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        });
                    }
                    self.add(match (ureq.contains(k), default) {
                        (true, true) => {
                            "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                        }
                        (true, false) => "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
                        (false, _) => "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
                    });
                }
            }
            (Some(ov), Some(uv)) => self.compare_in((ov, o.doc, o.json), (uv, u.doc, u.json)),
            (None, None) => {}
        }
    }

    fn compare_dependencies(&mut self, o: &Node<'a>, u: &Node<'a>) {
        let (om, um) = (o.map.unwrap_or(&EMPTY), u.map.unwrap_or(&EMPTY));
        // (property, its dependency: a list of names or a schema)
        let deps = |m: &'a Map<String, Value>| -> Vec<(&'a String, &'a Value)> {
            ["dependencies", "dependentRequired", "dependentSchemas"]
                .iter()
                .filter_map(|k| m.get(*k).and_then(Value::as_object))
                .flat_map(|d| d.iter())
                .collect()
        };
        let (od, ud) = (deps(om), deps(um));
        // (property, is a list of names) -> the dependency
        let index = |d: &[(&'a String, &'a Value)]| -> HashMap<(&'a str, bool), &'a Value> {
            d.iter()
                .map(|(n, v)| ((n.as_str(), v.is_array()), *v))
                .collect()
        };
        let (oi, ui) = (index(&od), index(&ud));
        let find = |d: &HashMap<(&'a str, bool), &'a Value>, k: &str, array: bool| {
            d.get(&(k, array)).copied()
        };
        let mut keys: Vec<&String> = od.iter().chain(ud.iter()).map(|(k, _)| *k).collect();
        keys.sort();
        keys.dedup();
        self.at("dependencies", |s| {
            for k in keys {
                s.at(k, |s| {
                    let names = |v: &Value| -> HashSet<String> {
                        v.as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|x| x.as_str().map(String::from))
                                    .collect()
                            })
                            .unwrap_or_default()
                    };
                    match (find(&oi, k, true), find(&ui, k, true)) {
                        (Some(_), None) => s.add("DEPENDENCY_ARRAY_REMOVED"),
                        (None, Some(_)) => s.add("DEPENDENCY_ARRAY_ADDED"),
                        (Some(a), Some(b)) => {
                            let (a, b) = (names(a), names(b));
                            let all = |x: &HashSet<String>, y: &HashSet<String>| y.is_subset(x);
                            if !(all(&a, &b) && all(&b, &a)) {
                                s.add(if all(&b, &a) {
                                    "DEPENDENCY_ARRAY_EXTENDED"
                                } else if all(&a, &b) {
                                    "DEPENDENCY_ARRAY_NARROWED"
                                } else {
                                    "DEPENDENCY_ARRAY_CHANGED"
                                });
                            }
                        }
                        (None, None) => {}
                    }
                    match (find(&oi, k, false), find(&ui, k, false)) {
                        (Some(_), None) => s.add("DEPENDENCY_SCHEMA_REMOVED"),
                        (None, Some(_)) => s.add("DEPENDENCY_SCHEMA_ADDED"),
                        (Some(a), Some(b)) => s.compare_in((a, o.doc, o.json), (b, u.doc, u.json)),
                        (None, None) => {}
                    }
                });
            }
        });
    }

    /// `unevaluatedProperties` or `unevaluatedItems` (`kw`), whose kinds
    /// are named `name`_ADDED, ...
    fn compare_unevaluated(&mut self, o: &Node<'a>, u: &Node<'a>, kw: &str, name: &str) {
        let (om, um) = (o.map.unwrap_or(&EMPTY), u.map.unwrap_or(&EMPTY));
        let (ov, uv) = (any_schema(om, kw), any_schema(um, kw));
        if ov.is_none() && uv.is_none() {
            return;
        }
        let kinds: [&'static str; 4] = if name == "UNEVALUATED_PROPERTIES" {
            [
                "UNEVALUATED_PROPERTIES_ADDED",
                "UNEVALUATED_PROPERTIES_REMOVED",
                "UNEVALUATED_PROPERTIES_NARROWED",
                "UNEVALUATED_PROPERTIES_EXTENDED",
            ]
        } else {
            [
                "UNEVALUATED_ITEMS_ADDED",
                "UNEVALUATED_ITEMS_REMOVED",
                "UNEVALUATED_ITEMS_NARROWED",
                "UNEVALUATED_ITEMS_EXTENDED",
            ]
        };
        let [added, removed, narrowed, extended] = kinds;
        let f = |v: &Value, n: &Node| is_false(v, n.doc, n.json);
        let e = |v: &Value, n: &Node| is_empty_schema(v, n.doc, n.json);
        self.at(kw, |s| match (ov, uv) {
            (None, Some(b)) => s.add(if f(b, u) { removed } else { narrowed }),
            (Some(a), None) => s.add(if f(a, o) { added } else { extended }),
            (Some(a), Some(b)) => {
                if f(a, o) && !f(b, u) {
                    s.add(added)
                } else if !f(a, o) && f(b, u) {
                    s.add(removed)
                } else if e(a, o) && !e(b, u) {
                    s.add(narrowed)
                } else if !e(a, o) && e(b, u) {
                    s.add(extended)
                } else {
                    s.compare_in((a, o.doc, o.json), (b, u.doc, u.json))
                }
            }
            (None, None) => {}
        });
    }

    pub(super) fn compare_array(&mut self, o: &Node<'a>, u: &Node<'a>) {
        let (om, um) = (o.map.unwrap_or(&EMPTY), u.map.unwrap_or(&EMPTY));
        let (os, us) = (array_shape(om), array_shape(um));
        self.at("items", |s| {
            s.compare_values(
                os.all.map(|v| (v, o.doc, o.json)),
                us.all.map(|v| (v, u.doc, u.json)),
            )
        });
        let common = os.tuple.len().min(us.tuple.len());
        for i in 0..os.tuple.len().max(us.tuple.len()) {
            if self.exhausted() {
                return;
            }
            let seg = format!("items/{i}");
            match (os.tuple.get(i), us.tuple.get(i)) {
                (Some(a), Some(b)) if i < common => self.at(&seg, |s| {
                    s.compare_in((a, o.doc, o.json), (b, u.doc, u.json))
                }),
                (Some(a), _) => self.at(&seg, |s| {
                    if open_array(u) {
                        s.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL");
                    } else if let Some(p) = array_partial(u) {
                        let (d, ok) =
                            s.sub(|s| s.compare_in((a, o.doc, o.json), (p, u.doc, u.json)));
                        s.extend(d);
                        s.add(if ok {
                            "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        } else {
                            "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        });
                    } else if is_false(a, o.doc, o.json) {
                        s.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                    } else {
                        s.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                    }
                }),
                (None, Some(b)) => self.at(&seg, |s| {
                    if open_array(o) {
                        s.add(if is_empty_schema(b, u.doc, u.json) {
                            "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                        } else {
                            "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
                        });
                    } else if let Some(p) = array_partial(o) {
                        let (d, ok) =
                            s.sub(|s| s.compare_in((p, o.doc, o.json), (b, u.doc, u.json)));
                        s.extend(d);
                        s.add(if ok {
                            "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        } else {
                            "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        });
                    } else {
                        s.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL");
                    }
                }),
                (None, None) => {}
            }
        }
        self.at("additionalItems", |s| {
            let permits = |v: Option<&Value>| v != Some(&Value::Bool(false));
            let schema = |v: Option<&'a Value>| v.filter(|v| v.is_object());
            // Without a tuple, draft 2020-12's `items` is the schema of
            // every item, compared above.
            let (oa, ua) = (
                if os.all.is_some() {
                    om.get("additionalItems")
                } else {
                    os.additional
                },
                if us.all.is_some() {
                    um.get("additionalItems")
                } else {
                    us.additional
                },
            );
            if permits(oa) != permits(ua) {
                s.add(if permits(oa) {
                    "ADDITIONAL_ITEMS_REMOVED"
                } else {
                    "ADDITIONAL_ITEMS_ADDED"
                });
            } else {
                match (schema(oa), schema(ua)) {
                    (None, Some(_)) => s.add("ADDITIONAL_ITEMS_NARROWED"),
                    (Some(_), None) => s.add("ADDITIONAL_ITEMS_EXTENDED"),
                    (Some(a), Some(b)) => s.compare_in((a, o.doc, o.json), (b, u.doc, u.json)),
                    (None, None) => {}
                }
            }
        });
        self.compare_unevaluated(o, u, "unevaluatedItems", "UNEVALUATED_ITEMS");
        for (attr, name) in [
            ("maxItems", "MAX_ITEMS"),
            ("minItems", "MIN_ITEMS"),
            ("maxContains", "MAX_CONTAINS"),
            ("minContains", "MIN_CONTAINS"),
        ] {
            self.compare_bound(attr, num(om, attr), num(um, attr), bound_kinds(name));
        }
        let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(om), unique(um)) {
            (true, false) => self.add_at("uniqueItems", "UNIQUE_ITEMS_REMOVED"),
            (false, true) => self.add_at("uniqueItems", "UNIQUE_ITEMS_ADDED"),
            _ => {}
        }
    }
}

/// Confluent's four kinds for a bound named `name` (`MAX_LENGTH`, ...).
pub(super) fn bound_kinds(name: &str) -> [&'static str; 4] {
    const TABLE: &[(&str, [&str; 4])] = &[
        (
            "MAX_LENGTH",
            [
                "MAX_LENGTH_ADDED",
                "MAX_LENGTH_REMOVED",
                "MAX_LENGTH_INCREASED",
                "MAX_LENGTH_DECREASED",
            ],
        ),
        (
            "MIN_LENGTH",
            [
                "MIN_LENGTH_ADDED",
                "MIN_LENGTH_REMOVED",
                "MIN_LENGTH_INCREASED",
                "MIN_LENGTH_DECREASED",
            ],
        ),
        (
            "MAXIMUM",
            [
                "MAXIMUM_ADDED",
                "MAXIMUM_REMOVED",
                "MAXIMUM_INCREASED",
                "MAXIMUM_DECREASED",
            ],
        ),
        (
            "MINIMUM",
            [
                "MINIMUM_ADDED",
                "MINIMUM_REMOVED",
                "MINIMUM_INCREASED",
                "MINIMUM_DECREASED",
            ],
        ),
        (
            "EXCLUSIVE_MAXIMUM",
            [
                "EXCLUSIVE_MAXIMUM_ADDED",
                "EXCLUSIVE_MAXIMUM_REMOVED",
                "EXCLUSIVE_MAXIMUM_INCREASED",
                "EXCLUSIVE_MAXIMUM_DECREASED",
            ],
        ),
        (
            "EXCLUSIVE_MINIMUM",
            [
                "EXCLUSIVE_MINIMUM_ADDED",
                "EXCLUSIVE_MINIMUM_REMOVED",
                "EXCLUSIVE_MINIMUM_INCREASED",
                "EXCLUSIVE_MINIMUM_DECREASED",
            ],
        ),
        (
            "MAX_PROPERTIES",
            [
                "MAX_PROPERTIES_ADDED",
                "MAX_PROPERTIES_REMOVED",
                "MAX_PROPERTIES_INCREASED",
                "MAX_PROPERTIES_DECREASED",
            ],
        ),
        (
            "MIN_PROPERTIES",
            [
                "MIN_PROPERTIES_ADDED",
                "MIN_PROPERTIES_REMOVED",
                "MIN_PROPERTIES_INCREASED",
                "MIN_PROPERTIES_DECREASED",
            ],
        ),
        (
            "MAX_ITEMS",
            [
                "MAX_ITEMS_ADDED",
                "MAX_ITEMS_REMOVED",
                "MAX_ITEMS_INCREASED",
                "MAX_ITEMS_DECREASED",
            ],
        ),
        (
            "MIN_ITEMS",
            [
                "MIN_ITEMS_ADDED",
                "MIN_ITEMS_REMOVED",
                "MIN_ITEMS_INCREASED",
                "MIN_ITEMS_DECREASED",
            ],
        ),
        (
            "MAX_CONTAINS",
            [
                "MAX_CONTAINS_ADDED",
                "MAX_CONTAINS_REMOVED",
                "MAX_CONTAINS_INCREASED",
                "MAX_CONTAINS_DECREASED",
            ],
        ),
        (
            "MIN_CONTAINS",
            [
                "MIN_CONTAINS_ADDED",
                "MIN_CONTAINS_REMOVED",
                "MIN_CONTAINS_INCREASED",
                "MIN_CONTAINS_DECREASED",
            ],
        ),
    ];
    TABLE
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(["", "", "", ""], |(_, k)| *k)
}
