//! The `simple` assignor of share groups (KIP-932; Kafka's only share
//! assignor, `group.share.assignors`). Unlike a consumer group's, a share
//! group's assignment is not exclusive: the records of a partition are
//! shared by the members it is assigned to, so when there are more members
//! than partitions each partition goes to several members and every member
//! still gets one.
//!
//! The rules, as Kafka's builders state them (balance first, then
//! stickiness):
//! - a *pool* is a set of partitions and the members that may take them:
//!   when every member subscribes to the same topics, one pool of all their
//!   partitions; otherwise one pool per topic, of that topic's subscribers
//!   (so a member subscribed to two topics gets its share of each);
//! - in a pool of `n` partitions and `m` members each partition is wanted
//!   by `ceil(m / n)` members (the *sharing*), and the `sharing × n`
//!   assignments are spread over the members so that counts differ by at
//!   most one (members in member-id order take the larger counts first);
//! - what a member holds now is kept unless that breaks the balance: a
//!   partition held by more members than the sharing, or a member holding
//!   more than its count, gives up the fewest assignments needed; the
//!   partitions still short of members go to the members still short of
//!   partitions, the least loaded first. A partition that no member short
//!   of partitions can take (they all hold it already) stays short: a small
//!   imbalance is tolerated rather than moving other assignments.
//!
//! Deterministic: members are visited in member-id order, partitions in
//! (topic name, partition) order. Pure: no clock, no state.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::assignor::{AssignMember, Assignment};

/// The share assignor's name, the only value of `group.share.assignors`.
pub const SIMPLE: &str = "simple";

/// Computes a share group's target assignment. `topics` maps each
/// subscribed topic name that exists to (id, partition count); members
/// subscribed only to topics that do not exist get an empty assignment.
/// Every member appears in the result.
pub fn assign_share(
    members: &[AssignMember<'_>],
    topics: &BTreeMap<String, (Uuid, i32)>,
) -> BTreeMap<String, Assignment> {
    assign_share_assignable(members, topics, &|_, _| true)
}

/// [`assign_share`] over only the partitions `assignable` accepts: Kafka's
/// `GroupSpec.isPartitionAssignable`, a share group's share-partitions that
/// have been initialised (docs/share-groups-design.md §2.7). The others are
/// left out of the pools, as if the topic did not have them.
pub fn assign_share_assignable(
    members: &[AssignMember<'_>],
    topics: &BTreeMap<String, (Uuid, i32)>,
    assignable: &dyn Fn(Uuid, i32) -> bool,
) -> BTreeMap<String, Assignment> {
    let mut members: Vec<&AssignMember<'_>> = members.iter().collect();
    members.sort_by(|a, b| a.member_id.cmp(b.member_id));
    let mut out: Vec<Assignment> = vec![Assignment::new(); members.len()];
    for pool in pools(&members, topics, assignable) {
        pool.assign(&members, &mut out);
    }
    members
        .iter()
        .zip(out)
        .map(|(m, a)| (m.member_id.to_string(), a))
        .collect()
}

/// Partitions (topic id, index) and the members (indices into the sorted
/// member list) that may take them.
struct Pool {
    partitions: Vec<(Uuid, i32)>,
    members: Vec<usize>,
}

/// The pools of the group: one when every member subscribes to the same
/// existing topics, else one per topic.
fn pools<'a>(
    members: &[&AssignMember<'a>],
    topics: &BTreeMap<String, (Uuid, i32)>,
    assignable: &dyn Fn(Uuid, i32) -> bool,
) -> Vec<Pool> {
    let subscribed = |m: &AssignMember<'a>| -> BTreeSet<&'a str> {
        m.subscribed
            .iter()
            .map(String::as_str)
            .filter(|t| topics.contains_key(*t))
            .collect()
    };
    let partitions_of = |names: &mut dyn Iterator<Item = &str>| -> Vec<(Uuid, i32)> {
        let mut v = Vec::new();
        for name in names {
            if let Some(&(id, count)) = topics.get(name) {
                v.extend(
                    (0..count.max(0))
                        .filter(|&p| assignable(id, p))
                        .map(|p| (id, p)),
                );
            }
        }
        v
    };
    let Some(first) = members.first() else {
        return Vec::new();
    };
    let first = subscribed(first);
    if members.iter().all(|m| subscribed(m) == first) {
        return vec![Pool {
            partitions: partitions_of(&mut first.iter().copied()),
            members: (0..members.len()).collect(),
        }];
    }
    topics
        .keys()
        .map(|name| Pool {
            partitions: partitions_of(&mut std::iter::once(name.as_str())),
            members: (0..members.len())
                .filter(|&i| members[i].subscribed.iter().any(|t| t == name))
                .collect(),
        })
        .collect()
}

impl Pool {
    /// Adds this pool's share of the assignment to `out` (indexed as
    /// `members`).
    fn assign(&self, members: &[&AssignMember<'_>], out: &mut [Assignment]) {
        let (n, m) = (self.partitions.len(), self.members.len());
        if n == 0 || m == 0 {
            return;
        }
        let sharing = m.div_ceil(n);
        let slots = sharing * n;
        // Member k of the pool wants ceil((k+1)·slots/m) − ceil(k·slots/m).
        let want: Vec<usize> = (0..m)
            .map(|k| ((k + 1) * slots).div_ceil(m) - (k * slots).div_ceil(m))
            .collect();
        let index: BTreeMap<(Uuid, i32), usize> = self
            .partitions
            .iter()
            .enumerate()
            .map(|(i, &tp)| (tp, i))
            .collect();
        // holders[p]: pool members (k) holding partition p; held[k]: partitions.
        let mut holders: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        let mut held: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); m];
        for (k, &i) in self.members.iter().enumerate() {
            for (topic, parts) in members[i].current {
                for &p in parts {
                    if let Some(&pi) = index.get(&(*topic, p)) {
                        holders[pi].insert(k);
                        held[k].insert(pi);
                    }
                }
            }
        }
        // Partitions shared by more members than wanted: those furthest
        // over their count give them up first.
        for (pi, h) in holders.iter_mut().enumerate() {
            while h.len() > sharing {
                let Some(k) = h
                    .iter()
                    .copied()
                    .max_by_key(|&k| (held[k].len() as isize - want[k] as isize, k))
                else {
                    break;
                };
                h.remove(&k);
                held[k].remove(&pi);
            }
        }
        // Members over their count give up the partitions most shared.
        for k in 0..m {
            while held[k].len() > want[k] {
                let Some(pi) = held[k]
                    .iter()
                    .copied()
                    .max_by_key(|&pi| (holders[pi].len(), pi))
                else {
                    break;
                };
                held[k].remove(&pi);
                holders[pi].remove(&k);
            }
        }
        // Partitions short of members go to the members short of
        // partitions, the least loaded (then lowest id) first.
        for (pi, h) in holders.iter_mut().enumerate() {
            while h.len() < sharing {
                let Some(k) = (0..m)
                    .filter(|&k| held[k].len() < want[k] && !h.contains(&k))
                    .min_by_key(|&k| (held[k].len(), k))
                else {
                    break;
                };
                h.insert(k);
                held[k].insert(pi);
            }
        }
        for (k, parts) in held.iter().enumerate() {
            let a = &mut out[self.members[k]];
            for &pi in parts {
                let (topic, p) = self.partitions[pi];
                a.entry(topic).or_default().insert(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn topic(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn topics(counts: &[(&str, i32)]) -> BTreeMap<String, (Uuid, i32)> {
        counts
            .iter()
            .enumerate()
            .map(|(i, (name, c))| (name.to_string(), (topic(i as u8 + 1), *c)))
            .collect()
    }

    struct Spec {
        id: String,
        subscribed: Vec<String>,
        current: Assignment,
    }

    fn spec(id: &str, subscribed: &[&str]) -> Spec {
        Spec {
            id: id.to_string(),
            subscribed: subscribed.iter().map(|s| s.to_string()).collect(),
            current: Assignment::new(),
        }
    }

    fn run(specs: &[Spec], t: &BTreeMap<String, (Uuid, i32)>) -> BTreeMap<String, Assignment> {
        let members: Vec<AssignMember<'_>> = specs
            .iter()
            .map(|s| AssignMember {
                member_id: &s.id,
                instance_id: None,
                subscribed: &s.subscribed,
                current: &s.current,
            })
            .collect();
        assign_share(&members, t)
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    /// Members holding each (topic, partition).
    fn sharing(out: &BTreeMap<String, Assignment>) -> BTreeMap<(Uuid, i32), usize> {
        let mut s = BTreeMap::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    *s.entry((*t, *p)).or_default() += 1;
                }
            }
        }
        s
    }

    #[test]
    fn one_partition_is_shared_by_every_member() {
        let t = topics(&[("q", 1)]);
        let specs: Vec<Spec> = (0..16).map(|i| spec(&format!("m{i:02}"), &["q"])).collect();
        let out = run(&specs, &t);
        assert_eq!(out.len(), 16);
        for a in out.values() {
            assert_eq!(a.get(&topic(1)), Some(&BTreeSet::from([0])));
        }
    }

    #[test]
    fn fewer_members_than_partitions_divide_them() {
        let t = topics(&[("q", 3)]);
        let out = run(&[spec("a", &["q"]), spec("b", &["q"])], &t);
        assert_eq!(count(&out["a"]), 2);
        assert_eq!(count(&out["b"]), 1);
        assert!(sharing(&out).values().all(|&n| n == 1));
        assert_eq!(sharing(&out).len(), 3);
    }

    #[test]
    fn twice_the_members_share_each_partition_by_two() {
        let t = topics(&[("q", 2)]);
        let specs: Vec<Spec> = ["a", "b", "c", "d"]
            .iter()
            .map(|m| spec(m, &["q"]))
            .collect();
        let out = run(&specs, &t);
        assert!(out.values().all(|a| count(a) == 1), "{out:?}");
        assert!(sharing(&out).values().all(|&n| n == 2), "{out:?}");
    }

    #[test]
    fn homogeneous_members_balance_over_all_topics_together() {
        // Two topics of one partition, four members: each partition to two
        // members, one partition each (not both topics to everyone).
        let t = topics(&[("x", 1), ("y", 1)]);
        let specs: Vec<Spec> = ["a", "b", "c", "d"]
            .iter()
            .map(|m| spec(m, &["x", "y"]))
            .collect();
        let out = run(&specs, &t);
        assert!(out.values().all(|a| count(a) == 1), "{out:?}");
        assert_eq!(sharing(&out).values().copied().collect::<Vec<_>>(), [2, 2]);
    }

    #[test]
    fn heterogeneous_members_balance_per_topic() {
        // M3 subscribes to both topics and gets half of each.
        let t = topics(&[("t1", 4), ("t2", 4)]);
        let out = run(
            &[
                spec("m1", &["t1"]),
                spec("m2", &["t2"]),
                spec("m3", &["t1", "t2"]),
            ],
            &t,
        );
        assert_eq!(out["m1"].get(&topic(1)).map(BTreeSet::len), Some(2));
        assert!(!out["m1"].contains_key(&topic(2)));
        assert_eq!(out["m2"].get(&topic(2)).map(BTreeSet::len), Some(2));
        assert_eq!(out["m3"].get(&topic(1)).map(BTreeSet::len), Some(2));
        assert_eq!(out["m3"].get(&topic(2)).map(BTreeSet::len), Some(2));
        assert!(sharing(&out).values().all(|&n| n == 1));
    }

    #[test]
    fn a_member_joining_moves_as_little_as_the_balance_needs() {
        let t = topics(&[("q", 4)]);
        let mut specs = vec![spec("a", &["q"]), spec("b", &["q"])];
        let first = run(&specs, &t);
        for s in specs.iter_mut() {
            s.current = first[&s.id].clone();
        }
        specs.push(spec("c", &["q"]));
        let second = run(&specs, &t);
        // Four partitions over three members: 2, 1, 1. Whatever a and b
        // keep is a subset of what they had.
        for id in ["a", "b"] {
            let before = &first[id][&topic(1)];
            let after = second[id].get(&topic(1)).cloned().unwrap_or_default();
            assert!(after.is_subset(before), "{id}: {before:?} -> {after:?}");
        }
        assert_eq!(count(&second["c"]), 1, "{second:?}");
        let mut counts: Vec<usize> = second.values().map(count).collect();
        counts.sort_unstable();
        assert_eq!(counts, [1, 1, 2]);
    }

    #[test]
    fn unsubscribed_and_missing_topics_are_dropped() {
        let t = topics(&[("q", 2)]);
        let mut a = spec("a", &["q", "missing"]);
        a.current = Assignment::from([(topic(9), BTreeSet::from([0]))]);
        let out = run(&[a, spec("b", &["missing"])], &t);
        assert_eq!(
            out["a"],
            Assignment::from([(topic(1), BTreeSet::from([0, 1]))])
        );
        assert!(out["b"].is_empty());
    }

    #[test]
    fn no_members_no_assignment() {
        assert!(run(&[], &topics(&[("q", 3)])).is_empty());
    }

    proptest! {
        /// Every partition of a topic someone subscribes to is held by at
        /// least one and at most `sharing` of its subscribers, members hold
        /// only what they subscribe to, the result is stable (run again
        /// with itself as the current assignment, nothing moves), and with
        /// identical subscriptions counts differ by at most one.
        #[test]
        fn balanced_covering_and_stable(
            counts in proptest::collection::vec(0i32..6, 1..4),
            subs in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 3), 1..9),
            same in any::<bool>(),
            seed in proptest::collection::vec((0usize..9, 0u8..4, 0i32..6), 0..12),
        ) {
            let names = ["t0", "t1", "t2"];
            let named: Vec<(&str, i32)> = names.iter().copied().zip(counts.iter().copied()).collect();
            let t = topics(&named);
            let mut specs: Vec<Spec> = subs
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let chosen: Vec<&str> = names
                        .iter()
                        .zip(if same { &subs[0] } else { s })
                        .filter(|(_, on)| **on)
                        .map(|(n, _)| *n)
                        .collect();
                    spec(&format!("m{i}"), &chosen)
                })
                .collect();
            // Arbitrary (even invalid) current assignments.
            for (mi, tn, p) in seed {
                if let Some(s) = specs.get_mut(mi) {
                    s.current.entry(topic(tn)).or_default().insert(p);
                }
            }
            let out = run(&specs, &t);
            prop_assert_eq!(out.len(), specs.len());
            let held = sharing(&out);
            for (name, &(id, c)) in &t {
                let subscribers = specs.iter().filter(|s| s.subscribed.iter().any(|x| x == name)).count();
                for p in 0..c {
                    let h = held.get(&(id, p)).copied().unwrap_or(0);
                    if subscribers > 0 {
                        prop_assert!(h >= 1, "{name}-{p} unassigned: {out:?}");
                    } else {
                        prop_assert_eq!(h, 0);
                    }
                    prop_assert!(h <= subscribers);
                }
            }
            for s in &specs {
                for (tid, ps) in &out[&s.id] {
                    let (name, &(_, c)) = t.iter().find(|(_, (id, _))| id == tid).expect("known topic");
                    prop_assert!(s.subscribed.iter().any(|x| x == name));
                    prop_assert!(ps.iter().all(|p| (0..c).contains(p)));
                }
            }
            if same {
                let cs: Vec<usize> = out.values().map(count).collect();
                let (lo, hi) = (cs.iter().min().copied().unwrap_or(0), cs.iter().max().copied().unwrap_or(0));
                prop_assert!(hi - lo <= 1, "{out:?}");
            }
            for s in specs.iter_mut() {
                s.current = out[&s.id].clone();
            }
            prop_assert_eq!(run(&specs, &t), out);
        }
    }
}
