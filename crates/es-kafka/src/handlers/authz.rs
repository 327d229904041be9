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

use super::Ctx;

impl Ctx {
    /// Whether the principal may perform `op` on resource `name` of type
    /// `rt`.
    pub fn allowed(&self, op: AclOperation, rt: ResourceType, name: &str) -> bool {
        let Some(authorizer) = self.broker.security().authorizer() else {
            return true;
        };
        if self.internal {
            return true;
        }
        let host = self.peer.map(java_host_address).unwrap_or_default();
        let principal = self.principal.to_string();
        let d = authorizer.authorize(&principal, &host, op, rt, name);
        tracing::debug!(
            principal = %principal,
            host = %host,
            operation = %op,
            resource = %format!("{rt}:{name}"),
            allowed = d.allowed,
            rule = %d,
            api = ?self.key,
            "authorization"
        );
        d.allowed
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
