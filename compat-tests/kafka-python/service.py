"""Stand-in for kafka-python's test/service.py, which its sdist does not ship.

compat-tests/run starts and stops the broker itself, so the "external" service these
fixtures wrap has nothing to start or stop. SpawnedService is only used when the fixtures
launch their own Kafka, which compat-tests never asks them to do.
"""


class ExternalService:
    def __init__(self, host, port):
        self.host = host
        self.port = port

    def start(self):
        pass

    def stop(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("compat-tests runs kafka-python's tests against an external broker only")
