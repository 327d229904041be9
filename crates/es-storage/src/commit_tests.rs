//! Tests of the group-commit core: events in, decisions out, and a model
//! test against a plain reference (a list of waiters and a durable offset).

use proptest::prelude::*;

use super::*;

type Core = CommitCore<u64, u32>;

#[test]
fn waiters_gather_behind_a_running_sync_and_share_the_next() {
    let mut c = Core::new(0);
    c.appended(1);
    assert_eq!(c.register(1, 1, 10), Registered::Waiting { submit: true });
    assert_eq!(c.waiters_goal(), Some(1));
    assert_eq!(c.begin_sync(1), Begin::Start(1));
    // Two more arrive while it runs: no second sync, and no second submit.
    c.appended(3);
    assert_eq!(c.register(2, 1, 11), Registered::Waiting { submit: false });
    assert_eq!(c.register(3, 1, 12), Registered::Waiting { submit: false });
    assert_eq!(c.begin_sync(3), Begin::Busy);
    assert_eq!(c.try_begin_sync(), None);
    let s = c.sync_done(1);
    assert_eq!(
        s,
        Settled {
            durable: 1,
            completed: vec![10]
        }
    );
    // One sync for both.
    assert_eq!(c.begin_sync(3), Begin::Start(3));
    assert_eq!(c.sync_done(3).completed, vec![11, 12]);
    assert_eq!(c.begin_sync(3), Begin::Covered);
    assert!(!c.stay_queued());
    assert_eq!(c.waiters_goal(), None);
}

#[test]
fn a_failed_sync_fences_for_good_and_fails_every_waiter() {
    let mut c = Core::new(0);
    c.appended(2);
    c.register(1, 1, 1);
    c.register(2, 1, 2);
    assert_eq!(c.begin_sync(2), Begin::Start(2));
    let (fence, failed) = c.sync_failed("EIO".into());
    assert_eq!(fence, Fence("EIO".into()));
    assert_eq!(failed, vec![1, 2]);
    assert_eq!(c.durable().offset(), 0, "nothing became durable");
    // Never again: no sync, waiters fail at once, appends are refused.
    assert_eq!(c.begin_sync(2), Begin::Fenced(fence.clone()));
    assert_eq!(c.try_begin_sync(), None);
    assert_eq!(c.register(2, 1, 3), Registered::Now(3, Err(fence.clone())));
    assert_eq!(c.writable(), Err(Refused::Fenced(fence)));
    assert_eq!(c.waiting(), 0);
}

#[test]
fn with_every_records_above_one_a_waiter_waits_only_for_a_full_group() {
    let mut c = Core::new(0);
    c.appended(2);
    assert_eq!(c.register(2, 3, 1), Registered::Now(1, Ok(())));
    c.appended(3);
    // Three waiting: this waiter needs everything written so far.
    assert_eq!(c.register(3, 3, 2), Registered::Waiting { submit: true });
    assert_eq!(c.waiters_goal(), Some(3));
    assert_eq!(c.visible(3), &3, "readers see what is written");
    assert_eq!(c.visible(1), &0, "or only what is durable");
    assert_eq!(c.begin_sync(3), Begin::Start(3));
    assert_eq!(c.sync_done(3).completed, vec![2]);
}

#[test]
fn a_roll_moves_only_the_written_mark() {
    let mut c = Core::new(0);
    c.appended(5);
    c.register(5, 1, 1);
    // A pool sync of the old segment is running when the roll happens.
    assert_eq!(c.begin_sync(5), Begin::Start(5));
    c.rolled(5);
    assert_eq!(c.durable(), &0, "the old segment is not sealed yet");
    assert_eq!(c.waiting(), 1);
    c.appended(6);
    assert_eq!(c.sync_done(5).completed, vec![1]);
    // The next sync covers the new segment (the shell seals the old first).
    assert_eq!(c.begin_sync(6), Begin::Start(6));
    assert_eq!(c.sync_done(6).durable, 6);
}

#[test]
fn a_truncation_fails_the_waiters_above_the_cut_and_keeps_the_others() {
    let mut c = Core::new(0);
    c.appended(10);
    assert_eq!(c.begin_sync(10), Begin::Start(10));
    c.sync_done(10);
    c.appended(20);
    assert_eq!(c.register(12, 1, 1), Registered::Waiting { submit: true });
    assert_eq!(c.register(18, 1, 2), Registered::Waiting { submit: false });
    assert_eq!(c.truncated(15, false), vec![2], "offset 17 is gone");
    assert_eq!((*c.written(), *c.durable()), (15, 10));
    assert_eq!(c.waiting(), 1);
    // Below the durable mark, the durable mark comes back too.
    assert_eq!(c.truncated(8, false), vec![1]);
    assert_eq!((*c.written(), *c.durable()), (8, 8));
    assert_eq!(c.begin_sync(8), Begin::Covered);
    c.appended(9);
    c.register(9, 1, 3);
    // Emptied and restarted further on: every waiter fails, all durable.
    assert_eq!(c.truncated(100, true), vec![3]);
    assert_eq!((*c.written(), *c.durable()), (100, 100));
    assert_eq!(c.pending(), 0);
}

#[test]
fn a_sync_running_across_a_truncation_covers_at_most_the_cut() {
    let mut c = Core::new(0);
    c.appended(10);
    assert_eq!(c.begin_sync(10), Begin::Start(10));
    c.register(10, 1, 1);
    assert!(c.truncated(6, false).contains(&1));
    // Records written after the cut are not covered by the running sync.
    c.appended(12);
    c.register(12, 1, 2);
    let s = c.sync_done(10);
    assert_eq!(
        s.durable, 6,
        "the sync covered the old bytes below the cut only"
    );
    assert!(s.completed.is_empty());
    assert_eq!(c.begin_sync(12), Begin::Start(12));
    assert_eq!(c.sync_done(12).completed, vec![2]);
}

#[test]
fn close_refuses_appends() {
    let mut c = Core::new(0);
    assert!(c.close().is_empty());
    assert_eq!(c.writable(), Err(Refused::Closed));
}

/// An event of the model test.
#[derive(Clone, Debug)]
enum Event {
    Append(u64),
    /// A waiter for `end` records back from the written end.
    Register {
        back: u64,
        every: u64,
    },
    /// A blocking caller asks for `back` records back from the written end.
    Begin {
        back: u64,
    },
    TryBegin,
    PoolGoal,
    SyncDone,
    SyncFail,
    Roll,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => (1u64..4).prop_map(Event::Append),
        3 => (0u64..4, prop_oneof![4 => Just(1u64), 1 => 2u64..4])
            .prop_map(|(back, every)| Event::Register { back, every }),
        2 => (0u64..4).prop_map(|back| Event::Begin { back }),
        1 => Just(Event::TryBegin),
        1 => Just(Event::PoolGoal),
        3 => Just(Event::SyncDone),
        1 => Just(Event::SyncFail),
        1 => Just(Event::Roll),
    ]
}

/// A waiter of the model: (id, target).
type Waiter = (u32, u64);

/// The reference: what a waiter needs, what is durable, what runs.
#[derive(Debug, Default)]
struct Model {
    written: u64,
    durable: u64,
    /// (id, target) of waiters not yet settled.
    waiting: Vec<(u32, u64)>,
    /// The mark the running sync covers.
    syncing: Option<u64>,
    fenced: bool,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn the_core_agrees_with_a_reference_model(events in prop::collection::vec(event(), 1..80)) {
        let mut c = Core::new(0);
        let mut m = Model::default();
        let mut next_id = 0u32;
        let mut done: Vec<u32> = Vec::new();
        let mut failed: Vec<u32> = Vec::new();
        for e in events {
            match e {
                Event::Append(n) => {
                    if c.writable().is_ok() {
                        m.written += n;
                        c.appended(m.written);
                    } else {
                        prop_assert!(m.fenced);
                    }
                }
                Event::Register { back, every } => {
                    let id = next_id;
                    next_id += 1;
                    let end = m.written.saturating_sub(back);
                    match c.register(end, every, id) {
                        Registered::Now(w, Ok(())) => {
                            prop_assert_eq!(w, id);
                            prop_assert!(!m.fenced);
                            if every == 1 {
                                prop_assert!(end <= m.durable, "completed before durable");
                            } else {
                                prop_assert!(m.written - m.durable < every);
                            }
                            done.push(id);
                        }
                        Registered::Now(w, Err(_)) => {
                            prop_assert_eq!(w, id);
                            prop_assert!(m.fenced, "failed without a fence");
                            failed.push(id);
                        }
                        Registered::Waiting { .. } => {
                            prop_assert!(!m.fenced);
                            let target = if every == 1 { end } else { m.written };
                            prop_assert!(target > m.durable);
                            m.waiting.push((id, target));
                        }
                    }
                }
                Event::Begin { back } => {
                    let target = m.written.saturating_sub(back);
                    match c.begin_sync(target) {
                        Begin::Covered => prop_assert!(m.durable >= target),
                        Begin::Fenced(_) => prop_assert!(m.fenced),
                        Begin::Busy => prop_assert!(m.syncing.is_some()),
                        Begin::Start(at) => {
                            prop_assert!(m.syncing.is_none(), "a second sync started");
                            prop_assert!(!m.fenced, "a sync started after a failed one");
                            prop_assert_eq!(at, m.written, "a sync covers all written");
                            m.syncing = Some(at);
                        }
                    }
                }
                Event::TryBegin => match c.try_begin_sync() {
                    Some(at) => {
                        prop_assert!(m.syncing.is_none() && !m.fenced);
                        prop_assert_eq!(at, m.written);
                        m.syncing = Some(at);
                    }
                    None => prop_assert!(
                        m.syncing.is_some() || m.fenced || m.durable >= m.written
                    ),
                },
                Event::PoolGoal => {
                    let goal = c.waiters_goal();
                    let want = m.waiting.iter().map(|w| w.1.min(m.written)).max();
                    prop_assert_eq!(goal, want);
                }
                Event::SyncDone => {
                    if let Some(at) = m.syncing.take() {
                        let s = c.sync_done(at);
                        m.durable = m.durable.max(at);
                        prop_assert_eq!(s.durable, m.durable);
                        let durable = m.durable;
                        let (ready, wait): (Vec<Waiter>, Vec<Waiter>) =
                            m.waiting.iter().partition(|w| w.1 <= durable);
                        let ready: Vec<u32> = ready.into_iter().map(|w| w.0).collect();
                        prop_assert_eq!(&s.completed, &ready, "every covered waiter, no other");
                        m.waiting = wait;
                        done.extend(ready);
                    }
                }
                Event::SyncFail => {
                    if m.syncing.take().is_some() {
                        let (_, w) = c.sync_failed("EIO".into());
                        let all: Vec<u32> = m.waiting.drain(..).map(|w| w.0).collect();
                        prop_assert_eq!(&w, &all, "a failed sync fails every waiter");
                        m.fenced = true;
                        failed.extend(all);
                    }
                }
                Event::Roll => {
                    if c.writable().is_ok() {
                        // Only the written mark: what was waiting still waits.
                        c.rolled(m.written);
                    }
                }
            }
            prop_assert_eq!(c.durable().offset(), m.durable);
            prop_assert_eq!(c.written().offset(), m.written);
            prop_assert_eq!(c.syncing(), m.syncing.is_some());
            prop_assert_eq!(c.waiting(), m.waiting.len());
            prop_assert!(!m.fenced || m.waiting.is_empty(), "a fenced core holds waiters");
        }
        // Whatever is left waiting: one successful sync of everything settles it.
        if !m.fenced {
            if let Some(at) = m.syncing.take() {
                let s = c.sync_done(at);
                done.extend(s.completed);
            }
            if let Begin::Start(at) = c.begin_sync(u64::MAX) {
                done.extend(c.sync_done(at).completed);
            }
            prop_assert_eq!(c.waiting(), 0, "every waiter completes after a covering sync");
        }
        // No waiter both succeeded and failed, and none was lost.
        let mut all: Vec<u32> = done.iter().chain(failed.iter()).copied().collect();
        all.sort_unstable();
        let before = all.len();
        all.dedup();
        prop_assert_eq!(before, all.len(), "a waiter settled twice");
        if !m.fenced {
            prop_assert_eq!(all.len() as u32, next_id, "a waiter lost");
        }
    }
}
