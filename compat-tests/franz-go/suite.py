#!/usr/bin/env python3
"""compat-tests/franz-go: franz-go's own pkg/kgo integration tests against a running broker.

The pinned module (VERSION) is compiled by ./prepare into target/compat/bin/kgo-<ver>.test.
Of pkg/kgo's tests, those that talk to a broker are the ones whose body reaches the broker
helpers (newTestClient, adm(), tmpTopic, testClientOpts, getSeedBrokers); the rest are unit
tests that never touch a broker and are left out. Each broker test runs in its own process
(a panic in one cannot take the others with it), bounded in time, with the environment that
pkg/kgo/helpers_test.go reads: KGO_SEEDS, KGO_TEST_RF, KGO_TEST_RECORDS. KGO_TEST_RF is the
replication factor of every topic the tests create (tmpTopic and friends; nothing else reads it):
1 against one node, 3 against a cluster of three or more (COMPAT_NODES), upstream's default,
so that against a cluster every produce with acks=all waits for two followers. The suite reads
ApiVersions and skips what the broker does not advertise (KIP-848, share groups, static
membership), so it grows with the broker. Test output goes to the suite's work dir. ./prepare
patches one upstream test race that shows against a cluster (Test848RegexBrokerResolves; see
FINDINGS.md).

With compat-tests/run --security MODE: TLS modes set KGO_TEST_TLS=ca:PATH[,cert:PATH,key:PATH]
(the CA; and the client's certificate and key when the broker asks for one, ssl), which every
test client dials with; SASL modes set KGO_TEST_SCRAM=USER:PASS[:512] (the test user; SCRAM only,
SHA-256 unless SCRAM-SHA-512 is asked for), KGO_TEST_SCRAM_SEEDS (the same listener) and
KGO_TEST_SCRAM_ALL, which ./prepare's patch reads to give SCRAM to every test client too (upstream
gives it only to TestSCRAMAuth and TestSCRAMAuthBadCredentials, on a separate listener; FINDINGS.md
C3), and those two tests run as well.
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compat import REPO, Suite  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VER = next(line.split("=", 1)[1].strip() for line in open(os.path.join(HERE, "VERSION"))
           if line.startswith("github.com/twmb/franz-go="))
suite = Suite("franz-go", f"franz-go {VER} pkg/kgo")
TEST_RF = min(3, suite.nodes)
suite.version += f", KGO_TEST_RF={TEST_RF}"
SRC = os.path.join(REPO, "target", "compat", "src", f"franz-go@{VER}", "pkg", "kgo")
BIN = os.path.join(REPO, "target", "compat", "bin", f"kgo-{VER}.test")
BROKER_HELPERS = re.compile(r"\b(newTestClient|adm\(\)|tmpTopic|testClientOpts|getSeedBrokers)\b")
SEC = suite.security
if SEC.sasl:  # the two SCRAM tests dial KGO_TEST_SCRAM_SEEDS themselves
    BROKER_HELPERS = re.compile(BROKER_HELPERS.pattern + r"|\bscramSeeds\b")
if SEC.on:
    suite.version += f", {SEC.describe()}"
# Not applicable over TLS: tests that give their client a Dialer of their own, which franz-go
# refuses beside DialTLSConfig ("cannot set both Dialer and DialTLSConfig"; the test ignores the
# error and panics on the nil client). FINDINGS.md C3.
NOT_APPLICABLE_TLS = {
    "TestIssue769": "sets its own Dialer (a slow dialer), which franz-go refuses beside KGO_TEST_TLS's "
                    "DialTLSConfig; the test ignores NewClient's error and panics on the nil client",
}
# Long-running end-to-end checks, left out of --quick.
SLOW = {"TestGroupETL", "TestTxnEtl", "TestShareGroupETL", "TestClient_ProduceLargeMessages"}
TEST_TIMEOUT_S = {True: 240, False: 900}
# Progress notes that franz-go's tests print with t.Log, never the cause of a failure.
NOISE = re.compile(r"completed in|does not support|NOT DELETING TOPIC|deleting topic|^=== |^--- ")


def broker_tests():
    names = []
    for f in sorted(os.listdir(SRC)):
        if not f.endswith("_test.go"):
            continue
        src = open(os.path.join(SRC, f)).read()
        for chunk in re.split(r"(?m)^func ", src)[1:]:
            m = re.match(r"(Test\w*)\(t \*testing\.T\)", chunk)
            if m and BROKER_HELPERS.search(chunk):
                names.append(m.group(1))
    return names


def security_env():
    """KGO_TEST_TLS / KGO_TEST_SCRAM* for the --security mode (none without it)."""
    env = {}
    if SEC.tls:
        env["KGO_TEST_TLS"] = f"ca:{SEC.ca}" + (f",cert:{SEC.cert},key:{SEC.key}" if SEC.client_auth == "required" else "")
    if SEC.sasl:
        user, password = SEC.creds()
        env.update({"KGO_TEST_SCRAM": f"{user}:{password}" + (":512" if SEC.mechanism == "SCRAM-SHA-512" else ""),
                    "KGO_TEST_SCRAM_SEEDS": suite.bootstrap, "KGO_TEST_SCRAM_ALL": "1"})
    return env


def run_one(name):
    env = {**os.environ, "KGO_SEEDS": suite.bootstrap, "KGO_TEST_RF": str(TEST_RF),
           "KGO_TEST_RECORDS": "10000" if suite.quick else "50000", **security_env()}
    for k in ("KGO_TEST_TLS", "KGO_TEST_SCRAM", "KGO_TEST_SCRAM_SEEDS", "KGO_TEST_SCRAM_ALL"):
        if k not in security_env():
            env.pop(k, None)
    log = os.path.join(suite.work, f"{name}.log")
    timeout = TEST_TIMEOUT_S[suite.quick]
    t0 = time.monotonic()
    with open(log, "w") as out:
        try:
            p = subprocess.run([BIN, "-test.run", f"^{name}$", "-test.v", "-test.count=1",
                                f"-test.timeout={timeout}s"], cwd=SRC, env=env, stdout=out,
                               stderr=subprocess.STDOUT, timeout=timeout + 30)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    secs = round(time.monotonic() - t0, 1)
    text = open(log, errors="replace").read()
    m = re.search(rf"^--- (PASS|FAIL|SKIP): {name} ", text, re.M)
    if m and m.group(1) == "PASS" and rc == 0:
        return "passed", "", secs
    if m and m.group(1) == "SKIP":
        said = re.findall(r"^\s+\w+_test\.go:\d+: (.*)$", text[:m.start()], re.M)
        return "skipped", said[0] if said else "skipped by the test", secs
    # What the test said, minus its progress notes, deduplicated: the first lines are the cause.
    said = []
    for line in re.findall(r"^ {4,}(?:\w+_test\.go:\d+: )?(.*\S)", text, re.M):
        line = re.sub(r"\b[0-9a-f]{16,}\b", "<id>", line)  # topic and group names
        if not NOISE.search(line) and line not in said:
            said.append(line)
    panic = re.search(r"^panic: (.*)$", text, re.M)
    why = (f"panic: {panic.group(1)}; " if panic else "") + "; ".join(said[:2]) or f"exit {rc}"
    if rc == "timeout":
        why = f"timed out after {timeout}s; {why}"
    return "failed", f"{why[:400]} (log {os.path.relpath(log, REPO)})", secs


def main():
    if not os.access(BIN, os.X_OK):
        suite.add_result("build", "failed", f"{BIN} missing: run compat-tests/franz-go/prepare")
        return suite.main()
    for name in broker_tests():
        if suite.only and name not in suite.only:
            continue
        if suite.quick and name in SLOW:
            suite.add_result(name, "skipped", "not in --quick")
            continue
        if SEC.tls and name in NOT_APPLICABLE_TLS:
            suite.add_result(name, "n/a", NOT_APPLICABLE_TLS[name])
            continue
        suite.add_result(name, *run_one(name))
    suite.main()


if __name__ == "__main__":
    main()
