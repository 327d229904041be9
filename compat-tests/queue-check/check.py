"""compat-tests/queue-check/check.py: the judge of a queue-check run.

It reads what the producer had acknowledged (produce.log), what every worker saw and did
(its log, qc/main.go says the format) and what the harness did to the workers and the broker
(events.jsonl), and says, record by record, whether the share group kept its promises.
Sans-io at its core: check() takes parsed data and returns a verdict, so test_check.py feeds
it made-up histories.

A record is one (partition, offset) the producer had acknowledged. A delivery is one `recv`
line: the record handed to one worker, with the broker's delivery count and the lock
deadline franz-go computed from AcquisitionLockTimeoutMs when it decoded the ShareFetch
response. A worker logs `recv` when its poll returns the record, which can be long after the
fetch (franz-go fetches ahead and buffers), so a delivery's time t is when its fetch was
decoded: the lock deadline minus the group's lock duration (wall clock, one machine). The
broker acquired the record a little earlier, except for a worker that was stopped: a response
that reached it while it was stopped is decoded only after SIGCONT, and its records may have
been acquired at any time from FETCH_WAIT_NS before the SIGSTOP on (a ShareFetch waits on the
broker for data up to franz-go's FetchMaxWait). So a delivery decoded within CONT_SLACK_NS of
its worker's SIGCONT has an earliest possible acquisition t_min that far back; t_min = t for
every other delivery.

Deliveries of a record are put in acquisition order by (broker epoch, delivery count, t): the
broker epoch is the number of broker kills before t (less EPOCH_SLACK_NS), and within one
broker's life Kafka's delivery count rises by one at every acquisition, so the count orders
acquisitions where times cannot (a response decoded late after SIGCONT). Across a broker kill
Kafka may hand out a count again (it does not write acquisitions, design doc section 2.5), so
the epoch comes first. Windows below run from the earlier delivery's t_min to the later one's t.
A response that reached a stopped worker before a broker kill and was decoded after SIGCONT
and the restart belongs to one of the lifetimes between t_min's and t's: it is ordered by the
earliest, and a count going back where that leaves the order open is counted
(count_order_unknown), not failed (seen against one es broker with 60 kills, seeds 703 and
704, and against three nodes, --cluster 3 --long --broker-kills 6 --seed 61).

Violations (any one fails the run):
  missing                 a record never delivered (and the group said it had consumed all)
  phantom                 a delivery of an offset the producer never had acknowledged
  wrong_value             a delivery whose value is not the number produced at that offset
  double_ack_ok           two acknowledgements of one record both answered with success while
                          both were in flight (the second sent before the first was answered), so
                          neither can be a late ack-ok (below). An ack whose worker was SIGSTOPped
                          between logging ack-sent and its answer counts as sent at its SIGCONT:
                          franz-go may have flushed it only then
  delivered_after_ack_ok  a delivery fetched after the record's first ack-ok was answered (the
                          effective one; ACK_SLACK_NS of slack): the broker had made the record
                          terminal, yet handed it out again
  abandoned               the last delivery was never acknowledged, the record was not
                          delivered again, and its count is below the delivery limit (so it
                          was not archived at the limit either)
  unexplained_redelivery  a delivery after an earlier one that ended in no known way: the
                          earlier holder was not killed, did not exit, was not stopped, its
                          lock had not expired, and the broker was not killed in between
  count_not_increasing    a delivery count not above the previous delivery's, with no broker
                          kill in between (or with one, when counts must survive a crash)
  unexplained_count_jump  a delivery count more than one above the previous logged delivery
                          (or above 1 for a first logged delivery) when no worker was killed,
                          stopped or exited and the broker was not killed before it: a delivery
                          nobody logged, which only a dead or stopped worker can explain
  orphan_ack              an ack line for a record the worker had no delivery of (a bug here)

Not violations, counted and shown:
  late_ack_ok             an ack-ok whose ack was sent after another ack-ok of the same record had
                          been answered: the record was already terminal, the broker changed
                          nothing and answered success. Kafka 4.4 does this: an acknowledgement of
                          offsets below the share-partition start offset is ignored, not an error
                          (design doc section 2.4). Two ways to get there: a worker whose lock
                          expired (SIGSTOP, or records that waited in franz-go's buffer) acks after
                          another worker acked the redelivery; or a worker acks an expired delivery
                          after it re-acquired the same record itself, and the broker, which knows
                          acquisitions by member and offset only, applies that ack to the new
                          acquisition, so the worker's ack of the new delivery comes late. The
                          worker is told it completed a record that was already complete, so the
                          record shows two ack-ok lines; only the first answered counts above.
  ambiguous               the last delivery's acknowledgement was sent but its answer never
                          came (the worker died first: died_before_answer; the flush ended with
                          no result: unknown), or its answer was an error and the record was not
                          delivered again (the broker killed between the ack and the error:
                          answer_lost_to_broker_kill; otherwise err_but_kept: the protocol
                          answers acknowledgements per partition, so an error for the partition
                          does not say which of its records the broker applied)
  archived_at_limit       the last delivery was never acknowledged, its count had reached the
                          delivery limit: the broker archived it, as KIP-932 says
  redeliveries by cause   worker_kill, worker_exit, worker_stop, broker_kill, lock_expiry
  count_kept_by_crash     a delivery count not above the previous delivery's across a broker kill,
                          allowed unless counts must survive a crash (Kafka does not write
                          acquisitions, so it hands out the last written count again, or 1)
  count_order_unknown     a delivery count below the previous delivery's where one of the two was
                          decoded after its worker's SIGCONT and broker kills fall between when it
                          can have been acquired and when it was decoded: which broker lifetime
                          answered it is not known, so neither is the order of the two
"""
import collections
import json
import os

# franz-go computes a record's lock deadline when it decodes the ShareFetch response, after the
# broker started the lock; the broker's real expiry is therefore a little earlier. A redelivery
# this long before the logged deadline still counts as a lock expiry.
LOCK_SLACK_NS = 1_000_000_000
# A fetch response can be decoded a little after the broker acquired its records, and so after
# an ack-ok that the broker answered later than that acquisition was logged.
ACK_SLACK_NS = 50_000_000
# A fetch decoded this soon after a broker kill may have been acquired before it.
EPOCH_SLACK_NS = 50_000_000
# A worker decodes what reached its socket while it was stopped at once after SIGCONT.
CONT_SLACK_NS = 1_000_000_000
# franz-go's FetchMaxWait (5 s) and a margin: how long a ShareFetch can wait on the broker.
FETCH_WAIT_NS = 6_000_000_000
EXAMPLES_MAX = 8

VIOLATIONS = ("missing", "phantom", "wrong_value", "double_ack_ok", "delivered_after_ack_ok", "abandoned",
              "unexplained_redelivery", "count_not_increasing", "unexplained_count_jump", "orphan_ack")
AMBIGUOUS = ("died_before_answer", "unknown", "answer_lost_to_broker_kill", "err_but_kept")
CAUSES = ("worker_kill", "worker_exit", "worker_stop", "broker_kill", "lock_expiry")


class Delivery:
    __slots__ = ("worker", "key", "count", "t", "t_min", "epoch", "epoch_max", "recv_t", "deadline", "value",
                 "ack_sent", "outcome", "outcome_t", "error")

    def __init__(self, worker, key, count, recv_t, deadline, lock_ns, value):
        self.worker, self.key, self.count, self.value = worker, key, count, value
        self.recv_t, self.deadline = recv_t, deadline
        self.t = deadline - lock_ns   # when franz-go decoded the fetch that carried it
        self.t_min = self.t           # the earliest the broker can have acquired it (Faults.place)
        self.epoch = 0         # the earliest broker lifetime that can have acquired it
        self.epoch_max = 0     # the latest (the one it was decoded in)
        self.ack_sent = None   # time of ack-sent
        self.outcome = None    # "ok" | "err" | "unknown" | None (no answer logged)
        self.outcome_t = None
        self.error = None

    def describe(self):
        s = f"{self.worker} count {self.count} fetched {self.t}"
        if self.t_min != self.t:
            s += f" (acquired from {self.t_min} on: decoded after SIGCONT)"
        s += f" recv {self.recv_t}"
        if self.ack_sent is not None:
            s += f", ack-sent {self.ack_sent}"
        if self.outcome is not None:
            s += f", ack-{self.outcome} {self.outcome_t}" + (f" {self.error}" if self.error else "")
        return s


def parse_produce(path):
    """{(partition, offset): number} from produce.log."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) == 4 and w[0] == "prod":
                out[(int(w[2]), int(w[3]))] = int(w[1])
    return out


def parse_worker(path):
    """A worker log's lines as tuples; a torn last line (SIGKILL mid-write) is dropped."""
    lines = []
    with open(path) as f:
        for raw in f:
            if not raw.endswith("\n"):
                break
            w = raw.split()
            if not w:
                continue
            lines.append(w)
    return lines


def parse_events(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


class Faults:
    """The harness's events, asked: did X happen to worker W (or the broker) between t0 and t1?"""

    def __init__(self, events):
        self.by_worker = collections.defaultdict(list)   # worker -> [(t, kind)]
        self.broker_kills = []
        self.any_fault = []                               # times of every fault of any kind
        for e in events:
            k = e["kind"]
            if k in ("worker-kill", "worker-exit", "worker-stop", "worker-cont"):
                self.by_worker[e["worker"]].append((e["t"], k))
                if k != "worker-cont":
                    self.any_fault.append(e["t"])
            elif k == "broker-kill":
                self.broker_kills.append(e["t"])
                self.any_fault.append(e["t"])
        self.any_fault.sort()

    def worker_event(self, worker, kind, t0, t1):
        return any(kind == k and t0 <= t <= t1 for t, k in self.by_worker.get(worker, ()))

    def stopped_during(self, worker, t0, t1):
        """A SIGSTOP of worker whose stopped interval overlaps [t0, t1]."""
        evs = sorted(self.by_worker.get(worker, ()))
        for i, (t, k) in enumerate(evs):
            if k != "worker-stop":
                continue
            cont = next((tc for tc, kc in evs[i + 1:] if kc == "worker-cont"), None)
            if t <= t1 and (cont is None or cont >= t0):
                return True
        return False

    def ack_sent_latest(self, d):
        """The latest an acknowledgement can have left its worker: `ack-sent` is logged before
        franz-go flushes, so a worker SIGSTOPped after logging it and before its answer may have
        sent it only after SIGCONT (its answer then follows at once). Its SIGCONT time then,
        else its logged time."""
        latest = d.ack_sent
        if d.ack_sent is None or d.outcome_t is None:
            return latest
        evs = sorted(self.by_worker.get(d.worker, ()))
        for i, (t, k) in enumerate(evs):
            if k != "worker-stop" or not d.ack_sent <= t <= d.outcome_t:
                continue
            cont = next((tc for tc, kc in evs[i + 1:] if kc == "worker-cont"), None)
            if cont is not None and cont <= d.outcome_t:
                latest = max(latest, cont)
        return latest

    def broker_kill(self, t0, t1):
        return any(t0 <= t <= t1 for t in self.broker_kills)

    def place(self, d):
        """Sets d.t_min (a fetch decoded just after its worker's SIGCONT) and d.epoch."""
        evs = sorted(self.by_worker.get(d.worker, ()))
        for i, (t, k) in enumerate(evs):
            if k != "worker-stop" or t > d.t:
                continue
            cont = next((tc for tc, kc in evs[i + 1:] if kc == "worker-cont"), None)
            if cont is None or d.t <= cont + CONT_SLACK_NS:
                d.t_min = min(d.t_min, t - FETCH_WAIT_NS)
        # The broker lifetime that acquired it: a fetch decoded after SIGCONT may have been
        # answered by a broker killed while the worker was stopped, or by a later one, so it is
        # known only to lie between the lifetime of t_min and that of t (the same one for every
        # other delivery). Deliveries are ordered by the earliest.
        d.epoch = sum(1 for t in self.broker_kills if t < d.t_min - EPOCH_SLACK_NS)
        d.epoch_max = sum(1 for t in self.broker_kills if t < d.t - EPOCH_SLACK_NS)

    def fault_before(self, t1, t0=None):
        return any((t0 is None or t >= t0) and t <= t1 for t in self.any_fault)


def check(produced, workers, events, delivery_limit, lock_ms, counts_survive_crash=False, finished=True):
    """produced {(p, o): n}; workers {name: [line words...]}; events [dict]; lock_ms the group's
    share.record.lock.duration.ms. Returns the verdict."""
    lock_ns = lock_ms * 1_000_000
    faults = Faults(events)
    deliveries = collections.defaultdict(list)     # key -> [Delivery]
    v = {k: 0 for k in VIOLATIONS}
    amb = {k: 0 for k in AMBIGUOUS}
    causes = {k: 0 for k in CAUSES}
    examples = collections.defaultdict(list)

    def bad(kind, text):
        v[kind] += 1
        if len(examples[kind]) < EXAMPLES_MAX:
            examples[kind].append(text)

    late_ok = 0
    count_kept = 0
    count_order_unknown = 0
    ack_errors = collections.Counter()
    lines_total = 0
    for name, lines in workers.items():
        current = {}
        for w in lines:
            lines_total += 1
            kind = w[0]
            if kind == "recv":
                key = (int(w[1]), int(w[2]))
                d = Delivery(name, key, int(w[3]), int(w[4]), int(w[5]), lock_ns, int(w[6]))
                deliveries[key].append(d)
                current[key] = d
            elif kind in ("ack-sent", "ack-ok", "ack-err", "ack-unknown"):
                key = (int(w[1]), int(w[2]))
                d = current.get(key)
                if d is None:
                    bad("orphan_ack", f"{name}: {' '.join(w)}")
                    continue
                t = int(w[3])
                if kind == "ack-sent":
                    d.ack_sent = t
                else:
                    d.outcome, d.outcome_t = kind[4:], t
                    d.error = w[4] if kind == "ack-err" and len(w) > 4 else None
                    if kind == "ack-err":
                        ack_errors[d.error] += 1

    acked_once = 0
    redeliveries = 0
    archived = 0
    max_count = 0
    for key, ds in deliveries.items():
        if key not in produced:
            bad("phantom", f"{key}: {ds[0].describe()}")
            continue
        for d in ds:
            max_count = max(max_count, d.count)
            if d.value != produced[key]:
                bad("wrong_value", f"{key}: produced {produced[key]}, {d.worker} got {d.value}")
    for ds in deliveries.values():
        for d in ds:
            faults.place(d)
    for key in sorted(produced):
        ds = sorted(deliveries.get(key, ()), key=lambda d: (d.epoch, d.count, d.t))
        if not ds:
            bad("missing", f"{key}: never delivered")
            continue
        # Redeliveries and delivery counts, delivery after delivery.
        first = ds[0]
        if first.count > 1 and not faults.fault_before(first.t):
            bad("unexplained_count_jump", f"{key}: first logged delivery has count {first.count}, "
                                          f"and nothing was killed or stopped before it: {first.describe()}")
        for prev, cur in zip(ds, ds[1:]):
            redeliveries += 1
            t0, t1 = prev.t_min, cur.t
            if faults.worker_event(prev.worker, "worker-kill", t0, t1):
                causes["worker_kill"] += 1
            elif faults.worker_event(prev.worker, "worker-exit", t0, t1):
                causes["worker_exit"] += 1
            elif faults.stopped_during(prev.worker, t0, t1):
                causes["worker_stop"] += 1
            elif faults.broker_kill(t0, t1):
                causes["broker_kill"] += 1
            elif t1 >= prev.deadline - LOCK_SLACK_NS:
                causes["lock_expiry"] += 1
            else:
                bad("unexplained_redelivery", f"{key}: {prev.describe()} (lock deadline {prev.deadline}); "
                                              f"then {cur.describe()}")
            crash = faults.broker_kill(t0 - EPOCH_SLACK_NS, t1)
            unsure = (prev.epoch != prev.epoch_max or cur.epoch != cur.epoch_max) \
                and prev.epoch <= cur.epoch_max and cur.epoch <= prev.epoch_max
            if cur.count <= prev.count and crash and not counts_survive_crash:
                count_kept += 1
            elif cur.count < prev.count and unsure:
                count_order_unknown += 1
            elif cur.count <= prev.count:
                bad("count_not_increasing", f"{key}: count {prev.count} then {cur.count}"
                                            f"{' across a broker kill' if crash else ''}: "
                                            f"{prev.describe()}; then {cur.describe()}")
            elif cur.count > prev.count + 1 and not faults.fault_before(t1, t0):
                bad("unexplained_count_jump", f"{key}: count {prev.count} then {cur.count} with nothing "
                                              f"killed or stopped in between: {prev.describe()}; then {cur.describe()}")
        # How the record ended.
        oks = sorted((d for d in ds if d.outcome == "ok"), key=lambda d: d.outcome_t)
        if oks:
            eff = oks[0]
            late = [d for d in oks[1:] if faults.ack_sent_latest(d) > eff.outcome_t]
            racing = [d for d in oks[1:] if faults.ack_sent_latest(d) <= eff.outcome_t]
            if late:
                late_ok += len(late)
                if len(examples["late_ack_ok"]) < EXAMPLES_MAX:
                    examples["late_ack_ok"].append(f"{key}: " + "; ".join(
                        d.describe() + f" (lock deadline {d.deadline})" for d in ds))
            if racing:
                bad("double_ack_ok", f"{key}: " + "; ".join(d.describe() for d in [eff, *racing]))
            after = [d for d in ds if d.t_min > eff.outcome_t + ACK_SLACK_NS]
            if after:
                bad("delivered_after_ack_ok", f"{key}: ack-ok answered {eff.outcome_t} ({eff.describe()}); "
                                              f"then " + "; ".join(d.describe() for d in after))
            acked_once += not racing
            continue
        last = ds[-1]
        if last.ack_sent is None:
            if last.count >= delivery_limit:
                archived += 1
            elif finished:
                bad("abandoned", f"{key}: last delivery never acknowledged and not delivered again: "
                                 f"{last.describe()}")
        elif last.outcome is None:
            amb["died_before_answer"] += 1
        elif last.outcome == "unknown":
            amb["unknown"] += 1
        elif faults.broker_kill(last.ack_sent, last.outcome_t):
            amb["answer_lost_to_broker_kill"] += 1
        else:
            amb["err_but_kept"] += 1
            if len(examples["err_but_kept"]) < EXAMPLES_MAX:
                examples["err_but_kept"].append(f"{key}: " + "; ".join(d.describe() for d in ds))
    return {
        "records": len(produced),
        "delivered": sum(1 for k in produced if deliveries.get(k)),
        "deliveries": sum(len(ds) for ds in deliveries.values()),
        "redeliveries": redeliveries,
        "causes": causes,
        "acked_once": acked_once,
        "ambiguous": amb,
        "archived_at_limit": archived,
        "late_ack_ok": late_ok,
        "count_kept_by_crash": count_kept,
        "count_order_unknown": count_order_unknown,
        "ack_errors": dict(ack_errors.most_common()),
        "max_delivery_count": max_count,
        "violations": v,
        "violations_total": sum(v.values()),
        "examples": dict(examples),
        "log_lines": lines_total,
    }


def check_run(rundir, delivery_limit, lock_ms, counts_survive_crash=False, finished=True):
    """check() on a run directory: produce.log, events.jsonl, workers/*.log."""
    produced = parse_produce(os.path.join(rundir, "produce.log"))
    wdir = os.path.join(rundir, "workers")
    workers = {f[:-4]: parse_worker(os.path.join(wdir, f)) for f in sorted(os.listdir(wdir)) if f.endswith(".log")}
    events = parse_events(os.path.join(rundir, "events.jsonl"))
    return check(produced, workers, events, delivery_limit, lock_ms, counts_survive_crash, finished)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="judge a queue-check run directory again")
    ap.add_argument("rundir")
    ap.add_argument("--delivery-limit", type=int, default=10)
    ap.add_argument("--lock-ms", type=int, default=3000)
    ap.add_argument("--counts-survive-crash", action="store_true")
    a = ap.parse_args()
    print(json.dumps(check_run(a.rundir, a.delivery_limit, a.lock_ms, a.counts_survive_crash), indent=1,
                     sort_keys=True))
