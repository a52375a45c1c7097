package bench;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java side of scripts/bench scale, part 1: the same drain-then-idle run as our
 * bench/src/scale.rs drain, on the official KafkaShareConsumer (implicit mode).
 *
 * <pre>
 * ScaleBench drain --bootstrap B --topic T --group G --records N [--idle-s 10] [--timeout-s 300]
 * </pre>
 *
 * Reads N records, confirms them with commitSync, then keeps polling (1 s at a time) for
 * --idle-s seconds. Prints RESULT {json} with the fields of ours: the process CPU (the JVM's
 * own count, user+sys of every thread), peak and current RSS (/proc/self/status), and the
 * open sockets at the end (/proc/self/fd), the requests sent while idle, from the client's "request-total" metrics (the per-client
 * counters, not the per-node ones, so each request counts once; no per-API split).
 */
public final class ScaleBench {
    private ScaleBench() {}

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1 || !argv[0].equals("drain")) die("usage: ScaleBench drain --bootstrap B --topic T --group G --records N");
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) die("bad argument " + argv[i]);
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        drain(a);
    }

    private static void die(String msg) {
        System.err.println("ScaleBench: error: " + msg);
        System.exit(1);
    }

    private static String req(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) die("--" + k + " is required");
        return v;
    }

    private static double cpuSeconds() {
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        return os.getProcessCpuTime() / 1e9;
    }

    private static long statusKb(String key) throws Exception {
        for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (l.startsWith(key)) return Long.parseLong(l.substring(key.length()).trim().split("\\s+")[0]);
        }
        return 0;
    }

    private static long sockets() throws Exception {
        long n = 0;
        try (var fds = Files.list(Path.of("/proc/self/fd"))) {
            for (Path fd : (Iterable<Path>) fds::iterator) {
                try {
                    if (Files.readSymbolicLink(fd).toString().startsWith("socket:")) n++;
                } catch (java.io.IOException e) {
                    // closed between the listing and the read: not open any more
                }
            }
        }
        return n;
    }

    private static double requests(KafkaShareConsumer<?, ?> c) {
        double total = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : c.metrics().entrySet()) {
            MetricName m = e.getKey();
            if (m.name().equals("request-total") && !m.tags().containsKey("node-id")) {
                total += ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return total;
    }

    private static void drain(Map<String, String> a) throws Exception {
        long n = Long.parseLong(req(a, "records"));
        double idleS = Double.parseDouble(a.getOrDefault("idle-s", "10"));
        long timeoutNs = Long.parseLong(a.getOrDefault("timeout-s", "300")) * 1_000_000_000L;
        // Sockets the process holds before the client (inherited ones, the JVM's).
        long baseSockets = sockets();
        Properties p = new Properties();
        p.put("bootstrap.servers", req(a, "bootstrap"));
        p.put("group.id", req(a, "group"));
        p.put("client.id", "java-scale");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "implicit");
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            long start = System.nanoTime();
            c.subscribe(Collections.singletonList(req(a, "topic")));
            long got = 0, first = 0;
            while (got < n && System.nanoTime() - start < timeoutNs) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                if (first == 0 && !recs.isEmpty()) first = System.nanoTime() - start;
                got += recs.count();
            }
            c.commitSync(Duration.ofSeconds(30));
            double drainS = (System.nanoTime() - start) / 1e9;
            double cpuDrain = cpuSeconds();
            long hwm = statusKb("VmHWM:");
            if (got < n) die("timed out with " + got + " of " + n + " records");

            double req0 = requests(c);
            long t0 = System.nanoTime();
            long late = 0;
            while ((System.nanoTime() - t0) / 1e9 < idleS) late += c.poll(Duration.ofSeconds(1)).count();
            double idleWall = (System.nanoTime() - t0) / 1e9;
            double idleCpu = cpuSeconds() - cpuDrain;
            long reqs = Math.round(requests(c) - req0);
            System.out.printf("RESULT {\"records\":%d,\"first_s\":%.4f,\"drain_s\":%.4f,\"cpu_drain_s\":%.2f,"
                    + "\"hwm_kb\":%d,\"idle_s\":%.3f,\"idle_cpu_s\":%.2f,\"idle_requests\":%d,\"idle_by_api\":{},"
                    + "\"idle_rss_kb\":%d,\"base_sockets\":%d,\"sockets\":%d,\"late_records\":%d}%n",
                got, first / 1e9, drainS, cpuDrain, hwm, idleWall, idleCpu, reqs, statusKb("VmRSS:"), baseSockets, sockets(), late);
            c.close(Duration.ofSeconds(5));
        }
    }
}
