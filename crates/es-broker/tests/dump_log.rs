//! `es-broker dump-log`: the built binary reads a partition written by
//! es-storage, prints every record, index entry and batch note, and reports
//! a flipped byte and a torn tail with the file and byte position, exiting
//! non-zero.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use es_storage::{Partition, PartitionConfig, RealFs, RecordBatchBuf, RecordMeta, Storage};

const RECORDS: u64 = 60;

fn dump(args: &[&str], path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .arg("dump-log")
        .args(args)
        .arg(path)
        .output()
        .expect("run es-broker dump-log")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes a partition of `RECORDS` records in two segments (one gzip batch
/// of five noted at offset 10) and returns its directory.
fn write_partition(root: &Path) -> std::path::PathBuf {
    let dir = root.join("topics/t/0");
    let storage = Storage::new(Arc::new(RealFs));
    let cfg = PartitionConfig {
        segment_bytes: 4 * 1024,
        ..PartitionConfig::default()
    };
    let p = Partition::open(&storage, dir.clone(), cfg).expect("open");
    let meta = RecordMeta::default();
    for i in 0..RECORDS {
        let mut b = RecordBatchBuf::new();
        let value = format!("value-{i}-{}", "x".repeat(100)).into_bytes();
        if i == 10 {
            b.push_batch_start(1_000 + i as i64, Some(b"k"), Some(&value), [], &meta, 1);
            for j in 1..5 {
                b.push(1_000 + j, Some(b"k"), Some(&value), [], &meta);
            }
            b.end_batch();
        } else {
            b.push(1_000 + i as i64, Some(b"k"), Some(&value), [], &meta);
        }
        let info = p.append(&mut b).expect("append");
        p.wait_durable(info.last_offset + 1).expect("durable");
    }
    p.close().expect("close");
    dir
}

/// (offset, position) of each `record` line of a dump of one segment.
fn record_lines(out: &str) -> Vec<(u64, u64)> {
    let field = |line: &str, name: &str| -> u64 {
        line.split(' ')
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {line:?}"))
    };
    out.lines()
        .filter(|l| l.starts_with("record "))
        .map(|l| (field(l, "offset="), field(l, "position=")))
        .collect()
}

#[test]
fn dumps_a_partition_and_reports_corruption_where_it_is() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = write_partition(tmp.path());
    let total = RECORDS + 4;

    let o = dump(&[], &dir);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let recs = record_lines(&out);
    assert_eq!(recs.len() as u64, total, "{out}");
    assert!(recs.iter().map(|r| r.0).eq(0..total), "{out}");
    assert!(
        out.lines().filter(|l| l.starts_with("segment ")).count() >= 2,
        "{out}"
    );
    assert!(
        out.contains("index relative_offset=0 offset=0 position=0"),
        "{out}"
    );
    assert!(
        out.contains("batch offset=10 last_offset=14 codec=gzip"),
        "{out}"
    );
    assert!(out.contains("key_len=1 value_len="), "{out}");
    assert!(out.contains(" 0 corrupt, 0 warnings"), "{out}");

    let quiet = dump(&["--verify-only"], &dir);
    let qout = stdout(&quiet);
    assert!(quiet.status.success(), "{qout}");
    assert!(!qout.contains("record "), "{qout}");
    assert!(qout.contains(&format!("{total} records")), "{qout}");

    // Flip a byte in the value of the first segment's fourth record.
    let log = dir.join("00000000000000000000.log");
    let first = dump(&["--records"], &log);
    let positions = record_lines(&stdout(&first));
    let (_, pos4) = positions[3];
    let (_, pos5) = positions[4];
    let mut bytes = std::fs::read(&log).expect("read log");
    let flip = ((pos4 + pos5) / 2) as usize;
    bytes[flip] ^= 0x40;
    std::fs::write(&log, &bytes).expect("write log");
    let bad = dump(&["--verify-only"], &dir);
    let bout = stdout(&bad);
    assert!(!bad.status.success(), "{bout}");
    assert!(
        bout.contains(&format!(
            "CORRUPT {} at byte {pos4}: corrupt record: CRC-32C mismatch",
            log.display()
        )),
        "{bout}"
    );
    // The index entries past the bad record point at records the scan never reached.
    bytes[flip] ^= 0x40;

    // A log cut inside its last record: a torn tail at that record's start.
    let (_, last) = *positions.last().expect("records");
    bytes.truncate(last as usize + 7);
    std::fs::write(&log, &bytes).expect("write log");
    let torn = dump(&["--records"], &log);
    let tout = stdout(&torn);
    assert!(!torn.status.success(), "{tout}");
    assert!(
        tout.contains(&format!(
            "CORRUPT {} at byte {last}: torn tail",
            log.display()
        )),
        "{tout}"
    );
    assert_eq!(record_lines(&tout).len(), positions.len() - 1, "{tout}");
}

#[test]
fn not_a_segment_is_an_error() {
    let tmp = tempfile::tempdir().expect("tmp");
    let o = dump(&[], tmp.path());
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("holds no segment"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
