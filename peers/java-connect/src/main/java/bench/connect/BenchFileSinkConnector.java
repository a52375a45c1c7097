package bench.connect;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * A file sink connector that writes what Connect's FileStreamSinkConnector writes (one record
 * value per line, {@code value.toString()}, "null" for a null value), for scripts/bench sink:
 * the registry here does not serve connect-file 4.4.0, so this stands in for it.
 *
 * <p>Settings: {@code file} (the path, appended to); {@code slow.every} and {@code slow.ms}:
 * the record at every offset {@code o} with {@code (o + 1) % slow.every == 0} sleeps
 * {@code slow.ms} in {@code put} before it is written (one record in N per partition, the same
 * records the Rust side's slow sink picks), for the head-of-line case. 0 (the default): none.
 */
public class BenchFileSinkConnector extends SinkConnector {
    static final String FILE = "file";
    static final String SLOW_EVERY = "slow.every";
    static final String SLOW_MS = "slow.ms";

    static final ConfigDef CONFIG = new ConfigDef()
        .define(FILE, ConfigDef.Type.STRING, ConfigDef.NO_DEFAULT_VALUE, ConfigDef.Importance.HIGH,
            "The file every record value is appended to, one per line.")
        .define(SLOW_EVERY, ConfigDef.Type.LONG, 0L, ConfigDef.Range.atLeast(0), ConfigDef.Importance.LOW,
            "One record in this many (by offset) is slow; 0: none.")
        .define(SLOW_MS, ConfigDef.Type.LONG, 0L, ConfigDef.Range.atLeast(0), ConfigDef.Importance.LOW,
            "How long a slow record sleeps in put, in ms.");

    private Map<String, String> props;

    @Override
    public String version() {
        return "0";
    }

    @Override
    public void start(Map<String, String> props) {
        // Validates (a missing `file` fails the connector here, as FileStreamSink's does).
        CONFIG.parse(props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return BenchFileSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>(maxTasks);
        for (int i = 0; i < maxTasks; i++) configs.add(props);
        return configs;
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }
}
