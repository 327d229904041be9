#!/usr/bin/env python3
"""benches/tls/tls.py: es against Apache Kafka over SASL_SSL, and what TLS costs es.

Started by benches/tls/run (which builds es-broker and the librdkafka load generator and
fetches Kafka first). One test PKI (compat-tests/lib/pki.py, made in target/bench/tls/pki)
serves both brokers; the brokers' security settings are compat-tests/lib/security.py's for
the sasl_ssl mode (Kafka's exact server properties, es's API keys as SASL/PLAIN users).

  es      one es-broker as shipped (fsync before every acknowledgement), three listeners:
          PLAINTEXT, SSL (no client certificates) and SASL_SSL (PLAIN, an API key)
  kafka   one single-node KRaft Kafka as scripts/kafka-ref configures it (acknowledged from
          the page cache, no fsync), its client listener SASL_SSL (PLAIN, JAAS users)

Both brokers also have a PLAINTEXT listener through which the harness creates and deletes
topics and checks readiness (es's is also the PLAINTEXT target). Four targets are measured
with the same load generator (es-loadgen, librdkafka 2.12.1 with OpenSSL, 1 producer, 1
partition, 1 KiB records, acks=all, linger.ms 5, batch.size 16384, no compression):

  es-plaintext  es-ssl  es-sasl_ssl  kafka-sasl_ssl

Cases, in every round, each target once (order A B C D, then D C B A):
  produce   N records as fast as the broker takes them: records/s, MB/s, p50/p99 from send()
            to the delivery report (at saturation: mostly time queued in the client)
  latency   5,000 records/s (5 MB/s) for S seconds: p50/p99/p99.9 well below saturation
  consume   N records read from offset 0 of a topic filled beforehand (not timed)
  connect   a consumer that connects (bootstrap, then the partition's leader) and reads
            nothing: the load generator's wall time and the broker's CPU (TLS handshakes,
            SASL; es checks an API key's argon2id hash)
The produce and consume clocks start once the client is connected to the leader
(es-loadgen --connect-first): the figures are of streaming, the connecting is `connect`.
es-sasl_ssl against kafka-sasl_ssl answers "es against Kafka over SASL_SSL"; es-plaintext,
es-ssl and es-sasl_ssl give es's TLS cost (1 - ratio to PLAINTEXT, per round, median).

Only one broker runs during a measured run: the other is stopped with SIGSTOP (bench.Bench.alone)
and continued after it. Before each measured run the 1-minute load average is read; while it
is 1.5 or more the harness waits (at most 20 minutes over the whole invocation) and records
the load seen with the figure. Every run starts after an untimed sync (Kafka leaves its writes
in the page cache). Results: target/bench/tls/results.json and a Markdown table on stdout.
"""
import argparse
import contextlib
import datetime
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "compat-tests", "lib"))
import bench  # noqa: E402  (benches/bench.py: processes, brokers, topics, medians)
import pki  # noqa: E402  (compat-tests/lib/pki.py: the test PKI)
import security  # noqa: E402  (compat-tests/lib/security.py: both brokers' SASL_SSL settings)

OUT = os.path.join(ROOT, "target", "bench", "tls")
# bench.Bench.save writes BENCH/results.json: ours is target/bench/tls/results.json.
bench.BENCH = OUT
PKI_DIR = os.path.join(OUT, "pki")
HOST = bench.HOST
RECORD_BYTES = 1024
LAT_RATE = 5000
TARGETS = ["es-plaintext", "es-ssl", "es-sasl_ssl", "kafka-sasl_ssl"]
KINDS = ["produce", "latency", "consume", "connect"]
PROFILES = {
    "quick": dict(rounds=2, produce_records=50_000, consume_records=100_000, lat_s=2.0,
                  warm_records=50_000),
    "full": dict(rounds=5, produce_records=300_000, consume_records=500_000, lat_s=6.0,
                 warm_records=200_000),
}


def log(msg):
    print(f"[bench-tls {time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


T0 = time.monotonic()


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def sh(cmd):
    """What a shell command prints ('' if it fails or takes over two minutes)."""
    try:
        out = subprocess.check_output(cmd, shell=True, text=True, cwd=ROOT, timeout=120,
                                      stderr=subprocess.DEVNULL)
    except (subprocess.SubprocessError, OSError):
        return ""
    return out.strip()


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class EsBroker(bench.Broker):
    """es-broker with listeners of its own (bench.Broker starts es with one --listen). The
    PLAINTEXT listener is `port`, which bench.Broker checks readiness on."""

    def __init__(self, port, data_dir, flags, sec):
        super().__init__("es", port, data_dir)
        self.flags, self.sec = flags, sec

    def start_fresh(self, extra_sets=(), long_session=True):
        shutil.rmtree(self.data_dir, ignore_errors=True)
        os.makedirs(self.data_dir)
        with contextlib.redirect_stdout(sys.stderr):  # security.log prints; stdout is the table
            self.sec.es_make_keys(bench.ES_BIN, self.data_dir)
        self.cmdline = [bench.ES_BIN, "--data-dir", self.data_dir, *self.flags]
        self.logf = open(os.path.join(OUT, "es.log"), "ab")
        t = time.monotonic()
        self.proc = subprocess.Popen(self.cmdline, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        self.pid = self.proc.pid
        self.wait_listening(t)
        log(f"es serving (pid {self.pid}): {' '.join(self.flags[:6])}")


class Target:
    """One broker reached through one listener, with the librdkafka settings for it."""

    def __init__(self, name, broker, port, sec=None, tls=False):
        self.name, self.broker, self.port = name, broker, port
        self.protocol = name.split("-", 1)[1].upper()
        cfg = {}
        if tls:
            cfg.update({"security.protocol": self.protocol, "ssl.ca.location": sec.pki["ca"]})
        if sec is not None and self.protocol.startswith("SASL"):
            user, secret = sec.creds[security.TEST]["PLAIN"]
            cfg.update({"sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": secret})
        self.client_config = cfg

    @property
    def bootstrap(self):
        return f"{HOST}:{self.port}"

    def loadgen_args(self):
        return [a for k, v in self.client_config.items() for a in ("--client-config", f"{k}={v}")]


class TlsBench(bench.Bench):
    """bench.Bench's brokers, topics and pausing (alone, create_topic, delete_topic) with
    brokers that have TLS and SASL listeners, and runs gated on the load average."""

    def __init__(self, args):
        self.args = args
        self.p = dict(PROFILES["quick" if args.quick else "full"])
        if args.rounds:
            self.p["rounds"] = args.rounds
        self.idempotence = False
        self.wait_left = args.max_wait_s
        self.said_exhausted = False
        self.results = {"meta": {}, "runs": {k: {t: [] for t in TARGETS} for k in KINDS},
                        "warmup": {}}
        # These ports lie in the kernel's ephemeral range, where a client elsewhere on the
        # machine may hold one for a while: the first base (in steps of 20) with all five free.
        base = next((b for b in range(args.port_base, args.port_base + 400, 20)
                     if all(bench.port_free(b + i) for i in (0, 1, 2, 10, 12))), args.port_base)
        pki_paths = pki.ensure(PKI_DIR)
        # compat-tests' sasl_ssl mode: PLAIN users admin (super user) and test; the clients
        # log in as test. One Security per broker: es's PLAIN passwords are API keys. (Security()
        # also makes sure of compat-tests' own PKI, target/compat/pki; ours replaces it.)
        self.sec = {}
        for system in ("es", "kafka"):
            s = security.Security("sasl_ssl", "PLAIN")
            s.pki = pki_paths
            self.sec[system] = s
        es_ports = {"PLAINTEXT": base, "SSL": base + 1, "SASL_SSL": base + 2}
        flags = [a for proto, port in es_ports.items() for a in ("--listener", f"{proto}://{HOST}:{port}")]
        # As security.Security.es_args, for three listeners; the chain (broker, CA) as Kafka's
        # PKCS#12 key store sends it.
        flags += ["--ssl-cert", pki_paths["broker_chain"], "--ssl-key", pki_paths["broker_key"],
                  "--ssl-ca", pki_paths["ca"]]
        for k, v in self.sec["es"].settings(()):
            flags += ["--set", f"{k}={v}"]
        self.es = EsBroker(es_ports["PLAINTEXT"], os.path.join(OUT, "data", "es"), flags, self.sec["es"])
        kplain, ksasl = base + 10, base + 12
        self.kafka = bench.Broker("kafka", kplain, os.path.join(OUT, "data", "kafka"))
        cport = free_port()
        # security.py's SASL_SSL listener (the broker's own inter-broker listener too), plus a
        # PLAINTEXT one for the harness; later lines win in kafka-ref's server.properties.
        self.kafka_sets = self.sec["kafka"].kafka_sets(ksasl, cport, ()) + [
            f"listeners=SASL_SSL://{HOST}:{ksasl},PLAINTEXT://{HOST}:{kplain},CONTROLLER://{HOST}:{cport}",
            f"advertised.listeners=SASL_SSL://{HOST}:{ksasl},PLAINTEXT://{HOST}:{kplain}",
            "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT",
        ]
        self.ports = {"es": es_ports, "kafka": {"PLAINTEXT": kplain, "SASL_SSL": ksasl, "CONTROLLER": cport}}

    def make_targets(self):
        # After es started: its SASL passwords are the API keys made then.
        es, k = self.ports["es"], self.ports["kafka"]
        self.targets = {
            "es-plaintext": Target("es-plaintext", self.es, es["PLAINTEXT"]),
            "es-ssl": Target("es-ssl", self.es, es["SSL"], self.sec["es"], tls=True),
            "es-sasl_ssl": Target("es-sasl_ssl", self.es, es["SASL_SSL"], self.sec["es"], tls=True),
            "kafka-sasl_ssl": Target("kafka-sasl_ssl", self.kafka, k["SASL_SSL"], self.sec["kafka"], tls=True),
        }

    # ------------------------------------------------------------ runs

    def wait_quiet(self):
        """Waits while the 1-minute load average is at or above --load-max, out of what is left
        of --max-wait-s; returns (load average seen at the start of the run, seconds waited)."""
        t = time.monotonic()
        la = loadavg()
        said = False
        while la[0] >= self.args.load_max and self.wait_left > 0:
            if not said:
                log(f"  load average {la[0]:.2f} >= {self.args.load_max}: waiting "
                    f"(at most {self.wait_left:.0f} s left to wait in this invocation)")
                said = True
            step = min(5.0, self.wait_left)
            time.sleep(step)
            self.wait_left -= step
            la = loadavg()
        if la[0] >= self.args.load_max and not self.said_exhausted:
            self.said_exhausted = True
            log(f"  load average {la[0]:.2f}, and the {self.args.max_wait_s:.0f} s of waiting are spent: "
                "measuring anyway (the load is recorded with every figure)")
        return la, time.monotonic() - t

    def loadgen(self, tgt, cmd, args, measured=True):
        """One es-loadgen run against a target, the other broker paused; returns its JSON
        with the broker's CPU and memory and the load average seen before it."""
        b = tgt.broker
        argv = [bench.LOADGEN, cmd, "--bootstrap", tgt.bootstrap, *map(str, args), *tgt.loadgen_args()]
        la, waited = self.wait_quiet() if measured else (loadavg(), 0.0)
        dirty = bench.dirty_mb()
        os.sync()
        with self.alone(b), bench.Sampler(b.pid) as s:
            rc, out, err, wall, gen_cpu = bench.run_cmd(argv)
        try:
            r = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            r = {"ok": False, "error": (err or out)[-800:]}
        r.pop("curve", None)
        if isinstance(r.get("latency"), dict):
            r["latency"].pop("curve", None)
        r.update(target=tgt.name, rc=rc, wall_s=round(wall, 3), gen_cpu_s=round(gen_cpu, 3),
                 broker_cpu_s=round(s.cpu_s, 3), broker_rss_peak_mb=round(s.peak / 1024, 1),
                 dirty_before_mb=round(dirty, 1), loadavg_before=la, waited_s=round(waited, 1),
                 loadavg_after=loadavg(), wall_ms=round(wall * 1e3, 1), broker_cpu_ms=s.cpu_s * 1e3)
        if r.get("ok") and r.get("bytes"):
            r["broker_cpu_s_per_gb"] = s.cpu_s / (r["bytes"] / 1e9)
            r["gen_cpu_s_per_gb"] = gen_cpu / (r["bytes"] / 1e9)
        elif not r.get("ok"):
            log(f"  {tgt.name} {cmd} FAILED: {str(r.get('error', ''))[:400]}")
        return r

    def produce_args(self, tgt, **kw):
        args = ["--topic", f"produce-{tgt.name}", "--partitions", 1, "--producers", 1,
                "--record-size", RECORD_BYTES, "--linger-ms", bench.LINGER_MS,
                "--batch-size", bench.BATCH_BYTES, "--acks", "all", "--timeout-s", 240,
                "--connect-first", "true"]
        for k, v in kw.items():
            args += [f"--{k.replace('_', '-')}", v]
        return args

    def run_one(self, kind, tgt, measured=True):
        p = self.p
        if kind == "produce":
            args = self.produce_args(tgt, records=p["produce_records"] if measured else p["warm_records"])
        elif kind == "latency":
            args = self.produce_args(tgt, rate=LAT_RATE, duration_s=p["lat_s"] if measured else 1.0)
        else:
            # connect: a consumer that connects (bootstrap, then the leader) and reads nothing.
            n = p["consume_records"] if kind == "consume" else 0
            args = ["--topic", "consume", "--partitions", 1, "--records", n,
                    "--timeout-s", 240, "--connect-first", "true"]
        return self.loadgen(tgt, "produce" if kind in ("produce", "latency") else "consume", args, measured)

    # ------------------------------------------------------------ the run

    def setup(self):
        """Brokers, topics, the consume topics filled, one uncounted run of each kind."""
        os.makedirs(OUT, exist_ok=True)
        self.es.start_fresh()
        self.kafka.start_fresh(extra_sets=self.kafka_sets)
        self.make_targets()
        self.results["meta"] = self.meta()
        self.save()
        p = self.p
        for system in ("es", "kafka"):
            for t in TARGETS:
                if t.startswith(system):
                    self.create_topic(system, f"produce-{t}", 1)
            self.create_topic(system, "consume", 1)
            # Filled through the PLAINTEXT listener: only the reading is measured.
            fill = Target(f"{system}-plaintext", self.broker(system), self.ports[system]["PLAINTEXT"])
            r = self.loadgen(fill, "produce", ["--topic", "consume", "--partitions", 1, "--records",
                                               p["consume_records"], "--record-size", RECORD_BYTES,
                                               "--timeout-s", 240], measured=False)
            if not r.get("ok"):
                raise RuntimeError(f"filling {system}'s consume topic failed: {r.get('error')}")
            log(f"filled {system}'s consume topic: {p['consume_records']:,} records of 1 KiB")
        # Kafka's JIT needs seconds of traffic, over TLS too; es's page cache and the
        # listeners' first connections likewise. Not counted.
        for t in TARGETS:
            tgt = self.targets[t]
            w = {kind: self.run_one(kind, tgt, measured=False) for kind in KINDS}
            self.results["warmup"][t] = w
            log(f"warmed {t} up: produce {w['produce'].get('records_per_s', 0):,.0f}/s, consume "
                f"{w['consume'].get('records_per_s', 0):,.0f}/s")
            if not all(x.get("ok") for x in w.values()):
                raise RuntimeError(f"warm-up of {t} failed; see the log above")
        self.save()

    def run(self):
        bench.atexit_register()
        self.setup()
        for i in range(self.p["rounds"]):
            for kind in KINDS:
                for t in bench.round_order(i, TARGETS):
                    r = self.run_one(kind, self.targets[t])
                    r["round"] = i
                    self.results["runs"][kind][t].append(r)
                    self.save()
                log(f"round {i + 1}/{self.p['rounds']} {kind}: " + " | ".join(
                    f"{t} {describe(kind, self.results['runs'][kind][t][-1])}" for t in TARGETS))
        self.results["summary"] = summary(self.results["runs"])
        self.results["table"] = table(self.results)
        for system in ("es", "kafka"):
            for t in TARGETS:
                if t.startswith(system):
                    self.delete_topic(system, f"produce-{t}")
        self.es.stop()
        self.kafka.stop()
        shutil.rmtree(os.path.join(OUT, "data"), ignore_errors=True)
        self.results["meta"]["loadavg_end"] = loadavg()
        self.results["meta"]["load_wait_left_s"] = round(self.wait_left, 1)
        self.results["meta"]["elapsed_s"] = round(time.monotonic() - T0, 1)
        self.save()
        print(self.results["table"])
        log(f"done in {self.results['meta']['elapsed_s']:.0f} s: target/bench/tls/results.json")

    def meta(self):
        with open(bench.ES_BIN, "rb") as f:
            es_sha = hashlib.sha256(f.read()).hexdigest()[:16]
        tls = {}
        for t in ("es-ssl", "es-sasl_ssl", "kafka-sasl_ssl"):
            # What librdkafka's OpenSSL negotiates by default, seen by openssl s_client.
            out = sh(f"openssl s_client -brief -connect {self.targets[t].bootstrap} "
                     f"-CAfile {self.sec['es'].pki['ca']} </dev/null 2>&1")
            tls[t] = "; ".join(l.strip() for l in out.splitlines()
                               if l.startswith(("Protocol version", "Ciphersuite", "Peer signature type")))
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["benches/tls/run"] + sys.argv[1:]),
            "profile": dict(self.p, quick=self.args.quick),
            "load_gate": {"max_1min": self.args.load_max, "max_wait_s": self.args.max_wait_s},
            "machine": {"nproc": os.cpu_count(), "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
                        "aes_ni": " aes " in open("/proc/cpuinfo").read(),
                        "memory": sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo"),
                        "kernel": platform.release(), "disk": sh(f"findmnt -n -o SOURCE,FSTYPE -T {OUT}"),
                        "loadavg_start": loadavg()},
            # HEAD when the run starts; the binary may be older (--no-build): its time says.
            "versions": {"es_git": sh("git rev-parse --short HEAD"), "es_bin_sha256": es_sha,
                         "es_bin_mtime": datetime.datetime.fromtimestamp(
                             os.path.getmtime(bench.ES_BIN), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                         "es_tree_dirty": sh("git status --porcelain --untracked-files=no -- crates "
                                             "Cargo.toml Cargo.lock").splitlines(),
                         "kafka": sh(f"{bench.KREF} version 2>/dev/null"),
                         "java": sh("java -version 2>&1 | head -1"),
                         "librdkafka": "2.12.1 (rdkafka 0.39.0, rdkafka-sys 4.10.0, feature ssl)",
                         "openssl": sh("openssl version")},
            "tls_negotiated": tls,
            "ports": self.ports,
            "settings": {
                "producer": f"1 producer, 1 partition, {RECORD_BYTES} B records, acks=all, linger.ms="
                            f"{bench.LINGER_MS}, batch.size={bench.BATCH_BYTES}, max.in.flight 5, "
                            "no compression, no idempotence",
                "latency_rate": LAT_RATE,
                "es": "defaults (fsync before every acknowledgement); listeners PLAINTEXT, SSL "
                      "(no client certificates), SASL_SSL (PLAIN with an API key)",
                "kafka": "scripts/kafka-ref (no fsync before acknowledging, -Xmx1G); "
                         "compat-tests/lib/security.py sasl_ssl settings (PKCS#12 key store, "
                         "PLAIN JAAS users)",
                "sasl": "PLAIN as User:test; TLS without client certificates",
                "other_broker": "paused (SIGSTOP) during each measured run",
            },
        }


def describe(kind, r):
    if not r.get("ok"):
        return "FAILED"
    la = r["loadavg_before"][0]
    if kind == "connect":
        return f"{r['wall_ms']:.0f} ms, broker {r['broker_cpu_ms']:.0f} ms CPU (load {la:.2f})"
    if kind == "latency":
        return f"p50/p99 {r['latency']['p50_us'] / 1e3:.2f}/{r['latency']['p99_us'] / 1e3:.2f} ms (load {la:.2f})"
    return f"{r['records_per_s']:,.0f}/s (load {la:.2f})"


# ---------------------------------------------------------------- summary

METRICS = {
    "produce": ["records_per_s", "mb_per_s", "latency.p50_us", "latency.p99_us",
                "broker_cpu_s_per_gb", "gen_cpu_s_per_gb", "broker_rss_peak_mb", "connect_ms"],
    "latency": ["latency.p50_us", "latency.p99_us", "latency.p999_us", "behind_ms",
                "broker_cpu_s_per_gb"],
    "consume": ["records_per_s", "mb_per_s", "broker_cpu_s_per_gb", "gen_cpu_s_per_gb",
                "broker_rss_peak_mb", "connect_ms"],
    "connect": ["wall_ms", "broker_cpu_ms", "connect_ms"],
}


def summary(runs):
    """Medians per target; per-round ratios and their medians: es/Kafka over SASL_SSL, and
    es's SSL and SASL_SSL against its PLAINTEXT (cost = 1 - ratio, in percent)."""
    out = {}
    for kind, keys in METRICS.items():
        ok = {t: [r for r in rs if r.get("ok")] for t, rs in runs[kind].items()}
        s = {"median": bench.summarize(ok, keys), "ratios": {},
             "loadavg_1min": {t: [r["loadavg_before"][0] for r in rs] for t, rs in runs[kind].items()},
             "failed": {t: sum(1 for r in rs if not r.get("ok")) for t, rs in runs[kind].items()}}
        # Pairs by round (a failed run leaves its round out).
        by_round = {t: {r["round"]: r for r in rs} for t, rs in ok.items()}
        pairs = [("es-sasl_ssl", "kafka-sasl_ssl"), ("es-ssl", "es-plaintext"),
                 ("es-sasl_ssl", "es-plaintext")]
        for num, den in pairs:
            for k in keys:
                rounds = sorted(set(by_round[num]) & set(by_round[den]))
                xs = [bench.ratio(bench.get(by_round[num][i], k), bench.get(by_round[den][i], k))
                      for i in rounds]
                s["ratios"][f"{k} {num}/{den}"] = {"rounds": xs, "median": bench.median(xs)}
        out[kind] = s
    return out


def table(results):
    s = results["summary"]
    m = results["meta"]

    def med(kind, t, k):
        return s[kind]["median"][t][k]

    def rat(kind, k, num, den):
        return s[kind]["ratios"][f"{k} {num}/{den}"]["median"]

    def n(x, nd=0):
        return "-" if x is None else f"{x:,.{nd}f}"

    def ms(x):
        return "-" if x is None else f"{x / 1e3:.2f}"

    def load(kind, t):
        xs = s[kind]["loadavg_1min"][t]
        return f"{min(xs):.2f}-{max(xs):.2f}" if xs else "-"

    def change(kind, k, num):
        r = rat(kind, k, num, "es-plaintext")
        return "-" if r is None else f"{(r - 1) * 100:+.0f}%"

    es, ka = "es-sasl_ssl", "kafka-sasl_ssl"
    rows = [
        ("produce, records/s", "produce", "records_per_s", n),
        ("produce, MB/s", "produce", "mb_per_s", lambda x: n(x, 1)),
        ("produce at full speed, p50 latency (ms)", "produce", "latency.p50_us", ms),
        ("produce at full speed, p99 latency (ms)", "produce", "latency.p99_us", ms),
        (f"produce at {LAT_RATE:,} records/s, p50 latency (ms)", "latency", "latency.p50_us", ms),
        (f"produce at {LAT_RATE:,} records/s, p99 latency (ms)", "latency", "latency.p99_us", ms),
        (f"produce at {LAT_RATE:,} records/s, p99.9 latency (ms)", "latency", "latency.p999_us", ms),
        ("consume, records/s", "consume", "records_per_s", n),
        ("consume, MB/s", "consume", "mb_per_s", lambda x: n(x, 1)),
        ("broker CPU s per GB produced", "produce", "broker_cpu_s_per_gb", lambda x: n(x, 2)),
        ("broker CPU s per GB consumed", "consume", "broker_cpu_s_per_gb", lambda x: n(x, 2)),
        ("load generator CPU s per GB produced", "produce", "gen_cpu_s_per_gb", lambda x: n(x, 2)),
        ("load generator CPU s per GB consumed", "consume", "gen_cpu_s_per_gb", lambda x: n(x, 2)),
        ("a consumer connecting and reading nothing: load generator wall time (ms)", "connect",
         "wall_ms", lambda x: n(x, 1)),
        ("the same: broker CPU (ms, in 10 ms clock ticks)", "connect", "broker_cpu_ms", lambda x: n(x, 0)),
    ]
    p = m["profile"]
    lines = [f"SASL_SSL (PLAIN), 1 KiB records, 1 producer / 1 consumer, 1 partition, acks=all; "
             f"medians of {p['rounds']} rounds; produce {p['produce_records']:,} records a run, "
             f"consume {p['consume_records']:,}",
             "", "| | es SASL_SSL | Kafka SASL_SSL | es / Kafka (median of the rounds' ratios) |",
             "| --- | --- | --- | --- |"]
    for label, kind, k, f in rows:
        lines.append(f"| {label} | {f(med(kind, es, k))} | {f(med(kind, ka, k))} | "
                     f"{n(rat(kind, k, es, ka), 2)} |")
    lines.append(f"| 1-min load average before the runs (produce / consume) | {load('produce', es)} / "
                 f"{load('consume', es)} | {load('produce', ka)} / {load('consume', ka)} | |")
    lines += ["", "es alone: PLAINTEXT, SSL, SASL_SSL. Change against PLAINTEXT: ratio - 1 in each "
                  "round, median (a throughput 50% lower is a TLS cost of 50%)",
              "", "| | PLAINTEXT | SSL | SASL_SSL | SSL vs PLAINTEXT | SASL_SSL vs PLAINTEXT |",
              "| --- | --- | --- | --- | --- | --- |"]
    for label, kind, k, f in rows:
        cs = [change(kind, k, t) for t in ("es-ssl", "es-sasl_ssl")]
        lines.append(f"| {label} | {f(med(kind, 'es-plaintext', k))} | {f(med(kind, 'es-ssl', k))} | "
                     f"{f(med(kind, 'es-sasl_ssl', k))} | {cs[0]} | {cs[1]} |")
    lines.append("| 1-min load average before the runs (produce / consume) | " + " | ".join(
        f"{load('produce', t)} / {load('consume', t)}" for t in ("es-plaintext", "es-ssl", "es-sasl_ssl"))
        + " | | |")
    failed = {k: {t: c for t, c in v["failed"].items() if c} for k, v in s.items()}
    failed = {k: v for k, v in failed.items() if v}
    if failed:
        lines += ["", f"failed runs (left out): {failed}"]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(prog="benches/tls/run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 rounds, fewer records")
    ap.add_argument("--rounds", type=int, default=0, help="rounds (default 5, --quick 2)")
    ap.add_argument("--load-max", type=float, default=1.5,
                    help="wait before a measured run while the 1-minute load average is at or above this")
    ap.add_argument("--max-wait-s", type=float, default=1200.0,
                    help="seconds of such waiting at most, over the whole invocation")
    ap.add_argument("--port-base", type=int, default=int(os.environ.get("ES_BENCH_TLS_PORT_BASE", "39700")),
                    help="es listens on this and the next two ports, Kafka on +10 and +12 "
                         "(if one is taken, the next base 20 higher)")
    TlsBench(ap.parse_args()).run()


if __name__ == "__main__":
    main()
