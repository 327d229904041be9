#!/usr/bin/env python3
"""compat-tests/kcat: kcat (librdkafka 2.0.2, Debian 12) scenarios against a running broker.

Scenarios from COMPAT.md section 7: metadata (-L), keyed and headered produce with every
codec (none, gzip, snappy, lz4, zstd) read back with -J and checked field by field, consume
to end from several start offsets, a balanced consumer group (-G) that commits and resumes,
and offsets for times (-Q). Started by compat-tests/run; see compat-tests/lib/compat.py.
With compat-tests/run --security MODE every kcat call also gets that mode's librdkafka settings
as -X KEY=VALUE (security.protocol, sasl.mechanisms, sasl.username and sasl.password of the test
user, ssl.ca.location, ssl.certificate.location, ssl.key.location; compat.py ClientSecurity).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compat import Fail, Suite, check, sh  # noqa: E402

suite = Suite("kcat", "kcat 1.7.1 / librdkafka 2.0.2 (Debian 12)")
B = suite.bootstrap
N = 2000 if suite.quick else 20000
# --security: the mode's client settings, on every call (none without --security).
SECURITY = [a for k, v in suite.security.librdkafka().items() for a in ("-X", f"{k}={v}")]
if suite.security.on:
    suite.version += f", {suite.security.describe()}"


def kcat(*args, input=None, ok=True, timeout=120):
    return sh(["kcat", "-b", B, *SECURITY, *args], input=input, ok=ok, timeout=timeout)


def produce(topic, lines, *extra):
    kcat("-P", "-t", topic, "-X", "acks=all", *extra, input="".join(line + "\n" for line in lines))


def consume_json(topic, *extra):
    out = kcat("-C", "-t", topic, "-e", "-q", "-J", *extra).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def now_ms():
    return int(time.time() * 1000)


@suite.test
def metadata():
    topic = suite.topic("meta")
    produce(topic, ["x"])
    md = json.loads(kcat("-L", "-J").stdout)
    brokers = md.get("brokers", [])
    check(len(brokers) == suite.nodes, f"{len(brokers)} brokers in metadata, the cluster has {suite.nodes}: {brokers}")
    # Every node we dialled advertises the address we dialled it at (one node, or each of a cluster's).
    advertised = sorted(b["name"] for b in brokers)
    dialled = sorted(B.split(","))
    check(all(any(n == d or n.endswith(":" + d.split(":")[1]) for n in advertised) for d in dialled),
          f"brokers advertise {advertised}, we dialled {dialled}")
    ids = {b["id"] for b in brokers}
    names = {t["topic"]: t for t in md.get("topics", [])}
    check(topic in names, f"produced topic {topic} missing from metadata ({len(names)} topics)")
    t = names[topic]
    check(not t.get("error"), f"topic error {t.get('error')}")
    check(len(t["partitions"]) >= 1, "topic has no partitions")
    for p in t["partitions"]:
        check(p["leader"] in ids, f"partition {p['partition']} leader {p['leader']} is not a listed broker {sorted(ids)}")
    one = json.loads(kcat("-L", "-J", "-t", topic).stdout)
    check([x["topic"] for x in one["topics"]] == [topic], f"-t {topic} returned {[x['topic'] for x in one['topics']]}")


def keyed_headered(codec):
    topic = suite.topic(f"codec-{codec}")
    lines = [f"key-{i % 97}:value-{i}-" + "abcdefgh" * (i % 7) for i in range(N)]
    extra = ["-K:", "-H", "h1=v1", "-H", "empty=", "-H", "h1=again"]
    if codec != "none":
        extra += ["-z", codec]
    produce(topic, lines, *extra)
    msgs = consume_json(topic, "-o", "beginning")
    check(len(msgs) == N, f"consumed {len(msgs)} of {N}")
    for i, m in enumerate(msgs):
        k, v = lines[i].split(":", 1)
        check(m["offset"] == i, f"record {i} has offset {m['offset']}")
        check(m["key"] == k and m["payload"] == v, f"record {i}: got {m['key']!r}:{m['payload']!r}, want {k!r}:{v!r}")
        check(m.get("headers") == ["h1", "v1", "empty", "", "h1", "again"], f"record {i} headers {m.get('headers')}")
        check(m.get("tstype") == "create" and m.get("ts", 0) > 0, f"record {i} timestamp {m.get('tstype')} {m.get('ts')}")


for _codec in ("none", "gzip", "snappy", "lz4", "zstd"):
    def _t(c=_codec):
        keyed_headered(c)
    _t.__name__ = f"produce_keyed_headered_{_codec}"
    suite.test(_t)


@suite.test
def null_key_and_null_value():
    topic = suite.topic("nulls")
    # -Z: empty key or value is sent as NULL; an empty value with -Z off stays empty (not NULL).
    produce(topic, [":v1", "k2:", "k3:v3"], "-K:", "-Z")
    produce(topic, ["k4:"], "-K:")
    msgs = consume_json(topic, "-o", "beginning")
    got = [(m["key"], m["payload"]) for m in msgs]
    check(got == [(None, "v1"), ("k2", None), ("k3", "v3"), ("k4", "")], f"got {got}")


@suite.test
def consume_to_end_from_offsets():
    topic = suite.topic("offsets")
    produce(topic, [str(i) for i in range(100)])
    def vals(*o):
        return [m["payload"] for m in consume_json(topic, *o)]
    check(vals("-o", "beginning") == [str(i) for i in range(100)], "from beginning")
    check(vals("-o", "37") == [str(i) for i in range(37, 100)], "from offset 37")
    check(vals("-o", "-5") == [str(i) for i in range(95, 100)], "last 5 (-o -5)")
    check(vals("-o", "end") == [], "from end")
    check(vals("-o", "beginning", "-c", "10") == [str(i) for i in range(10)], "-c 10")


@suite.test
def balanced_consumer_group():
    topic = suite.topic("group")
    group = suite.topic("g")
    produce(topic, [f"a{i}" for i in range(N)])
    def group_consume():
        # Not `-o beginning`: in -G mode kcat assigns that offset explicitly, overriding the
        # committed one. auto.offset.reset applies only when the group has no commit yet.
        out = kcat("-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q", "-J", topic,
                   timeout=60).stdout
        return [json.loads(line)["payload"] for line in out.splitlines() if line.strip()]
    first = group_consume()
    check(first == [f"a{i}" for i in range(N)], f"first member consumed {len(first)} of {N}")
    produce(topic, [f"b{i}" for i in range(10)])
    second = group_consume()
    check(second == [f"b{i}" for i in range(10)],
          f"after a restart the group resumed with {len(second)} records (want the 10 new ones): {second[:3]}")


@suite.test
def offsets_for_times():
    topic = suite.topic("times")
    t_before = now_ms() - 1
    produce(topic, [f"x{i}" for i in range(50)])
    time.sleep(0.02)  # the second batch must carry a later create time than t_mid
    t_mid = now_ms()
    time.sleep(0.02)
    produce(topic, [f"y{i}" for i in range(50)])
    t_after = now_ms() + 60_000

    def q(ts):
        out = kcat("-Q", "-t", f"{topic}:0:{ts}").stdout
        for line in out.splitlines():
            if "offset" in line:
                return int(line.rsplit("offset", 1)[1].split()[0])
        raise Fail(f"-Q {ts}: no offset in {out!r}")
    check(q(t_before) == 0, f"offset for a time before everything: {q(t_before)}")
    check(q(t_mid) == 50, f"offset for a time between the batches: {q(t_mid)} (want 50)")
    check(q(-2) == 0, f"earliest (-2): {q(-2)}")
    check(q(-1) == 100, f"latest (-1): {q(-1)}")
    got = q(t_after)
    check(got == -1, f"offset for a time after everything: {got} (want -1, none)")


if __name__ == "__main__":
    suite.main()
