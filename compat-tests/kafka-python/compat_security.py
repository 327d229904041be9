"""A pytest plugin (pytest -p compat_security, compat-tests/kafka-python/suite.py) that runs
kafka-python's integration tests against the external broker of compat-tests/run --security MODE.

kafka-python's fixtures (test/integration/fixtures.py) already know TLS and SASL: KafkaFixture's
transport, sasl_mechanism, broker_user/broker_password and ssl_dir feed every client through
_enrich_client_params (security_protocol, sasl_mechanism, sasl_plain_username/password, ssl_cafile,
ssl_check_hostname=False). But an external broker (KAFKA_URI) is always taken as PLAINTEXT, and its
SASL tests skip themselves when KAFKA_URI is set, since they start brokers of their own. This
plugin, loaded only with --security:
  - sets those attributes on every external KafkaFixture from the COMPAT_* variables: the mode's
    protocol, the SASL mechanism the fixture was asked for (test_sasl_integration.py asks for each
    of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; ./prepare patches conftest.py so that an external
    broker hears what was asked for) or else the suite's, the test user's credentials for it, and a
    folder with the CA as ssl_dir/ca-cert; with ssl.client.auth=required it also gives every client
    the client's certificate and key (ssl_certfile, ssl_keyfile);
  - lists topics with the admin client instead of bin/kafka-topics.sh (get_topic_names, which
    test_sasl_integration.py's test_admin reads: the sdist has no Kafka to run it from);
  - in SASL modes, lifts test_sasl_integration.py's skip for an external broker, so that its tests
    run against this one.
test_ssl_integration.py starts a broker of its own (KafkaFixture.instance(..., transport='SSL'),
then start()): not applicable, as without --security.
"""
import json
import os

import pytest

PROTOCOL = os.environ.get("COMPAT_SECURITY_PROTOCOL", "PLAINTEXT")
SASL = PROTOCOL.startswith("SASL_")
TLS = PROTOCOL in ("SSL", "SASL_SSL")
MECHANISM = os.environ.get("COMPAT_SASL_MECHANISM", "")
CREDENTIALS = json.loads(os.environ.get("COMPAT_SASL_CREDENTIALS") or "{}").get("test", {})
CLIENT_AUTH = os.environ.get("COMPAT_SSL_CLIENT_AUTH", "none") == "required"


def ssl_dir():
    """A folder holding the CA as ca-cert, the name the fixtures read (ssl_dir/ca-cert)."""
    d = os.path.join(os.environ.get("COMPAT_WORK", "."), "ssl")
    os.makedirs(d, exist_ok=True)
    link = os.path.join(d, "ca-cert")
    if not os.path.lexists(link):
        os.symlink(os.environ["COMPAT_SSL_CA"], link)
    return d


def pytest_configure(config):
    if PROTOCOL == "PLAINTEXT":
        return
    from test.integration import fixtures

    kafka = fixtures.KafkaFixture
    init, enrich = kafka.__init__, kafka._enrich_client_params

    def secured_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if not self.external:
            return
        asked = self.sasl_mechanism  # test_sasl_integration.py's parameter, through conftest.py
        self.transport = PROTOCOL
        self.sasl_mechanism = (asked or MECHANISM) if SASL else None
        if SASL:
            self.broker_user, self.broker_password = CREDENTIALS[self.sasl_mechanism]
        if TLS:
            self.ssl_dir = ssl_dir()

    def secured_enrich(self, params, **defaults):
        params = enrich(self, params, **defaults)
        if self.external and TLS and CLIENT_AUTH:
            params.setdefault("ssl_certfile", os.environ["COMPAT_SSL_CERT"])
            params.setdefault("ssl_keyfile", os.environ["COMPAT_SSL_KEY"])
        return params

    def get_topic_names(self):
        from kafka import KafkaAdminClient
        with KafkaAdminClient(**self._enrich_client_params({"client_id": "compat_topic_lister"})) as admin:
            return admin.list_topics()

    kafka.__init__ = secured_init
    kafka._enrich_client_params = secured_enrich
    kafka.get_topic_names = get_topic_names


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    if not SASL:
        return
    for item in items:
        if os.path.basename(str(item.fspath)) != "test_sasl_integration.py":
            continue
        module = item.getparent(pytest.Module)
        module.own_markers[:] = [m for m in module.own_markers  # pytestmark = skipif("KAFKA_URI" in ...)
                                 if not (m.name == "skipif" and "external Kafka" in str(m.kwargs.get("reason")))]
