//! The share-partition files on es-storage's simulated file system: the
//! entry format (round trip of every kind; garbage, truncated and oversized
//! input refused without a panic), replay and restore into the core, the
//! split of huge Updates (all or nothing under a torn write), stale topic
//! ids, deletion, corrupt snapshots, and a crash at every sync point of a
//! workload (acquire, acknowledge, fold, reset, delete) with and without
//! torn tails.

use std::path::PathBuf;

use es_storage::simfs::{SimFs, Tear};
use proptest::prelude::*;

use super::*;
use crate::shares::partition::{
    AckBatch, AckParams, AcquireMode, AcquireParams, LogView, RecordState,
};

const GROUP: &str = "queue-group";
const TOPIC: &str = "orders";
const PART: i32 = 3;

fn data_dir() -> PathBuf {
    PathBuf::from("/data")
}

fn tid(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

fn open(fs: &SimFs, topic_id: Uuid) -> Result<(ShareStore, Loaded), StorageError> {
    ShareStore::open(
        Arc::new(fs.clone()),
        &data_dir(),
        GROUP,
        TOPIC,
        PART,
        topic_id,
        es_storage::clock::system(),
    )
}

fn state_of(l: &Loaded) -> Option<ShareState> {
    match l {
        Loaded::State(s) => Some(s.clone()),
        _ => None,
    }
}

fn sb(first: i64, last: i64, state: DurableState, delivery_count: u16) -> StateBatch {
    StateBatch {
        first,
        last,
        state,
        delivery_count,
    }
}

fn update(start_offset: i64, batches: Vec<StateBatch>) -> ShareUpdate {
    ShareUpdate {
        start_offset,
        batches,
    }
}

fn every_kind() -> Vec<Entry> {
    vec![
        Entry::Init {
            topic_id: Uuid::from_bytes([7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]),
            state_epoch: 2,
            leader_epoch: -1,
            start_offset: 42,
        },
        Entry::Update {
            leader_epoch: 5,
            update: update(
                10,
                vec![
                    sb(10, 19, DurableState::Acknowledged, 1),
                    sb(20, 20, DurableState::Archived, 5),
                    sb(21, 30, DurableState::Available, 2),
                ],
            ),
            last: true,
        },
        Entry::Update {
            leader_epoch: 5,
            update: update(10, vec![sb(40, 41, DurableState::Available, 65535)]),
            last: false,
        },
        Entry::Update {
            leader_epoch: 0,
            update: update(OFFSET_MAX, vec![]),
            last: true,
        },
        Entry::Reset {
            state_epoch: 3,
            start_offset: 0,
        },
    ]
}

#[test]
fn every_entry_kind_round_trips_with_the_documented_bytes() {
    for e in every_kind() {
        let bytes = encode_entry(&e).expect("encode");
        assert_eq!(bytes[0], ENTRY_VERSION);
        assert_eq!(decode_entry(&bytes).expect("decode"), e);
        let want = match &e {
            Entry::Init { .. } => INIT_BYTES,
            Entry::Reset { .. } => RESET_BYTES,
            Entry::Update { update, .. } => UPDATE_HEAD_BYTES + update.batches.len() * BATCH_BYTES,
        };
        assert_eq!(bytes.len(), want, "{e:?}");
    }
    // The byte map of docs/storage.md, field by field (big-endian).
    let reset = encode_entry(&Entry::Reset {
        state_epoch: 0x0102_0304,
        start_offset: 0x0A0B,
    })
    .expect("encode");
    assert_eq!(reset, [1, 3, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0x0A, 0x0B]);
    let upd = encode_entry(&Entry::Update {
        leader_epoch: 9,
        update: update(5, vec![sb(5, 6, DurableState::Archived, 0x0102)]),
        last: true,
    })
    .expect("encode");
    assert_eq!(
        upd,
        [
            1, 2, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 5, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0,
            0, 0, 6, 4, 1, 2
        ]
    );
}

#[test]
fn docs_storage_md_states_the_entry_sizes_of_the_code() {
    let doc = include_str!("../../../../docs/storage.md");
    let sizes = format!(
        "Init {INIT_BYTES} bytes, Reset {RESET_BYTES}, Update {UPDATE_HEAD_BYTES} + {BATCH_BYTES} per batch"
    );
    assert!(doc.contains(&sizes), "docs/storage.md lacks {sizes:?}");
    for (kind, name) in [
        (KIND_INIT, "Init"),
        (KIND_UPDATE, "Update"),
        (KIND_RESET, "Reset"),
        (KIND_UPDATE_PART, "UpdatePart"),
    ] {
        assert!(
            doc.contains(&format!("{kind} {name}")),
            "kind {kind} {name}"
        );
    }
    assert!(doc.contains(&format!("at most {UPDATE_BATCHES_MAX}")));
}

#[test]
fn truncated_garbage_and_oversized_entries_are_refused() {
    for e in every_kind() {
        let bytes = encode_entry(&e).expect("encode");
        for cut in 0..bytes.len() {
            assert!(decode_entry(&bytes[..cut]).is_err(), "{e:?} cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(decode_entry(&long), Err(EntryError::Trailing(1)));
    }
    assert_eq!(decode_entry(&[2, 1]), Err(EntryError::Version(2)));
    assert_eq!(decode_entry(&[1, 9]), Err(EntryError::Kind(9)));
    // A count of 65535 batches with none behind it: refused before the
    // vector is allocated.
    let mut huge = vec![
        1,
        KIND_UPDATE,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0xFF,
        0xFF,
    ];
    assert_eq!(decode_entry(&huge), Err(EntryError::Truncated(16)));
    huge.extend_from_slice(&[0; BATCH_BYTES]);
    assert!(decode_entry(&huge).is_err());
    // State 1 (ACQUIRED) is never written, so never read.
    let mut acq = encode_entry(&Entry::Update {
        leader_epoch: 0,
        update: update(0, vec![sb(0, 0, DurableState::Available, 1)]),
        last: true,
    })
    .expect("encode");
    acq[UPDATE_HEAD_BYTES + 16] = 1;
    assert!(matches!(decode_entry(&acq), Err(EntryError::Field(_))));
    // Negative and reversed offsets.
    let neg = encode_entry(&Entry::Reset {
        state_epoch: 0,
        start_offset: -1,
    })
    .expect("encode");
    assert!(matches!(decode_entry(&neg), Err(EntryError::Field(_))));
    let rev = encode_entry(&Entry::Update {
        leader_epoch: 0,
        update: update(0, vec![sb(9, 3, DurableState::Available, 1)]),
        last: true,
    })
    .expect("encode");
    assert!(matches!(decode_entry(&rev), Err(EntryError::Field(_))));
    // One entry never holds more than u16::MAX batches.
    let over = Entry::Update {
        leader_epoch: 0,
        update: update(
            0,
            vec![sb(0, 0, DurableState::Available, 1); UPDATE_BATCHES_MAX + 1],
        ),
        last: true,
    };
    assert_eq!(
        encode_entry(&over),
        Err(EntryError::TooManyBatches(UPDATE_BATCHES_MAX + 1))
    );
}

proptest! {
    #[test]
    fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_entry(&bytes);
        // With a valid header, too.
        let mut b = vec![ENTRY_VERSION, (bytes.first().copied().unwrap_or(0) % 5) + 1];
        b.extend_from_slice(&bytes);
        if let Ok(e) = decode_entry(&b) {
            prop_assert_eq!(encode_entry(&e).expect("re-encode"), b);
        }
    }
}

#[test]
fn replay_rebuilds_the_written_state_and_the_core_restores_from_it() {
    let fs = SimFs::new();
    let (store, loaded) = open(&fs, tid(1)).expect("open");
    assert_eq!(loaded, Loaded::Fresh);
    assert!(
        store.write_update(0, &update(0, vec![])).is_err(),
        "update before init"
    );
    let t = store.write_init(0, 4, 0).expect("init");
    store.sync(t).expect("sync");
    // Drive the real core and write what it emits.
    let limits = ShareLimits {
        delivery_count_limit: 3,
        max_record_locks: 100,
    };
    let mut sp = SharePartition::new(0, limits);
    let log = [(0i64, 9i64), (10, 19)];
    let view = LogView {
        log_start: 0,
        end: 20,
        fetch_offset: 0,
        batches: &log,
    };
    let p = AcquireParams {
        member: "m1",
        max_records: 20,
        batch_size: 20,
        mode: AcquireMode::BatchOptimized,
        lock_duration_ms: 30_000,
        now_ms: 0,
    };
    let got = sp.acquire(&p, &view).expect("acquire");
    let u = got.outcome.update.expect("acquisition is journaled");
    store
        .sync(store.write_update(4, &u).expect("write"))
        .expect("sync");
    let ack = AckParams {
        member: "m1",
        renew_allowed: false,
        lock_duration_ms: 30_000,
        now_ms: 1,
    };
    let out = sp
        .acknowledge(
            &ack,
            &[
                AckBatch {
                    first: 0,
                    last: 4,
                    types: vec![1],
                },
                AckBatch {
                    first: 12,
                    last: 12,
                    types: vec![3],
                },
            ],
        )
        .expect("acknowledge");
    let u = out.update.expect("acks are journaled");
    store
        .sync(store.write_update(4, &u).expect("write"))
        .expect("sync");
    let live = store.state().expect("state");
    drop(store);

    let img = fs.crash_image(Tear::None);
    let (_, loaded) = open(&img, tid(1)).expect("reopen");
    let st = state_of(&loaded).expect("state");
    assert_eq!(st, live);
    assert_eq!(st.view.start_offset(), 5);
    assert_eq!(st.leader_epoch, 4);
    let (back, _) = st.restore(0, limits).expect("restore");
    assert_eq!(back.start_offset(), 5);
    assert_eq!(back.next_offset(), 20);
    for o in 5..20 {
        let r = back.record(o).expect("record");
        let want = if o == 12 {
            RecordState::Archived
        } else {
            RecordState::Available
        };
        assert_eq!((r.state, r.delivery_count), (want, 1), "offset {o}");
    }
}

#[test]
fn huge_updates_are_split_and_replay_to_the_same_state() {
    let fs = SimFs::new();
    let (store, _) = open(&fs, tid(1)).expect("open");
    store
        .sync(store.write_init(0, 0, 0).expect("init"))
        .expect("sync");
    // Alternating states so nothing merges: u16::MAX * 2 + 7 batches.
    let n = UPDATE_BATCHES_MAX * 2 + 7;
    let batches: Vec<StateBatch> = (0..n as i64)
        .map(|o| {
            let state = if o % 2 == 0 {
                DurableState::Available
            } else {
                DurableState::Acknowledged
            };
            sb(o + 1, o + 1, state, 1)
        })
        .collect();
    let u = update(1, batches);
    let payloads = encode_update(0, &u, UPDATE_BATCHES_MAX);
    assert_eq!(payloads.len(), 3);
    let decoded: Vec<Entry> = payloads
        .iter()
        .map(|p| decode_entry(p).expect("decode"))
        .collect();
    let lasts: Vec<bool> = decoded
        .iter()
        .map(|e| matches!(e, Entry::Update { last: true, .. }))
        .collect();
    assert_eq!(lasts, [false, false, true]);
    for e in &decoded {
        let Entry::Update { update: part, .. } = e else {
            panic!("not an update: {e:?}");
        };
        assert_eq!(part.start_offset, 1);
        assert!(part.batches.len() <= UPDATE_BATCHES_MAX);
    }
    store
        .sync(store.write_update(0, &u).expect("write"))
        .expect("sync");
    let live = store.state().expect("state");
    assert_eq!(live.view.batches().len(), n);
    drop(store);
    let (_, loaded) = open(&fs.crash_image(Tear::None), tid(1)).expect("reopen");
    assert_eq!(state_of(&loaded), Some(live));
}

#[test]
fn a_torn_split_update_is_all_or_nothing_and_its_parts_never_join_a_later_update() {
    for tear in 0..80u64 {
        let fs = SimFs::new();
        let (mut store, _) = open(&fs, tid(1)).expect("open");
        store.set_batches_per_entry(2);
        store
            .sync(store.write_init(0, 0, 0).expect("init"))
            .expect("sync");
        let a = update(0, vec![sb(0, 9, DurableState::Available, 1)]);
        store
            .sync(store.write_update(0, &a).expect("write"))
            .expect("sync");
        let before = store.state().expect("state");
        let split = update(
            2,
            (0..10)
                .map(|o| {
                    let s = if o < 2 || o % 3 == 0 {
                        DurableState::Acknowledged
                    } else {
                        DurableState::Archived
                    };
                    sb(o, o, s, 1)
                })
                .collect(),
        );
        store.write_update(0, &split).expect("write, never synced");
        let after = store.state().expect("state");
        let img = fs.crash_image(Tear::Prefix(tear));
        let (mut again, loaded) = open(&img, tid(1)).expect("recover");
        let got = state_of(&loaded).expect("state");
        assert!(got == before || got == after, "tear {tear}: {got:?}");
        // An Update written after the recovery must not pick up parts of the
        // torn one.
        again.set_batches_per_entry(2);
        let later = update(
            got.view.start_offset(),
            vec![sb(9, 9, DurableState::Archived, 2)],
        );
        again
            .sync(again.write_update(1, &later).expect("write"))
            .expect("sync");
        let want = again.state().expect("state");
        drop(again);
        let (_, loaded) = open(&img.crash_image(Tear::None), tid(1)).expect("recover again");
        assert_eq!(state_of(&loaded), Some(want), "tear {tear}");
    }
}

#[test]
fn files_of_an_earlier_topic_id_are_removed_at_load() {
    let fs = SimFs::new();
    let (store, _) = open(&fs, tid(1)).expect("open");
    store
        .sync(store.write_init(0, 0, 7).expect("init"))
        .expect("sync");
    store.fold().expect("fold");
    let t = store
        .write_update(0, &update(7, vec![sb(7, 8, DurableState::Available, 1)]))
        .expect("write");
    store.sync(t).expect("sync");
    let files = store.files().clone();
    drop(store);
    assert!(fs.exists(&files.snapshot) && fs.exists(&files.journal));
    // The topic was deleted and created again with another id.
    let (store, loaded) = open(&fs, tid(2)).expect("open");
    assert_eq!(loaded, Loaded::Stale { topic_id: tid(1) });
    assert!(!fs.exists(&files.snapshot));
    assert_eq!(fs.read_all(&files.journal).expect("journal").len(), 0);
    assert_eq!(store.state(), None);
    // The new topic's share-partition starts afresh, and survives a crash.
    store
        .sync(store.write_init(0, 0, 0).expect("init"))
        .expect("sync");
    drop(store);
    let img = fs.crash_image(Tear::None);
    let (_, loaded) = open(&img, tid(2)).expect("reopen");
    assert_eq!(state_of(&loaded).map(|s| s.topic_id), Some(tid(2)));
    // A stale Init in the journal alone (never folded) is found as well.
    let (_, loaded) = open(&img, tid(3)).expect("reopen");
    assert_eq!(loaded, Loaded::Stale { topic_id: tid(2) });
    let (_, loaded) = open(&img, tid(3)).expect("reopen");
    assert_eq!(loaded, Loaded::Fresh);
}

#[test]
fn delete_removes_both_files_and_a_later_load_is_fresh() {
    let fs = SimFs::new();
    let (store, _) = open(&fs, tid(1)).expect("open");
    store
        .sync(store.write_init(0, 0, 0).expect("init"))
        .expect("sync");
    store.fold().expect("fold");
    let files = store.files().clone();
    store.delete().expect("delete");
    let img = fs.crash_image(Tear::None);
    for f in [&files.journal, &files.snapshot] {
        assert!(!img.exists(f), "{} left", f.display());
        assert!(!img.exists(&ShareFiles::deleted(f)));
    }
    let (_, loaded) = open(&img, tid(1)).expect("reopen");
    assert_eq!(loaded, Loaded::Fresh);
}

#[test]
fn corrupt_snapshots_and_undecodable_entries_are_errors_not_panics() {
    let fs = SimFs::new();
    let files = ShareFiles::new(&data_dir(), GROUP, TOPIC, PART);
    let cases: Vec<String> = vec![
        "not json".into(),
        "{}".into(),
        format!(
            r#"{{"format":2,"group":"{GROUP}","topic":"{TOPIC}","topic_id":"{}","partition":{PART},"state_epoch":0,"leader_epoch":0,"start_offset":0,"seq":0,"batches":[]}}"#,
            tid(1)
        ),
        format!(
            r#"{{"format":1,"group":"other","topic":"{TOPIC}","topic_id":"{}","partition":{PART},"state_epoch":0,"leader_epoch":0,"start_offset":0,"seq":0,"batches":[]}}"#,
            tid(1)
        ),
        format!(
            r#"{{"format":1,"group":"{GROUP}","topic":"{TOPIC}","topic_id":"{}","partition":{PART},"state_epoch":0,"leader_epoch":0,"start_offset":0,"seq":0,"batches":[[0,5,0,1],[3,9,2,1]]}}"#,
            tid(1)
        ),
        format!(
            r#"{{"format":1,"group":"{GROUP}","topic":"{TOPIC}","topic_id":"{}","partition":{PART},"state_epoch":0,"leader_epoch":0,"start_offset":0,"seq":0,"batches":[[0,5,1,1]]}}"#,
            tid(1)
        ),
        format!(
            r#"{{"format":1,"group":"{GROUP}","topic":"{TOPIC}","topic_id":"{}","partition":{PART},"state_epoch":0,"leader_epoch":0,"start_offset":-4,"seq":0,"batches":[]}}"#,
            tid(1)
        ),
    ];
    es_storage::fs::create_dir_durable(&fs, &files.dir).expect("dir");
    for c in &cases {
        meta::write_atomic(&fs, &files.snapshot, c.as_bytes()).expect("plant");
        assert!(open(&fs, tid(1)).is_err(), "accepted {c}");
    }
    fs.remove_file(&files.snapshot).expect("remove");
    // A CRC-valid journal entry that does not decode stops the load.
    let (j, _) = Journal::open(&fs, &files.journal).expect("journal");
    j.append(&[&[1, 77, 0]], 0).expect("append");
    drop(j);
    assert!(open(&fs, tid(1)).is_err());
}

/// One step of the crash workload.
#[derive(Clone, Debug)]
enum Step {
    Init(i64),
    Update(ShareUpdate),
    Reset(i32, i64),
    Fold,
    Delete,
}

fn workload() -> Vec<Step> {
    use DurableState::{Acknowledged as Ack, Archived as Arc_, Available as Av};
    vec![
        Step::Init(0),
        // acquire 0-9 (count 1), then 10-19
        Step::Update(update(0, vec![sb(0, 9, Av, 1)])),
        Step::Update(update(0, vec![sb(10, 19, Av, 1)])),
        // accept 0-4: start moves
        Step::Update(update(5, vec![])),
        // reject 6, release-and-reacquire 5-7 with count 2 (split into parts)
        Step::Update(update(
            5,
            vec![
                sb(5, 5, Av, 2),
                sb(6, 6, Arc_, 1),
                sb(7, 7, Av, 2),
                sb(8, 8, Ack, 1),
            ],
        )),
        Step::Fold,
        Step::Update(update(9, vec![sb(9, 12, Ack, 1), sb(20, 29, Av, 1)])),
        Step::Update(update(13, vec![])),
        Step::Reset(1, 100),
        Step::Update(update(100, vec![sb(100, 104, Av, 1)])),
        Step::Fold,
        Step::Update(update(102, vec![sb(100, 101, Ack, 1), sb(105, 105, Av, 3)])),
        Step::Delete,
        Step::Init(50),
        Step::Update(update(50, vec![sb(50, 59, Av, 1)])),
    ]
}

/// The model: the state after a step.
fn model_apply(m: &mut Option<ShareState>, s: &Step) {
    match s {
        Step::Init(start) => {
            *m = Some(ShareState {
                topic_id: tid(1),
                state_epoch: 0,
                leader_epoch: 0,
                view: DurableView::new(*start),
            })
        }
        Step::Update(u) => {
            if let Some(st) = m {
                st.view.apply(u);
            }
        }
        Step::Reset(epoch, start) => {
            if let Some(st) = m {
                st.state_epoch = *epoch;
                st.view = DurableView::new(*start);
            }
        }
        Step::Fold => {}
        Step::Delete => *m = None,
    }
}

/// Runs the workload until a failure; returns the index (into the model's
/// states) of the last answered change and of the last attempted one.
fn run(fs: &SimFs) -> (usize, usize) {
    let mut store = None;
    let mut answered = 0;
    for (i, step) in workload().iter().enumerate() {
        let at = i + 1;
        if store.is_none() {
            match open(fs, tid(1)) {
                Ok((mut s, _)) => {
                    s.set_fold_bytes(400);
                    s.set_batches_per_entry(3);
                    store = Some(s);
                }
                Err(_) => return (answered, answered),
            }
        }
        let Some(s) = store.as_ref() else {
            return (answered, answered);
        };
        let res = match step {
            Step::Init(start) => s.write_init(0, 0, *start).and_then(|t| s.sync(t)),
            Step::Update(u) => s.write_update(0, u).and_then(|t| s.sync(t)),
            Step::Reset(epoch, start) => s.write_reset(*epoch, *start).and_then(|t| s.sync(t)),
            Step::Fold => s.fold(),
            Step::Delete => store.take().map_or(Ok(()), ShareStore::delete),
        };
        if res.is_err() {
            return (answered, at);
        }
        answered = at;
        if let Some(s) = store.as_ref() {
            if s.fold_if_due().is_err() {
                return (answered, answered);
            }
        }
    }
    (answered, answered)
}

#[test]
fn crash_at_every_sync_point_keeps_every_answered_change() {
    let mut states = vec![None];
    let mut m = None;
    for s in workload() {
        model_apply(&mut m, &s);
        states.push(m.clone());
    }
    let clean = SimFs::new();
    assert_eq!(run(&clean), (workload().len(), workload().len()));
    let total = clean.sync_count();
    assert!(total > 20, "only {total} sync points");
    // The clean run ends in the model's last state.
    let (_, loaded) = open(&clean.crash_image(Tear::None), tid(1)).expect("recover");
    assert_eq!(state_of(&loaded), states[workload().len()]);
    let mut checked = 0;
    for k in 1..=total {
        for tear in [Tear::None, Tear::Prefix(k * 13), Tear::Prefix(k * 7 + 3)] {
            let fs = SimFs::new();
            fs.crash_at_sync(k);
            let (answered, attempted) = run(&fs);
            assert!(fs.has_crashed(), "sync {k} was never reached");
            let img = fs.crash_image(tear);
            let (_, loaded) = open(&img, tid(1))
                .unwrap_or_else(|e| panic!("crash at sync {k} {tear:?}: recovery failed: {e}"));
            let got = state_of(&loaded);
            let allowed = &states[answered..=attempted];
            assert!(
                allowed.contains(&got),
                "crash at sync {k} {tear:?}: recovered {got:?}, answered step {answered}, attempted {attempted}"
            );
            let (_, again) = open(&img, tid(1)).expect("recover again");
            assert_eq!(
                state_of(&again),
                got,
                "crash at sync {k} {tear:?}: recovering twice differs"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, total * 3);
}

#[test]
fn a_copied_write_must_be_one_whole_change_of_this_topic() {
    let fs = SimFs::new();
    let (s, _) = open(&fs, tid(1)).expect("open");
    let init = |id: Uuid| {
        encode_entry(&Entry::Init {
            topic_id: id,
            state_epoch: 0,
            leader_epoch: 2,
            start_offset: 5,
        })
        .expect("init")
    };
    let parts = encode_update(2, &update(5, vec![sb(5, 9, DurableState::Available, 1)]), 1);
    // Refused: an Update before any state, an Init of another topic id,
    // garbage, an empty write, a split Update without its last part, and
    // two changes in one write.
    assert!(s.write_copied(&parts).is_err(), "an update before any init");
    assert!(s.write_copied(&[init(tid(2))]).is_err(), "another topic id");
    assert!(s.write_copied(&[vec![1, 2, 3]]).is_err(), "garbage");
    assert!(s.write_copied(&[]).is_err(), "empty");
    assert!(s.state().is_none(), "nothing applied");
    s.write_copied(&[init(tid(1))]).expect("init");
    let mut split = encode_update(
        2,
        &update(
            5,
            vec![
                sb(5, 6, DurableState::Acknowledged, 1),
                sb(7, 9, DurableState::Available, 1),
            ],
        ),
        1,
    );
    assert_eq!(split.len(), 2, "split in two entries");
    let last = split.pop().expect("last");
    assert!(s.write_copied(&split).is_err(), "a part without its last");
    let two = vec![init(tid(1)), init(tid(1))];
    assert!(s.write_copied(&two).is_err(), "two changes");
    split.push(last);
    let t = s.write_copied(&split).expect("a whole split update");
    s.sync(t).expect("sync");
    let (_, loaded) = open(&fs, tid(1)).expect("reopen");
    let st = state_of(&loaded).expect("state");
    assert_eq!(st, s.state().expect("state"));
    assert_eq!(st.view.start_offset(), 5);
}

/// A follower's store with some state of its own, then the leader's state
/// installed over it.
fn install_run(fs: &SimFs, leader: &ShareState, install: bool) -> Result<(), StorageError> {
    let (s, _) = open(fs, tid(1))?;
    s.sync(s.write_init(0, 1, 0)?)?;
    s.sync(s.write_update(1, &update(0, vec![sb(0, 4, DurableState::Acknowledged, 1)]))?)?;
    if install {
        s.install(leader)?;
    }
    Ok(())
}

#[test]
fn an_installed_state_replaces_the_journal_and_survives_a_crash_at_every_step() {
    let leader =
        ShareState::from_parts(tid(1), 3, 7, 10, &[(12, 14, 4, 2), (15, 19, 0, 3)]).expect("state");
    let setup = SimFs::new();
    install_run(&setup, &leader, false).expect("setup");
    let before = state_of(
        &open(&setup.crash_image(Tear::None), tid(1))
            .expect("open")
            .1,
    );
    let clean = SimFs::new();
    install_run(&clean, &leader, true).expect("install");
    let (first, total) = (setup.sync_count() + 1, clean.sync_count());
    assert!(total >= first + 2, "the install syncs");
    // Whatever a crash during the install keeps is the old state or the new.
    for k in first..=total {
        for tear in [Tear::None, Tear::Prefix(k * 11)] {
            let fs = SimFs::new();
            fs.crash_at_sync(k);
            let _ = install_run(&fs, &leader, true);
            let (_, l) = open(&fs.crash_image(tear), tid(1)).expect("recover");
            let got = state_of(&l);
            assert!(
                got == before || got.as_ref() == Some(&leader),
                "crash at sync {k} {tear:?}: {got:?}"
            );
        }
    }
    let (s, l) = open(&clean, tid(1)).expect("reopen");
    assert_eq!(state_of(&l), Some(leader.clone()));
    let other = ShareState::from_parts(tid(2), 0, 7, 10, &[]).expect("state");
    assert!(s.install(&other).is_err(), "another topic id");
    // A write copied after it continues from the installed state.
    let w = encode_update(
        7,
        &update(10, vec![sb(10, 11, DurableState::Acknowledged, 1)]),
        100,
    );
    s.sync(s.write_copied(&w).expect("copied")).expect("sync");
    let (_, l) = open(&clean, tid(1)).expect("reopen");
    assert_eq!(state_of(&l), s.state());
    assert_eq!(state_of(&l).expect("state").view.start_offset(), 10);
}
