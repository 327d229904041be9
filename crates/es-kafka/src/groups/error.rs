//! The conditions under which the group coordinator refuses a request.
//!
//! The cores ([`super::classic`], [`super::consumer`], [`super::share`]) and the shell
//! ([`super::coordinator`]) answer with a [`GroupError`]; each variant names
//! a Kafka condition and carries the text es sends with it, where it sends
//! any (KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe answer
//! with a message; the classic APIs have no message field). Which Kafka
//! error code a variant is lives in `crate::errors`, the one place errors
//! become codes.

/// Why the group coordinator refused a request, or one member or partition
/// of it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// The coordinator is shutting down or the group is being deleted.
    #[error("the group coordinator is not available")]
    CoordinatorNotAvailable,
    /// The group's file could not be written (the group is fenced until
    /// restart), or the coordinator went away.
    #[error("this broker no longer coordinates the group")]
    NotCoordinator,
    /// A classic member id (or static instance) the group does not know.
    #[error("unknown member id")]
    UnknownMemberId,
    /// A KIP-848 heartbeat from a member the group does not know.
    #[error("Member {member_id} is not a member of group {group_id}.")]
    NotAMember { member_id: String, group_id: String },
    /// A KIP-848 heartbeat naming a static instance id the group does not
    /// know.
    #[error("Instance id {instance_id} is unknown.")]
    UnknownInstanceId { instance_id: String },
    /// The JoinGroup member id handshake (KIP-394): rejoin with the id given.
    #[error("a member id is required")]
    MemberIdRequired,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    /// A classic static instance id held by another member id.
    #[error("fenced instance id")]
    FencedInstanceId,
    /// A KIP-848 static member whose instance id belongs to another member.
    #[error("Static member {member_id} with instance id {instance_id} is not the member {owner}.")]
    NotTheStaticMember {
        member_id: String,
        instance_id: String,
        owner: String,
    },
    /// A KIP-848 static member joining while the instance id's current owner
    /// has not left.
    #[error("Static member {member_id} with instance id {instance_id} cannot join the group because the instance id is owned by {owner} member.")]
    UnreleasedInstanceId {
        member_id: String,
        instance_id: String,
        owner: String,
    },
    /// The member's epoch is ahead of the group's view of it.
    #[error("The consumer group member has a greater member epoch ({got}) than the one known by the group coordinator ({known}). The member must abandon all its partitions and rejoin.")]
    MemberEpochAhead { got: i32, known: i32 },
    /// The member's epoch is behind, and not a retry of the previous one.
    #[error("The consumer group member has a smaller member epoch ({got}) than the one known by the group coordinator ({known}). The member must abandon all its partitions and rejoin.")]
    MemberEpochBehind { got: i32, known: i32 },
    /// An offset commit or fetch with another epoch than the member's.
    #[error("stale member epoch")]
    StaleMemberEpoch,
    /// The request's protocol type or name is not the group's, or the group
    /// uses the other group protocol.
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    /// A classic group at `group.max.size`.
    #[error("the group is full")]
    GroupMaxSizeReached,
    /// A KIP-848 group at `group.consumer.max.size`.
    #[error("The consumer group has reached its maximum capacity of {members_max} members.")]
    ConsumerGroupFull { members_max: usize },
    /// The group does not exist (admin APIs, OffsetCommit v9+).
    #[error("group id not found")]
    GroupIdNotFound,
    /// ConsumerGroupDescribe of a group that does not exist.
    #[error("Group {group_id} not found.")]
    GroupNotFound { group_id: String },
    /// A KIP-848 request for a classic group that is not empty.
    #[error("Group {group_id} is not a consumer group.")]
    NotAConsumerGroup { group_id: String },
    /// A share group request (ShareGroupHeartbeat, ShareGroupDescribe) for
    /// a group of another type.
    #[error("Group {group_id} is not a share group.")]
    NotAShareGroup { group_id: String },
    /// A ShareGroupHeartbeat with epoch > 0 for a group that does not
    /// exist.
    #[error("Share group {group_id} not found.")]
    ShareGroupNotFound { group_id: String },
    /// A share group at `group.share.max.size`.
    #[error("The share group has reached its maximum capacity of {members_max} members.")]
    ShareGroupFull { members_max: usize },
    /// A share group member's epoch is ahead of the group's view of it.
    #[error("The share group member has a greater member epoch ({got}) than the one known by the group coordinator ({known}). The member must abandon all its partitions and rejoin.")]
    ShareMemberEpochAhead { got: i32, known: i32 },
    /// A share group member's epoch is behind and not its previous one.
    #[error("The share group member has a smaller member epoch ({got}) than the one known by the group coordinator ({known}), and it does not match the previous member epoch ({previous}). The member must abandon all its partitions and rejoin.")]
    ShareMemberEpochBehind { got: i32, known: i32, previous: i32 },
    #[error("the group is not empty")]
    NonEmptyGroup,
    /// A session timeout outside `group.min.session.timeout.ms` ..
    /// `group.max.session.timeout.ms`.
    #[error("invalid session timeout")]
    InvalidSessionTimeout,
    /// An empty group id, or one that maps to another group's file name.
    #[error("invalid group id")]
    InvalidGroupId,
    /// The group's file could not be removed.
    #[error("the group's file could not be removed")]
    StorageFailed,
    /// An offset's metadata over `offset.metadata.max.bytes`.
    #[error("offset metadata too large")]
    OffsetMetadataTooLarge,
    /// OffsetDelete of a topic the group is subscribed to.
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    /// A non-transactional OffsetCommit below v9 into a KIP-848 group.
    #[error("unsupported version")]
    UnsupportedVersion,
    /// A ConsumerGroupHeartbeat field Kafka's request validation refuses.
    #[error("{0}")]
    InvalidRequest(String),
    #[error("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {why}.")]
    InvalidRegularExpression { pattern: String, why: String },
    #[error("ServerAssignor {assignor} is not supported. Supported assignors: {supported}.")]
    UnsupportedAssignor { assignor: String, supported: String },
    /// OffsetFetch with `require_stable` of a partition with a pending
    /// transactional offset.
    #[error("unstable offset commit")]
    UnstableOffsetCommit,
    /// The client may not use the group (the request layer's authorizer).
    #[error("Group authorization failed.")]
    GroupAuthorizationFailed,
    /// The client may not read or describe the topic (the request layer's
    /// authorizer).
    #[error("Topic authorization failed.")]
    TopicAuthorizationFailed,
    /// A state the coordinator's own bookkeeping should never reach.
    #[error("unknown server error")]
    UnknownServerError,
}

impl GroupError {
    /// The error message es sends with this error (KIP-848 responses), or
    /// None where it sends none.
    pub fn message(&self) -> Option<String> {
        match self {
            GroupError::NotAMember { .. }
            | GroupError::UnknownInstanceId { .. }
            | GroupError::NotTheStaticMember { .. }
            | GroupError::UnreleasedInstanceId { .. }
            | GroupError::MemberEpochAhead { .. }
            | GroupError::MemberEpochBehind { .. }
            | GroupError::ConsumerGroupFull { .. }
            | GroupError::GroupNotFound { .. }
            | GroupError::NotAConsumerGroup { .. }
            | GroupError::NotAShareGroup { .. }
            | GroupError::ShareGroupNotFound { .. }
            | GroupError::ShareGroupFull { .. }
            | GroupError::ShareMemberEpochAhead { .. }
            | GroupError::ShareMemberEpochBehind { .. }
            | GroupError::InvalidRequest(_)
            | GroupError::InvalidRegularExpression { .. }
            | GroupError::UnsupportedAssignor { .. } => Some(self.to_string()),
            GroupError::GroupAuthorizationFailed
            | GroupError::TopicAuthorizationFailed
            | GroupError::CoordinatorNotAvailable
            | GroupError::NotCoordinator
            | GroupError::UnknownMemberId
            | GroupError::MemberIdRequired
            | GroupError::IllegalGeneration
            | GroupError::RebalanceInProgress
            | GroupError::FencedInstanceId
            | GroupError::StaleMemberEpoch
            | GroupError::InconsistentGroupProtocol
            | GroupError::GroupMaxSizeReached
            | GroupError::GroupIdNotFound
            | GroupError::NonEmptyGroup
            | GroupError::InvalidGroupId
            | GroupError::InvalidSessionTimeout
            | GroupError::StorageFailed
            | GroupError::OffsetMetadataTooLarge
            | GroupError::GroupSubscribedToTopic
            | GroupError::UnsupportedVersion
            | GroupError::UnstableOffsetCommit
            | GroupError::UnknownServerError => None,
        }
    }
}
