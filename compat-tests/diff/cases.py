"""cases: what the differential tester sends, in order.

1. prepare.*: the same state on both brokers, built by raw requests (topics with 1 and 3
   partitions, a compacted and a LogAppendTime topic, batches in every codec with keys,
   headers and nulls, idempotent batches, committed and aborted transactions, a group with
   committed offsets). These are compared too.
2. <Api>.v<N>.base and <Api>.v<N>.<field>=<edge>: every API the subject advertises at every
   version it advertises, a sensible request (TEMPLATES) and then one edge value per field
   at a time, generated from the request's spec (edges()).
3. seq.*: stateful sequences (fetch sessions, idempotence, transactions, group lifecycle).
4. malformed.*: truncated frames, oversized arrays, bad varints, invalid UTF-8.
"""
import struct
import uuid as uuidlib

import kproto
import records
from tester import Case

P1, P3, COMPACT, LAT, TXN, IDEM, SCRATCH = ("diff-p1", "diff-p3", "diff-compact", "diff-lat",
                                             "diff-txn", "diff-idem", "diff-scratch")
GROUP = "diff-group"
TXN_ID = "diff-tx"
UNKNOWN_TOPIC = "diff-no-such-topic"
RANDOM_UUID = kproto.uuid_text(uuidlib.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8").bytes)
BASE_TS = records.BASE_TS
# UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER: a topic Kafka has
# just created may not be in its broker's metadata cache and replica manager yet; the cases
# that build the shared state wait that out on both brokers (never compared while it lasts).
TOPIC_NOT_READY = {3, 5, 6}

API = {name: key for key, name in [
    (0, "Produce"), (1, "Fetch"), (2, "ListOffsets"), (3, "Metadata"), (8, "OffsetCommit"),
    (9, "OffsetFetch"), (10, "FindCoordinator"), (11, "JoinGroup"), (12, "Heartbeat"),
    (13, "LeaveGroup"), (14, "SyncGroup"), (15, "DescribeGroups"), (16, "ListGroups"),
    (18, "ApiVersions"), (19, "CreateTopics"), (20, "DeleteTopics"), (21, "DeleteRecords"),
    (22, "InitProducerId"), (23, "OffsetForLeaderEpoch"), (24, "AddPartitionsToTxn"),
    (25, "AddOffsetsToTxn"), (26, "EndTxn"), (28, "TxnOffsetCommit")]}


def sample_records(n, tag):
    out = []
    for i in range(n):
        key = None if i % 3 == 2 else f"{tag}-k{i}".encode()
        value = None if i % 4 == 3 else f"{tag}-value-{i}-".encode() * (1 + i % 3)
        headers = [("h", f"{i}".encode()), ("nullh", None)] if i % 2 == 0 else []
        out.append({"key": key, "value": value, "headers": headers})
    return out


def produce_body(v, topic, partition, batch, acks=-1, txn_id=None):
    def body(c):
        td = {"partition_data": [{"index": partition, "records": batch}]}
        if v >= 13:
            td["topic_id"] = c.tid(topic)
        else:
            td["name"] = topic
        return {"transactional_id": txn_id, "acks": acks, "timeout_ms": 5000, "topic_data": [td]}
    return body


def fetch_body(v, parts, isolation=0, session_id=0, epoch=-1, forgotten=(), max_bytes=1 << 20,
               max_wait=20):
    def body(c):
        topics = []
        for topic, pis in parts:
            t = {"partitions": [{"partition": p, "fetch_offset": off, "partition_max_bytes": max_bytes,
                                 "current_leader_epoch": -1, "log_start_offset": -1,
                                 "last_fetched_epoch": -1} for p, off in pis]}
            t.update({"topic_id": c.tid(topic)} if v >= 13 else {"topic": topic})
            topics.append(t)
        fg = []
        for topic, pis in forgotten:
            f = {"partitions": list(pis)}
            f.update({"topic_id": c.tid(topic)} if v >= 13 else {"topic": topic})
            fg.append(f)
        return {"replica_id": -1, "max_wait_ms": max_wait, "min_bytes": 1, "max_bytes": max_bytes,
                "isolation_level": isolation, "session_id": session_id, "session_epoch": epoch,
                "topics": topics, "forgotten_topics_data": fg, "rack_id": ""}
    return body


def learn_topic_ids(c, body):
    for t in body.get("topics") or []:
        if t.get("error_code") == 0 and t.get("topic_id") not in (None, kproto.ZERO_UUID):
            c.topic_ids[t["name"]] = t["topic_id"]


# ---- request templates: a sensible request per API and version ----------------------------
# Each returns body(ctx). `u` is a string unique to the case, for names a case creates.

def t_produce(v, u):
    return produce_body(v, SCRATCH, 0, records.build_batch(sample_records(2, "scratch")))


def t_fetch(v, u):
    return fetch_body(v, [(P1, [(0, 0)]), (P3, [(0, 0), (1, 0), (2, 0)])])


def t_list_offsets(v, u):
    def body(c):
        return {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                "topics": [{"name": P1, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                        "timestamp": -1}]},
                           {"name": P3, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                        "timestamp": ts}
                                                       for p, ts in ((0, -2), (1, BASE_TS + 1), (2, -1))]}]}
    return body


def t_metadata(v, u):
    def body(c):
        return {"topics": [{"name": P1, "topic_id": kproto.ZERO_UUID}, {"name": P3, "topic_id": kproto.ZERO_UUID}],
                "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
    return body


def t_offset_commit(v, u):
    def body(c):
        t = {"partitions": [{"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": -1,
                             "committed_metadata": "m"}]}
        t.update({"topic_id": c.tid(P1)} if v >= 10 else {"name": P1})
        return {"group_id": f"{GROUP}-oc", "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "retention_time_ms": -1, "topics": [t]}
    return body


def t_offset_fetch(v, u):
    def body(c):
        if v < 8:
            return {"group_id": GROUP, "topics": [{"name": P1, "partition_indexes": [0]},
                                                  {"name": P3, "partition_indexes": [0, 1, 2]}],
                    "require_stable": False}
        topics = []
        for name, ps in ((P1, [0]), (P3, [0, 1, 2])):
            t = {"partition_indexes": ps}
            t.update({"topic_id": c.tid(name)} if v >= 10 else {"name": name})
            topics.append(t)
        return {"groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1, "topics": topics}],
                "require_stable": False}
    return body


def t_find_coordinator(v, u):
    return lambda c: {"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP]}


def t_join_group(v, u):
    return lambda c: {"group_id": f"diff-jg-{u}", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                      "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                      "protocols": [{"name": "range", "metadata": b"\x00\x01"}], "reason": None}


def t_heartbeat(v, u):
    return lambda c: {"group_id": GROUP, "generation_id": 1, "member_id": "m-unknown",
                      "group_instance_id": None}


def t_leave_group(v, u):
    return lambda c: {"group_id": GROUP, "member_id": "m-unknown",
                      "members": [{"member_id": "m-unknown", "group_instance_id": None, "reason": None}]}


def t_sync_group(v, u):
    return lambda c: {"group_id": GROUP, "generation_id": 1, "member_id": "m-unknown",
                      "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                      "assignments": []}


def t_describe_groups(v, u):
    return lambda c: {"groups": [GROUP, "diff-no-such-group"], "include_authorized_operations": False}


def t_list_groups(v, u):
    return lambda c: {"states_filter": [], "types_filter": []}


def t_api_versions(v, u):
    return lambda c: {"client_software_name": "es-diff", "client_software_version": "1.0"}


def t_create_topics(v, u):
    return lambda c: {"topics": [{"name": f"diff-ct-{u}", "num_partitions": 2, "replication_factor": 1,
                                  "assignments": [], "configs": [{"name": "retention.ms", "value": "3600000"}]}],
                      "timeout_ms": 10000, "validate_only": False}


def t_delete_topics(v, u):
    return lambda c: {"topic_names": [f"diff-dt-{u}"], "topics": [{"name": f"diff-dt-{u}", "topic_id": kproto.ZERO_UUID}],
                      "timeout_ms": 10000}


def t_delete_records(v, u):
    return lambda c: {"topics": [{"name": SCRATCH, "partitions": [{"partition_index": 0, "offset": 0}]}],
                      "timeout_ms": 5000}


def t_init_producer_id(v, u):
    return lambda c: {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
                      "producer_epoch": -1, "enable2_pc": False, "keep_prepared_txn": False}


def t_offset_for_leader_epoch(v, u):
    return lambda c: {"replica_id": -1, "topics": [{"topic": P1, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}


def t_add_partitions_to_txn(v, u):
    def body(c):
        topics = [{"name": TXN, "partitions": [0]}]
        return {"v3_and_below_transactional_id": "diff-tx-unknown", "v3_and_below_producer_id": 12345,
                "v3_and_below_producer_epoch": 0, "v3_and_below_topics": topics,
                "transactions": [{"transactional_id": "diff-tx-unknown", "producer_id": 12345,
                                  "producer_epoch": 0, "verify_only": False, "topics": topics}]}
    return body


def t_add_offsets_to_txn(v, u):
    return lambda c: {"transactional_id": "diff-tx-unknown", "producer_id": 12345, "producer_epoch": 0,
                      "group_id": GROUP}


def t_end_txn(v, u):
    return lambda c: {"transactional_id": "diff-tx-unknown", "producer_id": 12345, "producer_epoch": 0,
                      "committed": True}


def t_txn_offset_commit(v, u):
    return lambda c: {"transactional_id": "diff-tx-unknown", "group_id": GROUP, "producer_id": 12345,
                      "producer_epoch": 0, "generation_id": -1, "member_id": "", "group_instance_id": None,
                      "topics": [{"name": P1, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                              "committed_leader_epoch": -1,
                                                              "committed_metadata": ""}]}]}


def _acl_filter():
    return {"resource_type_filter": 2, "resource_name_filter": P1, "pattern_type_filter": 3,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


def t_describe_acls(v, u):
    return lambda c: _acl_filter()


def t_create_acls(v, u):
    return lambda c: {"creations": [{"resource_type": 2, "resource_name": P1, "resource_pattern_type": 3,
                                     "principal": "User:alice", "host": "*", "operation": 3,
                                     "permission_type": 3}]}


def t_delete_acls(v, u):
    return lambda c: {"filters": [_acl_filter()]}


def t_describe_configs(v, u):
    return lambda c: {"resources": [{"resource_type": 2, "resource_name": P1,
                                     "configuration_keys": ["cleanup.policy", "retention.ms"]},
                                    {"resource_type": 2, "resource_name": COMPACT,
                                     "configuration_keys": ["cleanup.policy"]}],
                      "include_synonyms": False, "include_documentation": False}


def t_alter_configs(v, u):
    return lambda c: {"resources": [{"resource_type": 2, "resource_name": SCRATCH,
                                     "configs": [{"name": "retention.ms", "value": "86400000"}]}],
                      "validate_only": True}


def t_alter_replica_log_dirs(v, u):
    return lambda c: {"dirs": [{"path": "/nonexistent-dir", "topics": [{"name": P1, "partitions": [0]}]}]}


def t_describe_log_dirs(v, u):
    return lambda c: {"topics": [{"topic": P3, "partitions": [0, 1, 2]}]}


def t_create_partitions(v, u):
    return lambda c: {"topics": [{"name": P1, "count": 4, "assignments": None}], "timeout_ms": 5000,
                      "validate_only": True}


def t_delete_groups(v, u):
    return lambda c: {"groups_names": ["diff-no-such-group"]}


def t_elect_leaders(v, u):
    return lambda c: {"election_type": 0, "topic_partitions": [{"topic": P1, "partitions": [0]}],
                      "timeout_ms": 5000}


def t_incremental_alter_configs(v, u):
    return lambda c: {"resources": [{"resource_type": 2, "resource_name": SCRATCH,
                                     "configs": [{"name": "retention.ms", "config_operation": 0,
                                                  "value": "86400000"}]}],
                      "validate_only": True}


def t_alter_partition_reassignments(v, u):
    return lambda c: {"timeout_ms": 5000, "allow_replication_factor_change": True,
                      "topics": [{"name": P1, "partitions": [{"partition_index": 0, "replicas": None}]}]}


def t_list_partition_reassignments(v, u):
    return lambda c: {"timeout_ms": 5000, "topics": None}


def t_offset_delete(v, u):
    return lambda c: {"group_id": f"{GROUP}-del", "topics": [{"name": P3, "partitions": [{"partition_index": 1}]}]}


def t_describe_quorum(v, u):
    return lambda c: {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


def t_describe_cluster(v, u):
    return lambda c: {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                      "include_fenced_brokers": False}


def t_describe_producers(v, u):
    return lambda c: {"topics": [{"name": IDEM, "partition_indexes": [0]}]}


def t_describe_transactions(v, u):
    return lambda c: {"transactional_ids": [TXN_ID]}


def t_list_transactions(v, u):
    return lambda c: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                      "transactional_id_pattern": None}


def t_cg_heartbeat(v, u):
    member = kproto.uuid_text(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, u).bytes)
    return lambda c: {"group_id": f"diff-cg-{u}", "member_id": member if v >= 1 else "", "member_epoch": 0,
                      "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                      "subscribed_topic_names": [P3], "subscribed_topic_regex": None,
                      "server_assignor": None, "topic_partitions": []}


def t_cg_describe(v, u):
    return lambda c: {"group_ids": [GROUP, "diff-no-such-group"], "include_authorized_operations": False}


def t_list_config_resources(v, u):
    return lambda c: {"resource_types": []}


def t_describe_topic_partitions(v, u):
    return lambda c: {"topics": [{"name": P3}, {"name": P1}], "response_partition_limit": 2000, "cursor": None}


TEMPLATES = {
    0: t_produce, 1: t_fetch, 2: t_list_offsets, 3: t_metadata, 8: t_offset_commit, 9: t_offset_fetch,
    10: t_find_coordinator, 11: t_join_group, 12: t_heartbeat, 13: t_leave_group, 14: t_sync_group,
    15: t_describe_groups, 16: t_list_groups, 18: t_api_versions, 19: t_create_topics,
    20: t_delete_topics, 21: t_delete_records, 22: t_init_producer_id, 23: t_offset_for_leader_epoch,
    24: t_add_partitions_to_txn, 25: t_add_offsets_to_txn, 26: t_end_txn, 28: t_txn_offset_commit,
    29: t_describe_acls, 30: t_create_acls, 31: t_delete_acls, 32: t_describe_configs,
    33: t_alter_configs, 34: t_alter_replica_log_dirs, 35: t_describe_log_dirs,
    37: t_create_partitions, 42: t_delete_groups, 43: t_elect_leaders,
    44: t_incremental_alter_configs, 45: t_alter_partition_reassignments,
    46: t_list_partition_reassignments, 47: t_offset_delete, 55: t_describe_quorum,
    60: t_describe_cluster, 61: t_describe_producers, 65: t_describe_transactions,
    66: t_list_transactions, 68: t_cg_heartbeat, 69: t_cg_describe, 74: t_list_config_resources,
    75: t_describe_topic_partitions,
}

# Fields whose edge values would make a case wait for its timeout on both brokers, or that
# the sequences cover with real state instead.
NO_EDGES = {
    (1, "max_wait_ms"), (0, "acks"), (0, "timeout_ms"), (11, "session_timeout_ms"),
    (11, "rebalance_timeout_ms"), (68, "rebalance_timeout_ms"),
}


def ts_label(ts):
    """A timestamp in a case name: relative to BASE_TS (which follows the run's day)."""
    return f"base+{ts - BASE_TS}" if 0 <= ts - BASE_TS < 10 ** 9 else str(ts)


def edges(f, v, path):
    """Edge values for one request field at version v: [(label, value)]."""
    name = f.name
    out = []
    if f.is_array:
        if v in f.nullable:
            out.append(("null", None))
        out.append(("empty", []))
        out.append(("dup", "__dup__"))
        return out
    if f.is_struct():
        if v in f.nullable:
            out.append(("null", None))
        return out
    t = f.elem
    if t == "string":
        if v in f.nullable:
            out.append(("null", None))
        out.append(("empty", ""))
        if f.entity == "topicName" or name in ("name", "topic", "topic_name", "resource_name"):
            out += [("unknown", UNKNOWN_TOPIC), ("internal", "__consumer_offsets"), ("invalid", "bad name!")]
        if f.entity == "groupId":
            out.append(("unknown", "diff-no-such-group"))
        if f.entity in ("topicName", "groupId", "transactionalId"):
            out.append(("bad_utf8", b"\xff\xfe"))
    elif t == "int8":
        out += [("-1", -1), ("0", 0), ("1", 1), ("max", 127)]
    elif t == "int16":
        out += [("-1", -1), ("0", 0), ("max", 32767)]
    elif t == "int32":
        if "partition" in name or name in ("index",):
            out += [("-1", -1), ("oor", 99)]
        else:
            out += [("-1", -1), ("0", 0), ("max", 2 ** 31 - 1)]
    elif t == "int64":
        if "timestamp" in name:
            out += [(ts_label(x), x) for x in (-1, -2, -3, -4, 0, BASE_TS + 2, 2 ** 63 - 1)]
        elif "offset" in name:
            out += [("-1", -1), ("0", 0), ("past_end", 10 ** 9), ("max", 2 ** 63 - 1)]
        else:
            out += [("-1", -1), ("0", 0), ("max", 2 ** 63 - 1)]
    elif t == "uuid":
        out += [("zero", kproto.ZERO_UUID), ("unknown", RANDOM_UUID)]
    elif t == "bool":
        out += [("true", True), ("false", False)]
    elif t == "bytes":
        out += [("empty", b"")] + ([("null", None)] if v in f.nullable else [])
    return out


def set_path(body, path, value):
    """Sets path (field names through the first element of each array) in body; False when
    the base has no element to descend into."""
    x = body
    for i, k in enumerate(path[:-1]):
        if not isinstance(x, dict) or k not in x:
            return False
        x = x[k]
        if isinstance(x, list):
            if not x or not isinstance(x[0], dict):
                return False
            x = x[0]
    last = path[-1]
    if not isinstance(x, dict) or last not in x:
        return False
    if value == "__dup__":
        if not x[last]:
            return False
        x[last] = list(x[last]) + [x[last][0]]
    else:
        if x[last] == value and not isinstance(value, bytes):
            return None
        x[last] = value
    return True


def mutated(base, path, value):
    def body(c):
        import copy
        b = copy.deepcopy(base(c))
        set_path(b, path, value)
        return b
    return body


def generated(t, api_key, v, u, quick_edges):
    """The base case and one case per (field, edge) for api_key at version v."""
    req = t.specs[(api_key, "request")]
    name = t.names[api_key]
    tmpl = TEMPLATES.get(api_key)
    base = tmpl(v, u) if tmpl else (lambda c, _v=v: req.default(_v))
    out = [Case(f"{name}.v{v}.base", api_key, v, base, after=learn_topic_ids if api_key == 3 else None)]
    if v in req.flexible:
        out.append(Case(f"{name}.v{v}.unknown_tag", api_key, v, base, extra_tags={99: b"\x01\x02\x03"},
                        quick=quick_edges))
    probe = base(ProbeCtx())
    n = 0
    for path, f in kproto.walk_fields(req.fields, v):
        if (api_key, path[-1]) in NO_EDGES or f.elem == "records":
            continue
        for label, value in edges(f, v, path):
            import copy
            trial = copy.deepcopy(probe)
            ok = set_path(trial, path, value)
            if not ok:
                continue
            n += 1
            uu = f"{u}-{n}"
            b = mutated(tmpl(v, uu) if tmpl else base, path, value)
            then = None
            if api_key == 3 and label == "unknown" and v <= 3:
                # Metadata v0-3 always asks for auto-creation, which Kafka finishes after it has
                # answered: wait until the topic is ready on both brokers (v4+ cases do not
                # allow auto-creation).
                then = Case(f"{name}.v{v}.settle", 3, 4, lambda c: {
                    "topics": [{"name": UNKNOWN_TOPIC}], "allow_auto_topic_creation": False},
                    retry=TOPIC_NOT_READY)
            out.append(Case(f"{name}.v{v}.{'.'.join(path)}={label}", api_key, v, b, quick=quick_edges,
                            then=then))
    return out


class ProbeCtx:
    """A ctx for looking at a template's shape before any broker answered."""
    topic_ids = {}
    vals = {}

    def tid(self, name):
        return kproto.ZERO_UUID

    def __getitem__(self, k):
        return 0

    def get(self, k, default=None):
        return default


# ---- preparation ---------------------------------------------------------------------------

def prepare(t):
    cs = []
    topics = [(P1, 1, []), (P3, 3, []), (COMPACT, 1, [("cleanup.policy", "compact")]),
              (LAT, 1, [("message.timestamp.type", "LogAppendTime")]), (TXN, 1, []), (IDEM, 1, []),
              (SCRATCH, 1, [])]
    cs.append(Case("prepare.create_topics", 19, 7, lambda c: {
        "topics": [{"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in cfg]} for n, p, cfg in topics],
        "timeout_ms": 30000, "validate_only": False}, timeout=30))
    cs.append(Case("prepare.metadata", 3, 12, lambda c: {
        "topics": [{"name": n, "topic_id": kproto.ZERO_UUID} for n, _, _ in topics],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        after=learn_topic_ids, retry=TOPIC_NOT_READY))
    for codec in records.CODECS:
        batch = records.build_batch(sample_records(4, codec), codec=codec)
        cs.append(Case(f"prepare.produce.{P1}.{codec}", 0, 11, produce_body(11, P1, 0, batch)))
    for p in range(3):
        for i in range(2):
            batch = records.build_batch(sample_records(3, f"p{p}b{i}"), codec="lz4" if i else "none",
                                        base_timestamp=BASE_TS + p * 10 + i)
            cs.append(Case(f"prepare.produce.{P3}.{p}.{i}", 0, 13, produce_body(13, P3, p, batch)))
    for i in range(3):
        recs = [{"key": f"k{j % 2}".encode(), "value": f"c{i}-{j}".encode()} for j in range(4)]
        recs.append({"key": b"k1", "value": None})  # a tombstone
        cs.append(Case(f"prepare.produce.{COMPACT}.{i}", 0, 12,
                       produce_body(12, COMPACT, 0, records.build_batch(recs, codec="gzip"))))
    cs.append(Case(f"prepare.produce.{LAT}", 0, 11,
                   produce_body(11, LAT, 0, records.build_batch(sample_records(2, "lat")))))
    # An idempotent producer on IDEM.
    cs.append(Case("prepare.idem.init", 22, 4, t_init_producer_id(4, ""),
                   after=lambda c, b: c.vals.update(idem_pid=b["producer_id"], idem_epoch=b["producer_epoch"])))
    for seq in (0, 3):
        cs.append(Case(f"prepare.idem.produce.seq{seq}", 0, 11, lambda c, seq=seq: produce_body(
            11, IDEM, 0, records.build_batch(sample_records(3, f"idem{seq}"), producer_id=c["idem_pid"],
                                             producer_epoch=c["idem_epoch"], base_sequence=seq))(c)))
    # Transactions on TXN: one committed, one aborted, then a plain batch.
    cs.append(Case("prepare.txn.find_coordinator", 10, 4, lambda c: {"key_type": 1, "coordinator_keys": [TXN_ID]}))
    cs.append(Case("prepare.txn.init", 22, 4, lambda c: {"transactional_id": TXN_ID, "transaction_timeout_ms": 60000,
                                                         "producer_id": -1, "producer_epoch": -1},
                   after=lambda c, b: c.vals.update(txn_pid=b["producer_id"], txn_epoch=b["producer_epoch"]),
                   timeout=30))
    seq = 0
    for i, commit in enumerate((True, False)):
        cs.append(Case(f"prepare.txn.{i}.add_partitions", 24, 3, lambda c: {
            "v3_and_below_transactional_id": TXN_ID, "v3_and_below_producer_id": c["txn_pid"],
            "v3_and_below_producer_epoch": c["txn_epoch"], "v3_and_below_topics": [{"name": TXN, "partitions": [0]}]}))
        cs.append(Case(f"prepare.txn.{i}.produce", 0, 11, lambda c, i=i, seq=seq: produce_body(
            11, TXN, 0, records.build_batch(sample_records(3, f"txn{i}"), producer_id=c["txn_pid"],
                                            producer_epoch=c["txn_epoch"], base_sequence=seq,
                                            transactional=True), txn_id=TXN_ID)(c)))
        seq += 3
        # Kafka answers EndTxn before its markers are written; the next step waits for them
        # (the transaction Complete*), or a later batch could land before the marker on one
        # broker and after it on the other.
        cs.append(Case(f"prepare.txn.{i}.end", 26, 3, lambda c, commit=commit: {
            "transactional_id": TXN_ID, "producer_id": c["txn_pid"], "producer_epoch": c["txn_epoch"],
            "committed": commit}, then=Case(f"prepare.txn.{i}.markers", 65, 0,
                                            lambda c: {"transactional_ids": [TXN_ID]},
                                            until=txn_complete)))
    cs.append(Case("prepare.txn.plain", 0, 11, produce_body(11, TXN, 0, records.build_batch(sample_records(2, "plain")))))
    # Committed offsets of GROUP (a group with no members: generation -1) and of GROUP-del.
    for g in (GROUP, f"{GROUP}-del"):
        cs.append(Case(f"prepare.find_coordinator.{g}", 10, 4, lambda c, g=g: {"key_type": 0, "coordinator_keys": [g]}))
        cs.append(Case(f"prepare.commit.{g}", 8, 8, lambda c, g=g: {
            "group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": P1, "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                    "committed_leader_epoch": -1, "committed_metadata": "meta"}]},
                       {"name": P3, "partitions": [{"partition_index": p, "committed_offset": p + 1,
                                                    "committed_leader_epoch": -1, "committed_metadata": None}
                                                   for p in range(3)]}]}))
    for c in cs:
        c.retry = c.retry or True  # a case's own codes to wait out stay
    return cs


def txn_complete(body):
    """True once a DescribeTransactions answer shows the transaction's markers written."""
    states = body.get("transaction_states") or [{}]
    return states[0].get("transaction_state") in ("CompleteCommit", "CompleteAbort", "Empty")


# ---- stateful sequences --------------------------------------------------------------------

def fetch_sessions(vmax):
    """Every combination of session id 0 / -1 / live / unknown with epoch 0 / -1 / next / wrong,
    each from a fresh live session, then an incremental fetch that forgets a topic."""
    cs = []
    v = vmax
    parts = [(P1, [(0, 0)]), (P3, [(0, 0), (1, 0)])]
    for sid in ("0", "-1", "live", "unknown"):
        for ep in ("0", "-1", "next", "wrong"):
            n = f"seq.fetch_session.{sid}.{ep}"
            cs.append(Case(f"{n}.open", 1, v, fetch_body(v, parts, session_id=0, epoch=0),
                           after=lambda c, b: c.vals.update(session=b.get("session_id", 0))))

            def body(c, sid=sid, ep=ep):
                s = {"0": 0, "-1": -1, "live": c.get("session", 0), "unknown": 987654}[sid]
                e = {"0": 0, "-1": -1, "next": 1, "wrong": 5}[ep]
                return fetch_body(v, parts, session_id=s, epoch=e)(c)
            cs.append(Case(f"{n}.then", 1, v, body))
    cs.append(Case("seq.fetch_session.incremental.open", 1, v, fetch_body(v, parts, session_id=0, epoch=0),
                   after=lambda c, b: c.vals.update(session=b.get("session_id", 0))))
    cs.append(Case("seq.fetch_session.incremental.same", 1, v,
                   lambda c: fetch_body(v, [], session_id=c["session"], epoch=1)(c)))
    cs.append(Case("seq.fetch_session.incremental.forget", 1, v,
                   lambda c: fetch_body(v, [], session_id=c["session"], epoch=2, forgotten=[(P3, [1])])(c)))
    cs.append(Case("seq.fetch_session.incremental.move", 1, v,
                   lambda c: fetch_body(v, [(P1, [(0, 3)])], session_id=c["session"], epoch=3)(c)))
    cs.append(Case("seq.fetch_session.incremental.close", 1, v,
                   lambda c: fetch_body(v, [], session_id=c["session"], epoch=-1)(c)))
    cs.append(Case("seq.fetch_session.incremental.after_close", 1, v,
                   lambda c: fetch_body(v, [], session_id=c["session"], epoch=4)(c)))
    return cs


def reads(fetch_v):
    """Reads over the prepared state at several offsets and isolation levels."""
    cs = []
    for off in (0, 1, 4, 5, 19, 20, 21, 10 ** 6):
        cs.append(Case(f"seq.read.{P1}.at{off}", 1, fetch_v, fetch_body(fetch_v, [(P1, [(0, off)])])))
    for iso in (0, 1):
        cs.append(Case(f"seq.read.{TXN}.isolation{iso}", 1, fetch_v, fetch_body(fetch_v, [(TXN, [(0, 0)])], isolation=iso)))
        cs.append(Case(f"seq.read.{TXN}.isolation{iso}.v4", 1, 4, fetch_body(4, [(TXN, [(0, 0)])], isolation=iso)))
    for topic in (COMPACT, LAT, IDEM):
        cs.append(Case(f"seq.read.{topic}", 1, fetch_v, fetch_body(fetch_v, [(topic, [(0, 0)])])))
    cs.append(Case(f"seq.read.{P1}.small_max_bytes", 1, fetch_v, fetch_body(fetch_v, [(P1, [(0, 0)])], max_bytes=100)))
    cs.append(Case(f"seq.read.{P3}.all", 1, fetch_v, fetch_body(fetch_v, [(P3, [(2, 0), (0, 3), (1, 6)])])))
    for ts in (-1, -2, -3, -4, BASE_TS, BASE_TS + 3, BASE_TS + 11, BASE_TS + 10 ** 6):
        cs.append(Case(f"seq.list_offsets.ts{ts_label(ts)}", 2, 9, lambda c, ts=ts: {
            "replica_id": -1, "isolation_level": 0, "topics": [
                {"name": n, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": ts}
                                           for p in range(k)]} for n, k in ((P1, 1), (P3, 3), (TXN, 1))]}))
        cs.append(Case(f"seq.list_offsets.ts{ts_label(ts)}.committed", 2, 9, lambda c, ts=ts: {
            "replica_id": -1, "isolation_level": 1, "topics": [
                {"name": TXN, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]}))
    return cs


def idempotence():
    cs = [Case("seq.idem.init", 22, 4, t_init_producer_id(4, ""),
               after=lambda c, b: c.vals.update(pid2=b["producer_id"], ep2=b["producer_epoch"]))]

    def send(label, seq, n=2, epoch_delta=0):
        cs.append(Case(f"seq.idem.{label}", 0, 11, lambda c: produce_body(11, IDEM, 0, records.build_batch(
            sample_records(n, label), producer_id=c["pid2"], producer_epoch=c["ep2"] + epoch_delta,
            base_sequence=seq))(c)))
    send("seq0", 0)
    send("dup_seq0", 0)
    send("seq2", 2)
    send("gap_seq9", 9)
    send("old_seq1", 1)
    send("next_seq4", 4)
    send("bad_epoch", 6, epoch_delta=3)
    cs.append(Case("seq.idem.describe_producers", 61, 0, t_describe_producers(0, "")))
    return cs


def transactions():
    tid = "diff-tx-seq"
    cs = [Case("seq.txn.init", 22, 4, lambda c: {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                "producer_id": -1, "producer_epoch": -1},
               after=lambda c, b: c.vals.update(tp=b["producer_id"], te=b["producer_epoch"]), timeout=30),
          Case("seq.txn.produce_before_add", 0, 11, lambda c: produce_body(11, TXN, 0, records.build_batch(
              sample_records(1, "early"), producer_id=c["tp"], producer_epoch=c["te"], base_sequence=0,
              transactional=True), txn_id=tid)(c)),
          Case("seq.txn.add_partitions", 24, 3, lambda c: {
              "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": c["tp"],
              "v3_and_below_producer_epoch": c["te"],
              "v3_and_below_topics": [{"name": TXN, "partitions": [0]}, {"name": UNKNOWN_TOPIC, "partitions": [0]}]}),
          Case("seq.txn.add_partitions_known", 24, 3, lambda c: {
              "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": c["tp"],
              "v3_and_below_producer_epoch": c["te"], "v3_and_below_topics": [{"name": TXN, "partitions": [0]}]}),
          Case("seq.txn.produce", 0, 11, lambda c: produce_body(11, TXN, 0, records.build_batch(
              sample_records(2, "seqtxn"), producer_id=c["tp"], producer_epoch=c["te"], base_sequence=0,
              transactional=True), txn_id=tid)(c)),
          Case("seq.txn.add_offsets", 25, 3, lambda c: {"transactional_id": tid, "producer_id": c["tp"],
                                                        "producer_epoch": c["te"], "group_id": f"{GROUP}-txn"}),
          Case("seq.txn.offset_commit", 28, 3, lambda c: {
              "transactional_id": tid, "group_id": f"{GROUP}-txn", "producer_id": c["tp"], "producer_epoch": c["te"],
              "generation_id": -1, "member_id": "", "group_instance_id": None,
              "topics": [{"name": P1, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                      "committed_leader_epoch": -1, "committed_metadata": "t"}]}]}),
          Case("seq.txn.offset_fetch_unstable", 9, 7, lambda c: {
              "group_id": f"{GROUP}-txn", "topics": [{"name": P1, "partition_indexes": [0]}], "require_stable": True}),
          Case("seq.txn.list_offsets_committed", 2, 9, lambda c: {
              "replica_id": -1, "isolation_level": 1,
              "topics": [{"name": TXN, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}),
          Case("seq.txn.describe", 65, 0, lambda c: {"transactional_ids": [tid, "diff-no-such-tx"]}),
          Case("seq.txn.end_wrong_epoch", 26, 3, lambda c: {"transactional_id": tid, "producer_id": c["tp"],
                                                            "producer_epoch": c["te"] + 1, "committed": True}),
          Case("seq.txn.end_commit", 26, 3, lambda c: {"transactional_id": tid, "producer_id": c["tp"],
                                                       "producer_epoch": c["te"], "committed": True},
               then=Case("seq.txn.markers", 65, 0, lambda c: {"transactional_ids": [tid]}, until=txn_complete)),
          Case("seq.txn.end_again", 26, 3, lambda c: {"transactional_id": tid, "producer_id": c["tp"],
                                                      "producer_epoch": c["te"], "committed": True}),
          Case("seq.txn.end_abort_after_commit", 26, 3, lambda c: {"transactional_id": tid, "producer_id": c["tp"],
                                                                   "producer_epoch": c["te"], "committed": False}),
          Case("seq.txn.offset_fetch_stable", 9, 7, lambda c: {
              "group_id": f"{GROUP}-txn", "topics": [{"name": P1, "partition_indexes": [0]}], "require_stable": True}),
          Case("seq.txn.reinit_bumps_epoch", 22, 4, lambda c: {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                               "producer_id": -1, "producer_epoch": -1}),
          Case("seq.txn.list", 66, 1, t_list_transactions(1, "")),
          ]
    return cs


def group_lifecycle():
    g = "diff-life"
    meta = b"\x00\x01\x00\x00\x00\x01\x00\x07diff-p1\xff\xff\xff\xff"
    cs = [Case("seq.group.join_needs_member_id", 11, 9, lambda c: {
        "group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": meta}], "reason": None},
        after=lambda c, b: c.vals.update(mid=b["member_id"]))]

    def join(c):
        return {"group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": c["mid"],
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": meta}], "reason": None}
    cs.append(Case("seq.group.join", 11, 9, join, after=lambda c, b: c.vals.update(gen=b["generation_id"])))
    cs.append(Case("seq.group.sync", 14, 5, lambda c: {
        "group_id": g, "generation_id": c["gen"], "member_id": c["mid"], "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": c["mid"], "assignment": b"\x00\x01\x00\x00\x00\x01\x00\x07diff-p1\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"}]}))
    cs.append(Case("seq.group.heartbeat", 12, 4, lambda c: {"group_id": g, "generation_id": c["gen"],
                                                             "member_id": c["mid"], "group_instance_id": None}))
    cs.append(Case("seq.group.heartbeat_stale_generation", 12, 4, lambda c: {
        "group_id": g, "generation_id": c["gen"] - 1, "member_id": c["mid"], "group_instance_id": None}))
    cs.append(Case("seq.group.heartbeat_unknown_member", 12, 4, lambda c: {
        "group_id": g, "generation_id": c["gen"], "member_id": "nobody", "group_instance_id": None}))
    for label, gen in (("current", 0), ("stale", -1), ("future", 5)):
        cs.append(Case(f"seq.group.offset_commit_{label}_generation", 8, 8, lambda c, gen=gen: {
            "group_id": g, "generation_id_or_member_epoch": c["gen"] + gen, "member_id": c["mid"],
            "group_instance_id": None, "topics": [{"name": P1, "partitions": [
                {"partition_index": 0, "committed_offset": 3 + gen, "committed_leader_epoch": -1,
                 "committed_metadata": label}]}]}))
    cs.append(Case("seq.group.offset_commit_no_member", 8, 8, lambda c: {
        "group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": P1, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}]}]}))
    cs.append(Case("seq.group.offset_fetch", 9, 8, lambda c: {"groups": [
        {"group_id": g, "topics": None}], "require_stable": False}))
    cs.append(Case("seq.group.describe", 15, 5, lambda c: {"groups": [g], "include_authorized_operations": False}))
    cs.append(Case("seq.group.list", 16, 5, lambda c: {"states_filter": [], "types_filter": []}))
    cs.append(Case("seq.group.delete_while_active", 42, 2, lambda c: {"groups_names": [g]}))
    cs.append(Case("seq.group.leave", 13, 5, lambda c: {"group_id": g, "members": [
        {"member_id": c["mid"], "group_instance_id": None, "reason": "done"}]}))
    cs.append(Case("seq.group.describe_after_leave", 15, 5, lambda c: {"groups": [g], "include_authorized_operations": False}))
    cs.append(Case("seq.group.offset_delete", 47, 0, lambda c: {"group_id": g, "topics": [
        {"name": P1, "partitions": [{"partition_index": 0}]}]}))
    cs.append(Case("seq.group.delete", 42, 2, lambda c: {"groups_names": [g]}))
    cs.append(Case("seq.group.offset_fetch_after_delete", 9, 8, lambda c: {"groups": [
        {"group_id": g, "topics": None}], "require_stable": False}))
    return cs


def share_offsets_lifecycle():
    """The share-group offsets admin in order: a group created by AlterShareGroupOffsets, its
    offsets described with and without topics (v0 and v1, with Lag), refused for a classic group,
    deleted by topic and with the group."""
    g = "diff-share-offsets"
    unknown = "diff-no-such-topic"

    def describe(topics):
        return lambda c: {"groups": [{"group_id": g, "topics": topics}]}
    named = [{"topic_name": P3, "partitions": [0, 1, 2]}]
    # Kafka 4.4 takes seconds to answer for a partition past the end or an unknown topic (its share
    # state reader asks for a share coordinator that never comes): a case of its own, waited for.
    strays = [{"topic_name": P3, "partitions": [1, 9]}, {"topic_name": unknown, "partitions": [0]}]
    cs = [Case("seq.share_offsets.describe_before", 90, 1, lambda c: {"groups": [
        {"group_id": g, "topics": None}, {"group_id": g, "topics": named}]}),
          Case("seq.share_offsets.alter", 91, 0, lambda c: {"group_id": g, "topics": [
              {"topic_name": P3, "partitions": [{"partition_index": 0, "start_offset": 1},
                                                {"partition_index": 1, "start_offset": 0},
                                                {"partition_index": 7, "start_offset": 0}]},
              {"topic_name": unknown, "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
          Case("seq.share_offsets.alter_past_end", 91, 0, lambda c: {"group_id": g, "topics": [
              {"topic_name": P3, "partitions": [{"partition_index": 2, "start_offset": 1000}]}]}),
          Case("seq.share_offsets.group", 77, 1, lambda c: {"group_ids": [g],
                                                             "include_authorized_operations": False}),
          Case("seq.share_offsets.list", 16, 5, lambda c: {"states_filter": [], "types_filter": ["share"]}),
          Case("seq.share_offsets.describe_all_v0", 90, 0, describe(None)),
          Case("seq.share_offsets.describe_all", 90, 1, describe(None)),
          Case("seq.share_offsets.describe_named", 90, 1, describe(named)),
          Case("seq.share_offsets.describe_strays", 90, 1, describe(strays), timeout=60),
          Case("seq.share_offsets.alter_classic_group", 91, 0, lambda c: {"group_id": GROUP, "topics": [
              {"topic_name": P3, "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
          Case("seq.share_offsets.delete_classic_group", 92, 0, lambda c: {"group_id": GROUP, "topics": [
              {"topic_name": P3}]}),
          Case("seq.share_offsets.delete", 92, 0, lambda c: {"group_id": g, "topics": [
              {"topic_name": unknown}, {"topic_name": P1}, {"topic_name": P3}, {"topic_name": P3}]}),
          Case("seq.share_offsets.describe_after_delete", 90, 1, describe(named)),
          Case("seq.share_offsets.delete_again", 92, 0, lambda c: {"group_id": g, "topics": [
              {"topic_name": P3}]}),
          Case("seq.share_offsets.alter_again", 91, 0, lambda c: {"group_id": g, "topics": [
              {"topic_name": P3, "partitions": [{"partition_index": 1, "start_offset": 1}]}]}),
          Case("seq.share_offsets.delete_group", 42, 2, lambda c: {"groups_names": [g]}),
          Case("seq.share_offsets.describe_after_delete_group", 90, 1, describe(None)),
          Case("seq.share_offsets.delete_unknown_group", 92, 0, lambda c: {"group_id": g, "topics": [
              {"topic_name": P3}]})]
    return cs


def share_sessions():
    """A share group's records and session in order (KIP-932): group configs, two compressed
    batches produced (their boundaries kept by both brokers), a member joins, ShareFetch opens a
    session and acquires, a wrong epoch, acknowledgements (accept, release, reject, a malformed
    batch, Renew without IsRenewAck), redelivery with count 2, the session closed with
    acknowledgements, a fetch on the closed session, the offsets, the member leaves."""
    t, g, m = "diff-share-q", "diff-share-sessions", "diffsharemember0000001"
    cs = [Case("seq.share.create_topic", 19, 7, lambda c: {
        "topics": [{"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 10000, "validate_only": False}, after=learn_topic_ids),
          Case("seq.share.group_configs", 44, 1, lambda c: {"resources": [{
              "resource_type": 32, "resource_name": g, "configs": [
                  {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
              "validate_only": False}),
          Case("seq.share.produce_a", 0, 11, produce_body(11, t, 0, records.build_batch(
              sample_records(3, "sa"), codec="gzip"))),
          Case("seq.share.produce_b", 0, 11, produce_body(11, t, 0, records.build_batch(
              sample_records(2, "sb"), codec="gzip"))),
          Case("seq.share.join", 76, 1, lambda c: {"group_id": g, "member_id": m, "member_epoch": 0,
                                                   "rack_id": None, "subscribed_topic_names": [t]})]

    def fetch(epoch, acks=(), max_records=10, wait=5000):
        return lambda c: {"group_id": g, "member_id": m, "share_session_epoch": epoch, "max_wait_ms": wait,
                          "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records,
                          "batch_size": max_records, "share_acquire_mode": 0, "is_renew_ack": False,
                          "topics": [{"topic_id": c.tid(t), "partitions": [
                              {"partition_index": 0, "partition_max_bytes": 0, "acknowledgement_batches": [
                                  {"first_offset": f, "last_offset": l, "acknowledge_types": k}
                                  for f, l, k in acks]}]}],
                          "forgotten_topics_data": []}

    def ack(epoch, acks, renew=False):
        return lambda c: {"group_id": g, "member_id": m, "share_session_epoch": epoch, "is_renew_ack": renew,
                          "topics": [{"topic_id": c.tid(t), "partitions": [
                              {"partition_index": 0, "acknowledgement_batches": [
                                  {"first_offset": f, "last_offset": l, "acknowledge_types": k}
                                  for f, l, k in acks]}]}]}
    cs += [Case("seq.share.fetch_open", 78, 2, fetch(0), timeout=30),
           Case("seq.share.fetch_wrong_epoch", 78, 2, fetch(5, wait=0)),
           Case("seq.share.ack_accept_release", 79, 2, ack(1, [(0, 1, [1]), (2, 2, [2])])),
           Case("seq.share.ack_malformed", 79, 2, ack(2, [(4, 3, [1])])),
           Case("seq.share.ack_renew_without_flag", 79, 2, ack(3, [(3, 3, [4])])),
           Case("seq.share.fetch_again", 78, 2, fetch(4), timeout=30),
           Case("seq.share.ack_reject", 79, 2, ack(5, [(2, 2, [3])])),
           Case("seq.share.ack_not_held", 79, 2, ack(6, [(0, 0, [1])])),
           Case("seq.share.close", 78, 2, lambda c: dict(fetch(-1, acks=[(3, 4, [1])], wait=0)(c),
                                                          topics=[], max_records=0)),
           Case("seq.share.fetch_closed", 78, 2, fetch(8, wait=0)),
           Case("seq.share.offsets", 90, 1, lambda c: {"groups": [{"group_id": g, "topics": [
               {"topic_name": t, "partitions": [0]}]}]}),
           Case("seq.share.leave", 76, 1, lambda c: {"group_id": g, "member_id": m, "member_epoch": -1,
                                                    "rack_id": None, "subscribed_topic_names": None}),
           Case("seq.share.delete_group", 42, 2, lambda c: {"groups_names": [g]})]
    return cs


def topic_lifecycle():
    n = "diff-life-topic"
    cs = [Case("seq.topic.create", 19, 7, lambda c: {"topics": [{"name": n, "num_partitions": 2, "replication_factor": 1,
                                                                  "assignments": [], "configs": []}],
                                                      "timeout_ms": 10000, "validate_only": False}),
          Case("seq.topic.create_again", 19, 7, lambda c: {"topics": [{"name": n, "num_partitions": 2,
                                                                        "replication_factor": 1, "assignments": [],
                                                                        "configs": []}], "timeout_ms": 10000}),
          Case("seq.topic.partitions_fewer", 37, 3, lambda c: {"topics": [{"name": n, "count": 1, "assignments": None}],
                                                               "timeout_ms": 5000, "validate_only": False}),
          Case("seq.topic.partitions_more", 37, 3, lambda c: {"topics": [{"name": n, "count": 3, "assignments": None}],
                                                              "timeout_ms": 5000, "validate_only": False}),
          Case("seq.topic.metadata", 3, 12, lambda c: {"topics": [{"name": n, "topic_id": kproto.ZERO_UUID}],
                                                       "allow_auto_topic_creation": False}, after=learn_topic_ids),
          Case("seq.topic.produce", 0, 11, produce_body(11, n, 2, records.build_batch(sample_records(3, "life")))),
          Case("seq.topic.delete_records_mid", 21, 2, lambda c: {"topics": [{"name": n, "partitions": [
              {"partition_index": 2, "offset": 1}]}], "timeout_ms": 5000}),
          Case("seq.topic.delete_records_past_end", 21, 2, lambda c: {"topics": [{"name": n, "partitions": [
              {"partition_index": 2, "offset": 100}]}], "timeout_ms": 5000}),
          Case("seq.topic.list_offsets_earliest", 2, 9, lambda c: {"replica_id": -1, "topics": [
              {"name": n, "partitions": [{"partition_index": 2, "current_leader_epoch": -1, "timestamp": -2}]}]}),
          Case("seq.topic.fetch_before_start", 1, 12, fetch_body(12, [(n, [(2, 0)])])),
          Case("seq.topic.delete_by_id", 20, 6, lambda c: {"topics": [{"name": None, "topic_id": c.tid(n)}],
                                                           "timeout_ms": 10000}),
          # Kafka answers DeleteTopics before every broker has applied the deletion: asked
          # again until the topic is gone on both, as a client would see it settle.
          Case("seq.topic.metadata_after_delete", 3, 12, lambda c: {"topics": [{"name": n, "topic_id": kproto.ZERO_UUID}],
                                                                    "allow_auto_topic_creation": False},
               until=lambda body: body["topics"][0]["error_code"] != 0),
          Case("seq.topic.auto_create_by_metadata", 3, 12, lambda c: {"topics": [{"name": "diff-auto", "topic_id": kproto.ZERO_UUID}],
                                                                      "allow_auto_topic_creation": True}, pause=1.0),
          Case("seq.topic.auto_created_metadata", 3, 12, lambda c: {"topics": [{"name": "diff-auto", "topic_id": kproto.ZERO_UUID}],
                                                                    "allow_auto_topic_creation": True}, after=learn_topic_ids),
          ]
    return cs


# ---- malformed frames ----------------------------------------------------------------------

def malformed(t):
    def frame_of(api, v, body_bytes, corr, client_id=b"es-diff", flex_header=None):
        req = t.specs[(api, "request")]
        flex = v in req.flexible if flex_header is None else flex_header
        h = struct.pack(">hhi", api, v, corr) + struct.pack(">h", len(client_id)) + client_id
        if flex:
            h += b"\x00"
        payload = h + body_bytes
        return struct.pack(">i", len(payload)) + payload

    def valid(api, v, body):
        return kproto.encode_body(t.specs[(api, "request")], v, body)

    md12 = {"topics": [{"name": P1, "topic_id": kproto.ZERO_UUID}], "allow_auto_topic_creation": False}
    cases = {
        "truncated_body": lambda c, corr: frame_of(3, 12, valid(3, 12, md12)[:-3], corr),
        "truncated_frame_length": lambda c, corr: frame_of(3, 12, valid(3, 12, md12), corr)[:-2],
        "oversized_array": lambda c, corr: frame_of(3, 9, struct.pack(">i", 1_000_000_000), corr),
        "oversized_compact_array": lambda c, corr: frame_of(3, 12, bytes([0xff, 0xff, 0xff, 0xff, 0x0f]), corr),
        "bad_varint": lambda c, corr: frame_of(3, 12, bytes([0xff] * 11), corr),
        "bad_utf8_topic": lambda c, corr: frame_of(3, 12, valid(3, 12, {"topics": [{"name": b"\xc3\x28", "topic_id": kproto.ZERO_UUID}]}), corr),
        "bad_utf8_client_id": lambda c, corr: frame_of(3, 12, valid(3, 12, md12), corr, client_id=b"\xff\xfe"),
        "negative_string_length": lambda c, corr: frame_of(3, 9, struct.pack(">i", 1) + struct.pack(">h", -5), corr),
        "trailing_garbage": lambda c, corr: frame_of(3, 12, valid(3, 12, md12) + b"\x00\x01\x02", corr),
        "unknown_api_key": lambda c, corr: frame_of(250, 0, b"", corr, flex_header=False) if False else
        struct.pack(">i", 10) + struct.pack(">hhi", 250, 0, corr) + struct.pack(">h", 0),
        "unsupported_version": lambda c, corr: frame_of(3, 14, valid(3, 13, md12), corr, flex_header=True),
        "api_versions_future": lambda c, corr: frame_of(18, 99, b"\x00\x00\x00", corr, flex_header=True),
        "zero_length_frame": lambda c, corr: struct.pack(">i", 0),
        "negative_frame_length": lambda c, corr: struct.pack(">i", -1),
        "huge_frame_length": lambda c, corr: struct.pack(">i", 0x7ffffff0) + b"\x00" * 16,
        "header_only": lambda c, corr: frame_of(3, 12, b"", corr),
        "fetch_truncated": lambda c, corr: frame_of(1, 12, valid(1, 12, fetch_body(12, [(P1, [(0, 0)])])(c))[:20], corr),
        "produce_bad_records_size": lambda c, corr: frame_of(0, 9, b"\x00" + struct.pack(">hi", -1, 5000) + b"\x02\x08diff-p1\x02"
                                                             + struct.pack(">i", 0) + b"\xff\xff\x0f", corr),
    }
    out = []
    for name, raw in cases.items():
        api = 18 if name.startswith("api_versions") else 1 if name.startswith("fetch") else 0 if name.startswith("produce") else 3
        ver = {"oversized_array": 9, "negative_string_length": 9, "api_versions_future": 99,
               "unsupported_version": 14, "produce_bad_records_size": 9}.get(name, 12)
        if api == 18:
            ver = 0  # its answer is decoded as v0
        out.append(Case(f"malformed.{name}", api, ver, raw=raw, timeout=5))
    return out


def build(t, quick):
    """All cases, in order. The subject's ApiVersions decides which APIs and versions run."""
    es = t.brokers[0]
    probe = Case("probe.api_versions", 18, 3, t_api_versions(3, ""))
    res = t.run_on(es, probe)
    if res["status"] != "answered":
        raise SystemExit(f"diff: the subject did not answer ApiVersions: {res}")
    advertised = [(a["api_key"], a["min_version"], a["max_version"]) for a in res["body"]["api_keys"]]
    cs = prepare(t)
    fetch_max = next(hi for k, lo, hi in advertised if k == 1)
    cs += reads(fetch_max)
    # APIs that change shared state run after the others; UnregisterBroker (64),
    # RemoveRaftVoter (81) and UnregisterController (94), which only a Kafka subject advertises,
    # can take the subject's coordinators away, so they come last of all.
    order = sorted(advertised, key=lambda a: (a[0] in (64, 81, 94),
                                              a[0] in (19, 20, 21, 37, 42, 47, 33, 44), a[0]))
    for key, lo, hi in order:
        if (key, "request") not in t.specs:
            continue
        for v in range(lo, hi + 1):
            if key == 0 and v < 3:
                continue  # Produce v0-2: advertised by both, refused by both (see versions.rs)
            cs += generated(t, key, v, f"{key}-{v}", quick_edges=(v == hi or v == lo))
    cs += fetch_sessions(fetch_max)
    cs += idempotence()
    cs += transactions()
    cs += group_lifecycle()
    cs += share_offsets_lifecycle()
    cs += share_sessions()
    cs += topic_lifecycle()
    cs += malformed(t)
    for c in cs:
        if c.name.startswith("seq.") and c.name.endswith((".init", ".join_needs_member_id")):
            c.retry = True
        # The shared state must be built on both brokers whatever their start-up timing: a
        # produce right after CreateTopics, or an AddPartitionsToTxn right after
        # InitProducerId (Kafka answers CONCURRENT_TRANSACTIONS while the previous
        # transaction's markers are written), waits until the broker is ready.
        if c.name.startswith("prepare.produce.") or c.name.startswith("prepare.idem.produce"):
            c.retry = TOPIC_NOT_READY
        if c.name.startswith("prepare.txn.") and c.name.endswith(".add_partitions"):
            c.retry = True
    # DeleteTopics of __consumer_offsets succeeds on Kafka and takes its group coordinators
    # with it (every later group request answers NOT_COORDINATOR): those cases run last.
    last = [c for c in cs if c.name.startswith("DeleteTopics.") and c.name.endswith("=internal")]
    cs = [c for c in cs if c not in last] + last
    if quick:
        cs = [c for c in cs if c.quick]
    return cs
