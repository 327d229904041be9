//! Partition health, counted once for the JSON API's overview and for
//! /metrics: what this node hosts and leads, what it leads with too few
//! in-sync replicas (Kafka's per-broker UnderReplicatedPartitions and
//! UnderMinIsrPartitionCount), the same over the whole cluster as the
//! metadata has it, and the partitions without a leader.

use es_kafka::Broker;

/// Partition counts by health.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Health {
    /// Partitions with a replica on this node.
    pub hosted: u64,
    /// Partitions this node leads.
    pub led: u64,
    /// Of those, with fewer in-sync replicas than replicas.
    pub led_under_replicated: u64,
    /// Of those, with fewer in-sync replicas than `min.insync.replicas`.
    pub led_under_min_isr: u64,
    /// Every partition of the cluster, as the metadata has it.
    pub total: u64,
    /// Of those, with fewer in-sync replicas than replicas.
    pub under_replicated: u64,
    /// Of those, with fewer in-sync replicas than `min.insync.replicas`.
    pub under_min_isr: u64,
    /// Partitions without a leader: over the metadata's every topic (a
    /// node of a cluster may host none of a topic's partitions).
    pub offline: u64,
}

/// Counts `broker`'s partitions by health.
pub fn health(broker: &Broker) -> Health {
    let image = broker.image();
    let me = broker.node_id();
    let mut h = Health::default();
    for t in broker.topics() {
        let min_isr = t.config().min_insync_replicas();
        h.hosted += t.partitions().len() as u64;
        for p in 0..t.partition_count() {
            let Some(l) = broker.leadership(image.as_deref(), &t.name, p) else {
                continue;
            };
            let under = l.isr.len() < l.replicas.len();
            let under_min = l.isr.len() < min_isr;
            h.total += 1;
            h.under_replicated += u64::from(under);
            h.under_min_isr += u64::from(under_min);
            if l.leader == me {
                h.led += 1;
                h.led_under_replicated += u64::from(under);
                h.led_under_min_isr += u64::from(under_min);
            }
        }
    }
    h.offline = match image.as_deref() {
        Some(i) => i
            .topics
            .values()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.leader < 0)
            .count() as u64,
        None => 0,
    };
    h
}
