//! `/api/v1/topics`: listing, describing (Metadata, DescribeConfigs),
//! creating, deleting and altering topics.

use super::*;

pub(super) async fn topics(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let md = metadata(&b, &caller, None).await?;
    let mirrors = mirror_states(&b);
    let mut out = Vec::new();
    for t in md.topics.iter().filter(|t| t.error_code == 0) {
        let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
            continue;
        };
        let (mut bytes, mut records) = (0u64, 0u64);
        if let Some(local) = b.topic(&name) {
            for slot in local.partitions() {
                bytes += slot.log.size_bytes();
                records += slot
                    .log
                    .high_watermark()
                    .saturating_sub(slot.log.log_start_offset());
            }
        }
        let rf = t.partitions.first().map_or(0, |p| p.replica_nodes.len());
        out.push(json!({
            "name": name,
            "id": t.topic_id.to_string(),
            "internal": t.is_internal,
            "partitions": t.partitions.len(),
            "replication_factor": rf,
            "log_bytes": bytes,
            "records_estimate": records,
            "under_replicated": t.partitions.iter().filter(|p| p.isr_nodes.len() < p.replica_nodes.len()).count(),
            "offline": t.partitions.iter().filter(|p| p.leader_id.0 < 0).count(),
            "mirror": mirrors.get(&name),
        }));
    }
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    ok(Value::Array(out))
}

/// Mirror topics' link and state, by topic.
fn mirror_states(b: &Broker) -> BTreeMap<String, Value> {
    b.extension(MirrorSlot::default)
        .get()
        .map(|c| c.status())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.topic.clone(), json!({"link": t.link, "state": t.state})))
        .collect()
}

pub(super) async fn topic(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    topic_json(&b, &caller, &name)
        .await
        .map(|v| Json(v).into_response())
}

async fn topic_json(b: &Arc<Broker>, caller: &Caller, name: &str) -> Result<Value, Response> {
    let md = metadata(b, caller, Some(vec![name.to_string()])).await?;
    let Some(t) = md.topics.first() else {
        return Err(error(StatusCode::NOT_FOUND, Some(3), "no such topic"));
    };
    if t.error_code != 0 {
        return Err(kafka_error(t.error_code, None));
    }
    let local = b.topic(name);
    let partitions: Vec<Value> = t
        .partitions
        .iter()
        .map(|p| {
            let slot = local.as_ref().and_then(|l| l.partition(p.partition_index));
            let ids = |v: &Vec<BrokerId>| v.iter().map(|b| b.0).collect::<Vec<_>>();
            json!({
                "partition": p.partition_index,
                "leader": p.leader_id.0,
                "leader_epoch": p.leader_epoch,
                "replicas": ids(&p.replica_nodes),
                "isr": ids(&p.isr_nodes),
                "offline_replicas": ids(&p.offline_replicas),
                "log_start_offset": slot.as_ref().map(|s| s.log.log_start_offset()),
                "high_watermark": slot.as_ref().map(|s| s.log.high_watermark()),
                "last_stable_offset": slot.as_ref().map(|s| s.log.last_stable_offset()),
                "log_bytes": slot.as_ref().map(|s| s.log.size_bytes()),
            })
        })
        .collect();
    let mut req = DescribeConfigsRequest::default();
    let mut r = DescribeConfigsResource::default();
    r.resource_type = 2;
    r.resource_name = s(name);
    req.resources = vec![r];
    let dc: DescribeConfigsResponse = call(b, caller, ApiKey::DescribeConfigs, 4, &req).await?;
    let configs: Vec<Value> = dc
        .results
        .iter()
        .filter(|r| r.error_code == 0)
        .flat_map(|r| r.configs.iter())
        .map(|c| {
            json!({
                "name": c.name.to_string(),
                "value": c.value.as_ref().map(|v| v.to_string()),
                "source": config_source(c.config_source),
                "read_only": c.read_only,
                "sensitive": c.is_sensitive,
            })
        })
        .collect();
    Ok(json!({
        "name": name,
        "id": t.topic_id.to_string(),
        "internal": t.is_internal,
        "partitions": partitions,
        "configs": configs,
    }))
}

fn config_source(code: i8) -> &'static str {
    match code {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

#[derive(Deserialize)]
pub(super) struct NewTopic {
    name: String,
    #[serde(default = "minus_one")]
    partitions: i32,
    #[serde(default = "minus_one")]
    replication_factor: i32,
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

fn minus_one() -> i32 {
    -1
}

pub(super) async fn create_topic(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Json(body): Json<NewTopic>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut t = CreatableTopic::default();
    t.name = TopicName(s(&body.name));
    t.num_partitions = body.partitions;
    t.replication_factor = i16::try_from(body.replication_factor).map_err(|_| {
        error(
            StatusCode::BAD_REQUEST,
            None,
            "replication_factor out of range",
        )
    })?;
    t.configs = body
        .configs
        .iter()
        .map(|(k, v)| {
            let mut c = CreatableTopicConfig::default();
            c.name = s(k);
            c.value = Some(s(v));
            c
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let r: CreateTopicsResponse = call(&b, &caller, ApiKey::CreateTopics, 7, &req).await?;
    let Some(t) = r.topics.first() else {
        return Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "CreateTopics answered nothing",
        ));
    };
    if t.error_code != 0 {
        return Err(kafka_error(t.error_code, t.error_message.as_ref()));
    }
    let v = topic_json(&b, &caller, &body.name).await?;
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

pub(super) async fn delete_topic(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = vec![TopicName(s(&name))];
    req.timeout_ms = 30_000;
    // v5: the last version naming topics in `topic_names`.
    let r: DeleteTopicsResponse = call(&b, &caller, ApiKey::DeleteTopics, 5, &req).await?;
    let Some(t) = r.responses.first() else {
        return Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "DeleteTopics answered nothing",
        ));
    };
    if t.error_code != 0 {
        return Err(kafka_error(t.error_code, t.error_message.as_ref()));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
pub(super) struct ConfigChange {
    #[serde(default)]
    set: BTreeMap<String, String>,
    #[serde(default)]
    delete: Vec<String>,
}

pub(super) async fn alter_configs(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Json(body): Json<ConfigChange>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut r = AlterConfigsResource::default();
    r.resource_type = 2;
    r.resource_name = s(&name);
    for (k, v) in &body.set {
        let mut c = AlterableConfig::default();
        c.name = s(k);
        c.config_operation = 0;
        c.value = Some(s(v));
        r.configs.push(c);
    }
    for k in &body.delete {
        let mut c = AlterableConfig::default();
        c.name = s(k);
        c.config_operation = 1;
        r.configs.push(c);
    }
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse =
        call(&b, &caller, ApiKey::IncrementalAlterConfigs, 1, &req).await?;
    let Some(r) = resp.responses.first() else {
        return Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "IncrementalAlterConfigs answered nothing",
        ));
    };
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, r.error_message.as_ref()));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}
