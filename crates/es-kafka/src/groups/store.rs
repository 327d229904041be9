//! Groups on disk: one JSON document per group, `data/groups/<group>.json`,
//! replaced atomically with es-storage's [`meta::write_json`] (temporary file,
//! fsync, rename, directory fsync), so a crash leaves the old document or the
//! new one, never a mix.
//!
//! A document holds what must survive a restart: the group's type (`classic`,
//! `consumer` or `share`, i.e. which protocol owns it), its protocol type,
//! every committed offset with its leader epoch, metadata and commit time,
//! and for a share group the share-partitions it has assigned (whose state
//! lives beside the partitions, `shares::store`). Members,
//! generations and assignments are not kept: after a restart groups come back
//! Empty and their members rejoin, as the design asks.
//!
//! File names: group ids are arbitrary strings, file names are not. Bytes
//! outside `[A-Za-z0-9_-]` (and a leading `.`, which marks temporary files)
//! are written `%XX`, which is injective (the empty id, which OffsetCommit
//! allows, is `%`). Names whose encoding is longer than
//! [`FILE_STEM_BYTES_MAX`] keep an encoded prefix plus `~` and a 96-bit hash;
//! `~` never appears in the short form, and the group id stored inside the
//! document is authoritative (the coordinator refuses a second group that
//! would map to a file another group owns).

use std::path::Path;

use es_storage::fs::create_dir_durable;
use es_storage::{meta, Fs, StorageError};
use serde::{Deserialize, Serialize};

/// The directory under the data directory.
pub const GROUPS_DIR: &str = "groups";
/// Suffix of a group document.
pub const FILE_SUFFIX: &str = ".json";
/// Longest encoded group id used verbatim as a file stem.
pub const FILE_STEM_BYTES_MAX: usize = 200;
/// Length of the encoded prefix kept in front of a hashed file stem.
const HASHED_PREFIX_BYTES: usize = 150;

/// Which protocol owns a group.
pub const TYPE_CLASSIC: &str = "classic";
pub const TYPE_CONSUMER: &str = "consumer";
pub const TYPE_SHARE: &str = "share";

/// The partitions of one topic a share group has assigned (so their
/// share-partition state exists or may exist): what
/// DescribeShareGroupOffsets without topics and DeleteShareGroupOffsets
/// read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareTopicEntry {
    pub topic: String,
    pub topic_id: String,
    pub partitions: Vec<i32>,
}

/// One committed offset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// -1 when the committer did not know it.
    pub leader_epoch: i32,
    /// Kafka stores a null metadata as "".
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// The id of the topic the offset was committed for, so an offset of a
    /// deleted topic does not apply to a new topic of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
}

/// The contents of `data/groups/<group>.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupFile {
    pub group: String,
    /// [`TYPE_CLASSIC`], [`TYPE_CONSUMER`] or [`TYPE_SHARE`].
    #[serde(rename = "type")]
    pub group_type: String,
    /// The classic protocol type ("consumer", "connect", ...), if any.
    #[serde(default)]
    pub protocol_type: Option<String>,
    #[serde(default)]
    pub offsets: Vec<OffsetEntry>,
    /// A share group's assigned share-partitions, by topic (absent for
    /// other groups and for a share group that assigned none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub share_partitions: Vec<ShareTopicEntry>,
}

/// The file name (with suffix) of a group's document.
pub fn file_name(group: &str) -> String {
    if group.is_empty() {
        // A lone '%' cannot come out of the escaping below.
        return format!("%{FILE_SUFFIX}");
    }
    let mut enc = String::with_capacity(group.len());
    for (i, b) in group.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if plain {
            enc.push(char::from(b));
        } else {
            enc.push_str(&format!("%{b:02X}"));
        }
    }
    if enc.len() > FILE_STEM_BYTES_MAX {
        let mut cut = HASHED_PREFIX_BYTES;
        // Do not split a %XX escape.
        if let Some(p) = enc[..cut].rfind('%') {
            if p + 3 > cut {
                cut = p;
            }
        }
        enc.truncate(cut);
        enc.push_str(&format!(
            "~{:016x}{:08x}",
            fnv1a64(group.as_bytes()),
            crc32c::crc32c(group.as_bytes())
        ));
    }
    enc.push_str(FILE_SUFFIX);
    enc
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Creates the groups directory if needed, removes temporary files a crash
/// left behind, and reads every group document. Blocking.
pub fn load_all(fs: &dyn Fs, dir: &Path) -> Result<Vec<GroupFile>, StorageError> {
    create_dir_durable(fs, dir)?;
    meta::remove_temp_files(fs, dir)?;
    let mut out = Vec::new();
    for name in fs.list(dir)? {
        if name.starts_with('.') || !name.ends_with(FILE_SUFFIX) {
            continue;
        }
        let path = dir.join(&name);
        let Some(doc) = meta::read_json::<GroupFile>(fs, &path)? else {
            continue;
        };
        if file_name(&doc.group) != name {
            return Err(StorageError::Metadata {
                file: path.display().to_string(),
                why: format!(
                    "holds group {:?}, whose file would be {}",
                    doc.group,
                    file_name(&doc.group)
                ),
            });
        }
        if ![TYPE_CLASSIC, TYPE_CONSUMER, TYPE_SHARE].contains(&doc.group_type.as_str()) {
            return Err(StorageError::Metadata {
                file: path.display().to_string(),
                why: format!("unknown group type {:?}", doc.group_type),
            });
        }
        out.push(doc);
    }
    Ok(out)
}

/// Atomically replaces the group's document. Blocking.
pub fn write(fs: &dyn Fs, dir: &Path, doc: &GroupFile) -> Result<(), StorageError> {
    meta::write_json(fs, &dir.join(file_name(&doc.group)), doc)
}

/// Removes the group's document (if any) durably. Blocking.
pub fn remove(fs: &dyn Fs, dir: &Path, group: &str) -> Result<(), StorageError> {
    let path = dir.join(file_name(group));
    if fs.exists(&path) {
        fs.remove_file(&path)?;
        fs.sync_dir(dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_storage::RealFs;

    #[test]
    fn file_names_are_safe_and_distinct() {
        assert_eq!(file_name("my-group_1"), "my-group_1.json");
        assert_eq!(file_name("app.v1"), "app.v1.json");
        assert_eq!(file_name(".hidden"), "%2Ehidden.json");
        assert_eq!(file_name("a/b"), "a%2Fb.json");
        assert_eq!(file_name(".."), "%2E..json");
        assert_eq!(file_name(""), "%.json");
        assert_ne!(file_name("a%2Fb"), file_name("a/b"));
        assert_eq!(file_name("é"), "%C3%A9.json");
        let long_a = "x".repeat(300);
        let long_b = format!("{}y", "x".repeat(299));
        let fa = file_name(&long_a);
        assert!(fa.len() < 255, "{}", fa.len());
        assert!(fa.contains('~'));
        assert_ne!(fa, file_name(&long_b));
        let escapes = "/".repeat(100);
        let fe = file_name(&escapes);
        assert!(fe.len() < 255);
        let stem = fe.split('~').next().expect("prefix");
        assert_eq!(stem.len() % 3, 0, "no escape is split: {stem}");
    }

    #[test]
    fn documents_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let groups = dir.path().join(GROUPS_DIR);
        assert!(load_all(&RealFs, &groups).expect("load").is_empty());
        let doc = GroupFile {
            group: "g/1".into(),
            group_type: TYPE_CLASSIC.into(),
            protocol_type: Some("consumer".into()),
            offsets: vec![OffsetEntry {
                topic: "t".into(),
                partition: 3,
                offset: 42,
                leader_epoch: 0,
                metadata: "m".into(),
                commit_timestamp_ms: 7,
                topic_id: Some("00000000-0000-0000-0000-000000000001".into()),
            }],
            share_partitions: Vec::new(),
        };
        write(&RealFs, &groups, &doc).expect("write");
        // A stray temporary file from a crash is ignored and removed.
        std::fs::write(groups.join(".g.json.1.2.tmp"), b"{").expect("tmp");
        assert_eq!(load_all(&RealFs, &groups).expect("load"), vec![doc.clone()]);
        assert!(!groups.join(".g.json.1.2.tmp").exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(groups.join(file_name("g/1")))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        remove(&RealFs, &groups, "g/1").expect("remove");
        assert!(load_all(&RealFs, &groups).expect("load").is_empty());
        remove(&RealFs, &groups, "never").expect("remove missing");
    }
}
