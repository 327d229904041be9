//! Test-only: one request, encoded with kafka-protocol, through the real
//! dispatcher ([`super::handle_from`]) and its response decoded: the wire
//! client every in-crate test of a handler uses.

use std::path::Path;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::broker::{Broker, BrokerConfig};
use crate::errors::{code, ResponseError};
use crate::topics::Topic;
use crate::turn::Turn;
use crate::versions::crate_version;

/// Opens a broker with `cfg` on a blocking thread, as the binary does.
pub async fn open_with(cfg: BrokerConfig) -> Arc<Broker> {
    Broker::open_running(cfg).await.expect("open")
}

/// Opens a broker with its data in `dir/data`.
pub async fn open(dir: &Path) -> Arc<Broker> {
    open_with(BrokerConfig::new(dir.join("data"), "127.0.0.1:9092")).await
}

/// A string field.
pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A topic name field.
pub fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

/// A client authenticated as `principal` (`User:alice`), from 127.0.0.1 on
/// listener `CLIENTS`.
pub fn as_principal(principal: &str) -> super::Client {
    super::Client {
        peer: Some(std::net::IpAddr::from([127, 0, 0, 1])),
        principal: Arc::new(principal.parse().expect("principal")),
        listener: Some(Arc::from("CLIENTS")),
        throttle: None,
        connection: None,
    }
}

/// The wire code of `e`.
pub fn c(e: ResponseError) -> i16 {
    code(e)
}

/// Opens a broker with `cfg` (on a blocking thread, as the binary does) and
/// creates topic `name` with one partition.
pub async fn broker_with_topic(cfg: BrokerConfig, name: &str) -> (Arc<Broker>, Arc<Topic>) {
    let b = open_with(cfg).await;
    let topic = b
        .create_topic(name, 1, std::collections::BTreeMap::new(), false)
        .await
        .expect("created")
        .expect("a topic");
    (b, topic)
}

/// The `client_id` of every request sent here.
pub const CLIENT_ID: &str = "es-wire-test";
const CORRELATION_ID: i32 = 77;

/// Sends `req` as API `key` version `v`, as from a client at 127.0.0.1, and
/// decodes the response, checking its framing (size, correlation id, no
/// trailing bytes). A version past the crate
/// ([`crate::versions::PAST_CRATE`]) goes out with the body of the crate's
/// version of the same shape. Panics on anything unexpected: tests only.
pub async fn call<Req: Encodable, Resp: Decodable>(
    b: &Arc<Broker>,
    key: ApiKey,
    v: i16,
    req: &Req,
) -> Resp {
    let client = super::Client {
        peer: Some(std::net::IpAddr::from([127, 0, 0, 1])),
        ..super::Client::internal()
    };
    call_as(b, client, key, v, req).await
}

/// [`call`] from `client` (a principal on a listener: subject to the
/// authorizer, which internal requests are not).
pub async fn call_as<Req: Encodable, Resp: Decodable>(
    b: &Arc<Broker>,
    client: super::Client,
    key: ApiKey,
    v: i16,
    req: &Req,
) -> Resp {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = v;
    header.correlation_id = CORRELATION_ID;
    header.client_id = Some(StrBytes::from_static_str(CLIENT_ID));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(v))
        .unwrap_or_else(|e| panic!("{key:?} v{v} header: {e}"));
    let cv = crate_version(key, v);
    req.encode(&mut buf, cv)
        .unwrap_or_else(|e| panic!("{key:?} v{v} request: {e}"));
    let out = super::handle_from(b.clone(), client, buf.freeze(), Turn::free())
        .await
        .unwrap_or_else(|e| panic!("{key:?} v{v}: {e}"));
    let mut frame = out
        .unwrap_or_else(|| panic!("{key:?} v{v}: no response"))
        .into_bytes();
    let size = frame.get_i32() as usize;
    assert_eq!(size, frame.remaining(), "{key:?} v{v}: frame size");
    let rh = ResponseHeader::decode(&mut frame, key.response_header_version(v))
        .unwrap_or_else(|e| panic!("{key:?} v{v} response header: {e}"));
    assert_eq!(rh.correlation_id, CORRELATION_ID);
    let r = Resp::decode(&mut frame, cv).unwrap_or_else(|e| panic!("{key:?} v{v} response: {e}"));
    assert_eq!(frame.remaining(), 0, "{key:?} v{v}: trailing bytes");
    r
}
