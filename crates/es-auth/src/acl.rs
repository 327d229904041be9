//! ACLs and the authorizer, with Apache Kafka's semantics (Kafka 4.x KRaft:
//! `StandardAuthorizer`, `AclControlManager`, `AclApis`): this module owns what an
//! ACL binding is, which bindings may be stored and with which errors Kafka refuses
//! the others, how DescribeAcls / DeleteAcls filters match, and whether a principal
//! may perform an operation on a resource.
//!
//! - [`types`]: the enums with Kafka's wire codes and names, [`AclBinding`],
//!   [`AclBindingFilter`] and its matching (including pattern type MATCH);
//! - [`validate`]: the checks and exact messages of Kafka's request parsers, handler
//!   and controller, and Kafka's error codes;
//! - [`store`]: [`Acls`], the ordered, deduplicated, serialisable set that the
//!   metadata log stores, with CreateAcls / DeleteAcls planning (per-request limit
//!   of [`ACL_CHANGES_PER_REQUEST_MAX`] changes, as Kafka's controller);
//! - [`authorizer`]: [`Authorizer`] (super users, DENY over ALLOW, wildcards,
//!   prefixes, implied DESCRIBE / DESCRIBE_CONFIGS, `allow.everyone.if.no.acl.found`,
//!   `authorizeByResourceType`) over an index that answers in well under a
//!   microsecond with 10,000 bindings.
//!
//! Everything here is pure (no I/O, no clock) and total: bindings and filters arrive
//! from the network, so no input panics; what Kafka would answer with an exception is
//! an error value or a documented answer.

pub mod authorizer;
pub mod store;
pub mod types;
pub mod validate;

pub use authorizer::{
    java_host_address, parse_super_users, Authorizer, AuthorizerConfig, Decision, Rule,
    SuperUsersError, BY_RESOURCE_TYPE_PROBE_NAME,
};
pub use store::{Acls, CreatePlan, DeletePlan};
pub use types::{
    java_cmp, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
    ResourceType,
};
pub use validate::{
    error_code, validate_create, validate_delete_filter, AclCreation, AclError, AclFilterCodes,
    FilterApi, ACL_CHANGES_PER_REQUEST_MAX, CLUSTER_NAME, EXCESSIVELY_LARGE_BATCH, WILDCARD,
    WILDCARD_PRINCIPAL,
};

#[cfg(test)]
mod tests;
