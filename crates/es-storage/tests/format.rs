//! Data written by es-storage must pass the independent reader of the
//! documented format, `../shared/tools/check-storage-format`, including the
//! expected contents and the index spacing; and records that need the
//! extension must round-trip through a reopen.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use es_storage::fs::Fs;
use es_storage::Storage;
use es_storage::{Partition, PartitionConfig, RealFs, RecordBatchBuf, RecordIter, RecordMeta};

fn checker() -> PathBuf {
    // The repository sits beside `shared/` (on developer machines and in CI).
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/tools/check-storage-format");
    assert!(
        p.exists(),
        "the independent format checker is expected at {}",
        p.display()
    );
    p
}

#[test]
fn written_data_passes_the_independent_format_checker() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let tdir = data.join("topics/orders");
    es_storage::fs::create_dir_durable(&*fs, &tdir).expect("mkdir");
    es_storage::meta::write_json(
        &*fs,
        &tdir.join("topic.json"),
        &serde_json::json!({"partitions": 2}),
    )
    .expect("topic.json");
    let mut expected = serde_json::Map::new();
    for part in 0..2u32 {
        let p = Partition::open(
            &Storage::new(fs.clone()),
            tdir.join(part.to_string()),
            PartitionConfig {
                segment_bytes: 64 * 1024,
                ..PartitionConfig::default()
            },
        )
        .expect("open");
        let mut want = Vec::new();
        for i in 0..600u32 {
            let mut b = RecordBatchBuf::new();
            let key = format!("key-{part}-{}", i % 13);
            let value = format!("value-{part}-{i}-{}", "x".repeat((i % 200) as usize));
            let k = if i % 9 == 0 {
                None
            } else {
                Some(key.as_bytes())
            };
            b.push(
                1_700_000_000_000 + i as i64,
                k,
                Some(value.as_bytes()),
                std::iter::empty(),
                &RecordMeta::default(),
            );
            let info = p.append(&mut b).expect("append");
            p.wait_durable(info.last_offset + 1).expect("durable");
            want.push(serde_json::json!([
                k.map(|k| String::from_utf8_lossy(k).into_owned()),
                value
            ]));
        }
        assert!(p.segments().len() > 1, "rolled at least once");
        p.close().expect("close");
        expected.insert(part.to_string(), serde_json::Value::Array(want));
    }
    let exp_path = tmp.path().join("expected.json");
    std::fs::write(&exp_path, serde_json::to_vec(&expected).expect("json")).expect("write");
    let out = Command::new("python3")
        .arg(checker())
        .arg(&data)
        .arg("orders")
        .arg(&exp_path)
        .output()
        .expect("run checker");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "checker failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("OK: 1200 records checked in 2 partitions"),
        "{text}"
    );
}

#[test]
fn extension_records_round_trip_through_a_reopen() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let dir = tmp.path().join("p");
    let p = Partition::open(
        &Storage::new(fs.clone()),
        dir.clone(),
        PartitionConfig::default(),
    )
    .expect("open");
    let mut b = RecordBatchBuf::new();
    let meta = RecordMeta {
        producer: Some(es_storage::ProducerInfo {
            producer_id: 9,
            producer_epoch: 2,
            sequence: 41,
        }),
        transactional: true,
        control: false,
    };
    b.push(
        5,
        Some(b"k"),
        None,
        [(&b"h1"[..], Some(&b"v1"[..])), (&b"h2"[..], None)],
        &meta,
    );
    b.push(
        6,
        None,
        Some(b""),
        std::iter::empty(),
        &RecordMeta::default(),
    );
    let info = p.append(&mut b).expect("append");
    p.wait_durable(info.last_offset + 1).expect("durable");
    p.close().expect("close");
    drop(p);
    let p = Partition::open(&Storage::new(fs), dir, PartitionConfig::default()).expect("reopen");
    let c = p.read(0, 1 << 20).expect("read");
    let recs: Vec<_> = RecordIter::new(&c.data)
        .collect::<Result<_, _>>()
        .expect("valid");
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].value, None, "null value stays null");
    assert_eq!(recs[0].meta, meta);
    let h: Vec<_> = recs[0].headers().collect();
    assert_eq!(h, vec![(&b"h1"[..], Some(&b"v1"[..])), (&b"h2"[..], None)]);
    assert_eq!(recs[1].key, None);
    assert_eq!(recs[1].value, Some(&b""[..]), "empty value stays empty");
}
