#!/usr/bin/env python3
"""compat-tests/librdkafka: librdkafka's own test suite (tests/ of the librdkafka 2.12 that the
rdkafka-sys crate bundles, built by ./prepare) against a running broker.

Which tests: those in tests/test.c's table that need a broker (not TEST_F_LOCAL), in the
default scenario, without sockem (the -E of `run-test.sh -L -Q -E`), not manual and not flagged
as known issues, in quick mode (-Q). Tests that use consumer groups run twice, with
TEST_CONSUMER_GROUP_PROTOCOL=classic and =consumer (named NAME/classic, NAME/consumer); the
others once. --quick runs the Makefile's smoke set. Each test number runs in its own test-runner
process (a crash or hang in one cannot take the others with it), two at a time, with
TEST_KAFKA_VERSION=4.0.0 and a test.conf naming the broker. Tests that shell out to Kafka's
scripts get a KAFKA_PATH whose bin/ runs Kafka's classes from scripts/kafka-ref's jars.
Tests needing several brokers, SASL, TLS or an authorizer are not applicable (see NOT_APPLICABLE);
against a cluster of three nodes (COMPAT_NODES) those that only need replication factor 3 run.

With compat-tests/run --security MODE (ssl, sasl_plaintext, sasl_ssl) the suite is configured as
librdkafka's own set-up (tests/LibrdkafkaTestApp.py with trivup) configures it: test.conf gets
security.protocol, sasl.mechanisms, sasl.username and sasl.password (the test user) and
ssl.ca.location, ssl.certificate.location, ssl.key.location and ssl.key.password; the SSL_* variables
test 0097 reads name the client's certificate and key in every encoding (SSL_pkcs, SSL_pub_pem,
SSL_priv_der, ...); the Kafka tools of KAFKA_PATH get --command-config (the admin's configuration).
Then the tests that need TLS (0097) or SASL (0135, 0142) run, and --quick adds them to the smoke
set. The broker runs with connections.max.reauth.ms=10000 there (SECURITY; librdkafka's
interactive_broker_version.py default), so that 0142 re-authenticates. Tests that skip themselves
under authentication (test_needs_auth(): 0109's, 0115's and 0119's kafka-acls.sh parts, the mock
cluster tests, ...) are reported as they report themselves.
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compat import REPO, Suite  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VER = next(line.split("=", 1)[1].strip() for line in open(os.path.join(HERE, "VERSION"))
           if line.startswith("rdkafka-sys="))
SRC = os.path.join(REPO, "target", "compat", "src", f"librdkafka-{VER}")
TESTS = os.path.join(SRC, "tests")
RUNNER = os.path.join(TESTS, "test-runner")
KAFKA_REF = os.path.join(REPO, "scripts", "kafka-ref")
suite = Suite("librdkafka", f"librdkafka {VER.split('+')[-1]} tests (rdkafka-sys {VER.split('+')[0]})")

BROKER_VERSION = "4.0.0"
PROTOCOLS = ["classic", "consumer"]
PARALLEL = 2
# The Makefile's SMOKE_TESTS (0000,0001,0004,0012,0017,0022,0030,0039,0049,0087,0103), less the
# local-only and sockem ones that -L -E leave out anyway.
# 0103_transactions needs replication factor 3 (not applicable): 0090 (idempotence) stands in
# for it, and 0102 adds static group membership.
SMOKE = {"0001", "0012", "0017", "0022", "0030", "0039", "0049", "0087", "0103", "0090", "0102"}
# Left out (reported as skipped, with the reason): upstream tests whose outcome depends on timing
# and that fail against Kafka 4.4 itself on a loaded 2-core machine, even with a second attempt.
LEFT_OUT = {
    "0118": "timing-dependent: expects a closing member's commit, 5 s after its revocation, to be "
            "refused; Kafka 4.4 here sometimes still accepts it (failed twice in a row on 2026-11-29)",
}
# Left out in the SASL modes only (skipped, with the reason), failing there against Kafka 4.4
# itself: (test number, group protocol).
LEFT_OUT_SASL = {
    ("0093", "classic"): "re-authentication behind a blocked JoinGroup: with connections.max.reauth.ms=10000 "
                         "(for 0142) librdkafka re-authenticates the coordinator connection after 9 s while the "
                         "test holds the second member's JoinGroup for 10 s; the SaslHandshake waits behind it, "
                         "times out after the test's socket.timeout.ms=3000 and is raised as an authentication "
                         "error, which fails the test (against Kafka 4.4 with PLAIN and SCRAM, every attempt)",
}
NOT_APPLICABLE = {
    "0101_fetch_from_follower": "needs 3 brokers with racks (fetch from follower)",
    "0126_oauthbearer_oidc": "needs SASL/OAUTHBEARER with an OIDC token endpoint",
    "0077_compaction": "creates a topic with segment.bytes=10000, below the 1 MiB minimum of Kafka 4 "
                       "(KIP-1030): Kafka 4.4 itself refuses it",
    "0098_consumer_txn": "creates its topics with replication factor 3 (needs 3 brokers)",
    "0103_transactions": "creates its topics with replication factor 3 (needs 3 brokers)",
    "0129_fetch_aborted_msgs": "creates a topic with segment.bytes=20000, below the 1 MiB minimum of Kafka 4 "
                               "(KIP-1030): Kafka 4.4 itself refuses it",
}
# Tests that need a security mode (compat-tests/run --security): not applicable without it.
NEED_TLS = {"0097_ssl_verify"}
NEED_SASL = {"0135_sasl_credentials", "0142_reauthentication"}
SEC = suite.security
if not SEC.tls:
    NOT_APPLICABLE.update({n: "needs a TLS listener (compat-tests/run --security ssl or sasl_ssl)" for n in NEED_TLS})
if not SEC.sasl:
    NOT_APPLICABLE.update({n: "needs a SASL listener (compat-tests/run --security sasl_plaintext or sasl_ssl)"
                           for n in NEED_SASL})
if SEC.on:
    suite.version += f", {SEC.describe()}"
# Run without -Q (quick mode): every sub-test of 0142 is a non-quick SUB_TEST, so in quick mode it
# checks nothing at all (it reads connections.max.reauth.ms and passes).
NOT_QUICK = {"0142"}
# Test numbers run as several processes on one node, each with SUBTESTS= one of these (a substring
# of the sub-test names; one process per substring, since the runner takes one): 0142's consumer
# sub-test creates its topic with replication factor 3 and needs three brokers, as 0098 and 0103
# do; its producer, transactional producer ("do_test_producer:", "do_test_txn_producer:") and
# re-authentication-failure sub-tests run (the OAUTHBEARER ones skip themselves).
SUBTEST_PARTS = {"0142": ["producer:", "reauth failure"]}
# Not applicable to one node only: against a cluster of three or more they run.
NEED_THREE_NODES = {"0098_consumer_txn", "0103_transactions"}
GROUP_SRC = re.compile(r"subscribe|group\.id|test_create_consumer|KafkaConsumer::create")
RUN_TIMEOUT_S = 600


def table():
    """(name, flags, scenario) of each test in test.c's tests[] array."""
    src = open(os.path.join(TESTS, "test.c")).read()
    body = src[src.index("struct test tests[] = {"):]
    body = body[:body.index("{NULL}")]
    out = []
    for m in re.finditer(r"_TEST\((\w+),\s*([^,)]*)(.*?)\),?\s*(?=_TEST\(|#|/\*|$)", body, re.S):
        scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', m.group(3))
        out.append((m.group(1), m.group(2).strip(), scenario.group(1) if scenario else "default"))
    return out


def source_of(number):
    for f in os.listdir(TESTS):
        if f.startswith(number + "-") and f.endswith((".c", ".cpp")):
            return open(os.path.join(TESTS, f), errors="replace").read()
    return ""


def kafka_path():
    """A KAFKA_PATH whose bin/ scripts run Kafka's tool classes from scripts/kafka-ref's jars."""
    lib = subprocess.run([KAFKA_REF, "fetch"], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    kp = os.path.join(suite.work, "kafka")
    os.makedirs(os.path.join(kp, "bin"), exist_ok=True)
    libs = os.path.join(kp, "libs")
    if os.path.islink(libs):
        os.remove(libs)
    os.symlink(lib, libs)
    # With --security the tools log in as the admin (compat-tests/run writes its configuration).
    login = f' --command-config "{SEC.admin_config}"' if SEC.on else ""
    scripts = {
        "kafka-topics.sh": f'exec "{KAFKA_REF}" run org.apache.kafka.tools.TopicCommand "$@"{login}',
        "kafka-acls.sh": f'exec "{KAFKA_REF}" run org.apache.kafka.tools.AclCommand "$@"{login}',
        "kafka-run-class.sh": (f'exec java -Xmx512M -Dlog4j2.configurationFile="{REPO}/scripts/kafka/log4j2.properties" '
                               f'-Dkafka.ref.log.level=WARN -Dkafka.ref.log.target=SYSTEM_ERR '
                               f'-cp "${{CLASSPATH:-.}}:{lib}/*" "$@"'),
    }
    for name, body in scripts.items():
        path = os.path.join(kp, "bin", name)
        with open(path, "w") as f:
            f.write(f"#!/usr/bin/env bash\n# written by compat-tests/librdkafka/suite.py\n{body}\n")
        os.chmod(path, 0o755)
    return kp


def selected():
    """([(test number, protocol or None)] in table order, {names of the broker tests selected})."""
    runs, seen, names = [], set(), set()
    for name, flags, scenario in table():
        number = name.split("_")[0]
        if ("TEST_F_LOCAL" in flags or "TEST_F_MANUAL" in flags or "TEST_F_SOCKEM" in flags
                or re.search(r"TEST_F_KNOWN_ISSUE\b", flags) or "default" not in scenario.split(",")):
            continue
        if suite.quick and number not in SMOKE and not (SEC.on and name in NEED_TLS | NEED_SASL):
            continue
        if name in NOT_APPLICABLE and not (name in NEED_THREE_NODES and suite.nodes >= 3):
            suite.add_result(name, "n/a", NOT_APPLICABLE[name])
            continue
        names.add(name)
        if number in seen:
            continue  # TESTS=<number> runs every test of that number; one process per number
        seen.add(number)
        if number in LEFT_OUT:
            suite.add_result(name, "skipped", LEFT_OUT[number])
            continue
        protos = PROTOCOLS if GROUP_SRC.search(source_of(number)) else [None]
        for proto in protos:
            if SEC.sasl and (number, proto) in LEFT_OUT_SASL:
                suite.add_result(f"{name}/{proto}", "skipped", LEFT_OUT_SASL[(number, proto)])
                continue
            runs.append((number, proto))
    # Two variants of one test must never run at the same time (0033's regexes match the other's
    # topics): the consumer-protocol runs go after all the others.
    runs.sort(key=lambda r: r[1] == "consumer")
    return runs, names


def security_conf():
    """test.conf lines of the --security mode, as LibrdkafkaTestApp.py writes them: the test user
    over SASL, and the client's certificate and key (with their password) in both TLS modes."""
    conf = SEC.librdkafka()
    if SEC.tls:
        conf["ssl.key.password"] = SEC.pkcs12_password
    return conf


def ssl_env():
    """The SSL_* variables trivup's SslApp and LibrdkafkaTestApp.py set for the TLS tests (0097):
    the client's key and certificate in PEM, DER and PKCS#12 (with the CA) with their password, the
    CA in PEM and DER, and whether the broker asks for client certificates."""
    if not SEC.tls:
        return {}
    d = SEC.pki_dir
    return {"SSL_pkcs": SEC.pkcs12, "SSL_password": SEC.pkcs12_password,
            "SSL_pub_pem": SEC.cert, "SSL_pub_der": os.path.join(d, "client.der"),
            "SSL_priv_pem": SEC.key, "SSL_priv_der": os.path.join(d, "client.key.der"),
            "SSL_ca_pem": SEC.ca, "SSL_ca_der": os.path.join(d, "ca.der"), "SSL_all_cas_pem": SEC.ca,
            "SSL_client_auth": SEC.client_auth}


def run_number(number, proto, kp, attempt=1, subtests=None, part=None):
    tag = (f"{number}-{proto or 'any'}" + ("" if part is None else f".part{part}")
           + ("" if attempt == 1 else f".attempt{attempt}"))
    conf = os.path.join(suite.work, f"test-{tag}.conf")
    with open(conf, "w") as f:
        f.write(f"metadata.broker.list={suite.bootstrap}\ntest.timeout.multiplier=3\ntest.topic.random=true\n")
        f.write("".join(f"{k}={v}\n" for k, v in security_conf().items()))
    log = os.path.join(suite.work, f"{tag}.log")
    report = os.path.join(suite.work, f"{tag}.json")
    env = {**os.environ, "TESTS": number, "TEST_KAFKA_VERSION": BROKER_VERSION, "RDKAFKA_TEST_CONF": conf,
           "KAFKA_PATH": kp, "BROKERS": suite.bootstrap, "TEST_REPORT": report, "TEST_LEVEL": "2",
           "LD_LIBRARY_PATH": f"{SRC}/src:{SRC}/src-cpp", **ssl_env()}
    env.pop("CI", None)  # CI=true would add 2 to the timeout multiplier and limit concurrency
    if proto:
        env["TEST_CONSUMER_GROUP_PROTOCOL"] = proto
    if subtests:
        env["SUBTESTS"] = subtests
    t0 = time.monotonic()
    with open(log, "w") as out:
        try:
            mode = [] if number in NOT_QUICK else ["-Q"]
            p = subprocess.run([RUNNER, "-L", *mode, "-E", "-p1"], cwd=TESTS, env=env, stdout=out,
                               stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return tag, proto, log, rc, round(time.monotonic() - t0, 1)


def results_of(number, proto, log, rc, secs, wanted):
    """Per-test states from the runner's summary table (|name | STATE | secs | reason)."""
    text = open(log, errors="replace").read()
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    out = []
    for m in re.finditer(r"^\|\s*(\d{4}_\w+)\s*\|\s*(\w+)\s*\|\s*[\d.]+s\s*\|\s*(.*)$", text, re.M):
        name, state, why = m.group(1), m.group(2), m.group(3).strip()
        if name not in wanted:
            continue  # a local, sockem or known-issue test of the same number, left out by -L -E -K
        rname = f"{name}/{proto}" if proto else name
        rel = os.path.relpath(log, REPO)
        if state == "PASSED":
            out.append((rname, "passed", ""))
        elif state == "SKIPPED":
            out.append((rname, "skipped", why[:300]))
        else:
            fails = re.findall(r"^.*(?:TEST FAILURE|Test FAILED|FAIL:|Assertion|timed out).*$", text, re.M)
            detail = why or "; ".join(f.strip()[:200] for f in fails[:2])
            out.append((rname, "failed", f"{state}: {detail[:400]} (log {rel})"))
    out = list({n: (n, s, d) for n, s, d in out}.values())  # a timeout prints the table twice: keep the last
    if not out:
        said = re.findall(r'^### Test "[^"]*" failed at [^\n]*\n(?:[^\n]*\n)?', text, re.M)
        why = " | ".join(s.strip().replace("\n", " ") for s in said[:2]) or " | ".join(text.strip().splitlines()[-3:])
        # A crash or a kill leaves no table: every selected test of that number failed.
        for name in sorted(n for n in wanted if n.split("_")[0] == number) or [number]:
            out.append((f"{name}/{proto}" if proto else name, "failed",
                        f"runner exit {rc}, no summary (crash or timeout): {why[-400:]} "
                        f"(log {os.path.relpath(log, REPO)})"))
    elif rc == "timeout":
        out = [(n, "failed", f"timed out after {RUN_TIMEOUT_S}s; {d}") for n, _, d in out]
    return [(n, s, d, secs) for n, s, d in out]


def run_and_read(number, proto, kp, wanted, attempt=1):
    """Runs a test number once and reads its results; a number of SUBTEST_PARTS runs once per
    part, and each test's result is the worst of its parts' (failed, then passed, then skipped)."""
    parts = SUBTEST_PARTS.get(number) if suite.nodes < 3 else None
    if not parts:
        return results_of(number, proto, *run_number(number, proto, kp, attempt)[2:], wanted)
    merged = {}
    for i, sub in enumerate(parts, 1):
        for name, status, detail, secs in results_of(
                number, proto, *run_number(number, proto, kp, attempt, sub, i)[2:], wanted):
            detail = f"[SUBTESTS={sub}] {detail}" if detail else ""
            if name not in merged:
                merged[name] = (name, status, detail, secs)
                continue
            _, st0, d0, s0 = merged[name]
            rank = {"failed": 0, "passed": 1, "skipped": 2}
            worst = status if rank.get(status, 0) < rank.get(st0, 0) else st0
            merged[name] = (name, worst, "; ".join(d for d in (d0, detail) if d), round(s0 + secs, 1))
    return list(merged.values())


def run_with_retry(number, proto, kp, wanted):
    """Runs a test number; a failure gets one more attempt. Several upstream tests depend on
    timing (0042's legacy consumer after topic auto-creation, 0118's 5 s wait for a closing
    member) and fail now and then against Kafka itself on a loaded 2-core machine. A test that
    passes the second time is reported as passed, with the first failure in its detail."""
    first = run_and_read(number, proto, kp, wanted)
    if all(status != "failed" for _, status, _, _ in first):
        return first
    second = run_and_read(number, proto, kp, wanted, attempt=2)
    before = {name: detail for name, status, detail, _ in first if status == "failed"}
    out = []
    for name, status, detail, secs in second:
        if status == "passed" and name in before:
            detail = f"passed on the second attempt; the first failed: {before[name][:300]}"
        out.append((name, status, detail, secs))
    return out


def main():
    if not os.access(RUNNER, os.X_OK):
        suite.add_result("build", "failed", f"{RUNNER} missing: run compat-tests/librdkafka/prepare")
        return suite.main()
    kp = kafka_path()
    runs, wanted = selected()
    if suite.only:
        runs = [(n, p) for n, p in runs if any(o.startswith(n) for o in suite.only)]
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        futs = [pool.submit(run_with_retry, n, p, kp, wanted) for n, p in runs]
        for fut in futs:
            for name, status, detail, s in fut.result():
                suite.add_result(name, status, detail, s)
    suite.main()


if __name__ == "__main__":
    main()
