"""runner: runs the ACL matrix against one broker and returns every cell's answer.

For one pass (one value of allow.everyone.if.no.acl.found) against one running broker:

1. prepare: as admin, create the shared topics and every cell's topics, wait until admin's
   Metadata shows them all led, write their records, wait until the group and transaction
   coordinators answer, learn the topic ids;
2. for each scenario and each case it applies to (a cell): admin's setup steps, then the
   cell's ACLs (all ACLs deleted, the cell's created, and admin's DescribeAcls polled until
   it lists exactly them: the broker's authorizer has them then), then the request as alice
   (as admin for `super`), then admin's settle steps;
3. the auth.* cases: authentication with a wrong password, an unknown user, an unsupported
   mechanism, and a request before authenticating.

Each cell is recorded with broker-specific identities already replaced (normalise.identities:
topic ids by the names of their topics on that broker, producer and member ids by labels in
order of appearance, record timestamps relative to the run's base timestamp), so that two
files, from two brokers and two days, can be compared (compare.py).
"""
import json
import os
import re
import time

import kclient
import kproto
import matrix
import normalise
from matrix import API, ADMIN_V

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, LEADER_NOT_AVAILABLE,
# NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION (a topic just created), REQUEST_TIMED_OUT,
# CONCURRENT_TRANSACTIONS: what admin's setup waits out.
ADMIN_RETRIABLE = {14, 15, 16, 5, 6, 3, 7, 51}
# What a cell's own request waits out, as a client would: a coordinator still loading, a
# transaction still completing. Everything else is the answer.
CELL_RETRIABLE = {14, 15, 51}
RETRY_FOR_S, RETRY_PAUSE_S = 15.0, 0.1
ACL_WAIT_S = 15.0
TOPIC_WAIT_S = 15.0
CREATE_CHUNK = 100
ES_VERSIONS_RS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates", "es-kafka",
                              "src", "versions.rs")
# APIs with no case on purpose: authentication itself and version negotiation (every
# connection uses them; the auth.* cases cover refusals). Other advertised APIs without a case
# are listed in the results' meta (advertised_without_case) and printed by compare.py.
NO_CASE = {"SaslHandshake", "SaslAuthenticate", "ApiVersions"}


def error_codes(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if k.endswith("error_code") and isinstance(v, int):
                yield v
            else:
                yield from error_codes(v)
    elif isinstance(x, list):
        for v in x:
            yield from error_codes(v)


def es_table_versions():
    """es's advertised (min, max) per api name, read from crates/es-kafka/src/versions.rs (the
    versions the reference run uses when es is not running)."""
    out = {}
    try:
        with open(ES_VERSIONS_RS) as f:
            text = f.read()
    except OSError:
        return out
    for name, lo, hi in re.findall(r"r\(ApiKey::(\w+),\s*(\d+),\s*(\d+)\)", text):
        out[name] = (int(lo), int(hi))
    return out


def acl_key(b):
    return tuple(b)


def acl_text(b):
    rt, name, pattern, principal, host, op, perm = b
    return f"{perm} {principal}@{host} {op} {rt}:{pattern}:{name}"


class Broker:
    """The connections to one broker, one per principal, and what the run learned of it."""

    def __init__(self, specs, addr, users):
        self.specs, self.addr, self.users = specs, addr, users
        self.conns = {}
        self.topic_ids = {}

    def conn(self, principal):
        if principal not in self.conns:
            self.conns[principal] = kclient.Conn(self.specs, self.addr, *self.users[principal],
                                                 client_id=f"acl-matrix-{principal.split(':')[1]}")
        return self.conns[principal]

    def request(self, principal, api, version, body, timeout=kclient.READ_TIMEOUT_S):
        return self.conn(principal).request(API[api] if isinstance(api, str) else api, version, body, timeout)

    def admin(self, api, body, version=None, retry=True):
        """admin's request, retried while it answers a retriable error (bounded)."""
        v = version if version is not None else ADMIN_V[api]
        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            answer = self.request(matrix.ADMIN, api, v, body)
            codes = set(error_codes(answer))
            if not retry or not codes & ADMIN_RETRIABLE or time.monotonic() > deadline:
                return answer
            time.sleep(RETRY_PAUSE_S)

    def close(self):
        for c in self.conns.values():
            c.close()

    # -- topics --

    def metadata(self, names):
        body = {"topics": None if names is None else [{"name": n, "topic_id": kproto.ZERO_UUID} for n in names],
                "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
        return self.admin("Metadata", body, retry=False)

    def learn_topic_ids(self, answer):
        for t in answer.get("topics") or []:
            if t.get("error_code") == 0 and t.get("name") and t.get("topic_id") not in (None, kproto.ZERO_UUID):
                self.topic_ids[t["name"]] = t["topic_id"]

    def topic_state(self, name):
        a = self.metadata([name])
        t = (a.get("topics") or [{}])[0]
        led = t.get("error_code") == 0 and t.get("partitions") and all(
            p.get("error_code") == 0 and p.get("leader_id", -1) >= 0 for p in t["partitions"])
        if t.get("error_code") == 0:
            self.learn_topic_ids(a)
        return {"exists": t.get("error_code") == 0, "led": bool(led),
                "partitions": len(t.get("partitions") or []), "error_code": t.get("error_code")}

    def wait_topic(self, name, expect):
        """expect True: until the topic exists and is led; False: until it is gone; None: no
        wait. Returns {exists, partitions} as admin's Metadata then says."""
        deadline = time.monotonic() + TOPIC_WAIT_S
        while True:
            st = self.topic_state(name)
            done = expect is None or (expect and st["led"]) or (expect is False and st["error_code"] == 3)
            if done or time.monotonic() > deadline:
                return {"exists": st["exists"], "partitions": st["partitions"]}
            time.sleep(RETRY_PAUSE_S)

    def create_topics(self, names):
        for i in range(0, len(names), CREATE_CHUNK):
            chunk = names[i:i + CREATE_CHUNK]
            a = self.admin("CreateTopics", {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1,
                                                       "assignments": [], "configs": []} for n in chunk],
                                           "timeout_ms": 30000, "validate_only": False})
            bad = [t for t in a.get("topics") or [] if t.get("error_code") not in (0, 36)]
            if bad:
                raise RuntimeError(f"admin CreateTopics failed: {bad[:3]}")
        deadline = time.monotonic() + 60
        while True:
            a = self.metadata(names)
            missing = [t["name"] for t in a.get("topics") or [] if t.get("error_code") != 0
                       or not t.get("partitions") or any(p.get("leader_id", -1) < 0 for p in t["partitions"])]
            if not missing:
                self.learn_topic_ids(a)
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topics not led after 60 s: {missing[:5]}")
            time.sleep(0.2)

    def produce(self, topic, data):
        """One batch to partition 0 of topic as admin (Produce v12, by name, acks=-1), retried
        while the new partition is not led yet: a refused batch was not appended, so the retry
        cannot write it twice."""
        a = self.admin("Produce", {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                   "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": data}]}]})
        bad = [p for r in a.get("responses") or [] for p in r.get("partition_responses") or []
               if p.get("error_code") != 0]
        if bad:
            raise RuntimeError(f"admin Produce to {topic} failed: {bad}")

    # -- ACLs --

    def describe_acls(self):
        a = self.admin("DescribeAcls", {"resource_type_filter": 1, "resource_name_filter": None,
                                        "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                        "operation": 1, "permission_type": 1}, retry=False)
        if a.get("error_code") != 0:
            raise RuntimeError(f"admin DescribeAcls failed: {a}")
        out = set()
        for r in a.get("resources") or []:
            for e in r.get("acls") or []:
                out.add((matrix.RT_NAME.get(r["resource_type"], r["resource_type"]), r["resource_name"],
                         matrix.PATTERN_NAME.get(r["pattern_type"], r["pattern_type"]), e["principal"], e["host"],
                         matrix.OP_NAME.get(e["operation"], e["operation"]),
                         {2: "DENY", 3: "ALLOW"}.get(e["permission_type"], e["permission_type"])))
        return out

    def set_acls(self, bindings):
        """Makes bindings the broker's only ACLs. Returns {binding text: error code} for those
        CreateAcls refused (they are then not expected in the wait)."""
        refused = {}
        a = self.admin("DeleteAcls", {"filters": [{"resource_type_filter": 1, "resource_name_filter": None,
                                                   "pattern_type_filter": 1, "principal_filter": None,
                                                   "host_filter": None, "operation": 1, "permission_type": 1}]},
                       retry=False)
        if any(r.get("error_code") for r in a.get("filter_results") or []):
            raise RuntimeError(f"admin DeleteAcls failed: {a}")
        want = set()
        if bindings:
            creations = [{"resource_type": matrix.RT[rt], "resource_name": name,
                          "resource_pattern_type": matrix.PATTERN[pattern], "principal": principal, "host": host,
                          "operation": matrix.OP[op], "permission_type": matrix.PERM[perm]}
                         for rt, name, pattern, principal, host, op, perm in bindings]
            a = self.admin("CreateAcls", {"creations": creations}, retry=False)
            for b, r in zip(bindings, a.get("results") or []):
                if r.get("error_code"):
                    refused[acl_text(b)] = r["error_code"]
                else:
                    want.add(acl_key(b))
        deadline = time.monotonic() + ACL_WAIT_S
        while True:
            have = self.describe_acls()
            if have == want:
                return refused
            if time.monotonic() > deadline:
                raise RuntimeError(f"the broker's ACLs did not become the cell's within {ACL_WAIT_S}s: "
                                   f"want {sorted(want)}, have {sorted(have)}")
            time.sleep(0.02)


class Cell:
    """What a cell's body, setup and settle steps see: x.c (the cell prefix), x.tid(name),
    x.vals, x.admin(api, body), x.wait_topic(name, expect)."""

    def __init__(self, broker, c):
        self.broker, self.c = broker, c
        self.vals = {}
        self.steps = []

    def tid(self, name):
        return self.broker.topic_ids.get(name, kproto.ZERO_UUID)

    def admin(self, api, body, version=None):
        a = self.broker.admin(api, body, version)
        self.steps.append({"api": api, "error_codes": list(error_codes(a))})
        return a

    def wait_topic(self, name, expect):
        return self.broker.wait_topic(name, expect)


class Run:
    def __init__(self, specs, broker_name, addr, users, versions, scenarios, cases, pass_name, log=print):
        self.b = Broker(specs, addr, users)
        self.broker_name = broker_name
        self.specs, self.versions = specs, versions
        self.scenarios, self.cases, self.pass_name = scenarios, cases, pass_name
        self.log = log
        self.cells = {}
        self.current_acls = None  # unknown until the first set
        self.current_refused = {}  # of those, what CreateAcls refused

    def advertised(self):
        """{api name: (min, max)} from ApiVersions as an authenticated alice."""
        a = self.b.request(matrix.ALICE, "ApiVersions", 3, {"client_software_name": "acl-matrix",
                                                           "client_software_version": "1"})
        out = {}
        for k in a.get("api_keys") or []:
            req = self.specs.get((k["api_key"], "request"))
            name = req.name[:-len("Request")] if req else str(k["api_key"])
            out[name] = (k["min_version"], k["max_version"])
        return out

    def prepare(self):
        t0 = time.monotonic()
        topics = matrix.SHARED_TOPICS + matrix.cell_topics(self.cases, self.scenarios)
        self.b.create_topics(topics)
        idem = self.b.admin("InitProducerId", {"transactional_id": None, "transaction_timeout_ms": 60000,
                                               "producer_id": -1, "producer_epoch": -1})
        self.b.produce(matrix.DATA, matrix.batch(3, "data"))
        self.b.produce(matrix.OTHER, matrix.batch(2, "other"))
        self.b.produce(matrix.DATA, matrix.batch(2, "idem", producer_id=idem["producer_id"],
                                                 producer_epoch=idem["producer_epoch"], base_sequence=0))
        for t in topics[len(matrix.SHARED_TOPICS):]:
            self.b.produce(t, matrix.batch(2, "cell"))
        for key_type in (0, 1):  # the group and transaction coordinators, loaded
            a = self.b.admin("FindCoordinator", {"key": "", "key_type": key_type, "coordinator_keys": ["acl-probe"]})
            if set(error_codes(a)) - {0}:
                raise RuntimeError(f"admin FindCoordinator (key type {key_type}) failed: {a}")
        self.b.admin("InitProducerId", {"transactional_id": matrix.SHARED_TXN, "transaction_timeout_ms": 60000,
                                        "producer_id": -1, "producer_epoch": -1})
        commit_probe = self.b.admin("OffsetCommit", {
            "group_id": matrix.SHARED_GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": matrix.DATA, "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        if set(error_codes(commit_probe)) - {0}:
            raise RuntimeError(f"admin OffsetCommit failed: {commit_probe}")
        self.b.learn_topic_ids(self.b.metadata(None))
        self.b.set_acls([])
        self.current_acls = ()
        self.log(f"prepared {len(topics)} topics in {time.monotonic() - t0:.1f}s")

    def version_of(self, case):
        return case.version if case.version is not None else self.versions.get(case.api)

    def run_cell(self, scenario, case):
        c = matrix.cell_prefix(scenario, case)
        x = Cell(self.b, c)
        version = self.version_of(case)
        rec = {"pass": self.pass_name, "case": case.id, "scenario": scenario, "api": case.api, "version": version,
               "prefix": c, "principal": matrix.ADMIN if scenario == "super" else matrix.ALICE}
        t0 = time.monotonic()
        try:
            if case.setup:
                case.setup(x)
            rec["setup"] = x.steps
            bindings = tuple(matrix.acls_for(scenario, case, c))
            rec["acls"] = [acl_text(b) for b in bindings]
            if bindings != self.current_acls:
                self.current_refused = self.b.set_acls(list(bindings))
                self.current_acls = bindings
            if self.current_refused:
                rec["acls_refused"] = self.current_refused
            body = case.body(x)
            deadline = time.monotonic() + RETRY_FOR_S
            while True:
                try:
                    answer = self.b.request(rec["principal"], case.api_key, version, body)
                except kclient.Closed as e:
                    rec["status"] = "closed"
                    rec["detail"] = str(e)
                    answer = None
                    break
                if not set(error_codes(answer)) & CELL_RETRIABLE or time.monotonic() > deadline:
                    break
                time.sleep(RETRY_PAUSE_S)
            if answer is not None:
                rec["status"] = "answered"
                rec["answer"] = answer
                self.b.learn_topic_ids(answer)
                if case.settle:
                    rec["settle"] = case.settle(x, answer)
            if case.api in ("CreateAcls", "DeleteAcls"):
                self.current_acls = None  # alice may have changed them
        except (kclient.Closed, kclient.AuthFailed, kproto.DecodeError, RuntimeError, KeyError) as e:
            rec["status"] = "harness_error"
            rec["detail"] = f"{type(e).__name__}: {e}"
            self.current_acls = None
            self.b.close()
        rec["seconds"] = round(time.monotonic() - t0, 3)
        self.cells[f"{self.pass_name}|{case.id}|{scenario}"] = normalise.identities(rec, self.b.topic_ids)

    def run_auth_cases(self):
        admin_user, admin_pw = self.b.users[matrix.ADMIN]
        alice_user, _ = self.b.users[matrix.ALICE]
        outcomes = {
            "auth.wrong_password": kclient.try_authenticate(self.specs, self.b.addr, alice_user, "wrong-secret"),
            "auth.unknown_user": kclient.try_authenticate(self.specs, self.b.addr, "nobody", "nobody-secret"),
            "auth.empty_password": kclient.try_authenticate(self.specs, self.b.addr, alice_user, ""),
        }
        for name, out in outcomes.items():
            if out.get("answer"):
                out["answer"] = {k: v for k, v in out["answer"].items() if k in ("error_code", "auth_bytes")}
        outcomes["auth.unsupported_mechanism"] = self.raw_handshake("SCRAM-SHA-512")
        outcomes["auth.request_before_authentication"] = self.unauthenticated_request()
        for name, out in outcomes.items():
            self.cells[f"{self.pass_name}|{name}|-"] = normalise.identities(
                {"pass": self.pass_name, "case": name, "scenario": "-", "api": "SaslAuthenticate", **out},
                self.b.topic_ids)

    def raw_handshake(self, mechanism):
        c = kclient.Conn(self.specs, self.b.addr, "", "")
        try:
            c.sock = __import__("socket").create_connection(c.addr, timeout=kclient.READ_TIMEOUT_S)
            a = c._exchange(kclient.SASL_HANDSHAKE, kclient.HANDSHAKE_VERSION, {"mechanism": mechanism},
                            kclient.READ_TIMEOUT_S)
            return {"status": "answered", "answer": a}
        except kclient.Closed:
            return {"status": "closed"}
        finally:
            c.close()

    def unauthenticated_request(self):
        """A Metadata request on a new connection, before any SaslHandshake."""
        c = kclient.Conn(self.specs, self.b.addr, "", "")
        try:
            c.sock = __import__("socket").create_connection(c.addr, timeout=kclient.READ_TIMEOUT_S)
            a = c._exchange(API["Metadata"], 12, {"topics": [], "allow_auto_topic_creation": False}, 5.0)
            return {"status": "answered", "answer": a}
        except kclient.Closed:
            return {"status": "closed"}
        except OSError:
            return {"status": "timeout"}
        finally:
            c.close()

    def run(self, advertised):
        """Every applicable cell whose API the broker advertises at the chosen version."""
        self.prepare()
        n = 0
        t0 = time.monotonic()
        for scenario in self.scenarios:
            ts = time.monotonic()
            for case in self.cases:
                if not matrix.scenario_applies(scenario, case):
                    continue
                v = self.version_of(case)
                rng = advertised.get(case.api)
                key = f"{self.pass_name}|{case.id}|{scenario}"
                if rng is None or v is None or not rng[0] <= v <= rng[1]:
                    self.cells[key] = {"pass": self.pass_name, "case": case.id, "scenario": scenario,
                                       "api": case.api, "version": v,
                                       "status": "not_advertised" if rng is None else "version_not_served",
                                       "advertised": rng}
                    continue
                self.run_cell(scenario, case)
                n += 1
            self.log(f"  {self.pass_name}: scenario {scenario} done in {time.monotonic() - ts:.1f}s")
        self.run_auth_cases()
        self.log(f"{self.pass_name}: {n} cells in {time.monotonic() - t0:.1f}s")
        self.b.close()
        return self.cells


def dump(path, doc):
    """The results file: the meta block, then one cell per line (diffable, greppable)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write('{"meta": ' + json.dumps(doc["meta"], sort_keys=True, default=str) + ',\n"cells": {\n')
        items = list(doc["cells"].items())
        for i, (k, v) in enumerate(items):
            f.write(json.dumps(k) + ": " + json.dumps(v, default=str) + (",\n" if i + 1 < len(items) else "\n"))
        f.write("}}\n")
