//! A bound on open files: [`CachingFs`] wraps a file system and keeps at
//! most a budget of its files open, closing the least recently used ones
//! and reopening them by name when next used.
//!
//! A partition holds files for its whole life (each segment's log, index
//! and batch marks), so a broker with 10,000 partitions would hold tens of
//! thousands of descriptors and run into `RLIMIT_NOFILE`. Through
//! [`CachingFs`] every handle the log opens is a [`CachedFile`]: the
//! segment keeps it, and the descriptor under it comes and goes.
//!
//! The rules that keep this invisible to the log:
//! - A file with writes not yet made durable through this handle is never
//!   closed as it is: eviction fsyncs it first, and a failed fsync keeps the
//!   handle open and hands the error to the owner's next `sync_data`
//!   (Linux reports a write-back error once per open file, so closing a
//!   dirty descriptor could hide one from the fsync that acknowledges).
//! - A file whose name goes away (`remove_file`, replaced by `rename`,
//!   `remove_dir_all`) is opened and pinned before it does: the storage
//!   document's rule that a deleted segment keeps serving the readers
//!   already using it holds, and the reclaimer frees it as before. Under
//!   `remove_dir_all` (a deleted partition) only handles open at that moment
//!   are pinned; a closed one is marked gone and answers `NotFound`.
//! - A rename moves the handle's name with it, under the handle's lock, so a
//!   reopen never races a rename; renaming a directory moves the names of
//!   every tracked file under it (a deleted topic's files are never reopened
//!   as the files of a new topic of the same name).
//! - Only names that go through this file system are tracked: everything
//!   es-storage does to its files goes through its `Fs`.
//!
//! Eviction is a second-chance (clock) sweep over the tracked files, run by
//! whichever call pushes the count past the budget, down to seven eighths
//! of it: clean files not used since the last sweep first, then any clean
//! file, then dirty ones after an fsync. Pinned files are never closed, so a
//! burst of deletions may hold the count above the budget until the
//! reclaimer lets them go.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::fs::{FileHandle, Fs};
use crate::metrics::storage_metrics;

/// A file system whose files are [`CachedFile`]s (see the module comment).
#[derive(Debug)]
pub struct CachingFs {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    inner: Arc<dyn Fs>,
    /// Most descriptors kept open (pinned files may exceed it).
    budget: usize,
    /// Descriptors open now.
    open: AtomicUsize,
    /// Every live file by its current name.
    files: Mutex<HashMap<PathBuf, Weak<CachedFile>>>,
    /// One sweep at a time; others go on over budget meanwhile.
    sweeping: AtomicBool,
    /// Whether a sweep may fsync a dirty file to close it.
    sync_dirty: bool,
}

/// A file of a [`CachingFs`]: its descriptor may be closed and reopened.
#[derive(Debug)]
pub struct CachedFile {
    shared: Arc<Shared>,
    /// Used since the last sweep looked.
    used: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    path: PathBuf,
    file: Option<Arc<dyn FileHandle>>,
    /// Writes and length changes under way through this handle: it is not
    /// closed meanwhile.
    writing: u32,
    /// Writes and length changes made through this handle, and how many of
    /// them an fsync covered.
    written: u64,
    synced: u64,
    /// An eviction's fsync failed: the owner's next `sync_data` reports it.
    failed: Option<io::Error>,
    /// The name is gone while the descriptor serves readers: never closed.
    pinned: bool,
    /// The name went while the descriptor was closed: nothing to reopen.
    gone: bool,
}

impl CachingFs {
    /// `inner` with at most `budget` (at least 1) descriptors open.
    pub fn new(inner: Arc<dyn Fs>, budget: usize) -> CachingFs {
        CachingFs::build(inner, budget, true)
    }

    /// The same, but a sweep never fsyncs: dirty files stay open (over the
    /// budget if need be) until their owner's fsync. For harnesses that
    /// hold every fsync at a gate while they write (the simulated file
    /// system's power-loss workload), where a sweep's fsync would wait on
    /// the writer that holds the gate.
    pub fn without_sync_eviction(inner: Arc<dyn Fs>, budget: usize) -> CachingFs {
        CachingFs::build(inner, budget, false)
    }

    fn build(inner: Arc<dyn Fs>, budget: usize, sync_dirty: bool) -> CachingFs {
        CachingFs {
            shared: Arc::new(Shared {
                inner,
                budget: budget.max(1),
                open: AtomicUsize::new(0),
                files: Mutex::new(HashMap::new()),
                sweeping: AtomicBool::new(false),
                sync_dirty,
            }),
        }
    }

    /// Descriptors open now.
    pub fn open_files(&self) -> usize {
        self.shared.open.load(Ordering::Acquire)
    }

    fn track(&self, path: &Path, file: Arc<dyn FileHandle>) -> Arc<CachedFile> {
        let cached = Arc::new(CachedFile {
            shared: self.shared.clone(),
            used: AtomicBool::new(true),
            state: Mutex::new(State {
                path: path.to_path_buf(),
                file: Some(file),
                writing: 0,
                written: 0,
                synced: 0,
                failed: None,
                pinned: false,
                gone: false,
            }),
        });
        self.shared.opened();
        let replaced = self
            .shared
            .files
            .lock()
            .insert(path.to_path_buf(), Arc::downgrade(&cached));
        drop(replaced);
        self.shared.maybe_sweep();
        cached
    }

    /// Takes the tracked file named `path` out of the map, if one lives.
    fn untrack(&self, path: &Path) -> Option<Arc<CachedFile>> {
        let weak = self.shared.files.lock().remove(path);
        weak.and_then(|w| w.upgrade())
    }
}

impl Shared {
    fn opened(&self) {
        self.open.fetch_add(1, Ordering::AcqRel);
        storage_metrics().open_files.inc();
    }

    fn closed(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        storage_metrics().open_files.dec();
    }

    fn maybe_sweep(&self) {
        if self.open.load(Ordering::Acquire) <= self.budget
            || self.sweeping.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let target = self.budget - self.budget / 8;
        // Upgraded under the map's lock, dropped after it: dropping the last
        // handle takes that lock (`CachedFile::drop`).
        let files: Vec<Arc<CachedFile>> = {
            let mut map = self.files.lock();
            map.retain(|_, w| w.strong_count() > 0);
            map.values().filter_map(Weak::upgrade).collect()
        };
        let passes: &[Pass] = if self.sync_dirty {
            &[Pass::Unused, Pass::Clean, Pass::Dirty]
        } else {
            &[Pass::Unused, Pass::Clean]
        };
        for &pass in passes {
            for f in &files {
                if self.open.load(Ordering::Acquire) <= target {
                    break;
                }
                if pass == Pass::Unused && f.used.swap(false, Ordering::Relaxed) {
                    continue;
                }
                f.try_close(pass == Pass::Dirty);
            }
        }
        self.sweeping.store(false, Ordering::Release);
        drop(files);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Unused,
    Clean,
    Dirty,
}

impl CachedFile {
    /// The open descriptor, reopened by name if it was closed; `write`
    /// marks a write under way, which [`CachedFile::wrote`] ends, so that
    /// the descriptor is not closed before an fsync covers that write.
    fn acquire(&self, write: bool) -> io::Result<Arc<dyn FileHandle>> {
        // Written only when it changes: a store on every call would bounce
        // the cache line between threads reading the same file.
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
        let (f, reopened) = {
            let mut st = self.state.lock();
            let r = match &st.file {
                Some(f) => (f.clone(), false),
                None if st.gone => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("{} was removed while closed", st.path.display()),
                    ))
                }
                None => {
                    let f = self.shared.inner.open(&st.path)?;
                    st.file = Some(f.clone());
                    self.shared.opened();
                    (f, true)
                }
            };
            if write {
                st.writing += 1;
            }
            r
        };
        if reopened {
            storage_metrics().file_reopens.inc();
            self.shared.maybe_sweep();
        }
        Ok(f)
    }

    /// An fdatasync of the file. A closed one is clean, so there is nothing
    /// to make durable and no call, unless `always` (a device flush that
    /// others' written-out bytes wait for, [`FileHandle::flush_device`]):
    /// then it is reopened for the call.
    fn sync(&self, always: bool) -> io::Result<()> {
        let (h, upto) = {
            let mut st = self.state.lock();
            if let Some(e) = st.failed.take() {
                return Err(e);
            }
            match &st.file {
                Some(f) => (f.clone(), st.written),
                None if !always => return Ok(()),
                None => {
                    let upto = st.written;
                    drop(st);
                    (self.acquire(false)?, upto)
                }
            }
        };
        h.sync_data()?;
        let mut st = self.state.lock();
        st.synced = st.synced.max(upto);
        Ok(())
    }

    /// Ends a write begun with [`CachedFile::acquire`]; a failed one counts
    /// too (some prefix may have reached the file).
    fn wrote<T>(&self, r: io::Result<T>) -> io::Result<T> {
        let mut st = self.state.lock();
        st.writing -= 1;
        st.written += 1;
        r
    }

    /// Closes the descriptor if nothing needs it open; with `sync`, a dirty
    /// one after an fsync. Returns whether it closed.
    fn try_close(&self, sync: bool) -> bool {
        let Some(mut st) = self.state.try_lock() else {
            return false;
        };
        if st.pinned || st.failed.is_some() || st.writing > 0 {
            return false;
        }
        let Some(h) = st.file.clone() else {
            return false;
        };
        if st.written != st.synced {
            if !sync {
                return false;
            }
            let upto = st.written;
            drop(st);
            let r = h.sync_data();
            st = self.state.lock();
            match r {
                Ok(()) => st.synced = st.synced.max(upto),
                Err(e) => {
                    st.failed = Some(e);
                    return false;
                }
            }
            if st.written != upto || st.writing > 0 || st.pinned || st.file.is_none() {
                return false;
            }
        }
        st.file = None;
        self.shared.closed();
        true
    }

    /// Opens (if closed) and pins the descriptor before its name goes, so
    /// that readers holding this file keep reading it. `reopen` false:
    /// a closed one is marked gone instead.
    fn pin(&self, reopen: bool) {
        let mut st = self.state.lock();
        if st.file.is_none() && !st.gone {
            if !reopen {
                st.gone = true;
                return;
            }
            match self.shared.inner.open(&st.path) {
                Ok(f) => {
                    st.file = Some(f);
                    self.shared.opened();
                }
                Err(e) => {
                    tracing::warn!(file = %st.path.display(), error = %e, "could not reopen a file being removed; readers still using it get an error");
                    st.gone = true;
                    return;
                }
            }
        }
        st.pinned = true;
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        let me: *const CachedFile = self;
        let st = self.state.get_mut();
        if st.file.take().is_some() {
            self.shared.closed();
        }
        let mut map = self.shared.files.lock();
        if map
            .get(&st.path)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), me))
        {
            map.remove(&st.path);
        }
    }
}

impl FileHandle for CachedFile {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        self.acquire(false)?.read_at(buf, pos)
    }

    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        let h = self.acquire(true)?;
        self.wrote(h.write_all_at(buf, pos))
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync(false)
    }

    fn flush_device(&self) -> io::Result<()> {
        self.sync(true)
    }

    fn start_write_out(&self, from: u64, to: u64) -> io::Result<()> {
        let h = self.state.lock().file.clone();
        // Closed only when clean: nothing to write out.
        h.map_or(Ok(()), |h| h.start_write_out(from, to))
    }

    fn wait_written(&self, from: u64, to: u64) -> io::Result<()> {
        let h = {
            let mut st = self.state.lock();
            if let Some(e) = st.failed.take() {
                return Err(e);
            }
            match &st.file {
                Some(f) => f.clone(),
                None => return Ok(()),
            }
        };
        // Not a sync: the file stays unsynced (and open) until one of its
        // own, although a flush of the device will have made it durable.
        h.wait_written(from, to)
    }

    fn overwrites_in_place(&self) -> bool {
        self.acquire(false).is_ok_and(|h| h.overwrites_in_place())
    }

    fn sync_filesystem(&self) -> io::Result<()> {
        let upto = {
            let mut st = self.state.lock();
            if let Some(e) = st.failed.take() {
                return Err(e);
            }
            st.written
        };
        self.acquire(false)?.sync_filesystem()?;
        let mut st = self.state.lock();
        st.synced = st.synced.max(upto);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let h = self.acquire(true)?;
        self.wrote(h.set_len(len))
    }

    fn len(&self) -> io::Result<u64> {
        if self.state.lock().gone {
            // Closed when its name went: it holds no space, and the
            // reclaimer has nothing to free.
            return Ok(0);
        }
        self.acquire(false)?.len()
    }
}

impl Fs for CachingFs {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FileHandle>> {
        let live = self.shared.files.lock().get(path).and_then(Weak::upgrade);
        if let Some(f) = live {
            return Ok(f);
        }
        let f = self.shared.inner.open(path)?;
        Ok(self.track(path, f))
    }

    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FileHandle>> {
        let f = self.shared.inner.create_new(path)?;
        Ok(self.track(path, f))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.shared.inner.create_dir_all(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.shared.inner.list(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if from == to {
            return self.shared.inner.rename(from, to);
        }
        let replaced = self.untrack(to);
        if let Some(r) = &replaced {
            r.pin(true);
        }
        // What moves: the file `from`, or every tracked file under it when
        // it is a directory (a topic renamed out of the namespace before it
        // is removed): their handles must follow, or a closed one would be
        // reopened by a name that is gone, or that a new file has taken.
        let moving: Vec<(PathBuf, Arc<CachedFile>)> = {
            let mut map = self.shared.files.lock();
            let names: Vec<PathBuf> = if map.contains_key(from) {
                vec![from.to_path_buf()]
            } else {
                map.keys()
                    .filter(|k| k.starts_with(from))
                    .cloned()
                    .collect()
            };
            names
                .into_iter()
                .filter_map(|n| {
                    let f = map.remove(&n)?.upgrade()?;
                    Some((n, f))
                })
                .collect()
        };
        let new_name = |old: &Path| match old.strip_prefix(from) {
            Ok(rest) if !rest.as_os_str().is_empty() => to.join(rest),
            _ => to.to_path_buf(),
        };
        let r = {
            // Under every moving handle's lock: none reopens meanwhile.
            let mut locked: Vec<_> = moving.iter().map(|(_, f)| f.state.lock()).collect();
            let r = self.shared.inner.rename(from, to);
            if r.is_ok() {
                for ((old, _), st) in moving.iter().zip(locked.iter_mut()) {
                    st.path = new_name(old);
                }
            }
            r
        };
        {
            let mut map = self.shared.files.lock();
            for (old, f) in &moving {
                let at = if r.is_ok() {
                    new_name(old)
                } else {
                    old.clone()
                };
                map.insert(at, Arc::downgrade(f));
            }
            if let (Err(_), Some(old)) = (&r, &replaced) {
                // Still there under its name: tracked again (it stays pinned,
                // which only keeps it open).
                map.insert(to.to_path_buf(), Arc::downgrade(old));
            }
        }
        drop((moving, replaced));
        r
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let victim = self.untrack(path);
        if let Some(v) = &victim {
            v.pin(true);
        }
        let r = self.shared.inner.remove_file(path);
        if let (Err(_), Some(v)) = (&r, &victim) {
            self.shared
                .files
                .lock()
                .insert(path.to_path_buf(), Arc::downgrade(v));
        }
        drop(victim);
        r
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let inside: Vec<Arc<CachedFile>> = {
            let mut map = self.shared.files.lock();
            let names: Vec<PathBuf> = map
                .keys()
                .filter(|k| k.starts_with(path))
                .cloned()
                .collect();
            names
                .iter()
                .filter_map(|n| map.remove(n).and_then(|w| w.upgrade()))
                .collect()
        };
        for f in &inside {
            f.pin(false);
        }
        let r = self.shared.inner.remove_dir_all(path);
        drop(inside);
        r
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.shared.inner.sync_dir(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.shared.inner.exists(path)
    }

    fn device(&self, path: &Path) -> Option<u64> {
        self.shared.inner.device(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;
    use crate::simfs::{SimFs, Tear};

    fn real(budget: usize) -> (tempfile::TempDir, CachingFs) {
        let dir = tempfile::tempdir().expect("tmp");
        (dir, CachingFs::new(Arc::new(RealFs), budget))
    }

    fn read(f: &dyn FileHandle) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; f.len()? as usize];
        let n = f.read_at(&mut buf, 0)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Descriptors this process has open on files under `dir`.
    fn descriptors_under(dir: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|p| p.starts_with(dir))
            .count()
    }

    #[test]
    fn many_files_stay_within_the_budget_and_read_back_whole() {
        let (dir, fs) = real(8);
        let mut files = Vec::new();
        for i in 0..100u32 {
            let f = fs
                .create_new(&dir.path().join(format!("{i}.log")))
                .expect("create");
            f.write_all_at(format!("file {i}").as_bytes(), 0)
                .expect("write");
            f.sync_data().expect("sync");
            files.push(f);
            assert!(fs.open_files() <= 8, "{} open", fs.open_files());
        }
        assert!(descriptors_under(dir.path()) <= 8);
        for (i, f) in files.iter().enumerate() {
            assert_eq!(read(&**f).expect("read"), format!("file {i}").as_bytes());
            assert!(fs.open_files() <= 8);
        }
        drop(files);
        assert_eq!(fs.open_files(), 0);
        assert_eq!(descriptors_under(dir.path()), 0);
    }

    #[test]
    fn a_dirty_file_is_closed_only_after_an_fsync_covers_it() {
        let sim = SimFs::new();
        let fs = CachingFs::new(Arc::new(sim.clone()), 1);
        let a = fs.create_new(Path::new("/a")).expect("create");
        sim.sync_dir(Path::new("/")).expect("sync dir");
        a.write_all_at(b"unsynced", 0).expect("write");
        // A clean file goes first...
        let b = fs.create_new(Path::new("/b")).expect("create");
        assert_eq!(fs.open_files(), 1);
        let before = sim.crash_image(Tear::None);
        assert_eq!(before.read_all(Path::new("/a")).expect("a"), b"");
        // ...and when only dirty ones are left, `a` is fsynced and closed.
        b.write_all_at(b"b", 0).expect("write");
        assert_eq!(fs.open_files(), 1);
        let after = sim.crash_image(Tear::None);
        assert_eq!(after.read_all(Path::new("/a")).expect("a"), b"unsynced");
        // Reopened for a read, and its owner's fsync has nothing to report.
        assert_eq!(read(&*a).expect("read"), b"unsynced");
        a.sync_data().expect("sync");
    }

    #[test]
    fn a_device_flush_through_a_closed_clean_file_still_reaches_the_device() {
        let sim = SimFs::new();
        let fs = CachingFs::new(Arc::new(sim.clone()), 1);
        let a = fs.create_new(Path::new("/a")).expect("create a");
        sim.sync_dir(Path::new("/")).expect("sync dir");
        a.write_all_at(b"a", 0).expect("write a");
        a.sync_data().expect("sync a");
        // `a` is clean: opening `b` closes it.
        let b = fs.create_new(Path::new("/b")).expect("create b");
        sim.sync_dir(Path::new("/")).expect("sync dir");
        assert_eq!(fs.open_files(), 1);
        // Durable zeros in `b`, then records over them, written out only.
        b.write_all_at(&[0; 8], 0).expect("zeros");
        b.sync_data().expect("sync zeros");
        b.write_all_at(b"records!", 0).expect("records");
        b.wait_written(0, 8).expect("written out");
        // The flush goes through `a`, closed and clean: it must reach the device.
        a.flush_device().expect("flush");
        let img = sim.crash_image(Tear::None);
        assert_eq!(img.read_all(Path::new("/b")).expect("b"), b"records!");
    }

    #[test]
    fn a_failed_fsync_of_an_eviction_reaches_the_owner() {
        let sim = SimFs::new();
        let fs = CachingFs::new(Arc::new(sim.clone()), 1);
        let a = fs.create_new(Path::new("/a")).expect("create");
        a.write_all_at(b"lost", 0).expect("write");
        let b = fs.create_new(Path::new("/b")).expect("create");
        sim.fail_sync_at(sim.sync_count() + 1);
        // `b`, dirty too, pushes `a` out; its fsync fails, so `a` stays open.
        b.write_all_at(b"b", 0).expect("write");
        assert!(fs.open_files() >= 1);
        assert!(a.sync_data().is_err(), "the owner's fsync reports it");
    }

    #[test]
    fn a_removed_file_keeps_serving_its_holder() {
        let (dir, fs) = real(1);
        let path = dir.path().join("old.log");
        let a = fs.create_new(&path).expect("create");
        a.write_all_at(b"old bytes", 0).expect("write");
        a.sync_data().expect("sync");
        let _b = fs.create_new(&dir.path().join("b")).expect("create");
        fs.remove_file(&path).expect("remove");
        assert!(!path.exists());
        assert_eq!(read(&*a).expect("read after unlink"), b"old bytes");
        // Pinned: more files do not close it.
        let _c = fs.create_new(&dir.path().join("c")).expect("create");
        assert_eq!(read(&*a).expect("read"), b"old bytes");
    }

    #[test]
    fn a_renamed_file_is_reopened_by_its_new_name_and_a_replaced_one_keeps_its_bytes() {
        let (dir, fs) = real(1);
        let (tmp, fin) = (dir.path().join("x.tmp"), dir.path().join("x"));
        let old = fs.create_new(&fin).expect("create");
        old.write_all_at(b"old", 0).expect("write");
        old.sync_data().expect("sync");
        let new = fs.create_new(&tmp).expect("create");
        new.write_all_at(b"new", 0).expect("write");
        new.sync_data().expect("sync");
        let _other = fs.create_new(&dir.path().join("other")).expect("create");
        fs.rename(&tmp, &fin).expect("rename");
        let _more = fs.create_new(&dir.path().join("more")).expect("create");
        assert_eq!(read(&*new).expect("renamed"), b"new");
        assert_eq!(read(&*old).expect("replaced"), b"old");
        // Opening the name gives the live handle.
        assert_eq!(read(&*fs.open(&fin).expect("open")).expect("read"), b"new");
    }

    #[test]
    fn files_follow_their_directory_renamed_and_never_reopen_a_new_file_of_the_old_name() {
        let (dir, fs) = real(1);
        let (part, tomb) = (dir.path().join("t-0"), dir.path().join("t-0.deleted"));
        fs.create_dir_all(&part).expect("mkdir");
        let old = fs.create_new(&part.join("a.log")).expect("create");
        old.write_all_at(b"old topic", 0).expect("write");
        old.sync_data().expect("sync");
        let _other = fs.create_new(&dir.path().join("other")).expect("create");
        fs.rename(&part, &tomb).expect("rename");
        // A new topic of the same name, with a file of the same name.
        fs.create_dir_all(&part).expect("mkdir");
        let new = fs.create_new(&part.join("a.log")).expect("create");
        new.write_all_at(b"new", 0).expect("write");
        new.sync_data().expect("sync");
        assert_eq!(read(&*old).expect("reopened under the tomb"), b"old topic");
        // Other files opened until the sweep closes the old one (which of
        // the open ones a sweep closes depends on the map's order).
        let mut more = Vec::new();
        while descriptors_under(&tomb) > 0 {
            assert!(more.len() < 64, "the old file is never closed");
            let name = format!("more-{}", more.len());
            more.push(fs.create_new(&dir.path().join(name)).expect("create"));
        }
        fs.remove_dir_all(&tomb).expect("rm");
        // Closed when its directory went: gone, never the new file.
        assert_eq!(
            read(&*old).expect_err("gone").kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(old.len().expect("len"), 0);
        assert!(old.set_len(0).is_err());
        assert_eq!(read(&*new).expect("new"), b"new");
    }

    #[test]
    fn a_removed_directory_keeps_open_files_and_refuses_closed_ones() {
        let (dir, fs) = real(1);
        let part = dir.path().join("t-0");
        fs.create_dir_all(&part).expect("mkdir");
        let closed = fs.create_new(&part.join("a.log")).expect("create");
        closed.write_all_at(b"a", 0).expect("write");
        closed.sync_data().expect("sync");
        let open = fs.create_new(&part.join("b.log")).expect("create");
        open.write_all_at(b"b", 0).expect("write");
        open.sync_data().expect("sync");
        fs.remove_dir_all(&part).expect("rm");
        assert_eq!(read(&*open).expect("open one"), b"b");
        let e = read(&*closed).expect_err("closed one");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
