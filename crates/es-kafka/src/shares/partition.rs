//! SharePartition: one share-partition's record states, as a sans-io core
//! (no clock, no files, no async). Time comes in as a millisecond instant;
//! the log comes in as what the caller read from it ([`LogView`]: the
//! boundaries of the stored batches it read, the log start, the end), and
//! every change that must survive a crash goes out as a [`ShareUpdate`] (the
//! journal's Update entry of docs/share-groups-design.md §3.3) for the store
//! to write before the caller answers.
//!
//! The queue lesson's three offsets (seed 003, "ready / in flight /
//! deleted"): `start` (Kafka's SPSO, the lesson's head: everything below it
//! is acknowledged, archived or gone), `cursor` (SPEO + 1: the next offset
//! never handed out) and the end the caller passes (high watermark or LSO).
//! Every offset in `[start, cursor)` is AVAILABLE, ACQUIRED (one owner, a
//! lock deadline, a delivery count), ACKNOWLEDGED or ARCHIVED; the last two
//! are terminal and never change again.
//!
//! Invariants (checked by the property test in `partition_tests.rs`):
//!
//! - the cache covers exactly `[start, cursor)`, contiguously: its first
//!   batch begins at `start` and its last ends at `cursor - 1` (an empty
//!   cache means `start == cursor`);
//! - `start` only grows and moves over every leading terminal offset; a log
//!   start beyond it moves it there and drops what lies below;
//! - the state is kept per batch (the ranges acquired together, as Kafka's
//!   `InFlightBatch`) and split into per-offset states only when a request
//!   touches part of a batch, so memory is bounded by the records in
//!   flight, never by offsets squared; a split larger than
//!   [`PER_OFFSET_RECORDS_MAX`] is refused instead of allocated;
//! - the durable view of the live state (ACQUIRED written as AVAILABLE with
//!   its delivery count, §3.3) always equals the fold of every
//!   [`ShareUpdate`] emitted so far ([`DurableView`]); so a restart
//!   ([`SharePartition::restore`]) brings back exactly what was acknowledged,
//!   and whatever was acquired comes back AVAILABLE with its count (§3.4);
//! - no input panics: bad requests are [`ShareError`]s, impossible log views
//!   from the caller are [`ShareError::Internal`].
//!
//! Kafka's rules are those of `SharePartition` as docs/share-groups-design.md
//! §2.3-2.5 describe them; where es differs it says so at the spot.

use std::collections::BTreeMap;
use std::sync::Arc;

/// The most records one batch may be split into per-offset states. es's own
/// batches are far smaller (in flight is at most `max.record.locks`,
/// 10,000, plus one batch); a split beyond this is refused, not allocated.
pub const PER_OFFSET_RECORDS_MAX: i64 = 1 << 17;

/// The largest offset this core accepts from a caller or from disk; leaves
/// room for `offset + i32::MAX` without overflow.
pub const OFFSET_MAX: i64 = i64::MAX / 4;

/// Kafka's exact texts for the acknowledgement errors of §2.4.
pub mod msg {
    /// No in-flight batch holds the request's first offset.
    pub const NOT_FOUND: &str =
        "Batch record not found. The request batch offsets are not found in the cache.";
    /// The first offset is at or past the cursor (INVALID_REQUEST).
    pub const FIRST_PAST: &str =
        "Batch record not found. The first offset in request is past acquired records.";
    /// The last offset is at or past the cursor (INVALID_REQUEST).
    pub const LAST_PAST: &str =
        "Batch record not found. The last offset in request is past acquired records.";
    /// A whole in-flight batch acknowledged at once is not ACQUIRED.
    pub const BATCH_NOT_ACQUIRED: &str =
        "The batch cannot be acknowledged. The batch is not in the acquired state.";
    /// Part of an in-flight batch is acknowledged and the batch is not
    /// ACQUIRED.
    pub const SUBSET_NOT_ACQUIRED: &str =
        "The batch cannot be acknowledged. The subset batch is not in the acquired state.";
    /// An offset acknowledged on its own is not ACQUIRED.
    pub const OFFSET_NOT_ACQUIRED: &str =
        "The offset cannot be acknowledged. The offset is not acquired.";
    /// A whole batch is held by another member.
    pub const NOT_OWNER_BATCH: &str = "Member is not the owner of batch record";
    /// An offset is held by another member.
    pub const NOT_OWNER_OFFSET: &str = "Member is not the owner of offset";
    /// Renew (type 4) while `share.renew.acknowledge.enable=false`.
    pub const RENEW_DISABLED: &str = "Renewing acquisition locks is not enabled for the group.";
    /// The batch could not be changed (es: a split beyond
    /// [`super::PER_OFFSET_RECORDS_MAX`]).
    pub const UNABLE: &str = "Unable to acknowledge records for the batch";
}

/// Why a share-partition refused a call. Which Kafka code each is lives in
/// `crate::errors`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// INVALID_RECORD_STATE (121) with Kafka's message.
    #[error("{0}")]
    InvalidRecordState(&'static str),
    /// INVALID_REQUEST (42) with Kafka's message.
    #[error("{0}")]
    InvalidRequest(String),
    /// The caller passed something that cannot come from a real log or
    /// store (batches out of order, offsets out of range): a bug above this
    /// core, answered as UNKNOWN_SERVER_ERROR rather than a panic.
    #[error("share-partition: {0}")]
    Internal(String),
}

/// Kafka's `RecordState` (ids as Kafka numbers them; 3 ARCHIVING, the
/// KIP-1191 dead-letter state, is not in es's scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

impl RecordState {
    /// Kafka's id: 0, 1, 2, 4.
    pub const fn id(self) -> u8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    /// ACKNOWLEDGED and ARCHIVED never change again.
    pub const fn is_terminal(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// The states written to the journal (§3.3): ACQUIRED is never written; an
/// acquisition is written as AVAILABLE with the new delivery count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DurableState {
    Available,
    Acknowledged,
    Archived,
}

impl DurableState {
    /// Kafka's `RecordState` id: 0, 2, 4.
    pub const fn id(self) -> u8 {
        match self {
            DurableState::Available => 0,
            DurableState::Acknowledged => 2,
            DurableState::Archived => 4,
        }
    }

    /// The state of a journal id, `None` for any other byte (1 is never
    /// written).
    pub const fn from_id(id: u8) -> Option<DurableState> {
        match id {
            0 => Some(DurableState::Available),
            2 => Some(DurableState::Acknowledged),
            4 => Some(DurableState::Archived),
            _ => None,
        }
    }

    const fn record_state(self) -> RecordState {
        match self {
            DurableState::Available => RecordState::Available,
            DurableState::Acknowledged => RecordState::Acknowledged,
            DurableState::Archived => RecordState::Archived,
        }
    }
}

/// One `(first, last, state, delivery_count)` batch of a journal Update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateBatch {
    pub first: i64,
    pub last: i64,
    pub state: DurableState,
    pub delivery_count: u16,
}

/// The journal's Update entry (§3.3, kind 2, without the leader epoch the
/// store adds): the start offset after the change and the new durable state
/// of every offset whose durable state changed, in offset order, adjacent
/// equal ranges merged. The store writes it as one entry, or, beyond
/// `u16::MAX` batches, as several entries each repeating `start_offset` in
/// the same order (replay gives the same state).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ShareUpdate {
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

/// The group configs the core reads at each use (§3.9; the shell refreshes
/// them with [`SharePartition::set_limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareLimits {
    /// `share.delivery.count.limit` (2-10).
    pub delivery_count_limit: u16,
    /// `share.partition.max.record.locks`: the most offsets in flight.
    pub max_record_locks: i64,
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits {
            delivery_count_limit: 5,
            max_record_locks: 2000,
        }
    }
}

impl ShareLimits {
    /// Kafka's `throttleRecordsDeliveryLimit`: max(2, ceil(limit / 2)).
    pub fn throttle_limit(&self) -> u16 {
        self.delivery_count_limit.div_ceil(2).max(2)
    }
}

/// ShareFetch's ShareAcquireMode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireMode {
    /// 0: whole batches; the last wanted record's batch is taken to its end.
    BatchOptimized,
    /// 1: exactly MaxRecords records.
    RecordLimit,
}

impl AcquireMode {
    /// The mode of a wire byte, `None` for any other.
    pub const fn from_wire(v: i8) -> Option<AcquireMode> {
        match v {
            0 => Some(AcquireMode::BatchOptimized),
            1 => Some(AcquireMode::RecordLimit),
            _ => None,
        }
    }
}

/// ShareAcknowledge's AcknowledgeType.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckType {
    Gap,
    Accept,
    Release,
    Reject,
    Renew,
}

impl AckType {
    /// The type of a wire byte (0-4), `None` for any other.
    pub const fn from_wire(v: i8) -> Option<AckType> {
        match v {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            4 => Some(AckType::Renew),
            _ => None,
        }
    }
}

/// What the caller read from the partition's log for one acquisition.
#[derive(Clone, Copy, Debug)]
pub struct LogView<'a> {
    /// The log start offset now (retention, DeleteRecords).
    pub log_start: i64,
    /// The end for this group, exclusive: the high watermark, or the LSO
    /// under `read_committed`.
    pub end: i64,
    /// The offset the read started at (normally
    /// [`SharePartition::next_fetch_offset`] when the caller asked).
    pub fetch_offset: i64,
    /// `(first, last)` of each stored batch read, ascending, not
    /// overlapping; the first may begin below `fetch_offset` (the batch that
    /// holds it); gaps between batches are offsets the log no longer has
    /// (compaction).
    pub batches: &'a [(i64, i64)],
}

/// One ShareFetch acquisition.
#[derive(Clone, Copy, Debug)]
pub struct AcquireParams<'a> {
    pub member: &'a str,
    /// ShareFetch MaxRecords; 0 or less acquires nothing.
    pub max_records: i32,
    /// ShareFetch BatchSize: the size new AcquiredRecords are split at
    /// (treated as 1 when 0 or less).
    pub batch_size: i32,
    pub mode: AcquireMode,
    /// `share.record.lock.duration.ms`.
    pub lock_duration_ms: i64,
    pub now_ms: i64,
}

/// One AcquiredRecords entry of a ShareFetch response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquiredRecords {
    pub first: i64,
    pub last: i64,
    pub delivery_count: u16,
}

/// What a call changed.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Outcome {
    /// The journal entry to write before answering, if anything durable
    /// changed.
    pub update: Option<ShareUpdate>,
    /// Some records became AVAILABLE again: wake parked fetches.
    pub available_again: bool,
}

/// What [`SharePartition::acquire`] acquired.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Acquired {
    /// Ascending, not overlapping.
    pub records: Vec<AcquiredRecords>,
    pub outcome: Outcome,
}

/// What [`SharePartition::expire_locks`] did.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Expired {
    pub outcome: Outcome,
    /// The earliest lock deadline still pending, for the timer to sleep
    /// until.
    pub next_deadline_ms: Option<i64>,
}

/// One acknowledgement batch of ShareFetch or ShareAcknowledge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckBatch {
    pub first: i64,
    pub last: i64,
    /// One type for the whole batch, or one per offset.
    pub types: Vec<i8>,
}

/// Who acknowledges, and the group configs that apply.
#[derive(Clone, Copy, Debug)]
pub struct AckParams<'a> {
    pub member: &'a str,
    /// `share.renew.acknowledge.enable`.
    pub renew_allowed: bool,
    /// A renewed lock runs this long from `now_ms`.
    pub lock_duration_ms: i64,
    pub now_ms: i64,
}

/// One offset's state, for tests and describe calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    pub state: RecordState,
    pub delivery_count: u16,
    /// The member holding it, when ACQUIRED.
    pub owner: Option<Arc<str>>,
    /// The lock's deadline, when ACQUIRED.
    pub lock_deadline_ms: Option<i64>,
}

/// The figures DescribeShareGroupOffsets needs (§2.8): Lag = latest offset −
/// `start_offset` − `delivery_complete_count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareSummary {
    pub start_offset: i64,
    /// Terminal offsets at or above `start_offset` (Kafka's
    /// `deliveryCompleteCount`).
    pub delivery_complete_count: i64,
    /// The cursor: the next offset never handed out.
    pub next_offset: i64,
}

/// One offset's state inside the core.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    state: RecordState,
    count: u16,
    /// Set exactly when ACQUIRED.
    owner: Option<Arc<str>>,
    /// Meaningful only when ACQUIRED.
    deadline_ms: i64,
}

impl Rec {
    fn at_rest(state: RecordState, count: u16) -> Rec {
        Rec {
            state,
            count,
            owner: None,
            deadline_ms: 0,
        }
    }

    /// What the journal holds for this state (§3.3).
    fn durable(&self) -> (DurableState, u16) {
        let s = match self.state {
            RecordState::Available | RecordState::Acquired => DurableState::Available,
            RecordState::Acknowledged => DurableState::Acknowledged,
            RecordState::Archived => DurableState::Archived,
        };
        (s, self.count)
    }

    fn owned_by(&self, member: &str) -> bool {
        self.owner.as_deref() == Some(member)
    }

    fn info(&self) -> RecordInfo {
        let acquired = self.state == RecordState::Acquired;
        RecordInfo {
            state: self.state,
            delivery_count: self.count,
            owner: if acquired { self.owner.clone() } else { None },
            lock_deadline_ms: acquired.then_some(self.deadline_ms),
        }
    }

    /// AVAILABLE → ACQUIRED by `member`, delivery count + 1.
    fn acquire(&mut self, member: &Arc<str>, deadline_ms: i64) {
        self.state = RecordState::Acquired;
        self.count = self.count.saturating_add(1);
        self.owner = Some(member.clone());
        self.deadline_ms = deadline_ms;
    }

    /// ACQUIRED → AVAILABLE, or ARCHIVED at the delivery count limit; the
    /// count is kept. Returns (durable state changed, available again).
    fn release(&mut self, limit: u16) -> (bool, bool) {
        self.owner = None;
        if self.count >= limit {
            self.state = RecordState::Archived;
            (true, false)
        } else {
            self.state = RecordState::Available;
            (false, true)
        }
    }

    /// One acknowledgement of an ACQUIRED record its owner holds. Returns
    /// (durable state changed, available again).
    fn apply(&mut self, t: AckType, limit: u16, renew_deadline_ms: i64) -> (bool, bool) {
        match t {
            AckType::Gap | AckType::Reject => {
                self.state = RecordState::Archived;
                self.owner = None;
                (true, false)
            }
            AckType::Accept => {
                self.state = RecordState::Acknowledged;
                self.owner = None;
                (true, false)
            }
            AckType::Release => self.release(limit),
            AckType::Renew => {
                self.deadline_ms = renew_deadline_ms;
                (false, false)
            }
        }
    }
}

#[derive(Clone, Debug)]
enum States {
    /// One state for the whole batch.
    Whole(Rec),
    /// One state per offset, `[first, last]` in order.
    PerOffset(Vec<Rec>),
}

/// A range of offsets acquired together (Kafka's `InFlightBatch`), keyed by
/// its first offset in the cache.
#[derive(Clone, Debug)]
struct Batch {
    last: i64,
    states: States,
}

/// Changes collected during one call, turned into an [`Outcome`] by
/// [`SharePartition::finish`].
struct Effects {
    start_before: i64,
    /// Ranges whose durable state changed.
    dirty: Vec<(i64, i64)>,
    available_again: bool,
}

impl Effects {
    fn new(start: i64) -> Effects {
        Effects {
            start_before: start,
            dirty: Vec::new(),
            available_again: false,
        }
    }

    fn mark(&mut self, first: i64, last: i64) {
        match self.dirty.last_mut() {
            Some(d) if d.1.saturating_add(1) == first => d.1 = last,
            _ => self.dirty.push((first, last)),
        }
    }

    fn note(&mut self, first: i64, last: i64, (changed, available): (bool, bool)) {
        if changed {
            self.mark(first, last);
        }
        self.available_again |= available;
    }
}

/// One share-partition's state (see the module comment).
#[derive(Clone, Debug)]
pub struct SharePartition {
    start: i64,
    cursor: i64,
    cache: BTreeMap<i64, Batch>,
    limits: ShareLimits,
}

fn check_offset(what: &str, o: i64) -> Result<(), ShareError> {
    if (0..=OFFSET_MAX).contains(&o) {
        Ok(())
    } else {
        Err(ShareError::Internal(format!("{what} {o} out of range")))
    }
}

impl SharePartition {
    /// A share-partition with nothing in flight, starting at
    /// `start_offset` (resolved by `share.auto.offset.reset` on first load,
    /// §2.2). Offsets out of `0..=OFFSET_MAX` are clamped.
    pub fn new(start_offset: i64, limits: ShareLimits) -> SharePartition {
        let start = start_offset.clamp(0, OFFSET_MAX);
        SharePartition {
            start,
            cursor: start,
            cache: BTreeMap::new(),
            limits,
        }
    }

    /// The group configs changed (read at each use, §3.9).
    pub fn set_limits(&mut self, limits: ShareLimits) {
        self.limits = limits;
    }

    pub fn limits(&self) -> ShareLimits {
        self.limits
    }

    /// SPSO, the lesson's head.
    pub fn start_offset(&self) -> i64 {
        self.start
    }

    /// The cursor: the next offset never handed out (SPEO + 1).
    pub fn next_offset(&self) -> i64 {
        self.cursor
    }

    /// Offsets in flight: `cursor − start` (Kafka's `numInFlightRecords`).
    pub fn in_flight(&self) -> i64 {
        self.cursor - self.start
    }

    /// Where the next read should start: the first AVAILABLE offset below
    /// the cursor (the lesson's "ready again"), else the cursor.
    pub fn next_fetch_offset(&self) -> i64 {
        for (&key, b) in &self.cache {
            match &b.states {
                States::Whole(r) if r.state == RecordState::Available => return key,
                States::Whole(_) => {}
                States::PerOffset(v) => {
                    if let Some(i) = v.iter().position(|r| r.state == RecordState::Available) {
                        return key + i as i64;
                    }
                }
            }
        }
        self.cursor
    }

    /// The state of one offset in `[start, cursor)`.
    pub fn record(&self, offset: i64) -> Option<RecordInfo> {
        let (&key, b) = self.cache.range(..=offset).next_back()?;
        if offset > b.last {
            return None;
        }
        match &b.states {
            States::Whole(r) => Some(r.info()),
            States::PerOffset(v) => v.get(usize::try_from(offset - key).ok()?).map(Rec::info),
        }
    }

    /// Start, delivery-complete count and cursor (§2.8).
    pub fn summary(&self) -> ShareSummary {
        let mut complete = 0;
        for (&key, b) in &self.cache {
            match &b.states {
                States::Whole(r) if r.state.is_terminal() => complete += b.last - key + 1,
                States::Whole(_) => {}
                States::PerOffset(v) => {
                    complete += v.iter().filter(|r| r.state.is_terminal()).count() as i64
                }
            }
        }
        ShareSummary {
            start_offset: self.start,
            delivery_complete_count: complete,
            next_offset: self.cursor,
        }
    }

    /// The earliest lock deadline of any ACQUIRED record.
    pub fn next_lock_deadline(&self) -> Option<i64> {
        let mut next: Option<i64> = None;
        let mut see = |r: &Rec| {
            if r.state == RecordState::Acquired {
                next = Some(next.map_or(r.deadline_ms, |n| n.min(r.deadline_ms)));
            }
        };
        for b in self.cache.values() {
            match &b.states {
                States::Whole(r) => see(r),
                States::PerOffset(v) => v.iter().for_each(&mut see),
            }
        }
        next
    }

    /// ShareFetch's acquisition (§2.3) over what the caller read: re-acquires
    /// AVAILABLE offsets below the cursor and takes new ones from it, at most
    /// `min(MaxRecords, max.record.locks − in flight)` (at the lock limit
    /// only AVAILABLE ones below the cursor); batch-optimized mode extends
    /// new records to the end of the batch holding the last one wanted and
    /// splits them at about `batch_size` at batch boundaries; record-limit
    /// mode takes exactly that many. A batch holding a record delivered
    /// [`ShareLimits::throttle_limit`] times or more is delivered alone.
    ///
    /// Before acquiring it applies `log.log_start` (§2.5) and archives
    /// AVAILABLE offsets between `fetch_offset` and the first batch read
    /// (the log no longer has them: compaction), as Kafka's
    /// `maybeArchiveStaleBatches`; new offsets the log skips between the
    /// cursor and the first batch read are archived with count 0 (Kafka
    /// leaves a hole in its cache; es keeps the cache contiguous).
    pub fn acquire(&mut self, p: &AcquireParams, log: &LogView) -> Result<Acquired, ShareError> {
        check_offset("log start", log.log_start)?;
        check_offset("end", log.end)?;
        check_offset("fetch offset", log.fetch_offset)?;
        let mut prev: Option<i64> = None;
        for &(f, l) in log.batches {
            check_offset("batch first offset", f)?;
            check_offset("batch last offset", l)?;
            if f > l || prev.is_some_and(|p| f <= p) {
                return Err(ShareError::Internal(format!(
                    "log batches not ascending at ({f}, {l})"
                )));
            }
            prev = Some(l);
        }

        let mut fx = Effects::new(self.start);
        self.move_log_start(log.log_start);
        let mut records = Vec::new();
        if p.max_records > 0 {
            self.acquire_inner(p, log, &mut fx, &mut records);
        }
        Ok(Acquired {
            records,
            outcome: self.finish(fx),
        })
    }

    fn acquire_inner(
        &mut self,
        p: &AcquireParams,
        log: &LogView,
        fx: &mut Effects,
        out: &mut Vec<AcquiredRecords>,
    ) {
        // The batches read, below the end and not wholly below start.
        let wins: Vec<(i64, i64)> = log
            .batches
            .iter()
            .filter(|&&(f, l)| l >= self.start && f < log.end)
            .map(|&(f, l)| (f, l.min(log.end - 1)))
            .collect();
        let (Some(&(first_read, _)), Some(&(_, hi))) = (wins.first(), wins.last()) else {
            return;
        };
        let lo = first_read.max(self.start);
        let fetch_offset = log.fetch_offset.max(self.start);
        if fetch_offset < lo {
            // Nothing of [fetch_offset, lo) is in the log any more.
            self.archive_available(fetch_offset, lo.min(self.cursor) - 1, fx);
        }

        let member: Arc<str> = Arc::from(p.member);
        let deadline = p.now_ms.saturating_add(p.lock_duration_ms);
        let limit = self.limits.delivery_count_limit;
        let throttle = self.limits.throttle_limit();
        let max_records = i64::from(p.max_records);
        let mut allowed = max_records.min(self.limits.max_record_locks - self.in_flight());
        let mut hi_acq = hi;
        if allowed <= 0 {
            if fetch_offset < self.cursor {
                // At the lock limit: only records below the cursor.
                allowed = max_records.min(self.cursor - fetch_offset);
                hi_acq = hi.min(self.cursor - 1);
            } else {
                return;
            }
        }

        let mut acquired: i64 = 0;
        let mut stop = false;
        for key in self.keys_overlapping(lo, hi_acq) {
            if acquired >= allowed {
                break;
            }
            let Some(b) = self.cache.get(&key) else {
                continue;
            };
            let last = b.last;
            let full = key >= lo && last <= hi_acq;
            let remaining = allowed - acquired;
            let record_limit_subset =
                p.mode == AcquireMode::RecordLimit && last - key + 1 > remaining;
            let throttled = match &b.states {
                States::Whole(r) => r.state == RecordState::Available && r.count >= throttle,
                States::PerOffset(v) => (key.max(lo)..=last.min(hi_acq)).any(|o| {
                    v.get((o - key) as usize)
                        .is_some_and(|r| r.state == RecordState::Available && r.count >= throttle)
                }),
            };
            if throttled && acquired > 0 {
                // The throttled batch goes alone, in a later fetch.
                stop = true;
                break;
            }
            let whole_available = match &b.states {
                States::Whole(r) => Some(r.state == RecordState::Available),
                States::PerOffset(_) => None,
            };
            if !full || whole_available.is_none() || record_limit_subset || throttled {
                if whole_available == Some(false)
                    || (whole_available == Some(true) && !self.split(key))
                {
                    continue;
                }
                let cap = (p.mode == AcquireMode::RecordLimit).then_some(remaining);
                let got = self.acquire_offsets(key, lo, hi_acq, cap, &member, deadline, fx, out);
                acquired += got;
                if throttled && got > 0 {
                    stop = true;
                    break;
                }
                continue;
            }
            let Some(Batch {
                states: States::Whole(r),
                ..
            }) = self.cache.get_mut(&key)
            else {
                continue;
            };
            if r.state != RecordState::Available {
                continue;
            }
            if r.count >= limit {
                // Only after the limit was lowered: never delivered again.
                r.state = RecordState::Archived;
                fx.mark(key, last);
                continue;
            }
            r.acquire(&member, deadline);
            fx.mark(key, last);
            out.push(AcquiredRecords {
                first: key,
                last,
                delivery_count: r.count,
            });
            acquired += last - key + 1;
        }

        if stop || acquired >= allowed || hi_acq < self.cursor {
            return;
        }
        // New records, from the cursor (or the first one read above it).
        let new_first = self.cursor.max(lo);
        let remaining = allowed - acquired;
        let mut new_last = hi_acq;
        if new_last - new_first + 1 > remaining {
            let target = new_first + remaining - 1;
            new_last = match p.mode {
                AcquireMode::RecordLimit => target,
                // Kafka's alignment overshoot: to the end of the batch
                // holding (or, in a gap, following) the last record wanted.
                AcquireMode::BatchOptimized => {
                    wins.iter().find(|w| w.1 >= target).map_or(target, |w| w.1)
                }
            };
        }
        if new_first > self.cursor {
            let hole = Rec::at_rest(RecordState::Archived, 0);
            self.cache.insert(
                self.cursor,
                Batch {
                    last: new_first - 1,
                    states: States::Whole(hole),
                },
            );
            fx.mark(self.cursor, new_first - 1);
        }
        let batch_size = i64::from(p.batch_size.max(1));
        let mut pieces = Vec::new();
        let mut cur = new_first;
        if new_last - new_first + 1 > batch_size {
            for &(f, _) in &wins {
                if f > new_last {
                    break;
                }
                if f - cur >= batch_size {
                    pieces.push((cur, f - 1));
                    cur = f;
                }
            }
        }
        pieces.push((cur, new_last));
        for (f, l) in pieces {
            let mut r = Rec::at_rest(RecordState::Available, 0);
            r.acquire(&member, deadline);
            self.cache.insert(
                f,
                Batch {
                    last: l,
                    states: States::Whole(r),
                },
            );
            fx.mark(f, l);
            out.push(AcquiredRecords {
                first: f,
                last: l,
                delivery_count: 1,
            });
        }
        self.cursor = new_last + 1;
    }

    /// Acquires the AVAILABLE offsets of a per-offset batch within
    /// `[lo, hi]`, at most `cap` when given. Adjacent offsets with equal
    /// counts go out as one AcquiredRecords (Kafka sends one per offset;
    /// clients read both the same).
    #[allow(clippy::too_many_arguments)]
    fn acquire_offsets(
        &mut self,
        key: i64,
        lo: i64,
        hi: i64,
        cap: Option<i64>,
        member: &Arc<str>,
        deadline: i64,
        fx: &mut Effects,
        out: &mut Vec<AcquiredRecords>,
    ) -> i64 {
        let limit = self.limits.delivery_count_limit;
        let Some(Batch {
            last,
            states: States::PerOffset(v),
        }) = self.cache.get_mut(&key)
        else {
            return 0;
        };
        let mut got = 0;
        for o in key.max(lo)..=(*last).min(hi) {
            if cap.is_some_and(|c| got >= c) {
                break;
            }
            let Some(r) = v.get_mut((o - key) as usize) else {
                break;
            };
            if r.state != RecordState::Available {
                continue;
            }
            fx.mark(o, o);
            if r.count >= limit {
                r.state = RecordState::Archived;
                continue;
            }
            r.acquire(member, deadline);
            match out.last_mut() {
                Some(a) if a.last + 1 == o && a.delivery_count == r.count => a.last = o,
                _ => out.push(AcquiredRecords {
                    first: o,
                    last: o,
                    delivery_count: r.count,
                }),
            }
            got += 1;
        }
        got
    }

    /// AVAILABLE offsets in `[from, to]` become ARCHIVED (count kept).
    fn archive_available(&mut self, from: i64, to: i64, fx: &mut Effects) {
        if from > to {
            return;
        }
        for key in self.keys_overlapping(from, to) {
            let Some(b) = self.cache.get(&key) else {
                continue;
            };
            let last = b.last;
            if let States::Whole(r) = &b.states {
                if r.state != RecordState::Available {
                    continue;
                }
                if (key < from || last > to) && !self.split(key) {
                    continue;
                }
            }
            let Some(b) = self.cache.get_mut(&key) else {
                continue;
            };
            match &mut b.states {
                States::Whole(r) => {
                    r.state = RecordState::Archived;
                    fx.mark(key, last);
                }
                States::PerOffset(v) => {
                    for o in key.max(from)..=last.min(to) {
                        if let Some(r) = v.get_mut((o - key) as usize) {
                            if r.state == RecordState::Available {
                                r.state = RecordState::Archived;
                                fx.mark(o, o);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Applies acknowledgement batches (§2.4), all or nothing: the first
    /// failing batch rolls back every change of the call and its error is
    /// the partition's answer. Batches wholly below start are ignored.
    ///
    /// The request-shape rules the handler checks first (ascending batches,
    /// Renew only with IsRenewAck) are not repeated here; a batch whose
    /// shape is wrong anyway (first > last, types neither one nor one per
    /// offset, a type outside 0-4) answers INVALID_REQUEST.
    pub fn acknowledge(
        &mut self,
        p: &AckParams,
        batches: &[AckBatch],
    ) -> Result<Outcome, ShareError> {
        // Acknowledging never re-keys a batch (splits keep their extent and
        // start moves only in `finish`), so restoring the touched batches
        // undoes the call.
        let saved: Vec<(i64, Batch)> = if self.cursor > self.start {
            let lo = batches
                .iter()
                .map(|b| b.first.max(self.start))
                .min()
                .unwrap_or(self.start);
            let hi = batches
                .iter()
                .map(|b| b.last.min(self.cursor - 1))
                .max()
                .unwrap_or(self.start - 1);
            self.keys_overlapping(lo, hi)
                .into_iter()
                .filter_map(|k| self.cache.get(&k).map(|b| (k, b.clone())))
                .collect()
        } else {
            Vec::new()
        };
        let mut fx = Effects::new(self.start);
        for b in batches {
            if let Err(e) = self.ack_batch(p, b, &mut fx) {
                for (k, b) in saved {
                    self.cache.insert(k, b);
                }
                return Err(e);
            }
        }
        Ok(self.finish(fx))
    }

    fn ack_batch(
        &mut self,
        p: &AckParams,
        b: &AckBatch,
        fx: &mut Effects,
    ) -> Result<(), ShareError> {
        if b.first > b.last {
            return Err(ShareError::InvalidRequest(format!(
                "Batch first offset {} is greater than its last offset {}.",
                b.first, b.last
            )));
        }
        let len = i128::from(b.last) - i128::from(b.first) + 1;
        if b.types.is_empty() || (b.types.len() != 1 && b.types.len() as i128 != len) {
            return Err(ShareError::InvalidRequest(format!(
                "Invalid acknowledge types for batch {}-{}.",
                b.first, b.last
            )));
        }
        let mut types = Vec::with_capacity(b.types.len());
        for &t in &b.types {
            match AckType::from_wire(t) {
                Some(t) => types.push(t),
                None => {
                    return Err(ShareError::InvalidRequest(format!(
                        "Invalid acknowledge type: {:?}",
                        b.types
                    )))
                }
            }
        }
        if !p.renew_allowed && types.contains(&AckType::Renew) {
            return Err(ShareError::InvalidRecordState(msg::RENEW_DISABLED));
        }
        if b.last < self.start {
            return Ok(());
        }
        if self.cache.is_empty() {
            return Err(ShareError::InvalidRecordState(msg::NOT_FOUND));
        }
        let from = b.first.max(self.start);
        if from >= self.cursor {
            return Err(ShareError::InvalidRequest(msg::FIRST_PAST.to_string()));
        }
        if b.last >= self.cursor {
            return Err(ShareError::InvalidRequest(msg::LAST_PAST.to_string()));
        }
        let single = (types.len() == 1).then_some(types[0]);
        let limit = self.limits.delivery_count_limit;
        let renew_deadline = p.now_ms.saturating_add(p.lock_duration_ms);
        for key in self.keys_overlapping(from, b.last) {
            let Some(batch) = self.cache.get_mut(&key) else {
                continue;
            };
            let last = batch.last;
            if let States::Whole(r) = &mut batch.states {
                let covered = key >= from && last <= b.last;
                match single {
                    Some(t) if covered => {
                        if r.state != RecordState::Acquired {
                            return Err(ShareError::InvalidRecordState(msg::BATCH_NOT_ACQUIRED));
                        }
                        if !r.owned_by(p.member) {
                            return Err(ShareError::InvalidRecordState(msg::NOT_OWNER_BATCH));
                        }
                        let effect = r.apply(t, limit, renew_deadline);
                        fx.note(key, last, effect);
                        continue;
                    }
                    _ => {
                        if r.state != RecordState::Acquired {
                            return Err(ShareError::InvalidRecordState(msg::SUBSET_NOT_ACQUIRED));
                        }
                    }
                }
                if !self.split(key) {
                    return Err(ShareError::InvalidRecordState(msg::UNABLE));
                }
            }
            let Some(Batch {
                states: States::PerOffset(v),
                ..
            }) = self.cache.get_mut(&key)
            else {
                return Err(ShareError::InvalidRecordState(msg::UNABLE));
            };
            for o in key.max(from)..=last.min(b.last) {
                let Some(r) = v.get_mut((o - key) as usize) else {
                    return Err(ShareError::InvalidRecordState(msg::UNABLE));
                };
                if r.state != RecordState::Acquired {
                    return Err(ShareError::InvalidRecordState(msg::OFFSET_NOT_ACQUIRED));
                }
                if !r.owned_by(p.member) {
                    return Err(ShareError::InvalidRecordState(msg::NOT_OWNER_OFFSET));
                }
                let t = match single {
                    Some(t) => t,
                    None => types
                        .get((o - b.first) as usize)
                        .copied()
                        .ok_or(ShareError::InvalidRecordState(msg::UNABLE))?,
                };
                let effect = r.apply(t, limit, renew_deadline);
                fx.note(o, o, effect);
            }
        }
        Ok(())
    }

    /// Every record `member` holds becomes AVAILABLE, or ARCHIVED at the
    /// delivery count limit; counts are kept (session close, connection
    /// close, §2.6).
    ///
    /// Deviation: Kafka's `releaseAcquiredRecords` lowers the delivery
    /// count ("fetched but not delivered") and never archives there; es
    /// cannot know whether the response reached the client, has already
    /// journaled the acquisition with its count, and keeps delivery counts
    /// monotonic, so a poison record cannot dodge the limit by closing
    /// sessions.
    pub fn release_member(&mut self, member: &str) -> Outcome {
        let limit = self.limits.delivery_count_limit;
        self.release_where(|r| r.owned_by(member), limit)
    }

    /// Locks past their deadline: ACQUIRED → AVAILABLE, or ARCHIVED at the
    /// limit; counts are kept (§2.5). Returns the next deadline still
    /// pending.
    pub fn expire_locks(&mut self, now_ms: i64) -> Expired {
        let limit = self.limits.delivery_count_limit;
        let outcome = self.release_where(|r| r.deadline_ms <= now_ms, limit);
        Expired {
            outcome,
            next_deadline_ms: self.next_lock_deadline(),
        }
    }

    fn release_where(&mut self, pick: impl Fn(&Rec) -> bool, limit: u16) -> Outcome {
        let mut fx = Effects::new(self.start);
        for (&key, b) in self.cache.iter_mut() {
            match &mut b.states {
                States::Whole(r) => {
                    if r.state == RecordState::Acquired && pick(r) {
                        let effect = r.release(limit);
                        fx.note(key, b.last, effect);
                    }
                }
                States::PerOffset(v) => {
                    for (i, r) in v.iter_mut().enumerate() {
                        if r.state == RecordState::Acquired && pick(r) {
                            let o = key + i as i64;
                            let effect = r.release(limit);
                            fx.note(o, o, effect);
                        }
                    }
                }
            }
        }
        self.finish(fx)
    }

    /// The log start moved (retention, DeleteRecords): start follows it
    /// (§2.5, §3.11). Records below it are dropped, ACQUIRED ones too: they
    /// are never delivered again and acknowledgements of them are ignored as
    /// below start, which is where Kafka ends up when their locks come back.
    pub fn advance_log_start(&mut self, log_start: i64) -> Outcome {
        let fx = Effects::new(self.start);
        self.move_log_start(log_start.clamp(0, OFFSET_MAX));
        self.finish(fx)
    }

    /// Moves start to `log_start` when beyond it; `finish` journals it.
    fn move_log_start(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        while let Some(entry) = self.cache.first_entry() {
            let key = *entry.key();
            if entry.get().last < log_start {
                entry.remove();
                continue;
            }
            if key < log_start {
                let mut b = entry.remove();
                if let States::PerOffset(v) = &mut b.states {
                    v.drain(..(log_start - key) as usize);
                }
                self.cache.insert(log_start, b);
            }
            break;
        }
        self.start = log_start;
        self.cursor = self.cursor.max(log_start);
    }

    /// Rebuilds a share-partition after a restart (§3.4) from its stored
    /// start offset and state batches (a later batch wins where batches
    /// overlap, Kafka's combiner):
    ///
    /// - start = max(stored start, `log_start`);
    /// - cursor = the last stored offset + 1: above it nothing was handed
    ///   out;
    /// - AVAILABLE (which includes whatever was ACQUIRED at the crash) keeps
    ///   its count, and becomes ARCHIVED at the delivery count limit (its
    ///   last delivery was in flight);
    /// - an offset between start and cursor that no batch covers (es never
    ///   writes such a hole) comes back AVAILABLE, never delivered.
    ///
    /// Returns the Update to journal when that changed anything durable.
    pub fn restore(
        start_offset: i64,
        batches: &[StateBatch],
        log_start: i64,
        limits: ShareLimits,
    ) -> Result<(SharePartition, Outcome), ShareError> {
        check_offset("stored start offset", start_offset)?;
        check_offset("log start", log_start)?;
        for b in batches {
            check_offset("stored batch first offset", b.first)?;
            check_offset("stored batch last offset", b.last)?;
            if b.first > b.last {
                return Err(ShareError::Internal(format!(
                    "stored batch {}-{} is empty",
                    b.first, b.last
                )));
            }
        }
        let mut view = DurableView::new(start_offset);
        view.apply(&ShareUpdate {
            start_offset,
            batches: batches.to_vec(),
        });
        let mut sp = SharePartition::new(start_offset, limits);
        let mut fx = Effects::new(start_offset);
        let mut next = start_offset;
        for sb in view.batches() {
            if sb.first > next {
                let gap = Rec::at_rest(RecordState::Available, 0);
                sp.cache.insert(
                    next,
                    Batch {
                        last: sb.first - 1,
                        states: States::Whole(gap),
                    },
                );
                fx.mark(next, sb.first - 1);
            }
            let mut r = Rec::at_rest(sb.state.record_state(), sb.delivery_count);
            if r.state == RecordState::Available && r.count >= limits.delivery_count_limit {
                r.state = RecordState::Archived;
                fx.mark(sb.first, sb.last);
            }
            sp.cache.insert(
                sb.first,
                Batch {
                    last: sb.last,
                    states: States::Whole(r),
                },
            );
            next = sb.last + 1;
        }
        sp.cursor = next;
        sp.move_log_start(log_start);
        let outcome = sp.finish(fx);
        Ok((sp, outcome))
    }

    /// Keys of the batches overlapping `[from, to]`, ascending.
    fn keys_overlapping(&self, from: i64, to: i64) -> Vec<i64> {
        if from > to {
            return Vec::new();
        }
        let first = match self.cache.range(..=from).next_back() {
            Some((&k, b)) if b.last >= from => k,
            _ => from,
        };
        self.cache.range(first..=to).map(|(&k, _)| k).collect()
    }

    /// A whole batch becomes per-offset states. False (and nothing changes)
    /// past [`PER_OFFSET_RECORDS_MAX`].
    fn split(&mut self, key: i64) -> bool {
        let Some(b) = self.cache.get_mut(&key) else {
            return false;
        };
        if let States::Whole(r) = &b.states {
            let len = b.last - key + 1;
            if len > PER_OFFSET_RECORDS_MAX {
                return false;
            }
            b.states = States::PerOffset(vec![r.clone(); len as usize]);
        }
        true
    }

    /// Start moves over every leading terminal offset; batches wholly below
    /// it are dropped and one it cuts is trimmed, so the cache begins at
    /// start.
    fn advance_start(&mut self) {
        while let Some(entry) = self.cache.first_entry() {
            let key = *entry.key();
            let last = entry.get().last;
            let lead = match &entry.get().states {
                States::Whole(r) if r.state.is_terminal() => last - key + 1,
                States::Whole(_) => 0,
                States::PerOffset(v) => {
                    v.iter().take_while(|r| r.state.is_terminal()).count() as i64
                }
            };
            if lead == 0 {
                break;
            }
            let mut b = entry.remove();
            self.start = key + lead;
            if key + lead <= last {
                if let States::PerOffset(v) = &mut b.states {
                    v.drain(..lead as usize);
                }
                self.cache.insert(key + lead, b);
                break;
            }
        }
        if self.cache.is_empty() {
            self.start = self.start.max(self.cursor);
            self.cursor = self.start;
        }
    }

    /// Ends a call: moves start, and turns the changed ranges into the
    /// journal Update.
    fn finish(&mut self, mut fx: Effects) -> Outcome {
        self.advance_start();
        fx.dirty.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::new();
        for (f, l) in fx.dirty {
            let (f, l) = (f.max(self.start), l.min(self.cursor - 1));
            if f > l {
                continue;
            }
            match merged.last_mut() {
                Some(m) if f <= m.1.saturating_add(1) => m.1 = m.1.max(l),
                _ => merged.push((f, l)),
            }
        }
        let mut batches = Vec::new();
        for (f, l) in merged {
            self.durable_batches(f, l, &mut batches);
        }
        let changed = self.start != fx.start_before || !batches.is_empty();
        let update = changed.then_some(ShareUpdate {
            start_offset: self.start,
            batches,
        });
        Outcome {
            update,
            available_again: fx.available_again,
        }
    }

    /// The durable states of `[from, to]`, appended to `out` merged.
    fn durable_batches(&self, from: i64, to: i64, out: &mut Vec<StateBatch>) {
        let mut push =
            |first: i64, last: i64, (state, delivery_count): (DurableState, u16)| match out
                .last_mut()
            {
                Some(p)
                    if p.last + 1 == first
                        && p.state == state
                        && p.delivery_count == delivery_count =>
                {
                    p.last = last
                }
                _ => out.push(StateBatch {
                    first,
                    last,
                    state,
                    delivery_count,
                }),
            };
        for key in self.keys_overlapping(from, to) {
            let Some(b) = self.cache.get(&key) else {
                continue;
            };
            match &b.states {
                States::Whole(r) => push(key.max(from), b.last.min(to), r.durable()),
                States::PerOffset(v) => {
                    for o in key.max(from)..=b.last.min(to) {
                        if let Some(r) = v.get((o - key) as usize) {
                            push(o, o, r.durable());
                        }
                    }
                }
            }
        }
    }
}

/// The fold of journal Updates: Kafka's combiner
/// (`PersisterStateBatchCombiner`) as §3.3 describes it. Each Update sets the
/// start offset, lays its batches over the earlier ones (the later wins
/// where they overlap) and drops everything below the start. The store's
/// replay and the property test both use it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DurableView {
    start: i64,
    /// first → (last, state, delivery count); not overlapping.
    batches: BTreeMap<i64, (i64, DurableState, u16)>,
}

impl DurableView {
    pub fn new(start_offset: i64) -> DurableView {
        DurableView {
            start: start_offset,
            batches: BTreeMap::new(),
        }
    }

    pub fn start_offset(&self) -> i64 {
        self.start
    }

    /// The folded batches, ascending.
    pub fn batches(&self) -> Vec<StateBatch> {
        self.batches
            .iter()
            .map(|(&first, &(last, state, delivery_count))| StateBatch {
                first,
                last,
                state,
                delivery_count,
            })
            .collect()
    }

    /// Folds one Update in. Batches with first > last are skipped.
    pub fn apply(&mut self, u: &ShareUpdate) {
        self.start = u.start_offset;
        for b in &u.batches {
            if b.first > b.last {
                continue;
            }
            let hit: Vec<i64> = self
                .batches
                .range(..=b.last)
                .rev()
                .take_while(|(_, v)| v.0 >= b.first)
                .map(|(&k, _)| k)
                .collect();
            for k in hit {
                if let Some((last, s, c)) = self.batches.remove(&k) {
                    if k < b.first {
                        self.batches.insert(k, (b.first - 1, s, c));
                    }
                    if last > b.last {
                        self.batches.insert(b.last + 1, (last, s, c));
                    }
                }
            }
            self.batches
                .insert(b.first, (b.last, b.state, b.delivery_count));
        }
        let below: Vec<i64> = self.batches.range(..self.start).map(|(&k, _)| k).collect();
        for k in below {
            if let Some(v) = self.batches.remove(&k) {
                if v.0 >= self.start {
                    self.batches.insert(self.start, v);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
