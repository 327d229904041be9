#!/usr/bin/env python3
"""compat-tests/diff: the differential protocol tester as a suite of compat-tests/run.

The broker under test is the one compat-tests/run started (COMPAT_BOOTSTRAP: es, or with
--against kafka an Apache Kafka, which checks the tester itself: two Kafkas must answer
alike once normalised). The reference is a second broker this suite starts with
scripts/kafka-ref (Apache Kafka 4.4, node id 0, auto-creation on, one partition per
auto-created topic, as es's defaults). Every case of tester.py is one test: equal or
allowed by table.py's ALLOWED rows passes, different fails. The report is written to
target/compat/diff/ (report.txt, report.json). DIFF_ONLY=REGEX runs only the cases whose names
match (the prepare.* cases always run).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VENV_PY = os.path.join(REPO, "target", "compat", "diff-venv", "bin", "python")

try:
    import cramjam  # noqa: F401
    import crc32c  # noqa: F401
    import lz4  # noqa: F401
except ImportError:
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.dirname(os.path.dirname(VENV_PY))) \
            or not os.path.exists(VENV_PY):
        raise SystemExit("diff: the tester's venv is missing: run compat-tests/diff/prepare")
    os.execv(VENV_PY, [VENV_PY, *sys.argv])

sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
from compat import Suite  # noqa: E402
import tester  # noqa: E402

KAFKA_REF = os.path.join(REPO, "scripts", "kafka-ref")


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_results(suite):
    import json
    with open(suite.results_path, "w") as f:
        json.dump({"suite": suite.name, "version": suite.version, "tests": suite.results}, f, indent=1)


def main():
    suite = Suite("diff", "differential tester against Apache Kafka "
                  + subprocess.run([KAFKA_REF, "version"], capture_output=True, text=True).stdout.strip())
    if suite.nodes > 1:
        # The reference is one Kafka node: a cluster answers Metadata, DescribeCluster, FindCoordinator
        # and every partition request for a partition led elsewhere differently by design.
        suite.add_result("cluster", "n/a", f"the reference is a single-node Kafka; the broker under test "
                         f"has {suite.nodes} nodes, whose answers differ from it by design")
        write_results(suite)
        return
    port = free_port()
    p = subprocess.run([KAFKA_REF, "start", "--port", str(port)], capture_output=True, text=True)
    if p.returncode != 0:
        suite.add_result("reference-start", "failed", f"kafka-ref start failed: {p.stderr[-800:]}")
        write_results(suite)
        return
    reference = p.stdout.strip().splitlines()[-1]
    try:
        out = os.path.join(REPO, "target", "compat", "diff" if suite.against == "es" else "diff-self")
        only = os.environ.get("DIFF_ONLY") or ("|".join(sorted(suite.only)) if suite.only else "")
        _, results = tester.run(suite.bootstrap, reference, tester.find_jar(), suite.quick, only, out)
    finally:
        subprocess.run([KAFKA_REF, "stop", "--port", str(port)], capture_output=True)
    for r in results:
        status = {"equal": "passed", "allowed": "passed"}.get(r["verdict"], "failed")
        detail = ""
        if r["verdict"] == "allowed":
            detail = f"allowed: {r['reason']}"
        elif status == "failed":
            detail = r["reason"] or "; ".join(f"{d['path']}: es={tester.short(d['es'], 80)} "
                                              f"kafka={tester.short(d['kafka'], 80)}" for d in r["diffs"][:3])
        suite.results.append({"name": r["case"], "status": status, "detail": detail[:600],
                              "seconds": r["seconds"]})
    write_results(suite)


if __name__ == "__main__":
    main()
