#!/usr/bin/env python3
"""compat-tests/java: the Apache Kafka 4.4 Java clients and Kafka's own verification tools against
a running broker.

1. Our JUnit 5 scenarios (src/test/java, compiled by ./prepare): the producer with its idempotent
   default, every codec, headers and nulls, limits and transactions; the consumer in groups with
   group.protocol classic and consumer (KIP-848); the Admin client; and a Kafka Streams word count
   with processing.guarantee=exactly_once_v2 whose output is checked exactly. Run by JUnit's
   console launcher, one result per test from its XML report.
2. VerifiableProducer + VerifiableConsumer (kafka-tools), checked in Python with the rules of
   Kafka's system tests (tests/kafkatest/services/verifiable_consumer.py, consumer_test.py):
   every acknowledged value is consumed, nothing twice (idempotent producer, clean bounces), each
   consumed batch starts at the consumer's position (no gap, no rewind), only assigned partitions
   are consumed, a committed offset never exceeds the position, and the group's final commits
   equal the log end; for group.protocol classic and consumer, with a member bounced mid-way.
3. TransactionalMessageCopier: one copier per input partition with random aborts; a
   read_committed reader of the output must see exactly the input, no duplicates.
4. ClientCompatibilityTest with the feature flags Kafka's system test passes for brokers >= 0.11
   (tests/kafkatest/tests/client/client_compatibility_features_test.py): exits non-zero on any
   mismatch.
With compat-tests/run --security MODE (COMPAT_SECURITY_*): every client of 1.-2. and the tools that
take a configuration file (TopicCommand, GetOffsetShell, VerifiableConsumer, ConsoleConsumer:
--command-config; VerifiableProducer: --producer.config, with its own settings) log in
with the mode's settings as the test user (SASL with the suite's mechanism; the client's
certificate where the broker asks for one); JUnit also runs SaslTest (SASL modes: produce, consume
in a group, admin calls as the test user with each of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, and
a wrong password refused with SaslAuthenticationException) or TlsTest (ssl: a client without a
certificate, or not trusting the CA, refused with SslAuthenticationException). 3. and 4. take no
client configuration (TransactionalMessageCopier, ClientCompatibilityTest): n/a there.
5. (cluster runs only) verifiable-bounce: VerifiableProducer and a VerifiableConsumer group on a
   topic with replication factor 3 and min.insync.replicas 2 while the leader of one of its
   partitions is killed and restarted mid-run (compat-tests/run's COMPAT_CLUSTER_CTL): every
   acknowledged record consumed, none written twice, commits at the log end.
"""
import collections
import glob
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compat import REPO, Fail, NotApplicable, Suite, check, sh, tail  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PINS = dict(line.strip().split("=", 1) for line in open(os.path.join(HERE, "VERSION"))
            if "=" in line and not line.startswith("#"))
BUILD = os.path.join(REPO, "target", "compat", "java-suite")
KAFKA_REF = os.path.join(REPO, "scripts", "kafka-ref")
LOG4J = os.path.join(REPO, "scripts", "kafka", "log4j2.properties")
T = "org.apache.kafka.tools."
suite = Suite("java", f"Kafka {PINS['org.apache.kafka:kafka-clients']} clients, Streams and tools")
B = suite.bootstrap
N = 4000 if suite.quick else 20000
JUNIT_TIMEOUT_S = 1200
SEC = suite.security
# --security: the test user's client configuration (empty without it), for the tools and JUnit.
CLIENT_CONFIG = SEC.write_java(os.path.join(suite.work, "client.properties")) if SEC.on else None
if SEC.on:
    suite.version += f", {SEC.describe()}"
# Tools with a client configuration file, and the option that names it.
CONFIG_OPTION = {"TopicCommand": "--command-config", "GetOffsetShell": "--command-config",
                 "consumer.ConsoleConsumer": "--command-config", "VerifiableConsumer": "--command-config"}
NO_CLIENT_CONFIG = "takes no client configuration (no way to give it TLS or SASL settings)"


def tool(cls, *args, ok=True, timeout=180):
    return sh(tool_argv(cls, *args), ok=ok, timeout=timeout)


def tool_argv(cls, *args):
    login = [CONFIG_OPTION[cls], CLIENT_CONFIG] if CLIENT_CONFIG and cls in CONFIG_OPTION else []
    return [KAFKA_REF, "run", T + cls, *login, *args]


def producer_config(path, text):
    """A VerifiableProducer configuration: text, then the --security mode's settings."""
    with open(path, "w") as f:
        f.write(text)
        f.write("".join(f"{k}={v}\n" for k, v in SEC.java().items()))
    return path


def create_topic(topic, partitions):
    out = tool("TopicCommand", "--bootstrap-server", B, "--create", "--topic", topic,
               "--partitions", str(partitions), "--replication-factor", "1").stdout
    check(f"Created topic {topic}." in out, f"create printed {out!r}")


def events(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def produce(topic, n, *extra):
    """VerifiableProducer, idempotent (Kafka 4's default, and said explicitly), acks=all.
    Returns {(partition, offset): value} of the acknowledged records."""
    # as kafkatest sets them for an idempotent VerifiableProducer (the tool defaults to retries=0)
    cfg = producer_config(os.path.join(suite.work, "producer.properties"),
                          "enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\nlinger.ms=5\n")
    p = tool("VerifiableProducer", "--bootstrap-server", B, "--topic", topic, "--max-messages", str(n),
             "--acks", "-1", "--throughput", "-1", "--producer.config", cfg, *extra, timeout=300)
    acked, errors = {}, []
    for e in events(p.stdout):
        if e.get("name") == "producer_send_success":
            acked[(e["partition"], e["offset"])] = e["value"]
        elif e.get("name") == "producer_send_error":
            errors.append(e)
    check(not errors, f"{len(errors)} send errors, first: {errors[:1]}")
    check(len(acked) == n, f"{len(acked)} of {n} records acknowledged")
    return acked


class Consumer:
    """A running VerifiableConsumer, its JSON events checked as they arrive (Kafka's rules)."""

    def __init__(self, name, topic, group, protocol, tolerate_failed_commits=False):
        self.name, self.violations = name, []
        # A commit may fail while the group's coordinator moves (a broker bounced): Kafka's system
        # test of broker failures counts those, it does not fail on them.
        self.tolerate_failed_commits, self.failed_commits = tolerate_failed_commits, []
        self.assignment, self.position, self.consumed = set(), {}, []
        self.committed, self.lock = {}, threading.Lock()
        self.log = open(os.path.join(suite.work, f"{name}.log"), "w")
        self.proc = subprocess.Popen(
            tool_argv("VerifiableConsumer", "--bootstrap-server", B, "--topic", topic,
                      "--group-id", group, "--group-protocol", protocol, "--reset-policy", "earliest",
                      "--verbose", *(["--session-timeout", "10000"] if protocol == "classic" else [])),
            stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for line in self.proc.stdout:
            self.log.write(line)
            for e in events(line):
                with self.lock:
                    self.handle(e)

    def bad(self, msg):
        if len(self.violations) < 20:
            self.violations.append(f"{self.name}: {msg}")

    def handle(self, e):
        name = e.get("name")
        tps = [(p["topic"], p["partition"]) for p in e.get("partitions", [])]
        if name == "partitions_assigned":
            self.assignment |= set(tps)
        elif name == "partitions_revoked":
            for tp in tps:
                self.assignment.discard(tp)
                self.position.pop(tp, None)  # a later owner starts wherever the group's commit says
        elif name == "records_consumed":
            for p in e["partitions"]:
                tp = (p["topic"], p["partition"])
                if tp not in self.assignment:
                    self.bad(f"consumed {tp} which is not assigned ({sorted(self.assignment)})")
                if tp in self.position and self.position[tp] != p["minOffset"]:
                    kind = "gap" if p["minOffset"] > self.position[tp] else "rewind"
                    self.bad(f"{kind}: {tp} consumed from {p['minOffset']}, position was {self.position[tp]}")
                self.position[tp] = p["maxOffset"] + 1
        elif name == "record_data":
            self.consumed.append((e["partition"], e["offset"], e["value"]))
        elif name == "offsets_committed":
            if not e.get("success", True):
                if self.tolerate_failed_commits:
                    self.failed_commits.append(e.get("error"))
                    return  # the group's offsets did not change
                self.bad(f"commit failed: {e.get('error')}")
            for o in e.get("offsets", []):
                tp = (o["topic"], o["partition"])
                pos = self.position.get(tp)
                if pos is not None and o["offset"] > pos:
                    self.bad(f"committed {o['offset']} for {tp}, ahead of the position {pos}")
                self.committed[tp] = o["offset"]

    def count(self):
        with self.lock:
            return len(self.consumed)

    def stop(self):
        """A clean shutdown (SIGTERM: the tool closes its consumer, which leaves the group)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                self.bad("did not exit within 60 s of SIGTERM")
        self.reader.join(timeout=10)
        self.log.close()


def wait_for(cond, what, timeout=120, consumers=()):
    deadline = time.monotonic() + timeout
    while not cond():
        for c in consumers:
            if c.proc.poll() is not None:
                c.log.flush()
                raise Fail(f"{c.name} exited {c.proc.returncode} while waiting for {what}: "
                           f"{tail(open(c.log.name, errors='replace').read(), 400)}")
        if time.monotonic() > deadline:
            raise Fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def verifiable(protocol):
    topic, group = suite.topic(f"verifiable-{protocol}"), suite.topic(f"vgroup-{protocol}")
    create_topic(topic, 3)
    acked = produce(topic, N // 2, "--value-prefix", "1")
    a = Consumer(f"vc-{protocol}-a", topic, group, protocol)
    b = Consumer(f"vc-{protocol}-b", topic, group, protocol)
    consumers = [a, b]
    try:
        wait_for(lambda: a.count() + b.count() >= N // 4, "the group to consume a quarter of the records",
                 consumers=consumers)
        a.stop()  # a clean bounce: b takes over a's partitions from a's commits
        acked.update(produce(topic, N - N // 2, "--value-prefix", "2"))
        a2 = Consumer(f"vc-{protocol}-a2", topic, group, protocol)
        consumers.append(a2)
        wait_for(lambda: sum(c.count() for c in consumers) >= len(acked), "every acknowledged record to be consumed",
                 timeout=180, consumers=[b, a2])
        time.sleep(2)  # let a last commit land, and any duplicate show up
    finally:
        for c in consumers:
            c.stop()
    problems = [v for c in consumers for v in c.violations]
    consumed = collections.Counter()
    for c in consumers:
        for part, off, val in c.consumed:
            consumed[(part, off)] += 1
            if acked.get((part, off), val) != val:
                problems.append(f"offset {part}/{off} holds {val!r}, acknowledged as {acked[(part, off)]!r}")
    missing = [k for k in acked if k not in consumed]
    dups = [k for k, n in consumed.items() if n > 1]
    unknown = [k for k in consumed if k not in acked]
    if missing:
        problems.append(f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}")
    if dups:
        problems.append(f"{len(dups)} records consumed more than once, e.g. {sorted(dups)[:5]}")
    if unknown:
        problems.append(f"{len(unknown)} consumed records were never acknowledged, e.g. {sorted(unknown)[:5]}")
    ends = collections.Counter(p for p, _ in acked)
    final = {}
    for c in consumers:
        for (t, p), off in c.committed.items():
            final[p] = max(final.get(p, 0), off)
    if final != dict(ends):
        problems.append(f"the group's last commits {final} != the log end offsets {dict(ends)}")
    check(not problems, "; ".join(problems[:6]))


@suite.test
def verifiable_producer_consumer_classic():
    verifiable("classic")


@suite.test
def verifiable_producer_consumer_consumer():
    verifiable("consumer")


@suite.test
def transactional_message_copier():
    if SEC.on:
        raise NotApplicable(f"TransactionalMessageCopier {NO_CLIENT_CONFIG}")
    src, dst = suite.topic("copier-in"), suite.topic("copier-out")
    create_topic(src, 2)
    create_topic(dst, 2)
    acked = produce(src, N // 2)
    group = suite.topic("copier-group")
    procs = []
    for part in (0, 1):
        log = open(os.path.join(suite.work, f"copier-{part}.log"), "w")
        procs.append((subprocess.Popen(
            [KAFKA_REF, "run", T + "TransactionalMessageCopier", "--broker-list", B, "--input-topic", src,
             "--input-partition", str(part), "--output-topic", dst, "--transactional-id", f"{group}-{part}",
             "--consumer-group", group, "--transaction-size", "100", "--transaction-timeout", "30000",
             "--enable-random-aborts", "--use-group-metadata"],
            stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True), log))
    try:
        for p, _ in procs:
            try:
                p.wait(timeout=300)
            except subprocess.TimeoutExpired:
                raise Fail("a copier did not finish within 300 s")
    finally:
        for p, log in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.close()
    for part, (p, _) in enumerate(procs):
        text = open(os.path.join(suite.work, f"copier-{part}.log")).read()
        check(p.returncode == 0, f"copier {part} exited {p.returncode}: {tail(text)}")
    out = tool("consumer.ConsoleConsumer", "--bootstrap-server", B, "--topic", dst, "--from-beginning",
               "--command-property", "isolation.level=read_committed", "--timeout-ms", "15000",
               "--max-messages", str(len(acked) + 1000), ok=False, timeout=180).stdout
    got = collections.Counter(line for line in out.splitlines() if line and " " not in line)
    want = collections.Counter(acked.values())
    dups = sum(n - 1 for n in got.values() if n > 1)
    check(dups == 0, f"{dups} duplicates in the read_committed output")
    check(got == want, f"output has {sum(got.values())} records, input {sum(want.values())}; "
                       f"missing {list((want - got).elements())[:5]}, extra {list((got - want).elements())[:5]}")


@suite.test
def client_compatibility_test():
    if SEC.on:
        raise NotApplicable(f"ClientCompatibilityTest {NO_CLIENT_CONFIG}")
    topic = suite.topic("clientcompat")
    create_topic(topic, 1)
    # It creates a topic named "newtopic": on a broker that is reused, delete an earlier one.
    tool("TopicCommand", "--bootstrap-server", B, "--delete", "--if-exists", "--topic", "newtopic", ok=False)
    p = tool("ClientCompatibilityTest", "--bootstrap-server", B, "--topic", topic, "--num-cluster-nodes", str(suite.nodes),
             "--create-topics-supported", "true", "--offsets-for-times-supported", "true",
             "--cluster-id-supported", "true", "--expect-record-too-large-exception", "false",
             "--describe-acls-supported", "true", "--describe-configs-supported", "true",
             "--idempotent-producer-supported", "true", ok=False, timeout=240)
    said = [line for line in (p.stdout + p.stderr).splitlines() if "FAILED" in line or "Exception" in line]
    check(p.returncode == 0 and "SUCCESS." in p.stdout,
          f"exit {p.returncode}: {' | '.join(said[:3]) or tail(p.stdout + p.stderr)}")


# verifiable-bounce: the cluster's replication under a crashed leader, seen by Kafka's own tools.
BOUNCE_RECORDS = 20000
BOUNCE_RATE = 667  # records/s: the producer writes for about 30 s
BOUNCE_AFTER = BOUNCE_RECORDS // 5  # acknowledged records before the leader is killed


class Producer:
    """A running VerifiableProducer (idempotent, acks=all, throttled), its events read as they come."""

    def __init__(self, name, topic, n, rate):
        cfg = producer_config(os.path.join(suite.work, f"{name}.properties"),
                              "enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\n"
                              "linger.ms=5\n")
        self.acked, self.errors, self.lock = {}, [], threading.Lock()
        self.log = open(os.path.join(suite.work, f"{name}.log"), "w")
        self.proc = subprocess.Popen(
            [KAFKA_REF, "run", T + "VerifiableProducer", "--bootstrap-server", B, "--topic", topic,
             "--max-messages", str(n), "--acks", "-1", "--throughput", str(rate), "--producer.config", cfg],
            stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for line in self.proc.stdout:
            self.log.write(line)
            for e in events(line):
                with self.lock:
                    if e.get("name") == "producer_send_success":
                        self.acked[(e["partition"], e["offset"])] = e["value"]
                    elif e.get("name") == "producer_send_error":
                        self.errors.append(e)

    def count(self):
        with self.lock:
            return len(self.acked)

    def wait(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise Fail(f"VerifiableProducer did not finish within {timeout}s ({self.count()} acknowledged)")
        finally:
            self.reader.join(timeout=10)
            self.log.close()


def partition_leaders(topic):
    """{partition: leader node id} from TopicCommand --describe (-1 or none: no leader)."""
    out = tool("TopicCommand", "--bootstrap-server", B, "--describe", "--topic", topic, timeout=60).stdout
    leaders = {}
    for m in re.finditer(r"Partition:\s*(\d+)\s+Leader:\s*(-?\d+|none)", out):
        leaders[int(m.group(1))] = -1 if m.group(2) == "none" else int(m.group(2))
    return leaders, out


def log_end_offsets(topic):
    out = tool("GetOffsetShell", "--bootstrap-server", B, "--topic", topic, "--time", "-1", timeout=60).stdout
    return {int(p): int(o) for p, o in re.findall(r"^[^:\s]+:(\d+):(\d+)\s*$", out, re.M)}


def cluster_ctl(*args, timeout=240):
    """compat-tests/run's command for this cluster's nodes: kill I, restart I."""
    return sh([*json.loads(os.environ["COMPAT_CLUSTER_CTL"]), *map(str, args)], timeout=timeout)


@suite.test
def verifiable_bounce():
    """VerifiableProducer (idempotent, acks=all, 20,000 records at about 667/s) and a
    VerifiableConsumer group (classic protocol, committing) on a topic with replication factor 3
    and min.insync.replicas 2; once a fifth of the records are acknowledged, the leader of
    partition 0 is killed (SIGKILL) and restarted on the same data. Passes when every
    acknowledged record is consumed at least once and holds the acknowledged value, no value is
    written twice (idempotence), the consumer follows Kafka's system-test rules (no gap or
    rewind within an assignment, commits never ahead of its position) and the group's committed
    offsets end at the log end of every partition. A consumer may see a record again after a
    rebalance (at least once) and a commit may fail while the coordinator moves: both are
    counted and printed, not failures."""
    ctl = os.environ.get("COMPAT_CLUSTER_CTL")
    if suite.nodes < 3 or not ctl:
        raise NotApplicable("needs a cluster of three nodes this run started (compat-tests/run --cluster 3), "
                            "whose leader it can bounce")
    topic, group = suite.topic("bounce"), suite.topic("bounce-group")
    out = tool("TopicCommand", "--bootstrap-server", B, "--create", "--topic", topic, "--partitions", "3",
               "--replication-factor", "3", "--config", "min.insync.replicas=2").stdout
    check(f"Created topic {topic}." in out, f"create printed {out!r}")
    wait_for(lambda: sorted(k for k, v in partition_leaders(topic)[0].items() if v > 0) == [0, 1, 2],
             "a leader for every partition", 60)
    c = Consumer("bounce-consumer", topic, group, "classic", tolerate_failed_commits=True)
    prod = None
    bounce = {}
    try:
        wait_for(lambda: bool(c.assignment), "the consumer's first assignment", consumers=[c])
        # The leader is looked up before producing (nothing moves leadership until the kill), so
        # that a tool's start-up does not delay the kill.
        leaders, described = partition_leaders(topic)
        leader = leaders.get(0, -1)
        check(leader > 0, f"partition 0 has no leader before the bounce: {described}")
        prod = Producer("bounce-producer", topic, BOUNCE_RECORDS, BOUNCE_RATE)
        t0 = time.monotonic()
        wait_for(lambda: prod.count() >= BOUNCE_AFTER or prod.proc.poll() is not None,
                 f"{BOUNCE_AFTER} acknowledged records", 120, consumers=[c])
        check(prod.proc.poll() is None, f"VerifiableProducer exited {prod.proc.returncode} before the bounce")
        bounce.update(leader=leader, acked_before=prod.count(), at_s=round(time.monotonic() - t0, 1))
        cluster_ctl("kill", leader)
        t1 = time.monotonic()
        cluster_ctl("restart", leader)
        bounce["restart_s"] = round(time.monotonic() - t1, 1)
        bounce["acked_while_down"] = prod.count() - bounce["acked_before"]
        prod.wait(timeout=300)
        bounce["produce_s"] = round(time.monotonic() - t0, 1)
        check(prod.proc.returncode == 0, f"VerifiableProducer exited {prod.proc.returncode}: "
                                         f"{tail(open(prod.log.name, errors='replace').read(), 400)}")
        ends = log_end_offsets(topic)
        acked = dict(prod.acked)

        def caught_up():
            with c.lock:
                seen = {(p, o) for p, o, _ in c.consumed}
                committed = {p: off for (_, p), off in c.committed.items()}
            return all(k in seen for k in acked) and all(committed.get(p) == end for p, end in ends.items() if end)
        try:
            wait_for(caught_up, "every acknowledged record consumed and the group's commits at the log end",
                     timeout=180, consumers=[c])
        except Fail as e:  # judged below, record by record and partition by partition
            waited = str(e)
        else:
            waited = None
        leaders_after, described_after = partition_leaders(topic)
    finally:
        c.stop()
        if prod is not None and prod.proc.poll() is None:
            os.killpg(prod.proc.pid, signal.SIGKILL)
            prod.proc.wait()
    problems = list(c.violations) + ([waited] if waited else [])
    consumed = collections.Counter((p, o) for p, o, _ in c.consumed)
    where = collections.defaultdict(set)  # value -> every offset it was seen at
    for (p, o), v in acked.items():
        where[v].add((p, o))
    for p, o, v in c.consumed:
        where[v].add((p, o))
        if acked.get((p, o), v) != v:
            problems.append(f"offset {p}/{o} holds {v!r}, acknowledged as {acked[(p, o)]!r}")
    missing = [k for k in acked if k not in consumed]
    written_twice = {v: sorted(at) for v, at in where.items() if len(at) > 1}
    if missing:
        problems.append(f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}")
    if written_twice:
        problems.append(f"{len(written_twice)} values at more than one offset (the idempotent producer "
                        f"wrote them twice), e.g. {list(written_twice.items())[:3]}")
    final = {p: off for (_, p), off in c.committed.items()}
    if any(final.get(p) != end for p, end in ends.items() if end):
        problems.append(f"the group's last commits {final} != the log end offsets {ends}")
    last_failed = f" (last: {str(c.failed_commits[-1])[:160]})" if c.failed_commits else ""
    isr = re.findall(r"Partition:\s*(\d+)\s+Leader:\s*(\S+)\s+Replicas:\s*(\S+)\s+Isr:\s*(\S+)", described_after)
    print(f"  verifiable-bounce: leader {bounce['leader']} of partition 0 killed after {bounce['acked_before']} "
          f"acknowledgements ({bounce['at_s']} s), ready again {bounce['restart_s']} s later, "
          f"{bounce['acked_while_down']} acknowledged meanwhile; producer done at {bounce['produce_s']} s: "
          f"{len(acked)} acknowledged, {len(prod.errors)} send errors; log ends {ends}; consumed "
          f"{sum(consumed.values())} ({sum(n - 1 for n in consumed.values())} again after a rebalance), "
          f"{len(c.failed_commits)} failed commits{last_failed}; "
          f"committed {final}; after: leaders {leaders_after}, "
          f"replicas/isr {[(p, r, i) for p, _, r, i in isr]}", flush=True)
    check(not problems, "; ".join(problems[:6]))
    check(not prod.errors, f"{len(prod.errors)} sends failed (delivery timed out or a fatal error), "
                           f"first: {prod.errors[:1]}")


def security_properties():
    """JVM system properties for Env.java: the --security mode's client configuration, its protocol
    and, for SaslTest, the test user's credentials for every SASL mechanism."""
    if not SEC.on:
        return []
    props = [f"-Dcompat.security.config={CLIENT_CONFIG}", f"-Dcompat.security.protocol={SEC.protocol}"]
    for mech, (user, password) in SEC.credentials.get("test", {}).items():
        props += [f"-Dcompat.sasl.{mech}.username={user}", f"-Dcompat.sasl.{mech}.password={password}"]
    return props


JAVA_TYPES = {"String": "java.lang.String", "Path": "java.nio.file.Path", "int": "int", "long": "long",
              "boolean": "boolean"}


def method_selector(name):
    """Class.method as JUnit's method selector, Class#method(parameter types): a parameterized
    test is found only with its parameter types (read from the source), and then runs with each
    of its parameters."""
    cls, method = name.split(".", 1)
    src = open(os.path.join(HERE, "src", "test", "java", "es", "compat", cls + ".java")).read()
    m = re.search(r"\bvoid\s+" + re.escape(method) + r"\s*\(([^)]*)\)", src)
    if not m or not m.group(1).strip():
        return f"{cls}#{method}"
    types = [JAVA_TYPES[p.split()[-2]] for p in m.group(1).split(",")]
    return f"{cls}#{method}({','.join(types)})"


def junit():
    """Our JUnit scenarios, one result each (ClassName.method[parameters])."""
    lib = sorted(glob.glob(os.path.join(BUILD, "lib", "*.jar")))
    classes = os.path.join(BUILD, "test-classes")
    if not lib or not os.path.isdir(classes):
        suite.add_result("junit", "failed", "target/compat/java-suite missing: run compat-tests/java/prepare")
        return
    reports = os.path.join(suite.work, "junit")
    for f in glob.glob(os.path.join(reports, "*.xml")):
        os.remove(f)
    args = ["java", "-Xmx1G", f"-Dcompat.bootstrap={B}", f"-Dcompat.nodes={suite.nodes}", f"-Dlog4j2.configurationFile={LOG4J}",
            "-Dkafka.ref.log.level=WARN", *security_properties(), "-cp", ":".join([classes, *lib]),
            "org.junit.platform.console.ConsoleLauncher", "execute", "--disable-banner",
            "--details=tree", f"--reports-dir={reports}",
            # Classes one after another; a class marked @Execution(CONCURRENT) (ShareConsumerTest,
            # whose tests mostly wait out lock durations) runs its tests side by side, six at a time.
            "--config=junit.jupiter.execution.parallel.enabled=true",
            "--config=junit.jupiter.execution.parallel.config.strategy=fixed",
            "--config=junit.jupiter.execution.parallel.config.fixed.parallelism=6"]
    # SaslTest runs in the SASL modes only, TlsTest with --security ssl only (Env.java, the tests).
    skip = [c for c, wanted in (("SaslTest", SEC.sasl), ("TlsTest", SEC.mode == "ssl")) if not wanted]
    if suite.only:  # --only ProducerTest.method,...: those JUnit methods (none: JUnit is not run)
        picked = sorted({o.split("[")[0] for o in suite.only if "." in o and o[:1].isupper()
                         and o.split(".")[0] not in skip})
        if not picked:
            return
        args += [f"--select-method=es.compat.{method_selector(o)}" for o in picked]
    else:
        args += [f"--scan-classpath={classes}", *(f"--exclude-classname=^es\\.compat\\.{c}$" for c in skip)]
    log = os.path.join(suite.work, "junit.log")
    with open(log, "w") as out:
        try:
            subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, timeout=JUNIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            suite.add_result("junit", "failed", f"timed out after {JUNIT_TIMEOUT_S}s (log {log})")
    xml = os.path.join(reports, "TEST-junit-jupiter.xml")
    if not os.path.exists(xml):
        suite.add_result("junit", "failed", f"no JUnit XML report (log {os.path.relpath(log, REPO)})")
        return
    for case in ET.parse(xml).getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        name = case.get("name", "")
        # Parameterized cases: "method(String)[2]"; their display name is in the system-out.
        sysout = case.findtext("system-out") or ""
        disp = next((line.split(":", 1)[1].strip() for line in sysout.splitlines()
                     if line.strip().startswith("display-name:")), "")
        method = name.split("(")[0]
        if "[" in name and disp:
            method += "[" + disp.split("]", 1)[-1].strip() + "]"
        secs = round(float(case.get("time", 0)), 2)
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            msg = (failure.get("message") or (failure.text or "").strip().splitlines()[0])
            suite.add_result(f"{cls}.{method}", "failed", f"{failure.get('type', '')}: {msg}"[:500], secs)
        elif case.find("skipped") is not None:
            suite.add_result(f"{cls}.{method}", "skipped", case.find("skipped").get("message") or "", secs)
        else:
            suite.add_result(f"{cls}.{method}", "passed", "", secs)


if __name__ == "__main__":
    junit()
    suite.main()
