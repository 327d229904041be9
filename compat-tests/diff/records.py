"""records: Kafka record batches (magic 2) built and decoded for the differential tester.

build_batch() makes a batch as a producer would (every codec, keys, values, headers, nulls,
producer id/epoch/sequence, transactional and control flags); decode_batches() turns the
records field of a Fetch answer into plain dicts so two brokers' answers compare field by
field. Compression: gzip from the standard library, snappy (xerial-framed, as the Java
producer writes it) and zstd from cramjam, lz4 frames of independent blocks (as Kafka requires) from lz4;
CRC-32C from the crc32c package.
"""
import gzip
import io
import struct
import time

import cramjam
import crc32c
import lz4.frame

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# Record timestamps: the start of the day before the run (the same for both brokers). Fixed
# old timestamps (2023) made the answers depend on when the reference ran its first
# time-based retention pass (7 days by default; Kafka's first pass runs 30 s after start and
# deletes every expired segment, the active one included), which emptied every prepared
# partition in the middle of the run.
BASE_TS = (int(time.time()) // 86400 - 1) * 86400 * 1000
XERIAL = b"\x82SNAPPY\x00"


def _uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _varint(n):
    return _uvarint((n << 1) ^ (n >> 63))


def _bytes_field(x):
    return _varint(-1) if x is None else _varint(len(x)) + x


def compress(codec, raw):
    if codec == 0:
        return raw
    if codec == 1:
        return gzip.compress(raw, mtime=0)
    if codec == 2:
        block = bytes(cramjam.snappy.compress_raw(raw))
        return XERIAL + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    if codec == 3:  # Kafka reads only frames of independent blocks
        return lz4.frame.compress(raw, block_linked=False, content_checksum=False, store_size=False)
    if codec == 4:
        return bytes(cramjam.zstd.compress(raw))
    raise ValueError(codec)


def decompress(codec, data):
    if codec == 0:
        return data
    if codec == 1:
        return gzip.decompress(data)
    if codec == 2:
        if data.startswith(XERIAL):
            out, pos = bytearray(), 16
            while pos < len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                pos += 4
                out += bytes(cramjam.snappy.decompress_raw(data[pos:pos + n]))
                pos += n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == 3:
        return lz4.frame.decompress(data)
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"codec {codec}")


def build_batch(records, codec="none", base_timestamp=BASE_TS, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, transactional=False, control=False,
                base_offset=0, leader_epoch=-1, log_append_time=False):
    """records: list of dicts {key, value, headers: [(k, v)], ts_delta}; key/value bytes or None."""
    body = io.BytesIO()
    max_ts = base_timestamp
    for i, rec in enumerate(records):
        ts_delta = rec.get("ts_delta", i)
        max_ts = max(max_ts, base_timestamp + ts_delta)
        r = bytearray(b"\x00")
        r += _varint(ts_delta) + _varint(i)
        r += _bytes_field(rec.get("key")) + _bytes_field(rec.get("value"))
        headers = rec.get("headers", [])
        r += _varint(len(headers))
        for hk, hv in headers:
            r += _bytes_field(hk if isinstance(hk, bytes) else hk.encode()) + _bytes_field(hv)
        body.write(_varint(len(r)) + bytes(r))
    codec_id = CODECS[codec]
    payload = compress(codec_id, body.getvalue())
    attrs = codec_id | (8 if log_append_time else 0) | (16 if transactional else 0) | (32 if control else 0)
    after_crc = struct.pack(">hiqqqhii", attrs, len(records) - 1, base_timestamp, max_ts, producer_id,
                            producer_epoch, base_sequence, len(records)) + payload
    crc = crc32c.crc32c(after_crc)
    batch_len = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_len, leader_epoch, 2, crc) + after_crc


class _R:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, n):
        if n < 0 or self.p + n > len(self.d):
            raise ValueError("short")
        out = self.d[self.p:self.p + n]
        self.p += n
        return out

    def varint(self):
        shift = out = 0
        while True:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        return (out >> 1) ^ -(out & 1)

    def vbytes(self):
        n = self.varint()
        return None if n < 0 else self.take(n)


def _show(b):
    if b is None:
        return None
    try:
        return b.decode()
    except UnicodeDecodeError:
        return "hex:" + b.hex()


def decode_batches(data):
    """A records field (bytes or None) -> list of batch dicts; a cut-off tail is one
    {"partial_batch_bytes": n} entry, as Kafka may end a fetch inside a batch."""
    if data is None:
        return None
    out, pos = [], 0
    while pos < len(data):
        if len(data) - pos < 12:
            out.append({"partial_batch_bytes": len(data) - pos})
            break
        base_offset, batch_len = struct.unpack_from(">qi", data, pos)
        if pos + 12 + batch_len > len(data):
            out.append({"partial_batch_bytes": len(data) - pos})
            break
        raw = data[pos:pos + 12 + batch_len]
        pos += 12 + batch_len
        out.append(decode_one(base_offset, raw))
    return out


def decode_one(base_offset, raw):
    leader_epoch, magic = struct.unpack_from(">ib", raw, 12)
    if magic != 2:
        return {"base_offset": base_offset, "magic": magic, "bytes": len(raw)}
    (crc,) = struct.unpack_from(">I", raw, 17)
    (attrs, last_delta, base_ts, max_ts, pid, pepoch, base_seq, count) = struct.unpack_from(">hiqqqhii", raw, 21)
    b = {"base_offset": base_offset, "partition_leader_epoch": leader_epoch, "magic": magic,
         "crc_ok": crc32c.crc32c(raw[21:]) == crc, "codec": attrs & 7,
         "timestamp_type": "log_append" if attrs & 8 else "create",
         "transactional": bool(attrs & 16), "control": bool(attrs & 32),
         "last_offset_delta": last_delta, "base_timestamp": base_ts, "max_timestamp": max_ts,
         "producer_id": pid, "producer_epoch": pepoch, "base_sequence": base_seq, "count": count}
    try:
        body = decompress(attrs & 7, raw[61:])
        r = _R(body)
        recs = []
        for _ in range(count):
            n = r.varint()
            rr = _R(r.take(n))
            rec = {"attributes": rr.take(1)[0], "timestamp_delta": rr.varint(), "offset_delta": rr.varint()}
            key, value = rr.vbytes(), rr.vbytes()
            if attrs & 32 and key is not None and len(key) >= 4:
                ver, typ = struct.unpack(">hh", key[:4])
                rec["control_key"] = {"version": ver, "type": {0: "abort", 1: "commit"}.get(typ, typ)}
                if value is not None and len(value) >= 6:
                    v, epoch = struct.unpack(">hi", value[:6])
                    rec["control_value"] = {"version": v, "coordinator_epoch": epoch}
            else:
                rec["key"], rec["value"] = _show(key), _show(value)
            hs = []
            for _ in range(rr.varint()):
                hk = rr.vbytes()
                hs.append([_show(hk), _show(rr.vbytes())])
            rec["headers"] = hs
            recs.append(rec)
        b["records"] = recs
    except Exception as e:  # noqa: BLE001 - a broken batch is reported, not raised
        b["records_error"] = f"{type(e).__name__}: {e}"
    return b
