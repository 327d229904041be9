//! The share groups' broker configs (KIP-932), in Kafka 4.4's names
//! (`ShareGroupConfig`, `GroupCoordinatorConfig`): their defaults, the
//! checks Kafka makes of them at start, the bounds they set on a group's own
//! `share.*` configs, and how DescribeConfigs lists them. Sans-io: the
//! broker's settings (`--set`, `--config`) come in as a map.

use std::collections::BTreeMap;

/// One `group.share.*` broker config: name, Kafka's default, and the range
/// its own value must be in.
struct Def {
    name: &'static str,
    default: i64,
    lo: i64,
    hi: i64,
}

const fn d(name: &'static str, default: i64, lo: i64, hi: i64) -> Def {
    Def {
        name,
        default,
        lo,
        hi,
    }
}

const I32: i64 = i32::MAX as i64;

/// Sorted by name.
const DEFS: &[Def] = &[
    d("group.share.assignment.interval.ms", 1_000, 0, I32),
    d("group.share.delivery.count.limit", 5, 2, 10),
    d("group.share.heartbeat.interval.ms", 5_000, 1, I32),
    d("group.share.max.assignment.interval.ms", 15_000, 0, I32),
    d("group.share.max.delivery.count.limit", 10, 2, 10),
    d("group.share.max.heartbeat.interval.ms", 15_000, 1, I32),
    d(
        "group.share.max.partition.max.record.locks",
        4_000,
        100,
        10_000,
    ),
    d(
        "group.share.max.record.lock.duration.ms",
        60_000,
        30_000,
        3_600_000,
    ),
    d("group.share.max.session.timeout.ms", 60_000, 1, I32),
    d("group.share.max.share.sessions", 2_000, 1, I32),
    d("group.share.max.size", 200, 1, 1_000),
    d("group.share.min.assignment.interval.ms", 0, 0, I32),
    d("group.share.min.delivery.count.limit", 2, 2, 10),
    d("group.share.min.heartbeat.interval.ms", 5_000, 1, I32),
    d(
        "group.share.min.partition.max.record.locks",
        100,
        100,
        10_000,
    ),
    d(
        "group.share.min.record.lock.duration.ms",
        15_000,
        1_000,
        30_000,
    ),
    d("group.share.min.session.timeout.ms", 45_000, 1, I32),
    d("group.share.partition.max.record.locks", 2_000, 100, 10_000),
    d(
        "group.share.record.lock.duration.ms",
        30_000,
        1_000,
        3_600_000,
    ),
    d("group.share.session.timeout.ms", 45_000, 1, I32),
];

/// Whether `name` is a share-group broker config es knows.
pub fn is_share_broker_setting(name: &str) -> bool {
    DEFS.binary_search_by(|x| x.name.cmp(name)).is_ok()
}

/// The share groups' broker configs in force: Kafka's defaults with the
/// broker's settings over them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareBrokerConfig {
    /// Name -> value, every [`DEFS`] name present.
    values: BTreeMap<&'static str, i64>,
    /// The names the broker's settings gave.
    set: Vec<&'static str>,
}

impl Default for ShareBrokerConfig {
    fn default() -> Self {
        ShareBrokerConfig {
            values: DEFS.iter().map(|x| (x.name, x.default)).collect(),
            set: Vec::new(),
        }
    }
}

impl ShareBrokerConfig {
    /// The configs `settings` give (names this module does not know are
    /// refused, as es refuses any setting it would ignore), checked as Kafka
    /// checks them at start: each within its range, and each default
    /// between its min and max config.
    pub fn from_settings(settings: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut c = ShareBrokerConfig::default();
        for (name, raw) in settings {
            let Some(def) = DEFS.iter().find(|x| x.name == name.as_str()) else {
                return Err(format!("unknown share group setting {name:?}"));
            };
            let v: i64 = raw.trim().parse::<i32>().map(i64::from).map_err(|_| {
                format!("Invalid value {raw} for configuration {name}: Not a number of type INT")
            })?;
            if v < def.lo || v > def.hi {
                return Err(format!(
                    "Invalid value {v} for configuration {name}: Value must be in [{}, {}]",
                    def.lo, def.hi
                ));
            }
            c.values.insert(def.name, v);
            c.set.push(def.name);
        }
        for (what, min, default, max) in [
            (
                "record.lock.duration.ms",
                "group.share.min.record.lock.duration.ms",
                "group.share.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            ),
            (
                "delivery.count.limit",
                "group.share.min.delivery.count.limit",
                "group.share.delivery.count.limit",
                "group.share.max.delivery.count.limit",
            ),
            (
                "partition.max.record.locks",
                "group.share.min.partition.max.record.locks",
                "group.share.partition.max.record.locks",
                "group.share.max.partition.max.record.locks",
            ),
            (
                "session.timeout.ms",
                "group.share.min.session.timeout.ms",
                "group.share.session.timeout.ms",
                "group.share.max.session.timeout.ms",
            ),
            (
                "heartbeat.interval.ms",
                "group.share.min.heartbeat.interval.ms",
                "group.share.heartbeat.interval.ms",
                "group.share.max.heartbeat.interval.ms",
            ),
            (
                "assignment.interval.ms",
                "group.share.min.assignment.interval.ms",
                "group.share.assignment.interval.ms",
                "group.share.max.assignment.interval.ms",
            ),
        ] {
            let (lo, v, hi) = (c.get(min), c.get(default), c.get(max));
            if !(lo <= v && v <= hi) {
                return Err(format!(
                    "{default} must be between {min} and {max} ({lo} <= {v} <= {hi}), the bounds of a share group's share.{what}"
                ));
            }
        }
        if c.get("group.share.heartbeat.interval.ms") >= c.get("group.share.session.timeout.ms") {
            return Err(
                "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"
                    .to_string(),
            );
        }
        Ok(c)
    }

    /// The value of `name` (0 for a name this module does not know).
    pub fn get(&self, name: &str) -> i64 {
        self.values.get(name).copied().unwrap_or(0)
    }

    /// The value of `name` as an i32 (every one fits: their ranges do).
    pub fn get_i32(&self, name: &str) -> i32 {
        i32::try_from(self.get(name)).unwrap_or(i32::MAX)
    }

    /// The range (min config, max config) a group's own value of group
    /// config `group_config` must be in, when a share broker config bounds
    /// it.
    pub fn group_range(&self, group_config: &str) -> Option<(i64, i64)> {
        let stem = group_config.strip_prefix("share.")?;
        let lo = format!("group.share.min.{stem}");
        let hi = format!("group.share.max.{stem}");
        (is_share_broker_setting(&lo) && is_share_broker_setting(&hi))
            .then(|| (self.get(&lo), self.get(&hi)))
    }

    /// Every config with its value and whether the broker's settings gave
    /// it (else Kafka's default), sorted by name, for DescribeConfigs.
    pub fn describe(&self) -> Vec<(&'static str, String, bool)> {
        DEFS.iter()
            .map(|x| {
                (
                    x.name,
                    self.get(x.name).to_string(),
                    self.set.contains(&x.name),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_table_is_sorted_and_its_defaults_are_kafkas_and_consistent() {
        assert!(DEFS.windows(2).all(|w| w[0].name < w[1].name));
        let c = ShareBrokerConfig::from_settings(&BTreeMap::new()).expect("defaults");
        assert_eq!(c, ShareBrokerConfig::default());
        assert_eq!(
            c.group_range("share.record.lock.duration.ms"),
            Some((15_000, 60_000))
        );
        assert_eq!(c.group_range("share.delivery.count.limit"), Some((2, 10)));
        assert_eq!(
            c.group_range("share.partition.max.record.locks"),
            Some((100, 4_000))
        );
        assert_eq!(
            c.group_range("share.session.timeout.ms"),
            Some((45_000, 60_000))
        );
        assert_eq!(c.group_range("share.auto.offset.reset"), None);
        assert_eq!(c.group_range("consumer.session.timeout.ms"), None);
        assert_eq!(
            crate::groups::share::ShareGroupConfig::from_broker(&c),
            crate::groups::share::ShareGroupConfig::default()
        );
        assert!(c.describe().iter().all(|(_, _, set)| !set));
    }

    #[test]
    fn settings_move_the_bounds_and_defaults_and_bad_ones_are_refused() {
        let c = ShareBrokerConfig::from_settings(&settings(&[
            ("group.share.min.record.lock.duration.ms", "1000"),
            ("group.share.heartbeat.interval.ms", "6000"),
            ("group.share.max.size", "7"),
        ]))
        .expect("valid");
        assert_eq!(
            c.group_range("share.record.lock.duration.ms"),
            Some((1_000, 60_000))
        );
        let g = crate::groups::share::ShareGroupConfig::from_broker(&c);
        assert_eq!((g.heartbeat_interval_ms, g.members_max), (6_000, 7));
        let base = crate::shares::target::ShareConfig::from_broker(&c);
        assert_eq!(base, crate::shares::target::ShareConfig::default());
        let c2 = ShareBrokerConfig::from_settings(&settings(&[
            ("group.share.record.lock.duration.ms", "20000"),
            ("group.share.delivery.count.limit", "3"),
        ]))
        .expect("valid");
        let s2 = crate::shares::target::ShareConfig::from_broker(&c2);
        assert_eq!(
            (s2.record_lock_duration_ms, s2.limits.delivery_count_limit),
            (20_000, 3)
        );
        let set: Vec<&str> = c
            .describe()
            .into_iter()
            .filter(|x| x.2)
            .map(|x| x.0)
            .collect();
        assert_eq!(
            set,
            vec![
                "group.share.heartbeat.interval.ms",
                "group.share.max.size",
                "group.share.min.record.lock.duration.ms"
            ]
        );
        // A group's own value is held to the broker's bounds.
        let check = |v: &str, c: &ShareBrokerConfig| {
            crate::config::validate_group_config_in("share.record.lock.duration.ms", Some(v), c)
        };
        assert!(check("3000", &ShareBrokerConfig::default()).is_err());
        assert_eq!(check("3000", &c), Ok(()));
        assert_eq!(
            check("900", &c),
            Err("Invalid value 900 for configuration share.record.lock.duration.ms: Value must be at least 1000".to_string())
        );
        for bad in [
            ("group.share.record.lock.duration.ms", "999"),
            ("group.share.record.lock.duration.ms", "x"),
            ("group.share.record.lock.duration.ms", "10000"), // below the min config
            ("group.share.max.size", "0"),
            ("group.share.heartbeat.interval.ms", "50000"), // not below the session timeout
            ("group.share.enable", "true"),
        ] {
            assert!(
                ShareBrokerConfig::from_settings(&settings(&[bad])).is_err(),
                "{bad:?}"
            );
        }
    }
}
