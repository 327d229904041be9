//! `/api/v1/groups`: consumer groups (ListGroups, DescribeGroups,
//! OffsetFetch) with their lag, and offset resets (OffsetCommit).

use super::*;

pub(super) async fn groups(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let req = ListGroupsRequest::default();
    let r: ListGroupsResponse = call(&b, &caller, ApiKey::ListGroups, 5, &req).await?;
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, None));
    }
    let bb = b.clone();
    let (counts, lags) =
        tokio::task::spawn_blocking(move || crate::admin::metrics::group_lags(&bb))
            .await
            .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, None, &e.to_string()))?;
    let mut out: Vec<Value> = r
        .groups
        .iter()
        .map(|g| {
            let id = g.group_id.0.to_string();
            let members = counts
                .iter()
                .find(|(l, _)| l.group_id == id)
                .map_or(0, |(_, n)| *n);
            let lag: u64 = lags.iter().filter(|l| l.group == id).map(|l| l.lag).sum();
            json!({
                "group_id": id,
                "state": g.group_state.to_string(),
                "protocol_type": g.protocol_type.to_string(),
                "type": g.group_type.to_string(),
                "members": members,
                "lag": lag,
            })
        })
        .collect();
    out.sort_by(|a, b| a["group_id"].as_str().cmp(&b["group_id"].as_str()));
    ok(Value::Array(out))
}

pub(super) async fn group(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    group_json(&b, &caller, &id)
        .await
        .map(|v| Json(v).into_response())
}

/// A group's description, members with their assignments, and its
/// committed offsets with their lag.
async fn group_json(b: &Arc<Broker>, caller: &Caller, id: &str) -> Result<Value, Response> {
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(s(id))];
    let r: DescribeGroupsResponse = call(b, caller, ApiKey::DescribeGroups, 5, &req).await?;
    let g = r
        .groups
        .first()
        .ok_or_else(|| error(StatusCode::NOT_FOUND, Some(69), "no such group"))?;
    if g.error_code != 0 {
        return Err(kafka_error(g.error_code, g.error_message.as_ref()));
    }
    // DescribeGroups (v5) describes classic groups; a consumer group of
    // KIP-848 answers Dead with no members there, and is described by
    // ConsumerGroupDescribe instead.
    if g.group_state.as_str() == "Dead" && g.members.is_empty() {
        if let Some((state, members)) = consumer_group(b, caller, id).await? {
            let offsets = committed(b, caller, id).await?;
            return Ok(json!({
                "group_id": id,
                "state": state,
                "protocol_type": "consumer",
                "protocol": "",
                "type": "consumer",
                "members": members,
                "offsets": offsets,
            }));
        }
    }
    let members: Vec<Value> = g
        .members
        .iter()
        .map(|m| {
            let mut assignment = Vec::new();
            let mut a = m.member_assignment.clone();
            if a.remaining() >= 2 {
                let version = a.clone().get_i16();
                if let Ok(cpa) = ConsumerProtocolAssignment::decode(&mut a, version.clamp(0, 3)) {
                    for t in cpa.assigned_partitions {
                        assignment.push(
                            json!({"topic": t.topic.0.to_string(), "partitions": t.partitions}),
                        );
                    }
                }
            }
            json!({
                "member_id": m.member_id.to_string(),
                "group_instance_id": m.group_instance_id.as_ref().map(|s| s.to_string()),
                "client_id": m.client_id.to_string(),
                "client_host": m.client_host.to_string(),
                "assignment": assignment,
            })
        })
        .collect();
    let offsets = committed(b, caller, id).await?;
    Ok(json!({
        "group_id": id,
        "state": g.group_state.to_string(),
        "protocol_type": g.protocol_type.to_string(),
        "protocol": g.protocol_data.to_string(),
        "type": "classic",
        "members": members,
        "offsets": offsets,
    }))
}

/// A KIP-848 consumer group's state and members (ConsumerGroupDescribe),
/// or None when no such consumer group exists.
async fn consumer_group(
    b: &Arc<Broker>,
    caller: &Caller,
    id: &str,
) -> Result<Option<(String, Vec<Value>)>, Response> {
    let mut req = ConsumerGroupDescribeRequest::default();
    req.group_ids = vec![GroupId(s(id))];
    let r: ConsumerGroupDescribeResponse =
        call(b, caller, ApiKey::ConsumerGroupDescribe, 0, &req).await?;
    let Some(g) = r.groups.first().filter(|g| g.error_code == 0) else {
        return Ok(None);
    };
    let partitions = |a: &consumer_group_describe_response::Assignment| {
        a.topic_partitions
            .iter()
            .map(|t| json!({"topic": t.topic_name.0.to_string(), "partitions": t.partitions}))
            .collect::<Vec<_>>()
    };
    let members = g
        .members
        .iter()
        .map(|m| {
            json!({
                "member_id": m.member_id.to_string(),
                "group_instance_id": m.instance_id.as_ref().map(|s| s.to_string()),
                "client_id": m.client_id.to_string(),
                "client_host": m.client_host.to_string(),
                "member_epoch": m.member_epoch,
                "subscribed_topics": m.subscribed_topic_names.iter().map(|t| t.0.to_string()).collect::<Vec<_>>(),
                "assignment": partitions(&m.assignment),
                "target_assignment": partitions(&m.target_assignment),
            })
        })
        .collect();
    Ok(Some((g.group_state.to_string(), members)))
}

/// A group's committed offsets with the lag behind each partition's high
/// watermark.
async fn committed(b: &Arc<Broker>, caller: &Caller, id: &str) -> Result<Vec<Value>, Response> {
    let mut ofr = OffsetFetchRequestGroup::default();
    ofr.group_id = GroupId(s(id));
    ofr.topics = None;
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![ofr];
    let of: OffsetFetchResponse = call(b, caller, ApiKey::OffsetFetch, 8, &req).await?;
    let mut offsets = Vec::new();
    for grp in &of.groups {
        if grp.error_code != 0 {
            return Err(kafka_error(grp.error_code, None));
        }
        for t in &grp.topics {
            let name = t.name.0.to_string();
            let local = b.topic(&name);
            for p in &t.partitions {
                if p.committed_offset < 0 {
                    continue;
                }
                let hw = local
                    .as_ref()
                    .and_then(|l| l.partition(p.partition_index))
                    .map(|s| s.log.high_watermark());
                offsets.push(json!({
                    "topic": name,
                    "partition": p.partition_index,
                    "committed_offset": p.committed_offset,
                    "high_watermark": hw,
                    "lag": hw.map(|hw| hw.saturating_sub(u64::try_from(p.committed_offset).unwrap_or(0))),
                    "metadata": p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                }));
            }
        }
    }
    Ok(offsets)
}

#[derive(Deserialize)]
pub(super) struct Reset {
    topic: String,
    partitions: Option<Vec<i32>>,
    to: ResetTo,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum ResetTo {
    Named(String),
    Offset { offset: i64 },
    Timestamp { timestamp_ms: i64 },
}

pub(super) async fn reset_offsets(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Json(body): Json<Reset>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    // As kafka-consumer-groups: only a group without active members.
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(s(&id))];
    let r: DescribeGroupsResponse = call(&b, &caller, ApiKey::DescribeGroups, 5, &req).await?;
    if let Some(g) = r.groups.first() {
        if g.error_code != 0 && g.error_code != 69 {
            return Err(kafka_error(g.error_code, g.error_message.as_ref()));
        }
        let mut state = g.group_state.to_string();
        let mut active = !g.members.is_empty();
        if state == "Dead" && !active {
            // A KIP-848 consumer group is not a classic one.
            if let Some((st, members)) = consumer_group(&b, &caller, &id).await? {
                active = !members.is_empty();
                state = st;
            }
        }
        if active || !(state == "Empty" || state == "Dead" || state.is_empty()) {
            return Err(error(
                StatusCode::CONFLICT,
                Some(68),
                &format!("group {id} has active members (state {state}): stop its consumers first"),
            ));
        }
    }
    let md = metadata(&b, &caller, Some(vec![body.topic.clone()])).await?;
    let t = md
        .topics
        .first()
        .filter(|t| t.error_code == 0)
        .ok_or_else(|| error(StatusCode::NOT_FOUND, Some(3), "no such topic"))?;
    let partitions: Vec<i32> = match &body.partitions {
        Some(ps) => ps.clone(),
        None => t.partitions.iter().map(|p| p.partition_index).collect(),
    };
    let mut commits = Vec::new();
    for p in partitions {
        let offset = match &body.to {
            ResetTo::Named(n) if n == "earliest" => {
                list_offset(&b, &caller, &body.topic, p, -2).await?
            }
            ResetTo::Named(n) if n == "latest" => {
                list_offset(&b, &caller, &body.topic, p, -1).await?
            }
            ResetTo::Named(n) => {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    None,
                    &format!("to: {n:?} is not earliest, latest, {{\"offset\": N}} or {{\"timestamp_ms\": T}}"),
                ))
            }
            ResetTo::Offset { offset } => *offset,
            ResetTo::Timestamp { timestamp_ms } => {
                let o = list_offset(&b, &caller, &body.topic, p, *timestamp_ms).await?;
                if o < 0 {
                    list_offset(&b, &caller, &body.topic, p, -1).await?
                } else {
                    o
                }
            }
        };
        let mut c = OffsetCommitRequestPartition::default();
        c.partition_index = p;
        c.committed_offset = offset;
        c.committed_leader_epoch = -1;
        c.committed_metadata = Some(s(""));
        commits.push(c);
    }
    let mut ct = OffsetCommitRequestTopic::default();
    ct.name = TopicName(s(&body.topic));
    ct.partitions = commits;
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s(&id));
    req.generation_id_or_member_epoch = -1;
    req.member_id = s("");
    req.retention_time_ms = -1;
    req.topics = vec![ct];
    let r: OffsetCommitResponse = call(&b, &caller, ApiKey::OffsetCommit, 8, &req).await?;
    for t in &r.topics {
        for p in &t.partitions {
            if p.error_code != 0 {
                return Err(kafka_error(p.error_code, None));
            }
        }
    }
    group_json(&b, &caller, &id)
        .await
        .map(|v| Json(v).into_response())
}
