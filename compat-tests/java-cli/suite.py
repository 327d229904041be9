#!/usr/bin/env python3
"""compat-tests/java-cli: Apache Kafka's own CLI tools (kafka-tools 4.4.0 from Maven Central,
run as classes from scripts/kafka-ref's jars) against a running broker.

TopicCommand (create, create again, list, describe, alter partitions, delete), ConsoleProducer
and ConsoleConsumer round trip, consumer groups with group.protocol classic and consumer
(KIP-848) described with lag by ConsumerGroupCommand, GetOffsetShell, DeleteRecordsCommand,
TransactionsCommand list and BrokerApiVersionsCommand (its output is kept in the suite's work
dir so the two brokers' advertised versions can be diffed). Started by compat-tests/run.
With compat-tests/run --security MODE every tool gets --command-config with the mode's client
settings, logged in as the test user (SASL with the suite's mechanism; the client's certificate
where the broker asks for one; compat.py ClientSecurity).
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compat import REPO, Fail, Suite, check, sh  # noqa: E402

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


if __name__ == "__main__":
    suite.main()
