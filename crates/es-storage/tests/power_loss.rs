//! Simulated power loss over seeds: a seeded workload on the simulated file
//! system (`power_loss/workload.rs`: produce, rolls, compaction and its
//! segment swap, retention, DeleteRecords, group commits, leader epochs,
//! producer state, transactions, the journal, atomic metadata files, clean
//! closes) loses power at a seeded sync or operation, keeping only fsynced
//! bytes and sometimes a torn prefix of the unsynced ones; recovery is then
//! checked against the workload's model (`power_loss/model.rs`): every
//! acknowledged record at its offset with its bytes, nothing never written
//! visible, no partial record, the newest value of every durable key kept
//! by compaction, nothing retention deleted back, recovering twice the
//! same state, the files in the documented format.
//!
//! In two seeds of ten an fsync fails instead (`SimFs::fail_sync_at`) and
//! the workload goes on: the failed commit must be neither acknowledged
//! nor visible, its partition fenced, the others unaffected, and the
//! power loss at the end must find what was durable.
//!
//! `cargo test` runs a few hundred seeds. More:
//! `ES_POWER_LOSS_SEEDS=N` (how many), `ES_POWER_LOSS_FIRST_SEED=S` (from
//! which), `ES_POWER_LOSS_SECONDS=T` (stop after T seconds),
//! `ES_POWER_LOSS_SEED=S` (one seed alone, with its operations printed on
//! a violation); `scripts/power-loss` runs them in a release build.

mod common;
#[path = "power_loss/model.rs"]
mod model;
#[path = "power_loss/workload.rs"]
mod workload;

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use common::{env_u64, seeds_from_env};

use es_storage::fs::Fs;
use es_storage::simfs::{SimFs, Tear};

/// Seeds `cargo test` runs.
const CI_SEEDS: u64 = 300;

#[test]
fn power_loss_over_seeds() {
    let (alone, first, count) = seeds_from_env(
        "ES_POWER_LOSS_SEED",
        "ES_POWER_LOSS_FIRST_SEED",
        "ES_POWER_LOSS_SEEDS",
        CI_SEEDS,
    );
    let budget = env_u64("ES_POWER_LOSS_SECONDS").map(std::time::Duration::from_secs);
    let progress = count >= 10_000;
    let started = Instant::now();
    let (mut run, mut failed) = (0u64, Vec::new());
    let mut totals = workload::Outcome::default();
    for seed in first..first.saturating_add(count) {
        if budget.is_some_and(|b| started.elapsed() >= b) {
            break;
        }
        run += 1;
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            workload::run_seed(seed, alone.is_some())
        }));
        match r {
            Ok(Ok(o)) => {
                totals.ops += o.ops;
                totals.crashes_at_sync += o.crashes_at_sync;
                totals.failed_syncs += o.failed_syncs;
                totals.recoveries += o.recoveries;
                totals.acked += o.acked;
                totals.write_outs += o.write_outs;
            }
            Ok(Err(v)) => {
                println!(
                    "VIOLATION seed {seed} (replay alone: ES_POWER_LOSS_SEED={seed} cargo test -p es-storage --test power_loss -- --nocapture):"
                );
                for line in &v {
                    println!("  {line}");
                }
                failed.push(seed);
            }
            Err(_) => {
                println!(
                    "VIOLATION seed {seed} panicked (replay alone: ES_POWER_LOSS_SEED={seed} cargo test -p es-storage --test power_loss -- --nocapture)"
                );
                failed.push(seed);
            }
        }
        if progress && run % 10_000 == 0 {
            let s = started.elapsed().as_secs_f64();
            println!(
                "power-loss: {run} seeds, {} violations, {:.1} seeds/s",
                failed.len(),
                run as f64 / s
            );
        }
    }
    // Odd seeds run under an open-file bound of 1 to 8 (`workload.rs`):
    // their files were closed and reopened.
    if run >= 2 && alone.is_none() {
        let reopens = es_storage::metrics::storage_metrics().file_reopens.get();
        assert!(reopens > 0, "no file was reopened under the bound");
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "power-loss: seeds run {run} (from {first}), violations {}, {:.1} seeds/s, {:.1} s; {} operations, {} crashes at an armed sync, {} failed fsyncs gone on from, {} recoveries checked, {} records acknowledged, {} logs written out for a shared flush",
        failed.len(),
        run as f64 / secs.max(1e-9),
        secs,
        totals.ops,
        totals.crashes_at_sync,
        totals.failed_syncs,
        totals.recoveries,
        totals.acked,
        totals.write_outs
    );
    assert!(failed.is_empty(), "violations at seeds {failed:?}");
    if alone.is_none() && count >= 100 {
        assert!(
            totals.crashes_at_sync > 0 && totals.recoveries > run,
            "the seeds crashed at no armed sync: the test tested little"
        );
        // Grouped worlds with zeros ahead share device flushes (syncer.rs).
        if es_storage::syncer::grouping_supported() {
            assert!(totals.write_outs > 0, "no world took the write-out pass");
        }
    }
}

/// Seeds that found a violation, each with what it was; they run in every
/// `cargo test` whatever range the main test runs. A seed's workload
/// depends on the test's code, so later changes to the workload make it
/// draw another one: each bug found also has its own deterministic test
/// (named in the commit that fixed it).
const REGRESSIONS: &[(u64, &str)] = &[
    (
        3,
        "compaction dropped the first records: the log start moved after a restart",
    ),
    (27, "the same"),
    (31, "the same"),
    (41, "the same"),
    (
        201,
        "DeleteRecords past unsynced records, a power loss: the log start lost",
    ),
    (
        705,
        "the same, and records acknowledged after it hidden by the next open",
    ),
    (
        680,
        "an abort marker below the log start not replayed: a transaction open for good",
    ),
    (
        1582,
        "a produced batch never served whole when the index is sparser than set",
    ),
    (
        96,
        "a compaction swap failed part way and the partition went on",
    ),
    (754, "the same"),
    (
        5916,
        "a new directory's parent fsync failed: files acknowledged in it lost",
    ),
    (17797, "the same"),
    (23725, "a fenced partition (failed swap) closed cleanly"),
];

#[test]
fn seeds_that_found_violations_pass() {
    for &(seed, what) in REGRESSIONS {
        if let Err(v) = workload::run_seed(seed, false) {
            panic!("seed {seed} ({what}) fails again: {v:#?}");
        }
    }
}

/// The crash image at an armed sync keeps what the process wrote and had
/// not synced, so that a torn prefix of it can survive (an image taken at
/// the crash would have dropped it, and every tear would equal none).
#[test]
fn a_crash_at_a_sync_can_keep_a_torn_prefix_of_unsynced_appends() {
    let fs = SimFs::new();
    let f = fs.create_new(std::path::Path::new("/f")).expect("create");
    fs.sync_dir(std::path::Path::new("/")).expect("sync dir");
    f.write_all_at(b"durable", 0).expect("write");
    f.sync_data().expect("sync");
    f.write_all_at(b"-unsynced-tail", 7).expect("write");
    fs.crash_at_sync(fs.sync_count() + 1);
    assert!(f.sync_data().is_err(), "the armed crash fires");
    let none = fs
        .crash_image(Tear::None)
        .read_all(std::path::Path::new("/f"))
        .expect("file");
    assert_eq!(none, b"durable");
    let mut lengths = std::collections::BTreeSet::new();
    for seed in 1..64 {
        let img = fs.crash_image(Tear::Prefix(seed));
        let got = img.read_all(std::path::Path::new("/f")).expect("file");
        assert!(
            b"durable-unsynced-tail".starts_with(&got),
            "a prefix: {got:?}"
        );
        assert!(got.len() >= 7, "durable bytes are kept");
        lengths.insert(got.len());
    }
    assert!(
        lengths.len() > 3,
        "tears keep prefixes of many lengths: {lengths:?}"
    );
}
