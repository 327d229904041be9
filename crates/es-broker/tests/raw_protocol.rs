//! Raw-socket tests: what a malformed, oversized or unsupported request does
//! to its connection (closed, or answered with Kafka's error) and that the
//! broker keeps serving everyone else.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::Broker;

const API_PRODUCE: i16 = 0;
const API_METADATA: i16 = 3;
const API_DESCRIBE_CLIENT_QUOTAS: i16 = 48;
const API_VERSIONS: i16 = 18;

fn connect(b: &Broker) -> TcpStream {
    let s = TcpStream::connect(&b.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    s
}

/// A request frame with a v1 request header (api key, version, correlation id, client id).
fn frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let client = b"raw-test";
    let mut f = Vec::new();
    f.extend_from_slice(&api_key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&correlation_id.to_be_bytes());
    f.extend_from_slice(&(client.len() as i16).to_be_bytes());
    f.extend_from_slice(client);
    f.extend_from_slice(body);
    let mut out = (f.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&f);
    out
}

/// Reads one response frame; `None` when the broker closed the connection.
fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
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
    let b = Broker::start(dir.path(), &[]);
    let mut s = connect(&b);
    api_versions_ok(&mut s, 7);
}

#[test]
fn unknown_api_versions_version_gets_kip_511_fallback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Broker::start(dir.path(), &[]);
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
    let mut b = Broker::start(dir.path(), &[]);
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
    let b = Broker::start(dir.path(), &[]);
    let mut s = connect(&b);
    s.write_all(&(-5i32).to_be_bytes()).expect("write");
    assert_closed(&mut s);
    api_versions_ok(&mut connect(&b), 1);
}

#[test]
fn short_header_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Broker::start(dir.path(), &[]);
    let mut s = connect(&b);
    s.write_all(&[0, 0, 0, 3, 0, 18, 0]).expect("write");
    assert_closed(&mut s);
    api_versions_ok(&mut connect(&b), 1);
}

#[test]
fn unknown_api_key_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Broker::start(dir.path(), &[]);
    let mut s = connect(&b);
    s.write_all(&frame(1000, 0, 9, &[])).expect("write");
    assert_closed(&mut s);
    api_versions_ok(&mut connect(&b), 1);
}

#[test]
fn unparseable_body_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Broker::start(dir.path(), &[]);
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
    let b = Broker::start(dir.path(), &[]);
    let mut s = connect(&b);
    // DescribeClientQuotas v0 (no quotas in es): components [], strict false.
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_be_bytes());
    body.push(0);
    s.write_all(&frame(API_DESCRIBE_CLIENT_QUOTAS, 0, 11, &body))
        .expect("write");
    let resp = read_frame(&mut s).expect("an error response");
    let mut r = Reader { b: &resp };
    assert_eq!(r.i32(), 11);
    assert_eq!(r.i32(), 0, "throttle_time_ms");
    assert_eq!(r.i16(), 35, "UNSUPPORTED_VERSION");
    api_versions_ok(&mut s, 12);
}

#[test]
fn produce_below_v3_is_refused_per_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Broker::start(dir.path(), &[]);
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
    let b = Broker::start(dir.path(), &[]);
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
    let b = Broker::start(dir.path(), &[]);
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
