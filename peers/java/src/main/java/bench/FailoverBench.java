package bench;

import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java side of scripts/bench failover: the loop of bench/src/failover.rs consume, on
 * KafkaShareConsumer.
 *
 * <pre>
 * FailoverBench --bootstrap B --topic T --group G --records N --events FILE
 *               [--signal-at 20000 --signal-file FILE] [--timeout-s 180]
 * </pre>
 *
 * share.acknowledgement.mode=explicit; poll (100 ms), acknowledge every record ACCEPT,
 * commitSync after every poll, until N distinct records were accepted. Once signal-at distinct
 * records were accepted it creates signal-file (the script then kills a broker). The events
 * file has the lines ours writes (wall-clock milliseconds since the epoch):
 *
 * <pre>
 * S ms                                 before subscribe
 * D ms partition offset deliveryCount  a record delivered (at the return of its poll)
 * F ms partition offsets error         the acknowledgement commit callback reported a failure
 * C ms partition error                 commitSync reported a failed partition
 * E ms distinct deliveries             the end
 * </pre>
 */
public final class FailoverBench {
    private FailoverBench() {}

    private static BufferedWriter events;

    private static synchronized void event(String line) {
        try {
            events.write(line);
            events.write('\n');
        } catch (IOException e) {
            die("writing the events file: " + e);
        }
    }

    private static String now() {
        return String.format(Locale.ROOT, "%.3f", System.currentTimeMillis() * 1.0);
    }

    private static String oneLine(Throwable e) {
        return String.valueOf(e).replace('\n', ' ').replace('\r', ' ');
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) die("bad argument " + argv[i]);
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        long n = num(a, "records", -1);
        if (n < 1) die("--records N (at least 1) is required");
        long signalAt = num(a, "signal-at", 0);
        String signalFile = a.get("signal-file");
        long timeoutMs = num(a, "timeout-s", 180) * 1000;
        events = new BufferedWriter(new FileWriter(req(a, "events")));

        Properties p = new Properties();
        p.put("bootstrap.servers", req(a, "bootstrap"));
        p.put("group.id", req(a, "group"));
        p.put("client.id", "java-failover-bench");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");

        Set<Long> distinct = new HashSet<>();
        long deliveries = 0;
        boolean signalled = false;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            c.setAcknowledgementCommitCallback((offsets, exception) -> {
                if (exception == null) return;
                for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
                    event("F " + now() + " " + e.getKey().partition() + " " + e.getValue().size() + " " + oneLine(exception));
                }
            });
            event("S " + now());
            long deadline = System.nanoTime() + timeoutMs * 1_000_000;
            c.subscribe(Collections.singletonList(req(a, "topic")));
            while (distinct.size() < n && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> recs;
                try {
                    recs = c.poll(Duration.ofMillis(100));
                } catch (KafkaException e) {
                    event("C " + now() + " -1 poll: " + oneLine(e));
                    continue;
                }
                if (recs.isEmpty()) continue;
                String t = now();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    event("D " + t + " " + r.partition() + " " + r.offset() + " " + r.deliveryCount().orElse((short) 1));
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    // 40 bits of offset are plenty for a benchmark topic.
                    distinct.add(((long) r.partition() << 40) | r.offset());
                    deliveries++;
                }
                try {
                    Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync(Duration.ofSeconds(60));
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : res.entrySet()) {
                        if (e.getValue().isPresent()) {
                            event("C " + now() + " " + e.getKey().partition() + " " + oneLine(e.getValue().get()));
                        }
                    }
                } catch (KafkaException e) {
                    event("C " + now() + " -1 " + oneLine(e));
                }
                if (!signalled && signalAt > 0 && distinct.size() >= signalAt) {
                    signalled = true;
                    if (signalFile != null) Files.write(Paths.get(signalFile), new byte[0]);
                }
            }
            event("E " + now() + " " + distinct.size() + " " + deliveries);
            events.flush();
            c.close(Duration.ofSeconds(10));
        }
        events.flush();
        events.close();
        System.out.printf(Locale.ROOT, "RESULT {\"side\":\"java\",\"distinct\":%d,\"deliveries\":%d}%n", distinct.size(), deliveries);
        System.out.flush();
        if (distinct.size() < n) die("timed out with " + distinct.size() + " of " + n + " records");
    }

    private static void die(String msg) {
        System.err.println("FailoverBench: error: " + msg);
        System.exit(1);
    }

    private static String req(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) die("--" + k + " is required");
        return v;
    }

    private static long num(Map<String, String> a, String k, long dflt) {
        String v = a.get(k);
        if (v == null) return dflt;
        try {
            return Long.parseLong(v);
        } catch (NumberFormatException e) {
            die("--" + k + " " + v + " is not a number");
            return dflt;
        }
    }
}
