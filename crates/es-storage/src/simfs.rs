//! A simulated file system for crash and fault tests.
//!
//! It keeps, for every file, the bytes the process sees and the bytes that an
//! fsync has made durable, and for every directory the entries the process
//! sees and those a directory fsync has made durable. [`SimFs::crash_image`]
//! builds the file system a machine would find after losing power: only
//! durable directory entries, only durable file contents, optionally with a
//! torn prefix of the unsynced appended bytes. Faults can be armed: fail the
//! k-th sync, "crash" at the k-th sync (every later operation fails), or fill
//! the disk after a number of bytes (a write past it is partial and fails
//! with ENOSPC). Syncs can also be held at a gate ([`SimFs::hold_syncs`]), so
//! a test can line up waiters behind a sync in progress.
//!
//! The device has a volatile cache: bytes written out without a flush
//! ([`FileHandle::wait_written`]) are on the device but not durable; the
//! next sync of any file (which ends with a cache flush) makes them durable,
//! as far as the file's durable length reaches (bytes past it would need a
//! metadata change to be found). A crash loses them otherwise.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::fs::{FileHandle, Fs};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    File(u64),
    Dir,
}

#[derive(Clone, Debug, Default)]
struct FileData {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Ranges written out to the device but not flushed from its cache:
    /// (offset, the bytes as they were written out).
    on_device: Vec<(usize, Vec<u8>)>,
}

#[derive(Clone, Debug, Default)]
struct DirData {
    live: BTreeMap<String, Entry>,
    durable: BTreeMap<String, Entry>,
}

/// How unsynced appended bytes survive a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tear {
    /// Only fsynced bytes survive.
    None,
    /// A prefix of each file's unsynced appended bytes survives; the length is
    /// drawn from the seed.
    Prefix(u64),
}

#[derive(Clone, Debug, Default)]
struct State {
    files: HashMap<u64, FileData>,
    dirs: HashMap<PathBuf, DirData>,
    next_id: u64,
    syncs: u64,
    /// Write-outs waited for ([`FileHandle::wait_written`]).
    write_outs: u64,
    /// Bytes handed out by reads, for tests of what recovery reads.
    bytes_read: u64,
    fail_sync_at: Option<u64>,
    crash_at_sync: Option<u64>,
    crashed: Option<Box<State>>,
    capacity_bytes: Option<u64>,
}

/// The simulated file system; clones share state.
#[derive(Clone, Debug, Default)]
pub struct SimFs {
    st: Arc<Mutex<State>>,
    gate: Arc<Gate>,
}

/// Where syncs wait while a test holds them ([`SimFs::hold_syncs`]).
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    held: bool,
    waiting: usize,
}

impl Gate {
    /// Called at the start of every sync: waits while syncs are held.
    fn pass(&self) {
        let mut g = self.state.lock();
        if !g.held {
            return;
        }
        g.waiting += 1;
        self.changed.notify_all();
        while g.held {
            self.changed.wait(&mut g);
        }
        g.waiting -= 1;
    }
}

fn norm(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

fn split(p: &Path) -> io::Result<(PathBuf, String)> {
    let p = norm(p);
    let name = p
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?
        .to_string_lossy()
        .into_owned();
    let parent = p
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    Ok((parent, name))
}

fn crashed_err() -> io::Error {
    io::Error::other("simulated crash: the machine is down")
}

impl State {
    fn check(&self) -> io::Result<()> {
        if self.crashed.is_some() {
            return Err(crashed_err());
        }
        Ok(())
    }

    fn lookup(&self, p: &Path) -> Option<Entry> {
        let p = norm(p);
        if p == Path::new("/") {
            return Some(Entry::Dir);
        }
        let (parent, name) = split(&p).ok()?;
        self.dirs.get(&parent)?.live.get(&name).cloned()
    }

    /// The file with this id (gone: NotFound).
    fn file(&self, id: u64) -> io::Result<&FileData> {
        self.files
            .get(&id)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn file_mut(&mut self, id: u64) -> io::Result<&mut FileData> {
        self.files
            .get_mut(&id)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    /// A device cache flush: every file's written-out bytes become durable
    /// where its durable length covers them.
    fn flush_device(&mut self) {
        for f in self.files.values_mut() {
            for (pos, bytes) in std::mem::take(&mut f.on_device) {
                let end = (pos + bytes.len()).min(f.durable.len());
                if pos < end {
                    f.durable[pos..end].copy_from_slice(&bytes[..end - pos]);
                }
            }
        }
    }

    fn used_bytes(&self) -> u64 {
        self.files.values().map(|f| f.live.len() as u64).sum()
    }

    /// Counts a sync point; returns Err if a fault fires here.
    fn sync_point(&mut self) -> io::Result<()> {
        self.check()?;
        self.syncs += 1;
        if self.crash_at_sync == Some(self.syncs) {
            // The machine as it was when the power went: what is durable and
            // what only the process saw, so that `crash_image` can keep a
            // torn prefix of the unsynced bytes (imaging here would drop them
            // and make every later `Tear::Prefix` the same as `Tear::None`).
            let mut at_crash = self.clone();
            at_crash.crashed = None;
            self.crashed = Some(Box::new(at_crash));
            return Err(crashed_err());
        }
        if self.fail_sync_at == Some(self.syncs) {
            return Err(io::Error::other("simulated fsync failure"));
        }
        Ok(())
    }

    fn image(&self, tear: Tear) -> State {
        let mut out = State::default();
        let mut rng = match tear {
            Tear::None => 0,
            Tear::Prefix(seed) => seed | 1,
        };
        // Walk the durable tree from the root.
        let mut stack = vec![PathBuf::from("/")];
        while let Some(d) = stack.pop() {
            let Some(dd) = self.dirs.get(&d) else {
                continue;
            };
            let mut nd = DirData::default();
            for (name, e) in &dd.durable {
                match e {
                    Entry::Dir => stack.push(d.join(name)),
                    Entry::File(id) => {
                        if let Some(f) = self.files.get(id) {
                            let mut bytes = f.durable.clone();
                            if tear != Tear::None
                                && f.live.len() > bytes.len()
                                && f.live.starts_with(&bytes)
                            {
                                rng ^= rng << 13;
                                rng ^= rng >> 7;
                                rng ^= rng << 17;
                                let extra = f.live.len() - bytes.len();
                                let keep = (rng % (extra as u64 + 1)) as usize;
                                bytes.extend_from_slice(
                                    &f.live[f.durable.len()..f.durable.len() + keep],
                                );
                            }
                            out.files.insert(
                                *id,
                                FileData {
                                    live: bytes.clone(),
                                    durable: bytes,
                                    on_device: Vec::new(),
                                },
                            );
                        }
                    }
                }
                nd.live.insert(name.clone(), e.clone());
                nd.durable.insert(name.clone(), e.clone());
            }
            out.dirs.insert(d, nd);
        }
        out.next_id = self.next_id;
        out
    }
}

impl SimFs {
    pub fn new() -> SimFs {
        let fs = SimFs::default();
        fs.st
            .lock()
            .dirs
            .insert(PathBuf::from("/"), DirData::default());
        fs
    }

    /// Number of sync points (file or directory fsyncs) so far.
    pub fn sync_count(&self) -> u64 {
        self.st.lock().syncs
    }

    /// Write-outs waited for so far ([`FileHandle::wait_written`]; each is
    /// also a sync point for [`SimFs::sync_count`] and the faults).
    pub fn write_out_count(&self) -> u64 {
        self.st.lock().write_outs
    }

    /// Bytes read from files so far.
    pub fn bytes_read(&self) -> u64 {
        self.st.lock().bytes_read
    }

    /// The k-th sync from now on (1-based, counted from the start) fails with EIO.
    pub fn fail_sync_at(&self, k: u64) {
        self.st.lock().fail_sync_at = Some(k);
    }

    /// At the k-th sync (counted from the start) the machine loses power: the
    /// crash image is taken before that sync applies and every later operation fails.
    pub fn crash_at_sync(&self, k: u64) {
        self.st.lock().crash_at_sync = Some(k);
    }

    /// From now on every sync (file, file system or directory) waits at a
    /// gate until [`SimFs::release_syncs`].
    pub fn hold_syncs(&self) {
        self.gate.state.lock().held = true;
    }

    /// Lets the held syncs (and later ones) through.
    pub fn release_syncs(&self) {
        self.gate.state.lock().held = false;
        self.gate.changed.notify_all();
    }

    /// Waits until `n` syncs wait at the gate; false if that has not
    /// happened within `limit`.
    pub fn await_held_syncs(&self, n: usize, limit: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        let mut g = self.gate.state.lock();
        while g.waiting < n {
            if self.gate.changed.wait_until(&mut g, deadline).timed_out() {
                return g.waiting >= n;
            }
        }
        true
    }

    /// Whether an armed crash has happened.
    pub fn has_crashed(&self) -> bool {
        self.st.lock().crashed.is_some()
    }

    /// Writes beyond this many bytes in total fail with ENOSPC (after writing
    /// what fits).
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.st.lock().capacity_bytes = bytes;
    }

    /// The file system as found after a power loss now (or at the armed crash,
    /// if it happened).
    pub fn crash_image(&self, tear: Tear) -> SimFs {
        let st = self.st.lock();
        let img = match &st.crashed {
            Some(c) => c.image(tear),
            None => st.image(tear),
        };
        SimFs {
            st: Arc::new(Mutex::new(img)),
            gate: Arc::default(),
        }
    }

    /// Current contents of a file, for assertions.
    pub fn read_all(&self, p: &Path) -> io::Result<Vec<u8>> {
        let st = self.st.lock();
        match st.lookup(p) {
            Some(Entry::File(id)) => Ok(st
                .files
                .get(&id)
                .map(|f| f.live.clone())
                .unwrap_or_default()),
            _ => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    /// Overwrites bytes of a file as durable data (to plant corruption).
    pub fn corrupt(&self, p: &Path, pos: usize, xor: u8) -> io::Result<()> {
        let mut st = self.st.lock();
        match st.lookup(p) {
            Some(Entry::File(id)) => {
                let f = st
                    .files
                    .get_mut(&id)
                    .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
                if pos < f.live.len() {
                    f.live[pos] ^= xor;
                }
                if pos < f.durable.len() {
                    f.durable[pos] ^= xor;
                }
                Ok(())
            }
            _ => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }
}

#[derive(Debug)]
struct SimHandle {
    st: Arc<Mutex<State>>,
    gate: Arc<Gate>,
    id: u64,
}

impl FileHandle for SimHandle {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        let mut st = self.st.lock();
        st.check()?;
        let f = st.file(self.id)?;
        let pos = pos as usize;
        if pos >= f.live.len() {
            return Ok(0);
        }
        let n = buf.len().min(f.live.len() - pos);
        buf[..n].copy_from_slice(&f.live[pos..pos + n]);
        st.bytes_read += n as u64;
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        let mut st = self.st.lock();
        st.check()?;
        let used = st.used_bytes();
        let cap = st.capacity_bytes;
        let f = st.file_mut(self.id)?;
        let pos = pos as usize;
        let end = pos + buf.len();
        let growth = end.saturating_sub(f.live.len()) as u64;
        let mut n = buf.len();
        let mut full = false;
        if let Some(cap) = cap {
            if used + growth > cap {
                let room = cap.saturating_sub(used) as usize;
                n = (f.live.len().saturating_sub(pos) + room).min(buf.len());
                full = true;
            }
        }
        if f.live.len() < pos + n {
            f.live.resize(pos + n, 0);
        }
        f.live[pos..pos + n].copy_from_slice(&buf[..n]);
        if full {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.gate.pass();
        let mut st = self.st.lock();
        st.sync_point()?;
        if let Some(f) = st.files.get_mut(&self.id) {
            f.durable = f.live.clone();
            f.on_device.clear();
        }
        st.flush_device();
        Ok(())
    }

    fn wait_written(&self, from: u64, to: u64) -> io::Result<()> {
        self.gate.pass();
        let mut st = self.st.lock();
        st.sync_point()?;
        let f = st.file_mut(self.id)?;
        let from = (from as usize).min(f.live.len());
        let to = (to as usize).min(f.live.len());
        if from < to {
            let bytes = f.live[from..to].to_vec();
            f.on_device.push((from, bytes));
        }
        st.write_outs += 1;
        Ok(())
    }

    fn overwrites_in_place(&self) -> bool {
        true
    }

    fn sync_filesystem(&self) -> io::Result<()> {
        self.gate.pass();
        let mut st = self.st.lock();
        st.sync_point()?;
        for f in st.files.values_mut() {
            f.on_device.clear();
            f.durable = f.live.clone();
        }
        for d in st.dirs.values_mut() {
            d.durable = d.live.clone();
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.st.lock();
        st.check()?;
        let f = st.file_mut(self.id)?;
        f.live.resize(len as usize, 0);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let st = self.st.lock();
        st.check()?;
        Ok(st.files.get(&self.id).map_or(0, |f| f.live.len() as u64))
    }
}

impl Fs for SimFs {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FileHandle>> {
        let st = self.st.lock();
        st.check()?;
        match st.lookup(path) {
            Some(Entry::File(id)) => Ok(Arc::new(SimHandle {
                st: self.st.clone(),
                gate: self.gate.clone(),
                id,
            })),
            Some(Entry::Dir) => Err(io::Error::other("is a directory")),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FileHandle>> {
        let mut st = self.st.lock();
        st.check()?;
        let (parent, name) = split(path)?;
        let id = st.next_id;
        let dir = st
            .dirs
            .get_mut(&parent)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        if dir.live.contains_key(&name) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        dir.live.insert(name, Entry::File(id));
        st.next_id += 1;
        st.files.insert(id, FileData::default());
        Ok(Arc::new(SimHandle {
            st: self.st.clone(),
            gate: self.gate.clone(),
            id,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        st.check()?;
        let p = norm(path);
        let mut cur = PathBuf::from("/");
        for c in p.components().skip(1) {
            let name = c.as_os_str().to_string_lossy().into_owned();
            let next = cur.join(&name);
            let dir = st
                .dirs
                .get_mut(&cur)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            match dir.live.get(&name) {
                Some(Entry::Dir) => {}
                Some(Entry::File(_)) => return Err(io::Error::from(io::ErrorKind::AlreadyExists)),
                None => {
                    dir.live.insert(name, Entry::Dir);
                    st.dirs.insert(next.clone(), DirData::default());
                }
            }
            cur = next;
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.st.lock();
        st.check()?;
        let d = st
            .dirs
            .get(&norm(dir))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        Ok(d.live.keys().cloned().collect())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        st.check()?;
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let e = st
            .dirs
            .get_mut(&fp)
            .and_then(|d| d.live.remove(&fname))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        if e == Entry::Dir {
            return Err(io::Error::other("renaming directories is not simulated"));
        }
        st.dirs
            .get_mut(&tp)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?
            .live
            .insert(tname, e);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        st.check()?;
        let (parent, name) = split(path)?;
        match st.dirs.get_mut(&parent).and_then(|d| d.live.remove(&name)) {
            Some(Entry::File(_)) => Ok(()),
            Some(Entry::Dir) => Err(io::Error::other("is a directory")),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        st.check()?;
        let (parent, name) = split(path)?;
        st.dirs
            .get_mut(&parent)
            .and_then(|d| d.live.remove(&name))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.gate.pass();
        let mut st = self.st.lock();
        st.sync_point()?;
        let d = st
            .dirs
            .get_mut(&norm(dir))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        d.durable = d.live.clone();
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        self.st.lock().lookup(path).is_some()
    }

    fn device(&self, _path: &Path) -> Option<u64> {
        // One file system per SimFs (clones share it).
        Some(Arc::as_ptr(&self.st) as usize as u64)
    }
}
