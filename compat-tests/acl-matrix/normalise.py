"""normalise: what may differ between two brokers' answers to the same cell, and nothing else.

Two steps, each a table:

1. identities(), when a cell is recorded (it needs the broker's own topic ids): topic ids
   become `<id of NAME>` (the topic that id names on that broker; an id the broker never
   named a topic with, `<unknown topic id #n>`), producer ids and group member ids become
   labels in order of appearance within the cell (-1 and "" kept), timestamps of records the
   matrix wrote become `base+N` (relative to the run's base timestamp, records.BASE_TS, which
   follows the day of the run), records fields become the list of their records (offset,
   key, value, headers, producer fields, control markers: how a broker cuts them into batches
   is not compared), other bytes become hex. Listings of the whole broker (all topics,
   groups, transactions) keep the entries that do not depend on which cells ran before
   (LISTINGS: the shared and internal topics; a cell's own group or transactional id and
   one admin made), so that any selection of cells (--quick, --only) compares with the
   saved full run.
2. NORMALISE and SORTED, when two files are compared (compare.py): fields each broker fills
   from its own clock, disk, port or words, and lists Kafka builds from hash maps. Each row
   says why. Everything else must be equal: every error code, which topics, partitions,
   groups, transactions and ACLs appear, offsets, records, authorized-operation bit sets,
   whether a request was answered or the connection closed.
"""
import copy
import re

import kproto
import records

BASE_WINDOW_MS = 4 * 86_400_000

# ---- 1. identities ------------------------------------------------------------------------


class _Labels:
    def __init__(self):
        self.seen = {}

    def get(self, kind, value):
        key = (kind, value)
        if key not in self.seen:
            n = sum(1 for k in self.seen if k[0] == kind) + 1
            self.seen[key] = f"<{kind}#{n}>"
        return self.seen[key]


def flatten_records(data):
    """A records field -> its records, batch boundaries dropped."""
    if data is None:
        return None
    out = []
    for b in records.decode_batches(bytes(data)):
        if "records" not in b:
            out.append({k: v for k, v in b.items() if k != "base_offset"} | {"undecodable_batch": True})
            continue
        for r in b["records"]:
            rec = {"offset": b["base_offset"] + r["offset_delta"],
                   "timestamp": b["base_timestamp"] + r["timestamp_delta"] if b["timestamp_type"] == "create"
                   else "<log append time>",
                   "producer_id": b["producer_id"], "producer_epoch": b["producer_epoch"],
                   "sequence": b["base_sequence"] + r["offset_delta"] if b["base_sequence"] >= 0 else -1,
                   "transactional": b["transactional"], "control": b["control"], "crc_ok": b["crc_ok"]}
            for k in ("key", "value", "control_key", "control_value", "headers"):
                if k in r:
                    rec[k] = r[k]
            out.append(rec)
    return out


def identities(rec, topic_ids):
    """A recorded cell with the broker's own identities replaced and whole-broker listings cut
    down (see the module docstring). Labels are given in order of appearance once the lists
    whose order Kafka leaves to its hash maps are sorted (SORTED), so that the same entries get
    the same labels on both brokers."""
    rec = trim_listing(copy.deepcopy(rec))
    names = {v: k for k, v in topic_ids.items()}
    labels = _Labels()

    def plain(x, key=""):  # topic ids, bytes, records, timestamps
        if isinstance(x, dict):
            return {k: plain(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [plain(v, key) for v in x]
        if isinstance(x, (bytes, bytearray)):
            if key == "records":
                return plain(flatten_records(x), "record")
            return "hex:" + bytes(x).hex()
        if key.endswith("topic_id") and isinstance(x, str):
            if x == kproto.ZERO_UUID:
                return x
            return f"<id of {names[x]}>" if x in names else labels.get("unknown topic id", x)
        if "timestamp" in key and isinstance(x, int) and not isinstance(x, bool) \
                and abs(x - records.BASE_TS) < BASE_WINDOW_MS:
            return f"base+{x - records.BASE_TS}"
        return x

    def labelled(x, key=""):  # producer and member ids
        if isinstance(x, dict):
            return {k: labelled(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [labelled(v, key) for v in x]
        if key.endswith("producer_id") and isinstance(x, int) and not isinstance(x, bool) and x >= 0:
            return labels.get("producer", x)
        if key in ("member_id", "leader") and isinstance(x, str) and x:
            return labels.get("member", x)
        return x

    out = plain(rec)
    sort_lists(out)
    return labelled(out)


# Listings of the whole broker keep only the entries the matrix compares (the rest is counted or
# dropped): (case, list field, keep an entry when, count the others, reason).
LISTINGS = [
    ("Metadata.all|DescribeTopicPartitions.all", "topics",
     lambda e, c: str(e.get("name", "")).startswith(("acl-", "__"))
     and e.get("name") != "__share_group_state",
     "the shared topics (acl-*, one with ALLOW, one with no ACL, ...) and the internal ones (__*) "
     "show the listing's rule; the other cells' topics depend on which cells ran before (each "
     "cell's own answers say what became of them). Not __share_group_state: Kafka's share "
     "coordinator creates it (50 partitions) once a share group is used, es keeps share-group "
     "state in its own files beside each partition (docs/storage.md, \"Share-group state\") and "
     "has no such topic"),
    ("ListGroups.*", "groups",
     lambda e, c: str(e.get("group_id", "")) in (c + "-lg-g", "acl-lg-g"),
     "the cell's own group and one group admin made (acl-lg-g, with no ACL); the other cells' groups "
     "depend on which cells ran before and come and go with group protocols (a JoinGroup's "
     "pending member, a consumer's session)"),
    ("ListTransactions", "transaction_states",
     lambda e, c: str(e.get("transactional_id", "")) in (c + "-lt-x", "acl-lt-x"),
     "the cell's own transactional id and one admin made (acl-lt-x, with no ACL), both Empty; "
     "the other cells' transactions depend on which cells ran before and time out and "
     "complete on each broker's clock"),
]


def trim_listing(rec):
    """A recorded cell with a whole-broker listing cut down as LISTINGS says."""
    answer = rec.get("answer")
    for case_rx, field, keep, _ in LISTINGS:
        if not re.fullmatch(case_rx, rec.get("case", "")) or not isinstance(answer, dict):
            continue
        if isinstance(answer.get(field), list):
            answer[field] = [e for e in answer[field] if keep(e, rec.get("prefix", ""))]
    return rec


# ---- 2. what two brokers may answer differently -------------------------------------------

# (api regex, field path regex, action, reason). A path is the dotted field names from the
# cell record (answer.topics[].partitions[].error_code), [] standing for any list index.
NORMALISE = [
    (".*", r"seconds|detail", "drop", "the harness's own timing and exception text"),
    (".*", r"answer\.(.*\.)?throttle_time_ms", "drop", "throttle times follow quotas and load"),
    (".*", r"answer\.(.*\.)?cluster_id", "mask", "each broker formats its own cluster id"),
    (".*", r"answer\.(.*\.)?port", "mask", "each broker listens on its own free port"),
    (".*", r"answer\.(.*\.)?error_message", "drop",
     "free text in each broker's own words (its error code is compared)"),
    ("DescribeLogDirs", r"answer\.results\[\]\.log_dir", "mask", "each broker's own data directory"),
    ("DescribeLogDirs", r"answer\.results\[\]\.(total_bytes|usable_bytes)", "mask_nonneg",
     "the file system's size and free space (-1, unknown, kept)"),
    ("DescribeLogDirs", r"answer\.results\[\]\.topics\[\]\.partitions\[\]\.(partition_size|offset_lag)",
     "mask_nonneg", "bytes on disk follow each broker's disk format (es's is docs/storage.md)"),
    ("DescribeTransactions", r"answer\.transaction_states\[\]\.transaction_start_time_ms", "mask_nonneg",
     "the broker's clock when the transaction started (-1 kept)"),
    ("DescribeQuorum", r"answer\.(nodes|topics\[\]\.partitions\[\]\.(leader_epoch|high_watermark|current_voters"
     r"|observers))", "drop",
     "the quorums differ by design (es's openraft log and Raft listener against KRaft's "
     "CONTROLLER listener: compat-tests/diff's ALLOWED rows); error codes and leader ids compared"),
    ("ConsumerGroupDescribe|DescribeGroups|ShareGroupDescribe", r"answer\.groups\[\]\.members\[\]\.client_host",
     "mask", "the client's address as each broker saw it (source port, slash)"),
    ("CreateTopics", r"answer\.topics\[\]\.configs", "flush_configs",
     "flush.messages and flush.ms: es fsyncs before it acknowledges, so its defaults come from "
     "--flush-every-records and --flush-interval, Kafka's are Long.MAX_VALUE; and preallocate's "
     "value: es's default is true (it zero-fills a busy active segment ahead so that the fsync "
     "before each acknowledgement writes records only, docs/storage.md), Kafka's false "
     "(compat-tests/diff ALLOWED for both); their names and every other config are compared"),
    ("Metadata", r"answer\.topics", "auto_created",
     "a topic Metadata auto-created (the cell's settle step saw it exist afterwards): es creates it "
     "before it answers and describes it, Kafka forwards the creation to its controller and "
     "answers UNKNOWN_TOPIC_OR_PARTITION meanwhile (compat-tests/diff ALLOWED); whether it was "
     "created is compared (settle), and every topic a refused creation names keeps its answer"),
]

# (api regex, list path, sort key): lists whose order is not part of the answer (Kafka builds
# them from hash maps or merges authorized and unauthorized parts in map order).
SORTED = [
    ("Produce", "answer.responses", "name topic_id"),
    ("Fetch", "answer.responses", "topic_id topic"),
    ("ListOffsets", "answer.topics", "name"),
    ("OffsetForLeaderEpoch", "answer.topics", "topic"),
    ("DescribeProducers", "answer.topics", "name"),
    ("Metadata|DescribeTopicPartitions", "answer.topics", "name"),
    ("OffsetCommit|TxnOffsetCommit|OffsetDelete", "answer.topics", "name"),
    ("OffsetFetch", "answer.groups[].topics", "name"),
    ("FindCoordinator", "answer.coordinators", "key"),
    ("DescribeGroups|ConsumerGroupDescribe", "answer.groups", "group_id"),
    ("ListGroups", "answer.groups", "group_id"),
    ("DeleteGroups", "answer.results", "group_id"),
    ("ListTransactions", "answer.transaction_states", "transactional_id"),
    ("DescribeTransactions", "answer.transaction_states", "transactional_id"),
    ("DescribeTransactions", "answer.transaction_states[].topics", "topic"),
    ("AddPartitionsToTxn", "answer.results_by_topic_v3_and_below", "name"),
    ("AddPartitionsToTxn", "answer.results_by_transaction[].topic_results", "name"),
    ("DeleteTopics", "answer.responses", "name topic_id"),
    ("CreateTopics", "answer.topics[].configs", "name"),
    ("DescribeConfigs", "answer.results[].configs", "name"),
    ("ElectLeaders", "answer.replica_election_results", "topic"),
    ("DescribeLogDirs", "answer.results[].topics", "name"),
    ("DescribeAcls", "answer.resources", "resource_type resource_name pattern_type"),
    ("DescribeAcls", "answer.resources[].acls", "principal host operation permission_type"),
    ("DeleteAcls", "answer.filter_results[].matching_acls",
     "resource_type resource_name pattern_type principal host operation permission_type"),
    ("ConsumerGroupDescribe", "answer.groups[].members", "member_id"),
    ("DescribeShareGroupOffsets", "answer.groups[].topics", "topic_name"),
    ("AlterShareGroupOffsets|DeleteShareGroupOffsets", "answer.responses", "topic_name"),
]

_compiled = [(re.compile(a), re.compile(p), act, why) for a, p, act, why in NORMALISE]


def _sort(x, parts, keys):
    if not parts or not isinstance(x, dict):
        return
    head, rest = parts[0], parts[1:]
    name = head[:-2] if head.endswith("[]") else head
    v = x.get(name)
    if not rest:
        if isinstance(v, list):
            v.sort(key=lambda e: tuple(str(e.get(k)) for k in keys) if isinstance(e, dict) else (str(e),))
        return
    for e in (v if isinstance(v, list) else [v]):
        _sort(e, rest, keys)


def _apply(act, v):
    if act == "mask":
        return None if v is None else "<masked>"
    if act == "mask_nonneg":
        return v if not isinstance(v, int) or v < 0 else "<masked>"
    if act == "flush_configs":
        if not isinstance(v, list):
            return v
        return [dict(c, value="<flush>", config_source="<flush>") if c.get("name") in ("flush.messages", "flush.ms")
                else dict(c, value="<preallocate>") if c.get("name") == "preallocate"
                else c for c in v]
    raise ValueError(act)


def _auto_created(cell):
    """Metadata topics entries of a topic the cell's settle step found created."""
    after = (cell.get("settle") or {}).get("after") or {}
    name = (cell.get("settle") or {}).get("topic")
    if not after.get("exists") or not isinstance((cell.get("answer") or {}).get("topics"), list):
        return cell
    cell["answer"]["topics"] = [{"name": name, "auto_created": True} if t.get("name") == name else t
                                for t in cell["answer"]["topics"]]
    return cell


def _walk(x, path, rules):
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            p = f"{path}.{k}" if path else k
            act = next((a for rx, a in rules if rx.fullmatch(p)), None)
            if act == "drop":
                continue
            if act == "keep" or act == "auto_created":
                out[k] = v
            elif act:
                out[k] = _apply(act, v)
            else:
                out[k] = _walk(v, p, rules)
        return out
    if isinstance(x, list):
        return [_walk(v, path + "[]", rules) for v in x]
    return x


def sort_lists(cell):
    api = cell.get("api", "")
    for a, path, keys in SORTED:
        if re.fullmatch(a, api):
            _sort(cell, path.split("."), keys.split())


def for_compare(cell):
    """A recorded cell as it is compared."""
    api = cell.get("api", "")
    out = copy.deepcopy(cell)
    if any(a.fullmatch(api) and act == "auto_created" for a, _, act, _ in _compiled):
        out = _auto_created(out)
    rules = [(p, act) for a, p, act, _ in _compiled if a.fullmatch(api)]
    out = _walk(out, "", rules)
    sort_lists(out)
    return out


def compare(a, b, path=""):
    """Field-by-field differences: [{path, es, kafka}] (a is the subject, b the reference)."""
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        return [{"path": path or ".", "subject": a, "reference": b}]
    if isinstance(a, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                out.append({"path": f"{path}.{k}", "subject": a.get(k, "<absent>"),
                            "reference": b.get(k, "<absent>")})
            else:
                out += compare(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list):
        out = []
        if len(a) != len(b):
            out.append({"path": f"{path}.length", "subject": len(a), "reference": len(b)})
        for i, (x, y) in enumerate(zip(a, b)):
            out += compare(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [{"path": path or ".", "subject": a, "reference": b}]
