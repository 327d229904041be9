package es.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * SASL, one scenario per mechanism, over the listener of compat-tests/run --security
 * sasl_plaintext|sasl_ssl (compat.security.protocol; skipped otherwise, and suite.py leaves this
 * class out without a SASL mode). Each logs in as the test user with that mechanism, whatever
 * mechanism the other scenarios use: the broker enables PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, and
 * compat.sasl.MECHANISM.username/password hold the user's credentials for each (on es a PLAIN
 * username is an API key id). The wrong-password scenario expects what Kafka's clients raise for a
 * refused login: SaslAuthenticationException, from the admin client and from a consumer.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SaslTest {
    private static final long S = 60;
    private static final int RECORDS = 100;

    private static boolean sasl() {
        return Env.SECURITY_PROTOCOL.startsWith("SASL_");
    }

    /** The mode's client settings with SASL as the test user for mechanism (password overridable). */
    private static Properties login(String mechanism, String password) {
        String user = System.getProperty("compat.sasl." + mechanism + ".username");
        String secret = password != null ? password : System.getProperty("compat.sasl." + mechanism + ".password");
        assumeTrue(user != null && secret != null, "no " + mechanism + " credentials (compat.sasl." + mechanism + ".*)");
        String module = mechanism.equals("PLAIN") ? "plain.PlainLoginModule" : "scram.ScramLoginModule";
        Properties p = Env.withSecurity(new Properties());
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, Env.BOOTSTRAP);
        p.put(SaslConfigs.SASL_MECHANISM, mechanism);
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security." + module + " required username=\""
            + user + "\" password=\"" + secret + "\";");
        return p;
    }

    @ParameterizedTest
    @ValueSource(strings = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
    void produceConsumeAndAdminAs(String mechanism) throws Exception {
        assumeTrue(sasl(), "needs compat-tests/run --security sasl_plaintext or sasl_ssl");
        Properties login = login(mechanism, null);
        String topic = Env.name("sasl-" + mechanism.toLowerCase());
        String group = Env.name("g-sasl-" + mechanism.toLowerCase());
        try (Admin a = Admin.create(login)) {
            a.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(S, TimeUnit.SECONDS);
            String id = a.describeCluster().clusterId().get(S, TimeUnit.SECONDS);
            assertFalse(id == null || id.isEmpty(), "cluster id " + id);
            TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames().get(S, TimeUnit.SECONDS).get(topic);
            assertEquals(2, d.partitions().size(), "partitions of " + topic);
        }
        Properties pp = new Properties();
        pp.putAll(login);
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60000);
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < RECORDS; i++) {
                p.send(new ProducerRecord<>(topic, "k" + (i % 7), "v" + i)).get(S, TimeUnit.SECONDS);
            }
        }
        Properties cp = new Properties();
        cp.putAll(login);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            got.addAll(Env.pollUntil(c, RECORDS));
            c.commitSync(Duration.ofSeconds(S));
        }
        assertEquals(RECORDS, got.size(), "records consumed");
        List<String> values = new ArrayList<>();
        got.forEach(r -> values.add(r.value()));
        for (int i = 0; i < RECORDS; i++) {
            assertTrue(values.contains("v" + i), "v" + i + " not consumed");
        }
        try (Admin a = Admin.create(login)) {
            Map<?, ?> offsets = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(S, TimeUnit.SECONDS);
            assertEquals(2, offsets.size(), "committed offsets of " + group + ": " + offsets);
            a.deleteTopics(List.of(topic)).all().get(S, TimeUnit.SECONDS);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
    void wrongPasswordIsRefused(String mechanism) {
        assumeTrue(sasl(), "needs compat-tests/run --security sasl_plaintext or sasl_ssl");
        Properties bad = login(mechanism, "not-the-password");
        try (Admin a = Admin.create(bad)) {
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.describeCluster().clusterId().get(S, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof SaslAuthenticationException,
                "admin with a wrong password: " + e.getCause());
        }
        Properties cp = new Properties();
        cp.putAll(bad);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            assertThrows(SaslAuthenticationException.class, () -> c.listTopics(Duration.ofSeconds(S)),
                "consumer with a wrong password");
        }
    }
}
