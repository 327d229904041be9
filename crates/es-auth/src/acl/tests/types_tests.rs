//! Enums, Java string order, binding order and display, and filter matching
//! (Kafka's ResourcePatternFilterTest, AccessControlEntryFilter, findIndefiniteField).

use std::cmp::Ordering;

use super::*;

#[test]
fn enum_codes_and_names_are_kafkas() {
    let rts: Vec<(i8, &str)> = Rt::VALUES.iter().map(|v| (v.code(), v.name())).collect();
    assert_eq!(
        rts,
        [
            (0, "UNKNOWN"),
            (1, "ANY"),
            (2, "TOPIC"),
            (3, "GROUP"),
            (4, "CLUSTER"),
            (5, "TRANSACTIONAL_ID"),
            (6, "DELEGATION_TOKEN"),
            (7, "USER")
        ]
    );
    let pats: Vec<(i8, &str)> = Pat::VALUES.iter().map(|v| (v.code(), v.name())).collect();
    assert_eq!(
        pats,
        [
            (0, "UNKNOWN"),
            (1, "ANY"),
            (2, "MATCH"),
            (3, "LITERAL"),
            (4, "PREFIXED")
        ]
    );
    let ops: Vec<&str> = Op::VALUES.iter().map(|v| v.name()).collect();
    assert_eq!(
        ops,
        [
            "UNKNOWN",
            "ANY",
            "ALL",
            "READ",
            "WRITE",
            "CREATE",
            "DELETE",
            "ALTER",
            "DESCRIBE",
            "CLUSTER_ACTION",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "IDEMPOTENT_WRITE",
            "CREATE_TOKENS",
            "DESCRIBE_TOKENS",
            "TWO_PHASE_COMMIT"
        ]
    );
    for (i, op) in Op::VALUES.iter().enumerate() {
        assert_eq!(op.code() as usize, i);
    }
    let perms: Vec<(i8, &str)> = Perm::VALUES.iter().map(|v| (v.code(), v.name())).collect();
    assert_eq!(
        perms,
        [(0, "UNKNOWN"), (1, "ANY"), (2, "DENY"), (3, "ALLOW")]
    );
    assert_eq!(Rt::TransactionalId.pascal_name(), "TransactionalId");
    assert_eq!(Rt::DelegationToken.pascal_name(), "DelegationToken");
}

#[test]
fn from_code_round_trips_and_refuses_undefined_codes() {
    for code in i8::MIN..=i8::MAX {
        match Op::from_code(code) {
            Some(op) => assert_eq!(op.code(), code),
            None => assert_eq!(Op::from_code_or_unknown(code), Op::Unknown),
        }
        assert_eq!(Rt::from_code(code).is_some(), (0..=7).contains(&code));
        assert_eq!(Pat::from_code(code).is_some(), (0..=4).contains(&code));
        assert_eq!(Perm::from_code(code).is_some(), (0..=3).contains(&code));
        assert_eq!(Op::from_code(code).is_some(), (0..=15).contains(&code));
    }
    assert_eq!(Pat::from_name("PREFIXED"), Some(Pat::Prefixed));
    assert_eq!(Pat::from_name("prefixed"), None);
}

#[test]
fn enums_serialise_as_kafka_names() {
    assert_eq!(
        serde_json::to_string(&Rt::TransactionalId).expect("ser"),
        "\"TRANSACTIONAL_ID\""
    );
    assert_eq!(
        serde_json::to_string(&Op::TwoPhaseCommit).expect("ser"),
        "\"TWO_PHASE_COMMIT\""
    );
    assert_eq!(
        serde_json::from_str::<Perm>("\"ALLOW\"").expect("de"),
        Perm::Allow
    );
    assert!(serde_json::from_str::<Perm>("\"allow\"").is_err());
    let b = acl(
        Rt::Topic,
        "t",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    );
    assert_eq!(
        serde_json::to_string(&b).expect("ser"),
        r#"{"resource_type":"TOPIC","resource_name":"t","pattern_type":"LITERAL","principal":"User:a","host":"*","operation":"READ","permission_type":"ALLOW"}"#
    );
}

#[test]
fn java_cmp_is_utf16_order() {
    let cases = [
        "",
        "a",
        "ab",
        "b",
        "*",
        "é",
        "\u{7ff}",
        "\u{800}",
        "\u{d7ff}",
        "\u{e000}",
        "\u{ffff}",
        "\u{10000}",
        "\u{1f600}",
        "\u{10ffff}",
        "a\u{ffff}",
        "a\u{10000}",
        "z",
    ];
    for a in cases {
        for b in cases {
            let utf16 = a.encode_utf16().cmp(b.encode_utf16());
            assert_eq!(java_cmp(a, b), utf16, "{a:?} vs {b:?}");
        }
    }
    // The one place Java and Rust disagree.
    assert_eq!("\u{ffff}".cmp("\u{10000}"), Ordering::Less);
    assert_eq!(java_cmp("\u{ffff}", "\u{10000}"), Ordering::Greater);
}

#[test]
fn bindings_sort_like_standard_acl() {
    // Kafka's findAclRule comment: TOPIC names in reverse, LITERAL before PREFIXED.
    let b = |name: &str, pat| acl(Rt::Topic, name, pat, "User:a", "*", Op::Read, Perm::Allow);
    let acls = acls_of(&[
        b("f", Pat::Prefixed),
        b("eeee", Pat::Literal),
        b("foobar", Pat::Prefixed),
        b("gar", Pat::Prefixed),
        b("foo", Pat::Prefixed),
        b("foob", Pat::Literal),
        b("fa", Pat::Prefixed),
        b("fb", Pat::Prefixed),
        b("foo", Pat::Literal),
        acl(
            Rt::Group,
            "zzz",
            Pat::Literal,
            "User:a",
            "*",
            Op::Read,
            Perm::Allow,
        ),
    ]);
    let order: Vec<String> = acls
        .iter()
        .map(|b| format!("{}:{}:{}", b.resource_type, b.resource_name, b.pattern_type))
        .collect();
    assert_eq!(
        order,
        [
            "TOPIC:gar:PREFIXED",
            "TOPIC:foobar:PREFIXED",
            "TOPIC:foob:LITERAL",
            "TOPIC:foo:LITERAL",
            "TOPIC:foo:PREFIXED",
            "TOPIC:fb:PREFIXED",
            "TOPIC:fa:PREFIXED",
            "TOPIC:f:PREFIXED",
            "TOPIC:eeee:LITERAL",
            "GROUP:zzz:LITERAL",
        ]
    );
}

#[test]
fn binding_and_filter_display_like_kafka() {
    let b = acl(
        Rt::Topic,
        "alp",
        Pat::Prefixed,
        "User:bob",
        "*",
        Op::Read,
        Perm::Deny,
    );
    assert_eq!(
        b.to_string(),
        "(pattern=ResourcePattern(resourceType=TOPIC, name=alp, patternType=PREFIXED), \
         entry=(principal=User:bob, host=*, operation=READ, permissionType=DENY))"
    );
    assert_eq!(
        b.standard_acl_string(),
        "StandardAcl(resourceType=TOPIC, resourceName=alp, patternType=PREFIXED, \
         principal=User:bob, host=*, operation=READ, permissionType=DENY)"
    );
    assert_eq!(
        AclBindingFilter::ANY.to_string(),
        "(patternFilter=ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY), \
         entryFilter=(principal=<any>, host=<any>, operation=ANY, permissionType=ANY))"
    );
}

/// Kafka's ResourcePatternFilterTest, case by case.
#[test]
fn resource_pattern_filter_cases() {
    let m = |frt, fname: Option<&str>, fpat, rt, name: &str, pat| {
        let f = filter(frt, fname, fpat, None, None, Op::Any, Perm::Any);
        f.matches(&acl(rt, name, pat, "User:a", "*", Op::Read, Perm::Allow))
    };
    let (t, g) = (Rt::Topic, Rt::Group);
    let (l, p) = (Pat::Literal, Pat::Prefixed);
    assert!(filter(Rt::Unknown, None, l, None, None, Op::Any, Perm::Any).is_unknown());
    assert!(filter(g, None, Pat::Unknown, None, None, Op::Any, Perm::Any).is_unknown());
    assert!(!m(t, Some("Name"), l, g, "Name", l));
    assert!(!m(t, Some("Different"), p, t, "Name", p));
    assert!(!m(t, Some("NAME"), l, t, "Name", l));
    assert!(!m(t, Some("Name"), l, t, "Name", p));
    assert!(m(Rt::Any, Some("Name"), p, t, "Name", p));
    assert!(m(t, None, p, t, "Name", p));
    assert!(m(t, None, Pat::Any, t, "Name", p));
    assert!(m(t, None, Pat::Match, t, "Name", p));
    assert!(m(t, Some("Name"), l, t, "Name", l));
    assert!(m(t, Some("Name"), Pat::Any, t, "Name", l));
    assert!(m(t, Some("Name"), Pat::Match, t, "Name", l));
    assert!(!m(t, Some("Name-something"), Pat::Match, t, "Name", l));
    assert!(m(t, Some("*"), l, t, "*", l));
    assert!(!m(t, Some("Name"), l, t, "*", l));
    assert!(!m(t, Some("*"), l, t, "Name", l));
    assert!(!m(t, Some("Name"), Pat::Any, t, "*", l));
    assert!(m(t, Some("Name"), Pat::Match, t, "*", l));
    assert!(m(t, Some("Name"), p, t, "Name", p));
    assert!(!m(t, Some("Name"), p, t, "Name-something", p));
    assert!(!m(t, Some("Name-something"), p, t, "Name", p));
    assert!(!m(t, Some("Name-something"), Pat::Any, t, "Name", p));
    assert!(m(t, Some("Name-something"), Pat::Match, t, "Name", p));
    // An UNKNOWN filter matches no stored binding.
    assert!(!m(Rt::Unknown, None, Pat::Any, t, "Name", p));
    assert!(!m(t, None, Pat::Unknown, t, "Name", p));
}

#[test]
fn entry_filter_matching() {
    let b = acl(
        Rt::Topic,
        "t",
        Pat::Literal,
        "User:bob",
        "10.0.0.1",
        Op::Write,
        Perm::Deny,
    );
    let f = |principal: Option<&str>, host: Option<&str>, op, perm| {
        filter(Rt::Any, None, Pat::Any, principal, host, op, perm).matches(&b)
    };
    assert!(f(None, None, Op::Any, Perm::Any));
    assert!(f(Some("User:bob"), Some("10.0.0.1"), Op::Write, Perm::Deny));
    // Exact strings: the wildcard principal and host are not wildcards in a filter.
    assert!(!f(Some("User:*"), None, Op::Any, Perm::Any));
    assert!(!f(None, Some("*"), Op::Any, Perm::Any));
    assert!(!f(Some("user:bob"), None, Op::Any, Perm::Any));
    // No implied operations in a filter.
    assert!(!f(None, None, Op::All, Perm::Any));
    assert!(!f(None, None, Op::Describe, Perm::Any));
    assert!(!f(None, None, Op::Any, Perm::Allow));
    assert!(b.to_filter().matches(&b));
    assert!(AclBindingFilter::from(&b).matches_at_most_one());
}

#[test]
fn find_indefinite_field_messages() {
    let full = || {
        filter(
            Rt::Topic,
            Some("t"),
            Pat::Literal,
            Some("User:a"),
            Some("*"),
            Op::Read,
            Perm::Allow,
        )
    };
    assert_eq!(full().find_indefinite_field(), None);
    let cases: Vec<(AclBindingFilter, &str)> = vec![
        (
            AclBindingFilter {
                resource_type: Rt::Any,
                ..full()
            },
            "Resource type is ANY.",
        ),
        (
            AclBindingFilter {
                resource_type: Rt::Unknown,
                ..full()
            },
            "Resource type is UNKNOWN.",
        ),
        (
            AclBindingFilter {
                resource_name: None,
                ..full()
            },
            "Resource name is NULL.",
        ),
        (
            AclBindingFilter {
                pattern_type: Pat::Match,
                ..full()
            },
            "Resource pattern type is MATCH.",
        ),
        (
            AclBindingFilter {
                pattern_type: Pat::Unknown,
                ..full()
            },
            "Resource pattern type is UNKNOWN.",
        ),
        (
            AclBindingFilter {
                principal: None,
                ..full()
            },
            "Principal is NULL",
        ),
        (
            AclBindingFilter {
                host: None,
                ..full()
            },
            "Host is NULL",
        ),
        (
            AclBindingFilter {
                operation: Op::Any,
                ..full()
            },
            "Operation is ANY",
        ),
        (
            AclBindingFilter {
                operation: Op::Unknown,
                ..full()
            },
            "Operation is UNKNOWN",
        ),
        (
            AclBindingFilter {
                permission_type: Perm::Any,
                ..full()
            },
            "Permission type is ANY",
        ),
        (
            AclBindingFilter {
                permission_type: Perm::Unknown,
                ..full()
            },
            "Permission type is UNKNOWN",
        ),
    ];
    for (f, expected) in cases {
        assert_eq!(f.find_indefinite_field(), Some(expected), "{f}");
        assert!(!f.matches_at_most_one());
    }
    // Kafka does not count pattern type ANY as indefinite.
    assert_eq!(
        AclBindingFilter {
            pattern_type: Pat::Any,
            ..full()
        }
        .find_indefinite_field(),
        None
    );
    // The pattern part is reported first.
    assert_eq!(
        AclBindingFilter::ANY.find_indefinite_field(),
        Some("Resource type is ANY.")
    );
}
