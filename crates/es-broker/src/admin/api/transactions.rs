//! `/api/v1/producers` and `/api/v1/transactions` (DescribeProducers,
//! ListTransactions, DescribeTransactions).

use super::*;

pub(super) async fn producers(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let md = metadata(&b, &caller, None).await?;
    let mut req = DescribeProducersRequest::default();
    for t in md.topics.iter().filter(|t| t.error_code == 0) {
        let Some(name) = &t.name else { continue };
        let mut tr = TopicRequest::default();
        tr.name = name.clone();
        tr.partition_indexes = t.partitions.iter().map(|p| p.partition_index).collect();
        req.topics.push(tr);
    }
    if req.topics.is_empty() {
        return ok(json!([]));
    }
    let r: DescribeProducersResponse =
        call(&b, &caller, ApiKey::DescribeProducers, 0, &req).await?;
    let mut out = Vec::new();
    for t in &r.topics {
        for p in &t.partitions {
            if p.error_code != 0 || p.active_producers.is_empty() {
                continue;
            }
            let producers: Vec<Value> = p
                .active_producers
                .iter()
                .map(|s| {
                    json!({
                        "producer_id": s.producer_id.0,
                        "producer_epoch": s.producer_epoch,
                        "last_sequence": s.last_sequence,
                        "last_timestamp_ms": s.last_timestamp,
                        "coordinator_epoch": s.coordinator_epoch,
                        "current_txn_start_offset": s.current_txn_start_offset,
                    })
                })
                .collect();
            out.push(json!({
                "topic": t.name.0.to_string(),
                "partition": p.partition_index,
                "producers": producers,
            }));
        }
    }
    ok(Value::Array(out))
}

pub(super) async fn transactions(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut lt = ListTransactionsRequest::default();
    lt.duration_filter = -1;
    let listed: ListTransactionsResponse =
        call(&b, &caller, ApiKey::ListTransactions, 1, &lt).await?;
    if listed.error_code != 0 {
        return Err(kafka_error(listed.error_code, None));
    }
    if listed.transaction_states.is_empty() {
        return ok(json!([]));
    }
    let mut dt = DescribeTransactionsRequest::default();
    dt.transactional_ids = listed
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.clone())
        .collect();
    let described: DescribeTransactionsResponse =
        call(&b, &caller, ApiKey::DescribeTransactions, 0, &dt).await?;
    let out: Vec<Value> = described
        .transaction_states
        .iter()
        .filter(|t| t.error_code == 0)
        .map(|t| {
            let partitions: Vec<Value> = t
                .topics
                .iter()
                .flat_map(|tp| {
                    tp.partitions
                        .iter()
                        .map(move |p| json!({"topic": tp.topic.0.to_string(), "partition": p}))
                })
                .collect();
            json!({
                "transactional_id": t.transactional_id.0.to_string(),
                "producer_id": t.producer_id.0,
                "producer_epoch": t.producer_epoch,
                "state": t.transaction_state.to_string(),
                "timeout_ms": t.transaction_timeout_ms,
                "start_time_ms": t.transaction_start_time_ms,
                "partitions": partitions,
            })
        })
        .collect();
    ok(Value::Array(out))
}
