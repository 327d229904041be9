//! Group configs: Kafka's GROUP config resource (KIP-848's `GroupConfig`),
//! set with IncrementalAlterConfigs on resource type 32 and read with
//! DescribeConfigs, per group id (the group need not exist yet).
//!
//! The table is Kafka 4.4's: names, types, defaults, the broker config each
//! default comes from (its synonym in DescribeConfigs) and the checks, with
//! Kafka's messages, in Kafka's order: first the type and lower bound of the
//! config itself (`ConfigDef`), then the range the broker allows
//! (`group.consumer.min.session.timeout.ms` and the like, which es does not
//! let an operator change: their Kafka defaults are the bounds below).
//!
//! What es applies: `consumer.session.timeout.ms`,
//! `consumer.heartbeat.interval.ms` and `consumer.assignment.interval.ms`
//! override the broker's values for that KIP-848 consumer group
//! ([`GroupOverrides`]). The share and streams configs are kept and
//! described for Kafka's tools; es has no share or streams groups yet, so
//! they change nothing else. This module is sans-io.

use std::collections::BTreeMap;

use super::table::ConfigType;

/// How one group config is checked, besides being present.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// An INT at least `min`, then within `range` (the broker's bounds).
    Int {
        min: i64,
        range: Option<(i64, i64)>,
    },
    /// An INT at least `min` and at most `max` (Kafka's message for an upper
    /// bound alone).
    IntMax {
        min: i64,
        max: i64,
    },
    Bool,
    OneOf(&'static [&'static str]),
    /// `latest`, `earliest` or `by_duration:<ISO-8601 duration>`.
    AutoOffsetReset,
    /// One of the registered streams task assignors.
    Assignor,
    Any,
}

/// One group config Kafka 4.4 defines.
#[derive(Clone, Copy, Debug)]
pub struct GroupConfigDef {
    pub name: &'static str,
    /// The broker config its default comes from (DescribeConfigs' synonym).
    pub broker_name: &'static str,
    pub default: &'static str,
    pub ty: ConfigType,
    pub doc: &'static str,
    rule: Rule,
}

const fn g(
    name: &'static str,
    broker_name: &'static str,
    default: &'static str,
    ty: ConfigType,
    rule: Rule,
    doc: &'static str,
) -> GroupConfigDef {
    GroupConfigDef {
        name,
        broker_name,
        default,
        ty,
        doc,
        rule,
    }
}

/// Kafka's `group.consumer.min|max.session.timeout.ms` defaults (and the
/// share and streams groups' equal ones).
const SESSION_TIMEOUT_MS: (i64, i64) = (45_000, 60_000);
/// Kafka's `group.consumer.min|max.heartbeat.interval.ms` defaults.
const HEARTBEAT_INTERVAL_MS: (i64, i64) = (5_000, 15_000);
/// `group.share.min|max.record.lock.duration.ms`.
const RECORD_LOCK_DURATION_MS: (i64, i64) = (15_000, 60_000);
/// `group.share.min|max.delivery.count.limit`.
const DELIVERY_COUNT_LIMIT: (i64, i64) = (2, 10);
/// `group.share.min|max.partition.max.record.locks`.
const PARTITION_RECORD_LOCKS: (i64, i64) = (100, 4_000);
/// `group.streams.max.standby.replicas`.
const STANDBY_REPLICAS_MAX: i64 = 2;
/// The streams task assignors a broker registers (`group.streams.assignors`).
const STREAMS_ASSIGNORS: &[&str] = &["sticky"];

/// Sorted by name.
pub const GROUP_CONFIGS: &[GroupConfigDef] = &[
    g("consumer.assignment.interval.ms", "group.consumer.assignment.interval.ms", "1000", ConfigType::Int, Rule::Int { min: 0, range: None }, "The least time between two target assignments of a consumer group."),
    g("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms", "5000", ConfigType::Int, Rule::Int { min: 1, range: Some(HEARTBEAT_INTERVAL_MS) }, "The heartbeat interval given to the members of a consumer group."),
    g("consumer.session.timeout.ms", "group.consumer.session.timeout.ms", "45000", ConfigType::Int, Rule::Int { min: 1, range: Some(SESSION_TIMEOUT_MS) }, "The timeout to detect client failures when using the consumer group protocol."),
    g("errors.deadletterqueue.copy.record.enable", "errors.deadletterqueue.copy.record.enable", "false", ConfigType::Boolean, Rule::Bool, "Whether a streams group's dead letter queue records copy the failed record. Kept for Kafka's tools; es has no streams groups."),
    g("errors.deadletterqueue.topic.name", "errors.deadletterqueue.topic.name", "", ConfigType::String, Rule::Any, "The dead letter queue topic of a streams group. Kept for Kafka's tools; es has no streams groups."),
    g("share.assignment.interval.ms", "group.share.assignment.interval.ms", "1000", ConfigType::Int, Rule::Int { min: 0, range: None }, "The least time between two target assignments of a share group."),
    g("share.auto.offset.reset", "share.auto.offset.reset", "latest", ConfigType::String, Rule::AutoOffsetReset, "The strategy to initialize the share-partition start offset."),
    g("share.delivery.count.limit", "group.share.delivery.count.limit", "5", ConfigType::Int, Rule::Int { min: 2, range: Some(DELIVERY_COUNT_LIMIT) }, "The most times a record of a share group is delivered."),
    g("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", "5000", ConfigType::Int, Rule::Int { min: 1, range: Some(HEARTBEAT_INTERVAL_MS) }, "The heartbeat interval given to the members of a share group."),
    g("share.isolation.level", "share.isolation.level", "read_uncommitted", ConfigType::String, Rule::OneOf(&["read_committed", "read_uncommitted"]), "How a share group reads transactional records. es reads read_uncommitted for now (read_committed is to come)."),
    g("share.partition.max.record.locks", "group.share.partition.max.record.locks", "2000", ConfigType::Int, Rule::Int { min: 100, range: Some(PARTITION_RECORD_LOCKS) }, "The most records of a share-partition in flight at once."),
    g("share.record.lock.duration.ms", "group.share.record.lock.duration.ms", "30000", ConfigType::Int, Rule::Int { min: 1000, range: Some(RECORD_LOCK_DURATION_MS) }, "How long a share group's member holds an acquired record."),
    g("share.renew.acknowledge.enable", "share.renew.acknowledge.enable", "true", ConfigType::Boolean, Rule::Bool, "Whether a share group's members may renew their acquisition locks."),
    g("share.session.timeout.ms", "group.share.session.timeout.ms", "45000", ConfigType::Int, Rule::Int { min: 1, range: Some(SESSION_TIMEOUT_MS) }, "The timeout to detect the failure of a share group's member."),
    g("streams.assignment.interval.ms", "group.streams.assignment.interval.ms", "1000", ConfigType::Int, Rule::Int { min: 0, range: None }, "The least time between two target assignments of a streams group. Kept for Kafka's tools; es has no streams groups."),
    g("streams.assignor.name", "group.streams.assignors", "sticky", ConfigType::String, Rule::Assignor, "The task assignor of a streams group. Kept for Kafka's tools; es has no streams groups."),
    g("streams.heartbeat.interval.ms", "group.streams.heartbeat.interval.ms", "5000", ConfigType::Int, Rule::Int { min: 1, range: Some(HEARTBEAT_INTERVAL_MS) }, "The heartbeat interval given to the members of a streams group. Kept for Kafka's tools; es has no streams groups."),
    g("streams.initial.rebalance.delay.ms", "group.streams.initial.rebalance.delay.ms", "3000", ConfigType::Int, Rule::Int { min: 0, range: None }, "How long a new streams group waits before its first assignment. Kept for Kafka's tools; es has no streams groups."),
    g("streams.num.standby.replicas", "group.streams.num.standby.replicas", "0", ConfigType::Int, Rule::IntMax { min: 0, max: STANDBY_REPLICAS_MAX }, "The number of standby replicas of each task of a streams group. Kept for Kafka's tools; es has no streams groups."),
    g("streams.rack.aware.assignment.tags", "group.streams.rack.aware.assignment.tags", "", ConfigType::List, Rule::Any, "The rack-aware assignment tags of a streams group. Kept for Kafka's tools; es has no streams groups."),
    g("streams.session.timeout.ms", "group.streams.session.timeout.ms", "45000", ConfigType::Int, Rule::Int { min: 1, range: Some(SESSION_TIMEOUT_MS) }, "The timeout to detect the failure of a streams group's member. Kept for Kafka's tools; es has no streams groups."),
];

/// The definition of group config `name`, if Kafka has one.
pub fn group_config_def(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS
        .binary_search_by(|d| d.name.cmp(name))
        .ok()
        .map(|i| &GROUP_CONFIGS[i])
}

/// Checks one group config value, with Kafka's message when it is refused
/// (INVALID_CONFIG). The value is trimmed as Kafka's `ConfigDef` does.
pub fn validate_group_config(name: &str, value: Option<&str>) -> Result<(), String> {
    validate_group_config_in(name, value, &super::ShareBrokerConfig::default())
}

/// [`validate_group_config`] on a broker whose `group.share.min|max.*`
/// configs are `share`'s: a group's own `share.*` value must be within them.
pub fn validate_group_config_in(
    name: &str,
    value: Option<&str>,
    share: &super::ShareBrokerConfig,
) -> Result<(), String> {
    let d = group_config_def(name).ok_or_else(|| format!("Unknown group config name: {name}"))?;
    let Some(raw) = value else {
        return Err(format!("Null value not supported for : {name}"));
    };
    let v = raw.trim();
    let invalid = |why: &str| format!("Invalid value {v} for configuration {name}: {why}");
    let int = || -> Result<i64, String> {
        v.parse::<i32>()
            .map(i64::from)
            .map_err(|_| invalid("Not a number of type INT"))
    };
    match d.rule {
        Rule::Int { min, range } => {
            let range = share.group_range(name).or(range);
            let n = int()?;
            if n < min {
                return Err(invalid(&format!("Value must be at least {min}")));
            }
            if let Some((lo, hi)) = range {
                if n < lo || n > hi {
                    return Err(format!(
                        "{name} must be in the range {lo} to {hi} inclusive."
                    ));
                }
            }
        }
        Rule::IntMax { min, max } => {
            let n = int()?;
            if n < min {
                return Err(invalid(&format!("Value must be at least {min}")));
            }
            if n > max {
                return Err(format!("{name} must be less than or equal to {max}"));
            }
        }
        Rule::Bool => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(invalid("Expected value to be either true or false"));
            }
        }
        Rule::OneOf(allowed) => {
            if !allowed.contains(&v) {
                return Err(invalid(&format!(
                    "String must be one of: {}",
                    allowed.join(", ")
                )));
            }
        }
        Rule::AutoOffsetReset => {
            let ok = v == "latest"
                || v == "earliest"
                || v.strip_prefix("by_duration:")
                    .is_some_and(|d| iso8601_duration_ms(d).is_some());
            if !ok {
                return Err(invalid(&format!(
                    "Invalid value `{v}` for configuration {name}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
                )));
            }
        }
        Rule::Assignor => {
            if !STREAMS_ASSIGNORS.contains(&v) {
                return Err(format!(
                    "{name} '{v}' is not a registered task assignor. Registered assignors are: [{}].",
                    STREAMS_ASSIGNORS.join(", ")
                ));
            }
        }
        Rule::Any => {}
    }
    Ok(())
}

/// Milliseconds of a non-negative ISO-8601 duration as Java's
/// `Duration.parse` reads it (`PnDTnHnMn.nS`; days, hours, minutes, seconds
/// with an optional fraction), or `None` if it is not one.
pub(crate) fn iso8601_duration_ms(s: &str) -> Option<u64> {
    let rest = s.strip_prefix('P').or_else(|| s.strip_prefix('p'))?;
    let (date, time) = match rest.find(['T', 't']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut ms: u64 = 0;
    let mut any = false;
    if !date.is_empty() {
        let days: u64 = date.strip_suffix(['D', 'd'])?.parse().ok()?;
        ms = ms.checked_add(days.checked_mul(86_400_000)?)?;
        any = true;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None;
        }
        for (unit, scale) in [('H', 3_600_000u64), ('M', 60_000)] {
            if let Some(i) = t.find([unit, unit.to_ascii_lowercase()]) {
                let n: u64 = t[..i].parse().ok()?;
                ms = ms.checked_add(n.checked_mul(scale)?)?;
                t = &t[i + 1..];
                any = true;
            }
        }
        if !t.is_empty() {
            let secs = t.strip_suffix(['S', 's'])?;
            let (whole, frac) = secs.split_once('.').unwrap_or((secs, ""));
            let whole: u64 = whole.parse().ok()?;
            if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let frac_ms: u64 = format!("{frac:0<3}")[..3].parse().ok()?;
            ms = ms.checked_add(whole.checked_mul(1000)?.checked_add(frac_ms)?)?;
            any = true;
        }
    }
    any.then_some(ms)
}

/// One group config on its way into a DescribeConfigs answer: its value and
/// whether the group sets it (Kafka's GROUP_CONFIG source) or it is the
/// broker's default (DEFAULT_CONFIG, its synonym the broker config).
#[derive(Clone, Debug)]
pub struct DescribedGroupConfig {
    pub def: &'static GroupConfigDef,
    pub value: String,
    pub set_on_group: bool,
}

/// Every group config of a group with these overrides, or those `keys`
/// name (unknown names are left out, as Kafka does).
pub fn describe_group(
    overrides: &BTreeMap<String, String>,
    keys: Option<&[String]>,
) -> Vec<DescribedGroupConfig> {
    GROUP_CONFIGS
        .iter()
        .filter(|d| keys.is_none_or(|ks| ks.iter().any(|k| k == d.name)))
        .map(|d| match overrides.get(d.name) {
            Some(v) => DescribedGroupConfig {
                def: d,
                value: v.clone(),
                set_on_group: true,
            },
            None => DescribedGroupConfig {
                def: d,
                value: d.default.to_string(),
                set_on_group: false,
            },
        })
        .collect()
}

/// What a group's configs change in how es runs that group: the KIP-848
/// and share-group timing its coordinator applies instead of the broker's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupOverrides {
    pub consumer_session_timeout_ms: Option<i32>,
    pub consumer_heartbeat_interval_ms: Option<i32>,
    pub consumer_assignment_interval_ms: Option<i32>,
    pub share_session_timeout_ms: Option<i32>,
    pub share_heartbeat_interval_ms: Option<i32>,
    pub share_assignment_interval_ms: Option<i32>,
}

impl GroupOverrides {
    /// The overrides a group's stored configs give (values that do not
    /// parse, which validation keeps out, are ignored).
    pub fn from_configs(configs: &BTreeMap<String, String>) -> GroupOverrides {
        let int = |k: &str| configs.get(k).and_then(|v| v.trim().parse::<i32>().ok());
        GroupOverrides {
            consumer_session_timeout_ms: int("consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms: int("consumer.heartbeat.interval.ms"),
            consumer_assignment_interval_ms: int("consumer.assignment.interval.ms"),
            share_session_timeout_ms: int("share.session.timeout.ms"),
            share_heartbeat_interval_ms: int("share.heartbeat.interval.ms"),
            share_assignment_interval_ms: int("share.assignment.interval.ms"),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == GroupOverrides::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_every_default_validates() {
        assert!(GROUP_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        assert_eq!(GROUP_CONFIGS.len(), 21, "Kafka 4.4 has 21 group configs");
        for d in GROUP_CONFIGS {
            assert_eq!(
                validate_group_config(d.name, Some(d.default)),
                Ok(()),
                "{}",
                d.name
            );
        }
    }

    /// Each message is the one Kafka 4.4 answers for the same value
    /// (`kafka-configs.sh --alter --entity-type groups`).
    #[test]
    fn refusals_carry_kafkas_messages() {
        let cases = [
            ("consumer.session.timeout.ms", "70000", "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
            ("consumer.heartbeat.interval.ms", "1000", "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
            ("nope", "1", "Unknown group config name: nope"),
            ("consumer.session.timeout.ms", "abc", "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
            ("consumer.session.timeout.ms", "0", "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
            ("share.auto.offset.reset", "bogus", "Invalid value bogus for configuration share.auto.offset.reset: Invalid value `bogus` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
            ("share.record.lock.duration.ms", "500", "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
            ("share.record.lock.duration.ms", "1000", "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
            ("streams.num.standby.replicas", "5", "streams.num.standby.replicas must be less than or equal to 2"),
            ("streams.num.standby.replicas", "-1", "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at least 0"),
            ("share.delivery.count.limit", "1", "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
            ("share.delivery.count.limit", "11", "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
            ("share.partition.max.record.locks", "100000", "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
            ("streams.assignor.name", "foo", "streams.assignor.name 'foo' is not a registered task assignor. Registered assignors are: [sticky]."),
            ("share.renew.acknowledge.enable", "maybe", "Invalid value maybe for configuration share.renew.acknowledge.enable: Expected value to be either true or false"),
            ("share.isolation.level", "x", "Invalid value x for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"),
            ("consumer.assignment.interval.ms", "-1", "Invalid value -1 for configuration consumer.assignment.interval.ms: Value must be at least 0"),
        ];
        for (name, value, message) in cases {
            assert_eq!(
                validate_group_config(name, Some(value)),
                Err(message.to_string()),
                "{name}={value}"
            );
        }
        for (name, value) in [
            ("consumer.session.timeout.ms", "50000"),
            ("consumer.assignment.interval.ms", "10"),
            ("share.auto.offset.reset", "by_duration:PT1H"),
            ("share.auto.offset.reset", "by_duration:P1DT2H3M4.5S"),
            ("share.delivery.count.limit", "10"),
            ("share.isolation.level", "read_committed"),
            ("streams.rack.aware.assignment.tags", "a,b"),
            ("errors.deadletterqueue.topic.name", "dlq"),
        ] {
            assert_eq!(
                validate_group_config(name, Some(value)),
                Ok(()),
                "{name}={value}"
            );
        }
        assert!(validate_group_config("share.auto.offset.reset", Some("by_duration:1H")).is_err());
        assert!(validate_group_config("share.auto.offset.reset", Some("by_duration:PT")).is_err());
    }

    #[test]
    fn durations_parse_as_java_reads_them() {
        assert_eq!(iso8601_duration_ms("PT1H"), Some(3_600_000));
        assert_eq!(iso8601_duration_ms("P2D"), Some(172_800_000));
        assert_eq!(iso8601_duration_ms("PT1M30.25S"), Some(90_250));
        assert_eq!(iso8601_duration_ms("P"), None);
        assert_eq!(iso8601_duration_ms("PTS"), None);
        assert_eq!(iso8601_duration_ms("P1H"), None);
    }

    #[test]
    fn describe_marks_what_the_group_sets() {
        let mut o = BTreeMap::new();
        o.insert(
            "consumer.session.timeout.ms".to_string(),
            "50000".to_string(),
        );
        let all = describe_group(&o, None);
        assert_eq!(all.len(), GROUP_CONFIGS.len());
        let keys = [
            "consumer.session.timeout.ms".to_string(),
            "nope".to_string(),
        ];
        let some = describe_group(&o, Some(&keys));
        assert_eq!(some.len(), 1);
        assert_eq!(some[0].value, "50000");
        assert!(some[0].set_on_group);
        let ov = GroupOverrides::from_configs(&o);
        assert_eq!(ov.consumer_session_timeout_ms, Some(50_000));
        assert_eq!(ov.consumer_heartbeat_interval_ms, None);
    }
}
