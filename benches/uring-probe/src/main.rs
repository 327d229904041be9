//! uring-probe: does io_uring shorten es's durable append on this machine?
//!
//! es makes a produce request durable with `write` + `fdatasync` per partition
//! (one syncer per partition, in parallel). Issue 30 names io_uring as a lever:
//! a write linked to an fsync, and the fsyncs of every waiting partition
//! submitted together. This probe measures exactly those operations, without
//! es around them, so that the lever is judged on the device's figures:
//!
//! - one file: `pwrite` + `fdatasync` system calls, against an io_uring write
//!   linked to an fsync with the datasync flag, one submission each;
//! - 8 files at once (a request to 8 partitions): 8 threads each doing
//!   `pwrite` + `fdatasync` (es's per-partition syncers), one thread doing the
//!   8 one after another, `syncfs` and an `fdatasync` after it (es's
//!   `--sync-mode grouped`), one io_uring submission of 8 linked pairs, and the
//!   one-pass alternative the issue names: each file's new bytes written out
//!   with `sync_file_range` (write and wait, no cache flush), then a single
//!   `fdatasync` whose device cache flush covers them all. That pass is only
//!   durable where no file needs a metadata change (preallocated, already
//!   written blocks, as here); it measures the device, not a safe es mode.
//!
//! Appends are 16 KiB (one producer batch) into files already zero-filled and
//! synced (es preallocates its active segment), wrapping at 32 MiB. For each
//! case: operations per second, latency p50/p99, and the process's CPU per
//! operation (user + system, io_uring's kernel workers included).
//!
//! Usage: uring-probe DIR SECONDS (benches/uring-probe/run builds and runs it).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

const WRITE: usize = 16 * 1024;
const FILE_BYTES: u64 = 32 << 20;
const FILES: usize = 8;

type Res<T> = Result<T, String>;

/// This process's CPU seconds so far (user + system, all its threads,
/// io_uring's kernel workers among them).
fn cpu_s() -> f64 {
    // SAFETY: rusage is plain old data, for which all zeros is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes only into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// A file of FILE_BYTES zeros, synced: later writes over it change no size.
fn prealloc(dir: &str, name: &str) -> Res<File> {
    let path = format!("{dir}/{name}");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("open {path}: {e}"))?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(FILE_BYTES >> 20) {
        f.write_all(&zeros)
            .map_err(|e| format!("fill {path}: {e}"))?;
    }
    f.sync_all().map_err(|e| format!("sync {path}: {e}"))?;
    Ok(f)
}

struct Figures {
    name: &'static str,
    ops: usize,
    secs: f64,
    cpu_s: f64,
    lat: Vec<Duration>,
}

impl Figures {
    fn print(mut self) {
        self.lat.sort();
        let q = |p: f64| {
            let i = ((self.lat.len() as f64 * p) as usize).min(self.lat.len().saturating_sub(1));
            self.lat.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        println!(
            "{:<44} {:>9.0} {:>9.3} {:>9.3} {:>12.1}",
            self.name,
            self.ops as f64 / self.secs,
            q(0.5),
            q(0.99),
            self.cpu_s / self.ops.max(1) as f64 * 1e6
        );
    }
}

/// Runs `op` (one operation: it returns when the operation is done) until
/// `secs` have passed.
fn measure(name: &'static str, secs: f64, mut op: impl FnMut(u64) -> Res<()>) -> Res<Figures> {
    let mut lat = Vec::new();
    let c0 = cpu_s();
    let t0 = Instant::now();
    let mut off = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        let t = Instant::now();
        op(off)?;
        lat.push(t.elapsed());
        off = (off + WRITE as u64) % FILE_BYTES;
    }
    Ok(Figures {
        name,
        ops: lat.len(),
        secs: t0.elapsed().as_secs_f64(),
        cpu_s: cpu_s() - c0,
        lat,
    })
}

fn sys_append(f: &File, buf: &[u8], off: u64) -> Res<()> {
    f.write_all_at(buf, off)
        .map_err(|e| format!("pwrite: {e}"))?;
    f.sync_data().map_err(|e| format!("fdatasync: {e}"))
}

/// Pushes a write of `buf` at `off` linked to a datasync of the same file.
fn push_pair(ring: &mut IoUring, f: &File, buf: &[u8], off: u64, tag: u64) -> Res<()> {
    let fd = types::Fd(f.as_raw_fd());
    let w = opcode::Write::new(fd, buf.as_ptr(), buf.len() as u32)
        .offset(off)
        .build()
        .flags(squeue::Flags::IO_LINK)
        .user_data(tag);
    let s = opcode::Fsync::new(fd)
        .flags(types::FsyncFlags::DATASYNC)
        .build()
        .user_data(tag | 1 << 32);
    // SAFETY: `buf` outlives the submission: every caller waits for both
    // completions before it returns, and the buffers are not touched meanwhile.
    unsafe {
        let mut sq = ring.submission();
        sq.push(&w)
            .map_err(|_| "submission queue full".to_string())?;
        sq.push(&s)
            .map_err(|_| "submission queue full".to_string())?;
    }
    Ok(())
}

/// Submits what is queued and waits for `n` completions, all successful.
fn reap(ring: &mut IoUring, n: usize) -> Res<()> {
    ring.submit_and_wait(n)
        .map_err(|e| format!("io_uring submit: {e}"))?;
    let mut got = 0;
    while got < n {
        let done: Vec<i32> = ring.completion().map(|c| c.result()).collect();
        for r in &done {
            if *r < 0 {
                return Err(format!(
                    "io_uring op failed: {}",
                    std::io::Error::from_raw_os_error(-r)
                ));
            }
        }
        got += done.len();
        if got < n {
            ring.submit_and_wait(n - got)
                .map_err(|e| format!("io_uring wait: {e}"))?;
        }
    }
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).ok_or("usage: uring-probe DIR SECONDS")?.clone();
    let secs: f64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .ok_or("usage: uring-probe DIR SECONDS")?;
    let buf = vec![0x5au8; WRITE];
    let files: Vec<File> = (0..FILES)
        .map(|i| prealloc(&dir, &format!("p{i}")))
        .collect::<Res<_>>()?;
    let mut ring = IoUring::new(64).map_err(|e| format!("io_uring_setup: {e}"))?;

    println!(
        "uring-probe: {} KiB appends + datasync into preallocated files, {secs} s per case, dir {dir}",
        WRITE >> 10
    );
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>12}",
        "case", "ops/s", "p50 ms", "p99 ms", "CPU µs/op"
    );
    let f0 = &files[0];
    measure("1 file: pwrite + fdatasync (system calls)", secs, |off| {
        sys_append(f0, &buf, off)
    })?
    .print();
    measure("1 file: io_uring write -> fsync(datasync)", secs, |off| {
        push_pair(&mut ring, f0, &buf, off, 0)?;
        reap(&mut ring, 2)
    })?
    .print();

    // 8 files: one operation = all 8 appended and synced (a request to 8 partitions).
    measure("8 files, one thread, one after another", secs, |off| {
        files.iter().try_for_each(|f| sys_append(f, &buf, off))
    })?
    .print();
    let shared: Arc<Vec<File>> = Arc::new(
        files
            .iter()
            .map(|f| f.try_clone().map_err(|e| format!("dup: {e}")))
            .collect::<Res<_>>()?,
    );
    let start = Arc::new(Barrier::new(FILES + 1));
    let done = Arc::new(Barrier::new(FILES + 1));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let next_off = Arc::new(std::sync::atomic::AtomicU64::new(0));
    // A worker's failure is reported here and ends the case; the worker keeps
    // meeting the barriers until it is told to stop, so nothing waits forever.
    let failed = Arc::new(std::sync::Mutex::new(None::<String>));
    let workers: Vec<_> = (0..FILES)
        .map(|i| {
            let (shared, start, done, stop, next_off, failed, buf) = (
                shared.clone(),
                start.clone(),
                done.clone(),
                stop.clone(),
                next_off.clone(),
                failed.clone(),
                buf.clone(),
            );
            std::thread::spawn(move || loop {
                start.wait();
                if stop.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                let off = next_off.load(std::sync::atomic::Ordering::Acquire);
                if let Err(e) = sys_append(&shared[i], &buf, off) {
                    if let Ok(mut f) = failed.lock() {
                        f.get_or_insert(e);
                    }
                }
                done.wait();
            })
        })
        .collect();
    let threads = measure("8 files, 8 threads in parallel (es today)", secs, |off| {
        next_off.store(off, std::sync::atomic::Ordering::Release);
        start.wait();
        done.wait();
        match failed.lock().map(|mut f| f.take()) {
            Ok(Some(e)) => Err(e),
            _ => Ok(()),
        }
    });
    stop.store(true, std::sync::atomic::Ordering::Release);
    start.wait();
    for w in workers {
        w.join().map_err(|_| "worker panicked".to_string())?;
    }
    threads?.print();
    measure(
        "8 files, syncfs + 1 fdatasync (grouped mode)",
        secs,
        |off| {
            for f in &files {
                f.write_all_at(&buf, off)
                    .map_err(|e| format!("pwrite: {e}"))?;
            }
            // SAFETY: a plain system call on an open descriptor.
            if unsafe { libc::syncfs(files[0].as_raw_fd()) } != 0 {
                return Err(format!("syncfs: {}", std::io::Error::last_os_error()));
            }
            files[0].sync_data().map_err(|e| format!("fdatasync: {e}"))
        },
    )?
    .print();
    measure("8 files, sync_file_range each + 1 fdatasync", secs, |off| {
        for f in &files {
            f.write_all_at(&buf, off)
                .map_err(|e| format!("pwrite: {e}"))?;
        }
        // Start every file's write-back, then wait for each: the 8 writes
        // are in the device's queue together.
        let range = |f: &File, flags: libc::c_uint| {
            // SAFETY: a plain system call on an open descriptor.
            let r = unsafe {
                libc::sync_file_range(
                    f.as_raw_fd(),
                    off as libc::off64_t,
                    WRITE as libc::off64_t,
                    flags,
                )
            };
            if r == 0 {
                Ok(())
            } else {
                Err(format!(
                    "sync_file_range: {}",
                    std::io::Error::last_os_error()
                ))
            }
        };
        for f in &files {
            range(f, libc::SYNC_FILE_RANGE_WRITE)?;
        }
        for f in &files {
            range(
                f,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER,
            )?;
        }
        files[FILES - 1]
            .sync_data()
            .map_err(|e| format!("fdatasync: {e}"))
    })?
    .print();
    measure("8 files, one io_uring submission of 8 pairs", secs, |off| {
        for (i, f) in files.iter().enumerate() {
            push_pair(&mut ring, f, &buf, off, i as u64)?;
        }
        reap(&mut ring, 2 * FILES)
    })?
    .print();
    Ok(())
}
