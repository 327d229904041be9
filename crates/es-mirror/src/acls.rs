//! A link's ACL sync (`es-broker mirror link create --sync-acls`): the
//! source's ACL bindings, read with librdkafka's DescribeAcls (the `rdkafka`
//! crate does not wrap the ACL admin calls, so this module calls librdkafka's
//! C API on the source client the link already has: its security settings,
//! SASL and TLS, are the link's), and the changes es needs to hold the same
//! bindings.
//!
//! What is synced: every binding the source has is created on es; a binding
//! this link created earlier and the source no longer has is deleted. A
//! binding made on es by hand is never deleted. What the link created is
//! remembered while the worker runs (a binding removed on the source while
//! es was down stays on es: delete it by hand).
//!
//! The unsafe code is confined to [`describe_source`]: every pointer comes
//! from librdkafka and is used before the event that owns it is destroyed;
//! enum values are read as integers, since a source may return a resource
//! type librdkafka's enums do not list.

#![allow(unsafe_code)]

use std::collections::HashSet;
use std::ffi::{c_char, c_uint, CStr};
use std::time::Duration;

use es_auth::acl::{AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType};
use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};

extern "C" {
    // librdkafka's accessors, declared with integer results: the bindgen
    // enums would be undefined behaviour for a value they do not list.
    #[link_name = "rd_kafka_AclBinding_restype"]
    fn binding_restype(acl: *const rd::rd_kafka_AclBinding_t) -> c_uint;
    #[link_name = "rd_kafka_AclBinding_resource_pattern_type"]
    fn binding_pattern_type(acl: *const rd::rd_kafka_AclBinding_t) -> c_uint;
    #[link_name = "rd_kafka_AclBinding_operation"]
    fn binding_operation(acl: *const rd::rd_kafka_AclBinding_t) -> c_uint;
    #[link_name = "rd_kafka_AclBinding_permission_type"]
    fn binding_permission_type(acl: *const rd::rd_kafka_AclBinding_t) -> c_uint;
}

/// Copies a C string librdkafka owns; None for a null pointer.
///
/// # Safety
/// `p` is null or a NUL-terminated string alive for the call.
unsafe fn owned(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the caller.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Every ACL binding of the source (DescribeAcls with the ANY filter).
/// Bindings of types es does not know are left out.
pub fn describe_source(
    consumer: &BaseConsumer,
    timeout: Duration,
) -> Result<Vec<AclBinding>, String> {
    let rk = consumer.client().native_ptr();
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let mut errstr = [0 as c_char; 512];
    // SAFETY: `rk` is the live client `consumer` owns; every object made
    // here is destroyed before return, and the bindings are read while the
    // event that owns them lives.
    unsafe {
        let filter = rd::rd_kafka_AclBindingFilter_new(
            rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_ANY,
            std::ptr::null(),
            rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_ANY,
            std::ptr::null(),
            std::ptr::null(),
            rd::rd_kafka_AclOperation_t::RD_KAFKA_ACL_OPERATION_ANY,
            rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ANY,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        if filter.is_null() {
            return Err(format!(
                "an ACL filter: {}",
                owned(errstr.as_ptr()).unwrap_or_default()
            ));
        }
        let options = rd::rd_kafka_AdminOptions_new(
            rk,
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBEACLS,
        );
        if !options.is_null() {
            rd::rd_kafka_AdminOptions_set_request_timeout(
                options,
                timeout_ms,
                errstr.as_mut_ptr(),
                errstr.len(),
            );
        }
        let queue = rd::rd_kafka_queue_new(rk);
        rd::rd_kafka_DescribeAcls(rk, filter, options, queue);
        // The request's own timeout ends it; the poll waits a little more.
        let ev = rd::rd_kafka_queue_poll(queue, timeout_ms.saturating_add(5_000));
        let out = if ev.is_null() {
            Err("DescribeAcls: no answer from the source".to_string())
        } else if rd::rd_kafka_event_error(ev)
            != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
        {
            Err(format!(
                "DescribeAcls on the source: {}",
                owned(rd::rd_kafka_event_error_string(ev)).unwrap_or_default()
            ))
        } else {
            let result = rd::rd_kafka_event_DescribeAcls_result(ev);
            let mut n = 0usize;
            let acls = if result.is_null() {
                std::ptr::null_mut()
            } else {
                rd::rd_kafka_DescribeAcls_result_acls(result, &mut n)
            };
            let mut got = Vec::new();
            for i in 0..if acls.is_null() { 0 } else { n } {
                let a = *acls.add(i);
                if a.is_null() {
                    continue;
                }
                let binding = to_binding(
                    binding_restype(a),
                    owned(rd::rd_kafka_AclBinding_name(a)),
                    binding_pattern_type(a),
                    owned(rd::rd_kafka_AclBinding_principal(a)),
                    owned(rd::rd_kafka_AclBinding_host(a)),
                    binding_operation(a),
                    binding_permission_type(a),
                );
                got.extend(binding);
            }
            Ok(got)
        };
        if !ev.is_null() {
            rd::rd_kafka_event_destroy(ev);
        }
        rd::rd_kafka_queue_destroy(queue);
        if !options.is_null() {
            rd::rd_kafka_AdminOptions_destroy(options);
        }
        rd::rd_kafka_AclBinding_destroy(filter);
        out
    }
}

/// A binding from librdkafka's values (Kafka's codes); None when a value is
/// not one a binding may hold.
fn to_binding(
    resource_type: c_uint,
    name: Option<String>,
    pattern_type: c_uint,
    principal: Option<String>,
    host: Option<String>,
    operation: c_uint,
    permission_type: c_uint,
) -> Option<AclBinding> {
    let code = |v: c_uint| i8::try_from(v).ok();
    let b = AclBinding::new(
        ResourceType::from_code(code(resource_type)?)?,
        name?,
        PatternType::from_code(code(pattern_type)?)?,
        principal?,
        host?,
        AclOperation::from_code(code(operation)?)?,
        AclPermissionType::from_code(code(permission_type)?)?,
    );
    es_auth::acl::validate_create(&b).ok()?;
    Some(b)
}

/// What es must create and delete to follow the source: (create, delete).
/// `ours` is what this link created earlier; only those are deleted.
pub fn plan(
    source: &[AclBinding],
    on_es: &HashSet<AclBinding>,
    ours: &HashSet<AclBinding>,
) -> (Vec<AclBinding>, Vec<AclBinding>) {
    let want: HashSet<&AclBinding> = source.iter().collect();
    let mut seen = HashSet::new();
    let create = source
        .iter()
        .filter(|b| !on_es.contains(*b) && seen.insert(*b))
        .cloned()
        .collect();
    let delete = ours
        .iter()
        .filter(|b| !want.contains(b) && on_es.contains(*b))
        .cloned()
        .collect();
    (create, delete)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, op: AclOperation) -> AclBinding {
        AclBinding::new(
            ResourceType::Topic,
            name,
            PatternType::Literal,
            "User:alice",
            "*",
            op,
            AclPermissionType::Allow,
        )
    }

    #[test]
    fn the_plan_creates_what_is_missing_and_deletes_only_what_the_link_made() {
        let read = topic("orders", AclOperation::Read);
        let write = topic("orders", AclOperation::Write);
        let by_hand = topic("local", AclOperation::Read);
        let gone = topic("old", AclOperation::Read);
        let on_es: HashSet<AclBinding> = [write.clone(), by_hand.clone(), gone.clone()].into();
        let ours: HashSet<AclBinding> = [write.clone(), gone.clone()].into();
        let (create, delete) = plan(&[read.clone(), write], &on_es, &ours);
        assert_eq!(create, vec![read]);
        assert_eq!(delete, vec![gone]);
    }

    #[test]
    fn values_librdkafka_does_not_list_are_left_out() {
        let ok = to_binding(
            2,
            Some("t".into()),
            3,
            Some("User:a".into()),
            Some("*".into()),
            3,
            3,
        );
        assert!(ok.is_some());
        // A resource type past Kafka's codes, an ANY operation (a filter's,
        // not a binding's), a missing name.
        assert!(to_binding(
            99,
            Some("t".into()),
            3,
            Some("User:a".into()),
            Some("*".into()),
            3,
            3
        )
        .is_none());
        assert!(to_binding(
            2,
            Some("t".into()),
            3,
            Some("User:a".into()),
            Some("*".into()),
            1,
            3
        )
        .is_none());
        assert!(to_binding(2, None, 3, Some("User:a".into()), Some("*".into()), 3, 3).is_none());
    }
}
