//! The unit of every series the clients export, and how a metric's Java name and value
//! become a Prometheus series: one table ([`UNITS`]) that every series passes through, so a
//! scrape reads base units with the unit in the name and in HELP, as Prometheus' naming
//! asks (seconds, bytes, `_ratio`, `_total` for counters).
//!
//! The clients keep Java's names and units in their snapshots ([`MetricsSnapshot::get`]
//! reads `fetch-latency-avg` in milliseconds, as Java's JMX does); only the exported series
//! change: `fetch-latency-avg` (ms) is `..._fetch_latency_avg_seconds` (s),
//! `bufferpool-wait-time-ns-total` (ns) is `..._bufferpool_wait_time_seconds_total` (s),
//! `batch-size-avg` (bytes) is `..._batch_size_avg_bytes`. A name that says its unit
//! already in the middle (`last-poll-seconds-ago`) keeps Java's name; a rate (`-rate`) is
//! per second, and a count of things (records, requests, tasks) is unitless.
//!
//! [`MetricsSnapshot::get`]: crate::metrics::MetricsSnapshot::get

use prometheus_client::registry::Unit;

/// What a metric's value measures, in the unit the client keeps it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measure {
    /// A duration in milliseconds (Java's latency gauges): exported in seconds.
    Millis,
    /// A duration in nanoseconds: exported in seconds.
    Nanos,
    /// A duration in seconds.
    Seconds,
    /// A size in bytes.
    Bytes,
    /// A ratio of two sizes (compressed over uncompressed).
    Ratio,
    /// Events per second (Java's `-rate`).
    PerSecond,
    /// A number of things: records, requests, connections, tasks. Unitless.
    Count,
}

use Measure::*;

/// Every metric name the clients export (consumer, producer, their connections, the
/// processing engine, the sink's connectors), with what its value measures. The admin client
/// exports no metrics. A name missing here still renders (without a unit, its HELP saying
/// so); the test `every_exported_series_has_a_declared_unit` keeps the table complete.
pub(crate) const UNITS: &[(&str, Measure)] = &[
    // Consumer: consumer-share-fetch-manager-metrics.
    ("records-consumed-total", Count),
    ("records-consumed-rate", PerSecond),
    ("fetch-total", Count),
    ("fetch-rate", PerSecond),
    ("fetch-latency-avg", Millis),
    ("fetch-latency-max", Millis),
    ("acknowledgements-send-total", Count),
    ("acknowledgements-send-rate", PerSecond),
    ("acknowledgements-error-total", Count),
    ("acknowledgements-error-rate", PerSecond),
    ("records-released-unseen-total", Count),
    // Consumer: consumer-share-coordinator-metrics, consumer-share-metrics.
    ("heartbeat-total", Count),
    ("heartbeat-rate", PerSecond),
    ("rebalance-total", Count),
    ("last-poll-seconds-ago", Seconds),
    ("poll-total", Count),
    // Every client's connections.
    ("connection-creation-total", Count),
    ("successful-authentication-total", Count),
    ("successful-reauthentication-total", Count),
    ("failed-reauthentication-total", Count),
    // Producer: producer-metrics.
    ("record-send-total", Count),
    ("record-send-rate", PerSecond),
    ("record-retry-total", Count),
    ("record-retry-rate", PerSecond),
    ("record-error-total", Count),
    ("record-error-rate", PerSecond),
    ("request-total", Count),
    ("request-rate", PerSecond),
    ("requests-in-flight", Count),
    ("request-latency-avg", Millis),
    ("request-latency-max", Millis),
    ("records-per-request-avg", Count),
    ("batch-size-avg", Bytes),
    ("batch-size-max", Bytes),
    ("compression-rate-avg", Ratio),
    ("record-queue-time-avg", Millis),
    ("record-queue-time-max", Millis),
    ("buffer-total-bytes", Bytes),
    ("buffer-available-bytes", Bytes),
    ("bufferpool-wait-time-ns-total", Nanos),
    ("buffer-exhausted-total", Count),
    // The processing engine: consumer-share-processor-metrics.
    ("records-in-flight", Count),
    ("records-queued", Count),
    ("handler-calls-total", Count),
    ("records-accepted-total", Count),
    ("records-released-total", Count),
    ("records-rejected-total", Count),
    ("records-retried-total", Count),
    ("records-retries-exhausted-total", Count),
    ("records-dead-lettered-total", Count),
    ("dead-letter-failures-total", Count),
    ("lock-renewals-total", Count),
    ("lock-renewals-failed-total", Count),
    ("records-released-unstarted-total", Count),
    ("records-kept-unstarted-total", Count),
    ("lock-lapses-total", Count),
    ("handler-panics-total", Count),
    ("handler-time-avg", Millis),
    ("handler-time-max", Millis),
    ("handler-time-p50", Millis),
    ("handler-time-p99", Millis),
    ("outcome-time-avg", Millis),
    ("outcome-time-max", Millis),
    ("outcome-time-p50", Millis),
    ("outcome-time-p99", Millis),
    ("wait-time-avg", Millis),
    ("wait-time-max", Millis),
    ("wait-time-p50", Millis),
    ("wait-time-p99", Millis),
    // The sink's connectors (KIP-1302).
    ("acknowledge-time-avg", Millis),
    ("acknowledge-time-max", Millis),
    ("put-batch-time-avg", Millis),
    ("put-batch-time-max", Millis),
    ("sink-record-acknowledge-rate", PerSecond),
    ("sink-record-acknowledge-total", Count),
    ("sink-record-acquire-rate", PerSecond),
    ("sink-record-acquire-total", Count),
    ("sink-record-active-count", Count),
    ("sink-record-dead-letter-total", Count),
    ("sink-record-read-rate", PerSecond),
    ("sink-record-read-total", Count),
    ("sink-record-redelivery-total", Count),
    ("sink-record-reject-rate", PerSecond),
    ("sink-record-reject-total", Count),
    ("sink-record-release-rate", PerSecond),
    ("sink-record-release-total", Count),
    ("sink-record-send-rate", PerSecond),
    ("sink-record-send-total", Count),
    ("task-count", Count),
    ("task-failed-total", Count),
];

/// What `name` measures, `None` when the table does not declare it.
pub(crate) fn measure_of(name: &str) -> Option<Measure> {
    UNITS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
}

/// One exported series: its name before the unit suffix (and before a counter's `_total`,
/// which the encoder writes), the unit the encoder appends (and declares in `# UNIT`), what
/// to divide the client's value by (a division by 1000 is exact where a product by 0.001
/// is not: 1.5 ms reads `0.0015`), and its HELP.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) unit: Option<Unit>,
    pub(crate) counter: bool,
    pub(crate) divisor: f64,
    pub(crate) help: String,
}

impl Series {
    /// The client's value in the series' unit.
    pub(crate) fn value(&self, v: f64) -> f64 {
        v / self.divisor
    }

    /// The whole name as a scrape shows it, with its unit (without a counter's `_total`).
    #[cfg(test)]
    pub(crate) fn full_name(&self) -> String {
        match &self.unit {
            Some(u) => format!("{}_{}", self.name, u.as_str()),
            None => self.name.clone(),
        }
    }
}

/// `s` with every character Prometheus refuses in a name turned into `_`.
fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

/// The series of the metric `name` under `prefix` (`kafka_<group>_`, or the sink's
/// `kafka_connect_sink_task_`); `about` starts its HELP (the Java group, or `KIP-1302`).
pub(crate) fn series(prefix: &str, about: &str, name: &str) -> Series {
    let measure = measure_of(name);
    let (base, counter) = match name.strip_suffix("-total") {
        Some(b) => (b, true),
        None => (name, false),
    };
    // Java's own unit word at the end of a name gives way to the base unit's suffix.
    let java_unit = match measure {
        Some(Nanos) => Some("-ns"),
        Some(Bytes) => Some("-bytes"),
        _ => None,
    };
    let base = java_unit.and_then(|u| base.strip_suffix(u)).unwrap_or(base);
    let (unit, divisor, says) = match measure {
        Some(Millis) => (Some(Unit::Seconds), 1e3, "in seconds (the client keeps milliseconds)"),
        Some(Nanos) => (Some(Unit::Seconds), 1e9, "in seconds (the client keeps nanoseconds)"),
        Some(Seconds) => (Some(Unit::Seconds), 1.0, "in seconds"),
        Some(Bytes) => (Some(Unit::Bytes), 1.0, "in bytes"),
        Some(Ratio) => (Some(Unit::Other("ratio".to_string())), 1.0, "a ratio"),
        Some(PerSecond) => (None, 1.0, "per second"),
        Some(Count) => (None, 1.0, "a count (unitless)"),
        None => (None, 1.0, "unit not declared"),
    };
    // A name with its unit word inside (`last-poll-seconds-ago`) keeps Java's name as it is:
    // a suffix would say the unit twice.
    let unit = unit.filter(|u| !base.split('-').any(|w| w == u.as_str()));
    Series { name: clean(&format!("{prefix}{base}")), unit, counter, divisor, help: format!("{about} {name}, {says}") }
}

/// The series of a latency histogram `name` (always a duration): `<prefix><name>_seconds`.
pub(crate) fn histogram_series(prefix: &str, about: &str, name: &str) -> Series {
    Series {
        name: clean(&format!("{prefix}{name}")),
        unit: Some(Unit::Seconds),
        counter: false,
        divisor: 1.0,
        help: format!("{about} {name}, in seconds"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::metrics::MetricsSnapshot;

    /// Every (group, name) the clients put in a snapshot, and every sink metric name: read
    /// from the clients' own snapshot code, not listed by hand.
    fn exported() -> Vec<(String, String)> {
        let mut s = MetricsSnapshot::default();
        // Consumer, with its connections.
        let consumer = crate::consumer::metrics::Metrics::new().snapshot();
        let network = crate::cluster::NetworkStats::default();
        let mut all = vec![consumer];
        crate::consumer::metrics::add_network(&mut s, &network);
        // Producer, with its connections.
        all.push(crate::producer::metrics::ProducerMetrics::default().snapshot((1024, 512)));
        crate::metrics::put_network(&mut s, crate::producer::PRODUCER, &network);
        // The processing engine.
        crate::processor::metrics::ProcessorMetrics::default().put(&mut s);
        all.push(s);
        let mut out: Vec<(String, String)> =
            all.iter().flat_map(|s| s.iter().map(|(g, n, _)| (g.to_string(), n.to_string()))).collect();
        #[cfg(feature = "sink")]
        out.extend(crate::sink::METRIC_NAMES.iter().map(|n| ("sink".to_string(), n.to_string())));
        out
    }

    #[test]
    fn every_exported_series_has_a_declared_unit() {
        let missing: Vec<_> = exported().into_iter().filter(|(_, n)| measure_of(n).is_none()).collect();
        assert!(missing.is_empty(), "declare the unit of these metrics in UNITS: {missing:?}");
        assert!(exported().len() > 60, "the clients' snapshots were read");
    }

    #[test]
    fn the_table_names_each_metric_once() {
        let names: BTreeSet<&str> = UNITS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), UNITS.len());
    }

    #[test]
    fn a_duration_in_ms_or_ns_is_exported_in_seconds() {
        let s = series("kafka_g_", "g", "fetch-latency-avg");
        assert_eq!(s.full_name(), "kafka_g_fetch_latency_avg_seconds");
        assert_eq!(s.value(505.47), 0.50547);
        assert!(!s.counter);
        assert_eq!(s.help, "g fetch-latency-avg, in seconds (the client keeps milliseconds)");
        let s = series("kafka_producer_metrics_", "producer-metrics", "bufferpool-wait-time-ns-total");
        assert_eq!(s.full_name(), "kafka_producer_metrics_bufferpool_wait_time_seconds");
        assert!(s.counter);
        assert_eq!(s.value(2_500_000_000.0), 2.5);
    }

    #[test]
    fn sizes_ratios_rates_and_counts() {
        let s = series("p_", "p", "batch-size-avg");
        assert_eq!((s.full_name(), s.value(10.0)), ("p_batch_size_avg_bytes".to_string(), 10.0));
        // Java's unit word at the end is not said twice.
        assert_eq!(series("p_", "p", "buffer-total-bytes").full_name(), "p_buffer_total_bytes");
        assert_eq!(series("p_", "p", "compression-rate-avg").full_name(), "p_compression_rate_avg_ratio");
        let rate = series("p_", "p", "record-send-rate");
        assert_eq!((rate.full_name(), rate.help.ends_with("per second")), ("p_record_send_rate".to_string(), true));
        let count = series("p_", "p", "record-send-total");
        assert_eq!((count.full_name(), count.counter), ("p_record_send".to_string(), true));
        // A unit word inside the name: Java's name as it is, the unit in HELP.
        let ago = series("c_", "c", "last-poll-seconds-ago");
        assert_eq!(
            (ago.full_name(), ago.help.as_str()),
            ("c_last_poll_seconds_ago".to_string(), "c last-poll-seconds-ago, in seconds")
        );
    }

    #[test]
    fn an_undeclared_name_still_renders_and_says_so() {
        let s = series("x_", "x", "brand-new-thing");
        assert_eq!((s.full_name(), s.divisor), ("x_brand_new_thing".to_string(), 1.0));
        assert!(s.help.ends_with("unit not declared"));
    }
}
