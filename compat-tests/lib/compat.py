"""Helpers shared by the compat-tests suite runners (compat-tests/<suite>/suite.py).

A suite runner is started by compat-tests/run with these environment variables:
  COMPAT_BOOTSTRAP  host:port of the broker under test (es or Apache Kafka); against a cluster,
                    the comma-separated list of every node (a client that takes one host:port
                    uses Suite.bootstrap_one, the first, and discovers the rest from Metadata)
  COMPAT_AGAINST    "es" or "kafka", one node or a cluster
  COMPAT_NODES      how many brokers the cluster under test has (1 but with --cluster N)
  COMPAT_CLUSTER_CTL  against a cluster this run started: a JSON list, the command that crashes
                    or restarts one of its nodes (CTL kill I, CTL restart I; I = node id 1..N)
  COMPAT_QUICK      "1" for the quick subset / smaller record counts
  COMPAT_RESULTS    the JSON file the runner writes its results to
  COMPAT_WORK       a scratch directory for this suite (kept for inspection)
  COMPAT_ONLY       optional comma-separated test names to run (others are not run)
It registers tests with @suite.test, calls suite.main(), and each test either returns
(passed), raises Fail (failed), raises Skip (skipped: a prerequisite is missing) or
raises NotApplicable (cannot apply to a single-node broker, with the reason).
Every external command runs with a timeout, so a hung client cannot hang the run.
"""
import json
import os
import subprocess
import sys
import time
import traceback
import uuid


class Fail(Exception):
    pass


class Skip(Exception):
    pass


class NotApplicable(Exception):
    pass


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CMD_TIMEOUT_S = 180
OUTPUT_TAIL_CHARS = 600


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def tail(text, n=OUTPUT_TAIL_CHARS):
    """The last n characters of a command's output, on one line (details are one line each)."""
    text = " | ".join(line.strip() for line in (text or "").strip().splitlines() if line.strip())
    return text if len(text) <= n else "..." + text[-n:]


def sh(args, input=None, timeout=CMD_TIMEOUT_S, ok=True, env=None):
    """Runs a command, returns CompletedProcess (text). ok=True: a non-zero exit is a Fail."""
    try:
        p = subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout,
                           env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired as e:
        raise Fail(f"timed out after {timeout}s: {' '.join(args)[:200]}; stderr: "
                   f"{tail(e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr)}")
    if ok and p.returncode != 0:
        raise Fail(f"exit {p.returncode}: {' '.join(args)[:200]}; stderr: {tail(p.stderr)}")
    return p


class Suite:
    def __init__(self, name, version):
        self.name = name
        self.version = version
        self.bootstrap = os.environ.get("COMPAT_BOOTSTRAP", "127.0.0.1:9092")
        self.bootstrap_one = self.bootstrap.split(",")[0]
        self.against = os.environ.get("COMPAT_AGAINST", "es")
        self.nodes = int(os.environ.get("COMPAT_NODES", "1"))
        self.quick = os.environ.get("COMPAT_QUICK") == "1"
        self.work = os.environ.get("COMPAT_WORK") or os.path.join(REPO, "target", "compat", name)
        os.makedirs(self.work, exist_ok=True)
        self.results_path = os.environ.get("COMPAT_RESULTS", os.path.join(self.work, "results.json"))
        only = os.environ.get("COMPAT_ONLY", "")
        self.only = {t for t in only.split(",") if t}
        self.tests = []
        self.results = []  # filled by main(), or directly by add_result() for suites that run
        self.run_id = uuid.uuid4().hex[:8]

    def test(self, fn=None, *, quick=True):
        """Registers a test; quick=False leaves it out of --quick runs."""
        def reg(f):
            self.tests.append((f.__name__.replace("_", "-"), f, quick))
            return f
        return reg(fn) if fn is not None else reg

    def add_result(self, name, status, detail="", seconds=0.0):
        """Records one result directly (suites whose upstream runner executes many tests)."""
        assert status in ("passed", "failed", "skipped", "n/a"), status
        detail = " ".join(detail.split())
        print(f"  {status.upper():8} {name} ({seconds}s){': ' + detail if detail else ''}", flush=True)
        self.results.append({"name": name, "status": status, "detail": detail, "seconds": seconds})
        self.write_results()

    def write_results(self):
        """Writes what has been recorded so far: a runner that compat-tests/run stops at its time
        budget still leaves the results it had (the run reports the timeout beside them)."""
        tmp = self.results_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"suite": self.name, "version": self.version, "tests": self.results}, f, indent=1)
        os.replace(tmp, self.results_path)

    def topic(self, label):
        return f"compat-{self.name}-{label}-{self.run_id}"

    def main(self):
        for name, fn, quick in self.tests:
            if self.only and name not in self.only:
                continue
            if self.quick and not quick:
                self.add_result(name, "skipped", "not in --quick")
                continue
            t0 = time.monotonic()
            try:
                fn()
                status, detail = "passed", ""
            except Fail as e:
                status, detail = "failed", str(e)
            except Skip as e:
                status, detail = "skipped", str(e)
            except NotApplicable as e:
                status, detail = "n/a", str(e)
            except Exception as e:  # a harness bug: report it as a failure with the trace
                status, detail = "failed", f"harness error: {e!r} {tail(traceback.format_exc(), 400)}"
            self.add_result(name, status, detail, round(time.monotonic() - t0, 2))
        self.write_results()
        sys.exit(0)
