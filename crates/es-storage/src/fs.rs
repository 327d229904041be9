//! The file-system seam: every byte es-storage reads or writes goes through
//! [`Fs`] and [`FileHandle`], so tests can swap the real disk for
//! [`crate::simfs::SimFs`], which crashes, tears writes, fails fsyncs and fills up.
//!
//! The trait is deliberately small: positional reads and writes, `set_len`,
//! `sync_data`, and the directory operations that recovery and the atomic
//! metadata replace need.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Mode of every file es creates: readable and writable by the broker's user only.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every directory es creates.
pub const DIR_MODE: u32 = 0o700;

/// An open file.
pub trait FileHandle: Send + Sync + std::fmt::Debug {
    /// Reads up to `buf.len()` bytes at `pos`; returns how many were read (0 at end).
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `pos`. On error some prefix may have been written.
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()>;
    /// Makes every write so far durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// Makes every write so far to every file of the file system that holds
    /// this file durable, file sizes and directory entries included (syncfs).
    /// Reports a write-back error of any of its files.
    fn sync_filesystem(&self) -> io::Result<()>;
    /// Starts writing the bytes of `[from, to)` out to the device, without
    /// waiting and without flushing the device's cache (`sync_file_range`
    /// WRITE). Nothing is durable before [`FileHandle::wait_written`] and a
    /// later flush. The default does nothing (its `wait_written` syncs).
    fn start_write_out(&self, from: u64, to: u64) -> io::Result<()> {
        let _ = (from, to);
        Ok(())
    }
    /// Waits until the device holds the bytes of `[from, to)` (written out,
    /// not flushed from its cache), reporting a write-back error. They are
    /// durable once any [`FileHandle::sync_data`] on the same device has
    /// flushed its cache after this returns, and only if keeping them needs
    /// no metadata change: bytes over a durable length, on a file system
    /// that overwrites in place ([`FileHandle::overwrites_in_place`]). The
    /// default is an fdatasync, durable on its own.
    fn wait_written(&self, from: u64, to: u64) -> io::Result<()> {
        let _ = (from, to);
        self.sync_data()
    }
    /// Whether this file's file system writes over allocated, written blocks
    /// in place (ext4, XFS), so that [`FileHandle::wait_written`] and a flush
    /// keep overwritten bytes without a metadata change (not so for copy-on-
    /// write file systems such as btrfs and ZFS).
    fn overwrites_in_place(&self) -> bool {
        false
    }
    /// Flushes the device's write cache, making everything written out to
    /// it so far durable, this file's data included: an fdatasync of this
    /// file, which always ends with a cache flush. Unlike a wrapper's
    /// [`FileHandle::sync_data`] it never skips the call because this file
    /// has nothing left to sync (the fd cache's closed, clean files).
    fn flush_device(&self) -> io::Result<()> {
        self.sync_data()
    }
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Current length.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// A file system.
pub trait Fs: Send + Sync + std::fmt::Debug {
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FileHandle>>;
    /// Creates a new file (mode 0600), failing if it exists.
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FileHandle>>;
    /// Creates a directory and its parents (mode 0700).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Lists the names in a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes a directory and everything in it.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creates, renames, removes) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    /// Which file system holds `path`: files with the same answer are all
    /// covered by one [`FileHandle::sync_filesystem`]. None if unknown.
    fn device(&self, path: &Path) -> Option<u64>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

#[derive(Debug)]
struct RealFile(File, std::sync::OnceLock<bool>);

/// `statfs` magic numbers of the file systems that overwrite in place.
const EXT4_SUPER_MAGIC: u64 = 0xEF53;
const XFS_SUPER_MAGIC: u64 = 0x5846_5342;

impl RealFile {
    fn new(f: File) -> RealFile {
        RealFile(f, std::sync::OnceLock::new())
    }

    /// `sync_file_range` over `[from, to)` with `flags`.
    fn sync_range(&self, from: u64, to: u64, flags: libc::c_uint) -> io::Result<()> {
        use std::os::unix::io::AsRawFd;
        let len = to.saturating_sub(from);
        let (Ok(from), Ok(len)) = (libc::off64_t::try_from(from), libc::off64_t::try_from(len))
        else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: a system call on a descriptor this value owns; it reads no
        // memory of ours.
        #[allow(unsafe_code)]
        let r = unsafe { libc::sync_file_range(self.0.as_raw_fd(), from, len, flags) };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl FileHandle for RealFile {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        loop {
            match self.0.read_at(buf, pos) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.0.write_all_at(buf, pos)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn start_write_out(&self, from: u64, to: u64) -> io::Result<()> {
        self.sync_range(from, to, libc::SYNC_FILE_RANGE_WRITE)
    }
    fn wait_written(&self, from: u64, to: u64) -> io::Result<()> {
        self.sync_range(
            from,
            to,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        )
    }
    fn overwrites_in_place(&self) -> bool {
        *self.1.get_or_init(|| {
            rustix::fs::fstatfs(&self.0).is_ok_and(|st| {
                let magic = st.f_type as u64;
                magic == EXT4_SUPER_MAGIC || magic == XFS_SUPER_MAGIC
            })
        })
    }
    fn sync_filesystem(&self) -> io::Result<()> {
        rustix::fs::syncfs(&self.0)?;
        // syncfs asks the file system to flush the device's write cache and
        // then writes the block device's own buffers, which is where ext2
        // and ext4 without a journal keep inode tables (file sizes): they
        // can be left in the device cache. An fsync of a file always ends
        // with a cache flush, so the one after syncfs covers them.
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl Fs for RealFs {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FileHandle>> {
        Ok(Arc::new(RealFile::new(
            OpenOptions::new().read(true).write(true).open(path)?,
        )))
    }
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FileHandle>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(path)?;
        Ok(Arc::new(RealFile::new(f)))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir)? {
            out.push(e?.file_name().to_string_lossy().into_owned());
        }
        out.sort();
        Ok(out)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn device(&self, path: &Path) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| m.dev())
    }
}

/// Joins a directory and a file name.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Creates `path` and any missing parents (mode 0700), fsyncing each parent
/// whose entries changed, so the new directories survive a crash.
pub fn create_dir_durable(fs: &dyn Fs, path: &Path) -> io::Result<()> {
    if fs.exists(path) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            create_dir_durable(fs, parent)?;
        }
    }
    fs.create_dir_all(path)?;
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            if let Err(e) = fs.sync_dir(parent) {
                // The new entry may not be durable: take the directory away
                // again, so that the next call creates it and syncs anew. A
                // call that found it existing would skip the sync, and what
                // is then written in it could go with it at a power loss.
                let _ = fs.remove_dir_all(path);
                return Err(e);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
