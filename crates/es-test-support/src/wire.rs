//! Kafka's framing as a test client speaks it: a request is a 4-byte
//! big-endian size, then a request header and a body; a response is a size,
//! a response header and a body. Typed requests and responses go through
//! kafka-protocol; [`raw_request_frame`] builds frames by hand for the tests
//! that send what kafka-protocol would refuse to encode. [`KafkaClient`] is
//! a blocking connection that checks every response's correlation id and
//! that nothing trails its body.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use es_kafka::kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use es_kafka::kafka_protocol::messages::{
    ApiKey, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use es_kafka::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// How long a [`KafkaClient`] waits for a response by default.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A request header and body, without the size prefix: the header at
/// version `v`'s header version, the body at `body_version` (which differs
/// from `v` only for versions a test sends past what kafka-protocol knows).
pub fn request_bytes<Req: Encodable>(
    key: ApiKey,
    v: i16,
    body_version: i16,
    correlation_id: i32,
    client_id: &str,
    req: &Req,
) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = v;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_string(client_id.to_string()));
    let mut out: Vec<u8> = Vec::new();
    header
        .encode(&mut out, key.request_header_version(v))
        .unwrap_or_else(|e| panic!("{key:?} v{v} header: {e}"));
    req.encode(&mut out, body_version)
        .unwrap_or_else(|e| panic!("{key:?} v{v} request: {e}"));
    out
}

/// A whole request frame: size prefix, header, body (at version `v`).
pub fn request_frame<Req: Encodable>(
    key: ApiKey,
    v: i16,
    correlation_id: i32,
    client_id: &str,
    req: &Req,
) -> Vec<u8> {
    size_prefixed(&request_bytes(key, v, v, correlation_id, client_id, req))
}

/// A request frame built by hand with a v1 request header (api key,
/// version, correlation id, client id) and `body` as it is, for requests
/// kafka-protocol cannot express (unknown keys, bodies that do not parse).
pub fn raw_request_frame(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    client_id: &[u8],
    body: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&api_key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&correlation_id.to_be_bytes());
    let client_len = i16::try_from(client_id.len()).expect("a client id under 32 KiB");
    f.extend_from_slice(&client_len.to_be_bytes());
    f.extend_from_slice(client_id);
    f.extend_from_slice(body);
    size_prefixed(&f)
}

/// A Produce request with acks=all (30 s timeout) of one batch (or several
/// back to back) for `topic`'s `partition`.
pub fn produce_request(topic: &str, partition: i32, records: Vec<u8>) -> ProduceRequest {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(records.into());
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(topic.to_string()));
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    req
}

/// `frame` behind its 4-byte big-endian size.
pub fn size_prefixed(frame: &[u8]) -> Vec<u8> {
    let size = i32::try_from(frame.len()).expect("a frame under 2 GiB");
    let mut out = size.to_be_bytes().to_vec();
    out.extend_from_slice(frame);
    out
}

/// Writes `frame` behind its size prefix.
pub fn write_frame(w: &mut impl Write, frame: &[u8]) -> std::io::Result<()> {
    w.write_all(&size_prefixed(frame))
}

/// Reads one size-prefixed frame (without its prefix); any failure,
/// including a negative size, is an error.
pub fn try_read_frame(r: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let n = usize::try_from(i32::from_be_bytes(len))
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "negative frame size"))?;
    let mut body = vec![0u8; n];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// Reads one length-prefixed Kafka frame; `None` when the peer closed the
/// connection (end of stream or reset) before a frame began, or in the
/// middle of one. Any other failure before a frame began fails the test.
pub fn read_frame(s: &mut impl Read) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ) =>
        {
            return None
        }
        Err(e) => panic!("read failed: {e}"),
    }
    let n = i32::from_be_bytes(len) as usize;
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// Decodes a response frame (without its size prefix) to API `key`
/// version `v`: the header's correlation id must be `correlation_id`, the
/// body must decode at `body_version` and nothing may follow it.
pub fn decode_response<Resp: Decodable>(
    key: ApiKey,
    v: i16,
    body_version: i16,
    correlation_id: i32,
    frame: &[u8],
) -> Resp {
    let mut rest: &[u8] = frame;
    let h = ResponseHeader::decode(&mut rest, key.response_header_version(v))
        .unwrap_or_else(|e| panic!("{key:?} v{v} response header: {e}"));
    assert_eq!(
        h.correlation_id, correlation_id,
        "{key:?} v{v} correlation id"
    );
    let r = Resp::decode(&mut rest, body_version)
        .unwrap_or_else(|e| panic!("{key:?} v{v} response: {e}"));
    assert!(rest.is_empty(), "trailing bytes in {key:?} v{v}");
    r
}

/// One connection that sends typed requests (kafka-protocol encodes them
/// with a request header) and decodes typed responses, checking the
/// response's correlation id and that nothing trails its body.
pub struct KafkaClient {
    pub stream: TcpStream,
    correlation: i32,
    client_id: String,
}

impl KafkaClient {
    /// Connects to `addr`; reads wait at most [`READ_TIMEOUT`].
    pub fn connect(addr: &str, client_id: &str) -> KafkaClient {
        Self::connect_with_timeout(addr, client_id, READ_TIMEOUT)
    }

    /// Connects to `addr`; reads wait at most `read_timeout`.
    pub fn connect_with_timeout(
        addr: &str,
        client_id: &str,
        read_timeout: Duration,
    ) -> KafkaClient {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(read_timeout))
            .expect("timeout");
        KafkaClient {
            stream,
            correlation: 0,
            client_id: client_id.to_string(),
        }
    }

    /// A client on a stream connected already (from a chosen local address).
    pub fn from_stream(stream: TcpStream, client_id: &str) -> KafkaClient {
        KafkaClient {
            stream,
            correlation: 0,
            client_id: client_id.to_string(),
        }
    }

    /// Sends one request without reading its response.
    pub fn send<Req: Encodable>(&mut self, key: ApiKey, v: i16, req: &Req) {
        self.correlation += 1;
        let frame = request_frame(key, v, self.correlation, &self.client_id, req);
        self.stream.write_all(&frame).expect("send");
    }

    /// Sends one request and decodes its response.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        v: i16,
        req: &Req,
    ) -> Resp {
        self.send(key, v, req);
        let buf = read_frame(&mut self.stream).expect("a response");
        decode_response(key, v, v, self.correlation, &buf)
    }
}
