//! `/api/v1/overview` and `/api/v1/throughput`: the broker, its quorum and
//! partitions' health, and the traffic samples the console plots.

use super::*;

pub(super) async fn overview(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let image = b.image();
    let controller = b.metadata().map(|node| {
        let m = node.raft().metrics().borrow().clone();
        let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
        let learners: Vec<u64> = m.membership_config.membership().learner_ids().collect();
        json!({
            "leader_id": m.current_leader,
            "term": m.current_term,
            "commit_index": m.last_applied.map(|l| l.index),
            "voters": voters,
            "learners": learners,
        })
    });
    let brokers: Vec<Value> = match image.as_deref() {
        Some(i) if !i.brokers.is_empty() => i
            .brokers
            .iter()
            .map(|(id, info)| {
                let e = b.endpoint_of(Some(i), *id);
                json!({
                    "node_id": id,
                    "host": e.as_ref().map(|e| e.host.clone()),
                    "port": e.as_ref().map(|e| e.port),
                    "rack": info.rack,
                    "fenced": info.fenced,
                })
            })
            .collect(),
        _ => {
            let e = b.own_endpoint();
            vec![
                json!({"node_id": b.node_id(), "host": e.host, "port": e.port, "rack": null, "fenced": false}),
            ]
        }
    };
    let bb = b.clone();
    let (health, groups) = tokio::task::spawn_blocking(move || {
        (partition_health(&bb), bb.groups().member_counts().len())
    })
    .await
    .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, None, &e.to_string()))?;
    ok(json!({
        "cluster_id": b.cluster_id(),
        "node_id": b.node_id(),
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_ms": sh.started.elapsed().as_millis() as u64,
        "ready": sh.not_ready().is_none(),
        "controller": controller,
        "brokers": brokers,
        "topics": b.topics().len(),
        "partitions": health.0,
        "storage": {"log_bytes": health.1},
        "connections": es_kafka::metrics::kafka_metrics().connections_open(),
        "groups": groups,
        "caller": {"principal": caller.client_principal.to_string(), "may_write": caller.may_write},
    }))
}

/// Partition counts by health, and the bytes of every log hosted here.
fn partition_health(b: &Broker) -> (Value, u64) {
    let h = crate::admin::health::health(b);
    let bytes = b
        .topics()
        .iter()
        .flat_map(|t| t.partitions())
        .map(|slot| slot.log.size_bytes())
        .sum();
    (
        json!({"total": h.total, "leader_here": h.led, "offline": h.offline,
               "under_replicated": h.under_replicated, "under_min_isr": h.under_min_isr}),
        bytes,
    )
}

#[derive(Deserialize)]
pub(super) struct SecondsQuery {
    seconds: Option<usize>,
}

pub(super) async fn throughput(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<SecondsQuery>,
) -> ApiResult {
    let samples = sh.throughput.last(q.seconds.unwrap_or(300).min(600));
    ok(json!({"interval_ms": 1000, "samples": samples}))
}
