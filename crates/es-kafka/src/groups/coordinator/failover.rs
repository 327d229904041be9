//! The coordinator in a cluster: where its documents go ([`GroupLog`], the
//! metadata quorum in a broker), and how groups move with the leadership of
//! their `__consumer_offsets` partition: [`Coordinator::reload`] when this
//! broker starts leading a partition (the groups placed there come back from
//! the replicated state, Empty, with their offsets, as after a restart) and
//! [`Coordinator::unload`] when it stops (their parked requests are answered
//! NOT_COORDINATOR and their timers stop, so a former coordinator never acts
//! on a group again).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{Coordinator, Kind, State};
use crate::groups::error::GroupError;
use crate::groups::store::{self, GroupFile};

/// The future a [`GroupLog`] answers with: Ok once the change is durable
/// (replicated and applied here), Err with why not.
pub type LogFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Where a group's durable changes go instead of this broker's own files.
pub trait GroupLog: Send + Sync + std::fmt::Debug + 'static {
    /// Makes `doc` the group's durable state.
    fn write(&self, doc: GroupFile) -> LogFuture;
    /// Removes the group's durable state.
    fn remove(&self, group: String) -> LogFuture;
}

impl State {
    /// Takes a group out of memory: its parked requests are answered
    /// NOT_COORDINATOR, its timer and file claim dropped. Waiters on its
    /// durability see the coordinator go away (NOT_COORDINATOR).
    fn drop_group(&mut self, group_id: &str) {
        let Some(mut g) = self.groups.remove(group_id) else {
            return;
        };
        let mut out = Vec::new();
        if let Kind::Classic(c) = &mut g.kind {
            c.abort_all(GroupError::NotCoordinator, &mut out);
        }
        self.dispatch(out);
        if let Some(d) = g.deadline {
            self.deadlines.remove(&(d, group_id.to_string()));
        }
        let file = store::file_name(group_id);
        if self.files.get(&file).is_some_and(|o| o == group_id) {
            self.files.remove(&file);
        }
    }
}

impl Coordinator {
    /// Sends every later document write and removal to `log`. Set once,
    /// before requests arrive; later calls are ignored.
    pub fn set_log(&self, log: Arc<dyn GroupLog>) {
        let _ = self.log.set(log);
    }

    /// This broker now coordinates the groups `placed` selects: replaces
    /// whatever memory held for them with `docs`, the replicated state.
    /// Members rejoin, as after a restart.
    pub fn reload(&self, docs: Vec<GroupFile>, placed: &dyn Fn(&str) -> bool) {
        let mut st = self.state.lock();
        let stale: Vec<String> = st.groups.keys().filter(|g| placed(g)).cloned().collect();
        for g in &stale {
            st.drop_group(g);
        }
        let n = docs.len();
        for doc in docs {
            st.adopt(doc, self.config);
        }
        drop(st);
        self.timer_wake.notify_one();
        tracing::debug!(groups = n, dropped = stale.len(), "loaded groups");
    }

    /// This broker no longer coordinates the groups `placed` selects.
    pub fn unload(&self, placed: &dyn Fn(&str) -> bool) -> usize {
        let mut st = self.state.lock();
        let gone: Vec<String> = st.groups.keys().filter(|g| placed(g)).cloned().collect();
        for g in &gone {
            st.drop_group(g);
        }
        drop(st);
        self.timer_wake.notify_one();
        gone.len()
    }

    /// The documents of the groups in memory (the one-time import).
    pub fn group_documents(&self) -> Vec<GroupFile> {
        let st = self.state.lock();
        st.groups
            .values()
            .filter(|g| !g.deleting)
            .map(|g| g.document())
            .collect()
    }
}
