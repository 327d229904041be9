"""compat-tests/lib/security.py: the broker side of compat-tests/run --security MODE, one code path
for Apache Kafka and es that differs only in how the broker is started and how PLAIN users are
made.

Modes (Kafka's security protocols): plaintext (no security: exactly the run without --security),
ssl, sasl_plaintext, sasl_ssl. In a security mode the broker gets one client listener of that
protocol, named as the protocol (SSL, SASL_PLAINTEXT, SASL_SSL), on 127.0.0.1, and two users:

  admin  a super user (super.users=User:admin), for the harness and for tools a suite runs as admin
  test   a plain user (principal User:test), whom the suites' clients log in as

SASL: every mechanism is enabled (sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512); a
suite uses the one its upstream uses in that mode (its SECURITY file) or --sasl-mechanism.
  PLAIN    Kafka: the listener's PlainLoginModule JAAS list (user_admin, user_test); the username
           is the user's name. es: API keys: `es-broker keys create --data-dir D --principal
           User:NAME --id NAME` before es starts prints `NAME SECRET`, the PLAIN username and
           password (a key named after its principal, as librdkafka's 0081 assumes: it grants
           ACLs to User:<sasl.username>).
  SCRAM    both brokers: credentials made after start with AlterUserScramCredentials, through
           Kafka's own ConfigCommand (kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[...]'
           --entity-type users --entity-name NAME) logged in as admin over PLAIN; the run waits
           until each user logs in with each SCRAM mechanism.
TLS (ssl, sasl_ssl): the test PKI of compat-tests/lib/pki.py. ssl asks for client certificates
(ssl.client.auth=required: the client's principal is User:CN=client,OU=compat,O=es); sasl_ssl does
not (Kafka ignores an unprefixed ssl.client.auth on SASL_SSL listeners, KIP-684, and it is not set).

Each suite receives the COMPAT_SECURITY_* / COMPAT_SASL_* / COMPAT_SSL_* / COMPAT_ADMIN_* variables
of Security.env() (compat-tests/lib/compat.py's ClientSecurity reads them).

A suite's SECURITY file (absent: it has no security configuration, and runs n/a in those modes):
  MODE [MECHANISM]     a mode it runs in, and the SASL mechanism its upstream uses in that mode
  mechanisms=A,B       the SASL mechanisms its client configuration can express (default: all)
  broker:KEY=VALUE     a Kafka broker setting for this suite in every security mode, on both
                       brokers (a server property of Kafka, `--set KEY=VALUE` for es);
                       broker.tls:KEY=VALUE only in the TLS modes, broker.sasl:KEY=VALUE only in
                       the SASL modes
  n/a=REASON           why it has no security configuration (reported once, as n/a)
"""
import json
import os
import subprocess
import time

import pki

MODES = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
HOST = "127.0.0.1"
ADMIN, TEST = "admin", "test"
PASSWORDS = {ADMIN: "admin-secret", TEST: "test-secret"}
SCRAM_ITERATIONS = 4096
TOOL_TIMEOUT_S = 120
SCRAM_READY_TIMEOUT_S = 60
KEYS_TIMEOUT_S = 60


def log(msg):
    print(f"compat: {msg}", flush=True)


class SuiteSecurity:
    """A suite's SECURITY file (see the module docstring)."""

    def __init__(self, path):
        self.path = path
        self.modes, self.mechanisms, self.settings, self.na = {}, list(MECHANISMS), [], None
        if not os.path.exists(path):
            self.na = "no security configuration (no SECURITY file)"
            return
        for raw in open(path):
            line = raw.split("#")[0].strip()
            if not line:
                continue
            if line.startswith("n/a="):
                self.na = line[4:].strip()
            elif line.startswith("mechanisms="):
                self.mechanisms = [m.strip().upper() for m in line[11:].split(",") if m.strip()]
            elif line.startswith(("broker:", "broker.tls:", "broker.sasl:")):
                scope, _, kv = line.partition(":")
                k, _, v = kv.partition("=")
                self.settings.append((scope, k.strip(), v.strip()))
            else:
                mode, *mech = line.split()
                if mode not in MODES[1:] or len(mech) > 1 or (mech and mech[0].upper() not in MECHANISMS):
                    raise SystemExit(f"{path}: cannot read {line!r} (MODE [MECHANISM], mechanisms=, broker:, n/a=)")
                self.modes[mode] = mech[0].upper() if mech else None
        unknown = [m for m in self.mechanisms if m not in MECHANISMS]
        if unknown:
            raise SystemExit(f"{path}: unknown SASL mechanisms {unknown}")

    def plan(self, mode, requested):
        """(mechanism or None, None) for a mode this suite runs in, or (None, why it is n/a)."""
        if self.na:
            return None, self.na
        if mode not in self.modes:
            return None, f"no {mode} configuration (its SECURITY file lists {sorted(self.modes) or 'none'})"
        if not mode.startswith("sasl"):
            return None, None
        mech = requested or self.modes[mode] or self.mechanisms[0]
        if mech not in self.mechanisms:
            return None, f"its client configuration cannot use SASL {mech} (it takes {', '.join(self.mechanisms)})"
        return mech, None


class Security:
    """One suite's security set-up for one broker start: the listener, the users and what the
    suite is told. mode is one of MODES other than plaintext."""

    def __init__(self, mode, mechanism, suite_settings=()):
        """suite_settings: SuiteSecurity.settings, (scope, KEY, VALUE) with scope broker,
        broker.tls or broker.sasl."""
        assert mode in MODES[1:], mode
        self.mode = mode
        self.protocol = mode.upper()
        self.listener = self.protocol  # the listener's name, mapped to the protocol of that name
        self.sasl = mode.startswith("sasl")
        self.tls = mode.endswith("ssl")
        self.mechanism = mechanism if self.sasl else None
        self.client_auth = "required" if mode == "ssl" else "none"
        applies = {"broker": True, "broker.tls": self.tls, "broker.sasl": self.sasl}
        self.suite_settings = [(k, v) for scope, k, v in suite_settings if applies[scope]]
        self.pki = pki.ensure() if self.tls else None
        # {user: {mechanism: (username, password)}}: SCRAM and Kafka's PLAIN use the name; es's
        # PLAIN an API key (es_make_keys).
        self.creds = {u: {m: (u, PASSWORDS[u]) for m in MECHANISMS} for u in (ADMIN, TEST)} if self.sasl else {}

    # What both brokers are given, in Kafka's terms.
    def settings(self, broker_settings):
        """[(KEY, VALUE)]: the security settings both brokers get, in Kafka's terms: the SASL
        mechanisms, the super user, client authentication and the suite's SECURITY broker:
        settings (its BROKER file's broker: settings, an authorizer, reach both anyway)."""
        out = []
        if self.sasl:
            out.append(("sasl.enabled.mechanisms", ",".join(MECHANISMS)))
        supers = [f"User:{ADMIN}"] + ([pki.BROKER_PRINCIPAL] if self.mode == "ssl" else [])
        out.append(("super.users", ";".join(supers)))
        if self.client_auth == "required":
            out.append(("ssl.client.auth", "required"))
        out += self.suite_settings
        return out

    def kafka_sets(self, port, cport, broker_settings):
        """KEY=VALUE lines for scripts/kafka-ref start --set (later lines win over its defaults):
        the client listener on port, the controller (SASL/PLAIN as admin) on cport, inter-broker
        traffic over the client listener (so the broker is also its own client: PLAIN as admin,
        or its certificate), TLS key and trust stores, the JAAS configuration of each mechanism."""
        l, ll = self.listener, self.listener.lower()
        sets = [
            f"listeners={l}://{HOST}:{port},CONTROLLER://{HOST}:{cport}",
            f"advertised.listeners={l}://{HOST}:{port}",
            f"controller.quorum.voters=0@{HOST}:{cport}",
            f"listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,{l}:{self.protocol}",
            f"inter.broker.listener.name={l}",
            # The controller listener: SASL/PLAIN as admin, a super user (as kafka_cluster.py's
            # CONTROLLER_SASL). On PLAINTEXT the broker's heartbeats would come from
            # User:ANONYMOUS, and once a test puts an ACL on the cluster resource (librdkafka's
            # 0081 does, over SASL) allow.everyone.if.no.acl.found no longer lets them in: the
            # controller answers CLUSTER_AUTHORIZATION_FAILED, fences the broker, and every
            # later CreateTopics times out.
            "sasl.mechanism.controller.protocol=PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required username="{ADMIN}" password="{PASSWORDS[ADMIN]}" user_{ADMIN}="{PASSWORDS[ADMIN]}";',
        ]
        if self.tls:
            p = self.pki
            sets += [
                "ssl.keystore.type=PKCS12", f"ssl.keystore.location={p['broker_p12']}",
                f"ssl.keystore.password={pki.PASSWORD}", f"ssl.key.password={pki.PASSWORD}",
                "ssl.truststore.type=PEM", f"ssl.truststore.location={p['ca']}",
            ]
        if self.sasl:
            users = " ".join(f'user_{u}="{PASSWORDS[u]}"' for u in (ADMIN, TEST))
            sets += [
                "sasl.mechanism.inter.broker.protocol=PLAIN",
                f"listener.name.{ll}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                f'required username="{ADMIN}" password="{PASSWORDS[ADMIN]}" {users};',
                *(f"listener.name.{ll}.{m.lower()}.sasl.jaas.config="
                  "org.apache.kafka.common.security.scram.ScramLoginModule required;" for m in SCRAM),
            ]
        sets += [f"{k}={v}" for k, v in self.settings(broker_settings)]
        return sets

    def es_args(self, port, broker_settings):
        """es-broker flags: the listener in Kafka's terms, the PEM certificate, key and CA, and every
        setting of settings() as --set KEY=VALUE."""
        l = self.listener
        args = ["--listener", f"{l}://{HOST}:{port}", "--listener-security-protocol-map", f"{l}:{self.protocol}",
                "--advertised-listener", f"{l}://{HOST}:{port}"]
        if self.tls:
            p = self.pki
            args += ["--ssl-cert", p["broker_cert"], "--ssl-key", p["broker_key"], "--ssl-ca", p["ca"]]
        for k, v in self.settings(broker_settings):
            args += ["--set", f"{k}={v}"]
        return args

    def es_make_keys(self, binary, data_dir):
        """es's PLAIN users: one API key per user (es-broker keys create), before es starts."""
        if not self.sasl:
            return
        for user in (ADMIN, TEST):
            argv = [binary, "keys", "create", "--data-dir", data_dir, "--principal", f"User:{user}", "--id", user]
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=KEYS_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"{' '.join(argv)} timed out after {KEYS_TIMEOUT_S}s")
            words = p.stdout.strip().splitlines()[-1].split() if p.stdout.strip() else []
            if p.returncode != 0 or len(words) != 2:
                raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}, printed {p.stdout.strip()[-200:]!r} "
                                   f"(want one line `KEY_ID SECRET`): {p.stderr.strip()[-400:]}")
            self.creds[user]["PLAIN"] = (words[0], words[1])
            log(f"es: PLAIN user for User:{user} is API key {words[0]}")

    # The users, once the broker serves.
    def client_properties(self, user=ADMIN, mechanism="PLAIN", password=None):
        """Kafka Java client properties for the listener, logged in as user with mechanism."""
        props = {"security.protocol": self.protocol}
        if self.tls:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.pki["ca"]})
            if self.client_auth == "required":
                props.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": self.pki["client_p12"],
                              "ssl.keystore.password": pki.PASSWORD, "ssl.key.password": pki.PASSWORD})
        if self.sasl:
            name, secret = self.creds[user][mechanism]
            module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
            props.update({"sasl.mechanism": mechanism,
                          "sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
                                              f'username="{name}" password="{password or secret}";'})
        return props

    def write_properties(self, path, props):
        with open(path, "w") as f:
            f.write("# written by compat-tests/lib/security.py\n")
            f.write("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def after_start(self, kafka_ref, bootstrap, work):
        """SCRAM credentials for both users (both SCRAM mechanisms), made with ConfigCommand as
        admin over PLAIN, then waited for until every user logs in with every SCRAM mechanism."""
        if not self.sasl:
            return
        os.makedirs(work, exist_ok=True)
        admin = self.write_properties(os.path.join(work, "admin-plain.properties"), self.client_properties())
        tool = [kafka_ref, "run", "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap,
                "--command-config", admin]
        # One request per user and mechanism: Kafka refuses two alterations of one user in one
        # request (DuplicateResourceException), and ConfigCommand alters one entity per run.
        procs = []
        for user in (ADMIN, TEST):
            for m in SCRAM:
                spec = f"{m}=[iterations={SCRAM_ITERATIONS},password={self.creds[user][m][1]}]"
                procs.append((f"{user} {m}", subprocess.Popen(
                    [*tool, "--alter", "--add-config", spec, "--entity-type", "users",
                     "--entity-name", self.creds[user][m][0]],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
        for user, p in procs:
            try:
                out, _ = p.communicate(timeout=TOOL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            if p.returncode != 0:
                said = [line for line in out.splitlines() if "Exception" in line or "rror" in line]
                raise RuntimeError(f"ConfigCommand --alter the SCRAM credential ({user}) failed "
                                   f"(exit {p.returncode}): {' | '.join(said[-3:]) or out.strip()[-600:]}")
        # Ready when each user logs in with each SCRAM mechanism (a TopicCommand --list through
        # it, in parallel): a check by use, since DescribeUserScramCredentials comes to
        # ConfigCommand only with DescribeClientQuotas, which a broker need not serve.
        pending = {(u, m) for u in (ADMIN, TEST) for m in SCRAM}
        deadline = time.monotonic() + SCRAM_READY_TIMEOUT_S
        while pending:
            procs = []
            for user, m in sorted(pending):
                cfg = self.write_properties(os.path.join(work, f"{user}-{m.lower()}.properties"),
                                            {**self.client_properties(user, m), "default.api.timeout.ms": "20000",
                                             "request.timeout.ms": "10000"})
                procs.append(((user, m), subprocess.Popen(
                    [kafka_ref, "run", "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
                     "--command-config", cfg, "--list"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
            said = {}
            for key, p in procs:
                try:
                    out, _ = p.communicate(timeout=TOOL_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
                if p.returncode == 0:
                    pending.discard(key)
                else:
                    said[key] = [line for line in out.splitlines() if "Exception" in line][-1:] or out.strip()[-300:]
            if pending and time.monotonic() > deadline:
                raise RuntimeError(f"SCRAM logins still refused after {SCRAM_READY_TIMEOUT_S}s: {said}")
            if pending:
                time.sleep(1)
        log(f"SCRAM-SHA-256 and SCRAM-SHA-512 credentials of {ADMIN} and {TEST} made")

    def env(self, work):
        """The COMPAT_* variables a suite gets (compat-tests/lib/compat.py, ClientSecurity)."""
        env = {"COMPAT_SECURITY_PROTOCOL": self.protocol, "COMPAT_SSL_CLIENT_AUTH": self.client_auth}
        if self.sasl:
            m = self.mechanism
            env.update({
                "COMPAT_SASL_MECHANISM": m,
                "COMPAT_SASL_USERNAME": self.creds[TEST][m][0], "COMPAT_SASL_PASSWORD": self.creds[TEST][m][1],
                "COMPAT_ADMIN_USERNAME": self.creds[ADMIN][m][0], "COMPAT_ADMIN_PASSWORD": self.creds[ADMIN][m][1],
                "COMPAT_SASL_CREDENTIALS": json.dumps({u: {k: list(v) for k, v in c.items()}
                                                       for u, c in self.creds.items()}),
                "COMPAT_ADMIN_PRINCIPAL": f"User:{ADMIN}", "COMPAT_SASL_PRINCIPAL": f"User:{TEST}",
            })
        if self.tls:
            p = self.pki
            env.update({
                "COMPAT_PKI_DIR": os.path.dirname(p["ca"]), "COMPAT_SSL_CA": p["ca"],
                "COMPAT_SSL_CERT": p["client_cert"], "COMPAT_SSL_KEY": p["client_key"],
                "COMPAT_SSL_PKCS12": p["client_p12"], "COMPAT_SSL_PASSWORD": pki.PASSWORD,
            })
        # A ready-made Kafka Java client configuration for admin (Kafka's tools: --command-config).
        admin = self.client_properties(ADMIN, self.mechanism or "PLAIN") if self.sasl else self.client_properties()
        env["COMPAT_ADMIN_CONFIG"] = self.write_properties(os.path.join(work, "admin.properties"), admin)
        return env

    def describe(self):
        return self.mode + (f" {self.mechanism}" if self.mechanism else "")


SECURITY_ENV = ("COMPAT_SECURITY_PROTOCOL", "COMPAT_SSL_CLIENT_AUTH", "COMPAT_SASL_MECHANISM",
                "COMPAT_SASL_USERNAME", "COMPAT_SASL_PASSWORD", "COMPAT_ADMIN_USERNAME",
                "COMPAT_ADMIN_PASSWORD", "COMPAT_SASL_CREDENTIALS", "COMPAT_ADMIN_PRINCIPAL",
                "COMPAT_SASL_PRINCIPAL", "COMPAT_PKI_DIR", "COMPAT_SSL_CA", "COMPAT_SSL_CERT",
                "COMPAT_SSL_KEY", "COMPAT_SSL_PKCS12", "COMPAT_SSL_PASSWORD", "COMPAT_ADMIN_CONFIG")
