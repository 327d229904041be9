//! The conditions under which the transaction coordinator refuses a request.
//!
//! [`super::state`] (the decisions) and [`super::coordinator`] (journal and
//! markers) answer with a [`TxnError`]; each variant names a Kafka
//! condition. The transactional APIs carry no error message, so none is
//! kept. Which Kafka error code a variant is, and how older versions see
//! some of them, is decided in `crate::errors` and the handlers.

use crate::groups::error::GroupError;

/// Why the transaction coordinator refused a request, or one partition of
/// it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// An empty transactional id.
    #[error("invalid request")]
    InvalidRequest,
    /// A transaction timeout of 0 or less, or over
    /// `transaction.max.timeout.ms`.
    #[error("invalid transaction timeout")]
    InvalidTransactionTimeout,
    /// The id is in the middle of a state change (or its previous
    /// transaction is being completed): retry.
    #[error("concurrent transactions")]
    ConcurrentTransactions,
    /// An older epoch (or producer id) of a transactional id a newer
    /// producer holds.
    #[error("producer fenced")]
    ProducerFenced,
    /// The transactional id is unknown or held by another producer id.
    #[error("invalid producer id mapping")]
    InvalidProducerIdMapping,
    /// The partition or group is not in the open transaction (KIP-890).
    #[error("transaction abortable")]
    TransactionAbortable,
    /// EndTxn with an outcome the transaction's state does not allow.
    #[error("invalid transaction state")]
    InvalidTxnState,
    /// DescribeTransactions of an id the coordinator does not know.
    #[error("transactional id not found")]
    TransactionalIdNotFound,
    /// The producer-id space is exhausted.
    #[error("no producer id left")]
    ProducerIdsExhausted,
    /// Producer ids could not be reserved durably, or no runtime runs the
    /// group coordinator's writer.
    #[error("the transaction coordinator is not available")]
    CoordinatorNotAvailable,
    /// A transaction-log append failed; Kafka answers NOT_COORDINATOR so the
    /// client looks the coordinator up again and retries.
    #[error("the transaction log could not be written")]
    JournalFailed,
    /// The group coordinator refused the offsets' member or their commit.
    #[error("group: {0}")]
    Group(#[from] GroupError),
}
