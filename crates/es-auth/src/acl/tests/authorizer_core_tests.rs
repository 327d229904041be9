//! `authorize`: Kafka's AuthorizerTest scenarios (same ACL setups, same expected
//! answers), the implication table, super users, the `*` quirk, the reported
//! binding, and the `super.users` and host-address helpers.

use std::net::IpAddr;

use super::*;

/// AuthorizerTest.testTopicAcl.
#[test]
fn topic_acl() {
    let (h1, h2) = ("192.168.1.1", "192.168.1.2");
    let t = "foo-topic";
    let a = authz(&[
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:alice",
            h1,
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:alice",
            h2,
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:alice",
            h1,
            Op::Read,
            Perm::Deny,
        ),
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:alice",
            h1,
            Op::Write,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:alice",
            "*",
            Op::Describe,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:rob",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:batman",
            "*",
            Op::Write,
            Perm::Allow,
        ),
    ]);
    assert!(allowed(&a, "alice", h2, Op::Read, Rt::Topic, t));
    assert!(!allowed(&a, "alice", h1, Op::Read, Rt::Topic, t));
    assert!(allowed(&a, "alice", h1, Op::Write, Rt::Topic, t));
    assert!(!allowed(&a, "alice", h2, Op::Write, Rt::Topic, t));
    assert!(allowed(&a, "alice", h1, Op::Describe, Rt::Topic, t));
    assert!(allowed(&a, "alice", h2, Op::Describe, Rt::Topic, t));
    assert!(!allowed(&a, "alice", h1, Op::Alter, Rt::Topic, t));
    assert!(!allowed(&a, "alice", h2, Op::Alter, Rt::Topic, t));
    assert!(allowed(&a, "rob", h1, Op::Describe, Rt::Topic, t));
    assert!(allowed(&a, "batman", h1, Op::Describe, Rt::Topic, t));
    assert!(allowed(&a, "rob", h1, Op::Read, Rt::Topic, t));
    assert!(allowed(&a, "batman", h1, Op::Write, Rt::Topic, t));
}

/// AuthorizerTest: deny beats allow-all, allow-all, super users, wildcard resources.
#[test]
fn deny_allow_all_super_users_and_wildcards() {
    let t = "foo-topic";
    let a = authz(&[
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:*",
            "*",
            Op::All,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            t,
            Pat::Literal,
            "User:alice",
            "192.168.2.1",
            Op::All,
            Perm::Deny,
        ),
    ]);
    assert!(!allowed(&a, "alice", "192.168.2.1", Op::Read, Rt::Topic, t));
    assert!(allowed(&a, "random", "192.0.4.4", Op::Read, Rt::Topic, t));

    let deny_all = [acl(
        Rt::Topic,
        t,
        Pat::Literal,
        "User:*",
        "*",
        Op::All,
        Perm::Deny,
    )];
    let a = authz_with(&deny_all, &["User:superuser1", "User:superuser2"], false);
    assert!(allowed(
        &a,
        "superuser1",
        "192.0.4.4",
        Op::Read,
        Rt::Topic,
        t
    ));
    assert!(allowed(
        &a,
        "superuser2",
        "192.0.4.4",
        Op::Read,
        Rt::Topic,
        t
    ));
    assert!(!allowed(
        &a,
        "superuser3",
        "192.0.4.4",
        Op::Read,
        Rt::Topic,
        t
    ));
    // Super users are compared as `Type:name` text.
    assert!(
        !a.authorize("Group:superuser1", "192.0.4.4", Op::Read, Rt::Topic, t)
            .allowed
    );
    assert!(a.is_super_user("User:superuser1"));

    // testWildCardAcls.
    let h = "192.168.3.1";
    let read_any = acl(
        Rt::Topic,
        "*",
        Pat::Literal,
        "User:alice",
        h,
        Op::Read,
        Perm::Allow,
    );
    assert!(!allowed(&authz(&[]), "alice", h, Op::Read, Rt::Topic, t));
    assert!(allowed(
        &authz(std::slice::from_ref(&read_any)),
        "alice",
        h,
        Op::Read,
        Rt::Topic,
        t
    ));
    let write = acl(
        Rt::Topic,
        t,
        Pat::Literal,
        "User:alice",
        h,
        Op::Write,
        Perm::Allow,
    );
    let deny_write_any = acl(
        Rt::Topic,
        "*",
        Pat::Literal,
        "User:alice",
        h,
        Op::Write,
        Perm::Deny,
    );
    let a = authz(&[read_any, write, deny_write_any]);
    assert!(!allowed(&a, "alice", h, Op::Write, Rt::Topic, t));
    assert!(allowed(&a, "alice", h, Op::Read, Rt::Topic, t));
}

/// AuthorizerTest.testAclInheritance on the cluster resource: what ALLOW and DENY of
/// each operation imply, over every concrete operation.
#[test]
fn acl_inheritance() {
    let concrete: Vec<Op> = Op::VALUES
        .iter()
        .copied()
        .filter(|o| !matches!(o, Op::Any | Op::Unknown))
        .collect();
    let cluster = |op, perm| {
        acl(
            Rt::Cluster,
            CLUSTER_NAME,
            Pat::Literal,
            "User:alice",
            "*",
            op,
            perm,
        )
    };
    let implications_of_allow = |parent: Op, implied: &[Op]| {
        let a = authz(&[cluster(parent, Perm::Allow)]);
        for &op in &concrete {
            let expected = op == parent || implied.contains(&op);
            assert_eq!(
                allowed(&a, "alice", "192.168.3.1", op, Rt::Cluster, CLUSTER_NAME),
                expected,
                "ALLOW {parent} -> {op}"
            );
        }
    };
    let implications_of_deny = |parent: Op, implied: &[Op]| {
        let a = authz(&[cluster(parent, Perm::Deny), cluster(Op::All, Perm::Allow)]);
        for &op in &concrete {
            let denied = op == parent || implied.contains(&op);
            assert_eq!(
                allowed(&a, "alice", "192.168.3.1", op, Rt::Cluster, CLUSTER_NAME),
                !denied,
                "DENY {parent} -> {op}"
            );
        }
    };
    implications_of_allow(Op::All, &concrete);
    implications_of_deny(Op::All, &concrete);
    implications_of_allow(Op::Read, &[Op::Describe]);
    implications_of_allow(Op::Write, &[Op::Describe]);
    implications_of_allow(Op::Delete, &[Op::Describe]);
    implications_of_allow(Op::Alter, &[Op::Describe]);
    implications_of_deny(Op::Describe, &[]);
    implications_of_allow(Op::AlterConfigs, &[Op::DescribeConfigs]);
    implications_of_deny(Op::DescribeConfigs, &[]);
    // Nothing else implies anything, TWO_PHASE_COMMIT included.
    for op in [
        Op::Create,
        Op::ClusterAction,
        Op::IdempotentWrite,
        Op::CreateTokens,
        Op::DescribeTokens,
        Op::TwoPhaseCommit,
        Op::Describe,
        Op::DescribeConfigs,
    ] {
        implications_of_allow(op, &[]);
    }
    for op in [Op::Read, Op::Write, Op::Delete, Op::Alter, Op::AlterConfigs] {
        implications_of_deny(op, &[]);
    }
}

/// AuthorizerTest: wildcard and prefixed resources, and single-character names.
#[test]
fn wildcard_prefixed_and_single_character_resources() {
    let allow_read =
        |name: &str, pat| acl(Rt::Topic, name, pat, "User:*", "*", Op::Read, Perm::Allow);
    let deny_read =
        |name: &str, pat| acl(Rt::Topic, name, pat, "User:*", "*", Op::Read, Perm::Deny);
    let t = "foo-6b1a";
    assert!(allowed(
        &authz(&[allow_read("*", Pat::Literal)]),
        "x",
        ANY_HOST,
        Op::Read,
        Rt::Topic,
        t
    ));
    assert!(allowed(
        &authz(&[allow_read("foo", Pat::Prefixed)]),
        "x",
        ANY_HOST,
        Op::Read,
        Rt::Topic,
        t
    ));

    // testAuthorizeWithPrefixedResource: many unrelated DENYs around the allowing prefix.
    let a = authz(&[
        deny_read("a_other", Pat::Literal),
        deny_read("a_other", Pat::Prefixed),
        deny_read("foo-7f3e", Pat::Prefixed),
        deny_read("foo-0c2d", Pat::Prefixed),
        deny_read("foo-6b1a-zzz", Pat::Prefixed),
        deny_read("fooo-1111", Pat::Prefixed),
        deny_read("fo-2222", Pat::Prefixed),
        deny_read("fop-3333", Pat::Prefixed),
        deny_read("fon-4444", Pat::Prefixed),
        deny_read("fon-", Pat::Prefixed),
        deny_read("z_other", Pat::Prefixed),
        deny_read("z_other", Pat::Literal),
        allow_read("foo", Pat::Prefixed),
    ]);
    assert!(allowed(&a, "x", ANY_HOST, Op::Read, Rt::Topic, t));

    // testSingleCharacterResourceAcls.
    let a = authz(&[allow_read("f", Pat::Literal)]);
    assert!(allowed(&a, "x", ANY_HOST, Op::Read, Rt::Topic, "f"));
    assert!(!allowed(&a, "x", ANY_HOST, Op::Read, Rt::Topic, "foo"));
    let a = authz(&[
        allow_read("f", Pat::Literal),
        allow_read("_", Pat::Prefixed),
    ]);
    assert!(allowed(&a, "x", ANY_HOST, Op::Read, Rt::Topic, "_foo"));
    assert!(allowed(&a, "x", ANY_HOST, Op::Read, Rt::Topic, "_"));
    assert!(!allowed(&a, "x", ANY_HOST, Op::Read, Rt::Topic, "foo_"));

    // testAuthorizeWithEmptyResourceName.
    assert!(!allowed(
        &authz(&[]),
        "x",
        ANY_HOST,
        Op::Read,
        Rt::Group,
        ""
    ));
    let a = authz(&[acl(
        Rt::Group,
        "*",
        Pat::Literal,
        "User:*",
        "*",
        Op::Read,
        Perm::Allow,
    )]);
    assert!(allowed(&a, "x", ANY_HOST, Op::Read, Rt::Group, ""));
    // Resource types are separate.
    assert!(!allowed(&a, "x", ANY_HOST, Op::Read, Rt::Topic, "g"));
    assert!(!allowed(&a, "x", ANY_HOST, Op::Read, Rt::Any, "g"));
}

/// Kafka's tree walk never pairs a LITERAL `*` binding with a resource whose name
/// starts with `*` (other than `*` itself): replicated.
#[test]
fn wildcard_does_not_apply_to_names_starting_with_a_star() {
    let a = authz(&[acl(
        Rt::Group,
        "*",
        Pat::Literal,
        "User:*",
        "*",
        Op::Read,
        Perm::Allow,
    )]);
    assert!(allowed(&a, "x", ANY_HOST, Op::Read, Rt::Group, "*"));
    assert!(allowed(&a, "x", ANY_HOST, Op::Read, Rt::Group, "a*"));
    let d = a.authorize("User:x", ANY_HOST, Op::Read, Rt::Group, "*abc");
    assert_eq!((d.allowed, d.rule), (false, Rule::NoAclFound));
    let open = authz_with(
        &[acl(
            Rt::Group,
            "*",
            Pat::Literal,
            "User:*",
            "*",
            Op::Read,
            Perm::Deny,
        )],
        &[],
        true,
    );
    assert!(
        open.authorize("User:x", ANY_HOST, Op::Read, Rt::Group, "*abc")
            .allowed
    );
    assert!(
        !open
            .authorize("User:x", ANY_HOST, Op::Read, Rt::Group, "abc")
            .allowed
    );
    // A PREFIXED `*` is an ordinary prefix.
    let p = authz(&[acl(
        Rt::Group,
        "*",
        Pat::Prefixed,
        "User:*",
        "*",
        Op::Read,
        Perm::Allow,
    )]);
    assert!(allowed(&p, "x", ANY_HOST, Op::Read, Rt::Group, "*abc"));
    assert!(allowed(&p, "x", ANY_HOST, Op::Read, Rt::Group, "*"));
    assert!(!allowed(&p, "x", ANY_HOST, Op::Read, Rt::Group, "abc"));
}

/// The reported binding: first DENY, last ALLOW, in Kafka's order.
#[test]
fn reported_bindings_follow_kafkas_order() {
    let d_exact = acl(
        Rt::Topic,
        "foobar",
        Pat::Literal,
        "User:*",
        "*",
        Op::Read,
        Perm::Deny,
    );
    let d_pre = acl(
        Rt::Topic,
        "foo",
        Pat::Prefixed,
        "User:*",
        "*",
        Op::Read,
        Perm::Deny,
    );
    let a = authz(&[d_pre.clone(), d_exact.clone()]);
    assert_eq!(
        a.authorize("User:x", ANY_HOST, Op::Read, Rt::Topic, "foobar")
            .rule,
        Rule::Acl(&d_exact)
    );
    let a_star = acl(
        Rt::Topic,
        "*",
        Pat::Literal,
        "User:*",
        "*",
        Op::Read,
        Perm::Allow,
    );
    let a_pre = acl(
        Rt::Topic,
        "f",
        Pat::Prefixed,
        "User:*",
        "*",
        Op::Read,
        Perm::Allow,
    );
    let a = authz(&[a_star.clone(), a_pre]);
    assert_eq!(
        a.authorize("User:x", ANY_HOST, Op::Read, Rt::Topic, "foobar")
            .rule,
        Rule::Acl(&a_star)
    );
}

#[test]
fn super_users_parser() {
    assert_eq!(parse_super_users(""), Ok(vec![]));
    assert_eq!(parse_super_users(" "), Ok(vec![]));
    assert_eq!(
        parse_super_users("User:bob;User:alice "),
        Ok(vec!["User:bob".into(), "User:alice".into()])
    );
    assert_eq!(
        parse_super_users(";  User:bob  ;  User:alice ;User:bob"),
        Ok(vec!["User:bob".into(), "User:alice".into()])
    );
    let e = parse_super_users("bob;:alice").expect_err("refused");
    assert_eq!(
        e.to_string(),
        "expected a string in format principalType:principalName but got bob"
    );
    assert_eq!(
        parse_super_users(":alice;User:"),
        Ok(vec![":alice".into(), "User:".into()])
    );
    // Java's trim: control characters go, non-ASCII spaces stay.
    assert_eq!(
        parse_super_users("\t\u{1}User:a\n"),
        Ok(vec!["User:a".into()])
    );
    assert_eq!(
        parse_super_users("\u{a0}User:a"),
        Ok(vec!["\u{a0}User:a".into()])
    );
}

#[test]
fn java_host_addresses() {
    let h = |s: &str| java_host_address(s.parse::<IpAddr>().expect("ip"));
    assert_eq!(h("192.168.1.1"), "192.168.1.1");
    assert_eq!(h("::1"), "0:0:0:0:0:0:0:1");
    assert_eq!(h("fe80::1:ABCD"), "fe80:0:0:0:0:0:1:abcd");
    assert_eq!(h("::ffff:10.0.0.7"), "10.0.0.7");
    assert_eq!(h("2001:db8::"), "2001:db8:0:0:0:0:0:0");
}

#[test]
fn odd_requests_do_not_panic_and_deny() {
    let a = authz(&many_acls());
    for rt in Rt::VALUES {
        for op in Op::VALUES {
            for name in ["", "*", "**", "alp", "\u{10000}", "é"] {
                let _ = a.authorize("User:bob", "", *op, *rt, name);
                let _ = a.authorize("", "*", *op, *rt, name);
            }
        }
    }
    assert!(!allowed(&a, "bob", ANY_HOST, Op::Any, Rt::Topic, "green1"));
    assert_eq!(a.acl_count(), many_acls().len());
    assert_eq!(a.config().super_users, vec!["User:superman".to_string()]);
}

#[test]
fn authorizer_and_acls_are_shareable_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Authorizer>();
    shareable::<Acls>();
    shareable::<Decision<'static>>();
}
