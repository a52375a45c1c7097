package bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java peer of scripts/bench peers, on the official KafkaShareConsumer.
 *
 * <pre>
 * ShareBench consume --bootstrap B --topic T --group G --records N [--mode implicit|explicit]
 *                    [--timeout-s 300]
 * ShareBench latency --bootstrap B --topic T --group G --records N [--warmup-ms 5000]
 *                    [--timeout-s 120]
 * </pre>
 *
 * Same measurement as our bench/src/peers.rs: consume times from just before
 * subscribe (the consumer is already created) until commitSync confirms the last
 * acknowledgement and prints RESULT {json}; latency acknowledges every record (ACCEPT) and
 * prints LATENCY {json} with p50/p99/max of (wall clock at poll return - record timestamp).
 */
public final class ShareBench {
    private ShareBench() {}

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            die("usage: ShareBench consume|latency --bootstrap B --topic T --group G --records N ...");
        }
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) die("bad argument " + argv[i]);
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        switch (argv[0]) {
            case "consume" -> consume(a);
            case "latency" -> latency(a);
            default -> die("unknown subcommand " + argv[0]);
        }
    }

    private static void die(String msg) {
        System.err.println("ShareBench: error: " + msg);
        System.exit(1);
    }

    private static String req(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) die("--" + k + " is required");
        return v;
    }

    private static KafkaShareConsumer<byte[], byte[]> consumer(Map<String, String> a, boolean explicit, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", req(a, "bootstrap"));
        p.put("group.id", req(a, "group"));
        p.put("client.id", clientId);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        return new KafkaShareConsumer<>(p);
    }

    private static void checkCommit(Map<TopicIdPartition, Optional<KafkaException>> results) {
        for (var e : results.entrySet()) {
            if (e.getValue().isPresent()) die("acknowledgement of " + e.getKey() + " failed: " + e.getValue().get());
        }
    }

    private static void consume(Map<String, String> a) {
        long n = Long.parseLong(req(a, "records"));
        String mode = a.getOrDefault("mode", "implicit");
        boolean explicit = switch (mode) {
            case "implicit" -> false;
            case "explicit" -> true;
            default -> { die("--mode " + mode + ": use implicit or explicit"); yield false; }
        };
        long timeoutMs = Long.parseLong(a.getOrDefault("timeout-s", "300")) * 1000;
        try (KafkaShareConsumer<byte[], byte[]> c = consumer(a, explicit, "java-bench")) {
            long start = System.nanoTime();
            long deadline = start + timeoutMs * 1_000_000;
            c.subscribe(Collections.singletonList(req(a, "topic")));
            long got = 0, bytes = 0, first = 0;
            while (got < n && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                if (first == 0 && !recs.isEmpty()) first = System.nanoTime() - start;
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    if (r.key() != null) bytes += r.key().length;
                    if (r.value() != null) bytes += r.value().length;
                    if (explicit) c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                got += recs.count();
            }
            checkCommit(c.commitSync(Duration.ofSeconds(30)));
            double elapsed = (System.nanoTime() - start) / 1e9;
            System.out.printf("RESULT {\"records\":%d,\"bytes\":%d,\"elapsed_s\":%.4f,\"first_s\":%.4f}%n",
                got, bytes, elapsed, first / 1e9);
            c.close(Duration.ofSeconds(5));
            if (got < n) die("timed out with " + got + " of " + n + " records");
        }
    }

    private static void latency(Map<String, String> a) {
        long n = Long.parseLong(req(a, "records"));
        long warmup = Long.parseLong(a.getOrDefault("warmup-ms", "5000"));
        long timeoutMs = Long.parseLong(a.getOrDefault("timeout-s", "120")) * 1000;
        try (KafkaShareConsumer<byte[], byte[]> c = consumer(a, true, "java-latency")) {
            c.subscribe(Collections.singletonList(req(a, "topic")));
            System.out.println("READY");
            System.out.flush();
            long deadline = System.currentTimeMillis() + timeoutMs;
            List<Long> lat = new ArrayList<>((int) n);
            long got = 0;
            long firstTs = Long.MIN_VALUE;
            while (got < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(500));
                long now = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    if (firstTs == Long.MIN_VALUE) firstTs = r.timestamp();
                    if (r.timestamp() >= firstTs + warmup) lat.add(now - r.timestamp());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                got += recs.count();
            }
            try {
                c.commitSync(Duration.ofSeconds(10));
            } catch (RuntimeException e) {
                System.err.println("ShareBench: final commitSync: " + e);
            }
            c.close(Duration.ofSeconds(5));
            Collections.sort(lat);
            long p50 = pct(lat, 0.50), p99 = pct(lat, 0.99), max = lat.isEmpty() ? -1 : lat.get(lat.size() - 1);
            System.out.printf("LATENCY {\"records\":%d,\"measured\":%d,\"p50_ms\":%d,\"p99_ms\":%d,\"max_ms\":%d}%n",
                got, lat.size(), p50, p99, max);
            if (got < n) die("timed out with " + got + " of " + n + " records");
        }
    }

    private static long pct(List<Long> sorted, double p) {
        if (sorted.isEmpty()) return -1;
        int i = (int) Math.ceil(sorted.size() * p) - 1;
        return sorted.get(Math.max(0, i));
    }
}
