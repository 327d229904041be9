//! The connection and request limits of a real es-broker
//! (docs/reliability.md), each exceeded over real sockets: a connection over
//! `max.connections` or `max.connections.per.ip` is closed at once; an idle
//! one after `connections.max.idle.ms`; one whose request trickles in after
//! `request.read.timeout.ms`; one whose peer does not read its answers after
//! `connections.max.idle.ms`; `queued.max.request.bytes` holds requests back
//! while it is spent. Then what abuse costs: 10,000 idle connections at most
//! 10 KiB each, and 100,000 malformed frames of every kind leave resident
//! memory within 32 MiB of where it was and the broker serving.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{admin, admin_opts, client_config, Broker};
use es_kafka::codec::Compression;
use es_storage::record::RecordMeta;
use es_test_support::batch::KafkaBatch;
use es_test_support::process::{peak_rss_kib, rss_kib};
use es_test_support::wait::eventually;
use es_test_support::wire::{produce_request, raw_request_frame, request_frame, KafkaClient};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, FetchRequest, ProduceResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::producer::{FutureProducer, FutureRecord};

const TIMEOUT: Duration = Duration::from_secs(30);

fn start(dir: &std::path::Path, settings: &[&str]) -> Broker {
    let mut args = vec!["--admin-listen", "127.0.0.1:0"];
    for s in settings {
        args.push("--set");
        args.push(s);
    }
    common::start(dir, &args)
}

/// One ApiVersions exchange on `c`: the connection is served.
fn api_versions(c: &mut KafkaClient) -> bool {
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &versions_request());
    r.error_code == 0
}

/// ApiVersions v3 as clients send it (Kafka refuses an empty software name).
fn versions_request() -> ApiVersionsRequest {
    let mut r = ApiVersionsRequest::default();
    r.client_software_name = StrBytes::from_static_str("es-test");
    r.client_software_version = StrBytes::from_static_str("1");
    r
}

/// Reads until the peer closes: `Ok(bytes read)` on a close (end of stream
/// or reset), `Err` if nothing ends it within the socket's read timeout.
fn read_until_closed(s: &mut TcpStream) -> Result<usize, std::io::Error> {
    let mut total = 0;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(total),
            Err(e) => return Err(e),
        }
    }
}

/// A connection to `addr` from the local address `from` (127.0.0.x).
fn connect_from(from: &str, addr: &str) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let s = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().expect("socket");
        sock.bind(format!("{from}:0").parse().expect("addr"))
            .expect("bind");
        sock.connect(addr.parse().expect("addr"))
            .await
            .expect("connect")
    });
    let s = s.into_std().expect("std");
    s.set_nonblocking(false).expect("blocking");
    s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    s
}

/// The value of the sample `name` (labels included, as exported) on the
/// admin listener's `/metrics`.
fn metric(admin: &str, name: &str) -> Option<f64> {
    let text = reqwest::blocking::get(format!("{admin}/metrics"))
        .expect("GET /metrics")
        .text()
        .expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Raises this process's open-file limit to its hard limit (the tests below
/// hold thousands of sockets).
fn raise_fd_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let l = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: l.maximum,
            maximum: l.maximum,
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

#[test]
fn a_connection_over_a_limit_is_closed_at_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut b = start(
        dir.path(),
        &[
            "max.connections=5",
            "max.connections.per.ip=3",
            "max.connections.per.ip.overrides=127.0.0.2:10",
        ],
    );
    let admin = b.admin_url();
    let addr = b.addr.clone();
    let mut first: Vec<KafkaClient> = (0..3)
        .map(|_| KafkaClient::connect(&addr, "limits"))
        .collect();
    for c in &mut first {
        assert!(api_versions(c));
    }
    // The fourth from 127.0.0.1 is accepted and closed: its client reads the
    // end of the stream, not a timeout.
    let mut over = connect_from("127.0.0.1", &addr);
    let _ = over.write_all(&raw_request_frame(
        ApiKey::ApiVersions as i16,
        0,
        1,
        b"x",
        &[],
    ));
    assert_eq!(read_until_closed(&mut over).expect("closed at once"), 0);
    // 127.0.0.2 has an override of 10, but max.connections is 5 in all.
    let mut others: Vec<KafkaClient> = (0..2)
        .map(|_| KafkaClient::from_stream(connect_from("127.0.0.2", &addr), "limits"))
        .collect();
    for c in &mut others {
        assert!(api_versions(c));
    }
    let mut sixth = connect_from("127.0.0.2", &addr);
    assert_eq!(read_until_closed(&mut sixth).expect("closed at once"), 0);
    let refused = |reason: &str| {
        metric(
            &admin,
            &format!("es_connections_rejected_total{{listener=\"PLAINTEXT\",reason=\"{reason}\"}}"),
        )
        .unwrap_or(-1.0)
    };
    assert_eq!(refused("max_connections_per_ip"), 1.0);
    assert_eq!(refused("max_connections"), 1.0);
    // A closed connection frees its slot.
    drop(first.pop());
    eventually(TIMEOUT, "a slot freed by a close", || {
        let mut c = KafkaClient::from_stream(connect_from("127.0.0.1", &addr), "limits");
        c.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        c.send(ApiKey::ApiVersions, 3, &versions_request());
        let mut len = [0u8; 4];
        c.stream.read_exact(&mut len).ok().map(|_| c)
    });
    b.stop();
}

#[test]
fn the_connection_limits_change_while_the_broker_runs() {
    use rdkafka::admin::ConfigSource;
    use rdkafka::admin::{AlterConfig, ResourceSpecifier};
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), &["max.connections.per.ip=50"]);
    let addr = b.addr.clone();
    let a = admin(&addr);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // AlterConfigs on this broker, as kafka-configs.sh --entity-type brokers does.
    let alter = AlterConfig::new(ResourceSpecifier::Broker(0)).set("max.connections.per.ip", "2");
    let r = rt
        .block_on(a.alter_configs([&alter], &admin_opts(TIMEOUT)))
        .expect("alter");
    assert!(r.iter().all(Result::is_ok), "{r:?}");
    let described = rt
        .block_on(a.describe_configs([&ResourceSpecifier::Broker(0)], &admin_opts(TIMEOUT)))
        .expect("describe");
    let cfg = described.into_iter().next().expect("one").expect("ok");
    let e = cfg.get("max.connections.per.ip").expect("described");
    assert_eq!(e.value.as_deref(), Some("2"));
    assert_eq!(e.source, ConfigSource::DynamicBroker);
    assert!(!e.is_read_only);
    // From an address of its own: two served, the third closed at once.
    let mut two: Vec<KafkaClient> = (0..2)
        .map(|_| KafkaClient::from_stream(connect_from("127.0.0.3", &addr), "limits"))
        .collect();
    for c in &mut two {
        assert!(api_versions(c));
    }
    let mut third = connect_from("127.0.0.3", &addr);
    assert_eq!(read_until_closed(&mut third).expect("closed at once"), 0);
    // Back to the static value (AlterConfigs replaces the broker's set).
    let reset = AlterConfig::new(ResourceSpecifier::Broker(0)).set("background.threads", "10");
    let r = rt
        .block_on(a.alter_configs([&reset], &admin_opts(TIMEOUT)))
        .expect("alter");
    assert!(r.iter().all(Result::is_ok), "{r:?}");
    let mut again = KafkaClient::from_stream(connect_from("127.0.0.3", &addr), "limits");
    assert!(api_versions(&mut again), "the static 50 applies again");
    drop(a);
    b.stop();
}

#[test]
fn idle_and_trickling_connections_are_closed_and_busy_ones_are_not() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        &[
            "connections.max.idle.ms=1500",
            "request.read.timeout.ms=1000",
        ],
    );
    let addr = b.addr.clone();
    // Idle after one request: closed by es.
    let mut idle = KafkaClient::connect(&addr, "idle");
    assert!(api_versions(&mut idle));
    assert_eq!(read_until_closed(&mut idle.stream).expect("closed"), 0);
    // A request every 300 ms is activity: all of them are answered, well
    // past the idle limit.
    let mut busy = KafkaClient::connect(&addr, "busy");
    for _ in 0..12 {
        assert!(api_versions(&mut busy));
        std::thread::sleep(Duration::from_millis(300));
    }
    // A valid request sent a byte every 100 ms (about 4 s in all): es cuts
    // the connection when it has not arrived whole within 1 s.
    let frame = request_frame(ApiKey::ApiVersions, 3, 1, "trickle", &versions_request());
    let mut s = TcpStream::connect(&addr).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    let mut reader = s.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        let mut sent = 0;
        for byte in &frame {
            if s.write_all(std::slice::from_ref(byte)).is_err() {
                break;
            }
            sent += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        (sent, frame.len())
    });
    let got = read_until_closed(&mut reader).expect("closed by es");
    let (sent, len) = writer.join().expect("writer");
    assert_eq!(got, 0, "no answer to a request that never arrived whole");
    assert!(sent < len, "es waited for all {len} bytes");
    b.stop();
}

#[test]
fn a_peer_that_does_not_read_its_answers_is_closed() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut b = start(dir.path(), &["connections.max.idle.ms=1000"]);
    let admin = b.admin_url();
    let addr = b.addr.clone();
    // 8 MiB in one partition.
    let producer: FutureProducer = client_config(&addr)
        .set("linger.ms", "20")
        .create()
        .expect("producer");
    let value = vec![b'v'; 8192];
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let sends: Vec<_> = (0..1024)
            .map(|_| producer.send(FutureRecord::<(), _>::to("slow").payload(&value), TIMEOUT))
            .collect();
        for s in sends {
            s.await.expect("produced");
        }
    });
    drop(producer);
    let open = || metric(&admin, "es_connections{listener=\"PLAINTEXT\"}");
    eventually(TIMEOUT, "the producer's connections closed", || {
        (open()? == 0.0).then_some(())
    });
    // Sixteen fetches of all of it, and not a byte read: es's writes stall
    // once the socket buffers are full, and the connection is closed after
    // a second of that.
    let mut c = KafkaClient::connect(&addr, "slow-reader");
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_bytes = 16 << 20;
    req.session_epoch = -1;
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.partition_max_bytes = 16 << 20;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_static_str("slow"));
    t.partitions = vec![p];
    req.topics = vec![t];
    for _ in 0..16 {
        c.send(ApiKey::Fetch, 12, &req);
    }
    eventually(TIMEOUT, "the stalled connection closed", || {
        (open()? == 0.0).then_some(())
    });
    let got = read_until_closed(&mut c.stream).expect("closed by es");
    assert!(
        got < 8 * (8 << 20),
        "{got} bytes of the 16 answers of 8 MiB were written"
    );
    b.stop();
}

#[test]
fn queued_max_request_bytes_holds_requests_back_while_it_is_spent() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut b = start(dir.path(), &["queued.max.request.bytes=2097152"]);
    let admin = b.admin_url();
    let addr = b.addr.clone();
    // A request announcing 3 MB (and sending 10
    // bytes of it) holds the whole pool of 2 MiB; another client's request
    // waits until that connection is gone.
    let mut hog = TcpStream::connect(&addr).expect("connect");
    hog.write_all(&(3_000_000i32).to_be_bytes()).expect("write");
    hog.write_all(&[0u8; 10]).expect("write");
    eventually(TIMEOUT, "the pool spent", || {
        (metric(&admin, "es_request_memory_available_bytes")? == 0.0).then_some(())
    });
    let mut waiting = KafkaClient::connect_with_timeout(&addr, "waits", Duration::from_secs(2));
    waiting.send(ApiKey::ApiVersions, 3, &versions_request());
    let mut len = [0u8; 4];
    let early = waiting.stream.read_exact(&mut len);
    assert!(
        matches!(&early, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "answered while the pool was spent: {early:?}"
    );
    drop(hog);
    waiting
        .stream
        .set_read_timeout(Some(TIMEOUT))
        .expect("timeout");
    waiting
        .stream
        .read_exact(&mut len)
        .expect("answered once the pool is free");
    assert_eq!(
        metric(&admin, "es_request_memory_available_bytes"),
        Some(2_097_152.0)
    );
    b.stop();
}

#[test]
fn ten_thousand_idle_connections_cost_at_most_10_kib_each() {
    const CONNECTIONS: usize = 10_000;
    let limit = raise_fd_limit();
    assert!(
        limit >= CONNECTIONS as u64 + 1000,
        "this test needs {CONNECTIONS} sockets; the open-file limit is {limit}"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), &[]);
    let addr = b.addr.clone();
    // A served client first, so what is measured is the connections alone.
    let mut first = KafkaClient::connect(&addr, "first");
    assert!(api_versions(&mut first));
    let before = rss_kib(b.pid());
    let mut held = Vec::with_capacity(CONNECTIONS);
    for i in 0..CONNECTIONS {
        let mut c = KafkaClient::connect(&addr, "idle");
        // Half of them were served once before going quiet.
        if i % 2 == 0 {
            assert!(api_versions(&mut c));
        }
        held.push(c);
    }
    // Every connection is accepted and has its task by the time this one,
    // the last, is served.
    let mut last = KafkaClient::connect(&addr, "last");
    assert!(api_versions(&mut last));
    let after = rss_kib(b.pid());
    let per = (after.saturating_sub(before) * 1024) / CONNECTIONS as u64;
    println!("{CONNECTIONS} idle connections: RSS {before} KiB -> {after} KiB, {per} bytes each");
    assert!(
        per <= 10 * 1024,
        "{per} bytes per idle connection ({before} -> {after} KiB)"
    );
    drop(held);
    b.stop();
}

/// The frames of every kind of malformation, by index.
fn malformed(i: usize) -> Vec<u8> {
    let body = |key: i16, version: i16, rest: &[u8]| {
        raw_request_frame(key, version, i as i32, b"bad", rest)
    };
    let garbage: Vec<u8> = (0..(i % 97)).map(|j| (i * 31 + j * 7) as u8).collect();
    match i % 10 {
        0 => (-1i32).to_be_bytes().to_vec(),
        1 => (200_000_000i32).to_be_bytes().to_vec(),
        2 => 0i32.to_be_bytes().to_vec(),
        3 => [&3i32.to_be_bytes()[..], &[0, 3, 0]].concat(),
        4 => body(9999, 0, &garbage),
        5 => body(ApiKey::Metadata as i16, 999, &garbage),
        6 => body(ApiKey::Produce as i16, 9, &garbage),
        7 => body(ApiKey::Fetch as i16, 12, &[0xff; 40]),
        8 => body(ApiKey::Metadata as i16, 12, &[0x7f, 0xff, 0xff, 0xff, 0, 0]),
        _ => {
            let mut f = ((garbage.len()) as i32).to_be_bytes().to_vec();
            f.extend_from_slice(&garbage);
            f
        }
    }
}

#[test]
fn a_hundred_thousand_malformed_frames_leave_memory_flat_and_the_broker_serving() {
    let frames: usize = std::env::var("ES_MALFORMED_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), &[]);
    let addr = b.addr.clone();
    let mut served = KafkaClient::connect(&addr, "served");
    assert!(api_versions(&mut served));
    // The first thousand warm up what any client would (tasks, buffers).
    let send = |i: usize| {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        let _ = s.write_all(&malformed(i));
        let _ = s.shutdown(std::net::Shutdown::Write);
        // Wait for es's answer or close, so that connections do not pile up.
        let _ = read_until_closed(&mut s);
    };
    (0..1000).for_each(send);
    let before = rss_kib(b.pid());
    // Four senders at once.
    std::thread::scope(|scope| {
        for t in 0..4 {
            let send = &send;
            scope.spawn(move || {
                (1000 + t..frames).step_by(4).for_each(send);
            });
        }
    });
    assert!(
        api_versions(&mut served),
        "the first client is still served"
    );
    let mut fresh = KafkaClient::connect(&addr, "fresh");
    assert!(api_versions(&mut fresh), "a new client is served");
    let after = rss_kib(b.pid());
    println!("{frames} malformed frames: RSS {before} KiB -> {after} KiB");
    assert!(
        after.saturating_sub(before) < 32 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    b.stop();
}

/// A produced batch of `codec` whose compressed records are `payload`: the
/// header of a real one-record batch, its length and CRC-32C sealed again.
fn batch_of(codec: Compression, payload: &[u8]) -> Vec<u8> {
    let mut b = KafkaBatch::new();
    b.compression(codec).record(
        1_700_000_000_000,
        None,
        Some(b"x"),
        &[],
        &RecordMeta::default(),
    );
    let mut batch = b.encode();
    batch.truncate(61);
    batch.extend_from_slice(payload);
    let length = i32::try_from(batch.len() - 12).expect("length");
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// A zstd frame of RLE blocks that expands to `blocks` x 128 KiB of zeros
/// (4 bytes a block), with no content size and an 8 MiB window.
fn zstd_bomb(blocks: usize) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, (23 - 10) << 3];
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = (128 * 1024) << 3 | 1 << 1 | last;
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.push(0);
    }
    f
}

/// gzip of `mib` MiB of zeros.
fn gzip_bomb(mib: usize) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..mib {
        e.write_all(&zeros).expect("compress");
    }
    e.finish().expect("compress")
}

/// A fresh broker on `dir` with a topic `topic` of one partition.
fn broker_with_topic(dir: &std::path::Path, topic: &str) -> Broker {
    let b = start(dir, &[]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(admin(&b.addr).create_topics(
        &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
        &admin_opts(TIMEOUT),
    ))
    .expect("create");
    b
}

#[test]
fn compression_bombs_are_refused_before_their_memory_is_taken() {
    const MESSAGE_TOO_LARGE: i16 = 10;
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker_with_topic(dir.path(), "bombs");
    let addr = b.addr.clone();
    let mut c = KafkaClient::connect(&addr, "bombs");
    let mut produce = |batch: Vec<u8>| -> i16 {
        let r: ProduceResponse = c.call(ApiKey::Produce, 9, &produce_request("bombs", 0, batch));
        r.responses[0].partition_responses[0].error_code
    };
    // A batch that decodes is taken, so the ones below fail for their size.
    let mut fine = KafkaBatch::new();
    fine.compression(Compression::Zstd).record(
        1_700_000_000_000,
        None,
        Some(b"fine"),
        &[],
        &RecordMeta::default(),
    );
    assert_eq!(produce(fine.encode()), 0);
    let before = rss_kib(b.pid());
    // 10 GiB of zeros in 320 KiB of zstd, then 768 MiB in 760 KiB of gzip.
    let zstd = zstd_bomb(10 * 8192);
    let gzip = gzip_bomb(768);
    println!(
        "zstd bomb {} bytes, gzip bomb {} bytes",
        zstd.len(),
        gzip.len()
    );
    for (codec, payload) in [(Compression::Zstd, zstd), (Compression::Gzip, gzip)] {
        assert_eq!(
            produce(batch_of(codec, &payload)),
            MESSAGE_TOO_LARGE,
            "{codec:?}"
        );
        let after = rss_kib(b.pid());
        println!("{codec:?} bomb: RSS {before} KiB -> {after} KiB");
        assert!(
            after.saturating_sub(before) < 64 * 1024,
            "{codec:?} bomb: RSS grew from {before} KiB to {after} KiB"
        );
    }
    // The connection and the partition still serve.
    assert!(api_versions(&mut c));
    b.stop();
}

#[test]
fn concurrent_compression_bombs_take_at_most_the_decode_slots_memory() {
    const MESSAGE_TOO_LARGE: i16 = 10;
    const CLIENTS: usize = 48;
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker_with_topic(dir.path(), "bombs");
    let addr = b.addr.clone();
    // 10 GiB of zeros in 320 KiB: over the 256 KiB decoded on the runtime's
    // own threads, so each is decoded on a blocking thread, all at once.
    let bomb = batch_of(Compression::Zstd, &zstd_bomb(10 * 8192));
    let mut clients: Vec<KafkaClient> = (0..CLIENTS)
        .map(|i| KafkaClient::connect(&addr, &format!("bomber-{i}")))
        .collect();
    let before = peak_rss_kib(b.pid());
    let start = std::sync::Barrier::new(CLIENTS);
    std::thread::scope(|s| {
        for c in &mut clients {
            let (bomb, start) = (bomb.clone(), &start);
            s.spawn(move || {
                start.wait();
                let r: ProduceResponse =
                    c.call(ApiKey::Produce, 9, &produce_request("bombs", 0, bomb));
                assert_eq!(
                    r.responses[0].partition_responses[0].error_code,
                    MESSAGE_TOO_LARGE
                );
            });
        }
    });
    let after = peak_rss_kib(b.pid());
    println!("{CLIENTS} zstd bombs at once: peak RSS {before} KiB -> {after} KiB");
    // One decode at a time per CPU (at least 2), each holding at most its
    // 16 MiB bound, the codec's 8 MiB window and the buffer growing to the
    // bound (about 45 MiB), plus what glibc keeps of freed buffers in the
    // arenas of the blocking threads that ran them: 96 MiB a slot (measured
    // 112-141 MiB in all with 2). Without the bound the 48 decodes ran at
    // once and the peak grew by 732 MiB.
    let slots = std::thread::available_parallelism().map_or(2, |n| n.get().max(2)) as u64;
    assert!(
        after.saturating_sub(before) < slots * 96 * 1024,
        "peak RSS grew from {before} KiB to {after} KiB ({slots} decode slots)"
    );
    assert!(api_versions(&mut clients[0]));
    b.stop();
}

/// Files this process has open now.
fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// Reads one record from each of `partitions` partitions of `topic` from the
/// start, checking that partition `p` holds the value `p`; returns the
/// largest count of open files of `pid` seen meanwhile.
fn read_one_from_each(addr: &str, topic: &str, partitions: i32, pid: u32) -> u64 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Message, Offset, TopicPartitionList};
    let c: BaseConsumer = client_config(addr)
        .set("group.id", "fd-check")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition");
    }
    c.assign(&tpl).expect("assign");
    let mut seen = vec![false; partitions as usize];
    let (mut left, mut most) = (partitions, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while left > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{left} partitions still unread"
        );
        most = most.max(open_fds(pid));
        let Some(m) = c.poll(Duration::from_millis(500)) else {
            continue;
        };
        let m = m.expect("a record");
        let p = m.partition();
        assert_eq!(m.payload(), Some(p.to_string().as_bytes()), "partition {p}");
        if !std::mem::replace(&mut seen[p as usize], true) {
            left -= 1;
        }
    }
    most
}

#[test]
fn ten_thousand_partitions_start_serve_and_stop_within_the_open_file_limit() {
    const LIMIT: u64 = 1500;
    const PARTITIONS: i32 = 10_000;
    let dir = tempfile::tempdir().expect("tmp");
    // The broker under an open-file limit it cannot raise (prlimit sets the
    // hard limit too; es raises only the soft one without privilege, and a
    // process cannot raise its hard limit in this sandbox). Its partition
    // logs get three quarters of it: 1,125 files for 20,000 and more.
    let wrapper = dir.path().join("es-broker-limited");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec prlimit --nofile={LIMIT}:{LIMIT} {} \"$@\"\n",
            common::ES_BROKER
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let data = dir.path().join("data");
    let args = ["--admin-listen", "127.0.0.1:0"];
    let b = Broker::start(&wrapper, &data, &args);
    // Creating 10,000 partitions (each fsynced) takes a minute or more on a
    // loaded 2-core machine: the client waits as long as the request may
    // take (librdkafka's socket.timeout.ms is 60 s by default).
    let a: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        client_config(&b.addr)
            .set("socket.timeout.ms", "300000")
            .create()
            .expect("admin client");
    let opts = admin_opts(Duration::from_secs(300));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(a.create_topics(
        &[NewTopic::new(
            "many",
            PARTITIONS,
            TopicReplication::Fixed(1),
        )],
        &opts,
    ))
    .expect("CreateTopics")[0]
        .as_ref()
        .expect("10,000 partitions created");
    let mut most = open_fds(b.pid());
    println!("{PARTITIONS} partitions created: {most} files open");
    // One record to each, acknowledged by all replicas (fsynced).
    let producer: FutureProducer = client_config(&b.addr)
        .set("acks", "all")
        .set("linger.ms", "50")
        .create()
        .expect("producer");
    let sends: Vec<_> = (0..PARTITIONS)
        .map(|p| {
            let value = p.to_string();
            producer
                .send_result(
                    FutureRecord::<(), _>::to("many")
                        .partition(p)
                        .payload(&value),
                )
                .map_err(|(e, _)| e)
                .expect("queued")
        })
        .collect();
    for s in sends {
        most = most.max(open_fds(b.pid()));
        rt.block_on(s)
            .expect("delivery")
            .map_err(|(e, _)| e)
            .expect("acknowledged");
    }
    println!("one record produced to each: at most {most} files open");
    most = most.max(read_one_from_each(&b.addr, "many", PARTITIONS, b.pid()));
    println!("one record read from each: at most {most} files open");
    drop((producer, a));
    b.stop();
    // Recovery opens every segment; reads after it reopen what was closed.
    // Checking 10,000 segments and leading 10,000 partitions again took
    // about a minute on a loaded 2-core machine: the start may take longer
    // than the usual wait.
    let mut b = Broker::spawn(&wrapper, &data, &args);
    b.wait_listening_within(Duration::from_secs(600));
    most = most.max(open_fds(b.pid()));
    most = most.max(read_one_from_each(&b.addr, "many", PARTITIONS, b.pid()));
    println!("after a restart, every record read again: at most {most} files open");
    assert!(most < LIMIT, "{most} files open under a limit of {LIMIT}");
    b.stop();
}
