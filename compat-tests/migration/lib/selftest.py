"""Tests of the checker's logic (lib/check.py) on records made up here, with no broker: the exact
and content-order comparisons, the compacted-topic comparison, where a synced group offset lands
(re-read, skipped), the exactly-once count across a switch, and the decoding of MM2's checkpoint
records. `compat-tests/migration/run --self-test` runs them; they guard the es-mirror mode's
checks until es's mirror exists to run them for real.
"""
import struct

import check
from workload import COMPACTED, GROUP_TOPICS, TOPICS, digest

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def rec(o, key, value, ts=1000, headers=(("id", b"x"),), tt=1):
    k = None if key is None else key.encode()
    v = None if value is None else value.encode()
    h = [(a, b) for a, b in headers]
    return {"o": o, "k": k, "v": v, "h": h, "ts": ts, "tt": tt, "d": digest(k, v, h, ts)}


def topics(**parts):
    """{topic: {partition: records}} for every trial topic, empty unless given."""
    out = {t: {p: [] for p in range(d["partitions"])} for t, d in TOPICS.items()}
    for name, recs in parts.items():
        out[name.replace("_", "-")][0] = recs
    return out


@test
def exact_offsets_equal_records_pass():
    src = topics(mig_single=[rec(0, "a", "1"), rec(2, "b", "2")])
    c = check.compare(src, topics(mig_single=[rec(0, "a", "1"), rec(2, "b", "2")]), exact_offsets=True)
    assert (c.compared, c.mismatches) == (2, 0), vars(c)


@test
def exact_offsets_catch_a_shift_a_loss_and_an_extra():
    src = topics(mig_single=[rec(0, "a", "1"), rec(2, "b", "2")])
    shifted = check.compare(src, topics(mig_single=[rec(0, "a", "1"), rec(1, "b", "2")]), exact_offsets=True)
    assert shifted.mismatches == 2, vars(shifted)  # offset 1 only on es, offset 2 missing there
    lost = check.compare(src, topics(mig_single=[rec(0, "a", "1")]), exact_offsets=True)
    assert lost.mismatches == 1
    extra = check.compare(src, topics(mig_single=[rec(0, "a", "1"), rec(2, "b", "2"), rec(3, "c", "3")]),
                          exact_offsets=True)
    assert extra.mismatches == 1


@test
def every_field_counts():
    base = rec(0, "a", "1")
    for other in (rec(0, "b", "1"), rec(0, "a", "2"), rec(0, "a", "1", ts=1001), rec(0, "a", "1", tt=2),
                  rec(0, "a", "1", headers=(("id", b"y"),)), rec(0, "a", "1", headers=(("id", None),)),
                  rec(0, None, "1"), rec(0, "a", None), rec(0, "a", "1", headers=())):
        c = check.compare(topics(mig_single=[base]), topics(mig_single=[other]), exact_offsets=True)
        assert c.mismatches == 1, other


@test
def content_order_counts_offsets_apart():
    src = topics(mig_txn=[rec(0, "a", "1"), rec(5, "b", "2")])
    c = check.compare(src, topics(mig_txn=[rec(0, "a", "1"), rec(1, "b", "2")]), exact_offsets=False)
    assert (c.compared, c.mismatches, c.offset_shifted) == (2, 0, 1), vars(c)
    swapped = check.compare(src, topics(mig_txn=[rec(0, "b", "2"), rec(1, "a", "1")]), exact_offsets=False)
    assert swapped.mismatches == 2


@test
def compacted_topic_compares_latest_per_key():
    assert "mig-compact" in COMPACTED
    src = topics(mig_compact=[rec(3, "k1", "v2"), rec(7, "k2", None)])            # after compaction
    tgt = topics(mig_compact=[rec(1, "k1", "v1"), rec(3, "k1", "v2"), rec(5, "k2", "x"), rec(7, "k2", None)])
    c = check.compare(src, tgt, exact_offsets=True)
    assert (c.compared, c.mismatches) == (1, 0), vars(c)  # k2 is a tombstone on both: not compared
    moved = check.compare(src, topics(mig_compact=[rec(4, "k1", "v2"), rec(7, "k2", None)]), exact_offsets=True)
    assert moved.mismatches == 1
    assert check.compare(src, topics(mig_compact=[rec(4, "k1", "v2"), rec(7, "k2", None)]),
                         exact_offsets=False).mismatches == 0
    resurrected = check.compare(src, topics(mig_compact=[rec(3, "k1", "v2"), rec(5, "k2", "x")]), exact_offsets=False)
    assert resurrected.mismatches == 1


@test
def group_position_counts_rereads_and_skips():
    src_recs = [rec(o, f"k{o}", f"v{o}") for o in range(0, 20, 2)]           # offsets 0, 2, ..., 18
    tgt_recs = [dict(r, o=i) for i, r in enumerate(src_recs)]                # dense: 0..9
    src, tgt = topics(mig_single=src_recs), topics(mig_single=tgt_recs)
    committed = {("mig-single", 0): 10}                                      # consumed offsets 0..8: 5 records
    rows = check.group_positions(src, tgt, committed, {("mig-single", 0): 5})
    assert rows == [("mig-single", 0, 10, 5, 5, 0, 0)], rows
    assert check.group_positions(src, tgt, committed, {("mig-single", 0): 2})[0][5:] == (3, 0)
    assert check.group_positions(src, tgt, committed, {("mig-single", 0): 7})[0][5:] == (0, 2)
    assert check.group_positions(src, tgt, committed, {("mig-single", 0): -1001})[0][5:] == (5, 0)


@test
def exactly_once_counts_duplicates_losses_and_strangers():
    recs = [rec(o, f"k{o}", f"v{o}") for o in range(4)]
    src = topics(mig_single=recs)
    assert "mig-single" in GROUP_TOPICS
    log = [{"d": r["d"]} for r in recs] + [{"d": recs[1]["d"]}]
    r = check.exactly_once(src, {"g": log})["g"]
    assert (r["expected"], r["consumed"], r["duplicates"], r["lost"], r["not_in_source"]) == (4, 5, 1, 0, 0), r
    r = check.exactly_once(src, {"g": [{"d": recs[0]["d"]}, {"d": "stranger"}]})["g"]
    assert (r["lost"], r["not_in_source"]) == (3, 1), r


@test
def checkpoint_records_decode():
    def s(x):
        return struct.pack(">h", len(x)) + x.encode()
    key = s("mig-group-a") + s("mig-multi") + struct.pack(">i", 7)
    value = struct.pack(">hqq", 0, 3333, 3233) + s("")
    assert check.decode_checkpoint(key, value) == ("mig-group-a", "mig-multi", 7, 3333, 3233)


def main():
    passed = failed = 0
    for t in TESTS:
        try:
            t()
            passed += 1
            print(f"ok   {t.__name__}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {t.__name__}: {e}")
    print(f"{passed} passed, {failed} failed")
    return failed == 0
