"""The processes of the migration trial: the source Apache Kafka (through scripts/kafka-ref), the
target es-broker (a release build from this tree) and MirrorMaker 2 (org.apache.kafka.connect.mirror.
MirrorMaker from the jars compat-tests/migration/prepare fetched).

Each class starts one process on the trial's fixed ports (common.PORTS) with its data and logs
under target/migration/, checks that it serves, and stops it: stop() is safe to call twice and
after a failed start, so the trial's finally-block stops everything it started. Kafka runs with
its jars and instance directory under target/migration/ (CARGO_TARGET_DIR is set so for
scripts/kafka-ref only). The benchmark (compat-tests/migration/bench) gives other ports and
another folder through the constructors' keyword arguments; the trial uses the defaults.
"""
import os
import signal
import socket
import subprocess

from common import OUT, PORTS, REPO, TrialError, log, wait_for

KAFKA_REF = os.path.join(REPO, "scripts", "kafka-ref")
LOG4J = os.path.join(REPO, "scripts", "kafka", "log4j2.properties")
READY_TIMEOUT_S = 90
STOP_TIMEOUT_S = 60


def port_answers(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def stop_process(proc, name):
    """SIGTERM, a bounded wait, then SIGKILL. Returns the exit code (or 'killed')."""
    if proc is None or proc.poll() is not None:
        return None if proc is None else proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log(f"{name} ignored SIGTERM for {STOP_TIMEOUT_S}s; killing it")
        proc.kill()
        proc.wait()
        code = "killed"
    log(f"{name} stopped, exit {code}")
    return code


class Kafka:
    """Single-node KRaft Apache Kafka from scripts/kafka-ref on PORTS['kafka'], its controller on
    PORTS['kafka_controller'], with the log cleaner polling every second (so a compacted topic
    with small segment.ms is really compacted during the trial)."""

    def __init__(self, port=None, controller_port=None, out=OUT):
        self.port = port or PORTS["kafka"]
        self.controller_port = controller_port or PORTS["kafka_controller"]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.out = out
        self.dir = os.path.join(out, "kafka-ref", str(self.port))
        self.env = {**os.environ, "CARGO_TARGET_DIR": out}
        self.started = False

    def version(self):
        p = subprocess.run([KAFKA_REF, "version"], env=self.env, capture_output=True, text=True)
        return p.stdout.strip()

    def start(self):
        cport = self.controller_port
        if port_answers(self.port) or port_answers(cport):
            raise TrialError(f"port {self.port} or {cport} is already in use: another trial running?")
        sets = [f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{cport}",
                f"controller.quorum.voters=0@127.0.0.1:{cport}",
                "log.cleaner.backoff.ms=1000",
                "auto.create.topics.enable=false"]
        self.started = True
        p = subprocess.run([KAFKA_REF, "start", "--port", str(self.port),
                            *(a for kv in sets for a in ("--set", kv))],
                           env=self.env, capture_output=True, text=True, timeout=READY_TIMEOUT_S + 60)
        if p.returncode != 0:
            raise TrialError(f"scripts/kafka-ref start failed: {p.stderr[-1500:]}")
        log(f"Apache Kafka {self.version()} serving {self.bootstrap} "
            f"(dir {self.dir})")
        return self.bootstrap

    def pid(self):
        """The broker's process id (scripts/kafka-ref keeps it in the instance dir), or None."""
        try:
            with open(os.path.join(self.dir, "pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def stop(self):
        if not self.started:
            return
        self.started = False
        subprocess.run([KAFKA_REF, "stop", "--port", str(self.port)], env=self.env,
                       capture_output=True, timeout=STOP_TIMEOUT_S + 30)
        log("Apache Kafka stopped")


class EsBroker:
    """A release es-broker built from this tree (cargo build --release -p es-broker, in
    $CARGO_TARGET_DIR or target/) on PORTS['es'], with a fresh --data-dir under target/migration/
    (or the port and the data dir and log given). Its other services are turned off with `none`
    when this build has those flags."""

    def __init__(self, binary=None, build=True, port=None, data=None, log_path=None):
        tdir = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
        self.binary = binary or os.path.join(tdir, "release", "es-broker")
        self.build_first = build and binary is None
        self.port = port or PORTS["es"]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.data = data or os.path.join(OUT, "es-data")
        self.log_path = log_path or os.path.join(OUT, "es-broker.log")
        self.proc = None
        self.exit_code = None

    def build(self):
        if self.build_first:
            log("building es-broker (release)")
            subprocess.run(["cargo", "build", "--release", "-q", "-p", "es-broker", "-j2"], cwd=REPO, check=True)
        if not os.path.exists(self.binary):
            raise TrialError(f"no es-broker at {self.binary}")

    def help_text(self, *sub):
        p = subprocess.run([self.binary, *sub, "--help"], capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout + p.stderr

    def version(self):
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "crates"], cwd=REPO, capture_output=True, text=True)
        return f"es {rev.stdout.strip()}{'+dirty' if dirty.stdout.strip() else ''} (release)"

    def start(self, fresh=True):
        if port_answers(self.port):
            raise TrialError(f"port {self.port} is already in use: another trial running?")
        if fresh:
            subprocess.run(["rm", "-rf", self.data], check=True)
        os.makedirs(self.data, exist_ok=True)
        _, helptext = self.help_text()
        extra = []
        for flag in ("--schema-registry-listen", "--admin-listen"):
            if flag in helptext:
                extra += [flag, "none"]
        self.proc = subprocess.Popen(
            [self.binary, "--data-dir", self.data, "--listen", self.bootstrap, *extra],
            stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def ready():
            if self.proc.poll() is not None:
                raise TrialError(f"es-broker exited {self.proc.returncode} during start-up (log {self.log_path})")
            return port_answers(self.port)
        wait_for("es-broker to serve", ready, READY_TIMEOUT_S, 0.1)
        log(f"{self.version()} serving {self.bootstrap} (pid {self.proc.pid}, data {self.data}, "
            f"flags {' '.join(extra) or '(none extra)'})")
        return self.bootstrap

    def check_alive(self):
        if self.proc is not None and self.proc.poll() is not None:
            raise TrialError(f"es-broker exited {self.proc.returncode} (log {self.log_path})")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.exit_code = stop_process(self.proc, "es-broker")
        self.proc = None


class MirrorMaker:
    """MirrorMaker 2 in dedicated mode (org.apache.kafka.connect.mirror.MirrorMaker PROPS), one
    process per replication flow, its properties file and log under target/migration/ (or out),
    with a heap of at most 512 MiB unless other JVM options are given (jvm_opts)."""

    def __init__(self, lib_dir, name, props, out=OUT, jvm_opts=("-Xmx512M",)):
        self.lib = lib_dir
        self.name = name
        self.props_path = os.path.join(out, f"{name}.properties")
        self.log_path = os.path.join(out, f"{name}.log")
        self.props = props
        self.jvm_opts = list(jvm_opts)
        self.proc = None
        self.exit_code = None

    def start(self):
        with open(self.props_path, "w") as f:
            f.write(f"# MirrorMaker 2 for the migration trial ({self.name}), written by compat-tests/migration\n")
            for k, v in self.props:
                f.write(f"{k} = {v}\n")
        self.proc = subprocess.Popen(
            ["java", *self.jvm_opts, "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={LOG4J}",
             "-cp", f"{self.lib}/*", "org.apache.kafka.connect.mirror.MirrorMaker", self.props_path],
            stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log(f"MirrorMaker 2 {self.name} started (pid {self.proc.pid}, {self.props_path}, log {self.log_path})")

    def check_alive(self):
        if self.proc is not None and self.proc.poll() is not None:
            raise TrialError(f"MirrorMaker 2 {self.name} exited {self.proc.returncode} (log {self.log_path})")

    def log_lines(self, *needles):
        try:
            with open(self.log_path, errors="replace") as f:
                return [line.rstrip() for line in f if any(n in line for n in needles)]
        except FileNotFoundError:
            return []

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.exit_code = stop_process(self.proc, f"MirrorMaker 2 {self.name}")
        self.proc = None
