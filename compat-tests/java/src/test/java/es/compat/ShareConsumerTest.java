package es.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * Share groups (KIP-932) through Apache Kafka 4.4's KafkaShareConsumer and Admin, run unchanged
 * against es and against Kafka 4.4 (docs/share-groups-design.md §4.3, §5 item 16).
 *
 * <p>Every group is set up through Admin group configs before any member joins:
 * share.auto.offset.reset=earliest (Kafka's default is latest) plus what the test needs, and the
 * test waits until DescribeConfigs shows them, because a share-partition initialised before the
 * config lands starts at the log end.
 *
 * <p>"Never delivered again" is checked without waiting for nothing to happen: the test produces a
 * sentinel record and polls a fresh member until the sentinel arrives. A share-partition hands out
 * its lowest available offset first (Kafka's SharePartition.nextFetchOffset), so a record that
 * were still available would arrive before or with the sentinel.
 *
 * <p>All waits are bounded (Env.WAIT unless a test says why it needs another bound); the only
 * waits that depend on a duration are the lock-expiry and renewal tests, which wait out the
 * smallest lock duration Kafka accepts (group.share.min.record.lock.duration.ms, 15000) once each.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
@Execution(ExecutionMode.CONCURRENT) // each test its own topic and group; most of their time is lock waits
class ShareConsumerTest {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final Duration COMMIT = Duration.ofSeconds(30);
    /** Kafka's smallest allowed share.record.lock.duration.ms (the broker's min bound, 15000). */
    private static final int LOCK_MIN_MS = 15000;
    /** Kafka's largest allowed share.record.lock.duration.ms (the broker's max bound, 60000). */
    private static final int LOCK_MAX_MS = 60000;
    /**
     * How long records released by a closed or killed member may take to come back: well under
     * LOCK_MAX_MS, the lock duration those tests set, so that a lock expiry cannot stand in for
     * the release the test is about.
     */
    private static final Duration RELEASE_WAIT = Duration.ofSeconds(40);

    // ---- helpers -------------------------------------------------------------------------

    static KafkaShareConsumer<String, String> shareConsumer(String group, Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Env.BOOTSTRAP);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Env.withSecurity(p);
        p.putAll(extra);
        return new KafkaShareConsumer<>(p);
    }

    static Map<String, Object> explicit() {
        return Map.of(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
    }

    /**
     * Explicit acknowledgement, record_limit acquisition (each ShareFetch acquires at most
     * maxRecords), at most maxRecords per poll. The client may still have sent one more ShareFetch
     * after the poll that returned records, so a member that stops polling can hold more than poll
     * returned (takeOverFrom allows for it).
     */
    static Map<String, Object> explicitRecordLimit(int maxRecords) {
        return Map.of(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit",
            ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit",
            ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxRecords);
    }

    /** A new share group name with share.auto.offset.reset=earliest and `extra` set and visible. */
    static String group(String label, Map<String, String> extra) throws Exception {
        String group = Env.name("sg-" + label);
        Map<String, String> want = new HashMap<>(extra);
        want.put("share.auto.offset.reset", "earliest");
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        List<AlterConfigOp> ops = new ArrayList<>();
        want.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        try (Admin a = Env.admin()) {
            a.incrementalAlterConfigs(Map.of(res, ops)).all().get(60, TimeUnit.SECONDS);
            awaitTrue("group configs " + want + " visible for " + group, Env.WAIT, () -> {
                Config c = a.describeConfigs(List.of(res)).all().get(60, TimeUnit.SECONDS).get(res);
                for (Map.Entry<String, String> e : want.entrySet()) {
                    ConfigEntry ce = c.get(e.getKey());
                    if (ce == null || !e.getValue().equals(ce.value())) {
                        return false;
                    }
                }
                return true;
            });
        }
        return group;
    }

    interface Check {
        boolean ok() throws Exception;
    }

    /** Polls `cond` every 100 ms until it holds, failing with `what` after `bound`. */
    static void awaitTrue(String what, Duration bound, Check cond) throws Exception {
        awaitTrue(what, bound, cond, () -> "");
    }

    /** As above; the failure also says `last` (what was seen last). */
    static void awaitTrue(String what, Duration bound, Check cond, Supplier<Object> last) throws Exception {
        long deadline = System.nanoTime() + bound.toNanos();
        while (!cond.ok()) {
            if (System.nanoTime() > deadline) {
                fail("timed out after " + bound + " waiting for " + what + "; last seen: " + last.get());
            }
            Thread.sleep(100);
        }
    }

    /** n records "v<i>" to partition 0, flushed every `batch` records so they form several batches. */
    static void produce(String topic, int n, int batch) throws Exception {
        try (KafkaProducer<String, String> p = Env.producer(Map.of())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
                if ((i + 1) % batch == 0) {
                    p.flush();
                }
            }
            p.flush();
        }
    }

    static long produceOne(String topic, String value) throws Exception {
        try (KafkaProducer<String, String> p = Env.producer(Map.of())) {
            return p.send(new ProducerRecord<>(topic, 0, "k", value)).get(60, TimeUnit.SECONDS).offset();
        }
    }

    /** The client's own ShareFetch figures (fetch-total, records-per-request-avg, ...), for the log. */
    static Map<String, Object> fetchMetrics(KafkaShareConsumer<String, String> c) {
        Map<String, Object> out = new TreeMap<>();
        c.metrics().forEach((name, m) -> {
            if (name.group().contains("fetch-manager") && (name.name().equals("fetch-total")
                    || name.name().equals("records-per-request-avg") || name.name().equals("fetch-latency-avg"))) {
                out.put(name.name(), m.metricValue());
            }
        });
        return out;
    }

    static int count(ConsumerRecord<String, String> r) {
        Optional<Short> c = r.deliveryCount();
        assertTrue(c.isPresent(), "a share consumer's record carries its delivery count: " + r);
        return c.get();
    }

    static void assertCommitted(Map<TopicIdPartition, Optional<KafkaException>> result, String what) {
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
            assertTrue(e.getValue().isEmpty(), what + ": acknowledgement of " + e.getKey() + " failed: "
                + e.getValue().map(Throwable::toString).orElse(""));
        }
    }

    /**
     * Produces a sentinel and has a fresh member of the group (explicit, accepting everything) poll
     * until it arrives; fails if any other record of the topic is delivered before or with it.
     * Every other member of the group must be closed or idle (not polling) by then.
     */
    static void assertNothingElseDeliverable(String topic, String group, String why) throws Exception {
        long sentinel = produceOne(topic, "sentinel");
        List<String> others = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = shareConsumer(group, explicit())) {
            c.subscribe(List.of(topic));
            boolean seen = false;
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (!seen) {
                assertTrue(System.nanoTime() < deadline, "the sentinel (offset " + sentinel
                    + ") did not arrive within " + Env.WAIT + "; delivered meanwhile: " + others);
                for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    if (r.offset() == sentinel) {
                        seen = true;
                    } else {
                        others.add(r.offset() + "=" + r.value() + " (delivery " + count(r) + ")");
                    }
                }
            }
            assertCommitted(c.commitSync(COMMIT), "the sentinel");
        }
        assertTrue(others.isEmpty(), why + "; delivered before the sentinel: " + others);
    }

    // ---- scenarios -----------------------------------------------------------------------

    /** Three members of one group on one partition (implicit acknowledgement): 300 records, each
     *  delivered once in total, with delivery count 1, and all accepted. */
    @Test
    void threeConsumersShareOnePartitionEachRecordOnce() throws Exception {
        String topic = Env.name("share-three");
        Env.createTopic(topic, 1);
        String group = group("three", Map.of());
        int n = 300;
        produce(topic, n, 10);
        Map<Long, Integer> deliveries = new TreeMap<>();
        int[] perConsumer = new int[3];
        List<String> polls = new ArrayList<>(); // consumer:records of each non-empty poll, for the log
        List<KafkaShareConsumer<String, String>> cs = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                KafkaShareConsumer<String, String> c =
                    shareConsumer(group, Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 20));
                c.subscribe(List.of(topic));
                cs.add(c);
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            while (deliveries.size() < n) {
                assertTrue(System.nanoTime() < deadline,
                    deliveries.size() + " of " + n + " records delivered within 120 s");
                for (int i = 0; i < 3; i++) {
                    var records = cs.get(i).poll(POLL);
                    if (!records.isEmpty()) {
                        polls.add(i + ":" + records.count());
                    }
                    for (ConsumerRecord<String, String> r : records) {
                        assertEquals("v" + r.offset(), r.value());
                        assertEquals(1, count(r), "delivery count of offset " + r.offset());
                        deliveries.merge(r.offset(), 1, Integer::sum);
                        perConsumer[i]++;
                    }
                }
            }
            for (KafkaShareConsumer<String, String> c : cs) {
                assertCommitted(c.commitSync(COMMIT), "implicit acknowledgement");
            }
            for (int i = 0; i < 3; i++) {
                polls.add("consumer " + i + " " + fetchMetrics(cs.get(i)));
            }
        } finally {
            cs.forEach(KafkaShareConsumer::close);
        }
        System.out.printf("share-three: per consumer %d/%d/%d; non-empty polls %s%n",
            perConsumer[0], perConsumer[1], perConsumer[2], polls);
        assertEquals(n, deliveries.size());
        deliveries.forEach((off, times) -> assertEquals(1, times, "offset " + off + " delivered " + times + " times"));
        assertNothingElseDeliverable(topic, group, "every record was accepted");
    }

    /** share.acknowledgement.mode=explicit: ACCEPT each record, commitSync; the group's next member
     *  gets none of them. */
    @Test
    void explicitAcceptIsFinal() throws Exception {
        String topic = Env.name("share-explicit");
        Env.createTopic(topic, 1);
        String group = group("explicit", Map.of());
        int n = 50;
        produce(topic, n, 10);
        Set<Long> seen = new TreeSet<>();
        try (KafkaShareConsumer<String, String> c = shareConsumer(group, explicit())) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (seen.size() < n) {
                assertTrue(System.nanoTime() < deadline, seen.size() + " of " + n + " records within " + Env.WAIT);
                var records = c.poll(POLL);
                for (ConsumerRecord<String, String> r : records) {
                    assertTrue(seen.add(r.offset()), "offset " + r.offset() + " delivered twice");
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                if (!records.isEmpty()) {
                    assertCommitted(c.commitSync(COMMIT), "ACCEPT");
                }
            }
        }
        assertNothingElseDeliverable(topic, group, "all " + n + " records were accepted explicitly");
    }

    /** A RELEASEd record is delivered again, to one of the group's members, with delivery count 2. */
    @Test
    void releasedRecordIsRedeliveredWithCountTwo() throws Exception {
        String topic = Env.name("share-release");
        Env.createTopic(topic, 1);
        String group = group("release", Map.of());
        produce(topic, 5, 5);
        Map<Long, List<Integer>> counts = new TreeMap<>();
        List<KafkaShareConsumer<String, String>> cs = new ArrayList<>();
        try {
            for (int i = 0; i < 2; i++) {
                KafkaShareConsumer<String, String> c = shareConsumer(group, explicit());
                c.subscribe(List.of(topic));
                cs.add(c);
            }
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (!(counts.size() == 5 && counts.get(0L).size() == 2)) {
                assertTrue(System.nanoTime() < deadline, "deliveries within " + Env.WAIT + ": " + counts);
                for (KafkaShareConsumer<String, String> c : cs) {
                    var records = c.poll(POLL);
                    for (ConsumerRecord<String, String> r : records) {
                        counts.computeIfAbsent(r.offset(), k -> new ArrayList<>()).add(count(r));
                        boolean release = r.offset() == 0 && count(r) == 1;
                        c.acknowledge(r, release ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    }
                    if (!records.isEmpty()) {
                        assertCommitted(c.commitSync(COMMIT), "RELEASE/ACCEPT");
                    }
                }
            }
        } finally {
            cs.forEach(KafkaShareConsumer::close);
        }
        assertEquals(List.of(1, 2), counts.get(0L), "delivery counts of the released offset 0");
        for (long off = 1; off < 5; off++) {
            assertEquals(List.of(1), counts.get(off), "delivery counts of offset " + off);
        }
        assertNothingElseDeliverable(topic, group, "the released record was accepted on its second delivery");
    }

    /** A REJECTed record is never delivered again. */
    @Test
    void rejectedRecordIsNeverRedelivered() throws Exception {
        String topic = Env.name("share-reject");
        Env.createTopic(topic, 1);
        String group = group("reject", Map.of());
        produce(topic, 5, 5);
        Map<Long, Integer> deliveries = new TreeMap<>();
        try (KafkaShareConsumer<String, String> c = shareConsumer(group, explicit())) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (deliveries.size() < 5) {
                assertTrue(System.nanoTime() < deadline, "deliveries within " + Env.WAIT + ": " + deliveries);
                var records = c.poll(POLL);
                for (ConsumerRecord<String, String> r : records) {
                    deliveries.merge(r.offset(), 1, Integer::sum);
                    c.acknowledge(r, r.offset() == 2 ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT);
                }
                if (!records.isEmpty()) {
                    assertCommitted(c.commitSync(COMMIT), "REJECT/ACCEPT");
                }
            }
        }
        deliveries.forEach((off, times) -> assertEquals(1, times, "offset " + off + " delivered " + times + " times"));
        assertNothingElseDeliverable(topic, group, "offset 2 was rejected, the others accepted");
    }

    /** Group config share.delivery.count.limit=2: a record released on each delivery is delivered
     *  twice (counts 1 and 2), then archived, never a third time. */
    @Test
    void deliveryCountLimitArchivesARecordReleasedEachTime() throws Exception {
        String topic = Env.name("share-limit");
        Env.createTopic(topic, 1);
        String group = group("limit", Map.of("share.delivery.count.limit", "2"));
        produce(topic, 3, 3);
        Map<Long, List<Integer>> counts = new TreeMap<>();
        try (KafkaShareConsumer<String, String> c = shareConsumer(group, explicit())) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (!(counts.size() == 3 && counts.get(0L).size() == 2)) {
                assertTrue(System.nanoTime() < deadline, "deliveries within " + Env.WAIT + ": " + counts);
                var records = c.poll(POLL);
                for (ConsumerRecord<String, String> r : records) {
                    counts.computeIfAbsent(r.offset(), k -> new ArrayList<>()).add(count(r));
                    c.acknowledge(r, r.offset() == 0 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                }
                if (!records.isEmpty()) {
                    assertCommitted(c.commitSync(COMMIT), "RELEASE/ACCEPT");
                }
            }
        }
        assertEquals(List.of(1, 2), counts.get(0L), "delivery counts of the always-released offset 0");
        assertEquals(List.of(1), counts.get(1L));
        assertEquals(List.of(1), counts.get(2L));
        assertNothingElseDeliverable(topic, group,
            "offset 0 reached share.delivery.count.limit=2 and was released: it is archived");
    }

    /** The records a member holds, unacknowledged; the member's future (held offsets) and the
     *  wait for another member. */
    private static Map<Long, Integer> takeOverFrom(String topic, String group, Set<Long> held, int n,
                                                   Duration bound) {
        Map<Long, Integer> counts = new TreeMap<>();
        try (KafkaShareConsumer<String, String> b = shareConsumer(group, explicit())) {
            b.subscribe(List.of(topic));
            long deadline = System.nanoTime() + bound.toNanos();
            while (counts.size() < n) {
                assertTrue(System.nanoTime() < deadline, "another member received " + counts.keySet() + " of "
                    + n + " records within " + bound + " (held: " + held + ")");
                var records = b.poll(POLL);
                for (ConsumerRecord<String, String> r : records) {
                    assertFalse(counts.containsKey(r.offset()), "offset " + r.offset() + " delivered twice to it");
                    counts.put(r.offset(), count(r));
                    b.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                if (!records.isEmpty()) {
                    assertCommitted(b.commitSync(COMMIT), "ACCEPT by the member taking over");
                }
            }
        }
        // A held record comes back with count 2. Another may too: the first member's client can
        // have fetched it ahead, unseen by the application, and its release at the close keeps the
        // count (Kafka 4.4 counts a session release as a delivery, KAFKA-19972); never above 2.
        for (Map.Entry<Long, Integer> e : counts.entrySet()) {
            String what = "delivery count of offset " + e.getKey() + " (held by the first member: " + held + ")";
            if (held.contains(e.getKey())) {
                assertEquals(2, e.getValue(), what);
            } else {
                assertTrue(e.getValue() == 1 || e.getValue() == 2, what + ": " + e.getValue());
            }
        }
        return counts;
    }

    /** Polls c until it returns records; acknowledges nothing. Returns their offsets. */
    private static Set<Long> hold(KafkaShareConsumer<String, String> c) {
        long deadline = System.nanoTime() + Env.WAIT.toNanos();
        Set<Long> held = new TreeSet<>();
        while (held.isEmpty()) {
            assertTrue(System.nanoTime() < deadline, "no records within " + Env.WAIT);
            for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                assertEquals(1, count(r));
                held.add(r.offset());
            }
        }
        return held;
    }

    /** A member that holds records and is closed without acknowledging them: they go to another
     *  member, with delivery count 2. The lock duration is set to its maximum (60 s) and the other
     *  member waits at most 40 s, so only the release on close can explain the return. */
    @Test
    void closedConsumerReleasesHeldRecords() throws Exception {
        String topic = Env.name("share-close");
        Env.createTopic(topic, 1);
        String group = group("close", Map.of("share.record.lock.duration.ms", String.valueOf(LOCK_MAX_MS)));
        produce(topic, 10, 10);
        Set<Long> held;
        try (KafkaShareConsumer<String, String> a = shareConsumer(group, explicitRecordLimit(4))) {
            a.subscribe(List.of(topic));
            held = hold(a);
        }
        takeOverFrom(topic, group, held, 10, RELEASE_WAIT);
        assertNothingElseDeliverable(topic, group, "all ten records were accepted by the second member");
    }

    /** A child JVM (Holder) that joined the group and holds records it will never acknowledge. */
    record Holding(Process process, Set<Long> held, String lockMs) {}

    /** Starts Holder for (topic, group) and waits until it says which records it holds. */
    static Holding startHolder(String topic, String group, int maxRecords) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-Xmx256M");
        for (String k : System.getProperties().stringPropertyNames()) {
            if (k.startsWith("compat.") || k.startsWith("log4j2.") || k.startsWith("kafka.ref.")) {
                cmd.add("-D" + k + "=" + System.getProperty(k));
            }
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), Holder.class.getName(), topic, group,
            String.valueOf(maxRecords)));
        Process child = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        try {
            LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
            Thread reader = new Thread(() -> {
                try (BufferedReader br = new BufferedReader(
                        new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = br.readLine()) != null) {
                        lines.add(line);
                    }
                } catch (Exception e) {
                    lines.add("reader: " + e);
                }
                lines.add("EOF");
            });
            reader.setDaemon(true);
            reader.start();
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (true) {
                String line = lines.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                assertNotNull(line, "the child consumer said nothing within " + Env.WAIT);
                if (line.equals("EOF")) {
                    fail("the child consumer exited " + child.waitFor() + " before holding records");
                }
                String[] f = line.split(" ");
                if (f.length == 4 && f[0].equals("HELD") && f[2].equals("LOCK")) {
                    Set<Long> held = new TreeSet<>();
                    for (String o : f[1].split(",")) {
                        held.add(Long.parseLong(o));
                    }
                    return new Holding(child, held, f[3]);
                }
            }
        } catch (Throwable t) {
            child.destroyForcibly();
            throw t;
        }
    }

    static void kill(Process p) throws Exception {
        p.destroyForcibly(); // SIGKILL on Unix (a stopped process too)
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the child consumer did not die");
    }

    /** As closedConsumerReleasesHeldRecords, but the holder is a child JVM killed with SIGKILL
     *  (Process.destroyForcibly): its connection closes without a goodbye, and the broker
     *  releases its records as the connection closes (Kafka's ShareSessionCache listener), long
     *  before the 60 s lock could expire. */
    @Test
    void killedConsumerProcessReleasesHeldRecords() throws Exception {
        String topic = Env.name("share-kill");
        Env.createTopic(topic, 1);
        String group = group("kill", Map.of("share.record.lock.duration.ms", String.valueOf(LOCK_MAX_MS)));
        produce(topic, 10, 10);
        Holding h = startHolder(topic, group, 4);
        kill(h.process());
        takeOverFrom(topic, group, h.held(), 10, RELEASE_WAIT);
        assertNothingElseDeliverable(topic, group, "all ten records were accepted by the second member");
    }

    /** The child JVM of the kill and stop tests: joins (explicit, record_limit, at most args[2]
     *  records), prints "HELD o1,o2,... LOCK <acquisitionLockTimeoutMs>" once it holds records,
     *  acknowledges nothing and waits to be killed. */
    static final class Holder {
        public static void main(String[] args) throws Exception {
            KafkaShareConsumer<String, String> c = shareConsumer(args[1], explicitRecordLimit(Integer.parseInt(args[2])));
            c.subscribe(List.of(args[0]));
            Set<Long> held = hold(c);
            StringBuilder sb = new StringBuilder();
            for (long o : held) {
                sb.append(sb.length() == 0 ? "" : ",").append(o);
            }
            System.out.println("HELD " + sb + " LOCK " + c.acquisitionLockTimeoutMs().map(String::valueOf).orElse("none"));
            System.out.flush();
            Thread.sleep(600_000); // bounded: the test kills it long before
            System.exit(3);
        }
    }

    /** A member whose process is stopped (SIGSTOP) while it holds records: its connection stays
     *  open, so nothing is released on close; with share.record.lock.duration.ms at Kafka's
     *  minimum (15 s) the locks expire and another member gets the records with delivery count 2. */
    @Test
    void stoppedConsumerProcessLocksExpireAndRecordsMoveOn() throws Exception {
        String topic = Env.name("share-stop");
        Env.createTopic(topic, 1);
        String group = group("stop", Map.of("share.record.lock.duration.ms", String.valueOf(LOCK_MIN_MS)));
        produce(topic, 10, 10);
        Holding h = startHolder(topic, group, 10);
        try {
            assertEquals(String.valueOf(LOCK_MIN_MS), h.lockMs(), "the lock duration the broker reports");
            Process stop = new ProcessBuilder("kill", "-STOP", String.valueOf(h.process().pid()))
                .redirectErrorStream(true).start();
            assertTrue(stop.waitFor(30, TimeUnit.SECONDS) && stop.exitValue() == 0, "kill -STOP failed");
            // bound: the lock duration plus Env.WAIT
            takeOverFrom(topic, group, h.held(), 10, Duration.ofMillis(LOCK_MIN_MS).plus(Env.WAIT));
        } finally {
            kill(h.process());
        }
        assertNothingElseDeliverable(topic, group, "all ten records were accepted by the second member");
    }

    /** acknowledge(record, RENEW) (KIP-1222) keeps a record's lock past the lock duration: the
     *  holder renews it for longer than share.record.lock.duration.ms (15 s), another member
     *  polling all along never gets it, and the holder's final ACCEPT succeeds. */
    @Test
    void renewKeepsTheLockPastTheLockDuration() throws Exception {
        String topic = Env.name("share-renew");
        Env.createTopic(topic, 1);
        String group = group("renew", Map.of("share.record.lock.duration.ms", String.valueOf(LOCK_MIN_MS)));
        produce(topic, 1, 1);
        List<String> otherGot = new ArrayList<>();
        int renewals = 0;
        try (KafkaShareConsumer<String, String> a = shareConsumer(group, explicitRecordLimit(1));
             KafkaShareConsumer<String, String> b = shareConsumer(group, explicit())) {
            a.subscribe(List.of(topic));
            b.subscribe(List.of(topic));
            ConsumerRecord<String, String> rec = null;
            long deadline = System.nanoTime() + Env.WAIT.toNanos();
            while (rec == null) {
                assertTrue(System.nanoTime() < deadline, "the holder got no record within " + Env.WAIT);
                for (ConsumerRecord<String, String> r : a.poll(POLL)) {
                    rec = r;
                }
            }
            assertEquals(1, count(rec));
            long acquired = System.nanoTime();
            long holdNs = Duration.ofMillis(LOCK_MIN_MS + 7000).toNanos();
            while (System.nanoTime() - acquired < holdNs) {
                a.acknowledge(rec, AcknowledgeType.RENEW);
                assertCommitted(a.commitSync(COMMIT), "RENEW number " + (renewals + 1));
                renewals++;
                // "processing" for about 2 s, spent polling the other member
                long until = System.nanoTime() + Duration.ofSeconds(2).toNanos();
                while (System.nanoTime() < until) {
                    var got = b.poll(POLL);
                    for (ConsumerRecord<String, String> r : got) {
                        otherGot.add(r.offset() + " (delivery " + count(r) + ")");
                        b.acknowledge(r, AcknowledgeType.RELEASE);
                    }
                    if (!got.isEmpty()) {
                        b.commitSync(COMMIT);
                    }
                }
                // a renewed record is returned again by the holder's next poll (KafkaShareConsumer's javadoc)
                ConsumerRecord<String, String> again = null;
                long pollDeadline = System.nanoTime() + Env.WAIT.toNanos();
                while (again == null) {
                    assertTrue(System.nanoTime() < pollDeadline,
                        "the renewed record was not returned by the holder's poll within " + Env.WAIT);
                    for (ConsumerRecord<String, String> r : a.poll(POLL)) {
                        again = r;
                    }
                }
                assertEquals(rec.offset(), again.offset());
                assertEquals(1, count(again), "a renewal does not count as a delivery");
                rec = again;
            }
            a.acknowledge(rec, AcknowledgeType.ACCEPT);
            assertCommitted(a.commitSync(COMMIT), "ACCEPT after " + renewals + " renewals, past the lock duration");
        }
        assertTrue(otherGot.isEmpty(), "the other member got the renewed record: " + otherGot);
        assertNothingElseDeliverable(topic, group, "the renewed record was accepted by its holder");
    }

    /** Admin on a share group: listGroups (share type), describeShareGroups (STABLE with the member
     *  and its assignment, EMPTY after it leaves), deleteShareGroups, and then the group is gone. */
    @Test
    void adminDescribesListsAndDeletesShareGroup() throws Exception {
        String topic = Env.name("share-admin");
        Env.createTopic(topic, 1);
        String group = group("admin", Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        produce(topic, 10, 10);
        try (Admin admin = Env.admin()) {
            try (KafkaShareConsumer<String, String> c = shareConsumer(group, Map.of())) {
                c.subscribe(List.of(topic));
                int got = 0;
                long deadline = System.nanoTime() + Env.WAIT.toNanos();
                while (got < 10) {
                    assertTrue(System.nanoTime() < deadline, got + " of 10 records within " + Env.WAIT);
                    got += c.poll(POLL).count();
                }
                assertCommitted(c.commitSync(COMMIT), "implicit acknowledgement");
                AtomicReference<ShareGroupDescription> dr = new AtomicReference<>();
                awaitTrue("describeShareGroups: STABLE, one member assigned " + tp, Env.WAIT, () -> {
                    c.poll(Duration.ZERO); // keep the member's heartbeats and assignment moving
                    ShareGroupDescription x = describe(admin, group);
                    dr.set(x);
                    return x.groupState() == GroupState.STABLE && x.members().size() == 1
                        && x.members().iterator().next().assignment().topicPartitions().contains(tp);
                }, dr::get);
                ShareGroupDescription d = dr.get();
                assertEquals(group, d.groupId());
                ShareMemberDescription m = d.members().iterator().next();
                assertFalse(m.consumerId().isEmpty());
                assertFalse(m.clientId().isEmpty());
                assertTrue(m.memberEpoch() > 0, "member epoch " + m.memberEpoch());
                assertTrue(d.groupEpoch() > 0, "group epoch " + d.groupEpoch());
                assertNotNull(d.coordinator());
                Collection<GroupListing> listed =
                    admin.listGroups(ListGroupsOptions.forShareGroups()).all().get(60, TimeUnit.SECONDS);
                GroupListing l = listed.stream().filter(g -> g.groupId().equals(group)).findFirst()
                    .orElseThrow(() -> new AssertionError(group + " not in listGroups(forShareGroups()): " + listed));
                assertEquals(Optional.of(GroupType.SHARE), l.type());
                assertEquals("share", l.protocol());
                // a group with members cannot be deleted
                ExecutionException busy = assertThrows(ExecutionException.class,
                    () -> admin.deleteShareGroups(List.of(group)).all().get(60, TimeUnit.SECONDS));
                assertInstanceOf(GroupNotEmptyException.class, busy.getCause());
            }
            awaitTrue("describeShareGroups: EMPTY once the member left", Env.WAIT, () -> {
                ShareGroupDescription d = describe(admin, group);
                return d.groupState() == GroupState.EMPTY && d.members().isEmpty();
            });
            admin.deleteShareGroups(List.of(group)).all().get(60, TimeUnit.SECONDS);
            assertGone(admin, group);
        }
    }

    static ShareGroupDescription describe(Admin admin, String group) throws Exception {
        return admin.describeShareGroups(List.of(group)).all().get(60, TimeUnit.SECONDS).get(group);
    }

    /** Kafka answers a deleted share group with GROUP_ID_NOT_FOUND (or describes it DEAD). */
    static void assertGone(Admin admin, String group) throws Exception {
        try {
            ShareGroupDescription d = describe(admin, group);
            assertEquals(GroupState.DEAD, d.groupState(), "a deleted share group: " + d);
        } catch (ExecutionException e) {
            assertInstanceOf(GroupIdNotFoundException.class, e.getCause());
        }
        Collection<GroupListing> listed =
            admin.listGroups(ListGroupsOptions.forShareGroups()).all().get(60, TimeUnit.SECONDS);
        assertTrue(listed.stream().noneMatch(g -> g.groupId().equals(group)), group + " still listed: " + listed);
    }

    static Map<TopicPartition, SharePartitionOffsetInfo> offsets(Admin admin, String group) throws Exception {
        return admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
            .partitionsToOffsetInfo(group).get(60, TimeUnit.SECONDS);
    }

    /**
     * Waits until listShareGroupOffsets shows the share-partition with everything up to `end`
     * accepted: lag 0 and a start offset from `from` (where delivery began) to `end`. Kafka 4.4
     * answers start offset `from` here, not `end`: its share coordinator keeps the start offset
     * it last wrote, and the acknowledged batch counts as delivered (deliveryCompleteCount) in
     * the lag, latest offset - start offset - delivered = 0.
     */
    static void awaitAccepted(Admin admin, String group, TopicPartition tp, long from, long end) throws Exception {
        AtomicReference<Map<TopicPartition, SharePartitionOffsetInfo>> o = new AtomicReference<>();
        awaitTrue("listShareGroupOffsets: " + tp + " with lag 0 and a start offset in [" + from + ", " + end + "]",
            Env.WAIT, () -> {
                o.set(offsets(admin, group));
                SharePartitionOffsetInfo i = o.get().get(tp);
                return i != null && i.lag().equals(Optional.of(0L)) && i.startOffset() >= from && i.startOffset() <= end;
            }, o::get);
    }

    /** Admin share-group offsets: listShareGroupOffsets (start offset and lag after everything was
     *  accepted), alterShareGroupOffsets refused while a member is in the group and applied when it
     *  is empty (the next member starts there), deleteShareGroupOffsets, deleteShareGroups. */
    @Test
    void adminListsAltersAndDeletesShareGroupOffsets() throws Exception {
        String topic = Env.name("share-offsets");
        Env.createTopic(topic, 1);
        String group = group("offsets", Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        produce(topic, 10, 10);
        try (Admin admin = Env.admin()) {
            try (KafkaShareConsumer<String, String> c = shareConsumer(group, Map.of())) {
                c.subscribe(List.of(topic));
                int got = 0;
                long deadline = System.nanoTime() + Env.WAIT.toNanos();
                while (got < 10) {
                    assertTrue(System.nanoTime() < deadline, got + " of 10 records within " + Env.WAIT);
                    got += c.poll(POLL).count();
                }
                assertCommitted(c.commitSync(COMMIT), "implicit acknowledgement");
                awaitAccepted(admin, group, tp, 0, 10);
                ExecutionException busy = assertThrows(ExecutionException.class,
                    () -> admin.alterShareGroupOffsets(group, Map.of(tp, 3L)).all().get(60, TimeUnit.SECONDS));
                assertInstanceOf(GroupNotEmptyException.class, busy.getCause());
            }
            awaitTrue("describeShareGroups: EMPTY once the member left", Env.WAIT, () -> {
                ShareGroupDescription d = describe(admin, group);
                return d.groupState() == GroupState.EMPTY && d.members().isEmpty();
            });
            admin.alterShareGroupOffsets(group, Map.of(tp, 3L)).all().get(60, TimeUnit.SECONDS);
            assertEquals(3L, offsets(admin, group).get(tp).startOffset(), "start offset after alterShareGroupOffsets");
            // the next member starts at 3: offsets 3..9 once each, nothing below
            Set<Long> seen = new TreeSet<>();
            try (KafkaShareConsumer<String, String> c = shareConsumer(group, explicit())) {
                c.subscribe(List.of(topic));
                long deadline = System.nanoTime() + Env.WAIT.toNanos();
                while (seen.size() < 7) {
                    assertTrue(System.nanoTime() < deadline, "after the reset to 3: " + seen + " within " + Env.WAIT);
                    var records = c.poll(POLL);
                    for (ConsumerRecord<String, String> r : records) {
                        assertTrue(r.offset() >= 3, "offset " + r.offset() + " delivered after a reset to 3");
                        assertTrue(seen.add(r.offset()), "offset " + r.offset() + " delivered twice");
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    if (!records.isEmpty()) {
                        assertCommitted(c.commitSync(COMMIT), "ACCEPT");
                    }
                }
            }
            awaitTrue("describeShareGroups: EMPTY once the member left", Env.WAIT, () -> {
                ShareGroupDescription d = describe(admin, group);
                return d.groupState() == GroupState.EMPTY && d.members().isEmpty();
            });
            awaitAccepted(admin, group, tp, 3, 10);
            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get(60, TimeUnit.SECONDS);
            Map<TopicPartition, SharePartitionOffsetInfo> after = offsets(admin, group);
            assertFalse(after.containsKey(tp) && after.get(tp).startOffset() >= 0,
                "the share-partition's state after deleteShareGroupOffsets: " + after);
            admin.deleteShareGroups(List.of(group)).all().get(60, TimeUnit.SECONDS);
            assertGone(admin, group);
        }
    }
}
