#!/usr/bin/env python3
"""compat-tests/lib/pki.py: the test PKI of compat-tests' security modes (compat-tests/run
--security ssl|sasl_ssl), made with the openssl command line into target/compat/pki/.

  pki.py [DIR]      make the PKI in DIR (default target/compat/pki) unless it is there, print DIR

What it makes (RSA 2048, SHA-256, valid for ten years; private keys unencrypted PKCS#8 PEM):
  ca.pem, ca.key, ca.der          the CA ("CN=compat-ca,OU=compat,O=es"), the only trust anchor
  broker.pem, broker.key          the broker's certificate, SANs DNS:localhost, IP:127.0.0.1, IP:::1,
                                  subject CN=broker,OU=compat,O=es; serverAuth and clientAuth (a
                                  Kafka broker dials its own listener with it as a client)
  broker-chain.pem                broker.pem then ca.pem
  broker.p12                      broker key, certificate and CA as PKCS#12 (Kafka's ssl.keystore.*)
  client.pem, client.key          the client's certificate (CN=client,OU=compat,O=es: on an SSL
                                  listener with client authentication Kafka's principal is
                                  User:CN=client,OU=compat,O=es), clientAuth
  client.der, client.key.der      the same in DER (librdkafka's test 0097 loads every encoding)
  client.p12                      client key, certificate and CA as PKCS#12
  password                        the PKCS#12 files' password (PASSWORD)
Java reads the CA as a PEM trust store (ssl.truststore.type=PEM) and its key stores as PKCS#12.
The IPs of compat-tests/faults' network namespaces (10.213.T.11-13, T chosen per run) are not in
the broker's SANs: a security mode there would need its certificates made per run.

Idempotent and cheap: a directory whose .complete holds this file's PKI_VERSION is kept (about
one second to make otherwise). It is made in DIR.tmp and renamed into place, so an interrupted
run leaves nothing half made.
"""
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DIR = os.path.join(REPO, "target", "compat", "pki")
PKI_VERSION = "1"  # bump when what is made changes: an older directory is made again
PASSWORD = "compat-pki-secret"
DAYS = 3650
KEY_BITS = 2048
SUBJECT = "/O=es/OU=compat/CN={cn}"  # printed in RFC 2253 order: CN=...,OU=compat,O=es
BROKER_SANS = "DNS:localhost,IP:127.0.0.1,IP:::1"
OPENSSL_TIMEOUT_S = 60
# Kafka's principal names for the two certificates (DefaultKafkaPrincipalBuilder: the subject DN).
BROKER_PRINCIPAL = "User:CN=broker,OU=compat,O=es"
CLIENT_PRINCIPAL = "User:CN=client,OU=compat,O=es"

FILES = {
    "ca": "ca.pem", "ca_key": "ca.key", "ca_der": "ca.der",
    "broker_cert": "broker.pem", "broker_key": "broker.key", "broker_chain": "broker-chain.pem",
    "broker_p12": "broker.p12",
    "client_cert": "client.pem", "client_key": "client.key", "client_der": "client.der",
    "client_key_der": "client.key.der", "client_p12": "client.p12",
    "password": "password",
}


def paths(d=DEFAULT_DIR):
    """{role: absolute path} of the files ensure() makes in d."""
    return {k: os.path.join(d, v) for k, v in FILES.items()}


def openssl(*args, cwd):
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=OPENSSL_TIMEOUT_S)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed (exit {p.returncode}): {p.stderr.strip()[-600:]}")
    return p.stdout


def leaf(d, name, cn, ext_lines):
    """A key and a certificate for cn signed by the CA in d, with the given X.509v3 extensions."""
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write("[v3]\n" + "".join(line + "\n" for line in ext_lines))
    openssl("req", "-new", "-newkey", f"rsa:{KEY_BITS}", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", SUBJECT.format(cn=cn), cwd=d)
    serial = "0x" + os.urandom(8).hex()
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", serial,
            "-days", str(DAYS), "-sha256", "-extfile", f"{name}.ext", "-extensions", "v3", "-out", f"{name}.pem",
            cwd=d)
    openssl("pkcs12", "-export", "-in", f"{name}.pem", "-inkey", f"{name}.key", "-certfile", "ca.pem",
            "-name", name, "-passout", f"pass:{PASSWORD}", "-out", f"{name}.p12", cwd=d)
    for f in (f"{name}.csr", f"{name}.ext"):
        os.remove(os.path.join(d, f))


def make(d):
    os.makedirs(d)
    openssl("req", "-x509", "-newkey", f"rsa:{KEY_BITS}", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", str(DAYS), "-sha256", "-subj", SUBJECT.format(cn="compat-ca"),
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=d)
    openssl("x509", "-in", "ca.pem", "-outform", "der", "-out", "ca.der", cwd=d)
    common = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
              "subjectKeyIdentifier=hash", "authorityKeyIdentifier=keyid"]
    leaf(d, "broker", "broker", common + [f"subjectAltName={BROKER_SANS}",
                                          "extendedKeyUsage=serverAuth,clientAuth"])
    leaf(d, "client", "client", common + ["extendedKeyUsage=clientAuth"])
    with open(os.path.join(d, "broker-chain.pem"), "w") as out:
        for f in ("broker.pem", "ca.pem"):
            out.write(open(os.path.join(d, f)).read())
    openssl("x509", "-in", "client.pem", "-outform", "der", "-out", "client.der", cwd=d)
    openssl("pkey", "-in", "client.key", "-outform", "der", "-out", "client.key.der", cwd=d)
    with open(os.path.join(d, "password"), "w") as f:
        f.write(PASSWORD + "\n")
    # Postconditions: every file is there, and both certificates verify against the CA.
    missing = [v for v in FILES.values() if not os.path.isfile(os.path.join(d, v))]
    assert not missing, f"pki: not made: {missing}"
    for name in ("broker", "client"):
        openssl("verify", "-CAfile", "ca.pem", f"{name}.pem", cwd=d)
    with open(os.path.join(d, ".complete"), "w") as f:
        f.write(PKI_VERSION + "\n")


def ensure(d=DEFAULT_DIR):
    """Makes the PKI in d unless a complete one of this PKI_VERSION is there. Returns paths(d)."""
    marker = os.path.join(d, ".complete")
    if os.path.exists(marker) and open(marker).read().strip() == PKI_VERSION:
        return paths(d)
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl not found (apt-get install openssl)")
    tmp = d + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    make(tmp)
    shutil.rmtree(d, ignore_errors=True)
    os.rename(tmp, d)
    return paths(d)


if __name__ == "__main__":
    target = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR
    try:
        ensure(target)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print(f"pki: {e}", file=sys.stderr)
        sys.exit(1)
    print(target)
