"""brokers: the one broker a matrix run talks to, started with SASL/PLAIN and an authorizer.

Both brokers get the same configuration: one SASL_PLAINTEXT listener for clients on a free
loopback port, PLAIN as the only mechanism, StandardAuthorizer, `super.users=User:admin`,
`allow.everyone.if.no.acl.found` false (or true for the second pass), one partition per
auto-created topic and one partition for each internal topic (es's defaults).

- Kafka (scripts/kafka-ref start, Kafka 4.4): the client listener's JAAS config holds the four
  users (admin, alice, bob, carol) with passwords `<user>-secret`. A KRaft node with an
  authorizer must reach its own controller as a super user (BrokerRegistration and the
  forwarded admin requests need CLUSTER_ACTION, and a controller answers only super users
  until its authorizer has loaded the ACLs from the metadata log: compat-tests/lib/
  kafka_cluster.py's CONTROLLER_SASL), so the controller listener is SASL_PLAINTEXT too and
  the broker logs in to it as admin; inter-broker traffic (the transaction coordinator's
  WriteTxnMarkers to itself) goes over the client listener as admin. kafka-ref writes its own
  PLAINTEXT listeners first; the settings here come after them and win (a properties file
  keeps the last value of a key).
- es (target/debug/es-broker): PLAIN authenticates API keys. Before start, `es-broker keys
  create --data-dir D --principal User:<user>` makes one key per user and prints `KEY_ID
  SECRET`: the username is the key's id, the password its secret.

Each broker object keeps the principal -> (username, password) table its users log in with.
"""
import os
import shutil
import signal
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KAFKA_REF = os.path.join(REPO, "scripts", "kafka-ref")
ES_BROKER = os.path.join(REPO, "target", "debug", "es-broker")
OUT = os.path.join(REPO, "target", "compat", "acl-matrix")
USERS = ("admin", "alice", "bob", "carol")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
READY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


def free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_answers(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def log(msg):
    print(f"acl-matrix: {msg}", flush=True)


def common_settings(allow_if_no_acl):
    return [
        "sasl.enabled.mechanisms=PLAIN",
        f"authorizer.class.name={AUTHORIZER}",
        "super.users=User:admin",
        f"allow.everyone.if.no.acl.found={'true' if allow_if_no_acl else 'false'}",
    ]


def jaas(username, password, users):
    entries = " ".join(f'user_{u}="{p}"' for u, p in users)
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{username}" password="{password}" {entries};')


class KafkaBroker:
    name = "kafka"

    def __init__(self, allow_if_no_acl):
        self.allow_if_no_acl = allow_if_no_acl
        self.port, self.cport = free_ports(2)
        self.users = {f"User:{u}": (u, f"{u}-secret") for u in USERS}
        self.addr = f"127.0.0.1:{self.port}"
        self.started = False

    def settings(self):
        users = [(u, p) for u, p in self.users.values()]
        admin = self.users["User:admin"]
        return [
            f"listeners=SASL_PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.cport}",
            f"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{self.port}",
            f"controller.quorum.voters=0@127.0.0.1:{self.cport}",
            "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name=SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            "sasl.mechanism.controller.protocol=PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas(*admin, users)}",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            f"listener.name.controller.plain.sasl.jaas.config={jaas(*admin, [admin])}",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.num.partitions=1",
            *common_settings(self.allow_if_no_acl),
        ]

    def start(self):
        argv = [KAFKA_REF, "start", "--port", str(self.port)]
        for kv in self.settings():
            argv += ["--set", kv]
        log(f"starting Apache Kafka on {self.addr} (allow.everyone.if.no.acl.found="
            f"{str(self.allow_if_no_acl).lower()})")
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"kafka-ref start failed: {p.stderr[-1500:]}")
        self.started = True

    def version(self):
        return subprocess.run([KAFKA_REF, "version"], capture_output=True, text=True).stdout.strip()

    def stop(self):
        if self.started:
            subprocess.run([KAFKA_REF, "stop", "--port", str(self.port)], capture_output=True)
            self.started = False


class EsBroker:
    name = "es"

    def __init__(self, allow_if_no_acl, binary=ES_BROKER):
        self.allow_if_no_acl = allow_if_no_acl
        self.binary = binary
        (self.port,) = free_ports(1)
        self.addr = f"127.0.0.1:{self.port}"
        self.dir = os.path.join(OUT, f"es-{self.port}")
        self.data = os.path.join(self.dir, "data")
        self.users = {}
        self.proc = None

    def create_keys(self):
        for u in USERS:
            p = subprocess.run([self.binary, "keys", "create", "--data-dir", self.data,
                                "--principal", f"User:{u}"], capture_output=True, text=True, timeout=60)
            words = p.stdout.split()
            if p.returncode != 0 or len(words) != 2:
                raise RuntimeError(f"es-broker keys create --principal User:{u} failed (exit {p.returncode}): "
                                   f"{(p.stdout + p.stderr)[-800:]}")
            self.users[f"User:{u}"] = (words[0], words[1])

    def start(self):
        if not os.path.exists(self.binary):
            raise RuntimeError(f"{self.binary} is missing: cargo build -p es-broker")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.data)
        self.create_keys()
        argv = [self.binary, "--data-dir", self.data,
                "--listener", f"SASL_PLAINTEXT://127.0.0.1:{self.port}",
                "--listener-security-protocol-map", "SASL_PLAINTEXT:SASL_PLAINTEXT"]
        for kv in common_settings(self.allow_if_no_acl):
            argv += ["--set", kv]
        log(f"starting es on {self.addr} (allow.everyone.if.no.acl.found="
            f"{str(self.allow_if_no_acl).lower()}; log {self.dir}/es-broker.log)")
        with open(os.path.join(self.dir, "es-broker.log"), "w") as logf:
            self.proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with open(os.path.join(self.dir, "es-broker.log")) as f:
                    tail = f.read().split("Stack backtrace:")[0].strip()[-1500:]
                raise RuntimeError(f"es-broker exited {self.proc.returncode} during start-up: {tail}")
            if port_answers(self.port):
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"es-broker did not listen on {self.addr} within {READY_TIMEOUT_S}s")

    def version(self):
        p = subprocess.run([self.binary, "--version"], capture_output=True, text=True)
        return p.stdout.strip() or "es-broker"

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def make(name, allow_if_no_acl):
    return {"kafka": KafkaBroker, "es": EsBroker}[name](allow_if_no_acl)
