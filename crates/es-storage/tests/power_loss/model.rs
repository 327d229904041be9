//! What the power-loss workload expects of each partition, journal and
//! metadata file, and the checks of a recovered state against it.
//!
//! A partition's model holds every record that may be on disk (attempted
//! appends, by offset), how far its records were acknowledged (the durable
//! end after an operation returned), how far retention and DeleteRecords
//! were acknowledged (and how far they could have gone), the leader epochs
//! assigned, the producers' acknowledged batches and transactions, and the
//! produced-batch notes appended. After a recovery, [`check_partition`]
//! compares what the fetch path serves with it.

use std::collections::{BTreeMap, BTreeSet};

use es_storage::record::ProducedBatch;
use es_storage::{
    Isolation, Partition, ProducerAppend, ReadBuf, RecordIter, RecordMeta, RecordView,
};

/// A record as it was appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub ts: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub meta: RecordMeta,
}

/// An idempotent producer writing to one partition.
#[derive(Clone, Debug)]
pub struct Idem {
    pub pid: i64,
    pub epoch: i16,
    pub next_seq: i32,
    /// The last batch acknowledged: its producer fields and offsets.
    pub last_acked: Option<(ProducerAppend, u64, u64)>,
}

/// A transactional producer writing to one partition.
#[derive(Clone, Debug, Default)]
pub struct Txn {
    pub pid: i64,
    pub epoch: i16,
    pub next_seq: i32,
    /// First offset of the open transaction, if one is open (attempted).
    pub open_first: Option<u64>,
    /// The open transaction's first record was acknowledged.
    pub open_acked: bool,
    /// A marker was attempted and not acknowledged: the transaction may
    /// be open or closed after a crash.
    pub marker_unsure: bool,
    /// Acknowledged aborts: (first offset, marker offset).
    pub aborted: Vec<(u64, u64)>,
}

/// What one partition should hold.
#[derive(Clone, Debug, Default)]
pub struct PModel {
    pub recs: BTreeMap<u64, Rec>,
    /// The next offset an append would get (every attempt counted).
    pub written_end: u64,
    /// Records below this were acknowledged durable.
    pub acked_end: u64,
    /// The log start acknowledged by retention or DeleteRecords.
    pub start_acked: u64,
    /// The furthest log start any attempted retention or DeleteRecords
    /// could have set.
    pub start_bound: u64,
    /// Compaction was attempted on this partition.
    pub compacted: bool,
    /// Leader epochs acknowledged: (epoch, start offset).
    pub epochs: Vec<(i32, u64)>,
    /// Every epoch attempted.
    pub epochs_tried: BTreeSet<i32>,
    pub idem: Option<Idem>,
    pub txn: Option<Txn>,
    /// Produced-batch notes appended, by first offset.
    pub batches: BTreeMap<u64, ProducedBatch>,
}

/// What a recovered partition serves: enough to compare two recoveries.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    pub log_start: u64,
    pub log_end: u64,
    pub hw: u64,
    pub lso: u64,
    /// (offset, record bytes, note of the batch starting there).
    pub records: Vec<(u64, Vec<u8>, Option<ProducedBatch>)>,
    pub epochs: Vec<(i32, u64)>,
    pub producers: String,
}

/// Reads everything `p` serves through the fetch path (snapshot, then
/// `read_into` from its start), `max_bytes` per read.
pub fn serve(p: &Partition, max_bytes: usize) -> Result<Served, String> {
    let mut out = Vec::new();
    let mut rb = ReadBuf::new();
    let log_start = p.log_start_offset();
    let mut next = log_start;
    loop {
        let snap = p.snapshot(next, Isolation::ReadUncommitted);
        let start = snap.start();
        let view = snap
            .read_into(start, max_bytes, &mut rb)
            .map_err(|e| format!("read from {next} failed: {e}"))?;
        // As Fetch does: a produced batch the window cut short is read whole.
        let whole = RecordIter::new(view.data)
            .next()
            .and_then(Result::ok)
            .and_then(|r| r.batch.or_else(|| view.batch_at(r.offset)))
            .map(|b| b.stored_bytes as usize)
            .filter(|&n| n > view.data.len());
        let mut wide = ReadBuf::new();
        let view = match whole {
            Some(n) => snap
                .read_into(start, n, &mut wide)
                .map_err(|e| format!("read of a whole batch from {start} failed: {e}"))?,
            None => view,
        };
        if view.data.is_empty() {
            break;
        }
        let mut advanced = false;
        for r in RecordIter::new(view.data) {
            let r = r.map_err(|e| format!("read from {next}: a record does not decode: {e}"))?;
            if r.offset < next {
                // The start of a produced batch holding `next`: served whole.
                continue;
            }
            out.push((r.offset, record_bytes(&r), view.batch_at(r.offset)));
            next = r.offset + 1;
            advanced = true;
        }
        if !advanced {
            let offs: Vec<u64> = RecordIter::new(view.data)
                .filter_map(Result::ok)
                .map(|r| r.offset)
                .collect();
            let segs: Vec<(u64, u64, u64)> = p
                .segments()
                .iter()
                .map(|s| (s.base_offset, s.end_offset(), s.valid_len()))
                .collect();
            return Err(format!(
                "a read from {next} served nothing new: read from {start} got {offs:?} ({} bytes, batch {:?}); segments {segs:?}",
                view.data.len(),
                view.batches
            ));
        }
    }
    let ps = p.producer_state();
    let producers = serde_json::to_string(&(&ps.producers, &ps.aborted)).unwrap_or_default();
    Ok(Served {
        log_start,
        log_end: p.log_end_offset(),
        hw: p.high_watermark(),
        lso: p.last_stable_offset(),
        records: out,
        epochs: p
            .leader_epochs()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect(),
        producers,
    })
}

/// A record's fields, encoded for comparing two reads of it.
fn record_bytes(r: &RecordView<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + r.encoded_len);
    fingerprint(
        &mut out,
        r.offset,
        r.timestamp_ms,
        r.key,
        r.value,
        &r.meta,
        r.headers(),
    );
    out
}

/// Offset, timestamp, key, value, producer fields and headers, each
/// length-prefixed (None as a distinct tag).
fn fingerprint<'h>(
    out: &mut Vec<u8>,
    offset: u64,
    ts: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    meta: &RecordMeta,
    headers: impl Iterator<Item = (&'h [u8], Option<&'h [u8]>)>,
) {
    fn opt(out: &mut Vec<u8>, b: Option<&[u8]>) {
        match b {
            None => out.push(0),
            Some(b) => {
                out.push(1);
                out.extend_from_slice(&(b.len() as u64).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&ts.to_be_bytes());
    opt(out, key);
    opt(out, value);
    match meta.producer {
        None => out.push(0),
        Some(p) => {
            out.push(1);
            out.extend_from_slice(&p.producer_id.to_be_bytes());
            out.extend_from_slice(&p.producer_epoch.to_be_bytes());
            out.extend_from_slice(&p.sequence.to_be_bytes());
        }
    }
    out.push(u8::from(meta.transactional) | u8::from(meta.control) << 1);
    for (k, v) in headers {
        out.push(2);
        opt(out, Some(k));
        opt(out, v);
    }
}

/// Checks a recovered partition against its model. `p` is open on the
/// recovered file system; `served` what it serves; `clean`: the partition
/// was closed cleanly (nothing may be missing at all).
pub fn check_partition(
    name: &str,
    m: &PModel,
    p: &Partition,
    served: &Served,
    clean: bool,
) -> Vec<String> {
    let mut v = Vec::new();
    let (start, end) = (served.log_start, served.log_end);
    if served.hw != end {
        v.push(format!(
            "{name}: high watermark {} after recovery, log end {end}",
            served.hw
        ));
    }
    // A log start acknowledged above records that were never durable
    // (DeleteRecords reaches the high watermark, which with a flush policy
    // of N records is the written end) comes back as the log end.
    if start < m.start_acked.min(end) {
        v.push(format!(
            "{name}: log start {start} is below the acknowledged {} (retention resurrected)",
            m.start_acked
        ));
    }
    if start > m.start_bound.max(m.start_acked) {
        v.push(format!(
            "{name}: log start {start} is beyond any retention or DeleteRecords attempted ({})",
            m.start_bound
        ));
    }
    if end < m.acked_end {
        v.push(format!(
            "{name}: log end {end} is below the acknowledged end {}",
            m.acked_end
        ));
    }
    if end > m.written_end {
        v.push(format!(
            "{name}: log end {end} is beyond anything written ({})",
            m.written_end
        ));
    }
    if clean && end != m.written_end {
        v.push(format!(
            "{name}: clean reopen ends at {end}, {} were written",
            m.written_end
        ));
    }
    // Served records: each one written, whole, at its offset.
    let mut got: BTreeMap<u64, &[u8]> = BTreeMap::new();
    let mut last = None;
    for (o, bytes, note) in &served.records {
        if last.is_some_and(|l| *o <= l) {
            v.push(format!("{name}: offset {o} served after {last:?}"));
        }
        last = Some(*o);
        if *o < start || *o >= end {
            v.push(format!(
                "{name}: record {o} served outside [{start}, {end})"
            ));
        }
        match m.recs.get(o) {
            None => v.push(format!("{name}: record {o} was never written")),
            Some(rec) => {
                let want = expected_bytes(*o, rec);
                if want != *bytes {
                    v.push(format!(
                        "{name}: record {o} is not what was written ({} bytes of fields read, {} written)",
                        bytes.len(),
                        want.len()
                    ));
                }
            }
        }
        if let Some(b) = note {
            if m.batches.get(o) != Some(b) {
                v.push(format!(
                    "{name}: batch note at {o} {b:?} is not the batch appended there ({:?})",
                    m.batches.get(o)
                ));
            }
        }
        got.insert(*o, bytes);
    }
    // Every record in [start, end) is there unless compaction could drop it.
    let keyed: BTreeMap<&[u8], Vec<u64>> = {
        let mut k: BTreeMap<&[u8], Vec<u64>> = BTreeMap::new();
        for o in got.keys() {
            if let Some(key) = m.recs.get(o).and_then(|r| r.key.as_deref()) {
                k.entry(key).or_default().push(*o);
            }
        }
        k
    };
    for (o, rec) in m.recs.range(start..end) {
        if got.contains_key(o) {
            continue;
        }
        let acked = *o < m.acked_end;
        let why = match (&rec.key, m.compacted) {
            (Some(k), true) => {
                let later = keyed
                    .get(k.as_slice())
                    .is_some_and(|offs| offs.iter().any(|x| x > o));
                // The newest record of the key below the log end.
                let newest = m
                    .recs
                    .range(..end)
                    .rev()
                    .find(|(_, r)| r.key.as_ref() == Some(k))
                    .map(|(x, r)| (*x, r.value.is_none()));
                if later || newest.is_some_and(|(_, tombstone)| tombstone) {
                    None
                } else {
                    Some("the newest value of its key is gone")
                }
            }
            _ => Some("missing"),
        };
        if let Some(why) = why {
            v.push(format!(
                "{name}: record {o} ({}) {why}: log [{start}, {end}), acknowledged up to {}",
                if acked { "acknowledged" } else { "durable" },
                m.acked_end
            ));
        }
    }
    // Leader epochs: increasing, each attempted, the acknowledged ones kept.
    let eps = &served.epochs;
    if eps.windows(2).any(|w| w[1].0 <= w[0].0 || w[1].1 < w[0].1) {
        v.push(format!("{name}: epoch history out of order: {eps:?}"));
    }
    for (e, s) in eps {
        if !m.epochs_tried.contains(e) {
            v.push(format!("{name}: epoch {e} was never assigned"));
        }
        if *s > end {
            v.push(format!(
                "{name}: epoch {e} starts at {s}, past the log end {end}"
            ));
        }
    }
    if let Some(&(e, s)) = m.epochs.iter().filter(|(_, s)| *s <= end).max() {
        let latest = eps.last().map(|x| x.0);
        if latest.is_none_or(|l| l < e) {
            v.push(format!(
                "{name}: acknowledged epoch {e} (from {s}) lost: history {eps:?}"
            ));
        }
    }
    // Transactions.
    if let Some(t) = &m.txn {
        let aborted = p.aborted_transactions(start, end);
        for &(first, marker) in &t.aborted {
            if first >= start
                && !aborted.iter().any(|a| {
                    a.producer_id == t.pid && a.first_offset == first && a.last_offset == marker
                })
            {
                v.push(format!(
                    "{name}: acknowledged abort of [{first}, {marker}] is not in {aborted:?}"
                ));
            }
        }
        if let (Some(first), true, false) = (t.open_first, t.open_acked, t.marker_unsure) {
            if first >= start && served.lso > first {
                v.push(format!(
                    "{name}: last stable offset {} passes the open transaction at {first}",
                    served.lso
                ));
            }
        }
        if t.open_first.is_none() && !t.marker_unsure && served.lso != served.hw {
            v.push(format!(
                "{name}: no transaction is open, yet the last stable offset is {} (hw {})",
                served.lso, served.hw
            ));
        }
    }
    v
}

/// What [`record_bytes`] gives for `rec` at offset `o`.
fn expected_bytes(o: u64, rec: &Rec) -> Vec<u8> {
    let mut out = Vec::new();
    fingerprint(
        &mut out,
        o,
        rec.ts,
        rec.key.as_deref(),
        rec.value.as_deref(),
        &rec.meta,
        rec.headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref())),
    );
    out
}

/// The journal and its folded snapshot, as the transaction coordinator
/// keeps them (`producers.journal`, `producers.json`).
#[derive(Clone, Debug, Default)]
pub struct JModel {
    /// Every entry attempted, in order (entry n's payload).
    pub tried: Vec<Vec<u8>>,
    /// Entries acknowledged (a prefix of `tried`).
    pub acked: usize,
}

/// A metadata file replaced atomically: versions attempted and acknowledged.
#[derive(Clone, Debug, Default)]
pub struct MModel {
    pub tried: u64,
    pub acked: u64,
}
