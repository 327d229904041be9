//! A generic append-only journal file: CRC-checked entries in the documented
//! record format, appended with one `write` per call and made durable by a
//! shared fsync (group commit), cut back to its last whole entry at open.
//!
//! Each entry is one record of [`crate::record`] (length prefix, offset,
//! timestamp, no key, the payload as its value, CRC-32C). The record's offset
//! field is the entry's *sequence number*, strictly increasing for the life of
//! the journal, also across [`Journal::truncate`], so that a snapshot that
//! folds the journal can say "everything up to sequence N is in here" and a
//! replay skips what the snapshot already holds.
//!
//! Durability: [`Journal::write`] returns a ticket (a logical byte position
//! that never goes back, even when the file is truncated); [`Journal::sync`]
//! returns once an fsync covers that ticket. The first waiter runs the fsync
//! with no lock held and covers everything written so far; waiters behind it
//! find their ticket covered and return without a system call. A failed fsync
//! or a write whose partial bytes cannot be cut off fences the journal: every
//! later call fails until a restart replays it (nothing written since the last
//! good fsync can be trusted, as the storage document requires).
//!
//! Recovery: [`Journal::open`] decodes entries from the start and stops at the
//! first one that is incomplete, fails its CRC, or does not continue the
//! sequence. Everything after that point was never covered by an fsync that
//! returned (appends are sequential and acknowledged only after the fsync), so
//! it is cut off, and the cut is fsynced before the journal is used.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Result, StorageError};
use crate::fs::{FileHandle, Fs};
use crate::record::{self, DecodeError, RecordMeta};

/// Largest journal file [`Journal::open`] reads (256 MiB); callers fold it
/// into a snapshot long before that.
pub const JOURNAL_BYTES_MAX: u64 = 256 * 1024 * 1024;
/// Largest payload of one entry (16 MiB).
pub const ENTRY_BYTES_MAX: usize = 16 * 1024 * 1024;

/// One recovered entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    pub seq: u64,
    pub timestamp_ms: i64,
    pub payload: Vec<u8>,
}

/// What [`Journal::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalRecovery {
    pub entries: Vec<JournalEntry>,
    /// Bytes cut off the end (a torn or never-synced tail).
    pub cut_bytes: u64,
}

/// A position in the journal's history that never goes back.
pub type Ticket = u64;

#[derive(Debug)]
struct Inner {
    /// Bytes in the file.
    file_len: u64,
    /// Logical bytes ever written (the ticket of the newest write).
    written: Ticket,
    /// Logical bytes covered by an fsync.
    durable: Ticket,
    next_seq: u64,
    syncing: bool,
    fenced: Option<String>,
}

/// An append-only journal file.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: Arc<dyn FileHandle>,
    inner: Mutex<Inner>,
    synced: Condvar,
    /// fsyncs run by [`Journal::sync`] (metrics).
    fsyncs: std::sync::atomic::AtomicU64,
}

impl Journal {
    /// Opens (creating if missing, durably) the journal at `path`, returns
    /// its valid entries and cuts off anything after them.
    pub fn open(fs: &dyn Fs, path: &Path) -> Result<(Journal, JournalRecovery)> {
        let dir = path
            .parent()
            .ok_or_else(|| StorageError::Invalid(format!("{} has no parent", path.display())))?;
        crate::fs::create_dir_durable(fs, dir)?;
        let file = if fs.exists(path) {
            fs.open(path)?
        } else {
            let f = fs.create_new(path)?;
            fs.sync_dir(dir)?;
            f
        };
        let len = file.len()?;
        if len > JOURNAL_BYTES_MAX {
            return Err(StorageError::Metadata {
                file: path.display().to_string(),
                why: format!("journal of {len} bytes is over the limit"),
            });
        }
        let mut buf = vec![0u8; len as usize];
        crate::segment::read_exact_at(&*file, &mut buf, 0)?;
        let mut rec = JournalRecovery::default();
        let mut pos = 0usize;
        let mut last_seq: Option<u64> = None;
        while pos < buf.len() {
            match record::decode(&buf[pos..]) {
                Ok(r) => {
                    if last_seq.is_some_and(|s| r.offset <= s) {
                        tracing::warn!(journal = %path.display(), position = pos, "journal sequence goes back; cutting here");
                        break;
                    }
                    last_seq = Some(r.offset);
                    rec.entries.push(JournalEntry {
                        seq: r.offset,
                        timestamp_ms: r.timestamp_ms,
                        payload: r.value.unwrap_or_default().to_vec(),
                    });
                    pos += r.encoded_len;
                }
                Err(DecodeError::Incomplete { .. }) | Err(DecodeError::Corrupt(_)) => break,
            }
        }
        let valid = pos as u64;
        if valid < len {
            rec.cut_bytes = len - valid;
            tracing::warn!(journal = %path.display(), valid_bytes = valid, cut_bytes = rec.cut_bytes, "cutting the journal's unsynced tail");
            file.set_len(valid)?;
            file.sync_data()?;
        }
        let journal = Journal {
            path: path.to_path_buf(),
            file,
            inner: Mutex::new(Inner {
                file_len: valid,
                written: 0,
                durable: 0,
                next_seq: last_seq.map_or(0, |s| s + 1),
                syncing: false,
                fenced: None,
            }),
            synced: Condvar::new(),
            fsyncs: std::sync::atomic::AtomicU64::new(0),
        };
        Ok((journal, rec))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the next entry's sequence at least `seq` (after a snapshot that
    /// folded entries up to `seq - 1` and a truncated journal).
    pub fn ensure_next_seq(&self, seq: u64) {
        let mut g = self.inner.lock();
        g.next_seq = g.next_seq.max(seq);
    }

    /// The sequence of the newest entry written, if any ever was.
    pub fn last_seq(&self) -> Option<u64> {
        self.inner.lock().next_seq.checked_sub(1)
    }

    /// Bytes currently in the file.
    pub fn len_bytes(&self) -> u64 {
        self.inner.lock().file_len
    }

    /// Appends `payloads` as consecutive entries with one write. Not yet
    /// durable: pass the ticket to [`Journal::sync`] before relying on it.
    /// Returns the ticket and the sequence of the last entry.
    pub fn write(&self, payloads: &[&[u8]], timestamp_ms: i64) -> Result<(Ticket, u64)> {
        if payloads.is_empty() {
            return Err(StorageError::Invalid("empty journal append".into()));
        }
        if let Some(p) = payloads.iter().find(|p| p.len() > ENTRY_BYTES_MAX) {
            return Err(StorageError::RecordTooLarge(p.len()));
        }
        let mut g = self.inner.lock();
        if let Some(why) = &g.fenced {
            return Err(StorageError::Fenced(format!(
                "{}: {why}",
                self.path.display()
            )));
        }
        let meta = RecordMeta::default();
        let mut buf = Vec::with_capacity(payloads.iter().map(|p| p.len() + 40).sum());
        let first_seq = g.next_seq;
        for (i, p) in payloads.iter().enumerate() {
            record::encode(
                &mut buf,
                first_seq + i as u64,
                timestamp_ms,
                None,
                Some(p),
                std::iter::empty(),
                &meta,
            );
        }
        let at = g.file_len;
        if let Err(e) = self.file.write_all_at(&buf, at) {
            if self.file.set_len(at).is_err() {
                g.fenced = Some(format!("write failed and could not be undone: {e}"));
            }
            return Err(e.into());
        }
        let n = buf.len() as u64;
        g.file_len += n;
        g.written += n;
        g.next_seq = first_seq + payloads.len() as u64;
        Ok((g.written, g.next_seq - 1))
    }

    /// fsyncs [`Journal::sync`] has run (one covers every writer waiting).
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Returns once an fsync covers `ticket` (group commit).
    pub fn sync(&self, ticket: Ticket) -> Result<()> {
        let mut g = self.inner.lock();
        loop {
            if g.durable >= ticket {
                return Ok(());
            }
            if let Some(why) = &g.fenced {
                return Err(StorageError::Fenced(format!(
                    "{}: {why}",
                    self.path.display()
                )));
            }
            if !g.syncing {
                break;
            }
            self.synced.wait(&mut g);
        }
        g.syncing = true;
        let goal = g.written;
        drop(g);
        let res = self.file.sync_data();
        self.fsyncs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut g = self.inner.lock();
        g.syncing = false;
        let out = match res {
            Ok(()) => {
                g.durable = g.durable.max(goal);
                Ok(())
            }
            Err(e) => {
                tracing::error!(journal = %self.path.display(), error = %e, "journal fsync failed; fenced until restart");
                g.fenced = Some(format!("fsync failed: {e}"));
                Err(StorageError::Fenced(format!(
                    "{}: fsync failed: {e}",
                    self.path.display()
                )))
            }
        };
        drop(g);
        self.synced.notify_all();
        out?;
        // Another writer may have raced ahead of our goal; loop for our ticket.
        self.sync(ticket)
    }

    /// Writes and syncs: the entries are durable when this returns.
    pub fn append(&self, payloads: &[&[u8]], timestamp_ms: i64) -> Result<u64> {
        let (ticket, seq) = self.write(payloads, timestamp_ms)?;
        self.sync(ticket)?;
        Ok(seq)
    }

    /// Makes everything written so far durable.
    pub fn sync_all(&self) -> Result<()> {
        let t = self.inner.lock().written;
        self.sync(t)
    }

    /// Empties the file (after its entries were folded into a durable
    /// snapshot). Everything written must already be durable: the caller
    /// holds off writers and calls [`Journal::sync_all`] first. Sequence
    /// numbers keep increasing.
    pub fn truncate(&self) -> Result<()> {
        let mut g = self.inner.lock();
        while g.syncing {
            self.synced.wait(&mut g);
        }
        if let Some(why) = &g.fenced {
            return Err(StorageError::Fenced(format!(
                "{}: {why}",
                self.path.display()
            )));
        }
        if g.durable < g.written {
            return Err(StorageError::Invalid(
                "journal truncated with unsynced entries".into(),
            ));
        }
        let res = self.file.set_len(0).and_then(|()| self.file.sync_data());
        if let Err(e) = res {
            g.fenced = Some(format!("truncate failed: {e}"));
            return Err(e.into());
        }
        g.file_len = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simfs::{SimFs, Tear};

    fn path() -> PathBuf {
        PathBuf::from("/data/producers.journal")
    }

    fn payloads(r: &JournalRecovery) -> Vec<Vec<u8>> {
        r.entries.iter().map(|e| e.payload.clone()).collect()
    }

    #[test]
    fn appends_replay_in_order() {
        let fs = SimFs::new();
        let (j, rec) = Journal::open(&fs, &path()).expect("open");
        assert!(rec.entries.is_empty());
        assert_eq!(j.append(&[b"a"], 1).expect("append"), 0);
        assert_eq!(j.append(&[b"b", b"c"], 2).expect("append"), 2);
        assert_eq!(j.last_seq(), Some(2));
        drop(j);
        let (j, rec) = Journal::open(&fs, &path()).expect("reopen");
        assert_eq!(
            payloads(&rec),
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert_eq!(
            rec.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(j.append(&[b"d"], 3).expect("append"), 3);
    }

    #[test]
    fn torn_tail_is_cut_and_only_synced_entries_survive() {
        for tear in 0..64u64 {
            let fs = SimFs::new();
            let (j, _) = Journal::open(&fs, &path()).expect("open");
            j.append(&[b"synced-1", b"synced-2"], 1).expect("append");
            // Written but never synced: may be torn anywhere by the crash.
            j.write(&[b"unsynced-entry-with-some-length"], 2)
                .expect("write");
            let crashed = fs.crash_image(Tear::Prefix(tear));
            let (j2, rec) = Journal::open(&crashed, &path()).expect("reopen");
            let got = payloads(&rec);
            assert!(got.len() == 2 || got.len() == 3, "tear {tear}: {got:?}");
            assert_eq!(got[..2], [b"synced-1".to_vec(), b"synced-2".to_vec()]);
            // The cut is durable and appends continue after the valid entries.
            let next = j2.append(&[b"after"], 3).expect("append after recovery");
            assert_eq!(next, got.len() as u64);
            let (_, rec2) =
                Journal::open(&crashed.crash_image(Tear::None), &path()).expect("again");
            assert_eq!(rec2.entries.len(), got.len() + 1, "tear {tear}");
        }
    }

    #[test]
    fn corrupt_entry_cuts_the_rest() {
        let fs = SimFs::new();
        let (j, _) = Journal::open(&fs, &path()).expect("open");
        j.append(&[b"one"], 1).expect("append");
        let second_at = j.len_bytes();
        j.append(&[b"two"], 1).expect("append");
        j.append(&[b"three"], 1).expect("append");
        drop(j);
        fs.corrupt(&path(), second_at as usize + 20, 0x40)
            .expect("corrupt");
        let (_, rec) = Journal::open(&fs, &path()).expect("reopen");
        assert_eq!(payloads(&rec), vec![b"one".to_vec()]);
        assert!(rec.cut_bytes > 0);
    }

    #[test]
    fn truncate_keeps_sequences_increasing() {
        let fs = SimFs::new();
        let (j, _) = Journal::open(&fs, &path()).expect("open");
        j.append(&[b"a", b"b"], 1).expect("append");
        j.sync_all().expect("sync");
        j.truncate().expect("truncate");
        assert_eq!(j.len_bytes(), 0);
        assert_eq!(j.append(&[b"c"], 1).expect("append"), 2);
        let (j2, rec) = Journal::open(&fs.crash_image(Tear::None), &path()).expect("reopen");
        assert_eq!(rec.entries.len(), 1);
        assert_eq!(rec.entries[0].seq, 2);
        // After a truncate and a restart the caller restores the sequence.
        j2.ensure_next_seq(10);
        assert_eq!(j2.append(&[b"d"], 1).expect("append"), 10);
    }

    #[test]
    fn failed_fsync_fences() {
        let fs = SimFs::new();
        let (j, _) = Journal::open(&fs, &path()).expect("open");
        j.append(&[b"a"], 1).expect("append");
        fs.fail_sync_at(fs.sync_count() + 1);
        assert!(j.append(&[b"b"], 1).is_err());
        assert!(matches!(j.append(&[b"c"], 1), Err(StorageError::Fenced(_))));
    }

    #[test]
    fn concurrent_appends_share_fsyncs_and_all_survive() {
        let fs = SimFs::new();
        let (j, _) = Journal::open(&fs, &path()).expect("open");
        let j = Arc::new(j);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let j = j.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let p = format!("{t}-{i}");
                        j.append(&[p.as_bytes()], 0).expect("append");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
        assert!(fs.sync_count() <= 400 + 2);
        let (_, rec) = Journal::open(&fs.crash_image(Tear::None), &path()).expect("reopen");
        assert_eq!(rec.entries.len(), 400);
    }
}
