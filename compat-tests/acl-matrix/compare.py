#!/usr/bin/env python3
"""compare: diffs two ACL-matrix results files cell by cell and prints the API x scenario table.

usage: compare.py SUBJECT.json REFERENCE.json [--report PATH] [--quiet]

SUBJECT is the broker under test (es), REFERENCE Kafka's answers (expected-kafka-4.4.json or a
live run). Every cell of SUBJECT is normalised (normalise.for_compare) and compared field by
field with the same cell of REFERENCE. A cell whose API the subject does not advertise is
listed as not advertised, not as a mismatch (the APIs es does not serve are
compat-tests/diff's business); a cell REFERENCE lacks, or a request at a version the subject
does not serve, is a mismatch. Exit status 1 when there is any mismatch.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "diff"))
sys.path.insert(0, HERE)
import normalise  # noqa: E402
from matrix import SCENARIOS  # noqa: E402

ERRORS = {
    -1: "UNKNOWN_SERVER_ERROR", 0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
    5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
    14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR",
    17: "INVALID_TOPIC_EXCEPTION", 22: "ILLEGAL_GENERATION", 24: "INVALID_GROUP_ID", 25: "UNKNOWN_MEMBER_ID",
    27: "REBALANCE_IN_PROGRESS", 29: "TOPIC_AUTHORIZATION_FAILED", 30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED", 33: "UNSUPPORTED_SASL_MECHANISM", 34: "ILLEGAL_SASL_STATE",
    35: "UNSUPPORTED_VERSION", 36: "TOPIC_ALREADY_EXISTS", 37: "INVALID_PARTITIONS",
    38: "INVALID_REPLICATION_FACTOR", 39: "INVALID_REPLICA_ASSIGNMENT", 40: "INVALID_CONFIG",
    41: "NOT_CONTROLLER", 42: "INVALID_REQUEST", 44: "POLICY_VIOLATION", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER", 47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE",
    49: "INVALID_PRODUCER_ID_MAPPING", 50: "INVALID_TRANSACTION_TIMEOUT", 51: "CONCURRENT_TRANSACTIONS",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 54: "SECURITY_DISABLED", 55: "OPERATION_NOT_ATTEMPTED",
    56: "KAFKA_STORAGE_ERROR", 57: "LOG_DIR_NOT_FOUND", 58: "SASL_AUTHENTICATION_FAILED",
    59: "UNKNOWN_PRODUCER_ID", 60: "REASSIGNMENT_IN_PROGRESS", 67: "INVALID_PRINCIPAL_TYPE",
    68: "NON_EMPTY_GROUP", 69: "GROUP_ID_NOT_FOUND", 73: "TOPIC_DELETION_DISABLED",
    74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH", 78: "OFFSET_NOT_AVAILABLE",
    79: "MEMBER_ID_REQUIRED", 83: "ELIGIBLE_LEADERS_NOT_AVAILABLE", 84: "ELECTION_NOT_NEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS", 86: "GROUP_SUBSCRIBED_TO_TOPIC", 87: "INVALID_RECORD",
    88: "UNSTABLE_OFFSET_COMMIT", 89: "THROTTLING_QUOTA_EXCEEDED", 90: "PRODUCER_FENCED",
    91: "RESOURCE_NOT_FOUND", 92: "DUPLICATE_RESOURCE", 93: "UNACCEPTABLE_CREDENTIAL",
    100: "UNKNOWN_TOPIC_ID", 105: "TRANSACTIONAL_ID_NOT_FOUND", 110: "FENCED_MEMBER_EPOCH",
    113: "STALE_MEMBER_EPOCH", 117: "UNKNOWN_SUBSCRIPTION_ID", 120: "TRANSACTION_ABORTABLE",
    128: "INVALID_REGULAR_EXPRESSION",
}

# Cells whose summary also counts the entries of a list (which entries appear is the point).
COUNTED = {"Metadata.all": "topics", "DescribeTopicPartitions.all": "topics", "ListGroups.group_acl": "groups",
           "ListGroups.cluster_acl": "groups", "ListTransactions": "transaction_states",
           "DescribeAcls": "resources", "OffsetFetch.all": "groups.0.topics",
           "DescribeTransactions": "transaction_states.0.topics"}
SHORT = {"none": "none", "allow": "allow", "deny": "deny", "deny_all": "dnyAll", "deny_other": "dnyOth",
         "deny_user_star": "dnyU*", "deny_prefixed": "dnyPfx", "wildcard": "wild*", "prefixed": "prefix",
         "user_star": "User*", "implied": "implied", "all_op": "ALL", "wrong_op": "wrongOp", "wrong_host": "wrongH",
         "host_ip": "hostIP", "other_user": "bob", "but1": "but1", "but2": "but2", "but3": "but3", "super": "super",
         "-": "-"}


def codes_in(x, out):
    if isinstance(x, dict):
        for k, v in x.items():
            if k.endswith("error_code") and isinstance(v, int) and not isinstance(v, bool):
                if v not in out:
                    out.append(v)
            else:
                codes_in(v, out)
    elif isinstance(x, list):
        for v in x:
            codes_in(v, out)
    return out


def count_of(answer, path):
    x = answer
    for p in path.split("."):
        if isinstance(x, list):
            x = x[int(p)] if p.isdigit() and int(p) < len(x) else None
        elif isinstance(x, dict):
            x = x.get(p)
        else:
            return None
    return len(x) if isinstance(x, list) else x if isinstance(x, int) else None


def summary(cell):
    """A cell in a few characters: its distinct error codes in order of appearance (0/29),
    `#n` the entries of a listing, `closed`, `-` (not advertised), `ERR` (harness error)."""
    if cell is None:
        return "?"
    st = cell.get("status")
    if st in ("not_advertised", "version_not_served"):
        return "-" if st == "not_advertised" else "v?"
    if st == "harness_error":
        return "ERR"
    if st in ("closed", "timeout"):
        return st
    if st == "refused":
        return str((cell.get("answer") or {}).get("error_code"))
    if st == "authenticated":
        return "auth"
    n = normalise.for_compare(cell)
    text = "/".join(str(c) for c in codes_in(n.get("answer"), [])) or "ok"
    path = COUNTED.get(cell.get("case"))
    if path:
        cnt = count_of(n.get("answer"), path)
        if cnt is not None:
            text += f"#{cnt}"
    if cell.get("acls_refused"):
        text += "r"
    return text


def load(path):
    """A results file, with its listings cut down as normalise.LISTINGS says now (a file saved
    before a row changed compares by today's rule)."""
    with open(path) as f:
        doc = json.load(f)
    doc["cells"] = {k: normalise.trim_listing(c) for k, c in doc.get("cells", {}).items()}
    return doc


def compare_docs(subject, reference):
    """Returns (results, counts): results[key] = {verdict, diffs}; verdicts: equal, mismatch,
    not_advertised."""
    results, counts = {}, {"equal": 0, "mismatch": 0, "not_advertised": 0}
    ref_cells = reference["cells"]
    for key, cell in subject["cells"].items():
        if cell.get("status") == "not_advertised":
            results[key] = {"verdict": "not_advertised", "diffs": []}
            counts["not_advertised"] += 1
            continue
        ref = ref_cells.get(key)
        if ref is None:
            results[key] = {"verdict": "mismatch", "diffs": [{"path": ".", "subject": "<a cell>",
                                                             "reference": "<no such cell>"}]}
            counts["mismatch"] += 1
            continue
        a, b = normalise.for_compare(cell), normalise.for_compare(ref)
        diffs = normalise.compare(a, b)
        verdict = "mismatch" if diffs else "equal"
        results[key] = {"verdict": verdict, "diffs": diffs}
        counts[verdict] += 1
    return results, counts


def table(subject, reference, results, out=sys.stdout):
    """Rows: pass and case; columns: scenarios. A cell shows the subject's summary; `!` marks a
    mismatch (the reference's summary follows when it differs)."""
    cells = subject["cells"]
    passes, cases, scens = [], [], []
    for key, c in cells.items():
        p, case, s = key.split("|")
        for lst, v in ((passes, p), (cases, case), (scens, s)):
            if v not in lst:
                lst.append(v)
    order = [s for s in list(SCENARIOS) + ["-"] if s in scens]
    width = {s: max(len(SHORT.get(s, s)), 5) for s in order}
    texts = {}
    for key, c in cells.items():
        t = summary(c)
        r = results.get(key, {})
        if r.get("verdict") == "mismatch":
            ref = reference["cells"].get(key)
            rt = summary(ref) if ref else "none"
            t = f"{t}!" if rt == t else f"{t}!{rt}"
        texts[key] = t
        s = key.split("|")[2]
        width[s] = max(width[s], len(t))
    namew = max(len(c) for c in cases) + 1
    for p in passes:
        print(f"\n{p}: error codes per case (rows) and scenario (columns); `!` a mismatch "
              f"(subject!reference), #n entries listed, r some ACLs refused, - not advertised", file=out)
        print(" " * namew + " ".join(SHORT.get(s, s).ljust(width[s]) for s in order), file=out)
        for case in cases:
            row = [texts.get(f"{p}|{case}|{s}", "").ljust(width[s]) for s in order]
            if any(x.strip() for x in row):
                print(case.ljust(namew) + " ".join(row).rstrip(), file=out)


def legend(subject, out=sys.stdout):
    seen = set()
    for c in subject["cells"].values():
        seen.update(codes_in(c.get("answer"), []))
    print("error codes: " + ", ".join(f"{k} {ERRORS.get(k, '?')}" for k in sorted(seen)), file=out)


def report_mismatches(results, subject, reference, out=sys.stdout, limit=8):
    for key, r in results.items():
        if r["verdict"] != "mismatch":
            continue
        if r["diffs"] and r["diffs"][0].get("reference") == "<no such cell>":
            print(f"MISMATCH {key}: the reference has no such cell (rerun it with this matrix)", file=out)
            continue
        print(f"MISMATCH {key}", file=out)
        for d in r["diffs"][:limit]:
            print(f"    {d['path']}: subject={short(d['subject'])} reference={short(d['reference'])}", file=out)
        if len(r["diffs"]) > limit:
            print(f"    ... {len(r['diffs']) - limit} more", file=out)


def short(x, n=160):
    s = json.dumps(x, default=str)
    return s if len(s) <= n else s[:n] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("subject")
    ap.add_argument("reference")
    ap.add_argument("--report", default=None, help="also write every mismatch with all its differences here")
    ap.add_argument("--quiet", action="store_true", help="no table")
    a = ap.parse_args()
    subject, reference = load(a.subject), load(a.reference)
    return print_comparison(subject, reference, a.report, a.quiet)


def print_comparison(subject, reference, report_path=None, quiet=False):
    results, counts = compare_docs(subject, reference)
    if not quiet:
        table(subject, reference, results)
        legend(subject)
    report_mismatches(results, subject, reference)
    if report_path:
        with open(report_path, "w") as f:
            report_mismatches(results, subject, reference, out=f, limit=1000)
    s, r = subject.get("meta", {}), reference.get("meta", {})
    for p, apis in (s.get("advertised_without_case") or {}).items():
        if apis:
            print(f"acl-matrix: {s.get('broker')} advertises with no case ({p}): {', '.join(apis)}")
    print(f"acl-matrix: {s.get('broker')} against {r.get('broker')} ({r.get('broker_version', '')}): "
          f"{counts['equal'] + counts['mismatch']} cells compared, {counts['equal']} equal, "
          f"{counts['mismatch']} mismatches, {counts['not_advertised']} not advertised by "
          f"{s.get('broker')}")
    return 1 if counts["mismatch"] else 0


if __name__ == "__main__":
    sys.exit(main())
