//! Kafka's ACL vocabulary: the four enums with their wire codes and names, the
//! [`AclBinding`] that is stored and the [`AclBindingFilter`] that DescribeAcls and
//! DeleteAcls carry, with Kafka's matching rules (`ResourcePatternFilter.matches`,
//! `AccessControlEntryFilter.matches`, `findIndefiniteField`).
//!
//! Strings are compared as Java compares them where order is visible: bindings sort
//! like Kafka's `StandardAcl` (resource type, then resource name *descending*, then
//! pattern type, operation, principal, host, permission type), and Java orders
//! strings by UTF-16 code unit, which differs from Rust's byte order only between
//! U+E000..U+FFFF and characters above U+FFFF ([`java_cmp`]).

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Defines a Kafka enum: `#[repr(i8)]` with the wire codes, serde as Kafka's names.
macro_rules! kafka_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $code:literal => $kname:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[repr(i8)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $kname)] $variant = $code,)*
        }

        impl $name {
            /// Every value, in code order.
            pub const VALUES: &'static [$name] = &[$($name::$variant),*];

            /// The value with this wire code, `None` for a code Kafka does not define.
            pub fn from_code(code: i8) -> Option<Self> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// Kafka's `fromCode`: an undefined code becomes `Unknown`.
            pub fn from_code_or_unknown(code: i8) -> Self {
                Self::from_code(code).unwrap_or($name::Unknown)
            }

            /// The wire code.
            pub fn code(self) -> i8 {
                self as i8
            }

            /// Kafka's enum constant name (`TOPIC`, `LITERAL`, `READ`, `ALLOW`), which
            /// is also the serde form.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $kname,)*
                }
            }

            /// The value whose [`name`](Self::name) is exactly `name`.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($kname => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum! {
    /// Kafka's `ResourceType`.
    ResourceType {
        /// A code this broker does not know; never stored.
        Unknown = 0 => "UNKNOWN",
        /// In a filter, any resource type; never stored.
        Any = 1 => "ANY",
        Topic = 2 => "TOPIC",
        Group = 3 => "GROUP",
        /// The one cluster resource, named [`CLUSTER_NAME`](super::CLUSTER_NAME).
        Cluster = 4 => "CLUSTER",
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        DelegationToken = 6 => "DELEGATION_TOKEN",
        User = 7 => "USER",
    }
}

kafka_enum! {
    /// Kafka's `PatternType`: how a binding's resource name is matched.
    PatternType {
        /// A code this broker does not know; never stored.
        Unknown = 0 => "UNKNOWN",
        /// In a filter, any pattern type, names compared exactly.
        Any = 1 => "ANY",
        /// In a filter, every binding that would apply to the named resource:
        /// LITERAL with that name, LITERAL `*`, and PREFIXED whose prefix the name
        /// starts with.
        Match = 2 => "MATCH",
        /// The name is a resource name, or `*` for every resource of the type.
        Literal = 3 => "LITERAL",
        /// The name is a prefix of resource names.
        Prefixed = 4 => "PREFIXED",
    }
}

kafka_enum! {
    /// Kafka's `AclOperation` (4.1 added `TWO_PHASE_COMMIT`, KIP-939).
    AclOperation {
        /// A code this broker does not know; never stored.
        Unknown = 0 => "UNKNOWN",
        /// In a filter, any operation; never stored.
        Any = 1 => "ANY",
        /// Every operation (for ALLOW and DENY alike).
        All = 2 => "ALL",
        Read = 3 => "READ",
        Write = 4 => "WRITE",
        Create = 5 => "CREATE",
        Delete = 6 => "DELETE",
        Alter = 7 => "ALTER",
        Describe = 8 => "DESCRIBE",
        ClusterAction = 9 => "CLUSTER_ACTION",
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        AlterConfigs = 11 => "ALTER_CONFIGS",
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        CreateTokens = 13 => "CREATE_TOKENS",
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
        TwoPhaseCommit = 15 => "TWO_PHASE_COMMIT",
    }
}

kafka_enum! {
    /// Kafka's `AclPermissionType`.
    AclPermissionType {
        /// A code this broker does not know; never stored.
        Unknown = 0 => "UNKNOWN",
        /// In a filter, either permission; never stored.
        Any = 1 => "ANY",
        Deny = 2 => "DENY",
        Allow = 3 => "ALLOW",
    }
}

impl ResourceType {
    /// Kafka's `SecurityUtils.resourceTypeName` (`Topic`, `TransactionalId`), the
    /// form in Kafka's audit log lines and `kafka-acls.sh` output.
    pub fn pascal_name(self) -> &'static str {
        match self {
            ResourceType::Unknown => "Unknown",
            ResourceType::Any => "Any",
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
            ResourceType::Cluster => "Cluster",
            ResourceType::TransactionalId => "TransactionalId",
            ResourceType::DelegationToken => "DelegationToken",
            ResourceType::User => "User",
        }
    }
}

/// Orders strings as Java's `String.compareTo` does: by UTF-16 code unit.
///
/// Byte order of UTF-8 is code point order, which agrees with UTF-16 order except
/// that a character above U+FFFF (a surrogate pair, D800..DFFF) sorts *before*
/// U+E000..U+FFFF in Java. At the first differing byte both strings are at the same
/// position of a character (the bytes before are equal), so looking at that byte's
/// class is enough: 0xEE and 0xEF lead U+E000..U+FFFF, 0xF0..0xF4 lead supplementary
/// characters.
pub fn java_cmp(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    match x.iter().zip(y).position(|(p, q)| p != q) {
        None => x.len().cmp(&y.len()),
        Some(i) => {
            let (p, q) = (x[i], y[i]);
            let high_bmp = |c: u8| c == 0xEE || c == 0xEF;
            if high_bmp(p) && q >= 0xF0 {
                Ordering::Greater
            } else if p >= 0xF0 && high_bmp(q) {
                Ordering::Less
            } else {
                p.cmp(&q)
            }
        }
    }
}

/// One ACL: Kafka's `AclBinding` (a `ResourcePattern` and an `AccessControlEntry`)
/// flattened. `principal` is `Type:name` text as on the wire (`User:alice`,
/// `User:*`); `host` is an IP address as Java prints it, or `*`.
///
/// Any value can be built; [`validate_create`](super::validate_create) says whether
/// it may be stored, and [`Acls`](super::Acls) stores only those.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AclBinding {
    /// A binding from its seven fields.
    pub fn new(
        resource_type: ResourceType,
        resource_name: impl Into<String>,
        pattern_type: PatternType,
        principal: impl Into<String>,
        host: impl Into<String>,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> Self {
        AclBinding {
            resource_type,
            resource_name: resource_name.into(),
            pattern_type,
            principal: principal.into(),
            host: host.into(),
            operation,
            permission_type,
        }
    }

    /// Kafka's `AclBinding.toFilter`: a filter matching exactly this binding.
    pub fn to_filter(&self) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: self.resource_type,
            resource_name: Some(self.resource_name.clone()),
            pattern_type: self.pattern_type,
            principal: Some(self.principal.clone()),
            host: Some(self.host.clone()),
            operation: self.operation,
            permission_type: self.permission_type,
        }
    }

    /// Kafka's `StandardAcl.toString`, as its authorizer logs a matching ACL.
    pub fn standard_acl_string(&self) -> String {
        format!(
            "StandardAcl(resourceType={}, resourceName={}, patternType={}, principal={}, \
             host={}, operation={}, permissionType={})",
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type
        )
    }
}

/// Kafka's `StandardAcl.compareTo`: resource type, resource name in *reverse*, pattern
/// type, operation, principal, host, permission type; strings in Java's order. It is
/// a total order consistent with `Eq` (every field takes part).
impl Ord for AclBinding {
    fn cmp(&self, other: &Self) -> Ordering {
        self.resource_type
            .cmp(&other.resource_type)
            .then_with(|| java_cmp(&other.resource_name, &self.resource_name))
            .then_with(|| self.pattern_type.cmp(&other.pattern_type))
            .then_with(|| self.operation.cmp(&other.operation))
            .then_with(|| java_cmp(&self.principal, &other.principal))
            .then_with(|| java_cmp(&self.host, &other.host))
            .then_with(|| self.permission_type.cmp(&other.permission_type))
    }
}

impl PartialOrd for AclBinding {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Kafka's `AclBinding.toString`.
impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(pattern=ResourcePattern(resourceType={}, name={}, patternType={}), \
             entry=(principal={}, host={}, operation={}, permissionType={}))",
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type
        )
    }
}

/// Kafka's `AclBindingFilter` (a `ResourcePatternFilter` and an
/// `AccessControlEntryFilter`) flattened: `None` strings and the `Any` enum values
/// match everything; `PatternType::Match` matches the bindings that apply to the
/// named resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AclBindingFilter {
    /// Kafka's `AclBindingFilter.ANY`: matches every binding.
    pub const ANY: AclBindingFilter = AclBindingFilter {
        resource_type: ResourceType::Any,
        resource_name: None,
        pattern_type: PatternType::Any,
        principal: None,
        host: None,
        operation: AclOperation::Any,
        permission_type: AclPermissionType::Any,
    };

    /// Kafka's `AclBindingFilter.matches`: `ResourcePatternFilter.matches` and
    /// `AccessControlEntryFilter.matches`.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.pattern_matches(binding) && self.entry_matches(binding)
    }

    /// Kafka's `ResourcePatternFilter.matches`.
    fn pattern_matches(&self, b: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != b.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != b.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == b.pattern_type {
            return *name == b.resource_name;
        }
        // Only MATCH reaches here.
        match b.pattern_type {
            PatternType::Literal => *name == b.resource_name || b.resource_name == super::WILDCARD,
            PatternType::Prefixed => name.starts_with(b.resource_name.as_str()),
            // Kafka throws IllegalArgumentException("Unsupported PatternType: ..."); a
            // stored binding is never of another pattern type.
            _ => false,
        }
    }

    /// Kafka's `AccessControlEntryFilter.matches`.
    fn entry_matches(&self, b: &AclBinding) -> bool {
        if self.principal.as_ref().is_some_and(|p| *p != b.principal) {
            return false;
        }
        if self.host.as_ref().is_some_and(|h| *h != b.host) {
            return false;
        }
        if self.operation != AclOperation::Any && self.operation != b.operation {
            return false;
        }
        self.permission_type == AclPermissionType::Any || self.permission_type == b.permission_type
    }

    /// Kafka's `AclBindingFilter.findIndefiniteField`: the first field that keeps the
    /// filter from matching at most one binding, in Kafka's words, or `None`. Note
    /// that pattern type ANY is not indefinite (Kafka's rule, kept).
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        match self.resource_type {
            ResourceType::Any => return Some("Resource type is ANY."),
            ResourceType::Unknown => return Some("Resource type is UNKNOWN."),
            _ => {}
        }
        if self.resource_name.is_none() {
            return Some("Resource name is NULL.");
        }
        match self.pattern_type {
            PatternType::Match => return Some("Resource pattern type is MATCH."),
            PatternType::Unknown => return Some("Resource pattern type is UNKNOWN."),
            _ => {}
        }
        if self.principal.is_none() {
            return Some("Principal is NULL");
        }
        if self.host.is_none() {
            return Some("Host is NULL");
        }
        match self.operation {
            AclOperation::Any => return Some("Operation is ANY"),
            AclOperation::Unknown => return Some("Operation is UNKNOWN"),
            _ => {}
        }
        match self.permission_type {
            AclPermissionType::Any => Some("Permission type is ANY"),
            AclPermissionType::Unknown => Some("Permission type is UNKNOWN"),
            _ => None,
        }
    }

    /// Kafka's `AclBindingFilter.matchesAtMostOne`.
    pub fn matches_at_most_one(&self) -> bool {
        self.find_indefinite_field().is_none()
    }

    /// Kafka's `AclBindingFilter.isUnknown`: a pattern part with an UNKNOWN resource
    /// or pattern type, or an entry part with an UNKNOWN operation or permission.
    pub fn is_unknown(&self) -> bool {
        self.pattern_is_unknown() || self.entry_is_unknown()
    }

    pub(crate) fn pattern_is_unknown(&self) -> bool {
        self.resource_type == ResourceType::Unknown || self.pattern_type == PatternType::Unknown
    }

    pub(crate) fn entry_is_unknown(&self) -> bool {
        self.operation == AclOperation::Unknown
            || self.permission_type == AclPermissionType::Unknown
    }
}

impl From<&AclBinding> for AclBindingFilter {
    fn from(binding: &AclBinding) -> Self {
        binding.to_filter()
    }
}

/// Kafka's `AclBindingFilter.toString`.
impl fmt::Display for AclBindingFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let any = |s: &Option<String>| s.clone().unwrap_or_else(|| "<any>".to_string());
        write!(
            f,
            "(patternFilter=ResourcePattern(resourceType={}, name={}, patternType={}), \
             entryFilter=(principal={}, host={}, operation={}, permissionType={}))",
            self.resource_type,
            any(&self.resource_name),
            self.pattern_type,
            any(&self.principal),
            any(&self.host),
            self.operation,
            self.permission_type
        )
    }
}
