//! Test harness: runs the real `es-broker` binary on a free port with a
//! temporary data directory, and waits on conditions (log lines, process
//! exit) with bounded retries instead of sleeping.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the broker may take to start or stop.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running es-broker.
pub struct Broker {
    child: Option<Child>,
    pub addr: String,
    pub data_dir: PathBuf,
    log: Arc<Mutex<Vec<String>>>,
    lines: mpsc::Receiver<String>,
}

impl Broker {
    /// Starts a broker on a fresh temporary data directory.
    pub fn start(dir: &Path, extra: &[&str]) -> Broker {
        Self::start_in(dir.to_path_buf(), extra)
    }

    /// Starts a broker on `data_dir` (which may hold data from an earlier run).
    pub fn start_in(data_dir: PathBuf, extra: &[&str]) -> Broker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_es-broker"));
        cmd.arg("--data-dir")
            .arg(&data_dir)
            .args(["--listen", "127.0.0.1:0"]);
        if !extra.contains(&"--log-level") {
            cmd.args(["--log-level", "info"]);
        }
        cmd.args(extra);
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn es-broker");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        for out in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    log.lock().expect("log lock").push(line.clone());
                    let _ = tx.send(line);
                }
            });
        }
        let mut b = Broker {
            child: Some(child),
            addr: String::new(),
            data_dir,
            log,
            lines: rx,
        };
        let line = b.wait_for_line("listening on ", START_TIMEOUT);
        let rest = &line[line.find("listening on ").expect("marker") + "listening on ".len()..];
        b.addr = rest.split_whitespace().next().expect("address").to_string();
        b
    }

    /// Waits for a log line containing `needle`, failing the test after `timeout`.
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => {}
                Err(_) => panic!(
                    "no log line with {needle:?} within {timeout:?}; log:\n{}",
                    self.log_text()
                ),
            }
        }
    }

    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends SIGTERM and waits for a clean exit; returns the log.
    pub fn stop(mut self) -> String {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(s) = child.try_wait().expect("wait") {
                assert!(
                    s.success(),
                    "es-broker exited with {s}; log:\n{}",
                    self.log_text()
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "es-broker did not stop; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Let the reader threads drain the last lines.
        let _ = self.wait_for_line_opt("stopped", Duration::from_secs(5));
        self.log_text()
    }

    fn wait_for_line_opt(&mut self, needle: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Retries `f` until it returns `Some`, up to `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads one length-prefixed Kafka frame; `None` when the peer closed the
/// connection (end of stream or reset) before a frame began.
pub fn read_frame(s: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    use std::io::Read;
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

/// One connection that sends typed requests (kafka-protocol encodes them
/// with a request header) and decodes typed responses, checking the
/// response's correlation id and that nothing trails its body.
pub struct KafkaClient {
    pub stream: std::net::TcpStream,
    correlation: i32,
    client_id: &'static str,
}

impl KafkaClient {
    pub fn connect(addr: &str, client_id: &'static str) -> KafkaClient {
        let stream = std::net::TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        KafkaClient {
            stream,
            correlation: 0,
            client_id,
        }
    }

    /// Sends one request without reading its response.
    pub fn send<Req: es_kafka::kafka_protocol::protocol::Encodable>(
        &mut self,
        key: es_kafka::kafka_protocol::messages::ApiKey,
        v: i16,
        req: &Req,
    ) {
        use es_kafka::kafka_protocol::messages::RequestHeader;
        use es_kafka::kafka_protocol::protocol::{Encodable, StrBytes};
        use std::io::Write;
        self.correlation += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = v;
        header.correlation_id = self.correlation;
        header.client_id = Some(StrBytes::from_static_str(self.client_id));
        let mut body: Vec<u8> = Vec::new();
        header
            .encode(&mut body, key.request_header_version(v))
            .expect("header");
        req.encode(&mut body, v).expect("request");
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).expect("send");
    }

    /// Sends one request and decodes its response.
    pub fn call<
        Req: es_kafka::kafka_protocol::protocol::Encodable,
        Resp: es_kafka::kafka_protocol::protocol::Decodable,
    >(
        &mut self,
        key: es_kafka::kafka_protocol::messages::ApiKey,
        v: i16,
        req: &Req,
    ) -> Resp {
        use es_kafka::kafka_protocol::messages::ResponseHeader;
        use es_kafka::kafka_protocol::protocol::Decodable;
        self.send(key, v, req);
        let buf = read_frame(&mut self.stream).expect("a response");
        let mut rest: &[u8] = &buf;
        let h = ResponseHeader::decode(&mut rest, key.response_header_version(v)).expect("header");
        assert_eq!(h.correlation_id, self.correlation);
        let r = Resp::decode(&mut rest, v).expect("response body");
        assert!(rest.is_empty(), "trailing bytes in {key:?} v{v}");
        r
    }
}
