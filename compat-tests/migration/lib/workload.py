"""The source workload of the migration trial: the topics it creates on Apache Kafka, the
producers that write them, and the two consumer groups that read and commit as they go.

Topics (TOPICS): mig-single (1 partition) and mig-multi (8) written by one idempotent producer per
codec (none, gzip, snappy, lz4, zstd); mig-compact (2 partitions, cleanup.policy=compact with
segment.ms=1000 and min.cleanable.dirty.ratio=0.01, so Kafka's cleaner really removes records and
leaves offset gaps) with a small key space and tombstones (null values); mig-txn (4 partitions)
written by a transactional producer that aborts every third transaction.
Every record carries a header `id` unique in the trial (so content identifies a record), an
explicit CreateTime timestamp, and most carry a key; codec records also carry an empty header
value, a repeated header key and sometimes a null header value.

Consumer groups (GROUPS): mig-group-a reads mig-single, mig-multi and mig-txn at a bounded rate
(sizes()), so it is mid-stream when the cut-over stops it; mig-group-b reads the same topics but
stops after a fixed number of records, so it is far behind. Both run read_committed, commit explicitly (synchronously,
the offset after the last record they logged) every COMMIT_EVERY records and when stopped, and
log each record they consumed (topic, partition, offset, content digest) to a JSON-lines file, so
the checker can tell whether each record was consumed exactly once across the switch.
"""
import hashlib
import json
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from common import TrialError, log, wait_for

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TOPICS = {
    "mig-single": {"partitions": 1, "config": {}},
    "mig-multi": {"partitions": 8, "config": {}},
    "mig-compact": {"partitions": 2, "config": {
        "cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000"}},
    "mig-txn": {"partitions": 4, "config": {}},
}
COMPACTED = {t for t, d in TOPICS.items() if d["config"].get("cleanup.policy") == "compact"}
GROUP_TOPICS = ["mig-single", "mig-multi", "mig-txn"]
GROUPS = ["mig-group-a", "mig-group-b"]
COMMIT_EVERY = 50
COMPACT_KEYS = 150
TXN_SIZE = 10
FLUSH_TIMEOUT_S = 60


def sizes(quick):
    """Record counts: codec records per producer before the mirror and during it; compacted
    records before, during; transactions before, during; how many records mig-group-b reads
    before it stops; the producers' total rate during the mirror and mig-group-a's reading rate
    (records/s; below what it must read, so it is mid-stream when the cut-over comes)."""
    if quick:
        return dict(codec_pre=1200, codec_live=600, compact_pre=2000, compact_live=400,
                    txn_pre=60, txn_live=30, group_b_limit=2500, live_rate=300, group_a_rate=250)
    return dict(codec_pre=6000, codec_live=3000, compact_pre=8000, compact_live=2000,
                txn_pre=300, txn_live=150, group_b_limit=12000, live_rate=1000, group_a_rate=800)


def digest(key, value, headers, ts):
    """The content identity of a record: key, value, headers (in order) and timestamp."""
    h = hashlib.sha1()
    for part in (key, value):
        h.update(b"N" if part is None else b"B%d:" % len(part) + part)
    for k, v in headers or []:
        kb = k.encode()
        h.update(b"H%d:" % len(kb) + kb)
        h.update(b"N" if v is None else b"B%d:" % len(v) + v)
    h.update(b"T%d" % ts)
    return h.hexdigest()[:20]


def create_topics(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics([NewTopic(t, d["partitions"], 1, config=d["config"]) for t, d in TOPICS.items()],
                               operation_timeout=30)
    for t, f in futs.items():
        f.result(timeout=60)
    made = ", ".join(f"{t} ({d['partitions']}p)" for t, d in TOPICS.items())
    log(f"created on the source: {made}")


class Delivery:
    """Counts deliveries and remembers the first errors of one producer."""

    def __init__(self, name):
        self.name, self.ok, self.errors = name, 0, []

    def __call__(self, err, msg):
        if err is not None:
            if len(self.errors) < 5:
                self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")
        else:
            self.ok += 1

    def check(self):
        if self.errors:
            raise TrialError(f"producer {self.name}: delivery failed: {self.errors}")


def codec_record(codec, i, base_ts):
    """Record i of a codec producer: topic, key, value, headers, timestamp."""
    rid = f"{codec}-{i}"
    topic = "mig-single" if i % 4 == 0 else "mig-multi"
    key = None if i % 10 == 3 else f"key-{i % 97}".encode()
    value = (f"{rid}|" + "abcdefgh" * (i % 60) + str(i * 7919)).encode()
    headers = [("id", rid.encode()), ("codec", codec.encode()), ("empty", b""), ("dup", b"1"), ("dup", b"2")]
    if i % 5 == 0:
        headers.append(("nullh", None))
    return topic, key, value, headers, base_ts + i


def compact_record(i, now_ms):
    """Record i of the compacted topic. Its explicit timestamp is the wall clock: Kafka rolls a
    segment after segment.ms measured in record timestamps, so timestamps an hour back (the
    other topics') would leave its segments open, and its cleaner idle, for a long while."""
    rid = f"compact-{i}"
    key = f"ckey-{i % COMPACT_KEYS}".encode()
    value = None if i % 7 == 6 else f"{rid}|v{i}".encode() * (1 + i % 5)
    return "mig-compact", key, value, [("id", rid.encode())], now_ms


class Producers:
    """The source producers as threads: one idempotent producer per codec, one for the compacted
    topic, one transactional. run_phase() writes a phase's records (at a bounded rate for the
    live phase) and returns when all are acknowledged; trickle_compact() keeps the compacted
    topic rolling segments until stopped."""

    def __init__(self, bootstrap, quick):
        self.bootstrap = bootstrap
        self.n = sizes(quick)
        self.base_ts = int(time.time() * 1000) - 3_600_000  # explicit timestamps, an hour back
        self.next = {c: 0 for c in CODECS}
        self.next["compact"] = 0
        self.next_txn = 0
        self.produced = {"codec": 0, "compact": 0, "txn_committed": 0, "txn_aborted": 0}
        self.producers = {}
        for c in CODECS:
            self.producers[c] = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                          "acks": "all", "compression.type": c, "linger.ms": 5})
        self.producers["compact"] = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                              "compression.type": "zstd", "linger.ms": 5})
        self.txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "mig-txn-producer",
                             "compression.type": "gzip", "linger.ms": 5})
        self.txn.init_transactions(30)
        self.stop_trickle = threading.Event()

    def _produce(self, p, d, rec):
        topic, key, value, headers, ts = rec
        while True:
            try:
                p.produce(topic, key=key, value=value, headers=headers, timestamp=ts, on_delivery=d)
                return
            except BufferError:
                p.poll(0.1)

    def _codec(self, codec, count, rate):
        p, d = self.producers[codec], Delivery(codec)
        t0 = time.monotonic()
        for k in range(count):
            i = self.next[codec]
            self.next[codec] += 1
            self._produce(p, d, codec_record(codec, i, self.base_ts))
            if rate:  # pacing of a live producer, not a wait for a condition
                ahead = (k + 1) / rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
            p.poll(0)
        if p.flush(FLUSH_TIMEOUT_S) != 0:
            raise TrialError(f"producer {codec}: records still unacknowledged after {FLUSH_TIMEOUT_S}s")
        d.check()
        self.produced["codec"] += count

    def _compact(self, count, rate):
        p, d = self.producers["compact"], Delivery("compact")
        t0 = time.monotonic()
        for k in range(count):
            i = self.next["compact"]
            self.next["compact"] += 1
            self._produce(p, d, compact_record(i, int(time.time() * 1000)))
            if rate:
                ahead = (k + 1) / rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
            p.poll(0)
        if p.flush(FLUSH_TIMEOUT_S) != 0:
            raise TrialError(f"compact producer: records unacknowledged after {FLUSH_TIMEOUT_S}s")
        d.check()
        self.produced["compact"] += count

    def _txn(self, count, rate):
        d = Delivery("txn")
        t0 = time.monotonic()
        for k in range(count):
            j = self.next_txn
            self.next_txn += 1
            abort = j % 3 == 2
            self.txn.begin_transaction()
            for r in range(TXN_SIZE):
                rid = f"txn-{j}-{r}"
                headers = [("id", rid.encode()), ("txn", str(j).encode())]
                if abort:
                    headers.append(("aborted", b"1"))
                self._produce(self.txn, d, ("mig-txn", f"tkey-{(j * TXN_SIZE + r) % 31}".encode(),
                                            f"{rid}|{'A' if abort else 'C'}".encode() * 3, headers,
                                            self.base_ts + 1_000_000 + j * TXN_SIZE + r))
            if abort:
                # flushed first, so the aborted records are in Kafka's log (then marked aborted),
                # not purged from the client's queue
                if self.txn.flush(FLUSH_TIMEOUT_S) != 0:
                    raise TrialError(f"transaction {j}: records unacknowledged after {FLUSH_TIMEOUT_S}s")
                self.txn.abort_transaction(30)
                self.produced["txn_aborted"] += TXN_SIZE
            else:
                self.txn.commit_transaction(30)
                self.produced["txn_committed"] += TXN_SIZE
            if rate:
                ahead = (k + 1) / rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
        d.check()

    def run_phase(self, live):
        """Writes one phase: all producers in parallel threads; returns when every record is
        acknowledged (raises on a delivery error)."""
        n = self.n
        codec_count = n["codec_live"] if live else n["codec_pre"]
        rate = n["live_rate"] / len(CODECS) if live else 0
        jobs = [(self._codec, (c, codec_count, rate)) for c in CODECS]
        jobs.append((self._compact, (n["compact_live"] if live else n["compact_pre"], rate)))
        jobs.append((self._txn, (n["txn_live"] if live else n["txn_pre"], rate / TXN_SIZE if rate else 0)))
        errors = []

        def wrap(fn, args):
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 (reported below, the phase fails)
                errors.append(f"{fn.__name__}{args[:1]}: {e}")
        threads = [threading.Thread(target=wrap, args=j, daemon=True) for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise TrialError(f"producers failed: {errors}")

    def trickle_compact(self):
        """One compacted record every 200 ms until stop_trickle: appends after segment.ms roll the
        segments, so the cleaner has sealed segments to compact."""
        p, d = self.producers["compact"], Delivery("compact-trickle")
        while not self.stop_trickle.is_set():
            i = self.next["compact"]
            self.next["compact"] += 1
            self._produce(p, d, compact_record(i, int(time.time() * 1000)))
            p.poll(0)
            self.produced["compact"] += 1
            self.stop_trickle.wait(0.2)
        p.flush(FLUSH_TIMEOUT_S)
        d.check()

    def close(self):
        for p in self.producers.values():
            p.flush(10)
        self.txn.flush(10)


class GroupConsumer(threading.Thread):
    """One member of a consumer group on one cluster. Reads GROUP_TOPICS (read_committed), logs
    every record to log_path, commits the offset after the last logged record every COMMIT_EVERY
    records and at the end. Reads at most `rate` records/s when given. Stops when stop() is called,
    after `limit` records, or once every partition is read to end_offsets (its position there, or
    an end-of-partition event with nothing after it: no producer writes meanwhile)."""

    def __init__(self, bootstrap, group, log_path, limit=None, end_offsets=None, rate=None):
        super().__init__(daemon=True, name=f"{group}@{bootstrap}")
        self.bootstrap, self.group, self.log_path = bootstrap, group, log_path
        self.limit, self.end_offsets, self.rate = limit, end_offsets, rate
        self.stopping = threading.Event()
        self.count = 0
        self.error = None
        self.last = {}          # (topic, partition) -> last offset logged
        self.committed = {}     # (topic, partition) -> offset committed last
        self.eof = set()        # (topic, partition) read to its end, nothing after

    def stop(self):
        self.stopping.set()

    def _commit(self, c):
        offs = [TopicPartition(t, p, o + 1) for (t, p), o in self.last.items()
                if self.committed.get((t, p)) != o + 1]
        if offs:
            for tp in c.commit(offsets=offs, asynchronous=False):
                if tp.error:
                    raise TrialError(f"{self.group}: commit {tp.topic}[{tp.partition}] failed: {tp.error}")
                self.committed[(tp.topic, tp.partition)] = tp.offset

    def run(self):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "session.timeout.ms": 10000,
                      # At the end offsets a read_committed position may stay below the end
                      # (a trailing transaction marker is an offset with no record): an
                      # end-of-partition event then says nothing is left.
                      "enable.partition.eof": self.end_offsets is not None})
        try:
            c.subscribe(GROUP_TOPICS)
            t0 = time.monotonic()
            with open(self.log_path, "a") as out:
                while not self.stopping.is_set():
                    if self.rate:  # pacing of a consumer that processes slowly, not a wait
                        ahead = self.count / self.rate - (time.monotonic() - t0)
                        if ahead > 0:
                            self.stopping.wait(ahead)
                            continue
                    msgs = c.consume(50 if self.rate else 200, 0.5)
                    for m in msgs:
                        if m.error():
                            if m.error().code() == KafkaError._PARTITION_EOF:
                                self.eof.add((m.topic(), m.partition()))
                                continue
                            raise KafkaException(m.error())
                        tp = (m.topic(), m.partition())
                        self.eof.discard(tp)
                        d = digest(m.key(), m.value(), m.headers(), m.timestamp()[1])
                        out.write(json.dumps({"t": m.topic(), "p": m.partition(), "o": m.offset(), "d": d}) + "\n")
                        self.last[tp] = m.offset()
                        self.count += 1
                        if self.count % COMMIT_EVERY == 0:
                            out.flush()
                            self._commit(c)
                        if self.limit is not None and self.count >= self.limit:
                            self.stopping.set()
                            break
                    if self.end_offsets is not None and self._reached_end(c):
                        break
                out.flush()
                self._commit(c)
        except Exception as e:  # noqa: BLE001 (surfaced by join_checked)
            self.error = e
        finally:
            c.close()

    def _reached_end(self, c):
        """With end_offsets: every partition's position is at its end offset. All partitions must
        be assigned to this single member; a partition it has read nothing from yet is at its
        committed offset (or 0 with none)."""
        assigned = c.assignment()
        if len(assigned) < len(self.end_offsets):
            return False
        pos = {(tp.topic, tp.partition): tp.offset for tp in c.position(assigned)}
        unknown = [TopicPartition(t, p) for (t, p), o in pos.items() if o < 0]
        if unknown:
            for tp in c.committed(unknown, timeout=10):
                pos[(tp.topic, tp.partition)] = max(tp.offset, 0)
        return all(pos[tp] >= end or tp in self.eof for tp, end in self.end_offsets.items())

    def join_checked(self, timeout_s):
        self.join(timeout_s)
        if self.is_alive():
            raise TrialError(f"consumer {self.name} did not finish within {timeout_s}s ({self.count} records)")
        if self.error is not None:
            raise TrialError(f"consumer {self.name} failed: {self.error}")


def read_log(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def wait_compacted(bootstrap, timeout_s=180):
    """Waits until Kafka's cleaner has removed records from every partition of the compacted
    topics (fewer records than offsets between log start and high watermark)."""
    from check import read_partition  # check.py reads partitions; imported here to avoid a cycle

    def gaps():
        detail = {}
        for t in COMPACTED:
            for p in range(TOPICS[t]["partitions"]):
                recs, low, high = read_partition(bootstrap, t, p, with_bounds=True)
                detail[f"{t}[{p}]"] = f"{len(recs)} records in offsets {low}..{high}"
                if len(recs) >= high - low:
                    return False, detail
        return True, detail
    _, detail = wait_for("Kafka's log cleaner to compact the compacted topic", gaps, timeout_s, 2.0)
    log(f"source compacted: {detail}")
