//! A property test of the ShareManager against the bare core: random
//! fetches, acknowledgements (every type, Renew included, valid or not, any
//! member), clock moves with lock expiry, connection closes, log growth, the
//! log start moving (DeleteRecords), unloads and clean restarts; after each step the shell's state (every offset, the summary,
//! the lock index entry) must be the core's, driven with the same inputs,
//! rebuilt from its own journal Updates where the shell reloads its files.
//! Power losses too (no shutdown work; only fsynced bytes kept, sometimes a
//! torn prefix of the rest): every change answered was fsynced before its
//! answer, and the changes nobody waits for (lock expiry, releases, archives
//! at the limit, a moved log start) are ones the restart rules make again,
//! so the recovered shell must equal the core rebuilt from every Update.

use std::sync::atomic::Ordering;

use proptest::prelude::*;

use super::tests::{key, tp, Env, TestLog, GROUP};
use super::*;
use crate::shares::partition::{AcquireMode, DurableView, ShareLimits};
use crate::shares::sessions::{SessionKey, ShareFetchSession};

#[derive(Clone, Debug)]
enum Op {
    Fetch {
        member: u8,
        max: i32,
    },
    Ack {
        member: u8,
        first: i64,
        len: i64,
        t: i8,
    },
    Advance {
        ms: u64,
    },
    Close {
        member: u8,
    },
    Grow {
        by: i64,
    },
    /// DeleteRecords (or retention) moves the log start forward.
    DeleteRecords {
        by: i64,
    },
    Unload,
    Restart,
    /// A crash: the shell loses its memory and every unsynced byte but a
    /// torn prefix drawn from `tear` (0: none kept).
    PowerLoss {
        tear: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..3, 1i32..12).prop_map(|(member, max)| Op::Fetch { member, max }),
        4 => (0u8..3, 0i64..40, 1i64..6, 0i8..5)
            .prop_map(|(member, first, len, t)| Op::Ack { member, first, len, t }),
        // Exactly one lock duration lands on deadlines.
        2 => prop_oneof![Just(1_000u64), 0u64..1_500].prop_map(|ms| Op::Advance { ms }),
        1 => (0u8..3).prop_map(|member| Op::Close { member }),
        1 => (0i64..10).prop_map(|by| Op::Grow { by }),
        1 => (0i64..8).prop_map(|by| Op::DeleteRecords { by }),
        1 => Just(Op::Unload),
        1 => Just(Op::Restart),
        1 => (0u64..4).prop_map(|tear| Op::PowerLoss { tear }),
    ]
}

/// The model: the bare core driven with the same inputs, and the fold of
/// every Update it emitted (what a clean restart reads back).
struct Model {
    core: SharePartition,
    durable: DurableView,
}

impl Model {
    fn note(&mut self, o: &Outcome) {
        if let Some(u) = &o.update {
            self.durable.apply(u);
        }
    }

    /// The core rebuilt from what it journaled (§3.4).
    fn restore(&mut self, log_start: i64, limits: ShareLimits) -> Result<(), TestCaseError> {
        let (core, o) = SharePartition::restore(
            self.durable.start_offset(),
            &self.durable.batches(),
            log_start,
            limits,
        )
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
        self.core = core;
        self.note(&o);
        Ok(())
    }
}

fn member_name(m: u8) -> String {
    format!("m{m}")
}

fn run_ops(ops: &[Op]) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut env = Env::new(TestLog::new(0, 20));
    let k = key(0);
    let limits = env.config.limits;
    // Every member has a session on its own connection (member m on m).
    let open_sessions = |env: &Env| {
        for m in 0..3u8 {
            let s = SessionKey::new(GROUP, member_name(m));
            let r = env.mgr.with_sessions(|c| {
                c.share_fetch(ShareFetchSession {
                    key: &s,
                    epoch: 0,
                    partitions: &[tp(0)],
                    forgotten: &[],
                    acknowledgements_present: false,
                    connection: u64::from(m),
                })
            });
            assert!(r.is_ok());
        }
    };
    open_sessions(&env);
    env.touch(&k);
    let mut model = Model {
        core: SharePartition::new(0, limits),
        durable: DurableView::new(0),
    };
    for op in ops {
        match op {
            Op::Fetch { member, max } => {
                let m = member_name(*member);
                let now = env.mgr.now_ms();
                // Every use of a share-partition applies the log start.
                let o = model.core.advance_log_start(env.log.start());
                model.note(&o);
                let got = env
                    .fetch_ticket(&k, &m, *max)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let fetch_offset = model.core.next_fetch_offset();
                let batches = env.log.batches_from(fetch_offset);
                let p = AcquireParams {
                    member: &m,
                    max_records: *max,
                    batch_size: 100,
                    mode: AcquireMode::BatchOptimized,
                    lock_duration_ms: env.config.record_lock_duration_ms,
                    now_ms: now,
                };
                // The shell reads nothing when no record may be acquired.
                let allowed = {
                    let c = &model.core;
                    let wanted = i64::from(*max);
                    let mut a = wanted.min(limits.max_record_locks - c.in_flight());
                    if a <= 0 && fetch_offset < c.next_offset() {
                        a = wanted.min(c.next_offset() - fetch_offset);
                    }
                    a
                };
                let read: &[(i64, i64)] = if allowed > 0 { &batches } else { &[] };
                let view = LogView {
                    log_start: env.log.start(),
                    end: env.log.hw(),
                    fetch_offset,
                    batches: read,
                };
                let want = model
                    .core
                    .acquire(&p, &view)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                model.note(&want.outcome);
                prop_assert_eq!(&got.records, &want.records);
                if let Some(t) = got.ticket {
                    rt.block_on(env.mgr.wait_durable(t))
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
            Op::Ack {
                member,
                first,
                len,
                t,
            } => {
                let m = member_name(*member);
                let b = AckBatch {
                    first: *first,
                    last: first + len - 1,
                    types: vec![*t],
                };
                let p = AckParams {
                    member: &m,
                    renew_allowed: true,
                    lock_duration_ms: env.config.record_lock_duration_ms,
                    now_ms: env.mgr.now_ms(),
                };
                let got = env
                    .mgr
                    .acknowledge(&env.target(&k), &m, std::slice::from_ref(&b));
                let o = model.core.advance_log_start(env.log.start());
                model.note(&o);
                let want = model.core.acknowledge(&p, &[b]);
                match (got, want) {
                    (Ok(ticket), Ok(o)) => {
                        model.note(&o);
                        prop_assert_eq!(ticket.is_some(), o.update.is_some());
                        if let Some(t) = ticket {
                            rt.block_on(env.mgr.wait_durable(t))
                                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        }
                    }
                    (Err(ShareFailure::Share(g)), Err(w)) => prop_assert_eq!(g, w),
                    (g, w) => prop_assert!(false, "shell {:?}, core {:?}", g.map(|_| ()), w),
                }
            }
            Op::Advance { ms } => {
                env.advance(*ms);
                env.mgr.expire_due();
                let o = model.core.expire_locks(env.mgr.now_ms());
                model.note(&o.outcome);
            }
            Op::Close { member } => {
                env.mgr.connection_closed(u64::from(*member));
                let o = model.core.release_member(&member_name(*member));
                model.note(&o);
                open_sessions(&env);
            }
            Op::Grow { by } => {
                env.log.hw.fetch_add(*by, Ordering::SeqCst);
            }
            Op::DeleteRecords { by } => {
                let to = (env.log.start() + by).min(env.log.hw());
                env.log.start.store(to, Ordering::SeqCst);
            }
            Op::Unload => {
                // Sessions name the share-partition: close them all first
                // (releasing), then unload if idle.
                for m in 0..3u8 {
                    env.mgr.connection_closed(u64::from(m));
                    let o = model.core.release_member(&member_name(m));
                    model.note(&o);
                }
                env.mgr.wait_syncs_idle();
                env.mgr.unload_idle();
                prop_assert_eq!(env.mgr.loaded(), 0, "idle after every release");
                open_sessions(&env);
                env.touch(&k);
                // A reload is a restore from the files: every offset's
                // state is the same, but the in-flight batches are the
                // journal's merged ranges, so later acquisitions group
                // offsets as the restored core does.
                model.restore(env.log.start(), limits)?;
            }
            Op::Restart => {
                env.mgr
                    .close()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                env = env.crash();
                open_sessions(&env);
                env.touch(&k);
                model.restore(env.log.start(), limits)?;
            }
            Op::PowerLoss { tear } => {
                let tear = match tear {
                    0 => es_storage::simfs::Tear::None,
                    t => es_storage::simfs::Tear::Prefix(*t),
                };
                env = env.crash_torn(tear);
                open_sessions(&env);
                env.touch(&k);
                model.restore(env.log.start(), limits)?;
            }
        }
        let got = env.mgr.inspect(&k, |c| c.summary()).expect("loaded");
        prop_assert_eq!(got, model.core.summary(), "after {:?}", op);
        for o in got.start_offset..got.next_offset {
            let g = env.mgr.inspect(&k, |c| c.record(o)).flatten();
            prop_assert_eq!(g, model.core.record(o), "offset {} after {:?}", o, op);
        }
        prop_assert_eq!(
            env.mgr.locks().deadline(&k),
            model.core.next_lock_deadline(),
            "lock index after {:?}",
            op
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_shell_matches_the_core_through_unloads_restarts_and_power_losses(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        run_ops(&ops)?;
    }
}
