//! Storage benchmark (prints figures, asserts nothing about speed):
//! appends/s and MB/s for 256-byte records with fsync before acknowledgement,
//! at 1, 10, 100 and 1000 records per append and 1, 4 and 16 concurrent
//! appenders, beside the machine's raw limit measured in the same run (a loop
//! of `write` + `fdatasync` of the same sizes) and beside 16 appenders that
//! each fsync alone (no group commit).
//!
//! Run: `cargo bench -p es-storage --bench storage` (ES_BENCH_SECS sets the
//! seconds per case, default 2; ES_BENCH_DIR the directory, on the disk to
//! measure; ES_BENCH_JSON a file to write the figures to, as benches/run does).

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use es_storage::Storage;
use es_storage::{Partition, PartitionConfig, RealFs, RecordBatchBuf, RecordMeta};

const RECORD_BYTES: usize = 256;

fn secs() -> Duration {
    Duration::from_secs_f64(
        std::env::var("ES_BENCH_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2.0),
    )
}

fn make_batch(n: usize) -> RecordBatchBuf {
    let v = vec![b'x'; RECORD_BYTES];
    let mut b = RecordBatchBuf::with_capacity(n * (RECORD_BYTES + 40), n);
    for _ in 0..n {
        b.push(
            1_700_000_000_000,
            None,
            Some(&v),
            std::iter::empty(),
            &RecordMeta::default(),
        );
    }
    b
}

/// Runs `threads` loops of `op` for the bench duration; returns ops/s.
fn run_threads(threads: usize, op: impl Fn() + Send + Sync + 'static) -> f64 {
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (op, stop, count) = (op.clone(), stop.clone(), count.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    op();
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(secs());
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().expect("bench thread");
    }
    count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing useful: run either way.
    let tmp = tempfile::Builder::new()
        .prefix("es-storage-bench")
        .tempdir_in(
            std::env::var("ES_BENCH_DIR").unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").into()),
        )
        .expect("tmp");
    let encoded = make_batch(1).bytes_len();
    println!("es-storage bench: {RECORD_BYTES}-byte values ({encoded} bytes per record on disk), {:?} per case, dir {}", secs(), tmp.path().display());
    println!();
    let mut json_raw = Vec::new();
    let mut json_storage = Vec::new();
    println!("raw limit: one writer, write + fdatasync loop");
    println!("{:>10} {:>12} {:>10}", "bytes", "writes/s", "MB/s");
    for n in [1usize, 10, 100, 1000] {
        let bytes = vec![0u8; n * encoded];
        let path = tmp.path().join(format!("raw-{n}"));
        let f = Mutex::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .expect("open"),
        );
        let f = Arc::new(f);
        let len = bytes.len();
        let rate = run_threads(1, move || {
            let mut f = f.lock().expect("lock");
            f.write_all(&bytes).expect("write");
            f.sync_data().expect("fdatasync");
        });
        println!(
            "{:>10} {:>12.0} {:>10.1}",
            len,
            rate,
            rate * len as f64 / 1e6
        );
        json_raw.push(serde_json::json!({"bytes": len, "writes_per_s": rate}));
        let _ = std::fs::remove_file(&path);
    }
    println!();
    println!("es-storage: append + wait_durable (fsync before ack, group commit)");
    println!(
        "{:>8} {:>9} {:>12} {:>12} {:>10}",
        "records", "appenders", "appends/s", "records/s", "MB/s"
    );
    let mut group_16x1 = 0.0;
    for n in [1usize, 10, 100, 1000] {
        for threads in [1usize, 4, 16] {
            let dir = tmp.path().join(format!("p-{n}-{threads}"));
            let p = Partition::open(
                &Storage::new(Arc::new(RealFs)),
                dir.clone(),
                PartitionConfig::default(),
            )
            .expect("open");
            let template = make_batch(n);
            let rate = run_threads(threads, move || {
                let mut b = template.clone();
                let info = p.append(&mut b).expect("append");
                p.wait_durable(info.last_offset + 1).expect("durable");
            });
            if n == 1 && threads == 16 {
                group_16x1 = rate;
            }
            json_storage.push(serde_json::json!({
                "records": n, "appenders": threads, "bytes": n * encoded, "appends_per_s": rate,
            }));
            println!(
                "{:>8} {:>9} {:>12.0} {:>12.0} {:>10.1}",
                n,
                threads,
                rate,
                rate * n as f64,
                rate * (n * encoded) as f64 / 1e6
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    println!();
    // Baseline: 16 appenders, each write + its own fdatasync under the lock.
    let path = tmp.path().join("alone");
    let f = Arc::new(Mutex::new(
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open"),
    ));
    let one = make_batch(1).as_bytes().to_vec();
    let alone = run_threads(16, move || {
        let mut f = f.lock().expect("lock");
        f.write_all(&one).expect("write");
        f.sync_data().expect("fdatasync");
    });
    println!("16 single-record appenders, each fsyncing alone: {alone:.0} appends/s");
    println!("16 single-record appenders with group commit:    {group_16x1:.0} appends/s");
    println!("group commit speed-up: {:.1}x", group_16x1 / alone.max(1.0));
    if let Ok(path) = std::env::var("ES_BENCH_JSON") {
        let doc = serde_json::json!({
            "record_bytes_on_disk": encoded, "secs_per_case": secs().as_secs_f64(),
            "raw": json_raw, "storage": json_storage,
            "alone_16x1": alone, "group_16x1": group_16x1,
        });
        std::fs::write(&path, doc.to_string()).expect("write ES_BENCH_JSON");
    }
}
