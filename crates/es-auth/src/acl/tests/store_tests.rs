//! The stored set: create / delete / describe as Kafka's controller and AclCache do,
//! the per-request limits, serde.

use std::collections::HashSet;

use super::*;

fn set(bindings: Vec<AclBinding>) -> HashSet<AclBinding> {
    bindings.into_iter().collect()
}

#[test]
fn create_is_idempotent_and_validated() {
    let mut acls = Acls::new();
    let b = acl(
        Rt::Topic,
        "t",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    );
    assert_eq!(acls.create(b.clone()), Ok(true));
    assert_eq!(acls.create(b.clone()), Ok(false));
    assert_eq!(acls.len(), 1);
    assert!(acls.contains(&b));
    let bad = AclBinding {
        principal: "a".into(),
        ..b.clone()
    };
    assert!(acls.create(bad).is_err());
    assert_eq!(acls.len(), 1);
    assert!(acls.remove(&b));
    assert!(!acls.remove(&b));
    assert!(acls.is_empty());
}

/// Kafka's AuthorizerTest.testAclsFilter: describe and delete with MATCH, exact and
/// ANY filters; a binding matched by two filters is reported by both.
#[test]
fn acls_filter_scenario() {
    let principal = "User:alice";
    let acl1 = acl(
        Rt::Topic,
        "foo-1",
        Pat::Literal,
        principal,
        "*",
        Op::Read,
        Perm::Allow,
    );
    let acl2 = acl(
        Rt::Topic,
        "foo-1",
        Pat::Literal,
        principal,
        "192.168.0.1",
        Op::Write,
        Perm::Allow,
    );
    let acl3 = acl(
        Rt::Topic,
        "bar-2",
        Pat::Literal,
        principal,
        "*",
        Op::Describe,
        Perm::Allow,
    );
    let acl4 = acl(
        Rt::Topic,
        "bar-",
        Pat::Prefixed,
        "User:*",
        "*",
        Op::Read,
        Perm::Allow,
    );
    let mut acls = acls_of(&[acl1.clone(), acl2.clone(), acl3.clone(), acl4.clone()]);

    assert_eq!(
        set(acls.describe(&AclBindingFilter::ANY)),
        set(vec![acl1.clone(), acl2.clone(), acl3.clone(), acl4.clone()])
    );
    let resource1 = filter(
        Rt::Topic,
        Some("foo-1"),
        Pat::Literal,
        None,
        None,
        Op::Any,
        Perm::Any,
    );
    assert_eq!(
        set(acls.describe(&resource1)),
        set(vec![acl1.clone(), acl2.clone()])
    );
    let prefixed = filter(
        Rt::Topic,
        Some("bar-"),
        Pat::Prefixed,
        None,
        None,
        Op::Any,
        Perm::Any,
    );
    assert_eq!(acls.describe(&prefixed), vec![acl4.clone()]);
    let matching = filter(
        Rt::Any,
        Some("bar-2"),
        Pat::Match,
        None,
        None,
        Op::Any,
        Perm::Any,
    );
    assert_eq!(
        set(acls.describe(&matching)),
        set(vec![acl3.clone(), acl4.clone()])
    );

    let filters = [
        matching,
        acl1.to_filter(),
        filter(
            Rt::Topic,
            Some("bar-2"),
            Pat::Literal,
            None,
            None,
            Op::Any,
            Perm::Any,
        ),
        filter(
            Rt::Topic,
            Some("baz"),
            Pat::Any,
            None,
            None,
            Op::Any,
            Perm::Any,
        ),
    ];
    let results = acls.delete_batch(&filters);
    let results: Vec<HashSet<AclBinding>> =
        results.into_iter().map(|r| set(r.expect("ok"))).collect();
    assert_eq!(results[0], set(vec![acl3.clone(), acl4.clone()]));
    assert_eq!(results[1], set(vec![acl1.clone()]));
    assert_eq!(results[2], set(vec![acl3.clone()]));
    assert!(results[3].is_empty());
    assert_eq!(acls.describe(&AclBindingFilter::ANY), vec![acl2]);
}

/// Kafka's AuthorizerTest.testGetAclsPrincipal and the wildcard / prefixed
/// add-and-delete tests: filters compare principals and names as exact strings.
#[test]
fn describe_by_principal_and_pattern() {
    let specific = acl(
        Rt::Topic,
        "foo-x",
        Pat::Literal,
        "User:alice",
        "*",
        Op::Write,
        Perm::Allow,
    );
    let mut acls = acls_of(std::slice::from_ref(&specific));
    let by = |p: &str| filter(Rt::Any, None, Pat::Any, Some(p), None, Op::Any, Perm::Any);
    assert!(acls.describe(&by("User:*")).is_empty());
    assert_eq!(acls.describe(&by("User:alice")).len(), 1);
    assert_eq!(
        acls.delete(&filter(
            Rt::Topic,
            Some("foo-x"),
            Pat::Literal,
            None,
            None,
            Op::Any,
            Perm::Any
        ))
        .len(),
        1
    );
    let wildcard = acl(
        Rt::Topic,
        "foo-x",
        Pat::Literal,
        "User:*",
        "*",
        Op::Write,
        Perm::Allow,
    );
    acls.create(wildcard).expect("ok");
    assert_eq!(acls.describe(&by("User:*")).len(), 1);
    assert!(acls.describe(&by("User:alice")).is_empty());

    let read = |name: &str, pat| acl(Rt::Topic, name, pat, "User:*", "*", Op::Read, Perm::Allow);
    let write = |name: &str, pat| acl(Rt::Topic, name, pat, "User:*", "*", Op::Write, Perm::Allow);
    let deny = |name: &str, pat| acl(Rt::Topic, name, pat, "User:*", "*", Op::Read, Perm::Deny);
    let on = |name: &str, pat| filter(Rt::Topic, Some(name), pat, None, None, Op::Any, Perm::Any);
    for (name, pat) in [
        ("*", Pat::Literal),
        ("foo", Pat::Prefixed),
        ("foo-1", Pat::Literal),
    ] {
        let mut acls = acls_of(&[read(name, pat), write(name, pat)]);
        acls.create(write(name, pat)).expect("ok");
        acls.create(deny(name, pat)).expect("ok");
        assert_eq!(acls.describe(&on(name, pat)).len(), 3);
        for (other, other_pat) in [
            ("*", Pat::Literal),
            ("foo", Pat::Prefixed),
            ("foo-1", Pat::Literal),
        ] {
            if (other, other_pat) != (name, pat) {
                assert!(
                    acls.describe(&on(other, other_pat)).is_empty(),
                    "{other} vs {name}"
                );
            }
        }
        assert_eq!(
            acls.delete(&read(name, pat).to_filter()),
            vec![read(name, pat)]
        );
        assert_eq!(acls.len(), 2);
        assert_eq!(acls.delete(&on(name, pat)).len(), 2);
        assert!(acls.is_empty());
    }
}

#[test]
fn plan_create_results() {
    let acls = acls_of(&[acl(
        Rt::Topic,
        "old",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    )]);
    let new = acl(
        Rt::Topic,
        "new",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    );
    let old = acl(
        Rt::Topic,
        "old",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    );
    let bad = AclBinding {
        resource_name: String::new(),
        ..new.clone()
    };
    let plan = acls.plan_create(&[new.clone(), old, bad, new.clone()]);
    assert_eq!(
        plan.results,
        vec![
            Ok(true),
            Ok(false),
            Err(AclError::invalid_request("Invalid empty resource name")),
            Ok(false)
        ]
    );
    assert_eq!(plan.added, vec![new]);
}

#[test]
fn create_limit_is_kafkas_batch_limit() {
    let many = |n: usize| -> Vec<AclBinding> {
        (0..n)
            .map(|i| {
                acl(
                    Rt::Topic,
                    &format!("t{i}"),
                    Pat::Literal,
                    "User:a",
                    "*",
                    Op::Read,
                    Perm::Allow,
                )
            })
            .collect()
    };
    // Exactly the limit is fine, and duplicates do not count.
    let mut acls = Acls::new();
    let mut bindings = many(ACL_CHANGES_PER_REQUEST_MAX);
    bindings.extend(many(5));
    let results = acls.create_batch(&bindings);
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(acls.len(), ACL_CHANGES_PER_REQUEST_MAX);
    // Bindings already stored do not count either.
    let results = acls.create_batch(&many(ACL_CHANGES_PER_REQUEST_MAX + 1));
    assert_eq!(results.iter().filter(|r| **r == Ok(true)).count(), 1);

    // One more than the limit fails the whole request: handler errors keep theirs,
    // everything else (controller errors included) is POLICY_VIOLATION.
    let mut acls = Acls::new();
    let mut bindings = many(ACL_CHANGES_PER_REQUEST_MAX + 1);
    bindings.push(acl(
        Rt::Cluster,
        "c",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    ));
    bindings.push(acl(
        Rt::Topic,
        "t0",
        Pat::Literal,
        "no-colon",
        "*",
        Op::Read,
        Perm::Allow,
    ));
    let results = acls.create_batch(&bindings);
    assert!(acls.is_empty());
    let n = results.len();
    assert!(results[..n - 2]
        .iter()
        .all(|r| *r == Err(AclError::excessively_large_batch())));
    assert_eq!(
        results[n - 2],
        Err(AclError::invalid_request(
            "The only valid name for the CLUSTER resource is kafka-cluster"
        ))
    );
    assert_eq!(results[n - 1], Err(AclError::excessively_large_batch()));
}

#[test]
fn delete_limit_fails_every_filter() {
    let bindings: Vec<AclBinding> = (0..=ACL_CHANGES_PER_REQUEST_MAX)
        .map(|i| {
            acl(
                Rt::Group,
                &format!("g{i}"),
                Pat::Literal,
                "User:a",
                "*",
                Op::Read,
                Perm::Allow,
            )
        })
        .collect();
    let mut acls = Acls::try_from(bindings).expect("valid");
    let groups = filter(Rt::Group, None, Pat::Any, None, None, Op::Any, Perm::Any);
    let unknown = filter(Rt::Unknown, None, Pat::Any, None, None, Op::Any, Perm::Any);
    let results = acls.delete_batch(&[unknown.clone(), groups.clone()]);
    assert_eq!(results, vec![Err(AclError::unknown_server_error()); 2]);
    assert_eq!(acls.len(), ACL_CHANGES_PER_REQUEST_MAX + 1);
    // One fewer is fine; the same binding matched twice counts once.
    let one = acls.iter().next().cloned().expect("one");
    assert!(acls.remove(&one));
    let results = acls.delete_batch(&[groups.clone(), unknown, groups]);
    assert_eq!(
        results[0].as_ref().map(Vec::len),
        Ok(ACL_CHANGES_PER_REQUEST_MAX)
    );
    assert_eq!(
        results[1],
        Err(AclError::invalid_request("Unknown patternFilter."))
    );
    assert_eq!(
        results[2].as_ref().map(Vec::len),
        Ok(ACL_CHANGES_PER_REQUEST_MAX)
    );
    assert!(acls.is_empty());
}

#[test]
fn serde_round_trip_and_refusals() {
    let acls = acls_of(&[
        acl(
            Rt::Topic,
            "t",
            Pat::Literal,
            "User:a",
            "*",
            Op::Read,
            Perm::Allow,
        ),
        acl(
            Rt::Group,
            "g-",
            Pat::Prefixed,
            "User:*",
            "10.0.0.1",
            Op::All,
            Perm::Deny,
        ),
        acl(
            Rt::Cluster,
            "kafka-cluster",
            Pat::Literal,
            "User:b",
            "*",
            Op::TwoPhaseCommit,
            Perm::Allow,
        ),
        acl(
            Rt::TransactionalId,
            "\u{10000}\u{ffff}",
            Pat::Literal,
            "User:é",
            "*",
            Op::Write,
            Perm::Allow,
        ),
    ]);
    let json = serde_json::to_string(&acls).expect("ser");
    let back: Acls = serde_json::from_str(&json).expect("de");
    assert_eq!(back, acls);
    assert_eq!(
        back.iter().collect::<Vec<_>>(),
        acls.iter().collect::<Vec<_>>()
    );
    assert!(json.starts_with('['));

    // Duplicates collapse.
    let b = acl(
        Rt::Topic,
        "t",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    );
    let dup = serde_json::to_string(&vec![b.clone(), b]).expect("ser");
    assert_eq!(serde_json::from_str::<Acls>(&dup).expect("de").len(), 1);
    // A binding Kafka would refuse is refused.
    let bad = serde_json::to_string(&vec![acl(
        Rt::Any,
        "t",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    )])
    .expect("ser");
    let e = serde_json::from_str::<Acls>(&bad).expect_err("refused");
    assert!(e.to_string().contains("Invalid resourceType ANY"), "{e}");
    assert!(serde_json::from_str::<Acls>(r#"[{"resource_type":"TOPIC"}]"#).is_err());
    assert!(serde_json::from_str::<Acls>(r#"[{"resource_type":"NOPE","resource_name":"t","pattern_type":"LITERAL","principal":"User:a","host":"*","operation":"READ","permission_type":"ALLOW"}]"#).is_err());
}

#[test]
fn iteration_is_kafka_order() {
    let b1 = acl(
        Rt::Topic,
        "b",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    );
    let b2 = acl(
        Rt::Topic,
        "a",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    );
    let b3 = acl(
        Rt::Topic,
        "a",
        Pat::Literal,
        "User:a",
        "*",
        Op::Write,
        Perm::Allow,
    );
    let acls = acls_of(&[b3.clone(), b2.clone(), b1.clone()]);
    let order: Vec<&AclBinding> = (&acls).into_iter().collect();
    assert_eq!(order, vec![&b1, &b2, &b3]);
    assert_eq!(Vec::<AclBinding>::from(acls), vec![b1, b2, b3]);
}

/// The CreateAcls pipeline as a broker runs it: parse check, binding construction,
/// then per-binding validation and the controller's deduplication.
#[test]
fn create_acls_pipeline() {
    let raw = |rt: i8, name: &str, pat: i8, principal: &str| AclCreation {
        resource_type: rt,
        resource_name: name.into(),
        pattern_type: pat,
        principal: principal.into(),
        host: "*".into(),
        operation: 3,
        permission_type: 3,
    };
    let creations = [
        raw(2, "t", 3, "User:a"),
        raw(4, "other", 3, "User:a"),
        raw(2, "", 4, "User:a"),
        raw(3, "g", 4, "a"),
        raw(9, "x", 3, "User:a"),
        raw(2, "t", 3, "User:a"),
    ];
    assert_eq!(AclCreation::parse_error(3, &creations), None);
    let bindings: Option<Vec<AclBinding>> = creations.iter().map(AclCreation::to_binding).collect();
    let bindings = bindings.expect("no ANY or MATCH");
    let mut acls = Acls::new();
    let plan = acls.plan_create(&bindings);
    let pairs: Vec<(i16, Option<String>)> = plan
        .results
        .iter()
        .map(|r| match r {
            Ok(_) => (error_code::NONE, None),
            Err(e) => (e.error_code, e.message.clone()),
        })
        .collect();
    let invalid = |m: &str| (error_code::INVALID_REQUEST, Some(m.to_string()));
    assert_eq!(
        pairs,
        vec![
            (0, None),
            invalid("The only valid name for the CLUSTER resource is kafka-cluster"),
            invalid("Invalid empty resource name"),
            invalid(
                "Could not parse principal from `a` (no colon is present separating the \
                 principal type from the principal name)"
            ),
            invalid("Invalid resourceType UNKNOWN"),
            (0, None),
        ]
    );
    assert_eq!(plan.added.len(), 1);
    assert_eq!(
        acls.create_batch(&bindings)
            .iter()
            .filter(|r| r.is_ok())
            .count(),
        2
    );
    assert_eq!(acls.len(), 1);
    // One ANY fails the whole request.
    assert_eq!(raw(1, "t", 3, "User:a").to_binding(), None);
}
