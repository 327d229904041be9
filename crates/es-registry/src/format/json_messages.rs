//! Confluent's sentences for JSON Schema differences (its `Difference`
//! messages): each type belongs to one family of sentence, with the
//! difference's path and the two schemas' names ("new", "old") in the
//! order Confluent's validator formats them. Confluent closes the
//! description with `'}` instead of `"}`; es writes the same bytes, since
//! clients may show or compare them.

/// Keywords present in one schema only.
const KEYWORD_ADDED_OR_REMOVED: &[&str] = &[
    "MAXIMUM_ADDED",
    "MINIMUM_ADDED",
    "EXCLUSIVE_MAXIMUM_ADDED",
    "EXCLUSIVE_MINIMUM_ADDED",
    "MULTIPLE_OF_ADDED",
    "MAX_LENGTH_ADDED",
    "MIN_LENGTH_ADDED",
    "PATTERN_ADDED",
    "REQUIRED_ATTRIBUTE_ADDED",
    "MAX_PROPERTIES_ADDED",
    "MIN_PROPERTIES_ADDED",
    "DEPENDENCY_ARRAY_ADDED",
    "DEPENDENCY_SCHEMA_ADDED",
    "MAX_ITEMS_ADDED",
    "MIN_ITEMS_ADDED",
    "MAX_CONTAINS_ADDED",
    "MIN_CONTAINS_ADDED",
    "UNIQUE_ITEMS_ADDED",
    "ADDITIONAL_ITEMS_REMOVED",
    "ADDITIONAL_PROPERTIES_REMOVED",
    "UNEVALUATED_PROPERTIES_REMOVED",
    "UNEVALUATED_ITEMS_REMOVED",
];
const VALUE_INCREASED: &[&str] = &[
    "MIN_LENGTH_INCREASED",
    "MINIMUM_INCREASED",
    "EXCLUSIVE_MINIMUM_INCREASED",
    "MIN_PROPERTIES_INCREASED",
    "MULTIPLE_OF_EXPANDED",
    "MIN_ITEMS_INCREASED",
    "MIN_CONTAINS_INCREASED",
];
const VALUE_DECREASED: &[&str] = &[
    "MAX_LENGTH_DECREASED",
    "MAXIMUM_DECREASED",
    "MAX_ITEMS_DECREASED",
    "MAX_CONTAINS_DECREASED",
    "EXCLUSIVE_MAXIMUM_DECREASED",
    "MAX_PROPERTIES_DECREASED",
];
const VALUE_CHANGED: &[&str] = &[
    "PATTERN_CHANGED",
    "MULTIPLE_OF_CHANGED",
    "DEPENDENCY_ARRAY_CHANGED",
];
const TYPE_NARROWED: &[&str] = &[
    "ADDITIONAL_ITEMS_NARROWED",
    "ENUM_ARRAY_NARROWED",
    "SUM_TYPE_NARROWED",
    "ADDITIONAL_PROPERTIES_NARROWED",
    "UNEVALUATED_PROPERTIES_NARROWED",
    "UNEVALUATED_ITEMS_NARROWED",
];
const TYPE_EXTENDED: &[&str] = &[
    "DEPENDENCY_ARRAY_EXTENDED",
    "PRODUCT_TYPE_EXTENDED",
    "SUM_TYPE_EXTENDED",
    "NOT_TYPE_EXTENDED",
];
const TYPE_CHANGED: &[&str] = &[
    "TYPE_CHANGED",
    "TYPE_NARROWED",
    "COMBINED_TYPE_CHANGED",
    "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
    "ENUM_ARRAY_CHANGED",
];
const ADDED_TO_OPEN: &[&str] = &[
    "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
];

/// Confluent's message for a difference of type `k` at `path` (with its
/// `#/`); `first` and `second` name the schemas as Confluent's validator
/// does (the diff's update, then its original).
pub fn describe(k: &str, path: &str, first: &str, second: &str) -> String {
    let p = path;
    let is = |set: &[&str]| set.contains(&k);
    let d = if is(KEYWORD_ADDED_OR_REMOVED) {
        format!(
            "The keyword at path '{p}' in the {first} schema is not present in the {second} schema"
        )
    } else if is(VALUE_INCREASED) {
        format!("The value at path '{p}' in the {first} schema is more than its value in the {second} schema")
    } else if is(VALUE_DECREASED) {
        format!("The value at path '{p}' in the {first} schema is less than its value in the {second} schema")
    } else if is(VALUE_CHANGED) {
        format!("The value at path '{p}' is different between the {first} and {second} schema")
    } else if is(TYPE_NARROWED) {
        format!("An array or combined type at path '{p}' has fewer elements in the {first} schema than the {second} schema")
    } else if is(TYPE_EXTENDED) {
        format!("An array or combined type at path '{p}' has more elements in the {first} schema than the {second} schema")
    } else if is(TYPE_CHANGED) {
        format!(
            "A type at path '{p}' is different between the {first} schema and the {second} schema"
        )
    } else if is(ADDED_TO_OPEN) {
        format!("The {first} schema has an open content model and has a property or item at path '{p}' which is missing in the {second} schema")
    } else if k == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL" {
        format!("The {first} schema has an unopen content model and has a required property at path '{p}' which is missing in the {second} schema")
    } else if k == "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"
        || k == "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"
    {
        format!("The {first} has a closed content model and is missing a property or item present at path '{p}' in the {second} schema")
    } else if k == "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
        || k == "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
    {
        format!("A property or item is missing in the {first} schema but present at path '{p}' in the {second} schema and is not covered by its partially open content model")
    } else if k == "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
        || k == "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
    {
        format!("The {first} schema has a property or item at path '{p}' which is missing in the {second} schema and is not covered by its partially open content model")
    } else if k == "COMPARISON_TOO_COMPLEX" {
        // es's own: the diff's limits were reached (docs/schema-registry.md).
        format!("The {first} and {second} schema could not be compared within this registry's limits (nesting, size or recursion)")
    } else {
        String::new()
    };
    format!("{{errorType:\"{k}\", description:\"{d}'}}")
}
