#!/usr/bin/env python3
"""test_check.py: the checker finds each anomaly it claims to find, and nothing in a clean
history. Synthetic histories, no broker: `python3 compat-tests/faults/test_check.py`."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402


def clean():
    """Two producers' values on two partitions, a committed and an aborted transaction,
    live reads and a complete final read."""
    ev = [{"type": "meta", "topic": "t"}]
    log = {0: [], 1: []}
    for n in range(6):
        v, p = f"p0-{n}", n % 2
        ev.append({"type": "invoke", "proc": "p0", "value": v, "partition": p})
        ev.append({"type": "ack", "proc": "p0", "value": v, "partition": p, "offset": len(log[p])})
        log[p].append(v)
    for k, intent in ((0, "commit"), (1, "abort")):
        vals = [f"t{k}-0", f"t{k}-1"]
        for v in vals:
            ev.append({"type": "invoke", "proc": "txn", "value": v, "partition": 0, "txn": k})
            ev.append({"type": "ack", "proc": "txn", "value": v, "partition": 0, "offset": len(log[0]), "txn": k})
            log[0].append(v)
        log[0].append(None)  # the marker takes an offset
        ev.append({"type": "txn", "txn": k, "values": vals, "intent": intent, "ok": True})
    aborted = {"t1-0", "t1-1"}
    for p, vals in log.items():
        recs = [[p, o, v] for o, v in enumerate(vals) if v is not None]
        ev.append({"type": "poll", "consumer": f"c{p}-ru", "iso": "ru", "records": recs})
        ev.append({"type": "poll", "consumer": f"c{p}-rc", "iso": "rc",
                   "records": [r for r in recs if r[2] not in aborted]})
        for iso in ("ru", "rc"):
            ev.append({"type": "final", "iso": iso, "partition": p, "sentinel": len(vals),
                       "records": [[o, v] for _, o, v in recs if iso == "ru" or v not in aborted],
                       "complete": True})
    return ev


def final_of(ev, iso, p):
    return next(e for e in ev if e["type"] == "final" and e["iso"] == iso and e["partition"] == p)


class CheckerTest(unittest.TestCase):
    def test_clean_history_is_valid(self):
        r = check.check(clean())
        self.assertTrue(r["valid"], r)
        self.assertEqual(r["acked"], 8)  # 6 plain + the committed transaction's 2
        for k in ("lost", "duplicated", "inconsistent", "unacked_read", "phantom", "aborted_read",
                  "unverified", "reordered", "skipped"):
            self.assertEqual(r[k], 0, k)

    def test_lost(self):
        ev = clean()
        f = final_of(ev, "ru", 1)
        f["records"] = f["records"][:-1]
        r = check.check(ev)
        self.assertEqual(r["lost"], 1)
        self.assertFalse(r["valid"])

    def test_committed_transaction_missing_from_read_committed_is_lost(self):
        ev = clean()
        f = final_of(ev, "rc", 0)
        f["records"] = [x for x in f["records"] if x[1] != "t0-1"]
        self.assertEqual(check.check(ev)["lost"], 1)

    def test_duplicate_at_two_offsets(self):
        ev = clean()
        f = final_of(ev, "ru", 0)
        f["records"].append([99, "p0-0"])
        r = check.check(ev)
        self.assertEqual(r["duplicated"], 1)
        self.assertFalse(r["valid"])

    def test_inconsistent_offset(self):
        ev = clean()
        poll = next(e for e in ev if e["type"] == "poll" and e["consumer"] == "c1-ru")
        poll["records"][0] = [1, poll["records"][0][1], "p0-3"]  # another value at that offset
        r = check.check(ev)
        self.assertGreaterEqual(r["inconsistent"], 1)
        self.assertFalse(r["valid"])

    def test_unacked_read_is_allowed(self):
        ev = clean()
        ev.append({"type": "invoke", "proc": "p0", "value": "p0-99", "partition": 1})
        ev.append({"type": "fail", "proc": "p0", "value": "p0-99", "partition": 1, "error": "timeout"})
        final_of(ev, "ru", 1)["records"].append([50, "p0-99"])
        r = check.check(ev)
        self.assertEqual(r["unacked_read"], 1)
        self.assertEqual(r["unknown"], 1)
        self.assertTrue(r["valid"], r)

    def test_phantom(self):
        ev = clean()
        final_of(ev, "ru", 1)["records"].append([50, "nobody-sent-this"])
        r = check.check(ev)
        self.assertEqual(r["phantom"], 1)
        self.assertFalse(r["valid"])

    def test_aborted_read_under_read_committed(self):
        ev = clean()
        poll = next(e for e in ev if e["type"] == "poll" and e["consumer"] == "c0-rc")
        poll["records"].append([0, 6, "t1-0"])  # t1 was aborted; offset 6 holds it (see clean)
        r = check.check(ev)
        self.assertEqual(r["aborted_read"], 1)
        self.assertEqual(r["duplicated"] + r["inconsistent"], 0)
        self.assertFalse(r["valid"])

    def test_aborted_records_under_read_uncommitted_are_fine(self):
        r = check.check(clean())
        self.assertEqual(r["aborted_read"], 0)
        self.assertEqual(r["unacked_read"], 0)

    def test_incomplete_final_read_is_unverified(self):
        ev = clean()
        final_of(ev, "rc", 1)["complete"] = False
        r = check.check(ev)
        self.assertEqual(r["unverified"], 1)
        self.assertFalse(r["valid"])

    def test_reordered(self):
        ev = clean()
        a = next(e for e in ev if e["type"] == "ack" and e["value"] == "p0-0")
        b = next(e for e in ev if e["type"] == "ack" and e["value"] == "p0-2")
        a["offset"], b["offset"] = b["offset"], a["offset"]
        r = check.check(ev)
        self.assertEqual(r["reordered"], 1)
        self.assertFalse(r["valid"])

    def test_skipped_by_a_live_consumer(self):
        ev = clean()
        poll = next(e for e in ev if e["type"] == "poll" and e["consumer"] == "c1-ru")
        del poll["records"][1]  # read offsets 0 and 2 of partition 1, not 1
        r = check.check(ev)
        self.assertEqual(r["skipped"], 1)
        self.assertEqual(r["examples"]["skipped"], ["1/1"])
        self.assertFalse(r["valid"])

    def test_read_committed_may_step_over_aborted_records(self):
        ev = clean()  # partition 0: t1 (aborted) at offsets 6 and 7, its marker at 8
        ev.append({"type": "invoke", "proc": "p1", "value": "p1-0", "partition": 0})
        ev.append({"type": "ack", "proc": "p1", "value": "p1-0", "partition": 0, "offset": 9})
        next(e for e in ev if e["type"] == "poll" and e["consumer"] == "c0-rc")["records"].append([0, 9, "p1-0"])
        for iso in ("ru", "rc"):
            final_of(ev, iso, 0)["records"].append([9, "p1-0"])
        r = check.check(ev)
        self.assertEqual(r["skipped"], 0)
        self.assertTrue(r["valid"], r)

    def test_a_consumer_that_starts_late_skipped(self):
        ev = clean()
        poll = next(e for e in ev if e["type"] == "poll" and e["consumer"] == "c0-rc")
        poll["records"] = poll["records"][2:]
        self.assertEqual(check.check(ev)["skipped"], 2)


if __name__ == "__main__":
    unittest.main()
