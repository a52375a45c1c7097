//! The producer's metrics under the Java producer's group and names (group [`PRODUCER`]).
//!
//! Counters are atomics bumped where the producer does the work (per batch and per request,
//! never per record); [`ProducerMetrics::snapshot`] reads them. Rates are averaged over the
//! producer's lifetime, as the consumer's are (Java uses sampled windows; the totals are exact
//! either way).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::metrics::{ms, Histogram, MetricsSnapshot};

/// Java group name of the producer metrics.
pub const PRODUCER: &str = "producer-metrics";

/// Live counters of one producer.
#[derive(Debug)]
pub(crate) struct ProducerMetrics {
    started: Instant,
    records_sent: AtomicU64,
    records_retried: AtomicU64,
    records_failed: AtomicU64,
    requests: AtomicU64,
    requests_in_flight: AtomicU64,
    batches_sent: AtomicU64,
    batch_bytes: AtomicU64,
    batch_bytes_max: AtomicU64,
    /// Per batch sent, its compressed / uncompressed size in millionths, summed.
    compression_ppm: AtomicU64,
    buffer_wait_ns: AtomicU64,
    buffer_exhausted: AtomicU64,
    /// From a Produce request queued on its connection to its answer.
    request_latency: Histogram,
    /// Per batch sent, from its first record to its (re)send.
    queue_time: Histogram,
}

impl Default for ProducerMetrics {
    fn default() -> Self {
        ProducerMetrics {
            started: Instant::now(),
            records_sent: AtomicU64::new(0),
            records_retried: AtomicU64::new(0),
            records_failed: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            requests_in_flight: AtomicU64::new(0),
            batches_sent: AtomicU64::new(0),
            batch_bytes: AtomicU64::new(0),
            batch_bytes_max: AtomicU64::new(0),
            compression_ppm: AtomicU64::new(0),
            buffer_wait_ns: AtomicU64::new(0),
            buffer_exhausted: AtomicU64::new(0),
            request_latency: Histogram::default(),
            queue_time: Histogram::default(),
        }
    }
}

/// What the sender knows of one batch in a request it queued.
pub(crate) struct SentBatch {
    pub records: usize,
    /// As sent (compressed).
    pub bytes: usize,
    pub uncompressed: usize,
    /// Since its first record.
    pub queued: Duration,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl ProducerMetrics {
    /// A Produce request was queued on its connection with these batches (a retried batch
    /// counts again, as in Java).
    pub(crate) fn request_sent(&self, batches: impl IntoIterator<Item = SentBatch>) {
        add(&self.requests, 1);
        for b in batches {
            add(&self.records_sent, b.records as u64);
            add(&self.batches_sent, 1);
            add(&self.batch_bytes, b.bytes as u64);
            if b.bytes as u64 > self.batch_bytes_max.load(Ordering::Relaxed) {
                self.batch_bytes_max.fetch_max(b.bytes as u64, Ordering::Relaxed);
            }
            let ratio_ppm = (b.bytes as u128 * 1_000_000 / b.uncompressed.max(1) as u128) as u64;
            add(&self.compression_ppm, ratio_ppm);
            self.queue_time.record(b.queued);
        }
    }

    /// A broker answered a Produce request after `latency`.
    pub(crate) fn request_answered(&self, latency: Duration) {
        self.request_latency.record(latency);
    }

    /// A Produce request started (`true`) or ended (`false`).
    pub(crate) fn in_flight(&self, started: bool) {
        if started {
            add(&self.requests_in_flight, 1);
        } else {
            self.requests_in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Records of a batch that will be sent again.
    pub(crate) fn retried(&self, records: usize) {
        add(&self.records_retried, records as u64);
    }

    /// Records whose delivery failed for good.
    pub(crate) fn failed(&self, records: usize) {
        add(&self.records_failed, records as u64);
    }

    /// A send waited `waited` for buffer memory; `exhausted`: in vain (`max.block.ms`).
    pub(crate) fn buffer_wait(&self, waited: Duration, exhausted: bool) {
        add(&self.buffer_wait_ns, u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX));
        if exhausted {
            add(&self.buffer_exhausted, 1);
        }
    }

    /// The figures now; `buffer` is (`buffer.memory`, bytes of it free).
    pub(crate) fn snapshot(&self, buffer: (usize, usize)) -> MetricsSnapshot {
        let elapsed = self.started.elapsed().as_secs_f64().max(1e-9);
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
        let per = |x: f64, n: f64| if n > 0.0 { x / n } else { 0.0 };
        let (records, retried, failed) =
            (get(&self.records_sent), get(&self.records_retried), get(&self.records_failed));
        let (requests, batches) = (get(&self.requests), get(&self.batches_sent));
        let latency = self.request_latency.snapshot();
        let queue = self.queue_time.snapshot();
        let mut s = MetricsSnapshot::default();
        let mut put = |n: &'static str, x: f64| s.put(PRODUCER, n, x);
        put("record-send-total", records);
        put("record-send-rate", records / elapsed);
        put("record-retry-total", retried);
        put("record-retry-rate", retried / elapsed);
        put("record-error-total", failed);
        put("record-error-rate", failed / elapsed);
        // Produce requests only: Java counts every request of the producer's network client.
        put("request-total", requests);
        put("request-rate", requests / elapsed);
        put("requests-in-flight", get(&self.requests_in_flight));
        put("request-latency-avg", ms(latency.mean()));
        put("request-latency-max", ms(latency.max()));
        put("records-per-request-avg", per(records, requests));
        put("batch-size-avg", per(get(&self.batch_bytes), batches));
        put("batch-size-max", get(&self.batch_bytes_max));
        put("compression-rate-avg", per(get(&self.compression_ppm) / 1e6, batches));
        put("record-queue-time-avg", ms(queue.mean()));
        put("record-queue-time-max", ms(queue.max()));
        put("buffer-total-bytes", buffer.0 as f64);
        put("buffer-available-bytes", buffer.1 as f64);
        put("bufferpool-wait-time-ns-total", get(&self.buffer_wait_ns));
        put("buffer-exhausted-total", get(&self.buffer_exhausted));
        // Not Java metrics (Java has only the averages and maxima): the latencies by bucket.
        s.put_histogram(PRODUCER, "request-latency", latency);
        s.put_histogram(PRODUCER, "record-queue-time", queue);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(records: usize, bytes: usize, uncompressed: usize, queued_ms: u64) -> SentBatch {
        SentBatch { records, bytes, uncompressed, queued: Duration::from_millis(queued_ms) }
    }

    #[test]
    fn counters_read_under_javas_names() {
        let m = ProducerMetrics::default();
        m.in_flight(true);
        m.request_sent([batch(10, 500, 1000, 4), batch(30, 1500, 2000, 8)]);
        m.in_flight(true);
        m.request_sent([batch(20, 1000, 1000, 2)]);
        m.request_answered(Duration::from_millis(3));
        m.in_flight(false);
        m.retried(20);
        m.failed(5);
        m.buffer_wait(Duration::from_micros(7), false);
        m.buffer_wait(Duration::from_micros(3), true);
        let s = m.snapshot((4096, 1024));
        let get = |n: &str| s.get(PRODUCER, n).unwrap_or_else(|| panic!("no {n}"));
        assert_eq!(get("record-send-total"), 60.0);
        assert_eq!(get("record-retry-total"), 20.0);
        assert_eq!(get("record-error-total"), 5.0);
        assert_eq!(get("request-total"), 2.0);
        assert_eq!(get("requests-in-flight"), 1.0);
        assert_eq!(get("records-per-request-avg"), 30.0);
        assert_eq!(get("batch-size-avg"), 1000.0);
        assert_eq!(get("batch-size-max"), 1500.0);
        assert_eq!(get("compression-rate-avg"), 0.75); // (0.5 + 0.75 + 1) / 3
        assert_eq!(get("request-latency-avg"), 3.0);
        assert_eq!(get("request-latency-max"), 3.0);
        assert_eq!(get("record-queue-time-max"), 8.0);
        assert_eq!((get("buffer-total-bytes"), get("buffer-available-bytes")), (4096.0, 1024.0));
        assert_eq!(get("bufferpool-wait-time-ns-total"), 10_000.0);
        assert_eq!(get("buffer-exhausted-total"), 1.0);
        assert!(get("record-send-rate") > 0.0);
        let latency = s.histogram(PRODUCER, "request-latency").expect("request-latency histogram");
        assert_eq!((latency.count(), latency.sum()), (1, Duration::from_millis(3)));
        assert_eq!(s.histogram(PRODUCER, "record-queue-time").map(|h| h.count()), Some(3));
    }

    #[test]
    fn an_idle_producer_reads_zeros_not_nans() {
        let s = ProducerMetrics::default().snapshot((0, 0));
        assert!(s.iter().all(|(_, _, v)| v == 0.0), "{s:?}");
    }
}
