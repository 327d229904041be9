package es.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The load generator of benches/share: N share consumers of one share group in one JVM, each on
 * its own thread, consuming a topic that was filled beforehand, with explicit ACCEPT of every
 * record or implicit acknowledgement. Kafka's own ShareConsumerPerformance (kafka-tools 4.4)
 * acknowledges only implicitly and times from before its consumers join, so it cannot give the
 * figure this benchmark is about; this program is the same kind of loop with the choices below.
 *
 * <pre>
 * ShareBench create-topic --bootstrap B --topic T [--partitions 1] [--config k=v ...]
 * ShareBench group-config --bootstrap B --group G     (share.auto.offset.reset=earliest, as below)
 * ShareBench delete-group --bootstrap B --group G
 * ShareBench consume --bootstrap B --topic T --group G --consumers N --records R
 *            [--mode explicit|implicit] [--warmup-fraction 0.1] [--assign-timeout-s 60]
 *            [--timeout-s 300] [--delete-group true] [--property k=v ...]
 * </pre>
 *
 * <p>consume: sets the group's share.auto.offset.reset=earliest through Admin and waits until
 * DescribeConfigs shows it (a share-partition initialised before that would start at the log
 * end); makes N consumers (byte-array values, share.acknowledgement.mode as --mode, everything
 * else the client's defaults unless --property says otherwise), subscribes them, and lets them
 * all poll at once ("go"). A share consumer joins its group at its first poll, and Kafka assigns
 * a share-partition only once its state is initialised, at a later heartbeat (5 s by default),
 * so the members join while they consume: the main thread asks ShareGroupDescribe every 50 ms
 * until all N members have the topic's partitions assigned. Each consumer polls (100 ms),
 * ACCEPTs every record it got (explicit mode; the acknowledgements go with its next poll, as a
 * ShareFetch's piggyback; implicit mode acknowledges them by that poll), and, once the group as
 * a whole has been handed R records, commits what it holds at once (commitSync) instead of
 * waiting for a next poll that has nothing to fetch. A record counts as acknowledged when the
 * AcknowledgementCommitCallback reports it without an exception. The group is deleted after
 * the consumers have closed (--delete-group false keeps it).
 *
 * <p>Stdout, for the harness: "MARK go" when the consumers are let go, "MARK warm C" at the
 * first acknowledgement after both every member has its assignment and --warmup-fraction of R
 * are acknowledged (C acknowledged so far), "MARK end C" when R are, then one JSON line with the
 * figures. records_per_s is over the window from "warm" to "end" (joining, the client's JIT and
 * the first fetches are outside it); all_records_per_s is R over the time from "go" to "end".
 * Exit status 0 when R records were acknowledged, 1 otherwise (the JSON says
 * why), 2 on a usage error. Every wait is bounded.
 */
public final class ShareBench {
    private static final Duration POLL = Duration.ofMillis(100);
    private static final Duration COMMIT = Duration.ofSeconds(30);
    private static final Duration CLOSE = Duration.ofSeconds(10);
    private static final long ADMIN_S = 60;
    private static final int ERRORS_KEPT = 5;

    private ShareBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage("no command");
        }
        Map<String, List<String>> o = parse(args);
        switch (args[0]) {
            case "create-topic" -> createTopic(o);
            case "group-config" -> {
                try (Admin a = admin(opt(o, "bootstrap", null))) {
                    setGroupConfig(a, opt(o, "group", null));
                }
            }
            case "delete-group" -> {
                try (Admin a = admin(opt(o, "bootstrap", null))) {
                    Run run = new Run(1, 0, 1);
                    boolean ok = deleteGroup(a, opt(o, "group", null), run);
                    System.out.println(ok ? "deleted" : "not deleted: " + run.errors);
                }
            }
            case "consume" -> System.exit(consume(o));
            default -> usage("unknown command " + args[0]);
        }
    }

    // ---- options ------------------------------------------------------------------------------

    private static void usage(String why) {
        System.err.println("ShareBench: " + why + "\nusage: ShareBench create-topic --bootstrap B --topic T "
            + "[--partitions 1] [--config k=v ...]\n       ShareBench group-config --bootstrap B --group G\n"
            + "       ShareBench delete-group --bootstrap B --group G\n       ShareBench consume --bootstrap B --topic T --group G --consumers N "
            + "--records R [--mode explicit|implicit] [--warmup-fraction 0.1] [--assign-timeout-s 60] "
            + "[--timeout-s 300] [--delete-group true] [--property k=v ...]");
        System.exit(2);
    }

    private static Map<String, List<String>> parse(String[] args) {
        Map<String, List<String>> o = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                usage("bad option " + args[i]);
            }
            o.computeIfAbsent(args[i].substring(2), k -> new ArrayList<>()).add(args[i + 1]);
        }
        return o;
    }

    private static String opt(Map<String, List<String>> o, String k, String dflt) {
        List<String> v = o.get(k);
        if (v == null) {
            if (dflt == null) {
                usage("--" + k + " is required");
            }
            return dflt;
        }
        return v.get(v.size() - 1);
    }

    private static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    // ---- create-topic -------------------------------------------------------------------------

    private static void createTopic(Map<String, List<String>> o) throws Exception {
        String topic = opt(o, "topic", null);
        int partitions = Integer.parseInt(opt(o, "partitions", "1"));
        try (Admin a = admin(opt(o, "bootstrap", null))) {
            try {
                Map<String, String> configs = new LinkedHashMap<>();
                for (String kv : o.getOrDefault("config", List.of())) {
                    int i = kv.indexOf('=');
                    if (i <= 0) {
                        usage("--config wants k=v, not " + kv);
                    }
                    configs.put(kv.substring(0, i), kv.substring(i + 1));
                }
                a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)))
                    .all().get(ADMIN_S, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(ADMIN_S);
            while (true) {
                try {
                    TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames()
                        .get(ADMIN_S, TimeUnit.SECONDS).get(topic);
                    if (d.partitions().size() == partitions
                            && d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty())) {
                        System.out.println("created " + topic + " with " + partitions + " partition(s)");
                        return;
                    }
                } catch (ExecutionException e) {
                    // not visible yet
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(topic + " has no leaders after " + ADMIN_S + " s");
                }
                Thread.sleep(50);
            }
        }
    }

    // ---- consume ------------------------------------------------------------------------------

    /** What the consumers share; every field is written by consumer threads. */
    private static final class Run {
        final long records;
        final long warmAt;
        final AtomicLong confirmed = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicLong received = new AtomicLong();
        final AtomicLong redelivered = new AtomicLong();
        final AtomicLong bytes = new AtomicLong();
        final AtomicLong firstRecordNs = new AtomicLong();
        final AtomicLong warmNs = new AtomicLong();
        final AtomicLong warmConfirmed = new AtomicLong();
        final AtomicLong endNs = new AtomicLong();
        final AtomicBoolean allAssigned = new AtomicBoolean();
        final AtomicLongArray perConsumer;
        final AtomicLongArray firstNs;
        final AtomicBoolean stop = new AtomicBoolean();
        final CountDownLatch done = new CountDownLatch(1);
        final List<String> errors = new ArrayList<>();

        Run(long records, double warmFraction, int consumers) {
            this.records = records;
            this.warmAt = Math.max(1, (long) Math.ceil(records * warmFraction));
            this.perConsumer = new AtomicLongArray(consumers);
            this.firstNs = new AtomicLongArray(consumers);
        }

        synchronized void error(String e) {
            if (errors.size() < ERRORS_KEPT) {
                errors.add(e);
            }
        }

        /** The AcknowledgementCommitCallback of every consumer. */
        void acknowledged(Map<TopicIdPartition, Set<Long>> offsets, Exception e) {
            long k = 0;
            for (Set<Long> s : offsets.values()) {
                k += s.size();
            }
            if (e != null) {
                failed.addAndGet(k);
                error("acknowledgement of " + k + " records: " + e);
                return;
            }
            long after = confirmed.addAndGet(k);
            long before = after - k;
            long now = System.nanoTime();
            // The window opens at the first acknowledgement after both: every member has its
            // assignment, and warmAt records are acknowledged.
            if (after >= warmAt && after < records && allAssigned.get() && warmNs.get() == 0
                    && warmNs.compareAndSet(0, now)) {
                warmConfirmed.set(after);
                mark("warm " + after);
            }
            if (before < records && after >= records) {
                endNs.set(now);
                mark("end " + after);
                stop.set(true);
                done.countDown();
            }
        }
    }

    private static synchronized void mark(String what) {
        System.out.println("MARK " + what);
        System.out.flush();
    }

    private static int consume(Map<String, List<String>> o) throws Exception {
        String bootstrap = opt(o, "bootstrap", null);
        String topic = opt(o, "topic", null);
        String group = opt(o, "group", null);
        int n = Integer.parseInt(opt(o, "consumers", null));
        long records = Long.parseLong(opt(o, "records", null));
        String mode = opt(o, "mode", "explicit");
        if (!mode.equals("explicit") && !mode.equals("implicit")) {
            usage("--mode must be explicit or implicit");
        }
        boolean explicit = mode.equals("explicit");
        double warmFraction = Double.parseDouble(opt(o, "warmup-fraction", "0.1"));
        long assignTimeoutS = Long.parseLong(opt(o, "assign-timeout-s", "60"));
        long timeoutS = Long.parseLong(opt(o, "timeout-s", "300"));
        boolean deleteGroup = Boolean.parseBoolean(opt(o, "delete-group", "true"));
        Map<String, String> extra = new LinkedHashMap<>();
        for (String kv : o.getOrDefault("property", List.of())) {
            int i = kv.indexOf('=');
            if (i <= 0) {
                usage("--property wants k=v, not " + kv);
            }
            extra.put(kv.substring(0, i), kv.substring(i + 1));
        }
        long t0 = System.nanoTime();
        Run run = new Run(records, warmFraction, n);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("mode", mode);
        out.put("consumers", n);
        out.put("records", records);
        out.put("group", group);

        try (Admin a = admin(bootstrap)) {
            setGroupConfig(a, group);
            out.put("config_ms", ms(System.nanoTime() - t0));

            CountDownLatch subscribed = new CountDownLatch(n);
            CountDownLatch go = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            List<Map<String, Object>> clientMetrics = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                final int id = i;
                Properties p = new Properties();
                p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
                p.put(ConsumerConfig.CLIENT_ID_CONFIG, "share-bench-" + id);
                p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, mode);
                p.putAll(extra);
                Thread t = new Thread(() -> consumer(id, p, topic, explicit, run, subscribed, go, clientMetrics),
                    "share-bench-" + id);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
            if (!subscribed.await(ADMIN_S, TimeUnit.SECONDS)) {
                run.error("consumers not all subscribed after " + ADMIN_S + " s");
            }
            long tGo = System.nanoTime();
            mark("go");
            go.countDown();
            // A share consumer joins its group at its first poll, so the members join while
            // they consume; ShareGroupDescribe says when the last has its assignment.
            int assigned = awaitAssigned(a, group, topic, n, assignTimeoutS, run.stop);
            out.put("assigned_members", assigned);
            if (assigned >= n) {
                out.put("assigned_ms", ms(System.nanoTime() - tGo));
                run.allAssigned.set(true);
            } else if (!run.stop.get()) {
                run.error("only " + assigned + " of " + n + " members had the topic assigned after "
                    + assignTimeoutS + " s");
            }

            boolean finished = run.done.await(timeoutS, TimeUnit.SECONDS);
            run.stop.set(true);
            long tStop = System.nanoTime();
            for (Thread t : threads) {
                t.join(TimeUnit.SECONDS.toMillis(ADMIN_S));
            }
            out.put("close_ms", ms(System.nanoTime() - tStop));
            if (deleteGroup) {
                out.put("group_deleted", deleteGroup(a, group, run));
            }
            long end = run.endNs.get();
            long warm = run.warmNs.get();
            out.put("ok", finished && run.failed.get() == 0);
            if (!finished) {
                run.error("only " + run.confirmed.get() + " of " + records + " records acknowledged after "
                    + timeoutS + " s");
            }
            out.put("confirmed", run.confirmed.get());
            out.put("failed", run.failed.get());
            out.put("received", run.received.get());
            out.put("redelivered", run.redelivered.get());
            out.put("bytes", run.bytes.get());
            long first = run.firstRecordNs.get();
            out.put("first_record_ms", first == 0 ? null : ms(first - tGo));
            if (finished) {
                out.put("all_records_per_s", records / ((end - tGo) / 1e9));
                out.put("all_s", (end - tGo) / 1e9);
                if (warm != 0 && end > warm) {
                    long k = records - run.warmConfirmed.get();
                    out.put("window_records", k);
                    out.put("window_s", (end - warm) / 1e9);
                    out.put("records_per_s", k / ((end - warm) / 1e9));
                }
            }
            long[] per = new long[n];
            long firstMax = 0;
            for (int i = 0; i < n; i++) {
                per[i] = run.perConsumer.get(i);
                firstMax = Math.max(firstMax, run.firstNs.get(i) == 0 ? 0 : run.firstNs.get(i) - tGo);
            }
            out.put("per_consumer", per);
            out.put("last_first_record_ms", ms(firstMax));
            synchronized (clientMetrics) {
                out.put("client", clientMetrics);
            }
            synchronized (run) {
                out.put("errors", new ArrayList<>(run.errors));
            }
        }
        System.out.println(json(out));
        System.out.flush();
        return Boolean.TRUE.equals(out.get("ok")) ? 0 : 1;
    }

    private static void consumer(int id, Properties p, String topic, boolean explicit, Run run,
                                 CountDownLatch subscribed, CountDownLatch go, List<Map<String, Object>> metricsOut) {
        KafkaShareConsumer<byte[], byte[]> c = null;
        try {
            c = new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            c.setAcknowledgementCommitCallback(run::acknowledged);
            c.subscribe(List.of(topic));
            subscribed.countDown();
            go.await();
            boolean holding = false;
            while (!run.stop.get()) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(POLL);
                int k = rs.count();
                if (k > 0) {
                    long now = System.nanoTime();
                    run.firstRecordNs.compareAndSet(0, now);
                    run.firstNs.compareAndSet(id, 0, now);
                    long bytes = 0;
                    for (ConsumerRecord<byte[], byte[]> r : rs) {
                        if (explicit) {
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        if (r.value() != null) {
                            bytes += r.value().length;
                        }
                        if (r.deliveryCount().orElse((short) 1) > 1) {
                            run.redelivered.incrementAndGet();
                        }
                    }
                    run.bytes.addAndGet(bytes);
                    run.perConsumer.addAndGet(id, k);
                    run.received.addAndGet(k);
                    holding = true;
                }
                // Everything has been handed out: send what this consumer holds now rather than
                // with a next poll, which would wait for records that will not come.
                if (holding && run.received.get() >= run.records) {
                    c.commitSync(COMMIT);
                    holding = false;
                }
            }
        } catch (Exception e) {
            run.error("consumer " + id + ": " + e);
            subscribed.countDown();
        } finally {
            if (c != null) {
                Map<String, Object> m = fetchMetrics(c);
                m.put("id", id);
                synchronized (metricsOut) {
                    metricsOut.add(m);
                }
                try {
                    c.close(CLOSE);
                } catch (Exception e) {
                    run.error("consumer " + id + " close: " + e);
                }
            }
        }
    }

    /** The client's own figures of its share fetches and acknowledgements, for the JSON. */
    private static Map<String, Object> fetchMetrics(KafkaShareConsumer<byte[], byte[]> c) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<MetricName, ? extends Metric> e : c.metrics().entrySet()) {
            MetricName name = e.getKey();
            if (!name.tags().containsKey("topic") && name.group().contains("share-fetch-manager")
                    && List.of("fetch-total", "records-per-request-avg", "fetch-latency-avg",
                        "acknowledgements-send-total", "acknowledgements-error-total").contains(name.name())) {
                out.put(name.name(), e.getValue().metricValue());
            }
        }
        return out;
    }

    /**
     * Deletes the (now empty) group, so that neither broker carries the share state of earlier
     * runs; retried while the members' leaving is still under way (GroupNotEmpty), for at most
     * CLOSE. Whether it was deleted; a failure is noted, not fatal.
     */
    private static boolean deleteGroup(Admin a, String group, Run run) throws InterruptedException {
        long deadline = System.nanoTime() + CLOSE.toNanos();
        while (true) {
            try {
                a.deleteShareGroups(List.of(group)).all().get(ADMIN_S, TimeUnit.SECONDS);
                return true;
            } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                if (System.nanoTime() > deadline) {
                    run.error("deleting group " + group + ": " + e);
                    return false;
                }
            }
            Thread.sleep(100);
        }
    }

    /** share.auto.offset.reset=earliest for the group, and wait until DescribeConfigs shows it. */
    private static void setGroupConfig(Admin a, String group) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        a.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
            new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
            .all().get(ADMIN_S, TimeUnit.SECONDS);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(ADMIN_S);
        while (true) {
            Config c = a.describeConfigs(List.of(res)).all().get(ADMIN_S, TimeUnit.SECONDS).get(res);
            ConfigEntry e = c.get("share.auto.offset.reset");
            if (e != null && "earliest".equals(e.value())) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("share.auto.offset.reset=earliest not visible for " + group);
            }
            Thread.sleep(50);
        }
    }

    /**
     * Waits (at most timeoutS, or until stop) until ShareGroupDescribe shows n members of ours,
     * each with every partition of the topic assigned; returns how many had that at the end.
     */
    private static int awaitAssigned(Admin a, String group, String topic, int n, long timeoutS,
                                     AtomicBoolean stop) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
        int partitions = a.describeTopics(List.of(topic)).allTopicNames().get(ADMIN_S, TimeUnit.SECONDS)
            .get(topic).partitions().size();
        int best = 0;
        while (true) {
            try {
                ShareGroupDescription d = a.describeShareGroups(List.of(group)).all()
                    .get(ADMIN_S, TimeUnit.SECONDS).get(group);
                int ready = 0;
                Collection<ShareMemberDescription> members = d.members();
                for (ShareMemberDescription m : members) {
                    long mine = m.assignment().topicPartitions().stream().filter(tp -> tp.topic().equals(topic)).count();
                    if (m.clientId().startsWith("share-bench-") && mine == partitions) {
                        ready++;
                    }
                }
                best = ready;
                if (ready >= n) {
                    return ready;
                }
            } catch (ExecutionException e) {
                // the group is not there yet
            }
            if (System.nanoTime() > deadline || stop.get()) {
                return best;
            }
            Thread.sleep(50);
        }
    }

    private static double ms(long ns) {
        return Math.round(ns / 1e4) / 100.0;
    }

    // ---- a little JSON ------------------------------------------------------------------------

    private static String json(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v);
        return b.toString();
    }

    private static void write(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof String s) {
            b.append('"');
            for (char ch : s.toCharArray()) {
                switch (ch) {
                    case '"' -> b.append("\\\"");
                    case '\\' -> b.append("\\\\");
                    case '\n' -> b.append("\\n");
                    default -> {
                        if (ch < 0x20) {
                            b.append(String.format("\\u%04x", (int) ch));
                        } else {
                            b.append(ch);
                        }
                    }
                }
            }
            b.append('"');
        } else if (v instanceof Double d) {
            b.append(d.isNaN() || d.isInfinite() ? "null" : d.toString());
        } else if (v instanceof Number || v instanceof Boolean) {
            b.append(v);
        } else if (v instanceof long[] xs) {
            b.append('[');
            for (int i = 0; i < xs.length; i++) {
                b.append(i > 0 ? "," : "").append(xs[i]);
            }
            b.append(']');
        } else if (v instanceof Map<?, ?> m) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                b.append(first ? "" : ",");
                first = false;
                write(b, String.valueOf(e.getKey()));
                b.append(':');
                write(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof Collection<?> c) {
            b.append('[');
            boolean first = true;
            for (Object x : c) {
                b.append(first ? "" : ",");
                first = false;
                write(b, x);
            }
            b.append(']');
        } else {
            write(b, String.valueOf(v));
        }
    }
}
