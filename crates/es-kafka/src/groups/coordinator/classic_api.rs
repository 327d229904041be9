//! The coordinator's classic group requests: JoinGroup and SyncGroup (parked
//! on oneshot channels until the group answers), Heartbeat and LeaveGroup,
//! with the group-level checks (unknown, being deleted, of the other
//! protocol) made before the classic state machine decides.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::{Coordinator, Kind, Waiter};
use crate::groups::classic::{
    ClassicGroup, JoinRequest, JoinResponse, LeaveMember, SyncRequest, SyncResponse,
};
use crate::groups::error::GroupError;

impl Coordinator {
    /// JoinGroup. The receiver yields the response when the join phase of
    /// the group completes (or at once for errors and the member id
    /// handshake).
    pub fn join(
        self: &Arc<Self>,
        group_id: &str,
        req: JoinRequest,
    ) -> oneshot::Receiver<JoinResponse> {
        let (tx, rx) = oneshot::channel();
        let mut st = self.state.lock();
        let fail = |tx: oneshot::Sender<JoinResponse>, e: GroupError, member: &str| {
            let _ = tx.send(JoinResponse::error(e, member));
        };
        if st.shut_down {
            fail(tx, GroupError::CoordinatorNotAvailable, &req.member_id);
            return rx;
        }
        let now = self.now();
        match st.groups.get_mut(group_id) {
            None if !req.member_id.is_empty() => {
                fail(tx, GroupError::UnknownMemberId, &req.member_id);
                return rx;
            }
            None => {
                let kind = Kind::Classic(ClassicGroup::new(group_id, self.config));
                if let Err(e) = st.create(group_id, kind) {
                    let _ = tx.send(JoinResponse::error(e, &req.member_id));
                    return rx;
                }
            }
            Some(g) if g.deleting => {
                fail(tx, GroupError::CoordinatorNotAvailable, &req.member_id);
                return rx;
            }
            Some(g) => {
                if let Kind::Share(_) = &g.kind {
                    // Kafka's classicGroupJoin: a group of another protocol
                    // that cannot be converted.
                    fail(tx, GroupError::InconsistentGroupProtocol, "");
                    return rx;
                }
                if let Kind::Consumer(c) = &g.kind {
                    if !c.is_empty() {
                        // A group keeps one protocol at a time.
                        fail(tx, GroupError::InconsistentGroupProtocol, &req.member_id);
                        return rx;
                    }
                    if !req.member_id.is_empty() {
                        fail(tx, GroupError::UnknownMemberId, &req.member_id);
                        return rx;
                    }
                    tracing::info!(
                        group = group_id,
                        "converting empty consumer group to a classic group"
                    );
                    g.kind = Kind::Classic(ClassicGroup::new(group_id, self.config));
                }
            }
        }
        let token = st.token();
        st.waiters.insert(token, Waiter::Join(tx));
        let mut out = Vec::new();
        if let Some(Kind::Classic(c)) = st.groups.get_mut(group_id).map(|g| &mut g.kind) {
            c.join(now, token, req, &mut out);
        }
        self.after_op(&mut st, group_id, now, out);
        rx
    }

    /// SyncGroup. The receiver yields the member's assignment once the leader
    /// has sent it.
    pub fn sync(
        self: &Arc<Self>,
        group_id: &str,
        req: SyncRequest,
    ) -> oneshot::Receiver<SyncResponse> {
        let (tx, rx) = oneshot::channel();
        let mut st = self.state.lock();
        let now = self.now();
        let early = if st.shut_down {
            Some(GroupError::CoordinatorNotAvailable)
        } else {
            match st.groups.get(group_id).map(|g| (&g.kind, g.deleting)) {
                None | Some((Kind::Consumer(_) | Kind::Share(_), _)) => {
                    Some(GroupError::UnknownMemberId)
                }
                Some((_, true)) => Some(GroupError::CoordinatorNotAvailable),
                Some((Kind::Classic(_), false)) => None,
            }
        };
        if let Some(e) = early {
            let _ = tx.send(SyncResponse::error(e));
            return rx;
        }
        let token = st.token();
        st.waiters.insert(token, Waiter::Sync(tx));
        let mut out = Vec::new();
        if let Some(Kind::Classic(c)) = st.groups.get_mut(group_id).map(|g| &mut g.kind) {
            c.sync(now, token, req, &mut out);
        }
        self.after_op(&mut st, group_id, now, out);
        rx
    }

    /// Heartbeat.
    pub fn heartbeat(
        self: &Arc<Self>,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let r = match st.groups.get_mut(group_id) {
            None => return Err(GroupError::UnknownMemberId),
            Some(g) if g.deleting => return Err(GroupError::CoordinatorNotAvailable),
            Some(g) => match &mut g.kind {
                Kind::Classic(c) => c.heartbeat(now, member_id, instance_id, generation_id),
                Kind::Consumer(_) | Kind::Share(_) => return Err(GroupError::UnknownMemberId),
            },
        };
        self.after_op(&mut st, group_id, now, Vec::new());
        r
    }

    /// LeaveGroup: one outcome per member, or a group-level error.
    pub fn leave(
        self: &Arc<Self>,
        group_id: &str,
        members: &[LeaveMember],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let unknown = || vec![Err(GroupError::UnknownMemberId); members.len()];
        let mut out = Vec::new();
        let r = match st.groups.get_mut(group_id) {
            None => return Ok(unknown()),
            Some(g) if g.deleting => return Err(GroupError::CoordinatorNotAvailable),
            Some(g) => match &mut g.kind {
                Kind::Classic(c) => c.leave(now, members, &mut out),
                Kind::Consumer(_) | Kind::Share(_) => return Ok(unknown()),
            },
        };
        self.after_op(&mut st, group_id, now, out);
        r
    }
}
