//! DescribeClientQuotas and AlterClientQuotas (KIP-546), as Kafka 4's
//! broker (describe, from its metadata image) and controller (alter,
//! through the metadata log) answer them.
//!
//! Describe needs DESCRIBE_CONFIGS on the cluster, Alter ALTER_CONFIGS,
//! when an authorizer is configured (CLUSTER_AUTHORIZATION_FAILED
//! otherwise, as Kafka). An alteration is checked here with Kafka's rules
//! and messages (es_meta::quotas), so `validate_only` answers without the
//! log; the valid ones go into one metadata entry, so that every node
//! enforces the same quotas and a restart keeps them. Kafka lists an
//! entity's parts in the order of a Java `HashMap`, and so does es.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use es_auth::acl::AclOperation;
use es_meta::quotas::{
    entity_text, java_map_order, validate_alteration, Filter, QuotaAlteration, QuotaEntity,
    QuotaError, QuotaOp, QuotaValue, RECORDS_PER_REQUEST_MAX,
};
use es_meta::records::{MetaRequest, MetaResponse};
use kafka_protocol::messages::{
    alter_client_quotas_response, describe_client_quotas_response, AlterClientQuotasRequest,
    AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::authz::CLUSTER_AUTHORIZATION_FAILED;
use super::{Ctx, RequestError};
use crate::errors::{code, ResponseError};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// The bucket order of a Java `HashMap<String, _>` with the default 16
/// buckets (how Kafka's image holds an entity's quota values).
fn java_default_map_order<T>(items: &mut [(&str, T)]) {
    let bucket = |k: &str| {
        let h = k
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
        ((h ^ ((h as u32) >> 16) as i32) as u32) & 15
    };
    items.sort_by_key(|(k, _)| bucket(k));
}

pub fn describe(
    ctx: &Ctx,
    req: DescribeClientQuotasRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = DescribeClientQuotasResponse::default();
    if !ctx.allowed_on_cluster(AclOperation::DescribeConfigs) {
        // Kafka's getErrorResponse: no message for the generic text, no
        // entries.
        r.error_code = code(ResponseError::ClusterAuthorizationFailed);
        r.error_message = None;
        r.entries = None;
        return ctx.respond(&r);
    }
    let components: Vec<(String, i8, Option<String>)> = req
        .components
        .iter()
        .map(|c| {
            (
                c.entity_type.to_string(),
                c.match_type,
                c._match.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    let filter = match Filter::new(&components, req.strict) {
        Ok(f) => f,
        Err(e) => {
            r.error_code = e.code;
            r.error_message = Some(s(&e.message));
            r.entries = None;
            return ctx.respond(&r);
        }
    };
    let mut entries = Vec::new();
    if let Some(image) = ctx.broker.image() {
        for (entity, values) in image.client_quotas.0.iter() {
            if !filter.matches(entity) {
                continue;
            }
            let mut e = describe_client_quotas_response::EntryData::default();
            for (t, n) in java_map_order(entity) {
                let mut d = describe_client_quotas_response::EntityData::default();
                d.entity_type = s(t);
                d.entity_name = n.map(s);
                e.entity.push(d);
            }
            let mut vs: Vec<(&str, f64)> = values.iter().map(|(k, v)| (k.as_str(), v.0)).collect();
            java_default_map_order(&mut vs);
            for (k, v) in vs {
                let mut d = describe_client_quotas_response::ValueData::default();
                d.key = s(k);
                d.value = v;
                e.values.push(d);
            }
            entries.push(e);
        }
    }
    // Kafka's response data defaults the message to "" and sets none.
    r.error_message = Some(StrBytes::default());
    r.entries = Some(entries);
    ctx.respond(&r)
}

fn entry(
    entity: &QuotaEntity,
    error: Option<&QuotaError>,
) -> alter_client_quotas_response::EntryData {
    let mut e = alter_client_quotas_response::EntryData::default();
    for (t, n) in java_map_order(entity) {
        let mut d = alter_client_quotas_response::EntityData::default();
        d.entity_type = s(t);
        d.entity_name = n.map(s);
        e.entity.push(d);
    }
    // ApiError.NONE has no message (the crate's default is "").
    e.error_message = None;
    if let Some(err) = error {
        e.error_code = err.code;
        e.error_message = Some(s(&err.message));
    }
    e
}

/// Kafka's getErrorResponse: every entry, its entity as sent, refused with
/// `error`.
fn refuse_all(
    req: &AlterClientQuotasRequest,
    error: i16,
    message: &str,
) -> Vec<alter_client_quotas_response::EntryData> {
    req.entries
        .iter()
        .map(|e| {
            let mut out = alter_client_quotas_response::EntryData::default();
            for d in &e.entity {
                let mut x = alter_client_quotas_response::EntityData::default();
                x.entity_type = d.entity_type.clone();
                x.entity_name = d.entity_name.clone();
                out.entity.push(x);
            }
            out.error_code = error;
            out.error_message = Some(s(message));
            out
        })
        .collect()
}

/// What one entity of the request comes to: its result so far, and
/// whether its changes are to be applied.
struct Outcome {
    entity: QuotaEntity,
    error: Option<QuotaError>,
    /// Index into the alterations to apply.
    applied: Option<usize>,
}

pub async fn alter(
    ctx: &Ctx,
    req: AlterClientQuotasRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = AlterClientQuotasResponse::default();
    if !ctx.allowed_on_cluster(AclOperation::AlterConfigs) {
        r.entries = refuse_all(
            &req,
            code(ResponseError::ClusterAuthorizationFailed),
            CLUSTER_AUTHORIZATION_FAILED,
        );
        return ctx.respond(&r);
    }
    // Kafka's ClientQuotaControlManager.alterClientQuotas: one result per
    // entity; a repeated key, or an entity seen before, makes the entity's
    // result "Ignoring duplicate entity" (the changes of its first
    // occurrence still apply, as in Kafka).
    let mut outcomes: Vec<Outcome> = Vec::new();
    // Where each entity's outcome is (requests are untrusted: no quadratic
    // scans over their entries).
    let mut seen_at: HashMap<QuotaEntity, usize> = HashMap::new();
    let mut alterations: Vec<QuotaAlteration> = Vec::new();
    for e in &req.entries {
        // As Kafka's request reads it: a map of type to name, the last
        // repeat of a type winning.
        let mut entity = QuotaEntity::default();
        for d in &e.entity {
            entity.0.insert(
                d.entity_type.to_string(),
                d.entity_name.as_ref().map(|n| n.to_string()),
            );
        }
        let mut ops: Vec<QuotaOp> = Vec::with_capacity(e.ops.len());
        let mut keys: HashSet<&str> = HashSet::with_capacity(e.ops.len());
        let mut repeated_key = false;
        for op in &e.ops {
            if keys.insert(op.key.as_str()) {
                ops.push(QuotaOp {
                    key: op.key.to_string(),
                    value: (!op.remove).then_some(QuotaValue(op.value)),
                });
            } else {
                repeated_key = true;
            }
        }
        let seen = seen_at.get(&entity).copied();
        if repeated_key || seen.is_some() {
            let error = QuotaError {
                code: code(ResponseError::InvalidRequest),
                message: format!("Ignoring duplicate entity {}", entity_text(&entity)),
            };
            match seen {
                Some(i) => outcomes[i].error = Some(error),
                None => {
                    seen_at.insert(entity.clone(), outcomes.len());
                    outcomes.push(Outcome {
                        entity,
                        error: Some(error),
                        applied: None,
                    });
                }
            }
            continue;
        }
        seen_at.insert(entity.clone(), outcomes.len());
        let a = QuotaAlteration {
            entity: entity.clone(),
            ops,
        };
        match validate_alteration(&a) {
            Ok(()) => {
                alterations.push(a);
                outcomes.push(Outcome {
                    entity,
                    error: None,
                    applied: Some(alterations.len() - 1),
                });
            }
            Err(error) => outcomes.push(Outcome {
                entity,
                error: Some(error),
                applied: None,
            }),
        }
    }
    // Kafka's controller writes at most RECORDS_PER_REQUEST_MAX records for
    // one request, validate_only or not; past that the whole request is
    // refused.
    let image = ctx.broker.image();
    let records: usize = alterations
        .iter()
        .map(|a| {
            image
                .as_ref()
                .map_or(a.ops.len(), |i| i.client_quotas.changes(a))
        })
        .sum();
    if records > RECORDS_PER_REQUEST_MAX {
        r.entries = refuse_all(
            &req,
            code(ResponseError::PolicyViolation),
            "Unable to perform excessively large batch operation.",
        );
        return ctx.respond(&r);
    }
    if !req.validate_only && !alterations.is_empty() {
        let answer = ctx
            .broker
            .propose(MetaRequest::AlterClientQuotas { alterations })
            .await;
        let failure = |o: &mut Outcome, code: i16, message: String| {
            if o.applied.is_some() && o.error.is_none() {
                o.error = Some(QuotaError { code, message });
            }
        };
        match answer {
            Ok(MetaResponse::Items { results }) => {
                for o in outcomes.iter_mut() {
                    let item = o.applied.and_then(|i| results.get(i));
                    if let Some(item) = item.filter(|i| i.error_code != 0) {
                        let message = item.message.clone().unwrap_or_default();
                        failure(o, item.error_code, message);
                    }
                }
            }
            Ok(other) => {
                tracing::error!(answer = ?other, "unexpected metadata answer to AlterClientQuotas");
                for o in outcomes.iter_mut() {
                    failure(o, code(ResponseError::UnknownServerError), String::new());
                }
            }
            Err(e) => {
                for o in outcomes.iter_mut() {
                    failure(o, e.code, e.message.clone());
                }
            }
        }
    }
    for o in &outcomes {
        r.entries.push(entry(&o.entity, o.error.as_ref()));
    }
    ctx.respond(&r)
}
