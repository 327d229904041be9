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
With compat-tests/run --security MODE (compat-tests/lib/security.py) also:
  COMPAT_SECURITY_PROTOCOL  SSL, SASL_PLAINTEXT or SASL_SSL (absent, or PLAINTEXT: no security)
  COMPAT_SASL_MECHANISM     PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL modes)
  COMPAT_SASL_USERNAME/PASSWORD    the test user's (principal COMPAT_SASL_PRINCIPAL, User:test) for
                    that mechanism (on es a PLAIN username is an API key id, named after the user)
  COMPAT_ADMIN_USERNAME/PASSWORD   a super user's (COMPAT_ADMIN_PRINCIPAL, User:admin)
  COMPAT_SASL_CREDENTIALS   JSON {"admin"|"test": {MECHANISM: [username, password]}}, every mechanism
  COMPAT_SSL_CA, COMPAT_SSL_CERT, COMPAT_SSL_KEY   PEM: the CA, the client's certificate and key
                    (PKCS#8), for TLS modes; COMPAT_SSL_PKCS12 the client's key, certificate and CA as
                    PKCS#12 with COMPAT_SSL_PASSWORD; COMPAT_PKI_DIR the folder (compat-tests/lib/pki.py)
  COMPAT_SSL_CLIENT_AUTH    required (ssl: the broker asks for the client's certificate) or none
  COMPAT_ADMIN_CONFIG       a Kafka Java client properties file logged in as admin (--command-config)
Suite.security (ClientSecurity) reads them and writes each client's configuration from them.
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


class ClientSecurity:
    """The security mode compat-tests/run gives a suite (the COMPAT_SECURITY_* variables above), and
    the client configurations that follow from it. on is False without --security."""

    MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

    def __init__(self, env=os.environ):
        self.protocol = env.get("COMPAT_SECURITY_PROTOCOL", "") or "PLAINTEXT"
        self.mode = self.protocol.lower()
        self.on = self.protocol != "PLAINTEXT"
        self.sasl = self.protocol.startswith("SASL_")
        self.tls = self.protocol in ("SSL", "SASL_SSL")
        self.mechanism = env.get("COMPAT_SASL_MECHANISM", "") if self.sasl else ""
        self.username = env.get("COMPAT_SASL_USERNAME", "")
        self.password = env.get("COMPAT_SASL_PASSWORD", "")
        self.admin_username = env.get("COMPAT_ADMIN_USERNAME", "")
        self.admin_password = env.get("COMPAT_ADMIN_PASSWORD", "")
        self.credentials = json.loads(env.get("COMPAT_SASL_CREDENTIALS") or "{}")
        self.ca, self.cert, self.key = (env.get(k, "") for k in ("COMPAT_SSL_CA", "COMPAT_SSL_CERT", "COMPAT_SSL_KEY"))
        self.pkcs12, self.pkcs12_password = env.get("COMPAT_SSL_PKCS12", ""), env.get("COMPAT_SSL_PASSWORD", "")
        self.pki_dir = env.get("COMPAT_PKI_DIR", "")
        self.client_auth = env.get("COMPAT_SSL_CLIENT_AUTH", "none")
        self.admin_config = env.get("COMPAT_ADMIN_CONFIG", "")

    def creds(self, mechanism=None, user="test"):
        """(username, password) of user ("test" or "admin") for mechanism (default: the mode's)."""
        pair = self.credentials.get(user, {}).get(mechanism or self.mechanism)
        if not pair:
            raise Fail(f"no {mechanism or self.mechanism} credentials for {user} in COMPAT_SASL_CREDENTIALS")
        return tuple(pair)

    def describe(self):
        return self.mode + (f" {self.mechanism}" if self.mechanism else "")

    def java(self, user="test", mechanism=None, password=None):
        """Kafka Java client properties (dict) for this mode, logged in as user."""
        if not self.on:
            return {}
        props = {"security.protocol": self.protocol}
        if self.tls:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca})
            if self.client_auth == "required":
                props.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": self.pkcs12,
                              "ssl.keystore.password": self.pkcs12_password, "ssl.key.password": self.pkcs12_password})
        if self.sasl:
            mech = mechanism or self.mechanism
            name, secret = self.creds(mech, user)
            module = "plain.PlainLoginModule" if mech == "PLAIN" else "scram.ScramLoginModule"
            props.update({"sasl.mechanism": mech,
                          "sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
                                              f'username="{name}" password="{password or secret}";'})
        return props

    def write_java(self, path, user="test", mechanism=None, extra=None):
        """Writes java() (and extra) as a properties file; returns its path."""
        with open(path, "w") as f:
            f.write("# written by compat-tests/lib/compat.py (ClientSecurity)\n")
            f.write("".join(f"{k}={v}\n" for k, v in {**self.java(user, mechanism), **(extra or {})}.items()))
        return path

    def librdkafka(self, user="test", mechanism=None):
        """librdkafka configuration properties (dict) for this mode, logged in as user: the client
        certificate is given in both TLS modes, as librdkafka's own test set-up (trivup) does."""
        if not self.on:
            return {}
        props = {"security.protocol": self.protocol}
        if self.tls:
            props.update({"ssl.ca.location": self.ca, "ssl.certificate.location": self.cert,
                          "ssl.key.location": self.key})
        if self.sasl:
            mech = mechanism or self.mechanism
            name, secret = self.creds(mech, user)
            props.update({"sasl.mechanisms": mech, "sasl.username": name, "sasl.password": secret})
        return props


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
        self.security = ClientSecurity()
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
