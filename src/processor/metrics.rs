//! The engine's metrics, under the consumer's naming (group [`PROCESSOR`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::consumer::MetricsSnapshot;

/// The metric group of the processing engine (beside the consumer's Java groups).
pub const PROCESSOR: &str = "consumer-share-processor-metrics";

/// A latency histogram: buckets of powers of two microseconds (1 us .. ~36 min), atomics
/// only, so handlers finishing on any thread can record without a lock.
#[derive(Debug)]
pub(crate) struct Histogram {
    buckets: [AtomicU64; 32],
    count: AtomicU64,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub(crate) fn record(&self, d: Duration) {
        let us = d.as_micros().min(u64::MAX as u128) as u64;
        let bucket = (64 - us.leading_zeros() as usize).min(31);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// The `q` quantile (0..=1) in milliseconds, as the upper edge of its bucket (at most the
    /// largest value seen); 0 when empty.
    pub(crate) fn quantile_ms(&self, q: f64) -> f64 {
        let count = self.count.load(Ordering::Relaxed);
        if count == 0 {
            return 0.0;
        }
        let rank = ((count as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                let upper_us = if i == 0 { 1 } else { 1u64 << i };
                return (upper_us.min(self.max_us.load(Ordering::Relaxed).max(1))) as f64 / 1000.0;
            }
        }
        self.max_us.load(Ordering::Relaxed) as f64 / 1000.0
    }

    fn put(&self, s: &mut MetricsSnapshot, avg: &'static str, max: &'static str, p50: &'static str, p99: &'static str) {
        let count = self.count.load(Ordering::Relaxed);
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1000.0;
        s.put(PROCESSOR, avg, if count > 0 { sum / count as f64 } else { 0.0 });
        s.put(PROCESSOR, max, self.max_us.load(Ordering::Relaxed) as f64 / 1000.0);
        s.put(PROCESSOR, p50, self.quantile_ms(0.5));
        s.put(PROCESSOR, p99, self.quantile_ms(0.99));
    }
}

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
        self.handler_time
            .put(s, "handler-time-avg", "handler-time-max", "handler-time-p50", "handler-time-p99");
        self.outcome_time
            .put(s, "outcome-time-avg", "outcome-time-max", "outcome-time-p50", "outcome-time-p99");
        self.wait_time.put(s, "wait-time-avg", "wait-time-max", "wait-time-p50", "wait-time-p99");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_buckets_and_never_exceed_the_max() {
        let h = Histogram::default();
        assert_eq!(h.quantile_ms(0.5), 0.0);
        for _ in 0..99 {
            h.record(Duration::from_millis(1));
        }
        h.record(Duration::from_millis(500));
        let p50 = h.quantile_ms(0.5);
        assert!((1.0..=2.1).contains(&p50), "{p50}");
        let p100 = h.quantile_ms(1.0);
        assert!((500.0..=525.0).contains(&p100), "{p100}");
        assert!(h.quantile_ms(0.99) <= 2.1);
    }
}
