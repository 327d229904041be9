//! The coordinator's admin requests: ListGroups with its state and type
//! filters, DescribeGroups, and DeleteGroups (validated here, its file
//! removed under the file's lock, the group restored if that fails).

use std::sync::Arc;

use super::{ClassicDescribe, Coordinator, Durable, Kind, Listed};
use crate::groups::error::GroupError;
use crate::groups::{store, CONSUMER_PROTOCOL_TYPE, SHARE_PROTOCOL_TYPE};

impl Coordinator {
    /// ListGroups with Kafka's case-insensitive state and type filters.
    pub fn list(&self, states: &[String], types: &[String]) -> Vec<Listed> {
        let states: Vec<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
        let types: Vec<String> = types.iter().map(|s| s.trim().to_lowercase()).collect();
        let st = self.state.lock();
        st.groups
            .values()
            .filter(|g| !g.deleting)
            .map(|g| {
                let (state, ptype) = match &g.kind {
                    Kind::Classic(c) => (
                        c.state().as_str().to_string(),
                        c.protocol_type().unwrap_or_default().to_string(),
                    ),
                    Kind::Consumer(c) => (
                        c.state_name().to_string(),
                        CONSUMER_PROTOCOL_TYPE.to_string(),
                    ),
                    Kind::Share(c) => (
                        c.state().name().to_string(),
                        SHARE_PROTOCOL_TYPE.to_string(),
                    ),
                };
                Listed {
                    group_id: g.id.clone(),
                    protocol_type: ptype,
                    state,
                    group_type: g.kind.type_name(),
                }
            })
            .filter(|l| states.is_empty() || states.contains(&l.state.to_lowercase()))
            .filter(|l| types.is_empty() || types.iter().any(|t| t == l.group_type))
            .collect()
    }

    /// Every group with its state and member count (for /metrics).
    pub fn member_counts(&self) -> Vec<(Listed, usize)> {
        let listed = self.list(&[], &[]);
        let st = self.state.lock();
        listed
            .into_iter()
            .map(|l| {
                let n = st.groups.get(&l.group_id).map_or(0, |g| match &g.kind {
                    Kind::Classic(c) => c.member_count(),
                    Kind::Consumer(c) => c.member_count(),
                    Kind::Share(c) => c.member_count(),
                });
                (l, n)
            })
            .collect()
    }

    /// DescribeGroups of one group.
    pub fn describe(&self, group_id: &str) -> ClassicDescribe {
        let st = self.state.lock();
        match st.groups.get(group_id) {
            None => ClassicDescribe::NotFound,
            Some(g) if g.deleting => ClassicDescribe::NotFound,
            Some(g) => match &g.kind {
                Kind::Classic(c) => ClassicDescribe::Found(c.describe()),
                Kind::Consumer(_) | Kind::Share(_) => ClassicDescribe::NotClassic,
            },
        }
    }

    /// DeleteGroups of one group: done, or GROUP_ID_NOT_FOUND,
    /// NON_EMPTY_GROUP, or a storage failure when its file could not be
    /// removed.
    pub async fn delete(self: &Arc<Self>, group_id: &str) -> Result<(), GroupError> {
        let incarnation = {
            let mut st = self.state.lock();
            let now = self.now();
            let Some(g) = st.groups.get_mut(group_id) else {
                return Err(GroupError::GroupIdNotFound);
            };
            if g.deleting {
                return Err(GroupError::GroupIdNotFound);
            }
            let valid = match &mut g.kind {
                Kind::Classic(c) => c.validate_delete(),
                Kind::Consumer(c) => {
                    if c.is_empty() {
                        Ok(())
                    } else {
                        Err(GroupError::NonEmptyGroup)
                    }
                }
                Kind::Share(c) => c.mark_dead(),
            };
            valid?;
            g.deleting = true;
            if let Kind::Classic(c) = &mut g.kind {
                c.set_dead(true);
            }
            let inc = g.incarnation;
            self.after_op(&mut st, group_id, now, Vec::new());
            inc
        };
        let file = store::file_name(group_id);
        let lock = self.file_lock(&file);
        let guard = lock.clone().lock_owned().await;
        let removed = self.remove_document(group_id).await;
        let mut st = self.state.lock();
        let now = self.now();
        let Some(g) = st.groups.get_mut(group_id) else {
            return Err(GroupError::GroupIdNotFound);
        };
        if g.incarnation != incarnation {
            return Err(GroupError::GroupIdNotFound);
        }
        match removed {
            Ok(()) => {
                // Commits that raced the deletion happened before it.
                g.durable.send_replace(Durable {
                    version: u64::MAX,
                    failed: None,
                });
                if let Some(d) = g.deadline {
                    st.deadlines.remove(&(d, group_id.to_string()));
                }
                st.groups.remove(group_id);
                st.files.remove(&file);
                drop(st);
                drop(guard);
                self.forget_file_lock(&file, lock);
                tracing::info!(group = group_id, "deleted group");
                Ok(())
            }
            Err(e) => {
                tracing::error!(group = group_id, error = %e, "could not delete group file");
                g.deleting = false;
                match &mut g.kind {
                    Kind::Classic(c) => c.set_dead(false),
                    Kind::Share(c) => c.revive(),
                    Kind::Consumer(_) => {}
                }
                let restart = g.version > g.durable.borrow().version && self.start_writer(g);
                self.after_op(&mut st, group_id, now, Vec::new());
                drop(st);
                if restart {
                    self.spawn_writer(group_id);
                }
                Err(GroupError::StorageFailed)
            }
        }
    }
}
