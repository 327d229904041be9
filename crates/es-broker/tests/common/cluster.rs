//! A cluster of real es-broker processes on loopback for the cluster and
//! replication tests: node `i` of `n` gets a free Kafka port and a free
//! Raft port, the first `voters` nodes are the controller quorum's voters.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use es_test_support::process::BrokerProcess;
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// The es-broker binary cargo built for these tests.
pub const EXE: &str = env!("CARGO_BIN_EXE_es-broker");

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Topic names and ids a node lists.
pub fn topics(addr: &str) -> BTreeMap<String, uuid::Uuid> {
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let mut req = MetadataRequest::default();
    req.topics = None;
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    r.topics
        .into_iter()
        .filter_map(|t| t.name.map(|n| (n.0.to_string(), t.topic_id)))
        .collect()
}

/// (leader id, leader epoch, voters) from DescribeQuorum, if a leader is known.
pub fn quorum(addr: &str) -> Option<(i32, i32, Vec<i32>)> {
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let mut p = PartitionData::default();
    p.partition_index = 0;
    let mut t = TopicData::default();
    t.topic_name = TopicName(StrBytes::from_static_str("__cluster_metadata"));
    t.partitions = vec![p];
    let mut req = DescribeQuorumRequest::default();
    req.topics = vec![t];
    let r: DescribeQuorumResponse = c.call(ApiKey::DescribeQuorum, 2, &req);
    let p = r.topics.first()?.partitions.first()?;
    (p.error_code == 0).then(|| {
        (
            p.leader_id.0,
            p.leader_epoch,
            p.current_voters.iter().map(|v| v.replica_id.0).collect(),
        )
    })
}

pub struct Cluster {
    pub dir: PathBuf,
    pub voters: String,
    pub raft_ports: BTreeMap<i32, u16>,
    pub nodes: BTreeMap<i32, BrokerProcess>,
    /// Flags every node gets besides its identity and the quorum's.
    pub extra: Vec<String>,
}

impl Cluster {
    pub fn args(&self, id: i32) -> Vec<String> {
        vec![
            "--node-id".into(),
            id.to_string(),
            "--controller-listen".into(),
            format!("127.0.0.1:{}", self.raft_ports[&id]),
            "--controller-quorum-voters".into(),
            self.voters.clone(),
        ]
        .into_iter()
        .chain(self.extra.iter().cloned())
        .collect()
    }

    pub fn spawn(&self, id: i32) -> BrokerProcess {
        let args = self.args(id);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        BrokerProcess::spawn(Path::new(EXE), self.dir.join(format!("node-{id}")), &args)
    }

    /// `n` nodes, the first `voters` of them voters, the others learners.
    pub fn start(dir: &Path, n: i32, voters: i32) -> Cluster {
        Cluster::start_with(dir, n, voters, &[])
    }

    /// As [`Cluster::start`], every node also given the flags `extra`.
    ///
    /// The Raft ports are chosen free, then released for the nodes to bind:
    /// another test's listener may take one in between. A node that exits
    /// with "Address already in use" makes the whole cluster start again on
    /// other ports, its nodes' directories emptied (at most three times).
    pub fn start_with(dir: &Path, n: i32, voters: i32, extra: &[&str]) -> Cluster {
        for attempt in 1..=3 {
            match Cluster::try_start(dir, n, voters, extra) {
                Ok(c) => return c,
                Err(log) if attempt < 3 && log.contains("Address already in use") => {
                    eprintln!(
                        "cluster start, attempt {attempt}: a port was taken; again on others"
                    );
                    for id in 1..=n {
                        let _ = std::fs::remove_dir_all(dir.join(format!("node-{id}")));
                    }
                }
                Err(log) => panic!("a node did not start:\n{log}"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn try_start(dir: &Path, n: i32, voters: i32, extra: &[&str]) -> Result<Cluster, String> {
        let raft_ports: BTreeMap<i32, u16> = (1..=n).map(|id| (id, free_port())).collect();
        let voters = raft_ports
            .iter()
            .filter(|(id, _)| **id <= voters)
            .map(|(id, p)| format!("{id}@127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut c = Cluster {
            dir: dir.to_path_buf(),
            voters,
            raft_ports,
            nodes: BTreeMap::new(),
            extra: extra.iter().map(|x| x.to_string()).collect(),
        };
        let mut spawned: Vec<(i32, BrokerProcess)> = (1..=n).map(|id| (id, c.spawn(id))).collect();
        let failed = spawned
            .iter_mut()
            .find_map(|(_, p)| (!p.wait_listening_or_exit()).then(|| p.log_text()));
        if let Some(log) = failed {
            // Every node is stopped (dropped) before the next attempt.
            return Err(log);
        }
        c.nodes.extend(spawned);
        Ok(c)
    }

    pub fn addr(&self, id: i32) -> String {
        self.nodes[&id].addr.clone()
    }

    pub fn leader(&self) -> i32 {
        let any = *self.nodes.keys().next().expect("a node");
        eventually(Duration::from_secs(30), "a quorum leader", || {
            quorum(&self.addr(any)).map(|q| q.0)
        })
    }
}

/// Sends `sig` (STOP, CONT) to process `pid`.
pub fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{sig} {pid}");
}
