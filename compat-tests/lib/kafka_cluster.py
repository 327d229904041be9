#!/usr/bin/env python3
"""compat-tests/lib/kafka_cluster.py: the reference Apache Kafka cluster of compat-tests, N combined
KRaft nodes (process.roles=broker,controller, N static voters, one cluster id).

It owns how such a node is configured (node_properties), formatted (format_nodes) and started
(node_command), shared by compat-tests/faults/run (its nodes run in network namespaces) and by
this file's loopback cluster, which compat-tests/run starts for `--against kafka --cluster N` and
which a suite bounces a node of through the command line (COMPAT_CLUSTER_CTL):

  kafka_cluster.py DIR start --nodes N [--set KEY=VALUE ...]
                                  format N fresh nodes in DIR, start them, wait until every node
                                  serves, print the bootstrap list (127.0.0.1:PORT,...)
  kafka_cluster.py DIR stop       SIGTERM every node at once (a KRaft node stopping alone waits
                                  for a quorum that is leaving), bounded wait, then SIGKILL
  kafka_cluster.py DIR kill I     SIGKILL node I (a crash), wait until it is gone
  kafka_cluster.py DIR term I     SIGTERM node I, bounded wait (then SIGKILL)
  kafka_cluster.py DIR restart I  start node I again on the same data, wait until it serves
  kafka_cluster.py DIR bootstrap  print the bootstrap list
  kafka_cluster.py DIR status     one line per node: id, ports, pid, running or not

Node I (1-based, node.id I as scripts/cluster numbers es nodes) serves Kafka clients on
127.0.0.1:<port> and its controller on 127.0.0.1:<cport>, both free ports chosen at start and
kept in DIR/cluster.json; its data is DIR/node-I/logs, its output DIR/node-I.log. Each node is
started by a watcher shell (as scripts/cluster does) that waits for it and writes its exit status
to DIR/node-I.exit, so no long-lived Python process has to reap it. Settings as Kafka's defaults
for a cluster: internal topics with replication factor min(3, N), transaction.state.log.min.isr
min(2, N), -Xmx512m per node; six partitions for __consumer_offsets and __transaction_state, as
scripts/cluster gives es (and compat-tests/faults). Jars: scripts/kafka-ref fetch.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KAFKA_REF = os.path.join(REPO, "scripts", "kafka-ref")
LOG4J = os.path.join(REPO, "scripts", "kafka", "log4j2.properties")
READY_MARKER = "Kafka Server started"
NODE_JVM = "-Xmx512m -Xms512m -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20"
TOOL_JVM = "-Xmx256m"
INTERNAL_PARTITIONS = 6
START_TIMEOUT_S = 150
STOP_TIMEOUT_S = 60
FORMAT_TIMEOUT_S = 120


def java_argv(lib, jvm, *args):
    """A java command line running a class from Kafka's jars in lib, logging per log4j2.properties."""
    return ["java", *jvm.split(), "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={LOG4J}",
            "-cp", f"{lib}/*", *args]


# With an authorizer, a KRaft controller answers only super users until the authorizer has loaded
# the ACLs from the metadata log (AuthorizerNotReadyException), and with several voters that log
# needs the controllers' Vote and Fetch first: they must come from a super user, who on PLAINTEXT
# would be User:ANONYMOUS, every client too. So the controller listener gets SASL/PLAIN with one
# user that is a super user; clients keep PLAINTEXT without privileges, and the ACLs still bind them.
CONTROLLER_USER, CONTROLLER_PASSWORD = "controller", "controller-secret"
CONTROLLER_SASL = [
    "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "sasl.mechanism.controller.protocol=PLAIN",
    "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
    "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
    f'required username="{CONTROLLER_USER}" password="{CONTROLLER_PASSWORD}" '
    f'user_{CONTROLLER_USER}="{CONTROLLER_PASSWORD}";',
    f"super.users=User:{CONTROLLER_USER}",
]


def node_properties(node_id, voters, host, port, cport, log_dir, nodes, header, extra=()):
    """server.properties of one combined node. voters: "1@host:cport,2@...". extra: KEY=VALUE lines
    appended last (later keys win). With an authorizer among them and more than one node, the
    controller listener gets SASL/PLAIN (CONTROLLER_SASL)."""
    authorizer = nodes > 1 and any(kv.startswith("authorizer.class.name=") for kv in extra)
    lines = [
        f"# {header}",
        "process.roles=broker,controller",
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}",
        f"advertised.listeners=PLAINTEXT://{host}:{port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={log_dir}",
        "num.partitions=1",
        # Kafka's defaults for a cluster of three or more, written out (and lowered below three).
        f"offsets.topic.replication.factor={min(3, nodes)}",
        f"offsets.topic.num.partitions={INTERNAL_PARTITIONS}",
        f"transaction.state.log.replication.factor={min(3, nodes)}",
        f"transaction.state.log.min.isr={min(2, nodes)}",
        f"transaction.state.log.num.partitions={INTERNAL_PARTITIONS}",
        f"share.coordinator.state.topic.replication.factor={min(3, nodes)}",
        f"share.coordinator.state.topic.min.isr={min(2, nodes)}",
        "group.initial.rebalance.delay.ms=0",
        *(CONTROLLER_SASL if authorizer else []),
        *extra,
    ]
    return "\n".join(lines) + "\n"


def format_nodes(lib, props_paths, timeout=FORMAT_TIMEOUT_S):
    """kafka.tools.StorageTool format of every node with one new cluster id (in parallel).
    Raises RuntimeError with the tool's output if one fails. Returns the cluster id."""
    p = subprocess.run(java_argv(lib, TOOL_JVM, "kafka.tools.StorageTool", "random-uuid"),
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0 or not p.stdout.split():
        raise RuntimeError(f"StorageTool random-uuid failed: {(p.stdout + p.stderr)[-600:]}")
    cid = p.stdout.split()[-1]
    procs = [subprocess.Popen(java_argv(lib, TOOL_JVM, "kafka.tools.StorageTool", "format", "-t", cid, "-c", path),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for path in props_paths]
    failed = []
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        if p.returncode != 0:
            failed.append(out[-600:])
    if failed:
        raise RuntimeError(f"kafka storage format failed: {failed[0]}")
    return cid


def node_command(lib, props_path):
    """The command line of one node, with the JVM flags of kafka-server-start.sh and a 512 MiB heap."""
    return java_argv(lib, NODE_JVM, "kafka.Kafka", props_path)


def kafka_lib():
    p = subprocess.run([KAFKA_REF, "fetch"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"scripts/kafka-ref fetch failed: {p.stderr[-600:]}")
    return p.stdout.strip().splitlines()[-1]


def log(msg):
    print(f"kafka-cluster: {msg}", file=sys.stderr, flush=True)


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


class LoopbackCluster:
    """N nodes on 127.0.0.1 with their state in DIR (see the module docstring)."""

    def __init__(self, dir):
        self.dir = os.path.abspath(dir)
        self.state_path = os.path.join(self.dir, "cluster.json")
        self.state = None
        if os.path.exists(self.state_path):
            with open(self.state_path) as f:
                self.state = json.load(f)

    def path(self, i, what):
        return os.path.join(self.dir, f"node-{i}{what}")

    def ids(self):
        return [int(i) for i in self.state["nodes"]]

    def bootstrap(self):
        return ",".join(f"127.0.0.1:{self.state['nodes'][str(i)]['port']}" for i in self.ids())

    def pid(self, i):
        """The node's pid if it is running, else None."""
        try:
            with open(self.path(i, ".pid")) as f:
                pid = int(f.read())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def create(self, nodes, sets):
        if os.path.exists(self.dir):
            running = [i for i in range(1, nodes + 1) if self.pid(i)] if self.state else []
            if running:
                raise RuntimeError(f"nodes {running} of {self.dir} are running; stop them first")
            subprocess.run(["rm", "-rf", self.dir], check=True)
        os.makedirs(self.dir)
        ports = free_ports(2 * nodes)
        self.state = {"lib": kafka_lib(), "nodes": {str(i): {"port": ports[2 * (i - 1)], "cport": ports[2 * i - 1]}
                                                   for i in range(1, nodes + 1)}}
        voters = ",".join(f"{i}@127.0.0.1:{n['cport']}" for i, n in self.state["nodes"].items())
        props = []
        for i in self.ids():
            n = self.state["nodes"][str(i)]
            os.makedirs(self.path(i, ""), exist_ok=True)
            props.append(self.path(i, "/server.properties"))
            with open(props[-1], "w") as f:
                f.write(node_properties(i, voters, "127.0.0.1", n["port"], n["cport"], self.path(i, "/logs"), nodes,
                                        f"node {i} of {nodes}, written by compat-tests/lib/kafka_cluster.py", sets))
        self.state["cluster_id"] = format_nodes(self.state["lib"], props)
        with open(self.state_path, "w") as f:
            json.dump(self.state, f, indent=1)

    def start_node(self, i):
        if self.pid(i):
            raise RuntimeError(f"node {i} is already running (pid {self.pid(i)})")
        logf = self.path(i, ".log")
        open(logf, "a").close()
        with open(self.path(i, ".logstart"), "w") as f:
            f.write(str(os.path.getsize(logf)))
        for what in (".pid", ".exit"):
            if os.path.exists(self.path(i, what)):
                os.remove(self.path(i, what))
        # The watcher subshell (scripts/cluster's): starts the node in its own session, writes its
        # pid, waits for it and writes its exit status (128+signal when a signal ended it).
        watcher = ('( setsid "$@" >>"$LOG" 2>&1 </dev/null & echo $! >"$PIDF.tmp"; mv "$PIDF.tmp" "$PIDF"; '
                   'rc=0; wait $! || rc=$?; echo "$rc" >"$EXITF" ) >/dev/null 2>&1 </dev/null &')
        subprocess.run(["bash", "-c", watcher, "bash", *node_command(self.state["lib"], self.path(i, "/server.properties"))],
                       env={**os.environ, "LOG": logf, "PIDF": self.path(i, ".pid"), "EXITF": self.path(i, ".exit")},
                       check=True)
        deadline = time.monotonic() + 5
        while not os.path.exists(self.path(i, ".pid")):
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {i}: no pid file after 5 s")
            time.sleep(0.05)
        log(f"node {i} started (pid {self.pid(i)}, kafka {self.state['nodes'][str(i)]['port']}, "
            f"controller {self.state['nodes'][str(i)]['cport']})")

    def exit_status(self, i):
        try:
            with open(self.path(i, ".exit")) as f:
                return f.read().strip()
        except OSError:
            return "unknown"

    def wait_ready(self, i, timeout=START_TIMEOUT_S):
        """Bounded: the node logs READY_MARKER after its latest start and its Kafka port accepts."""
        with open(self.path(i, ".logstart")) as f:
            start = int(f.read())
        port = self.state["nodes"][str(i)]["port"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.pid(i):
                raise RuntimeError(f"node {i} exited (status {self.exit_status(i)}) before it was ready "
                                   f"(log {self.path(i, '.log')})")
            with open(self.path(i, ".log"), "rb") as f:
                f.seek(start)
                if READY_MARKER.encode() in f.read() and port_answers(port):
                    return
            time.sleep(0.25)
        raise RuntimeError(f"node {i} not ready after {timeout}s (log {self.path(i, '.log')})")

    def start(self, nodes, sets):
        self.create(nodes, sets)
        for i in self.ids():
            self.start_node(i)
        for i in self.ids():
            self.wait_ready(i)
        log(f"Apache Kafka {os.path.basename(self.state['lib'])}: {nodes} nodes ready ({self.dir})")
        return self.bootstrap()

    def signal_node(self, i, sig):
        pid = self.pid(i)
        if pid:
            os.kill(pid, sig)
        return pid

    def wait_gone(self, i, pid, timeout):
        """Bounded wait until pid has exited; SIGKILL at the deadline. True if it exited by itself."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                return True
            time.sleep(0.1)
        log(f"node {i} (pid {pid}) still running after {timeout}s: SIGKILL")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        return False

    def stop(self):
        """SIGTERM to every node at once, then a bounded wait for each. Returns the number of nodes
        that had to be SIGKILLed."""
        if self.state is None:
            return 0
        pids = {i: self.signal_node(i, signal.SIGTERM) for i in self.ids()}
        killed = 0
        for i, pid in pids.items():
            if pid and not self.wait_gone(i, pid, STOP_TIMEOUT_S):
                killed += 1
            if pid:
                log(f"node {i} stopped (exit {self.exit_status_bounded(i)})")
        return killed

    def exit_status_bounded(self, i, timeout=5):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.path(i, ".exit")) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.exit_status(i)

    def kill(self, i, sig=signal.SIGKILL):
        pid = self.signal_node(i, sig)
        if not pid:
            raise RuntimeError(f"node {i} is not running")
        self.wait_gone(i, pid, 10 if sig == signal.SIGKILL else STOP_TIMEOUT_S)
        log(f"node {i} ({'SIGKILL' if sig == signal.SIGKILL else 'SIGTERM'}, pid {pid}) exited "
            f"{self.exit_status_bounded(i)}")

    def restart(self, i):
        self.start_node(i)
        self.wait_ready(i)
        log(f"node {i} ready again")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("cmd", choices=["start", "stop", "kill", "term", "restart", "bootstrap", "status"])
    ap.add_argument("node", nargs="?", type=int)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args()
    c = LoopbackCluster(a.dir)
    try:
        if a.cmd == "start":
            print(c.start(a.nodes, a.set))
            return 0
        if c.state is None:
            raise RuntimeError(f"no cluster in {a.dir} (no cluster.json)")
        if a.cmd in ("kill", "term", "restart"):
            if a.node not in c.ids():
                raise RuntimeError(f"{a.cmd} needs a node id, one of {c.ids()}")
            if a.cmd == "restart":
                c.restart(a.node)
            else:
                c.kill(a.node, signal.SIGKILL if a.cmd == "kill" else signal.SIGTERM)
        elif a.cmd == "stop":
            killed = c.stop()
            if killed:
                raise RuntimeError(f"{killed} node(s) ignored SIGTERM for {STOP_TIMEOUT_S}s and were killed")
        elif a.cmd == "bootstrap":
            print(c.bootstrap())
        elif a.cmd == "status":
            for i in c.ids():
                n, pid = c.state["nodes"][str(i)], c.pid(i)
                print(f"node {i}: kafka 127.0.0.1:{n['port']} controller 127.0.0.1:{n['cport']} "
                      + (f"running pid {pid}" if pid else f"stopped (exit {c.exit_status(i)})"))
        return 0
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        log(str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
