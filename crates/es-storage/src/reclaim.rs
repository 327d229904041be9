//! Paced reclaim: the space of deleted segment files is freed a few MiB at a
//! time, in the background, instead of all at once.
//!
//! Every acknowledgement waits for an fsync, so whatever holds the disk's
//! fsyncs back shows in produce latency. Freeing a file's blocks is such a
//! thing on a file system mounted with `discard`: the kernel trims the freed
//! blocks inside the call that frees them, and fsyncs on the same device wait
//! behind the trim. Measured on ext4 with `discard` (docs/operations.md):
//! removing a 2 GiB file while a producer sent 10,000 records/s took the
//! producer's p99 from about 3 ms to 95-180 ms; cutting the same file from
//! its end 4 MiB at a time, 10 ms apart, left it at 3-4 ms.
//!
//! So retention, compaction and topic deletion still unlink a segment at once
//! (what is on disk, and what a crash leaves, does not change), but hand its
//! open files to the [`Reclaimer`] first. The reclaimer waits until no reader
//! uses a file any more (a removed segment keeps serving the reads already
//! using it), then truncates it from the end [`Pace::step_bytes`] at a time
//! and closes it, pausing after each cut or close in proportion to the bytes
//! it freed, with a floor ([`Pace::pause_after`]): a full step waits
//! [`Pace::pause`], an index file or a small segment a quarter of that, so
//! that a topic of many small files is not freed a whole pause per file. A
//! file that a crash or an exit finds still held is freed by the operating
//! system as before.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::fs::FileHandle;

/// How fast the reclaimer frees space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    /// Bytes cut off a file at a time.
    pub step_bytes: u64,
    /// The pause after freeing a whole step.
    pub pause: Duration,
}

impl Pace {
    /// The pause after freeing `bytes`: [`Pace::pause`] in proportion to
    /// [`Pace::step_bytes`], never more than a whole step's and never less
    /// than a quarter of it. The floor is there because closing a deleted
    /// file costs the file system work of its own, whatever its size:
    /// measured (docs/operations.md), freeing a topic of 1,000 segments of
    /// 1 MiB with pauses in proportion alone took a producer's p99.9 from
    /// 10-27 ms (a whole pause per file) to 13-302 ms (over 70 ms in 4
    /// runs of 5), and with the floor to 7-9 ms.
    pub fn pause_after(&self, bytes: u64) -> Duration {
        if bytes >= self.step_bytes {
            return self.pause;
        }
        let nanos = self.pause.as_nanos() * u128::from(bytes) / u128::from(self.step_bytes);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)).max(self.pause / 4)
    }
}

impl Default for Pace {
    /// 4 MiB every 10 ms: about 400 MB/s, a 1 GiB segment in 2.6 s.
    fn default() -> Self {
        Pace {
            step_bytes: 4 << 20,
            pause: Duration::from_millis(10),
        }
    }
}

/// How long the reclaimer waits before looking again when every file it
/// holds is still in use.
const IN_USE_POLL: Duration = Duration::from_millis(100);

/// What one [`Reclaimer::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Freed about `bytes`: cut them off a file, or closed one that had no
    /// more than a step left.
    Freed { bytes: u64 },
    /// Holds files, all still used by someone else.
    InUse,
    /// Holds nothing.
    Idle,
}

/// What the reclaimer and its thread share.
#[derive(Debug, Default)]
struct Shared {
    files: Mutex<Held>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct Held {
    files: VecDeque<Arc<dyn FileHandle>>,
    /// Set when the [`Reclaimer`] is dropped: its thread leaves, and what it
    /// still holds is freed at once.
    stopped: bool,
}

/// How a reclaimer frees what it holds.
#[derive(Debug)]
enum Driver {
    /// Only when [`Reclaimer::step`] is called (tests).
    Manual,
    /// A thread (`es-reclaim`), started when the first file arrives; `false`
    /// if it could not start, and files are then freed when the caller
    /// drops them, at once, as without a reclaimer.
    Thread(OnceLock<bool>),
}

/// Files waiting to have their space freed; see the module documentation.
/// One per broker (see [`crate::Storage`]); its thread stops when it is
/// dropped.
#[derive(Debug)]
pub struct Reclaimer {
    pace: Pace,
    shared: Arc<Shared>,
    driver: Driver,
}

impl Reclaimer {
    /// A reclaimer that frees only when stepped ([`Reclaimer::step`]).
    pub fn new(pace: Pace) -> Self {
        Reclaimer {
            pace,
            shared: Arc::default(),
            driver: Driver::Manual,
        }
    }

    /// A reclaimer with its own thread (`es-reclaim`), started on first use.
    pub fn background(pace: Pace) -> Arc<Reclaimer> {
        Arc::new(Reclaimer {
            pace,
            shared: Arc::default(),
            driver: Driver::Thread(OnceLock::new()),
        })
    }

    /// Takes a file whose name has been removed. Its space is freed once
    /// nobody else holds it.
    pub fn hold(&self, file: Arc<dyn FileHandle>) {
        if let Driver::Thread(started) = &self.driver {
            if !*started.get_or_init(|| self.start_thread()) {
                return; // no thread: the caller's drop frees it
            }
        }
        self.shared.files.lock().files.push_back(file);
        self.shared.wake.notify_one();
    }

    fn start_thread(&self) -> bool {
        let shared = self.shared.clone();
        let pace = self.pace;
        match std::thread::Builder::new()
            .name("es-reclaim".into())
            .spawn(move || run(&shared, pace))
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, "no reclaim thread: deleted segments free their space at once");
                false
            }
        }
    }

    /// Files held.
    pub fn held(&self) -> usize {
        self.shared.files.lock().files.len()
    }

    /// One cut: the first held file that nobody else uses loses its last
    /// [`Pace::step_bytes`] (or is closed, if that is all it has left).
    /// A file that cannot be sized or cut is closed, and counts as a step.
    pub fn step(&self) -> Step {
        step(&self.shared, self.pace)
    }
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        let mut held = self.shared.files.lock();
        held.stopped = true;
        held.files.clear();
        drop(held);
        self.shared.wake.notify_all();
    }
}

fn step(shared: &Shared, pace: Pace) -> Step {
    let file = {
        let mut held = shared.files.lock();
        let files = &mut held.files;
        if files.is_empty() {
            return Step::Idle;
        }
        let Some(i) = files.iter().position(|f| Arc::strong_count(f) == 1) else {
            return Step::InUse;
        };
        files.remove(i).expect("index from position")
    };
    // Outside the lock: a cut can take a while (that is the point).
    let len = match file.len() {
        Ok(len) => len,
        Err(e) => {
            tracing::warn!(error = %e, "reclaim: cannot size a deleted file; closing it");
            return Step::Freed {
                bytes: pace.step_bytes,
            };
        }
    };
    if len <= pace.step_bytes {
        return Step::Freed { bytes: len }; // dropping `file` closes it
    }
    if let Err(e) = file.set_len(len - pace.step_bytes) {
        tracing::warn!(error = %e, "reclaim: cannot truncate a deleted file; closing it");
        return Step::Freed {
            bytes: pace.step_bytes,
        };
    }
    // Keep working on this file first, so files go in the order they came.
    let mut held = shared.files.lock();
    if !held.stopped {
        held.files.push_front(file);
    }
    Step::Freed {
        bytes: pace.step_bytes,
    }
}

/// The reclaim thread: steps until the reclaimer is dropped.
fn run(shared: &Shared, pace: Pace) {
    loop {
        match step(shared, pace) {
            Step::Freed { bytes } => std::thread::sleep(pace.pause_after(bytes)),
            Step::InUse => {
                let mut held = shared.files.lock();
                if held.stopped {
                    return;
                }
                shared.wake.wait_for(&mut held, IN_USE_POLL);
            }
            Step::Idle => {
                let mut held = shared.files.lock();
                if held.stopped {
                    return;
                }
                if held.files.is_empty() {
                    shared.wake.wait(&mut held);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Fs, RealFs};

    fn file_of(dir: &std::path::Path, name: &str, len: u64) -> Arc<dyn FileHandle> {
        let f = RealFs.create_new(&dir.join(name)).expect("create");
        f.write_all_at(&vec![7u8; len as usize], 0).expect("write");
        f
    }

    fn pace() -> Pace {
        Pace {
            step_bytes: 1000,
            pause: Duration::ZERO,
        }
    }

    #[test]
    fn a_file_in_use_is_left_alone_then_cut_from_its_end_and_closed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = Reclaimer::new(pace());
        assert_eq!(r.step(), Step::Idle);
        let f = file_of(dir.path(), "a.log", 2500);
        let reader = f.clone();
        RealFs
            .remove_file(&dir.path().join("a.log"))
            .expect("unlink");
        r.hold(f);
        // A reader still uses it: nothing is cut, whatever the number of steps.
        for _ in 0..3 {
            assert_eq!(r.step(), Step::InUse);
        }
        assert_eq!(reader.len().expect("len"), 2500);
        let weak = Arc::downgrade(&reader);
        drop(reader);
        assert_eq!(r.step(), Step::Freed { bytes: 1000 });
        assert_eq!(r.held(), 1);
        // 2500 -> 1500 -> 500 -> closed.
        let seen = weak.upgrade().expect("still held").len().expect("len");
        assert_eq!(seen, 1500);
        assert_eq!(r.step(), Step::Freed { bytes: 1000 });
        assert_eq!(weak.upgrade().expect("still held").len().expect("len"), 500);
        assert_eq!(r.step(), Step::Freed { bytes: 500 });
        assert_eq!(r.held(), 0);
        assert!(weak.upgrade().is_none(), "the reclaimer closed the file");
        assert_eq!(r.step(), Step::Idle);
    }

    #[test]
    fn files_go_in_order_and_one_in_use_does_not_hold_up_the_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = Reclaimer::new(pace());
        let busy = file_of(dir.path(), "busy.log", 3000);
        let free = file_of(dir.path(), "free.log", 1500);
        let reader = busy.clone();
        let weak_free = Arc::downgrade(&free);
        r.hold(busy);
        r.hold(free);
        assert_eq!(r.step(), Step::Freed { bytes: 1000 });
        assert_eq!(weak_free.upgrade().expect("held").len().expect("len"), 500);
        assert_eq!(r.step(), Step::Freed { bytes: 500 });
        assert!(weak_free.upgrade().is_none());
        assert_eq!(r.step(), Step::InUse);
        assert_eq!(reader.len().expect("len"), 3000);
    }

    #[test]
    fn the_pause_follows_the_bytes_freed() {
        let p = Pace {
            step_bytes: 4 << 20,
            pause: Duration::from_millis(10),
        };
        assert_eq!(p.pause_after(4 << 20), Duration::from_millis(10));
        assert_eq!(p.pause_after(2 << 20), Duration::from_millis(5));
        assert_eq!(p.pause_after(1 << 20), Duration::from_micros(2500));
        assert_eq!(p.pause_after(0), Duration::from_micros(2500), "the floor");
        assert_eq!(p.pause_after(u64::MAX), p.pause, "never more than a step's");
        let none = Pace {
            step_bytes: 0,
            pause: Duration::from_millis(10),
        };
        assert_eq!(none.pause_after(0), none.pause);
    }
}
