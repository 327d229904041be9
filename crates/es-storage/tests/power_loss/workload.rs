//! The seeded workload of the power-loss test and its recoveries.
//!
//! One seed draws everything: the partitions (segment size, index spacing,
//! flush policy, cleanup policy, producers), the sync pool's mode, and a
//! sequence of operations: produce (batches of several sizes, keys, null
//! values, headers, compressed-batch notes, idempotent and transactional
//! producers, markers), unsynced appends, group commits across
//! partitions, flushes, compaction, retention (by time, size, with cold
//! copies), DeleteRecords, leader epochs, clean close and reopen, journal
//! appends and folds, atomic metadata writes, clock steps, and power losses
//! in the middle. The machine loses power at a seeded sync (armed on the
//! simulated file system) or at a seeded operation; only fsynced bytes
//! survive, sometimes with a torn prefix of the unsynced ones. Each
//! recovery is checked against the models (`model.rs`), twice (a second
//! power loss right after recovery must give the same state), and the
//! files against the format's rules.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use es_storage::compaction::{CompactionPolicy, RetentionPolicy};
use es_storage::fs::Fs;
use es_storage::journal::Journal;
use es_storage::meta;
use es_storage::prealloc::{Preallocator, Sizing};
use es_storage::reclaim::{Pace, Reclaimer};
use es_storage::record::ProducerInfo;
use es_storage::simfs::{SimFs, Tear};
use es_storage::{
    AppendOutcome, FlushPolicy, ManualClock, Partition, PartitionConfig, ProducerAppend,
    RecordBatchBuf, RecordMeta, Storage, StorageError, SyncMode, SyncPool,
};
use es_storage::{CachingFs, Clock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::common::format_rules;
use super::model::{check_partition, serve, Idem, JModel, MModel, PModel, Rec, Served, Txn};

/// How long a group commit may take before the test calls it hung.
const LIMIT: Duration = Duration::from_secs(30);
/// Where the partitions live.
const TOPIC_DIR: &str = "/data/topics/t";
const JOURNAL: &str = "/data/producers.journal";
const JOURNAL_SNAPSHOT: &str = "/data/producers.json";
const META_FILES: [&str; 2] = ["/data/topics/t/topic.json", "/data/groups/g.json"];

/// What one seed did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    pub ops: u64,
    /// Power losses at an armed sync.
    pub crashes_at_sync: u64,
    /// Armed fsync failures that happened (the workload went on after them).
    pub failed_syncs: u64,
    /// Recoveries checked (each power loss, and each clean reopen).
    pub recoveries: u64,
    /// Records acknowledged.
    pub acked: u64,
    /// Logs written out for a shared device flush (the grouped pool's
    /// write-out pass, `syncer.rs`).
    pub write_outs: u64,
}

/// The workload stops: the machine is down (an armed crash fired) or a
/// violation was recorded.
struct Stop;

#[derive(Clone, Copy, Debug)]
struct Kind {
    compact: bool,
    delete: bool,
    idem: bool,
    txn: bool,
}

struct Part {
    dir: PathBuf,
    cfg: PartitionConfig,
    kind: Kind,
    p: Option<Arc<Partition>>,
    m: PModel,
    /// Idempotent batches appended and not yet acknowledged.
    idem_pending: Vec<(ProducerAppend, u64, u64)>,
    /// A marker appended and not yet acknowledged: (commit, offset, first).
    marker_pending: Option<(bool, u64, u64)>,
    /// Fenced or closed by an armed fsync failure: no more operations until
    /// the next power loss.
    dead: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct JSnap {
    through_seq: Option<u64>,
    count: usize,
}

struct World {
    seed: u64,
    rng: StdRng,
    fs: SimFs,
    clock: Arc<ManualClock>,
    grouped: bool,
    storage: Storage,
    parts: Vec<Part>,
    journal: Option<(Journal, JModel)>,
    /// The journal failed an armed fsync: no more appends until a power loss.
    journal_dead: bool,
    /// The sync armed to fail, on the current disk.
    fail_at: Option<u64>,
    metas: Vec<MModel>,
    violations: Vec<String>,
    trace: Vec<String>,
    out: Outcome,
}

/// Runs seed `seed`; returns what it did, or the violations found (with
/// the trace of operations when `verbose`).
pub fn run_seed(seed: u64, verbose: bool) -> Result<Outcome, Vec<String>> {
    let mut w = World::new(seed);
    w.run();
    if w.violations.is_empty() {
        w.out.write_outs += w.fs.write_out_count();
        Ok(w.out)
    } else {
        let mut v = std::mem::take(&mut w.violations);
        if verbose {
            v.push(format!("operations: {:#?}", w.trace));
        }
        Err(v)
    }
}

fn pick<T: Copy>(rng: &mut StdRng, xs: &[T]) -> T {
    xs[rng.gen_range(0..xs.len())]
}

impl World {
    fn new(seed: u64) -> World {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = SimFs::new();
        let clock = ManualClock::new(1_700_000_000_000);
        let grouped = rng.gen_bool(0.5) && es_storage::syncer::grouping_supported();
        let nparts = rng.gen_range(1..=4);
        let mut parts = Vec::new();
        for i in 0..nparts {
            let compact = rng.gen_bool(0.4);
            let delete = !compact || rng.gen_bool(0.3);
            let kind = Kind {
                compact,
                delete,
                idem: !compact && rng.gen_bool(0.5),
                txn: !compact && rng.gen_bool(0.4),
            };
            let cfg = PartitionConfig {
                segment_bytes: pick(&mut rng, &[1024, 2048, 4096, 16384, 262_144]),
                index_interval_bytes: pick(&mut rng, &[64, 512, 4096]),
                flush: FlushPolicy {
                    every_records: if rng.gen_bool(0.2) {
                        rng.gen_range(2..=20)
                    } else {
                        1
                    },
                    ..FlushPolicy::default()
                },
                // Zeros ahead (served by the clock steps) in half the worlds.
                preallocate: seed % 2 == 1,
                ..PartitionConfig::default()
            };
            let mut m = PModel::default();
            if kind.idem {
                m.idem = Some(Idem {
                    pid: 2000 + i as i64,
                    epoch: rng.gen_range(0..3),
                    next_seq: 0,
                    last_acked: None,
                });
            }
            if kind.txn {
                m.txn = Some(Txn {
                    pid: 3000 + i as i64,
                    epoch: rng.gen_range(0..3),
                    ..Txn::default()
                });
            }
            parts.push(Part {
                dir: PathBuf::from(format!("{TOPIC_DIR}/{i}")),
                cfg,
                kind,
                p: None,
                m,
                idem_pending: Vec::new(),
                marker_pending: None,
                dead: false,
            });
        }
        let journal = rng.gen_bool(0.5);
        let storage = make_storage(&fs, &clock, grouped, fd_budget(seed));
        let mut w = World {
            seed,
            rng,
            fs,
            clock,
            grouped,
            storage,
            parts,
            journal: None,
            journal_dead: false,
            fail_at: None,
            metas: vec![MModel::default(); META_FILES.len()],
            violations: Vec::new(),
            trace: Vec::new(),
            out: Outcome::default(),
        };
        if journal {
            w.journal = Some((
                // Placeholder replaced by the first open.
                match Journal::open(&w.fs, Path::new(JOURNAL)) {
                    Ok((j, _)) => j,
                    Err(e) => panic!("seed {seed}: journal open on an empty disk: {e}"),
                },
                JModel::default(),
            ));
        }
        w
    }

    fn violation(&mut self, v: String) {
        self.violations.push(v);
    }

    /// Whether the sync armed to fail has come.
    fn injected(&self) -> bool {
        self.fail_at.is_some_and(|k| self.fs.sync_count() >= k)
    }

    /// An operation failed: expected once the machine is down or an armed
    /// fsync failure has happened, a violation otherwise.
    fn failed(&mut self, what: &str, e: &StorageError) -> Stop {
        // What a failed fsync may answer: the error itself, or the fence.
        let expected = matches!(
            e,
            StorageError::Fenced(_) | StorageError::Closed | StorageError::Io(_)
        );
        let fault = self.fs.has_crashed() || (self.injected() && expected);
        if !fault {
            self.violation(format!("{what} failed with no fault injected: {e}"));
        }
        self.trace.push(format!("  failed: {what}: {e}"));
        Stop
    }

    /// [`World::failed`] for an operation of partition `i`: after an armed
    /// fsync failure, a partition that answers Fenced or Closed takes no
    /// more operations until the next power loss.
    fn failed_part(&mut self, i: usize, what: &str, e: &StorageError) -> Stop {
        let stop = self.failed(&format!("partition {i}: {what}"), e);
        if matches!(e, StorageError::Fenced(_) | StorageError::Closed) {
            self.parts[i].dead = true;
        }
        stop
    }

    /// After a commit of partition `i` from `base` failed its fsync: nothing
    /// of it is acknowledged or visible, and the partition is fenced.
    fn check_fenced_commit(&mut self, i: usize, base: u64, e: &StorageError) {
        if self.fs.has_crashed() || !self.injected() {
            return;
        }
        let p = self.part(i);
        if !matches!(e, StorageError::Fenced(_)) {
            self.violation(format!(
                "partition {i}: a failed commit answered {e}, not Fenced"
            ));
        }
        if p.durable_end() > base {
            self.violation(format!(
                "partition {i}: durable end {} passed the failed commit from {base}",
                p.durable_end()
            ));
        }
        if self.parts[i].cfg.flush.every_records == 1 && p.high_watermark() > base {
            self.violation(format!(
                "partition {i}: high watermark {} shows the failed commit from {base}",
                p.high_watermark()
            ));
        }
        let mut b = RecordBatchBuf::new();
        b.push(
            0,
            None,
            Some(b"after a failed fsync"),
            std::iter::empty(),
            &RecordMeta::default(),
        );
        match p.append(&mut b) {
            Err(StorageError::Fenced(_)) => {}
            other => self.violation(format!(
                "partition {i}: an append after a failed fsync got {other:?}, not Fenced"
            )),
        }
        self.parts[i].dead = true;
    }

    fn run(&mut self) {
        if self.open_all_fresh().is_err() {
            return;
        }
        let ops: u64 = self.rng.gen_range(20..=120);
        self.arm(ops);
        for step in 0..ops {
            if self.fs.has_crashed() || !self.violations.is_empty() {
                break;
            }
            self.out.ops += 1;
            // An operation failing after an armed fsync failure goes on.
            if self.step(ops - step).is_err()
                && (self.fs.has_crashed() || !self.violations.is_empty())
            {
                break;
            }
        }
        if self.injected() {
            self.out.failed_syncs += 1;
        }
        if !self.violations.is_empty() {
            return;
        }
        if self.fs.has_crashed() {
            self.out.crashes_at_sync += 1;
        }
        let _ = self.power_loss(true);
    }

    /// Arms a power loss (seven runs in ten) or a failed fsync (two in
    /// ten) at one of the next syncs, drawn so that it usually falls within
    /// the `left` operations.
    fn arm(&mut self, left: u64) {
        let k = self.fs.sync_count() + self.rng.gen_range(1..=(4 * left).max(1));
        match self.rng.gen_range(0..10) {
            0..=6 => self.fs.crash_at_sync(k),
            7..=8 => {
                self.fs.fail_sync_at(k);
                self.fail_at = Some(k);
            }
            _ => {}
        }
    }

    fn step(&mut self, left: u64) -> Result<(), Stop> {
        let n = self.parts.len();
        let i = self.rng.gen_range(0..n);
        let kind = self.parts[i].kind;
        let op = self.rng.gen_range(0..100);
        let partition_op = !matches!(op, 49..=53 | 75..=93);
        if (partition_op && self.parts[i].dead) || (matches!(op, 75..=80) && self.journal_dead) {
            return Ok(());
        }
        match op {
            0..=29 => self.produce(i, true, Prod::Plain),
            30..=36 => self.produce(i, false, Prod::Plain),
            37..=42 if kind.idem => self.produce(i, true, Prod::Idem),
            43..=48 if kind.txn => self.txn_step(i),
            49..=53 if self.grouped && n > 1 => self.group_commit(),
            54..=56 => self.flush(i),
            57..=61 if kind.compact => self.compact(i),
            62..=66 if kind.delete => self.retention(i),
            67..=68 => self.delete_records(i),
            69..=71 => self.epoch(i),
            72..=74 => self.close_reopen(i),
            75..=80 if self.journal.is_some() => self.journal_step(),
            81..=85 => self.meta_write(),
            86..=90 => {
                let ms = pick(
                    &mut self.rng,
                    &[10u64, 1_000, 60_000, 3_600_000, 86_400_000],
                );
                self.trace.push(format!("clock +{ms} ms"));
                self.clock.advance(Duration::from_millis(ms));
                let filled = self.storage.prealloc.run_queued();
                if filled > 0 {
                    self.trace.push(format!("zeros ahead of {filled} segments"));
                }
                Ok(())
            }
            91..=93 => {
                self.power_loss(false)?;
                self.arm(left);
                Ok(())
            }
            _ if !self.parts[i].dead => self.produce(i, true, Prod::Plain),
            _ => Ok(()),
        }
    }

    /// Opens every partition on the fresh disk, and the metadata files' dirs.
    fn open_all_fresh(&mut self) -> Result<(), Stop> {
        for i in 0..self.parts.len() {
            let part = &self.parts[i];
            match Partition::open(&self.storage, part.dir.clone(), part.cfg) {
                Ok(p) => self.parts[i].p = Some(p),
                Err(e) => {
                    self.violation(format!("opening partition {i} on an empty disk: {e}"));
                    return Err(Stop);
                }
            }
        }
        Ok(())
    }

    fn part(&self, i: usize) -> Arc<Partition> {
        self.parts[i].p.clone().unwrap_or_else(|| {
            panic!(
                "seed {}: partition {i} is open; operations: {:#?}",
                self.seed, self.trace
            )
        })
    }

    /// After an operation: what the partition has made durable is acknowledged.
    fn refresh(&mut self, i: usize) {
        let Some(p) = self.parts[i].p.clone() else {
            return;
        };
        let d = p.durable_end();
        let part = &mut self.parts[i];
        let m = &mut part.m;
        m.acked_end = m.acked_end.max(d);
        let acked = m.acked_end;
        self.out.acked = self.out.acked.max(acked);
        while part.idem_pending.first().is_some_and(|b| b.2 < acked) {
            let b = part.idem_pending.remove(0);
            if let Some(idem) = m.idem.as_mut() {
                idem.last_acked = Some(b);
            }
        }
        if let Some(t) = m.txn.as_mut() {
            if t.open_first.is_some_and(|f| f < acked) {
                t.open_acked = true;
            }
            if let Some((commit, off, first)) = part.marker_pending {
                if off < acked {
                    if !commit {
                        t.aborted.push((first, off));
                    }
                    part.marker_pending = None;
                    t.marker_unsure = false;
                }
            }
        }
    }

    fn value(&mut self, big_ok: bool) -> Vec<u8> {
        let len = match self.rng.gen_range(0..20) {
            0 => 0,
            1..=12 => self.rng.gen_range(1..80),
            13..=17 => self.rng.gen_range(80..600),
            18 => self.rng.gen_range(600..3000),
            _ if big_ok => self.rng.gen_range(20_000..70_000),
            _ => self.rng.gen_range(600..3000),
        };
        let mut v = vec![0u8; len];
        self.rng.fill(&mut v[..]);
        v
    }

    fn produce(&mut self, i: usize, sync: bool, prod: Prod) -> Result<(), Stop> {
        let p = self.part(i);
        let kind = self.parts[i].kind;
        let count: u32 = match self.rng.gen_range(0..10) {
            0..=4 => 1,
            5..=7 => self.rng.gen_range(2..=5),
            _ => self.rng.gen_range(6..=30),
        };
        let base = p.log_end_offset();
        if base != self.parts[i].m.written_end {
            self.violation(format!(
                "partition {i}: log end {base}, but {} were written",
                self.parts[i].m.written_end
            ));
            return Err(Stop);
        }
        let (producer, transactional) = match prod {
            Prod::Plain => (None, false),
            Prod::Idem => {
                let s = self.parts[i]
                    .m
                    .idem
                    .as_ref()
                    .map(|s| (s.pid, s.epoch, s.next_seq));
                (s, false)
            }
            Prod::Txn => {
                let s = self.parts[i]
                    .m
                    .txn
                    .as_ref()
                    .map(|s| (s.pid, s.epoch, s.next_seq));
                (s, true)
            }
        };
        // A batch the producer compressed: records a..=b of this append.
        let noted = if self.rng.gen_bool(0.25) {
            let a = self.rng.gen_range(0..count);
            let b = self.rng.gen_range(a..count);
            Some((a, b, self.rng.gen_range(1..=4u8)))
        } else {
            None
        };
        let now = self.clock.now_ms();
        let mut batch = RecordBatchBuf::new();
        let mut recs = Vec::new();
        for j in 0..count {
            let key = if kind.compact {
                Some(format!("k{}", self.rng.gen_range(0..6)).into_bytes())
            } else if self.rng.gen_bool(0.3) {
                Some(format!("key-{}", self.rng.gen_range(0..1000)).into_bytes())
            } else {
                None
            };
            let tombstone = if kind.compact {
                self.rng.gen_bool(0.12)
            } else {
                self.rng.gen_bool(0.02)
            };
            let value = if tombstone {
                None
            } else {
                Some(self.value(count <= 5))
            };
            let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = if self.rng.gen_bool(0.15) {
                vec![
                    (b"h1".to_vec(), Some(b"v1".to_vec())),
                    (b"h2".to_vec(), None),
                ]
            } else {
                Vec::new()
            };
            let meta = RecordMeta {
                producer: producer.map(|(pid, epoch, seq)| ProducerInfo {
                    producer_id: pid,
                    producer_epoch: epoch,
                    sequence: seq.wrapping_add(j as i32),
                }),
                transactional,
                control: false,
            };
            let ts = now + i64::from(j);
            let hs = headers.iter().map(|(k, v)| (k.as_slice(), v.as_deref()));
            match noted {
                Some((a, _, codec)) if a == j => {
                    batch.push_batch_start(ts, key.as_deref(), value.as_deref(), hs, &meta, codec)
                }
                _ => batch.push(ts, key.as_deref(), value.as_deref(), hs, &meta),
            }
            if noted.is_some_and(|(_, b, _)| b == j) {
                batch.end_batch();
            }
            recs.push(Rec {
                ts,
                key,
                value,
                headers,
                meta,
            });
        }
        let part = &mut self.parts[i];
        for (j, r) in recs.into_iter().enumerate() {
            part.m.recs.insert(base + j as u64, r);
        }
        part.m.written_end = base + u64::from(count);
        for (first, b) in batch.produced() {
            part.m.batches.insert(base + u64::from(*first), *b);
        }
        let append = producer.map(|(pid, epoch, seq)| ProducerAppend {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: count,
            transactional,
        });
        self.trace.push(format!(
            "p{i}: append {count} at {base} ({prod:?}, sync {sync}, noted {noted:?})"
        ));
        let info = match p.append_producer(&mut batch, append.as_ref()) {
            Ok(AppendOutcome::Appended(info)) => info,
            Ok(AppendOutcome::Duplicate(info)) => {
                self.violation(format!(
                    "partition {i}: a fresh append answered as a retry {info:?}"
                ));
                return Err(Stop);
            }
            Err(e) => {
                // A failed append leaves nothing (its bytes are cut off, or
                // the partition is fenced): the log end is where it was.
                self.parts[i].m.written_end = p.log_end_offset();
                return Err(self.failed_part(i, "append", &e));
            }
        };
        if info.base_offset != base || info.last_offset != base + u64::from(count) - 1 {
            self.violation(format!(
                "partition {i}: append got {info:?}, expected from {base}"
            ));
            return Err(Stop);
        }
        if let Some(a) = append {
            let m = &mut self.parts[i].m;
            match prod {
                Prod::Idem => {
                    if let Some(s) = m.idem.as_mut() {
                        s.next_seq = s.next_seq.wrapping_add(count as i32);
                    }
                    self.parts[i]
                        .idem_pending
                        .push((a, info.base_offset, info.last_offset));
                }
                Prod::Txn => {
                    if let Some(t) = m.txn.as_mut() {
                        t.next_seq = t.next_seq.wrapping_add(count as i32);
                        t.open_first.get_or_insert(info.base_offset);
                    }
                }
                Prod::Plain => {}
            }
        }
        if sync {
            if let Err(e) = p.wait_durable(info.last_offset + 1) {
                self.check_fenced_commit(i, base, &e);
                return Err(self.failed_part(i, "wait_durable", &e));
            }
        }
        self.refresh(i);
        Ok(())
    }

    fn txn_step(&mut self, i: usize) -> Result<(), Stop> {
        let open = self.parts[i]
            .m
            .txn
            .as_ref()
            .is_some_and(|t| t.open_first.is_some());
        if !open || self.rng.gen_bool(0.5) {
            let sync = self.rng.gen_bool(0.8);
            return self.produce(i, sync, Prod::Txn);
        }
        let p = self.part(i);
        let commit = self.rng.gen_bool(0.5);
        let (pid, epoch, first) = {
            let t = self.parts[i]
                .m
                .txn
                .as_ref()
                .expect("a transactional partition");
            (t.pid, t.epoch, t.open_first.unwrap_or(0))
        };
        let base = p.log_end_offset();
        let ts = self.clock.now_ms();
        let kind: i16 = if commit { 1 } else { 0 };
        let mut key = vec![0u8; 4];
        key[2..].copy_from_slice(&kind.to_be_bytes());
        let value = vec![0u8; 6];
        {
            let part = &mut self.parts[i];
            part.m.recs.insert(
                base,
                Rec {
                    ts,
                    key: Some(key),
                    value: Some(value),
                    headers: Vec::new(),
                    meta: RecordMeta {
                        producer: Some(ProducerInfo {
                            producer_id: pid,
                            producer_epoch: epoch,
                            sequence: -1,
                        }),
                        transactional: true,
                        control: true,
                    },
                },
            );
            part.m.written_end = base + 1;
            if let Some(t) = part.m.txn.as_mut() {
                t.marker_unsure = true;
            }
        }
        self.trace
            .push(format!("p{i}: marker commit={commit} at {base}"));
        let info = match p.append_marker(pid, epoch, commit, 0, ts) {
            Ok(info) => info,
            Err(e) => {
                self.parts[i].m.written_end = p.log_end_offset();
                return Err(self.failed_part(i, "marker", &e));
            }
        };
        if info.base_offset != base {
            self.violation(format!(
                "partition {i}: marker at {}, expected {base}",
                info.base_offset
            ));
            return Err(Stop);
        }
        {
            let part = &mut self.parts[i];
            part.marker_pending = Some((commit, base, first));
            if let Some(t) = part.m.txn.as_mut() {
                t.open_first = None;
                t.open_acked = false;
            }
        }
        if let Err(e) = p.wait_durable(base + 1) {
            self.check_fenced_commit(i, base, &e);
            return Err(self.failed_part(i, "wait_durable", &e));
        }
        self.refresh(i);
        Ok(())
    }

    /// Appends to several partitions while the grouped pool's first sync is
    /// held, so that the others gather behind it and share the next one.
    fn group_commit(&mut self) -> Result<(), Stop> {
        // Partitions that fsync before acknowledging (the others need no sync).
        let eligible: Vec<usize> = (0..self.parts.len())
            .filter(|&i| self.parts[i].cfg.flush.every_records == 1 && !self.parts[i].dead)
            .collect();
        if eligible.len() < 2 {
            return Ok(());
        }
        let mut chosen: Vec<usize> = eligible
            .iter()
            .copied()
            .filter(|_| self.rng.gen_bool(0.7))
            .collect();
        if chosen.len() < 2 {
            chosen = eligible;
        }
        self.trace.push(format!("group commit over {chosen:?}"));
        // No seal may be pending: one would run on this thread at the gate.
        for &i in &chosen {
            if let Err(e) = self.part(i).flush() {
                return Err(self.failed_part(i, "flush", &e));
            }
            self.refresh(i);
        }
        let (tx, rx) = mpsc::channel();
        self.fs.hold_syncs();
        let mut waiting = 0;
        let mut stop = false;
        for (k, &i) in chosen.iter().enumerate() {
            let p = self.part(i);
            if self.produce(i, false, Prod::Plain).is_err() {
                stop = true;
                break;
            }
            let tx = tx.clone();
            p.when_durable(
                p.log_end_offset(),
                Box::new(move |r| {
                    let _ = tx.send((i, r.map_err(|e| e.to_string())));
                }),
            );
            waiting += 1;
            if k == 0 && !self.fs.await_held_syncs(1, LIMIT) {
                self.fs.release_syncs();
                self.violation("group commit: the pool's first sync never came".into());
                return Err(Stop);
            }
        }
        self.fs.release_syncs();
        for _ in 0..waiting {
            match rx.recv_timeout(LIMIT) {
                Ok((i, Ok(()))) => self.refresh(i),
                Ok((i, Err(e))) => {
                    if !self.fs.has_crashed() && !self.injected() {
                        self.violation(format!("partition {i}: group commit failed: {e}"));
                    } else if !self.fs.has_crashed() {
                        if !e.contains("fenced") {
                            self.violation(format!(
                                "partition {i}: a failed group commit answered {e}, not Fenced"
                            ));
                        }
                        self.parts[i].dead = true;
                    }
                    stop = true;
                }
                Err(_) => {
                    self.violation("group commit: a durability callback never came".into());
                    return Err(Stop);
                }
            }
        }
        if stop {
            return Err(Stop);
        }
        Ok(())
    }

    fn flush(&mut self, i: usize) -> Result<(), Stop> {
        self.trace.push(format!("p{i}: flush"));
        if let Err(e) = self.part(i).flush() {
            return Err(self.failed_part(i, "flush", &e));
        }
        self.refresh(i);
        Ok(())
    }

    fn compact(&mut self, i: usize) -> Result<(), Stop> {
        let policy = CompactionPolicy {
            delete_retention_ms: pick(&mut self.rng, &[0, 1000, 1_000_000_000]),
            min_cleanable_dirty_ratio: pick(&mut self.rng, &[0.0, 0.3, 0.5]),
            ..CompactionPolicy::default()
        };
        self.parts[i].m.compacted = true;
        self.trace.push(format!("p{i}: compact {policy:?}"));
        let now = self.clock.now_ms();
        if let Err(e) = self.part(i).compact(&policy, now) {
            return Err(self.failed_part(i, "compaction", &e));
        }
        self.refresh(i);
        Ok(())
    }

    fn retention(&mut self, i: usize) -> Result<(), Stop> {
        let p = self.part(i);
        let policy = RetentionPolicy {
            retention_ms: self
                .rng
                .gen_bool(0.5)
                .then(|| pick(&mut self.rng, &[1_000i64, 60_000, 3_600_000, 100_000_000])),
            retention_bytes: self
                .rng
                .gen_bool(0.6)
                .then(|| self.rng.gen_range(2_000..40_000)),
            cold_dir: self
                .rng
                .gen_bool(0.3)
                .then(|| PathBuf::from(format!("/cold/t/{i}"))),
        };
        let m = &mut self.parts[i].m;
        m.start_bound = m.start_bound.max(p.log_end_offset());
        self.trace.push(format!("p{i}: retention {policy:?}"));
        match p.enforce_retention(&policy, self.clock.now_ms()) {
            Ok(r) => {
                let m = &mut self.parts[i].m;
                m.start_acked = m.start_acked.max(r.log_start_offset);
            }
            Err(e) => return Err(self.failed_part(i, "retention", &e)),
        }
        self.refresh(i);
        Ok(())
    }

    fn delete_records(&mut self, i: usize) -> Result<(), Stop> {
        let p = self.part(i);
        let (start, hw) = (p.log_start_offset(), p.high_watermark());
        if hw <= start {
            return Ok(());
        }
        let to = self.rng.gen_range(start..=hw);
        let m = &mut self.parts[i].m;
        m.start_bound = m.start_bound.max(to);
        self.trace.push(format!("p{i}: delete records before {to}"));
        match p.delete_records_before(to) {
            Ok(low) => {
                let m = &mut self.parts[i].m;
                m.start_acked = m.start_acked.max(low);
            }
            Err(e) => return Err(self.failed_part(i, "DeleteRecords", &e)),
        }
        self.refresh(i);
        Ok(())
    }

    fn epoch(&mut self, i: usize) -> Result<(), Stop> {
        let p = self.part(i);
        let m = &mut self.parts[i].m;
        let e = m.epochs_tried.last().map_or(0, |x| x + 1) + self.rng.gen_range(0..2);
        m.epochs_tried.insert(e);
        let start = p.log_end_offset();
        self.trace
            .push(format!("p{i}: leader epoch {e} at {start}"));
        if let Err(err) = p.assign_leader_epoch(e) {
            return Err(self.failed_part(i, "leader epoch", &err));
        }
        let m = &mut self.parts[i].m;
        m.epochs.retain(|&(x, s)| x < e && s < start);
        m.epochs.push((e, start));
        self.refresh(i);
        Ok(())
    }

    /// Closes a partition cleanly and opens it again: nothing may be lost.
    fn close_reopen(&mut self, i: usize) -> Result<(), Stop> {
        let p = self.part(i);
        self.trace.push(format!("p{i}: close and reopen"));
        if let Err(e) = p.close() {
            self.parts[i].dead = true;
            return Err(self.failed(&format!("partition {i}: close"), &e));
        }
        self.refresh(i);
        self.parts[i].p = None;
        drop(p);
        let closed = format_rules::check_partition(&self.fs, &self.parts[i].dir, true);
        if self.fs.has_crashed() {
            return Err(Stop);
        }
        for c in closed {
            self.violation(format!("after a clean close: {c}"));
        }
        let part = &self.parts[i];
        let (p, rep) = match Partition::open_with_report(&self.storage, part.dir.clone(), part.cfg)
        {
            Ok(x) => x,
            Err(e) => {
                self.parts[i].dead = true;
                return Err(self.failed_part(i, "reopen", &e));
            }
        };
        self.out.recoveries += 1;
        if !rep.clean_shutdown {
            self.violation(format!("partition {i}: a clean close was not seen as one"));
        }
        let max_bytes = pick(&mut self.rng, &[1usize, 300, 5000, 1 << 20]);
        match serve(&p, max_bytes) {
            Ok(s) => {
                let v = check_partition(
                    &format!("partition {i} (clean reopen)"),
                    &self.parts[i].m,
                    &p,
                    &s,
                    true,
                );
                self.violations.extend(v);
            }
            Err(e) => {
                if !self.fs.has_crashed() {
                    self.violation(format!("partition {i} (clean reopen): {e}"));
                }
            }
        }
        self.parts[i].p = Some(p);
        if self.violations.is_empty() {
            Ok(())
        } else {
            Err(Stop)
        }
    }

    fn journal_step(&mut self) -> Result<(), Stop> {
        let fold = self.rng.gen_bool(0.2);
        let n = self.rng.gen_range(1..=3);
        let now = self.clock.now_ms();
        let mut pads = Vec::new();
        for _ in 0..n {
            pads.push(self.rng.gen_range(0..200));
        }
        let Some((j, jm)) = self.journal.as_mut() else {
            return Ok(());
        };
        if fold {
            self.trace.push("journal: fold".into());
            if let Err(e) = j.sync_all() {
                self.journal_dead = true;
                return Err(self.failed("journal: sync", &e));
            }
            jm.acked = jm.tried.len();
            let snap = JSnap {
                through_seq: j.last_seq(),
                count: jm.tried.len(),
            };
            let prev: Option<JSnap> = meta::read_json(&self.fs, Path::new(JOURNAL_SNAPSHOT))
                .ok()
                .flatten();
            let snap = JSnap {
                through_seq: snap.through_seq.or(prev.and_then(|p| p.through_seq)),
                ..snap
            };
            if let Err(e) = meta::write_json(&self.fs, Path::new(JOURNAL_SNAPSHOT), &snap) {
                self.journal_dead = true;
                return Err(self.failed("journal: snapshot", &e));
            }
            if let Err(e) = j.truncate() {
                self.journal_dead = true;
                return Err(self.failed("journal: truncate", &e));
            }
            return Ok(());
        }
        let payloads: Vec<Vec<u8>> = pads
            .iter()
            .enumerate()
            .map(|(k, pad)| {
                let mut p = format!("j{}:", jm.tried.len() + k).into_bytes();
                p.resize(p.len() + pad, b'.');
                p
            })
            .collect();
        jm.tried.extend(payloads.iter().cloned());
        self.trace.push(format!("journal: append {n}"));
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        match j.append(&refs, now) {
            Ok(_) => {
                jm.acked = jm.tried.len();
                Ok(())
            }
            Err(e) => {
                self.journal_dead = true;
                Err(self.failed("journal: append", &e))
            }
        }
    }

    fn meta_write(&mut self) -> Result<(), Stop> {
        let f = self.rng.gen_range(0..META_FILES.len());
        let pad = self.rng.gen_range(0..3000);
        let m = &mut self.metas[f];
        m.tried += 1;
        let v = m.tried;
        let doc = serde_json::json!({"v": v, "pad": "x".repeat(pad)});
        let path = Path::new(META_FILES[f]);
        self.trace.push(format!("meta: {} v{v}", path.display()));
        if let Some(dir) = path.parent() {
            if let Err(e) = es_storage::fs::create_dir_durable(&self.fs, dir) {
                return Err(self.failed("meta: mkdir", &StorageError::Io(e)));
            }
        }
        match meta::write_json(&self.fs, path, &doc) {
            Ok(()) => {
                self.metas[f].acked = v;
                Ok(())
            }
            Err(e) => Err(self.failed("meta: write", &e)),
        }
    }

    /// The power goes: everything is recovered from what the disk kept,
    /// checked, recovered again and compared. `last`: the final one (the
    /// recovered partitions also get the retry and next-offset probes).
    fn power_loss(&mut self, last: bool) -> Result<(), Stop> {
        let tear = if self.rng.gen_bool(0.5) {
            Tear::None
        } else {
            Tear::Prefix(self.rng.gen())
        };
        self.trace.push(format!("power loss ({tear:?})"));
        for part in &mut self.parts {
            part.p = None;
            part.dead = false;
        }
        self.fail_at = None;
        self.journal_dead = false;
        let journal = self.journal.take();
        let jm = journal.map(|(j, jm)| {
            drop(j);
            jm
        });
        let img = self.fs.crash_image(tear);
        self.out.write_outs += self.fs.write_out_count();
        self.fs = img;
        self.storage = make_storage(&self.fs, &self.clock, self.grouped, fd_budget(self.seed));
        let max_bytes = pick(&mut self.rng, &[1usize, 300, 5000, 1 << 20]);
        let first = self.recover(max_bytes, jm.clone());
        if !self.violations.is_empty() {
            return Err(Stop);
        }
        // Power lost again right after recovery: the same state again.
        for part in &mut self.parts {
            part.p = None;
        }
        self.journal = None;
        self.out.write_outs += self.fs.write_out_count();
        self.fs = self.fs.crash_image(Tear::None);
        self.storage = make_storage(&self.fs, &self.clock, self.grouped, fd_budget(self.seed));
        let second = self.recover(max_bytes, jm);
        if !self.violations.is_empty() {
            return Err(Stop);
        }
        for (i, (a, b)) in first.iter().zip(second.iter()).enumerate() {
            if a != b {
                self.violation(format!(
                    "partition {i}: recovering twice gives two states: {:?} vs {:?}",
                    summary(a),
                    summary(b)
                ));
            }
        }
        if last {
            self.probe();
        } else {
            self.rebase(&second);
        }
        if self.violations.is_empty() {
            Ok(())
        } else {
            Err(Stop)
        }
    }

    /// Opens everything on the current disk and checks it; returns what
    /// each partition serves.
    fn recover(&mut self, max_bytes: usize, jm: Option<JModel>) -> Vec<Served> {
        self.out.recoveries += 1;
        let mut served = Vec::new();
        for i in 0..self.parts.len() {
            let part = &self.parts[i];
            let (p, rep) =
                match Partition::open_with_report(&self.storage, part.dir.clone(), part.cfg) {
                    Ok(x) => x,
                    Err(e) => {
                        self.violation(format!("partition {i}: recovery refused: {e}"));
                        return served;
                    }
                };
            for s in &rep.segments {
                if let Some((pos, why)) = &s.corrupt_at {
                    self.violation(format!(
                        "partition {i}: sealed segment {} reported corrupt at {pos} after a power loss: {why}",
                        s.base_offset
                    ));
                }
            }
            match serve(&p, max_bytes) {
                Ok(s) => {
                    let v =
                        check_partition(&format!("partition {i}"), &self.parts[i].m, &p, &s, false);
                    self.violations.extend(v);
                    served.push(s);
                }
                Err(e) => {
                    self.violation(format!("partition {i}: {e}"));
                    served.push(Served {
                        log_start: 0,
                        log_end: 0,
                        hw: 0,
                        lso: 0,
                        records: Vec::new(),
                        epochs: Vec::new(),
                        producers: String::new(),
                    });
                }
            }
            for f in format_rules::check_partition(&self.fs, &self.parts[i].dir, false) {
                self.violation(format!("format: {f}"));
            }
            self.parts[i].p = Some(p);
        }
        self.check_metas();
        if let Some(jm) = jm {
            self.recover_journal(jm);
        }
        served
    }

    fn check_metas(&mut self) {
        for (f, m) in self.metas.clone().iter().enumerate() {
            let path = Path::new(META_FILES[f]);
            if let Some(dir) = path.parent() {
                if self.fs.exists(dir) {
                    if let Err(e) = meta::remove_temp_files(&self.fs, dir) {
                        self.violation(format!(
                            "{}: temporary files not removed: {e}",
                            dir.display()
                        ));
                    }
                }
            }
            match meta::read_json::<serde_json::Value>(&self.fs, path) {
                Ok(None) if m.acked == 0 => {}
                Ok(None) => self.violation(format!(
                    "{}: gone, version {} was acknowledged",
                    path.display(),
                    m.acked
                )),
                Ok(Some(doc)) => {
                    let v = doc
                        .get("v")
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(0);
                    if v < m.acked || v > m.tried || v == 0 {
                        self.violation(format!(
                            "{}: version {v} after recovery; acknowledged {}, tried {}",
                            path.display(),
                            m.acked,
                            m.tried
                        ));
                    }
                }
                Err(e) => self.violation(format!(
                    "{}: unreadable after recovery: {e}",
                    path.display()
                )),
            }
        }
    }

    fn recover_journal(&mut self, mut jm: JModel) {
        let snap: Option<JSnap> = match meta::read_json(&self.fs, Path::new(JOURNAL_SNAPSHOT)) {
            Ok(s) => s,
            Err(e) => {
                self.violation(format!("journal snapshot unreadable: {e}"));
                return;
            }
        };
        let (j, rec) = match Journal::open(&self.fs, Path::new(JOURNAL)) {
            Ok(x) => x,
            Err(e) => {
                self.violation(format!("journal recovery refused: {e}"));
                return;
            }
        };
        let snap = snap.unwrap_or_default();
        if let Some(s) = snap.through_seq {
            j.ensure_next_seq(s + 1);
        }
        let after: Vec<_> = rec
            .entries
            .iter()
            .filter(|e| snap.through_seq.is_none_or(|s| e.seq > s))
            .collect();
        let count = snap.count + after.len();
        if count < jm.acked || count > jm.tried.len() {
            self.violation(format!(
                "journal: {count} entries recovered; {} acknowledged, {} tried",
                jm.acked,
                jm.tried.len()
            ));
        }
        for (k, e) in after.iter().enumerate() {
            if jm.tried.get(snap.count + k) != Some(&e.payload) {
                self.violation(format!(
                    "journal: entry {} (seq {}) is not what was written",
                    snap.count + k,
                    e.seq
                ));
                break;
            }
        }
        jm.tried.truncate(count);
        jm.acked = count;
        self.journal = Some((j, jm));
    }

    /// After the final recovery: a retry of each producer's last
    /// acknowledged batch is recognised, and the next append continues at
    /// the log end.
    fn probe(&mut self) {
        for i in 0..self.parts.len() {
            let Some(p) = self.parts[i].p.clone() else {
                continue;
            };
            let start = p.log_start_offset();
            let pending = self.parts[i].idem_pending.len();
            if let Some((a, base, last)) = self.parts[i].m.idem.as_ref().and_then(|s| s.last_acked)
            {
                if base >= start && pending + 2 < es_storage::producers::BATCHES_KEPT {
                    let mut b = RecordBatchBuf::new();
                    for k in 0..a.record_count {
                        b.push(
                            0,
                            None,
                            Some(b"retry"),
                            std::iter::empty(),
                            &RecordMeta {
                                producer: Some(ProducerInfo {
                                    producer_id: a.producer_id,
                                    producer_epoch: a.producer_epoch,
                                    sequence: a.base_sequence.wrapping_add(k as i32),
                                }),
                                ..RecordMeta::default()
                            },
                        );
                    }
                    match p.append_producer(&mut b, Some(&a)) {
                        Ok(AppendOutcome::Duplicate(info))
                            if info.base_offset == base && info.last_offset == last => {}
                        other => self.violation(format!(
                            "partition {i}: a retry of the acknowledged batch at [{base}, {last}] got {other:?}"
                        )),
                    }
                }
            }
            let end = p.log_end_offset();
            let mut b = RecordBatchBuf::new();
            b.push(
                0,
                None,
                Some(b"after"),
                std::iter::empty(),
                &RecordMeta::default(),
            );
            match p.append(&mut b) {
                Ok(info) if info.base_offset == end => {}
                other => self.violation(format!(
                    "partition {i}: the first append after recovery got {other:?}, log end {end}"
                )),
            }
        }
    }

    /// The recovered state becomes the model the workload goes on from.
    fn rebase(&mut self, served: &[Served]) {
        for (i, s) in served.iter().enumerate() {
            let Some(p) = self.parts[i].p.clone() else {
                continue;
            };
            let part = &mut self.parts[i];
            let m = &mut part.m;
            let kept: std::collections::BTreeSet<u64> = s.records.iter().map(|r| r.0).collect();
            m.recs.retain(|o, _| kept.contains(o));
            m.written_end = s.log_end;
            m.acked_end = s.log_end;
            m.start_acked = s.log_start;
            m.start_bound = s.log_start;
            m.epochs = s.epochs.clone();
            let ps = p.producer_state();
            if let Some(idem) = m.idem.as_mut() {
                match ps.producers.get(&idem.pid) {
                    Some(e) => {
                        idem.epoch = e.epoch;
                        idem.next_seq =
                            e.last_seq().map_or(0, es_storage::producers::next_sequence);
                        idem.last_acked = e.batches.back().map(|r| {
                            (
                                ProducerAppend {
                                    producer_id: idem.pid,
                                    producer_epoch: e.epoch,
                                    base_sequence: r.first_seq,
                                    record_count: (r.last_seq - r.first_seq + 1) as u32,
                                    transactional: false,
                                },
                                r.base_offset,
                                r.last_offset,
                            )
                        });
                    }
                    None => idem.last_acked = None,
                }
            }
            if let Some(t) = m.txn.as_mut() {
                let e = ps.producers.get(&t.pid);
                t.open_first = e.and_then(|e| e.txn_first_offset);
                t.open_acked = t.open_first.is_some();
                t.marker_unsure = false;
                if let Some(e) = e {
                    t.epoch = e.epoch;
                    t.next_seq = e.last_seq().map_or(0, es_storage::producers::next_sequence);
                }
                t.aborted = ps
                    .aborted
                    .iter()
                    .filter(|a| a.producer_id == t.pid)
                    .map(|a| (a.first_offset, a.last_offset))
                    .collect();
            }
            part.idem_pending.clear();
            part.marker_pending = None;
        }
        for (f, m) in self.metas.iter_mut().enumerate() {
            let v = meta::read_json::<serde_json::Value>(&self.fs, Path::new(META_FILES[f]))
                .ok()
                .flatten()
                .and_then(|d| d.get("v").and_then(serde_json::Value::as_u64))
                .unwrap_or(0);
            m.acked = v;
            m.tried = m.tried.max(v);
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Prod {
    Plain,
    Idem,
    Txn,
}

/// Odd seeds run with the open-file bound (`es_storage::CachingFs`) of 1 to
/// 8 descriptors, so that files are closed and reopened between any two
/// operations; from the seed alone, so that the workload stays the same.
/// Its sweeps do not fsync (the group-commit step holds every fsync at the
/// simulated disk's gate while it appends): a dirty file waits for its
/// owner's fsync, the unit tests of `fd_cache.rs` cover the other way.
fn fd_budget(seed: u64) -> Option<usize> {
    (seed % 2 == 1).then_some(1 + (seed / 2 % 8) as usize)
}

fn make_storage(
    fs: &SimFs,
    clock: &Arc<ManualClock>,
    grouped: bool,
    fd_budget: Option<usize>,
) -> Storage {
    // One grouped thread: with two, which pass takes which partition (and so
    // the count of syncs a seed's crash point names) would vary run to run.
    let pool = if grouped {
        SyncPool::with_threads(SyncMode::Grouped, 1).unwrap_or_else(|_| SyncPool::per_partition())
    } else {
        SyncPool::per_partition()
    };
    let fs: Arc<dyn Fs> = match fd_budget {
        Some(b) => Arc::new(CachingFs::without_sync_eviction(Arc::new(fs.clone()), b)),
        None => Arc::new(fs.clone()),
    };
    // Small steps, so that the small segments of these worlds get zeros.
    let prealloc = Preallocator::manual(Sizing {
        start_bytes: 512,
        min_bytes: 256,
        max_bytes: 4096,
    });
    Storage::new(fs)
        .with_preallocator(prealloc)
        .with_sync_pool(pool)
        .with_reclaimer(Arc::new(Reclaimer::new(Pace::default())))
        .with_clock(clock.clone())
}

fn summary(s: &Served) -> String {
    format!(
        "start {} end {} hw {} lso {} records {} (first {:?}, last {:?}) epochs {:?}",
        s.log_start,
        s.log_end,
        s.hw,
        s.lso,
        s.records.len(),
        s.records.first().map(|r| r.0),
        s.records.last().map(|r| r.0),
        s.epochs
    )
}
