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
"""
import collections
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compat import REPO, Fail, Suite, check, sh, tail  # noqa: E402

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


def tool(cls, *args, ok=True, timeout=180):
    return sh([KAFKA_REF, "run", T + cls, *args], ok=ok, timeout=timeout)


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
    cfg = os.path.join(suite.work, "producer.properties")
    with open(cfg, "w") as f:
        # as kafkatest sets them for an idempotent VerifiableProducer (the tool defaults to retries=0)
        f.write("enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\nlinger.ms=5\n")
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

    def __init__(self, name, topic, group, protocol):
        self.name, self.violations = name, []
        self.assignment, self.position, self.consumed = set(), {}, []
        self.committed, self.lock = {}, threading.Lock()
        self.log = open(os.path.join(suite.work, f"{name}.log"), "w")
        self.proc = subprocess.Popen(
            [KAFKA_REF, "run", T + "VerifiableConsumer", "--bootstrap-server", B, "--topic", topic,
             "--group-id", group, "--group-protocol", protocol, "--reset-policy", "earliest",
             "--verbose", *(["--session-timeout", "10000"] if protocol == "classic" else [])],
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
            "-Dkafka.ref.log.level=WARN", "-cp", ":".join([classes, *lib]),
            "org.junit.platform.console.ConsoleLauncher", "execute", "--disable-banner",
            "--details=tree", f"--reports-dir={reports}"]
    if suite.only:  # --only ProducerTest.method,...: those JUnit methods (none: JUnit is not run)
        picked = sorted({o.split("[")[0] for o in suite.only if "." in o and o[:1].isupper()})
        if not picked:
            return
        args += [f"--select-method=es.compat.{o.replace('.', '#')}" for o in picked]
    else:
        args += [f"--scan-classpath={classes}"]
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
