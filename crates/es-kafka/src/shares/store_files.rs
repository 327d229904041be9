//! Where a share-partition's files are and how they go ([`ShareFiles`]):
//! their names under `data/shares/<group stem>/`, the durable two-step
//! deletion (rename to `.deleted`, then unlink) that a crash cannot leave
//! half done, and the clean-up of a crash's temporary snapshot files.

use std::path::{Path, PathBuf};

use es_storage::{meta, Fs, StorageError};

use super::{DELETED_SUFFIX, JOURNAL_SUFFIX, SHARES_DIR, SNAPSHOT_SUFFIX};

/// Which share-partition, and where its files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareFiles {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub dir: PathBuf,
    pub journal: PathBuf,
    pub snapshot: PathBuf,
}

impl ShareFiles {
    /// `data_dir/shares/<group stem>/<topic>-<partition>.{journal,snapshot.json}`;
    /// the stem is the group file's (`groups::store::file_name`).
    pub fn new(data_dir: &Path, group: &str, topic: &str, partition: i32) -> ShareFiles {
        let name = crate::groups::store::file_name(group);
        let stem = name
            .strip_suffix(crate::groups::store::FILE_SUFFIX)
            .unwrap_or(&name);
        let dir = data_dir.join(SHARES_DIR).join(stem);
        let base = format!("{topic}-{partition}");
        ShareFiles {
            group: group.to_string(),
            topic: topic.to_string(),
            partition,
            journal: dir.join(format!("{base}{JOURNAL_SUFFIX}")),
            snapshot: dir.join(format!("{base}{SNAPSHOT_SUFFIX}")),
            dir,
        }
    }

    /// The files of `(topic, partition)` in a group's directory `dir`, for
    /// removing them when the group's name is not at hand (topic deletion
    /// walks every group's directory). Not for loading: the snapshot's
    /// group check would fail.
    pub fn in_group_dir(dir: &Path, topic: &str, partition: i32) -> ShareFiles {
        let base = format!("{topic}-{partition}");
        ShareFiles {
            group: String::new(),
            topic: topic.to_string(),
            partition,
            journal: dir.join(format!("{base}{JOURNAL_SUFFIX}")),
            snapshot: dir.join(format!("{base}{SNAPSHOT_SUFFIX}")),
            dir: dir.to_path_buf(),
        }
    }

    /// Whether the share-partition has files (state, or the remains of a
    /// deletion a crash interrupted, which the next open finishes).
    pub fn exist(&self, fs: &dyn Fs) -> bool {
        fs.exists(&self.journal) || fs.exists(&self.snapshot) || self.deletion_started(fs)
    }

    pub(super) fn deleted(p: &Path) -> PathBuf {
        let mut s = p.as_os_str().to_owned();
        s.push(DELETED_SUFFIX);
        PathBuf::from(s)
    }

    /// Whether a deletion was started (a `.deleted` file is left).
    pub(super) fn deletion_started(&self, fs: &dyn Fs) -> bool {
        fs.exists(&Self::deleted(&self.journal)) || fs.exists(&Self::deleted(&self.snapshot))
    }

    /// Removes both files durably: rename to `.deleted`, dir fsync, unlink,
    /// dir fsync. A crash part way leaves a `.deleted` file, and the next
    /// load finishes the deletion, so a deletion is all or nothing.
    pub fn remove(&self, fs: &dyn Fs) -> Result<(), StorageError> {
        if !fs.exists(&self.dir) {
            return Ok(());
        }
        let mut renamed = false;
        for p in [&self.journal, &self.snapshot] {
            if fs.exists(p) {
                fs.rename(p, &Self::deleted(p))?;
                renamed = true;
            }
        }
        if renamed {
            fs.sync_dir(&self.dir)?;
        }
        self.finish_removal(fs)
    }

    /// Unlinks whatever is left of a deletion: the live names first (a
    /// rename that did not survive a crash), the `.deleted` names last, so a
    /// crash in between still shows a deletion in progress.
    pub(super) fn finish_removal(&self, fs: &dyn Fs) -> Result<(), StorageError> {
        let mut removed = false;
        for p in [&self.journal, &self.snapshot] {
            if fs.exists(p) {
                fs.remove_file(p)?;
                removed = true;
            }
        }
        if removed {
            fs.sync_dir(&self.dir)?;
        }
        removed = false;
        for p in [&self.journal, &self.snapshot] {
            let d = Self::deleted(p);
            if fs.exists(&d) {
                fs.remove_file(&d)?;
                removed = true;
            }
        }
        if removed {
            fs.sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Removes temporary files a crash left mid-replace of this snapshot
    /// (only this share-partition's: others in the directory may be being
    /// written now).
    pub(super) fn remove_temp_files(&self, fs: &dyn Fs) -> Result<(), StorageError> {
        let Some(name) = self.snapshot.file_name() else {
            return Ok(());
        };
        let prefix = format!(".{}.", name.to_string_lossy());
        for n in fs.list(&self.dir)? {
            if n.starts_with(&prefix) && n.ends_with(meta::TEMP_SUFFIX) {
                fs.remove_file(&self.dir.join(&n))?;
            }
        }
        Ok(())
    }
}
