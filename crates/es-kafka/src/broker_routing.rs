//! Where partitions and coordinators live, from this broker's applied copy
//! of the metadata log (es-meta's [`MetaImage`]).
//!
//! Clients learn the cluster from Metadata and then talk to each
//! partition's leader; a request that reaches a broker which does not lead
//! the partition is answered NOT_LEADER_OR_FOLLOWER with the leader it
//! should try (KIP-951's current-leader hints). Groups and transactional
//! ids are placed as Kafka places them: the leader of partition
//! `abs(hash(key)) % partitions` of `__consumer_offsets` (groups) or
//! `__transaction_state` (transactional ids) coordinates the key.
//!
//! Before the metadata quorum has started (a broker opened for a tool or a
//! test without it, or recovery at open), this broker leads, at leader
//! epoch 0, every partition it hosts; one hosted elsewhere (a directory it
//! does not have) has no known leader until the metadata says who leads it.

use std::sync::Arc;

use es_meta::image::NO_LEADER;
use es_meta::MetaImage;

use super::Broker;
use crate::security::{current_listener, ListenerSpec};

/// A broker as clients reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEndpoint {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// One partition's replicas and leadership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leadership {
    /// -1 when the partition has no leader (its replicas are all fenced).
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Replicas on brokers that are fenced or gone (Kafka's offline
    /// replicas).
    pub offline: Vec<i32>,
}

/// Where a coordinator key lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoordinatorPlace {
    /// This broker coordinates it.
    Here,
    /// Another broker does.
    Elsewhere(NodeEndpoint),
    /// The partition that places it has no leader now, or the topic that
    /// places it does not exist yet.
    Unavailable,
}

/// Kafka's placement of a coordinator key on a partition: the absolute
/// value of Java's `String.hashCode` of the key modulo the partition count
/// (Kafka's `Utils.abs` maps `i32::MIN` to 0).
pub fn key_partition(key: &str, partitions: i32) -> i32 {
    let hash = key
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

impl Broker {
    /// The applied metadata, once the quorum has started.
    pub fn image(&self) -> Option<Arc<MetaImage>> {
        self.meta.get().map(|m| m.image())
    }

    /// This node of the metadata quorum, once it has started (for the
    /// services beside Kafka's listeners that keep their state in the
    /// metadata log: the schema registry).
    pub fn meta_node(&self) -> Option<&Arc<es_meta::node::MetaNode>> {
        self.meta.get()
    }

    /// This broker's listeners, the inter-broker one first.
    pub fn listener_specs(&self) -> Vec<ListenerSpec> {
        if self.config.listeners.is_empty() {
            return vec![ListenerSpec::plaintext(
                &self.config.advertised_host,
                self.config.advertised_port,
            )];
        }
        self.config.listeners.clone()
    }

    /// This broker's advertised endpoint on the listener of the request
    /// being handled (the inter-broker listener outside a request).
    pub fn own_endpoint(&self) -> NodeEndpoint {
        let listener = current_listener();
        let specs = self.listener_specs();
        let spec = listener
            .and_then(|l| specs.iter().find(|s| *s.name == *l))
            .or(specs.first());
        let (host, port) = spec.map_or_else(
            || {
                (
                    self.config.advertised_host.clone(),
                    self.config.advertised_port,
                )
            },
            |s| (s.advertised_host.clone(), s.advertised_port),
        );
        NodeEndpoint {
            id: self.node_id(),
            host,
            port,
            rack: None,
        }
    }

    /// The endpoint broker `id` registered, fenced or not, on the listener
    /// of the request being handled (Kafka answers with the endpoints of
    /// the listener the client connected to), else its first.
    pub fn endpoint_of(&self, image: Option<&MetaImage>, id: i32) -> Option<NodeEndpoint> {
        let Some(image) = image else {
            return (id == self.node_id()).then(|| self.own_endpoint());
        };
        let b = image.brokers.get(&id)?;
        let listener = current_listener();
        let e = listener
            .and_then(|l| b.endpoints.iter().find(|e| *e.name == *l))
            .or(b.endpoints.first())?;
        Some(NodeEndpoint {
            id,
            host: e.host.clone(),
            port: i32::from(e.port),
            rack: b.rack.clone(),
        })
    }

    /// `host:port` of broker `id`'s inter-broker listener, whatever listener
    /// the request being handled came on: how one broker reaches another
    /// (replica fetches, share-state copies, transaction markers and
    /// verification). Before any metadata is applied only this broker is
    /// known: its own first listener.
    pub fn inter_broker_addr(&self, image: Option<&MetaImage>, id: i32) -> Option<String> {
        match image {
            Some(image) => inter_broker_addr(image, id),
            None if id == self.node_id() => self
                .listener_specs()
                .first()
                .map(|s| format!("{}:{}", s.advertised_host, s.advertised_port)),
            None => None,
        }
    }

    /// The brokers clients may use: every registered, unfenced broker, by
    /// id (Kafka's Metadata lists no fenced broker). This broker is listed
    /// even while fenced, so a client that reached it can go on.
    pub fn live_brokers(&self, image: Option<&MetaImage>) -> Vec<NodeEndpoint> {
        let Some(image) = image else {
            return vec![self.own_endpoint()];
        };
        let me = self.node_id();
        let mut out: Vec<NodeEndpoint> = image
            .brokers
            .values()
            .filter(|b| !b.fenced || b.id == me)
            .filter_map(|b| self.endpoint_of(Some(image), b.id))
            .collect();
        if !out.iter().any(|e| e.id == me) {
            out.push(self.own_endpoint());
            out.sort_by_key(|e| e.id);
        }
        out
    }

    /// The controller clients are told about: the quorum's leader when it
    /// is a registered broker, else this broker.
    pub fn controller_id(&self, image: Option<&MetaImage>) -> i32 {
        let leader = self
            .meta
            .get()
            .and_then(|m| m.leader())
            .and_then(|l| i32::try_from(l).ok());
        match (leader, image) {
            (Some(l), Some(img)) if img.brokers.contains_key(&l) => l,
            _ => self.node_id(),
        }
    }

    /// (leader, epoch) before the quorum has started: this broker at epoch
    /// 0 for a partition it hosts, none for one hosted elsewhere.
    fn unplaced_leader(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        let t = self.topic(topic)?;
        if !t.has_partition(partition) {
            return None;
        }
        let hosted = t.partition(partition).is_some();
        Some((if hosted { self.node_id() } else { NO_LEADER }, 0))
    }

    /// Partition `partition` of `topic`'s leadership, or `None` when the
    /// metadata has no such partition.
    pub fn leadership(
        &self,
        image: Option<&MetaImage>,
        topic: &str,
        partition: i32,
    ) -> Option<Leadership> {
        let Some(image) = image else {
            let (leader, leader_epoch) = self.unplaced_leader(topic, partition)?;
            return Some(Leadership {
                leader,
                leader_epoch,
                replicas: vec![self.node_id()],
                isr: vec![self.node_id()],
                offline: Vec::new(),
            });
        };
        let p = image
            .topics
            .get(topic)?
            .partitions
            .get(usize::try_from(partition).ok()?)?;
        Some(Leadership {
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            offline: p
                .replicas
                .iter()
                .copied()
                .filter(|r| image.brokers.get(r).is_none_or(|b| b.fenced))
                .collect(),
        })
    }

    /// A partition's (leader, leader epoch), without copying its replica
    /// lists: what the request path checks.
    pub fn leader_and_epoch(
        &self,
        image: Option<&MetaImage>,
        topic: &str,
        partition: i32,
    ) -> Option<(i32, i32)> {
        let Some(image) = image else {
            return self.unplaced_leader(topic, partition);
        };
        let p = image
            .topics
            .get(topic)?
            .partitions
            .get(usize::try_from(partition).ok()?)?;
        Some((p.leader, p.leader_epoch))
    }

    /// The leader to name in a NOT_LEADER_OR_FOLLOWER answer (KIP-951):
    /// its leadership and endpoint, when it has a leader.
    pub fn leader_hint(
        &self,
        image: Option<&MetaImage>,
        topic: &str,
        partition: i32,
    ) -> Option<(Leadership, NodeEndpoint)> {
        let l = self.leadership(image, topic, partition)?;
        if l.leader == NO_LEADER {
            return None;
        }
        let e = self.endpoint_of(image, l.leader)?;
        Some((l, e))
    }

    /// Which partitions of `topic` this broker hosts: those whose replicas
    /// include it (every partition before the quorum has started, or for a
    /// topic the metadata does not know).
    pub fn hosts(&self, image: Option<&MetaImage>, topic: &str, partition: i32) -> bool {
        let me = self.node_id();
        match image.and_then(|i| i.topics.get(topic)) {
            None => true,
            Some(t) => usize::try_from(partition)
                .ok()
                .and_then(|p| t.partitions.get(p))
                .is_some_and(|p| p.replicas.contains(&me)),
        }
    }

    /// Where the coordinator of `key` is, placed over the partitions of
    /// `topic` (`__consumer_offsets` or `__transaction_state`). `None` when
    /// the topic does not exist (the caller creates it and asks again).
    pub fn coordinator_place(&self, topic: &str, key: &str) -> Option<CoordinatorPlace> {
        let image = self.image();
        let count = match image.as_deref() {
            Some(img) => img.topics.get(topic)?.partitions.len() as i32,
            None => self.topic(topic)?.partition_count(),
        };
        let p = key_partition(key, count);
        let Some(l) = self.leadership(image.as_deref(), topic, p) else {
            return Some(CoordinatorPlace::Unavailable);
        };
        if l.leader == self.node_id() {
            return Some(CoordinatorPlace::Here);
        }
        Some(
            self.endpoint_of(image.as_deref(), l.leader)
                .filter(|_| l.leader != NO_LEADER)
                .map_or(CoordinatorPlace::Unavailable, CoordinatorPlace::Elsewhere),
        )
    }
}

/// `host:port` of broker `id`'s first registered endpoint: its inter-broker
/// listener (es-broker registers the listener `inter.broker.listener.name`
/// names first, and in a cluster it must be PLAINTEXT, which is what the
/// inter-broker client speaks). The endpoint of the listener a client's
/// request came on ([`Broker::endpoint_of`]) is for answering clients only:
/// a SASL or TLS listener there would refuse the inter-broker client.
pub fn inter_broker_addr(image: &MetaImage, id: i32) -> Option<String> {
    let e = image.brokers.get(&id)?.endpoints.first()?;
    Some(format!("{}:{}", e.host, e.port))
}

#[cfg(test)]
mod tests {
    use super::{inter_broker_addr, key_partition};
    use es_meta::image::BrokerInfo;
    use es_meta::records::Endpoint;
    use es_meta::MetaImage;

    #[test]
    fn brokers_reach_each_other_on_the_first_listener() {
        let ep = |name: &str, port: u16, protocol: &str| Endpoint {
            name: name.into(),
            host: "10.0.0.2".into(),
            port,
            security_protocol: protocol.into(),
        };
        let mut image = MetaImage::default();
        image.brokers.insert(
            2,
            BrokerInfo {
                id: 2,
                incarnation_id: "x".into(),
                epoch: 1,
                endpoints: vec![
                    ep("INTERNAL", 9093, "PLAINTEXT"),
                    ep("CLIENT", 9092, "SASL_SSL"),
                ],
                rack: None,
                fenced: false,
                shutdown_index: None,
            },
        );
        assert_eq!(
            inter_broker_addr(&image, 2).as_deref(),
            Some("10.0.0.2:9093")
        );
        assert_eq!(inter_broker_addr(&image, 3), None);
    }

    #[test]
    fn keys_are_placed_as_kafka_places_them() {
        // Java: Math.abs("group".hashCode()) % 50 == 98629247 % 50.
        assert_eq!("group".encode_utf16().count(), 5);
        assert_eq!(key_partition("group", 50), 98_629_247 % 50);
        assert_eq!(key_partition("", 50), 0);
        assert_eq!(key_partition("anything", 1), 0);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs gives 0.
        assert_eq!(key_partition("polygenelubricants", 7), 0);
    }
}
