//! Validation messages (AclControlManagerTest, AclApis, KAFKA-18051) and the
//! request-level checks on raw codes.

use super::*;

fn good() -> AclBinding {
    acl(
        Rt::Topic,
        "t",
        Pat::Literal,
        "User:a",
        "*",
        Op::Read,
        Perm::Allow,
    )
}

fn message(b: &AclBinding) -> String {
    let e = validate_create(b).expect_err("refused");
    assert_eq!(e.error_code, error_code::INVALID_REQUEST, "{b}");
    e.message.expect("message")
}

#[test]
fn validate_create_messages_and_order() {
    assert_eq!(validate_create(&good()), Ok(()));
    let cases: Vec<(AclBinding, &str)> = vec![
        (
            AclBinding {
                resource_type: Rt::Cluster,
                ..good()
            },
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        // The CLUSTER check comes first, even for an empty name.
        (
            AclBinding {
                resource_type: Rt::Cluster,
                resource_name: String::new(),
                ..good()
            },
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (
            AclBinding {
                resource_name: String::new(),
                ..good()
            },
            "Invalid empty resource name",
        ),
        // The handler's empty-name check comes before the controller's enum checks.
        (
            AclBinding {
                resource_name: String::new(),
                resource_type: Rt::Unknown,
                ..good()
            },
            "Invalid empty resource name",
        ),
        (
            AclBinding {
                resource_type: Rt::Unknown,
                ..good()
            },
            "Invalid resourceType UNKNOWN",
        ),
        (
            AclBinding {
                resource_type: Rt::Any,
                ..good()
            },
            "Invalid resourceType ANY",
        ),
        (
            AclBinding {
                pattern_type: Pat::Unknown,
                ..good()
            },
            "Invalid patternType UNKNOWN",
        ),
        (
            AclBinding {
                pattern_type: Pat::Match,
                ..good()
            },
            "Invalid patternType MATCH",
        ),
        (
            AclBinding {
                pattern_type: Pat::Any,
                ..good()
            },
            "Invalid patternType ANY",
        ),
        (
            AclBinding {
                operation: Op::Unknown,
                ..good()
            },
            "Invalid operation UNKNOWN",
        ),
        (
            AclBinding {
                operation: Op::Any,
                ..good()
            },
            "Invalid operation ANY",
        ),
        (
            AclBinding {
                permission_type: Perm::Unknown,
                ..good()
            },
            "Invalid permissionType UNKNOWN",
        ),
        (
            AclBinding {
                permission_type: Perm::Any,
                ..good()
            },
            "Invalid permissionType ANY",
        ),
        (
            AclBinding {
                principal: "alice".into(),
                ..good()
            },
            "Could not parse principal from `alice` (no colon is present separating the \
             principal type from the principal name)",
        ),
        (
            AclBinding {
                principal: String::new(),
                ..good()
            },
            "Could not parse principal from `` (no colon is present separating the \
             principal type from the principal name)",
        ),
        // Resource type before pattern type before operation before permission.
        (
            AclBinding {
                resource_type: Rt::Unknown,
                pattern_type: Pat::Unknown,
                operation: Op::Unknown,
                permission_type: Perm::Unknown,
                principal: "x".into(),
                ..good()
            },
            "Invalid resourceType UNKNOWN",
        ),
        (
            AclBinding {
                operation: Op::Unknown,
                permission_type: Perm::Unknown,
                ..good()
            },
            "Invalid operation UNKNOWN",
        ),
    ];
    for (b, expected) in cases {
        assert_eq!(message(&b), expected);
    }
}

#[test]
fn what_kafka_accepts() {
    // The cluster resource by its name, LITERAL or PREFIXED.
    for pat in [Pat::Literal, Pat::Prefixed] {
        let b = acl(
            Rt::Cluster,
            "kafka-cluster",
            pat,
            "User:a",
            "*",
            Op::Alter,
            Perm::Allow,
        );
        assert_eq!(validate_create(&b), Ok(()));
    }
    // Any operation on any resource type, any host text, odd principals with a colon.
    for rt in &Rt::VALUES[2..] {
        for op in &Op::VALUES[2..] {
            let name = if *rt == Rt::Cluster {
                "kafka-cluster"
            } else {
                "x"
            };
            let b = acl(*rt, name, Pat::Literal, ":", "not a host", *op, Perm::Deny);
            assert_eq!(validate_create(&b), Ok(()), "{b}");
        }
    }
    for principal in ["User:", ":alice", "Group:a:b", "User:*"] {
        assert_eq!(
            validate_create(&AclBinding {
                principal: principal.into(),
                ..good()
            }),
            Ok(())
        );
    }
    // The LITERAL wildcard and a name with a star are ordinary names here.
    assert_eq!(
        validate_create(&AclBinding {
            resource_name: "*".into(),
            ..good()
        }),
        Ok(())
    );
}

#[test]
fn validate_delete_filter_messages() {
    let ok = filter(Rt::Any, None, Pat::Any, None, None, Op::Any, Perm::Any);
    assert_eq!(validate_delete_filter(&ok), Ok(()));
    assert_eq!(
        validate_delete_filter(&AclBindingFilter {
            pattern_type: Pat::Match,
            ..ok.clone()
        }),
        Ok(())
    );
    let cases = [
        (
            AclBindingFilter {
                resource_type: Rt::Unknown,
                ..ok.clone()
            },
            "Unknown patternFilter.",
        ),
        (
            AclBindingFilter {
                pattern_type: Pat::Unknown,
                ..ok.clone()
            },
            "Unknown patternFilter.",
        ),
        (
            AclBindingFilter {
                operation: Op::Unknown,
                ..ok.clone()
            },
            "Unknown entryFilter.",
        ),
        (
            AclBindingFilter {
                permission_type: Perm::Unknown,
                ..ok.clone()
            },
            "Unknown entryFilter.",
        ),
        (
            AclBindingFilter {
                resource_type: Rt::Unknown,
                operation: Op::Unknown,
                ..ok.clone()
            },
            "Unknown patternFilter.",
        ),
    ];
    for (f, expected) in cases {
        assert_eq!(
            validate_delete_filter(&f),
            Err(AclError::invalid_request(expected))
        );
    }
}

fn creation(rt: i8, pat: i8, op: i8, perm: i8) -> AclCreation {
    AclCreation {
        resource_type: rt,
        resource_name: "t".into(),
        pattern_type: pat,
        principal: "User:a".into(),
        host: "*".into(),
        operation: op,
        permission_type: perm,
    }
}

#[test]
fn create_request_codes() {
    let ok = creation(2, 3, 3, 3);
    assert_eq!(AclCreation::parse_error(1, std::slice::from_ref(&ok)), None);
    // Version 0 takes only LITERAL.
    let prefixed = creation(2, 4, 3, 3);
    assert_eq!(
        AclCreation::parse_error(0, &[ok.clone(), prefixed.clone()]),
        Some("Version 0 only supports literal resource pattern types")
    );
    assert_eq!(
        AclCreation::parse_error(1, std::slice::from_ref(&prefixed)),
        None
    );
    // A raw 0 anywhere closes the connection; other undefined codes do not.
    for c in [
        creation(0, 3, 3, 3),
        creation(2, 0, 3, 3),
        creation(2, 3, 0, 3),
        creation(2, 3, 3, 0),
    ] {
        assert_eq!(
            AclCreation::parse_error(3, &[ok.clone(), c]),
            Some("CreatableAcls contain unknown elements")
        );
    }
    assert_eq!(
        AclCreation::parse_error(3, &[creation(99, -3, 42, 17)]),
        None
    );

    // ANY / MATCH fail the whole request (Kafka's constructors throw).
    for c in [
        creation(1, 3, 3, 3),
        creation(2, 1, 3, 3),
        creation(2, 2, 3, 3),
        creation(2, 3, 1, 3),
        creation(2, 3, 3, 1),
    ] {
        assert_eq!(c.to_binding(), None, "{c:?}");
    }
    // Undefined codes become UNKNOWN and are refused per binding.
    let b = creation(99, 3, 3, 3).to_binding().expect("binding");
    assert_eq!(b.resource_type, Rt::Unknown);
    assert_eq!(message(&b), "Invalid resourceType UNKNOWN");
    let b = creation(2, 9, 3, 3).to_binding().expect("binding");
    assert_eq!(message(&b), "Invalid patternType UNKNOWN");
    let b = creation(2, 3, 16, 3).to_binding().expect("binding");
    assert_eq!(message(&b), "Invalid operation UNKNOWN");
    let b = creation(2, 3, 3, -1).to_binding().expect("binding");
    assert_eq!(message(&b), "Invalid permissionType UNKNOWN");
    assert_eq!(ok.to_binding(), Some(good()));
}

fn codes(rt: i8, pat: i8, op: i8, perm: i8) -> AclFilterCodes {
    AclFilterCodes {
        resource_type: rt,
        resource_name: None,
        pattern_type: pat,
        principal: None,
        host: None,
        operation: op,
        permission_type: perm,
    }
}

#[test]
fn filter_request_codes() {
    use FilterApi::{DeleteAcls, DescribeAcls};
    // v0: ANY becomes LITERAL; LITERAL stays; the rest closes the connection.
    for api in [DescribeAcls, DeleteAcls] {
        let f = codes(1, 1, 1, 1).to_filter(0, api).expect("filter");
        assert_eq!(f.pattern_type, Pat::Literal);
        let f = codes(1, 1, 1, 1).to_filter(1, api).expect("filter");
        assert_eq!(f, AclBindingFilter::ANY);
        assert_eq!(
            codes(1, 3, 1, 1)
                .to_filter(0, api)
                .expect("filter")
                .pattern_type,
            Pat::Literal
        );
    }
    assert_eq!(
        codes(1, 4, 1, 1).to_filter(0, DescribeAcls),
        Err("Version 0 only supports literal resource pattern types".to_string())
    );
    assert_eq!(
        codes(1, 2, 1, 1).to_filter(0, DeleteAcls),
        Err(
            "Version 0 does not support pattern type MATCH (only LITERAL and ANY are supported)"
                .to_string()
        )
    );
    for c in [
        codes(0, 1, 1, 1),
        codes(1, 0, 1, 1),
        codes(1, 1, 0, 1),
        codes(1, 1, 1, 0),
    ] {
        assert_eq!(
            c.to_filter(2, DescribeAcls),
            Err("DescribeAclsRequest contains UNKNOWN elements".to_string())
        );
        assert_eq!(
            c.to_filter(2, DeleteAcls),
            Err("Filters contain UNKNOWN elements".to_string())
        );
    }
    // Undefined codes become UNKNOWN: DescribeAcls matches nothing, DeleteAcls refuses.
    let f = codes(42, 1, 1, 1)
        .to_filter(2, DescribeAcls)
        .expect("filter");
    assert_eq!(f.resource_type, Rt::Unknown);
    assert_eq!(
        validate_delete_filter(&f),
        Err(AclError::invalid_request("Unknown patternFilter."))
    );
    let f = codes(1, 1, 99, 1).to_filter(2, DeleteAcls).expect("filter");
    assert_eq!(
        validate_delete_filter(&f),
        Err(AclError::invalid_request("Unknown entryFilter."))
    );
}

#[test]
fn error_pairs() {
    assert_eq!(AclError::unknown_server_error().pair(), (-1, None));
    assert_eq!(
        AclError::excessively_large_batch().pair(),
        (
            44,
            Some("Unable to perform excessively large batch operation.")
        )
    );
    assert_eq!(AclError::invalid_request("x").pair(), (42, Some("x")));
    assert_eq!(AclError::invalid_request("x").to_string(), "error 42: x");
}
