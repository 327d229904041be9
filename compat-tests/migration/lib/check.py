"""The checker of the migration trial: reads every partition of both clusters (read_committed),
compares them record by record, reads consumer-group offsets on both sides, and counts what a
consumer saw across the cut-over.

compare_topic(): offset, key, value, headers, timestamp and timestamp type of every record.
  exact offsets (es's mirror): the record at offset N in the target is the record at offset N in the
  source, and no offset exists on one side only.
  content order (MirrorMaker 2, which gives records new offsets): the n-th record of a target
  partition is the n-th of the source partition; offsets are reported, not required equal.
  A compacted topic is compared as compaction defines it: the latest record of every key must be
  the same on both sides (a tombstone and an absent key count as the same), with the same offset in
  exact mode; what each side's cleaner has removed so far may differ.
group_positions(): per group partition, the committed offset on the source and on the target, and
  where the target offset lands by content: the records a consumer switching at that offset would
  read twice (re-read) or never (skipped), matching records by key, value, headers and timestamp.
exactly_once(): from the consumers' logs on both sides, per group: records expected (every record
  of the group's topics on the source), consumed once, duplicates, lost.
"""
import collections
import struct
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, KafkaError,
                             KafkaException, TopicPartition)
from confluent_kafka.admin import AdminClient

from common import TrialError
from workload import COMPACTED, GROUP_TOPICS, TOPICS, digest

READ_TIMEOUT_S = 120
SHOW_FIRST = 5

_consumers = {}


def _consumer(bootstrap):
    c = _consumers.get(bootstrap)
    if c is None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mig-checker", "enable.auto.commit": False,
                      "isolation.level": "read_committed", "enable.partition.eof": True,
                      "auto.offset.reset": "earliest", "fetch.max.bytes": 8 << 20})
        _consumers[bootstrap] = c
    return c


def close_all():
    for c in _consumers.values():
        c.close()
    _consumers.clear()


def watermarks(bootstrap, topic, partition):
    return _consumer(bootstrap).get_watermark_offsets(TopicPartition(topic, partition), timeout=15)


def read_partition(bootstrap, topic, partition, with_bounds=False, start=OFFSET_BEGINNING):
    """Every record of a partition, read_committed, up to its end at the time of the call, as
    dicts (o offset, k key, v value, h headers, ts timestamp, tt timestamp type, d digest)."""
    c = _consumer(bootstrap)
    low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
    recs = []
    if high > low:
        c.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        done = False
        while not done:
            if time.monotonic() > deadline:
                raise TrialError(f"reading {topic}[{partition}] at {bootstrap}: not at its end offset "
                                 f"{high} after {READ_TIMEOUT_S}s ({len(recs)} records read)")
            for m in c.consume(1000, 1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= high:
                            done = True
                        continue
                    raise KafkaException(m.error())
                if m.offset() >= high:  # written after the end was taken: not this read's
                    done = True
                    break
                tt, ts = m.timestamp()
                h = m.headers() or []
                recs.append({"o": m.offset(), "k": m.key(), "v": m.value(), "h": h, "ts": ts, "tt": tt,
                             "d": digest(m.key(), m.value(), h, ts)})
                if m.offset() + 1 >= high:
                    done = True
        c.unassign()
    return (recs, low, high) if with_bounds else recs


def read_topics(bootstrap, names=None, rename=lambda t: t):
    """{topic: {partition: [records]}} for the trial's topics (names), read at rename(topic)."""
    out = {}
    for t in names or TOPICS:
        out[t] = {p: read_partition(bootstrap, rename(t), p) for p in range(TOPICS[t]["partitions"])}
    return out


def _show(r):
    def b(x):
        if x is None:
            return None
        s = x.decode(errors="replace")
        return s if len(s) <= 40 else s[:37] + "..."
    if r is None:
        return "(none)"
    return (f"o={r['o']} k={b(r['k'])} v={b(r['v'])} ts={r['ts']} tt={r['tt']} "
            f"h={[(k, b(v)) for k, v in r['h']]}")


def _same(a, b):
    return (a["k"], a["v"], list(a["h"]), a["ts"], a["tt"]) == (b["k"], b["v"], list(b["h"]), b["ts"], b["tt"])


class Comparison:
    def __init__(self):
        self.compared = 0
        self.mismatches = 0
        self.first = []
        self.offset_shifted = 0
        self.rows = []  # per partition: topic, partition, source records, target records, note

    def bad(self, where, what, a, b):
        self.mismatches += 1
        if len(self.first) < SHOW_FIRST:
            self.first.append(f"{where}: {what}\n      source: {_show(a)}\n      target: {_show(b)}")


def compare(src, tgt, exact_offsets, cmp=None, label=lambda t: t):
    """src, tgt: read_topics() results. Returns a Comparison."""
    cmp = cmp or Comparison()
    for t in src:
        for p in src[t]:
            a, b = src[t][p], tgt[t][p]
            where = f"{label(t)}[{p}]"
            if t in COMPACTED:
                la = {r["k"]: r for r in a}
                lb = {r["k"]: r for r in b}
                keys = {k for k, r in la.items() if r["v"] is not None} | {k for k, r in lb.items() if r["v"] is not None}
                for k in sorted(keys, key=lambda x: x or b""):
                    ra, rb = la.get(k), lb.get(k)
                    cmp.compared += 1
                    if ra is None or rb is None or not _same(ra, rb):
                        cmp.bad(where, f"latest record of key {k!r} differs", ra, rb)
                    elif exact_offsets and ra["o"] != rb["o"]:
                        cmp.bad(where, f"latest record of key {k!r} at another offset", ra, rb)
                cmp.rows.append((label(t), p, len(a), len(b), f"compacted: {len(keys)} live keys compared"))
                continue
            if exact_offsets:
                ia, ib = {r["o"]: r for r in a}, {r["o"]: r for r in b}
                for o in sorted(set(ia) | set(ib)):
                    ra, rb = ia.get(o), ib.get(o)
                    cmp.compared += 1
                    if ra is None:
                        cmp.bad(where, f"offset {o} only in the target", ra, rb)
                    elif rb is None:
                        cmp.bad(where, f"offset {o} missing in the target", ra, rb)
                    elif not _same(ra, rb):
                        cmp.bad(where, f"record at offset {o} differs", ra, rb)
            else:
                for i in range(max(len(a), len(b))):
                    ra = a[i] if i < len(a) else None
                    rb = b[i] if i < len(b) else None
                    cmp.compared += 1
                    if ra is None:
                        cmp.bad(where, f"record #{i} only in the target", ra, rb)
                    elif rb is None:
                        cmp.bad(where, f"record #{i} missing in the target", ra, rb)
                    elif not _same(ra, rb):
                        cmp.bad(where, f"record #{i} differs", ra, rb)
                    elif ra["o"] != rb["o"]:
                        cmp.offset_shifted += 1
            shift = ""
            if a and b:
                shift = f"last offset {a[-1]['o']} -> {b[-1]['o']}"
            cmp.rows.append((label(t), p, len(a), len(b), shift))
    return cmp


def committed_offsets(bootstrap, group, rename=lambda t: t):
    """{(topic, partition): committed offset} of a group (topics named as the trial names them)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(rename(t), p) for t in GROUP_TOPICS for p in range(TOPICS[t]["partitions"])]
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group]
    res = fut.result(timeout=30)
    back = {rename(t): t for t in GROUP_TOPICS}
    out = {}
    for tp in res.topic_partitions:
        if tp.error is not None:
            raise TrialError(f"OffsetFetch of {group} {tp.topic}[{tp.partition}] at {bootstrap}: {tp.error}")
        out[(back[tp.topic], tp.partition)] = tp.offset
    return out


def group_positions(src, tgt, src_committed, tgt_committed):
    """Per group partition: where the target committed offset lands by content. Returns rows
    (topic, partition, source committed, target committed, exact target offset, re-read, skipped)."""
    rows = []
    for (t, p), c in sorted(src_committed.items()):
        tc = tgt_committed.get((t, p), -1)
        a, b = src[t][p], tgt[t][p]
        where = {r["d"]: r["o"] for r in b}
        c_eff = c if c >= 0 else 0
        after = [r for r in a if r["o"] >= c_eff]
        exact = where.get(after[0]["d"]) if after else (b[-1]["o"] + 1 if b else 0)
        t_eff = tc if tc >= 0 else 0
        reread = sum(1 for r in a if r["o"] < c_eff and where.get(r["d"], -1) >= t_eff)
        skipped = sum(1 for r in a if r["o"] >= c_eff and where.get(r["d"], 1 << 62) < t_eff)
        rows.append((t, p, c, tc, exact, reread, skipped))
    return rows


def exactly_once(src, logs_by_group):
    """logs_by_group: {group: [log records of both sides]}. Per group: expected, consumed,
    duplicates, lost, and the first few of each."""
    expected = {r["d"] for t in GROUP_TOPICS for p in src[t] for r in src[t][p]}
    out = {}
    for g, entries in logs_by_group.items():
        seen = collections.Counter(e["d"] for e in entries)
        dups = {d: n for d, n in seen.items() if n > 1}
        lost = expected - set(seen)
        foreign = set(seen) - expected
        out[g] = {"expected": len(expected), "consumed": sum(seen.values()),
                  "duplicates": sum(n - 1 for n in dups.values()), "lost": len(lost),
                  "not_in_source": len(foreign)}
    return out


def decode_checkpoint(key, value):
    """MirrorMaker 2's checkpoint record: key (group, topic, partition), value (version,
    upstream offset, downstream offset, metadata). Strings are int16 length + UTF-8."""
    def string(buf, i):
        n = struct.unpack_from(">h", buf, i)[0]
        return buf[i + 2:i + 2 + n].decode(), i + 2 + n
    group, i = string(key, 0)
    topic, i = string(key, i)
    partition = struct.unpack_from(">i", key, i)[0]
    _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    return group, topic, partition, upstream, downstream


def read_checkpoints(bootstrap, topic):
    """The latest checkpoint per (group, topic, partition) in MM2's checkpoints topic."""
    latest = {}
    c = _consumer(bootstrap)
    md = c.list_topics(topic, timeout=15).topics.get(topic)
    if md is None or md.error is not None:
        return latest
    for p in md.partitions:
        for r in read_partition(bootstrap, topic, p):
            g, t, part, up, down = decode_checkpoint(r["k"], r["v"])
            latest[(g, t, part)] = (up, down)
    return latest
