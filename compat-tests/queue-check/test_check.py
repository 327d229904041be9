#!/usr/bin/env python3
"""test_check.py: check.py finds each violation it claims to find, explains each redelivery by
the fault it names, and finds nothing in a clean history. Made-up logs, no broker:
`python3 compat-tests/queue-check/test_check.py`."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402

S = 1_000_000_000   # one second in nanoseconds
LOCK_MS = 3000
LOCK = LOCK_MS * 1_000_000
LIMIT = 10


class Log:
    """A worker's log, written with times in seconds; a delivery fetched at f has its lock
    deadline at f + the lock duration, as franz-go computes it."""

    def __init__(self):
        self.lines = []

    def recv(self, o, count, fetched, at=None, p=0, value=None):
        at = fetched if at is None else at
        self.lines.append(["recv", str(p), str(o), str(count), str(int(at * S)), str(int(fetched * S) + LOCK),
                           str(o if value is None else value)])
        return self

    def sent(self, o, at, p=0):
        self.lines.append(["ack-sent", str(p), str(o), str(int(at * S))])
        return self

    def ok(self, o, at, p=0):
        self.lines.append(["ack-ok", str(p), str(o), str(int(at * S))])
        return self

    def err(self, o, at, error="INVALID_RECORD_STATE", p=0):
        self.lines.append(["ack-err", str(p), str(o), str(int(at * S)), error])
        return self

    def unknown(self, o, at, p=0):
        self.lines.append(["ack-unknown", str(p), str(o), str(int(at * S))])
        return self

    def done(self, o, count, fetched, p=0):
        """One whole delivery: recv, ack-sent and ack-ok 0.1 s apart."""
        return self.recv(o, count, fetched, p=p).sent(o, fetched + 0.1, p=p).ok(o, fetched + 0.2, p=p)


def ev(kind, at, worker=None):
    e = {"t": int(at * S), "kind": kind}
    if worker:
        e["worker"] = worker
    return e


def produced(n):
    return {(0, o): o for o in range(n)}


def judge(workers, events=(), n=2, counts_survive_crash=False, finished=True):
    return check.check(produced(n), {k: v.lines for k, v in workers.items()}, list(events), LIMIT, LOCK_MS,
                       counts_survive_crash, finished)


def violations(v):
    return {k: n for k, n in v["violations"].items() if n}


class Clean(unittest.TestCase):
    def test_every_record_acked_once(self):
        v = judge({"w1": Log().done(0, 1, 10).done(1, 1, 11)})
        self.assertEqual(violations(v), {})
        self.assertEqual((v["acked_once"], v["redeliveries"], v["late_ack_ok"]), (2, 0, 0))


class Redeliveries(unittest.TestCase):
    def test_after_worker_kill(self):
        w1 = Log().recv(0, 1, 10)
        w2 = Log().done(0, 2, 12).done(1, 1, 12)
        v = judge({"w1": w1, "w2": w2}, [ev("worker-kill", 11, "w1")])
        self.assertEqual(violations(v), {})
        self.assertEqual(v["causes"]["worker_kill"], 1)

    def test_after_stop_and_lock_expiry(self):
        w1 = Log().recv(0, 1, 10).sent(0, 15).err(0, 15.1)
        w2 = Log().done(0, 2, 13.1).done(1, 1, 13.2)
        v = judge({"w1": w1, "w2": w2}, [ev("worker-stop", 10.5, "w1"), ev("worker-cont", 15, "w1")])
        self.assertEqual(violations(v), {})
        self.assertEqual(v["causes"]["worker_stop"], 1)

    def test_lock_expiry_without_a_fault(self):
        w1 = Log().recv(0, 1, 10).sent(0, 14).err(0, 14.1)
        w2 = Log().done(0, 2, 13.05).done(1, 1, 13.1)
        v = judge({"w1": w1, "w2": w2})
        self.assertEqual(violations(v), {})
        self.assertEqual(v["causes"]["lock_expiry"], 1)

    def test_after_broker_kill_a_count_may_repeat_on_kafka_only(self):
        w1 = Log().recv(0, 1, 10).sent(0, 10.1).err(0, 10.3, "unable_to_dial")
        w2 = Log().done(0, 1, 20).done(1, 1, 20)
        events = [ev("broker-kill", 10.2), ev("broker-ready", 19)]
        v = judge({"w1": w1, "w2": w2}, events)
        self.assertEqual(violations(v), {})
        self.assertEqual((v["causes"]["broker_kill"], v["count_kept_by_crash"]), (1, 1))
        v = judge({"w1": w1, "w2": w2}, events, counts_survive_crash=True)
        self.assertEqual(violations(v), {"count_not_increasing": 1})

    def test_unexplained_redelivery(self):
        w1 = Log().recv(0, 1, 10).sent(0, 10.1).err(0, 10.2)
        w2 = Log().done(0, 2, 11).done(1, 1, 11)
        v = judge({"w1": w1, "w2": w2})
        self.assertEqual(violations(v), {"unexplained_redelivery": 1})

    def test_unexplained_count_jump(self):
        v = judge({"w1": Log().done(0, 3, 10).done(1, 1, 10)})
        self.assertEqual(violations(v), {"unexplained_count_jump": 1})
        v = judge({"w1": Log().done(0, 3, 10).done(1, 1, 10)}, [ev("worker-kill", 5, "w9")])
        self.assertEqual(violations(v), {})

    def test_count_must_increase_without_a_crash(self):
        w1 = Log().recv(0, 2, 10)
        w2 = Log().done(0, 2, 12).done(1, 1, 12)
        v = judge({"w1": w1, "w2": w2}, [ev("worker-kill", 5, "w0"), ev("worker-kill", 11, "w1")])
        self.assertEqual(violations(v), {"count_not_increasing": 1})

    def test_fetch_time_orders_deliveries_not_recv_time(self):
        # w1 fetched before it was stopped, logged the recv after SIGCONT: the earlier delivery.
        w1 = Log().recv(0, 1, 10, at=16).sent(0, 16.1).err(0, 16.2, "INVALID_SHARE_SESSION_EPOCH")
        w2 = Log().done(0, 2, 13.2).done(1, 1, 13.3)
        v = judge({"w1": w1, "w2": w2}, [ev("worker-stop", 10.5, "w1"), ev("worker-cont", 15.9, "w1")])
        self.assertEqual(violations(v), {})


    def test_a_fetch_decoded_after_sigcont_belongs_to_the_lifetime_that_answered_it(self):
        # w1's fetch was answered (count 1) before its stop; the broker was killed, w2 got the
        # record with count 2 (counts survive the crash), the broker was killed again, and only
        # then did w1, continued, decode its old answer: not a count going back.
        w1 = Log().recv(0, 1, 16, at=16.1).sent(0, 16.2).err(0, 16.3, "INVALID_SHARE_SESSION_EPOCH")
        w2 = Log().done(0, 2, 13).done(1, 1, 13)
        events = [ev("worker-stop", 10.5, "w1"), ev("broker-kill", 12), ev("broker-ready", 12.3),
                  ev("broker-kill", 14), ev("broker-ready", 14.3), ev("worker-cont", 15.9, "w1")]
        v = judge({"w1": w1, "w2": w2}, events, counts_survive_crash=True)
        self.assertEqual(violations(v), {})
        # Or later: w2 got the record (count 1) and was killed, the broker was killed, and w1,
        # continued, fetched it anew (count 2) and decoded that at once. Its fetch could also
        # have been one sent before the stop: the order is not known, nothing is failed.
        w1b = Log().done(0, 2, 16)
        w2b = Log().recv(0, 1, 13.5).sent(0, 13.6).done(1, 1, 13.5)
        events_b = [ev("worker-stop", 10.5, "w1"), ev("broker-kill", 12), ev("broker-ready", 12.3),
                    ev("broker-kill", 14), ev("broker-ready", 14.3), ev("worker-cont", 15.9, "w1")]
        v = judge({"w1": w1b, "w2": w2b}, events_b, counts_survive_crash=True)
        self.assertEqual(violations(v), {})
        self.assertEqual(v["count_order_unknown"], 1)
        # Fetched well after the SIGCONT, it would be a count going back, and a delivery after
        # the record's ack-ok.
        w1 = Log().recv(0, 1, 17, at=17.1).sent(0, 17.2).err(0, 17.3, "INVALID_SHARE_SESSION_EPOCH")
        v = judge({"w1": w1, "w2": w2}, events, counts_survive_crash=True)
        self.assertEqual(violations(v), {"count_not_increasing": 1, "delivered_after_ack_ok": 1})


class Endings(unittest.TestCase):
    def test_missing(self):
        v = judge({"w1": Log().done(0, 1, 10)})
        self.assertEqual(violations(v), {"missing": 1})

    def test_double_ack_ok_in_flight_together(self):
        w1 = Log().recv(0, 1, 10).sent(0, 13.5).ok(0, 13.7)
        w2 = Log().recv(0, 2, 13.1).sent(0, 13.6).ok(0, 13.8).done(1, 1, 14)
        v = judge({"w1": w1, "w2": w2})
        self.assertEqual(violations(v), {"double_ack_ok": 1})

    def test_late_ack_ok_is_counted_not_failed(self):
        # w1 stopped past its lock; w2 got the record and acked it; w1's ack is answered success.
        w1 = Log().recv(0, 1, 10).sent(0, 15).ok(0, 15.1)
        w2 = Log().done(0, 2, 13.1).done(1, 1, 13.2)
        v = judge({"w1": w1, "w2": w2}, [ev("worker-stop", 10.5, "w1"), ev("worker-cont", 15, "w1")])
        self.assertEqual(violations(v), {})
        self.assertEqual((v["late_ack_ok"], v["acked_once"]), (1, 2))

    def test_an_ack_held_by_a_stop_is_late_not_double(self):
        # w1 logs ack-sent, is stopped before franz-go flushes it; its lock expires, w2 gets the
        # record and acks it; w1's ack leaves after SIGCONT and is answered success: late.
        w1 = Log().recv(0, 1, 10).sent(0, 10.1).ok(0, 15.05)
        w2 = Log().done(0, 2, 13.1).done(1, 1, 13.2)
        v = judge({"w1": w1, "w2": w2}, [ev("worker-stop", 10.12, "w1"), ev("worker-cont", 15, "w1")])
        self.assertEqual(violations(v), {})
        self.assertEqual((v["late_ack_ok"], v["acked_once"]), (1, 2))
        # Without the stop the two acks were in flight together: a violation.
        v = judge({"w1": w1, "w2": w2})
        self.assertEqual(violations(v), {"double_ack_ok": 1})

    def test_delivered_after_ack_ok(self):
        w1 = Log().done(0, 1, 10).done(1, 1, 10)
        w2 = Log().done(0, 2, 20)
        v = judge({"w1": w1, "w2": w2}, [ev("worker-kill", 11, "w1")])
        self.assertIn("delivered_after_ack_ok", violations(v))

    def test_abandoned_and_archived(self):
        v = judge({"w1": Log().recv(0, 1, 10).done(1, 1, 10)})
        self.assertEqual(violations(v), {"abandoned": 1})
        v = judge({"w1": Log().recv(0, LIMIT, 10).done(1, 1, 10)}, [ev("worker-kill", 5, "w0")])
        self.assertEqual(violations(v), {})
        self.assertEqual(v["archived_at_limit"], 1)
        v = judge({"w1": Log().recv(0, 1, 10).done(1, 1, 10)}, finished=False)
        self.assertEqual(violations(v), {})

    def test_ambiguous_endings(self):
        v = judge({"w1": Log().recv(0, 1, 10).sent(0, 10.1).recv(1, 1, 10).sent(1, 10.1).unknown(1, 10.2)})
        self.assertEqual(violations(v), {})
        self.assertEqual(v["ambiguous"]["died_before_answer"], 1)
        self.assertEqual(v["ambiguous"]["unknown"], 1)
        w1 = Log().recv(0, 1, 10).sent(0, 10.1).err(0, 10.5, "unable_to_dial").done(1, 1, 10)
        v = judge({"w1": w1}, [ev("broker-kill", 10.2)])
        self.assertEqual(v["ambiguous"]["answer_lost_to_broker_kill"], 1)
        v = judge({"w1": w1})
        self.assertEqual(v["ambiguous"]["err_but_kept"], 1)
        self.assertEqual(violations(v), {})

    def test_phantom_wrong_value_and_orphan_ack(self):
        w1 = Log().done(0, 1, 10).done(1, 1, 10, p=0).recv(5, 1, 10).sent(7, 11)
        w1.lines[3][6] = "99"   # offset 1 carries 99, not 1
        v = judge({"w1": w1})
        self.assertEqual(violations(v), {"phantom": 1, "wrong_value": 1, "orphan_ack": 1})


if __name__ == "__main__":
    unittest.main()
