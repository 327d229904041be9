//! Raw-socket tests: what a malformed, oversized or unsupported request does
//! to its connection (closed, or answered with Kafka's error) and that the
//! broker keeps serving everyone else; and Kafka's exact answers (checked
//! against Apache Kafka 4.4) where client suites look at them: keyless
//! records on compacted topics, DeleteRecords on compact-only topics, the
//! ACL APIs without an authorizer, dynamic broker configs (across a
//! restart), and the cluster-shape APIs of a single node.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::Broker;
use es_kafka::kafka_protocol::messages::*;
use es_kafka::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use es_storage::record::RecordMeta;
use es_test_support::batch::KafkaBatch;
use es_test_support::wire::{raw_request_frame, read_frame, KafkaClient};

const API_PRODUCE: i16 = 0;
const API_METADATA: i16 = 3;
const API_EXPIRE_DELEGATION_TOKEN: i16 = 40;
const API_VERSIONS: i16 = 18;

fn connect(b: &Broker) -> TcpStream {
    let s = TcpStream::connect(&b.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    s
}

/// A request frame with a v1 request header (api key, version, correlation id, client id).
fn frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    raw_request_frame(api_key, version, correlation_id, b"raw-test", body)
}

struct Reader<'a> {
    b: &'a [u8],
}

impl Reader<'_> {
    fn i16(&mut self) -> i16 {
        let v = i16::from_be_bytes([self.b[0], self.b[1]]);
        self.b = &self.b[2..];
        v
    }
    fn i32(&mut self) -> i32 {
        let v = i32::from_be_bytes([self.b[0], self.b[1], self.b[2], self.b[3]]);
        self.b = &self.b[4..];
        v
    }
    fn i64(&mut self) -> i64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.b[..8]);
        self.b = &self.b[8..];
        i64::from_be_bytes(a)
    }
    fn string(&mut self) -> String {
        let n = self.i16();
        if n < 0 {
            return String::new();
        }
        let s = String::from_utf8(self.b[..n as usize].to_vec()).expect("utf8");
        self.b = &self.b[n as usize..];
        s
    }
}

/// Parses an ApiVersions v0 response: (correlation id, error, [(key, min, max)]).
fn parse_api_versions_v0(body: &[u8]) -> (i32, i16, Vec<(i16, i16, i16)>) {
    let mut r = Reader { b: body };
    let corr = r.i32();
    let err = r.i16();
    let n = r.i32();
    let apis = (0..n).map(|_| (r.i16(), r.i16(), r.i16())).collect();
    (corr, err, apis)
}

fn api_versions_ok(s: &mut TcpStream, corr: i32) {
    s.write_all(&frame(API_VERSIONS, 0, corr, &[]))
        .expect("write");
    let body = read_frame(s).expect("an ApiVersions response");
    let (c, err, apis) = parse_api_versions_v0(&body);
    assert_eq!(c, corr);
    assert_eq!(err, 0);
    assert!(apis.contains(&(API_PRODUCE, 0, 13)), "{apis:?}");
    assert!(
        apis.iter().any(|&(k, min, _)| k == 1 && min == 4),
        "fetch advertised: {apis:?}"
    );
}

fn assert_closed(s: &mut TcpStream) {
    assert_eq!(
        read_frame(s),
        None,
        "expected the broker to close the connection"
    );
}

#[test]
fn api_versions_v0_lists_our_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    api_versions_ok(&mut s, 7);
}

#[test]
fn unknown_api_versions_version_gets_kip_511_fallback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    // A body we cannot parse at v99 (and must not try to).
    s.write_all(&frame(API_VERSIONS, 99, 42, &[1, 2, 3, 4, 5]))
        .expect("write");
    let body = read_frame(&mut s).expect("a v0 response");
    let (corr, err, apis) = parse_api_versions_v0(&body);
    assert_eq!(corr, 42);
    assert_eq!(err, 35, "UNSUPPORTED_VERSION");
    assert!(apis
        .iter()
        .any(|&(k, _, max)| k == API_VERSIONS && max == 4));
    // The connection stays usable.
    api_versions_ok(&mut s, 43);
}

#[test]
fn oversized_frame_closes_only_that_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = common::start(dir.path(), &[]);
    let mut other = connect(&b);
    api_versions_ok(&mut other, 1);
    let mut s = connect(&b);
    // 200 MB announced: over socket.request.max.bytes (100 MiB), refused from the prefix.
    s.write_all(&200_000_000i32.to_be_bytes()).expect("write");
    s.write_all(&[0u8; 16]).expect("write");
    assert_closed(&mut s);
    api_versions_ok(&mut other, 2);
    let mut fresh = connect(&b);
    api_versions_ok(&mut fresh, 3);
    // The log names the reason (the line reaches the log reader
    // asynchronously, so wait for it rather than look once).
    b.wait_for_line("bad frame", Duration::from_secs(10));
}

#[test]
fn negative_frame_length_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    s.write_all(&(-5i32).to_be_bytes()).expect("write");
    assert_closed(&mut s);
    api_versions_ok(&mut connect(&b), 1);
}

#[test]
fn short_header_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    s.write_all(&[0, 0, 0, 3, 0, 18, 0]).expect("write");
    assert_closed(&mut s);
    api_versions_ok(&mut connect(&b), 1);
}

#[test]
fn unknown_api_key_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    s.write_all(&frame(1000, 0, 9, &[])).expect("write");
    assert_closed(&mut s);
    api_versions_ok(&mut connect(&b), 1);
}

#[test]
fn unparseable_body_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    // Metadata v1 claiming five topics and carrying none.
    s.write_all(&frame(API_METADATA, 1, 9, &5i32.to_be_bytes()))
        .expect("write");
    assert_closed(&mut s);
    api_versions_ok(&mut connect(&b), 1);
}

#[test]
fn unsupported_api_gets_unsupported_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    // ExpireDelegationToken v1 (no delegation tokens in es): an empty
    // hmac, a period of 0.
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&0i64.to_be_bytes());
    s.write_all(&frame(API_EXPIRE_DELEGATION_TOKEN, 1, 11, &body))
        .expect("write");
    let resp = read_frame(&mut s).expect("an error response");
    let mut r = Reader { b: &resp };
    assert_eq!(r.i32(), 11);
    assert_eq!(r.i16(), 35, "UNSUPPORTED_VERSION");
    api_versions_ok(&mut s, 12);
}

#[test]
fn produce_below_v3_is_refused_per_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    let mut body = Vec::new();
    body.extend_from_slice(&1i16.to_be_bytes()); // acks
    body.extend_from_slice(&1000i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&5i16.to_be_bytes());
    body.extend_from_slice(b"old-t");
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes()); // empty message set
    s.write_all(&frame(API_PRODUCE, 2, 21, &body))
        .expect("write");
    let resp = read_frame(&mut s).expect("a response");
    let mut r = Reader { b: &resp };
    assert_eq!(r.i32(), 21);
    assert_eq!(r.i32(), 1);
    assert_eq!(r.string(), "old-t");
    assert_eq!(r.i32(), 1);
    assert_eq!(r.i32(), 0);
    assert_eq!(r.i16(), 35);
    assert_eq!(r.i64(), -1);
    api_versions_ok(&mut s, 22);
}

#[test]
fn metadata_v0_and_pipelined_requests_answer_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    let mut all = Vec::new();
    for corr in 0..10 {
        if corr % 2 == 0 {
            all.extend(frame(API_VERSIONS, 0, corr, &[]));
        } else {
            all.extend(frame(API_METADATA, 0, corr, &0i32.to_be_bytes()));
        }
    }
    s.write_all(&all).expect("write");
    let port: i32 = b
        .addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    for corr in 0..10 {
        let resp = read_frame(&mut s).expect("a response");
        let mut r = Reader { b: &resp };
        assert_eq!(r.i32(), corr, "responses come back in request order");
        if corr % 2 == 1 {
            assert_eq!(r.i32(), 1, "one broker");
            assert_eq!(r.i32(), 0, "node id 0");
            assert_eq!(r.string(), "127.0.0.1");
            assert_eq!(r.i32(), port);
        }
    }
}

#[test]
fn a_large_frame_arriving_in_pieces_is_read_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut s = connect(&b);
    // ApiVersions v0 followed by 20 MB the decoder does not look at: the
    // frame is far larger than one read and than the buffer's growth step.
    let f = frame(API_VERSIONS, 0, 5, &vec![0u8; 20 << 20]);
    for chunk in f.chunks(1 << 20) {
        s.write_all(chunk).expect("write");
    }
    let body = read_frame(&mut s).expect("a response");
    let (corr, err, _) = parse_api_versions_v0(&body);
    assert_eq!((corr, err), (5, 0));
    api_versions_ok(&mut s, 6);
}

// ----- typed requests (kafka-protocol) ---------------------------------------

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

/// A connection that sends typed requests and decodes typed responses.
struct Client {
    k: KafkaClient,
}

impl Client {
    fn new(b: &Broker) -> Client {
        Client {
            k: KafkaClient::connect(&b.addr, "raw-test"),
        }
    }

    fn send<Req: Encodable>(&mut self, key: ApiKey, v: i16, req: &Req) {
        self.k.send(key, v, req);
    }

    fn call<Req: Encodable, Resp: Decodable>(&mut self, key: ApiKey, v: i16, req: &Req) -> Resp {
        self.k.call(key, v, req)
    }

    fn create_topic(&mut self, name: &str, configs: &[(&str, &str)]) {
        let mut t = create_topics_request::CreatableTopic::default();
        t.name = tn(name);
        t.num_partitions = 1;
        t.replication_factor = 1;
        for (k, v) in configs {
            let mut c = create_topics_request::CreatableTopicConfig::default();
            c.name = s(k);
            c.value = Some(s(v));
            t.configs.push(c);
        }
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 10_000;
        let r: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 7, &req);
        assert_eq!(r.topics[0].error_code, 0, "create {name}");
    }

    /// Produces one batch with these keys to partition 0 of `topic`.
    fn produce(
        &mut self,
        v: i16,
        topic: &str,
        keys: &[Option<&str>],
    ) -> produce_response::PartitionProduceResponse {
        let mut pd = produce_request::PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(kafka_batch(keys).into());
        let mut td = produce_request::TopicProduceData::default();
        td.name = tn(topic);
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 10_000;
        req.topic_data = vec![td];
        let r: ProduceResponse = self.call(ApiKey::Produce, v, &req);
        r.responses[0].partition_responses[0].clone()
    }

    /// DescribeConfigs (v4, with synonyms) of one resource.
    fn describe_configs(
        &mut self,
        resource_type: i8,
        name: &str,
        keys: &[&str],
    ) -> describe_configs_response::DescribeConfigsResult {
        let mut res = describe_configs_request::DescribeConfigsResource::default();
        res.resource_type = resource_type;
        res.resource_name = s(name);
        res.configuration_keys = if keys.is_empty() {
            None
        } else {
            Some(keys.iter().map(|k| s(k)).collect())
        };
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![res];
        req.include_synonyms = true;
        let r: DescribeConfigsResponse = self.call(ApiKey::DescribeConfigs, 4, &req);
        r.results[0].clone()
    }

    /// Legacy AlterConfigs (v1) of one BROKER resource: (error code, message).
    fn alter_broker(&mut self, name: &str, configs: &[(&str, &str)]) -> (i16, Option<String>) {
        let mut res = alter_configs_request::AlterConfigsResource::default();
        res.resource_type = RESOURCE_BROKER;
        res.resource_name = s(name);
        for (k, v) in configs {
            let mut c = alter_configs_request::AlterableConfig::default();
            c.name = s(k);
            c.value = Some(s(v));
            res.configs.push(c);
        }
        let mut req = AlterConfigsRequest::default();
        req.resources = vec![res];
        let r: AlterConfigsResponse = self.call(ApiKey::AlterConfigs, 1, &req);
        let out = &r.responses[0];
        (
            out.error_code,
            out.error_message.as_ref().map(|m| m.to_string()),
        )
    }

    /// IncrementalAlterConfigs (v1) of one BROKER resource: (op, name, value).
    fn alter_broker_incremental(&mut self, name: &str, ops: &[(i8, &str, Option<&str>)]) -> i16 {
        let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
        res.resource_type = RESOURCE_BROKER;
        res.resource_name = s(name);
        for (op, k, v) in ops {
            let mut c = incremental_alter_configs_request::AlterableConfig::default();
            c.name = s(k);
            c.config_operation = *op;
            c.value = v.map(s);
            res.configs.push(c);
        }
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources = vec![res];
        let r: IncrementalAlterConfigsResponse =
            self.call(ApiKey::IncrementalAlterConfigs, 1, &req);
        r.responses[0].error_code
    }
}

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
const SOURCE_STATIC_BROKER: i8 = 4;
const INVALID_RECORD: i16 = 87;
const POLICY_VIOLATION: i16 = 44;
const SECURITY_DISABLED: i16 = 54;
const INVALID_REQUEST: i16 = 42;

/// One Kafka RecordBatch v2 whose records have these keys.
fn kafka_batch(keys: &[Option<&str>]) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let mut batch = KafkaBatch::new();
    for k in keys {
        batch.record(
            now,
            k.map(str::as_bytes),
            Some(b"value"),
            &[],
            &RecordMeta::default(),
        );
    }
    batch.encode()
}

/// One config of a DescribeConfigs result: (value, source, read_only).
fn config_of(
    r: &describe_configs_response::DescribeConfigsResult,
    name: &str,
) -> (String, i8, bool) {
    let e = r
        .configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} not described: {r:?}"));
    (
        e.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
        e.config_source,
        e.read_only,
    )
}

#[test]
fn keyless_records_on_a_compacted_topic_refuse_the_whole_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut c = Client::new(&b);
    c.create_topic("cmp", &[("cleanup.policy", "compact")]);
    c.create_topic("both", &[("cleanup.policy", "compact,delete")]);
    c.create_topic("plain", &[]);

    let keys = [None, Some("k1"), None, Some("k2"), Some("k3"), None];
    let expect_record =
        "Compacted topic cannot accept message without key in topic partition cmp-0";
    for v in [8, 9, 11] {
        let p = c.produce(v, "cmp", &keys);
        assert_eq!(p.error_code, INVALID_RECORD, "v{v}");
        assert_eq!(p.base_offset, -1);
        assert_eq!(p.log_start_offset, 0, "the partition's log start offset");
        let errors: Vec<(i32, String)> = p
            .record_errors
            .iter()
            .map(|e| {
                (
                    e.batch_index,
                    e.batch_index_error_message
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            errors,
            vec![
                (0, expect_record.to_string()),
                (2, expect_record.to_string()),
                (5, expect_record.to_string())
            ],
            "v{v}"
        );
        let message = p.error_message.as_ref().map(|m| m.to_string());
        assert_eq!(
            message.as_deref(),
            Some(
                format!(
                    "One or more records have been rejected due to 3 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=0, message='{expect_record}'), RecordError(batchIndex=2, message='{expect_record}'), RecordError(batchIndex=5, message='{expect_record}')]"
                )
                .as_str()
            ),
            "v{v}"
        );
    }
    // Before v8 the response has no place for record errors: the code alone.
    let p = c.produce(7, "cmp", &keys);
    assert_eq!(p.error_code, INVALID_RECORD);
    assert!(p.record_errors.is_empty());
    // "compact,delete" is compacted too.
    assert_eq!(
        c.produce(9, "both", &[Some("k"), None]).error_code,
        INVALID_RECORD
    );

    // Nothing was appended: the first accepted batch starts at offset 0.
    let ok = c.produce(9, "cmp", &[Some("a"), Some("b")]);
    assert_eq!((ok.error_code, ok.base_offset), (0, 0));
    assert!(ok.record_errors.is_empty());
    // Other topics take records without keys.
    let plain = c.produce(9, "plain", &[None, None]);
    assert_eq!((plain.error_code, plain.base_offset), (0, 0));
}

#[test]
fn delete_records_on_a_compact_only_topic_is_a_policy_violation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut c = Client::new(&b);
    c.create_topic("compact-only", &[("cleanup.policy", "compact")]);
    c.create_topic("compact-delete", &[("cleanup.policy", "compact,delete")]);
    for t in ["compact-only", "compact-delete"] {
        assert_eq!(c.produce(9, t, &[Some("a"), Some("b")]).error_code, 0);
    }
    let mut req = DeleteRecordsRequest::default();
    for t in ["compact-only", "compact-delete"] {
        let mut p = delete_records_request::DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = -1;
        let mut dt = delete_records_request::DeleteRecordsTopic::default();
        dt.name = tn(t);
        dt.partitions = vec![p];
        req.topics.push(dt);
    }
    req.timeout_ms = 10_000;
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &req);
    let got: Vec<(String, i16, i64)> = r
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.partitions[0].error_code,
                t.partitions[0].low_watermark,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("compact-only".into(), POLICY_VIOLATION, -1),
            ("compact-delete".into(), 0, 2)
        ]
    );
}

#[test]
fn acl_apis_answer_security_disabled_without_an_authorizer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut c = Client::new(&b);
    let mut req = ApiVersionsRequest::default();
    req.client_software_name = s("raw-test");
    req.client_software_version = s("1");
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &req);
    for key in [ApiKey::DescribeAcls, ApiKey::CreateAcls, ApiKey::DeleteAcls] {
        assert!(
            r.api_keys
                .iter()
                .any(|k| k.api_key == key as i16 && k.min_version == 1 && k.max_version == 3),
            "{key:?} advertised at 1-3 as Kafka 4.4 does"
        );
    }
    for v in 1..=3 {
        let mut d = DescribeAclsRequest::default();
        d.resource_type_filter = 1; // ANY
        d.pattern_type_filter = 1;
        d.operation = 1;
        d.permission_type = 1;
        let r: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, v, &d);
        assert_eq!(r.error_code, SECURITY_DISABLED);
        assert_eq!(
            r.error_message.as_ref().map(|m| m.as_str()),
            Some("No Authorizer is configured on the broker")
        );

        let mut a = create_acls_request::AclCreation::default();
        a.resource_type = 2; // TOPIC
        a.resource_name = s("t");
        a.resource_pattern_type = 3; // LITERAL
        a.principal = s("User:alice");
        a.host = s("*");
        a.operation = 3; // READ
        a.permission_type = 3; // ALLOW
        let mut cr = CreateAclsRequest::default();
        cr.creations = vec![a.clone(), a];
        let r: CreateAclsResponse = c.call(ApiKey::CreateAcls, v, &cr);
        assert_eq!(r.results.len(), 2);
        for res in &r.results {
            assert_eq!(res.error_code, SECURITY_DISABLED);
            assert_eq!(
                res.error_message.as_ref().map(|m| m.as_str()),
                Some("No Authorizer is configured.")
            );
        }

        let mut f = delete_acls_request::DeleteAclsFilter::default();
        f.resource_type_filter = 1;
        f.pattern_type_filter = 1;
        f.operation = 1;
        f.permission_type = 1;
        let mut dr = DeleteAclsRequest::default();
        dr.filters = vec![f];
        let r: DeleteAclsResponse = c.call(ApiKey::DeleteAcls, v, &dr);
        assert_eq!(r.filter_results.len(), 1);
        assert_eq!(r.filter_results[0].error_code, SECURITY_DISABLED);
        assert_eq!(
            r.filter_results[0]
                .error_message
                .as_ref()
                .map(|m| m.as_str()),
            Some("No Authorizer is configured.")
        );
        assert!(r.filter_results[0].matching_acls.is_empty());
    }
    // A filter with an UNKNOWN (0) element fails Kafka's request parsing,
    // which closes the connection.
    let mut d = DescribeAclsRequest::default();
    d.resource_type_filter = 0;
    d.pattern_type_filter = 1;
    d.operation = 1;
    d.permission_type = 1;
    c.send(ApiKey::DescribeAcls, 3, &d);
    assert_closed(&mut c.k.stream);
    api_versions_ok(&mut connect(&b), 1);
}

#[test]
fn dynamic_broker_configs_apply_to_topics_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let b = common::start(data.clone(), &[]);
    let mut c = Client::new(&b);
    c.create_topic("t", &[]);
    let flush = "log.flush.interval.messages";

    // The flag's value, static but dynamically alterable.
    let r = c.describe_configs(RESOURCE_BROKER, "0", &[flush]);
    assert_eq!(
        config_of(&r, flush),
        ("1".into(), SOURCE_STATIC_BROKER, false)
    );
    let r = c.describe_configs(RESOURCE_BROKER, "0", &["broker.id"]);
    assert!(config_of(&r, "broker.id").2, "broker.id is read-only");

    // rust-rdkafka's test_admin::test_configs, with the legacy API.
    assert_eq!(c.alter_broker("0", &[(flush, "1234")]), (0, None));
    let r = c.describe_configs(RESOURCE_BROKER, "0", &[flush]);
    assert_eq!(
        config_of(&r, flush),
        ("1234".into(), SOURCE_DYNAMIC_BROKER, false)
    );
    let synonyms: Vec<(String, i8)> = r.configs[0]
        .synonyms
        .iter()
        .map(|y| {
            (
                y.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                y.source,
            )
        })
        .collect();
    assert_eq!(
        synonyms,
        vec![
            ("1234".into(), SOURCE_DYNAMIC_BROKER),
            ("1".into(), SOURCE_STATIC_BROKER),
            ("9223372036854775807".into(), 5)
        ]
    );
    // Topics without an override of their own inherit it.
    let r = c.describe_configs(RESOURCE_TOPIC, "t", &["flush.messages"]);
    assert_eq!(
        config_of(&r, "flush.messages"),
        ("1234".into(), SOURCE_DYNAMIC_BROKER, false)
    );

    // Kafka's refusals: read-only configs, another broker, not a node id.
    assert_eq!(
        c.alter_broker("0", &[("broker.id", "5"), ("log.dirs", "/x")]),
        (
            INVALID_REQUEST,
            Some("Cannot update these configs dynamically: [broker.id, log.dirs]".into())
        )
    );
    assert_eq!(
        c.alter_broker("7", &[(flush, "5")]),
        (
            INVALID_REQUEST,
            Some("Unexpected broker id, expected 0, but received 7".into())
        )
    );
    assert_eq!(
        c.alter_broker("x", &[(flush, "5")]).0,
        INVALID_REQUEST,
        "not a node id"
    );
    assert_eq!(c.alter_broker("0", &[(flush, "0")]).0, INVALID_REQUEST);
    // A refused change changes nothing.
    let r = c.describe_configs(RESOURCE_BROKER, "0", &[flush]);
    assert_eq!(config_of(&r, flush).0, "1234");

    // The cluster-wide default ("") sits under the per-broker value.
    assert_eq!(
        c.alter_broker_incremental("", &[(0, "log.retention.ms", Some("100000"))]),
        0
    );
    let r = c.describe_configs(RESOURCE_BROKER, "", &[]);
    // Only the cluster-wide dynamic configs: this one and the
    // min.insync.replicas Kafka's controller keeps there.
    assert_eq!(r.configs.len(), 2, "only the cluster-wide dynamic configs");
    assert_eq!(
        config_of(&r, "min.insync.replicas"),
        ("1".into(), SOURCE_DYNAMIC_DEFAULT_BROKER, false)
    );
    assert_eq!(
        config_of(&r, "log.retention.ms"),
        ("100000".into(), SOURCE_DYNAMIC_DEFAULT_BROKER, false)
    );
    let r = c.describe_configs(RESOURCE_TOPIC, "t", &["retention.ms"]);
    assert_eq!(
        config_of(&r, "retention.ms"),
        ("100000".into(), SOURCE_DYNAMIC_DEFAULT_BROKER, false)
    );
    // The legacy API replaces this broker's whole set.
    assert_eq!(
        c.alter_broker("0", &[("log.flush.interval.ms", "5")]),
        (0, None)
    );
    assert_eq!(
        c.alter_broker_incremental("0", &[(2, "log.cleanup.policy", Some("compact"))]),
        0
    );
    drop(c);
    b.stop();

    // Persisted: the same after a restart.
    let b = common::start(data.clone(), &[]);
    assert!(data.join("broker_configs.json").exists());
    let mut c = Client::new(&b);
    let r = c.describe_configs(
        RESOURCE_BROKER,
        "0",
        &[
            flush,
            "log.flush.interval.ms",
            "log.cleanup.policy",
            "log.retention.ms",
        ],
    );
    assert_eq!(
        config_of(&r, flush),
        ("1".into(), SOURCE_STATIC_BROKER, false)
    );
    assert_eq!(
        config_of(&r, "log.flush.interval.ms"),
        ("5".into(), SOURCE_DYNAMIC_BROKER, false)
    );
    assert_eq!(
        config_of(&r, "log.cleanup.policy"),
        ("delete,compact".into(), SOURCE_DYNAMIC_BROKER, false)
    );
    assert_eq!(
        config_of(&r, "log.retention.ms"),
        ("100000".into(), SOURCE_DYNAMIC_DEFAULT_BROKER, false)
    );
    // Topics loaded at startup inherit them, and act on them: the broker-wide
    // cleanup.policy now has compact, so keyless records are refused.
    let r = c.describe_configs(RESOURCE_TOPIC, "t", &["flush.ms", "cleanup.policy"]);
    assert_eq!(config_of(&r, "flush.ms").0, "5");
    assert_eq!(config_of(&r, "cleanup.policy").0, "delete,compact");
    assert_eq!(c.produce(9, "t", &[None]).error_code, INVALID_RECORD);
    // Deleting the per-broker value brings back the flag's.
    assert_eq!(
        c.alter_broker_incremental("0", &[(1, "log.cleanup.policy", None)]),
        0
    );
    assert_eq!(c.produce(9, "t", &[None]).error_code, 0);
}

#[test]
fn single_node_cluster_shape_apis_answer_as_kafka_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut c = Client::new(&b);
    c.create_topic("t", &[]);

    let mut q = DescribeQuorumRequest::default();
    let mut qt = describe_quorum_request::TopicData::default();
    qt.topic_name = tn("__cluster_metadata");
    qt.partitions = vec![describe_quorum_request::PartitionData::default()];
    q.topics = vec![qt];
    let r: DescribeQuorumResponse = c.call(ApiKey::DescribeQuorum, 2, &q);
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.error_code, p.leader_id.0, p.leader_epoch), (0, 0, 1));
    let voters: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
    assert_eq!(voters, vec![0]);
    assert!(p.observers.is_empty());
    assert_eq!(r.nodes.len(), 1);

    let r: ListPartitionReassignmentsResponse = c.call(
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default(),
    );
    assert_eq!((r.error_code, r.topics.len()), (0, 0));

    let mut req = AlterPartitionReassignmentsRequest::default();
    req.timeout_ms = 5_000;
    let mut rt = alter_partition_reassignments_request::ReassignableTopic::default();
    rt.name = tn("t");
    for replicas in [Some(vec![0]), Some(vec![0, 9]), None] {
        let mut p = alter_partition_reassignments_request::ReassignablePartition::default();
        p.replicas = replicas.map(|r| r.into_iter().map(BrokerId).collect());
        rt.partitions.push(p);
    }
    req.topics = vec![rt];
    let r: AlterPartitionReassignmentsResponse =
        c.call(ApiKey::AlterPartitionReassignments, 1, &req);
    let got: Vec<(i16, Option<String>)> = r.responses[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.error_code,
                p.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, None),
            (
                39,
                Some("The manual partition assignment includes broker 9, but no such broker is registered.".into())
            ),
            (85, None)
        ]
    );

    let mut req = ElectLeadersRequest::default();
    req.timeout_ms = 5_000;
    req.topic_partitions = None;
    let r: ElectLeadersResponse = c.call(ApiKey::ElectLeaders, 2, &req);
    let topics: Vec<(String, usize)> = r
        .replica_election_results
        .iter()
        .map(|t| (t.topic.0.to_string(), t.partition_result.len()))
        .collect();
    assert_eq!(topics, vec![("t".into(), 0)]);

    let r: ListConfigResourcesResponse = c.call(
        ApiKey::ListConfigResources,
        1,
        &ListConfigResourcesRequest::default(),
    );
    let listed: Vec<(String, i8)> = r
        .config_resources
        .iter()
        .map(|c| (c.resource_name.to_string(), c.resource_type))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("0".into(), 8),
            ("0".into(), RESOURCE_BROKER),
            ("t".into(), RESOURCE_TOPIC)
        ]
    );
}

/// `__consumer_offsets`, once a client has looked up a group coordinator,
/// is one topic with one id everywhere: Metadata lists it (internal) with
/// the id a KIP-848 regex assignment carries; a consumer assigned to it can
/// list its offsets and fetch it (an empty log: es keeps offsets in its own
/// files); clients cannot produce to it (INVALID_TOPIC_EXCEPTION, as Kafka);
/// and its id survives a restart (franz-go's Test848RegexBrokerResolves).
#[test]
fn a_kip848_regex_gets_consumer_offsets_with_the_id_metadata_reports() {
    const OFFSETS: &str = "__consumer_offsets";
    const INVALID_TOPIC_EXCEPTION: i16 = 17;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let b = common::start(data.clone(), &[]);
    let mut c = Client::new(&b);
    c.create_topic("orders", &[]);

    let metadata = |c: &mut Client| -> Vec<(String, bool, uuid::Uuid, usize)> {
        let mut req = MetadataRequest::default();
        req.topics = None;
        let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
        r.topics
            .iter()
            .map(|t| {
                assert_eq!(t.error_code, 0);
                (
                    t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                    t.is_internal,
                    t.topic_id,
                    t.partitions.len(),
                )
            })
            .collect()
    };
    assert!(metadata(&mut c).iter().all(|t| t.0 != OFFSETS));

    let mut req = FindCoordinatorRequest::default();
    req.key_type = 0;
    req.coordinator_keys = vec![s("g")];
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &req);
    assert_eq!(r.coordinators[0].error_code, 0);

    let listed = metadata(&mut c);
    let offsets = listed.iter().find(|t| t.0 == OFFSETS).expect("listed");
    let orders = listed.iter().find(|t| t.0 == "orders").expect("listed");
    let id = offsets.2;
    assert!(!id.is_nil());
    assert_eq!((offsets.1, offsets.3), (true, 1), "internal, one partition");
    assert!(!orders.1);

    // A KIP-848 member subscribed to "orders" by name and to the quoted
    // name of the offsets topic as a regex, as franz-go subscribes.
    let mut hb = ConsumerGroupHeartbeatRequest::default();
    hb.group_id = GroupId(s("g"));
    hb.member_id = s("m1");
    hb.rebalance_timeout_ms = 30_000;
    hb.subscribed_topic_names = Some(vec![tn("orders")]);
    hb.subscribed_topic_regex = Some(s("^__consumer_offsets$"));
    hb.topic_partitions = Some(Vec::new());
    let r: ConsumerGroupHeartbeatResponse = c.call(ApiKey::ConsumerGroupHeartbeat, 1, &hb);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let mut assigned: Vec<(uuid::Uuid, Vec<i32>)> = r
        .assignment
        .expect("assignment")
        .topic_partitions
        .iter()
        .map(|t| (t.topic_id, t.partitions.clone()))
        .collect();
    assigned.sort();
    let mut want = vec![(id, vec![0]), (orders.2, vec![0])];
    want.sort();
    assert_eq!(assigned, want);

    // The consumer reads it: earliest and latest offsets are 0, a fetch by
    // id answers an empty partition without error.
    for ts in [-2i64, -1] {
        let mut p = list_offsets_request::ListOffsetsPartition::default();
        p.partition_index = 0;
        p.current_leader_epoch = -1;
        p.timestamp = ts;
        let mut t = list_offsets_request::ListOffsetsTopic::default();
        t.name = tn(OFFSETS);
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.topics = vec![t];
        let r: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 10, &req);
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.error_code, p.offset), (0, 0), "timestamp {ts}");
    }
    let mut fp = fetch_request::FetchPartition::default();
    fp.partition = 0;
    fp.fetch_offset = 0;
    fp.partition_max_bytes = 1 << 20;
    let mut ft = fetch_request::FetchTopic::default();
    ft.topic_id = id;
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.max_wait_ms = 0;
    req.max_bytes = 1 << 20;
    req.topics = vec![ft];
    let r: FetchResponse = c.call(ApiKey::Fetch, 17, &req);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.responses[0].topic_id, id);
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 0));

    assert_eq!(
        c.produce(9, OFFSETS, &[Some("k")]).error_code,
        INVALID_TOPIC_EXCEPTION
    );
    b.stop();

    // Persisted with the other topics: the same id after a restart.
    assert!(data
        .join("topics")
        .join(OFFSETS)
        .join("topic.json")
        .exists());
    let b = common::start(data.clone(), &[]);
    let mut c = Client::new(&b);
    let listed = metadata(&mut c);
    let again = listed.iter().find(|t| t.0 == OFFSETS).expect("listed");
    assert_eq!((again.1, again.2), (true, id));
    b.stop();
}
