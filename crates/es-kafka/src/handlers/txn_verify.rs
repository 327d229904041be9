//! Verification of transactional produce batches whose transaction another
//! broker coordinates (KIP-890, as Kafka 4's brokers do it): before
//! appending, the leader asks the coordinator with AddPartitionsToTxn v4
//! `verify_only` whether each partition is in the producer's open
//! transaction, one request per produce request. A partition the
//! coordinator does not confirm is refused with the error the produce path
//! gives a local verification failure ([`crate::errors::txn_error_for_version`]);
//! a coordinator that cannot be reached gives NOT_ENOUGH_REPLICAS, which
//! the producer retries.
//!
//! Unlike the local check, no guard holds the transaction's markers behind
//! the append: a marker and a verified append may cross, as in Kafka's
//! transaction version 1.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::errors::{code, txn_error_for_version, ResponseError, NONE};
use crate::interbroker::InterBrokerClient;
use es_storage::ProducerAppend;

/// The AddPartitionsToTxn version sent (v4: batched, with `verify_only`).
pub const VERIFY_VERSION: i16 = 4;

/// For each item (`(topic, partition, producer fields)` of a decoded
/// batch, None for the others): None when it may be appended, else the
/// produce error and message. Only transactional batches are asked about,
/// of transaction `id`, which broker `coord` coordinates (asked on its
/// inter-broker listener, whichever listener this produce request came on).
pub async fn verify_remote(
    broker: &Arc<Broker>,
    produce_version: i16,
    id: &str,
    coord: i32,
    items: Vec<Option<(String, i32, ProducerAppend)>>,
) -> Vec<Option<(i16, String)>> {
    let mut out = vec![None; items.len()];
    let asked: Vec<(usize, String, i32, ProducerAppend)> = items
        .into_iter()
        .enumerate()
        .filter_map(|(i, it)| it.map(|(t, p, a)| (i, t, p, a)))
        .filter(|(_, _, _, a)| a.transactional)
        .collect();
    let Some(first) = asked.first() else {
        return out;
    };
    let (pid, epoch) = (first.3.producer_id, first.3.producer_epoch);
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (_, t, p, _) in &asked {
        let v = by_topic.entry(t.as_str()).or_default();
        if !v.contains(p) {
            v.push(*p);
        }
    }
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    txn.producer_id = ProducerId(pid);
    txn.producer_epoch = epoch;
    txn.verify_only = true;
    txn.topics = by_topic
        .into_iter()
        .map(|(t, ps)| {
            let mut at = AddPartitionsToTxnTopic::default();
            at.name = TopicName(StrBytes::from_string(t.to_string()));
            at.partitions = ps;
            at
        })
        .collect();
    let mut req = AddPartitionsToTxnRequest::default();
    req.transactions = vec![txn];
    let client = broker.extension(InterBrokerClient::default);
    let image = broker.image();
    // The client bounds the connect and the exchange with its timeouts.
    let sent = match broker.inter_broker_addr(image.as_deref(), coord) {
        Some(addr) => client
            .send(coord, &addr, VERIFY_VERSION, &req)
            .await
            .map_err(|e| e.to_string()),
        None => Err("no endpoint in the metadata".to_string()),
    };
    // (topic, partition) -> the coordinator's code.
    let mut codes: BTreeMap<(String, i32), i16> = BTreeMap::new();
    let unreachable = match sent {
        Ok(resp) => {
            for t in resp
                .results_by_transaction
                .iter()
                .flat_map(|r| &r.topic_results)
            {
                for p in &t.results_by_partition {
                    codes.insert(
                        (t.name.0.to_string(), p.partition_index),
                        p.partition_error_code,
                    );
                }
            }
            None
        }
        Err(e) => Some(e),
    };
    for (i, t, p, a) in asked {
        let got = match &unreachable {
            Some(_) => code(ResponseError::CoordinatorNotAvailable),
            None => *codes
                .get(&(t.clone(), p))
                .unwrap_or(&code(ResponseError::CoordinatorNotAvailable)),
        };
        let refused = if a.producer_id != pid || a.producer_epoch != epoch {
            // One request carries one producer: Kafka's rule.
            Some(code(ResponseError::InvalidRecord))
        } else {
            (got != NONE).then(|| txn_error_for_version(ApiKey::Produce, produce_version, got))
        };
        out[i] = refused.map(|c| {
            let why = unreachable
                .as_deref()
                .map_or(String::new(), |w| format!(": coordinator {coord} unreachable ({w})"));
            (
                c,
                format!(
                    "partition {t}-{p} is not verified in transaction {id:?} of producer {} epoch {} (error {got}){why}",
                    a.producer_id, a.producer_epoch
                ),
            )
        });
    }
    out
}
