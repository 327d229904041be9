//! `es-broker dump-log`: reads a partition's files as they lie on disk (the
//! format of docs/storage.md) and prints their records, index entries and
//! produced-batch notes, or only checks them. Every problem is printed with
//! its file and byte position, and any corruption makes the command exit
//! non-zero: a record whose CRC or length is wrong, a log that ends inside a
//! record, offsets that do not increase, an index entry that is torn, out of
//! order, or does not point at a record with its offset. The decoding is
//! es-storage's own (`record`, `index`, `batch_marks`); this module only
//! walks the files and compares what they say.
//!
//! Batch notes are a hint that recovery may cut short (docs/storage.md,
//! "Produced batches"), so notes past the last one the log vouches for are
//! reported as a warning, not as corruption.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use es_storage::batch_marks;
use es_storage::index::{self, IndexEntry, ENTRY_BYTES};
use es_storage::record::{self, DecodeError, LEN_PREFIX_BYTES};
use es_storage::segment::{self, BATCHES_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX};

/// `es-broker dump-log`.
#[derive(Debug, clap::Args)]
pub struct DumpLogArgs {
    /// A partition directory (DATA_DIR/topics/TOPIC/PARTITION) or one
    /// segment's `.log` file.
    pub path: PathBuf,
    /// Print the records (with none of --records, --index, --batches, all three).
    #[arg(long)]
    pub records: bool,
    /// Print the index entries.
    #[arg(long)]
    pub index: bool,
    /// Print the produced-batch notes.
    #[arg(long)]
    pub batches: bool,
    /// Print only problems and the summary.
    #[arg(long)]
    pub verify_only: bool,
}

/// What to print besides problems and the summary.
#[derive(Clone, Copy, Debug)]
struct Show {
    records: bool,
    index: bool,
    batches: bool,
}

impl Show {
    fn from_args(a: &DumpLogArgs) -> Show {
        if a.verify_only {
            return Show {
                records: false,
                index: false,
                batches: false,
            };
        }
        let all = !(a.records || a.index || a.batches);
        Show {
            records: all || a.records,
            index: all || a.index,
            batches: all || a.batches,
        }
    }
}

/// Counts over everything read.
#[derive(Debug, Default)]
struct Totals {
    segments: u64,
    records: u64,
    index_entries: u64,
    batch_notes: u64,
    corruptions: u64,
    warnings: u64,
}

impl Totals {
    fn corrupt(&mut self, file: &Path, pos: u64, what: impl std::fmt::Display) {
        self.corruptions += 1;
        println!("CORRUPT {} at byte {pos}: {what}", file.display());
    }

    fn warn(&mut self, file: &Path, pos: u64, what: impl std::fmt::Display) {
        self.warnings += 1;
        println!("WARNING {} at byte {pos}: {what}", file.display());
    }
}

/// Runs `dump-log`; an error (and so exit status 1) when anything is corrupt
/// or a file cannot be read.
pub fn run(args: &DumpLogArgs) -> anyhow::Result<()> {
    let show = Show::from_args(args);
    let logs = segment_logs(&args.path)?;
    let mut totals = Totals::default();
    for (base, log) in &logs {
        dump_segment(*base, log, show, &mut totals)?;
    }
    println!(
        "{} segments, {} records, {} index entries, {} batch notes: {} corrupt, {} warnings",
        totals.segments,
        totals.records,
        totals.index_entries,
        totals.batch_notes,
        totals.corruptions,
        totals.warnings
    );
    if totals.corruptions > 0 {
        bail!(
            "{} corruption(s) found in {}",
            totals.corruptions,
            args.path.display()
        );
    }
    Ok(())
}

/// The segments at `path`, as (base offset, `.log` path) in offset order.
fn segment_logs(path: &Path) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.is_file() {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let Some(base) = segment::parse_log_name(name) else {
            bail!(
                "{} is not a segment log (20-digit base offset and {LOG_SUFFIX})",
                path.display()
            );
        };
        return Ok(vec![(base, path.to_path_buf())]);
    }
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(path).with_context(|| format!("listing {}", path.display()))? {
        let entry = entry.with_context(|| format!("listing {}", path.display()))?;
        let name = entry.file_name();
        if let Some(base) = name.to_str().and_then(segment::parse_log_name) {
            logs.push((base, entry.path()));
        }
    }
    if logs.is_empty() {
        bail!("{} holds no segment ({LOG_SUFFIX} file)", path.display());
    }
    logs.sort();
    Ok(logs)
}

/// Reads into `buf` until it is full or the file ends; the bytes read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// One segment: its log, then its index and batch notes checked against it.
fn dump_segment(base: u64, log: &Path, show: Show, totals: &mut Totals) -> anyhow::Result<()> {
    totals.segments += 1;
    println!("segment {} (base offset {base})", log.display());
    let records = scan_log(base, log, show, totals)?;
    let end = records.last().map_or(base, |&(_, offset)| offset + 1);
    let index_path = log.with_extension(&INDEX_SUFFIX[1..]);
    if index_path.exists() {
        check_index(base, &index_path, &records, show, totals)?;
    }
    let batches_path = log.with_extension(&BATCHES_SUFFIX[1..]);
    if batches_path.exists() {
        check_batches(base, end, &batches_path, show, totals)?;
    }
    Ok(())
}

/// Reads the log record by record; returns (position, offset) of every
/// record up to the first one that cannot be read.
fn scan_log(
    base: u64,
    log: &Path,
    show: Show,
    totals: &mut Totals,
) -> anyhow::Result<Vec<(u64, u64)>> {
    let file = File::open(log).with_context(|| format!("opening {}", log.display()))?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut records: Vec<(u64, u64)> = Vec::new();
    let mut buf = Vec::new();
    let mut pos = 0u64;
    loop {
        let mut prefix = [0u8; LEN_PREFIX_BYTES];
        let got = read_up_to(&mut r, &mut prefix)
            .with_context(|| format!("reading {}", log.display()))?;
        if got == 0 {
            break;
        }
        if got < LEN_PREFIX_BYTES {
            totals.corrupt(
                log,
                pos,
                format!("torn tail: {got} bytes, shorter than a record length"),
            );
            break;
        }
        let total = match record::peek_len(&prefix) {
            Ok(t) => t,
            Err(e) => {
                totals.corrupt(log, pos, e);
                break;
            }
        };
        buf.clear();
        buf.extend_from_slice(&prefix);
        buf.resize(total, 0);
        let got = read_up_to(&mut r, &mut buf[LEN_PREFIX_BYTES..])
            .with_context(|| format!("reading {}", log.display()))?;
        if got < total - LEN_PREFIX_BYTES {
            totals.corrupt(
                log,
                pos,
                format!(
                    "torn tail: a record of {total} bytes, {} left in the file",
                    got + LEN_PREFIX_BYTES
                ),
            );
            break;
        }
        let rec = match record::decode(&buf) {
            Ok(rec) => rec,
            Err(DecodeError::Incomplete { needed }) => {
                totals.corrupt(log, pos, format!("record fields need {needed} bytes"));
                break;
            }
            Err(e) => {
                totals.corrupt(log, pos, e);
                break;
            }
        };
        if rec.offset < base {
            totals.corrupt(
                log,
                pos,
                format!(
                    "offset {} below the segment's base offset {base}",
                    rec.offset
                ),
            );
        }
        if let Some(&(_, prev)) = records.last() {
            if rec.offset <= prev {
                totals.corrupt(
                    log,
                    pos,
                    format!(
                        "offset {} not above the previous record's {prev}",
                        rec.offset
                    ),
                );
            }
        }
        if show.records {
            let len =
                |b: Option<&[u8]>| b.map_or_else(|| "null".to_string(), |b| b.len().to_string());
            let producer = rec.meta.producer.map_or_else(
                || "producer=none".to_string(),
                |p| {
                    format!(
                        "producer_id={} producer_epoch={} sequence={}",
                        p.producer_id, p.producer_epoch, p.sequence
                    )
                },
            );
            println!(
                "record offset={} position={pos} size={} timestamp={} key_len={} value_len={} headers={} {producer} transactional={} control={}",
                rec.offset,
                rec.encoded_len,
                rec.timestamp_ms,
                len(rec.key),
                len(rec.value),
                rec.header_count(),
                rec.meta.transactional,
                rec.meta.control,
            );
        }
        records.push((pos, rec.offset));
        totals.records += 1;
        pos += total as u64;
    }
    Ok(records)
}

/// Checks the index: whole entries, the first (0, 0), offsets and positions
/// increasing, each pointing at the start of a record with its offset.
fn check_index(
    base: u64,
    path: &Path,
    records: &[(u64, u64)],
    show: Show,
    totals: &mut Totals,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let whole = bytes.len() / ENTRY_BYTES;
    // The longest prefix of whole entries that index::parse accepts: a
    // prefix is accepted only if every shorter one is, so bisect.
    let accepted = |n: usize| index::parse(&bytes[..n * ENTRY_BYTES]).is_some();
    let (mut lo, mut hi) = (0usize, whole);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if accepted(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let entries: Vec<IndexEntry> = index::parse(&bytes[..lo * ENTRY_BYTES]).unwrap_or_default();
    for (i, e) in entries.iter().enumerate() {
        totals.index_entries += 1;
        let at = (i * ENTRY_BYTES) as u64;
        let offset = base.saturating_add(e.relative_offset);
        if show.index {
            println!(
                "index relative_offset={} offset={offset} position={}",
                e.relative_offset, e.position
            );
        }
        match records.binary_search_by_key(&e.position, |&(p, _)| p) {
            Ok(k) if records[k].1 == offset => {}
            Ok(k) => totals.corrupt(
                path,
                at,
                format!(
                    "index entry {i} says offset {offset} is at log position {}, the record there has offset {}",
                    e.position, records[k].1
                ),
            ),
            Err(_) => totals.corrupt(
                path,
                at,
                format!(
                    "index entry {i} (offset {offset}) points at log position {}, which is not the start of a record",
                    e.position
                ),
            ),
        }
    }
    if lo < whole {
        let why = if lo == 0 {
            "the first entry is not (0, 0)"
        } else {
            "its offset or position is not above the previous entry's"
        };
        totals.corrupt(
            path,
            (lo * ENTRY_BYTES) as u64,
            format!("index entry {lo}: {why}"),
        );
    } else if bytes.len() % ENTRY_BYTES != 0 {
        totals.corrupt(
            path,
            (whole * ENTRY_BYTES) as u64,
            format!(
                "torn tail: {} bytes, not a whole entry",
                bytes.len() % ENTRY_BYTES
            ),
        );
    }
    Ok(())
}

/// Prints the batch notes the log vouches for (offsets `base..end`) and
/// warns about any after them.
fn check_batches(
    base: u64,
    end: u64,
    path: &Path,
    show: Show,
    totals: &mut Totals,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let (marks, used) = batch_marks::parse(&bytes, base, end);
    for m in &marks {
        totals.batch_notes += 1;
        if show.batches {
            println!(
                "batch offset={} last_offset={} codec={} stored_bytes={}",
                m.offset,
                m.last_offset(),
                codec_name(m.batch.codec),
                m.batch.stored_bytes
            );
        }
    }
    if used < bytes.len() {
        totals.warn(
            path,
            used as u64,
            format!(
                "{} bytes of batch notes after the last one the log vouches for (torn, corrupt, out of order or past offset {end}); the broker ignores them",
                bytes.len() - used
            ),
        );
    }
    Ok(())
}

/// Kafka's name of a codec id.
fn codec_name(codec: u8) -> &'static str {
    match codec {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}
