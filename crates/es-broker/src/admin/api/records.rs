//! The record browser (`/api/v1/topics/{t}/partitions/{p}/records`: Fetch
//! as the caller, read_committed) and the built-in registry's schemas
//! (`/api/v1/schemas`, and the schema a record's value names).

use super::*;

#[derive(Deserialize)]
pub(super) struct RecordsQuery {
    offset: Option<i64>,
    timestamp: Option<i64>,
    max: Option<usize>,
    max_bytes: Option<i32>,
}

/// Bytes as the API shows them: text, base64, JSON when they parse.
fn bytes_json(b: Option<&Bytes>) -> Value {
    let Some(b) = b else { return Value::Null };
    let text = std::str::from_utf8(b).ok();
    let mut v = json!({
        "text": text,
        "base64": base64::engine::general_purpose::STANDARD.encode(b),
    });
    if let Some(parsed) = text.and_then(|t| serde_json::from_str::<Value>(t).ok()) {
        v["json"] = parsed;
    }
    v
}

pub(super) async fn records(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path((topic, partition)): Path<(String, i32)>,
    Query(q): Query<RecordsQuery>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let max = q.max.unwrap_or(50).clamp(1, 500);
    let start = match (q.offset, q.timestamp) {
        (Some(o), _) => o,
        (None, Some(ts)) => list_offset(&b, &caller, &topic, partition, ts).await?,
        (None, None) => list_offset(&b, &caller, &topic, partition, -2).await?,
    };
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.fetch_offset = start.max(0);
    fp.current_leader_epoch = -1;
    fp.log_start_offset = -1;
    fp.partition_max_bytes = q.max_bytes.unwrap_or(1 << 20).clamp(1, 16 << 20);
    let mut ft = FetchTopic::default();
    ft.topic = TopicName(s(&topic));
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = 16 << 20;
    req.isolation_level = 1;
    req.topics = vec![ft];
    let r: FetchResponse = call(&b, &caller, ApiKey::Fetch, 12, &req).await?;
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, None));
    }
    let p = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| error(StatusCode::NOT_FOUND, Some(3), "no such partition"))?;
    if p.error_code != 0 {
        return Err(kafka_error(p.error_code, None));
    }
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let registry = b
        .extension(crate::schema_registry::RegistryHandle::default)
        .get()
        .cloned();
    let mut out = Vec::new();
    // Keys and values in the registry's wire format, decoded below.
    let mut framed: Vec<(Option<Bytes>, Option<Bytes>)> = Vec::new();
    let mut next = start;
    let mut bytes = p.records.clone().unwrap_or_default();
    // `next_offset` is where the next page starts: after the last record
    // returned, or after the control and aborted records passed over.
    'batches: while bytes.has_remaining() {
        let Ok(set) = RecordBatchDecoder::decode(&mut bytes) else {
            break;
        };
        for rec in set.records {
            if rec.offset < start {
                continue;
            }
            if out.len() >= max {
                break 'batches;
            }
            next = rec.offset + 1;
            if rec.control {
                continue;
            }
            if rec.transactional
                && aborted
                    .iter()
                    .any(|(pid, first)| *pid == rec.producer_id && rec.offset >= *first)
            {
                continue;
            }
            let schema = rec
                .value
                .as_ref()
                .and_then(|v| schema_of(registry.as_ref(), v));
            out.push(json!({
                "offset": rec.offset,
                "timestamp_ms": rec.timestamp,
                "timestamp_type": match rec.timestamp_type {
                    es_kafka::kafka_protocol::records::TimestampType::LogAppend => "LogAppendTime",
                    _ => "CreateTime",
                },
                "key": bytes_json(rec.key.as_ref()),
                "value": bytes_json(rec.value.as_ref()),
                "headers": rec.headers.iter().map(|(k, v)| json!({"key": k.to_string(), "value": bytes_json(v.as_ref())})).collect::<Vec<_>>(),
                "schema": schema,
            }));
            let wire = |b: &Option<Bytes>| b.clone().filter(|b| b.len() >= 5 && b[0] == 0);
            framed.push((wire(&rec.key), wire(&rec.value)));
        }
    }
    if let Some(registry) =
        registry.filter(|_| framed.iter().any(|(k, v)| k.is_some() || v.is_some()))
    {
        let decoded = tokio::task::spawn_blocking(move || {
            registry.with_registry(|r| {
                let mut d = r.decoder();
                let mut one = |b: &Option<Bytes>| b.as_ref().map(|b| d.decode(b));
                framed
                    .iter()
                    .map(|(k, v)| (one(k), one(v)))
                    .collect::<Vec<_>>()
            })
        })
        .await
        .unwrap_or_default();
        for (rec, (k, v)) in out.iter_mut().zip(decoded) {
            for (side, d) in [("key", k), ("value", v)] {
                match d {
                    Some(Ok((id, json))) => {
                        rec[format!("{side}_decoded")] = json;
                        rec[format!("{side}_schema_id")] = json!(id);
                    }
                    Some(Err(why)) => rec[format!("{side}_decode_error")] = json!(why),
                    None => {}
                }
            }
        }
    }
    ok(json!({
        "partition": partition,
        "high_watermark": p.high_watermark,
        "log_start_offset": p.log_start_offset,
        "next_offset": next,
        "records": out,
    }))
}

/// The registry's schema of a value in Confluent's wire format (magic 0,
/// a 4-byte schema id), when the registry knows the id.
fn schema_of(registry: Option<&es_registry::Shared>, value: &Bytes) -> Option<Value> {
    let registry = registry?;
    if value.len() < 5 || value[0] != 0 {
        return None;
    }
    let id = i32::from_be_bytes([value[1], value[2], value[3], value[4]]);
    registry.with_registry(|r| {
        let by_id = r.schema_by_id(id).ok()?;
        let subjects = r.subjects_by_id(id, false).unwrap_or_default();
        Some(json!({
            "id": id,
            "subject": subjects.first(),
            "type": serde_json::to_value(by_id.schema_type).ok(),
        }))
    })
}

pub(super) async fn schemas(State(sh): State<Arc<Shared>>) -> ApiResult {
    let b = broker_of(&sh)?;
    let Some(registry) = b
        .extension(crate::schema_registry::RegistryHandle::default)
        .get()
        .cloned()
    else {
        return ok(json!([]));
    };
    let out = registry.with_registry(|r| {
        r.schemas("", false, true)
            .into_iter()
            .map(|v| {
                let versions = r.versions(&v.subject, false).unwrap_or_default();
                let compatibility = r
                    .config(Some(&v.subject), true)
                    .ok()
                    .and_then(|c| serde_json::to_value(c).ok());
                json!({
                    "subject": v.subject,
                    "versions": versions,
                    "latest": {"version": v.version, "id": v.id,
                               "type": serde_json::to_value(v.schema_type).ok(),
                               "schema": v.schema},
                    "compatibility": compatibility,
                })
            })
            .collect::<Vec<_>>()
    });
    ok(Value::Array(out))
}
