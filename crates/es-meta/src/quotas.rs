//! Client quotas as the metadata holds them (Kafka's ClientQuotaRecord,
//! ClientQuotaControlManager and ClientQuotasImage): an entity (a user, a
//! client id, both, or an IP, each named or the default) and its quota
//! values by key.
//!
//! What an AlterClientQuotas may set is checked by [`validate_alteration`]
//! with Kafka's rules and messages, by the broker that received it (so that
//! `validate_only` answers without the log) and again where the entry is
//! applied, so that the image never holds what Kafka would refuse. Which
//! entities a DescribeClientQuotas filter selects is [`Filter::matches`],
//! Kafka's `ClientQuotasImage.describe`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Kafka's entity type of a user principal's name.
pub const USER: &str = "user";
/// Kafka's entity type of a client id.
pub const CLIENT_ID: &str = "client-id";
/// Kafka's entity type of a client address (connection quotas only).
pub const IP: &str = "ip";

/// Quota keys for user and client-id entities, with whether the value
/// must be integral (Kafka's `QuotaConfig.userAndClientQuotaConfigs`: the
/// byte rates are LONG, the others DOUBLE).
pub const USER_AND_CLIENT_KEYS: &[(&str, Integral)] = &[
    ("producer_byte_rate", Integral::Long),
    ("consumer_byte_rate", Integral::Long),
    ("request_percentage", Integral::No),
    ("controller_mutation_rate", Integral::No),
];
/// Quota keys for IP entities (`QuotaConfig.ipConfigs`).
pub const IP_KEYS: &[(&str, Integral)] = &[("connection_creation_rate", Integral::Int)];

/// Most entities the metadata keeps (Kafka has no bound; a bound keeps a
/// client from growing every node's image without limit).
pub const ENTITIES_MAX: usize = 100_000;

/// Most quota records one AlterClientQuotas may write (Kafka's
/// `MAX_RECORDS_PER_USER_OP`): a request that would change more values is
/// refused whole with POLICY_VIOLATION.
pub const RECORDS_PER_REQUEST_MAX: usize = 10_000;

/// A quota key's value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Integral {
    /// DOUBLE: any positive value.
    No,
    /// INT: a whole number up to `i32::MAX`.
    Int,
    /// LONG: a whole number up to `i64::MAX`.
    Long,
}

/// An entity: each of its types (`user`, `client-id`, `ip`) with a name,
/// `None` for the default entity of that type.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaEntity(pub BTreeMap<String, Option<String>>);

impl QuotaEntity {
    /// The entity of these (type, name) pairs.
    pub fn of(parts: &[(&str, Option<&str>)]) -> Self {
        QuotaEntity(
            parts
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect(),
        )
    }

    /// The name given for `entity_type`: `None` when the entity has no such
    /// part, `Some(None)` for the default.
    pub fn part(&self, entity_type: &str) -> Option<Option<&str>> {
        self.0.get(entity_type).map(Option::as_deref)
    }
}

/// A quota value. Kafka's are doubles; equality is by bits, so that the
/// image can be compared whole.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// One key of an alteration: set to a value, or removed (`None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaOp {
    pub key: String,
    pub value: Option<QuotaValue>,
}

/// One entity's changes of an AlterClientQuotas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub ops: Vec<QuotaOp>,
}

/// Every entity's quota values; an entity without values is not kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<QuotaEntry>", into = "Vec<QuotaEntry>")]
pub struct ClientQuotas(pub BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>);

/// How [`ClientQuotas`] is written: a list, since an entity is no JSON key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaEntry {
    pub entity: QuotaEntity,
    pub values: BTreeMap<String, QuotaValue>,
}

impl From<Vec<QuotaEntry>> for ClientQuotas {
    fn from(v: Vec<QuotaEntry>) -> Self {
        ClientQuotas(v.into_iter().map(|e| (e.entity, e.values)).collect())
    }
}

impl From<ClientQuotas> for Vec<QuotaEntry> {
    fn from(q: ClientQuotas) -> Self {
        q.0.into_iter()
            .map(|(entity, values)| QuotaEntry { entity, values })
            .collect()
    }
}

impl ClientQuotas {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many of `a`'s changes would change something (Kafka writes a
    /// record only for a value that differs, and a removal of a key that
    /// is there).
    pub fn changes(&self, a: &QuotaAlteration) -> usize {
        let current = self.0.get(&a.entity);
        a.ops
            .iter()
            .filter(|op| {
                let have = current.and_then(|c| c.get(&op.key));
                match op.value {
                    Some(v) => have != Some(&v),
                    None => have.is_some(),
                }
            })
            .count()
    }

    /// Applies one validated alteration; whether anything changed.
    pub fn apply(&mut self, a: &QuotaAlteration) -> bool {
        let mut changed = false;
        let values = self.0.entry(a.entity.clone()).or_default();
        for op in &a.ops {
            changed |= match op.value {
                Some(v) => values.insert(op.key.clone(), v) != Some(v),
                None => values.remove(&op.key).is_some(),
            };
        }
        if values.is_empty() {
            self.0.remove(&a.entity);
        }
        changed
    }
}

/// Kafka's `ClientQuotaEntity.toString` of an entity as the request gave it
/// (Java's `HashMap` order of the types, see [`java_map_order`]):
/// `ClientQuotaEntity(entries={user=alice, client-id=null})`.
pub fn entity_text(entity: &QuotaEntity) -> String {
    let parts: Vec<String> = java_map_order(entity)
        .into_iter()
        .map(|(t, n)| format!("{t}={}", n.unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", parts.join(", "))
}

/// The entity's (type, name) pairs in the order a Java `HashMap` built the
/// way Kafka builds it (`new HashMap<>(n)`, then one put per part) iterates
/// them: by bucket of the spread String hash, which is how Kafka lists an
/// entity's parts in its answers.
pub fn java_map_order(entity: &QuotaEntity) -> Vec<(&str, Option<&str>)> {
    let n = entity.0.len();
    // HashMap(n): the table is tableSizeFor(n) (at least 1), doubled while
    // the entries exceed three quarters of it.
    let mut table = n.max(1).next_power_of_two();
    while n * 4 > table * 3 {
        table *= 2;
    }
    let bucket = |t: &str| {
        let h = t
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
        let spread = h ^ ((h as u32) >> 16) as i32;
        (spread as u32 as usize) & (table - 1)
    };
    let mut parts: Vec<(&str, Option<&str>)> = entity
        .0
        .iter()
        .map(|(t, n)| (t.as_str(), n.as_deref()))
        .collect();
    // Within a bucket Java keeps insertion order; the types differ in
    // bucket for every combination Kafka accepts, so a stable sort suffices.
    parts.sort_by_key(|(t, _)| bucket(t));
    parts
}

/// A refusal: Kafka's error code and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaError {
    pub code: i16,
    pub message: String,
}

fn invalid(message: impl Into<String>) -> QuotaError {
    QuotaError {
        code: crate::records::code::INVALID_REQUEST,
        message: message.into(),
    }
}

/// Kafka's `ClientQuotaControlManager.validateEntity` and
/// `configKeysForEntityType`: the keys the entity may have.
pub fn entity_keys(
    entity: &QuotaEntity,
) -> Result<&'static [(&'static str, Integral)], QuotaError> {
    if entity.0.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    // Kafka walks a HashMap; a part it refuses is reported in that order.
    for (t, n) in java_map_order(entity) {
        if t != USER && t != CLIENT_ID && t != IP {
            return Err(invalid(format!("Unhandled client quota entity type: {t}")));
        }
        if n == Some("") {
            return Err(invalid(format!("Empty {t} not supported")));
        }
    }
    let has = |t: &str| entity.0.contains_key(t);
    if has(IP) {
        if has(USER) || has(CLIENT_ID) {
            // Kafka's message, its missing space included.
            return Err(invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            ));
        }
        if let Some(Some(ip)) = entity.part(IP) {
            if !valid_ip_entity(ip) {
                return Err(invalid(format!(
                    "{ip} is not a valid IP or resolvable host."
                )));
            }
        }
        return Ok(IP_KEYS);
    }
    Ok(USER_AND_CLIENT_KEYS)
}

/// Kafka accepts an IP entity `InetAddress.getByName` resolves; es resolves
/// no names (an entity of the controller must not depend on DNS), so it
/// takes IP literals only.
fn valid_ip_entity(ip: &str) -> bool {
    ip.parse::<std::net::IpAddr>().is_ok()
        || ip
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .is_some_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

/// Kafka's `validateQuotaKeyValue`: a value for `key` among `keys`.
pub fn validate_value(
    keys: &[(&'static str, Integral)],
    key: &str,
    value: f64,
) -> Result<(), QuotaError> {
    let Some((_, kind)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    // NaN passes Kafka's `value <= 0.0` too; es refuses it as well.
    if value <= 0.0 || value.is_nan() {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let (max, word) = match kind {
        Integral::No => return Ok(()),
        Integral::Int => (f64::from(i32::MAX), "an INT"),
        Integral::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > max {
        return Err(invalid(format!(
            "Proposed value for {key} is too large for {word}."
        )));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key} cannot be a fractional value.")));
    }
    Ok(())
}

/// Kafka's `alterClientQuotaEntity` checks of one entity's changes: the
/// entity, then each set value (removals need no check).
pub fn validate_alteration(a: &QuotaAlteration) -> Result<(), QuotaError> {
    let keys = entity_keys(&a.entity)?;
    for op in &a.ops {
        if let Some(v) = op.value {
            validate_value(keys, &op.key, v.0)?;
        }
    }
    Ok(())
}

/// Kafka's match types of a DescribeClientQuotas filter component.
pub const MATCH_EXACT: i8 = 0;
pub const MATCH_DEFAULT: i8 = 1;
pub const MATCH_SPECIFIED: i8 = 2;

/// A checked DescribeClientQuotas filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Types that must have exactly this name (`None`: the default).
    exact: BTreeMap<String, Option<String>>,
    /// Types that must be present.
    specified: Vec<String>,
    strict: bool,
}

/// Why a filter is refused: Kafka throws INVALID_REQUEST, or
/// UNSUPPORTED_VERSION for an entity type it does not know.
pub const UNSUPPORTED_VERSION: i16 = 35;

impl Filter {
    /// Kafka's checks of the components `(entity_type, match_type, match)`
    /// (`ClientQuotasImage.describe`).
    pub fn new(
        components: &[(String, i8, Option<String>)],
        strict: bool,
    ) -> Result<Self, QuotaError> {
        let mut f = Filter {
            strict,
            ..Filter::default()
        };
        for (t, match_type, m) in components {
            if t.is_empty() {
                return Err(invalid("Invalid empty entity type."));
            }
            if f.exact.contains_key(t) || f.specified.contains(t) {
                return Err(invalid(format!(
                    "Entity type {t} cannot appear more than once in the filter."
                )));
            }
            if t != IP && t != USER && t != CLIENT_ID {
                return Err(QuotaError {
                    code: UNSUPPORTED_VERSION,
                    message: format!("Unsupported entity type {t}"),
                });
            }
            match *match_type {
                MATCH_EXACT => {
                    let Some(m) = m else {
                        return Err(invalid(
                            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                        ));
                    };
                    f.exact.insert(t.clone(), Some(m.clone()));
                }
                MATCH_DEFAULT => {
                    if m.is_some() {
                        return Err(invalid(
                            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                        ));
                    }
                    f.exact.insert(t.clone(), None);
                }
                MATCH_SPECIFIED => {
                    if m.is_some() {
                        return Err(invalid(
                            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                        ));
                    }
                    f.specified.push(t.clone());
                }
                other => return Err(invalid(format!("Unknown match type {other}"))),
            }
        }
        let has = |t: &str| f.exact.contains_key(t) || f.specified.iter().any(|s| s == t);
        if has(IP) && (has(USER) || has(CLIENT_ID)) {
            return Err(invalid(
                "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
            ));
        }
        Ok(f)
    }

    /// Whether `entity` is selected. As in Kafka, SPECIFIED asks only that
    /// the entity has the type (a default entity of it matches too).
    pub fn matches(&self, entity: &QuotaEntity) -> bool {
        if self.strict && entity.0.len() != self.exact.len() + self.specified.len() {
            return false;
        }
        self.exact
            .iter()
            .all(|(t, n)| entity.0.get(t).is_some_and(|have| have == n))
            && self.specified.iter().all(|t| entity.0.contains_key(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alteration(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> QuotaAlteration {
        QuotaAlteration {
            entity: QuotaEntity::of(entity),
            ops: ops
                .iter()
                .map(|(k, v)| QuotaOp {
                    key: k.to_string(),
                    value: v.map(QuotaValue),
                })
                .collect(),
        }
    }

    fn refusal(a: &QuotaAlteration) -> String {
        validate_alteration(a).expect_err("refused").message
    }

    #[test]
    fn alterations_are_checked_with_kafkas_rules_and_words() {
        let alice = [(USER, Some("alice"))];
        assert!(
            validate_alteration(&alteration(&alice, &[("producer_byte_rate", Some(1024.0))]))
                .is_ok()
        );
        assert!(
            validate_alteration(&alteration(&alice, &[("request_percentage", Some(0.5))])).is_ok()
        );
        assert!(
            validate_alteration(&alteration(&alice, &[("nope", None)])).is_ok(),
            "removals are not checked"
        );
        assert_eq!(
            refusal(&alteration(&[], &[])),
            "Invalid empty client quota entity"
        );
        assert_eq!(
            refusal(&alteration(&[("group", Some("g"))], &[])),
            "Unhandled client quota entity type: group"
        );
        assert_eq!(
            refusal(&alteration(&[(USER, Some(""))], &[])),
            "Empty user not supported"
        );
        assert_eq!(
            refusal(&alteration(&alice, &[("bytes", Some(1.0))])),
            "Invalid configuration key bytes"
        );
        assert_eq!(
            refusal(&alteration(&alice, &[("producer_byte_rate", Some(0.0))])),
            "Quota producer_byte_rate must be greater than 0"
        );
        assert_eq!(
            refusal(&alteration(&alice, &[("consumer_byte_rate", Some(-3.0))])),
            "Quota consumer_byte_rate must be greater than 0"
        );
        assert_eq!(
            refusal(&alteration(&alice, &[("producer_byte_rate", Some(1.5))])),
            "producer_byte_rate cannot be a fractional value."
        );
        assert_eq!(
            refusal(&alteration(&alice, &[("producer_byte_rate", Some(1e19))])),
            "Proposed value for producer_byte_rate is too large for a LONG."
        );
        assert_eq!(
            refusal(&alteration(
                &alice,
                &[("connection_creation_rate", Some(5.0))]
            )),
            "Invalid configuration key connection_creation_rate"
        );
        let ip = [(IP, Some("10.1.2.3"))];
        assert!(
            validate_alteration(&alteration(&ip, &[("connection_creation_rate", Some(5.0))]))
                .is_ok()
        );
        assert!(validate_alteration(&alteration(
            &[(IP, None)],
            &[("connection_creation_rate", Some(5.0))]
        ))
        .is_ok());
        assert_eq!(
            refusal(&alteration(&ip, &[("connection_creation_rate", Some(5e9))])),
            "Proposed value for connection_creation_rate is too large for an INT."
        );
        assert_eq!(
            refusal(&alteration(&ip, &[("producer_byte_rate", Some(5.0))])),
            "Invalid configuration key producer_byte_rate"
        );
        assert_eq!(
            refusal(&alteration(&[(IP, Some("not an address"))], &[])),
            "not an address is not a valid IP or resolvable host."
        );
        assert!(refusal(&alteration(&[(IP, None), (USER, None)], &[]))
            .starts_with("Invalid quota entity combination"));
    }

    #[test]
    fn entities_print_as_javas_hash_map_does() {
        let e = QuotaEntity::of(&[(USER, Some("alice")), (CLIENT_ID, None)]);
        assert_eq!(
            entity_text(&e),
            "ClientQuotaEntity(entries={client-id=null, user=alice})"
        );
        let e = QuotaEntity::of(&[(USER, Some("alice"))]);
        assert_eq!(entity_text(&e), "ClientQuotaEntity(entries={user=alice})");
    }

    #[test]
    fn filters_select_as_kafkas_image_does() {
        let c = |t: &str, m: i8, s: Option<&str>| (t.to_string(), m, s.map(str::to_string));
        let alice = QuotaEntity::of(&[(USER, Some("alice"))]);
        let default_user = QuotaEntity::of(&[(USER, None)]);
        let alice_c1 = QuotaEntity::of(&[(USER, Some("alice")), (CLIENT_ID, Some("c1"))]);
        let f = Filter::new(&[c(USER, MATCH_EXACT, Some("alice"))], false).expect("filter");
        assert!(f.matches(&alice) && f.matches(&alice_c1) && !f.matches(&default_user));
        let f = Filter::new(&[c(USER, MATCH_EXACT, Some("alice"))], true).expect("filter");
        assert!(f.matches(&alice) && !f.matches(&alice_c1));
        let f = Filter::new(&[c(USER, MATCH_DEFAULT, None)], false).expect("filter");
        assert!(f.matches(&default_user) && !f.matches(&alice));
        let f = Filter::new(&[c(USER, MATCH_SPECIFIED, None)], true).expect("filter");
        assert!(f.matches(&default_user) && f.matches(&alice) && !f.matches(&alice_c1));
        let f = Filter::new(&[], false).expect("filter");
        assert!(f.matches(&alice_c1));
        assert!(!Filter::new(&[], true).expect("filter").matches(&alice));
        let err = |comps: &[(String, i8, Option<String>)]| {
            Filter::new(comps, false).expect_err("refused")
        };
        assert_eq!(
            err(&[c("", 0, Some("x"))]).message,
            "Invalid empty entity type."
        );
        assert_eq!(err(&[c("group", 0, Some("x"))]).code, UNSUPPORTED_VERSION);
        assert_eq!(
            err(&[c(USER, 0, None)]).message,
            "Request specified MATCH_TYPE_EXACT, but set match string to null."
        );
        assert_eq!(err(&[c(USER, 7, None)]).message, "Unknown match type 7");
        assert_eq!(
            err(&[c(USER, 1, None), c(USER, 2, None)]).message,
            "Entity type user cannot appear more than once in the filter."
        );
        assert!(err(&[c(IP, 2, None), c(USER, 2, None)])
            .message
            .starts_with("Invalid entity filter"));
    }

    #[test]
    fn quotas_apply_and_serialize_as_a_list() {
        let mut q = ClientQuotas::default();
        let a = alteration(&[(USER, None)], &[("producer_byte_rate", Some(1024.0))]);
        assert!(q.apply(&a));
        assert!(!q.apply(&a), "the same value again changes nothing");
        let json = serde_json::to_string(&q).expect("json");
        let back: ClientQuotas = serde_json::from_str(&json).expect("back");
        assert_eq!(back, q);
        assert!(q.apply(&alteration(
            &[(USER, None)],
            &[("producer_byte_rate", None)]
        )));
        assert!(q.is_empty(), "an entity without values goes");
    }
}
