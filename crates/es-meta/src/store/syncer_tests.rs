//! Tests of group commit: completions wait for their sync, one sync covers
//! every append queued behind the one in progress, a failed sync fails the
//! waiting appends and every later one.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use es_storage::fs::Fs;
use es_storage::simfs::{SimFs, Tear};

use super::*;

type Log2 = Arc<Mutex<Vec<(char, bool)>>>;

fn setup() -> (SimFs, Arc<dyn FileHandle>, Arc<Mutex<Log>>, PathBuf) {
    let fs = SimFs::new();
    let dir = PathBuf::from("/data/meta");
    es_storage::fs::create_dir_durable(&fs, &dir).expect("dir");
    let file = fs.create_new(&dir.join("x")).expect("create");
    fs.sync_dir(&dir).expect("sync dir");
    let log = Log::open(Arc::new(fs.clone()), &dir).expect("log");
    (fs, file, Arc::new(Mutex::new(log)), dir)
}

fn req(file: &Arc<dyn FileHandle>, name: char, out: &Log2) -> SyncReq {
    let out = out.clone();
    SyncReq {
        file: Some(file.clone()),
        done: Box::new(move |r| out.lock().push((name, r.is_ok()))),
    }
}

fn wait_for(out: &Log2, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.lock().len() < n {
        assert!(Instant::now() < deadline, "completions did not come");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn one_sync_covers_every_append_queued_behind_the_one_in_progress() {
    let (fs, file, log, dir) = setup();
    let syncer = Syncer::start(log).expect("start");
    let out: Log2 = Arc::default();
    let before = fs.sync_count();
    fs.hold_syncs();
    file.write_all_at(b"a", 0).expect("write");
    syncer.submit(req(&file, 'a', &out));
    assert!(fs.await_held_syncs(1, Duration::from_secs(10)));
    file.write_all_at(b"b", 1).expect("write");
    syncer.submit(req(&file, 'b', &out));
    file.write_all_at(b"c", 2).expect("write");
    syncer.submit(req(&file, 'c', &out));
    std::thread::sleep(Duration::from_millis(50));
    assert!(out.lock().is_empty(), "completed before its sync");
    let img = fs.crash_image(Tear::None);
    assert_eq!(img.read_all(&dir.join("x")).expect("read"), b"");
    fs.release_syncs();
    wait_for(&out, 3);
    assert_eq!(*out.lock(), vec![('a', true), ('b', true), ('c', true)]);
    // One sync for a, one for b and c together.
    assert_eq!(fs.sync_count() - before, 2);
    let img = fs.crash_image(Tear::None);
    assert_eq!(img.read_all(&dir.join("x")).expect("read"), b"abc");
}

#[test]
fn a_failed_sync_fails_the_waiting_and_every_later_append() {
    let (fs, file, log, _dir) = setup();
    let syncer = Syncer::start(log.clone()).expect("start");
    let out: Log2 = Arc::default();
    fs.fail_sync_at(fs.sync_count() + 1);
    file.write_all_at(b"a", 0).expect("write");
    syncer.submit(req(&file, 'a', &out));
    wait_for(&out, 1);
    let syncs = fs.sync_count();
    syncer.submit(req(&file, 'b', &out));
    wait_for(&out, 2);
    assert_eq!(*out.lock(), vec![('a', false), ('b', false)]);
    assert_eq!(fs.sync_count(), syncs, "no sync after the failure");
    assert!(log.lock().failed.is_some());
}
