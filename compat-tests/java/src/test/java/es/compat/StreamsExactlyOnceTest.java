package es.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Kafka Streams word count with processing.guarantee=exactly_once_v2 (transactions, a
 * repartition topic, a changelog) and no record cache, so each input word yields exactly one
 * output update. Checked exactly: read_committed, the updates of each word are 1, 2, ..., n in
 * order, with n its number of occurrences in the input (no update lost, none repeated).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class StreamsExactlyOnceTest {

    @Test
    void wordCountExactlyOnceV2(@TempDir Path stateDir) throws Exception {
        String in = Env.name("wc-in");
        String out = Env.name("wc-out");
        String app = Env.name("wc-app");
        Env.createTopic(in, 3);
        Env.createTopic(out, 3);
        String[] words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"};
        Map<String, Long> expected = new TreeMap<>();
        int lines = 400;
        long totalWords = 0;
        try (KafkaProducer<String, String> p = Env.producer(Map.of())) {
            for (int i = 0; i < lines; i++) {
                StringBuilder line = new StringBuilder();
                for (int j = 0; j <= i % 5; j++) {
                    String w = words[(i * 7 + j * 3) % words.length];
                    line.append(w).append(' ');
                    expected.merge(w, 1L, Long::sum);
                    totalWords++;
                }
                p.send(new ProducerRecord<>(in, "line" + i, line.toString().trim()));
            }
            p.flush();
        }

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, Env.BOOTSTRAP);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(v -> List.of(v.split(" ")))
            .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
            .count()
            .toStream()
            .to(out, Produced.with(Serdes.String(), Serdes.Long()));

        Map<String, List<Long>> updates = new HashMap<>();
        long seen = 0;
        try (KafkaStreams streams = new KafkaStreams(b.build(), Env.withSecurity(props))) {
            streams.start();
            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Env.BOOTSTRAP);
            cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(Env.withSecurity(cp), new StringDeserializer(), new LongDeserializer())) {
                List<TopicPartition> parts = new ArrayList<>();
                for (int i = 0; i < 3; i++) {
                    parts.add(new TopicPartition(out, i));
                }
                c.assign(parts);
                c.seekToBeginning(parts);
                long deadline = System.nanoTime() + Duration.ofSeconds(200).toNanos();
                while (seen < totalWords) {
                    assertTrue(System.nanoTime() < deadline, "saw " + seen + " of " + totalWords
                        + " committed updates; streams state " + streams.state());
                    for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                        updates.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                        seen++;
                    }
                }
                // nothing more may arrive: linger a little and look for extra (duplicate) updates
                long until = System.nanoTime() + Duration.ofSeconds(3).toNanos();
                while (System.nanoTime() < until) {
                    for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                        updates.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                        seen++;
                    }
                }
            }
            streams.close(Duration.ofSeconds(30));
        }
        assertEquals(totalWords, seen, "output updates");
        assertEquals(expected.keySet(), new TreeMap<>(updates).keySet());
        for (Map.Entry<String, Long> e : expected.entrySet()) {
            List<Long> got = updates.get(e.getKey());
            for (int i = 0; i < got.size(); i++) {
                assertEquals(i + 1, got.get(i), "word " + e.getKey() + ": updates " + got);
            }
            assertEquals(e.getValue(), (long) got.size(), "word " + e.getKey() + " count");
        }
    }
}
