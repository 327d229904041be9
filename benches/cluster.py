#!/usr/bin/env python3
"""benches/cluster.py: three es nodes against three Apache Kafka nodes on this machine.

Run it through benches/cluster-run (which builds es-broker and the load generator and fetches
Kafka's jars). Each round starts one three-node cluster at a time on loopback, es with
scripts/cluster (replication factor 3, every acks=all answer fsynced on every in-sync replica),
Kafka with compat-tests/lib/kafka_cluster.py (three combined KRaft nodes, -Xmx512m each, no fsync
before acknowledgement, as Kafka runs by default), measures, and stops it before the other starts.
Both systems get the same topics (replication factor 3, min.insync.replicas 2) and the same
librdkafka load generator (benches/loadgen):

  throughput   4 producers into 8 partitions, 256-byte records, acks=all, linger 5 ms, as fast
               as the brokers take them (and 1 producer into 1 partition)
  latency      1 producer into 1 partition at a fixed rate, p50/p99/p99.9 from send() to the
               delivery report
  failover     1 idempotent producer at a fixed rate into 1 partition; after a while the
               partition's leader is killed with SIGKILL; the fail-over time runs from that kill
               to the first acknowledgement of a record sent after it (necessarily from the new
               leader); also the longest stretch without any acknowledgement

Results go to target/bench/cluster.json and a Markdown table on stdout. Figures, never a
verdict: nothing here fails on a slow number.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import kafkawire  # noqa: E402

BENCH = os.path.join(ROOT, "target", "bench")
LOADGEN = os.path.join(ROOT, "target", "loadgen", "release", "es-loadgen")
ES_BIN = os.path.join(BENCH, "bin", "es-broker")
KAFKA_CLUSTER = os.path.join(ROOT, "compat-tests", "lib", "kafka_cluster.py")
CLUSTER = os.path.join(ROOT, "scripts", "cluster")
NODES = 3
TOOL_TIMEOUT_S = 300


def log(msg):
    print(f"bench-cluster: {msg}", file=sys.stderr, flush=True)


def run(argv, env=None, timeout=TOOL_TIMEOUT_S):
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{argv[0]} {argv[1:3]} exited {p.returncode}: {p.stderr[-1500:]}")
    return p.stdout


class Cluster:
    """One three-node cluster of either system: start, the pid of node i, stop and wipe."""

    def __init__(self, system, port_base):
        self.system = system
        self.dir = os.path.join(BENCH, f"cluster-{system}")
        self.env = dict(os.environ, ES_CLUSTER_DIR=self.dir, ES_BROKER=ES_BIN,
                        ES_CLUSTER_BASE_PORT=str(port_base), ES_CLUSTER_NODES=str(NODES),
                        RUST_LOG="warn,es_broker=info")
        self.bootstrap = None

    def start(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        if self.system == "es":
            out = run([CLUSTER, "start"], env=self.env)
        else:
            out = run([sys.executable, KAFKA_CLUSTER, self.dir, "start", "--nodes", str(NODES)])
        self.bootstrap = out.strip().splitlines()[-1]
        log(f"{self.system}: three nodes at {self.bootstrap}")

    def stop(self):
        try:
            if self.system == "es":
                run([CLUSTER, "stop"], env=self.env)
            else:
                run([sys.executable, KAFKA_CLUSTER, self.dir, "stop"])
        except Exception as e:  # noqa: BLE001 - a node killed by the fail-over case exits non-zero
            log(f"{self.system}: stop: {str(e)[-300:]}")
        shutil.rmtree(self.dir, ignore_errors=True)

    def pid(self, node):
        with open(os.path.join(self.dir, f"node-{node}.pid")) as f:
            return int(f.read())

    def addrs(self):
        return [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in self.bootstrap.split(","))]

    def leader(self, topic, skip=None):
        """Partition 0's leader as some live node reports it (None while there is none)."""
        for i, (host, port) in enumerate(self.addrs(), start=1):
            if i == skip:
                continue
            try:
                with socket.create_connection((host, port), timeout=5) as s:
                    err, parts = kafkawire.metadata(s, topic)
                if err == 0 and parts and parts[0][1] == 0 and parts[0][2] >= 0:
                    return parts[0][2]
            except OSError:
                continue
        return None


def loadgen(cmd, bootstrap, *args, timeout=TOOL_TIMEOUT_S):
    out = run([LOADGEN, cmd, "--bootstrap", bootstrap, *map(str, args)], timeout=timeout)
    r = json.loads(out.strip().splitlines()[-1])
    if not r.get("ok"):
        raise RuntimeError(f"es-loadgen {cmd}: {r.get('error')}")
    return r


def create(c, topic, partitions):
    loadgen("create", c.bootstrap, "--topic", topic, "--partitions", partitions,
            "--replication", NODES, "--config", "min.insync.replicas=2")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        host, port = c.addrs()[0]
        if kafkawire.topic_ready(host, port, topic, partitions):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: partitions without a leader after 60 s")


def throughput(c, p, partitions, producers):
    topic = f"tp-{partitions}-{producers}"
    create(c, topic, partitions)
    common = ["--topic", topic, "--partitions", partitions, "--producers", producers,
              "--record-size", 256, "--linger-ms", 5, "--acks", "all"]
    loadgen("produce", c.bootstrap, *common, "--duration-s", p.warm_s)
    r = loadgen("produce", c.bootstrap, *common, "--duration-s", p.seconds)
    return {"records_per_s": r["records_per_s"], "mb_per_s": r["mb_per_s"],
            "p99_ms": r["latency"]["p99_us"] / 1e3}


def latency(c, p):
    create(c, "lat", 1)
    common = ["--topic", "lat", "--partitions", 1, "--record-size", 256, "--linger-ms", 5,
              "--acks", "all", "--rate", p.rate]
    loadgen("produce", c.bootstrap, *common, "--duration-s", p.warm_s)
    r = loadgen("produce", c.bootstrap, *common, "--duration-s", p.seconds)
    lat = r["latency"]
    return {"rate": p.rate, "behind_ms": r["behind_ms"], "p50_ms": lat["p50_us"] / 1e3,
            "p99_ms": lat["p99_us"] / 1e3, "p999_ms": lat["p999_us"] / 1e3}


def failover(c, p):
    create(c, "fo", 1)
    old = c.leader("fo")
    acks = os.path.join(c.dir, "acks.txt")
    argv = [LOADGEN, "produce", "--bootstrap", c.bootstrap, "--topic", "fo", "--partitions", "1",
            "--record-size", "256", "--linger-ms", "5", "--acks", "all", "--idempotence", "true",
            "--rate", str(p.failover_rate), "--duration-s", str(p.failover_s), "--ack-log", acks,
            "--timeout-s", str(p.failover_s + 120)]
    gen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(p.kill_after_s)
    pid = c.pid(old)
    t_kill = time.time() * 1e3
    os.kill(pid, signal.SIGKILL)
    new = None
    deadline = time.monotonic() + 60
    while new is None and time.monotonic() < deadline:
        time.sleep(0.2)
        new = c.leader("fo", skip=old)
        new = None if new == old else new
    out, err = gen.communicate(timeout=p.failover_s + 180)
    r = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"ok": False, "error": err[-500:]}
    if not r.get("ok"):
        raise RuntimeError(f"fail-over producer: {r.get('error')}")
    with open(acks) as f:
        pairs = sorted((float(a), float(b)) for a, b in (line.split() for line in f))
    after = [b for a, b in pairs if a > t_kill]
    ack_times = sorted(b for _, b in pairs)
    gaps = [y - x for x, y in zip(ack_times, ack_times[1:])]
    return {"old_leader": old, "new_leader": new, "records": r["records"],
            "failover_s": (min(after) - t_kill) / 1e3 if after else None,
            "longest_gap_s": max(gaps) / 1e3 if gaps else None}


def one_round(system, p, port_base):
    c = Cluster(system, port_base)
    c.start()
    try:
        out = {"throughput_p8_w4": throughput(c, p, 8, 4), "throughput_p1_w1": throughput(c, p, 1, 1),
               "latency": latency(c, p), "failover": failover(c, p)}
    finally:
        c.stop()
    log(f"{system}: {json.dumps(out)}")
    return out


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def table(runs):
    rows = [("throughput, 4 producers, 8 partitions (records/s)", "throughput_p8_w4", "records_per_s"),
            ("throughput, 1 producer, 1 partition (records/s)", "throughput_p1_w1", "records_per_s"),
            ("latency p50 at fixed rate (ms)", "latency", "p50_ms"),
            ("latency p99 at fixed rate (ms)", "latency", "p99_ms"),
            ("latency p99.9 at fixed rate (ms)", "latency", "p999_ms"),
            ("fail-over, kill -9 to first ack on the new leader (s)", "failover", "failover_s"),
            ("longest stretch without an acknowledgement (s)", "failover", "longest_gap_s")]
    lines = ["| | es, 3 nodes | Kafka, 3 nodes | es / Kafka |", "| --- | --- | --- | --- |"]
    for label, case, key in rows:
        m = {s: median([r[case][key] for r in runs[s]]) for s in ("es", "kafka")}
        ratio = m["es"] / m["kafka"] if m["es"] is not None and m["kafka"] else None
        f = (lambda x: "-" if x is None else (f"{x:,.0f}" if x >= 1000 else f"{x:.2f}"))
        lines.append(f"| {label} | {f(m['es'])} | {f(m['kafka'])} | {f(ratio)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=15.0, help="each measured produce run")
    ap.add_argument("--warm-s", type=float, default=3.0)
    ap.add_argument("--rate", type=int, default=5000, help="records/s of the latency case")
    ap.add_argument("--failover-rate", type=int, default=500)
    ap.add_argument("--failover-s", type=float, default=40.0)
    ap.add_argument("--kill-after-s", type=float, default=10.0)
    ap.add_argument("--port-base", type=int, default=39500)
    p = ap.parse_args()
    runs = {"es": [], "kafka": []}
    for i in range(p.rounds):
        for system in (("es", "kafka") if i % 2 == 0 else ("kafka", "es")):
            log(f"round {i + 1} of {p.rounds}: {system}")
            runs[system].append(one_round(system, p, p.port_base))
    out = {"args": vars(p), "runs": runs, "table": table(runs)}
    with open(os.path.join(BENCH, "cluster.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(out["table"])


if __name__ == "__main__":
    main()
