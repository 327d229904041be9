//! Server-side assignors for KIP-848 consumer groups: `uniform` (Kafka 4's
//! default) and `range`. Pure functions from (members, their subscriptions,
//! their current target, the subscribed topics) to a new target assignment.
//!
//! - `uniform`: every partition of a subscribed topic goes to exactly one of
//!   its subscribers; counts differ by at most one between members that could
//!   take each other's partitions; partitions stay where they were whenever
//!   that does not break the balance (sticky), so a rebalance moves as few
//!   partitions as possible.
//! - `range`: per topic, subscribers sorted by instance id (or member id)
//!   take contiguous ranges, the first `partitions % members` one extra; so
//!   co-partitioned topics land on the same members.
//!
//! Deterministic: ties break by member id, partitions are visited in (topic
//! name, partition) order.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The default assignor (the first of Kafka's `group.consumer.assignors`).
pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";

/// Assignors a member may name in ConsumerGroupHeartbeat.
pub const ASSIGNORS: &[&str] = &[UNIFORM, RANGE];

/// One member as the assignor sees it.
#[derive(Clone, Debug)]
pub struct AssignMember<'a> {
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub subscribed: &'a [String],
    /// The member's current target (for stickiness).
    pub current: &'a Assignment,
}

/// Computes a target assignment. `topics` maps each subscribed topic name
/// that exists to (id, partition count). Every member appears in the result.
pub fn assign(
    name: &str,
    members: &[AssignMember<'_>],
    topics: &BTreeMap<String, (Uuid, i32)>,
) -> BTreeMap<String, Assignment> {
    let mut members: Vec<&AssignMember<'_>> = members.iter().collect();
    members.sort_by(|a, b| a.member_id.cmp(b.member_id));
    let per_member = if name == RANGE {
        range(&members, topics)
    } else {
        uniform(&members, topics)
    };
    members
        .iter()
        .zip(per_member)
        .map(|(m, a)| (m.member_id.to_string(), a))
        .collect()
}

fn subscribes(m: &AssignMember<'_>, topic: &str) -> bool {
    m.subscribed.iter().any(|t| t == topic)
}

fn range(members: &[&AssignMember<'_>], topics: &BTreeMap<String, (Uuid, i32)>) -> Vec<Assignment> {
    let mut out = vec![Assignment::new(); members.len()];
    for (name, (id, count)) in topics {
        let mut subs: Vec<usize> = (0..members.len())
            .filter(|&i| subscribes(members[i], name))
            .collect();
        if subs.is_empty() || *count <= 0 {
            continue;
        }
        subs.sort_by(|&a, &b| {
            let ka = members[a].instance_id.unwrap_or(members[a].member_id);
            let kb = members[b].instance_id.unwrap_or(members[b].member_id);
            ka.cmp(kb)
                .then(members[a].member_id.cmp(members[b].member_id))
        });
        let k = subs.len() as i32;
        let (per, extra) = (count / k, count % k);
        let mut start = 0;
        for (i, &m) in subs.iter().enumerate() {
            let n = per + i32::from((i as i32) < extra);
            if n > 0 {
                out[m].entry(*id).or_default().extend(start..start + n);
            }
            start += n;
        }
    }
    out
}

fn uniform(
    members: &[&AssignMember<'_>],
    topics: &BTreeMap<String, (Uuid, i32)>,
) -> Vec<Assignment> {
    let n = members.len();
    let mut out = vec![Assignment::new(); n];
    if n == 0 {
        return out;
    }
    // The subscribers of each topic, and every partition to place (in a
    // stable order) with the index of its topic's subscriber list.
    let mut eligible: Vec<Vec<usize>> = Vec::new();
    let mut partitions: Vec<(Uuid, i32, usize)> = Vec::new();
    let mut index_of: HashMap<(Uuid, i32), usize> = HashMap::new();
    let mut expected = vec![0f64; n];
    for (name, (id, count)) in topics {
        let subs: Vec<usize> = (0..n).filter(|&i| subscribes(members[i], name)).collect();
        if subs.is_empty() || *count <= 0 {
            continue;
        }
        for &m in &subs {
            expected[m] += f64::from(*count) / subs.len() as f64;
        }
        for p in 0..*count {
            index_of.insert((*id, p), partitions.len());
            partitions.push((*id, p, eligible.len()));
        }
        eligible.push(subs);
    }
    let total = partitions.len();
    // How many partitions each member may keep from before.
    let homogeneous = eligible.iter().all(|e| e.len() == n);
    let caps: Vec<usize> = if homogeneous {
        // Exactly `total % n` members get one more: those that hold the most.
        let (per, extra) = (total / n, total % n);
        let mut by_held: Vec<usize> = (0..n).collect();
        let held = |m: usize| {
            members[m]
                .current
                .values()
                .map(BTreeSet::len)
                .sum::<usize>()
        };
        by_held.sort_by_key(|&m| (std::cmp::Reverse(held(m)), m));
        let mut caps = vec![per; n];
        for &m in by_held.iter().take(extra) {
            caps[m] = per + 1;
        }
        caps
    } else {
        expected.iter().map(|e| e.ceil() as usize).collect()
    };
    let mut owner: Vec<Option<usize>> = vec![None; total];
    let mut counts = vec![0usize; n];
    // 1. Stickiness: keep what each member had, if still eligible, up to its cap.
    for (mi, m) in members.iter().enumerate() {
        for (tid, ps) in m.current {
            for p in ps {
                let Some(&pi) = index_of.get(&(*tid, *p)) else {
                    continue;
                };
                if owner[pi].is_none()
                    && counts[mi] < caps[mi]
                    && eligible[partitions[pi].2].contains(&mi)
                {
                    owner[pi] = Some(mi);
                    counts[mi] += 1;
                }
            }
        }
    }
    // 2. Place the rest on the least loaded eligible member.
    for pi in 0..total {
        if owner[pi].is_some() {
            continue;
        }
        if let Some(&best) = eligible[partitions[pi].2]
            .iter()
            .min_by_key(|&&m| (counts[m], m))
        {
            owner[pi] = Some(best);
            counts[best] += 1;
        }
    }
    // 3. With different subscriptions the greedy placement can leave a
    // member two or more above another that could take its partitions: a
    // few bounded sweeps move such partitions (each sweep O(partitions x
    // subscribers)).
    if !homogeneous {
        for _ in 0..3 {
            let mut moved = false;
            for pi in 0..total {
                let Some(from) = owner[pi] else {
                    continue;
                };
                let to = eligible[partitions[pi].2]
                    .iter()
                    .copied()
                    .min_by_key(|&m| (counts[m], m));
                if let Some(to) = to {
                    if counts[to] + 1 < counts[from] {
                        owner[pi] = Some(to);
                        counts[from] -= 1;
                        counts[to] += 1;
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }
    for (pi, o) in owner.iter().enumerate() {
        if let Some(m) = o {
            let (tid, p, _) = partitions[pi];
            out[*m].entry(tid).or_default().insert(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(list: &[(&str, i32)]) -> BTreeMap<String, (Uuid, i32)> {
        list.iter()
            .map(|(n, c)| (n.to_string(), (Uuid::new_v4(), *c)))
            .collect()
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn uniform_balances_and_covers_everything() {
        let t = topics(&[("a", 5), ("b", 3)]);
        let subs = vec!["a".to_string(), "b".to_string()];
        let empty = Assignment::new();
        let ms: Vec<AssignMember<'_>> = ["m1", "m2", "m3"]
            .iter()
            .map(|id| AssignMember {
                member_id: id,
                instance_id: None,
                subscribed: &subs,
                current: &empty,
            })
            .collect();
        let r = assign(UNIFORM, &ms, &t);
        let counts: Vec<usize> = r.values().map(count).collect();
        assert_eq!(counts.iter().sum::<usize>(), 8);
        assert!(counts.iter().max().expect("max") - counts.iter().min().expect("min") <= 1);
        let mut all = BTreeSet::new();
        for a in r.values() {
            for (tid, ps) in a {
                for p in ps {
                    assert!(all.insert((*tid, *p)), "assigned twice");
                }
            }
        }
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        let t = topics(&[("a", 6)]);
        let subs = vec!["a".to_string()];
        let empty = Assignment::new();
        let one = [AssignMember {
            member_id: "m1",
            instance_id: None,
            subscribed: &subs,
            current: &empty,
        }];
        let first = assign(UNIFORM, &one, &t);
        let m1 = first["m1"].clone();
        assert_eq!(count(&m1), 6);
        let two = [
            AssignMember {
                member_id: "m1",
                instance_id: None,
                subscribed: &subs,
                current: &m1,
            },
            AssignMember {
                member_id: "m2",
                instance_id: None,
                subscribed: &subs,
                current: &empty,
            },
        ];
        let second = assign(UNIFORM, &two, &t);
        assert_eq!(count(&second["m1"]), 3);
        assert_eq!(count(&second["m2"]), 3);
        // m1 only lost partitions; it gained none.
        for (tid, ps) in &second["m1"] {
            assert!(ps.is_subset(&m1[tid]));
        }
    }

    #[test]
    fn uniform_gives_a_newcomer_its_share() {
        let t = topics(&[("a", 6)]);
        let subs = vec!["a".to_string()];
        let empty = Assignment::new();
        let three: Vec<AssignMember<'_>> = ["m1", "m2", "m3"]
            .iter()
            .map(|id| AssignMember {
                member_id: id,
                instance_id: None,
                subscribed: &subs,
                current: &empty,
            })
            .collect();
        let first = assign(UNIFORM, &three, &t);
        let ids = ["m1", "m2", "m3", "m4"];
        let four: Vec<AssignMember<'_>> = ids
            .iter()
            .map(|id| AssignMember {
                member_id: id,
                instance_id: None,
                subscribed: &subs,
                current: first.get(*id).unwrap_or(&empty),
            })
            .collect();
        let second = assign(UNIFORM, &four, &t);
        let mut counts: Vec<usize> = second.values().map(count).collect();
        counts.sort();
        assert_eq!(counts, vec![1, 1, 2, 2]);
        for id in ["m1", "m2", "m3"] {
            for (tid, ps) in &second[id] {
                assert!(ps.is_subset(&first[id][tid]), "{id} only lost partitions");
            }
        }
    }

    #[test]
    fn uniform_respects_subscriptions() {
        let t = topics(&[("a", 4), ("b", 2)]);
        let sa = vec!["a".to_string()];
        let sab = vec!["a".to_string(), "b".to_string()];
        let empty = Assignment::new();
        let ms = [
            AssignMember {
                member_id: "m1",
                instance_id: None,
                subscribed: &sa,
                current: &empty,
            },
            AssignMember {
                member_id: "m2",
                instance_id: None,
                subscribed: &sab,
                current: &empty,
            },
        ];
        let r = assign(UNIFORM, &ms, &t);
        let b = t["b"].0;
        assert!(!r["m1"].contains_key(&b));
        assert_eq!(r["m2"][&b].len(), 2);
        assert_eq!(count(&r["m1"]) + count(&r["m2"]), 6);
        assert_eq!(count(&r["m1"]), 3);
    }

    #[test]
    fn range_gives_contiguous_ranges() {
        let t = topics(&[("a", 5)]);
        let subs = vec!["a".to_string()];
        let empty = Assignment::new();
        let ms = [
            AssignMember {
                member_id: "x",
                instance_id: Some("i2"),
                subscribed: &subs,
                current: &empty,
            },
            AssignMember {
                member_id: "y",
                instance_id: Some("i1"),
                subscribed: &subs,
                current: &empty,
            },
        ];
        let r = assign(RANGE, &ms, &t);
        let a = t["a"].0;
        assert_eq!(
            r["y"][&a].iter().copied().collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(r["x"][&a].iter().copied().collect::<Vec<_>>(), vec![3, 4]);
    }
}
