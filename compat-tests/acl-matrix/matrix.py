"""matrix: the requests the ACL matrix sends, what each needs, and the ACL scenarios.

A case is one request of one API (at one version) that Kafka authorizes, written with the
operations Kafka checks for it (`needs`: resource type, resource name, operation). A scenario
turns those needs into the ACLs present while the case runs (SCENARIOS: none; ALLOW on the
exact resource; ALLOW plus a DENY of the same operation, of ALL, of another operation, for
User:*, on a PREFIXED pattern; LITERAL `*`; PREFIXED; `User:*`; an operation that implies the
needed one; ALL; an operation that does not imply it; another host; the client's host;
another user; all needs but one), or sends the request as the super user. A cell is one (scenario, case): its own
resource names (`{c}` below is the cell's prefix, e.g. `allow-produce-plain`), its own ACLs and
nothing left over from another cell, so that its answer depends only on authorization.

Resources the cells share, created by admin before the first cell and never changed after:
  acl-data   1 partition, 5 records (3 plain, 2 from an idempotent producer), read by Fetch,
             ListOffsets, OffsetForLeaderEpoch, DescribeProducers, committed to by groups;
  acl-other  1 partition, 2 records: a second topic no literal ALLOW ever names, so that a
             request naming both shows per-topic answers;
  acl-txn, acl-txn2   partitions added to transactions (their markers land there, whenever
             a transaction times out), never read.
  acl-lg-g, acl-lt-x   a group (with offsets) and a transactional id (Empty) with no ACL, which
             ListGroups and ListTransactions list only with CLUSTER DESCRIBE or a wildcard.
Cell topics (`cell_topics`) are created with the shared ones; everything a cell creates
itself (topics, groups, transactional ids) carries the cell's prefix, except Produce.plain's
second topic, sink-{c}, which no PREFIXED pattern of the scenario covers. Nothing a cell sees
depends on which cells ran before it, so any selection (--quick, --only) compares with the
saved full run.
"""
import uuid as uuidlib

import kproto
import records

# Kafka's enums (org.apache.kafka.common.resource / acl).
RT = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TXN": 5}
RT_NAME = {v: k for k, v in RT.items()}
OP = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
      "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}
OP_NAME = {v: k for k, v in OP.items()}
PERM = {"ANY": 1, "DENY": 2, "ALLOW": 3}
PATTERN = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
PATTERN_NAME = {v: k for k, v in PATTERN.items()}
CLUSTER = "kafka-cluster"
ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"
OTHER_HOST = "10.11.12.13"

DATA, OTHER, TXN_T, TXN_T2 = "acl-data", "acl-other", "acl-txn", "acl-txn2"
SHARED_TOPICS = [DATA, OTHER, TXN_T, TXN_T2]
SHARED_GROUP, SHARED_TXN = "acl-lg-g", "acl-lt-x"  # a group and a transactional id with no ACL
DUMMY = "acl-dummy"  # the topic of the ACL DeleteAcls deletes (no such topic needed)
TXN_TIMEOUT_MS = 60000
BASE_TS = records.BASE_TS

API = {"Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "OffsetCommit": 8, "OffsetFetch": 9,
       "FindCoordinator": 10, "JoinGroup": 11, "Heartbeat": 12, "LeaveGroup": 13, "SyncGroup": 14,
       "DescribeGroups": 15, "ListGroups": 16, "SaslHandshake": 17, "ApiVersions": 18,
       "CreateTopics": 19, "DeleteTopics": 20, "DeleteRecords": 21, "InitProducerId": 22,
       "OffsetForLeaderEpoch": 23, "AddPartitionsToTxn": 24, "AddOffsetsToTxn": 25, "EndTxn": 26,
       "WriteTxnMarkers": 27, "TxnOffsetCommit": 28, "DescribeAcls": 29, "CreateAcls": 30,
       "DeleteAcls": 31, "DescribeConfigs": 32, "AlterConfigs": 33, "AlterReplicaLogDirs": 34,
       "DescribeLogDirs": 35, "SaslAuthenticate": 36, "CreatePartitions": 37, "DeleteGroups": 42,
       "ElectLeaders": 43, "IncrementalAlterConfigs": 44, "AlterPartitionReassignments": 45,
       "ListPartitionReassignments": 46, "OffsetDelete": 47, "DescribeClientQuotas": 48,
       "AlterClientQuotas": 49, "DescribeUserScramCredentials": 50, "AlterUserScramCredentials": 51,
       "DescribeQuorum": 55, "DescribeCluster": 60, "DescribeProducers": 61,
       "DescribeTransactions": 65, "ListTransactions": 66, "ConsumerGroupHeartbeat": 68,
       "ConsumerGroupDescribe": 69, "GetTelemetrySubscriptions": 71, "ListConfigResources": 74,
       "DescribeTopicPartitions": 75, "ShareGroupHeartbeat": 76, "ShareGroupDescribe": 77,
       "DescribeShareGroupOffsets": 90, "AlterShareGroupOffsets": 91, "DeleteShareGroupOffsets": 92}
API_NAME = {v: k for k, v in API.items()}

# Versions of the requests admin sends to set cells up (not compared as cases; es serves them).
ADMIN_V = {"Metadata": 12, "CreateTopics": 7, "Produce": 12, "InitProducerId": 5, "AddPartitionsToTxn": 3,
           "AddOffsetsToTxn": 4, "OffsetCommit": 9, "ConsumerGroupHeartbeat": 1, "ShareGroupHeartbeat": 1, "FindCoordinator": 6,
           "AlterShareGroupOffsets": 0,
           "DescribeAcls": 3, "CreateAcls": 3, "DeleteAcls": 3}


# ---- scenarios ----------------------------------------------------------------------------

def implied_by(rtype, op):
    """An operation that implies op on rtype without being op or ALL (Kafka: READ, WRITE,
    DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS), else ALL."""
    if op == "DESCRIBE":
        return {"TOPIC": "WRITE", "GROUP": "READ", "TXN": "WRITE", "CLUSTER": "ALTER"}[rtype]
    if op == "DESCRIBE_CONFIGS":
        return "ALTER_CONFIGS"
    return "ALL"


# An operation next to op that does not imply it.
WRONG_OP = {"READ": "WRITE", "WRITE": "READ", "DESCRIBE": "CREATE", "CREATE": "DESCRIBE", "DELETE": "ALTER",
            "ALTER": "DELETE", "DESCRIBE_CONFIGS": "DESCRIBE", "ALTER_CONFIGS": "ALTER",
            "CLUSTER_ACTION": "ALTER_CONFIGS", "IDEMPOTENT_WRITE": "WRITE"}


def prefix_of(name):
    """The PREFIXED pattern a scenario uses for name: its first dash-separated word and the dash
    (a cell's names all start with the scenario's word, shared topics with `acl-`)."""
    head = name.split("-")[0]
    return head + "-" if "-" in name else name[:3]


def acl(rtype, name, op, principal=ALICE, perm="ALLOW", pattern="LITERAL", host="*"):
    return (rtype, name, pattern, principal, host, op, perm)


def allow_each(needs, **kw):
    return [acl(rt, name, op, **kw) for rt, name, op in needs]


# name -> (what it means, ACLs for resolved needs). The principal is alice unless the scenario
# is "super" (admin, no ACLs).
SCENARIOS = {
    "none": ("no ACL at all", lambda n: []),
    "allow": ("ALLOW alice the needed operation on the exact resource (LITERAL)", lambda n: allow_each(n)),
    "deny": ("ALLOW and DENY alice the needed operation on the exact resource",
             lambda n: allow_each(n) + allow_each(n, perm="DENY")),
    "deny_all": ("ALLOW alice the needed operation, DENY alice ALL on the resource",
                 lambda n: allow_each(n) + [acl(rt, name, "ALL", perm="DENY") for rt, name, _ in n]),
    "deny_other": ("ALLOW alice the needed operation, DENY alice another one (READ when DESCRIBE is "
                   "needed, else DESCRIBE)",
                   lambda n: allow_each(n) + [acl(rt, name, "READ" if op == "DESCRIBE" else "DESCRIBE",
                                                  perm="DENY") for rt, name, op in n]),
    "deny_user_star": ("ALLOW alice the needed operation, DENY User:* the same",
                       lambda n: allow_each(n) + allow_each(n, principal="User:*", perm="DENY")),
    "deny_prefixed": ("ALLOW alice the needed operation (LITERAL), DENY it on a PREFIXED pattern",
                      lambda n: allow_each(n) + [acl(rt, prefix_of(name), op, pattern="PREFIXED", perm="DENY")
                                                 for rt, name, op in n]),
    "wildcard": ("ALLOW alice the needed operation on LITERAL `*`",
                 lambda n: [acl(rt, "*", op) for rt, _, op in n]),
    "prefixed": ("ALLOW alice the needed operation on a PREFIXED pattern of the resource's first word",
                 lambda n: [acl(rt, prefix_of(name), op, pattern="PREFIXED") for rt, name, op in n]),
    "user_star": ("ALLOW User:* the needed operation on the exact resource",
                  lambda n: allow_each(n, principal="User:*")),
    "implied": ("ALLOW alice an operation implying the needed one (WRITE/READ/ALTER for DESCRIBE, "
                "ALTER_CONFIGS for DESCRIBE_CONFIGS, else ALL)",
                lambda n: [acl(rt, name, implied_by(rt, op)) for rt, name, op in n]),
    "all_op": ("ALLOW alice ALL on the exact resource", lambda n: [acl(rt, name, "ALL") for rt, name, _ in n]),
    "wrong_op": ("ALLOW alice a neighbouring operation that does not imply the needed one",
                 lambda n: [acl(rt, name, WRONG_OP[op]) for rt, name, op in n]),
    "wrong_host": (f"ALLOW alice the needed operation from host {OTHER_HOST} only",
                   lambda n: allow_each(n, host=OTHER_HOST)),
    "host_ip": ("ALLOW alice the needed operation from host 127.0.0.1 (the client's address)",
                lambda n: allow_each(n, host="127.0.0.1")),
    "other_user": ("ALLOW bob (not alice) the needed operation", lambda n: allow_each(n, principal=BOB)),
    "but1": ("ALLOW alice every needed operation but the first", lambda n: allow_each(n[1:])),
    "but2": ("ALLOW alice every needed operation but the second", lambda n: allow_each(n[:1] + n[2:])),
    "but3": ("ALLOW alice every needed operation but the third", lambda n: allow_each(n[:2] + n[3:])),
    "super": ("as admin, a super user, with no ACL", lambda n: []),
}
QUICK_SCENARIOS = ["none", "allow", "deny", "wildcard", "prefixed", "implied", "but1", "but2", "super"]
# Short words for cell prefixes (each is the first word of every name a cell creates).
SCENARIO_WORD = {"none": "none", "allow": "allow", "deny": "deny", "deny_all": "denyall", "deny_other": "denyoth",
                 "deny_user_star": "denyustar", "deny_prefixed": "denypfx", "wildcard": "wild", "prefixed": "pfx",
                 "user_star": "ustar", "implied": "impl", "all_op": "allop", "wrong_op": "wrongop",
                 "wrong_host": "whost", "host_ip": "hostip", "other_user": "bob", "but1": "but1", "but2": "but2",
                 "but3": "but3", "super": "super"}


def scenario_applies(scenario, case):
    n = len(case.needs)
    if not n:
        return scenario in ("none", "super")
    if scenario.startswith("but"):
        return n >= 2 and int(scenario[3:]) <= n
    return True


# ---- cases --------------------------------------------------------------------------------

class Case:
    """One request. body(x) builds it from the cell context x (x.c the cell prefix, x.tid(name)
    a topic id on this broker, x.vals what setup learned). needs: [(rtype, name, op)] with
    `{c}` in names. setup(x): admin's steps before the ACLs are set; settle(x, answer): admin's
    steps after, waiting until what the request started is done (an auto-created topic, a
    deletion), whose outcome is recorded. version: pinned (a client-side version below the
    newest), else the newest both brokers serve. cell_topics: topics admin creates beforehand,
    with records. extra_acls: ACLs present in every scenario (what DeleteAcls deletes)."""

    def __init__(self, id, api, body, needs=(), setup=None, settle=None, version=None, cell_topics=(),
                 extra_acls=(), note=""):
        self.id, self.api, self.body, self.needs = id, api, body, list(needs)
        self.setup, self.settle, self.version = setup, settle, version
        self.cell_topics, self.extra_acls, self.note = list(cell_topics), list(extra_acls), note

    @property
    def api_key(self):
        return API[self.api]

    def word(self):
        return self.id.lower().replace(".", "-").replace("_", "")


def sub(name, c):
    return name.replace("{c}", c)


def batch(n, tag, **kw):
    return records.build_batch([{"key": f"{tag}-k{i}".encode(), "value": f"{tag}-v{i}".encode(),
                                 "headers": [("h", str(i).encode())]} for i in range(n)], **kw)


def member_uuid(c):
    return kproto.uuid_text(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, "acl-matrix." + c).bytes)


# -- setup steps (admin) --

def init_txn(x, txn="{c}-x"):
    a = x.admin("InitProducerId", {"transactional_id": sub(txn, x.c), "transaction_timeout_ms": TXN_TIMEOUT_MS,
                                   "producer_id": -1, "producer_epoch": -1})
    x.vals["pid"], x.vals["epoch"] = a.get("producer_id", -1), a.get("producer_epoch", -1)


def init_idem(x):
    a = x.admin("InitProducerId", {"transactional_id": None, "transaction_timeout_ms": TXN_TIMEOUT_MS,
                                   "producer_id": -1, "producer_epoch": -1})
    x.vals["pid"], x.vals["epoch"] = a.get("producer_id", -1), a.get("producer_epoch", -1)


def add_partitions(x, topics, txn="{c}-x"):
    x.admin("AddPartitionsToTxn", {"v3_and_below_transactional_id": sub(txn, x.c),
                                   "v3_and_below_producer_id": x.vals["pid"],
                                   "v3_and_below_producer_epoch": x.vals["epoch"],
                                   "v3_and_below_topics": [{"name": sub(t, x.c), "partitions": [0]} for t in topics]})


def commit(x, group, topics):
    x.admin("OffsetCommit", {"group_id": sub(group, x.c), "generation_id_or_member_epoch": -1, "member_id": "",
                             "group_instance_id": None, "retention_time_ms": -1,
                             "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                    "committed_leader_epoch": -1,
                                                                    "committed_metadata": "m"}]}
                                        for t in topics]})


def cg_join(x, group="{c}-g"):
    x.admin("ConsumerGroupHeartbeat", {"group_id": sub(group, x.c), "member_id": member_uuid(x.c + "-admin"),
                                       "member_epoch": 0, "instance_id": None, "rack_id": None,
                                       "rebalance_timeout_ms": 30000, "subscribed_topic_names": [DATA],
                                       "subscribed_topic_regex": None, "server_assignor": None,
                                       "topic_partitions": []})


def sg_join(x, group="{c}-g"):
    x.admin("ShareGroupHeartbeat", {"group_id": sub(group, x.c), "member_id": member_uuid(x.c + "-admin"),
                                    "member_epoch": 0, "rack_id": None, "subscribed_topic_names": [DATA]})


def sg_offsets(x, group="{c}-g"):
    """Admin gives share group `group` state on partition 0 of acl-data and acl-other
    (AlterShareGroupOffsets creates the group)."""
    x.admin("AlterShareGroupOffsets", {"group_id": sub(group, x.c), "topics": [
        {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]} for t in (DATA, OTHER)]})


# -- settle steps (admin): wait until what the request started is done, record the outcome --

def settle_topic(name_tpl, expect):
    """After a request that may create or delete topic name_tpl: expect(answer) says what the
    broker took on (True: a creation, False: a deletion, None: nothing). Admin waits (bounded)
    until its Metadata shows that done, and the cell records whether the topic exists then,
    and its partitions."""
    def settle(x, answer):
        name = sub(name_tpl, x.c)
        return {"topic": name, "after": x.wait_topic(name, expect(answer))}
    return settle


def auto_created(answer):
    """A Metadata answer that took an auto-creation on: no TOPIC_AUTHORIZATION_FAILED."""
    topics = answer.get("topics") or []
    return True if topics and all(t.get("error_code") != 29 for t in topics) else None


def deleted(answer):
    return False if any(t.get("error_code") == 0 for t in answer.get("responses") or []) else None


def fetch_part(x, topic, offset=0):
    return {"topic_id": x.tid(topic), "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                      "fetch_offset": offset, "last_fetched_epoch": -1,
                                                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}


def produce_part(x, topic, data):
    return {"topic_id": x.tid(topic), "name": topic, "partition_data": [{"index": 0, "records": data}]}


CONFIG_KEYS = ["cleanup.policy", "retention.ms"]
BROKER_CONFIG_KEYS = ["num.partitions"]
SALTED = bytes(range(32))


def cases():
    out = []

    def add(*a, **kw):
        out.append(Case(*a, **kw))

    # -- produce and fetch --
    add("Produce.plain", "Produce",
        lambda x: {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                   "topic_data": [produce_part(x, sub("{c}-t", x.c), batch(2, "plain")),
                                  produce_part(x, sub("sink-{c}", x.c), batch(1, "sink"))]},
        needs=[("TOPIC", "{c}-t", "WRITE")], cell_topics=["{c}-t", "sink-{c}"],
        note="a second topic (sink-{c}) that only wildcards and the super user reach")
    add("Produce.idempotent", "Produce",
        lambda x: {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                   "topic_data": [produce_part(x, sub("{c}-t", x.c),
                                               batch(2, "idem", producer_id=x.vals["pid"],
                                                     producer_epoch=x.vals["epoch"], base_sequence=0))]},
        needs=[("TOPIC", "{c}-t", "WRITE")], setup=init_idem, cell_topics=["{c}-t"])
    add("Produce.transactional", "Produce",
        lambda x: {"transactional_id": sub("{c}-x", x.c), "acks": -1, "timeout_ms": 5000,
                   "topic_data": [produce_part(x, sub("{c}-t", x.c),
                                               batch(2, "txn", producer_id=x.vals["pid"],
                                                     producer_epoch=x.vals["epoch"], base_sequence=0,
                                                     transactional=True))]},
        needs=[("TXN", "{c}-x", "WRITE"), ("TOPIC", "{c}-t", "WRITE")],
        setup=lambda x: (init_txn(x), add_partitions(x, ["{c}-t"])), cell_topics=["{c}-t"])
    add("Fetch", "Fetch",
        lambda x: {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                   "session_id": 0, "session_epoch": -1, "topics": [fetch_part(x, DATA), fetch_part(x, OTHER)],
                   "forgotten_topics_data": [], "rack_id": ""},
        needs=[("TOPIC", DATA, "READ")])
    add("ListOffsets", "ListOffsets",
        lambda x: {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                   "topics": [{"name": t, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                          "timestamp": -1}]} for t in (DATA, OTHER)]},
        needs=[("TOPIC", DATA, "DESCRIBE")])
    add("OffsetForLeaderEpoch", "OffsetForLeaderEpoch",
        lambda x: {"replica_id": -1, "topics": [{"topic": t, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]} for t in (DATA, OTHER)]},
        needs=[("TOPIC", DATA, "DESCRIBE")])
    add("OffsetForLeaderEpoch.cluster_action", "OffsetForLeaderEpoch",
        lambda x: {"replica_id": -1, "topics": [{"topic": t, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]} for t in (DATA, OTHER)]},
        needs=[("CLUSTER", CLUSTER, "CLUSTER_ACTION")],
        note="CLUSTER_ACTION on the cluster (a follower's right) stands in for DESCRIBE on every topic")
    add("DescribeProducers", "DescribeProducers",
        lambda x: {"topics": [{"name": t, "partition_indexes": [0]} for t in (DATA, OTHER)]},
        needs=[("TOPIC", DATA, "READ")])

    # -- metadata --
    def md(topics, auto=False, ops=False):
        return lambda x: {"topics": None if topics is None else
                          [{"name": sub(t, x.c), "topic_id": kproto.ZERO_UUID} for t in topics],
                          "allow_auto_topic_creation": auto, "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": ops}
    add("Metadata.all", "Metadata", md(None), needs=[("TOPIC", DATA, "DESCRIBE")],
        note="every topic alice may describe (and only those)")
    add("Metadata.named", "Metadata", md([DATA, OTHER], ops=True), needs=[("TOPIC", DATA, "DESCRIBE")],
        note="with topic_authorized_operations")
    add("Metadata.missing", "Metadata", md(["{c}-missing"]), needs=[("TOPIC", "{c}-missing", "DESCRIBE")],
        note="a topic that does not exist, no auto-creation")
    add("Metadata.auto_create", "Metadata", md(["{c}-auto"], auto=True),
        needs=[("TOPIC", "{c}-auto", "DESCRIBE"), ("TOPIC", "{c}-auto", "CREATE")],
        settle=settle_topic("{c}-auto", auto_created))
    add("Metadata.auto_create_cluster", "Metadata", md(["{c}-auto"], auto=True),
        needs=[("TOPIC", "{c}-auto", "DESCRIBE"), ("CLUSTER", CLUSTER, "CREATE")],
        settle=settle_topic("{c}-auto", auto_created))
    add("DescribeTopicPartitions.named", "DescribeTopicPartitions",
        lambda x: {"topics": [{"name": DATA}, {"name": sub("{c}-missing", x.c)}],
                   "response_partition_limit": 2000, "cursor": None},
        needs=[("TOPIC", DATA, "DESCRIBE"), ("TOPIC", "{c}-missing", "DESCRIBE")])
    add("DescribeTopicPartitions.all", "DescribeTopicPartitions",
        lambda x: {"topics": [], "response_partition_limit": 2000, "cursor": None},
        needs=[("TOPIC", DATA, "DESCRIBE")])

    # -- groups --
    add("OffsetCommit", "OffsetCommit",
        lambda x: {"group_id": sub("{c}-g", x.c), "generation_id_or_member_epoch": -1, "member_id": "",
                   "group_instance_id": None, "retention_time_ms": -1,
                   "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                          "committed_leader_epoch": -1,
                                                          "committed_metadata": ""}]} for t in (DATA, OTHER)]},
        needs=[("GROUP", "{c}-g", "READ"), ("TOPIC", DATA, "READ")])

    def offset_fetch(topics):
        return lambda x: {"groups": [{"group_id": sub("{c}-g", x.c), "member_id": None, "member_epoch": -1,
                                      "topics": topics}], "require_stable": False}
    add("OffsetFetch.named", "OffsetFetch",
        offset_fetch([{"name": DATA, "partition_indexes": [0]}, {"name": OTHER, "partition_indexes": [0]}]),
        needs=[("GROUP", "{c}-g", "DESCRIBE"), ("TOPIC", DATA, "DESCRIBE")],
        setup=lambda x: commit(x, "{c}-g", [DATA, OTHER]))
    add("OffsetFetch.all", "OffsetFetch", offset_fetch(None),
        needs=[("GROUP", "{c}-g", "DESCRIBE"), ("TOPIC", DATA, "DESCRIBE")],
        setup=lambda x: commit(x, "{c}-g", [DATA, OTHER]))
    add("FindCoordinator.group", "FindCoordinator",
        lambda x: {"key": "", "key_type": 0, "coordinator_keys": [sub("{c}-g", x.c)]},
        needs=[("GROUP", "{c}-g", "DESCRIBE")])
    add("FindCoordinator.transaction", "FindCoordinator",
        lambda x: {"key": "", "key_type": 1, "coordinator_keys": [sub("{c}-x", x.c)]},
        needs=[("TXN", "{c}-x", "DESCRIBE")])
    add("JoinGroup", "JoinGroup",
        lambda x: {"group_id": sub("{c}-g", x.c), "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                   "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                   "protocols": [{"name": "range", "metadata": b"\x00\x01"}], "reason": None},
        needs=[("GROUP", "{c}-g", "READ")], note="no member id yet: MEMBER_ID_REQUIRED when allowed")
    add("SyncGroup", "SyncGroup",
        lambda x: {"group_id": sub("{c}-g", x.c), "generation_id": 1, "member_id": "m-unknown",
                   "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                   "assignments": []},
        needs=[("GROUP", "{c}-g", "READ")])
    add("Heartbeat", "Heartbeat",
        lambda x: {"group_id": sub("{c}-g", x.c), "generation_id": 1, "member_id": "m-unknown",
                   "group_instance_id": None},
        needs=[("GROUP", "{c}-g", "READ")])
    add("LeaveGroup", "LeaveGroup",
        lambda x: {"group_id": sub("{c}-g", x.c), "member_id": "",
                   "members": [{"member_id": "m-unknown", "group_instance_id": None, "reason": None}]},
        needs=[("GROUP", "{c}-g", "READ")])
    add("ConsumerGroupHeartbeat", "ConsumerGroupHeartbeat",
        lambda x: {"group_id": sub("{c}-g", x.c), "member_id": member_uuid(x.c), "member_epoch": 0,
                   "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                   "subscribed_topic_names": [DATA], "subscribed_topic_regex": None, "server_assignor": None,
                   "topic_partitions": []},
        needs=[("GROUP", "{c}-g", "READ"), ("TOPIC", DATA, "DESCRIBE")],
        note="subscribes to acl-data")
    add("ConsumerGroupDescribe", "ConsumerGroupDescribe",
        lambda x: {"group_ids": [sub("{c}-g", x.c), sub("{c}-g2", x.c)], "include_authorized_operations": True},
        needs=[("GROUP", "{c}-g", "DESCRIBE"), ("GROUP", "{c}-g2", "DESCRIBE"), ("TOPIC", DATA, "DESCRIBE")],
        setup=cg_join, note="{c}-g has one member (admin's) subscribed to acl-data; {c}-g2 does not exist")
    add("ShareGroupHeartbeat", "ShareGroupHeartbeat",
        lambda x: {"group_id": sub("{c}-g", x.c), "member_id": member_uuid(x.c), "member_epoch": 0,
                   "rack_id": None, "subscribed_topic_names": [DATA]},
        needs=[("GROUP", "{c}-g", "READ"), ("TOPIC", DATA, "DESCRIBE")],
        note="a share group member subscribing to acl-data")
    add("ShareGroupDescribe", "ShareGroupDescribe",
        lambda x: {"group_ids": [sub("{c}-g", x.c), sub("{c}-g2", x.c)], "include_authorized_operations": True},
        needs=[("GROUP", "{c}-g", "DESCRIBE"), ("GROUP", "{c}-g2", "DESCRIBE"), ("TOPIC", DATA, "DESCRIBE")],
        setup=sg_join, note="{c}-g is a share group with one member (admin's) subscribed to acl-data; "
                            "{c}-g2 does not exist")
    add("DescribeShareGroupOffsets", "DescribeShareGroupOffsets",
        lambda x: {"groups": [{"group_id": sub("{c}-g", x.c), "topics": [
            {"topic_name": DATA, "partitions": [0]}, {"topic_name": OTHER, "partitions": [0]}]},
            {"group_id": sub("{c}-g", x.c), "topics": None}, {"group_id": sub("{c}-g2", x.c), "topics": None}]},
        needs=[("GROUP", "{c}-g", "DESCRIBE"), ("GROUP", "{c}-g2", "DESCRIBE"), ("TOPIC", DATA, "DESCRIBE"),
               ("TOPIC", OTHER, "DESCRIBE")],
        setup=sg_offsets, note="{c}-g has share state on acl-data and acl-other partition 0 (named, then "
                               "null topics); {c}-g2 does not exist")
    add("AlterShareGroupOffsets", "AlterShareGroupOffsets",
        lambda x: {"group_id": sub("{c}-g", x.c), "topics": [
            {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]} for t in (DATA, OTHER)]},
        needs=[("GROUP", "{c}-g", "READ"), ("TOPIC", DATA, "READ"), ("TOPIC", OTHER, "READ")],
        note="creates share group {c}-g with state on acl-data and acl-other partition 0")
    add("DeleteShareGroupOffsets", "DeleteShareGroupOffsets",
        lambda x: {"group_id": sub("{c}-g", x.c), "topics": [{"topic_name": DATA}, {"topic_name": OTHER}]},
        needs=[("GROUP", "{c}-g", "DELETE"), ("TOPIC", DATA, "READ"), ("TOPIC", OTHER, "READ")],
        setup=sg_offsets, note="{c}-g has share state on acl-data and acl-other partition 0")
    add("DescribeGroups", "DescribeGroups",
        lambda x: {"groups": [sub("{c}-g", x.c), sub("{c}-g2", x.c)], "include_authorized_operations": True},
        needs=[("GROUP", "{c}-g", "DESCRIBE"), ("GROUP", "{c}-g2", "DESCRIBE")],
        setup=lambda x: commit(x, "{c}-g", [DATA]), note="{c}-g has offsets (Empty), {c}-g2 does not exist")
    add("ListGroups.group_acl", "ListGroups", lambda x: {"states_filter": [], "types_filter": []},
        needs=[("GROUP", "{c}-lg-g", "DESCRIBE")], setup=lambda x: commit(x, "{c}-lg-g", [DATA]),
        note="compared: the groups named *-lg-g (those the ListGroups cells create)")
    add("ListGroups.cluster_acl", "ListGroups", lambda x: {"states_filter": [], "types_filter": []},
        needs=[("CLUSTER", CLUSTER, "DESCRIBE")], setup=lambda x: commit(x, "{c}-lg-g", [DATA]),
        note="compared: the groups named *-lg-g (those the ListGroups cells create)")
    add("DeleteGroups", "DeleteGroups",
        lambda x: {"groups_names": [sub("{c}-g", x.c), sub("{c}-g2", x.c)]},
        needs=[("GROUP", "{c}-g", "DELETE"), ("GROUP", "{c}-g2", "DELETE")],
        setup=lambda x: commit(x, "{c}-g", [DATA]))
    add("OffsetDelete", "OffsetDelete",
        lambda x: {"group_id": sub("{c}-g", x.c),
                   "topics": [{"name": t, "partitions": [{"partition_index": 0}]} for t in (DATA, OTHER)]},
        needs=[("GROUP", "{c}-g", "DELETE"), ("TOPIC", DATA, "READ")],
        setup=lambda x: commit(x, "{c}-g", [DATA, OTHER]))

    # -- transactions --
    add("InitProducerId.idempotent", "InitProducerId",
        lambda x: {"transactional_id": None, "transaction_timeout_ms": TXN_TIMEOUT_MS,
                   "producer_id": -1, "producer_epoch": -1},
        needs=[("CLUSTER", CLUSTER, "IDEMPOTENT_WRITE")])
    add("InitProducerId.idempotent_by_topic_write", "InitProducerId",
        lambda x: {"transactional_id": None, "transaction_timeout_ms": TXN_TIMEOUT_MS,
                   "producer_id": -1, "producer_epoch": -1},
        needs=[("TOPIC", "{c}-t", "WRITE")],
        note="WRITE on any topic stands in for IDEMPOTENT_WRITE (KIP-679); no such topic needed")
    add("InitProducerId.transactional", "InitProducerId",
        lambda x: {"transactional_id": sub("{c}-x", x.c), "transaction_timeout_ms": TXN_TIMEOUT_MS,
                   "producer_id": -1, "producer_epoch": -1},
        needs=[("TXN", "{c}-x", "WRITE")])
    add("AddPartitionsToTxn.client_v3", "AddPartitionsToTxn",
        lambda x: {"v3_and_below_transactional_id": sub("{c}-x", x.c), "v3_and_below_producer_id": x.vals["pid"],
                   "v3_and_below_producer_epoch": x.vals["epoch"],
                   "v3_and_below_topics": [{"name": TXN_T, "partitions": [0]}, {"name": TXN_T2, "partitions": [0]}]},
        needs=[("TXN", "{c}-x", "WRITE"), ("TOPIC", TXN_T, "WRITE")], setup=init_txn, version=3,
        note="the version producers send; acl-txn2 has no literal ACL")
    add("AddPartitionsToTxn.broker", "AddPartitionsToTxn",
        lambda x: {"transactions": [{"transactional_id": sub("{c}-x", x.c), "producer_id": x.vals["pid"],
                                     "producer_epoch": x.vals["epoch"], "verify_only": False,
                                     "topics": [{"name": TXN_T, "partitions": [0]}]}]},
        needs=[("CLUSTER", CLUSTER, "CLUSTER_ACTION")], setup=init_txn,
        note="v4 and later are broker-to-broker (CLUSTER_ACTION)")
    add("AddOffsetsToTxn", "AddOffsetsToTxn",
        lambda x: {"transactional_id": sub("{c}-x", x.c), "producer_id": x.vals["pid"],
                   "producer_epoch": x.vals["epoch"], "group_id": sub("{c}-g", x.c)},
        needs=[("TXN", "{c}-x", "WRITE"), ("GROUP", "{c}-g", "READ")], setup=init_txn)
    add("TxnOffsetCommit", "TxnOffsetCommit",
        lambda x: {"transactional_id": sub("{c}-x", x.c), "group_id": sub("{c}-g", x.c),
                   "producer_id": x.vals["pid"], "producer_epoch": x.vals["epoch"], "generation_id": -1,
                   "member_id": "", "group_instance_id": None,
                   "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                          "committed_leader_epoch": -1,
                                                          "committed_metadata": ""}]} for t in (DATA, OTHER)]},
        needs=[("TXN", "{c}-x", "WRITE"), ("GROUP", "{c}-g", "READ"), ("TOPIC", DATA, "READ")],
        setup=lambda x: (init_txn(x), x.admin("AddOffsetsToTxn", {
            "transactional_id": sub("{c}-x", x.c), "producer_id": x.vals["pid"],
            "producer_epoch": x.vals["epoch"], "group_id": sub("{c}-g", x.c)})))
    add("EndTxn", "EndTxn",
        lambda x: {"transactional_id": sub("{c}-x", x.c), "producer_id": x.vals["pid"],
                   "producer_epoch": x.vals["epoch"], "committed": False},
        needs=[("TXN", "{c}-x", "WRITE")], setup=lambda x: (init_txn(x), add_partitions(x, [TXN_T])),
        note="aborts an ongoing transaction admin started")
    add("WriteTxnMarkers", "WriteTxnMarkers",
        lambda x: {"markers": [{"producer_id": 987654321, "producer_epoch": 0, "transaction_result": False,
                                "topics": [{"name": TXN_T, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
        needs=[("CLUSTER", CLUSTER, "CLUSTER_ACTION")], note="broker-to-broker")
    add("WriteTxnMarkers.alter", "WriteTxnMarkers",
        lambda x: {"markers": [{"producer_id": 987654321, "producer_epoch": 0, "transaction_result": False,
                                "topics": [{"name": TXN_T, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
        needs=[("CLUSTER", CLUSTER, "ALTER")], note="ALTER on the cluster stands in for CLUSTER_ACTION")
    add("DescribeTransactions", "DescribeTransactions",
        lambda x: {"transactional_ids": [sub("{c}-x", x.c), sub("{c}-x2", x.c)]},
        needs=[("TXN", "{c}-x", "DESCRIBE"), ("TXN", "{c}-x2", "DESCRIBE"), ("TOPIC", TXN_T, "DESCRIBE")],
        setup=lambda x: (init_txn(x), add_partitions(x, [TXN_T])),
        note="{c}-x is ongoing with acl-txn; {c}-x2 does not exist")
    add("ListTransactions", "ListTransactions",
        lambda x: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                   "transactional_id_pattern": None},
        needs=[("TXN", "{c}-lt-x", "DESCRIBE")], setup=lambda x: init_txn(x, "{c}-lt-x"),
        note="compared: the transactional ids named *-lt-x (those the ListTransactions cells create)")

    # -- topics and configs --
    def create(name):
        return lambda x: {"topics": [{"name": sub(name, x.c), "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}],
                          "timeout_ms": 10000, "validate_only": False}
    created = settle_topic("{c}-new", lambda a: True if any(t.get("error_code") == 0 for t in a.get("topics") or [])
                           else None)
    add("CreateTopics.topic_acl", "CreateTopics", create("{c}-new"), needs=[("TOPIC", "{c}-new", "CREATE")],
        settle=created)
    add("CreateTopics.cluster_acl", "CreateTopics", create("{c}-new"), needs=[("CLUSTER", CLUSTER, "CREATE")],
        settle=created)
    add("CreateTopics.describe_configs", "CreateTopics", create("{c}-new"),
        needs=[("TOPIC", "{c}-new", "CREATE"), ("TOPIC", "{c}-new", "DESCRIBE_CONFIGS")], settle=created,
        note="the new topic's configs are answered only with DESCRIBE_CONFIGS")
    add("DeleteTopics", "DeleteTopics",
        lambda x: {"topics": [{"name": sub("{c}-t", x.c), "topic_id": kproto.ZERO_UUID},
                              {"name": sub("{c}-missing", x.c), "topic_id": kproto.ZERO_UUID}],
                   "timeout_ms": 10000},
        needs=[("TOPIC", "{c}-t", "DELETE"), ("TOPIC", "{c}-missing", "DELETE")], cell_topics=["{c}-t"],
        settle=settle_topic("{c}-t", deleted))
    add("DeleteTopics.cluster_acl", "DeleteTopics",
        lambda x: {"topics": [{"name": sub("{c}-t", x.c), "topic_id": kproto.ZERO_UUID},
                              {"name": sub("{c}-missing", x.c), "topic_id": kproto.ZERO_UUID}],
                   "timeout_ms": 10000},
        needs=[("CLUSTER", CLUSTER, "DELETE")], cell_topics=["{c}-t"], settle=settle_topic("{c}-t", deleted),
        note="DELETE on the cluster stands in for DELETE on every topic")
    add("DeleteTopics.by_id", "DeleteTopics",
        lambda x: {"topics": [{"name": None, "topic_id": x.tid(sub("{c}-t", x.c))}], "timeout_ms": 10000},
        needs=[("TOPIC", "{c}-t", "DESCRIBE"), ("TOPIC", "{c}-t", "DELETE")], cell_topics=["{c}-t"],
        settle=settle_topic("{c}-t", deleted))
    add("CreatePartitions", "CreatePartitions",
        lambda x: {"topics": [{"name": sub("{c}-t", x.c), "count": 2, "assignments": None}], "timeout_ms": 10000,
                   "validate_only": True},
        needs=[("TOPIC", "{c}-t", "ALTER")], cell_topics=["{c}-t"], note="validate_only")
    add("DeleteRecords", "DeleteRecords",
        lambda x: {"topics": [{"name": sub("{c}-t", x.c), "partitions": [{"partition_index": 0, "offset": 1}]}],
                   "timeout_ms": 5000},
        needs=[("TOPIC", "{c}-t", "DELETE")], cell_topics=["{c}-t"])
    add("DescribeConfigs.topic", "DescribeConfigs",
        lambda x: {"resources": [{"resource_type": 2, "resource_name": DATA, "configuration_keys": CONFIG_KEYS}],
                   "include_synonyms": False, "include_documentation": False},
        needs=[("TOPIC", DATA, "DESCRIBE_CONFIGS")])
    add("DescribeConfigs.broker", "DescribeConfigs",
        lambda x: {"resources": [{"resource_type": 4, "resource_name": "0",
                                  "configuration_keys": BROKER_CONFIG_KEYS}],
                   "include_synonyms": False, "include_documentation": False},
        needs=[("CLUSTER", CLUSTER, "DESCRIBE_CONFIGS")])
    add("AlterConfigs.topic", "AlterConfigs",
        lambda x: {"resources": [{"resource_type": 2, "resource_name": DATA,
                                  "configs": [{"name": "retention.ms", "value": "86400000"}]}],
                   "validate_only": True},
        needs=[("TOPIC", DATA, "ALTER_CONFIGS")], note="validate_only")
    add("AlterConfigs.broker", "AlterConfigs",
        lambda x: {"resources": [{"resource_type": 4, "resource_name": "0",
                                  "configs": [{"name": "message.max.bytes", "value": "1048588"}]}],
                   "validate_only": True},
        needs=[("CLUSTER", CLUSTER, "ALTER_CONFIGS")], note="validate_only")
    add("IncrementalAlterConfigs.topic", "IncrementalAlterConfigs",
        lambda x: {"resources": [{"resource_type": 2, "resource_name": DATA,
                                  "configs": [{"name": "retention.ms", "config_operation": 0,
                                               "value": "86400000"}]}], "validate_only": True},
        needs=[("TOPIC", DATA, "ALTER_CONFIGS")], note="validate_only")
    add("IncrementalAlterConfigs.broker", "IncrementalAlterConfigs",
        lambda x: {"resources": [{"resource_type": 4, "resource_name": "0",
                                  "configs": [{"name": "message.max.bytes", "config_operation": 0,
                                               "value": "1048588"}]}], "validate_only": True},
        needs=[("CLUSTER", CLUSTER, "ALTER_CONFIGS")], note="validate_only")
    add("ListConfigResources", "ListConfigResources", lambda x: {"resource_types": [16]},
        needs=[("CLUSTER", CLUSTER, "DESCRIBE_CONFIGS")], note="client-metrics resources (there are none)")

    # -- cluster --
    add("DescribeCluster", "DescribeCluster",
        lambda x: {"include_cluster_authorized_operations": True, "endpoint_type": 1,
                   "include_fenced_brokers": False},
        needs=[("CLUSTER", CLUSTER, "DESCRIBE")], note="with cluster_authorized_operations")
    add("DescribeLogDirs", "DescribeLogDirs", lambda x: {"topics": [{"topic": DATA, "partitions": [0]}]},
        needs=[("CLUSTER", CLUSTER, "DESCRIBE")])
    add("AlterReplicaLogDirs", "AlterReplicaLogDirs",
        lambda x: {"dirs": [{"path": "/nonexistent-acl-matrix", "topics": [{"name": DATA, "partitions": [0]}]}]},
        needs=[("CLUSTER", CLUSTER, "ALTER")])
    add("ElectLeaders", "ElectLeaders",
        lambda x: {"election_type": 0, "topic_partitions": [{"topic": DATA, "partitions": [0]}],
                   "timeout_ms": 5000},
        needs=[("CLUSTER", CLUSTER, "ALTER")])
    add("AlterPartitionReassignments", "AlterPartitionReassignments",
        lambda x: {"timeout_ms": 5000, "allow_replication_factor_change": True,
                   "topics": [{"name": DATA, "partitions": [{"partition_index": 0, "replicas": None}]}]},
        needs=[("CLUSTER", CLUSTER, "ALTER")], note="cancels a reassignment there is none of")
    add("ListPartitionReassignments", "ListPartitionReassignments",
        lambda x: {"timeout_ms": 5000, "topics": None}, needs=[("CLUSTER", CLUSTER, "DESCRIBE")])
    add("DescribeQuorum", "DescribeQuorum",
        lambda x: {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        needs=[("CLUSTER", CLUSTER, "DESCRIBE")])
    add("DescribeAcls", "DescribeAcls",
        lambda x: {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                   "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
        needs=[("CLUSTER", CLUSTER, "DESCRIBE")], note="every ACL: the cell's own")
    add("CreateAcls", "CreateAcls",
        lambda x: {"creations": [{"resource_type": 2, "resource_name": sub("{c}-acl", x.c),
                                  "resource_pattern_type": 3, "principal": "User:carol", "host": "*",
                                  "operation": 3, "permission_type": 3}]},
        needs=[("CLUSTER", CLUSTER, "ALTER")])
    add("DeleteAcls", "DeleteAcls",
        lambda x: {"filters": [{"resource_type_filter": 2, "resource_name_filter": DUMMY, "pattern_type_filter": 3,
                                "principal_filter": "User:carol", "host_filter": None, "operation": 1,
                                "permission_type": 1}]},
        needs=[("CLUSTER", CLUSTER, "ALTER")], extra_acls=[acl("TOPIC", DUMMY, "READ", principal="User:carol")],
        note="deletes carol's READ on acl-dummy, present in every scenario")
    add("DescribeUserScramCredentials", "DescribeUserScramCredentials",
        lambda x: {"users": [{"name": "nobody-scram"}]}, needs=[("CLUSTER", CLUSTER, "DESCRIBE")])
    add("AlterUserScramCredentials", "AlterUserScramCredentials",
        lambda x: {"deletions": [], "upsertions": [{"name": sub("{c}-user", x.c), "mechanism": 1,
                                                    "iterations": 8192, "salt": b"acl-matrix-salt",
                                                    "salted_password": SALTED}]},
        needs=[("CLUSTER", CLUSTER, "ALTER")])
    add("DescribeClientQuotas", "DescribeClientQuotas",
        lambda x: {"components": [{"entity_type": "user", "match_type": 0, "match": "carol"}], "strict": False},
        needs=[("CLUSTER", CLUSTER, "DESCRIBE_CONFIGS")])
    add("AlterClientQuotas", "AlterClientQuotas",
        lambda x: {"entries": [{"entity": [{"entity_type": "user", "entity_name": "carol"}],
                                "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}],
                   "validate_only": True},
        needs=[("CLUSTER", CLUSTER, "ALTER_CONFIGS")], note="validate_only")
    add("GetTelemetrySubscriptions", "GetTelemetrySubscriptions",
        lambda x: {"client_instance_id": kproto.ZERO_UUID}, needs=[], note="needs no ACL")
    return out


def cell_topics(selected_cases, scenarios):
    """Every per-cell topic of these cases under these scenarios."""
    out = []
    for s in scenarios:
        for case in selected_cases:
            if scenario_applies(s, case):
                c = cell_prefix(s, case)
                out += [sub(t, c) for t in case.cell_topics]
    return out


def cell_prefix(scenario, case):
    return f"{SCENARIO_WORD[scenario]}-{case.word()}"


def resolve_needs(case, c):
    return [(rt, sub(name, c), op) for rt, name, op in case.needs]


def acls_for(scenario, case, c):
    """The ACLs present while cell (scenario, case) runs: the scenario's for the case's needs,
    plus the case's extra ACLs. Sorted and unique."""
    built = SCENARIOS[scenario][1](resolve_needs(case, c)) if scenario != "super" else []
    return sorted(set(built + case.extra_acls))
