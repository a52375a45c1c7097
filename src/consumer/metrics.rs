//! Consumer metrics under the Java client's group and metric names.
//!
//! Counters are atomics updated by the driver; [`MetricsSnapshot`] reads them at one moment.
//! Rates are averaged over the consumer's lifetime (Java uses sampled windows; the totals are
//! exact either way). The share-fetch latency is a histogram too (`fetch-latency`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::metrics::{ms, Histogram, MetricsSnapshot};

/// Java group name of the fetch metrics.
pub const FETCH_MANAGER: &str = "consumer-share-fetch-manager-metrics";
/// Java group name of the coordinator metrics.
pub const COORDINATOR: &str = "consumer-share-coordinator-metrics";
/// Java group name of the consumer metrics.
pub const CONSUMER: &str = "consumer-share-metrics";

/// Live counters.
#[derive(Debug)]
pub(crate) struct Metrics {
    started: Instant,
    records_consumed: AtomicU64,
    /// Every ShareFetch's latency: also its count (`fetch-total`), mean and maximum.
    fetch_latency: Histogram,
    acks_sent: AtomicU64,
    ack_errors: AtomicU64,
    heartbeats: AtomicU64,
    rebalances: AtomicU64,
    last_poll_ns: AtomicU64,
    polls: AtomicU64,
    released_unseen: AtomicU64,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Metrics {
            started: Instant::now(),
            records_consumed: AtomicU64::new(0),
            fetch_latency: Histogram::default(),
            acks_sent: AtomicU64::new(0),
            ack_errors: AtomicU64::new(0),
            heartbeats: AtomicU64::new(0),
            rebalances: AtomicU64::new(0),
            last_poll_ns: AtomicU64::new(u64::MAX),
            polls: AtomicU64::new(0),
            released_unseen: AtomicU64::new(0),
        }
    }

    pub(crate) fn record_consumed(&self, n: u64) {
        self.records_consumed.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn record_fetch(&self, latency: Duration) {
        self.fetch_latency.record(latency);
    }

    pub(crate) fn record_acks(&self, n: u64, failed: bool) {
        self.acks_sent.fetch_add(n, Ordering::Relaxed);
        if failed {
            self.ack_errors.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Buffered records given back to the group unseen: the application stopped polling, or
    /// the consumer closed with them still buffered.
    pub(crate) fn record_released_unseen(&self, n: u64) {
        self.released_unseen.fetch_add(n, Ordering::Relaxed);
    }

    /// Records released unseen so far (the processing engine's report counts them).
    pub(crate) fn released_unseen(&self) -> u64 {
        self.released_unseen.load(Ordering::Relaxed)
    }

    pub(crate) fn record_heartbeat(&self) {
        self.heartbeats.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_rebalances(&self, n: u64) {
        self.rebalances.store(n, Ordering::Relaxed);
    }

    pub(crate) fn record_poll(&self) {
        self.polls.fetch_add(1, Ordering::Relaxed);
        let ns = self.started.elapsed().as_nanos().min(u64::MAX as u128 - 1) as u64;
        self.last_poll_ns.store(ns, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let elapsed = self.started.elapsed().as_secs_f64().max(1e-9);
        let consumed = self.records_consumed.load(Ordering::Relaxed) as f64;
        let fetch_latency = self.fetch_latency.snapshot();
        let fetches = fetch_latency.count() as f64;
        let acks = self.acks_sent.load(Ordering::Relaxed) as f64;
        let ack_err = self.ack_errors.load(Ordering::Relaxed) as f64;
        let hb = self.heartbeats.load(Ordering::Relaxed) as f64;
        let last = self.last_poll_ns.load(Ordering::Relaxed);
        let last_poll_ago = if last == u64::MAX {
            -1.0
        } else {
            (self.started.elapsed().as_nanos() as f64 - last as f64).max(0.0) / 1e9
        };
        let mut s = MetricsSnapshot::default();
        let mut put = |g: &'static str, n: &'static str, x: f64| s.put(g, n, x);
        put(FETCH_MANAGER, "records-consumed-total", consumed);
        put(FETCH_MANAGER, "records-consumed-rate", consumed / elapsed);
        put(FETCH_MANAGER, "fetch-total", fetches);
        put(FETCH_MANAGER, "fetch-rate", fetches / elapsed);
        put(FETCH_MANAGER, "fetch-latency-avg", ms(fetch_latency.mean()));
        put(FETCH_MANAGER, "fetch-latency-max", ms(fetch_latency.max()));
        put(FETCH_MANAGER, "acknowledgements-send-total", acks);
        put(FETCH_MANAGER, "acknowledgements-send-rate", acks / elapsed);
        put(FETCH_MANAGER, "acknowledgements-error-total", ack_err);
        put(FETCH_MANAGER, "acknowledgements-error-rate", ack_err / elapsed);
        // Not a Java metric: records fetched ahead that went back to the group unseen because
        // the application stopped polling (see the consumer's pacing).
        put(FETCH_MANAGER, "records-released-unseen-total", self.released_unseen.load(Ordering::Relaxed) as f64);
        put(COORDINATOR, "heartbeat-total", hb);
        put(COORDINATOR, "heartbeat-rate", hb / elapsed);
        put(COORDINATOR, "rebalance-total", self.rebalances.load(Ordering::Relaxed) as f64);
        put(CONSUMER, "last-poll-seconds-ago", last_poll_ago);
        put(CONSUMER, "poll-total", self.polls.load(Ordering::Relaxed) as f64);
        // Not a Java metric (Java has only the average and maximum): the latencies by bucket.
        s.put_histogram(FETCH_MANAGER, "fetch-latency", fetch_latency);
        s
    }
}

/// Adds the client's connection counters (Java's names, in the consumer group).
pub(crate) fn add_network(s: &mut MetricsSnapshot, n: &crate::cluster::NetworkStats) {
    crate::metrics::put_network(s, CONSUMER, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_uses_java_names() {
        let m = Metrics::new();
        m.record_consumed(10);
        m.record_fetch(Duration::from_millis(4));
        m.record_fetch(Duration::from_millis(8));
        m.record_acks(3, true);
        let s = m.snapshot();
        assert_eq!(s.get(FETCH_MANAGER, "records-consumed-total"), Some(10.0));
        assert_eq!(s.get(FETCH_MANAGER, "fetch-latency-max"), Some(8.0));
        assert_eq!(s.get(FETCH_MANAGER, "fetch-latency-avg"), Some(6.0));
        assert_eq!(s.get(FETCH_MANAGER, "acknowledgements-error-total"), Some(3.0));
        assert_eq!(s.get(FETCH_MANAGER, "fetch-total"), Some(2.0));
        let h = s.histogram(FETCH_MANAGER, "fetch-latency").expect("the fetch-latency histogram");
        assert_eq!((h.count(), h.sum(), h.max()), (2, Duration::from_millis(12), Duration::from_millis(8)));
        assert_eq!(s.get(CONSUMER, "last-poll-seconds-ago"), Some(-1.0));
        m.record_poll();
        assert!(m.snapshot().get(CONSUMER, "last-poll-seconds-ago").unwrap() >= 0.0);
    }
}
