"""es's own mirror, driven through its command-line contract (es-broker mirror ...), for the
es-mirror mode of the migration trial:

  es-broker mirror link create NAME --source-bootstrap HOST:PORT [--source-config FILE] [--bootstrap ES]
  es-broker mirror link list|describe NAME|delete NAME [--bootstrap ES]
  es-broker mirror topic create TOPIC --link NAME [--bootstrap ES]
  es-broker mirror topic create --link NAME --pattern REGEX [--bootstrap ES]
  es-broker mirror groups --link NAME (--group G ... | --group-pattern REGEX) [--bootstrap ES]
  es-broker mirror status [TOPIC] [--bootstrap ES] [--json]
  es-broker mirror promote (TOPIC|--all) [--max-lag N] [--timeout-s S] [--bootstrap ES]

status --json prints {"topics":[{"topic":..,"state":..,"partitions":[{"partition":0,
"source_high_watermark":N,"mirrored_end":N,"lag":N}]}]}. Every command runs with a timeout and
its output is logged; a non-zero exit fails the trial with the command's output.
"""
import json
import subprocess

from common import TrialError, log

CMD_TIMEOUT_S = 60


class EsMirror:
    def __init__(self, binary, bootstrap):
        self.binary, self.bootstrap = binary, bootstrap

    def available(self):
        """(True, '') when this es-broker has the mirror subcommand, else (False, its output)."""
        try:
            p = subprocess.run([self.binary, "mirror", "--help"], capture_output=True, text=True, timeout=30)
        except OSError as e:
            return False, str(e)
        return p.returncode == 0, (p.stdout + p.stderr).strip()

    def run(self, *args, timeout_s=CMD_TIMEOUT_S):
        cmd = [self.binary, "mirror", *args, "--bootstrap", self.bootstrap]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        shown = " ".join(cmd[1:])
        if p.returncode != 0:
            raise TrialError(f"`es-broker {shown}` exited {p.returncode}: {(p.stdout + p.stderr).strip()[-1500:]}")
        out = p.stdout.strip()
        if "--json" not in args:
            log(f"es-broker {shown}: {out[-600:] if out else '(no output)'}")
        return out

    def status(self):
        """{(topic, partition): (source high watermark, mirrored end, lag, topic state)}."""
        doc = json.loads(self.run("status", "--json"))
        out = {}
        for t in doc.get("topics", []):
            for p in t.get("partitions", []):
                out[(t["topic"], p["partition"])] = (p["source_high_watermark"], p["mirrored_end"],
                                                     p["lag"], t.get("state"))
        return out
