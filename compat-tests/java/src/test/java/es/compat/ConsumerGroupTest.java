package es.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The Java consumer in a group, with group.protocol classic and consumer (KIP-848). */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ConsumerGroupTest {

    private static Map<String, Object> groupConf(String protocol, String group) {
        Map<String, Object> m = new HashMap<>();
        m.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        m.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        return m;
    }

    private static void produce(String topic, int n, String prefix) throws Exception {
        try (KafkaProducer<String, String> p = Env.producer(Map.of())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, prefix + i));
            }
            p.flush();
        }
    }

    /** Polls until the consumer owns `want` partitions (a rebalance finished), bounded. */
    private static Set<TopicPartition> awaitAssignment(KafkaConsumer<String, String> c, int want,
                                                       List<ConsumerRecord<String, String>> sink) {
        long deadline = System.nanoTime() + Env.WAIT.toNanos();
        while (c.assignment().size() != want) {
            assertTrue(System.nanoTime() < deadline, "assignment " + c.assignment() + ", want " + want + " partitions");
            c.poll(Duration.ofMillis(100)).forEach(sink::add);
        }
        return new HashSet<>(c.assignment());
    }

    @ParameterizedTest
    @ValueSource(strings = {"classic", "consumer"})
    void subscribeConsumeCommitAndResume(String protocol) throws Exception {
        String topic = Env.name("grp-" + protocol);
        String group = Env.name("g-" + protocol);
        Env.createTopic(topic, 3);
        produce(topic, 900, "a");
        try (KafkaConsumer<String, String> c = Env.consumer(groupConf(protocol, group))) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = Env.pollUntil(c, 900);
            assertEquals(900, got.size());
            assertEquals(900, got.stream().map(ConsumerRecord::value).distinct().count(), "duplicates");
            c.commitSync(Duration.ofSeconds(30));
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment(), Duration.ofSeconds(30));
            long sum = committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            assertEquals(900, sum, "committed offsets " + committed);
        }
        // the group resumes from its commits: only the new records arrive
        produce(topic, 300, "b");
        try (KafkaConsumer<String, String> c = Env.consumer(groupConf(protocol, group))) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = Env.pollUntil(c, 300);
            for (ConsumerRecord<String, String> r : got) {
                assertTrue(r.value().startsWith("b"), "re-consumed a committed record " + r.value());
            }
            c.commitSync(Duration.ofSeconds(30));
        }
        try (Admin a = Env.admin()) {
            Map<TopicPartition, OffsetAndMetadata> offs =
                a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(60, TimeUnit.SECONDS);
            assertEquals(3, offs.size());
            assertEquals(1200, offs.values().stream().mapToLong(OffsetAndMetadata::offset).sum());
            ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all()
                .get(60, TimeUnit.SECONDS).get(group);
            assertNotNull(d);
            assertEquals(group, d.groupId());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"classic", "consumer"})
    void rebalanceSplitsAndReturnsPartitions(String protocol) throws Exception {
        String topic = Env.name("rebal-" + protocol);
        String group = Env.name("g-rebal-" + protocol);
        Env.createTopic(topic, 4);
        List<ConsumerRecord<String, String>> sink = new ArrayList<>();
        Map<String, Object> conf = groupConf(protocol, group);
        try (KafkaConsumer<String, String> c1 = Env.consumer(conf)) {
            c1.subscribe(List.of(topic));
            awaitAssignment(c1, 4, sink);
            Set<TopicPartition> a2;
            try (KafkaConsumer<String, String> c2 = Env.consumer(conf)) {
                c2.subscribe(List.of(topic));
                long deadline = System.nanoTime() + Env.WAIT.toNanos();
                while (!(c1.assignment().size() == 2 && c2.assignment().size() == 2)) {
                    assertTrue(System.nanoTime() < deadline,
                        "no 2+2 split: c1 " + c1.assignment() + " c2 " + c2.assignment());
                    c1.poll(Duration.ofMillis(100)).forEach(sink::add);
                    c2.poll(Duration.ofMillis(100)).forEach(sink::add);
                }
                a2 = new HashSet<>(c2.assignment());
                Set<TopicPartition> both = new HashSet<>(c1.assignment());
                both.addAll(a2);
                assertEquals(4, both.size(), "the two members' assignments overlap");
            }
            // c2 left: c1 owns everything again
            awaitAssignment(c1, 4, sink);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"classic", "consumer"})
    void rebalanceListenerSeesRevocationBeforeReassignment(String protocol) throws Exception {
        String topic = Env.name("listener-" + protocol);
        String group = Env.name("g-listener-" + protocol);
        Env.createTopic(topic, 2);
        produce(topic, 200, "x");
        List<String> events = new ArrayList<>();
        Map<String, Object> conf = groupConf(protocol, group);
        try (KafkaConsumer<String, String> c = Env.consumer(conf)) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    if (!parts.isEmpty()) {
                        events.add("revoked " + parts.size());
                        c.commitSync(Duration.ofSeconds(30));
                    }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    events.add("assigned " + parts.size());
                }
            });
            List<ConsumerRecord<String, String>> got = Env.pollUntil(c, 200);
            assertEquals(200, got.size());
            c.unsubscribe();
        }
        assertTrue(events.contains("assigned 2"), "events " + events);
        assertTrue(events.contains("revoked 2"), "events " + events);
        try (Admin a = Env.admin()) {
            long sum = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(60, TimeUnit.SECONDS)
                .values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            assertEquals(200, sum, "offsets committed in onPartitionsRevoked");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"classic", "consumer"})
    void seekOffsetsForTimesAndPositions(String protocol) throws Exception {
        String topic = Env.name("seek-" + protocol);
        Env.createTopic(topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> p = Env.producer(Map.of())) {
            for (int i = 0; i < 100; i++) {
                p.send(new ProducerRecord<>(topic, 0, 1_600_000_000_000L + i * 1000L, "k", "v" + i));
            }
            p.flush();
        }
        try (KafkaConsumer<String, String> c = Env.consumer(Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol))) {
            c.assign(List.of(tp));
            assertEquals(0L, c.beginningOffsets(List.of(tp)).get(tp));
            assertEquals(100L, c.endOffsets(List.of(tp)).get(tp));
            Map<TopicPartition, OffsetAndTimestamp> ft =
                c.offsetsForTimes(Map.of(tp, 1_600_000_000_000L + 41_500L));
            assertEquals(42L, ft.get(tp).offset(), "offsetsForTimes");
            assertEquals(1_600_000_000_000L + 42_000L, ft.get(tp).timestamp());
            assertEquals(null, c.offsetsForTimes(Map.of(tp, 1_700_000_000_000L)).get(tp), "a time after the last record");
            c.seek(tp, 90);
            List<ConsumerRecord<String, String>> got = Env.pollUntil(c, 10);
            assertEquals("v90", got.get(0).value());
            assertEquals(100L, c.position(tp));
        }
        try (Admin a = Env.admin()) {
            var max = a.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).all().get(60, TimeUnit.SECONDS).get(tp);
            assertEquals(99L, max.offset(), "ListOffsets MAX_TIMESTAMP");
        }
    }
}
