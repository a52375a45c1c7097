//! The engine's metrics, under the consumer's naming (group [`PROCESSOR`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::metrics::{ms, Histogram, MetricsSnapshot};

/// The metric group of the processing engine (beside the consumer's Java groups).
pub const PROCESSOR: &str = "consumer-share-processor-metrics";

/// Live counters of one engine.
#[derive(Debug, Default)]
pub(crate) struct ProcessorMetrics {
    pub in_flight: AtomicU64,
    pub queued: AtomicU64,
    pub started: AtomicU64,
    pub accepted: AtomicU64,
    pub released: AtomicU64,
    pub rejected: AtomicU64,
    pub retried: AtomicU64,
    pub exhausted: AtomicU64,
    pub renewals: AtomicU64,
    pub renewals_failed: AtomicU64,
    pub released_unstarted: AtomicU64,
    /// Records past the unstarted bound kept because they went back once already.
    pub kept: AtomicU64,
    pub lapsed: AtomicU64,
    pub handler_panics: AtomicU64,
    /// Records copied to the dead-letter topic (then ACCEPTed).
    pub dead_lettered: AtomicU64,
    /// Dead-letter copies that failed (their records RELEASEd).
    pub dead_letter_failures: AtomicU64,
    /// Time in the handler, per call.
    pub handler_time: Histogram,
    /// From the record's acquisition (handed to the engine) to its outcome.
    pub outcome_time: Histogram,
    /// From the record's acquisition to its first handler call.
    pub wait_time: Histogram,
}

impl ProcessorMetrics {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds the engine's figures to a consumer snapshot.
    pub(crate) fn put(&self, s: &mut MetricsSnapshot) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
        s.put(PROCESSOR, "records-in-flight", get(&self.in_flight));
        s.put(PROCESSOR, "records-queued", get(&self.queued));
        s.put(PROCESSOR, "handler-calls-total", get(&self.started));
        s.put(PROCESSOR, "records-accepted-total", get(&self.accepted));
        s.put(PROCESSOR, "records-released-total", get(&self.released));
        s.put(PROCESSOR, "records-rejected-total", get(&self.rejected));
        s.put(PROCESSOR, "records-retried-total", get(&self.retried));
        s.put(PROCESSOR, "records-retries-exhausted-total", get(&self.exhausted));
        s.put(PROCESSOR, "lock-renewals-total", get(&self.renewals));
        s.put(PROCESSOR, "lock-renewals-failed-total", get(&self.renewals_failed));
        s.put(PROCESSOR, "records-released-unstarted-total", get(&self.released_unstarted));
        s.put(PROCESSOR, "records-kept-unstarted-total", get(&self.kept));
        s.put(PROCESSOR, "lock-lapses-total", get(&self.lapsed));
        s.put(PROCESSOR, "handler-panics-total", get(&self.handler_panics));
        s.put(PROCESSOR, "records-dead-lettered-total", get(&self.dead_lettered));
        s.put(PROCESSOR, "dead-letter-failures-total", get(&self.dead_letter_failures));
        put_latency(
            s,
            &self.handler_time,
            ["handler-time", "handler-time-avg", "handler-time-max", "handler-time-p50", "handler-time-p99"],
        );
        put_latency(
            s,
            &self.outcome_time,
            ["outcome-time", "outcome-time-avg", "outcome-time-max", "outcome-time-p50", "outcome-time-p99"],
        );
        put_latency(
            s,
            &self.wait_time,
            ["wait-time", "wait-time-avg", "wait-time-max", "wait-time-p50", "wait-time-p99"],
        );
    }
}

/// A latency as its histogram and as Java-style gauges in ms: `[histogram, avg, max, p50, p99]`.
fn put_latency(s: &mut MetricsSnapshot, h: &Histogram, [name, avg, max, p50, p99]: [&'static str; 5]) {
    let h = h.snapshot();
    s.put(PROCESSOR, avg, ms(h.mean()));
    s.put(PROCESSOR, max, ms(h.max()));
    s.put(PROCESSOR, p50, ms(h.quantile(0.5)));
    s.put(PROCESSOR, p99, ms(h.quantile(0.99)));
    s.put_histogram(PROCESSOR, name, h);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn handler_time_is_a_histogram_and_its_gauges() {
        let m = ProcessorMetrics::default();
        for _ in 0..99 {
            m.handler_time.record(Duration::from_millis(1));
        }
        m.handler_time.record(Duration::from_millis(500));
        let mut s = MetricsSnapshot::default();
        m.put(&mut s);
        assert_eq!(s.get(PROCESSOR, "handler-time-max"), Some(500.0));
        assert_eq!(s.get(PROCESSOR, "handler-time-p50"), Some(1.024));
        assert_eq!(s.get(PROCESSOR, "handler-time-avg"), Some(5.99));
        assert_eq!(s.histogram(PROCESSOR, "handler-time").map(|h| h.count()), Some(100));
        assert_eq!(s.histogram(PROCESSOR, "wait-time").map(|h| h.count()), Some(0));
    }
}
