package bench.connect;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Collection;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/**
 * The task of {@link BenchFileSinkConnector}: FileStreamSinkTask's writing (a PrintStream in
 * append mode, {@code println(record.value())} per record, flushed on {@code flush}), plus the
 * optional slow records.
 */
public class BenchFileSinkTask extends SinkTask {
    private PrintStream out;
    private long slowEvery;
    private long slowMs;

    @Override
    public String version() {
        return "0";
    }

    @Override
    public void start(Map<String, String> props) {
        AbstractConfig config = new AbstractConfig(BenchFileSinkConnector.CONFIG, props);
        String file = config.getString(BenchFileSinkConnector.FILE);
        slowEvery = config.getLong(BenchFileSinkConnector.SLOW_EVERY);
        slowMs = config.getLong(BenchFileSinkConnector.SLOW_MS);
        try {
            out = new PrintStream(
                Files.newOutputStream(Paths.get(file), StandardOpenOption.CREATE, StandardOpenOption.APPEND),
                false, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ConnectException("cannot open " + file + " for appending", e);
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        for (SinkRecord record : records) {
            if (slowEvery > 0 && (record.kafkaOffset() + 1) % slowEvery == 0) {
                try {
                    Thread.sleep(slowMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new RetriableException("interrupted in a slow record", e);
                }
            }
            out.println(record.value());
        }
    }

    @Override
    public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
        out.flush();
    }

    @Override
    public void stop() {
        if (out != null) out.close();
    }
}
