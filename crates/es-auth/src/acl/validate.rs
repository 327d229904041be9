//! What Kafka refuses, and with which error code and message, when ACLs are created
//! or deleted: the checks of the request parsers (`CreateAclsRequest.validate`,
//! `DescribeAclsRequest` / `DeleteAclsRequest.normalizeAndValidate`), of the binding
//! constructors (`ResourcePattern`, `AccessControlEntry`), of the request handler
//! (`AclApis.handleCreateAcls`) and of the controller
//! (`AclControlManager.validateNewAcl`, `validateFilter`), in the order Kafka 4.x
//! applies them. The messages are Kafka's, byte for byte.

use std::fmt;

use super::types::{
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
};

/// Kafka's error codes used by the ACL APIs.
pub mod error_code {
    /// No error.
    pub const NONE: i16 = 0;
    /// `UNKNOWN_SERVER_ERROR`: Kafka never sends a message with it.
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    /// `CLUSTER_AUTHORIZATION_FAILED`.
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    /// `INVALID_REQUEST`.
    pub const INVALID_REQUEST: i16 = 42;
    /// `POLICY_VIOLATION`.
    pub const POLICY_VIOLATION: i16 = 44;
    /// `SECURITY_DISABLED`.
    pub const SECURITY_DISABLED: i16 = 54;
}

/// The name of the one CLUSTER resource (Kafka's `Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name of a LITERAL binding for every resource of its type, and the
/// host of a binding for every host.
pub const WILDCARD: &str = "*";
/// The principal of a binding for every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// Most bindings one CreateAcls adds, or one DeleteAcls removes (Kafka's
/// `QuorumController.MAX_RECORDS_PER_USER_OP`: one atomic metadata batch).
pub const ACL_CHANGES_PER_REQUEST_MAX: usize = 10_000;
/// The message of [`error_code::POLICY_VIOLATION`] when a CreateAcls would add more
/// than [`ACL_CHANGES_PER_REQUEST_MAX`] bindings (Kafka's `EventHandlerExceptionInfo`).
pub const EXCESSIVELY_LARGE_BATCH: &str = "Unable to perform excessively large batch operation.";

/// An error as Kafka puts it in a CreateAcls result or DeleteAcls filter result.
/// `message` is `None` where Kafka sends null (always so for UNKNOWN_SERVER_ERROR).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct AclError {
    pub error_code: i16,
    pub message: Option<String>,
}

impl AclError {
    /// INVALID_REQUEST with `message`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        AclError {
            error_code: error_code::INVALID_REQUEST,
            message: Some(message.into()),
        }
    }

    /// UNKNOWN_SERVER_ERROR, null message.
    pub fn unknown_server_error() -> Self {
        AclError {
            error_code: error_code::UNKNOWN_SERVER_ERROR,
            message: None,
        }
    }

    /// POLICY_VIOLATION [`EXCESSIVELY_LARGE_BATCH`].
    pub fn excessively_large_batch() -> Self {
        AclError {
            error_code: error_code::POLICY_VIOLATION,
            message: Some(EXCESSIVELY_LARGE_BATCH.to_string()),
        }
    }

    /// The pair as it goes on the wire.
    pub fn pair(&self) -> (i16, Option<&str>) {
        (self.error_code, self.message.as_deref())
    }
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => write!(f, "error {}: {m}", self.error_code),
            None => write!(f, "error {}", self.error_code),
        }
    }
}

/// The checks of Kafka's CreateAcls handler (`AclApis.handleCreateAcls`), made on the
/// node that receives the request before the controller sees the binding. A binding
/// refused here keeps this error even when the controller fails the whole request.
pub(crate) fn validate_create_in_handler(b: &AclBinding) -> Result<(), AclError> {
    if b.resource_type == ResourceType::Cluster && b.resource_name != CLUSTER_NAME {
        return Err(AclError::invalid_request(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )));
    }
    if b.resource_name.is_empty() {
        return Err(AclError::invalid_request("Invalid empty resource name"));
    }
    Ok(())
}

/// Kafka's `AclControlManager.validateNewAcl` (with KAFKA-18051's principal check).
/// Its "Resource name should not be empty" cannot be reached after the handler's
/// check and is kept for fidelity.
pub(crate) fn validate_new_acl(b: &AclBinding) -> Result<(), AclError> {
    if matches!(b.resource_type, ResourceType::Unknown | ResourceType::Any) {
        return Err(AclError::invalid_request(format!(
            "Invalid resourceType {}",
            b.resource_type
        )));
    }
    if !matches!(b.pattern_type, PatternType::Literal | PatternType::Prefixed) {
        return Err(AclError::invalid_request(format!(
            "Invalid patternType {}",
            b.pattern_type
        )));
    }
    if matches!(b.operation, AclOperation::Unknown | AclOperation::Any) {
        return Err(AclError::invalid_request(format!(
            "Invalid operation {}",
            b.operation
        )));
    }
    if !matches!(
        b.permission_type,
        AclPermissionType::Deny | AclPermissionType::Allow
    ) {
        return Err(AclError::invalid_request(format!(
            "Invalid permissionType {}",
            b.permission_type
        )));
    }
    if b.resource_name.is_empty() {
        return Err(AclError::invalid_request(
            "Resource name should not be empty",
        ));
    }
    if !b.principal.contains(':') {
        return Err(AclError::invalid_request(format!(
            "Could not parse principal from `{}` (no colon is present separating the \
             principal type from the principal name)",
            b.principal
        )));
    }
    Ok(())
}

/// Whether Kafka would store `binding` when a CreateAcls asks for it: the handler's
/// checks, then the controller's, first failure wins. Kafka checks nothing else: any
/// operation is accepted on any resource type, any host string is accepted.
pub fn validate_create(binding: &AclBinding) -> Result<(), AclError> {
    validate_create_in_handler(binding)?;
    validate_new_acl(binding)
}

/// Kafka's `AclControlManager.validateFilter`, applied to each DeleteAcls filter
/// (DescribeAcls has no such check: an unknown filter simply matches nothing).
pub fn validate_delete_filter(filter: &AclBindingFilter) -> Result<(), AclError> {
    if filter.pattern_is_unknown() {
        return Err(AclError::invalid_request("Unknown patternFilter."));
    }
    if filter.entry_is_unknown() {
        return Err(AclError::invalid_request("Unknown entryFilter."));
    }
    Ok(())
}

/// One `CreateAclsRequest.AclCreation` with its codes as they arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclCreation {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

impl AclCreation {
    /// Kafka's `CreateAclsRequest.validate`, run while parsing: `Some(reason)` means
    /// Kafka fails to parse the request and closes the connection (the reason is only
    /// logged). Version 0 takes only LITERAL; a raw code 0 (UNKNOWN) in any of the
    /// four enums is refused; other undefined codes pass and become UNKNOWN.
    pub fn parse_error(version: i16, creations: &[AclCreation]) -> Option<&'static str> {
        if version == 0
            && creations
                .iter()
                .any(|c| c.pattern_type != PatternType::Literal.code())
        {
            return Some("Version 0 only supports literal resource pattern types");
        }
        let unknown = |c: &AclCreation| {
            [
                c.pattern_type,
                c.resource_type,
                c.permission_type,
                c.operation,
            ]
            .contains(&0)
        };
        if creations.iter().any(unknown) {
            return Some("CreatableAcls contain unknown elements");
        }
        None
    }

    /// Kafka's `CreateAclsRequest.aclBinding`: undefined codes become UNKNOWN, and
    /// `None` where Kafka's constructors throw (resource type ANY, pattern type ANY or
    /// MATCH, operation ANY, permission ANY). One `None` fails the whole request:
    /// every result is UNKNOWN_SERVER_ERROR with a null message
    /// ([`AclError::unknown_server_error`]).
    pub fn to_binding(&self) -> Option<AclBinding> {
        let resource_type = ResourceType::from_code_or_unknown(self.resource_type);
        let pattern_type = PatternType::from_code_or_unknown(self.pattern_type);
        let operation = AclOperation::from_code_or_unknown(self.operation);
        let permission_type = AclPermissionType::from_code_or_unknown(self.permission_type);
        if resource_type == ResourceType::Any
            || matches!(pattern_type, PatternType::Any | PatternType::Match)
            || operation == AclOperation::Any
            || permission_type == AclPermissionType::Any
        {
            return None;
        }
        Some(AclBinding {
            resource_type,
            resource_name: self.resource_name.clone(),
            pattern_type,
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation,
            permission_type,
        })
    }
}

/// Which request a filter came in, for [`AclFilterCodes::to_filter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterApi {
    DescribeAcls,
    DeleteAcls,
}

/// One DescribeAcls filter or `DeleteAclsRequest.DeleteAclsFilter` with its codes as
/// they arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilterCodes {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission_type: i8,
}

impl AclFilterCodes {
    /// Kafka's `normalizeAndValidate` (run while parsing) and then its filter
    /// construction. `Err(reason)`: Kafka closes the connection. At version 0 a
    /// pattern type ANY becomes LITERAL (v0 knew only literal names) and anything
    /// but ANY or LITERAL is refused; a raw code 0 in any enum is refused; other
    /// undefined codes become UNKNOWN (such a filter matches nothing, and DeleteAcls
    /// answers it with [`validate_delete_filter`]'s error).
    pub fn to_filter(&self, version: i16, api: FilterApi) -> Result<AclBindingFilter, String> {
        let mut pattern_code = self.pattern_type;
        if version == 0 {
            match PatternType::from_code_or_unknown(pattern_code) {
                PatternType::Any => pattern_code = PatternType::Literal.code(),
                PatternType::Literal => {}
                other => {
                    return Err(match api {
                        FilterApi::DescribeAcls => {
                            "Version 0 only supports literal resource pattern types".to_string()
                        }
                        FilterApi::DeleteAcls => format!(
                            "Version 0 does not support pattern type {other} (only LITERAL and \
                             ANY are supported)"
                        ),
                    });
                }
            }
        }
        if [
            pattern_code,
            self.resource_type,
            self.operation,
            self.permission_type,
        ]
        .contains(&0)
        {
            return Err(match api {
                FilterApi::DescribeAcls => "DescribeAclsRequest contains UNKNOWN elements",
                FilterApi::DeleteAcls => "Filters contain UNKNOWN elements",
            }
            .to_string());
        }
        Ok(AclBindingFilter {
            resource_type: ResourceType::from_code_or_unknown(self.resource_type),
            resource_name: self.resource_name.clone(),
            pattern_type: PatternType::from_code_or_unknown(pattern_code),
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: AclOperation::from_code_or_unknown(self.operation),
            permission_type: AclPermissionType::from_code_or_unknown(self.permission_type),
        })
    }
}
