//! A full disk, on a real file system (docs/reliability.md): es-broker on an
//! ext4 image of 64 MiB of its own (loop-mounted; the test needs root), under
//! acks=all produce until the disk fills. Produce must get
//! KAFKA_STORAGE_ERROR, nothing acknowledged may be lost, reads keep working,
//! and once space is freed (and the broker restarted, the partition having
//! been fenced) produce resumes; the data passes the independent format
//! checker.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{admin, admin_opts};
use es_kafka::codec::Compression;
use es_storage::record::RecordMeta;
use es_test_support::batch::KafkaBatch;
use es_test_support::wire::{produce_request, KafkaClient};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use rdkafka::admin::{NewTopic, TopicReplication};

const TIMEOUT: Duration = Duration::from_secs(30);
const KAFKA_STORAGE_ERROR: i16 = 56;
const TOPIC: &str = "fill";
/// Records of 2,000 bytes (the format checker expects an index entry about
/// every 4 KiB, which records larger than that cannot have), 30 a batch
/// (an uncompressed batch of es-test-support stays under 64 KiB).
const VALUE_BYTES: usize = 2000;
const RECORDS_PER_BATCH: u64 = 30;

/// An ext4 file system of `mib` MiB in an image file, mounted at `mnt`
/// until dropped.
struct Mounted {
    mnt: PathBuf,
}

impl Mounted {
    fn new(image: &Path, mnt: &Path, mib: u64) -> Mounted {
        let f = std::fs::File::create(image).expect("image");
        f.set_len(mib << 20).expect("size");
        drop(f);
        let run = |cmd: &mut Command| {
            let out = cmd.output().expect("run");
            assert!(
                out.status.success(),
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(Command::new("mkfs.ext4").arg("-q").arg("-F").arg(image));
        std::fs::create_dir_all(mnt).expect("mount point");
        run(Command::new("mount")
            .arg("-o")
            .arg("loop")
            .arg(image)
            .arg(mnt));
        Mounted {
            mnt: mnt.to_path_buf(),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// The value of record `i`: its index, then a filler that differs per record.
fn value(i: u64) -> Vec<u8> {
    let mut v = i.to_be_bytes().to_vec();
    v.resize(VALUE_BYTES, (i % 251) as u8);
    v
}

/// Produces batch `i` (records `i * RECORDS_PER_BATCH` on) with acks=all;
/// its error code and base offset.
fn produce(c: &mut KafkaClient, i: u64) -> (i16, i64) {
    let mut b = KafkaBatch::new();
    b.compression(Compression::None);
    for k in 0..RECORDS_PER_BATCH {
        b.record(
            1_700_000_000_000,
            None,
            Some(&value(i * RECORDS_PER_BATCH + k)),
            &[],
            &RecordMeta::default(),
        );
    }
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &produce_request(TOPIC, 0, b.encode()));
    let p = &r.responses[0].partition_responses[0];
    if p.error_code != 0 {
        println!(
            "produce of batch {i}: error {} {:?}",
            p.error_code, p.error_message
        );
    }
    (p.error_code, p.base_offset)
}

/// Every record of the partition from offset 0: (offset, value).
fn fetch_all(c: &mut KafkaClient) -> Vec<(i64, Vec<u8>)> {
    let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
    loop {
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_bytes = 4 << 20;
        req.session_epoch = -1;
        let mut p = FetchPartition::default();
        p.partition = 0;
        p.fetch_offset = out.last().map_or(0, |(o, _)| *o + 1);
        p.partition_max_bytes = 4 << 20;
        let mut t = FetchTopic::default();
        t.topic = TopicName(StrBytes::from_static_str(TOPIC));
        t.partitions = vec![p];
        req.topics = vec![t];
        let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
        let part = &r.responses[0].partitions[0];
        assert_eq!(part.error_code, 0, "fetch");
        let Some(mut records) = part.records.clone() else {
            return out;
        };
        let before = out.len();
        while !records.is_empty() {
            let set = RecordBatchDecoder::decode(&mut records).expect("batch");
            for r in set.records {
                out.push((r.offset, r.value.expect("value").to_vec()));
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Checks that every record of every acknowledged batch is at its offset
/// with its value.
fn check_acknowledged(c: &mut KafkaClient, acked: &[(u64, i64)], what: &str) {
    let got: std::collections::BTreeMap<i64, Vec<u8>> = fetch_all(c).into_iter().collect();
    for (i, base) in acked {
        for k in 0..RECORDS_PER_BATCH {
            let (n, offset) = (i * RECORDS_PER_BATCH + k, base + k as i64);
            let v = got
                .get(&offset)
                .unwrap_or_else(|| panic!("{what}: acknowledged record {n} at {offset} lost"));
            assert!(
                *v == value(n),
                "{what}: record at {offset} is not record {n}"
            );
        }
    }
}

#[test]
fn a_full_disk_refuses_produce_loses_nothing_and_recovers_after_space_is_freed() {
    if rustix::process::geteuid().as_raw() != 0 {
        println!("SKIPPED: mounting a file system needs root");
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let fs = Mounted::new(&dir.path().join("disk.img"), &dir.path().join("mnt"), 64);
    // Ballast to free later: 12 MiB written and synced.
    let ballast = fs.mnt.join("ballast");
    std::fs::write(&ballast, vec![1u8; 12 << 20]).expect("ballast");
    let data = fs.mnt.join("data");
    let b = common::start(&data, &[]);
    let addr = b.addr.clone();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(admin(&addr).create_topics(
        &[NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1)).set("segment.bytes", "4194304")],
        &admin_opts(TIMEOUT),
    ))
    .expect("create")[0]
        .as_ref()
        .expect("created");
    let mut c = KafkaClient::connect(&addr, "disk-full");
    // Produce until the disk is full.
    let mut acked: Vec<(u64, i64)> = Vec::new();
    let mut i = 0u64;
    let refused = loop {
        let (code, offset) = produce(&mut c, i);
        if code != 0 {
            break code;
        }
        acked.push((i, offset));
        i += 1;
        assert!(i < 5000, "64 MiB took {i} batches");
    };
    let records = acked.len() as u64 * RECORDS_PER_BATCH;
    println!(
        "disk full after {records} acknowledged records ({} MiB)",
        (records as usize * VALUE_BYTES) >> 20
    );
    assert_eq!(refused, KAFKA_STORAGE_ERROR);
    assert!(acked.len() > 100, "only {} batches fit", acked.len());
    // Refused again, not half-written; reads keep working.
    assert_eq!(produce(&mut c, i).0, KAFKA_STORAGE_ERROR);
    check_acknowledged(&mut c, &acked, "while the disk is full");
    // Space freed, then a restart (the partition was fenced): produce
    // resumes and nothing acknowledged is lost.
    std::fs::remove_file(&ballast).expect("free space");
    drop(c);
    b.stop();
    let b = common::start(&data, &[]);
    let mut c = KafkaClient::connect(&b.addr, "disk-full");
    check_acknowledged(&mut c, &acked, "after the restart");
    for _ in 0..10 {
        i += 1;
        let (code, offset) = produce(&mut c, i);
        assert_eq!(code, 0, "produce after space was freed");
        acked.push((i, offset));
    }
    check_acknowledged(&mut c, &acked, "after produce resumed");
    drop(c);
    b.stop();
    let checker = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/tools/check-storage-format");
    let out = Command::new("python3")
        .arg(checker)
        .arg(&data)
        .arg(TOPIC)
        .output()
        .expect("run check-storage-format");
    assert!(
        out.status.success(),
        "check-storage-format:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
