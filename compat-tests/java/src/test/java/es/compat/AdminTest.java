package es.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Java Admin client: cluster, topics, configs, partitions, offsets, records, groups. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AdminTest {
    private static final long S = 60;

    @Test
    void describeClusterHasIdControllerAndEveryNode() throws Exception {
        try (Admin a = Env.admin()) {
            DescribeClusterResult r = a.describeCluster();
            String id = r.clusterId().get(S, TimeUnit.SECONDS);
            assertNotNull(id);
            assertFalse(id.isEmpty());
            Collection<Node> nodes = r.nodes().get(S, TimeUnit.SECONDS);
            assertEquals(Env.NODES, nodes.size(), "nodes " + nodes);
            Node controller = r.controller().get(S, TimeUnit.SECONDS);
            assertNotNull(controller);
            assertTrue(controller.id() >= 0, "controller " + controller);
        }
    }

    @Test
    void createDescribeListDeleteTopics() throws Exception {
        String t1 = Env.name("adm1");
        String t2 = Env.name("adm2");
        try (Admin a = Env.admin()) {
            a.createTopics(List.of(new NewTopic(t1, 3, (short) 1), new NewTopic(t2, 1, (short) 1)))
                .all().get(S, TimeUnit.SECONDS);
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.createTopics(List.of(new NewTopic(t1, 3, (short) 1))).all().get(S, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof TopicExistsException, "second create: " + e.getCause());
            Set<String> names = a.listTopics().names().get(S, TimeUnit.SECONDS);
            assertTrue(names.containsAll(List.of(t1, t2)), "listTopics " + names);
            TopicDescription d = a.describeTopics(List.of(t1)).allTopicNames().get(S, TimeUnit.SECONDS).get(t1);
            assertEquals(3, d.partitions().size());
            d.partitions().forEach(p -> {
                assertNotNull(p.leader(), "partition " + p.partition() + " has no leader");
                assertEquals(1, p.replicas().size());
                assertEquals(1, p.isr().size());
            });
            assertNotNull(d.topicId());
            a.deleteTopics(List.of(t2)).all().get(S, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (a.listTopics().names().get(S, TimeUnit.SECONDS).contains(t2)) {
                assertTrue(System.nanoTime() < deadline, "deleted topic still listed");
                Thread.sleep(100);
            }
            ExecutionException e2 = assertThrows(ExecutionException.class,
                () -> a.describeTopics(List.of(t2)).allTopicNames().get(S, TimeUnit.SECONDS));
            assertTrue(e2.getCause() instanceof UnknownTopicOrPartitionException, "describe deleted: " + e2.getCause());
        }
    }

    @Test
    void topicAndBrokerConfigsDescribeAndIncrementalAlter() throws Exception {
        String t = Env.name("cfg");
        try (Admin a = Env.admin()) {
            a.createTopics(List.of(new NewTopic(t, 1, (short) 1).configs(Map.of("retention.ms", "3600000"))))
                .all().get(S, TimeUnit.SECONDS);
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t);
            Config c = describeUntil(a, res, x -> x.get("retention.ms") != null, "the new topic's configs");
            assertEquals("3600000", c.get("retention.ms").value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, c.get("retention.ms").source());
            assertNotNull(c.get("cleanup.policy"), "cleanup.policy missing from describeConfigs");
            a.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SET))))
                .all().get(S, TimeUnit.SECONDS);
            c = describeUntil(a, res, x -> x.get("retention.ms") != null
                && "7200000".equals(x.get("retention.ms").value()), "retention.ms 7200000");
            assertEquals("7200000", c.get("retention.ms").value());
            assertEquals("compact", c.get("cleanup.policy").value());
            a.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE))))
                .all().get(S, TimeUnit.SECONDS);
            c = describeUntil(a, res, x -> x.get("retention.ms") != null
                && x.get("retention.ms").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "retention.ms no longer set on the topic");
            assertTrue(c.get("retention.ms").isDefault() || c.get("retention.ms").source()
                != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms still set: " + c.get("retention.ms"));
            String node = a.describeCluster().nodes().get(S, TimeUnit.SECONDS).iterator().next().idString();
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, node);
            Config bc = a.describeConfigs(List.of(broker)).all().get(S, TimeUnit.SECONDS).get(broker);
            assertFalse(bc.entries().isEmpty(), "broker config has no entries");
        }
    }

    /**
     * describeConfigs until `ok` holds, or fails after Env.WAIT. In a cluster the Admin client asks
     * any broker, and a broker applies a config change (or a new topic) when the metadata log
     * reaches it, a moment after the controller acknowledged it: Kafka promises no read-your-writes
     * across brokers. On one node the first answer holds.
     */
    private static Config describeUntil(Admin a, ConfigResource res, java.util.function.Predicate<Config> ok, String what)
            throws Exception {
        long deadline = System.nanoTime() + Env.WAIT.toNanos();
        String last = "";
        while (true) {
            try {
                Config c = a.describeConfigs(List.of(res)).all().get(S, TimeUnit.SECONDS).get(res);
                if (ok.test(c)) {
                    return c;
                }
                last = String.valueOf(c);
            } catch (ExecutionException e) {
                last = String.valueOf(e.getCause());
            }
            assertTrue(System.nanoTime() < deadline, "no " + what + " within " + Env.WAIT + "; last: " + last);
            Thread.sleep(100);
        }
    }

    @Test
    void createPartitionsGrowsButNeverShrinks() throws Exception {
        String t = Env.name("parts");
        try (Admin a = Env.admin()) {
            a.createTopics(List.of(new NewTopic(t, 2, (short) 1))).all().get(S, TimeUnit.SECONDS);
            a.createPartitions(Map.of(t, NewPartitions.increaseTo(5))).all().get(S, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (a.describeTopics(List.of(t)).allTopicNames().get(S, TimeUnit.SECONDS).get(t).partitions().size() != 5) {
                assertTrue(System.nanoTime() < deadline, "partitions did not grow to 5");
                Thread.sleep(100);
            }
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.createPartitions(Map.of(t, NewPartitions.increaseTo(3))).all().get(S, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof InvalidPartitionsException, "shrink: " + e.getCause());
        }
    }

    @Test
    void listOffsetsAndDeleteRecords() throws Exception {
        String t = Env.name("offs");
        TopicPartition tp = new TopicPartition(t, 0);
        try (Admin a = Env.admin()) {
            a.createTopics(List.of(new NewTopic(t, 1, (short) 1))).all().get(S, TimeUnit.SECONDS);
            try (KafkaProducer<String, String> p = Env.producer(Map.of())) {
                for (int i = 0; i < 100; i++) {
                    p.send(new ProducerRecord<>(t, 0, 1_500_000_000_000L + i, null, "v" + i));
                }
                p.flush();
            }
            assertEquals(0L, a.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get(S, TimeUnit.SECONDS).get(tp).offset());
            assertEquals(100L, a.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get(S, TimeUnit.SECONDS).get(tp).offset());
            assertEquals(10L, a.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(1_500_000_000_010L)))
                .all().get(S, TimeUnit.SECONDS).get(tp).offset());
            long low = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(60))).lowWatermarks().get(tp)
                .get(S, TimeUnit.SECONDS).lowWatermark();
            assertEquals(60L, low, "DeleteRecords low watermark");
            assertEquals(60L, a.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get(S, TimeUnit.SECONDS).get(tp).offset());
            var recs = Env.readAll(t, Map.of());
            assertEquals(40, recs.size());
            assertEquals("v60", recs.get(0).value());
        }
    }

    @Test
    void listDescribeAndDeleteConsumerGroups() throws Exception {
        String t = Env.name("groups");
        String g = Env.name("g-admin");
        Env.createTopic(t, 1);
        try (KafkaProducer<String, String> p = Env.producer(Map.of())) {
            p.send(new ProducerRecord<>(t, "a")).get(S, TimeUnit.SECONDS);
        }
        try (var c = Env.consumer(Map.of("group.id", g))) {
            c.subscribe(List.of(t));
            Env.pollUntil(c, 1);
            c.commitSync();
        }
        try (Admin a = Env.admin()) {
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (a.listGroups().all().get(S, TimeUnit.SECONDS).stream().noneMatch(l -> l.groupId().equals(g))) {
                assertTrue(System.nanoTime() < deadline, "listGroups does not show " + g);
                Thread.sleep(100);
            }
            var d = a.describeConsumerGroups(List.of(g)).all().get(S, TimeUnit.SECONDS).get(g);
            assertTrue(d.members().isEmpty(), "members after close: " + d.members());
            a.deleteConsumerGroups(List.of(g)).all().get(S, TimeUnit.SECONDS);
            assertTrue(a.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get(S, TimeUnit.SECONDS).isEmpty(),
                "offsets of a deleted group");
        }
    }
}
