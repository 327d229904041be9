//! Produce-time schema id validation (Confluent Server's
//! `confluent.{key,value}.schema.validation`, Redpanda's
//! `redpanda.{key,value}.schema.id.validation`): the pure check of a
//! decoded batch's keys and values against a schema registry, and the face
//! the registry shows this crate ([`SchemaIds`]), registered on a broker
//! at start ([`SchemaSlot`], a broker extension as [`crate::mirror`]'s).
//!
//! This crate knows no registry: es-broker registers an adapter over
//! es-registry, which knows nothing of Kafka. With no registry registered,
//! a topic that validates refuses every produce (fails closed).
//!
//! A key or value passes when it is null (a tombstone, as Confluent
//! Server lets through) or starts with magic byte 0 and a 4-byte
//! big-endian schema id registered under the subject the topic's strategy
//! names. The check never allocates per record on the common path: one
//! subject string per part and batch for TopicNameStrategy, and a passing
//! id is remembered for the rest of the batch.

use std::sync::{Arc, OnceLock};

use es_storage::RecordBatchBuf;

use crate::broker::Broker;
use crate::config::{SubjectStrategy, TopicRules};

/// The first byte of Confluent's wire format.
pub const MAGIC_BYTE: u8 = 0;
/// The magic byte and the schema id.
pub const PREFIX_BYTES: usize = 5;

/// What the schema registry answers the produce path.
pub trait SchemaIds: Send + Sync + std::fmt::Debug {
    /// Whether a live version of `subject` names schema `id`.
    fn is_registered(&self, subject: &str, id: i32) -> bool;
    /// The fully-qualified record name of schema `id`, as Confluent's
    /// serializers name it (None: no such schema, or no record name).
    fn record_name(&self, id: i32) -> Option<String>;
}

/// Where the schema registry registers on a broker ([`Broker::extension`]).
#[derive(Debug, Default)]
pub struct SchemaSlot(OnceLock<Arc<dyn SchemaIds>>);

impl SchemaSlot {
    /// Registers the registry (once; later calls are ignored).
    pub fn set(&self, ids: Arc<dyn SchemaIds>) {
        let _ = self.0.set(ids);
    }

    pub fn get(&self) -> Option<&Arc<dyn SchemaIds>> {
        self.0.get()
    }
}

impl Broker {
    /// The schema registry serving this broker, if one runs.
    pub fn schema_ids(&self) -> Option<Arc<dyn SchemaIds>> {
        self.extension(SchemaSlot::default).get().cloned()
    }
}

/// Why a batch is refused: per-record errors (index in the batch,
/// message), or, with none, a reason for the whole batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    Records(Vec<(i32, String)>),
    NoRegistry(String),
}

/// Which part of a record is checked.
#[derive(Clone, Copy)]
enum Part {
    Key,
    Value,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Key => "key",
            Part::Value => "value",
        }
    }
}

/// One part's check within a batch: its strategy, the subject when it does
/// not depend on the schema, and the last id that passed.
struct PartCheck {
    part: Part,
    strategy: SubjectStrategy,
    topic_subject: Option<String>,
    passed: Option<i32>,
}

impl PartCheck {
    fn new(part: Part, strategy: Option<SubjectStrategy>, topic: &str) -> Option<PartCheck> {
        let strategy = strategy?;
        Some(PartCheck {
            part,
            strategy,
            topic_subject: (strategy == SubjectStrategy::TopicName)
                .then(|| format!("{topic}-{}", part.name())),
            passed: None,
        })
    }

    /// None when `data` passes, else why not.
    fn check(&mut self, topic: &str, data: Option<&[u8]>, ids: &dyn SchemaIds) -> Option<String> {
        let part = self.part.name();
        let data = data?;
        let id = match data {
            [MAGIC_BYTE, a, b, c, d, ..] => i32::from_be_bytes([*a, *b, *c, *d]),
            _ => {
                return Some(format!(
                    "The {part} does not start with magic byte 0 and a 4-byte schema id (Confluent's wire format)"
                ))
            }
        };
        if self.passed == Some(id) {
            return None;
        }
        let subject = match (&self.topic_subject, self.strategy) {
            (Some(s), _) => s.clone(),
            (None, strategy) => {
                let Some(name) = ids.record_name(id) else {
                    return Some(format!(
                        "The {part}'s schema id {id} names no registered schema with a record name ({strategy:?}Strategy)"
                    ));
                };
                if strategy == SubjectStrategy::RecordName {
                    name
                } else {
                    format!("{topic}-{name}")
                }
            }
        };
        if ids.is_registered(&subject, id) {
            self.passed = Some(id);
            None
        } else {
            Some(format!(
                "The {part}'s schema id {id} is not registered under subject {subject}"
            ))
        }
    }
}

/// Checks every record of `buf` (a batch produced to `topic`) under
/// `rules`; `ids` is the broker's registry. Call only when
/// [`TopicRules::validates_schemas`].
pub fn check(
    topic: &str,
    rules: &TopicRules,
    buf: &RecordBatchBuf,
    ids: Option<&dyn SchemaIds>,
) -> Result<(), Invalid> {
    let Some(ids) = ids else {
        return Err(Invalid::NoRegistry(format!(
            "Topic {topic} validates schema ids, but this broker runs no schema registry (--schema-registry-listen is none, or the registry failed to start)"
        )));
    };
    let mut key = PartCheck::new(Part::Key, rules.key_schema, topic);
    let mut value = PartCheck::new(Part::Value, rules.value_schema, topic);
    let mut errors = Vec::new();
    for (i, r) in buf.records().enumerate() {
        let index = i32::try_from(i).unwrap_or(i32::MAX);
        let r = match r {
            Ok(r) => r,
            // The buffer was built by the decoder just now; a record that
            // does not read back is refused rather than let through.
            Err(e) => {
                errors.push((index, format!("The record does not read back: {e}")));
                break;
            }
        };
        let mut why = key.as_mut().and_then(|k| k.check(topic, r.key, ids));
        if why.is_none() {
            why = value.as_mut().and_then(|v| v.check(topic, r.value, ids));
        }
        if let Some(why) = why {
            errors.push((index, why));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Invalid::Records(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_storage::RecordMeta;
    use std::collections::HashMap;

    /// A registry double: (subject, id) pairs and record names.
    #[derive(Debug, Default)]
    struct Ids {
        registered: Vec<(String, i32)>,
        names: HashMap<i32, String>,
    }

    impl SchemaIds for Ids {
        fn is_registered(&self, subject: &str, id: i32) -> bool {
            self.registered
                .iter()
                .any(|(s, i)| s == subject && *i == id)
        }
        fn record_name(&self, id: i32) -> Option<String> {
            self.names.get(&id).cloned()
        }
    }

    fn framed(id: i32) -> Vec<u8> {
        let mut v = vec![MAGIC_BYTE];
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(b"payload");
        v
    }

    fn rules(key: Option<SubjectStrategy>, value: Option<SubjectStrategy>) -> TopicRules {
        let mut r = crate::config::TopicConfig::default().rules();
        r.key_schema = key;
        r.value_schema = value;
        r
    }

    /// A record's key and value.
    type Kv<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

    fn batch(records: &[Kv<'_>]) -> RecordBatchBuf {
        let mut buf = RecordBatchBuf::new();
        for (k, v) in records {
            buf.push(1, *k, *v, [], &RecordMeta::default());
        }
        buf
    }

    fn ids() -> Ids {
        Ids {
            registered: vec![
                ("t-value".into(), 1),
                ("t-key".into(), 2),
                ("com.x.User".into(), 3),
                ("t-com.x.Order".into(), 4),
            ],
            names: [(3, "com.x.User".into()), (4, "com.x.Order".into())].into(),
        }
    }

    fn errors(r: Result<(), Invalid>) -> Vec<i32> {
        match r {
            Ok(()) => Vec::new(),
            Err(Invalid::Records(e)) => e.into_iter().map(|(i, _)| i).collect(),
            Err(Invalid::NoRegistry(m)) => panic!("{m}"),
        }
    }

    #[test]
    fn topic_name_strategy_checks_each_record() {
        let ids = ids();
        let (one, two, three) = (framed(1), framed(2), framed(3));
        let short: &[u8] = &[0, 0, 0];
        let wrong_magic: &[u8] = &[1, 0, 0, 0, 1];
        let buf = batch(&[
            (None, Some(&one)),
            (None, Some(&one)),
            (None, Some(&two)),
            (None, Some(short)),
            (None, Some(wrong_magic)),
            (None, None),
            (None, Some(b"")),
            (None, Some(&three)),
        ]);
        let r = rules(None, Some(SubjectStrategy::TopicName));
        assert_eq!(
            errors(check("t", &r, &buf, Some(&ids))),
            vec![2, 3, 4, 6, 7]
        );
        let r = rules(Some(SubjectStrategy::TopicName), None);
        let buf = batch(&[(Some(&two), None), (None, Some(b"x")), (Some(&one), None)]);
        assert_eq!(errors(check("t", &r, &buf, Some(&ids))), vec![2]);
    }

    #[test]
    fn record_name_strategies_use_the_schemas_name() {
        let ids = ids();
        let (one, three, four) = (framed(1), framed(3), framed(4));
        let buf = batch(&[
            (None, Some(&three)),
            (None, Some(&four)),
            (None, Some(&one)),
        ]);
        let r = rules(None, Some(SubjectStrategy::RecordName));
        assert_eq!(errors(check("t", &r, &buf, Some(&ids))), vec![1, 2]);
        let r = rules(None, Some(SubjectStrategy::TopicRecordName));
        assert_eq!(errors(check("t", &r, &buf, Some(&ids))), vec![0, 2]);
    }

    #[test]
    fn without_a_registry_every_batch_is_refused() {
        let one = framed(1);
        let buf = batch(&[(None, Some(&one))]);
        let r = rules(None, Some(SubjectStrategy::TopicName));
        assert!(matches!(
            check("t", &r, &buf, None),
            Err(Invalid::NoRegistry(_))
        ));
    }

    #[test]
    fn messages_say_what_is_wrong() {
        let ids = ids();
        let nine = framed(9);
        let buf = batch(&[(Some(b"k"), Some(&nine))]);
        let r = rules(
            Some(SubjectStrategy::TopicName),
            Some(SubjectStrategy::TopicName),
        );
        let Err(Invalid::Records(e)) = check("t", &r, &buf, Some(&ids)) else {
            panic!("refused");
        };
        assert_eq!(e.len(), 1);
        assert!(
            e[0].1.contains("The key does not start with magic byte 0"),
            "{}",
            e[0].1
        );
        let r = rules(None, Some(SubjectStrategy::TopicName));
        let Err(Invalid::Records(e)) = check("t", &r, &buf, Some(&ids)) else {
            panic!("refused");
        };
        assert_eq!(
            e[0].1,
            "The value's schema id 9 is not registered under subject t-value"
        );
    }
}

/// The cost of the check beside the decode every produced batch goes
/// through: `cargo test --release -p es-kafka --lib
/// schema_validation_cost -- --ignored --nocapture`. Prints figures,
/// asserts nothing about speed.
#[cfg(test)]
mod cost {
    use std::time::Instant;

    use es_storage::record::RecordMeta;
    use es_test_support::batch::KafkaBatch;

    use super::*;
    use crate::codec::batch::{BatchDecoder, DecodeLimits};
    use crate::config::TopicConfig;

    /// A registry of one subject, behind a lock as es-registry's is.
    #[derive(Debug)]
    struct Locked(parking_lot::RwLock<Vec<(String, i32)>>);

    impl SchemaIds for Locked {
        fn is_registered(&self, subject: &str, id: i32) -> bool {
            self.0.read().iter().any(|(s, i)| s == subject && *i == id)
        }
        fn record_name(&self, _: i32) -> Option<String> {
            Some("shop.Order".into())
        }
    }

    #[test]
    #[ignore = "timing: run with --release -- --ignored --nocapture"]
    fn schema_validation_cost() {
        const RECORDS: usize = 64;
        const ROUNDS: u32 = 20_000;
        let mut value = vec![MAGIC_BYTE, 0, 0, 0, 1];
        value.resize(256, b'x');
        let mut batch = KafkaBatch::new();
        for _ in 0..RECORDS {
            batch.record(1, None, Some(&value), &[], &RecordMeta::default());
        }
        let bytes = batch.encode();
        let ids = Locked(parking_lot::RwLock::new(vec![("t-value".into(), 1)]));
        let plain = TopicConfig::default().rules();
        let mut validated = plain;
        validated.value_schema = Some(SubjectStrategy::TopicName);
        let mut decoder = BatchDecoder::new();
        let mut summaries = Vec::new();
        let limits = DecodeLimits::produce(64 * 1024 * 1024);
        let mut time = |rules: &TopicRules| {
            let start = Instant::now();
            for _ in 0..ROUNDS {
                summaries.clear();
                let mut buf = RecordBatchBuf::new();
                decoder
                    .decode(&bytes, &mut buf, &limits, &mut summaries)
                    .expect("decodes");
                if rules.validates_schemas() {
                    check("t", rules, &buf, Some(&ids)).expect("valid");
                }
            }
            start.elapsed().as_nanos() as f64 / (ROUNDS as f64 * RECORDS as f64)
        };
        // Warm up, then alternate to share the machine's noise.
        time(&plain);
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            off.push(time(&plain));
            on.push(time(&validated));
        }
        let best = |v: &[f64]| v.iter().cloned().fold(f64::MAX, f64::min);
        println!(
            "decode only: {:.1} ns/record; decode + TopicNameStrategy check: {:.1} ns/record ({RECORDS} records of 256 bytes per batch, best of 3 x {ROUNDS} batches)",
            best(&off),
            best(&on)
        );
    }
}
