//! The inter-broker Kafka client: requests one broker sends another
//! (WriteTxnMarkers, from a transaction coordinator to partition leaders),
//! and es's own JSON requests between brokers ([`InterBrokerClient::send_json`]:
//! the share-group state a follower copies from a partition's leader).
//!
//! One pooled connection per peer broker, used by one request at a time
//! (requests to one peer queue behind its connection's lock). Every step
//! has a limit: the connect and the whole exchange each have a timeout, a
//! response frame larger than [`RESPONSE_BYTES_MAX`] is refused before
//! anything is allocated for it, and a response must carry the request's
//! correlation id and decode exactly. Any failure drops the connection;
//! the next request opens a new one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response frame accepted from a peer.
pub const RESPONSE_BYTES_MAX: usize = 16 << 20;
/// How long opening a connection to a peer may take.
pub const CONNECT_TIMEOUT_MS: u64 = 3_000;
/// How long one request may take, sending to decoding the response.
pub const REQUEST_TIMEOUT_MS: u64 = 10_000;
/// The client id peers see.
pub const CLIENT_ID: &str = "es-broker";

/// Why an inter-broker request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to {addr}: {why}")]
    Connect { addr: String, why: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("timed out")]
    Timeout,
    #[error("encoding: {0}")]
    Encode(String),
    #[error("bad response: {0}")]
    Response(String),
}

#[derive(Debug)]
struct Conn {
    addr: String,
    stream: TcpStream,
    next_correlation_id: i32,
}

/// Connections to peer brokers, by broker id.
#[derive(Debug, Default)]
pub struct InterBrokerClient {
    conns: Mutex<HashMap<i32, Arc<tokio::sync::Mutex<Option<Conn>>>>>,
}

impl InterBrokerClient {
    /// Sends `req` (API version `version`) to broker `broker` at `addr`
    /// (`host:port`) and returns its response.
    pub async fn send<R: Request>(
        &self,
        broker: i32,
        addr: &str,
        version: i16,
        req: &R,
    ) -> Result<R::Response, ClientError> {
        let slot = self.conns.lock().entry(broker).or_default().clone();
        let mut conn = slot.lock().await;
        let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
        let out = tokio::time::timeout(timeout, exchange(&mut conn, addr, version, req)).await;
        let out = out.unwrap_or(Err(ClientError::Timeout));
        if out.is_err() {
            *conn = None;
        }
        out
    }

    /// Sends one of es's own requests: api key `api_key` (es's private
    /// range, see `handlers::api_keys`), version 0, a JSON body; the
    /// response is the correlation id and a JSON body. `timeout` bounds the
    /// whole exchange (a long-polling request waits on the peer).
    pub async fn send_json<Q: serde::Serialize, A: serde::de::DeserializeOwned>(
        &self,
        broker: i32,
        addr: &str,
        api_key: i16,
        req: &Q,
        timeout: Duration,
    ) -> Result<A, ClientError> {
        let body = serde_json::to_vec(req).map_err(|e| ClientError::Encode(e.to_string()))?;
        let slot = self.conns.lock().entry(broker).or_default().clone();
        let mut conn = slot.lock().await;
        let out = tokio::time::timeout(timeout, exchange_raw(&mut conn, addr, api_key, &body))
            .await
            .unwrap_or(Err(ClientError::Timeout));
        if out.is_err() {
            *conn = None;
        }
        let json = out?;
        serde_json::from_slice(&json).map_err(|e| ClientError::Response(e.to_string()))
    }
}

/// Opens the connection when there is none (or it is to another address).
async fn connected<'a>(
    conn: &'a mut Option<Conn>,
    addr: &str,
) -> Result<&'a mut Conn, ClientError> {
    if conn.as_ref().is_some_and(|c| c.addr != addr) {
        *conn = None;
    }
    if conn.is_none() {
        let connect = TcpStream::connect(addr);
        let stream = tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), connect)
            .await
            .map_err(|_| ClientError::Timeout)?
            .map_err(|e| ClientError::Connect {
                addr: addr.to_string(),
                why: e.to_string(),
            })?;
        let _ = stream.set_nodelay(true);
        *conn = Some(Conn {
            addr: addr.to_string(),
            stream,
            next_correlation_id: 1,
        });
    }
    conn.as_mut().ok_or(ClientError::Timeout)
}

/// Reads one response frame's body (after its size), refusing a size past
/// [`RESPONSE_BYTES_MAX`] before allocating.
async fn read_frame(c: &mut Conn) -> Result<Vec<u8>, ClientError> {
    let size = c.stream.read_i32().await?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&n| n > 0 && n <= RESPONSE_BYTES_MAX)
        .ok_or_else(|| ClientError::Response(format!("a frame of {size} bytes")))?;
    let mut body = vec![0u8; size];
    c.stream.read_exact(&mut body).await?;
    Ok(body)
}

/// One JSON request of es's own: api key, version 0, correlation id, the
/// JSON body (`handlers::api_keys::json_body`); the answer's JSON after its
/// correlation id.
async fn exchange_raw(
    conn: &mut Option<Conn>,
    addr: &str,
    api_key: i16,
    body: &[u8],
) -> Result<Vec<u8>, ClientError> {
    let c = connected(conn, addr).await?;
    let correlation_id = c.next_correlation_id;
    c.next_correlation_id = c.next_correlation_id.wrapping_add(1).max(1);
    let mut frame = BytesMut::with_capacity(12 + body.len());
    frame.put_i32(0);
    frame.put_i16(api_key);
    frame.put_i16(0);
    frame.put_i32(correlation_id);
    frame.put_slice(body);
    let size =
        i32::try_from(frame.len() - 4).map_err(|_| ClientError::Encode("too large".into()))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    c.stream.write_all(&frame).await?;
    let mut answer = read_frame(c).await?;
    let got = answer
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    if got != Some(correlation_id) {
        return Err(ClientError::Response(format!(
            "correlation id {got:?} for request {correlation_id}"
        )));
    }
    Ok(answer.split_off(4))
}

async fn exchange<R: Request>(
    conn: &mut Option<Conn>,
    addr: &str,
    version: i16,
    req: &R,
) -> Result<R::Response, ClientError> {
    let c = connected(conn, addr).await?;
    let correlation_id = c.next_correlation_id;
    c.next_correlation_id = c.next_correlation_id.wrapping_add(1).max(1);
    let frame = encode(req, version, correlation_id)?;
    c.stream.write_all(&frame).await?;
    let body = read_frame(c).await?;
    decode::<R>(&body, version, correlation_id)
}

/// The request's frame: size, header, body.
pub fn encode<R: Request>(
    req: &R,
    version: i16,
    correlation_id: i32,
) -> Result<BytesMut, ClientError> {
    let key =
        ApiKey::try_from(R::KEY).map_err(|_| ClientError::Encode("unknown api key".into()))?;
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_static_str(CLIENT_ID));
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    header
        .encode(&mut buf, key.request_header_version(version))
        .map_err(|e| ClientError::Encode(e.to_string()))?;
    req.encode(&mut buf, version)
        .map_err(|e| ClientError::Encode(e.to_string()))?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| ClientError::Encode("too large".into()))?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf)
}

/// Decodes a response frame's body (after the size), checking the
/// correlation id and that nothing is left over.
pub fn decode<R: Request>(
    body: &[u8],
    version: i16,
    correlation_id: i32,
) -> Result<R::Response, ClientError> {
    let key =
        ApiKey::try_from(R::KEY).map_err(|_| ClientError::Encode("unknown api key".into()))?;
    let mut buf = bytes::Bytes::copy_from_slice(body);
    let header = ResponseHeader::decode(&mut buf, key.response_header_version(version))
        .map_err(|e| ClientError::Response(format!("header: {e}")))?;
    if header.correlation_id != correlation_id {
        return Err(ClientError::Response(format!(
            "correlation id {} for request {correlation_id}",
            header.correlation_id
        )));
    }
    let resp =
        R::Response::decode(&mut buf, version).map_err(|e| ClientError::Response(e.to_string()))?;
    if buf.has_remaining() {
        return Err(ClientError::Response(format!(
            "{} trailing bytes",
            buf.remaining()
        )));
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
    use tokio::net::TcpListener;

    /// A peer that answers one request with `reply` (a raw frame).
    async fn peer(reply: Vec<u8>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.expect("accept");
            let n = s.read_i32().await.expect("size");
            let mut req = vec![0u8; n as usize];
            s.read_exact(&mut req).await.expect("req");
            let _ = s.write_all(&reply).await;
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
        });
        addr
    }

    #[tokio::test]
    async fn a_good_response_decodes_and_a_bad_one_is_refused() {
        let mut ok = BytesMut::new();
        ok.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(1)
            .encode(&mut ok, 1)
            .expect("hdr");
        WriteTxnMarkersResponse::default()
            .encode(&mut ok, 1)
            .expect("body");
        let n = (ok.len() - 4) as i32;
        ok[..4].copy_from_slice(&n.to_be_bytes());
        let c = InterBrokerClient::default();
        let addr = peer(ok.to_vec()).await;
        let r = c
            .send(1, &addr, 1, &WriteTxnMarkersRequest::default())
            .await;
        assert!(r.is_ok(), "{r:?}");
        // A frame size past the limit is refused before any allocation.
        let addr = peer(((RESPONSE_BYTES_MAX + 1) as i32).to_be_bytes().to_vec()).await;
        let r = c
            .send(2, &addr, 1, &WriteTxnMarkersRequest::default())
            .await;
        assert!(matches!(r, Err(ClientError::Response(_))), "{r:?}");
        // A response to another request is refused.
        let mut wrong = ok.clone();
        wrong[4..8].copy_from_slice(&9i32.to_be_bytes());
        let addr = peer(wrong.to_vec()).await;
        let r = c
            .send(3, &addr, 1, &WriteTxnMarkersRequest::default())
            .await;
        assert!(matches!(r, Err(ClientError::Response(_))), "{r:?}");
        // Nobody listening.
        let r = c
            .send(4, "127.0.0.1:1", 1, &WriteTxnMarkersRequest::default())
            .await;
        assert!(r.is_err());
    }
}
