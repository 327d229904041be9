//! The Raft log on disk: append-only segments `<first index, 20 digits>.raftlog`
//! under `data/meta/`, recovered at open, and the entries not yet purged kept
//! in memory (the metadata log is small and purged after every snapshot).
//!
//! Writes here only reach the page cache, except where a step must be
//! durable before the next one (rolling, truncation, purge); appends are made
//! durable by the syncer (`syncer.rs`).

use std::collections::BTreeMap;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use es_storage::fs::{FileHandle, Fs};
use openraft::LogId;

use super::files;
use super::frame::{self, Bad, Entry};

/// Suffix of segment files.
pub const SEGMENT_SUFFIX: &str = ".raftlog";
/// A segment is rolled once it holds this many bytes (64 MiB).
pub const SEGMENT_ROLL_BYTES: u64 = 64 * 1024 * 1024;

/// The file name of the segment whose first entry is `base`.
pub fn segment_name(base: u64) -> String {
    format!("{base:020}{SEGMENT_SUFFIX}")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One segment file.
#[derive(Debug)]
pub struct Segment {
    pub file: Arc<dyn FileHandle>,
    /// Bytes written (the append position).
    pub len: u64,
}

/// An entry in memory and where its frame is.
#[derive(Debug)]
struct Stored {
    entry: Entry,
    segment: u64,
    pos: u64,
}

/// The log: its segments, its unpurged entries, its purge point.
#[derive(Debug)]
pub struct Log {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    /// By base index; every one holds at least one frame.
    segments: BTreeMap<u64, Segment>,
    entries: BTreeMap<u64, Stored>,
    purged: Option<LogId<u64>>,
    /// The next append starts a new segment (set by purge, so that the
    /// segment before it can be deleted once purged).
    roll_next: bool,
    /// A failed write or sync: the log takes no more writes until a restart.
    pub failed: Option<String>,
}

impl Log {
    /// Recovers the log in `dir` (which exists).
    pub fn open(fs: Arc<dyn Fs>, dir: &Path) -> io::Result<Log> {
        let purged = files::read_purged(fs.as_ref(), dir)?;
        let mut bases: Vec<u64> = fs
            .list(dir)?
            .iter()
            .filter_map(|n| parse_segment_name(n))
            .collect();
        bases.sort_unstable();
        let mut log = Log {
            fs,
            dir: dir.to_path_buf(),
            segments: BTreeMap::new(),
            entries: BTreeMap::new(),
            purged,
            roll_next: false,
            failed: None,
        };
        // Segments that hold only purged entries (a crash during a purge can
        // leave some, in any order) are deleted unread.
        if let Some(p) = purged {
            let mut keep = Vec::with_capacity(bases.len());
            for (i, &base) in bases.iter().enumerate() {
                match bases.get(i + 1) {
                    Some(&next) if next - 1 <= p.index => {
                        log.fs.remove_file(&log.path(base))?;
                    }
                    _ => keep.push(base),
                }
            }
            if keep.len() != bases.len() {
                log.fs.sync_dir(dir)?;
            }
            bases = keep;
        }
        let count = bases.len();
        for (i, base) in bases.into_iter().enumerate() {
            log.recover_segment(base, i + 1 == count)?;
        }
        log.drop_purged()?;
        if let (Some(p), Some((&first, _))) = (log.purged, log.entries.first_key_value()) {
            if first > p.index + 1 {
                return Err(corrupt(format!(
                    "the log starts at index {first} but only entries up to {} were purged",
                    p.index
                )));
            }
        }
        Ok(log)
    }

    fn path(&self, base: u64) -> PathBuf {
        self.dir.join(segment_name(base))
    }

    fn recover_segment(&mut self, base: u64, last: bool) -> io::Result<()> {
        let path = self.path(base);
        let file = self.fs.open(&path)?;
        let file_len = file.len()?;
        let mut pos = 0u64;
        let mut expect = base;
        if let Some((&prev, _)) = self.entries.last_key_value() {
            if base != prev + 1 {
                return Err(corrupt(format!(
                    "{} starts at index {base}, but the log before it ends at {prev}",
                    path.display()
                )));
            }
        }
        while pos < file_len {
            match frame::read_frame(file.as_ref(), pos, file_len)? {
                Ok(d) => {
                    let index = d.entry.log_id.index;
                    if index != expect {
                        return Err(corrupt(format!(
                            "{} at byte {pos}: index {index} where {expect} was due",
                            path.display()
                        )));
                    }
                    self.entries.insert(
                        index,
                        Stored {
                            entry: d.entry,
                            segment: base,
                            pos,
                        },
                    );
                    pos += d.size;
                    expect += 1;
                }
                Err(bad) => {
                    let content = matches!(bad, Bad::Content(_));
                    if !last
                        || content
                        || frame::intact_frame_after(file.as_ref(), pos + 1, file_len, expect)?
                    {
                        return Err(corrupt(format!(
                            "{} at byte {pos}: {bad} (not a torn tail)",
                            path.display()
                        )));
                    }
                    tracing::warn!(
                        file = %path.display(),
                        position = pos,
                        dropped_bytes = file_len - pos,
                        "metadata log: cutting a torn tail ({bad})"
                    );
                    file.set_len(pos)?;
                    file.sync_data()?;
                    break;
                }
            }
        }
        if pos == 0 {
            if !last {
                return Err(corrupt(format!(
                    "{} holds no entry but is not the last segment",
                    path.display()
                )));
            }
            drop(file);
            self.fs.remove_file(&path)?;
            self.fs.sync_dir(&self.dir)?;
            return Ok(());
        }
        self.segments.insert(base, Segment { file, len: pos });
        Ok(())
    }

    /// Forgets entries at or below the purge point and deletes the segments
    /// that hold only such entries.
    fn drop_purged(&mut self) -> io::Result<()> {
        let Some(p) = self.purged else {
            return Ok(());
        };
        let keep = self.entries.split_off(&(p.index + 1));
        self.entries = keep;
        let bases: Vec<u64> = self.segments.keys().copied().collect();
        let mut removed = false;
        for (i, base) in bases.iter().enumerate() {
            // The segment ends before the next one starts, or at the log's end.
            let end = match bases.get(i + 1) {
                Some(next) => next - 1,
                None => match self.entries.last_key_value() {
                    Some((&l, _)) if self.segment_of(l) == Some(*base) => l,
                    _ => p.index,
                },
            };
            if end <= p.index {
                self.segments.remove(base);
                self.fs.remove_file(&self.path(*base))?;
                removed = true;
            }
        }
        if removed {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(())
    }

    fn segment_of(&self, index: u64) -> Option<u64> {
        self.entries.get(&index).map(|s| s.segment)
    }

    /// True if the directory held no log entry and no purge record.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.purged.is_none()
    }

    pub fn purged(&self) -> Option<LogId<u64>> {
        self.purged
    }

    /// The last log id: of the last entry, else the purge point.
    pub fn last_log_id(&self) -> Option<LogId<u64>> {
        match self.entries.last_key_value() {
            Some((_, s)) => Some(s.entry.log_id),
            None => self.purged,
        }
    }

    /// Clones of the entries in `range`.
    pub fn entries<R: RangeBounds<u64>>(&self, range: R) -> Vec<Entry> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => match s.checked_add(1) {
                Some(s) => s,
                None => return Vec::new(),
            },
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => Bound::Included(e),
            Bound::Excluded(&e) => Bound::Excluded(e),
            Bound::Unbounded => Bound::Unbounded,
        };
        let empty = match end {
            Bound::Included(e) => e < start,
            Bound::Excluded(e) => e <= start,
            Bound::Unbounded => false,
        };
        if empty {
            return Vec::new();
        }
        self.entries
            .range((Bound::Included(start), end))
            .map(|(_, s)| s.entry.clone())
            .collect()
    }

    fn check_failed(&self) -> io::Result<()> {
        match &self.failed {
            Some(why) => Err(io::Error::other(format!(
                "the metadata log failed earlier and takes no more writes: {why}"
            ))),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: io::Error) -> io::Error {
        if self.failed.is_none() {
            self.failed = Some(e.to_string());
        }
        e
    }

    /// Writes the frames of `entries` (not yet durable); returns the handle
    /// of the segment written last, which the syncer must sync. Every
    /// earlier segment is already durable.
    pub fn append(&mut self, entries: Vec<Entry>) -> io::Result<Option<Arc<dyn FileHandle>>> {
        self.check_failed()?;
        let mut touched = None;
        for entry in entries {
            let index = entry.log_id.index;
            if self.entries.is_empty() && self.purged.is_some_and(|p| index <= p.index) {
                // Already covered by the purge point (the state machine has
                // it): nothing to keep. openraft's storage suite does this.
                tracing::debug!(
                    index,
                    "metadata log: append at or below the purge point skipped"
                );
                continue;
            }
            let due = match (self.entries.last_key_value(), self.purged) {
                (Some((&l, _)), _) => Some(l + 1),
                (None, Some(p)) => Some(p.index + 1),
                (None, None) => None,
            };
            if let Some(due) = due {
                if index != due {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("append of index {index} where {due} is due"),
                    ));
                }
            }
            let bytes = frame::encode(&entry)?;
            let res = self.write_frame(index, &bytes);
            let (base, pos, file) = res.map_err(|e| self.fail(e))?;
            self.entries.insert(
                index,
                Stored {
                    entry,
                    segment: base,
                    pos,
                },
            );
            touched = Some(file);
        }
        Ok(touched)
    }

    fn write_frame(
        &mut self,
        index: u64,
        bytes: &[u8],
    ) -> io::Result<(u64, u64, Arc<dyn FileHandle>)> {
        let need_roll = match self.segments.last_key_value() {
            None => true,
            Some((_, s)) => self.roll_next || s.len >= SEGMENT_ROLL_BYTES,
        };
        if need_roll {
            if let Some((_, s)) = self.segments.last_key_value() {
                s.file.sync_data()?;
            }
            let path = self.path(index);
            let file = self.fs.create_new(&path)?;
            self.fs.sync_dir(&self.dir)?;
            self.segments.insert(index, Segment { file, len: 0 });
            self.roll_next = false;
        }
        let (&base, seg) = self
            .segments
            .last_key_value()
            .ok_or_else(|| io::Error::other("no active segment after a roll"))?;
        let pos = seg.len;
        seg.file.write_all_at(bytes, pos)?;
        let file = seg.file.clone();
        if let Some(seg) = self.segments.get_mut(&base) {
            seg.len += bytes.len() as u64;
        }
        Ok((base, pos, file))
    }

    /// Removes the entries from `index` on, durably.
    pub fn truncate(&mut self, index: u64) -> io::Result<()> {
        self.check_failed()?;
        let first = self.entries.range(index..).next();
        let Some((seg, pos)) = first.map(|(_, s)| (s.segment, s.pos)) else {
            return Ok(());
        };
        let res = self.truncate_at(seg, pos);
        res.map_err(|e| self.fail(e))?;
        self.entries.split_off(&index);
        Ok(())
    }

    fn truncate_at(&mut self, seg: u64, pos: u64) -> io::Result<()> {
        // Later segments go first, so a crash never leaves a gap.
        let later: Vec<u64> = self.segments.range(seg + 1..).map(|(&b, _)| b).collect();
        let whole = pos == 0;
        let mut removed = false;
        for b in later.iter().rev().copied().chain(whole.then_some(seg)) {
            self.segments.remove(&b);
            self.fs.remove_file(&self.path(b))?;
            removed = true;
        }
        if removed {
            self.fs.sync_dir(&self.dir)?;
        }
        if !whole {
            if let Some(s) = self.segments.get_mut(&seg) {
                s.file.set_len(pos)?;
                s.file.sync_data()?;
                s.len = pos;
            }
        }
        Ok(())
    }

    /// Records `log_id` as purged (durably), forgets the entries up to it
    /// and deletes the segments that hold nothing after it.
    pub fn purge(&mut self, log_id: LogId<u64>) -> io::Result<()> {
        self.check_failed()?;
        if self.purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        files::save_purged(self.fs.as_ref(), &self.dir, &log_id)?;
        self.purged = Some(log_id);
        self.drop_purged()?;
        if !self.segments.is_empty() {
            self.roll_next = true;
        }
        Ok(())
    }
}

fn corrupt(why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("metadata log is corrupt: {why}"),
    )
}
