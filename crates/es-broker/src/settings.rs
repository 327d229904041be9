//! Kafka-style broker settings: `--config FILE` (a Java properties file,
//! as Kafka's `server.properties`) and `--set NAME=VALUE` (repeated, later
//! ones win, over the file).
//!
//! A setting that has a flag becomes that flag, placed before the command
//! line's own arguments so that a flag given explicitly wins (the command
//! lets a later occurrence override an earlier one). Security settings go to
//! es-kafka's [`SecurityConfig`](es_kafka::security::SecurityConfig). Any
//! other name is an error at start: a setting es would ignore is one an
//! operator believes is in force. docs/operations.md lists them.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Context};
use es_kafka::config::{
    broker_dynamic_def, is_share_broker_setting, validate_broker_config, ShareBrokerConfig,
};
use es_kafka::security::settings::is_security_setting;

/// Settings files larger than this are refused before they are read.
const CONFIG_FILE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// How a setting's value becomes a flag's.
#[derive(Clone, Copy)]
enum Unit {
    /// The value as it is.
    Same,
    /// Milliseconds, for a flag that takes a duration.
    Millis,
    /// A comma-separated list, one flag per element.
    List,
}

/// Kafka's names of settings es-broker has flags for.
const FLAGS: &[(&str, &str, Unit)] = &[
    ("node.id", "--node-id", Unit::Same),
    ("log.dirs", "--data-dir", Unit::Same),
    ("log.dir", "--data-dir", Unit::Same),
    (
        "controller.quorum.voters",
        "--controller-quorum-voters",
        Unit::Same,
    ),
    ("listeners", "--listener", Unit::List),
    ("advertised.listeners", "--advertised-listener", Unit::List),
    (
        "listener.security.protocol.map",
        "--listener-security-protocol-map",
        Unit::Same,
    ),
    (
        "auto.create.topics.enable",
        "--auto-create-topics",
        Unit::Same,
    ),
    ("num.partitions", "--default-partitions", Unit::Same),
    (
        "log.flush.interval.messages",
        "--flush-every-records",
        Unit::Same,
    ),
    ("log.flush.interval.ms", "--flush-interval", Unit::Millis),
    (
        "log.retention.check.interval.ms",
        "--retention-check-interval",
        Unit::Millis,
    ),
    (
        "log.cleaner.backoff.ms",
        "--compaction-interval",
        Unit::Millis,
    ),
    (
        "group.min.session.timeout.ms",
        "--group-min-session-timeout-ms",
        Unit::Same,
    ),
    (
        "group.max.session.timeout.ms",
        "--group-max-session-timeout-ms",
        Unit::Same,
    ),
    (
        "offsets.topic.num.partitions",
        "--offsets-topic-num-partitions",
        Unit::Same,
    ),
    (
        "transaction.state.log.num.partitions",
        "--transaction-state-log-num-partitions",
        Unit::Same,
    ),
    (
        "replica.lag.time.max.ms",
        "--replica-lag-time-max-ms",
        Unit::Same,
    ),
    (
        "default.replication.factor",
        "--default-replication-factor",
        Unit::Same,
    ),
    (
        "auto.leader.rebalance.enable",
        "--auto-leader-rebalance-enable",
        Unit::Same,
    ),
    (
        "leader.imbalance.check.interval.seconds",
        "--leader-imbalance-check-interval-seconds",
        Unit::Same,
    ),
    (
        "leader.imbalance.per.broker.percentage",
        "--leader-imbalance-per-broker-percentage",
        Unit::Same,
    ),
    (
        "unclean.leader.election.interval.ms",
        "--unclean-leader-election-interval-ms",
        Unit::Same,
    ),
];

/// The command line with settings turned into flags, and the security
/// settings.
#[derive(Debug)]
pub struct Expanded {
    pub argv: Vec<OsString>,
    pub security: BTreeMap<String, String>,
    /// Broker-level names of topic configs (`log.retention.ms`, ...):
    /// the static defaults topics inherit.
    pub topic_defaults: BTreeMap<String, String>,
    /// The share groups' broker configs (`group.share.*`), checked.
    pub share: ShareBrokerConfig,
}

/// Reads a properties file.
pub(crate) fn read_properties(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("--config {}", path.display()))?
        .len();
    if len > CONFIG_FILE_BYTES_MAX {
        bail!(
            "--config {}: {len} bytes is more than a settings file may have",
            path.display()
        );
    }
    let file = std::fs::File::open(path).with_context(|| format!("--config {}", path.display()))?;
    let mut out = Vec::new();
    java_properties::PropertiesIter::new(std::io::BufReader::new(file))
        .read_into(|k, v| out.push((k, v)))
        .with_context(|| format!("--config {}: not a properties file", path.display()))?;
    Ok(out)
}

/// Takes `--config` and `--set` out of `argv` (the broker's own arguments,
/// not a subcommand's) and turns what they say into flags and security
/// settings.
pub fn expand(argv: Vec<OsString>) -> anyhow::Result<Expanded> {
    let mut rest = Vec::with_capacity(argv.len());
    let mut files = Vec::new();
    let mut sets = Vec::new();
    let mut it = argv.into_iter();
    if let Some(a0) = it.next() {
        rest.push(a0);
    }
    while let Some(a) = it.next() {
        let s = a.to_string_lossy().into_owned();
        let (flag, inline) = match s.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (s.clone(), None),
        };
        if flag != "--config" && flag != "--set" {
            rest.push(a);
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .map(|v| v.to_string_lossy().into_owned())
                .with_context(|| format!("{flag} needs a value"))?,
        };
        if flag == "--config" {
            files.push(value);
        } else {
            sets.push(value);
        }
    }
    let mut settings: Vec<(String, String)> = Vec::new();
    for f in &files {
        settings.extend(read_properties(Path::new(f))?);
    }
    for s in &sets {
        let (k, v) = s
            .split_once('=')
            .with_context(|| format!("--set {s:?} is not NAME=VALUE"))?;
        settings.push((k.trim().to_string(), v.to_string()));
    }
    // Later values win: a --set over the file, a later --set over an earlier.
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in settings {
        last.insert(k, v);
    }
    let explicit = |flag: &str| {
        rest.iter().any(|a| {
            let a = a.to_string_lossy();
            a == flag || a.starts_with(&format!("{flag}="))
        })
    };
    let mut flags: Vec<OsString> = Vec::new();
    let mut security = BTreeMap::new();
    let mut topic_defaults = BTreeMap::new();
    let mut share = BTreeMap::new();
    for (name, value) in last {
        if name == "log.dirs" && value.contains(',') {
            bail!("log.dirs={value:?}: es keeps its data in one directory");
        }
        if let Some((_, flag, unit)) = FLAGS.iter().find(|(n, _, _)| *n == name) {
            match unit {
                Unit::Same => flags.push(format!("{flag}={}", value.trim()).into()),
                Unit::Millis => flags.push(format!("{flag}={}ms", value.trim()).into()),
                // A list flag given on the command line replaces the setting.
                Unit::List if explicit(flag) => {}
                Unit::List => {
                    for v in value.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                        flags.push(format!("{flag}={v}").into());
                    }
                }
            }
        } else if is_security_setting(&name) {
            security.insert(name, value);
        } else if is_share_broker_setting(&name) {
            share.insert(name, value);
        } else if broker_dynamic_def(&name).is_some() {
            validate_broker_config(&name, Some(&value))
                .map_err(|e| anyhow::anyhow!("setting {name}: {e}"))?;
            topic_defaults.insert(name, value.trim().to_string());
        } else {
            bail!("unknown setting {name:?} (docs/operations.md lists the settings es knows)");
        }
    }
    let mut argv = Vec::with_capacity(rest.len() + flags.len());
    let mut rest = rest.into_iter();
    argv.extend(rest.next());
    argv.extend(flags);
    argv.extend(rest);
    let share = ShareBrokerConfig::from_settings(&share).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Expanded {
        argv,
        security,
        topic_defaults,
        share,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn settings_become_flags_that_explicit_flags_override() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("server.properties");
        std::fs::write(
            &file,
            "# a comment\nnum.partitions=3\nlisteners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2\n\
             super.users=User:admin\nlog.flush.interval.ms = 250\nnode.id: 4\n\
             log.retention.ms=3600000\n",
        )
        .expect("write");
        let e = expand(args(&[
            "es-broker",
            "--config",
            file.to_str().expect("utf-8"),
            "--set",
            "num.partitions=5",
            "--set=allow.everyone.if.no.acl.found=true",
            "--default-partitions",
            "7",
        ]))
        .expect("expands");
        let got: Vec<String> = e
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            got,
            vec![
                "es-broker",
                "--listener=PLAINTEXT://127.0.0.1:1",
                "--listener=SSL://127.0.0.1:2",
                "--flush-interval=250ms",
                "--node-id=4",
                "--default-partitions=5",
                "--default-partitions",
                "7",
            ]
        );
        assert_eq!(
            e.security.get("super.users").map(String::as_str),
            Some("User:admin")
        );
        assert_eq!(
            e.topic_defaults.get("log.retention.ms").map(String::as_str),
            Some("3600000")
        );
        assert_eq!(
            e.security
                .get("allow.everyone.if.no.acl.found")
                .map(String::as_str),
            Some("true")
        );
    }

    #[test]
    fn an_unknown_name_is_an_error() {
        let e = expand(args(&["es-broker", "--set", "log.segment.bytez=1"]));
        assert!(e.is_err());
        assert!(expand(args(&["es-broker", "--set", "novalue"])).is_err());
        assert!(expand(args(&["es-broker", "--set", "log.retention.ms=soon"])).is_err());
        assert!(expand(args(&["es-broker", "--set", "log.dirs=/a,/b"])).is_err());
        assert!(expand(args(&["es-broker", "--config", "/nonexistent/file"])).is_err());
    }

    #[test]
    fn share_group_settings_are_checked_and_kept() {
        let e = expand(args(&[
            "es-broker",
            "--set",
            "group.share.min.record.lock.duration.ms=1000",
        ]))
        .expect("valid");
        assert_eq!(
            e.share.group_range("share.record.lock.duration.ms"),
            Some((1_000, 60_000))
        );
        assert!(expand(args(&["es-broker", "--set", "group.share.max.size=0"])).is_err());
        assert!(expand(args(&[
            "es-broker",
            "--set",
            "group.share.record.lock.duration.ms=5000"
        ]))
        .is_err());
    }

    #[test]
    fn a_listener_flag_replaces_the_listeners_setting() {
        let e = expand(args(&[
            "es-broker",
            "--set",
            "listeners=PLAINTEXT://127.0.0.1:1",
            "--listener",
            "SSL://127.0.0.1:2",
        ]))
        .expect("expands");
        let got: Vec<String> = e
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(got, vec!["es-broker", "--listener", "SSL://127.0.0.1:2"]);
    }
}
