"""Raw Kafka wire probes for benches/run: ApiVersions, Metadata and ListOffsets.

The harness needs to know, to the millisecond, when a restarted broker serves
again, and which APIs es advertises today (idempotent producer, groups). A
client library would add its own reconnect back-off to the first and hide the
second, so these are a few hand-built requests on a plain socket, with versions
that both es and Kafka 4 serve (Kafka 4 removed Metadata v0-3 and ListOffsets
v0): ApiVersions v0, Metadata v4, ListOffsets v1.
"""

import socket
import struct
import time

API_LIST_OFFSETS = 2
API_METADATA = 3
API_FIND_COORDINATOR = 10
API_JOIN_GROUP = 11
API_VERSIONS = 18
API_INIT_PRODUCER_ID = 22

# A response larger than this is not one of ours.
RESPONSE_BYTES_MAX = 64 << 20


class Reader:
    def __init__(self, b):
        self.b, self.i = b, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.i)
        self.i += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def i8(self):
        return self.take(">b")

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def i64(self):
        return self.take(">q")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.b[self.i:self.i + n].decode()
        self.i += n
        return s


def _str(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _request(sock, api, version, corr, body):
    hdr = struct.pack(">hhi", api, version, corr) + _str("es-bench")
    msg = hdr + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    n = struct.unpack(">i", _recv(sock, 4))[0]
    if not 4 <= n <= RESPONSE_BYTES_MAX:
        raise IOError(f"bad response size {n}")
    data = _recv(sock, n)
    r = Reader(data)
    if r.i32() != corr:
        raise IOError("correlation id mismatch")
    return r


def _recv(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise IOError("connection closed")
        buf += chunk
    return bytes(buf)


def api_versions(host, port, timeout=5.0):
    """{api_key: (min, max)} that the broker advertises."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        r = _request(s, API_VERSIONS, 0, 1, b"")
        err = r.i16()
        if err:
            raise IOError(f"ApiVersions error {err}")
        out = {}
        for _ in range(r.i32()):
            k, lo, hi = r.i16(), r.i16(), r.i16()
            out[k] = (lo, hi)
        return out


def metadata(sock, topic, corr=2):
    """(topic error, [(partition, error, leader)]) from Metadata v4."""
    body = struct.pack(">i", 1) + _str(topic) + struct.pack(">b", 0)
    r = _request(sock, API_METADATA, 4, corr, body)
    r.i32()  # throttle
    for _ in range(r.i32()):  # brokers
        r.i32(); r.string(); r.i32(); r.string()
    r.string(); r.i32()  # cluster id, controller
    for _ in range(r.i32()):
        terr, name = r.i16(), r.string()
        r.i8()
        parts = []
        for _ in range(r.i32()):
            perr, idx, leader = r.i16(), r.i32(), r.i32()
            for _ in range(r.i32()):
                r.i32()
            for _ in range(r.i32()):
                r.i32()
            parts.append((idx, perr, leader))
        if name == topic:
            return terr, sorted(parts)
    return -1, []


def end_offsets(sock, topic, partitions, corr=3):
    """{partition: latest offset} from ListOffsets v1 (None where it errs)."""
    body = struct.pack(">i", -1) + struct.pack(">i", 1) + _str(topic)
    body += struct.pack(">i", partitions)
    for p in range(partitions):
        body += struct.pack(">iq", p, -1)
    r = _request(sock, API_LIST_OFFSETS, 1, corr, body)
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p, err, _ts, off = r.i32(), r.i16(), r.i64(), r.i64()
            out[p] = None if err else off
    return out


def topic_ready(host, port, topic, partitions, timeout=2.0):
    """True when Metadata shows every partition of the topic with a leader."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            terr, parts = metadata(s, topic)
            return terr == 0 and len(parts) == partitions and all(
                e == 0 and l >= 0 for _, e, l in parts)
    except (OSError, struct.error):
        return False


def wait_serving(host, port, topic, partitions, expect_total, t_start,
                 deadline_s, poll_s=0.02):
    """Times a restart: seconds from t_start (time.monotonic() just before the
    process was spawned) until (a) Metadata names every partition with a leader
    and (b) ListOffsets returns end offsets summing to expect_total. Each
    attempt's socket may wait for the broker (es accepts on a bound socket
    before it has opened its log); a refused connection is retried every
    poll_s. Returns (metadata_s, offsets_s, total_seen); None where a stage was
    not reached by the deadline."""
    meta_s = offs_s = None
    seen = None
    end = t_start + deadline_s
    while time.monotonic() < end:
        left = end - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(0.1, left)) as s:
                s.settimeout(max(0.1, left))
                if meta_s is None:
                    terr, parts = metadata(s, topic)
                    if terr == 0 and len(parts) == partitions and all(
                            e == 0 and l >= 0 for _, e, l in parts):
                        meta_s = time.monotonic() - t_start
                if meta_s is not None:
                    offs = end_offsets(s, topic, partitions)
                    if all(offs.get(p) is not None for p in range(partitions)):
                        seen = sum(offs.values())
                        if seen >= expect_total:
                            offs_s = time.monotonic() - t_start
                            return meta_s, offs_s, seen
        except (OSError, struct.error):
            pass
        time.sleep(poll_s)
    return meta_s, offs_s, seen


API_OFFSET_COMMIT = 8


def find_coordinator(host, port, group, timeout=10.0):
    """(error, (host, port)) of `group`'s coordinator, FindCoordinator v1."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        r = _request(s, API_FIND_COORDINATOR, 1, 1, _str(group) + struct.pack(">b", 0))
        r.i32()  # throttle
        err = r.i16()
        r.string()
        r.i32()  # node id
        h = r.string()
        p = r.i32()
        return err, (h, p)


def offset_commit(sock, group, topic, partition, offset, corr):
    """The partition's error of a simple commit (no member), OffsetCommit v2."""
    body = (_str(group) + struct.pack(">i", -1) + _str("") + struct.pack(">q", -1)
            + struct.pack(">i", 1) + _str(topic) + struct.pack(">i", 1)
            + struct.pack(">iq", partition, offset) + _str(""))
    r = _request(sock, API_OFFSET_COMMIT, 2, corr, body)
    r.i32()  # topics
    r.string()
    r.i32()  # partitions
    r.i32()
    return r.i16()
