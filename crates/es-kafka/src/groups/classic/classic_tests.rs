//! Tests of the classic group machine: a harness drives one group with
//! events on a fake clock and checks the effects it emits, covering the
//! join, sync, heartbeat, static membership, leave and offset phases.

use super::*;

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

/// A group driven by events on a fake clock.
struct Harness {
    g: ClassicGroup,
    now: Millis,
    next: Token,
    out: Vec<Effect>,
}

impl Harness {
    fn new() -> Self {
        Self::with(GroupConfig::default())
    }

    fn with(config: GroupConfig) -> Self {
        Harness {
            g: ClassicGroup::new("g", config),
            now: 0,
            next: 0,
            out: Vec::new(),
        }
    }

    fn token(&mut self) -> Token {
        self.next += 1;
        self.next
    }

    /// Sends a JoinGroup and fires zero-delay timers, as the shell does.
    fn join(&mut self, req: JoinRequest) -> Token {
        let t = self.token();
        self.g.join(self.now, t, req, &mut self.out);
        self.g.tick(self.now, &mut self.out);
        t
    }

    fn sync(&mut self, req: SyncRequest) -> Token {
        let t = self.token();
        self.g.sync(self.now, t, req, &mut self.out);
        self.g.tick(self.now, &mut self.out);
        t
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.g.tick(self.now, &mut self.out);
    }

    fn joined(&mut self, t: Token) -> Option<JoinResponse> {
        let i = self
            .out
            .iter()
            .position(|e| matches!(e, Effect::Join(x, _) if *x == t))?;
        match self.out.remove(i) {
            Effect::Join(_, r) => Some(r),
            Effect::Sync(..) => None,
        }
    }

    fn synced(&mut self, t: Token) -> Option<SyncResponse> {
        let i = self
            .out
            .iter()
            .position(|e| matches!(e, Effect::Sync(x, _) if *x == t))?;
        match self.out.remove(i) {
            Effect::Sync(_, r) => Some(r),
            Effect::Join(..) => None,
        }
    }

    fn heartbeat(&mut self, member: &str, generation: i32) -> Result<(), GroupError> {
        self.g.heartbeat(self.now, member, None, generation)
    }

    /// Full handshake for a new dynamic member (v4+): returns its id.
    fn handshake(&mut self, client: &str) -> String {
        let t = self.join(join_req("", client, &[("range", b"m")]));
        let r = self.joined(t).expect("answered at once");
        assert_eq!(r.error, Some(GroupError::MemberIdRequired));
        assert!(r.member_id.starts_with(client));
        r.member_id
    }

    /// One member forms a Stable group; returns (member id, generation).
    fn solo(&mut self) -> (String, i32) {
        let id = self.handshake("c1");
        let t = self.join(join_req(&id, "c1", &[("range", b"m")]));
        let r = self.joined(t).expect("join phase completes at once");
        assert_eq!(r.error, None);
        let s = self.sync(sync_req(&id, r.generation_id, &[(&id, b"a1")]));
        let sr = self.synced(s).expect("leader sync answered");
        assert_eq!(sr.assignment, Bytes::from_static(b"a1"));
        assert_eq!(self.g.state(), ClassicState::Stable);
        (id, r.generation_id)
    }
}

fn join_req(member: &str, client: &str, protocols: &[(&str, &'static [u8])]) -> JoinRequest {
    JoinRequest {
        member_id: member.to_string(),
        group_instance_id: None,
        client_id: client.to_string(),
        client_host: "/127.0.0.1".to_string(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".to_string(),
        protocols: protocols
            .iter()
            .map(|(n, m)| Protocol {
                name: n.to_string(),
                metadata: Bytes::from_static(m),
            })
            .collect(),
        requires_known_member_id: true,
        supports_skip_assignment: true,
    }
}

fn static_req(member: &str, instance: &str, protocols: &[(&str, &'static [u8])]) -> JoinRequest {
    let mut r = join_req(member, "c", protocols);
    r.group_instance_id = Some(instance.to_string());
    r
}

fn sync_req(member: &str, generation: i32, assignments: &[(&str, &'static [u8])]) -> SyncRequest {
    SyncRequest {
        member_id: member.to_string(),
        group_instance_id: None,
        generation_id: generation,
        protocol_type: Some("consumer".to_string()),
        protocol_name: Some("range".to_string()),
        assignments: assignments
            .iter()
            .map(|(m, a)| (m.to_string(), Bytes::from_static(a)))
            .collect(),
    }
}

#[test]
fn member_id_handshake_then_a_group_of_one() {
    let mut h = Harness::new();
    assert_eq!(h.g.state(), ClassicState::Empty);
    let id = h.handshake("c1");
    assert!(h.g.is_pending_member(&id));
    assert_eq!(
        h.g.state(),
        ClassicState::Empty,
        "pending members do not rebalance"
    );
    let t = h.join(join_req(&id, "c1", &[("range", b"m")]));
    let r = h
        .joined(t)
        .expect("completes after the (zero) initial delay");
    assert_eq!(r.error, None);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader, id);
    assert_eq!(r.member_id, id);
    assert_eq!(r.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.members[0].metadata, Bytes::from_static(b"m"));
    assert_eq!(h.g.state(), ClassicState::CompletingRebalance);
    let s = h.sync(sync_req(&id, 1, &[(&id, b"a1")]));
    assert_eq!(
        h.synced(s).map(|r| (r.error, r.assignment)),
        Some((None, Bytes::from_static(b"a1")))
    );
    assert_eq!(h.g.state(), ClassicState::Stable);
    assert_eq!(h.heartbeat(&id, 1), Ok(()));
}

#[test]
fn old_join_versions_skip_the_handshake() {
    let mut h = Harness::new();
    let mut req = join_req("", "c1", &[("range", b"m")]);
    req.requires_known_member_id = false;
    let t = h.join(req);
    let r = h.joined(t).expect("joined at once");
    assert_eq!((r.error, r.generation_id), (None, 1));
    assert!(!r.member_id.is_empty());
}

#[test]
fn a_second_member_triggers_a_rebalance_and_both_get_assignments() {
    let mut h = Harness::new();
    let (a, g1) = h.solo();
    let b = h.handshake("c2");
    let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    assert!(h.joined(tb).is_none(), "parked until a rejoins");
    assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
    assert_eq!(h.heartbeat(&a, g1), Err(GroupError::RebalanceInProgress));
    // A SyncGroup now is refused too.
    let s = h.sync(sync_req(&a, g1, &[]));
    assert_eq!(
        h.synced(s).map(|r| r.error),
        Some(Some(GroupError::RebalanceInProgress))
    );
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    let ra = h.joined(ta).expect("a answered");
    let rb = h.joined(tb).expect("b answered");
    assert_eq!(ra.generation_id, g1 + 1);
    assert_eq!(rb.generation_id, g1 + 1);
    assert_eq!(ra.leader, a, "the leader that rejoined stays leader");
    assert_eq!(rb.leader, a);
    assert_eq!(ra.members.len(), 2);
    assert!(rb.members.is_empty(), "followers do not see members");
    // The follower's sync waits for the leader's.
    let sb = h.sync(sync_req(&b, g1 + 1, &[]));
    assert!(h.synced(sb).is_none());
    let sa = h.sync(sync_req(&a, g1 + 1, &[(&a, b"pa"), (&b, b"pb")]));
    assert_eq!(
        h.synced(sa).map(|r| r.assignment),
        Some(Bytes::from_static(b"pa"))
    );
    let rb = h.synced(sb).expect("follower answered after the leader");
    assert_eq!((rb.error, rb.assignment), (None, Bytes::from_static(b"pb")));
    assert_eq!(rb.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.g.state(), ClassicState::Stable);
    // A late SyncGroup in Stable gets the stored assignment.
    let again = h.sync(sync_req(&b, g1 + 1, &[]));
    assert_eq!(
        h.synced(again).map(|r| r.assignment),
        Some(Bytes::from_static(b"pb"))
    );
}

#[test]
fn members_that_do_not_rejoin_are_removed_at_the_rebalance_timeout() {
    let mut h = Harness::new();
    let (a, _) = h.solo();
    let b = h.handshake("c2");
    let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    let g2 = h.joined(ta).expect("a").generation_id;
    h.joined(tb).expect("b");
    let sa = h.sync(sync_req(&a, g2, &[(&a, b"x"), (&b, b"y")]));
    h.synced(sa).expect("a synced");
    let sb = h.sync(sync_req(&b, g2, &[]));
    h.synced(sb).expect("b synced");
    // c joins; only a rejoins; b keeps heartbeating but never rejoins.
    let c = h.handshake("c3");
    let tc = h.join(join_req(&c, "c3", &[("range", b"mc")]));
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    for _ in 0..5 {
        h.advance(5_000);
        assert_eq!(h.heartbeat(&b, g2), Err(GroupError::RebalanceInProgress));
    }
    assert!(h.joined(ta).is_none());
    h.advance(5_000); // 30 s: the rebalance timeout.
    let ra = h.joined(ta).expect("a answered at the timeout");
    let rc = h.joined(tc).expect("c answered at the timeout");
    assert_eq!(ra.generation_id, g2 + 1);
    assert_eq!(rc.generation_id, g2 + 1);
    assert_eq!(ra.members.len(), 2);
    assert!(!h.g.has_member(&b));
    assert_eq!(h.heartbeat(&b, g2), Err(GroupError::UnknownMemberId));
}

#[test]
fn a_member_that_stops_heartbeating_is_removed_and_triggers_a_rebalance() {
    let mut h = Harness::new();
    let (a, _) = h.solo();
    let b = h.handshake("c2");
    let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    let g = h.joined(ta).expect("a").generation_id;
    h.joined(tb).expect("b");
    let sa = h.sync(sync_req(&a, g, &[(&a, b"x"), (&b, b"y")]));
    let sb = h.sync(sync_req(&b, g, &[]));
    h.synced(sa).expect("a");
    h.synced(sb).expect("b");
    // a heartbeats every 3 s; b is silent.
    let mut removed_at = None;
    for i in 1..=5 {
        h.advance(3_000);
        let e = h.heartbeat(&a, g);
        if e == Err(GroupError::RebalanceInProgress) && removed_at.is_none() {
            removed_at = Some(i * 3_000);
        }
    }
    assert_eq!(
        removed_at,
        Some(12_000),
        "b's 10 s session ran out between 9 s and 12 s"
    );
    assert!(!h.g.has_member(&b));
    assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    let r = h
        .joined(ta)
        .expect("a alone completes the join phase at once");
    assert_eq!((r.generation_id, r.members.len()), (g + 1, 1));
}

#[test]
fn pending_members_expire_after_the_session_timeout() {
    let mut h = Harness::new();
    let id = h.handshake("c1");
    assert!(h.g.is_pending_member(&id));
    assert_eq!(h.g.next_deadline(), Some(SESSION as u64));
    h.advance(SESSION as u64);
    assert!(!h.g.is_pending_member(&id));
    let t = h.join(join_req(&id, "c1", &[("range", b"m")]));
    assert_eq!(
        h.joined(t).map(|r| r.error),
        Some(Some(GroupError::UnknownMemberId))
    );
}

#[test]
fn members_that_never_sync_are_removed() {
    let mut h = Harness::new();
    let (a, _) = h.solo();
    let b = h.handshake("c2");
    let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    let g = h.joined(ta).expect("a").generation_id;
    h.joined(tb).expect("b");
    // The leader syncs, b never does (nor heartbeats: its session is
    // 10 s, the sync deadline is the 30 s rebalance timeout).
    let sa = h.sync(sync_req(&a, g, &[(&a, b"x"), (&b, b"y")]));
    h.synced(sa).expect("a");
    for _ in 0..3 {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&a, g), Ok(()));
    }
    h.advance(1_000); // b's session (10 s after its join response) ends.
    assert!(!h.g.has_member(&b));
    assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
}

#[test]
fn the_leader_rejoining_forces_a_rebalance_a_follower_does_not() {
    let mut h = Harness::new();
    let (a, _) = h.solo();
    let b = h.handshake("c2");
    let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    let g = h.joined(ta).expect("a").generation_id;
    h.joined(tb).expect("b");
    let sa = h.sync(sync_req(&a, g, &[(&a, b"x"), (&b, b"y")]));
    let sb = h.sync(sync_req(&b, g, &[]));
    h.synced(sa).expect("a");
    h.synced(sb).expect("b");
    // Follower with unchanged metadata: current generation at once.
    let t = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    let r = h.joined(t).expect("answered at once");
    assert_eq!(
        (r.error, r.generation_id, r.leader.as_str()),
        (None, g, a.as_str())
    );
    assert_eq!(h.g.state(), ClassicState::Stable);
    // Follower with changed metadata: rebalance.
    let t = h.join(join_req(&b, "c2", &[("range", b"changed")]));
    assert!(h.joined(t).is_none());
    assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    assert_eq!(h.joined(ta).map(|r| r.generation_id), Some(g + 1));
    assert_eq!(h.joined(t).map(|r| r.generation_id), Some(g + 1));
    // The leader rejoining (unchanged) also rebalances.
    let sa = h.sync(sync_req(&a, g + 1, &[]));
    h.synced(sa).expect("a");
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    assert!(h.joined(ta).is_none());
    assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
}

#[test]
fn protocols_are_chosen_by_vote_among_common_ones() {
    let mut h = Harness::new();
    let mut tokens = Vec::new();
    let protos: [&[(&str, &'static [u8])]; 3] = [
        &[("range", b"1"), ("roundrobin", b"1"), ("only-a", b"1")],
        &[("roundrobin", b"2"), ("range", b"2")],
        &[("roundrobin", b"3"), ("range", b"3")],
    ];
    let cfg = GroupConfig {
        initial_rebalance_delay_ms: 100,
        ..GroupConfig::default()
    };
    h.g = ClassicGroup::new("g", cfg);
    for (i, p) in protos.iter().enumerate() {
        let mut req = join_req("", &format!("c{i}"), p);
        req.requires_known_member_id = false;
        tokens.push(h.join(req));
    }
    h.advance(100);
    h.advance(100);
    h.advance(100);
    let r = h.joined(tokens[0]).expect("joined");
    assert_eq!(r.protocol_name.as_deref(), Some("roundrobin"));
    assert_eq!(r.members.len(), 3);
    assert!(r.members.iter().all(|m| m.metadata.len() == 1));
    // A member supporting none of the group's protocols is refused.
    let t = h.join(join_req("", "x", &[("sticky", b"")]));
    assert_eq!(
        h.joined(t).map(|r| r.error),
        Some(Some(GroupError::InconsistentGroupProtocol))
    );
    let mut other = join_req("", "x", &[("roundrobin", b"")]);
    other.protocol_type = "connect".into();
    let t = h.join(other);
    assert_eq!(
        h.joined(t).map(|r| r.error),
        Some(Some(GroupError::InconsistentGroupProtocol))
    );
}

#[test]
fn the_initial_rebalance_delay_gathers_members_into_one_generation() {
    let cfg = GroupConfig {
        initial_rebalance_delay_ms: 3_000,
        ..GroupConfig::default()
    };
    let mut h = Harness::with(cfg);
    let a = h.handshake("c1");
    let ta = h.join(join_req(&a, "c1", &[("range", b"m")]));
    h.advance(2_000);
    let b = h.handshake("c2");
    let tb = h.join(join_req(&b, "c2", &[("range", b"m")]));
    h.advance(1_000); // first delay over, but b arrived: extended
    assert!(h.joined(ta).is_none());
    h.advance(3_000);
    let ra = h.joined(ta).expect("a");
    let rb = h.joined(tb).expect("b");
    assert_eq!((ra.generation_id, rb.generation_id), (1, 1));
    assert_eq!(ra.members.len(), 2);
}

#[test]
fn static_members_come_back_without_a_rebalance() {
    let mut h = Harness::new();
    let t = h.join(static_req("", "i1", &[("range", b"m")]));
    let r = h.joined(t).expect("static members skip the handshake");
    let old = r.member_id.clone();
    assert!(old.starts_with("i1-"));
    let g = r.generation_id;
    let s = h.sync(sync_req(&old, g, &[(&old, b"mine")]));
    h.synced(s).expect("synced");
    assert_eq!(h.g.state(), ClassicState::Stable);
    // The process restarts: same instance id, no member id.
    let t = h.join(static_req("", "i1", &[("range", b"m")]));
    let r = h.joined(t).expect("answered at once");
    assert_eq!(r.error, None);
    assert_eq!(r.generation_id, g, "no new generation");
    assert_ne!(r.member_id, old);
    assert_eq!(r.leader, r.member_id);
    assert!(r.skip_assignment, "v9+: the leader keeps the assignment");
    assert_eq!(h.g.state(), ClassicState::Stable);
    let new = r.member_id;
    let mut s = sync_req(&new, g, &[]);
    s.group_instance_id = Some("i1".into());
    let s = h.sync(s);
    assert_eq!(
        h.synced(s).map(|r| r.assignment),
        Some(Bytes::from_static(b"mine"))
    );
    // The old incarnation is fenced.
    assert_eq!(
        h.g.heartbeat(h.now, &old, Some("i1"), g),
        Err(GroupError::FencedInstanceId)
    );
    assert_eq!(h.g.heartbeat(h.now, &new, Some("i1"), g), Ok(()));
    // A change of the selected protocol does rebalance.
    let t = h.join(static_req(
        "",
        "i1",
        &[("roundrobin", b"m"), ("range", b"m")],
    ));
    let r = h
        .joined(t)
        .expect("alone: the join phase completes at once");
    assert_eq!(r.generation_id, g + 1);
    assert_eq!(r.protocol_name.as_deref(), Some("roundrobin"));
}

#[test]
fn a_parked_static_member_is_fenced_by_its_replacement() {
    let mut h = Harness::new();
    let (a, g) = h.solo();
    let t1 = h.join(static_req("", "i1", &[("range", b"m")]));
    assert!(h.joined(t1).is_none(), "parked in the rebalance");
    let t2 = h.join(static_req("", "i1", &[("range", b"m")]));
    assert_eq!(
        h.joined(t1).map(|r| r.error),
        Some(Some(GroupError::FencedInstanceId))
    );
    // The new incarnation is parked in its place; a completes the phase.
    let ta = h.join(join_req(&a, "c1", &[("range", b"m")]));
    assert_eq!(h.joined(ta).map(|r| r.members.len()), Some(2));
    assert_eq!(h.joined(t2).map(|r| r.generation_id), Some(g + 1));
}

#[test]
fn errors_are_kafkas() {
    let mut h = Harness::new();
    let (a, g) = h.solo();
    assert_eq!(h.heartbeat(&a, g + 1), Err(GroupError::IllegalGeneration));
    assert_eq!(h.heartbeat("nobody", g), Err(GroupError::UnknownMemberId));
    let s = h.sync(sync_req(&a, g - 1, &[]));
    assert_eq!(
        h.synced(s).map(|r| r.error),
        Some(Some(GroupError::IllegalGeneration))
    );
    let s = h.sync(sync_req("nobody", g, &[]));
    assert_eq!(
        h.synced(s).map(|r| r.error),
        Some(Some(GroupError::UnknownMemberId))
    );
    let mut bad = sync_req(&a, g, &[]);
    bad.protocol_name = Some("roundrobin".into());
    let s = h.sync(bad);
    assert_eq!(
        h.synced(s).map(|r| r.error),
        Some(Some(GroupError::InconsistentGroupProtocol))
    );
    let t = h.join(join_req("nobody", "c", &[("range", b"m")]));
    assert_eq!(
        h.joined(t).map(|r| r.error),
        Some(Some(GroupError::UnknownMemberId))
    );
    assert_eq!(
        h.g.heartbeat(h.now, &a, Some("unknown-instance"), g),
        Err(GroupError::UnknownMemberId)
    );
    // Deleting a non-empty group.
    assert_eq!(h.g.validate_delete(), Err(GroupError::NonEmptyGroup));
    // Empty protocol lists never form a group.
    let mut e = Harness::new();
    let t = e.join(join_req("", "c", &[]));
    assert_eq!(
        e.joined(t).map(|r| r.error),
        Some(Some(GroupError::InconsistentGroupProtocol))
    );
    assert_eq!(e.g.validate_delete(), Ok(()));
}

#[test]
fn leaving_members_trigger_a_rebalance() {
    let mut h = Harness::new();
    let (a, _) = h.solo();
    let b = h.handshake("c2");
    let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    let g = h.joined(ta).expect("a").generation_id;
    h.joined(tb).expect("b");
    let sa = h.sync(sync_req(&a, g, &[]));
    let sb = h.sync(sync_req(&b, g, &[]));
    h.synced(sa).expect("a");
    h.synced(sb).expect("b");
    let codes =
        h.g.leave(
            h.now,
            &[
                LeaveMember {
                    member_id: a.clone(),
                    group_instance_id: None,
                },
                LeaveMember {
                    member_id: "ghost".into(),
                    group_instance_id: None,
                },
            ],
            &mut h.out,
        )
        .expect("not dead");
    assert_eq!(codes, vec![Ok(()), Err(GroupError::UnknownMemberId)]);
    assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
    assert_eq!(
        h.g.leader(),
        Some(b.as_str()),
        "leadership moves to a member left"
    );
    let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    let r = h.joined(tb).expect("b alone");
    assert_eq!((r.generation_id, r.leader), (g + 1, b.clone()));
    // The last member leaving empties the group.
    let sb = h.sync(sync_req(&b, g + 1, &[]));
    h.synced(sb).expect("b");
    h.g.leave(
        h.now,
        &[LeaveMember {
            member_id: b,
            group_instance_id: None,
        }],
        &mut h.out,
    )
    .expect("left");
    assert_eq!(h.g.state(), ClassicState::Empty);
    assert_eq!(h.g.generation_id(), g + 2);
}

#[test]
fn static_members_can_be_removed_by_instance_id() {
    let mut h = Harness::new();
    let t = h.join(static_req("", "i1", &[("range", b"m")]));
    let id = h.joined(t).expect("joined").member_id;
    let codes =
        h.g.leave(
            h.now,
            &[
                LeaveMember {
                    member_id: String::new(),
                    group_instance_id: Some("i1".into()),
                },
                LeaveMember {
                    member_id: String::new(),
                    group_instance_id: Some("i2".into()),
                },
            ],
            &mut h.out,
        )
        .expect("left");
    assert_eq!(codes, vec![Ok(()), Err(GroupError::UnknownMemberId)]);
    assert!(!h.g.has_member(&id));
}

#[test]
fn offset_commit_validation() {
    let mut h = Harness::new();
    // Simple commits into an empty group.
    assert_eq!(h.g.validate_offset_commit("", None, -1), Ok(()));
    assert_eq!(
        h.g.validate_offset_commit("m", None, 1),
        Err(GroupError::UnknownMemberId)
    );
    let id = h.handshake("c1");
    let t = h.join(join_req(&id, "c1", &[("range", b"m")]));
    let g = h.joined(t).expect("joined").generation_id;
    assert_eq!(
        h.g.validate_offset_commit(&id, None, g),
        Err(GroupError::RebalanceInProgress),
        "CompletingRebalance"
    );
    let s = h.sync(sync_req(&id, g, &[]));
    h.synced(s).expect("synced");
    assert_eq!(h.g.validate_offset_commit(&id, None, g), Ok(()));
    assert_eq!(
        h.g.validate_offset_commit(&id, None, g + 1),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        h.g.validate_offset_commit("", None, -1),
        Err(GroupError::UnknownMemberId),
        "simple commits only into empty groups"
    );
    // A commit keeps the session alive.
    h.advance(9_000);
    h.g.on_offset_commit(h.now, &id);
    h.advance(9_000);
    assert!(h.g.has_member(&id));
}

#[test]
fn abort_answers_everything_parked() {
    let mut h = Harness::new();
    let (a, _) = h.solo();
    let b = h.handshake("c2");
    let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
    let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
    let g = h.joined(ta).expect("a").generation_id;
    h.joined(tb).expect("b");
    let sb = h.sync(sync_req(&b, g, &[]));
    h.g.abort_all(GroupError::NotCoordinator, &mut h.out);
    assert_eq!(
        h.synced(sb).map(|r| r.error),
        Some(Some(GroupError::NotCoordinator))
    );
}

/// A member listing the same protocol twice supports it once: the group of
/// that one member runs it (Kafka's join never completes there).
#[test]
fn a_protocol_listed_twice_is_still_chosen() {
    let mut h = Harness::new();
    let id = h.handshake("c1");
    let t = h.join(join_req(&id, "c1", &[("range", b"m"), ("range", b"m")]));
    let r = h.joined(t).expect("joined");
    assert_eq!(r.error, None);
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.members[0].metadata, Bytes::from_static(b"m"));
}
