"""Shared bits of the migration trial (compat-tests/migration): paths, the ports it uses, logging,
and bounded waiting.

Every port the trial opens is in 29000-29999 (PORTS), every file it writes is under
target/migration/ (OUT). wait_for() is the only way the trial waits for something to become true:
it polls a condition until a deadline and fails with a message naming what did not happen and the
condition's last answer, so nothing sleeps and hopes.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # compat-tests/migration
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(REPO, "target", "migration")

PORTS = {
    "kafka": 29092,             # source Apache Kafka, PLAINTEXT
    "kafka_controller": 29093,  # its KRaft controller listener
    "es": 29192,                # target es-broker
}


def ensure_venv(script):
    """Runs compat-tests/migration/prepare and re-executes `script` (with this process's
    arguments) in the venv it made, once: MIGRATION_IN_VENV=1 says it is done, and
    MIGRATION_MM2_LIB holds the MirrorMaker 2 lib dir prepare printed last."""
    if os.environ.get("MIGRATION_IN_VENV") == "1":
        return
    p = subprocess.run([os.path.join(HERE, "prepare")], stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("migration: prepare failed (its message is above)")
    for line in p.stdout.splitlines()[:-1]:
        print(line, flush=True)
    venv_py = os.path.join(OUT, "venv", "bin", "python")
    env = {**os.environ, "MIGRATION_IN_VENV": "1", "MIGRATION_MM2_LIB": p.stdout.strip().splitlines()[-1]}
    os.execve(venv_py, [venv_py, os.path.abspath(script), *sys.argv[1:]], env)


class TrialError(Exception):
    """The trial could not go on (a process failed, a condition was not met in time)."""


def log(msg):
    print(f"migration: {msg}", flush=True)


def wait_for(what, cond, timeout_s, interval_s=0.5):
    """Polls cond() until it returns a truthy value, which is returned. cond may return
    (False, detail) to say why not yet; detail goes into the timeout message."""
    deadline = time.monotonic() + timeout_s
    detail = None
    while True:
        r = cond()
        if isinstance(r, tuple):
            ok, detail = r
        else:
            ok = r
        if ok:
            return r
        if time.monotonic() >= deadline:
            raise TrialError(f"timed out after {timeout_s}s waiting for {what}"
                             + (f" (last: {detail})" if detail is not None else ""))
        time.sleep(interval_s)

