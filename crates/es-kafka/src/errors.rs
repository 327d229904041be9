//! The one place where errors from the layers below become Kafka error codes.
//!
//! Storage errors ([`StorageError`]), record-batch codec errors and our own
//! protocol-level failures all end up as an `i16` in a response; the mapping
//! lives here so that every handler answers the same failure the same way.
//! The group and transaction coordinators' refusals ([`GroupError`],
//! [`TxnError`]) get their codes here too, and so do the rewrites Kafka
//! applies to a transaction error for clients of older request versions
//! ([`txn_error_for_version`]).

use crate::codec::batch::BatchError;
use crate::config::ConfigError;
use crate::groups::error::GroupError;
use crate::shares::partition::ShareError;
use crate::shares::sessions::SessionError;
use crate::shares::target::ShareFailure;
use crate::txn::error::TxnError;
use es_storage::producers::SeqError;
use es_storage::StorageError;
use kafka_protocol::messages::ApiKey;
pub use kafka_protocol::ResponseError;

/// Kafka's "no error".
pub const NONE: i16 = 0;

/// The code of a Kafka error.
pub const fn code(e: ResponseError) -> i16 {
    e.code()
}

/// Maps a storage failure to the Kafka error a client understands.
///
/// - out of range reads are OFFSET_OUT_OF_RANGE, which consumers handle by
///   their reset policy;
/// - a record over the storage limit is MESSAGE_TOO_LARGE;
/// - corruption found on read is CORRUPT_MESSAGE (Kafka's KAFKA_STORAGE_ERROR
///   would make clients retry forever on bytes that will never heal);
/// - a refused producer sequence or epoch is OUT_OF_ORDER_SEQUENCE_NUMBER or
///   INVALID_PRODUCER_EPOCH, as Kafka's producer state check answers;
/// - a fenced or closed partition, or any I/O failure, is KAFKA_STORAGE_ERROR,
///   which clients treat as retriable (the partition comes back after a restart).
pub fn storage_error_code(e: &StorageError) -> i16 {
    let e = match e {
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::RecordTooLarge(_) => ResponseError::MessageTooLarge,
        StorageError::Corrupt { .. } => ResponseError::CorruptMessage,
        StorageError::Invalid(_) => ResponseError::InvalidRequest,
        StorageError::Sequence(SeqError::StaleEpoch { .. }) => ResponseError::InvalidProducerEpoch,
        StorageError::Sequence(SeqError::OutOfOrder { .. }) => {
            ResponseError::OutOfOrderSequenceNumber
        }
        StorageError::Io(_)
        | StorageError::Fenced(_)
        | StorageError::Closed
        | StorageError::Metadata { .. } => ResponseError::KafkaStorageError,
    };
    e.code()
}

/// Maps a refused produced batch to its Kafka error: CORRUPT_MESSAGE for a
/// bad CRC or framing, MESSAGE_TOO_LARGE over `max.message.bytes`,
/// INVALID_RECORD for Kafka's producer rules, UNSUPPORTED_COMPRESSION_TYPE
/// for zstd before Produce v7. The codec names the class; this is where the
/// protocol layer takes it from.
pub fn batch_error_code(e: &BatchError) -> i16 {
    e.kafka_error_code()
}

impl GroupError {
    /// The Kafka error code of this refusal.
    pub fn code(&self) -> i16 {
        let e = match self {
            GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
            GroupError::NotCoordinator => ResponseError::NotCoordinator,
            GroupError::UnknownMemberId
            | GroupError::NotAMember { .. }
            | GroupError::UnknownInstanceId { .. } => ResponseError::UnknownMemberId,
            GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
            GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
            GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
            GroupError::FencedInstanceId | GroupError::NotTheStaticMember { .. } => {
                ResponseError::FencedInstanceId
            }
            GroupError::UnreleasedInstanceId { .. } => ResponseError::UnreleasedInstanceId,
            GroupError::MemberEpochAhead { .. }
            | GroupError::MemberEpochBehind { .. }
            | GroupError::ShareMemberEpochAhead { .. }
            | GroupError::ShareMemberEpochBehind { .. } => ResponseError::FencedMemberEpoch,
            GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
            GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
            GroupError::GroupMaxSizeReached
            | GroupError::ConsumerGroupFull { .. }
            | GroupError::ShareGroupFull { .. } => ResponseError::GroupMaxSizeReached,
            GroupError::GroupIdNotFound
            | GroupError::GroupNotFound { .. }
            | GroupError::NotAConsumerGroup { .. }
            | GroupError::NotAShareGroup { .. }
            | GroupError::ShareGroupNotFound { .. } => ResponseError::GroupIdNotFound,
            GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
            GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
            GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
            GroupError::StorageFailed => ResponseError::KafkaStorageError,
            GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
            GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
            GroupError::UnsupportedVersion => ResponseError::UnsupportedVersion,
            GroupError::InvalidRequest(_) => ResponseError::InvalidRequest,
            GroupError::InvalidRegularExpression { .. } => ResponseError::InvalidRegularExpression,
            GroupError::UnsupportedAssignor { .. } => ResponseError::UnsupportedAssignor,
            GroupError::UnstableOffsetCommit => ResponseError::UnstableOffsetCommit,
            GroupError::UnknownServerError => ResponseError::UnknownServerError,
            GroupError::GroupAuthorizationFailed => ResponseError::GroupAuthorizationFailed,
            GroupError::TopicAuthorizationFailed => ResponseError::TopicAuthorizationFailed,
        };
        e.code()
    }
}

impl ShareError {
    /// The Kafka error code of a share-partition's refusal:
    /// INVALID_RECORD_STATE (121), INVALID_REQUEST (42), or
    /// UNKNOWN_SERVER_ERROR for a caller's impossible input.
    pub fn code(&self) -> i16 {
        let e = match self {
            ShareError::InvalidRecordState(_) => ResponseError::InvalidRecordState,
            ShareError::InvalidRequest(_) => ResponseError::InvalidRequest,
            ShareError::Internal(_) => ResponseError::UnknownServerError,
        };
        e.code()
    }
}

impl ShareFailure {
    /// The Kafka error code of a failed call on a share-partition: the
    /// core's refusal's code, or the storage error's (KAFKA_STORAGE_ERROR for
    /// a fenced share-partition or files that could not be read).
    pub fn code(&self) -> i16 {
        match self {
            ShareFailure::Share(e) => e.code(),
            ShareFailure::Storage(e) => storage_error_code(e),
            ShareFailure::NotReplicated { leader: true, .. } => {
                code(ResponseError::NotLeaderOrFollower)
            }
            ShareFailure::NotReplicated { leader: false, .. } => {
                code(ResponseError::RequestTimedOut)
            }
        }
    }
}

impl SessionError {
    /// The Kafka error code of a refused share session step (§2.6):
    /// SHARE_SESSION_NOT_FOUND (122), INVALID_SHARE_SESSION_EPOCH (123),
    /// SHARE_SESSION_LIMIT_REACHED (133), or INVALID_REQUEST (42) for
    /// acknowledgements in an epoch-0 ShareFetch.
    pub fn code(&self) -> i16 {
        let e = match self {
            SessionError::NotFound => ResponseError::ShareSessionNotFound,
            SessionError::InvalidEpoch { .. } => ResponseError::InvalidShareSessionEpoch,
            SessionError::LimitReached => ResponseError::ShareSessionLimitReached,
            SessionError::AcknowledgementsInInitial => ResponseError::InvalidRequest,
        };
        e.code()
    }
}

/// The code of a per-member or per-partition outcome: NONE or the error's.
pub fn group_result_code(r: &Result<(), GroupError>) -> i16 {
    r.as_ref().err().map_or(NONE, GroupError::code)
}

/// The code of a response's error field: NONE or the error's.
pub fn group_code(e: &Option<GroupError>) -> i16 {
    e.as_ref().map_or(NONE, GroupError::code)
}

impl TxnError {
    /// The Kafka error code of this refusal, as the newest clients know it
    /// ([`TxnError::code_for`] gives an older client's).
    pub fn code(&self) -> i16 {
        let e = match self {
            TxnError::InvalidRequest => ResponseError::InvalidRequest,
            TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
            TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
            TxnError::ProducerFenced => ResponseError::ProducerFenced,
            TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
            TxnError::TransactionAbortable => ResponseError::TransactionAbortable,
            TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
            TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
            TxnError::ProducerIdsExhausted => ResponseError::UnknownServerError,
            TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
            TxnError::JournalFailed => ResponseError::NotCoordinator,
            TxnError::Group(g) => return g.code(),
        };
        e.code()
    }
}

/// The code of a per-partition transaction outcome: NONE or the error's.
pub fn txn_result_code(r: &Result<(), TxnError>) -> i16 {
    r.as_ref().err().map_or(NONE, TxnError::code)
}

/// The code a client of `api` at `version` understands for a transaction
/// coordinator's `error` (Kafka's per-version rewrites; any other code, and
/// any other API, is answered as is):
///
/// - InitProducerId before v4, and AddPartitionsToTxn, AddOffsetsToTxn and
///   EndTxn before v2, do not know PRODUCER_FENCED: they get
///   INVALID_PRODUCER_EPOCH, which they handle the same way;
/// - TxnOffsetCommit (Kafka's
///   `txnOffsetCommitRequestVersionToTransactionSupportedOperation`):
///   TRANSACTION_ABORTABLE only for v4, which knows it, INVALID_TXN_STATE
///   otherwise; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH; before v2,
///   COORDINATOR_LOAD_IN_PROGRESS is COORDINATOR_NOT_AVAILABLE, as those
///   clients may crash on it (KAFKA-7296);
/// - Produce, for a transactional batch's verification (Kafka's
///   `AddPartitionsToTxnManager` and `ReplicaManager.handleProduceAppend`):
///   a partition not in the transaction is TRANSACTION_ABORTABLE for v11
///   (clients that know it) and INVALID_TXN_STATE otherwise; PRODUCER_FENCED
///   is INVALID_PRODUCER_EPOCH; a transaction that is completing
///   (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) is
///   NOT_ENOUGH_REPLICAS, which every client retries without a metadata
///   refresh.
pub fn txn_error_for_version(api: ApiKey, version: i16, error: i16) -> i16 {
    match api {
        ApiKey::InitProducerId => fenced_before(version, 4, error),
        ApiKey::AddPartitionsToTxn | ApiKey::AddOffsetsToTxn | ApiKey::EndTxn => {
            fenced_before(version, 2, error)
        }
        ApiKey::TxnOffsetCommit => txn_offset_commit_error(version, error),
        ApiKey::Produce => produce_verify_error(version, error),
        _ => error,
    }
}

impl TxnError {
    /// The Kafka error code of this refusal as a client of `api` at
    /// `version` understands it (see [`txn_error_for_version`]).
    pub fn code_for(&self, api: ApiKey, version: i16) -> i16 {
        txn_error_for_version(api, version, self.code())
    }
}

/// PRODUCER_FENCED as INVALID_PRODUCER_EPOCH for clients before `since`.
fn fenced_before(version: i16, since: i16, error: i16) -> i16 {
    if version < since && error == code(ResponseError::ProducerFenced) {
        code(ResponseError::InvalidProducerEpoch)
    } else {
        error
    }
}

fn txn_offset_commit_error(version: i16, error: i16) -> i16 {
    let e = if error == code(ResponseError::TransactionAbortable) && version != 4 {
        code(ResponseError::InvalidTxnState)
    } else if error == code(ResponseError::ProducerFenced) {
        code(ResponseError::InvalidProducerEpoch)
    } else {
        error
    };
    if version < 2 && e == code(ResponseError::CoordinatorLoadInProgress) {
        code(ResponseError::CoordinatorNotAvailable)
    } else {
        e
    }
}

fn produce_verify_error(version: i16, error: i16) -> i16 {
    if error == code(ResponseError::TransactionAbortable) {
        if version == 11 {
            error
        } else {
            code(ResponseError::InvalidTxnState)
        }
    } else if error == code(ResponseError::ProducerFenced) {
        code(ResponseError::InvalidProducerEpoch)
    } else if error == code(ResponseError::ConcurrentTransactions)
        || error == code(ResponseError::NotCoordinator)
        || error == code(ResponseError::CoordinatorNotAvailable)
    {
        code(ResponseError::NotEnoughReplicas)
    } else {
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_map_to_kafka_codes() {
        assert_eq!(
            storage_error_code(&StorageError::OffsetOutOfRange {
                offset: 9,
                log_start: 0,
                log_end: 3
            }),
            1
        );
        assert_eq!(storage_error_code(&StorageError::RecordTooLarge(10)), 10);
        assert_eq!(storage_error_code(&StorageError::Fenced("t-0".into())), 56);
        assert_eq!(
            storage_error_code(&StorageError::Corrupt {
                file: "f".into(),
                position: 0,
                why: "x".into()
            }),
            2
        );
    }

    #[test]
    fn group_errors_map_to_kafka_codes() {
        let s = || String::from("x");
        let cases: Vec<(GroupError, i16)> = vec![
            (GroupError::CoordinatorNotAvailable, 15),
            (GroupError::NotCoordinator, 16),
            (GroupError::UnknownMemberId, 25),
            (
                GroupError::NotAMember {
                    member_id: s(),
                    group_id: s(),
                },
                25,
            ),
            (GroupError::UnknownInstanceId { instance_id: s() }, 25),
            (GroupError::MemberIdRequired, 79),
            (GroupError::IllegalGeneration, 22),
            (GroupError::RebalanceInProgress, 27),
            (GroupError::FencedInstanceId, 82),
            (
                GroupError::NotTheStaticMember {
                    member_id: s(),
                    instance_id: s(),
                    owner: s(),
                },
                82,
            ),
            (
                GroupError::UnreleasedInstanceId {
                    member_id: s(),
                    instance_id: s(),
                    owner: s(),
                },
                111,
            ),
            (GroupError::MemberEpochAhead { got: 2, known: 1 }, 110),
            (GroupError::MemberEpochBehind { got: 1, known: 2 }, 110),
            (GroupError::StaleMemberEpoch, 113),
            (GroupError::InconsistentGroupProtocol, 23),
            (GroupError::GroupMaxSizeReached, 81),
            (GroupError::ConsumerGroupFull { members_max: 3 }, 81),
            (GroupError::GroupIdNotFound, 69),
            (GroupError::GroupNotFound { group_id: s() }, 69),
            (GroupError::NotAConsumerGroup { group_id: s() }, 69),
            (GroupError::NotAShareGroup { group_id: s() }, 69),
            (GroupError::ShareGroupNotFound { group_id: s() }, 69),
            (GroupError::ShareGroupFull { members_max: 3 }, 81),
            (GroupError::ShareMemberEpochAhead { got: 2, known: 1 }, 110),
            (
                GroupError::ShareMemberEpochBehind {
                    got: 1,
                    known: 3,
                    previous: 2,
                },
                110,
            ),
            (GroupError::NonEmptyGroup, 68),
            (GroupError::InvalidSessionTimeout, 26),
            (GroupError::InvalidGroupId, 24),
            (GroupError::StorageFailed, 56),
            (GroupError::OffsetMetadataTooLarge, 12),
            (GroupError::GroupSubscribedToTopic, 86),
            (GroupError::UnsupportedVersion, 35),
            (GroupError::InvalidRequest(s()), 42),
            (
                GroupError::InvalidRegularExpression {
                    pattern: s(),
                    why: s(),
                },
                128,
            ),
            (
                GroupError::UnsupportedAssignor {
                    assignor: s(),
                    supported: s(),
                },
                112,
            ),
            (GroupError::UnstableOffsetCommit, 88),
            (GroupError::UnknownServerError, -1),
        ];
        for (e, want) in cases {
            assert_eq!(e.code(), want, "{e:?}");
        }
        assert_eq!(group_result_code(&Ok(())), NONE);
        assert_eq!(group_code(&None), NONE);
    }

    #[test]
    fn group_error_messages_are_the_ones_es_sends() {
        let e = GroupError::NotAMember {
            member_id: "m".into(),
            group_id: "g".into(),
        };
        assert_eq!(
            e.message().as_deref(),
            Some("Member m is not a member of group g.")
        );
        assert_eq!(GroupError::UnknownMemberId.message(), None);
        let e = GroupError::ConsumerGroupFull { members_max: 2 };
        assert_eq!(
            e.message().as_deref(),
            Some("The consumer group has reached its maximum capacity of 2 members.")
        );
    }

    #[test]
    fn txn_errors_map_to_kafka_codes() {
        let cases: Vec<(TxnError, i16)> = vec![
            (TxnError::InvalidRequest, 42),
            (TxnError::InvalidTransactionTimeout, 50),
            (TxnError::ConcurrentTransactions, 51),
            (TxnError::ProducerFenced, 90),
            (TxnError::InvalidProducerIdMapping, 49),
            (TxnError::TransactionAbortable, 120),
            (TxnError::InvalidTxnState, 48),
            (TxnError::TransactionalIdNotFound, 105),
            (TxnError::ProducerIdsExhausted, -1),
            (TxnError::CoordinatorNotAvailable, 15),
            (TxnError::JournalFailed, 16),
            (TxnError::Group(GroupError::IllegalGeneration), 22),
        ];
        for (e, want) in cases {
            assert_eq!(e.code(), want, "{e:?}");
        }
        assert_eq!(txn_result_code(&Ok(())), NONE);
    }

    #[test]
    fn produce_verify_errors_follow_kafka_by_version() {
        let abortable = code(ResponseError::TransactionAbortable);
        let invalid_state = code(ResponseError::InvalidTxnState);
        let p = |v, e| txn_error_for_version(ApiKey::Produce, v, e);
        assert_eq!(p(9, abortable), invalid_state);
        assert_eq!(p(10, abortable), invalid_state);
        assert_eq!(p(11, abortable), abortable);
        assert_eq!(p(12, abortable), invalid_state);
        assert_eq!(
            p(11, code(ResponseError::ProducerFenced)),
            code(ResponseError::InvalidProducerEpoch)
        );
        for e in [
            ResponseError::ConcurrentTransactions,
            ResponseError::NotCoordinator,
            ResponseError::CoordinatorNotAvailable,
        ] {
            assert_eq!(p(11, code(e)), code(ResponseError::NotEnoughReplicas));
        }
        let mapping = code(ResponseError::InvalidProducerIdMapping);
        assert_eq!(p(3, mapping), mapping);
    }

    #[test]
    fn old_txn_clients_get_invalid_producer_epoch() {
        let fenced = code(ResponseError::ProducerFenced);
        let epoch = code(ResponseError::InvalidProducerEpoch);
        assert_eq!(
            txn_error_for_version(ApiKey::InitProducerId, 3, fenced),
            epoch
        );
        assert_eq!(
            txn_error_for_version(ApiKey::InitProducerId, 4, fenced),
            fenced
        );
        for api in [
            ApiKey::AddPartitionsToTxn,
            ApiKey::AddOffsetsToTxn,
            ApiKey::EndTxn,
        ] {
            assert_eq!(txn_error_for_version(api, 1, fenced), epoch, "{api:?}");
            assert_eq!(txn_error_for_version(api, 2, fenced), fenced, "{api:?}");
            assert_eq!(txn_error_for_version(api, 1, NONE), NONE, "{api:?}");
        }
        assert_eq!(TxnError::ProducerFenced.code_for(ApiKey::EndTxn, 1), epoch);
        // Other APIs get the coordinator's code as is.
        assert_eq!(txn_error_for_version(ApiKey::Fetch, 0, fenced), fenced);
    }

    #[test]
    fn txn_offset_commit_errors_follow_kafka_by_version() {
        let t = |v, e| txn_error_for_version(ApiKey::TxnOffsetCommit, v, code(e));
        let abortable = ResponseError::TransactionAbortable;
        assert_eq!(t(4, abortable), code(abortable));
        assert_eq!(t(3, abortable), code(ResponseError::InvalidTxnState));
        assert_eq!(
            t(4, ResponseError::ProducerFenced),
            code(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            t(1, ResponseError::CoordinatorLoadInProgress),
            code(ResponseError::CoordinatorNotAvailable)
        );
        assert_eq!(
            t(2, ResponseError::CoordinatorLoadInProgress),
            code(ResponseError::CoordinatorLoadInProgress)
        );
    }
}

/// An admin operation's failure, as Kafka reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminError {
    pub code: i16,
    pub message: String,
}

impl AdminError {
    pub fn new(e: ResponseError, message: impl Into<String>) -> Self {
        AdminError {
            code: code(e),
            message: message.into(),
        }
    }
}

impl From<ConfigError> for AdminError {
    fn from(e: ConfigError) -> Self {
        AdminError::new(ResponseError::InvalidConfig, e.to_string())
    }
}

impl From<StorageError> for AdminError {
    fn from(e: StorageError) -> Self {
        AdminError::new(ResponseError::KafkaStorageError, e.to_string())
    }
}
