//! Partition behaviour on the real file system and on the simulated one:
//! append/read, rolls, index spacing, recovery of torn and corrupt segments,
//! many concurrent writers, and failed writes and fsyncs.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use es_storage::fs::Fs;
use es_storage::simfs::{SimFs, Tear};
use es_storage::Storage;
use es_storage::{
    FlushPolicy, Partition, PartitionConfig, RealFs, RecordBatchBuf, RecordIter, RecordMeta,
    StorageError,
};
use es_test_support::durable::durable_channel;

fn batch(values: &[Vec<u8>]) -> RecordBatchBuf {
    let mut b = RecordBatchBuf::new();
    for v in values {
        b.push(
            1_700_000_000_000,
            Some(b"k"),
            Some(v),
            std::iter::empty(),
            &RecordMeta::default(),
        );
    }
    b
}

fn val(i: u64, len: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(len, b'x');
    v
}

/// Reads every visible record: (offset, value).
fn read_all(p: &Partition) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    common::read_from_start(p, 64 * 1024, |r, _| {
        out.push((r.offset, r.value.expect("value").to_vec()))
    });
    out
}

fn small_segments() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 8 * 1024,
        ..PartitionConfig::default()
    }
}

#[test]
fn append_read_roll_and_reopen_on_disk() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("topics/t/0");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let p =
        Partition::open(&Storage::new(fs.clone()), dir.clone(), small_segments()).expect("open");
    let mut want = Vec::new();
    for i in 0..50u64 {
        let vals: Vec<Vec<u8>> = (0..10).map(|j| val(i * 10 + j, 256)).collect();
        let info = p.append(&mut batch(&vals)).expect("append");
        assert_eq!(info.base_offset, i * 10);
        assert_eq!(info.last_offset, i * 10 + 9);
        p.wait_durable(info.last_offset + 1).expect("durable");
        want.extend(
            vals.into_iter()
                .enumerate()
                .map(|(j, v)| (i * 10 + j as u64, v)),
        );
    }
    assert!(p.segments().len() > 10, "segments rolled at 8 KiB");
    assert_eq!(read_all(&p), want);
    // Reads from the middle land on the exact offset.
    let c = p.read(137, 300).expect("read");
    let first = RecordIter::new(&c.data)
        .next()
        .expect("one")
        .expect("valid");
    assert_eq!(first.offset, 137);
    assert_eq!(c.high_watermark, 500);
    // Beyond the end is out of range; at the end is empty.
    assert!(matches!(
        p.read(501, 10),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert!(p.read(500, 10).expect("read").data.is_empty());
    p.close().expect("close");
    drop(p);
    let (p, rep) = Partition::open_with_report(&Storage::new(fs), dir.clone(), small_segments())
        .expect("reopen");
    assert_eq!(read_all(&p), want);
    // Every segment was trusted from its index: the sealed ones always, the
    // active one because the partition was closed cleanly.
    assert!(rep.clean_shutdown);
    let scanned: Vec<bool> = rep.segments.iter().map(|s| s.scanned).collect();
    assert!(scanned.iter().all(|s| !s), "{scanned:?}");
    assert_eq!(p.log_end_offset(), 500);
    // The documented layout: 20-digit names, modes private.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .expect("ls")
        .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"00000000000000000000.log".to_string()));
    assert!(names.contains(&"00000000000000000000.index".to_string()));
    use std::os::unix::fs::PermissionsExt;
    for n in &names {
        let m = std::fs::metadata(dir.join(n))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(m & 0o077, 0, "{n} mode {m:o}");
    }
    let m = std::fs::metadata(&dir).expect("meta").permissions().mode();
    assert_eq!(m & 0o077, 0);
}

#[test]
fn index_entries_every_4_kib_and_lookups_scan_little() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        dir.clone(),
        PartitionConfig::default(),
    )
    .expect("open");
    for i in 0..200u64 {
        let mut b = batch(&[val(i, 300)]);
        let info = p.append(&mut b).expect("append");
        p.wait_durable(info.last_offset + 1).expect("sync");
    }
    let idx = fs
        .read_all(&dir.join("00000000000000000000.index"))
        .expect("index");
    let entries: Vec<(u64, u64)> = idx
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_be_bytes(c[..8].try_into().expect("8")),
                u64::from_be_bytes(c[8..].try_into().expect("8")),
            )
        })
        .collect();
    assert_eq!(entries[0], (0, 0));
    for w in entries.windows(2) {
        assert!(
            w[1].1 - w[0].1 >= 4096 && w[1].1 - w[0].1 < 4096 + 400,
            "{w:?}"
        );
    }
    let log = fs
        .read_all(&dir.join("00000000000000000000.log"))
        .expect("log");
    assert!(entries.len() >= log.len() / 4096 - 1);
    // Every entry points at the record with that offset.
    for (rel, pos) in &entries {
        let r = es_storage::record::decode(&log[*pos as usize..]).expect("record at entry");
        assert_eq!(r.offset, *rel);
    }
}

#[test]
fn torn_tail_of_the_active_segment_is_cut() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        dir.clone(),
        PartitionConfig::default(),
    )
    .expect("open");
    for i in 0..20u64 {
        let info = p.append(&mut batch(&[val(i, 100)])).expect("append");
        p.wait_durable(info.last_offset + 1).expect("sync");
    }
    // Unsynced appends, then a crash that keeps a random prefix of them.
    for i in 20..30u64 {
        p.append(&mut batch(&[val(i, 100), val(i, 77)]))
            .expect("append");
    }
    for seed in 1..40u64 {
        let img = fs.crash_image(Tear::Prefix(seed));
        let (q, rep) = Partition::open_with_report(
            &Storage::new(Arc::new(img.clone())),
            dir.clone(),
            PartitionConfig::default(),
        )
        .expect("recover");
        let got = read_all(&q);
        assert!(got.len() >= 20, "acknowledged records survive");
        for (i, (o, _)) in got.iter().enumerate() {
            assert_eq!(*o, i as u64);
        }
        assert_eq!(q.log_end_offset(), got.len() as u64);
        let cut = rep.segments.last().expect("seg").truncated_bytes;
        // Recovering again finds nothing more to do and the same records.
        let (q2, rep2) = Partition::open_with_report(
            &Storage::new(Arc::new(img)),
            dir.clone(),
            PartitionConfig::default(),
        )
        .expect("recover twice");
        assert_eq!(read_all(&q2), got);
        assert_eq!(
            rep2.segments.last().expect("seg").truncated_bytes,
            0,
            "seed {seed}: second recovery cut again (first cut {cut})"
        );
    }
}

#[test]
fn corrupt_record_in_a_sealed_segment_skips_only_its_rest() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let cfg = PartitionConfig {
        segment_bytes: 2048,
        ..PartitionConfig::default()
    };
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg).expect("open");
    for i in 0..60u64 {
        let info = p.append(&mut batch(&[val(i, 200)])).expect("append");
        p.wait_durable(info.last_offset + 1).expect("sync");
    }
    let segs = p.segments();
    assert!(segs.len() >= 3);
    let victim = segs[1].clone();
    let (vbase, vend) = (victim.base_offset, victim.end_offset());
    drop(p);
    // Flip a byte inside the second record of the second segment.
    let rec_len = 4 + 28 + 1 + 200;
    fs.corrupt(&victim.log_path, rec_len + 40, 0x55)
        .expect("corrupt");
    let (q, rep) =
        Partition::open_with_report(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg)
            .expect("recover");
    let bad = rep
        .segments
        .iter()
        .find(|s| s.base_offset == vbase)
        .expect("victim");
    assert_eq!(bad.corrupt_at.as_ref().map(|c| c.0), Some(rec_len as u64));
    let got: Vec<u64> = read_all(&q).into_iter().map(|(o, _)| o).collect();
    let want: Vec<u64> = (0..60u64).filter(|o| *o <= vbase || *o >= vend).collect();
    assert_eq!(got, want);
    assert_eq!(q.log_end_offset(), 60);
    // The file was left in place, untouched.
    assert_eq!(
        fs.read_all(&victim.log_path).expect("still there").len() as u64,
        victim.valid_len()
    );
}

#[test]
fn many_concurrent_writers_get_unique_contiguous_readable_offsets() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let cfg = PartitionConfig {
        segment_bytes: 64 * 1024,
        ..PartitionConfig::default()
    };
    let p = Partition::open(&Storage::new(fs), tmp.path().join("p"), cfg).expect("open");
    let threads = 16;
    let per = 40;
    let mut handles = Vec::new();
    for t in 0..threads {
        let p = p.clone();
        handles.push(std::thread::spawn(move || {
            let mut acked = Vec::new();
            for i in 0..per {
                let v = format!("t{t}-{i}").into_bytes();
                let info = p
                    .append(&mut batch(&[v.clone(), v.clone()]))
                    .expect("append");
                p.wait_durable(info.last_offset + 1).expect("durable");
                assert!(p.high_watermark() > info.last_offset);
                acked.push((info.base_offset, v));
            }
            acked
        }));
    }
    let mut acked: Vec<(u64, Vec<u8>)> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("join"))
        .collect();
    acked.sort();
    let all = read_all(&p);
    assert_eq!(all.len(), threads * per * 2);
    for (i, (o, _)) in all.iter().enumerate() {
        assert_eq!(*o, i as u64, "contiguous");
    }
    for (base, v) in &acked {
        assert_eq!(&all[*base as usize].1, v);
        assert_eq!(&all[*base as usize + 1].1, v);
    }
}

#[test]
fn failed_partial_write_is_cut_off_and_the_partition_keeps_working() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        dir.clone(),
        PartitionConfig::default(),
    )
    .expect("open");
    let info = p.append(&mut batch(&[val(0, 100)])).expect("append");
    p.wait_durable(info.last_offset + 1).expect("sync");
    let used = fs
        .read_all(&dir.join("00000000000000000000.log"))
        .expect("log")
        .len() as u64;
    fs.set_capacity(Some(used + 16 + 50)); // the index entry + half a record
    let err = p.append(&mut batch(&[val(1, 100)])).expect_err("disk full");
    assert!(
        matches!(err, StorageError::Io(ref e) if e.raw_os_error() == Some(libc::ENOSPC)),
        "{err}"
    );
    assert_eq!(
        fs.read_all(&dir.join("00000000000000000000.log"))
            .expect("log")
            .len() as u64,
        used,
        "partial bytes cut off"
    );
    fs.set_capacity(None);
    let info = p
        .append(&mut batch(&[val(1, 100)]))
        .expect("append after space returns");
    assert_eq!(info.base_offset, 1);
    p.wait_durable(2).expect("sync");
    assert_eq!(read_all(&p).len(), 2);
}

#[test]
fn failed_fsync_fences_the_partition_until_restart() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        dir.clone(),
        PartitionConfig::default(),
    )
    .expect("open");
    let info = p.append(&mut batch(&[val(0, 100)])).expect("append");
    p.wait_durable(info.last_offset + 1).expect("sync");
    fs.fail_sync_at(fs.sync_count() + 1);
    let info = p.append(&mut batch(&[val(1, 100)])).expect("append");
    assert!(matches!(
        p.wait_durable(info.last_offset + 1),
        Err(StorageError::Fenced(_))
    ));
    assert!(matches!(
        p.append(&mut batch(&[val(2, 100)])),
        Err(StorageError::Fenced(_))
    ));
    assert_eq!(p.high_watermark(), 1, "nothing unsynced becomes visible");
    drop(p);
    let img = fs.crash_image(Tear::None);
    let q = Partition::open(
        &Storage::new(Arc::new(img)),
        dir,
        PartitionConfig::default(),
    )
    .expect("restart");
    assert_eq!(read_all(&q).len(), 1);
    let info = q
        .append(&mut batch(&[val(1, 100)]))
        .expect("writes again after restart");
    assert_eq!(info.base_offset, 1);
}

#[test]
fn flush_every_n_records_syncs_in_groups() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let cfg = PartitionConfig {
        flush: FlushPolicy {
            every_records: 10,
            interval: std::time::Duration::from_secs(3600),
            ..FlushPolicy::default()
        },
        ..PartitionConfig::default()
    };
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg).expect("open");
    let before = fs.sync_count();
    for i in 0..35u64 {
        let info = p.append(&mut batch(&[val(i, 10)])).expect("append");
        p.wait_durable(info.last_offset + 1).expect("ok");
        assert_eq!(p.high_watermark(), i + 1, "visible at once in this mode");
    }
    assert_eq!(fs.sync_count() - before, 3);
    let img = fs.crash_image(Tear::None);
    let q = Partition::open(&Storage::new(Arc::new(img)), dir, cfg).expect("recover");
    assert_eq!(read_all(&q).len(), 30, "the last 5 were never synced");
}

#[test]
fn read_honours_max_bytes_but_returns_at_least_one_record() {
    let fs = SimFs::new();
    let p = Partition::open(
        &Storage::new(Arc::new(fs)),
        Path::new("/p").to_path_buf(),
        PartitionConfig::default(),
    )
    .expect("open");
    let info = p
        .append(&mut batch(&[val(0, 10_000), val(1, 10), val(2, 10)]))
        .expect("append");
    p.wait_durable(info.last_offset + 1).expect("sync");
    let c = p.read(0, 100).expect("read");
    let recs: Vec<_> = RecordIter::new(&c.data)
        .collect::<Result<_, _>>()
        .expect("valid");
    assert_eq!(recs.len(), 1);
    let c = p.read(1, 1 << 20).expect("read");
    assert_eq!(RecordIter::new(&c.data).count(), 2);
}

#[test]
fn a_removed_segment_keeps_serving_readers_holding_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let p = Partition::open(
        &Storage::new(fs),
        tmp.path().join("p"),
        PartitionConfig {
            segment_bytes: 1024,
            ..PartitionConfig::default()
        },
    )
    .expect("open");
    for i in 0..20u64 {
        let info = p.append(&mut batch(&[val(i, 300)])).expect("append");
        p.wait_durable(info.last_offset + 1).expect("sync");
    }
    let segs = p.segments();
    let first = segs[0].clone();
    std::fs::remove_file(&first.log_path).expect("unlink");
    let mut n = 0;
    first
        .for_each_record(first.valid_len(), |_| {
            n += 1;
            true
        })
        .expect("still readable through the open handle");
    assert!(n > 0);
}

#[test]
fn timestamps_are_searchable() {
    let fs = SimFs::new();
    let p = Partition::open(
        &Storage::new(Arc::new(fs)),
        PathBuf::from("/p"),
        PartitionConfig {
            segment_bytes: 1024,
            ..PartitionConfig::default()
        },
    )
    .expect("open");
    for i in 0..30i64 {
        let mut b = RecordBatchBuf::new();
        b.push(
            1000 + i * 10,
            None,
            Some(b"v"),
            std::iter::empty(),
            &RecordMeta::default(),
        );
        let info = p.append(&mut b).expect("append");
        p.wait_durable(info.last_offset + 1).expect("sync");
    }
    assert_eq!(p.offset_for_timestamp(1000).expect("ts"), Some((0, 1000)));
    assert_eq!(p.offset_for_timestamp(1055).expect("ts"), Some((6, 1060)));
    assert_eq!(p.offset_for_timestamp(5000).expect("ts"), None);
    assert_eq!(p.max_timestamp().expect("max"), Some((29, 1290)));
}

/// Appends with the non-blocking durability callback, waits on a channel.
fn append_async(
    p: &Arc<Partition>,
    values: &[Vec<u8>],
) -> Result<es_storage::AppendInfo, StorageError> {
    // As the produce path does: announce, append, then wait.
    let announced = p.announce_append();
    let info = p.append(&mut batch(values))?;
    drop(announced);
    durable_channel(p, info.last_offset + 1)
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("callback ran")?;
    Ok(info)
}

#[test]
fn durability_callbacks_fire_after_the_covering_fsync() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        dir.clone(),
        small_segments(),
    )
    .expect("open");
    let threads = 8;
    let per = 25;
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let p = p.clone();
            std::thread::spawn(move || {
                (0..per)
                    .map(|i| {
                        let v = format!("t{t}-{i}").into_bytes();
                        let info = append_async(&p, std::slice::from_ref(&v)).expect("durable");
                        (info.base_offset, v)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let acked: Vec<(u64, Vec<u8>)> = hs
        .into_iter()
        .flat_map(|h| h.join().expect("join"))
        .collect();
    // Everything acknowledged survives a crash that keeps only fsynced bytes.
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        small_segments(),
    )
    .expect("recover");
    let all = read_all(&q);
    assert_eq!(all.len(), threads * per);
    for (o, v) in &acked {
        assert_eq!(&all[*o as usize].1, v);
    }
}

#[test]
fn durability_callbacks_report_a_failed_fsync() {
    let fs = SimFs::new();
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        PathBuf::from("/d/p"),
        PartitionConfig::default(),
    )
    .expect("open");
    append_async(&p, &[val(0, 10)]).expect("first");
    fs.fail_sync_at(fs.sync_count() + 1);
    assert!(matches!(
        append_async(&p, &[val(1, 10)]),
        Err(StorageError::Fenced(_))
    ));
    // Already fenced: the callback runs at once with the error.
    let rx = durable_channel(&p, 0);
    assert!(rx.recv().expect("called").is_err());
}

#[test]
fn a_sync_waits_for_an_announced_append_and_covers_it_too() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    // A bound far beyond the test: the sync can only start once the
    // announced append is done.
    let cfg = PartitionConfig {
        flush: FlushPolicy {
            announced_wait: std::time::Duration::from_secs(600),
            ..FlushPolicy::default()
        },
        ..PartitionConfig::default()
    };
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg).expect("open");
    let announced = p.announce_append();
    let a = p.append(&mut batch(&[val(0, 10)])).expect("append a");
    let syncs = fs.sync_count();
    let rx = durable_channel(&p, a.last_offset + 1);
    assert!(
        rx.recv_timeout(std::time::Duration::from_millis(50))
            .is_err(),
        "no fsync while an announced append is on its way"
    );
    let b = p.append(&mut batch(&[val(1, 10)])).expect("append b");
    drop(announced);
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("callback ran")
        .expect("durable");
    assert_eq!(fs.sync_count() - syncs, 1, "one fsync for both appends");
    // That fsync covered b as well: it survives a crash.
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg,
    )
    .expect("recover");
    assert_eq!(q.log_end_offset(), b.last_offset + 1);
    // And b needs no fsync of its own.
    let rx = durable_channel(&p, b.last_offset + 1);
    rx.recv().expect("called at once").expect("durable");
    assert_eq!(fs.sync_count() - syncs, 1);
}

#[test]
fn an_announced_append_that_never_comes_only_delays_the_fsync() {
    let fs = SimFs::new();
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        PathBuf::from("/d/p"),
        PartitionConfig::default(),
    )
    .expect("open");
    let stalled = p.announce_append();
    // Durable all the same, once the (2 ms) bound passes; and again for a
    // later append, whose sync waits only for announcements made after
    // the previous one began.
    append_async(&p, &[val(0, 10)]).expect("durable");
    append_async(&p, &[val(1, 10)]).expect("durable");
    drop(stalled);
    append_async(&p, &[val(2, 10)]).expect("durable");
    assert_eq!(p.high_watermark(), 3);
}

#[test]
fn a_clean_shutdown_lets_the_active_segment_be_trusted_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("topics/t/0");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let cfg = PartitionConfig::default();
    let p = Partition::open(&Storage::new(fs.clone()), dir.clone(), cfg).expect("open");
    let vals: Vec<Vec<u8>> = (0..200).map(|i| val(i, 100)).collect();
    let info = p.append(&mut batch(&vals)).expect("append");
    p.wait_durable(info.last_offset + 1).expect("durable");
    p.close().expect("close");
    drop(p);
    let marker = dir.join(es_storage::partition::CLEAN_SHUTDOWN_FILE);
    assert!(marker.exists(), "close leaves the marker");

    // Clean: the active segment is checked against its index, not scanned,
    // and the marker is gone before the partition takes a write.
    let (p, rep) =
        Partition::open_with_report(&Storage::new(fs.clone()), dir.clone(), cfg).expect("reopen");
    assert!(rep.clean_shutdown);
    assert!(!rep.segments.last().expect("active").scanned);
    assert!(!marker.exists(), "marker removed at open");
    assert_eq!(read_all(&p).len(), 200);
    let info = p.append(&mut batch(&vals[..10])).expect("append");
    p.wait_durable(info.last_offset + 1).expect("durable");
    drop(p); // a crash: no close, no marker

    let (p, rep) =
        Partition::open_with_report(&Storage::new(fs.clone()), dir.clone(), cfg).expect("recover");
    assert!(!rep.clean_shutdown);
    assert!(rep.segments.last().expect("active").scanned);
    assert_eq!(read_all(&p).len(), 210);
    p.close().expect("close");
    drop(p);

    // A marker that lies (bytes appended after the clean close, as a torn
    // write would leave them): the check fails and the active segment is
    // scanned and its tail cut, as after a crash.
    let log = dir.join("00000000000000000000.log");
    let len = std::fs::metadata(&log).expect("log").len();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open log");
        f.write_all(&[0, 0, 0, 90, 1, 2, 3]).expect("torn bytes");
    }
    let (p, rep) = Partition::open_with_report(&Storage::new(fs), dir, cfg).expect("recover");
    assert!(rep.clean_shutdown);
    let active = rep.segments.last().expect("active");
    assert!(active.scanned);
    assert_eq!(active.truncated_bytes, 7);
    assert_eq!(std::fs::metadata(&log).expect("log").len(), len);
    assert_eq!(read_all(&p).len(), 210);
}

/// `read_into` with one window reused across reads of every size (large
/// first, so later reads leave stale bytes behind their records) returns
/// exactly what `read` returns, including a first record larger than the
/// window asked for.
#[test]
fn reads_into_a_reused_window_match_fresh_reads() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let p =
        Partition::open(&Storage::new(fs), tmp.path().join("t/0"), small_segments()).expect("open");
    for i in 0..40u64 {
        // Mostly small records, now and then one larger than a segment.
        let len = if i % 13 == 5 {
            20_000
        } else {
            64 + (i as usize * 37) % 700
        };
        let info = p.append(&mut batch(&[val(i, len)])).expect("append");
        p.wait_durable(info.last_offset + 1).expect("durable");
    }
    let mut window = es_storage::ReadBuf::new();
    for max_bytes in [1 << 20, 1, 300, 5000, 64 * 1024, 2] {
        for offset in 0..=40u64 {
            let fresh = p.read(offset, max_bytes).expect("read");
            let reused = p
                .read_into(offset, max_bytes, &mut window)
                .expect("read_into");
            assert_eq!(
                reused.data,
                &fresh.data[..],
                "offset {offset}, max_bytes {max_bytes}"
            );
            assert_eq!(reused.high_watermark, fresh.high_watermark);
            assert_eq!(reused.log_start_offset, fresh.log_start_offset);
            assert_eq!(reused.log_end_offset, fresh.log_end_offset);
        }
    }
    assert!(window.retained_bytes() > 0);
    window.shrink_to(0);
    assert_eq!(window.retained_bytes(), 0);
    assert!(matches!(
        p.read_into(41, 10, &mut window),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
}

/// After a clean close, opening a partition reads its metadata, its index
/// and a few KiB of log, not the log: neither recovery nor the producer
/// state replay scans the active segment.
#[test]
fn a_clean_open_does_not_read_the_log() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/p");
    let cfg = PartitionConfig::default(); // one segment
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg).expect("open");
    for i in 0..64u64 {
        let vals: Vec<Vec<u8>> = (0..64).map(|j| val(i * 64 + j, 250)).collect();
        let info = p.append(&mut batch(&vals)).expect("append");
        p.wait_durable(info.last_offset + 1).expect("durable");
    }
    let log_bytes = p.size_bytes();
    assert!(log_bytes > 1_000_000);
    p.close().expect("close");
    drop(p);

    let img = fs.crash_image(Tear::None);
    let before = img.bytes_read();
    let (p, rep) =
        Partition::open_with_report(&Storage::new(Arc::new(img.clone())), dir.clone(), cfg)
            .expect("reopen");
    assert!(rep.clean_shutdown);
    let read = img.bytes_read() - before;
    assert!(
        read < log_bytes / 10,
        "a clean open read {read} bytes of a {log_bytes}-byte log"
    );
    assert_eq!(p.log_end_offset(), 64 * 64);
    drop(p);

    // A crash (no close, so no marker) scans the log, as it must.
    let img2 = img.crash_image(Tear::None);
    let before = img2.bytes_read();
    let (_p, rep) = Partition::open_with_report(&Storage::new(Arc::new(img2.clone())), dir, cfg)
        .expect("recover");
    assert!(!rep.clean_shutdown);
    assert!(img2.bytes_read() - before >= log_bytes);
}
