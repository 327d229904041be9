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
//! ShareAcknowledge session rules, the bound, the connection-close hook);
//! [`locks`], the broker-wide index of acquisition-lock deadlines its timer
//! task waits on; [`target`], what a call on a share-partition names and
//! brings (configs, the log's offsets, failures); and [`manager`], the async shell over them all
//! ([`manager::ShareManager`]: loading and unloading, the per-partition
//! mutex and fetch lock, journal writes and their durability waits,
//! fencing, lock expiry, session and connection-close releases). The broker
//! holds the manager and its timer runs with the coordinators'; no handler
//! uses it and nothing is advertised yet.

pub mod locks;
pub mod manager;
pub mod partition;
pub mod sessions;
pub mod store;
pub mod target;
