//! `authorize`: Kafka's StandardAuthorizerTest scenarios (same ACL setups, same
//! expected answers), decisions as Kafka's audit log names them, the no-ACL default.

use super::*;

fn foo_acl(op: Op, perm: Perm) -> AclBinding {
    acl(Rt::Topic, "foo_", Pat::Prefixed, "User:bob", "*", op, perm)
}

fn bar_acl(op: Op, perm: Perm) -> AclBinding {
    acl(Rt::Group, "bar", Pat::Literal, "User:*", "*", op, perm)
}

/// The answer of one binding alone for bob on TOPIC foo_bar (Kafka's findResult
/// tests): `Some(allowed)` or `None` when the binding does not match.
fn find(b: AclBinding, user: &str, op: Op, rt: Rt, name: &str) -> Option<bool> {
    let a = authz(&[b]);
    let d = a.authorize(&format!("User:{user}"), ANY_HOST, op, rt, name);
    match d.rule {
        Rule::Acl(_) => Some(d.allowed),
        Rule::NoMatchingAcl => None,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn find_result_implication() {
    for op in [Op::Describe, Op::Read, Op::Write, Op::Delete, Op::Alter] {
        assert_eq!(
            find(
                foo_acl(op, Perm::Allow),
                "bob",
                Op::Describe,
                Rt::Topic,
                "foo_bar"
            ),
            Some(true)
        );
    }
    assert_eq!(
        find(
            foo_acl(Op::Create, Perm::Allow),
            "bob",
            Op::Describe,
            Rt::Topic,
            "foo_bar"
        ),
        None
    );
    for op in [Op::Read, Op::Write, Op::Delete, Op::Alter] {
        assert_eq!(
            find(
                foo_acl(op, Perm::Deny),
                "bob",
                Op::Describe,
                Rt::Topic,
                "foo_bar"
            ),
            None
        );
    }
    assert_eq!(
        find(
            foo_acl(Op::Describe, Perm::Deny),
            "bob",
            Op::Describe,
            Rt::Topic,
            "foo_bar"
        ),
        Some(false)
    );
    for op in [Op::DescribeConfigs, Op::AlterConfigs] {
        assert_eq!(
            find(
                foo_acl(op, Perm::Allow),
                "bob",
                Op::DescribeConfigs,
                Rt::Topic,
                "foo_bar"
            ),
            Some(true)
        );
    }
    assert_eq!(
        find(
            foo_acl(Op::AlterConfigs, Perm::Deny),
            "bob",
            Op::DescribeConfigs,
            Rt::Topic,
            "foo_bar"
        ),
        None
    );
    assert_eq!(
        find(
            foo_acl(Op::AlterConfigs, Perm::Deny),
            "bob",
            Op::AlterConfigs,
            Rt::Topic,
            "foo_bar"
        ),
        Some(false)
    );
}

#[test]
fn find_result_principal_matching() {
    assert_eq!(
        find(
            foo_acl(Op::Read, Perm::Allow),
            "bob",
            Op::Read,
            Rt::Topic,
            "foo_bar"
        ),
        Some(true)
    );
    assert_eq!(
        find(
            foo_acl(Op::Read, Perm::Allow),
            "alice",
            Op::Read,
            Rt::Topic,
            "foo_bar"
        ),
        None
    );
    assert_eq!(
        find(
            bar_acl(Op::Read, Perm::Deny),
            "alice",
            Op::Read,
            Rt::Group,
            "bar"
        ),
        Some(false)
    );
}

#[test]
fn simple_authorizations() {
    let a = authz(&[
        foo_acl(Op::Read, Perm::Allow),
        foo_acl(Op::Write, Perm::Allow),
        bar_acl(Op::DescribeConfigs, Perm::Allow),
        bar_acl(Op::AlterConfigs, Perm::Allow),
    ]);
    assert!(allowed(&a, "bob", ANY_HOST, Op::Read, Rt::Topic, "foo_"));
    assert!(allowed(
        &a,
        "fred",
        ANY_HOST,
        Op::AlterConfigs,
        Rt::Group,
        "bar"
    ));
}

#[test]
fn deny_precedence_with_operation_all() {
    let a = authz(&[
        acl(
            Rt::Topic,
            "foo",
            Pat::Literal,
            "User:alice",
            "*",
            Op::All,
            Perm::Deny,
        ),
        acl(
            Rt::Topic,
            "foo",
            Pat::Prefixed,
            "User:alice",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "foo",
            Pat::Literal,
            "User:*",
            "*",
            Op::All,
            Perm::Deny,
        ),
        acl(
            Rt::Topic,
            "foo",
            Pat::Prefixed,
            "User:*",
            "*",
            Op::Describe,
            Perm::Allow,
        ),
    ]);
    let alice: Vec<bool> = [
        (Op::Write, "foo"),
        (Op::Read, "foo"),
        (Op::Describe, "foo"),
        (Op::Read, "foobar"),
    ]
    .iter()
    .map(|(op, name)| allowed(&a, "alice", ANY_HOST, *op, Rt::Topic, name))
    .collect();
    assert_eq!(alice, [false, false, false, true]);
    let bob: Vec<bool> = [
        (Op::Describe, "foo"),
        (Op::Read, "foo"),
        (Op::Write, "foo"),
        (Op::Describe, "foobaz"),
        (Op::Read, "foobaz"),
    ]
    .iter()
    .map(|(op, name)| allowed(&a, "bob", ANY_HOST, *op, Rt::Topic, name))
    .collect();
    assert_eq!(bob, [false, false, false, true, false]);
}

#[test]
fn topic_acl_with_operation_all() {
    let a = authz(&[
        acl(
            Rt::Topic,
            "foo",
            Pat::Literal,
            "User:*",
            "*",
            Op::All,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "bar",
            Pat::Prefixed,
            "User:alice",
            "*",
            Op::All,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "baz",
            Pat::Literal,
            "User:bob",
            "*",
            Op::All,
            Perm::Allow,
        ),
    ]);
    let check = |user: &str, actions: [(Op, &str); 3]| -> Vec<bool> {
        actions
            .iter()
            .map(|(op, n)| allowed(&a, user, ANY_HOST, *op, Rt::Topic, n))
            .collect()
    };
    assert_eq!(
        check(
            "alice",
            [
                (Op::Write, "foo"),
                (Op::DescribeConfigs, "bar"),
                (Op::Describe, "baz")
            ]
        ),
        [true, true, false]
    );
    assert_eq!(
        check(
            "bob",
            [(Op::Write, "foo"), (Op::Read, "bar"), (Op::Describe, "baz")]
        ),
        [true, false, true]
    );
    assert_eq!(
        check(
            "malory",
            [(Op::Describe, "foo"), (Op::Write, "bar"), (Op::Read, "baz")]
        ),
        [true, false, false]
    );
}

#[test]
fn host_address_acls() {
    let (host1, host2, local) = ("192.168.1.1", "192.168.1.2", "127.0.0.1");
    let a = authz(&[
        acl(
            Rt::Topic,
            "foo",
            Pat::Literal,
            "User:alice",
            host1,
            Op::Read,
            Perm::Deny,
        ),
        acl(
            Rt::Topic,
            "foo",
            Pat::Literal,
            "User:alice",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "bar",
            Pat::Literal,
            "User:bob",
            host2,
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "bar",
            Pat::Literal,
            "User:*",
            local,
            Op::Describe,
            Perm::Allow,
        ),
    ]);
    let check = |user: &str, host: &str| -> Vec<bool> {
        [(Op::Read, "foo"), (Op::Read, "bar"), (Op::Describe, "bar")]
            .iter()
            .map(|(op, n)| allowed(&a, user, host, *op, Rt::Topic, n))
            .collect()
    };
    assert_eq!(check("alice", local), [true, false, true]);
    assert_eq!(check("alice", host1), [false, false, false]);
    assert_eq!(check("alice", host2), [true, false, false]);
    assert_eq!(check("bob", local), [false, false, true]);
    assert_eq!(check("bob", host1), [false, false, false]);
    assert_eq!(check("bob", host2), [false, true, true]);
}

#[test]
fn authorization_with_many_acls() {
    let a = authz(&many_acls());
    assert!(allowed(&a, "bob", ANY_HOST, Op::Read, Rt::Topic, "green1"));
    assert!(!allowed(&a, "bob", ANY_HOST, Op::Write, Rt::Group, "wheel"));
    assert!(!allowed(&a, "bob", ANY_HOST, Op::Read, Rt::Topic, "alpha"));
    assert!(allowed(
        &a,
        "bob",
        ANY_HOST,
        Op::Write,
        Rt::Group,
        "arbitrary"
    ));
    assert!(!allowed(&a, "bob", ANY_HOST, Op::Read, Rt::Topic, "ala"));
}

/// Kafka's testDenyAuditLogging / testAllowAuditLogging: the rule text.
#[test]
fn decisions_name_the_rule_like_kafkas_audit_log() {
    let a = authz(&many_acls());
    let d = a.authorize("User:bob", "127.0.0.1", Op::Read, Rt::Topic, "alpha");
    assert_eq!(
        d.to_string(),
        "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=alp, patternType=PREFIXED, \
         principal=User:bob, host=*, operation=READ, permissionType=DENY))"
    );
    let d = a.authorize("User:bob", "127.0.0.1", Op::Read, Rt::Topic, "green1");
    assert_eq!(
        d.to_string(),
        "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=green, patternType=PREFIXED, \
         principal=User:bob, host=*, operation=READ, permissionType=ALLOW))"
    );
    let d = a.authorize("User:superman", "127.0.0.1", Op::Read, Rt::Topic, "alpha");
    assert_eq!(
        (d.allowed, d.rule, d.to_string()),
        (true, Rule::SuperUser, "SuperUser".to_string())
    );
    let d = a.authorize("User:alice", "127.0.0.1", Op::Read, Rt::Topic, "green1");
    assert_eq!((d.allowed, d.rule), (false, Rule::NoMatchingAcl));
    assert_eq!(d.to_string(), "DefaultDeny");
    let d = a.authorize("User:alice", "127.0.0.1", Op::Read, Rt::Topic, "zebra");
    assert_eq!(
        (d.allowed, d.rule, d.to_string()),
        (false, Rule::NoAclFound, "DefaultDeny".to_string())
    );
    let open = authz_with(&many_acls(), &[], true);
    let d = open.authorize("User:alice", "127.0.0.1", Op::Read, Rt::Topic, "zebra");
    assert_eq!(
        (d.allowed, d.rule, d.to_string()),
        (true, Rule::NoAclFound, "DefaultAllow".to_string())
    );
}

#[test]
fn prefix_acls() {
    let a = authz(&[
        acl(
            Rt::Topic,
            "fooa",
            Pat::Prefixed,
            "User:alice",
            "*",
            Op::All,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "foobar",
            Pat::Literal,
            "User:bob",
            "*",
            Op::All,
            Perm::Allow,
        ),
        acl(
            Rt::Topic,
            "f",
            Pat::Prefixed,
            "User:bob",
            "*",
            Op::All,
            Perm::Allow,
        ),
    ]);
    assert!(allowed(
        &a,
        "bob",
        ANY_HOST,
        Op::Write,
        Rt::Topic,
        "foobarr"
    ));
    assert!(!allowed(&a, "bob", ANY_HOST, Op::Read, Rt::Topic, "goobar"));
    assert!(allowed(&a, "bob", ANY_HOST, Op::Read, Rt::Topic, "fooa"));
    assert!(allowed(
        &a,
        "alice",
        ANY_HOST,
        Op::Describe,
        Rt::Topic,
        "fooa"
    ));
    assert!(!allowed(&a, "alice", ANY_HOST, Op::Write, Rt::Topic, "bar"));
    assert!(!allowed(&a, "alice", ANY_HOST, Op::Read, Rt::Topic, "baz"));
}

#[test]
fn allow_everyone_if_no_acl_found() {
    let acls = [acl(
        Rt::Topic,
        "topic1",
        Pat::Literal,
        "User:Alice",
        "*",
        Op::Read,
        Perm::Allow,
    )];
    let on = authz_with(&acls, &["User:alice", "User:chris"], true);
    assert!(!allowed(
        &on,
        "Bob",
        ANY_HOST,
        Op::Read,
        Rt::Topic,
        "topic1"
    ));
    assert!(allowed(&on, "Bob", ANY_HOST, Op::Read, Rt::Topic, "topic2"));
    let off = authz_with(&acls, &["User:alice", "User:chris"], false);
    assert!(!allowed(
        &off,
        "Bob",
        ANY_HOST,
        Op::Read,
        Rt::Topic,
        "topic1"
    ));
    assert!(!allowed(
        &off,
        "Bob",
        ANY_HOST,
        Op::Read,
        Rt::Topic,
        "topic2"
    ));
    // An ACL for someone else on the resource is "an ACL found".
    assert!(!allowed(
        &on,
        "Bob",
        ANY_HOST,
        Op::Write,
        Rt::Topic,
        "topic1"
    ));
    // Empty ACLs: fail closed by default (testNoAclFound / testNoAclFoundOverride).
    assert!(!allowed(
        &authz(&[]),
        "alice",
        ANY_HOST,
        Op::Read,
        Rt::Topic,
        "t"
    ));
    assert!(allowed(
        &authz_with(&[], &[], true),
        "alice",
        ANY_HOST,
        Op::Read,
        Rt::Topic,
        "t"
    ));
}
