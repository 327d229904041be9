//! Helpers the image's tests share: registering brokers, creating topics,
//! and unwrapping the answers of entries.

use std::collections::BTreeMap;

use crate::records::{
    AlterPartitionItem, BrokerId, ConfigAlteration, ConfigResource, IsrMember, ItemResult,
    LeaderRecovery, MetaRequest, MetaResponse, NewTopic, PartitionResult, PartitionState,
    RegisterBroker,
};

use super::{MetaEvent, MetaImage, PartitionInfo};

/// An image with its own log index, so each entry gets the next one.
pub(crate) struct Log {
    pub img: MetaImage,
    pub index: u64,
    pub epochs: BTreeMap<BrokerId, i64>,
}

impl Log {
    pub fn new() -> Log {
        Log {
            img: MetaImage::default(),
            index: 0,
            epochs: BTreeMap::new(),
        }
    }

    /// `n` brokers 1..=n, registered and unfenced.
    pub fn with_brokers(n: BrokerId) -> Log {
        let mut l = Log::new();
        for id in 1..=n {
            l.broker(id);
        }
        l
    }

    pub fn apply(&mut self, req: MetaRequest) -> (MetaResponse, Vec<MetaEvent>) {
        self.index += 1;
        self.img.apply(self.index, &req)
    }

    /// Registers (a new incarnation) and unfences broker `id`.
    pub fn broker(&mut self, id: BrokerId) -> i64 {
        self.register(id);
        self.unfence(id);
        self.epochs[&id]
    }

    pub fn register(&mut self, id: BrokerId) -> i64 {
        let inc = format!("inc-{id}-{}", self.index);
        let (r, _) = self.apply(MetaRequest::RegisterBroker(RegisterBroker {
            broker_id: id,
            incarnation_id: inc,
            cluster_id: "c".into(),
            endpoints: vec![],
            rack: None,
        }));
        let MetaResponse::Registered { broker_epoch } = r else {
            panic!("{r:?}")
        };
        self.epochs.insert(id, broker_epoch);
        broker_epoch
    }

    pub fn unfence(&mut self, id: BrokerId) -> MetaResponse {
        let epoch = self.epochs[&id];
        self.apply(MetaRequest::UnfenceBroker {
            broker_id: id,
            epoch,
        })
        .0
    }

    pub fn fence(&mut self, id: BrokerId) -> Vec<MetaEvent> {
        let epoch = self.epochs[&id];
        self.apply(MetaRequest::FenceBroker {
            broker_id: id,
            epoch,
        })
        .1
    }

    /// Creates a topic with these replica lists.
    pub fn topic(&mut self, name: &str, assignments: Vec<Vec<BrokerId>>) {
        let r = self.create(NewTopic {
            name: name.into(),
            id: format!("id-{name}"),
            partitions: 0,
            replication_factor: 0,
            assignments,
            configs: BTreeMap::new(),
        });
        assert_eq!(r.error_code, 0, "{r:?}");
    }

    pub fn create(&mut self, t: NewTopic) -> ItemResult {
        let (r, _) = self.apply(MetaRequest::CreateTopics { topics: vec![t] });
        let MetaResponse::Items { mut results } = r else {
            panic!("{r:?}")
        };
        results.remove(0)
    }

    pub fn topic_config(&mut self, name: &str, key: &str, value: &str) {
        self.configs(ConfigResource::Topic(name.into()), key, value);
    }

    pub fn configs(&mut self, resource: ConfigResource, key: &str, value: &str) {
        let (r, _) = self.apply(MetaRequest::AlterConfigs {
            resources: vec![ConfigAlteration {
                resource,
                replace: false,
                changes: BTreeMap::from([(key.to_string(), Some(value.to_string()))]),
            }],
        });
        assert!(matches!(r, MetaResponse::Items { .. }), "{r:?}");
    }

    pub fn part(&self, name: &str, i: usize) -> &PartitionInfo {
        &self.img.topics[name].partitions[i]
    }

    /// An AlterPartition item for partition `i` of `name` at its current
    /// epochs, with this ISR.
    pub fn isr_item(&self, name: &str, i: i32, isr: &[BrokerId]) -> AlterPartitionItem {
        let p = self.part(name, i as usize);
        AlterPartitionItem {
            topic_id: format!("id-{name}"),
            partition: i,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr
                .iter()
                .map(|b| IsrMember {
                    broker_id: *b,
                    broker_epoch: -1,
                })
                .collect(),
            leader_recovery: LeaderRecovery::Recovered,
        }
    }

    /// Sends one AlterPartition from `broker` and returns its one result.
    pub fn alter(&mut self, broker: BrokerId, item: AlterPartitionItem) -> PartitionState {
        let epoch = self.epochs[&broker];
        let (r, _) = self.apply(MetaRequest::AlterPartition {
            broker_id: broker,
            broker_epoch: epoch,
            partitions: vec![item],
        });
        let MetaResponse::AlterPartition { mut results } = r else {
            panic!("{r:?}")
        };
        results.remove(0)
    }
}

/// The per-partition results of an ElectLeaders or AlterReassignments.
pub(crate) fn partitions(r: MetaResponse) -> Vec<PartitionResult> {
    let MetaResponse::Partitions { results } = r else {
        panic!("{r:?}")
    };
    results
}
