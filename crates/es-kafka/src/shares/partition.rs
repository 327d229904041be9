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
//!
//! Files: this one owns the types, the in-flight cache and its bookkeeping
//! (splitting, start movement, emitting Updates), restore and the durable
//! view; `partition/acquire.rs` the acquisition (ShareFetch);
//! `partition/acknowledge.rs` acknowledgements, releases, lock expiry and
//! log-start movement.

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
    /// Records whose lock expired.
    pub records: i64,
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

mod acknowledge;
mod acquire;

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
