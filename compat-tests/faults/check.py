#!/usr/bin/env python3
"""check.py: judges one history written by the faults driver (docs/faults.md).

usage: check.py HISTORY [--json]

Reads the JSON lines of driver/main.go and counts, for the run:

  acked         values acknowledged (acks=all) by a non-transactional producer, plus the
                values of transactions whose commit was acknowledged; the sentinels the
                final read writes are acked too (they are ordinary acks=all sends)
  unknown       sends the client gave up on (error or timeout): outcome unknown
  lost          acked values absent from the final read_uncommitted read (and, for
                committed transactions, from the final read_committed read)
  duplicated    values seen at more than one (partition, offset), by any observer: the
                producer's acknowledgement, a live consumer or the final read
  inconsistent  (partition, offset) pairs at which two observers saw different values
  unacked-read  values read that were never acknowledged, but whose send failed or had
                no answer (allowed: the outcome was unknown), or, read with
                read_committed, whose transaction's commit had an unknown outcome
  phantom       values read that no producer ever sent (never allowed)
  aborted-read  values of transactions whose commit was never asked for (aborted on
                purpose, or after an error) read by a read_committed consumer
  reordered     acknowledged values of one idempotent producer in one partition whose
                offsets are not in the order the producer sent them
  skipped       records a live consumer stepped over: between two offsets it read in a
                row (or before its first), the final read has a record this consumer
                should have been given (read_committed: not of an uncommitted transaction)
  unverified    partition reads of the final read that did not reach their sentinel: the
                run cannot be judged (counted as a failure)

Exit status 1 when lost, duplicated, inconsistent, phantom, aborted-read, reordered,
skipped or unverified is above zero, 2 when the history is unusable, 0 otherwise.
"""
import collections
import json
import sys


def load(path):
    events = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as e:
                # A torn last line (the driver was killed) is reported, not hidden.
                raise SystemExit(f"check: {path}:{n}: not JSON ({e})")
    return events


def check(events):
    invoked = {}                    # value -> proc
    txn_of = {}                     # value -> txn number
    acks = {}                       # value -> (partition, offset)
    failed = set()
    txns = {}                       # txn -> (intent, ok)
    observed = collections.defaultdict(set)   # (p, o) -> {values}
    positions = collections.defaultdict(set)  # value -> {(p, o)}
    read_values = set()
    rc_values = set()
    final = {"ru": {}, "rc": {}}   # iso -> {partition: {offset: value}}
    final_complete = {"ru": {}, "rc": {}}
    cerrors = collections.Counter()
    meta = {}
    streams = collections.defaultdict(list)   # (consumer, iso) -> [(p, o, v)] in read order
    leader_of = {}                  # partition -> last leader Metadata named
    leader_changes = 0
    leaderless = set()
    min_isr_seen = None

    def observe(p, o, v):
        observed[(p, o)].add(v)
        positions[v].add((p, o))

    for e in events:
        kind = e["type"]
        if kind == "meta":
            meta = e
        elif kind == "invoke":
            invoked[e["value"]] = e["proc"]
            if "txn" in e:
                txn_of[e["value"]] = e["txn"]
        elif kind == "ack":
            acks[e["value"]] = (e["partition"], e["offset"])
            observe(e["partition"], e["offset"], e["value"])
        elif kind == "fail":
            failed.add(e["value"])
        elif kind == "txn":
            txns[e["txn"]] = (e["intent"], e["ok"])
        elif kind == "poll":
            streams[(e["consumer"], e["iso"])].extend(e["records"])
            for p, o, v in e["records"]:
                observe(p, o, v)
                read_values.add(v)
                if e["iso"] == "rc":
                    rc_values.add(v)
        elif kind == "leaders":
            # What the faults did, as Metadata told the driver (not judged).
            for p, leader in e["leaders"].items():
                if leader < 0:
                    leaderless.add(p)
                elif p in leader_of and leader_of[p] != leader:
                    leader_changes += 1
                if leader >= 0:
                    leader_of[p] = leader
            for n in e["isr"].values():
                min_isr_seen = n if min_isr_seen is None else min(min_isr_seen, n)
        elif kind == "cerror":
            cerrors[e["error"].split(":")[0][:80]] += 1
        elif kind == "final":
            iso, p = e["iso"], e["partition"]
            final_complete[iso][p] = e["complete"]
            got = final[iso].setdefault(p, {})
            for o, v in e["records"] or []:
                got[o] = v
                observe(p, o, v)
                read_values.add(v)
                if iso == "rc":
                    rc_values.add(v)

    if not final_complete["ru"]:
        raise SystemExit("check: the history has no final read")

    def committed(v):
        t = txn_of.get(v)
        return t is None or txns.get(t) == ("commit", True)

    def never_committed(v):
        t = txn_of.get(v)
        if t is None:
            return False
        # A transaction without an end event ended with the driver: never committed.
        intent = txns.get(t, ("abort", False))[0]
        return intent == "abort"

    acked = {v for v in acks if committed(v)}
    final_ru = {v for part in final["ru"].values() for v in part.values()}
    final_rc = {v for part in final["rc"].values() for v in part.values()}
    lost = sorted(v for v in acked if v not in final_ru or (v in txn_of and v not in final_rc))
    duplicated = sorted(v for v, ps in positions.items() if len(ps) > 1)
    inconsistent = sorted(k for k, vs in observed.items() if len(vs) > 1)
    unacked = read_values - acked
    phantom = sorted(v for v in unacked if v not in invoked)
    # Records of transactions that did not commit are legitimately visible to a
    # read_uncommitted reader: only a read_committed read of an unknown-outcome
    # commit counts here (aborted ones are aborted-read below).
    unacked_read = sorted(v for v in unacked if v in invoked
                          and (v not in txn_of or (v in rc_values and not never_committed(v))))
    aborted_read = sorted(v for v in rc_values if never_committed(v))
    unverified = [f"{iso}/{p}" for iso in ("ru", "rc") for p, ok in final_complete[iso].items() if not ok]
    unknown = {v for v in invoked if v not in acks} | failed

    # Per producer and partition, acknowledged offsets rise with the producer's counter.
    sent = collections.defaultdict(list)
    for v, (p, o) in acks.items():
        proc, _, n = v.rpartition("-")
        if v not in txn_of and invoked.get(v) == proc and n.isdigit():
            sent[(proc, p)].append((int(n), o, v))
    reordered = []
    for seq in sent.values():
        seq.sort()
        reordered += [b[2] for a, b in zip(seq, seq[1:]) if b[1] <= a[1]]

    # A live consumer reads its partition from the start: every record the final read
    # holds between two offsets it read in a row should have been among them.
    final_offsets = {p: sorted(recs) for p, recs in final["ru"].items()}
    skipped = set()
    for (_, iso), recs in streams.items():
        prev = {}
        for p, o, _ in recs:
            lo = prev.get(p, -1)
            if o > lo + 1:
                for fo in final_offsets.get(p, []):
                    if lo < fo < o:
                        v = final["ru"][p][fo]
                        if iso == "ru" or committed(v):
                            skipped.add((p, fo))
            prev[p] = o
    skipped = sorted(skipped)

    out = {
        "topic": meta.get("topic"),
        "acked": len(acked),
        "unknown": len(unknown),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "inconsistent": len(inconsistent),
        "unacked_read": len(unacked_read),
        "phantom": len(phantom),
        "aborted_read": len(aborted_read),
        "unverified": len(unverified),
        "reordered": len(reordered),
        "skipped": len(skipped),
        "txns_committed": sum(1 for i, ok in txns.values() if i == "commit" and ok),
        "txns_aborted": sum(1 for i, _ in txns.values() if i == "abort"),
        "txns_unknown": sum(1 for i, ok in txns.values() if i == "commit" and not ok),
        "consumer_errors": dict(cerrors.most_common(8)),
        "leader_changes": leader_changes,
        "leaderless_partitions": len(leaderless),
        "min_isr_seen": min_isr_seen,
        "examples": {
            "lost": lost[:10],
            "duplicated": {v: sorted(positions[v]) for v in duplicated[:10]},
            "inconsistent": {f"{p}/{o}": sorted(observed[(p, o)]) for p, o in inconsistent[:10]},
            "phantom": phantom[:10],
            "aborted_read": aborted_read[:10],
            "unverified": unverified,
            "reordered": sorted(reordered)[:10],
            "skipped": [f"{p}/{o}" for p, o in skipped[:10]],
        },
    }
    out["valid"] = not (lost or duplicated or inconsistent or phantom or aborted_read or unverified
                        or reordered or skipped)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    try:
        result = check(load(args[0]))
    except SystemExit as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    if "--json" in sys.argv:
        print(json.dumps(result, sort_keys=True))
    else:
        for k in ("acked", "unknown", "lost", "duplicated", "inconsistent", "unacked_read",
                  "phantom", "aborted_read", "reordered", "skipped", "unverified"):
            print(f"{k:14} {result[k]}")
        print("valid" if result["valid"] else "INVALID", json.dumps(result["examples"]))
    sys.exit(0 if result["valid"] else 1)


if __name__ == "__main__":
    main()
