"""The measuring side of the mirror benchmark (compat-tests/migration/bench): end offsets of a
topic on either cluster, a process's memory and CPU from /proc, Kafka's ProducerPerformance as the
source's producer, and the two measurements: how fast a backlog is copied (copy()) and how far a
mirror trails a producer writing at a fixed rate (steady()).

Nothing here judges speed: every function returns figures, and raises TrialError only when it
cannot measure (a process died, a copy made no progress for too long, a tool failed).
"""
import os
import re
import signal
import statistics
import subprocess
import time

from common import TrialError, log
from procs import KAFKA_REF

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

MIB = 1024 * 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Ends:
    """End offsets (high watermarks) of one cluster's partitions, through one client kept open.
    topic_partitions() lists every topic (a Metadata request naming none), so that asking never
    auto-creates a topic that a mirror has not created yet."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        quiet = {"bootstrap.servers": bootstrap, "log.connection.close": False}
        self.consumer = Consumer({**quiet, "group.id": "mirror-bench-probe", "enable.auto.commit": False})
        self.admin = AdminClient(quiet)

    def topic_partitions(self, topic):
        md = self.admin.list_topics(timeout=10).topics.get(topic)
        return None if md is None or md.error is not None else len(md.partitions)

    def ends(self, topic, partitions):
        return [self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)]

    def close(self):
        """Before the broker stops, so that the clients do not log its going away."""
        self.consumer.close()
        self.admin = None


class ProcStats:
    """A process's resident memory (sampled: peak of the samples; and the kernel's own peak,
    VmHWM) and its CPU time (user + system) since this object was made or reset."""

    def __init__(self, pid, name):
        self.pid, self.name = pid, name
        self.rss_peak = 0
        self.cpu0 = self.cpu_s()

    def _status(self, key):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1]) * 1024
        except (OSError, TypeError, ValueError):
            pass
        return None

    def cpu_s(self):
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)
        except (OSError, TypeError, ValueError, IndexError):
            return None

    def reset(self):
        self.rss_peak = 0
        self.cpu0 = self.cpu_s()

    def sample(self):
        rss = self._status("VmRSS")
        if rss:
            self.rss_peak = max(self.rss_peak, rss)

    def figures(self):
        """{'rss_peak_mib' (sampled), 'hwm_mib' (the kernel's peak, whole life), 'cpu_s'} since reset."""
        cpu, hwm = self.cpu_s(), self._status("VmHWM")
        return {"rss_peak_mib": round(self.rss_peak / MIB, 1) if self.rss_peak else None,
                "hwm_mib": round(hwm / MIB, 1) if hwm else None,
                "cpu_s": round(cpu - self.cpu0, 1) if cpu is not None and self.cpu0 is not None else None}


def dir_bytes(path, suffix=None):
    """Bytes of the files under path (only names ending in suffix, when given)."""
    total = 0
    for d, _, files in os.walk(path):
        for name in files:
            if suffix is None or name.endswith(suffix):
                try:
                    total += os.path.getsize(os.path.join(d, name))
                except OSError:
                    pass
    return total


# ---- the source's producer: Kafka's own ProducerPerformance --------------------------------------

PERF_CLASS = "org.apache.kafka.tools.ProducerPerformance"
PERF_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                          r"([\d.]+) ms max latency")


class ProducerPerf:
    """Kafka's ProducerPerformance (scripts/kafka-ref run), random payloads of record_bytes bytes,
    no keys, at most `throughput` records/s (-1: as fast as it can). Runs in a process group of
    its own (kafka-ref's shell and its java), so stop() ends both."""

    def __init__(self, kafka, topic, records, record_bytes, throughput, props, log_path):
        self.cmd = [KAFKA_REF, "run", PERF_CLASS, "--bootstrap-server", kafka.bootstrap, "--topic", topic,
                    "--num-records", str(records), "--record-size", str(record_bytes),
                    "--throughput", str(throughput), "--command-property", *props]
        self.env = kafka.env
        self.log_path = log_path
        self.proc = None

    def start(self):
        self.out = open(self.log_path, "w")
        self.out.write(" ".join(self.cmd) + "\n")
        self.out.flush()
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout_s):
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TrialError(f"ProducerPerformance did not finish within {timeout_s}s (log {self.log_path})")
        self.out.close()
        if code != 0:
            raise TrialError(f"ProducerPerformance exited {code} (log {self.log_path})")
        return self.summary()

    def summary(self):
        """The tool's last line, parsed: records sent, records/s, MiB/s (its 'MB' is MiB), latencies."""
        with open(self.log_path, errors="replace") as f:
            lines = [m for m in (PERF_SUMMARY.search(line) for line in f) if m]
        if not lines:
            raise TrialError(f"ProducerPerformance printed no summary (log {self.log_path})")
        m = lines[-1]
        return {"records": int(m.group(1)), "records_per_s": float(m.group(2)), "mib_per_s": float(m.group(3)),
                "avg_latency_ms": float(m.group(4)), "max_latency_ms": float(m.group(5)), "line": m.group(0)}

    def stop(self):
        if self.running():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        if self.proc is not None and not self.out.closed:
            self.out.close()


# ---- the measurements -------------------------------------------------------------------------

def rate(records, record_bytes, seconds):
    """records/s, MB/s (10^6 payload bytes/s) and MiB/s; Nones when there is nothing to divide
    (a copy whose first poll already found every record has no rate after its first record)."""
    if not records or not seconds or seconds <= 0:
        return {"records_per_s": None, "mb_per_s": None, "mib_per_s": None}
    return {"records_per_s": round(records / seconds), "mb_per_s": round(records * record_bytes / seconds / 1e6, 2),
            "mib_per_s": round(records * record_bytes / seconds / MIB, 2)}


def copy(what, t0, total, copied, alive, stats, record_bytes, timeout_s, stall_s, interval_s=0.5):
    """Measures a copy of `total` records that started at t0 (time.monotonic()), the time the
    mirror was told to start: polls copied() (records on the target)
    every interval_s, with alive() checking the processes and each of stats sampled, until copied()
    reaches total. Returns the time to the first record (start-up), to completion, the rates with
    and without start-up, and samples (seconds, records) at most every 5 s. Raises TrialError when
    alive() does, after timeout_s, or when nothing moved for stall_s."""
    first_s, last_change, last_n, n = None, t0, 0, 0
    samples, next_sample = [], 0.0
    while True:
        tick = time.monotonic()
        alive()
        n = copied()
        for s in stats:
            s.sample()
        now = time.monotonic()
        el = now - t0
        if n > 0 and first_s is None:
            first_s, first_n = el, n
        if n != last_n:
            last_change, last_n = now, n
        if el >= next_sample or n >= total:
            samples.append((round(el, 1), n))
            log(f"{what}: {n}/{total} records after {el:.1f}s")
            next_sample = el + 5.0
        if n >= total:
            break
        if el > timeout_s:
            raise TrialError(f"{what}: {n}/{total} records copied after {timeout_s}s (the limit; --copy-timeout-s)")
        if now - last_change > stall_s:
            raise TrialError(f"{what}: no record copied for {stall_s}s ({n}/{total} after {el:.0f}s)")
        time.sleep(max(0.0, interval_s - (time.monotonic() - tick)))
    done_s = samples[-1][0]
    out = {"records": total, "seconds": round(done_s, 2), "first_record_s": round(first_s, 2),
           "with_startup": rate(total, record_bytes, done_s),
           "after_first_record": rate(total - first_n, record_bytes, done_s - first_s),
           "samples": samples}
    return out


def steady(what, producer, kafka_ends, target_ends, topic, partitions, stats, duration_s, drain_s):
    """Lag of a mirror behind a producer writing at a fixed rate: starts the producer, and every
    second until it ends samples Kafka's end offsets and the target's (lag = the sum over the
    partitions of Kafka's end - the target's; samples before the first record is on Kafka are
    left out of the figures); then waits at most drain_s for the lag to reach 0.
    Returns the median, max and last lag while the producer ran, the lag just after it ended, how
    long the target took to catch up after that, and what the producer achieved."""
    producer.start()
    t0 = time.monotonic()
    samples = []

    def lag():
        k = kafka_ends.ends(topic, partitions)
        t = target_ends.ends(topic, partitions)
        return sum(k), sum(max(0, a - b) for a, b in zip(k, t))

    while producer.running():
        tick = time.monotonic()
        for s in stats:
            s.sample()
        produced, lagged = lag()
        samples.append((round(tick - t0, 1), produced, lagged))
        if len(samples) % 10 == 0:
            log(f"{what}: {produced} records on Kafka, lag {lagged} after {tick - t0:.0f}s")
        if tick - t0 > duration_s * 3 + 120:
            producer.stop()
            raise TrialError(f"{what}: the producer had not finished after {duration_s * 3 + 120:.0f}s")
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    summary = producer.wait(30)
    t_end = time.monotonic()
    produced, end_lag = lag()
    drained_s, last = None, end_lag
    while time.monotonic() - t_end < drain_s:
        if last == 0:
            drained_s = round(time.monotonic() - t_end, 1)
            break
        time.sleep(0.5)
        _, last = lag()
    lags = [x[2] for x in samples if x[1] > 0]  # from the producer's first record on (its JVM starts first)
    return {"producer": summary, "seconds": round(t_end - t0, 1), "produced": produced,
            "lag_median": statistics.median(lags) if lags else None, "lag_max": max(lags) if lags else None,
            "lag_last_sample": lags[-1] if lags else None, "lag_at_end": end_lag,
            "drained_after_s": drained_s, "lag_after_drain_wait": last if drained_s is None else 0,
            "samples": samples}
