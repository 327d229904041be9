//! Authorization of requests, in one place: what a handler asks before it
//! acts on a resource, answered by the broker's authorizer (es-auth's,
//! with Kafka's StandardAuthorizer semantics) for the request's principal
//! and client address. Without an authorizer every request is allowed, as
//! in Kafka without `authorizer.class.name`; requests made inside the
//! broker (no connection) are always allowed.
//!
//! Every decision is logged at debug level with its reason, as Kafka's
//! authorizer logger does.

use es_auth::acl::{java_host_address, AclOperation, ResourceType, CLUSTER_NAME};
use es_auth::principal::Principal;

use super::Ctx;
use crate::broker::Broker;

/// Kafka's message of CLUSTER_AUTHORIZATION_FAILED.
pub const CLUSTER_AUTHORIZATION_FAILED: &str = "Cluster authorization failed.";
/// Kafka's message of TOPIC_AUTHORIZATION_FAILED.
pub const TOPIC_AUTHORIZATION_FAILED: &str = "Topic authorization failed.";
/// Kafka's message of GROUP_AUTHORIZATION_FAILED.
pub const GROUP_AUTHORIZATION_FAILED: &str = "Group authorization failed.";

/// Who asks, for [`allowed`].
pub struct Who<'a> {
    pub principal: &'a Principal,
    pub peer: Option<std::net::IpAddr>,
    /// Made inside the broker or by a test: never refused.
    pub internal: bool,
}

/// Whether `who` may perform `op` on resource `name` of type `rt` (always,
/// without an authorizer); `api` names the request in the log line.
pub fn allowed(
    broker: &Broker,
    who: &Who<'_>,
    op: AclOperation,
    rt: ResourceType,
    name: &str,
    api: &dyn std::fmt::Debug,
) -> bool {
    let Some(authorizer) = broker.security().authorizer() else {
        return true;
    };
    if who.internal {
        return true;
    }
    let host = who.peer.map(java_host_address).unwrap_or_default();
    let principal = who.principal.to_string();
    let d = authorizer.authorize(&principal, &host, op, rt, name);
    tracing::debug!(
        principal = %principal,
        host = %host,
        operation = %op,
        resource = %format!("{rt}:{name}"),
        allowed = d.allowed,
        rule = %d,
        api = ?api,
        "authorization"
    );
    d.allowed
}

impl Ctx {
    /// Whether the principal may perform `op` on resource `name` of type
    /// `rt`.
    pub fn allowed(&self, op: AclOperation, rt: ResourceType, name: &str) -> bool {
        let who = Who {
            principal: &self.principal,
            peer: self.peer,
            internal: self.internal,
        };
        allowed(&self.broker, &who, op, rt, name, &self.key)
    }

    /// The topics among `names` the principal may not perform `op` on.
    pub fn denied_topics<'a>(
        &self,
        op: AclOperation,
        names: impl IntoIterator<Item = &'a str>,
    ) -> std::collections::HashSet<String> {
        names
            .into_iter()
            .filter(|n| !self.allowed(op, ResourceType::Topic, n))
            .map(str::to_string)
            .collect()
    }

    /// Whether the principal may perform `op` on the cluster.
    pub fn allowed_on_cluster(&self, op: AclOperation) -> bool {
        self.allowed(op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Kafka's `authorizeByResourceType`: whether some resource of type
    /// `rt` allows `op` to the principal.
    pub fn allowed_on_some(&self, op: AclOperation, rt: ResourceType) -> bool {
        let Some(authorizer) = self.broker.security().authorizer() else {
            return true;
        };
        if self.internal {
            return true;
        }
        let host = self.peer.map(java_host_address).unwrap_or_default();
        authorizer.authorize_by_resource_type(&self.principal.to_string(), &host, op, rt)
    }
}

impl Ctx {
    /// Kafka's authorized-operations bit set for a resource: of the
    /// operations in `all` (a bit per operation code), those the principal
    /// may perform on it.
    pub fn authorized_operations(&self, all: i32, rt: ResourceType, name: &str) -> i32 {
        if self.broker.security().authorizer().is_none() || self.internal {
            return all;
        }
        (0..31)
            .filter(|bit| all & (1 << bit) != 0)
            .filter_map(|bit| {
                i8::try_from(bit)
                    .ok()
                    .and_then(AclOperation::from_code)
                    .map(|op| (bit, op))
            })
            .filter(|(_, op)| self.allowed_quietly(*op, rt, name))
            .fold(0, |acc, (bit, _)| acc | (1 << bit))
    }

    /// [`Ctx::allowed`] without the log line (Kafka logs no denial while
    /// listing authorized operations).
    fn allowed_quietly(&self, op: AclOperation, rt: ResourceType, name: &str) -> bool {
        let Some(authorizer) = self.broker.security().authorizer() else {
            return true;
        };
        let host = self.peer.map(java_host_address).unwrap_or_default();
        authorizer
            .authorize(&self.principal.to_string(), &host, op, rt, name)
            .allowed
    }
}
