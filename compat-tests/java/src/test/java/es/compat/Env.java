package es.compat;

import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * What every scenario shares: the broker under test (system property compat.bootstrap, set by
 * compat-tests/java/suite.py, and compat.nodes, how many brokers it has), unique topic and group names, and client factories with the
 * Kafka 4.4 defaults (the producer is idempotent with acks=all unless a test says otherwise).
 * Every wait is bounded: a hung broker fails a test, it never hangs the run.
 *
 * <p>With compat-tests/run --security MODE, compat.security.config names a properties file with
 * that mode's client settings (security.protocol, the trust store, SASL as the test user, the
 * client's key store when the broker asks for one); every client here gets them (withSecurity).
 * compat.security.protocol is the mode's protocol (PLAINTEXT without --security) and
 * compat.sasl.credentials the users' credentials per mechanism (SecurityTest).
 */
final class Env {
    static final String BOOTSTRAP = System.getProperty("compat.bootstrap", "127.0.0.1:9092");
    static final int NODES = Integer.getInteger("compat.nodes", 1);
    static final Duration WAIT = Duration.ofSeconds(60);
    static final String SECURITY_PROTOCOL = System.getProperty("compat.security.protocol", "PLAINTEXT");
    private static final Properties SECURITY = load(System.getProperty("compat.security.config", ""));
    private static final String RUN = UUID.randomUUID().toString().substring(0, 8);

    private Env() {}

    private static Properties load(String path) {
        Properties p = new Properties();
        if (!path.isEmpty()) {
            try (Reader r = Files.newBufferedReader(Path.of(path))) {
                p.load(r);
            } catch (IOException e) {
                throw new UncheckedIOException("compat.security.config " + path, e);
            }
        }
        return p;
    }

    /** The --security mode's client settings (none without it), added to p; returns p. */
    static Properties withSecurity(Properties p) {
        p.putAll(SECURITY);
        return p;
    }

    static String name(String label) {
        return "compat-java-" + label + "-" + RUN + "-" + UUID.randomUUID().toString().substring(0, 6);
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        return Admin.create(withSecurity(p));
    }

    static void createTopic(String topic, int partitions, Map<String, String> configs) throws Exception {
        try (Admin a = admin()) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)))
                .all().get(60, TimeUnit.SECONDS);
        }
    }

    static void createTopic(String topic, int partitions) throws Exception {
        createTopic(topic, partitions, Map.of());
    }

    static KafkaProducer<String, String> producer(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60000);
        withSecurity(p);
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        withSecurity(p);
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    /** Reads the assigned partitions (or subscription) until `count` records arrived, or fails after WAIT. */
    static List<ConsumerRecord<String, String>> pollUntil(KafkaConsumer<String, String> c, int count) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (out.size() < count) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("received " + out.size() + " of " + count + " records within " + WAIT);
            }
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                out.add(r);
            }
        }
        return out;
    }

    /** Reads a whole topic from the beginning with assign(), up to the end offsets. */
    static List<ConsumerRecord<String, String>> readAll(String topic, Map<String, Object> extra) {
        try (KafkaConsumer<String, String> c = consumer(extra)) {
            List<TopicPartition> parts = new ArrayList<>();
            c.partitionsFor(topic, WAIT).forEach(pi -> parts.add(new TopicPartition(topic, pi.partition())));
            c.assign(parts);
            c.seekToBeginning(parts);
            Map<TopicPartition, Long> end = c.endOffsets(parts, WAIT);
            List<ConsumerRecord<String, String>> out = new ArrayList<>();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (true) {
                boolean done = true;
                for (TopicPartition tp : parts) {
                    if (c.position(tp, WAIT) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    return out;
                }
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("did not reach the end offsets " + end + " within " + WAIT);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
            }
        }
    }
}
