//! An es-kafka broker in the test's own process, and requests sent to it
//! through the real dispatcher (`es_kafka::handlers::handle`): encoded with
//! kafka-protocol, answered by the handlers, the response's framing checked
//! (size, correlation id, no trailing bytes) and decoded. No socket.

use std::path::Path;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use es_kafka::kafka_protocol::messages::ApiKey;
use es_kafka::kafka_protocol::protocol::{Decodable, Encodable};
use es_kafka::topics::Topic;
use es_kafka::turn::Turn;
use es_kafka::versions::crate_version;
use es_kafka::{handlers, Broker, BrokerConfig};

/// The `client_id` of every request sent here.
pub const CLIENT_ID: &str = "es-test-support";

/// A broker configuration whose data lives in `dir`/data.
pub fn config_in(dir: &Path, listen: &str) -> BrokerConfig {
    BrokerConfig::new(dir.join("data"), listen)
}

/// Opens a broker with `cfg` (on a blocking thread, as the binary does)
/// with its timers running.
pub async fn open_running(cfg: BrokerConfig) -> Arc<Broker> {
    Broker::open_running(cfg).await.expect("open")
}

/// Creates topic `name` with `partitions` partitions and no overrides.
pub async fn create_topic(b: &Broker, name: &str, partitions: i32) -> Option<Arc<Topic>> {
    b.create_topic(name, partitions, Default::default(), false)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e:?}"))
}

/// Sends `req` as API `key` version `v` and decodes the response. A version
/// past the crate (`es_kafka::versions::PAST_CRATE`) goes out with the body
/// of the crate's version of the same shape.
pub async fn call<Req: Encodable, Resp: Decodable>(
    b: &Arc<Broker>,
    key: ApiKey,
    v: i16,
    req: &Req,
) -> Resp {
    let mut frame = call_body(b, key, v, req).await;
    let cv = crate_version(key, v);
    let resp =
        Resp::decode(&mut frame, cv).unwrap_or_else(|e| panic!("{key:?} v{v} response: {e}"));
    assert_eq!(frame.remaining(), 0, "{key:?} v{v}: trailing bytes");
    resp
}

/// Sends one request and returns the response body after its header.
pub async fn call_body<Req: Encodable>(b: &Arc<Broker>, key: ApiKey, v: i16, req: &Req) -> Bytes {
    let correlation_id = 1000 + i32::from(v);
    let request = crate::wire::request_bytes(
        key,
        v,
        crate_version(key, v),
        correlation_id,
        CLIENT_ID,
        req,
    );
    let out = handlers::handle(b.clone(), Bytes::from(request), Turn::free())
        .await
        .unwrap_or_else(|e| panic!("{key:?} v{v}: {e}"));
    let mut frame: Bytes = out.unwrap_or_else(|| panic!("{key:?} v{v}: no response"));
    let size = frame.get_i32() as usize;
    assert_eq!(size, frame.remaining(), "{key:?} v{v} frame size");
    let rh = es_kafka::kafka_protocol::messages::ResponseHeader::decode(
        &mut frame,
        key.response_header_version(v),
    )
    .unwrap_or_else(|e| panic!("{key:?} v{v} response header: {e}"));
    assert_eq!(rh.correlation_id, correlation_id);
    frame
}
