//! `authorize_by_resource_type`: Kafka's BaseAuthorizerTest and AuthorizerTest
//! scenarios, with the ACLs added and removed step by step as there.

use super::*;

const U1: &str = "User:user1";
const H1: &str = "192.168.1.1";
const H2: &str = "192.168.1.2";

/// A mutable ACL set with an authorizer rebuilt after every change.
struct Steps {
    acls: Acls,
    config: AuthorizerConfig,
}

impl Steps {
    fn new() -> Self {
        Steps {
            acls: Acls::new(),
            config: AuthorizerConfig {
                super_users: vec!["User:superuser1".into()],
                allow_everyone_if_no_acl_found: false,
            },
        }
    }

    fn add(&mut self, b: AclBinding) -> &mut Self {
        self.acls.create(b).expect("valid");
        self
    }

    fn remove(&mut self, b: &AclBinding) -> &mut Self {
        assert!(self.acls.remove(b));
        self
    }

    fn by_type(&self, principal: &str, host: &str, op: Op, rt: Rt) -> bool {
        Authorizer::new(&self.acls, self.config.clone())
            .authorize_by_resource_type(principal, host, op, rt)
    }
}

fn entry(
    rt: Rt,
    name: &str,
    pat: Pat,
    principal: &str,
    host: &str,
    op: Op,
    perm: Perm,
) -> AclBinding {
    acl(rt, name, pat, principal, host, op, perm)
}

#[test]
fn multiple_add_and_remove() {
    let mut s = Steps::new();
    let deny_read = entry(
        Rt::Topic,
        "sb1-x",
        Pat::Literal,
        U1,
        H1,
        Op::Read,
        Perm::Deny,
    );
    let allow_read = entry(
        Rt::Topic,
        "sb1-x",
        Pat::Literal,
        U1,
        H1,
        Op::Read,
        Perm::Allow,
    );
    for _ in 0..3 {
        assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
        s.add(allow_read.clone());
        assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
        for _ in 0..3 {
            s.add(deny_read.clone());
            assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
            s.remove(&deny_read);
            s.add(allow_read.clone());
            assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
        }
        s.remove(&allow_read);
        assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    }
}

#[test]
fn isolation_unrelated_deny_wont_dominate_allow() {
    let u2 = "User:user2";
    let mut s = Steps::new();
    let r1 = "sb1-x";
    s.add(entry(
        Rt::Topic,
        r1,
        Pat::Literal,
        U1,
        H1,
        Op::Read,
        Perm::Deny,
    ))
    .add(entry(
        Rt::Topic,
        r1,
        Pat::Literal,
        u2,
        H1,
        Op::Read,
        Perm::Deny,
    ))
    .add(entry(
        Rt::Topic,
        r1,
        Pat::Literal,
        U1,
        H2,
        Op::Write,
        Perm::Deny,
    ))
    .add(entry(
        Rt::Topic,
        r1,
        Pat::Literal,
        u2,
        H2,
        Op::Read,
        Perm::Deny,
    ))
    .add(entry(
        Rt::Topic,
        r1,
        Pat::Literal,
        U1,
        H2,
        Op::Read,
        Perm::Allow,
    ))
    .add(entry(
        Rt::Topic,
        "sb2-y",
        Pat::Literal,
        U1,
        H2,
        Op::Read,
        Perm::Deny,
    ))
    .add(entry(
        Rt::Group,
        "s",
        Pat::Prefixed,
        U1,
        H2,
        Op::Read,
        Perm::Deny,
    ));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Group));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::TransactionalId));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Cluster));
    assert!(s.by_type(U1, H2, Op::Read, Rt::Topic));
}

#[test]
fn deny_takes_precedence() {
    let mut s = Steps::new();
    s.add(entry(
        Rt::Topic,
        "sb1-x",
        Pat::Literal,
        U1,
        H1,
        Op::Write,
        Perm::Allow,
    ));
    assert!(s.by_type(U1, H1, Op::Write, Rt::Topic));
    s.add(entry(
        Rt::Topic,
        "sb1-x",
        Pat::Literal,
        U1,
        H1,
        Op::Write,
        Perm::Deny,
    ));
    assert!(!s.by_type(U1, H1, Op::Write, Rt::Topic));
}

#[test]
fn prefixed_resource_deny_dominates() {
    let mut s = Steps::new();
    let g = |name: &str, perm| entry(Rt::Group, name, Pat::Prefixed, U1, H1, Op::Read, perm);
    s.add(g("abcde", Perm::Allow));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Group));
    s.add(g("abcd", Perm::Deny));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Group));
    s.add(g("abc", Perm::Allow));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Group));
    s.add(g("a", Perm::Deny));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Group));
    s.add(g("ab", Perm::Allow));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Group));
}

#[test]
fn wildcard_resource_deny_dominates() {
    let mut s = Steps::new();
    let g = |name: &str, pat, perm| entry(Rt::Group, name, pat, U1, H1, Op::Write, perm);
    s.add(g("hello", Pat::Prefixed, Perm::Allow));
    assert!(s.by_type(U1, H1, Op::Write, Rt::Group));
    s.add(g("*", Pat::Literal, Perm::Deny));
    assert!(!s.by_type(U1, H1, Op::Write, Rt::Group));
    s.add(g("*", Pat::Literal, Perm::Allow));
    assert!(!s.by_type(U1, H1, Op::Write, Rt::Group));
    s.add(g("aloha", Pat::Literal, Perm::Allow));
    assert!(!s.by_type(U1, H1, Op::Write, Rt::Group));
}

#[test]
fn with_all_operation_ace() {
    let mut s = Steps::new();
    let t = |op, perm| entry(Rt::Topic, "sb1-x", Pat::Literal, U1, H1, op, perm);
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    s.add(t(Op::Write, Perm::Deny)).add(t(Op::All, Perm::Allow));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
    s.add(t(Op::All, Perm::Deny));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
}

#[test]
fn with_all_host_ace() {
    let mut s = Steps::new();
    let r = |name: &str, host: &str, perm| {
        entry(Rt::Topic, name, Pat::Literal, U1, host, Op::Read, perm)
    };
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    s.add(r("sb1", H1, Perm::Allow));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
    s.add(r("sb1", "*", Perm::Deny));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    s.add(r("sb2", H1, Perm::Deny));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    assert!(!s.by_type(U1, H2, Op::Read, Rt::Topic));
    s.add(r("sb2", "*", Perm::Allow));
    assert!(s.by_type(U1, H2, Op::Read, Rt::Topic));
    s.add(r("sb2", "*", Perm::Deny));
    assert!(!s.by_type(U1, H2, Op::Read, Rt::Topic));
}

#[test]
fn with_all_principal_ace() {
    let u2 = "User:user2";
    let mut s = Steps::new();
    let r = |name: &str, principal: &str, perm| {
        entry(Rt::Topic, name, Pat::Literal, principal, H1, Op::Read, perm)
    };
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    s.add(r("sb1", U1, Perm::Allow));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
    s.add(r("sb1", "User:*", Perm::Deny));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    s.add(r("sb2", U1, Perm::Deny));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    assert!(!s.by_type(u2, H1, Op::Read, Rt::Topic));
    s.add(r("sb2", "User:*", Perm::Allow));
    assert!(s.by_type(u2, H1, Op::Read, Rt::Topic));
    s.add(r("sb2", "User:*", Perm::Deny));
    assert!(!s.by_type(u2, H1, Op::Read, Rt::Topic));
}

#[test]
fn super_user_has_access() {
    let mut s = Steps::new();
    for (rt, name) in [
        (Rt::Topic, "*"),
        (Rt::Cluster, "kafka-cluster"),
        (Rt::Group, "*"),
        (Rt::TransactionalId, "*"),
    ] {
        s.add(entry(
            rt,
            name,
            Pat::Literal,
            "User:*",
            "*",
            Op::All,
            Perm::Deny,
        ));
    }
    for rt in [Rt::Topic, Rt::Cluster, Rt::Group, Rt::TransactionalId] {
        assert!(s.by_type("User:superuser1", "192.0.4.4", Op::Read, rt));
        assert!(!s.by_type("User:other", "192.0.4.4", Op::Read, rt));
    }
}

#[test]
fn no_acl_found_override_and_probe_name() {
    let mut s = Steps::new();
    s.config.allow_everyone_if_no_acl_found = true;
    assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
    assert!(s.by_type(U1, H1, Op::Write, Rt::Topic));
    // A binding that applies to the probe name takes the default away.
    s.add(entry(
        Rt::Topic,
        "hard",
        Pat::Prefixed,
        "User:other",
        "*",
        Op::Read,
        Perm::Allow,
    ));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    // A binding elsewhere does not.
    let mut s = Steps::new();
    s.config.allow_everyone_if_no_acl_found = true;
    s.add(entry(
        Rt::Topic,
        "t",
        Pat::Literal,
        "User:other",
        "*",
        Op::Read,
        Perm::Deny,
    ));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
    // An ALLOW on the probe name itself, denied through a prefix of it.
    let mut s = Steps::new();
    s.add(entry(
        Rt::Topic,
        "hardcode",
        Pat::Literal,
        U1,
        "*",
        Op::Read,
        Perm::Allow,
    ))
    .add(entry(
        Rt::Topic,
        "h",
        Pat::Prefixed,
        U1,
        "*",
        Op::Read,
        Perm::Deny,
    ));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
}

#[test]
fn no_implied_operations_and_literal_vs_prefixed_denies() {
    let mut s = Steps::new();
    s.add(entry(
        Rt::Topic,
        "t",
        Pat::Literal,
        U1,
        "*",
        Op::Read,
        Perm::Allow,
    ));
    // READ implies DESCRIBE for authorize, not here.
    assert!(!s.by_type(U1, H1, Op::Describe, Rt::Topic));
    assert!(
        Authorizer::new(&s.acls, s.config.clone())
            .authorize(U1, H1, Op::Describe, Rt::Topic, "t")
            .allowed
    );
    // A LITERAL deny of the same name removes a LITERAL allow, not a PREFIXED one.
    let mut s = Steps::new();
    s.add(entry(
        Rt::Topic,
        "t",
        Pat::Prefixed,
        U1,
        "*",
        Op::Read,
        Perm::Allow,
    ))
    .add(entry(
        Rt::Topic,
        "t",
        Pat::Literal,
        U1,
        "*",
        Op::Read,
        Perm::Deny,
    ));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
    let mut s = Steps::new();
    s.add(entry(
        Rt::Topic,
        "t",
        Pat::Literal,
        U1,
        "*",
        Op::Read,
        Perm::Allow,
    ))
    .add(entry(
        Rt::Topic,
        "t",
        Pat::Literal,
        U1,
        "*",
        Op::Read,
        Perm::Deny,
    ));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    // A PREFIXED deny of the allowed name itself dominates a LITERAL allow.
    let mut s = Steps::new();
    s.add(entry(
        Rt::Topic,
        "tx",
        Pat::Literal,
        U1,
        "*",
        Op::Read,
        Perm::Allow,
    ))
    .add(entry(
        Rt::Topic,
        "tx",
        Pat::Prefixed,
        U1,
        "*",
        Op::Read,
        Perm::Deny,
    ));
    assert!(!s.by_type(U1, H1, Op::Read, Rt::Topic));
    // A wildcard allow wins over literal and prefixed denies, not over a wildcard deny.
    let mut s = Steps::new();
    s.add(entry(
        Rt::Topic,
        "*",
        Pat::Literal,
        U1,
        "*",
        Op::Read,
        Perm::Allow,
    ))
    .add(entry(
        Rt::Topic,
        "h",
        Pat::Prefixed,
        U1,
        "*",
        Op::Read,
        Perm::Deny,
    ));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
}

#[test]
fn filter_values_are_refused() {
    let mut s = Steps::new();
    s.add(entry(
        Rt::Topic,
        "*",
        Pat::Literal,
        "User:*",
        "*",
        Op::All,
        Perm::Allow,
    ));
    assert!(s.by_type(U1, H1, Op::Read, Rt::Topic));
    assert!(!s.by_type(U1, H1, Op::Any, Rt::Topic));
    assert!(!s.by_type(U1, H1, Op::Unknown, Rt::Topic));
    assert!(!s.by_type("User:superuser1", H1, Op::Read, Rt::Any));
    assert!(!s.by_type("User:superuser1", H1, Op::Read, Rt::Unknown));
}
