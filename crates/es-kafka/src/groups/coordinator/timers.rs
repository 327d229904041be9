//! The coordinator's timers: the work after every operation on a group
//! (fire the timers already due, answer parked requests, re-index the
//! group's deadline, persist a change of its type), and the task that
//! sleeps until the earliest deadline of any group and ticks the groups due.

use std::sync::Arc;
use std::time::Duration;

use super::{Coordinator, Kind, State};
use crate::groups::classic::Effect;
use crate::groups::Millis;

impl Coordinator {
    /// Work after any operation on a group: fire timers that are already due
    /// (zero delays), answer parked requests, re-index the group's deadline,
    /// and persist a change of the group's type or protocol type.
    pub(super) fn after_op(
        self: &Arc<Self>,
        st: &mut State,
        group_id: &str,
        now: Millis,
        out: Vec<Effect>,
    ) {
        self.settle(st, group_id, now, out);
        self.timer_wake.notify_one();
    }

    /// The coordinator's timers (session, rebalance and join timeouts):
    /// fires every group's deadline as it passes, until [`Coordinator::shutdown`].
    /// The broker's owner runs it ([`crate::broker::Timers`]); without it
    /// no deadline fires.
    pub async fn run_timers(self: Arc<Self>) {
        loop {
            if self.state.lock().shut_down {
                return;
            }
            match self.fire_due() {
                Some(at) => {
                    let when = self.epoch + Duration::from_millis(at);
                    tokio::select! {
                        _ = tokio::time::sleep_until(tokio::time::Instant::from_std(when)) => {}
                        _ = self.timer_wake.notified() => {}
                    }
                }
                None => self.timer_wake.notified().await,
            }
        }
    }

    /// Ticks every group whose deadline has passed; returns the next deadline.
    fn fire_due(self: &Arc<Self>) -> Option<Millis> {
        let mut st = self.state.lock();
        let now = self.now();
        let due: Vec<String> = st
            .deadlines
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, id)| id.clone())
            .collect();
        for id in due {
            // after_op ticks the group; the deadline is re-indexed there.
            self.settle(&mut st, &id, now, Vec::new());
        }
        st.deadlines.iter().next().map(|(d, _)| *d)
    }

    /// Fires the group's due timers, answers parked requests, re-indexes its
    /// deadline and starts a write when its type or protocol type changed.
    pub(super) fn settle(
        self: &Arc<Self>,
        st: &mut State,
        group_id: &str,
        now: Millis,
        mut out: Vec<Effect>,
    ) {
        let mut persist = false;
        if let Some(g) = st.groups.get_mut(group_id) {
            match &mut g.kind {
                Kind::Classic(c) => c.tick(now, &mut out),
                Kind::Consumer(c) => c.tick(now),
                Kind::Share(c) => {
                    // Fencing a member does not release its records: its
                    // share sessions do when its connections close, or
                    // their locks expire (docs/share-groups-design.md §2.7).
                    c.tick(now);
                }
            }
            if g.written_meta.as_ref() != Some(&g.meta()) && !g.deleting {
                g.version += 1;
                persist = self.start_writer(g);
            }
        }
        st.dispatch(out);
        st.reindex(group_id);
        if persist {
            self.spawn_writer(group_id);
        }
    }
}
