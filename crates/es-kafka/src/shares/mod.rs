//! Share groups' share-partitions (KIP-932): the per-(group, topic,
//! partition) record states that let many consumers read one partition as a
//! queue. Everything about a share-partition that lives on the partition's
//! leader belongs here; the share group's membership and assignment live in
//! `groups` (docs/share-groups-design.md §3.2).
//!
//! It holds [`partition`], the sans-io core: the three
//! offsets of the queue lesson (start, the cursor of the next offset never
//! handed out, and the log's end passed in), the state of every offset in
//! flight between them, Kafka's acquisition and acknowledgement rules, and
//! the journal changes it emits; and [`store`], one share-partition's durable
//! files (journal entries, snapshot, replay, fold, deletion); and
//! [`sessions`], the share session cache (Kafka's ShareFetch and
//! ShareAcknowledge session rules, the bound, the connection-close hook).
//! [`locks`] is the broker-wide index of acquisition-lock deadlines its
//! timer task waits on. The async shell (loading, mutexes, the timer task)
//! comes in later commits; nothing here is wired into a handler or
//! advertised yet.

pub mod locks;
pub mod partition;
pub mod sessions;
pub mod store;
