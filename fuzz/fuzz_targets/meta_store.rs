//! meta_store: es-meta's metadata directory (`data/meta/`) over arbitrary
//! file contents, opened as a node opens it at start (`store::open_with`):
//! the Raft log's `.raftlog` segments (frames of `len | index | term | JSON
//! entry | CRC-32C`, a torn tail of the last segment cut, any other damage
//! refused), `vote.json`, `purged.json`, `committed.json` and the state
//! machine's `snapshot.json`. The files are served by es-storage's simulated
//! file system.
//!
//! Input: a flags byte, then sections separated by `|~|`: `vote.json`,
//! `committed.json`, `purged.json`, `snapshot.json`, then one section per
//! log segment. Flags: 0x01-0x08 which of the four files exist, 0x10 frame
//! mode. In frame mode each segment section is JSON entries, one a line,
//! that the harness frames (index and term taken from the entry's `log_id`,
//! or the next index and term 1 when it has none) and the segment is named
//! after its first frame's index; otherwise the section is the segment's
//! bytes as they are, named 1, 101, 201, ...
//!
//! Seeds: written by this target when `ES_FUZZ_WRITE_SEEDS=DIR` is set, from
//! es-meta's own types (entries of the kinds a node writes first, a vote, a
//! purge point, a snapshot of an empty image), in both modes.
//!
//! Must hold, against a frame reader written here from the documented
//! frame (`store/frame.rs`):
//! - no panic;
//! - corrupt input is an error: a file among the four that is not JSON at
//!   all, or (without a purge point, which lets segments go unread) a
//!   segment before the last that is not whole frames with right CRCs from
//!   its first byte to its last, or holds none, makes the open fail;
//! - what an open keeps is only what was written: every entry the log
//!   returns is one of the input's intact frames (its index, its term), the
//!   indexes consecutive;
//! - an honest directory opens: frame mode, no other file, every entry a
//!   well-formed one with consecutive indexes from 1 across the segments
//!   and one segment per section, then the open succeeds and returns every
//!   entry.

#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use es_fuzz::{split_records, trace};
use es_meta::store::{self, Io};
use es_meta::{MetaTypes, NoFiles};
use es_storage::fs::Fs;
use es_storage::simfs::SimFs;
use libfuzzer_sys::fuzz_target;
use openraft::storage::{RaftLogReader, RaftLogStorage};

type Entry = openraft::Entry<MetaTypes>;

const SEPARATOR: &[u8] = b"|~|";
const FILES: [&str; 4] = [
    "vote.json",
    "committed.json",
    "purged.json",
    "snapshot.json",
];
const LEN_MIN: usize = 8 + 8 + 1 + 4;
const LEN_MAX: usize = 64 * 1024 * 1024;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// One frame of `payload` at `index` and `term`.
fn frame(index: u64, term: u64, payload: &[u8]) -> Vec<u8> {
    let len = 8 + 8 + payload.len() + 4;
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&index.to_be_bytes());
    out.extend_from_slice(&term.to_be_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[4..]);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The intact frames (length in bounds, CRC right) of `seg` from its start,
/// as (index, term), and whether they cover it to its last byte.
fn intact_frames(seg: &[u8]) -> (Vec<(u64, u64)>, bool) {
    let mut at = 0;
    let mut out = Vec::new();
    while seg.len() - at >= 4 {
        let len = u32::from_be_bytes(seg[at..at + 4].try_into().unwrap()) as usize;
        if !(LEN_MIN..=LEN_MAX).contains(&len) || seg.len() - at - 4 < len {
            break;
        }
        let body = &seg[at + 4..at + 4 + len];
        let (data, crc) = body.split_at(len - 4);
        if crc32c::crc32c(data) != u32::from_be_bytes(crc.try_into().unwrap()) {
            break;
        }
        out.push((
            u64::from_be_bytes(body[..8].try_into().unwrap()),
            u64::from_be_bytes(body[8..16].try_into().unwrap()),
        ));
        at += 4 + len;
    }
    (out, at == seg.len())
}

struct Built {
    /// (base index, bytes) of each segment.
    segments: Vec<(u64, Vec<u8>)>,
    /// Frame mode and every line a well-formed entry at the next index.
    honest: bool,
    entries: u64,
}

fn build_segments(sections: &[&[u8]], framed: bool) -> Built {
    let mut segments = Vec::new();
    let mut honest = framed;
    let mut next = 1u64;
    for (i, s) in sections.iter().enumerate() {
        if !framed {
            segments.push((1 + 100 * i as u64, s.to_vec()));
            continue;
        }
        let mut bytes = Vec::new();
        let mut base = None;
        let lines: Vec<&[u8]> = s.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
        if lines.is_empty() {
            honest = false;
        }
        for line in lines {
            let (index, term) = match serde_json::from_slice::<Entry>(line) {
                Ok(e) => {
                    honest &= e.log_id.index == next;
                    (e.log_id.index, e.log_id.leader_id.term)
                }
                Err(_) => {
                    honest = false;
                    (next, 1)
                }
            };
            base.get_or_insert(index);
            bytes.extend_from_slice(&frame(index, term, line));
            next = index.wrapping_add(1);
        }
        segments.push((base.unwrap_or(next), bytes));
    }
    Built {
        segments,
        honest,
        entries: next.wrapping_sub(1),
    }
}

fn lid(term: u64, index: u64) -> openraft::LogId<u64> {
    openraft::LogId::new(openraft::CommittedLeaderId::new(term, 0), index)
}

fn entry_json(term: u64, index: u64) -> Vec<u8> {
    let payload = if index == 1 {
        openraft::EntryPayload::Blank
    } else {
        openraft::EntryPayload::Normal(es_meta::MetaRequest::InitCluster {
            cluster_id: format!("cluster-{index}"),
        })
    };
    serde_json::to_vec(&Entry {
        log_id: lid(term, index),
        payload,
    })
    .expect("an entry encodes")
}

/// Writes seeds in this target's format to `dir`.
fn write_seeds(dir: &str) {
    std::fs::create_dir_all(dir).expect("the seed directory");
    let vote = serde_json::to_vec(&openraft::Vote::new_committed(2, 1)).expect("vote");
    let committed = serde_json::to_vec(&Some(lid(2, 3))).expect("committed");
    let purged = serde_json::to_vec(&lid(1, 1)).expect("purged");
    let snapshot = store::SnapshotFile {
        meta: openraft::SnapshotMeta {
            last_log_id: Some(lid(1, 2)),
            ..Default::default()
        },
        image: es_meta::MetaImage::default(),
    }
    .to_bytes()
    .expect("snapshot");
    let lines = |range: std::ops::RangeInclusive<u64>| {
        let mut out = Vec::new();
        for i in range {
            out.extend_from_slice(&entry_json(1 + i / 3, i));
            out.push(b'\n');
        }
        out
    };
    let join = |flags: u8, parts: &[&[u8]]| {
        let mut out = vec![flags];
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(SEPARATOR);
            }
            out.extend_from_slice(p);
        }
        out
    };
    let framed = |range: std::ops::RangeInclusive<u64>| {
        let mut out = Vec::new();
        for i in range {
            out.extend_from_slice(&frame(i, 1 + i / 3, &entry_json(1 + i / 3, i)));
        }
        out
    };
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        (
            "honest-one-segment",
            join(0x10, &[b"", b"", b"", b"", &lines(1..=4)]),
        ),
        (
            "honest-two-segments",
            join(0x10, &[b"", b"", b"", b"", &lines(1..=3), &lines(4..=6)]),
        ),
        (
            "all-files-framed",
            join(
                0x1f,
                &[&vote, &committed, &purged, &snapshot, &lines(2..=5)],
            ),
        ),
        ("raw-segment-torn-tail", {
            let mut seg = framed(1..=3);
            let last = framed(4..=4);
            seg.extend_from_slice(&last[..last.len() / 2]);
            join(0x00, &[b"", b"", b"", b"", &seg])
        }),
        ("raw-first-segment-corrupt", {
            let mut seg = framed(1..=2);
            seg[30] ^= 0x40;
            join(0x01, &[&vote, b"", b"", b"", &seg, &framed(101..=101)])
        }),
        (
            "snapshot-and-vote",
            join(0x09, &[&vote, b"", b"", &snapshot]),
        ),
    ];
    for (name, bytes) in seeds {
        std::fs::write(format!("{dir}/{name}"), bytes).expect("a seed file");
    }
}

static START: std::sync::Once = std::sync::Once::new();

fuzz_target!(|data: &[u8]| {
    START.call_once(|| {
        if let Ok(dir) = std::env::var("ES_FUZZ_WRITE_SEEDS") {
            write_seeds(&dir);
        }
    });
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let sections = split_records(rest, SEPARATOR);
    let (files, segs) = sections.split_at(sections.len().min(4));
    let built = build_segments(segs, flags & 0x10 != 0);

    let fs = Arc::new(SimFs::new());
    let dir = Path::new("/data/meta");
    fs.create_dir_all(dir).unwrap();
    let put = |name: &str, bytes: &[u8]| {
        let f = fs.create_new(&dir.join(name)).unwrap();
        f.write_all_at(bytes, 0).unwrap();
        f.sync_data().unwrap();
    };
    let mut present = Vec::new();
    for (i, name) in FILES.iter().enumerate() {
        if flags & (1 << i) != 0 {
            let bytes = files.get(i).copied().unwrap_or_default();
            put(name, bytes);
            present.push((name, bytes));
        }
    }
    let mut names = std::collections::BTreeSet::new();
    let mut segments = Vec::new();
    for (base, bytes) in &built.segments {
        // Two sections may name one segment: the first is kept.
        if names.insert(*base) {
            put(&format!("{base:020}.raftlog"), bytes);
            segments.push((*base, bytes.as_slice()));
        }
    }
    segments.sort_by_key(|(b, _)| *b);
    let honest = built.honest && present.is_empty() && segments.len() == built.segments.len();

    let opened = runtime().block_on(async {
        let (mut log, _sm) = store::open_with(fs.clone(), dir, Arc::new(NoFiles), Io::Inline)?;
        let entries = log
            .try_get_log_entries(..)
            .await
            .map_err(std::io::Error::other)?;
        let _ = log.read_committed().await;
        let _ = log.read_vote().await;
        Ok::<_, std::io::Error>(entries)
    });
    trace!(
        "{} segments, files {:?}, honest {honest}: {:?}",
        segments.len(),
        present.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        opened.as_ref().map(Vec::len).map_err(ToString::to_string)
    );

    // Files that are not JSON at all cannot be read as what they claim.
    // (committed.json is read when openraft asks, not at open.) "JSON" as
    // serde_json reads it past fields it ignores: it does not check that an
    // ignored string is UTF-8, so a file whose only fault is such a string
    // in a field es does not know opens, as it should (finding 7 in
    // docs/fuzzing.md).
    for (name, bytes) in &present {
        if **name != "committed.json"
            && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err()
        {
            assert!(opened.is_err(), "{name} is not JSON, yet the store opened");
        }
    }
    let last = segments.len().saturating_sub(1);
    let mut intact = Vec::new();
    for (i, (_, bytes)) in segments.iter().enumerate() {
        let (frames, whole) = intact_frames(bytes);
        if i < last && (!whole || frames.is_empty()) && flags & 0x04 == 0 {
            // A damaged or empty segment before the last one is never a torn
            // tail. (With a purge point, segments it covers go unread.)
            assert!(
                opened.is_err(),
                "segment {i} of {} is damaged, yet the store opened",
                segments.len()
            );
        }
        intact.extend(frames);
    }
    match &opened {
        Ok(entries) => {
            for w in entries.windows(2) {
                assert_eq!(
                    w[1].log_id.index,
                    w[0].log_id.index + 1,
                    "indexes consecutive"
                );
            }
            for e in entries {
                let id = (e.log_id.index, e.log_id.leader_id.term);
                assert!(
                    intact.contains(&id),
                    "entry {id:?} is no intact frame of the input"
                );
            }
            if honest {
                assert_eq!(
                    entries.len() as u64,
                    built.entries,
                    "an honest log opens whole"
                );
            }
        }
        Err(e) => assert!(!honest, "an honest directory did not open: {e}"),
    }
});
