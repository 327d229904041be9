//! `es-broker quorum ...`: the controller quorum's membership from the
//! command line, over a node's Raft listener (the requests of
//! `es_meta::control`, carried to the leader): describe it, make a learner
//! a voter, make a voter a learner again or remove it.
//!
//! A node becomes a learner by starting with `--controller-quorum-voters`
//! that do not name it; `add-voter` then makes it a voter (Kafka's
//! AddRaftVoter). `remove-voter` is Kafka's RemoveRaftVoter; its id is never
//! used again.

use std::time::Duration;

use anyhow::{bail, Context};
use es_meta::control::{ControlReply, ControlRequest, QuorumState};
use es_meta::net::Network;
use es_meta::NodeAddr;

/// How often a request follows a "not the leader" answer.
const HOPS: usize = 5;

#[derive(Debug, clap::Args)]
pub struct QuorumArgs {
    /// A node's Raft listener (HOST:PORT, its --controller-listen).
    #[arg(long)]
    controller: String,
    #[command(subcommand)]
    op: Op,
}

#[derive(Debug, clap::Subcommand)]
enum Op {
    /// The leader, term, voters and learners, as the leader sees them.
    Describe,
    /// Make a learner (a node following the log) a voter.
    AddVoter {
        #[arg(long)]
        node_id: u64,
    },
    /// Take a voter out of the quorum (`--keep-as-learner`: make it a learner).
    RemoveVoter {
        #[arg(long)]
        node_id: u64,
        #[arg(long)]
        keep_as_learner: bool,
    },
}

/// Sends `req` to the node at `controller`, then to the leader it names.
async fn call(controller: &str, req: ControlRequest) -> anyhow::Result<ControlReply> {
    // This tool is no node; u64::MAX is an id no node has.
    let net = Network::with_timeouts(u64::MAX, Duration::from_secs(5), Duration::from_secs(60));
    let mut target = (
        u64::MAX,
        NodeAddr {
            addr: controller.to_string(),
            directory_id: String::new(),
        },
    );
    for _ in 0..HOPS {
        let reply = net
            .call(target.0, &target.1, req.clone())
            .await
            .with_context(|| format!("asking {}", target.1.addr))?;
        match reply {
            ControlReply::NotLeader { leader: Some(l) } => target = l,
            ControlReply::NotLeader { leader: None } => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            ControlReply::Error { message } => bail!("{message}"),
            r => return Ok(r),
        }
    }
    bail!("no controller leader answered after {HOPS} tries")
}

fn print(q: &QuorumState) {
    println!("LeaderId: {}", q.leader_id);
    println!("LeaderEpoch: {}", q.term);
    println!("HighWatermark: {}", q.high_watermark);
    for (what, list) in [("Voter", &q.voters), ("Learner", &q.observers)] {
        for r in list.iter() {
            let end = r.log_end.map_or("unknown".to_string(), |e| e.to_string());
            println!(
                "{what}: {} at {} (directory {}), log end {end}",
                r.node_id, r.node.addr, r.node.directory_id
            );
        }
    }
}

pub fn run(a: &QuorumArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    rt.block_on(async {
        let req = match a.op {
            Op::Describe => ControlRequest::DescribeQuorum,
            Op::AddVoter { node_id } => ControlRequest::AddVoter { node_id },
            Op::RemoveVoter {
                node_id,
                keep_as_learner,
            } => ControlRequest::RemoveVoter {
                node_id,
                keep_as_learner,
            },
        };
        match call(&a.controller, req).await? {
            ControlReply::Quorum(q) => print(&q),
            ControlReply::Done => println!("done"),
            other => bail!("unexpected answer {other:?}"),
        }
        Ok(())
    })
}
