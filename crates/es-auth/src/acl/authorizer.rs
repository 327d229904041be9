//! [`Authorizer`]: Kafka's `StandardAuthorizer` decision over a snapshot of [`Acls`],
//! plus `Authorizer.authorizeByResourceType` and the `super.users` parser.
//!
//! The decision (Kafka's `StandardAuthorizerData.authorize` / `findAclRule` /
//! `findResult`), for a principal `Type:name`, a host and an operation on a resource
//! of a type and a literal name:
//!
//! 1. a super user (`super.users`, compared as `Type:name` text) is allowed;
//! 2. the bindings of that resource type that *apply to the name* are: LITERAL with
//!    that name, PREFIXED whose prefix the name starts with, and LITERAL `*` — except
//!    for a name that starts with `*` and is not `*` itself, which Kafka's tree walk
//!    never pairs with the LITERAL `*` bindings (kept, see the tests);
//! 3. of those, a binding *matches* when its principal is the caller's or `User:*`,
//!    its host is the caller's or `*`, and its operation is ALL or the requested one;
//!    an ALLOW binding also matches DESCRIBE when its operation is READ, WRITE, DELETE
//!    or ALTER, and DESCRIBE_CONFIGS when it is ALTER_CONFIGS (DENY bindings imply
//!    nothing: a DENY READ does not deny DESCRIBE);
//! 4. any matching DENY denies; else any matching ALLOW allows; else, if some binding
//!    applies to the name (whoever it is for), the answer is deny; else
//!    `allow.everyone.if.no.acl.found` decides (default deny).
//!
//! The index replaces Kafka's sorted-set walk with the same answer: per resource
//! type, a hash map of LITERAL names, the LITERAL `*` list, and a B-tree of PREFIXED
//! prefixes walked from the name downwards, jumping over every run of keys that
//! share only part of the name (each jump shortens the candidate prefix, so a lookup
//! costs a few B-tree descents, not a scan). The [`Decision`] names the deciding
//! binding as Kafka's audit log does: the first matching DENY in Kafka's order (exact
//! name, longer prefixes first, then `*`), or the last matching ALLOW in that order.
//!
//! Names that begin with a character below `*` (U+0000..U+0029: controls, space,
//! `!"#$%&'()`; possible in group and transactional ids, not in topic names) are
//! where Kafka's walk goes wrong: its second pass takes the jump target from the
//! exemplar `*` instead of from the name. So when no DENY was found in the first
//! pass and the first non-prefix binding name below `*` that the walk reaches shares
//! one leading character with the resource name, Kafka loops forever on the request
//! thread; with two or more shared characters it throws
//! StringIndexOutOfBoundsException (the request fails). Where it does finish, it may
//! revisit prefixes after `*` and log another of the matching ALLOW bindings. es
//! answers all of these by the rules above (`tests/model_tests.rs` runs a port of
//! Kafka's walk against this index).
//!
//! An `Authorizer` is immutable: rebuild it from the [`Acls`] when they change
//! (linear in the number of bindings) and swap it in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::ops::Bound;

use super::store::Acls;
use super::types::{AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType};
use super::validate::{WILDCARD, WILDCARD_PRINCIPAL};

/// The resource name Kafka's `authorizeByResourceType` first authorizes, so that
/// super users and `allow.everyone.if.no.acl.found` answer as for a real resource.
pub const BY_RESOURCE_TYPE_PROBE_NAME: &str = "hardcode";

/// Index slots: one per [`ResourceType`] code (0..=7).
const TYPE_SLOTS: usize = 8;

/// The authorizer's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals (`User:admin`) allowed everything; see
    /// [`parse_super_users`].
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`: the answer for a resource no binding applies
    /// to. Kafka's default is false.
    pub allow_everyone_if_no_acl_found: bool,
}

/// A `super.users` entry that is not `Type:name`; Kafka's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected a string in format principalType:principalName but got {0}")]
pub struct SuperUsersError(pub String);

/// Kafka's `StandardAuthorizer.getConfiguredSuperUsers`: split at `;`, trim each part
/// as Java's `String.trim` does (every character up to U+0020), skip empty parts,
/// and require a `:` in each (Kafka's `SecurityUtils.parseKafkaPrincipal`, which
/// accepts an empty type or name). Duplicates collapse; order is kept.
pub fn parse_super_users(value: &str) -> Result<Vec<String>, SuperUsersError> {
    let mut users: Vec<String> = Vec::new();
    for part in value.split(';') {
        let v = part.trim_matches(|c: char| c <= ' ');
        if v.is_empty() {
            continue;
        }
        if !v.contains(':') {
            return Err(SuperUsersError(v.to_string()));
        }
        if !users.iter().any(|u| u == v) {
            users.push(v.to_string());
        }
    }
    Ok(users)
}

/// The text Kafka compares a binding's host with: Java's
/// `InetAddress.getHostAddress()` of the client's address. IPv4 as dotted quad; an
/// IPv4-mapped IPv6 address as the IPv4 address (Java turns those into
/// `Inet4Address`); other IPv6 addresses as eight lowercase hex groups without
/// zero compression (`0:0:0:0:0:0:0:1`, not `::1`). Zone ids are not rendered.
pub fn java_host_address(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6
                .segments()
                .iter()
                .map(|s| format!("{s:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}

/// Why an authorization came out as it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule<'a> {
    /// The principal is in `super.users`.
    SuperUser,
    /// This binding decided (a DENY if denied, an ALLOW if allowed).
    Acl(&'a AclBinding),
    /// Bindings apply to the resource but none matches the principal, host and
    /// operation: denied.
    NoMatchingAcl,
    /// No binding applies to the resource: `allow.everyone.if.no.acl.found` decided.
    NoAclFound,
}

/// An authorization result with its reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision<'a> {
    pub allowed: bool,
    pub rule: Rule<'a>,
}

/// Kafka's rule text in its audit log (`SuperUser`, `MatchingAcl(acl=StandardAcl(...))`,
/// `DefaultAllow`, `DefaultDeny`).
impl fmt::Display for Decision<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule {
            Rule::SuperUser => f.write_str("SuperUser"),
            Rule::Acl(b) => write!(f, "MatchingAcl(acl={})", b.standard_acl_string()),
            Rule::NoMatchingAcl => f.write_str("DefaultDeny"),
            Rule::NoAclFound if self.allowed => f.write_str("DefaultAllow"),
            Rule::NoAclFound => f.write_str("DefaultDeny"),
        }
    }
}

/// The bindings of one resource type, by how their name applies. Values are indexes
/// into [`Authorizer::bindings`], each list in Kafka's order.
#[derive(Debug, Default)]
struct TypeIndex {
    /// LITERAL bindings other than `*`, by name.
    literal: HashMap<String, Vec<usize>>,
    /// LITERAL `*` bindings.
    wildcard: Vec<usize>,
    /// PREFIXED bindings, by prefix.
    prefixed: BTreeMap<String, Vec<usize>>,
    /// Every binding of the type (for `authorize_by_resource_type`).
    all: Vec<usize>,
}

/// Kafka's `StandardAuthorizer` over a snapshot of the bindings.
#[derive(Debug)]
pub struct Authorizer {
    bindings: Vec<AclBinding>,
    types: [TypeIndex; TYPE_SLOTS],
    super_users: HashSet<String>,
    config: AuthorizerConfig,
}

/// The scan state of one authorization: Kafka's `MatchingRuleBuilder`.
struct Scan<'a, 'r> {
    bindings: &'a [AclBinding],
    principal: &'r str,
    host: &'r str,
    operation: AclOperation,
    /// Some binding applied to the resource name (Kafka's `hasResourceAcls`).
    found: bool,
    /// The last matching ALLOW.
    allow: Option<usize>,
}

impl<'a> Scan<'a, '_> {
    /// Looks at `ids` in order; the first matching DENY, if any.
    fn run(&mut self, ids: &[usize]) -> Option<&'a AclBinding> {
        for &i in ids {
            let Some(b) = self.bindings.get(i) else {
                continue;
            };
            self.found = true;
            match find_result(b, self.principal, self.host, self.operation) {
                Some(true) => self.allow = Some(i),
                Some(false) => return Some(b),
                None => {}
            }
        }
        None
    }
}

/// Kafka's `StandardAuthorizerData.findResult`: `None` if the binding does not match
/// the principal, host and operation, else whether it allows. The resource name is
/// not looked at.
fn find_result(
    b: &AclBinding,
    principal: &str,
    host: &str,
    operation: AclOperation,
) -> Option<bool> {
    if b.principal != principal && b.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if b.host != WILDCARD && b.host != host {
        return None;
    }
    if b.operation != AclOperation::All {
        if b.permission_type == AclPermissionType::Allow {
            let implied = match operation {
                AclOperation::Describe => matches!(
                    b.operation,
                    AclOperation::Describe
                        | AclOperation::Read
                        | AclOperation::Write
                        | AclOperation::Delete
                        | AclOperation::Alter
                ),
                AclOperation::DescribeConfigs => matches!(
                    b.operation,
                    AclOperation::DescribeConfigs | AclOperation::AlterConfigs
                ),
                _ => operation == b.operation,
            };
            if !implied {
                return None;
            }
        } else if operation != b.operation {
            return None;
        }
    }
    Some(b.permission_type == AclPermissionType::Allow)
}

/// Length in bytes of the longest common prefix of `name` and `key` that ends on a
/// character boundary of `name`.
fn common_prefix_len(name: &str, key: &str) -> usize {
    let mut m = name
        .bytes()
        .zip(key.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    while !name.is_char_boundary(m) {
        m -= 1;
    }
    m
}

/// Calls `f` with the bindings of every key of `prefixed` that is a prefix of `name`,
/// longest first, until `f` returns true.
///
/// Walks the keys at or below the candidate (initially `name`) downwards. A key that
/// is a prefix is visited; a key that is not shares some `m` bytes with `name`, and
/// no key between it and `name[..m]` can be a prefix, so the walk restarts at
/// `name[..m]`. Each restart strictly shortens the candidate, so the walk ends.
fn for_each_prefix<'m>(
    prefixed: &'m BTreeMap<String, Vec<usize>>,
    name: &str,
    mut f: impl FnMut(&'m [usize]) -> bool,
) {
    let mut upper = name;
    'restart: loop {
        let range = prefixed.range::<str, _>((Bound::Unbounded, Bound::Included(upper)));
        for (key, ids) in range.rev() {
            if name.starts_with(key.as_str()) {
                if f(ids) {
                    return;
                }
                continue;
            }
            upper = &name[..common_prefix_len(name, key)];
            continue 'restart;
        }
        return;
    }
}

impl Authorizer {
    /// An authorizer over a snapshot of `acls`.
    pub fn new(acls: &Acls, config: AuthorizerConfig) -> Self {
        let bindings: Vec<AclBinding> = acls.iter().cloned().collect();
        let mut types: [TypeIndex; TYPE_SLOTS] = std::array::from_fn(|_| TypeIndex::default());
        for (i, b) in bindings.iter().enumerate() {
            let Some(index) = slot(&mut types, b.resource_type) else {
                continue;
            };
            index.all.push(i);
            match b.pattern_type {
                PatternType::Literal if b.resource_name == WILDCARD => index.wildcard.push(i),
                PatternType::Literal => index
                    .literal
                    .entry(b.resource_name.clone())
                    .or_default()
                    .push(i),
                PatternType::Prefixed => index
                    .prefixed
                    .entry(b.resource_name.clone())
                    .or_default()
                    .push(i),
                // Never stored (Acls validates); Kafka's walk would skip them too.
                _ => {}
            }
        }
        let super_users = config.super_users.iter().cloned().collect();
        Authorizer {
            bindings,
            types,
            super_users,
            config,
        }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &AuthorizerConfig {
        &self.config
    }

    /// How many bindings it holds (Kafka's `aclCount`).
    pub fn acl_count(&self) -> usize {
        self.bindings.len()
    }

    /// Whether `principal` (`Type:name`) is a super user.
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    fn index(&self, resource_type: ResourceType) -> Option<&TypeIndex> {
        usize::try_from(resource_type.code())
            .ok()
            .and_then(|i| self.types.get(i))
    }

    /// Kafka's `StandardAuthorizer.authorize` of one action on a LITERAL resource:
    /// may `principal` (`Type:name`, e.g. `User:alice`) connecting from `host` (see
    /// [`java_host_address`]) perform `operation` on the resource of `resource_type`
    /// named `name`? See the module documentation for the rules.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> Decision<'_> {
        if self.super_users.contains(principal) {
            return Decision {
                allowed: true,
                rule: Rule::SuperUser,
            };
        }
        let mut scan = Scan {
            bindings: &self.bindings,
            principal,
            host,
            operation,
            found: false,
            allow: None,
        };
        if let Some(index) = self.index(resource_type) {
            if let Some(deny) = self.scan_index(index, name, &mut scan) {
                return Decision {
                    allowed: false,
                    rule: Rule::Acl(deny),
                };
            }
        }
        match scan.allow.and_then(|i| self.bindings.get(i)) {
            Some(b) => Decision {
                allowed: true,
                rule: Rule::Acl(b),
            },
            None if scan.found => Decision {
                allowed: false,
                rule: Rule::NoMatchingAcl,
            },
            None => Decision {
                allowed: self.config.allow_everyone_if_no_acl_found,
                rule: Rule::NoAclFound,
            },
        }
    }

    /// Scans the bindings that apply to `name` in Kafka's order; the first matching
    /// DENY, if any.
    fn scan_index<'a>(
        &'a self,
        index: &'a TypeIndex,
        name: &str,
        scan: &mut Scan<'a, '_>,
    ) -> Option<&'a AclBinding> {
        // The exact name. For "*" these are the wildcard bindings themselves.
        let exact: &[usize] = if name == WILDCARD {
            &index.wildcard
        } else {
            index.literal.get(name).map_or(&[], Vec::as_slice)
        };
        if let Some(deny) = scan.run(exact) {
            return Some(deny);
        }
        let mut deny = None;
        for_each_prefix(&index.prefixed, name, |ids| {
            deny = scan.run(ids);
            deny.is_some()
        });
        if deny.is_some() {
            return deny;
        }
        // Kafka's walk reaches the LITERAL "*" entries only as a name that is not a
        // prefix of the resource name; for "*abc", "*" is a prefix and a LITERAL one
        // is skipped, in both of Kafka's passes.
        if name != WILDCARD && !name.starts_with(WILDCARD) {
            return scan.run(&index.wildcard);
        }
        None
    }

    /// Kafka's `Authorizer.authorizeByResourceType` (the default method, which
    /// `StandardAuthorizer` does not override): may `principal` from `host` perform
    /// `operation` on at least one resource of `resource_type`? InitProducerId uses it
    /// (WRITE on some TOPIC) for an idempotent producer without IDEMPOTENT_WRITE on
    /// the cluster.
    ///
    /// 1. Allowed if [`authorize`](Self::authorize) allows the LITERAL resource named
    ///    [`BY_RESOURCE_TYPE_PROBE_NAME`] (super users, `allow.everyone.if.no.acl.found`
    ///    with nothing applying to that name, a LITERAL `*` ALLOW, ...).
    /// 2. Otherwise the bindings of the type whose host is the caller's or `*`, whose
    ///    principal is the caller's or `User:*`, and whose operation is `operation` or
    ///    ALL (no implied operations here) are sorted: a LITERAL `*` DENY denies at
    ///    once; a LITERAL `*` ALLOW allows (unless such a DENY exists); else some ALLOW
    ///    must survive: a LITERAL one not denied by a LITERAL DENY of the same name nor
    ///    by a PREFIXED DENY of one of its prefixes, or a PREFIXED one not denied by a
    ///    PREFIXED DENY of one of its prefixes (itself included).
    ///
    /// Kafka throws IllegalArgumentException for a resource type or operation of ANY
    /// or UNKNOWN (for super users too); this answers false.
    pub fn authorize_by_resource_type(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        if matches!(resource_type, ResourceType::Any | ResourceType::Unknown)
            || matches!(operation, AclOperation::Any | AclOperation::Unknown)
        {
            return false;
        }
        if self
            .authorize(
                principal,
                host,
                operation,
                resource_type,
                BY_RESOURCE_TYPE_PROBE_NAME,
            )
            .allowed
        {
            return true;
        }
        let Some(index) = self.index(resource_type) else {
            return false;
        };
        let mut deny_literal: HashSet<&str> = HashSet::new();
        let mut deny_prefixed: HashSet<&str> = HashSet::new();
        let mut allow_literal: HashSet<&str> = HashSet::new();
        let mut allow_prefixed: HashSet<&str> = HashSet::new();
        let mut wildcard_allow = false;
        for b in index.all.iter().filter_map(|&i| self.bindings.get(i)) {
            if b.host != host && b.host != WILDCARD {
                continue;
            }
            if b.principal != principal && b.principal != WILDCARD_PRINCIPAL {
                continue;
            }
            if b.operation != operation && b.operation != AclOperation::All {
                continue;
            }
            let name = b.resource_name.as_str();
            match (b.permission_type, b.pattern_type) {
                (AclPermissionType::Deny, PatternType::Literal) if name == WILDCARD => {
                    return false
                }
                (AclPermissionType::Deny, PatternType::Literal) => {
                    deny_literal.insert(name);
                }
                (AclPermissionType::Deny, PatternType::Prefixed) => {
                    deny_prefixed.insert(name);
                }
                (AclPermissionType::Allow, PatternType::Literal) if name == WILDCARD => {
                    wildcard_allow = true
                }
                (AclPermissionType::Allow, PatternType::Literal) => {
                    allow_literal.insert(name);
                }
                (AclPermissionType::Allow, PatternType::Prefixed) => {
                    allow_prefixed.insert(name);
                }
                _ => {}
            }
        }
        if wildcard_allow {
            return true;
        }
        let dominated = |allow: &str| {
            allow
                .char_indices()
                .any(|(i, c)| deny_prefixed.contains(&allow[..i + c.len_utf8()]))
        };
        allow_literal
            .iter()
            .any(|a| !deny_literal.contains(a) && !dominated(a))
            || allow_prefixed.iter().any(|a| !dominated(a))
    }
}

fn slot(
    types: &mut [TypeIndex; TYPE_SLOTS],
    resource_type: ResourceType,
) -> Option<&mut TypeIndex> {
    usize::try_from(resource_type.code())
        .ok()
        .and_then(|i| types.get_mut(i))
}
