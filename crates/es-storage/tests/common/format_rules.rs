//! The disk format's rules, checked on a partition directory through any
//! [`Fs`] (the simulated one after a power loss, the real one after bit
//! flips): the file names, every segment's records whole and CRC-checked
//! to the exact end of its `.log`, the first record carrying the segment's
//! name, offsets increasing within and across segments, every index entry
//! pointing at the record it names, and the `.batches` notes whole and
//! within their segment. Unlike `../shared/tools/check-storage-format` it
//! allows offset gaps (compaction) and any index spacing.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use es_storage::batch_marks::{BatchMark, MARK_BYTES};
use es_storage::fs::Fs;
use es_storage::index::ENTRY_BYTES;
use es_storage::segment::{parse_log_name, BATCHES_SUFFIX, INDEX_SUFFIX, NAME_DIGITS};
use es_storage::RecordIter;

/// Reads a whole file through `fs`.
pub fn read_whole(fs: &dyn Fs, path: &Path) -> std::io::Result<Vec<u8>> {
    let f = fs.open(path)?;
    let len = f.len()? as usize;
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = f.read_at(&mut buf[done..], done as u64)?;
        if n == 0 {
            buf.truncate(done);
            break;
        }
        done += n;
    }
    Ok(buf)
}

/// Files a partition directory may hold once it has been opened (recovery
/// removes markers of interrupted swaps, `*.cleaned` and temporary files,
/// and the clean-shutdown marker). `closed`: the partition was closed
/// cleanly and not reopened, so `clean_shutdown` is expected, and so may
/// be the `*.cleaned` files of a compaction pass that failed (the next
/// open removes them).
fn name_allowed(name: &str, closed: bool) -> bool {
    if let Some(stem) = name
        .strip_suffix(".log")
        .or_else(|| name.strip_suffix(INDEX_SUFFIX))
        .or_else(|| name.strip_suffix(BATCHES_SUFFIX))
    {
        return stem.len() == NAME_DIGITS && stem.bytes().all(|b| b.is_ascii_digit());
    }
    matches!(
        name,
        "partition.json"
            | "producers.json"
            | "leader_epochs.json"
            | "next.log.prepared"
            | "next.index.prepared"
    ) || (closed && (name == "clean_shutdown" || name.ends_with(".cleaned")))
}

/// The problems found in the partition directory `dir` (empty: it follows
/// the format).
pub fn check_partition(fs: &dyn Fs, dir: &Path, closed: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let names = match fs.list(dir) {
        Ok(n) => n,
        Err(e) => return vec![format!("{}: cannot list: {e}", dir.display())],
    };
    let names: BTreeSet<String> = names.into_iter().collect();
    for n in &names {
        if !name_allowed(n, closed) {
            problems.push(format!("{}: unexpected file {n}", dir.display()));
        }
    }
    let bases: Vec<u64> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    for n in &names {
        let stem = n
            .strip_suffix(INDEX_SUFFIX)
            .or_else(|| n.strip_suffix(BATCHES_SUFFIX));
        if let Some(base) = stem.and_then(|s| s.parse::<u64>().ok()) {
            if !bases.contains(&base) {
                problems.push(format!("{}: {n} has no .log", dir.display()));
            }
        }
    }
    for json in ["partition.json", "producers.json", "leader_epochs.json"] {
        if names.contains(json) {
            match read_whole(fs, &dir.join(json)) {
                Ok(b) => {
                    if serde_json::from_slice::<serde_json::Value>(&b).is_err() {
                        problems.push(format!("{}/{json} does not parse", dir.display()));
                    }
                }
                Err(e) => problems.push(format!("{}/{json}: {e}", dir.display())),
            }
        }
    }
    // The highest offset of the segments before.
    let mut prev_last: Option<u64> = None;
    for &base in &bases {
        let stem = format!("{base:020}");
        let log = match read_whole(fs, &dir.join(format!("{stem}.log"))) {
            Ok(b) => b,
            Err(e) => {
                problems.push(format!("{}/{stem}.log: {e}", dir.display()));
                continue;
            }
        };
        if let Some(last) = prev_last {
            if base <= last {
                problems.push(format!(
                    "{}/{stem}.log: base {base} is not above the previous segment's last offset {last}",
                    dir.display()
                ));
            }
        }
        // Records: position -> offset.
        let mut at: BTreeMap<u64, u64> = BTreeMap::new();
        let mut it = RecordIter::new(&log);
        let mut last = None;
        loop {
            let pos = it.position() as u64;
            match it.next() {
                None => break,
                Some(Ok(r)) => {
                    if at.is_empty() && r.offset != base {
                        problems.push(format!(
                            "{}/{stem}.log: first record has offset {}",
                            dir.display(),
                            r.offset
                        ));
                    }
                    if last.is_some_and(|l| r.offset <= l) {
                        problems.push(format!(
                            "{}/{stem}.log@{pos}: offset {} does not increase",
                            dir.display(),
                            r.offset
                        ));
                    }
                    last = Some(r.offset);
                    at.insert(pos, r.offset);
                }
                Some(Err(e)) => {
                    problems.push(format!(
                        "{}/{stem}.log@{pos}: {e} ({} bytes in the file)",
                        dir.display(),
                        log.len()
                    ));
                    break;
                }
            }
        }
        if let Some(l) = last {
            prev_last = Some(l);
        }
        // Index.
        match read_whole(fs, &dir.join(format!("{stem}.index"))) {
            Err(e) => problems.push(format!("{}/{stem}.index: {e}", dir.display())),
            Ok(ib) => {
                if ib.len() % ENTRY_BYTES != 0 {
                    problems.push(format!(
                        "{}/{stem}.index: {} bytes is not whole entries",
                        dir.display(),
                        ib.len()
                    ));
                }
                let mut prev: Option<(u64, u64)> = None;
                for (i, e) in ib.chunks_exact(ENTRY_BYTES).enumerate() {
                    let rel = u64::from_be_bytes(e[..8].try_into().unwrap_or_default());
                    let pos = u64::from_be_bytes(e[8..].try_into().unwrap_or_default());
                    if i == 0 && (rel, pos) != (0, 0) {
                        problems.push(format!(
                            "{}/{stem}.index: first entry ({rel}, {pos}) is not (0, 0)",
                            dir.display()
                        ));
                    }
                    if prev.is_some_and(|(r, p)| rel <= r || pos <= p) {
                        problems.push(format!(
                            "{}/{stem}.index: entry {i} ({rel}, {pos}) does not increase",
                            dir.display()
                        ));
                    }
                    prev = Some((rel, pos));
                    if at.get(&pos).copied() != base.checked_add(rel) {
                        problems.push(format!(
                            "{}/{stem}.index: entry {i} ({rel}, {pos}) does not point at record {}",
                            dir.display(),
                            base.wrapping_add(rel)
                        ));
                    }
                }
                if !at.is_empty() && ib.is_empty() {
                    problems.push(format!(
                        "{}/{stem}.index is empty for a segment with records",
                        dir.display()
                    ));
                }
            }
        }
        // Produced-batch notes.
        let bpath = dir.join(format!("{stem}{BATCHES_SUFFIX}"));
        if fs.exists(&bpath) {
            match read_whole(fs, &bpath) {
                Err(e) => problems.push(format!("{}: {e}", bpath.display())),
                Ok(bb) => {
                    if bb.len() % MARK_BYTES != 0 {
                        problems.push(format!(
                            "{}: {} bytes is not whole entries",
                            bpath.display(),
                            bb.len()
                        ));
                    }
                    let offsets: BTreeSet<u64> = at.values().copied().collect();
                    let mut prev_end: Option<u64> = None;
                    for (i, e) in bb.chunks_exact(MARK_BYTES).enumerate() {
                        let arr: [u8; MARK_BYTES] = e.try_into().unwrap_or([0; MARK_BYTES]);
                        let Some(m) = BatchMark::decode(&arr) else {
                            problems
                                .push(format!("{}: entry {i} does not decode", bpath.display()));
                            break;
                        };
                        if !offsets.contains(&m.offset) {
                            problems.push(format!(
                                "{}: entry {i} starts at {}, not a record of the segment",
                                bpath.display(),
                                m.offset
                            ));
                        }
                        if last.is_none_or(|l| m.last_offset() > l) {
                            problems.push(format!(
                                "{}: entry {i} reaches past the segment's last record",
                                bpath.display()
                            ));
                        }
                        if prev_end.is_some_and(|p| m.offset <= p) {
                            problems.push(format!(
                                "{}: entry {i} overlaps the one before",
                                bpath.display()
                            ));
                        }
                        prev_end = Some(m.last_offset());
                    }
                }
            }
        }
    }
    problems
}
