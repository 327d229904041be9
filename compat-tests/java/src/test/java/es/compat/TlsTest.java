package es.compat;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.errors.SslAuthenticationException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * TLS with client authentication, over the listener of compat-tests/run --security ssl (the
 * broker asks for the client's certificate, ssl.client.auth=required; skipped otherwise, and
 * suite.py leaves this class out in other modes): a client with the test PKI's certificate is
 * served, and one without a certificate, or one that does not trust the broker's CA, is refused
 * with SslAuthenticationException, what Kafka's clients raise for a failed handshake.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TlsTest {
    private static final long S = 60;

    private static void assumeClientAuth() {
        assumeTrue(Env.SECURITY_PROTOCOL.equals("SSL"), "needs compat-tests/run --security ssl");
    }

    private static Properties config() {
        Properties p = Env.withSecurity(new Properties());
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, Env.BOOTSTRAP);
        return p;
    }

    private static void refused(Properties p, String what) {
        try (Admin a = Admin.create(p)) {
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.describeCluster().clusterId().get(S, TimeUnit.SECONDS), what);
            assertTrue(e.getCause() instanceof SslAuthenticationException, what + ": " + e.getCause());
        }
    }

    @Test
    void clientCertificateIsServed() throws Exception {
        assumeClientAuth();
        try (Admin a = Admin.create(config())) {
            String id = a.describeCluster().clusterId().get(S, TimeUnit.SECONDS);
            assertFalse(id == null || id.isEmpty(), "cluster id " + id);
        }
    }

    @Test
    void clientWithoutCertificateIsRefused() {
        assumeClientAuth();
        Properties p = config();
        for (String k : new String[] {SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, SslConfigs.SSL_KEYSTORE_LOCATION_CONFIG,
                                      SslConfigs.SSL_KEYSTORE_PASSWORD_CONFIG, SslConfigs.SSL_KEY_PASSWORD_CONFIG}) {
            p.remove(k);
        }
        refused(p, "a client without a certificate");
    }

    @Test
    void clientNotTrustingTheBrokerIsRefused() {
        assumeClientAuth();
        Properties p = config();
        p.remove(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG);
        p.remove(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG); // the JVM's default CAs: not the test PKI's
        refused(p, "a client that does not trust the broker's CA");
    }
}
