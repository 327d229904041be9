package es.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The Java producer with Kafka 4.4's defaults (idempotent, acks=all), codecs, headers, limits. */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ProducerTest {

    @Test
    void idempotentDefaultOffsetsAreContiguousAndRoundTrip() throws Exception {
        String topic = Env.name("idem");
        Env.createTopic(topic, 3);
        int n = 3000;
        Map<Integer, List<Long>> offsets = new HashMap<>();
        try (KafkaProducer<String, String> p = Env.producer(Map.of())) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, "k" + (i % 17), "v" + i)));
            }
            p.flush();
            for (Future<RecordMetadata> f : fs) {
                RecordMetadata m = f.get(60, TimeUnit.SECONDS);
                offsets.computeIfAbsent(m.partition(), x -> new ArrayList<>()).add(m.offset());
            }
        }
        for (Map.Entry<Integer, List<Long>> e : offsets.entrySet()) {
            List<Long> got = e.getValue();
            for (int i = 0; i < got.size(); i++) {
                assertEquals(i, got.get(i), "partition " + e.getKey() + ": offsets are not 0..n-1 in send order");
            }
        }
        List<ConsumerRecord<String, String>> recs = Env.readAll(topic, Map.of());
        assertEquals(n, recs.size());
        Map<String, Integer> lastByKey = new HashMap<>();
        for (ConsumerRecord<String, String> r : recs) {
            int v = Integer.parseInt(r.value().substring(1));
            assertEquals("k" + (v % 17), r.key());
            Integer prev = lastByKey.put(r.key(), v);
            assertTrue(prev == null || prev < v, "per-key order broken at " + r);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void codecHeadersNullsRoundTrip(String codec) throws Exception {
        String topic = Env.name("codec-" + codec);
        Env.createTopic(topic, 1);
        int n = 500;
        try (KafkaProducer<String, String> p = Env.producer(Map.of(
                ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, 20))) {
            for (int i = 0; i < n; i++) {
                RecordHeaders h = new RecordHeaders();
                h.add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                h.add("dup", new byte[] {1});
                h.add("dup", null);
                String key = i % 5 == 0 ? null : "key-" + i;
                String value = i % 7 == 0 ? null : (i % 11 == 0 ? "" : "value-" + i + "-".repeat(i % 50));
                p.send(new ProducerRecord<>(topic, null, 1_700_000_000_000L + i, key, value, h));
            }
            p.flush();
        }
        List<ConsumerRecord<String, String>> recs = Env.readAll(topic, Map.of());
        assertEquals(n, recs.size());
        for (int i = 0; i < n; i++) {
            ConsumerRecord<String, String> r = recs.get(i);
            assertEquals(i, r.offset());
            assertEquals(1_700_000_000_000L + i, r.timestamp());
            if (i % 5 == 0) {
                assertNull(r.key(), "record " + i + ": a null key came back non-null");
            } else {
                assertEquals("key-" + i, r.key());
            }
            String want = i % 7 == 0 ? null : (i % 11 == 0 ? "" : "value-" + i + "-".repeat(i % 50));
            assertEquals(want, r.value(), "record " + i + " value (null and empty must differ)");
            var hs = r.headers().toArray();
            assertEquals(3, hs.length, "record " + i + " header count");
            assertEquals("i", hs[0].key());
            assertArrayEquals(Integer.toString(i).getBytes(StandardCharsets.UTF_8), hs[0].value());
            assertArrayEquals(new byte[] {1}, hs[1].value());
            assertNull(hs[2].value(), "a null header value came back non-null");
        }
    }

    @Test
    void recordLargerThanMaxMessageBytesIsRefused() throws Exception {
        String topic = Env.name("large");
        Env.createTopic(topic, 1, Map.of("max.message.bytes", "10000"));
        try (KafkaProducer<String, String> p = Env.producer(Map.of(ProducerConfig.BATCH_SIZE_CONFIG, 1))) {
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> p.send(new ProducerRecord<>(topic, "x".repeat(50_000))).get(60, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof RecordTooLargeException, "got " + e.getCause());
            // the producer stays usable for records that fit
            RecordMetadata m = p.send(new ProducerRecord<>(topic, "small")).get(60, TimeUnit.SECONDS);
            assertEquals(0, m.offset());
        }
    }

    @Test
    void transactionsCommitAndAbortAsSeenByBothIsolationLevels() throws Exception {
        String topic = Env.name("txn");
        Env.createTopic(topic, 2);
        try (KafkaProducer<String, String> p = Env.producer(Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, Env.name("txid")))) {
            p.initTransactions();
            for (int t = 0; t < 6; t++) {
                p.beginTransaction();
                for (int i = 0; i < 50; i++) {
                    p.send(new ProducerRecord<>(topic, "k" + i, "t" + t + "-" + i));
                }
                if (t % 2 == 0) {
                    p.commitTransaction();
                } else {
                    p.flush(); // so that the aborted records reach the log (abort drops unsent ones)
                    p.abortTransaction();
                }
            }
        }
        List<ConsumerRecord<String, String>> committed =
            Env.readAll(topic, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
        assertEquals(150, committed.size(), "read_committed count");
        for (ConsumerRecord<String, String> r : committed) {
            int t = Integer.parseInt(r.value().substring(1, r.value().indexOf('-')));
            assertEquals(0, t % 2, "read_committed saw an aborted record " + r.value());
        }
        List<ConsumerRecord<String, String>> all =
            Env.readAll(topic, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted"));
        assertEquals(300, all.size(), "read_uncommitted count (control records are not returned)");
    }
}
