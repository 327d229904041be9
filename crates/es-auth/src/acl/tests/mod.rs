//! Tests of [`super`]: Kafka's own test scenarios (StandardAuthorizerTest,
//! AuthorizerTest, BaseAuthorizerTest, AclControlManagerTest, ResourcePatternFilterTest,
//! StandardAuthorizerPropertyTest) rewritten against this module, a port of Kafka's
//! tree walk (`StandardAuthorizerData.findAclRule`, on UTF-16 strings) that the index
//! is checked against with random ACL sets, no-panic properties for network input,
//! and an ignored microbenchmark.

use super::*;

mod authorizer_core_tests;
mod authorizer_tests;
mod by_type_tests;
mod model_tests;
mod store_tests;
mod types_tests;
mod validate_tests;

use AclOperation as Op;
use AclPermissionType as Perm;
use PatternType as Pat;
use ResourceType as Rt;

/// A binding.
fn acl(
    rt: Rt,
    name: &str,
    pat: Pat,
    principal: &str,
    host: &str,
    op: Op,
    perm: Perm,
) -> AclBinding {
    AclBinding::new(rt, name, pat, principal, host, op, perm)
}

/// A filter.
fn filter(
    rt: Rt,
    name: Option<&str>,
    pat: Pat,
    principal: Option<&str>,
    host: Option<&str>,
    op: Op,
    perm: Perm,
) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: rt,
        resource_name: name.map(str::to_string),
        pattern_type: pat,
        principal: principal.map(str::to_string),
        host: host.map(str::to_string),
        operation: op,
        permission_type: perm,
    }
}

/// The set of `bindings`, each of which must be valid.
fn acls_of(bindings: &[AclBinding]) -> Acls {
    let mut acls = Acls::new();
    for b in bindings {
        acls.create(b.clone()).expect("valid binding");
    }
    acls
}

/// An authorizer over `bindings` with `super.users=User:superman`.
fn authz(bindings: &[AclBinding]) -> Authorizer {
    authz_with(bindings, &["User:superman"], false)
}

fn authz_with(bindings: &[AclBinding], super_users: &[&str], allow_everyone: bool) -> Authorizer {
    Authorizer::new(
        &acls_of(bindings),
        AuthorizerConfig {
            super_users: super_users.iter().map(|s| s.to_string()).collect(),
            allow_everyone_if_no_acl_found: allow_everyone,
        },
    )
}

/// `authorize(...).allowed` for `User:{user}`.
fn allowed(a: &Authorizer, user: &str, host: &str, op: Op, rt: Rt, name: &str) -> bool {
    a.authorize(&format!("User:{user}"), host, op, rt, name)
        .allowed
}

/// A host for tests where the host does not matter.
const ANY_HOST: &str = "127.0.0.1";

/// Kafka's StandardAuthorizerTest.addManyAcls.
fn many_acls() -> Vec<AclBinding> {
    vec![
        acl(
            Rt::Topic,
            "green2",
            Pat::Literal,
            "User:*",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "green",
            Pat::Prefixed,
            "User:bob",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "betamax4",
            Pat::Literal,
            "User:bob",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "betamax",
            Pat::Literal,
            "User:bob",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "beta",
            Pat::Prefixed,
            "User:*",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "alpha",
            Pat::Prefixed,
            "User:*",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "alp",
            Pat::Prefixed,
            "User:bob",
            "*",
            Op::Read,
            Perm::Deny,
        ),
        acl(
            Rt::Group,
            "*",
            Pat::Literal,
            "User:bob",
            "*",
            Op::Write,
            Perm::Allow,
        ),
        acl(
            Rt::Group,
            "wheel",
            Pat::Literal,
            "User:*",
            "*",
            Op::Write,
            Perm::Deny,
        ),
    ]
}
