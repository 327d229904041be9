#!/usr/bin/env python3
"""benches/bench.py: es against Apache Kafka, side by side, on this machine.

Started by `benches/run` (which builds es-broker and the librdkafka load
generator and fetches Kafka first); see `benches/run --help`. It starts one
es-broker and one single-node KRaft Kafka (scripts/kafka-ref, data dirs both
under target/bench/), then drives them in turn with the same load generators:
Kafka's ProducerPerformance / ConsumerPerformance / EndToEndLatency and
es-loadgen (librdkafka). Three targets take part:

  es           es-broker defaults: fsync before every acknowledgement
  kafka        Kafka defaults: acknowledged from the page cache, no fsync
  kafka-fsync  the same Kafka, topic flush.messages=1 and flush.ms=0

and, in the produce case and the latency case at 10,000 records/s, a fourth
that measures a limit rather than a product setting:

  es-nofsync   the same es, topic flush.messages and flush.ms at Kafka's
               defaults (no fsync before acknowledgement): what es's path
               costs without the disk's wait, so that the fsync's share of
               a gap is measured, not guessed

Every measured case runs in rounds; a round runs each target once (order
A B C, then C B A, so that drift on this shared machine cancels), after one
warm-up run per target that is not counted. Figures are medians over the
rounds, and es/Kafka ratios are taken per round, then their median. Both
brokers take uncounted load before the first case (warm_brokers), every
produce run starts after an untimed sync, and a deleted topic's files are
gone before the next run, so that no target pays for another's leftovers.
Everything goes to target/bench/results.json; report.py turns it into
markdown and charts.

Every process this starts is stopped on exit (atexit and SIGINT/SIGTERM); every
loop and every child process has a bound.
"""

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import kafkawire

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "target", "bench")
LOADGEN = os.path.join(ROOT, "target", "loadgen", "release", "es-loadgen")
KREF = os.path.join(ROOT, "scripts", "kafka-ref")
ES_BIN = os.path.join(BENCH, "bin", "es-broker")
CLK_TCK = os.sysconf("SC_CLK_TCK")
HOST = "127.0.0.1"

TARGETS = ["es", "kafka", "kafka-fsync"]
FSYNC_TOPIC_CONFIG = ["flush.messages=1", "flush.ms=0"]
# The limit target (see above): Kafka's own defaults for the two configs.
NOFSYNC = "es-nofsync"
NOFSYNC_TOPIC_CONFIG = ["flush.messages=9223372036854775807", "flush.ms=9223372036854775807"]
PRODUCE_TARGETS = TARGETS + [NOFSYNC]
CASES = ["limits", "produce", "latency", "e2e", "consume", "restart"]
STORAGE_BENCH = os.path.join(BENCH, "bin", "es-storage-bench")

# Java producer settings: Kafka 4 defaults, spelled out so that both brokers
# and both generators get exactly these.
LINGER_MS = 5
BATCH_BYTES = 16384

PROFILES = {
    "quick": dict(rounds=2, produce_s=1.0, warm_s=0.5, lat_s=2.0, e2e_records=300,
                  e2e_s=2.0, consume_records=2_000_000, restart_bytes=512 << 20,
                  clean_restarts=2, limit_s=0.5, seq_bytes=256 << 20, java_records=200_000,
                  java_warmup=100_000, broker_warm_s=3.0),
    "full": dict(rounds=5, produce_s=3.0, warm_s=1.0, lat_s=4.0, e2e_records=1000,
                 e2e_s=4.0, consume_records=2_000_000, restart_bytes=5 << 30,
                 clean_restarts=3, limit_s=1.0, seq_bytes=1 << 30, java_records=500_000,
                 java_warmup=400_000, broker_warm_s=10.0),
}

# Produce cells: (id, generator, partitions, producers, record bytes).
PRODUCE_CELLS = [
    ("java-p1-w1-256", "java", 1, 1, 256),
    ("java-p8-w1-256", "java", 8, 1, 256),
    ("java-p1-w1-1k", "java", 1, 1, 1024),
    ("rdk-p1-w1-256", "rdkafka", 1, 1, 256),
    ("rdk-p8-w1-256", "rdkafka", 8, 1, 256),
    ("rdk-p1-w4-256", "rdkafka", 1, 4, 256),
    ("rdk-p8-w4-256", "rdkafka", 8, 4, 256),
    ("rdk-p1-w1-1k", "rdkafka", 1, 1, 1024),
]

# Bounds on child processes (seconds).
TOOL_TIMEOUT_S = 300
BROKER_START_S = 120
RESTART_DEADLINE_S = 900
STOP_WAIT_S = 120


def log(msg):
    t = time.monotonic() - T0
    print(f"[bench {t:7.1f}s] {msg}", file=sys.stderr, flush=True)


T0 = time.monotonic()


# ---------------------------------------------------------------- processes

RUNNING = set()  # Popen objects of tools in flight (own process groups)
BROKERS = []  # Broker objects to stop on exit


def cleanup():
    for p in list(RUNNING):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    for b in BROKERS:
        try:
            b.stop(quiet=True)
        except Exception as e:  # noqa: BLE001 - best effort on the way out
            print(f"bench: stopping {b.name}: {e}", file=sys.stderr)


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def run_cmd(argv, timeout=TOOL_TIMEOUT_S, env=None, threads=None):
    """Runs a tool in its own process group; returns (rc, out, err, wall_s,
    cpu_s). On timeout the whole group is killed and rc is None. With
    `threads` (a dict) the tool's busiest thread goes in threads["busiest"]
    (GroupThreads)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=env, cwd=ROOT)
    RUNNING.add(p)
    gt = GroupThreads(p.pid) if threads is not None else None
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = None
    finally:
        RUNNING.discard(p)
        wall = time.monotonic() - t
        if gt is not None:
            threads["busiest"] = gt.stop(wall)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    return rc, out, err, wall, cpu


def proc_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks."""
    return sum(cpu_split(pid))


def dirty_mb():
    """Page cache waiting to be written back, machine-wide (Dirty + Writeback)."""
    kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(("Dirty:", "Writeback:")):
                kb += int(line.split()[1])
    return kb / 1024


def es_holds_deleted_files(pid, data_dir):
    """Whether es still holds files of data_dir that have been deleted
    (its reclaim thread frees them gradually; see es_storage::reclaim)."""
    root = os.path.realpath(data_dir)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if t.startswith(root) and t.endswith(" (deleted)"):
            return True
    return False


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_split(pid):
    """(utime, stime) of a process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def thread_ticks(pid):
    """{tid: (name, utime + stime ticks)} for every thread of a process."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        fields = st.rsplit(")", 1)[1].split()
        out[int(tid)] = (name, int(fields[11]) + int(fields[12]))
    return out


def group_pids(pgid):
    """Processes of a process group (a tool and the children it started)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            pids.append(int(d))
    return pids


def busiest(before, after, wall):
    """The thread that used the most CPU between two thread_ticks snapshots:
    {name, cpu_s, share} (share: of one core over `wall` seconds)."""
    best = None
    for tid, (name, t1) in after.items():
        d = (t1 - before.get(tid, (name, 0))[1]) / CLK_TCK
        if best is None or d > best["cpu_s"]:
            best = {"name": name, "cpu_s": round(d, 3)}
    if best is None:
        return None
    best["share"] = round(best["cpu_s"] / wall, 3) if wall > 0 else None
    return best


class GroupThreads:
    """The threads of a tool's process group, sampled every 250 ms while it
    runs (the last sample of a thread stands for its total: a thread that
    outlives the run is undercounted by at most one interval)."""

    def __init__(self, pgid):
        self.pgid, self.seen, self.stop_ev = pgid, {}, threading.Event()
        self.th = threading.Thread(target=self._loop, daemon=True)
        self.th.start()

    def _loop(self):
        pids, rescan = [], 0.0
        while not self.stop_ev.wait(0.25):
            if time.monotonic() >= rescan:
                pids, rescan = group_pids(self.pgid), time.monotonic() + 1.0
            for pid in pids:
                for tid, v in thread_ticks(pid).items():
                    self.seen[(pid, tid)] = v

    def stop(self, wall):
        self.stop_ev.set()
        self.th.join()
        return busiest({}, self.seen, wall)


class Sampler:
    """Peak RSS of a process, sampled every 100 ms while a run lasts; its CPU
    (user and system) and its busiest thread over the run."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop_ev = pid, rss_kb(pid), threading.Event()
        self.th = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stop_ev.wait(0.1):
            self.peak = max(self.peak, rss_kb(self.pid))

    def __enter__(self):
        self.split0 = cpu_split(self.pid)
        self.cpu0 = sum(self.split0)
        self.threads0 = thread_ticks(self.pid)
        self.t0 = time.monotonic()
        self.th.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.th.join()
        wall = time.monotonic() - self.t0
        split1 = cpu_split(self.pid)
        self.cpu_s = (sum(split1) - self.cpu0) / CLK_TCK
        self.user_s = (split1[0] - self.split0[0]) / CLK_TCK
        self.sys_s = (split1[1] - self.split0[1]) / CLK_TCK
        self.busiest = busiest(self.threads0, thread_ticks(self.pid), wall)
        self.end = rss_kb(self.pid)
        return False


def port_free(port):
    # SO_REUSEADDR as both brokers set it: TIME_WAIT left by a killed broker
    # does not make the port busy.
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False


class Broker:
    """One broker process: es-broker, or Kafka first started by kafka-ref."""

    def __init__(self, name, port, data_dir):
        self.name, self.port, self.data_dir = name, port, data_dir
        self.pid = None
        self.proc = None
        self.cmdline = None
        self.logf = None
        self.paused = False
        BROKERS.append(self)

    def pause(self):
        """SIGSTOP: the broker keeps its sockets and files but runs nothing."""
        if self.pid and not self.paused and proc_alive(self.pid):
            os.kill(self.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self):
        if self.paused:
            self.paused = False
            if self.pid and proc_alive(self.pid):
                os.kill(self.pid, signal.SIGCONT)

    @property
    def bootstrap(self):
        return f"{HOST}:{self.port}"

    @property
    def admin(self):
        """es's admin HTTP listener (/metrics): two ports above its Kafka
        listener (Kafka's broker has the port between)."""
        return f"{HOST}:{self.port + 2}"

    def fsyncs(self):
        """es's (fsyncs, seconds in them) so far, from its /metrics; None for
        Kafka or when the scrape fails."""
        if self.name != "es":
            return None
        try:
            with urllib.request.urlopen(f"http://{self.admin}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return None
        n = secs = None
        for line in text.splitlines():
            if line.startswith("es_fsyncs_total "):
                n = float(line.split()[1])
            elif line.startswith("es_fsync_seconds_sum "):
                secs = float(line.split()[1])
        return None if n is None else (n, secs or 0.0)

    def spawn(self):
        """Starts the process (data dir as it is); returns the spawn instant."""
        # A killed JVM's leader thread shows as a zombie while its other
        # threads still exit and hold the socket: give the port a moment.
        end = time.monotonic() + 15
        while not port_free(self.port):
            if time.monotonic() > end:
                raise RuntimeError(f"port {self.port} is in use; set ES_BENCH_PORT_BASE")
            time.sleep(0.05)
        os.makedirs(BENCH, exist_ok=True)
        self.logf = open(os.path.join(BENCH, f"{self.name}.log"), "ab")
        if self.name == "es":
            argv = [ES_BIN, "--data-dir", self.data_dir, "--listen", self.bootstrap,
                    "--admin-listen", self.admin]
        else:
            argv = self.cmdline
        t = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     cwd=ROOT)
        self.pid = self.proc.pid
        if self.name == "kafka":
            # Let `scripts/kafka-ref stop --port P` find the relaunched broker too.
            with open(os.path.join(ROOT, "target", "kafka-ref", str(self.port), "pid"), "w") as f:
                f.write(f"{self.pid}\n")
        return t

    def start_fresh(self, extra_sets=(), long_session=True):
        """Starts the broker on an empty data directory. Kafka gets
        `long_session` (see below) unless the restart case asks otherwise."""
        shutil.rmtree(self.data_dir, ignore_errors=True)
        os.makedirs(self.data_dir, exist_ok=True)
        if self.name == "es":
            t = self.spawn()
            self.wait_listening(t)
        else:
            # Deleted topics' files go at once instead of 60 s later, in the
            # middle of some later run (see Bench.delete_topic). With
            # long_session the broker's session with its own controller
            # outlasts a pause (Bench.alone): with the default 9 s a run of es
            # longer than that would fence it. Not for the restart case: after
            # kill -9 the new process cannot register until the old session
            # expires, so a longer session would lengthen Kafka's restart.
            session = ["broker.session.timeout.ms=60000"] if long_session else []
            sets = [a for kv in [f"log.dirs={self.data_dir}", "log.segment.delete.delay.ms=0",
                                 *session, *extra_sets] for a in ("--set", kv)]
            rc, out, err, _, _ = run_cmd([KREF, "start", "--port", str(self.port), *sets],
                                         timeout=BROKER_START_S + 30)
            if rc != 0:
                raise RuntimeError(f"kafka-ref start failed: {err[-2000:]}")
            with open(os.path.join(ROOT, "target", "kafka-ref", str(self.port), "pid")) as f:
                self.pid = int(f.read().strip())
            with open(f"/proc/{self.pid}/cmdline", "rb") as f:
                self.cmdline = [a.decode() for a in f.read().split(b"\0") if a]
            self.proc = None
        log(f"{self.name} serving on {self.bootstrap} (pid {self.pid})")

    def wait_listening(self, t_start, deadline_s=BROKER_START_S):
        end = t_start + deadline_s
        while time.monotonic() < end:
            if self.pid and not proc_alive(self.pid):
                raise RuntimeError(f"{self.name} exited during start-up; see target/bench/{self.name}.log")
            try:
                kafkawire.api_versions(HOST, self.port, timeout=2.0)
                return time.monotonic() - t_start
            except (OSError, Exception):  # noqa: BLE001 - not up yet
                time.sleep(0.02)
        raise RuntimeError(f"{self.name} did not serve within {deadline_s}s")

    def _wait_exit(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is not None:
                if self.proc.poll() is not None:
                    return True
            elif not proc_alive(self.pid):
                return True
            time.sleep(0.02)
        return False

    def stop(self, quiet=False, kill9=False):
        """Clean stop (SIGTERM, bounded wait, then SIGKILL) or kill -9; returns
        seconds until the process was gone."""
        if self.pid is None or not proc_alive(self.pid):
            self.pid = None
            self.paused = False
            return 0.0
        self.resume()  # a stopped process would not act on SIGTERM
        t = time.monotonic()
        os.kill(self.pid, signal.SIGKILL if kill9 else signal.SIGTERM)
        if not self._wait_exit(STOP_WAIT_S):
            if not quiet:
                log(f"{self.name} ignored SIGTERM for {STOP_WAIT_S}s; killing it")
            os.kill(self.pid, signal.SIGKILL)
            self._wait_exit(30)
        took = time.monotonic() - t
        self.pid = None
        if self.name == "kafka":
            # As `kafka-ref stop` does; a zombie not yet reaped by init would
            # otherwise still pass its `kill -0` check.
            try:
                os.unlink(os.path.join(ROOT, "target", "kafka-ref", str(self.port), "pid"))
            except OSError:
                pass
        if self.logf:
            self.logf.close()
            self.logf = None
        return took


# ---------------------------------------------------------------- helpers

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def summarize(runs, keys):
    """{target: {key: median}} over the counted runs."""
    out = {}
    for tgt, rs in runs.items():
        out[tgt] = {k: median([get(r, k) for r in rs]) for k in keys}
    return out


def get(d, path):
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def pair_ratios(runs, key, num="es", den="kafka"):
    a, b = runs.get(num, []), runs.get(den, [])
    return [ratio(get(x, key), get(y, key)) for x, y in zip(a, b)]


def round_order(i, targets):
    return list(targets) if i % 2 == 0 else list(reversed(targets))


class Bench:
    def __init__(self, args):
        self.args = args
        self.p = PROFILES["quick" if args.quick else "full"]
        base = int(os.environ.get("ES_BENCH_PORT_BASE", "39092"))
        self.es = Broker("es", base, os.path.join(BENCH, "data", "es"))
        self.kafka = Broker("kafka", base + 1, os.path.join(BENCH, "data", "kafka"))
        self.results = {"meta": {}, "cases": {}}
        self.idempotence = False

    def broker(self, target):
        return self.es if target in ("es", NOFSYNC) else self.kafka

    @contextlib.contextmanager
    def alone(self, b=None):
        """For the length of a measured run, the broker not under test (both,
        with b None) is stopped with SIGSTOP and continued afterwards. Left
        running, Kafka's JVM burned 0.25-1.3 CPU seconds during each es run of
        5-10 s on these two cores (2-5 clock ticks a second when fresh and
        idle, more after a run of its own), taken from es and its load
        generator; es idle burns nothing. In the restart case Kafka keeps its
        default 9 s controller session (start_fresh), which a pause during an
        es restart stays well under (es serves 5 GiB 3-5 s after kill -9)."""
        others = [x for x in (self.es, self.kafka) if x is not b]
        for o in others:
            o.pause()
        try:
            yield
        finally:
            for o in others:
                o.resume()

    # ------------------------------------------------------------ topics

    def topic(self, base, target):
        return {"kafka-fsync": f"{base}-fsync", NOFSYNC: f"{base}-nofsync"}.get(target, base)

    def create_topic(self, target, name, partitions):
        b = self.broker(target)
        argv = [LOADGEN, "create", "--bootstrap", b.bootstrap, "--topic", name,
                "--partitions", str(partitions)]
        for kv in {"kafka-fsync": FSYNC_TOPIC_CONFIG, NOFSYNC: NOFSYNC_TOPIC_CONFIG}.get(target, []):
            argv += ["--config", kv]
        rc, out, err, _, _ = run_cmd(argv, timeout=60)
        if rc != 0:
            raise RuntimeError(f"create {name} on {target}: {out} {err[-500:]}")
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if kafkawire.topic_ready(HOST, b.port, name, partitions):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{name} on {target} has no leaders after 30s")

    def delete_topic(self, target, name):
        b = self.broker(target)
        rc, out, err, _, _ = run_cmd([LOADGEN, "delete", "--bootstrap", b.bootstrap,
                                      "--topic", name], timeout=60)
        if rc != 0:
            log(f"delete {name} on {target} failed: {out.strip()} {err[-300:]}")
            return
        # Freeing gigabytes on this file system (mounted with `discard`) holds
        # every fsync on it back for a few hundred ms: measured, a 2 GB unlink
        # during an es latency run took its p99 from 8-10 ms to 225-380 ms.
        # es unlinks a topic's files before it answers DeleteTopics and then
        # frees their space a few MiB at a time from its reclaim thread, once
        # nothing reads them (it keeps them open until then); Kafka deletes
        # them on a background thread, after `log.segment.delete.delay.ms`.
        # Wait until the space is free, so that no later run pays for it.
        end = time.monotonic() + 60
        if b is self.es:
            gone = lambda: not es_holds_deleted_files(b.pid, b.data_dir)
        else:
            mine = re.compile(re.escape(name) + r"-\d+(\..*-delete)?$")
            gone = lambda: not any(mine.match(e) for e in os.listdir(b.data_dir))
        while not gone():
            if time.monotonic() > end:
                log(f"delete {name} on {target}: space not freed after 60 s")
                break
            time.sleep(0.1)

    # ------------------------------------------------------------ generators

    def java_props(self):
        return [f"acks=all", f"linger.ms={LINGER_MS}", f"batch.size={BATCH_BYTES}",
                f"enable.idempotence={'true' if self.idempotence else 'false'}"]

    def run_producer(self, target, gen, topic, partitions, producers, size,
                     seconds=None, records=None, rate=0, linger=LINGER_MS, java_warmup=0,
                     alone=True):
        """One produce run; returns a result dict (ok False on failure). The
        Java generator runs `java_warmup` records more first and reports only
        the records after them (ProducerPerformance --warmup-records), so that
        JIT warm-up of the client stays out of the figures. With `alone` the
        other broker is paused meanwhile (Bench.alone)."""
        b = self.broker(target)
        if gen == "rdkafka":
            argv = [LOADGEN, "produce", "--bootstrap", b.bootstrap, "--topic", topic,
                    "--partitions", str(partitions), "--producers", str(producers),
                    "--record-size", str(size), "--linger-ms", str(linger),
                    "--batch-size", str(BATCH_BYTES), "--acks", "all",
                    "--rate", str(rate), "--timeout-s", "240"]
            argv += ["--duration-s", str(seconds)] if seconds else ["--records", str(records)]
        else:
            props = [p for p in self.java_props() if not p.startswith("linger.ms")]
            props.append(f"linger.ms={linger}")
            argv = [KREF, "run", "org.apache.kafka.tools.ProducerPerformance",
                    "--bootstrap-server", b.bootstrap, "--topic", topic,
                    "--num-records", str(int(records) + int(java_warmup)),
                    "--warmup-records", str(int(java_warmup)), "--record-size", str(size),
                    "--throughput", str(int(rate)) if rate else "-1",
                    "--command-property", *props]
        # Kafka's default leaves what it wrote to the page cache; the kernel
        # writes it back about 30 s later, during whichever run comes next
        # (often es's, whose fsyncs then queue behind it). Every run starts
        # with nothing left to write back, by a sync that is not timed.
        dirty = dirty_mb()
        if not os.environ.get("ES_BENCH_NO_SYNC"):
            os.sync()
        other = self.kafka if b is self.es else self.es
        idle0 = cpu_ticks(other.pid)
        gen_threads = {}
        with self.alone(b) if alone else contextlib.nullcontext(), Sampler(b.pid) as s:
            f0 = b.fsyncs()
            rc, out, err, wall, gen_cpu = run_cmd(argv, threads=gen_threads)
            f1 = b.fsyncs()
        # What the broker not under test burned meanwhile (nothing while it is
        # paused; a JVM's JIT, GC and KRaft threads when it is not).
        other_cpu_s = (cpu_ticks(other.pid) - idle0) / CLK_TCK
        r = {"ok": False}
        if gen == "rdkafka":
            try:
                r = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = {"ok": False, "error": err[-500:]}
        else:
            m = None
            for line in out.splitlines():
                # With --warmup-records the last summary is the steady-state one.
                mm = re.match(r"(\d+) (?:steady state )?records sent, ([\d.]+) records/sec .*?, ([\d.]+) ms avg latency, "
                              r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, "
                              r"(\d+) ms 99.9th", line)
                if mm:
                    m = mm
            if m and rc == 0:
                n, rps = int(m.group(1)), float(m.group(2))
                r = {"ok": True, "records": n, "bytes": n * size, "records_per_s": rps,
                     "mb_per_s": rps * size / 1e6, "offered_rate": rate,
                     "latency": {"mean_us": float(m.group(3)) * 1e3,
                                 "p50_us": int(m.group(5)) * 1000, "p95_us": int(m.group(6)) * 1000,
                                 "p99_us": int(m.group(7)) * 1000, "p999_us": int(m.group(8)) * 1000,
                                 "max_us": float(m.group(4)) * 1000, "resolution": "ms"}}
            else:
                r = {"ok": False, "error": (err or out)[-800:]}
        r.update(target=target, gen=gen, wall_s=round(wall, 3), gen_cpu_s=round(gen_cpu, 3),
                 gen_busiest_thread=gen_threads.get("busiest"),
                 broker_cpu_s=s.cpu_s, broker_user_s=s.user_s, broker_sys_s=s.sys_s,
                 broker_busiest_thread=s.busiest,
                 other_broker_cpu_s=round(other_cpu_s, 3),
                 dirty_before_mb=round(dirty, 1),
                 broker_rss_peak_mb=s.peak / 1024,
                 broker_rss_end_mb=s.end / 1024)
        if f0 and f1:
            r["fsyncs"] = f1[0] - f0[0]
            r["fsync_s"] = round(f1[1] - f0[1], 4)
        if r.get("ok") and r.get("bytes"):
            # The broker's CPU covers the Java generator's warm-up records too.
            gb = (r["bytes"] + java_warmup * size) / 1e9
            r["broker_cpu_s_per_gb"] = s.cpu_s / gb
            if "fsyncs" in r:
                r["fsyncs_per_gb"] = r["fsyncs"] / gb
        if not r.get("ok"):
            log(f"  {target} {gen} produce FAILED: {r.get('error', '')[:300]}")
        return r

    def warm_brokers(self):
        """Uncounted load on both fresh brokers before the first case: Kafka's
        JIT needs seconds of traffic (the first round of the first cell ran
        Kafka at half its later throughput), and each case's own warm-up run
        is short. Produces to 8 partitions with 2 librdkafka producers, then
        reads it all back once."""
        secs = self.p["broker_warm_s"]
        for t in ("es", "kafka"):
            self.create_topic(t, "warmup", 8)
            r = self.run_producer(t, "rdkafka", "warmup", 8, 2, 256, seconds=secs)
            b = self.broker(t)
            n = int(r.get("records", 0))
            if n:
                run_cmd([LOADGEN, "consume", "--bootstrap", b.bootstrap, "--topic", "warmup",
                         "--partitions", "8", "--records", str(n), "--timeout-s", "120"])
            self.delete_topic(t, "warmup")
            log(f"warmed {t} up: {r.get('records_per_s', 0):,.0f} records/s for {secs:.0f} s, read back")

    # ------------------------------------------------------------ cases

    def case_limits(self):
        p = self.p
        d = os.path.join(BENCH, "limits")
        os.makedirs(d, exist_ok=True)
        out = {"fdatasync": [], "sequential": None, "loopback": None}
        for size in (4096, 16384, 65536, 262144, 1 << 20):
            out["fdatasync"].append(fsync_loop(os.path.join(d, "fsync.dat"), size, p["limit_s"]))
            log(f"  append {size >> 10} KiB + fdatasync: {out['fdatasync'][-1]['ops_per_s']:.0f}/s, "
                f"p50 {out['fdatasync'][-1]['p50_ms']:.2f} ms")
        out["storage"] = self.storage_bench(d)
        out["sequential"] = seq_write(os.path.join(d, "seq.dat"), p["seq_bytes"])
        log(f"  sequential write + fdatasync: {out['sequential']['gb_per_s']:.2f} GB/s")
        out["loopback"] = loopback(p["limit_s"])
        log(f"  loopback: {out['loopback']['gbit_per_s']:.1f} Gbit/s, 64 B rtt p50 "
            f"{out['loopback']['rtt_p50_us']:.0f} us")
        shutil.rmtree(d, ignore_errors=True)
        return out

    def storage_bench(self, d):
        """The es-storage bench (crates/es-storage/benches/storage.rs) on the
        same disk: es-storage's append + wait for the fsync against its own
        raw write + fdatasync loop at the same write sizes, in one process.
        Issue 30 asks one appender to reach 70% of the raw loop."""
        if not os.access(STORAGE_BENCH, os.X_OK):
            log("  storage bench: not built (benches/run builds it unless --no-build)")
            return None
        path = os.path.join(d, "storage.json")
        env = dict(os.environ, ES_BENCH_DIR=d, ES_BENCH_JSON=path,
                   ES_BENCH_SECS=str(2 * self.p["limit_s"]))
        rc, out, err, _, _ = run_cmd([STORAGE_BENCH, "--bench"], env=env)
        if rc != 0 or not os.path.exists(path):
            log(f"  storage bench FAILED: {err[-500:]}")
            return {"ok": False, "error": err[-800:]}
        with open(path) as f:
            res = json.load(f)
        raw = {x["bytes"]: x["writes_per_s"] for x in res["raw"]}
        for x in res["storage"]:
            if x["appenders"] == 1 and x["bytes"] in raw:
                x["of_raw"] = x["appends_per_s"] / raw[x["bytes"]]
                log(f"  storage bench {x['bytes']} B per append: {x['appends_per_s']:.0f}/s, "
                    f"raw loop {raw[x['bytes']]:.0f}/s ({x['of_raw']:.2f} of it)")
        res["ok"] = True
        return res

    def case_produce(self):
        p = self.p
        cells = []
        only = [c for c in os.environ.get("ES_BENCH_CELLS", "").split(",") if c]
        for cid, gen, parts, prods, size in PRODUCE_CELLS:
            if only and cid not in only:
                continue
            log(f"produce {cid}")
            for t in PRODUCE_TARGETS:
                self.create_topic(t, self.topic(cid, t), parts)
            runs = {t: [] for t in PRODUCE_TARGETS}
            # Warm-up: es-loadgen gets one uncounted run per target; a Java run
            # warms up inside itself (--warmup-records), sized from a first
            # guess and then from the previous run of the same target.
            warm = {t: {"records_per_s": (20_000 if t == "kafka-fsync" else 100_000) * 256 // size}
                    for t in PRODUCE_TARGETS}
            if gen == "rdkafka":
                for t in PRODUCE_TARGETS:
                    warm[t] = self.run_producer(t, gen, self.topic(cid, t), parts, prods, size,
                                                seconds=p["warm_s"])
            for i in range(p["rounds"]):
                for t in round_order(i, PRODUCE_TARGETS):
                    est = warm[t].get("records_per_s") or 50_000
                    n = int(min(5_000_000, max(20_000, est * p["produce_s"])))
                    wu = int(est * p["warm_s"])
                    if gen == "java" and t != "kafka-fsync":
                        # The Java client needs some seconds to reach its steady
                        # state (JIT); short runs measure the JVM, not the broker:
                        # 125,000 warm-up records of 256 B left ProducerPerformance
                        # at 0.8 of its throughput after 300,000 (isolated runs).
                        # The warm-up is in records whatever their size (the
                        # JIT warms per send): 100,000 of 1 KiB left the client
                        # at half its steady rate against es (performance-journal,
                        # "Where a Java produce request's time goes").
                        big = p["java_records"] * 256 // size
                        n, wu = max(n, big), p["java_warmup"]
                    r = self.run_producer(t, gen, self.topic(cid, t), parts, prods, size,
                                          seconds=p["produce_s"] if gen == "rdkafka" else None,
                                          records=n, java_warmup=wu)
                    r["round"] = i
                    runs[t].append(r)
                    if r.get("ok"):
                        warm[t]["records_per_s"] = r["records_per_s"]
                line = " ".join(f"{t} {runs[t][-1].get('records_per_s', 0):,.0f}/s "
                                f"(synced {runs[t][-1].get('dirty_before_mb', 0):.0f} MB first; "
                                f"other broker {runs[t][-1].get('other_broker_cpu_s', 0):.2f} cpu s)"
                                for t in PRODUCE_TARGETS)
                log(f"  round {i}: {line}")
            for t in PRODUCE_TARGETS:
                self.delete_topic(t, self.topic(cid, t))
            keys = ["records_per_s", "mb_per_s", "broker_cpu_s_per_gb", "broker_rss_peak_mb",
                    "latency.p50_us", "latency.p99_us", "gen_cpu_s", "wall_s", "broker_cpu_s",
                    "broker_user_s", "broker_sys_s", "fsyncs_per_gb", "fsyncs", "fsync_s",
                    "gen_busiest_thread.share", "broker_busiest_thread.share"]
            cell = {"id": cid, "gen": gen, "partitions": parts, "producers": prods,
                    "record_bytes": size, "runs": runs, "warmup": warm,
                    "median": summarize(runs, keys),
                    "ratio_rounds": {
                        "es/kafka": pair_ratios(runs, "records_per_s", "es", "kafka"),
                        "es/kafka-fsync": pair_ratios(runs, "records_per_s", "es", "kafka-fsync"),
                        f"{NOFSYNC}/kafka": pair_ratios(runs, "records_per_s", NOFSYNC, "kafka"),
                        f"es/{NOFSYNC}": pair_ratios(runs, "records_per_s", "es", NOFSYNC)},
                    }
            cell["ratio"] = {k: median(v) for k, v in cell["ratio_rounds"].items()}
            for num in ("es", NOFSYNC):
                cell["ratio"][f"cpu_per_gb {num}/kafka"] = median(
                    pair_ratios(runs, "broker_cpu_s_per_gb", num, "kafka"))
            log(f"  median es/kafka {fmt(cell['ratio']['es/kafka'])}, "
                f"es/kafka-fsync {fmt(cell['ratio']['es/kafka-fsync'])}, "
                f"{NOFSYNC}/kafka {fmt(cell['ratio'][f'{NOFSYNC}/kafka'])}")
            cells.append(cell)
            self.results["cases"]["produce"] = cells
            self.save()
        return cells

    def kafka_max_rps(self):
        """Kafka's (default, no fsync) produce maximum for rdk-p1-w1-256, from
        the produce case if it ran, else measured here."""
        for c in self.results["cases"].get("produce", []):
            if c["id"] == "rdk-p1-w1-256":
                v = c["median"]["kafka"]["records_per_s"]
                if v:
                    return v, "produce case rdk-p1-w1-256"
        self.create_topic("kafka", "lat-max", 1)
        self.run_producer("kafka", "rdkafka", "lat-max", 1, 1, 256, seconds=self.p["warm_s"])
        rs = [self.run_producer("kafka", "rdkafka", "lat-max", 1, 1, 256,
                                seconds=self.p["produce_s"]) for _ in range(2)]
        self.delete_topic("kafka", "lat-max")
        return median([r.get("records_per_s") for r in rs]), "measured in the latency case"

    def case_latency(self):
        p = self.p
        kmax, src = self.kafka_max_rps()
        hi = int(0.8 * kmax) if kmax else 100_000
        low = 10_000
        scenarios = [
            dict(id="rdk-10k-linger5", gen="rdkafka", rate=low, linger=LINGER_MS,
                 targets=PRODUCE_TARGETS),
            dict(id="rdk-10k-linger0", gen="rdkafka", rate=low, linger=0, targets=PRODUCE_TARGETS),
            dict(id="rdk-80pct-linger5", gen="rdkafka", rate=hi, linger=LINGER_MS,
                 targets=["es", "kafka"]),
            dict(id="java-10k-linger5", gen="java", rate=low, linger=LINGER_MS, targets=TARGETS),
        ]
        for t in PRODUCE_TARGETS:
            self.create_topic(t, self.topic("lat", t), 1)
        out = {"kafka_max_records_per_s": kmax, "kafka_max_source": src, "scenarios": []}
        for sc in scenarios:
            log(f"latency {sc['id']} at {sc['rate']:,} records/s")
            runs = {t: [] for t in sc["targets"]}
            for t in sc["targets"] if sc["gen"] == "rdkafka" else []:  # warm-up
                self.run_producer(t, sc["gen"], self.topic("lat", t), 1, 1, 256,
                                  seconds=p["warm_s"], rate=sc["rate"], linger=sc["linger"])
            for i in range(p["rounds"]):
                for t in round_order(i, sc["targets"]):
                    r = self.run_producer(t, sc["gen"], self.topic("lat", t), 1, 1, 256,
                                          seconds=p["lat_s"] if sc["gen"] == "rdkafka" else None,
                                          records=None if sc["gen"] == "rdkafka" else int(sc["rate"] * p["lat_s"]),
                                          rate=sc["rate"], linger=sc["linger"],
                                          java_warmup=sc["rate"])
                    r["round"] = i
                    runs[t].append(r)
                log("  round %d: %s" % (i, " ".join(
                    f"{t} p50/p99/p99.9 {fmt_us(get(runs[t][-1], 'latency.p50_us'))}/"
                    f"{fmt_us(get(runs[t][-1], 'latency.p99_us'))}/"
                    f"{fmt_us(get(runs[t][-1], 'latency.p999_us'))} ms" for t in sc["targets"])))
            keys = ["records_per_s", "send_rate", "behind_ms", "latency.p50_us", "latency.p99_us",
                    "latency.p999_us", "broker_cpu_s_per_gb"]
            res = dict(sc, runs=runs, median=summarize(runs, keys))
            res["ratio"] = {}
            for den in [t for t in sc["targets"] if t != "es"]:
                for k in ("p50_us", "p99_us", "p999_us"):
                    res["ratio"][f"{k} es/{den}"] = median(pair_ratios(runs, "latency." + k, "es", den))
            if NOFSYNC in sc["targets"]:
                res["ratio"][f"p99_us {NOFSYNC}/kafka"] = median(
                    pair_ratios(runs, "latency.p99_us", NOFSYNC, "kafka"))
            out["scenarios"].append(res)
            self.results["cases"]["latency"] = out
            self.save()
        for t in PRODUCE_TARGETS:
            self.delete_topic(t, self.topic("lat", t))
        return out

    def case_e2e(self):
        p = self.p
        for t in TARGETS:
            self.create_topic(t, self.topic("e2e", t), 1)
        props = os.path.join(BENCH, "e2e-client.properties")
        with open(props, "w") as f:
            f.write(f"enable.idempotence={'true' if self.idempotence else 'false'}\n")
        runs = {g: {t: [] for t in TARGETS} for g in ("java", "rdkafka")}

        def java_e2e(t, n):
            argv = [KREF, "run", "org.apache.kafka.tools.EndToEndLatency", "--bootstrap-server",
                    self.broker(t).bootstrap, "--topic", self.topic("e2e", t), "--num-records",
                    str(n), "--producer-acks", "all", "--record-size", "256",
                    "--command-config", props]
            with self.alone(self.broker(t)):
                rc, out, err, wall, _ = run_cmd(argv)
            m = re.search(r"Avg latency: ([\d.]+) ms", out)
            q = re.search(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)", out)
            if not (m and q):
                log(f"  {t} EndToEndLatency FAILED: {(err or out)[-300:]}")
                return {"ok": False, "error": (err or out)[-800:]}
            # EndToEndLatency prints its figures, then may fail closing its
            # consumer group on a broker without groups; the figures stand.
            return {"ok": True, "records": n, "rc": rc, "wall_s": wall,
                    "latency": {"mean_us": float(m.group(1)) * 1e3,
                                "p50_us": int(q.group(1)) * 1000, "p99_us": int(q.group(2)) * 1000,
                                "p999_us": int(q.group(3)) * 1000, "resolution": "ms"}}

        def rdk_e2e(t, secs):
            b = self.broker(t)
            argv = [LOADGEN, "e2e", "--bootstrap", b.bootstrap, "--topic", self.topic("e2e", t),
                    "--rate", "1000", "--duration-s", str(secs), "--record-size", "256",
                    "--linger-ms", "0"]
            with self.alone(b), Sampler(b.pid) as s:
                rc, out, err, wall, _ = run_cmd(argv)
            try:
                r = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = {"ok": False, "error": err[-500:]}
            if not r.get("ok"):
                log(f"  {t} rdkafka e2e FAILED: {r.get('error', '')[:300]}")
            r["broker_cpu_s"] = s.cpu_s
            return r

        log("e2e warm-up")
        for t in TARGETS:  # EndToEndLatency's first records are its own warm-up
            rdk_e2e(t, p["warm_s"])
        for i in range(p["rounds"]):
            for t in round_order(i, TARGETS):
                r = java_e2e(t, p["e2e_records"])
                r["round"] = i
                runs["java"][t].append(r)
                r = rdk_e2e(t, p["e2e_s"])
                r["round"] = i
                runs["rdkafka"][t].append(r)
            log("  round %d: %s" % (i, " | ".join(
                f"{t} java p50/p99 {fmt_us(get(runs['java'][t][-1], 'latency.p50_us'))}/"
                f"{fmt_us(get(runs['java'][t][-1], 'latency.p99_us'))} ms, rdkafka "
                f"{fmt_us(get(runs['rdkafka'][t][-1], 'latency.p50_us'))}/"
                f"{fmt_us(get(runs['rdkafka'][t][-1], 'latency.p99_us'))} ms" for t in TARGETS)))
        for t in TARGETS:
            self.delete_topic(t, self.topic("e2e", t))
        out = {"java": {}, "rdkafka": {}, "rdkafka_rate": 1000}
        for g in ("java", "rdkafka"):
            keys = ["latency.mean_us", "latency.p50_us", "latency.p99_us", "latency.p999_us"]
            out[g] = {"runs": runs[g], "median": summarize(runs[g], keys), "ratio": {}}
            for den in ("kafka", "kafka-fsync"):
                for k in ("p50_us", "p99_us", "p999_us"):
                    out[g]["ratio"][f"{k} es/{den}"] = median(
                        pair_ratios(runs[g], "latency." + k, "es", den))
        self.results["cases"]["e2e"] = out
        return out

    def case_consume(self):
        p = self.p
        n = p["consume_records"]
        brokers = ["es", "kafka"]
        fill = {}
        for t in brokers:
            self.create_topic(t, "consume", 1)
            log(f"consume: filling {n:,} records of 256 B into {t}")
            r = self.run_producer(t, "rdkafka", "consume", 1, 1, 256, records=n)
            if not r.get("ok"):
                raise RuntimeError(f"filling the consume topic on {t} failed")
            fill[t] = {"records_per_s": r["records_per_s"], "secs": r["secs"]}
        es_groups = self.es_api(kafkawire.API_FIND_COORDINATOR) and self.es_api(kafkawire.API_JOIN_GROUP)

        def rdk(t):
            b = self.broker(t)
            argv = [LOADGEN, "consume", "--bootstrap", b.bootstrap, "--topic", "consume",
                    "--partitions", "1", "--records", str(n), "--timeout-s", "180"]
            th = {}
            with self.alone(b), Sampler(b.pid) as s:
                rc, out, err, wall, gcpu = run_cmd(argv, threads=th)
            try:
                r = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = {"ok": False, "error": err[-500:]}
            r.update(broker_cpu_s=s.cpu_s, broker_rss_peak_mb=s.peak / 1024, gen_cpu_s=gcpu,
                     wall_s=round(wall, 3), gen_busiest_thread=th.get("busiest"),
                     broker_busiest_thread=s.busiest)
            if r.get("ok"):
                r["broker_cpu_s_per_gb"] = s.cpu_s / (r["bytes"] / 1e9)
            else:
                log(f"  {t} rdkafka consume FAILED: {r.get('error', '')[:300]}")
            return r

        def java(t):
            b = self.broker(t)
            if t == "es" and not es_groups:
                return {"ok": False, "skipped": "es does not serve consumer groups yet"}
            argv = [KREF, "run", "org.apache.kafka.tools.ConsumerPerformance",
                    "--bootstrap-server", b.bootstrap, "--topic", "consume",
                    "--num-records", str(n), "--timeout", "60000"]
            th = {}
            with self.alone(b), Sampler(b.pid) as s:
                rc, out, err, wall, gcpu = run_cmd(argv, threads=th)
            lines = [l for l in out.splitlines() if l.count(",") >= 9 and not l.startswith("start.time")]
            if rc != 0 or not lines:
                log(f"  {t} ConsumerPerformance FAILED: {(err or out)[-300:]}")
                return {"ok": False, "error": (err or out)[-800:]}
            f = [x.strip() for x in lines[-1].split(",")]
            got = int(f[4])
            return {"ok": True, "records": got, "bytes": got * 256,
                    "records_per_s": float(f[9]), "mb_per_s": float(f[9]) * 256 / 1e6,
                    "overall_records_per_s": float(f[5]), "rebalance_ms": float(f[6]),
                    "fetch_ms": float(f[7]), "broker_cpu_s": s.cpu_s,
                    "broker_cpu_s_per_gb": s.cpu_s / (got * 256 / 1e9),
                    "broker_rss_peak_mb": s.peak / 1024, "gen_cpu_s": gcpu,
                    "wall_s": round(wall, 3), "gen_busiest_thread": th.get("busiest"),
                    "broker_busiest_thread": s.busiest}

        log("consume warm-up")
        for t in brokers:
            rdk(t)
        runs = {"rdkafka": {t: [] for t in brokers}, "java": {t: [] for t in brokers}}
        for i in range(p["rounds"]):
            for t in round_order(i, brokers):
                r = rdk(t)
                r["round"] = i
                runs["rdkafka"][t].append(r)
                r = java(t)
                r["round"] = i
                runs["java"][t].append(r)
            log("  round %d: %s" % (i, " | ".join(
                f"{t} rdkafka {runs['rdkafka'][t][-1].get('records_per_s', 0):,.0f}/s java "
                f"{runs['java'][t][-1].get('records_per_s', 0):,.0f}/s" for t in brokers)))
        for t in brokers:
            self.delete_topic(t, "consume")
        out = {"records": n, "fill": fill, "es_serves_groups": bool(es_groups)}
        for g in runs:
            keys = ["records_per_s", "mb_per_s", "broker_cpu_s_per_gb", "broker_rss_peak_mb"]
            out[g] = {"runs": runs[g], "median": summarize(runs[g], keys),
                      "ratio_rounds": pair_ratios(runs[g], "records_per_s")}
            out[g]["ratio"] = median(out[g]["ratio_rounds"])
        self.results["cases"]["consume"] = out
        return out

    def case_restart(self):
        p = self.p
        total = p["restart_bytes"]
        size = 1024
        n = total // size
        parts = 8
        log(f"restart: fresh brokers, filling {total / (1 << 30):.2f} GiB ({n:,} records of 1 KiB, "
            f"{parts} partitions) into each")
        self.es.stop()
        self.kafka.stop()
        self.es.data_dir = os.path.join(BENCH, "data", "restart-es")
        self.kafka.data_dir = os.path.join(BENCH, "data", "restart-kafka")
        self.es.start_fresh()
        # Kafka's default session: its restart after kill -9 waits for it.
        self.kafka.start_fresh(long_session=False)
        fill = {}
        for t in ("es", "kafka"):
            self.create_topic(t, "restart", parts)
            # Not paused: a fill takes tens of seconds (Bench.alone).
            r = self.run_producer(t, "rdkafka", "restart", parts, 4, size, records=n,
                                  alone=False)
            if not r.get("ok"):
                raise RuntimeError(f"filling the restart topic on {t} failed: {r.get('error')}")
            fill[t] = {"records_per_s": r["records_per_s"], "mb_per_s": r["mb_per_s"],
                       "secs": r["secs"], "disk_bytes": du(self.broker(t).data_dir)}
            log(f"  filled {t}: {r['mb_per_s']:.0f} MB/s, {fill[t]['disk_bytes'] / (1 << 30):.2f} GiB on disk")
        runs = {"kill9": {"es": [], "kafka": []}, "clean": {"es": [], "kafka": []}}

        def restart(t, kill9):
            b = self.broker(t)
            with self.alone(b):
                stop_s = b.stop(kill9=kill9)
                t0 = b.spawn()
                meta_s, offs_s, seen = kafkawire.wait_serving(HOST, b.port, "restart", parts, n,
                                                              t0, RESTART_DEADLINE_S)
            r = {"stop_s": stop_s, "metadata_s": meta_s, "offsets_s": offs_s,
                 "records_seen": seen, "ok": offs_s is not None,
                 "rss_after_mb": rss_kb(b.pid) / 1024}
            log(f"  {t} after {'kill -9' if kill9 else 'clean stop'} ({stop_s:.1f}s to stop): "
                f"metadata {fmt(meta_s)} s, all {seen} records listed {fmt(offs_s)} s")
            return r

        # The kill -9 right after the fill is the one with everything to recover.
        for t in ("es", "kafka"):
            runs["kill9"][t].append(restart(t, True))
        for i in range(p["clean_restarts"]):
            for t in round_order(i, ["es", "kafka"]):
                r = restart(t, False)
                r["round"] = i
                runs["clean"][t].append(r)
        out = {"bytes": total, "record_bytes": size, "records": n, "partitions": parts,
               "fill": fill, "runs": runs}
        for k in runs:
            out[k + "_median"] = summarize(runs[k], ["metadata_s", "offsets_s", "stop_s"])
            out[k + "_ratio"] = ratio(out[k + "_median"]["es"]["offsets_s"],
                                      out[k + "_median"]["kafka"]["offsets_s"])
        self.results["cases"]["restart"] = out
        self.es.stop()
        self.kafka.stop()
        shutil.rmtree(self.es.data_dir, ignore_errors=True)
        shutil.rmtree(self.kafka.data_dir, ignore_errors=True)
        return out

    # ------------------------------------------------------------ plumbing

    def es_api(self, key):
        try:
            return key in kafkawire.api_versions(HOST, self.es.port)
        except OSError:
            return False

    def save(self):
        tmp = os.path.join(BENCH, "results.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.results, f, indent=1, default=str)
        os.replace(tmp, os.path.join(BENCH, "results.json"))

    def meta(self):
        def sh(cmd):
            try:
                return subprocess.run(cmd, shell=True, capture_output=True, text=True, cwd=ROOT,
                                      timeout=60).stdout.strip()
            except subprocess.TimeoutExpired:
                return ""
        mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo")
        dev = sh(f"df -P {BENCH} | awk 'NR==2 {{print $1}}'")
        fs = sh(f"findmnt -n -o FSTYPE,OPTIONS -T {BENCH}")
        dirty = sh("git status --porcelain --untracked-files=no -- crates Cargo.toml Cargo.lock")
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "profile": "quick" if self.args.quick else "full",
            "rounds": self.p["rounds"],
            "machine": {
                "nproc": os.cpu_count(), "memory": mem, "kernel": platform.release(),
                "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
                "disk": f"{dev} {fs}", "loadavg_start": open("/proc/loadavg").read().split()[:3],
            },
            "versions": {
                "es_git": sh("git rev-parse --short HEAD"),
                "es_tree_dirty": dirty.splitlines(),
                "kafka": sh(f"{KREF} version 2>/dev/null"),
                "java": sh("java -version 2>&1 | head -1"),
                "librdkafka": "2.12.1 (rdkafka 0.39.0, rdkafka-sys 4.10.0)",
                "rustc": sh("rustc --version"),
                "python": platform.python_version(),
            },
            "settings": {
                "producer": f"acks=all linger.ms={LINGER_MS} batch.size={BATCH_BYTES} "
                            f"max.in.flight=5 compression=none",
                "java_enable_idempotence": self.idempotence,
                "kafka_fsync_topic_config": FSYNC_TOPIC_CONFIG,
                "es_flags": "defaults (--flush-every-records 1: fsync before every ack)",
                "kafka_heap": "-Xmx1G -Xms1G (kafka-ref, as kafka-server-start.sh)",
                "other_broker": "paused (SIGSTOP) during each measured run",
            },
            "command": " ".join(["benches/run"] + sys.argv[1:]),
        }

    def run(self):
        cases = self.args.cases or CASES
        bad = [c for c in cases if c not in CASES]
        if bad:
            raise SystemExit(f"unknown case(s) {bad}; known: {CASES}")
        os.makedirs(BENCH, exist_ok=True)
        self.results["meta"] = self.meta()
        self.save()
        if "limits" in cases:
            log("limits: fdatasync loop, sequential write, loopback")
            self.results["cases"]["limits"] = self.case_limits()
            self.save()
        rest = [c for c in cases if c != "limits"]
        if rest and rest != ["restart"]:  # restart starts brokers of its own
            self.es.start_fresh()
            self.kafka.start_fresh()
            self.results["meta"]["rss_idle_mb"] = {
                "es": rss_kb(self.es.pid) / 1024, "kafka": rss_kb(self.kafka.pid) / 1024}
            self.idempotence = self.es_api(kafkawire.API_INIT_PRODUCER_ID)
            self.results["meta"]["settings"]["java_enable_idempotence"] = self.idempotence
            log(f"es serves InitProducerId: {self.idempotence} -> Java enable.idempotence="
                f"{str(self.idempotence).lower()} for both brokers")
            self.warm_brokers()
        self.results["meta"]["case_elapsed_s"] = {}
        for c in ("produce", "latency", "e2e", "consume", "restart"):
            if c in cases:
                t = time.monotonic()
                self.results["cases"][c] = getattr(self, "case_" + c)()
                self.results["meta"]["case_elapsed_s"][c] = round(time.monotonic() - t, 1)
                self.save()
        if "limits" in cases and rest:
            log("limits again at the end (fdatasync 16 KiB)")
            with self.alone():
                self.results["cases"]["limits"]["fdatasync_end"] = fsync_loop(
                    os.path.join(BENCH, "fsync-end.dat"), 16384, self.p["limit_s"])
        # The brokers' data is of no use after the run; logs stay in target/bench/.
        self.es.stop()
        self.kafka.stop()
        shutil.rmtree(os.path.join(BENCH, "data"), ignore_errors=True)
        self.results["meta"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        self.results["meta"]["elapsed_s"] = round(time.monotonic() - T0, 1)
        self.save()
        log(f"done in {self.results['meta']['elapsed_s']:.0f}s: target/bench/results.json")


def fmt(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def fmt_us(x):
    return "n/a" if x is None else f"{x / 1000:.2f}"


def du(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_blocks * 512
            except OSError:
                pass
    return total


# ---------------------------------------------------------------- raw limits

def fsync_loop(path, size, seconds, max_ops=200_000):
    """Appends `size` bytes and fdatasyncs, again and again, for `seconds`.
    Also the kernel CPU each write + fdatasync costs (this process's system
    time over the loop: the loop is nothing but the two system calls)."""
    buf = os.urandom(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    lat = []
    try:
        end = time.monotonic() + seconds
        t_start = time.monotonic()
        sys0 = os.times().system
        while time.monotonic() < end and len(lat) < max_ops:
            t = time.monotonic()
            os.write(fd, buf)
            os.fdatasync(fd)
            lat.append(time.monotonic() - t)
        sys_s = os.times().system - sys0
        el = time.monotonic() - t_start
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    return {"bytes": size, "ops": len(lat), "ops_per_s": len(lat) / el,
            "mb_per_s": len(lat) * size / el / 1e6,
            "p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": lat[int(len(lat) * 0.99)] * 1e3,
            "sys_us_per_op": sys_s / max(1, len(lat)) * 1e6}


def seq_write(path, total, chunk=1 << 20):
    buf = os.urandom(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t = time.monotonic()
        for _ in range(total // chunk):
            os.write(fd, buf)
        os.fdatasync(fd)
        el = time.monotonic() - t
    finally:
        os.close(fd)
        os.unlink(path)
    return {"bytes": total, "secs": el, "gb_per_s": total / el / 1e9}


def loopback(seconds, chunk=1 << 20):
    """TCP over 127.0.0.1: one-way bandwidth with 1 MiB sends, then the round
    trip of a 64-byte message."""
    srv = socket.socket()
    srv.bind((HOST, 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got = [0]

    def sink():
        c, _ = srv.accept()
        buf = bytearray(chunk)
        with c:
            while True:
                k = c.recv_into(buf)
                if not k:
                    return
                got[0] += k

    th = threading.Thread(target=sink, daemon=True)
    th.start()
    data = b"\0" * chunk
    with socket.create_connection((HOST, port)) as s:
        t = time.monotonic()
        end = t + seconds
        sent = 0
        while time.monotonic() < end:
            s.sendall(data)
            sent += chunk
    th.join(30)
    el = time.monotonic() - t
    gbit = got[0] * 8 / el / 1e9

    def echo():
        c, _ = srv.accept()
        with c:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                m = c.recv(64)
                if not m:
                    return
                c.sendall(m)

    th = threading.Thread(target=echo, daemon=True)
    th.start()
    rtts = []
    with socket.create_connection((HOST, port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg = b"x" * 64
        for _ in range(5000):
            t = time.monotonic()
            s.sendall(msg)
            k = 0
            while k < 64:
                k += len(s.recv(64 - k))
            rtts.append(time.monotonic() - t)
    th.join(10)
    srv.close()
    rtts.sort()
    return {"gbit_per_s": gbit, "rtt_p50_us": rtts[len(rtts) // 2] * 1e6,
            "rtt_p99_us": rtts[int(len(rtts) * 0.99)] * 1e6,
            "note": "python socket loop (the GIL and interpreter add to the round trip)"}


def main():
    ap = argparse.ArgumentParser(prog="benches/run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 rounds, shorter runs, 512 MiB restart")
    ap.add_argument("cases", nargs="*", help=f"subset of {CASES} (default: all)")
    args = ap.parse_args()
    atexit_register()
    Bench(args).run()


def atexit_register():
    import atexit
    atexit.register(cleanup)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)


if __name__ == "__main__":
    main()
