//! Replication's storage side: a leader's records appended on a follower
//! at the leader's offsets end up byte for byte the same (and pass the
//! independent format checker), with the same producer state, batch marks
//! and leader epochs; truncation (within and across segments, crash-safe);
//! the epoch history across reopen and recovery; OffsetForLeaderEpoch as
//! Kafka's LeaderEpochFileCache tests have it; and the replicated high
//! watermark gating what readers see.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{mpsc, Arc};

use es_storage::epochs::EpochEntry;
use es_storage::fs::Fs;
use es_storage::simfs::{SimFs, Tear};
use es_storage::{
    Isolation, ManualClock, Partition, PartitionConfig, ProducerAppend, ReadBuf, RealFs,
    RecordBatchBuf, RecordIter, RecordMeta, Storage, StorageError,
};
use es_test_support::batch::producer_meta;

const TOPIC: &str = "t";
const NOW_MS: i64 = 1_700_000_000_000;

fn cfg() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 16 * 1024,
        ..PartitionConfig::default()
    }
}

fn storage(fs: Arc<dyn Fs>) -> Storage {
    Storage::new(fs).with_clock(ManualClock::new(NOW_MS))
}

/// `data/topics/t/0` under `root`, with the topic.json the checker wants.
fn partition_dir(fs: &dyn Fs, root: &Path) -> PathBuf {
    let tdir = root.join("data/topics").join(TOPIC);
    es_storage::fs::create_dir_durable(fs, &tdir).expect("mkdir");
    es_storage::meta::write_json(
        fs,
        &tdir.join("topic.json"),
        &serde_json::json!({"partitions": 1}),
    )
    .expect("topic.json");
    tdir.join("0")
}

fn open(fs: &Arc<dyn Fs>, dir: &Path) -> Arc<Partition> {
    Partition::open(&storage(fs.clone()), dir.to_path_buf(), cfg()).expect("open")
}

fn plain() -> RecordMeta {
    RecordMeta::default()
}

/// A leader's workload, through the produce path: plain records with and
/// without keys and headers, a tombstone, a compressed batch, idempotent
/// batches, a committed, an aborted and an open transaction with their
/// markers, and enough filler to roll segments and write index entries;
/// in leader epochs 0 and 3. Timestamps increase.
fn leader_workload(p: &Partition) {
    let mut ts = NOW_MS - 100_000;
    let mut next_ts = || {
        ts += 1;
        ts
    };
    p.assign_leader_epoch(0).expect("epoch 0");
    let mut b = RecordBatchBuf::new();
    b.push(next_ts(), Some(b"k1"), Some(b"v1"), [], &plain());
    b.push(next_ts(), None, Some(b"no key"), [], &plain());
    let h: [(&[u8], Option<&[u8]>); 2] = [(b"h1", Some(b"x")), (b"h2", None)];
    b.push(next_ts(), Some(b"k2"), Some(b"with headers"), h, &plain());
    b.push(next_ts(), Some(b"k1"), None, [], &plain()); // tombstone
    b.push(next_ts(), Some(b"k3"), Some(b""), [], &plain()); // empty value
    durable(p, p.append(&mut b).expect("plain"));
    // A gzip batch of three, then a zstd one of one.
    let mut b = RecordBatchBuf::new();
    b.push_batch_start(next_ts(), Some(b"c"), Some(b"c0"), [], &plain(), 1);
    b.push(next_ts(), Some(b"c"), Some(b"c1"), [], &plain());
    b.push(next_ts(), None, None, [], &plain());
    b.push_batch_start(next_ts(), None, Some(b"z"), [], &plain(), 4);
    b.end_batch();
    durable(p, p.append(&mut b).expect("compressed"));
    // Idempotent producer 7: two batches.
    for seq in [0, 3] {
        produce(p, 7, 0, seq, 3, false, &mut next_ts);
    }
    p.assign_leader_epoch(3).expect("epoch 3");
    assert!(
        p.assign_leader_epoch(2).is_ok(),
        "an older epoch is a no-op"
    );
    // Transactions: 9 commits, 10 aborts, 11 stays open.
    produce(p, 9, 1, 0, 2, true, &mut next_ts);
    produce(p, 10, 0, 0, 2, true, &mut next_ts);
    let m = p.append_marker(9, 1, true, 5, next_ts()).expect("commit");
    durable(p, m);
    let m = p.append_marker(10, 0, false, 5, next_ts()).expect("abort");
    durable(p, m);
    // Filler across segments (about 60 KiB), some of it compressed.
    for i in 0..40u32 {
        let mut b = RecordBatchBuf::new();
        let v = vec![b'a' + (i % 26) as u8; 300 + (i as usize * 13) % 400];
        if i % 4 == 0 {
            b.push_batch_start(next_ts(), Some(b"f"), Some(&v), [], &plain(), 3);
        } else {
            b.push(next_ts(), Some(b"f"), Some(&v), [], &plain());
        }
        for j in 0..3 {
            b.push(next_ts(), None, Some(&v[j..]), [], &plain());
        }
        durable(p, p.append(&mut b).expect("filler"));
    }
    produce(p, 11, 0, 0, 2, true, &mut next_ts);
    produce(p, 7, 0, 6, 1, false, &mut next_ts);
}

fn durable(p: &Partition, info: es_storage::AppendInfo) {
    p.wait_durable(info.last_offset + 1).expect("durable");
}

fn produce(
    p: &Partition,
    pid: i64,
    epoch: i16,
    seq: i32,
    n: u32,
    txn: bool,
    ts: &mut impl FnMut() -> i64,
) {
    let mut b = RecordBatchBuf::new();
    for i in 0..n {
        let meta = producer_meta(pid, epoch, seq + i as i32, txn);
        let v = format!("p{pid}-s{}", seq + i as i32);
        b.push(ts(), Some(b"pk"), Some(v.as_bytes()), [], &meta);
    }
    let a = ProducerAppend {
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: seq,
        record_count: n,
        transactional: txn,
    };
    match p.append_producer(&mut b, Some(&a)).expect("produce") {
        es_storage::AppendOutcome::Appended(i) => durable(p, i),
        other => panic!("expected an append, got {other:?}"),
    }
}

/// What a follower's fetch loop does with the storage API: reads the
/// leader from the follower's log end through a replica snapshot (up to
/// the leader's log end), cuts at epoch boundaries, pushes the records as
/// the produce path would (compressed batches noted), and appends them at
/// the leader's offsets with the leader's epoch. `max_bytes` per read.
/// Stops at `until` (exclusive) or the leader's end.
fn replicate(leader: &Partition, follower: &Partition, max_bytes: usize, until: u64) {
    let mut rb = ReadBuf::new();
    loop {
        let from = follower.log_end_offset();
        if from >= until.min(leader.log_end_offset()) {
            return;
        }
        let snap = leader.replica_snapshot(from);
        let view = snap.read_into(from, max_bytes, &mut rb).expect("read");
        assert!(!view.data.is_empty(), "records from {from}");
        let epoch = snap.epoch_at(from).expect("every record has an epoch");
        let stop = snap.next_epoch_start(from).unwrap_or(u64::MAX).min(until);
        // Whole produced batches only, as a leader encodes them: one cut
        // short by the read is left for the next round.
        let recs: Vec<_> = RecordIter::new(view.data)
            .map(|r| r.expect("valid record"))
            .take_while(|r| r.offset < stop)
            .collect();
        let mut take = recs.len();
        for (i, r) in recs.iter().enumerate() {
            if let Some(m) = view.batch_at(r.offset) {
                let last = r.offset + u64::from(m.last_offset_delta);
                if recs.last().is_some_and(|l| l.offset < last) && last < stop {
                    take = i;
                    break;
                }
            }
        }
        assert!(take > 0, "a read of {max_bytes} bytes holds a whole batch");
        let mut b = RecordBatchBuf::new();
        let mut offsets = Vec::new();
        let mut batch_end: Option<u64> = None;
        for r in &recs[..take] {
            let headers: Vec<(&[u8], Option<&[u8]>)> = r.headers().collect();
            if let Some(m) = view.batch_at(r.offset) {
                b.push_batch_start(r.timestamp_ms, r.key, r.value, headers, &r.meta, m.codec);
                batch_end = Some(r.offset + u64::from(m.last_offset_delta));
            } else {
                b.push(r.timestamp_ms, r.key, r.value, headers, &r.meta);
            }
            if batch_end == Some(r.offset) {
                b.end_batch();
                batch_end = None;
            }
            offsets.push(r.offset);
        }
        let info = follower
            .append_replica(&mut b, &offsets, epoch)
            .expect("append_replica");
        assert_eq!(info.base_offset, offsets[0]);
        follower
            .wait_durable(info.last_offset + 1)
            .expect("durable");
    }
}

/// Every record's bytes, by offset, read back through the partition.
fn record_bytes(p: &Partition) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = p.log_start_offset();
    loop {
        let c = p.read(next, 1 << 20).expect("read");
        if c.data.is_empty() {
            return out;
        }
        let mut it = RecordIter::new(&c.data);
        loop {
            let at = it.position();
            let Some(r) = it.next() else { break };
            let r = r.expect("valid");
            out.push((r.offset, c.data[at..at + r.encoded_len].to_vec()));
            next = r.offset + 1;
        }
    }
}

/// The `.log` files of a partition directory, in name order, concatenated.
fn log_files(fs: &dyn Fs, dir: &Path) -> Vec<u8> {
    let mut names: Vec<String> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for n in names {
        out.extend(std::fs::read(dir.join(n)).expect("read log"));
    }
    out
}

fn check_format(root: &Path) {
    let checker = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/tools/check-storage-format");
    assert!(checker.exists(), "format checker at {}", checker.display());
    let out = Command::new(checker)
        .arg(root.join("data"))
        .arg(TOPIC)
        .output()
        .expect("run checker");
    assert!(
        out.status.success(),
        "checker on {}: {}{}",
        root.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn e(epoch: i32, start_offset: u64) -> EpochEntry {
    EpochEntry {
        epoch,
        start_offset,
    }
}

#[test]
fn a_follower_log_is_the_leaders_byte_for_byte() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let (lroot, froot) = (tmp.path().join("leader"), tmp.path().join("follower"));
    let (ldir, fdir) = (partition_dir(&*fs, &lroot), partition_dir(&*fs, &froot));
    let leader = open(&fs, &ldir);
    let follower = open(&fs, &fdir);
    leader_workload(&leader);
    assert!(leader.segments().len() >= 3, "the workload rolls segments");
    replicate(&leader, &follower, 8000, u64::MAX);

    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(follower.durable_end(), leader.log_end_offset());
    let want = record_bytes(&leader);
    assert_eq!(record_bytes(&follower), want, "records read back");
    assert_eq!(
        log_files(&*fs, &fdir),
        log_files(&*fs, &ldir),
        "the segment files' records, concatenated"
    );
    assert_eq!(follower.leader_epochs(), leader.leader_epochs());
    assert_eq!(leader.leader_epochs()[0], e(0, 0));
    assert_eq!(leader.leader_epochs()[1].epoch, 3);
    // Producer state: sequences (duplicates answered alike), open and
    // aborted transactions, the LSO.
    let (ls, fs_) = (leader.producer_state(), follower.producer_state());
    assert_eq!(fs_.producers, ls.producers);
    assert_eq!(fs_.aborted, ls.aborted);
    assert_eq!(ls.aborted.len(), 1);
    assert_eq!(follower.last_stable_offset(), leader.last_stable_offset());
    assert!(
        leader.last_stable_offset() < leader.high_watermark(),
        "11 is open"
    );
    let retry = ProducerAppend {
        producer_id: 7,
        producer_epoch: 0,
        base_sequence: 3,
        record_count: 3,
        transactional: false,
    };
    let state = follower.producer_state();
    assert_eq!(state.check(&retry), leader.producer_state().check(&retry));
    assert!(matches!(
        state.check(&retry),
        Ok(es_storage::SeqCheck::Duplicate { .. })
    ));
    // Produced batch marks agree (what a fetch hands back as batches).
    let marks = |p: &Partition| -> Vec<_> {
        p.segments()
            .iter()
            .flat_map(|s| s.marks_from(0, usize::MAX))
            .collect()
    };
    assert!(marks(&leader).len() >= 10);
    assert_eq!(marks(&follower), marks(&leader));
    // Read-committed fetches list the same aborted transactions.
    let (a, b) = (
        leader.snapshot(0, Isolation::ReadCommitted),
        follower.snapshot(0, Isolation::ReadCommitted),
    );
    assert_eq!(
        b.aborted_between(0, b.last_stable_offset()),
        a.aborted_between(0, a.last_stable_offset())
    );
    leader.close().expect("close");
    follower.close().expect("close");
    check_format(&lroot);
    check_format(&froot);
    // After a restart both rebuild the same producer state.
    let (leader, follower) = (open(&fs, &ldir), open(&fs, &fdir));
    assert_eq!(follower.producer_state().producers, ls.producers);
    assert_eq!(leader.producer_state().producers, ls.producers);
    assert_eq!(follower.leader_epochs(), leader.leader_epochs());
}

#[test]
fn replica_appends_refuse_bad_offsets_and_stale_epochs() {
    let fs: Arc<dyn Fs> = Arc::new(SimFs::new());
    let p = open(&fs, Path::new("/d/topics/t/0"));
    let push = |n: usize| {
        let mut b = RecordBatchBuf::new();
        for i in 0..n {
            b.push(1, None, Some(format!("r{i}").as_bytes()), [], &plain());
        }
        b
    };
    let bad: [(&[u64], usize); 5] = [
        (&[], 0),
        (&[0, 1], 3),
        (&[0, 1, 2], 2),
        (&[3, 2], 2),
        (&[0, 0], 2),
    ];
    for (offsets, n) in bad {
        assert!(
            p.append_replica(&mut push(n), offsets, 0).is_err(),
            "{offsets:?} for {n}"
        );
    }
    assert!(
        p.append_replica(&mut push(1), &[0], -1).is_err(),
        "negative epoch"
    );
    assert_eq!(p.log_end_offset(), 0, "nothing written");
    assert!(p.leader_epochs().is_empty());
    // Gaps are fine, the epoch is assigned at the first offset.
    p.append_replica(&mut push(3), &[0, 2, 7], 4).expect("gaps");
    assert_eq!(p.log_end_offset(), 8);
    assert_eq!(p.leader_epochs(), vec![e(4, 0)]);
    assert!(
        p.append_replica(&mut push(1), &[7], 4).is_err(),
        "below the log end"
    );
    assert!(
        p.append_replica(&mut push(1), &[9], 3).is_err(),
        "an older epoch than the latest"
    );
    p.append_replica(&mut push(2), &[8, 20], 6)
        .expect("new epoch");
    assert_eq!(p.leader_epochs(), vec![e(4, 0), e(6, 8)]);
    p.wait_durable(21).expect("durable");
    let offsets: Vec<u64> = record_bytes(&p).iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![0, 2, 7, 8, 20]);
}

#[test]
fn a_follower_starting_past_offset_zero_keeps_segments_named_after_their_first_record() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let dir = partition_dir(&*fs, tmp.path());
    let p = open(&fs, &dir);
    let mut b = RecordBatchBuf::new();
    for i in 0..3 {
        b.push(1, None, Some(format!("r{i}").as_bytes()), [], &plain());
    }
    p.append_replica(&mut b, &[10, 11, 12], 0).expect("append");
    p.wait_durable(13).expect("durable");
    let bases: Vec<u64> = p.segments().iter().map(|s| s.base_offset).collect();
    assert_eq!(bases, vec![0, 10], "an empty segment 0, then one at 10");
    p.close().expect("close");
    check_format(tmp.path());
    let p = open(&fs, &dir);
    assert_eq!(p.log_end_offset(), 13);
    assert_eq!(p.leader_epochs(), vec![e(0, 10)]);
    let offsets: Vec<u64> = record_bytes(&p).iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![10, 11, 12]);
    // A restart at the leader's log start instead.
    p.truncate_fully_and_start_at(40).expect("restart at 40");
    assert_eq!(
        (p.log_start_offset(), p.log_end_offset(), p.durable_end()),
        (40, 40, 40)
    );
    assert!(p.leader_epochs().is_empty());
    let bases: Vec<u64> = p.segments().iter().map(|s| s.base_offset).collect();
    assert_eq!(bases, vec![40]);
    let mut b = RecordBatchBuf::new();
    b.push(1, None, Some(b"x"), [], &plain());
    p.append_replica(&mut b, &[40], 2).expect("append");
    p.wait_durable(41).expect("durable");
    p.close().expect("close");
    let p = open(&fs, &dir);
    assert_eq!((p.log_start_offset(), p.log_end_offset()), (40, 41));
    assert_eq!(p.leader_epochs(), vec![e(2, 40)]);
    check_format(tmp.path());
}

#[test]
fn truncation_within_and_across_segments_survives_a_reopen() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let ldir = partition_dir(&*fs, &tmp.path().join("leader"));
    let froot = tmp.path().join("follower");
    let fdir = partition_dir(&*fs, &froot);
    let pdir = partition_dir(&*fs, &tmp.path().join("prefix"));
    let leader = open(&fs, &ldir);
    leader_workload(&leader);
    let mut follower = open(&fs, &fdir);
    replicate(&leader, &follower, 1 << 20, u64::MAX);
    let all = record_bytes(&leader);
    let segs = follower.segments();
    assert!(segs.len() >= 3);
    // Inside the active segment, then across segment boundaries: into the
    // middle of the first segment.
    let cuts = [
        leader.log_end_offset() - 2,
        segs[1].base_offset + 3,
        segs[1].base_offset,
        5,
    ];
    let mut prev_segments = segs.len();
    for cut in cuts {
        follower.truncate_to(cut).expect("truncate");
        assert_eq!(follower.log_end_offset(), cut);
        assert_eq!(follower.durable_end(), cut);
        assert_eq!(follower.high_watermark(), cut);
        let kept: Vec<_> = all.iter().filter(|r| r.0 < cut).cloned().collect();
        assert_eq!(record_bytes(&follower), kept, "cut at {cut}");
        assert!(follower.segments().len() <= prev_segments);
        prev_segments = follower.segments().len();
        // The producer state is the one of a log that only ever had these
        // records (a replica of the prefix).
        let prefix = open(&fs, &pdir);
        prefix.truncate_to(0).expect("empty the prefix replica");
        replicate(&leader, &prefix, 1 << 20, cut);
        assert_eq!(prefix.log_end_offset(), cut);
        assert_eq!(
            follower.producer_state().producers,
            prefix.producer_state().producers,
            "producers after a cut at {cut}"
        );
        assert_eq!(
            follower.producer_state().aborted,
            prefix.producer_state().aborted
        );
        assert_eq!(follower.last_stable_offset(), prefix.last_stable_offset());
        assert_eq!(follower.leader_epochs(), prefix.leader_epochs());
        prefix.close().expect("close");
        // A reopen finds the same log; truncating at or past its end does
        // nothing.
        let (epochs, producers) = (follower.leader_epochs(), follower.producer_state());
        follower.close().expect("close");
        follower = open(&fs, &fdir);
        assert_eq!(follower.log_end_offset(), cut);
        assert_eq!(record_bytes(&follower), kept);
        assert_eq!(follower.leader_epochs(), epochs);
        assert_eq!(follower.producer_state().producers, producers.producers);
        follower.truncate_to(cut).expect("no-op");
        follower.truncate_to(cut + 100).expect("no-op");
        assert_eq!(follower.log_end_offset(), cut);
    }
    // Catch up again from the leader: identical to it.
    replicate(&leader, &follower, 8000, u64::MAX);
    assert_eq!(record_bytes(&follower), all);
    assert_eq!(follower.leader_epochs(), leader.leader_epochs());
    assert_eq!(
        follower.producer_state().producers,
        leader.producer_state().producers
    );
    follower.close().expect("close");
    check_format(&froot);
}

/// A follower on `fs` with every record of `leader`.
fn sim_follower(leader: &Partition, fs: &SimFs, dir: &Path) -> Arc<Partition> {
    let shared: Arc<dyn Fs> = Arc::new(fs.clone());
    let f = open(&shared, dir);
    replicate(leader, &f, 1 << 20, u64::MAX);
    f
}

#[test]
fn truncation_is_crash_safe_at_every_sync_point() {
    let lfs: Arc<dyn Fs> = Arc::new(SimFs::new());
    let leader = open(&lfs, Path::new("/leader/t/0"));
    leader_workload(&leader);
    let all = record_bytes(&leader);
    let end = leader.log_end_offset();
    let dir = PathBuf::from("/follower/t/0");
    // The dry run: where the cut goes, how many syncs the truncation makes,
    // and the state it leaves.
    let dry = SimFs::new();
    let f = sim_follower(&leader, &dry, &dir);
    let segs = f.segments();
    assert!(segs.len() >= 4, "{} segments", segs.len());
    let cut = segs[1].base_offset + 3;
    let before = dry.sync_count();
    f.truncate_to(cut).expect("truncate");
    let syncs = dry.sync_count() - before;
    assert!(syncs >= 6, "{syncs} sync points");
    let want_producers = f.producer_state().producers;
    let want_epochs = f.leader_epochs();
    let prefix =
        |n: u64| -> Vec<(u64, Vec<u8>)> { all.iter().filter(|r| r.0 < n).cloned().collect() };
    for k in 1..=syncs {
        for tear in [Tear::None, Tear::Prefix(k * 7919 + 1)] {
            let sim = SimFs::new();
            let f = sim_follower(&leader, &sim, &dir);
            sim.crash_at_sync(before + k);
            let _ = f.truncate_to(cut); // fails once the machine is "off"
            assert!(sim.has_crashed(), "k={k}: sync point reached");
            drop(f);
            let img: Arc<dyn Fs> = Arc::new(sim.crash_image(tear));
            let p = open(&img, &dir);
            let l = p.log_end_offset();
            assert!((cut..=end).contains(&l), "k={k} {tear:?}: log end {l}");
            assert_eq!(
                record_bytes(&p),
                prefix(l),
                "k={k} {tear:?}: a prefix of the old log"
            );
            let epochs = p.leader_epochs();
            assert!(
                epochs.iter().all(|e| e.start_offset <= l),
                "k={k}: {epochs:?}"
            );
            assert_eq!(&leader.leader_epochs()[..epochs.len()], &epochs[..]);
            // Truncating again finishes the job.
            p.truncate_to(cut).expect("truncate again");
            assert_eq!(record_bytes(&p), prefix(cut), "k={k} {tear:?}");
            assert_eq!(
                p.producer_state().producers,
                want_producers,
                "k={k} {tear:?}"
            );
            assert_eq!(p.leader_epochs(), want_epochs);
            p.close().expect("close");
            let again = open(&img, &dir);
            assert_eq!(again.log_end_offset(), cut, "k={k}: and stays so");
        }
    }
}

#[test]
fn the_epoch_history_survives_a_reopen_and_recovery_cuts_it() {
    let sim = SimFs::new();
    let fs: Arc<dyn Fs> = Arc::new(sim.clone());
    let dir = Path::new("/d/t/0");
    let p = open(&fs, dir);
    let append = |p: &Partition, n: usize, wait: bool| {
        let mut b = RecordBatchBuf::new();
        for i in 0..n {
            b.push(1, None, Some(format!("r{i}").as_bytes()), [], &plain());
        }
        let info = p.append(&mut b).expect("append");
        if wait {
            p.wait_durable(info.last_offset + 1).expect("durable");
        }
    };
    p.assign_leader_epoch(1).expect("epoch 1");
    append(&p, 10, true);
    p.assign_leader_epoch(2).expect("epoch 2");
    append(&p, 5, true);
    p.assign_leader_epoch(3).expect("epoch 3");
    assert_eq!(p.leader_epochs(), vec![e(1, 0), e(2, 10), e(3, 15)]);
    assert_eq!(p.latest_leader_epoch(), Some(3));
    assert_eq!(
        (p.epoch_at(9), p.epoch_at(10), p.epoch_at(15)),
        (Some(1), Some(2), Some(3))
    );
    let snap = p.snapshot(0, Isolation::ReadUncommitted);
    assert_eq!(snap.epoch_at(3), Some(1));
    assert_eq!(snap.next_epoch_start(3), Some(10));
    assert_eq!(snap.next_epoch_start(12), Some(15));
    assert_eq!(snap.next_epoch_start(15), None);
    // A clean reopen keeps it, including an epoch with no record yet.
    p.close().expect("close");
    let p = open(&fs, dir);
    assert_eq!(p.leader_epochs(), vec![e(1, 0), e(2, 10), e(3, 15)]);
    // Records of epoch 3 written but never synced, then epoch 4 assigned
    // after them: a crash loses the records; recovery drops epoch 4, which
    // starts beyond the recovered end, and keeps 3, which starts at it.
    append(&p, 5, false);
    p.assign_leader_epoch(4).expect("epoch 4");
    assert_eq!(p.leader_epochs().last(), Some(&e(4, 20)));
    let img: Arc<dyn Fs> = Arc::new(sim.crash_image(Tear::None));
    drop(p);
    let p = open(&img, dir);
    assert_eq!(p.log_end_offset(), 15);
    assert_eq!(p.leader_epochs(), vec![e(1, 0), e(2, 10), e(3, 15)]);
    // Retention and DeleteRecords move its start with the log start.
    p.delete_records_before(12).expect("delete records");
    assert_eq!(p.leader_epochs(), vec![e(2, 12), e(3, 15)]);
    p.close().expect("close");
    let p = open(&img, dir);
    assert_eq!(p.leader_epochs(), vec![e(2, 12), e(3, 15)]);
    // Retention by size deletes whole segments: the history follows.
    let small = PartitionConfig {
        segment_bytes: 1024,
        ..cfg()
    };
    let q = Partition::open(&storage(img.clone()), PathBuf::from("/r/t/0"), small).expect("open");
    let big = |p: &Partition, n: usize| {
        let mut b = RecordBatchBuf::new();
        for _ in 0..n {
            b.push(1, None, Some(&[b'b'; 100]), [], &plain());
        }
        durable(p, p.append(&mut b).expect("append"));
    };
    q.assign_leader_epoch(1).expect("epoch 1");
    for _ in 0..40 {
        big(&q, 1);
    }
    q.assign_leader_epoch(2).expect("epoch 2");
    for _ in 0..10 {
        big(&q, 1);
    }
    let report = q
        .enforce_retention(
            &es_storage::RetentionPolicy {
                retention_ms: None,
                retention_bytes: Some(3000),
                cold_dir: None,
            },
            NOW_MS,
        )
        .expect("retention");
    let start = report.log_start_offset;
    assert!(start > 0, "deleted segments: {report:?}");
    assert_eq!(q.log_start_offset(), start);
    let want = if start < 40 {
        vec![e(1, start), e(2, 40)]
    } else {
        vec![e(2, start)]
    };
    assert_eq!(q.leader_epochs(), want, "{report:?}");
}

/// Kafka's LeaderEpochFileCacheTest cases, through a partition: epochs are
/// assigned at the log end, so records are appended to reach each start.
#[test]
fn end_offsets_for_epochs_follow_kafkas_cache_tests() {
    let fs: Arc<dyn Fs> = Arc::new(SimFs::new());
    let filler = |p: &Partition, n: usize| {
        let mut b = RecordBatchBuf::new();
        for _ in 0..n {
            b.push(1, None, Some(b"x"), [], &plain());
        }
        durable(p, p.append(&mut b).expect("append"));
    };
    // shouldReturnUnsupportedIfNoEpochRecorded (and for -1).
    let p = open(&fs, Path::new("/a/t/0"));
    assert_eq!(p.end_offset_for_epoch(0), (-1, -1));
    assert_eq!(p.end_offset_for_epoch(-1), (-1, -1));
    // shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested:
    // (0, 10), (2, 13), (4, 17), log end 20.
    filler(&p, 10);
    p.assign_leader_epoch(0).expect("0");
    filler(&p, 3);
    p.assign_leader_epoch(2).expect("2");
    filler(&p, 4);
    p.assign_leader_epoch(4).expect("4");
    filler(&p, 3);
    assert_eq!(p.leader_epochs(), vec![e(0, 10), e(2, 13), e(4, 17)]);
    assert_eq!(p.end_offset_for_epoch(0), (0, 13));
    assert_eq!(p.end_offset_for_epoch(1), (0, 13));
    assert_eq!(p.end_offset_for_epoch(2), (2, 17));
    assert_eq!(p.end_offset_for_epoch(3), (2, 17));
    // shouldReturnLogEndOffsetIfLatestEpochRequested.
    assert_eq!(p.end_offset_for_epoch(4), (4, 20));
    // shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked.
    assert_eq!(p.end_offset_for_epoch(5), (-1, -1));
    // shouldReturnUndefinedOffsetIfUndefinedEpochRequested.
    assert_eq!(p.end_offset_for_epoch(-1), (-1, -1));
    // shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned.
    p.assign_leader_epoch(4).expect("again");
    assert_eq!(p.leader_epochs().last(), Some(&e(4, 17)));
    // shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch: (5, 11), (6, 12).
    let q = open(&fs, Path::new("/b/t/0"));
    filler(&q, 11);
    q.assign_leader_epoch(5).expect("5");
    filler(&q, 1);
    q.assign_leader_epoch(6).expect("6");
    filler(&q, 1);
    assert_eq!(q.end_offset_for_epoch(4), (4, 11));
    assert_eq!(q.end_offset_for_epoch(5), (5, 12));
    // shouldSupportEpochsThatDoNotStartFromZero / the follower side: an
    // epoch assigned by a replica append at its first offset.
    let r = open(&fs, Path::new("/c/t/0"));
    let mut b = RecordBatchBuf::new();
    b.push(1, None, Some(b"x"), [], &plain());
    r.append_replica(&mut b, &[6], 2).expect("append");
    assert_eq!(r.end_offset_for_epoch(2), (2, 7));
    assert_eq!(r.end_offset_for_epoch(1), (1, 6));
    // After truncation (the follower side of KIP-101): the epoch whose
    // records were cut is gone, and its end comes back with the log.
    p.truncate_to(15).expect("truncate");
    assert_eq!(p.leader_epochs(), vec![e(0, 10), e(2, 13)]);
    assert_eq!(p.end_offset_for_epoch(2), (2, 15));
    assert_eq!(p.end_offset_for_epoch(4), (-1, -1));
}

#[test]
fn truncating_at_the_log_end_drops_an_epoch_led_without_records() {
    // A broker led epoch 2 without writing anything, then follows a
    // leader whose log has epoch 1 up to the end: the leader says epoch 1
    // ends at the follower's log end, and the follower's entry for epoch
    // 2 must go although no record does (Kafka's truncateTo).
    let fs: Arc<dyn Fs> = Arc::new(SimFs::new());
    let p = open(&fs, Path::new("/e/t/0"));
    let mut b = RecordBatchBuf::new();
    b.push(1, None, Some(b"x"), [], &plain());
    p.append_replica(&mut b, &[0], 1).expect("append");
    p.assign_leader_epoch(2).expect("2");
    assert_eq!(p.leader_epochs(), vec![e(1, 0), e(2, 1)]);
    p.truncate_to(1).expect("truncate at the end");
    assert_eq!(p.log_end_offset(), 1);
    assert_eq!(p.leader_epochs(), vec![e(1, 0)]);
    assert_eq!(p.latest_leader_epoch(), Some(1));
    p.truncate_to(5).expect("past the end");
    assert_eq!(p.leader_epochs(), vec![e(1, 0)]);
}

#[test]
fn a_replicated_high_watermark_gates_what_readers_see() {
    let fs: Arc<dyn Fs> = Arc::new(SimFs::new());
    let p = open(&fs, Path::new("/d/t/0"));
    let append = |n: usize, wait: bool| -> u64 {
        let mut b = RecordBatchBuf::new();
        for i in 0..n {
            b.push(1, None, Some(format!("r{i}").as_bytes()), [], &plain());
        }
        let info = p.append(&mut b).expect("append");
        if wait {
            p.wait_durable(info.last_offset + 1).expect("durable");
        }
        info.last_offset + 1
    };
    let visible = |snap: &es_storage::LogSnapshot, from: u64| -> Vec<u64> {
        let mut rb = ReadBuf::new();
        let v = snap.read_into(from, 1 << 20, &mut rb).expect("read");
        RecordIter::new(v.data)
            .map(|r| r.expect("valid").offset)
            .collect()
    };
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let t = told.clone();
    p.set_listener(Box::new(move |hw| t.lock().expect("lock").push(hw)));
    let told_since = |n: usize| -> Vec<u64> { told.lock().expect("lock")[n..].to_vec() };
    append(10, true);
    assert_eq!(p.set_high_watermark(3), 10, "not replicated: unchanged");
    p.set_replicated(true);
    let n = told.lock().expect("lock").len();
    assert!(p.is_replicated());
    assert_eq!(p.high_watermark(), 10, "starts at what readers saw");
    append(5, true);
    assert_eq!((p.durable_end(), p.high_watermark()), (15, 10));
    assert_eq!(
        told_since(n),
        vec![10, 10],
        "replicated, the listener hears of the append and of its fsync"
    );
    let snap = p.snapshot(0, Isolation::ReadUncommitted);
    assert_eq!(snap.high_watermark(), 10);
    assert_eq!(visible(&snap, 0), (0..10).collect::<Vec<_>>());
    assert_eq!(
        visible(&p.snapshot(12, Isolation::ReadUncommitted), 12),
        Vec::<u64>::new(),
        "between the watermark and the log end: nothing yet"
    );
    let mut rb = ReadBuf::new();
    let err = p
        .snapshot(16, Isolation::ReadUncommitted)
        .read_into(16, 100, &mut rb)
        .map(|_| ());
    assert!(
        matches!(err, Err(StorageError::OffsetOutOfRange { .. })),
        "beyond the log end"
    );
    assert_eq!(p.read(0, 1 << 20).expect("read").high_watermark, 10);
    // A follower's fetch reads up to the log end and reports the watermark.
    let rs = p.replica_snapshot(10);
    assert_eq!(visible(&rs, 10), (10..15).collect::<Vec<_>>());
    assert_eq!(rs.high_watermark(), 10);
    // Monotone, clamped to the durable end.
    let n = told.lock().expect("lock").len();
    assert_eq!(p.set_high_watermark(13), 13);
    assert_eq!(p.set_high_watermark(12), 13, "never back");
    assert_eq!(told_since(n), vec![13], "and of the watermark's move");
    let end = append(3, false);
    assert_eq!((p.log_end_offset(), p.durable_end()), (18, 15));
    assert_eq!(p.set_high_watermark(end), 15, "clamped to the durable end");
    assert_eq!(
        visible(&p.snapshot(0, Isolation::ReadUncommitted), 0).len(),
        15
    );
    // The LSO is capped by it.
    let mut b = RecordBatchBuf::new();
    b.push(1, None, Some(b"t"), [], &producer_meta(5, 0, 0, true));
    let a = ProducerAppend {
        producer_id: 5,
        producer_epoch: 0,
        base_sequence: 0,
        record_count: 1,
        transactional: true,
    };
    p.append_producer(&mut b, Some(&a)).expect("txn");
    p.flush().expect("flush");
    assert_eq!(p.last_stable_offset(), 15);
    assert_eq!(p.set_high_watermark(u64::MAX), 19);
    assert_eq!(p.last_stable_offset(), 18, "the open transaction at 18");
    // A truncation brings it down; it moves up again from there.
    p.truncate_to(11).expect("truncate");
    assert_eq!(p.high_watermark(), 11);
    assert_eq!(p.last_stable_offset(), 11);
    append(2, true);
    assert_eq!(p.high_watermark(), 11);
    assert_eq!(p.set_high_watermark(13), 13);
    // Off again: the single-node rule (the durable end).
    p.set_replicated(false);
    append(1, false);
    assert_eq!(p.high_watermark(), 13);
    p.flush().expect("flush");
    assert_eq!(p.high_watermark(), 14);
}

#[test]
fn a_restarted_replica_starts_at_its_restored_high_watermark() {
    let fs: Arc<dyn Fs> = Arc::new(SimFs::new());
    let p = open(&fs, Path::new("/d/t/0"));
    let mut b = RecordBatchBuf::new();
    for i in 0..10 {
        b.push(1, None, Some(format!("r{i}").as_bytes()), [], &plain());
    }
    p.append(&mut b).expect("append");
    p.flush().expect("flush");
    // Checkpointed at 6: the four records above it were fsynced here but
    // may be on no other replica.
    p.restore_high_watermark(6);
    assert_eq!(p.high_watermark(), 10, "not replicated yet: unchanged");
    p.set_replicated(true);
    assert_eq!(p.high_watermark(), 6, "starts at the restored watermark");
    assert_eq!(p.set_high_watermark(9), 9, "then moves with the ISR");
    // Used once: switched off and on again, it starts at what readers saw.
    p.set_replicated(false);
    p.set_replicated(true);
    assert_eq!(p.high_watermark(), 10);

    // Nothing checkpointed: the log start; and never above the durable end.
    let q = open(&fs, Path::new("/d/t/1"));
    let mut b = RecordBatchBuf::new();
    b.push(1, None, Some(b"x"), [], &plain());
    q.append(&mut b).expect("append");
    q.flush().expect("flush");
    q.restore_high_watermark(50);
    q.set_replicated(true);
    assert_eq!(q.high_watermark(), 1, "clamped to the durable end");
    let r = open(&fs, Path::new("/d/t/2"));
    r.restore_high_watermark(0);
    // Alone in the ISR first (switched off), the restored value is dropped.
    r.set_replicated(false);
    let mut b = RecordBatchBuf::new();
    b.push(1, None, Some(b"y"), [], &plain());
    r.append(&mut b).expect("append");
    r.flush().expect("flush");
    r.set_replicated(true);
    assert_eq!(r.high_watermark(), 1);
}

#[test]
fn waiters_for_records_a_truncation_removes_fail() {
    let sim = SimFs::new();
    let fs: Arc<dyn Fs> = Arc::new(sim.clone());
    let p = open(&fs, Path::new("/d/t/0"));
    let append = |n: usize| -> u64 {
        let mut b = RecordBatchBuf::new();
        for i in 0..n {
            b.push(1, None, Some(format!("r{i}").as_bytes()), [], &plain());
        }
        p.append(&mut b).expect("append").last_offset + 1
    };
    let end = append(5);
    p.wait_durable(end).expect("durable");
    // A sync claimed at 10 is held at the disk; a waiter for 15 queues
    // behind it.
    sim.hold_syncs();
    let (tx, rx) = mpsc::channel();
    let tx1 = tx.clone();
    let at10 = append(5);
    p.when_durable(
        at10,
        Box::new(move |r| tx1.send((10, r.is_ok())).expect("send")),
    );
    assert!(
        sim.await_held_syncs(1, std::time::Duration::from_secs(30)),
        "the sync started"
    );
    let at15 = append(5);
    p.when_durable(
        at15,
        Box::new(move |r| tx.send((15, r.is_ok())).expect("send")),
    );
    // The truncation fails the waiter above the cut at once (it then waits
    // at the held disk itself).
    let q = p.clone();
    let t = std::thread::spawn(move || q.truncate_to(12));
    let first = rx.recv().expect("a waiter is settled");
    assert_eq!(first, (15, false), "records 12.. are gone");
    sim.release_syncs();
    t.join().expect("join").expect("truncate");
    assert_eq!(
        rx.recv().expect("settled"),
        (10, true),
        "10 was durable before the cut"
    );
    assert_eq!((p.log_end_offset(), p.durable_end()), (12, 12));
    let offsets: Vec<u64> = record_bytes(&p).iter().map(|r| r.0).collect();
    assert_eq!(offsets, (0..12).collect::<Vec<_>>());
}

#[test]
fn a_damaged_epoch_history_refuses_the_open() {
    let sim = SimFs::new();
    let fs: Arc<dyn Fs> = Arc::new(sim.clone());
    let dir = Path::new("/d/t/0");
    let p = open(&fs, dir);
    p.assign_leader_epoch(2).expect("epoch");
    p.close().expect("close");
    drop(p);
    es_storage::meta::write_atomic(
        &*fs,
        &dir.join(es_storage::epochs::EPOCHS_FILE),
        br#"{"version":1,"epochs":[{"epoch":3,"start_offset":0},{"epoch":2,"start_offset":5}]}"#,
    )
    .expect("write");
    let err = Partition::open(&storage(fs.clone()), dir.to_path_buf(), cfg())
        .map(|_| ())
        .expect_err("refused");
    assert!(
        matches!(err, StorageError::Metadata { .. }),
        "a metadata error naming the file: {err}"
    );
}

#[derive(Clone, Debug)]
enum Op {
    /// `gaps[i]` offsets skipped before record i; a newer epoch if `bump`.
    Append { gaps: Vec<u8>, bump: bool },
    /// Truncate `back` offsets below the log end (at or past it: a no-op).
    Truncate { back: u8 },
    /// Close and reopen, or lose power and recover.
    Reopen { crash: bool },
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (proptest::collection::vec(0u8..3, 1..6), any::<bool>())
            .prop_map(|(gaps, bump)| Op::Append { gaps, bump }),
        2 => (0u8..25).prop_map(|back| Op::Truncate { back }),
        1 => any::<bool>().prop_map(|crash| Op::Reopen { crash }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Replica appends with gaps, truncations and restarts against a model:
    /// a list of (offset, value), the log end and the epoch history.
    #[test]
    fn replica_appends_and_truncations_agree_with_a_model(ops in proptest::collection::vec(op(), 1..40)) {
        let sim = SimFs::new();
        let dir = Path::new("/m/t/0");
        let small = PartitionConfig { segment_bytes: 1024, ..cfg() };
        let reopen = |fs: SimFs| {
            Partition::open(&storage(Arc::new(fs)), dir.to_path_buf(), small).expect("open")
        };
        let mut fs = sim.clone();
        let mut p = reopen(fs.clone());
        let mut model: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut log_end = 0u64;
        let mut epochs: Vec<EpochEntry> = Vec::new();
        let mut epoch = 0i32;
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Append { gaps, bump } => {
                    if bump || epochs.is_empty() {
                        epoch += 1;
                    }
                    let mut b = RecordBatchBuf::new();
                    let mut offsets = Vec::new();
                    let mut next = log_end;
                    for g in gaps {
                        let o = next + u64::from(g);
                        let v = format!("{step}-{o}-{}", "v".repeat((o % 90) as usize)).into_bytes();
                        b.push(1, Some(b"k"), Some(&v), [], &plain());
                        offsets.push(o);
                        model.push((o, v));
                        next = o + 1;
                    }
                    let info = p.append_replica(&mut b, &offsets, epoch).expect("append");
                    p.wait_durable(info.last_offset + 1).expect("durable");
                    if epochs.last().is_none_or(|l| l.epoch < epoch) {
                        epochs.push(e(epoch, offsets[0]));
                    }
                    log_end = next;
                }
                Op::Truncate { back } => {
                    let end = log_end.saturating_sub(u64::from(back));
                    p.truncate_to(end).expect("truncate");
                    if end < log_end {
                        model.retain(|r| r.0 < end);
                        epochs.retain(|x| x.start_offset < end);
                        log_end = end;
                    }
                }
                Op::Reopen { crash } => {
                    let active_base = p.segments().last().map_or(0, |s| s.base_offset);
                    if crash {
                        let img = fs.crash_image(Tear::None);
                        drop(p);
                        fs = img;
                    } else {
                        p.close().expect("close");
                        drop(p);
                    }
                    p = reopen(fs.clone());
                    log_end = model.last().map_or(0, |r| r.0 + 1).max(active_base);
                    epochs.retain(|x| x.start_offset <= log_end);
                }
            }
            proptest::prop_assert_eq!(p.log_end_offset(), log_end, "step {}", step);
            proptest::prop_assert_eq!(p.durable_end(), log_end);
            let got: Vec<(u64, Vec<u8>)> = {
                let mut out = Vec::new();
                common::read_from_start(&p, 1 << 20, |r, _| {
                    out.push((r.offset, r.value.expect("value").to_vec()))
                });
                out
            };
            proptest::prop_assert_eq!(&got, &model, "step {}", step);
            proptest::prop_assert_eq!(p.leader_epochs(), epochs.clone(), "step {}", step);
            for s in p.segments().iter().filter(|s| !s.is_empty()) {
                let first = model.iter().find(|r| r.0 >= s.base_offset).map(|r| r.0);
                proptest::prop_assert_eq!(first, Some(s.base_offset), "segments start with their base");
            }
        }
    }
}
