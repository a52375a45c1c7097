package bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java side of scripts/bench process: KafkaShareConsumer with concurrent handlers, the
 * idiomatic way.
 *
 * <pre>
 * ProcessBench --bootstrap B --topic T --group G --records N [--concurrency 64] [--work-ms 1]
 *              [--slow-every 1000] [--slow-ms 500] [--timeout-s 600]
 * </pre>
 *
 * Explicit acknowledgement mode. The loop: poll; submit every record to a fixed pool of
 * {@code concurrency} threads (an ExecutorService); wait for every future of the batch;
 * acknowledge each record ACCEPT (on the polling thread: the consumer is not thread-safe);
 * commitSync; poll again. The handler sleeps {@code work-ms}, or {@code slow-ms} instead for
 * the record at offset o with (o + 1) % slow-every == 0 (0: none is slow).
 *
 * <p>Prints one line {@code RESULT {json}}, the same fields as bench/src/barrier.rs:
 * records (acknowledged), seconds (from just before subscribe until the commitSync of the last
 * batch returns), records_per_sec ((records - 1) / (seconds - first_record_s): the steady
 * rate after the first record), first_record_s (to the first non-empty poll), p50_ms, p99_ms,
 * max_ms (per record, from the return of the poll that acquired it to its acknowledge call),
 * polls (non-empty), max_batch, redelivered (delivery count above 1), slow_records, and the
 * parameters.
 */
public final class ProcessBench {
    private ProcessBench() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) die("bad argument " + argv[i]);
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        long n = num(a, "records", -1);
        if (n < 1) die("--records N (at least 1) is required");
        int concurrency = (int) num(a, "concurrency", 64);
        long workMs = num(a, "work-ms", 1);
        long slowEvery = num(a, "slow-every", 1000);
        long slowMs = num(a, "slow-ms", 500);
        long timeoutMs = num(a, "timeout-s", 600) * 1000;
        if (concurrency < 1) die("--concurrency must be at least 1");

        Properties p = new Properties();
        p.put("bootstrap.servers", req(a, "bootstrap"));
        p.put("group.id", req(a, "group"));
        p.put("client.id", "java-process-bench");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");

        ExecutorService pool = Executors.newFixedThreadPool(concurrency);
        long[] lat = new long[(int) Math.min(n + 1024, Integer.MAX_VALUE - 8)];
        int nlat = 0;
        long done = 0, polls = 0, maxBatch = 0, redelivered = 0, slow = 0, first = -1;
        double seconds;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            long start = System.nanoTime();
            long deadline = start + timeoutMs * 1_000_000;
            c.subscribe(Collections.singletonList(req(a, "topic")));
            while (done < n && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                if (recs.isEmpty()) continue;
                long acquired = System.nanoTime();
                if (first < 0) first = acquired - start;
                List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>(recs.count());
                List<Future<?>> futures = new ArrayList<>(recs.count());
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    boolean isSlow = slowEvery > 0 && (r.offset() + 1) % slowEvery == 0;
                    if (isSlow) slow++;
                    if (r.deliveryCount().orElse((short) 1) > 1) redelivered++;
                    long ms = isSlow ? slowMs : workMs;
                    batch.add(r);
                    futures.add(pool.submit(() -> {
                        Thread.sleep(ms);
                        return null;
                    }));
                }
                for (Future<?> f : futures) {
                    try {
                        f.get();
                    } catch (ExecutionException e) {
                        die("a handler failed: " + e.getCause());
                    }
                }
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    if (nlat == lat.length) lat = Arrays.copyOf(lat, (int) Math.min(lat.length * 2L, Integer.MAX_VALUE - 8));
                    lat[nlat++] = System.nanoTime() - acquired;
                }
                checkCommit(c.commitSync(Duration.ofSeconds(30)));
                done += batch.size();
                polls++;
                maxBatch = Math.max(maxBatch, batch.size());
            }
            seconds = (System.nanoTime() - start) / 1e9;
            pool.shutdown();
            pool.awaitTermination(10, TimeUnit.SECONDS);
            c.close(Duration.ofSeconds(5));
        }
        double firstS = first < 0 ? -1 : first / 1e9;
        double steady = done > 1 && seconds > firstS ? (done - 1) / (seconds - firstS) : 0;
        long[] sorted = Arrays.copyOf(lat, nlat);
        Arrays.sort(sorted);
        System.out.printf(java.util.Locale.ROOT,
            "RESULT {\"side\":\"java\",\"records\":%d,\"seconds\":%.4f,\"records_per_sec\":%.1f,\"first_record_s\":%.4f,"
                + "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"polls\":%d,\"max_batch\":%d,\"redelivered\":%d,"
                + "\"slow_records\":%d,\"concurrency\":%d,\"work_ms\":%d,\"slow_every\":%d,\"slow_ms\":%d}%n",
            done, seconds, steady, firstS, pct(sorted, 0.50), pct(sorted, 0.99),
            sorted.length == 0 ? -1.0 : sorted[sorted.length - 1] / 1e6, polls, maxBatch, redelivered, slow,
            concurrency, workMs, slowEvery, slowMs);
        System.out.flush();
        if (done < n) die("timed out with " + done + " of " + n + " records");
    }

    private static void die(String msg) {
        System.err.println("ProcessBench: error: " + msg);
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

    private static void checkCommit(Map<TopicIdPartition, Optional<KafkaException>> results) {
        for (var e : results.entrySet()) {
            if (e.getValue().isPresent()) die("acknowledgement of " + e.getKey() + " failed: " + e.getValue().get());
        }
    }

    /** The p-quantile (nearest rank) of sorted nanoseconds, in milliseconds; -1 if empty. */
    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0) return -1;
        int i = (int) Math.ceil(sorted.length * p) - 1;
        return sorted[Math.max(0, i)] / 1e6;
    }
}
