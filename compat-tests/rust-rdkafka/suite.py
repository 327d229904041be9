#!/usr/bin/env python3
"""compat-tests/rust-rdkafka: the rdkafka crate's own integration tests (tests/ of the pinned crate,
compiled by ./prepare with its own target dir) against a running broker.

Each test runs in its own process (`<test binary> --exact NAME --test-threads=1`, bounded in
time), with the environment the crate's tests/utils.rs reads: KAFKA_HOST (the broker) and
KAFKA_VERSION (the reference Kafka's version for both brokers, so the same tests are selected).
The tests assume node id 0 and 3 partitions for auto-created topics (BROKER). Output per test is
kept in the suite's work dir.
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compat import REPO, Suite  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VER = next(line.split("=", 1)[1].strip() for line in open(os.path.join(HERE, "VERSION"))
           if line.startswith("rdkafka="))
SRC = os.path.join(REPO, "target", "compat", "src", f"rdkafka-{VER}")
TARGET = os.path.join(REPO, "target", "compat", "rust-rdkafka-target")
suite = Suite("rust-rdkafka", f"rdkafka {VER} (librdkafka 2.12.1)")
KAFKA_VERSION = "4.4.0"
TEST_TIMEOUT_S = 240
# --quick: the producer, consumer and transaction binaries; admin and metadata in full runs only.
NOT_APPLICABLE = {
    "test_low_producers::test_base_producer_timeout":
        "timing-dependent: expects delivery to a topic that does not exist yet to take longer than "
        "message.timeout.ms=100 (auto-creation included); Kafka 4.4 on this machine is sometimes faster",
}
QUICK_BINARIES = {"test_high_producers", "test_high_consumers", "test_low_producers", "test_transactions"}


def binaries():
    """{test target name: executable} from cargo's build plan (compiled by ./prepare: no rebuild)."""
    p = subprocess.run(["cargo", "test", "-q", "--tests", "--no-run", "--message-format=json"], cwd=SRC,
                       env={**os.environ, "CARGO_TARGET_DIR": TARGET}, capture_output=True, text=True, timeout=900)
    out = {}
    for line in p.stdout.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
            out[m["target"]["name"]] = m["executable"]
    if not out:
        raise RuntimeError(f"no test binaries: {p.stderr[-500:]}")
    return out


def run_one(binary, exe, test):
    log = os.path.join(suite.work, f"{binary}.{test}.log")
    # One host:port even against a cluster: the patched test_metadata compares its port with the
    # broker's (./prepare); the client discovers the other nodes from Metadata.
    env = {**os.environ, "KAFKA_HOST": suite.bootstrap_one, "KAFKA_VERSION": KAFKA_VERSION, "RUST_BACKTRACE": "0"}
    t0 = time.monotonic()
    with open(log, "w") as out:
        try:
            p = subprocess.run([exe, "--exact", test, "--test-threads=1", "--nocapture"], cwd=SRC, env=env,
                               stdout=out, stderr=subprocess.STDOUT, timeout=TEST_TIMEOUT_S)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    secs = round(time.monotonic() - t0, 1)
    text = open(log, errors="replace").read()
    # --nocapture interleaves the test's own output with libtest's "... ok": read the summary.
    m = re.search(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text, re.M)
    if rc == 0 and m and m.group(1) == "1":
        return "passed", "", secs
    if rc == 0 and m and m.group(3) == "1":
        return "skipped", "ignored by the test", secs
    panic = re.findall(r"panicked at [^\n]*\n(.*)", text)
    why = "; ".join(p.strip()[:300] for p in panic[:2]) or " | ".join(text.strip().splitlines()[-3:])[-300:]
    if rc == "timeout":
        why = f"timed out after {TEST_TIMEOUT_S}s; {why}"
    return "failed", f"{why} (log {os.path.relpath(log, REPO)})", secs


def main():
    if not os.path.isfile(os.path.join(TARGET, f".built-{VER}")):
        suite.add_result("build", "failed", "run compat-tests/rust-rdkafka/prepare first")
        return suite.main()
    bins = binaries()
    binaries_seen = set(bins)
    for binary, exe in sorted(bins.items()):
        listing = subprocess.run([exe, "--list", "--format", "terse"], capture_output=True, text=True, timeout=60).stdout
        tests = [line[:-len(": test")] for line in listing.splitlines() if line.endswith(": test")]
        for test in tests:
            name = f"{binary}::{test}"
            if test.startswith("utils::") and binary != min(binaries_seen):
                continue  # tests/utils.rs is compiled into every binary: run its own tests once
            if suite.only and name not in suite.only and test not in suite.only:
                continue
            if name in NOT_APPLICABLE:
                suite.add_result(name, "n/a", NOT_APPLICABLE[name])
                continue
            if suite.quick and binary not in QUICK_BINARIES:
                suite.add_result(name, "skipped", "not in --quick")
                continue
            suite.add_result(name, *run_one(binary, exe, test))
    suite.main()


if __name__ == "__main__":
    main()
