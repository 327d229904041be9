"""kproto: the Kafka wire protocol, interpreted from Apache Kafka's own JSON message specs.

The specs (`common/message/*.json`) ship inside the kafka-clients jar that scripts/kafka-ref
fetches; they are the same files the `kafka-protocol` crate is generated from. This module
reads them and encodes and decodes any request or response at any version as plain dicts
(field names in snake_case), with flexible versions, compact types, nullable fields, tagged
fields and nullable structs as the specs define them. Records fields are kept as bytes here;
records.py decodes them. Nothing here knows es.
"""
import io
import json
import re
import struct
import uuid as uuidlib
import zipfile


class DecodeError(Exception):
    pass


def snake(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


class Versions:
    """A spec version range: "0+", "3-7", "5", "none"."""

    def __init__(self, text):
        text = (text or "none").strip()
        if text == "none":
            self.lo, self.hi = 1, 0
        elif text.endswith("+"):
            self.lo, self.hi = int(text[:-1]), 1 << 15
        elif "-" in text:
            a, b = text.split("-")
            self.lo, self.hi = int(a), int(b)
        else:
            self.lo = self.hi = int(text)

    def __contains__(self, v):
        return self.lo <= v <= self.hi


class Field:
    def __init__(self, spec, structs):
        self.name = snake(spec["name"])
        self.spec_name = spec["name"]
        self.type = spec["type"]
        self.versions = Versions(spec.get("versions"))
        self.nullable = Versions(spec.get("nullableVersions"))
        self.tagged = Versions(spec.get("taggedVersions"))
        self.tag = spec.get("tag")
        self.default = spec.get("default")
        self.entity = spec.get("entityType")
        self.is_array = self.type.startswith("[]")
        self.elem = self.type[2:] if self.is_array else self.type
        self.fields = None  # for struct types (or arrays of structs)
        if "fields" in spec:
            self.fields = [Field(f, structs) for f in spec["fields"]]
            structs[self.elem] = self.fields
        self._structs = structs

    @property
    def struct_fields(self):
        if self.fields is not None:
            return self.fields
        return self._structs.get(self.elem)

    def is_struct(self):
        return self.struct_fields is not None and self.elem not in PRIMITIVES

    def default_value(self, v):
        if self.is_array:
            return None if self.default == "null" else []
        if self.is_struct():
            if v in self.nullable and self.default == "null":
                return None
            return default_struct(self.struct_fields, v)
        d = self.default
        t = self.elem
        if isinstance(d, bool):
            d = "true" if d else "false"
        elif isinstance(d, (int, float)):
            d = str(d)
        if d == "null":
            return None
        if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            return int(d, 0) if d not in (None, "") else 0
        if t == "float64":
            return float(d) if d else 0.0
        if t == "bool":
            return d == "true"
        if t == "string":
            return d if d is not None else ""
        if t == "uuid":
            return ZERO_UUID
        if t in ("bytes", "records"):
            return b"" if t == "bytes" else None
        raise ValueError(f"no default for {self.type}")


PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string",
              "bytes", "records", "uuid"}
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def uuid_text(raw):
    import base64
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def uuid_raw(text):
    import base64
    if len(text) == 36:  # canonical form
        return uuidlib.UUID(text).bytes
    return base64.urlsafe_b64decode(text + "==")


def default_struct(fields, v):
    return {f.name: f.default_value(v) for f in fields if f.versions.__contains__(v)}


class Message:
    def __init__(self, spec):
        self.name = spec["name"]
        self.api_key = spec.get("apiKey")
        self.kind = spec["type"]
        self.valid = Versions(spec["validVersions"])
        self.flexible = Versions(spec.get("flexibleVersions", "none"))
        self.structs = {}
        for cs in spec.get("commonStructs", []):
            self.structs[cs["name"]] = None
        for cs in spec.get("commonStructs", []):
            self.structs[cs["name"]] = [Field(f, self.structs) for f in cs["fields"]]
        self.fields = [Field(f, self.structs) for f in spec.get("fields", [])]

    def default(self, v):
        return default_struct(self.fields, v)


def load_specs(jar_path):
    """{(api_key, 'request'|'response'): Message} plus headers, read from the kafka-clients jar."""
    out = {}
    with zipfile.ZipFile(jar_path) as z:
        for name in z.namelist():
            if not (name.startswith("common/message/") and name.endswith(".json")):
                continue
            text = z.read(name).decode()
            text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
            spec = json.loads(text)
            if spec.get("type") in ("request", "response") and "apiKey" in spec:
                out[(spec["apiKey"], spec["type"])] = Message(spec)
    return out


# ---- primitive writers and readers --------------------------------------------------------

def w_uvarint(buf, n):
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            buf.write(bytes([b | 0x80]))
        else:
            buf.write(bytes([b]))
            return


def w_varint(buf, n):
    w_uvarint(buf, (n << 1) ^ (n >> 63))


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise DecodeError(f"need {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def uvarint(self):
        shift, out = 0, 0
        while True:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise DecodeError("varint too long")

    def varint(self):
        n = self.uvarint()
        return (n >> 1) ^ -(n & 1)

    def remaining(self):
        return len(self.data) - self.pos


INT_FMT = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I",
           "int64": ">q", "float64": ">d"}


# ---- encoding -----------------------------------------------------------------------------

def encode_struct(buf, fields, value, v, flex, extra_tags=None):
    tagged = []
    for f in fields:
        if v not in f.versions:
            continue
        x = value.get(f.name, f.default_value(v)) if isinstance(value, dict) else None
        if flex and v in f.tagged:
            if x != f.default_value(v):
                tagged.append((f.tag, f, x))
            continue
        encode_field(buf, f, x, v, flex)
    if flex:
        # Tagged fields the spec does not declare: `extra_tags` (the top
        # level's, by the caller) and a struct's own `_unknown_tags`, as
        # decode_struct gives them back ({tag: hex text or bytes}).
        extra = dict(extra_tags or {})
        if isinstance(value, dict):
            for t, raw in (value.get("_unknown_tags") or {}).items():
                extra[int(t)] = bytes.fromhex(raw) if isinstance(raw, str) else raw
        tags = [(t, None, raw) for t, raw in extra.items()]
        items = sorted(tagged + tags, key=lambda t: t[0])
        w_uvarint(buf, len(items))
        for tag, f, x in items:
            w_uvarint(buf, tag)
            if f is None:
                payload = x
            else:
                sub = io.BytesIO()
                encode_field(sub, f, x, v, flex)
                payload = sub.getvalue()
            w_uvarint(buf, len(payload))
            buf.write(payload)


def encode_field(buf, f, x, v, flex):
    if f.is_array:
        if x is None:
            if flex:
                w_uvarint(buf, 0)
            else:
                buf.write(struct.pack(">i", -1))
            return
        if flex:
            w_uvarint(buf, len(x) + 1)
        else:
            buf.write(struct.pack(">i", len(x)))
        for item in x:
            encode_value(buf, f, f.elem, item, v, flex)
        return
    if f.is_struct() and v in f.nullable:
        if x is None:
            buf.write(b"\xff")
            return
        buf.write(b"\x01")
    encode_value(buf, f, f.elem, x, v, flex)


def encode_value(buf, f, t, x, v, flex):
    if t in INT_FMT:
        buf.write(struct.pack(INT_FMT[t], x))
    elif t == "bool":
        buf.write(b"\x01" if x else b"\x00")
    elif t == "uuid":
        buf.write(uuid_raw(x))
    elif t == "string":
        if x is None:
            if flex:
                w_uvarint(buf, 0)
            else:
                buf.write(struct.pack(">h", -1))
            return
        raw = x.encode() if isinstance(x, str) else x  # bytes: deliberately invalid UTF-8
        if flex:
            w_uvarint(buf, len(raw) + 1)
        else:
            buf.write(struct.pack(">h", len(raw)))
        buf.write(raw)
    elif t in ("bytes", "records"):
        if x is None:
            if flex:
                w_uvarint(buf, 0)
            else:
                buf.write(struct.pack(">i", -1))
            return
        if flex:
            w_uvarint(buf, len(x) + 1)
        else:
            buf.write(struct.pack(">i", len(x)))
        buf.write(x)
    else:
        fields = f.struct_fields if t == f.elem else None
        if fields is None:
            raise ValueError(f"unknown type {t}")
        encode_struct(buf, fields, x or {}, v, flex)


def encode_body(msg, v, value, extra_tags=None):
    buf = io.BytesIO()
    encode_struct(buf, msg.fields, value, v, v in msg.flexible, extra_tags)
    return buf.getvalue()


def request_header_version(msg, v):
    return 2 if v in msg.flexible else 1


def response_header_version(api_key, msg, v):
    if api_key == 18:  # ApiVersions responses always use header v0 (KIP-511)
        return 0
    return 1 if v in msg.flexible else 0


def encode_request(req_msg, v, correlation_id, body, client_id="es-diff", extra_tags=None,
                   header_tags=None):
    buf = io.BytesIO()
    buf.write(struct.pack(">hhi", req_msg.api_key, v, correlation_id))
    if client_id is None:
        buf.write(struct.pack(">h", -1))
    else:
        raw = client_id.encode()
        buf.write(struct.pack(">h", len(raw)))
        buf.write(raw)
    if request_header_version(req_msg, v) >= 2:
        tags = header_tags or {}
        w_uvarint(buf, len(tags))
        for t in sorted(tags):
            w_uvarint(buf, t)
            w_uvarint(buf, len(tags[t]))
            buf.write(tags[t])
    buf.write(encode_body(req_msg, v, body, extra_tags))
    return buf.getvalue()


# ---- decoding -----------------------------------------------------------------------------

def decode_struct(r, fields, v, flex):
    out = {}
    for f in fields:
        if v not in f.versions:
            continue
        if flex and v in f.tagged:
            out[f.name] = f.default_value(v)
            continue
        out[f.name] = decode_field(r, f, v, flex)
    if flex:
        n = r.uvarint()
        by_tag = {f.tag: f for f in fields if v in f.versions and v in f.tagged}
        unknown = {}
        for _ in range(n):
            tag = r.uvarint()
            size = r.uvarint()
            payload = r.take(size)
            f = by_tag.get(tag)
            if f is None:
                unknown[tag] = payload.hex()
                continue
            sub = Reader(payload)
            out[f.name] = decode_field(sub, f, v, flex)
        if unknown:
            out["_unknown_tags"] = unknown
    return out


def decode_field(r, f, v, flex):
    if f.is_array:
        n = r.uvarint() - 1 if flex else r.unpack(">i")
        if n < 0:
            return None
        if n > r.remaining():
            raise DecodeError(f"array {f.name} of {n} items with {r.remaining()} bytes left")
        return [decode_value(r, f, f.elem, v, flex) for _ in range(n)]
    if f.is_struct() and v in f.nullable:
        flag = r.unpack(">b")
        if flag < 0:
            return None
    return decode_value(r, f, f.elem, v, flex)


def decode_value(r, f, t, v, flex):
    if t in INT_FMT:
        return r.unpack(INT_FMT[t])
    if t == "bool":
        return r.take(1) != b"\x00"
    if t == "uuid":
        return uuid_text(r.take(16))
    if t == "string":
        n = r.uvarint() - 1 if flex else r.unpack(">h")
        if n < 0:
            return None
        raw = r.take(n)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return {"invalid_utf8": raw.hex()}
    if t in ("bytes", "records"):
        n = r.uvarint() - 1 if flex else r.unpack(">i")
        if n < 0:
            return None
        return r.take(n)
    fields = f.struct_fields
    if fields is None:
        raise DecodeError(f"unknown type {t}")
    return decode_struct(r, fields, v, flex)


def decode_response(api_key, resp_msg, v, frame):
    """frame: the response bytes after the 4-byte length. Returns (correlation_id, body)."""
    r = Reader(frame)
    corr = r.unpack(">i")
    if response_header_version(api_key, resp_msg, v) >= 1:
        n = r.uvarint()
        for _ in range(n):
            r.uvarint()
            r.take(r.uvarint())
    body = decode_struct(r, resp_msg.fields, v, v in resp_msg.flexible)
    if r.remaining():
        body["_trailing_bytes"] = r.remaining()
    return corr, body


def walk_fields(fields, v, prefix=()):
    """Every field present at version v, depth first: (path tuple, Field)."""
    for f in fields:
        if v not in f.versions:
            continue
        yield prefix + (f.name,), f
        sub = f.struct_fields if f.is_struct() else None
        if sub:
            yield from walk_fields(sub, v, prefix + (f.name,))
