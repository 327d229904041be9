//! The data directory belongs to one es process: a second es-broker started
//! on it while the first runs is refused with a clear error (the first keeps
//! serving), and once the first has stopped the directory opens again.

use std::path::Path;
use std::process::{Command, Stdio};

use std::time::{Duration, Instant};

use es_test_support::process::BrokerProcess;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};

const EXE: &str = env!("CARGO_BIN_EXE_es-broker");

#[test]
fn a_second_process_on_a_data_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let first = BrokerProcess::start(Path::new(EXE), &data, &[]);
    // The second is refused: it exits by itself (bounded wait; a second
    // process that ran would be killed and the test fail).
    let mut second = Command::new(EXE)
        .arg("--data-dir")
        .arg(&data)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run a second es-broker");
    let deadline = Instant::now() + Duration::from_secs(20);
    while second.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = second.kill();
            panic!("a second es-broker on the same data directory kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = second.wait_with_output().expect("output");
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "refused: {text}");
    assert!(
        text.contains("in use by another es process"),
        "says why: {text}"
    );
    // The first is untouched.
    let mut c = KafkaClient::connect(&first.addr, "lock-test");
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(r.brokers.len(), 1);
    first.stop();
    BrokerProcess::start(Path::new(EXE), &data, &[]).stop();
}
