package bench;

import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java side of scripts/bench scale, part 3: KafkaProducer with its defaults (idempotence
 * on, acks=all, 5 requests in flight per connection) and the batching our
 * bench/src/peers.rs produce uses, so the two sides differ in the client only.
 *
 * <pre>
 * ProduceBench --bootstrap B --topic T --records N [--size 100] [--batch-size 262144] [--linger-ms 10]
 * </pre>
 *
 * The topic exists already (the script creates it with our producer and 0 records). Times
 * from the first send to the end of flush (every delivery acknowledged), as ours does, and
 * prints RESULT {json}; any failed delivery fails the run.
 */
public final class ProduceBench {
    private ProduceBench() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) die("bad argument " + argv[i]);
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        long n = Long.parseLong(req(a, "records"));
        byte[] value = new byte[Integer.parseInt(a.getOrDefault("size", "100"))];
        java.util.Arrays.fill(value, (byte) 'x');
        Properties p = new Properties();
        p.put("bootstrap.servers", req(a, "bootstrap"));
        p.put("client.id", "java-produce-bench");
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("batch.size", a.getOrDefault("batch-size", "262144"));
        p.put("linger.ms", a.getOrDefault("linger-ms", "10"));
        p.put("buffer.memory", String.valueOf(64L << 20));
        p.put("compression.type", "none");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        String topic = req(a, "topic");
        AtomicLong failed = new AtomicLong();
        AtomicReference<Exception> firstError = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            long start = System.nanoTime();
            for (long i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, value), (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, e);
                    }
                });
            }
            producer.flush();
            double secs = (System.nanoTime() - start) / 1e9;
            System.out.printf("RESULT {\"records\":%d,\"seconds\":%.4f,\"records_per_sec\":%.0f}%n",
                n - failed.get(), secs, n / secs);
        }
        if (firstError.get() != null) die(failed.get() + " records failed; the first: " + firstError.get());
    }

    private static void die(String msg) {
        System.err.println("ProduceBench: error: " + msg);
        System.exit(1);
    }

    private static String req(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) die("--" + k + " is required");
        return v;
    }
}
