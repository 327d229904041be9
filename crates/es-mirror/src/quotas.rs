//! A link's client-quota sync (`es-broker mirror link create
//! --sync-quotas`): the source's client quotas (user, client-id and IP
//! entities, defaults included), read with DescribeClientQuotas, and the
//! changes es needs to hold the same values.
//!
//! librdkafka has no quota API, so the source is asked through es's own
//! client ([`es_client`]) with the link's settings in librdkafka's names
//! (security protocol, SASL PLAIN or SCRAM, TLS): the same login the
//! link's consumer uses. The principal needs DESCRIBE_CONFIGS on the
//! source's cluster, as for `kafka-configs --describe --entity-type users`.
//!
//! What is synced: every value the source has is set on es; a value this
//! link set earlier that the source no longer has is removed. A value set
//! on es by hand for a key the source does not set is never touched (one
//! the source also sets is overwritten: the source wins while the link
//! syncs). What the link set is remembered while the worker runs.

use std::collections::{BTreeMap, BTreeSet};

use es_client::Connection;
use es_meta::mirror::MirrorLink;
use es_meta::quotas::{ClientQuotas, QuotaAlteration, QuotaEntity, QuotaOp, QuotaValue};
use kafka_protocol::messages::{ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse};

/// A value of one key of one entity.
pub type QuotaKey = (QuotaEntity, String);

/// A client for the link's source, logged in as the link's consumer is.
pub fn connect(link: &MirrorLink) -> Result<Connection, String> {
    let settings = crate::source::client_settings(link).map_err(|e| e.to_string())?;
    Connection::open_any(&link.source_bootstrap, &settings).map_err(|e| e.to_string())
}

/// Every client quota of the source (DescribeClientQuotas v1, no filter
/// component: every entity).
pub fn describe_source(c: &mut Connection) -> Result<ClientQuotas, String> {
    let req = DescribeClientQuotasRequest::default();
    let r: DescribeClientQuotasResponse = c
        .call(ApiKey::DescribeClientQuotas, 1, &req)
        .map_err(|e| e.to_string())?;
    if r.error_code != 0 {
        return Err(format!(
            "DescribeClientQuotas refused by the source (error {}): {}",
            r.error_code,
            r.error_message.as_deref().unwrap_or("")
        ));
    }
    let mut out = ClientQuotas::default();
    for e in r.entries.unwrap_or_default() {
        let entity = QuotaEntity(
            e.entity
                .iter()
                .map(|p| {
                    (
                        p.entity_type.to_string(),
                        p.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect(),
        );
        let values: BTreeMap<String, QuotaValue> = e
            .values
            .iter()
            .map(|v| (v.key.to_string(), QuotaValue(v.value)))
            .collect();
        if !values.is_empty() {
            out.0.insert(entity, values);
        }
    }
    Ok(out)
}

/// The alterations that make es hold `source`'s values, and remove those
/// in `made` (set by this link) that the source no longer has; with the
/// keys they set (to remember) and the keys they remove (to forget).
pub fn plan(
    source: &ClientQuotas,
    on_es: &ClientQuotas,
    made: &BTreeSet<QuotaKey>,
) -> (Vec<QuotaAlteration>, BTreeSet<QuotaKey>, BTreeSet<QuotaKey>) {
    let mut ops: BTreeMap<QuotaEntity, Vec<QuotaOp>> = BTreeMap::new();
    let (mut set, mut removed) = (BTreeSet::new(), BTreeSet::new());
    for (entity, values) in &source.0 {
        for (key, value) in values {
            let current = on_es.0.get(entity).and_then(|v| v.get(key));
            if current != Some(value) {
                ops.entry(entity.clone()).or_default().push(QuotaOp {
                    key: key.clone(),
                    value: Some(*value),
                });
            }
            set.insert((entity.clone(), key.clone()));
        }
    }
    for (entity, key) in made {
        let at_source = source.0.get(entity).is_some_and(|v| v.contains_key(key));
        if at_source {
            continue;
        }
        let on = on_es.0.get(entity).is_some_and(|v| v.contains_key(key));
        if on {
            ops.entry(entity.clone()).or_default().push(QuotaOp {
                key: key.clone(),
                value: None,
            });
        }
        removed.insert((entity.clone(), key.clone()));
    }
    let alterations = ops
        .into_iter()
        .map(|(entity, ops)| QuotaAlteration { entity, ops })
        .collect();
    (alterations, set, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(entries: &[(&str, &str, f64)]) -> ClientQuotas {
        let mut q = ClientQuotas::default();
        for (user, key, v) in entries {
            q.0.entry(QuotaEntity::of(&[("user", Some(user))]))
                .or_default()
                .insert(key.to_string(), QuotaValue(*v));
        }
        q
    }

    fn key(user: &str, k: &str) -> QuotaKey {
        (QuotaEntity::of(&[("user", Some(user))]), k.to_string())
    }

    /// An alteration as (user, [(key, value or removed)]).
    type Shown = (String, Vec<(String, Option<f64>)>);

    #[test]
    fn the_plan_sets_what_differs_and_removes_only_what_the_link_set() {
        let source = quotas(&[
            ("alice", "producer_byte_rate", 1024.0),
            ("bob", "consumer_byte_rate", 10.0),
        ]);
        let on_es = quotas(&[
            ("alice", "producer_byte_rate", 1024.0),
            ("carol", "request_percentage", 50.0),
            ("dave", "producer_byte_rate", 7.0),
        ]);
        // The link set dave's earlier; carol's was made by hand.
        let made: BTreeSet<QuotaKey> = [key("dave", "producer_byte_rate")].into();
        let (alts, set, removed) = plan(&source, &on_es, &made);
        let shown: Vec<Shown> = alts
            .iter()
            .map(|a| {
                (
                    a.entity.0["user"].clone().unwrap_or_default(),
                    a.ops
                        .iter()
                        .map(|o| (o.key.clone(), o.value.map(|v| v.0)))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            vec![
                (
                    "bob".into(),
                    vec![("consumer_byte_rate".into(), Some(10.0))]
                ),
                ("dave".into(), vec![("producer_byte_rate".into(), None)]),
            ]
        );
        assert_eq!(
            set,
            [
                key("alice", "producer_byte_rate"),
                key("bob", "consumer_byte_rate")
            ]
            .into()
        );
        assert_eq!(removed, [key("dave", "producer_byte_rate")].into());
        // In sync: nothing to do.
        let (alts, _, _) = plan(&source, &source, &set);
        assert!(alts.is_empty());
    }
}
