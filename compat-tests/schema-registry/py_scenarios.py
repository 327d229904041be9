"""compat-tests/schema-registry/py_scenarios.py: confluent-kafka-python against a schema registry.

Run by compat-tests/schema-registry/run inside the suite's venv (prepare makes it):
  python py_scenarios.py --registry URL --bootstrap HOST:PORT --out FILE [--quick] [--only a,b]
Every scenario uses the library as a user does: SchemaRegistryClient for the REST API, the
Avro / JSON Schema / Protobuf serializers with a real Producer and Consumer through the broker at
--bootstrap, and the registry at --registry. Subjects and topics carry a per-run tag, so a run
against a registry that already holds data (or a second run) does not collide.
Writes a JSON list of {name, status: passed|failed, detail, seconds} to --out.
"""
import argparse
import json
import os
import signal
import struct
import sys
import time
import traceback
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

TAG = uuid.uuid4().hex[:8]
POLL_TIMEOUT_S = 30  # the longest a round trip waits for its records to come back
SCENARIO_TIMEOUT_S = 150  # a scenario still running then fails (SIGALRM), so one hang cannot take the run
SCENARIOS = []


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def scenario(name, quick=True):
    def deco(fn):
        SCENARIOS.append((name, fn, quick))
        return fn
    return deco


def subject(name):
    return f"sr-{TAG}-{name}"


def expect_error(fn, code, what):
    """Runs fn; it must raise SchemaRegistryError with error_code code."""
    try:
        fn()
    except SchemaRegistryError as e:
        check(e.error_code == code, f"{what}: wanted error_code {code}, got {e.error_code} "
                                    f"(HTTP {e.http_status_code}: {e.error_message})")
        return e
    raise Fail(f"{what}: wanted error_code {code}, the call succeeded")


def avro_record(name, fields):
    return json.dumps({"type": "record", "name": name, "namespace": "es.compat", "fields": fields})


A = avro_record("Rec", [{"name": "a", "type": "int"}])
A_LONG = avro_record("Rec", [{"name": "a", "type": "long"}])
A_STR = avro_record("Rec", [{"name": "a", "type": "string"}])
A_NULLABLE = avro_record("Rec", [{"name": "a", "type": ["null", "int"], "default": None}])
AB = avro_record("Rec", [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])
AB_DEF = avro_record("Rec", [{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"}])
ENUM2 = json.dumps({"type": "enum", "name": "Colour", "namespace": "es.compat", "symbols": ["RED", "GREEN"]})
ENUM3 = json.dumps({"type": "enum", "name": "Colour", "namespace": "es.compat",
                    "symbols": ["RED", "GREEN", "BLUE"]})


class Ctx:
    def __init__(self, args):
        self.url = args.registry
        self.bootstrap = args.bootstrap

    def client(self):
        """A new client per scenario: the library caches lookups, a fresh one asks the registry."""
        return SchemaRegistryClient({"url": self.url})

    # ---- Kafka helpers: a real producer and consumer through the broker under test ----

    def topic(self, name):
        t = f"sr-{TAG}-{name}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fs = admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)], operation_timeout=30)
        for f in fs.values():
            f.result(timeout=60)
        return t

    def produce(self, topic, values, serializer, key=None):
        # Bounded: a record not delivered within 60 s fails the scenario (librdkafka's default of
        # 300 s would also hold the producer's destructor that long).
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "message.timeout.ms": 60000})
        errors = []
        for v in values:
            ctx = SerializationContext(topic, MessageField.VALUE)
            p.produce(topic, key=key, value=serializer(v, ctx),
                      on_delivery=lambda err, msg: errors.append(err) if err else None)
        left = p.flush(60)
        check(left == 0, f"{left} records not delivered within 60 s")
        check(not errors, f"delivery errors: {errors[:3]}")

    def consumer(self, topic):
        """A consumer assigned partition 0 from its start: no group coordination, so neither
        polling nor close() waits on a group coordinator."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"sr-{TAG}-{topic}",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        return c

    def consume(self, topic, n):
        """The first n records' raw values of partition 0, read from the beginning."""
        c = self.consumer(topic)
        out, deadline = [], time.monotonic() + POLL_TIMEOUT_S
        try:
            while len(out) < n and time.monotonic() < deadline:
                m = c.poll(1.0)
                if m is None:
                    continue
                check(m.error() is None, f"consumer error: {m.error()}")
                out.append(m.value())
        finally:
            c.close()
        check(len(out) == n, f"consumed {len(out)} of {n} records within {POLL_TIMEOUT_S} s")
        return out


def wire_id(raw):
    check(raw is not None and len(raw) >= 5 and raw[0] == 0,
          f"value does not start with magic byte 0 and a schema id: {raw[:8]!r}")
    return struct.unpack(">I", raw[1:5])[0]


# ---------------------------------------------------------------------------------------
# SchemaRegistryClient: the REST API as the library drives it
# ---------------------------------------------------------------------------------------

@scenario("client/register-get-by-id")
def _(ctx):
    c, s = ctx.client(), subject("reg")
    sid = c.register_schema(s, Schema(A, "AVRO"))
    check(isinstance(sid, int) and sid > 0, f"id {sid!r}")
    got = ctx.client().get_schema(sid)
    check(json.loads(got.schema_str) == json.loads(A), f"get_schema({sid}) = {got.schema_str}")
    check(got.schema_type in ("AVRO", None), f"schema_type {got.schema_type}")


@scenario("client/register-idempotent-and-shared-id")
def _(ctx):
    c = ctx.client()
    s1, s2 = subject("idem1"), subject("idem2")
    i1 = c.register_schema(s1, Schema(AB, "AVRO"))
    i2 = ctx.client().register_schema(s1, Schema(AB, "AVRO"))
    check(i1 == i2, f"the same schema twice in one subject: ids {i1} and {i2}")
    check(ctx.client().get_versions(s1) == [1], f"versions after registering twice: {ctx.client().get_versions(s1)}")
    i3 = ctx.client().register_schema(s2, Schema(AB, "AVRO"))
    check(i3 == i1, f"the same schema in another subject: id {i3}, wanted {i1} (ids are global)")
    subs = ctx.client().get_subjects_by_schema_id(i1)
    check(set(subs) >= {s1, s2}, f"subjects of id {i1}: {subs}")


@scenario("client/lookup-schema")
def _(ctx):
    c, s = ctx.client(), subject("lookup")
    sid = c.register_schema(s, Schema(A, "AVRO"))
    c.register_schema(s, Schema(AB_DEF, "AVRO"))
    r = ctx.client().lookup_schema(s, Schema(A, "AVRO"))
    check(r.schema_id == sid and r.version == 1 and r.subject == s, f"lookup: {r}")
    # White space and key order do not make another schema.
    spaced = json.dumps(json.loads(A), indent=4)
    r2 = ctx.client().lookup_schema(s, Schema(spaced, "AVRO"))
    check(r2.schema_id == sid, f"lookup of the same schema re-formatted: {r2}")
    expect_error(lambda: ctx.client().lookup_schema(s, Schema(A_STR, "AVRO")), 40403, "lookup of an unknown schema")
    expect_error(lambda: ctx.client().lookup_schema(subject("nosuch"), Schema(A, "AVRO")), 40401,
                 "lookup in an unknown subject")


@scenario("client/subjects-versions-latest")
def _(ctx):
    c, s = ctx.client(), subject("vers")
    i1 = c.register_schema(s, Schema(A, "AVRO"))
    i2 = c.register_schema(s, Schema(AB_DEF, "AVRO"))
    check(i1 != i2, "two different schemas got one id")
    c = ctx.client()
    check(s in c.get_subjects(), f"{s} not in get_subjects()")
    check(c.get_subjects(subject_prefix=f"sr-{TAG}-ver") == [s], f"prefix: {c.get_subjects(subject_prefix=f'sr-{TAG}-ver')}")
    check(c.get_versions(s) == [1, 2], f"versions {c.get_versions(s)}")
    v1 = c.get_version(s, 1)
    check(v1.schema_id == i1 and v1.version == 1, f"version 1: {v1}")
    latest = c.get_latest_version(s)
    check(latest.schema_id == i2 and latest.version == 2, f"latest: {latest}")
    check(c.get_version(s, "latest").version == 2, "get_version(latest)")
    vs = c.get_schema_versions(i2)
    check(any(v.subject == s and v.version == 2 for v in vs), f"versions of id {i2}: {vs}")
    expect_error(lambda: ctx.client().get_version(s, 7), 40402, "an unknown version")
    expect_error(lambda: ctx.client().get_versions(subject("nosuch")), 40401, "versions of an unknown subject")
    expect_error(lambda: ctx.client().get_schema(2_000_000_000), 40403, "an unknown id")


@scenario("client/default-compatibility-is-backward")
def _(ctx):
    """Confluent's global default is BACKWARD; nothing in this suite changes the global level."""
    level = ctx.client().get_compatibility()
    check(level == "BACKWARD", f"global compatibility {level}")


@scenario("client/schema-types")
def _(ctx):
    types = ctx.client().get_schema_types()
    check("AVRO" in types, f"types {types}")


@scenario("client/schema-types-json-protobuf")
def _(ctx):
    types = ctx.client().get_schema_types()
    check({"JSON", "PROTOBUF"} <= set(types), f"types {types}")


@scenario("client/delete-version-soft-then-permanent")
def _(ctx):
    c, s = ctx.client(), subject("delver")
    c.register_schema(s, Schema(A, "AVRO"))
    c.register_schema(s, Schema(AB_DEF, "AVRO"))
    check(c.delete_version(s, 1) == 1, "soft delete of version 1")
    c = ctx.client()
    check(c.get_versions(s) == [2], f"versions after the soft delete: {c.get_versions(s)}")
    check(c.get_versions(s, deleted=True) == [1, 2], f"versions with deleted: {c.get_versions(s, deleted=True)}")
    expect_error(lambda: ctx.client().get_version(s, 1), 40402, "a soft-deleted version")
    check(ctx.client().get_version(s, 1, deleted=True).version == 1, "a soft-deleted version with deleted=true")
    check(ctx.client().delete_version(s, 1, permanent=True) == 1, "permanent delete of version 1")
    expect_error(lambda: ctx.client().get_version(s, 1, deleted=True), 40402, "a permanently deleted version")
    expect_error(lambda: ctx.client().delete_version(s, 2, permanent=True), 40407,
                 "a permanent delete of a version not soft-deleted first")


@scenario("client/delete-subject-soft-then-permanent")
def _(ctx):
    c, s = ctx.client(), subject("delsub")
    c.register_schema(s, Schema(A, "AVRO"))
    c.register_schema(s, Schema(AB_DEF, "AVRO"))
    expect_error(lambda: ctx.client().delete_subject(s, permanent=True), 40405,
                 "a permanent delete of a subject not soft-deleted first")
    check(sorted(ctx.client().delete_subject(s)) == [1, 2], "soft delete of the subject")
    c = ctx.client()
    check(s not in c.get_subjects(), "a soft-deleted subject is listed")
    check(s in c.get_subjects(deleted=True), "a soft-deleted subject is not listed with deleted=true")
    expect_error(lambda: ctx.client().get_versions(s), 40401, "versions of a soft-deleted subject")
    expect_error(lambda: ctx.client().delete_subject(s), 40404, "a second soft delete")
    check(sorted(ctx.client().delete_subject(s, permanent=True)) == [1, 2], "permanent delete")
    check(s not in ctx.client().get_subjects(deleted=True), "a permanently deleted subject is listed")
    # Registering again after a delete starts at version 1 again... of the same id (ids are stable).
    ctx.client().register_schema(s, Schema(A, "AVRO"))
    check(ctx.client().get_versions(s) == [1], f"versions after re-registering: {ctx.client().get_versions(s)}")


@scenario("client/config-global-and-subject")
def _(ctx):
    c, s = ctx.client(), subject("cfg")
    c.register_schema(s, Schema(A, "AVRO"))
    check(c.get_compatibility() in ("BACKWARD", "NONE", "FORWARD", "FULL", "BACKWARD_TRANSITIVE",
                                     "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"), "global level")
    r = c.set_compatibility(s, "FULL_TRANSITIVE")  # the PUT's answer, {"compatibility": ...}
    check(r.get("compatibility") == "FULL_TRANSITIVE", f"set subject level: {r}")
    check(ctx.client().get_compatibility(s) == "FULL_TRANSITIVE", "get subject level")
    ctx.client().delete_config(s)
    # Without a level of its own, GET /config/{s} is 40408 (the client's get_compatibility does not
    # ask defaultToGlobal).
    expect_error(lambda: ctx.client().get_compatibility(s), 40408, "the level of a subject without one")
    expect_error(lambda: ctx.client().set_compatibility(s, "SIDEWAYS"), 42203, "an unknown level")


@scenario("client/mode-readonly-refuses-writes")
def _(ctx):
    c, s = ctx.client(), subject("mode")
    c.register_schema(s, Schema(A, "AVRO"))
    check(c.update_mode(s, "READONLY") == "READONLY", "set READONLY")
    check(ctx.client().get_mode(s) == "READONLY", "get mode")
    expect_error(lambda: ctx.client().register_schema(s, Schema(AB_DEF, "AVRO")), 42205,
                 "registering in a READONLY subject")
    check(ctx.client().lookup_schema(s, Schema(A, "AVRO")).version == 1, "lookup while READONLY")
    check(ctx.client().update_mode(s, "READWRITE") == "READWRITE", "back to READWRITE")
    ctx.client().register_schema(s, Schema(AB_DEF, "AVRO"))
    check(ctx.client().get_global_mode() == "READWRITE", f"global mode {ctx.client().get_global_mode()}")


@scenario("client/invalid-schema")
def _(ctx):
    expect_error(lambda: ctx.client().register_schema(subject("bad"), Schema('{"type": "record", "name": 1}', "AVRO")),
                 42201, "an invalid Avro schema")
    expect_error(lambda: ctx.client().register_schema(subject("bad2"), Schema('{"type": "nosuchtype"}', "AVRO")),
                 42201, "an unknown Avro type")


@scenario("client/test-compatibility-verbose")
def _(ctx):
    c, s = ctx.client(), subject("testcompat")
    c.set_compatibility(s, "BACKWARD")
    c.register_schema(s, Schema(A, "AVRO"))
    check(ctx.client().test_compatibility(s, Schema(AB_DEF, "AVRO")) is True, "adding a field with a default")
    check(ctx.client().test_compatibility(s, Schema(AB, "AVRO")) is False, "adding a field without a default")
    res = ctx.client().test_compatibility(s, Schema(AB, "AVRO"), verbose=True)
    # verbose=True gives (is_compatible, messages) in this library version, else a bool
    if isinstance(res, tuple):
        check(res[0] is False and res[1], f"verbose: {res}")


@scenario("client/avro-references")
def _(ctx):
    c = ctx.client()
    inner_s, outer_s = subject("ref-inner"), subject("ref-outer")
    inner = avro_record("Address", [{"name": "street", "type": "string"}])
    c.register_schema(inner_s, Schema(inner, "AVRO"))
    outer = avro_record("Person", [{"name": "name", "type": "string"},
                                   {"name": "home", "type": "es.compat.Address"}])
    sid = ctx.client().register_schema(
        outer_s, Schema(outer, "AVRO", [SchemaReference("es.compat.Address", inner_s, 1)]))
    got = ctx.client().get_schema(sid)
    check([(r.name, r.subject, r.version) for r in got.references] == [("es.compat.Address", inner_s, 1)],
          f"references {got.references}")
    refs = ctx.client().get_referenced_by(inner_s, 1)
    check(refs == [sid], f"referencedby {refs}")
    expect_error(lambda: ctx.client().delete_version(inner_s, 1), 42206, "deleting a referenced version")


# ---------------------------------------------------------------------------------------
# Evolution under each compatibility level: history, candidate, expected verdict per level
# ---------------------------------------------------------------------------------------

LEVELS = ["BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"]
# Columns in LEVELS order; True: the registry accepts the candidate, False: refuses (409).
AVRO_EVOLUTION = {
    # name: (history, candidate, verdicts)
    "add-field-with-default": ([A], AB_DEF, [True, True, True, True, True, True, True]),
    "add-field-no-default": ([A], AB, [False, False, True, True, False, False, True]),
    "remove-field-no-default": ([AB], A, [True, True, False, False, False, False, True]),
    "remove-field-with-default": ([AB_DEF], A, [True, True, True, True, True, True, True]),
    "promote-int-to-long": ([A], A_LONG, [True, True, False, False, False, False, True]),
    "change-int-to-string": ([A], A_STR, [False, False, False, False, False, False, True]),
    "int-to-nullable-union": ([A], A_NULLABLE, [True, True, False, False, False, False, True]),
    "enum-add-symbol": ([ENUM2], ENUM3, [True, True, False, False, False, False, True]),
    # Only the transitive levels look past the latest version.
    "transitive-backward": ([A, AB_DEF], AB, [True, False, True, True, True, False, True]),
    "transitive-forward": ([AB, AB_DEF], A, [True, True, True, False, True, False, True]),
}

JSON_OPEN_A = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
JSON_CLOSED_A = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}},
                            "additionalProperties": False})
JSON_CLOSED_AB = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                             "additionalProperties": False})
JSON_CLOSED_A_STR = json.dumps({"type": "object", "properties": {"a": {"type": "string"}},
                                "additionalProperties": False})
JSON_CLOSED_A_REQ = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}},
                                "required": ["a"], "additionalProperties": False})
JSON_LEVELS = ["BACKWARD", "FORWARD", "FULL", "NONE"]
JSON_EVOLUTION = {
    # A closed content model: a reader that does not know b refuses data that has it.
    "closed-add-optional-property": ([JSON_CLOSED_A], JSON_CLOSED_AB, [True, False, False, True]),
    "closed-remove-property": ([JSON_CLOSED_AB], JSON_CLOSED_A, [False, True, False, True]),
    "change-property-type": ([JSON_CLOSED_A], JSON_CLOSED_A_STR, [False, False, False, True]),
    "add-required": ([JSON_CLOSED_A], JSON_CLOSED_A_REQ, [False, True, False, True]),
    "open-to-closed": ([JSON_OPEN_A], JSON_CLOSED_A, [False, True, False, True]),
}

PROTO_A = 'syntax = "proto3";\npackage es.compat;\nmessage Rec {\n  int32 a = 1;\n}\n'
PROTO_AB = 'syntax = "proto3";\npackage es.compat;\nmessage Rec {\n  int32 a = 1;\n  string b = 2;\n}\n'
PROTO_A_STR = 'syntax = "proto3";\npackage es.compat;\nmessage Rec {\n  string a = 1;\n}\n'
PROTO_A_INT64 = 'syntax = "proto3";\npackage es.compat;\nmessage Rec {\n  int64 a = 1;\n}\n'
PROTO_NO_REC = 'syntax = "proto3";\npackage es.compat;\nmessage Other {\n  int32 a = 1;\n}\n'
PROTO_LEVELS = ["BACKWARD", "FORWARD", "FULL", "NONE"]
PROTO_EVOLUTION = {
    "add-field": ([PROTO_A], PROTO_AB, [True, True, True, True]),
    "remove-field": ([PROTO_AB], PROTO_A, [True, True, True, True]),
    "change-scalar-kind": ([PROTO_A], PROTO_A_STR, [False, False, False, True]),
    "int32-to-int64": ([PROTO_A], PROTO_A_INT64, [True, True, True, True]),
    "remove-message": ([PROTO_A], PROTO_NO_REC, [False, False, False, True]),
}


def evolution_scenario(fmt, case, level, history, candidate, accept):
    def run(ctx):
        s = subject(f"evo-{fmt.lower()}-{case}-{level.lower()}")
        c = ctx.client()
        r = c.set_compatibility(s, level)
        check(r.get("compatibility") == level, f"set {level}: {r}")
        for h in history:
            ctx.client().register_schema(s, Schema(h, fmt))
        if len(history) == 1:
            # POST /compatibility/subjects/{s}/versions/latest: with one version, latest is all there is
            # (with more, what a non-transitive level checks at this endpoint differs between
            # registries; the registration below is the verdict that counts).
            compatible = ctx.client().test_compatibility(s, Schema(candidate, fmt))
            check(compatible is accept, f"test_compatibility said {compatible}, wanted {accept}")
        try:
            ctx.client().register_schema(s, Schema(candidate, fmt))
            got = True
        except SchemaRegistryError as e:
            check(e.http_status_code == 409, f"registering the candidate: HTTP {e.http_status_code} "
                                             f"{e.error_code}: {e.error_message}")
            got = False
        check(got is accept, f"the registry {'accepted' if got else 'refused'} the candidate under {level}")
        want_versions = list(range(1, len(history) + 1 + (1 if accept else 0)))
        check(ctx.client().get_versions(s) == want_versions, f"versions {ctx.client().get_versions(s)}")
    return run


for _case, (_hist, _cand, _verdicts) in AVRO_EVOLUTION.items():
    for _level, _v in zip(LEVELS, _verdicts):
        # quick: the non-transitive levels and NONE, plus the transitive cases in full
        _q = not _level.endswith("_TRANSITIVE") or _case.startswith("transitive")
        scenario(f"evolution/avro/{_case}/{_level}", quick=_q)(
            evolution_scenario("AVRO", _case, _level, _hist, _cand, _v))
for _case, (_hist, _cand, _verdicts) in JSON_EVOLUTION.items():
    for _level, _v in zip(JSON_LEVELS, _verdicts):
        scenario(f"evolution/json/{_case}/{_level}", quick=_level == "BACKWARD")(
            evolution_scenario("JSON", _case, _level, _hist, _cand, _v))
for _case, (_hist, _cand, _verdicts) in PROTO_EVOLUTION.items():
    for _level, _v in zip(PROTO_LEVELS, _verdicts):
        scenario(f"evolution/protobuf/{_case}/{_level}", quick=_level == "BACKWARD")(
            evolution_scenario("PROTOBUF", _case, _level, _hist, _cand, _v))


# ---------------------------------------------------------------------------------------
# Serializers and deserializers, through the broker's Kafka port
# ---------------------------------------------------------------------------------------

def _avro():
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    return AvroSerializer, AvroDeserializer


USER_V1 = avro_record("User", [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}])
USER_V2 = avro_record("User", [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                               {"name": "email", "type": ["null", "string"], "default": None}])


@scenario("serde/avro-round-trip")
def _(ctx):
    Ser, Deser = _avro()
    topic = ctx.topic("avro")
    ser = Ser(ctx.client(), USER_V1)
    values = [{"name": f"user-{i}", "age": i} for i in range(20)]
    ctx.produce(topic, values, ser)
    raw = ctx.consume(topic, len(values))
    reg = ctx.client().get_latest_version(f"{topic}-value")
    check(all(wire_id(r) == reg.schema_id for r in raw), f"wire ids {set(wire_id(r) for r in raw)} != {reg.schema_id}")
    de = Deser(ctx.client())
    got = [de(r, SerializationContext(topic, MessageField.VALUE)) for r in raw]
    check(got == values, f"decoded {got[:2]}... != produced {values[:2]}...")


@scenario("serde/avro-evolution-reader-schema")
def _(ctx):
    """Records written with v1 and v2 of a subject; a reader with v2 gets v2's default for v1's."""
    Ser, Deser = _avro()
    topic = ctx.topic("avro-evo")
    ctx.produce(topic, [{"name": "old", "age": 1}], Ser(ctx.client(), USER_V1))
    ctx.produce(topic, [{"name": "new", "age": 2, "email": "n@example.org"}], Ser(ctx.client(), USER_V2))
    check(ctx.client().get_versions(f"{topic}-value") == [1, 2], "two versions registered by the serializers")
    raw = ctx.consume(topic, 2)
    check(wire_id(raw[0]) != wire_id(raw[1]), "both records carry the same schema id")
    de = Deser(ctx.client(), USER_V2)
    got = [de(r, SerializationContext(topic, MessageField.VALUE)) for r in raw]
    check(got == [{"name": "old", "age": 1, "email": None}, {"name": "new", "age": 2, "email": "n@example.org"}],
          f"decoded {got}")


@scenario("serde/avro-incompatible-refused")
def _(ctx):
    Ser, _ = _avro()
    topic = ctx.topic("avro-refuse")
    ctx.produce(topic, [{"name": "a", "age": 1}], Ser(ctx.client(), USER_V1))
    bad = avro_record("User", [{"name": "name", "type": "int"}])
    try:
        Ser(ctx.client(), bad)({"name": 5}, SerializationContext(topic, MessageField.VALUE))
    except Exception as e:  # the library wraps SchemaRegistryError
        check("409" in str(e) or "ncompatible" in str(e), f"the serializer failed otherwise: {e!r}")
        return
    raise Fail("the serializer registered an incompatible schema")


@scenario("serde/avro-use-latest-no-auto-register")
def _(ctx):
    Ser, Deser = _avro()
    topic = ctx.topic("avro-latest")
    s = f"{topic}-value"
    ctx.client().register_schema(s, Schema(USER_V1, "AVRO"))
    sid = ctx.client().register_schema(s, Schema(USER_V2, "AVRO"))
    ser = Ser(ctx.client(), USER_V2, conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx.produce(topic, [{"name": "x", "age": 3, "email": None}], ser)
    raw = ctx.consume(topic, 1)
    check(wire_id(raw[0]) == sid, f"wire id {wire_id(raw[0])}, latest is {sid}")
    check(Deser(ctx.client())(raw[0], SerializationContext(topic, MessageField.VALUE))["name"] == "x", "decode")


@scenario("serde/avro-record-name-strategy")
def _(ctx):
    from confluent_kafka.schema_registry import record_subject_name_strategy, topic_record_subject_name_strategy
    Ser, Deser = _avro()
    topic = ctx.topic("avro-rns")
    ctx.produce(topic, [{"name": "r", "age": 4}],
                Ser(ctx.client(), USER_V1, conf={"subject.name.strategy": record_subject_name_strategy}))
    ctx.produce(topic, [{"name": "t", "age": 5}],
                Ser(ctx.client(), USER_V1, conf={"subject.name.strategy": topic_record_subject_name_strategy}))
    subs = ctx.client().get_subjects()
    check("es.compat.User" in subs, "RecordNameStrategy's subject es.compat.User missing")
    check(f"{topic}-es.compat.User" in subs, "TopicRecordNameStrategy's subject missing")
    raw = ctx.consume(topic, 2)
    de = Deser(ctx.client())
    check([de(r, SerializationContext(topic, MessageField.VALUE))["name"] for r in raw] == ["r", "t"], "decode")


@scenario("serde/avro-key-and-value")
def _(ctx):
    Ser, Deser = _avro()
    topic = ctx.topic("avro-key")
    kser = Ser(ctx.client(), '"string"')
    vser = Ser(ctx.client(), USER_V1)
    p = Producer({"bootstrap.servers": ctx.bootstrap, "message.timeout.ms": 60000})
    p.produce(topic, key=kser("k1", SerializationContext(topic, MessageField.KEY)),
              value=vser({"name": "kv", "age": 6}, SerializationContext(topic, MessageField.VALUE)))
    check(p.flush(60) == 0, "not delivered")
    c = ctx.consumer(topic)
    deadline, m = time.monotonic() + POLL_TIMEOUT_S, None
    while m is None and time.monotonic() < deadline:
        m = c.poll(1.0)
    c.close()
    check(m is not None and m.error() is None, f"nothing consumed: {m and m.error()}")
    de = Deser(ctx.client())
    check(de(m.key(), SerializationContext(topic, MessageField.KEY)) == "k1", "key")
    check(de(m.value(), SerializationContext(topic, MessageField.VALUE)) == {"name": "kv", "age": 6}, "value")
    subs = set(ctx.client().get_subjects())
    check({f"{topic}-key", f"{topic}-value"} <= subs, "TopicNameStrategy's -key and -value subjects")


JSON_USER = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "User", "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"], "additionalProperties": False})


@scenario("serde/json-round-trip")
def _(ctx):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    topic = ctx.topic("json")
    values = [{"name": f"j{i}", "age": i} for i in range(10)]
    ctx.produce(topic, values, JSONSerializer(JSON_USER, ctx.client()))
    raw = ctx.consume(topic, len(values))
    reg = ctx.client().get_latest_version(f"{topic}-value")
    check(reg.schema.schema_type == "JSON", f"type {reg.schema.schema_type}")
    check(all(wire_id(r) == reg.schema_id for r in raw), "wire ids")
    de = JSONDeserializer(None, schema_registry_client=ctx.client())
    got = [de(r, SerializationContext(topic, MessageField.VALUE)) for r in raw]
    check(got == values, f"decoded {got[:2]}")


@scenario("serde/json-validation-refuses-bad-value")
def _(ctx):
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import SerializationError
    topic = ctx.topic("json-bad")
    ser = JSONSerializer(JSON_USER, ctx.client())
    ser({"name": "ok", "age": 1}, SerializationContext(topic, MessageField.VALUE))
    try:
        ser({"name": "bad", "age": "old"}, SerializationContext(topic, MessageField.VALUE))
    except SerializationError:
        return
    raise Fail("a value not valid under the schema was serialized")


def _proto_classes():
    """Message classes built at run time from descriptors (what protoc would generate): Rec in
    es/compat/rec.proto, and Order in es/compat/order.proto, which imports es/compat/money.proto
    and google/protobuf/timestamp.proto (the serializer registers the first as a referenced
    subject and leaves out the second, a well-known type every reader has)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    F = descriptor_pb2.FieldDescriptorProto
    f1 = descriptor_pb2.FileDescriptorProto(name="es/compat/rec.proto", package="es.compat", syntax="proto3")
    m = f1.message_type.add(name="Rec")
    m.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    m.field.add(name="count", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    pool.Add(f1)
    fm = descriptor_pb2.FileDescriptorProto(name="es/compat/money.proto", package="es.compat", syntax="proto3")
    mm = fm.message_type.add(name="Money")
    mm.field.add(name="currency", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    mm.field.add(name="units", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    pool.Add(fm)
    f2 = descriptor_pb2.FileDescriptorProto(name="es/compat/order.proto", package="es.compat", syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto", "es/compat/money.proto"])
    o = f2.message_type.add(name="Order")
    o.field.add(name="total", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".es.compat.Money")
    o.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    o.field.add(name="at", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                type_name=".google.protobuf.Timestamp")
    pool.Add(f2)
    rec = message_factory.GetMessageClass(pool.FindMessageTypeByName("es.compat.Rec"))
    order = message_factory.GetMessageClass(pool.FindMessageTypeByName("es.compat.Order"))
    return rec, order


@scenario("serde/protobuf-round-trip")
def _(ctx):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    Rec, _ = _proto_classes()
    topic = ctx.topic("proto")
    values = [Rec(name=f"p{i}", count=i * 1000) for i in range(10)]
    ctx.produce(topic, values, ProtobufSerializer(Rec, ctx.client(), {"use.deprecated.format": False}))
    raw = ctx.consume(topic, len(values))
    reg = ctx.client().get_latest_version(f"{topic}-value")
    check(reg.schema.schema_type == "PROTOBUF", f"type {reg.schema.schema_type}")
    check(all(wire_id(r) == reg.schema_id for r in raw), "wire ids")
    de = ProtobufDeserializer(Rec, {"use.deprecated.format": False})
    got = [de(r, SerializationContext(topic, MessageField.VALUE)) for r in raw]
    check(got == values, f"decoded {got[:2]}")


@scenario("serde/protobuf-import-as-reference")
def _(ctx):
    """An import (es/compat/money.proto) is registered as its own subject and referenced."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    _, Order = _proto_classes()
    topic = ctx.topic("proto-ref")
    o = Order(id="o1")
    o.at.seconds = 1_700_000_000
    o.total.currency, o.total.units = "EUR", 12
    ctx.produce(topic, [o], ProtobufSerializer(Order, ctx.client(), {"use.deprecated.format": False}))
    reg = ctx.client().get_latest_version(f"{topic}-value")
    check([r.name for r in reg.schema.references] == ["es/compat/money.proto"],
          f"references {reg.schema.references}")
    check("es/compat/money.proto" in ctx.client().get_subjects(), "the import's subject es/compat/money.proto")
    raw = ctx.consume(topic, 1)
    got = ProtobufDeserializer(Order, {"use.deprecated.format": False})(raw[0], SerializationContext(topic, MessageField.VALUE))
    check(got == o, f"decoded {got}")


# ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--registry", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = [o for o in args.only.split(",") if o]
    ctx = Ctx(args)
    results = []

    def alarm(_signum, frame):
        # Where the scenario was waiting, for the diagnosis (the innermost frames of this file's
        # code and the library's).
        where = " < ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                           for f in reversed(traceback.extract_stack(frame)[-6:]))
        raise Fail(f"scenario not done within {SCENARIO_TIMEOUT_S} s; waiting in {where}")
    signal.signal(signal.SIGALRM, alarm)
    for name, fn, quick in SCENARIOS:
        full = f"py/{name}"
        if only and not any(full.startswith(o) or name.startswith(o) for o in only):
            continue
        if args.quick and not quick:
            continue
        t0 = time.monotonic()
        signal.alarm(SCENARIO_TIMEOUT_S)
        try:
            fn(ctx)
            status, detail = "passed", ""
        except Fail as e:
            status, detail = "failed", str(e)
        except SchemaRegistryError as e:
            status, detail = "failed", f"SchemaRegistryError HTTP {e.http_status_code} {e.error_code}: {e.error_message}"
        except Exception as e:  # a library exception is a result, not a crash of the runner
            status, detail = "failed", f"{type(e).__name__}: {e} | {traceback.format_exc(limit=3)[-400:]}"
        finally:
            signal.alarm(0)
        secs = round(time.monotonic() - t0, 2)
        results.append({"name": full, "status": status, "detail": detail[:800], "seconds": secs})
        print(f"  {status:6} {full} ({secs}s){' - ' + detail[:200] if detail else ''}", flush=True)
        with open(args.out, "w") as f:  # after every scenario: a runner killed midway keeps what it did
            json.dump(results, f, indent=1)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
