//! docs/protocol.md's coverage matrix must agree with the ApiVersions table
//! (`es_kafka::versions::SUPPORTED`, the single source of what es serves),
//! so that the document cannot drift from the code.
//!
//! The test parses every table row whose first cell is an api key and checks:
//! the keys run 0, 1, 2, … with none missing or repeated; each key the
//! kafka-protocol crate knows carries the crate's name for it; the "es"
//! column is exactly the advertised range (`min-max`) or `no` for an API es
//! does not advertise; and es never advertises past Kafka 4.4's newest version.

use std::collections::BTreeMap;

use es_kafka::kafka_protocol::messages::ApiKey;
use es_kafka::versions::{advertised, SUPPORTED};

/// One row of the matrix.
#[derive(Debug)]
struct Row {
    name: String,
    es: String,
    kafka: String,
}

fn matrix() -> BTreeMap<i16, Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/protocol.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.trim().split('|').map(str::trim).collect();
        // "| 0 | Produce | 0-13 | 0-13 | notes |" splits into 7 cells, the
        // first and last empty.
        if cells.len() < 6 || !cells[0].is_empty() {
            continue;
        }
        let Ok(key) = cells[1].parse::<i16>() else {
            continue;
        };
        let row = Row {
            name: cells[2].to_string(),
            es: cells[3].to_string(),
            kafka: cells[4].to_string(),
        };
        assert!(
            rows.insert(key, row).is_none(),
            "api key {key} is listed twice in docs/protocol.md"
        );
    }
    rows
}

/// Parses "a-b" or "a" at the start of a cell.
fn range(cell: &str) -> Option<(i16, i16)> {
    let first = cell.split_whitespace().next()?;
    match first.split_once('-') {
        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
        None => {
            let v = first.parse().ok()?;
            Some((v, v))
        }
    }
}

#[test]
fn the_coverage_matrix_agrees_with_the_versions_table() {
    let rows = matrix();
    assert!(!rows.is_empty(), "no matrix rows found in docs/protocol.md");
    let keys: Vec<i16> = rows.keys().copied().collect();
    let expected: Vec<i16> = (0..=*keys.last().unwrap_or(&0)).collect();
    assert_eq!(
        keys, expected,
        "the matrix lists every api key once, in order"
    );

    for (&key, row) in &rows {
        let known = ApiKey::try_from(key).ok();
        if let Some(k) = known {
            assert_eq!(row.name, format!("{k:?}"), "api key {key}'s name");
        }
        match known.and_then(advertised) {
            Some(a) => {
                assert_eq!(
                    range(&row.es),
                    Some((a.min, a.max)),
                    "{}: docs/protocol.md says {:?}, versions.rs advertises {}-{}",
                    row.name,
                    row.es,
                    a.min,
                    a.max
                );
                let (_, kafka_max) = range(&row.kafka).unwrap_or_else(|| {
                    panic!(
                        "{}: Kafka 4.4 column {:?} is not a range",
                        row.name, row.kafka
                    )
                });
                assert!(
                    a.max <= kafka_max,
                    "{} advertises v{} past Kafka 4.4's v{kafka_max}",
                    row.name,
                    a.max
                );
            }
            None => assert_eq!(
                row.es, "no",
                "{} is not advertised, so its es column must say no",
                row.name
            ),
        }
    }
    for a in SUPPORTED {
        assert!(
            rows.contains_key(&(a.key as i16)),
            "{:?} is advertised but missing from docs/protocol.md",
            a.key
        );
    }
}

#[test]
fn ranges_parse() {
    assert_eq!(range("0-13"), Some((0, 13)));
    assert_eq!(range("4-18 (broker, controller)"), Some((4, 18)));
    assert_eq!(range("0 (controller)"), Some((0, 0)));
    assert_eq!(range("no"), None);
    assert_eq!(range("removed"), None);
}
