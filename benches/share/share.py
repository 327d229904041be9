#!/usr/bin/env python3
"""benches/share/share.py: share groups (KIP-932), es against Apache Kafka 4.4, side by side.

Started by benches/share/run (which builds es-broker and the load generator, ShareBench, and
fetches Kafka first); see `benches/share/run --help`. What it measures, for each broker:
acknowledged records per second when 1, 4 and 16 share consumers of one share group consume
one partition that was filled beforehand with 1 KiB records, each record ACCEPTed explicitly
(and, as a second case, acknowledged implicitly); the broker's CPU seconds per 100,000
acknowledged records; and for es, the fsyncs of its share journals per acknowledged record.

Targets:

  es           es-broker as benches/run starts it: release build, defaults (a produce is
               fsynced before it is acknowledged; share state, acquisitions and
               acknowledgements, is fsynced before the answer whatever the flags say), its
               schema registry's listener off (--schema-registry-listen none: its default
               port, 8081, would collide with another es on the machine)
  kafka        one single-node KRaft Kafka 4.4 from scripts/kafka-ref, its defaults (share
               state goes to the __share_group_state topic; nothing fsynced before the answer)
  kafka-fsync  (full profile, or --kafka-fsync) a second Kafka, the same but with
               log.flush.interval.messages=1: every append to __share_group_state (where the
               share coordinator writes acknowledgements) is fsynced before it completes; the
               data topic is created with flush.messages at Kafka's default so that filling
               it is not slowed down (nothing writes to it while it is consumed)

Share-group settings are the defaults of both brokers (the same: share.record.lock.duration.ms
30000, group.share.partition.max.record.locks 2000, share.delivery.count.limit 5, the client's
max.poll.records 500 and batch_optimized acquisition); only share.auto.offset.reset=earliest is
set, per group, through Admin before its consumers start. A fresh Kafka 4.4 finalises
share.version at 2 by itself (compat-tests/queue-check/README.md), so nothing else is enabled.

A run: ShareBench (benches/share/java) in its own JVM makes a new group, starts N consumers
(threads) at once, and ends when R records (the whole topic) are acknowledged; the group is
deleted afterwards. The figure is over a window that opens when every member has its
assignment and a tenth of the records are acknowledged, and closes at the last
acknowledgement (ShareBench's header has the details); the harness reads the broker's CPU
(/proc/<pid>/stat) and es's /metrics at the window's two ends, which ShareBench prints as they
happen. es's fsyncs per acknowledged record are over the whole run (every one of the R
records): es_share_journal_fsyncs_total over the accept, release and reject counts of
es_share_acknowledged_records_total (docs/metrics.md). --modes tool runs Kafka's own
ShareConsumerPerformance instead (implicit only; its figure includes joining the group). During a run the other brokers are paused (SIGSTOP, bench.Bench.alone), and each run
starts after an untimed sync.

Every cell (mode x consumer count) runs in rounds; a round runs each target once, in the order
A B C, then C B A, after one uncounted warm-up run per target at the start. Figures are medians
over the rounds with their range; ratios are taken per round, then their median. Results:
target/bench/share.json and target/bench/share.md (the table, also printed). Every process this
starts is stopped on exit (atexit, SIGINT/SIGTERM/SIGHUP); every child process has a time bound.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import bench  # noqa: E402  (benches/bench.py: processes, brokers, pausing, medians)
import kafkawire  # noqa: E402

OUT = os.path.join(ROOT, "target", "bench", "share")
# bench.Broker writes its log to bench.BENCH and starts bench.ES_BIN: ours, so that a
# concurrent benches/run cannot swap the binary under this run.
bench.BENCH = OUT
bench.ES_BIN = os.path.join(OUT, "bin", "es-broker")
JAVA_DIR = os.path.join(OUT, "java")
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2.properties")
REPORT_MD = os.path.join(ROOT, "target", "bench", "share.md")
REPORT_JSON = os.path.join(ROOT, "target", "bench", "share.json")
HOST = bench.HOST

TOPIC = "share-bench"
RECORD_BYTES = 1024
COUNTS = [1, 4, 16]
MODES = ["explicit", "implicit"]
# Kafka's own ShareConsumerPerformance (kafka-tools 4.4, kafka-share-consumer-perf-test.sh):
# implicit acknowledgement only, and its clock runs from before its consumers join the group.
TOOL = "tool"
# The share APIs es must advertise (ApiVersions keys).
SHARE_APIS = {76: "ShareGroupHeartbeat", 78: "ShareFetch", 79: "ShareAcknowledge"}
FSYNC_SETS = ["log.flush.interval.messages=1"]
# The fsync Kafka's data topic keeps Kafka's default (Long.MAX: no flush per append), so that
# filling it is not slowed down: only the share state it writes while consumed is fsynced.
FILL_TOPIC_NOFSYNC = ["flush.messages=9223372036854775807"]

PROFILES = {
    "quick": dict(rounds=2, records=100_000, kafka_fsync=False),
    "full": dict(rounds=5, records=200_000, kafka_fsync=True),
}
WARMUP = ("explicit", 4)   # the uncounted first run of each target
FILL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 600        # one ShareBench run, JVM start to exit
JAVA_HEAP = "-Xmx1G"


def log(msg):
    print(f"[share {time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


T0 = time.monotonic()


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, cwd=ROOT,
                              timeout=60).stdout.strip()
    except subprocess.TimeoutExpired:
        return ""


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def busy(seconds=2.0, top=5):
    """What else uses the machine: the processes that used the most CPU over `seconds`, as
    "name share-of-one-core", busiest first (from /proc/<pid>/stat)."""
    def snap():
        out = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        st = f.read()
                except OSError:
                    continue
                fields = st.rsplit(")", 1)[1].split()
                out[int(d)] = (st[st.index("(") + 1:st.rindex(")")], int(fields[11]) + int(fields[12]))
        return out
    a = snap()
    time.sleep(seconds)
    b = snap()
    use = sorted(((t - a.get(pid, (n, t))[1], n) for pid, (n, t) in b.items()), reverse=True)
    return [f"{n} {d / bench.CLK_TCK / seconds:.2f}" for d, n in use[:top] if d > 0]


def java_argv(*args):
    cp = os.path.join(JAVA_DIR, "classes") + ":" + os.path.join(JAVA_DIR, "lib", "*")
    return ["java", JAVA_HEAP, "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={LOG4J}",
            "-Dkafka.ref.log.level=WARN", "-Dkafka.ref.log.target=SYSTEM_ERR",
            "-cp", cp, "es.bench.ShareBench", *map(str, args)]


def killpg(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass


def run_cmd(argv, timeout):
    """A tool in its own process group: (rc, stdout, stderr, wall seconds); rc None after a
    timeout, when the whole group is killed. As bench.run_cmd, but a stop of the harness
    (SIGTERM, Ctrl-C) while the tool runs kills its group too, rather than leaving it to run."""
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, cwd=ROOT)
    bench.RUNNING.add(p)
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        killpg(p)
        out, err = p.communicate()
        rc = None
    except BaseException:
        killpg(p)
        raise
    finally:
        bench.RUNNING.discard(p)
    return rc, out, err, time.monotonic() - t


def es_metrics(b):
    """es's share counters (and its fsyncs of everything) from /metrics; None for Kafka or
    when the scrape fails."""
    if b.name != "es":
        return None
    try:
        with urllib.request.urlopen(f"http://{b.admin}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = {"acked": {}}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        mm = re.match(r'es_share_acknowledged_records_total\{type="(\w+)"\} (\S+)', line)
        if mm:
            m["acked"][mm.group(1)] = float(mm.group(2))
            continue
        for key, name in (("share_fsyncs", "es_share_journal_fsyncs_total"),
                          ("acquired", "es_share_acquired_records_total"),
                          ("lock_expirations", "es_share_lock_expirations_total"),
                          ("fsyncs", "es_fsyncs_total")):
            if line.startswith(name + " "):
                m[key] = float(line.split()[1])
    return m


def metrics_delta(a, b):
    """What es's counters did between two scrapes: share fsyncs, acknowledgements by type,
    and share fsyncs per acknowledged record (accept, release and reject, as docs/metrics.md
    defines it)."""
    if not a or not b:
        return None
    d = {k: b.get(k, 0) - a.get(k, 0) for k in ("share_fsyncs", "acquired", "lock_expirations", "fsyncs")}
    d["acked"] = {t: b["acked"].get(t, 0) - a["acked"].get(t, 0) for t in b["acked"]}
    n = sum(d["acked"].get(t, 0) for t in ("accept", "release", "reject"))
    d["acked_records"] = n
    d["share_fsyncs_per_acked"] = d["share_fsyncs"] / n if n else None
    return d


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


class EsBroker(bench.Broker):
    """es-broker as bench.Broker starts it (release binary, defaults, its Kafka listener and its
    admin listener two ports above), but without its schema registry's HTTP listener, which
    would otherwise take its default port 8081 and collide with any other es on the machine."""

    def start_fresh(self, extra_sets=(), long_session=True):
        shutil.rmtree(self.data_dir, ignore_errors=True)
        os.makedirs(self.data_dir, exist_ok=True)
        self.cmdline = [bench.ES_BIN, "--data-dir", self.data_dir, "--listen", self.bootstrap,
                        "--admin-listen", self.admin, "--schema-registry-listen", "none"]
        self.logf = open(os.path.join(OUT, "es.log"), "ab")
        t = time.monotonic()
        self.proc = subprocess.Popen(self.cmdline, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        self.pid = self.proc.pid
        self.wait_listening(t)
        log(f"es serving on {self.bootstrap} (pid {self.pid}; /metrics on {self.admin})")


class ShareBench(bench.Bench):
    """bench.Bench's brokers and helpers with a share-group case of its own."""

    def __init__(self, args):
        self.args = args
        self.p = dict(PROFILES["quick" if args.quick else "full"])
        if args.rounds:
            self.p["rounds"] = args.rounds
        if args.records:
            self.p["records"] = args.records
        if args.kafka_fsync is not None:
            self.p["kafka_fsync"] = args.kafka_fsync
        self.counts = args.consumers or COUNTS
        self.modes = args.modes or MODES
        self.targets = ["es", "kafka"] + (["kafka-fsync"] if self.p["kafka_fsync"] else [])
        # es on base (its admin listener, /metrics, on base + 2), Kafka on base + 1, the
        # fsync Kafka on base + 3: the first base, in steps of 10, with all four free.
        base = next((b for b in range(args.port_base, args.port_base + 100, 10)
                     if all(bench.port_free(b + i) for i in range(4))), None)
        if base is None:
            raise SystemExit(f"no free ports in {args.port_base}-{args.port_base + 103}; "
                             "set ES_BENCH_SHARE_PORT_BASE")
        data = os.path.join(OUT, "data")
        self.es = EsBroker("es", base, os.path.join(data, "es"))
        self.kafka = bench.Broker("kafka", base + 1, os.path.join(data, "kafka"))
        self.kafka_fsync = bench.Broker("kafka-fsync", base + 3, os.path.join(data, "kafka-fsync"))
        self.results = {"meta": {}, "fill": {}, "warmup": {}, "cells": []}

    def broker(self, target):
        return {"es": self.es, "kafka": self.kafka, "kafka-fsync": self.kafka_fsync}[target]

    def alone(self, b=None):
        """bench.Bench.alone for any number of brokers: the others paused while b runs."""
        import contextlib

        @contextlib.contextmanager
        def ctx():
            others = [self.broker(t) for t in self.targets if self.broker(t) is not b]
            for o in others:
                o.pause()
            try:
                yield
            finally:
                for o in others:
                    o.resume()
        return ctx()

    # ------------------------------------------------------------ set-up

    def start_brokers(self):
        for t in self.targets:
            b = self.broker(t)
            b.start_fresh(extra_sets=FSYNC_SETS if t == "kafka-fsync" else ())
        apis = kafkawire.api_versions(HOST, self.es.port)
        missing = [n for k, n in SHARE_APIS.items() if k not in apis]
        if missing:
            raise SystemExit(f"es does not advertise {', '.join(missing)}: nothing to measure")

    def fill(self, t):
        """Creates the topic (1 partition) and produces R records of 1 KiB into it with Kafka's
        ProducerPerformance (acks=all, linger.ms 5, batch.size 16384: Kafka 4's defaults, as
        benches/run's produce case), the other brokers paused; checks the end offset."""
        b = self.broker(t)
        n = self.p["records"]
        cfg = [a for kv in (FILL_TOPIC_NOFSYNC if t == "kafka-fsync" else []) for a in ("--config", kv)]
        rc, out, err, _ = run_cmd(java_argv("create-topic", "--bootstrap", b.bootstrap,
                                                     "--topic", TOPIC, *cfg), timeout=180)
        if rc != 0:
            raise RuntimeError(f"creating {TOPIC} on {t}: {(err or out)[-800:]}")
        argv = [bench.KREF, "run", "org.apache.kafka.tools.ProducerPerformance",
                "--bootstrap-server", b.bootstrap, "--topic", TOPIC, "--num-records", str(n),
                "--record-size", str(RECORD_BYTES), "--throughput", "-1",
                "--command-property", "acks=all", f"linger.ms={bench.LINGER_MS}",
                f"batch.size={bench.BATCH_BYTES}"]
        with self.alone(b):
            rc, out, err, wall = run_cmd(argv, timeout=FILL_TIMEOUT_S)
        if rc != 0:
            raise RuntimeError(f"filling {TOPIC} on {t}: {(err or out)[-800:]}")
        import socket
        with socket.create_connection((HOST, b.port), timeout=10) as s:
            end = kafkawire.end_offsets(s, TOPIC, 1).get(0)
        if end != n:
            raise RuntimeError(f"{TOPIC} on {t} ends at {end}, not {n}")
        os.sync()
        last = [l for l in out.splitlines() if "records sent" in l][-1:]
        log(f"filled {t}: {n:,} records of {RECORD_BYTES} B in {wall:.1f} s "
            f"({last[0].split(',')[1].strip() if last else '?'})")
        return {"records": n, "wall_s": round(wall, 2), "producer": last[0] if last else None}

    # ------------------------------------------------------------ one run

    def run_tool(self, t, n, group):
        """One run of Kafka's ShareConsumerPerformance (--threads n) against target t, after
        ShareBench has set the group's share.auto.offset.reset=earliest; the group is deleted
        afterwards. Its figure (nMsg.sec) is R over the time from before its consumers joined
        to the last record received; the broker's CPU is over the tool's whole run."""
        b = self.broker(t)
        n_rec = self.p["records"]
        rc, out, err, _ = run_cmd(java_argv("group-config", "--bootstrap", b.bootstrap,
                                                     "--group", group), timeout=180)
        if rc != 0:
            return {"ok": False, "target": t, "errors": [f"group-config: {(err or out)[-500:]}"]}
        argv = [bench.KREF, "run", "org.apache.kafka.tools.ShareConsumerPerformance",
                "--bootstrap-server", b.bootstrap, "--topic", TOPIC, "--group", group,
                "--num-records", str(n_rec), "--threads", str(n), "--timeout", "60000"]
        la = loadavg()
        os.sync()
        m0 = es_metrics(b)
        with self.alone(b), bench.Sampler(b.pid) as s:
            rc, out, err, wall = run_cmd(argv, timeout=RUN_TIMEOUT_S)
        m1 = es_metrics(b)
        run_cmd(java_argv("delete-group", "--bootstrap", b.bootstrap, "--group", group), timeout=120)
        # start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms
        rows = [l.split(", ") for l in out.splitlines() if re.match(r"\d{4}-\d\d-\d\d ", l)]
        r = {"ok": False, "target": t, "rc": rc, "loadavg": la, "wall_s": round(wall, 2),
             "broker_cpu_s": round(s.cpu_s, 3), "broker_rss_peak_mb": round(s.peak / 1024, 1)}
        if rc == 0 and rows and len(rows[-1]) >= 7 and int(rows[-1][5]) >= n_rec:
            got = int(rows[-1][5])
            r.update(ok=True, received=got, records_per_s=float(rows[-1][4]),
                     fetch_ms=float(rows[-1][6]), cpu_s_per_100k=s.cpu_s / got * 1e5)
        else:
            r["errors"] = [(err or out)[-800:]]
            log(f"  {t} ShareConsumerPerformance {n} threads FAILED: {r['errors'][0][-300:]}")
        d = metrics_delta(m0, m1)
        if d:
            r["es_run"] = d
            r["share_fsyncs_per_acked"] = d["share_fsyncs_per_acked"]
        return r

    def run_one(self, t, mode, n, group):
        """One ShareBench run against target t; returns its JSON with the broker's CPU and
        es's counters over the window and the whole run."""
        if mode == TOOL:
            return self.run_tool(t, n, group)
        b = self.broker(t)
        argv = java_argv("consume", "--bootstrap", b.bootstrap, "--topic", TOPIC, "--group", group,
                         "--consumers", n, "--records", self.p["records"], "--mode", mode,
                         "--timeout-s", RUN_TIMEOUT_S - 60,
                         *[a for kv in self.args.property for a in ("--property", kv)])
        la = loadavg()
        os.sync()
        marks = {}
        lines = []
        m0 = es_metrics(b)
        with self.alone(b), bench.Sampler(b.pid) as s:
            t0 = time.monotonic()
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, cwd=ROOT)
            bench.RUNNING.add(p)
            errs = []
            th = threading.Thread(target=lambda: errs.append(p.stderr.read()), daemon=True)
            th.start()
            killer = threading.Timer(RUN_TIMEOUT_S, killpg, (p,))
            killer.start()
            try:
                for line in p.stdout:
                    if line.startswith("MARK "):
                        what = line.split()[1]
                        marks[what] = {"t": time.monotonic() - t0, "ticks": bench.cpu_ticks(b.pid),
                                       "metrics": es_metrics(b)}
                    else:
                        lines.append(line)
                rc = p.wait()
            except BaseException:
                # Stopped (SIGTERM, Ctrl-C) mid-run: bench.cleanup no longer sees it once it
                # leaves RUNNING below, so its group goes here.
                killpg(p)
                raise
            finally:
                killer.cancel()
                bench.RUNNING.discard(p)
            th.join(10)
            wall = time.monotonic() - t0
        m1 = es_metrics(b)
        try:
            r = json.loads([l for l in lines if l.startswith("{")][-1])
        except (IndexError, ValueError):
            r = {"ok": False, "errors": [("".join(errs) or "".join(lines))[-800:]]}
        r.update(target=t, rc=rc, wall_s=round(wall, 2), loadavg=la,
                 broker_cpu_s=round(s.cpu_s, 3), broker_rss_peak_mb=round(s.peak / 1024, 1),
                 broker_busiest_thread=s.busiest)
        if not self.args.keep_client_metrics:
            r.pop("client", None)
        if "warm" in marks and "end" in marks:
            cpu = (marks["end"]["ticks"] - marks["warm"]["ticks"]) / bench.CLK_TCK
            r["window_cpu_s"] = round(cpu, 3)
            k = r.get("window_records")
            if k:
                r["cpu_s_per_100k"] = cpu / k * 1e5
            d = metrics_delta(marks["warm"]["metrics"], marks["end"]["metrics"])
            if d:
                r["es_window"] = d
        d = metrics_delta(m0, m1)
        if d:
            r["es_run"] = d
            r["share_fsyncs_per_acked"] = d["share_fsyncs_per_acked"]
            if d["acked"].get("accept") != self.p["records"]:
                r.setdefault("notes", []).append(
                    f"es counted {d['acked'].get('accept')} accepts, not {self.p['records']}")
        if not r.get("ok"):
            log(f"  {t} {mode} {n} consumers FAILED: {'; '.join(map(str, r.get('errors', [])))[:400]}"
                f" {''.join(errs)[-400:]}")
        return r

    # ------------------------------------------------------------ the whole

    def stop_leftover_kafkas(self):
        """At exit, after bench.cleanup: a Kafka whose start was interrupted has a pid file
        (scripts/kafka-ref writes it at once) but no bench.Broker pid; stop it as kafka-ref
        stop would (continued, SIGTERM, a bounded wait, SIGKILL)."""
        for b in (self.kafka, self.kafka_fsync):
            f = os.path.join(ROOT, "target", "kafka-ref", str(b.port), "pid")
            try:
                with open(f) as fh:
                    pid = int(fh.read().strip())
            except (OSError, ValueError):
                continue
            if bench.proc_alive(pid):
                try:
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGTERM)
                    end = time.monotonic() + bench.STOP_WAIT_S
                    while bench.proc_alive(pid) and time.monotonic() < end:
                        time.sleep(0.1)
                    if bench.proc_alive(pid):
                        os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.unlink(f)
            except OSError:
                pass

    def run(self):
        import atexit
        atexit.register(self.stop_leftover_kafkas)  # runs after bench.cleanup (LIFO)
        bench.atexit_register()
        os.makedirs(OUT, exist_ok=True)
        self.results["meta"] = self.meta()
        self.save()
        self.start_brokers()
        for t in self.targets:
            self.results["fill"][t] = self.fill(t)
        log(f"warm-up: one uncounted run per target ({WARMUP[0]}, {WARMUP[1]} consumers)")
        for t in self.targets:
            r = self.run_one(t, WARMUP[0], WARMUP[1], f"sb-warmup-{t}")
            self.results["warmup"][t] = r
            log(f"  {t}: {r.get('records_per_s') or 0:,.0f} acknowledged/s")
        for mode in self.modes:
            for n in self.counts:
                cell = {"mode": mode, "consumers": n, "runs": {t: [] for t in self.targets}}
                log(f"{mode} acknowledgement, {n} consumer(s)")
                for i in range(self.p["rounds"]):
                    for t in bench.round_order(i, self.targets):
                        r = self.run_one(t, mode, n, f"sb-{mode}-c{n}-r{i}-{t}")
                        r["round"] = i
                        cell["runs"][t].append(r)
                    log(f"  round {i}: " + " | ".join(
                        f"{t} {cell['runs'][t][-1].get('records_per_s') or 0:,.0f}/s "
                        f"cpu/100k {fmt(cell['runs'][t][-1].get('cpu_s_per_100k'))} s"
                        + (f" fsyncs/ack {fmt(cell['runs'][t][-1].get('share_fsyncs_per_acked'), 3)}"
                           if t == "es" else "") for t in self.targets))
                summarize_cell(cell, self.targets)
                self.results["cells"].append(cell)
                self.save()
        for t in self.targets:
            self.broker(t).stop()
        self.stop_leftover_kafkas()
        shutil.rmtree(os.path.join(OUT, "data"), ignore_errors=True)
        self.results["meta"]["loadavg_end"] = loadavg()
        self.results["meta"]["machine"]["busy_end"] = busy()
        self.results["meta"]["elapsed_s"] = round(time.monotonic() - T0, 1)
        self.save()
        md = table(self.results)
        with open(REPORT_MD, "w") as f:
            f.write(md)
        print(md)
        log(f"done in {self.results['meta']['elapsed_s']:.0f} s: {REPORT_MD}, {REPORT_JSON}")

    def save(self):
        tmp = REPORT_JSON + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.results, f, indent=1, default=str)
        os.replace(tmp, REPORT_JSON)

    def meta(self):
        if not os.access(bench.ES_BIN, os.X_OK):
            raise SystemExit(f"no es-broker at {bench.ES_BIN} (benches/share/run puts it there)")
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "profile": "quick" if self.args.quick else "full",
            "overridden": [k for k in ("rounds", "records", "consumers", "modes", "kafka_fsync", "property")
                           if getattr(self.args, k) not in (None, [])],
            "rounds": self.p["rounds"], "records": self.p["records"], "record_bytes": RECORD_BYTES,
            "targets": self.targets, "consumers": self.counts, "modes": self.modes,
            "machine": {"nproc": os.cpu_count(), "kernel": platform.release(),
                        "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
                        "disk": sh(f"findmnt -n -o SOURCE,FSTYPE,OPTIONS -T {ROOT}/target"),
                        "loadavg_start": loadavg(),
                        "busy_start": busy()},
            "versions": {"es_git": sh("git rev-parse --short HEAD"),
                         "es_tree_dirty": sh("git status --porcelain --untracked-files=no -- crates "
                                             "Cargo.toml Cargo.lock").splitlines(),
                         "es_binary_mtime": datetime.datetime.fromtimestamp(
                             os.path.getmtime(bench.ES_BIN), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                         "kafka": sh(f"{bench.KREF} version 2>/dev/null"),
                         "kafka_clients": "4.4.0 (benches/share/java/pom.xml)",
                         "java": sh("java -version 2>&1 | head -1")},
            "settings": {
                "group": "share.auto.offset.reset=earliest (Admin, before the consumers start); "
                         "every other share.* config the broker's default",
                "consumer": "KafkaShareConsumer 4.4.0 defaults (max.poll.records 500, "
                            "share.acquire.mode batch_optimized, fetch.max.bytes 52428800, "
                            "fetch.max.wait.ms 500) but share.acknowledgement.mode; one JVM, one "
                            "thread per consumer",
                "consumer_properties": self.args.property,
                "producer": f"ProducerPerformance, acks=all linger.ms={bench.LINGER_MS} "
                            f"batch.size={bench.BATCH_BYTES}, {RECORD_BYTES} B records",
                "es_flags": "defaults (fsync before every acknowledgement); "
                            "--schema-registry-listen none",
                "kafka_fsync_sets": FSYNC_SETS,
                "other_brokers": "paused (SIGSTOP) during each measured run",
            },
            "command": " ".join(["benches/share/run"] + sys.argv[1:]),
        }


def fmt(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def summarize_cell(cell, targets):
    runs = cell["runs"]
    keys = ["records_per_s", "all_records_per_s", "cpu_s_per_100k", "share_fsyncs_per_acked",
            "assigned_ms", "broker_rss_peak_mb"]
    cell["median"] = {t: {k: bench.median([r.get(k) for r in runs[t] if r.get("ok")]) for k in keys}
                      for t in targets}
    cell["range"] = {t: {k: spread([r.get(k) for r in runs[t] if r.get("ok")]) for k in keys}
                     for t in targets}
    cell["ratio_rounds"] = {}
    for den in [t for t in targets if t != "es"]:
        for k in ("records_per_s", "cpu_s_per_100k"):
            xs = [bench.ratio(a.get(k), b.get(k)) if a.get("ok") and b.get("ok") else None
                  for a, b in zip(runs["es"], runs[den])]
            cell["ratio_rounds"][f"{k} es/{den}"] = xs
    cell["ratio"] = {k: bench.median(v) for k, v in cell["ratio_rounds"].items()}
    cell["failed_runs"] = {t: sum(1 for r in runs[t] if not r.get("ok")) for t in targets}


def table(res):
    """The Markdown report: conditions, then one table of medians (range) per cell."""
    meta = res["meta"]
    targets = meta["targets"]

    def num(x, nd=0):
        return "n/a" if x is None else f"{x:,.{nd}f}"

    def med_rng(cell, t, k, nd=0):
        m = cell["median"][t][k]
        lo, hi = cell["range"][t][k]
        if m is None:
            return "n/a"
        if lo is None or cell["range"][t][k] == (m, m) or meta["rounds"] < 2:
            return num(m, nd)
        return f"{num(m, nd)} ({num(lo, nd)}-{num(hi, nd)})"

    def rat(cell, k):
        xs = [x for x in cell["ratio_rounds"].get(k, []) if x is not None]
        if not xs:
            return "n/a"
        if len(xs) == 1:
            return f"{xs[0]:.2f}"
        return f"{bench.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

    out = [f"## Share groups: es against Apache Kafka {meta['versions']['kafka']} "
           f"({meta['date']}, {meta['profile']} profile"
           + (f", {', '.join(meta['overridden'])} set" if meta.get("overridden") else "") + ")", ""]
    out.append(f"One partition of {meta['records']:,} records of {meta['record_bytes']} B, filled "
               f"beforehand; N KafkaShareConsumers (kafka-clients {meta['versions']['kafka_clients'].split()[0]}) of one "
               f"share group in one JVM; {meta['rounds']} rounds, medians with the range over the "
               "rounds in brackets; es/Kafka ratios per round, then their median. "
               "Acknowledged records per second over the window from every member assigned and a "
               "tenth acknowledged to the last acknowledgement; broker CPU over the same window. "
               + (f"Consumer settings changed from the defaults: {', '.join(meta['settings']['consumer_properties'])}. "
                  if meta["settings"].get("consumer_properties") else "Consumers with the client's defaults. ")
               + f"es {meta['versions']['es_git']}"
               + (" (tree changed: " + ", ".join(meta['versions']['es_tree_dirty']) + ")"
                  if meta["versions"]["es_tree_dirty"] else "")
               + f"; machine: {meta['machine']['nproc']} cores, load average "
               f"{meta['machine']['loadavg_start'][0]:.2f} at the start, "
               f"{meta.get('loadavg_end', ['?'])[0]} at the end.")
    out.append("")
    head = ["acknowledgement", "consumers", "es records/s", "Kafka records/s", "es / Kafka"]
    if "kafka-fsync" in targets:
        head += ["Kafka fsync records/s", "es / Kafka fsync"]
    head += ["es share fsyncs per acknowledged record", "es CPU s per 100k", "Kafka CPU s per 100k"]
    if "kafka-fsync" in targets:
        head += ["Kafka fsync CPU s per 100k"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|")
    for cell in res["cells"]:
        label = {TOOL: "implicit, Kafka's ShareConsumerPerformance (clock includes joining)"}
        row = [label.get(cell["mode"], cell["mode"]), str(cell["consumers"]), med_rng(cell, "es", "records_per_s"),
               med_rng(cell, "kafka", "records_per_s"), rat(cell, "records_per_s es/kafka")]
        if "kafka-fsync" in targets:
            row += [med_rng(cell, "kafka-fsync", "records_per_s"), rat(cell, "records_per_s es/kafka-fsync")]
        row += [med_rng(cell, "es", "share_fsyncs_per_acked", 4), med_rng(cell, "es", "cpu_s_per_100k", 2),
                med_rng(cell, "kafka", "cpu_s_per_100k", 2)]
        if "kafka-fsync" in targets:
            row += [med_rng(cell, "kafka-fsync", "cpu_s_per_100k", 2)]
        out.append("| " + " | ".join(row) + " |")
    failed = {f"{c['mode']}/{c['consumers']}": c["failed_runs"] for c in res["cells"]
              if any(c["failed_runs"].values())}
    out.append("")
    if failed:
        out.append(f"Failed runs (left out of the medians): {json.dumps(failed)}.")
    m = meta["machine"]
    out.append("Other processes busiest over 2 s (share of one core) at the start: "
               + (", ".join(m.get("busy_start") or []) or "none") + "; at the end: "
               + (", ".join(m.get("busy_end") or []) or "none") + ".")
    out.append(f"Command: `{meta['command']}`; elapsed {meta.get('elapsed_s', '?')} s; "
               f"figures per run in {os.path.relpath(REPORT_JSON, ROOT)}.")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(prog="benches/share/run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 rounds, 100,000 records, no kafka-fsync")
    ap.add_argument("--rounds", type=int, help="rounds per cell (quick 2, full 5)")
    ap.add_argument("--records", type=int, help="records in the topic, consumed by every run")
    ap.add_argument("--consumers", type=int, nargs="+", help="consumer counts (default 1 4 16)")
    ap.add_argument("--modes", nargs="+", choices=MODES + [TOOL],
                    help="explicit, implicit (ShareBench; default both) and tool (Kafka's "
                         "ShareConsumerPerformance, implicit, its clock including the join)")
    ap.add_argument("--kafka-fsync", dest="kafka_fsync", action="store_true", default=None,
                    help="also the Kafka with log.flush.interval.messages=1 (full profile: on)")
    ap.add_argument("--no-kafka-fsync", dest="kafka_fsync", action="store_false")
    ap.add_argument("--property", action="append", default=[], metavar="K=V",
                    help="a consumer setting for every ShareBench consumer (repeatable), e.g. "
                         "fetch.max.bytes=1048576; the report says which were set")
    ap.add_argument("--keep-client-metrics", action="store_true",
                    help="keep each consumer's own ShareFetch metrics in the JSON")
    ap.add_argument("--port-base", type=int,
                    default=int(os.environ.get("ES_BENCH_SHARE_PORT_BASE", "39600")))
    args = ap.parse_args()
    ShareBench(args).run()


if __name__ == "__main__":
    main()
