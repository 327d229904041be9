#!/usr/bin/env python3
"""compat-tests/diff/tester.py: the differential protocol tester, es against Apache Kafka.

Sends the same raw requests to two brokers (the subject, es, and the reference, Kafka 4.4),
decodes both answers with Kafka's own message specs (kproto.py, records.py), normalises only
what must differ (the NORMALISE table in table.py), and compares everything else field by
field. Cases come from cases.py: every API the subject advertises at every version it
advertises, with edge values for every request field generated from the specs, stateful
sequences, and malformed frames.

usage: tester.py --subject HOST:PORT --reference HOST:PORT [--jar KAFKA_CLIENTS_JAR]
                 [--quick] [--only REGEX] [--out DIR]
Writes DIR/report.json, DIR/report.txt (every case: equal / different / allowed, with both
answers when they differ) and prints one `N passed, M failed` line. Used by suite.py, which
compat-tests/run starts as the suite `diff`.
"""
import argparse
import json
import os
import re
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kproto  # noqa: E402
import records  # noqa: E402
import table  # noqa: E402

READ_TIMEOUT_S = 10.0
MAX_FRAME = 64 << 20
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
# LEADER_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS: what a case marked retry waits out.
RETRIABLE = {14, 15, 16, 5, 51}
RETRIES, RETRY_PAUSE_S = 60, 0.25


def error_codes(x):
    """Every error code in an answer: error_code fields and the like (AddPartitionsToTxn
    v0-3 names its partition_error_code)."""
    if isinstance(x, dict):
        for k, v in x.items():
            if k.endswith("error_code") and isinstance(v, int):  # also partition_error_code
                yield v
            else:
                yield from error_codes(v)
    elif isinstance(x, list):
        for v in x:
            yield from error_codes(v)


class Conn:
    """One broker: a socket that reconnects after a close, and what the cases learned of it."""

    def __init__(self, name, addr):
        self.name = name
        host, port = addr.rsplit(":", 1)
        self.addr = (host, int(port))
        self.sock = None
        self.corr = 0
        self.ctx = Ctx(name)

    def connect(self):
        if self.sock is None:
            self.sock = socket.create_connection(self.addr, timeout=READ_TIMEOUT_S)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def recv_exact(self, n, deadline):
        out = bytearray()
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            self.sock.settimeout(left)
            chunk = self.sock.recv(min(n - len(out), 1 << 20))
            if not chunk:
                raise ConnectionResetError("closed")
            out += chunk
        return bytes(out)

    def exchange(self, frame, corr, timeout, expect_answer=True):
        """Sends one frame (with its length prefix); returns ("answered", bytes) / ("closed",) /
        ("timeout",) / ("no_answer",) for acks=0 produce."""
        try:
            s = self.connect()
            s.sendall(frame)
        except OSError as e:
            self.close()
            return ("closed", f"send: {e}")
        if not expect_answer:
            return ("no_answer",)
        deadline = time.monotonic() + timeout
        try:
            (n,) = struct.unpack(">i", self.recv_exact(4, deadline))
            if n < 4 or n > MAX_FRAME:
                self.close()
                return ("bad_frame", n)
            data = self.recv_exact(n, deadline)
        except socket.timeout:
            self.close()
            return ("timeout",)
        except OSError:
            self.close()
            return ("closed",)
        (got,) = struct.unpack(">i", data[:4])
        if got != corr:
            self.close()
            return ("bad_correlation", got, corr)
        return ("answered", data)


class Ctx:
    """Per broker: ids the broker generated, learned from its answers, and stable labels for
    them (the first member id a broker hands out is member#1 on both brokers)."""

    def __init__(self, name):
        self.name = name
        self.topic_ids = {}
        self.vals = {}
        self.labels = {}

    def __getitem__(self, k):
        return self.vals[k]

    def get(self, k, default=None):
        return self.vals.get(k, default)

    def __setitem__(self, k, v):
        self.vals[k] = v

    def tid(self, name):
        return self.topic_ids.get(name, kproto.ZERO_UUID)

    def label(self, kind, value):
        key = (kind, json.dumps(value, sort_keys=True))
        if key not in self.labels:
            n = sum(1 for k in self.labels if k[0] == kind) + 1
            self.labels[key] = f"<{kind}#{n}>"
        return self.labels[key]

    def topic_label(self, value):
        for name, tid in self.topic_ids.items():
            if tid == value:
                return f"<id of {name}>"
        if value == kproto.ZERO_UUID:
            return value
        return self.label("unknown-topic-id", value)


class Case:
    """One request. body(ctx) builds the body from what this broker's ctx knows (its topic ids,
    producer ids, member ids); raw(ctx, frame_of) builds a malformed frame instead; after(ctx,
    body) records what later cases need. retry: True (wait out RETRIABLE codes) or a set of
    error codes to wait out. until(body): the case is also repeated while this is false (a
    state that settles in the background). then: a case run on both brokers after this one,
    retried, neither compared nor reported: it waits until what this case started (an
    auto-created topic, a transaction's markers) is done on both, so that later cases compare
    settled state."""

    def __init__(self, name, api, version, body=None, raw=None, after=None, timeout=READ_TIMEOUT_S,
                 extra_tags=None, header_tags=None, expect_answer=True, pause=0.0, quick=True,
                 retry=False, then=None, until=None):
        self.name, self.api, self.version = name, api, version
        self.retry, self.until = retry, until
        self.then = then
        self.body, self.raw, self.after = body, raw, after
        self.timeout, self.extra_tags, self.header_tags = timeout, extra_tags, header_tags
        self.expect_answer, self.pause, self.quick = expect_answer, pause, quick


class Tester:
    def __init__(self, specs, subject, reference, out_dir):
        self.specs = specs
        self.brokers = [Conn("es", subject), Conn("kafka", reference)]
        self.out_dir = out_dir
        self.results = []
        self.names = {k: m.name[:-len("Request")] for (k, kind), m in specs.items() if kind == "request"}

    def frame(self, conn, case, body):
        conn.corr += 1
        req = self.specs[(case.api, "request")]
        payload = kproto.encode_request(req, case.version, conn.corr, body, extra_tags=case.extra_tags,
                                        header_tags=case.header_tags)
        return conn.corr, struct.pack(">i", len(payload)) + payload

    def run_on(self, conn, case):
        try:
            if case.raw is not None:
                conn.corr += 1
                frame = case.raw(conn.ctx, conn.corr)
                corr = conn.corr
            else:
                corr, frame = self.frame(conn, case, case.body(conn.ctx) if case.body else {})
        except Exception as e:  # noqa: BLE001 - a case that cannot be built is a harness bug
            return {"status": "harness_error", "error": f"build: {type(e).__name__}: {e}"}
        res = conn.exchange(frame, corr, case.timeout, case.expect_answer)
        if res[0] != "answered":
            return {"status": res[0], **({"detail": list(res[1:])} if len(res) > 1 else {})}
        resp = self.specs[(case.api, "response")]
        version = case.version
        try:
            _, body = kproto.decode_response(case.api, resp, version, res[1])
        except kproto.DecodeError as e:
            if case.api == 18:  # an ApiVersions answer to a version it refuses is v0 (KIP-511)
                try:
                    _, body = kproto.decode_response(case.api, resp, 0, res[1])
                except kproto.DecodeError:
                    return {"status": "undecodable", "error": str(e), "hex": res[1][:256].hex()}
            else:
                return {"status": "undecodable", "error": str(e), "hex": res[1][:256].hex()}
        body = decode_records(body)
        if case.after:
            try:
                case.after(conn.ctx, body)
            except Exception as e:  # noqa: BLE001
                return {"status": "harness_error", "error": f"after: {type(e).__name__}: {e}", "body": body}
        return {"status": "answered", "body": body}

    def run_retrying(self, conn, case):
        """A case marked retry is repeated while the broker answers with a retriable error
        (a coordinator still loading, a leader not yet elected): state set up for later
        cases must be set up, however long each broker takes to be ready for it."""
        codes = RETRIABLE if case.retry is True else set(case.retry or ())
        for _ in range(RETRIES if codes or case.until else 1):
            out = self.run_on(conn, case)
            if out["status"] != "answered":
                return out
            settled = case.until is None or case.until(out["body"])
            if settled and not (set(error_codes(out["body"])) & codes):
                return out
            time.sleep(RETRY_PAUSE_S)
        return out

    def run(self, cases):
        for case in cases:
            t0 = time.monotonic()
            outs = [self.run_retrying(b, case) for b in self.brokers]
            if case.then is not None:
                for b in self.brokers:
                    self.run_retrying(b, case.then)
            if case.pause:
                time.sleep(case.pause)
            api_name = self.names.get(case.api, str(case.api))
            norm = [table.normalise(api_name, o, b.ctx) for o, b in zip(outs, self.brokers)]
            absent = table.take_absent(api_name, norm[0], norm[1])
            diffs = compare(norm[0], norm[1])
            verdict, reason = "equal", ""
            if any(o["status"] == "harness_error" for o in outs):
                verdict, reason = "harness_error", "; ".join(o.get("error", "") for o in outs)
            elif diffs:
                reason = table.allowed(case.name, api_name, diffs)
                verdict = "allowed" if reason else "different"
                if reason and absent:
                    reason = "; ".join(absent + [reason])
            elif absent:
                verdict, reason = "allowed", "; ".join(absent)
            self.results.append({"case": case.name, "api": api_name, "version": case.version,
                                 "verdict": verdict, "reason": reason, "diffs": diffs[:40],
                                 "es": norm[0], "kafka": norm[1],
                                 "seconds": round(time.monotonic() - t0, 3)})
            mark = {"equal": ".", "allowed": "a", "different": "D", "harness_error": "E"}[verdict]
            print(mark, end="", flush=True)
        print()

    def write_report(self):
        os.makedirs(self.out_dir, exist_ok=True)
        with open(os.path.join(self.out_dir, "report.json"), "w") as f:
            json.dump(self.results, f, indent=1, default=str)
        counts = {}
        by_api = {}
        with open(os.path.join(self.out_dir, "report.txt"), "w") as f:
            for r in self.results:
                counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
                a = by_api.setdefault(r["api"], {"equal": 0, "allowed": 0, "different": 0, "harness_error": 0})
                a[r["verdict"]] += 1
                f.write(f"{r['verdict']:13} {r['case']}\n")
                if r["verdict"] == "allowed":
                    f.write(f"    allowed: {r['reason']}\n")
                if r["verdict"] in ("different", "harness_error"):
                    for d in r["diffs"]:
                        f.write(f"    {d['path']}: es={short(d['es'])} kafka={short(d['kafka'])}\n")
                    if r["verdict"] == "harness_error":
                        f.write(f"    {r['reason']}\n")
            f.write("\nper API (equal / allowed / different / harness errors):\n")
            for api, a in sorted(by_api.items()):
                f.write(f"  {api:32} {a['equal']:5} {a['allowed']:5} {a['different']:5} {a['harness_error']:3}\n")
        return counts, by_api


def short(x, n=300):
    s = json.dumps(x, default=str)
    return s if len(s) <= n else s[:n] + "..."


def decode_records(x, key=None):
    if isinstance(x, dict):
        return {k: decode_records(v, k) for k, v in x.items()}
    if isinstance(x, list):
        return [decode_records(v) for v in x]
    if isinstance(x, (bytes, bytearray)):
        if key == "records":
            return records.decode_batches(bytes(x))
        return "hex:" + bytes(x).hex()
    return x


def compare(a, b, path=""):
    """Field-by-field differences between two normalised answers: [{path, es, kafka}]."""
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        return [{"path": path or ".", "es": a, "kafka": b}]
    if isinstance(a, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                out.append({"path": f"{path}.{k}", "es": a.get(k, "<absent>"), "kafka": b.get(k, "<absent>")})
            else:
                out += compare(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list):
        out = []
        if len(a) != len(b):
            out.append({"path": f"{path}.length", "es": len(a), "kafka": len(b)})
        for i, (x, y) in enumerate(zip(a, b)):
            out += compare(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            extra_es, extra_k = a[len(b):], b[len(a):]
            out.append({"path": f"{path}[{min(len(a), len(b))}:]", "es": extra_es[:5], "kafka": extra_k[:5]})
        return out
    return [] if a == b else [{"path": path or ".", "es": a, "kafka": b}]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--subject", required=True, help="HOST:PORT of the broker under test (es)")
    ap.add_argument("--reference", required=True, help="HOST:PORT of Apache Kafka")
    ap.add_argument("--jar", default=None, help="kafka-clients jar holding common/message/*.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="regex on case names")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "target", "compat", "diff"))
    args = ap.parse_args()
    return run(args.subject, args.reference, args.jar or find_jar(), args.quick, args.only, args.out)[0]


def find_jar():
    lib = os.path.join(HERE, "..", "..", "target", "kafka-lib")
    for v in sorted(os.listdir(lib), reverse=True) if os.path.isdir(lib) else []:
        for f in os.listdir(os.path.join(lib, v)):
            if re.fullmatch(r"kafka-clients-[0-9.]+\.jar", f):
                return os.path.join(lib, v, f)
    raise SystemExit("no kafka-clients jar under target/kafka-lib (run scripts/kafka-ref fetch)")


def run(subject, reference, jar, quick, only, out):
    import cases
    specs = kproto.load_specs(jar)
    t = Tester(specs, subject, reference, out)
    started = time.monotonic()
    all_cases = cases.build(t, quick)
    if only:
        rx = re.compile(only)
        all_cases = [c for c in all_cases if rx.search(c.name) or c.name.startswith("prepare.")]
    print(f"diff: {len(all_cases)} cases, subject {subject}, reference {reference}", flush=True)
    t.run(all_cases)
    counts, by_api = t.write_report()
    passed = counts.get("equal", 0) + counts.get("allowed", 0)
    failed = counts.get("different", 0) + counts.get("harness_error", 0)
    print(f"diff: {counts.get('equal', 0)} equal, {counts.get('allowed', 0)} allowed by the table, "
          f"{counts.get('different', 0)} different, {counts.get('harness_error', 0)} harness errors "
          f"in {time.monotonic() - started:.0f}s; report in {os.path.abspath(out)}/report.txt")
    print(f"{passed} passed, {failed} failed")
    return (0 if failed == 0 else 1), t.results


if __name__ == "__main__":
    sys.exit(main())
