//! Crash at every sync of the metadata store (`es_meta::store`): the Raft
//! log segments (`*.raftlog`), `vote.json`, `committed.json`,
//! `purged.json` and `snapshot.json`, all written through es-storage's
//! `Fs` seam and so on the simulated file system here. A one-voter quorum
//! on a current-thread runtime with paused time (deterministic, as the
//! quorum simulation `sim.rs`) registers a broker, then creates topics and
//! allocates producer-id blocks, taking snapshots and purging the log every
//! few entries. A dry run counts its syncs; then, for every sync k, the
//! power goes at k (unsynced bytes lost, or a torn prefix of them kept),
//! and the node restarts from what the disk kept. Checked: the store opens
//! (no torn tail or half-written JSON refused, no committed entry missing),
//! opening it twice gives the same log state, vote, committed id and
//! snapshot, the JSON files parse, no temporary file is left, the node
//! elects itself and applies, every acknowledged topic is there and none
//! that was never asked for, topics in the order asked, and the next
//! producer-id block starts past every acknowledged one (a block handed
//! out is never handed out again).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use es_meta::records::{MetaRequest, MetaResponse, NewTopic, RegisterBroker};
use es_meta::store::{self, Applied};
use es_meta::{MetaTypes, NoFiles, NodeAddr};
use es_storage::fs::Fs;
use es_storage::simfs::{SimFs, Tear};
use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{Config, Raft, RaftNetwork, RaftNetworkFactory};

const DIR: &str = "/data/meta";
/// Topics the workload creates (and as many producer-id blocks).
const STEPS: usize = 14;
/// A virtual-time bound for anything the node is asked.
const LIMIT: Duration = Duration::from_secs(20);

/// A one-voter quorum talks to nobody.
#[derive(Clone)]
struct Alone;
struct NoPeer;

fn unreachable<E: std::error::Error>() -> RPCError<u64, NodeAddr, E> {
    RPCError::Unreachable(Unreachable::new(&std::io::Error::other("no peers")))
}

impl RaftNetworkFactory<MetaTypes> for Alone {
    type Network = NoPeer;
    async fn new_client(&mut self, _target: u64, _node: &NodeAddr) -> NoPeer {
        NoPeer
    }
}

impl RaftNetwork<MetaTypes> for NoPeer {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<MetaTypes>,
        _o: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, NodeAddr, RaftError<u64>>> {
        Err(unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<MetaTypes>,
        _o: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, NodeAddr, RaftError<u64, InstallSnapshotError>>,
    > {
        Err(unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<u64>,
        _o: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, NodeAddr, RaftError<u64>>> {
        Err(unreachable())
    }
}

fn config() -> Arc<Config> {
    Arc::new(
        Config {
            heartbeat_interval: 100,
            election_timeout_min: 300,
            election_timeout_max: 600,
            // Snapshots and purges within the workload.
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(4),
            max_in_snapshot_log_to_keep: 2,
            purge_batch_size: 1,
            ..Config::default()
        }
        .validate()
        .expect("valid config"),
    )
}

/// A running node and the applied image it publishes.
struct Node {
    raft: Raft<MetaTypes>,
    applied: tokio::sync::watch::Receiver<Applied>,
}

async fn start(fs: &SimFs) -> Result<Node, String> {
    let (log, sm) = store::open_with(
        Arc::new(fs.clone()),
        Path::new(DIR),
        Arc::new(NoFiles),
        store::Io::Inline,
    )
    .map_err(|e| format!("the store does not open: {e}"))?;
    let applied = sm.watch();
    let raft = Raft::new(1, config(), Alone, log, sm)
        .await
        .map_err(|e| format!("the node does not start: {e}"))?;
    Ok(Node { raft, applied })
}

async fn write(node: &Node, req: MetaRequest) -> Option<MetaResponse> {
    match tokio::time::timeout(LIMIT, node.raft.client_write(req)).await {
        Ok(Ok(r)) => Some(r.data),
        _ => None,
    }
}

fn topic(i: usize) -> MetaRequest {
    MetaRequest::CreateTopics {
        topics: vec![NewTopic {
            name: format!("t{i}"),
            id: format!("id-{i}"),
            partitions: 1,
            replication_factor: 1,
            assignments: vec![],
            configs: BTreeMap::new(),
        }],
    }
}

/// What the workload got acknowledged.
#[derive(Debug, Default)]
struct Acked {
    topics: usize,
    /// The end of the last producer-id block handed out.
    block_end: i64,
}

/// Initializes a fresh node and runs the workload until it ends or the disk
/// fails under it.
async fn workload(fs: &SimFs) -> Acked {
    let mut acked = Acked::default();
    let Ok(node) = start(fs).await else {
        return acked;
    };
    let members: BTreeMap<u64, NodeAddr> = [(
        1,
        NodeAddr {
            addr: "alone".into(),
            directory_id: "d1".into(),
        },
    )]
    .into();
    if node.raft.initialize(members).await.is_err() {
        let _ = node.raft.shutdown().await;
        return acked;
    }
    let reg = MetaRequest::RegisterBroker(RegisterBroker {
        broker_id: 1,
        incarnation_id: "i1".into(),
        cluster_id: String::new(),
        endpoints: vec![],
        rack: None,
    });
    let Some(MetaResponse::Registered { broker_epoch }) = write(&node, reg).await else {
        let _ = node.raft.shutdown().await;
        return acked;
    };
    let unfence = MetaRequest::UnfenceBroker {
        broker_id: 1,
        epoch: broker_epoch,
    };
    if write(&node, unfence).await.is_some() {
        for i in 1..=STEPS {
            match write(&node, topic(i)).await {
                Some(MetaResponse::Items { results })
                    if results.iter().all(|r| r.error_code == 0) =>
                {
                    acked.topics = i
                }
                Some(other) => panic!("t{i} refused: {other:?}"),
                None => break,
            }
            let ids = MetaRequest::AllocateProducerIds {
                broker_id: 1,
                count: 10,
            };
            match write(&node, ids).await {
                Some(MetaResponse::ProducerIds { first, count }) => {
                    assert!(first >= acked.block_end, "blocks never overlap");
                    acked.block_end = first + i64::from(count);
                }
                Some(other) => panic!("producer ids refused: {other:?}"),
                None => break,
            }
        }
    }
    let _ = node.raft.shutdown().await;
    acked
}

/// The store's durable state as an open reads it: log state, vote,
/// committed id, snapshot meta.
async fn store_state(fs: &SimFs) -> Result<String, String> {
    let (mut log, mut sm) = store::open_with(
        Arc::new(fs.clone()),
        Path::new(DIR),
        Arc::new(NoFiles),
        store::Io::Inline,
    )
    .map_err(|e| format!("the store does not open: {e}"))?;
    let state = log.get_log_state().await.map_err(|e| e.to_string())?;
    let vote = log.read_vote().await.map_err(|e| e.to_string())?;
    let committed = log.read_committed().await.map_err(|e| e.to_string())?;
    let (applied, membership) = sm.applied_state().await.map_err(|e| e.to_string())?;
    Ok(format!(
        "purged {:?} last {:?} vote {vote:?} committed {committed:?} snapshot applied {applied:?} membership {membership:?}",
        state.last_purged_log_id, state.last_log_id
    ))
}

/// The files of `data/meta` after an open: the JSON ones parse, no
/// temporary file is left.
fn check_files(fs: &SimFs) -> Vec<String> {
    let mut v = Vec::new();
    for name in fs.list(Path::new(DIR)).unwrap_or_default() {
        let path = Path::new(DIR).join(&name);
        if name.ends_with(".json") {
            match fs.read_all(&path) {
                Ok(b) if serde_json::from_slice::<serde_json::Value>(&b).is_ok() => {}
                Ok(b) => v.push(format!("{name} does not parse ({} bytes)", b.len())),
                Err(e) => v.push(format!("{name}: {e}")),
            }
        } else if !name.ends_with(".raftlog") {
            v.push(format!("unexpected file {name}"));
        }
    }
    v
}

/// Restarts from `img` and checks everything; returns the violations.
async fn recover_and_check(img: &SimFs, acked: &Acked) -> Vec<String> {
    let mut v = Vec::new();
    let first = match store_state(img).await {
        Ok(s) => s,
        Err(e) => return vec![e],
    };
    v.extend(check_files(img));
    // Power lost again right after that open: the same state.
    let again = img.crash_image(Tear::None);
    match store_state(&again).await {
        Ok(s) if s == first => {}
        Ok(s) => v.push(format!("two opens differ:\n  {first}\n  {s}")),
        Err(e) => v.push(format!("second open: {e}")),
    }
    let node = match start(&again).await {
        Ok(n) => n,
        Err(e) => {
            v.push(e);
            return v;
        }
    };
    // A node that was never initialized (the crash came before) is fresh.
    if acked.topics == 0 && node.raft.is_initialized().await.ok() != Some(true) {
        let _ = node.raft.shutdown().await;
        return v;
    }
    // It elects itself and applies what is committed; a new block shows
    // where the producer-id counter is.
    let mut block = None;
    for _ in 0..5 {
        let ids = MetaRequest::AllocateProducerIds {
            broker_id: 1,
            count: 10,
        };
        match write(&node, ids).await {
            Some(MetaResponse::ProducerIds { first, .. }) => {
                block = Some(first);
                break;
            }
            // Broker 1's registration may be lost with everything else.
            Some(MetaResponse::Error { .. }) if acked.block_end == 0 => break,
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    if let Some(first) = block {
        if first < acked.block_end {
            v.push(format!(
                "producer ids from {first} handed out again (acknowledged up to {})",
                acked.block_end
            ));
        }
    } else if acked.block_end > 0 {
        v.push("the restarted node applies nothing".into());
    }
    let img_now = node.applied.borrow().image.clone();
    let names: Vec<usize> = img_now
        .topics
        .keys()
        .filter_map(|n| n.strip_prefix('t').and_then(|x| x.parse().ok()))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    if sorted != (1..=sorted.len()).collect::<Vec<_>>() {
        v.push(format!(
            "topics are not the first ones asked for: {sorted:?}"
        ));
    }
    if sorted.len() < acked.topics {
        v.push(format!(
            "{} topics after the restart, {} acknowledged",
            sorted.len(),
            acked.topics
        ));
    }
    if sorted.len() > STEPS {
        v.push(format!("{} topics, never asked for so many", sorted.len()));
    }
    let _ = node.raft.shutdown().await;
    v
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}

#[test]
fn metadata_store_survives_a_crash_at_every_sync() {
    es_meta::rt::seed_thread_rng(29);
    let rt = runtime();
    let dry = SimFs::new();
    let full = rt.block_on(workload(&dry));
    assert_eq!(full.topics, STEPS, "the dry run completes");
    let total = dry.sync_count();
    assert!(total > 40, "{total} syncs in the workload");
    let purged = dry.exists(&Path::new(DIR).join("purged.json"));
    let snapshot = dry.exists(&Path::new(DIR).join("snapshot.json"));
    assert!(purged && snapshot, "snapshots and purges happened");
    let mut failures = Vec::new();
    for k in 1..=total {
        for tear in [Tear::None, Tear::Prefix(k * 7919 + 13)] {
            es_meta::rt::seed_thread_rng(29);
            let fs = SimFs::new();
            fs.crash_at_sync(k);
            let acked = rt.block_on(workload(&fs));
            let img = fs.crash_image(tear);
            let v = rt.block_on(recover_and_check(&img, &acked));
            if !v.is_empty() {
                failures.push(format!(
                    "crash at sync {k} of {total} ({tear:?}), {acked:?}: {v:#?}"
                ));
            }
        }
    }
    println!("metadata store: crashed at each of {total} syncs, twice (torn and not)");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
