#!/usr/bin/env python3
"""compat-tests/java-cli: Apache Kafka's own CLI tools (kafka-tools 4.4.0 from Maven Central,
run as classes from scripts/kafka-ref's jars) against a running broker.

TopicCommand (create, create again, list, describe, alter partitions, delete), ConsoleProducer
and ConsoleConsumer round trip, consumer groups with group.protocol classic and consumer
(KIP-848) described with lag by ConsumerGroupCommand, GetOffsetShell, DeleteRecordsCommand,
TransactionsCommand list and BrokerApiVersionsCommand (its output is kept in the suite's work
dir so the two brokers' advertised versions can be diffed). Share groups (KIP-932):
ConfigCommand --entity-type groups with the share.* group configs, ConsoleShareConsumer round
trip, ShareGroupCommand (list, states, describe offsets / members / state, reset offsets,
delete offsets, delete, the refusals while a member runs) and VerifiableShareConsumer with
implicit and explicit acknowledgement. Started by compat-tests/run.
With compat-tests/run --security MODE every tool gets --command-config with the mode's client
settings, logged in as the test user (SASL with the suite's mechanism; the client's certificate
where the broker asks for one; compat.py ClientSecurity).
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compat import REPO, Fail, Suite, check, sh, tail  # noqa: E402

suite = Suite("java-cli", "Apache Kafka 4.4.0 CLI tools (kafka-tools)")
B = suite.bootstrap
N = 500 if suite.quick else 5000
KAFKA_REF = os.path.join(REPO, "scripts", "kafka-ref")
T = "org.apache.kafka.tools."


SEC = suite.security
# --security: the test user's client configuration, given to every tool (none without it).
LOGIN = ["--command-config", SEC.write_java(os.path.join(suite.work, "client.properties"))] if SEC.on else []
if SEC.on:
    suite.version += f", {SEC.describe()}"


def tool(cls, *args, input=None, ok=True, timeout=120):
    return sh([KAFKA_REF, "run", T + cls, *LOGIN, *args], input=input, ok=ok, timeout=timeout)


def topics(*args, ok=True):
    return tool("TopicCommand", "--bootstrap-server", B, *args, ok=ok)


def create_topic(topic, partitions=3, *extra):
    out = topics("--create", "--topic", topic, "--partitions", str(partitions),
                 "--replication-factor", "1", *extra).stdout
    check(f"Created topic {topic}." in out, f"create printed {out!r}")


def produce_keyed(topic, lines):
    tool("ConsoleProducer", "--bootstrap-server", B, "--topic", topic,
         "--property", "parse.key=true", "--property", "key.separator=:",
         "--command-property", "acks=all", input="".join(x + "\n" for x in lines))


def consume(topic, count, *extra):
    out = tool("consumer.ConsoleConsumer", "--bootstrap-server", B, "--topic", topic,
               "--from-beginning", "--max-messages", str(count), "--timeout-ms", "60000",
               "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:",
               *extra, timeout=150).stdout
    return [line for line in out.splitlines() if line]


def offsets(topic, *extra):
    out = tool("GetOffsetShell", "--bootstrap-server", B, "--topic", topic, *extra).stdout
    res = {}
    for line in out.splitlines():
        m = re.fullmatch(r"(.+):(\d+):(-?\d+)", line.strip())
        if m and m.group(1) == topic:
            res[int(m.group(2))] = int(m.group(3))
    return res


def describe_group(group):
    """ConsumerGroupCommand --describe rows as dicts (CURRENT-OFFSET, LOG-END-OFFSET, LAG ...)."""
    out = tool("consumer.group.ConsumerGroupCommand", "--bootstrap-server", B,
               "--describe", "--group", group).stdout
    rows, header = [], None
    for line in out.splitlines():
        cols = line.split()
        if cols[:2] == ["GROUP", "TOPIC"]:
            header = cols
        elif header and len(cols) == len(header) and cols[0] == group:
            rows.append(dict(zip(header, cols)))
    check(rows, f"describe --group {group} printed no rows: {out!r}")
    return rows


def lines(n, prefix="v"):
    return [f"k{i % 13}:{prefix}{i}" for i in range(n)]


@suite.test
def topic_create_list_describe():
    topic = suite.topic("t")
    create_topic(topic, 3)
    check(topic in topics("--list").stdout.split(), "created topic missing from --list")
    out = topics("--describe", "--topic", topic).stdout
    check("PartitionCount: 3" in out, f"describe: {out!r}")
    parts = re.findall(r"Partition: (\d+)\s+Leader: (-?\d+)", out)
    check(sorted(int(p) for p, _ in parts) == [0, 1, 2], f"describe partitions {parts}")
    check(all(int(l) >= 0 for _, l in parts), f"a partition has no leader: {parts}")


@suite.test
def topic_create_existing_is_refused():
    topic = suite.topic("dup")
    create_topic(topic, 1)
    p = topics("--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1", ok=False)
    check(p.returncode != 0 and "already exists" in (p.stdout + p.stderr),
          f"second create: exit {p.returncode}, {(p.stdout + p.stderr)[-300:]!r}")
    p = topics("--create", "--if-not-exists", "--topic", topic, "--partitions", "1", "--replication-factor", "1")


@suite.test
def topic_config_and_alter_partitions():
    topic = suite.topic("cfg")
    create_topic(topic, 1, "--config", "cleanup.policy=compact", "--config", "retention.ms=3600000")
    out = topics("--describe", "--topic", topic).stdout
    check("cleanup.policy=compact" in out, f"describe does not show the topic config: {out!r}")
    topics("--alter", "--topic", topic, "--partitions", "4")
    out = topics("--describe", "--topic", topic).stdout
    check("PartitionCount: 4" in out, f"after --alter --partitions 4: {out!r}")


@suite.test
def topic_delete():
    topic = suite.topic("del")
    create_topic(topic, 1)
    topics("--delete", "--topic", topic)
    for _ in range(40):  # deletion is asynchronous in Kafka; bounded wait
        if topic not in topics("--list").stdout.split():
            return
        time.sleep(0.25)
    raise Fail("topic still listed 10s after --delete")


@suite.test
def console_producer_consumer_round_trip():
    topic = suite.topic("console")
    create_topic(topic, 3)
    sent = lines(N)
    produce_keyed(topic, sent)
    got = consume(topic, N)
    check(sorted(got) == sorted(sent), f"consumed {len(got)} of {N}; first missing "
          f"{next(iter(sorted(set(sent) - set(got))), None)}")
    for k in {x.split(':')[0] for x in sent}:  # per key (one partition each) order is kept
        want = [x for x in sent if x.startswith(k + ":")]
        have = [x for x in got if x.startswith(k + ":")]
        check(have == want, f"order of key {k} differs")


def group_round(protocol):
    topic = suite.topic(f"grp-{protocol}")
    group = suite.topic(f"g-{protocol}")
    create_topic(topic, 3)
    produce_keyed(topic, lines(N))
    got = consume(topic, N, "--group", group, "--command-property", f"group.protocol={protocol}")
    check(len(got) == N, f"group consumer read {len(got)} of {N}")
    rows = describe_group(group)
    check(sum(int(r["CURRENT-OFFSET"]) for r in rows) == N and all(r["LAG"] == "0" for r in rows),
          f"after consuming everything: {rows}")
    produce_keyed(topic, lines(7, "late"))
    rows = describe_group(group)
    check(sum(int(r["LAG"]) for r in rows) == 7, f"lag after 7 more records: {rows}")
    more = consume(topic, 7, "--group", group, "--command-property", f"group.protocol={protocol}")
    check(sorted(more) == sorted(lines(7, "late")), f"resumed group read {more}")


@suite.test
def consumer_group_classic_describe_lag():
    group_round("classic")


@suite.test
def consumer_group_consumer_protocol_describe_lag():
    group_round("consumer")


@suite.test
def get_offsets():
    topic = suite.topic("offs")
    create_topic(topic, 2)
    produce_keyed(topic, lines(100))
    latest = offsets(topic)
    check(sorted(latest) == [0, 1] and sum(latest.values()) == 100, f"latest offsets {latest}")
    check(offsets(topic, "--time", "-1") == latest, "--time -1 differs from the default")
    check(offsets(topic, "--time", "-2") == {0: 0, 1: 0}, f"earliest {offsets(topic, '--time', '-2')}")


@suite.test
def delete_records():
    topic = suite.topic("delrec")
    create_topic(topic, 1)
    produce_keyed(topic, lines(50))
    spec = os.path.join(suite.work, "delete-records.json")
    with open(spec, "w") as f:
        json.dump({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 20}]}, f)
    out = tool("DeleteRecordsCommand", "--bootstrap-server", B, "--offset-json-file", spec).stdout
    check("low_watermark: 20" in out, f"DeleteRecordsCommand printed {out!r}")
    check(offsets(topic, "--time", "-2") == {0: 20}, f"earliest after delete {offsets(topic, '--time', '-2')}")
    got = consume(topic, 30)
    check(got == lines(50)[20:], f"consumed after delete-records: {got[:3]}...")


@suite.test
def transactions_list():
    tool("TransactionsCommand", "--bootstrap-server", B, "list")


ESSENTIAL_APIS = ["Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
                  "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup",
                  "DescribeGroups", "ListGroups", "ApiVersions", "CreateTopics", "DeleteTopics",
                  "DeleteRecords", "InitProducerId", "DescribeConfigs", "CreatePartitions"]


@suite.test
def broker_api_versions():
    out = tool("BrokerApiVersionsCommand", "--bootstrap-server", B).stdout
    with open(os.path.join(suite.work, f"api-versions-{suite.against}.txt"), "w") as f:
        f.write(out)
    apis = dict(re.findall(r"^\s+(\w+)\(\d+\): (.*?),?$", out, re.M))
    missing = [a for a in ESSENTIAL_APIS if a not in apis or apis[a].startswith("UNSUPPORTED")]
    check(not missing, f"not advertised: {missing}")


# ---- Share groups (KIP-932): kafka-share-groups.sh, kafka-console-share-consumer.sh,
# kafka-configs.sh --entity-type groups, VerifiableShareConsumer (docs/share-groups-design.md
# §2.8, §4.3). The tools print tables and exit 0 after most refusals, so the checks read what
# they print. One share group is set up once by the first test that needs it (share_setup) and
# then taken through describe, reset, delete-offsets and delete, in the order the tests are
# registered (each also runs alone with --only: it sets the group up itself).

SHARE_N = 40            # records in the shared topic (2 partitions, keyed)
SHARE_WAIT_S = 60       # bound on every wait for a group condition
SHARE_POLL_S = 1.0      # between two looks while waiting (each look is a JVM start)
CONSUME_TIMEOUT_MS = 60000
SHARE_DEFAULTS = {"share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
                  "share.record.lock.duration.ms": "30000", "share.delivery.count.limit": "5",
                  "share.partition.max.record.locks": "2000", "share.auto.offset.reset": "latest",
                  "share.isolation.level": "read_uncommitted",
                  "share.renew.acknowledge.enable": "true", "share.assignment.interval.ms": "1000"}


def share_groups(*args, ok=True):
    return tool("consumer.group.ShareGroupCommand", "--bootstrap-server", B, *args, ok=ok)


def group_configs(group, *args, ok=True):
    return tool("ConfigCommand", "--bootstrap-server", B, "--entity-type", "groups",
                "--entity-name", group, *args, ok=ok)


def described_configs(group, *extra):
    """ConfigCommand --describe: {name: (value, synonyms text)}."""
    out = group_configs(group, "--describe", *extra).stdout
    return {m.group(1): (m.group(2), m.group(3)) for m in
            re.finditer(r"^\s+([\w.]+)=(\S*) sensitive=\w+ synonyms=\{(.*)\}$", out, re.M)}


def set_group_config(group, *pairs):
    out = group_configs(group, "--alter", "--add-config", ",".join(pairs)).stdout
    check(f"Completed updating config for group {group}." in out, f"--alter printed {out!r}")


def table(out, first="GROUP"):
    """Rows of the table whose header line starts with `first`, as dicts; the tools pad with
    spaces, so columns are split on whitespace (a missing last column, ASSIGNMENT of a member
    without partitions, reads as "")."""
    rows, header = [], None
    for line in out.splitlines():
        cols = line.split()
        if cols[:1] == [first]:
            header = cols
        elif header and cols:
            rows.append(dict(zip(header, cols + [""] * (len(header) - len(cols)))))
    return rows


def share_offsets(group):
    """ShareGroupCommand --describe (the offsets view): its output and {(topic, partition):
    (START-OFFSET, LAG)} as printed ("-" for an unknown value stays a string)."""
    out = share_groups("--describe", "--group", group).stdout
    return out, {(r["TOPIC"], int(r["PARTITION"])): (r["START-OFFSET"], r["LAG"])
                 for r in table(out) if r.get("GROUP") == group}


def wait_for(what, probe):
    """Calls probe() until it returns (True, x); fails after SHARE_WAIT_S with the last x."""
    deadline, last = time.monotonic() + SHARE_WAIT_S, None
    while True:
        done, last = probe()
        if done:
            return last
        if time.monotonic() > deadline:
            raise Fail(f"{what}: not within {SHARE_WAIT_S}s; last seen {last!r}")
        time.sleep(SHARE_POLL_S)


def share_consume(topic, group, count, *extra):
    """ConsoleShareConsumer until `count` records (or CONSUME_TIMEOUT_MS without one); its lines,
    without the closing "Processed a total of" line."""
    p = tool("consumer.ConsoleShareConsumer", "--bootstrap-server", B, "--topic", topic,
             "--group", group, "--max-messages", str(count), "--timeout-ms", str(CONSUME_TIMEOUT_MS),
             *extra, timeout=150)
    return [x for x in p.stdout.splitlines() if x and not x.startswith("Processed a total of")]


def partition_offsets(lines_):
    """(partition, offset) of ConsoleShareConsumer lines printed with print.partition/offset."""
    res = []
    for x in lines_:
        m = re.match(r"Partition:(\d+)\s+Offset:(\d+)\s", x)
        check(m, f"unexpected consumer line {x!r}")
        res.append((int(m.group(1)), int(m.group(2))))
    return res


_share = {}


def share_setup():
    """The shared share group: topic of 2 partitions, SHARE_N keyed records, group config
    share.auto.offset.reset=earliest (Kafka 4.4: a group config, not a client property), every
    record consumed once by ConsoleShareConsumer. Done once; later calls return the same."""
    if "error" in _share:
        raise Fail(f"share group set-up failed earlier: {_share['error']}")
    if "topic" in _share:
        return _share
    try:
        topic, group = suite.topic("share"), suite.topic("sg")
        create_topic(topic, 2)
        sent = lines(SHARE_N)
        produce_keyed(topic, sent)
        ends = offsets(topic)
        check(sorted(ends) == [0, 1] and all(e >= 3 for e in ends.values()),
              f"end offsets {ends}: want both partitions with at least 3 records")
        set_group_config(group, "share.auto.offset.reset=earliest")
        got = share_consume(topic, group, SHARE_N, "--formatter-property", "print.key=true",
                            "--formatter-property", "key.separator=:")
        _share.update(topic=topic, group=group, sent=sent, got=got, ends=ends)
        return _share
    except Fail as e:
        _share["error"] = str(e)
        raise


SHARE_CONFIGS = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000",
                 "share.delivery.count.limit": "3", "share.isolation.level": "read_committed"}


@suite.test
def share_group_config_alter_describe_all_refusals():
    """kafka-configs.sh --entity-type groups on a group that has no members (yet): --alter
    --add-config, --describe --all shows the values over the defaults, --delete-config restores
    the default, invalid values and unknown names are refused and change nothing."""
    group = suite.topic("sgcfg")
    set_group_config(group, *(f"{k}={v}" for k, v in SHARE_CONFIGS.items()))

    def every():
        return {k: v for k, (v, _) in described_configs(group, "--all").items()}

    want = {**SHARE_DEFAULTS, **SHARE_CONFIGS}
    have = every()
    wrong = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
    check(not wrong, f"--describe --all after --alter: (shown, expected) {wrong}")
    group_configs(group, "--alter", "--delete-config", "share.delivery.count.limit")
    want["share.delivery.count.limit"] = SHARE_DEFAULTS["share.delivery.count.limit"]
    have = every()
    wrong = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
    check(not wrong, f"--describe --all after --delete-config: (shown, expected) {wrong}")
    for bad, why in [("share.delivery.count.limit=1", "at least 2"),
                     ("share.auto.offset.reset=sometimes", "share.auto.offset.reset"),
                     ("no.such.config=1", "no.such.config")]:
        p = group_configs(group, "--alter", "--add-config", bad, ok=False)
        text = p.stdout + p.stderr
        check(p.returncode != 0 and "InvalidConfigurationException" in text and why in text,
              f"--add-config {bad}: exit {p.returncode}, {tail(text, 300)!r}")
    have = every()
    wrong = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
    check(not wrong, f"a refused --alter changed the configs: (shown, expected) {wrong}")


@suite.test
def share_group_config_describe_dynamic():
    """--describe (dynamic configs only) of a group that has configs but no members: Kafka's
    ConfigCommand first looks for the group in ListGroups and in ListConfigResources(GROUP) and
    prints "doesn't exist" if neither has it; the group is also listed by --describe without
    --entity-name."""
    group = suite.topic("sgcfg-dyn")
    set_group_config(group, *(f"{k}={v}" for k, v in SHARE_CONFIGS.items()))
    out = group_configs(group, "--describe").stdout
    check("doesn't exist" not in out, f"--describe: {out!r}")
    have = described_configs(group)
    check({k: v for k, (v, _) in have.items()} == SHARE_CONFIGS, f"--describe after --alter: {have}")
    for k, v in SHARE_CONFIGS.items():
        check(f"DYNAMIC_GROUP_CONFIG:{k}={v}" in have[k][1], f"{k} synonyms: {have[k][1]!r}")
    out = tool("ConfigCommand", "--bootstrap-server", B, "--entity-type", "groups", "--describe").stdout
    check(f"Dynamic configs for group {group} are:" in out,
          f"--describe of every group does not list it: {tail(out, 300)!r}")


@suite.test
def console_share_consumer_round_trip():
    s = share_setup()
    have = {k: v for k, (v, _) in described_configs(s["group"]).items()}
    check(have == {"share.auto.offset.reset": "earliest"}, f"group configs: {have}")
    got = s["got"]
    check(sorted(got) == sorted(s["sent"]), f"consumed {len(got)} of {SHARE_N}; missing "
          f"{sorted(set(s['sent']) - set(got))[:3]}, unexpected {sorted(set(got) - set(s['sent']))[:3]}")


@suite.test
def share_groups_describe_offsets_after_consuming():
    s = share_setup()
    keys = {(s["topic"], p) for p in s["ends"]}

    def probe():
        _, rows = share_offsets(s["group"])
        done = set(rows) == keys and all(rows[k][1] == "0" for k in keys)
        return done, rows

    rows = wait_for("every partition listed with LAG 0", probe)
    for (_, p), (start, _) in rows.items():  # Kafka 4.4 may keep the start where delivery began
        check(start.isdigit() and 0 <= int(start) <= s["ends"][p],
              f"partition {p}: START-OFFSET {start}, end offset {s['ends'][p]}")


@suite.test
def share_groups_list_and_state_empty():
    s = share_setup()
    g = s["group"]
    check(g in share_groups("--list").stdout.split(), "group missing from --list")
    states = {r["GROUP"]: r["STATE"] for r in table(share_groups("--list", "--state").stdout)}
    check(states.get(g) == "Empty", f"--list --state: {states.get(g)!r} for the group")
    check(g in {r["GROUP"] for r in table(share_groups("--list", "--state", "Empty").stdout)},
          "group missing from --list --state Empty")
    check(g not in {r["GROUP"] for r in table(share_groups("--list", "--state", "Stable").stdout)},
          "an empty group listed by --list --state Stable")
    out = share_groups("--describe", "--group", g, "--state").stdout
    rows = [r for r in table(out) if r.get("GROUP") == g]
    check(len(rows) == 1 and rows[0]["STATE"] == "Empty" and rows[0]["#MEMBERS"] == "0",
          f"--describe --state: {out!r}")
    p = share_groups("--describe", "--group", g, "--members")  # the tool says this on stderr
    check(f"Share group '{g}' has no active members." in p.stdout + p.stderr,
          f"--describe --members: {tail(p.stdout + p.stderr, 300)!r}")


@suite.test
def share_groups_live_member():
    """A running ConsoleShareConsumer: the group is Stable with one member holding the partition;
    reset, delete-offsets and delete are refused; after SIGTERM the member leaves (Empty)."""
    topic, group = suite.topic("share-live"), suite.topic("sg-live")
    create_topic(topic, 1)
    log = open(os.path.join(suite.work, "share-live-consumer.log"), "w")
    proc = subprocess.Popen([KAFKA_REF, "run", T + "consumer.ConsoleShareConsumer", *LOGIN,
                             "--bootstrap-server", B, "--topic", topic, "--group", group],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def member():
            out = share_groups("--describe", "--group", group, "--members").stdout
            rows = [r for r in table(out) if r.get("GROUP") == group]
            return (len(rows) == 1 and rows[0]["#PARTITIONS"] == "1"
                    and rows[0]["ASSIGNMENT"] == f"{topic}:0", out)

        wait_for("one member with the partition in --describe --members", member)
        out = share_groups("--describe", "--group", group, "--state").stdout
        rows = [r for r in table(out) if r.get("GROUP") == group]
        check(len(rows) == 1 and rows[0]["STATE"] == "Stable" and rows[0]["#MEMBERS"] == "1",
              f"--describe --state: {out!r}")
        check(group in {r["GROUP"] for r in table(share_groups("--list", "--state", "Stable").stdout)},
              "group missing from --list --state Stable")
        p = share_groups("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                         "--execute", ok=False)
        check(p.returncode != 0 and "is not empty" in p.stdout + p.stderr,
              f"reset with a member: exit {p.returncode}, {tail(p.stdout + p.stderr, 300)!r}")
        out = share_groups("--delete", "--group", group).stdout
        check("GroupNotEmptyException" in out, f"--delete with a member: {out!r}")
        out = share_groups("--delete-offsets", "--group", group, "--topic", topic).stdout
        rows = table(out, "TOPIC")
        check(rows and rows[0]["STATUS"] == "Error:", f"--delete-offsets with a member: {out!r}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the JVM's shutdown hook closes the consumer
        try:
            proc.wait(timeout=SHARE_WAIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()

    def empty():
        out = share_groups("--describe", "--group", group, "--state").stdout
        rows = [r for r in table(out) if r.get("GROUP") == group]
        return len(rows) == 1 and rows[0]["STATE"] == "Empty" and rows[0]["#MEMBERS"] == "0", out

    wait_for("Empty with 0 members after the consumer stopped", empty)


def reset(group, *args):
    """ShareGroupCommand --reset-offsets: {partition: NEW-OFFSET} it printed."""
    out = share_groups("--reset-offsets", "--group", group, *args).stdout
    return {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(out) if r.get("GROUP") == group}


@suite.test
def share_groups_reset_offsets():
    s = share_setup()
    t, g, ends = s["topic"], s["group"], s["ends"]
    everything = {(t, p) for p in ends}

    def starts():
        _, rows = share_offsets(g)
        check(set(rows) == everything, f"describe rows {sorted(rows)}, want {sorted(everything)}")
        return rows

    before = starts()
    printed = reset(g, "--topic", t, "--to-earliest", "--dry-run")
    check(printed == {p: 0 for p in ends}, f"--dry-run --to-earliest printed {printed}")
    check(starts() == before, f"--dry-run changed the offsets: {before} -> {starts()}")

    for args, want in [(["--to-earliest"], {p: 0 for p in ends}),
                       (["--to-latest"], dict(ends)),
                       (["--to-offset", "3"], {p: 3 for p in ends}),
                       (["--to-datetime", "2020-01-01T00:00:00.000"], {p: 0 for p in ends})]:
        printed = reset(g, "--topic", t, *args, "--execute")
        check(printed == want, f"{' '.join(args)} printed {printed}, want {want}")
        rows = starts()
        shown = {p: rows[(t, p)] for p in ends}
        expect = {p: (str(want[p]), str(ends[p] - want[p])) for p in ends}
        check(shown == expect, f"after {' '.join(args)}: (START-OFFSET, LAG) {shown}, want {expect}")

    printed = reset(g, "--topic", f"{t}:1", "--to-offset", "2", "--execute")
    check(printed == {1: 2}, f"--topic {t}:1 --to-offset 2 printed {printed}")
    rows = starts()
    check(rows[(t, 0)][0] == "0" and rows[(t, 1)][0] == "2", f"after the one-partition reset: {rows}")

    # The next member starts at the reset offsets: exactly the records from 3 on.
    reset(g, "--all-topics", "--to-offset", "3", "--execute")
    want = sorted((p, o) for p, e in ends.items() for o in range(3, e))
    got = share_consume(t, g, len(want), "--formatter-property", "print.partition=true",
                        "--formatter-property", "print.offset=true")
    check(sorted(partition_offsets(got)) == want,
          f"after --to-offset 3 consumed {sorted(partition_offsets(got))}, want {want}")


@suite.test
def share_groups_delete_offsets():
    s = share_setup()
    t, g = s["topic"], s["group"]
    out = share_groups("--delete-offsets", "--group", g, "--topic", t).stdout
    status = {r["TOPIC"]: r["STATUS"] for r in table(out, "TOPIC")}
    check(status == {t: "Successful"}, f"--delete-offsets printed {out!r}")
    out, rows = share_offsets(g)
    check(not [k for k in rows if k[0] == t], f"--describe after --delete-offsets still shows the topic: {out!r}")
    out = share_groups("--delete-offsets", "--group", g, "--topic", t).stdout
    check("no offset information to delete" in out, f"second --delete-offsets printed {out!r}")
    out = share_groups("--delete-offsets", "--group", suite.topic("sg-none"), "--topic", t).stdout
    check("not found" in out, f"--delete-offsets of an unknown group printed {out!r}")


@suite.test
def share_groups_delete():
    s = share_setup()
    g = s["group"]
    out = share_groups("--delete", "--group", g).stdout
    check(f"Deletion of requested share groups ('{g}') was successful." in out, f"--delete printed {out!r}")
    check(g not in share_groups("--list").stdout.split(), "deleted group still in --list")
    p = share_groups("--describe", "--group", g, ok=False)
    check("GroupIdNotFoundException" in p.stdout + p.stderr,
          f"--describe of the deleted group: {tail(p.stdout + p.stderr, 300)!r}")
    out = share_groups("--delete", "--group", g).stdout
    check("could not be deleted" in out and "GroupIdNotFoundException" in out,
          f"second --delete printed {out!r}")


def verifiable_share_consumer(label, *extra):
    """VerifiableShareConsumer over 30 keyed records on 2 partitions: every record received once
    and acknowledged successfully, per its JSON events; then the group shows lag 0. Returns the
    offsets_acknowledged events."""
    topic, group = suite.topic(f"vsc-{label}"), suite.topic(f"vsg-{label}")
    create_topic(topic, 2)
    produce_keyed(topic, lines(30))
    ends = offsets(topic)
    p = tool("VerifiableShareConsumer", "--bootstrap-server", B, "--topic", topic, "--group-id", group,
             "--max-messages", "30", "--offset-reset-strategy", "earliest", *extra, timeout=150)
    with open(os.path.join(suite.work, f"verifiable-share-consumer-{label}.jsonl"), "w") as f:
        f.write(p.stdout)
    events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    names = [e["name"] for e in events]
    for n in ["startup_complete", "offset_reset_strategy_set", "shutdown_complete"]:
        check(n in names, f"no {n} event; events {names}")
    want = sorted((p_, o) for p_, e in ends.items() for o in range(e))
    consumed = sorted((q["partition"], o) for e in events if e["name"] == "records_consumed"
                      for q in e["partitions"] for o in q["offsets"])
    check(consumed == want, f"records_consumed {consumed}, want every offset once: {want}")
    acks = [e for e in events if e["name"] == "offsets_acknowledged"]
    check(all(e.get("success") for e in acks), f"an acknowledgement failed: {[e for e in acks if not e.get('success')]}")
    acked = sorted((q["partition"], o) for e in acks for q in e["partitions"] for o in q["offsets"])
    check(acked == want, f"offsets_acknowledged {acked}, want {want}")

    def lag0():
        _, rows = share_offsets(group)
        return set(rows) == {(topic, q) for q in ends} and all(v[1] == "0" for v in rows.values()), rows

    wait_for("lag 0 on every partition after the run", lag0)
    return acks


@suite.test
def verifiable_share_consumer_implicit():
    verifiable_share_consumer("implicit")


@suite.test
def verifiable_share_consumer_explicit_accept_reject():
    acks = verifiable_share_consumer("explicit", "--acknowledgement-mode", "sync", "--ack-pattern",
                                     "accept,reject")
    counts = {}
    for e in acks:
        for k, v in (e.get("ackTypeCounts") or {}).items():
            counts[k] = counts.get(k, 0) + v
    check(sum(counts.values()) == 30 and counts.get("ACCEPT", 0) > 0 and counts.get("REJECT", 0) > 0,
          f"ackTypeCounts summed {counts}")


if __name__ == "__main__":
    suite.main()
