//! Per-connector sink metrics under KIP-1302's names.
//!
//! Counters are atomics the tasks bump; a [`SinkMetricsSnapshot`] reads them and derives the
//! rates. A rate is per second over the snapshots of the last 30 s (Kafka's default sample
//! window), so it needs two snapshots apart in time: the first one (and a connector that
//! just started) reports the rate since the start.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The counters that also have a `-rate`, in the order of [`Counters::values`].
const COUNTED: [&str; 6] = [
    "sink-record-acquire",
    "sink-record-acknowledge",
    "sink-record-release",
    "sink-record-reject",
    "sink-record-read",
    "sink-record-send",
];

/// The window rates are computed over.
const RATE_WINDOW: Duration = Duration::from_secs(30);

/// The metric names a snapshot holds, all of them, sorted.
pub const METRIC_NAMES: &[&str] = &[
    "acknowledge-time-avg",
    "acknowledge-time-max",
    "put-batch-time-avg",
    "put-batch-time-max",
    "sink-record-acknowledge-rate",
    "sink-record-acknowledge-total",
    "sink-record-acquire-rate",
    "sink-record-acquire-total",
    "sink-record-active-count",
    "sink-record-dead-letter-total",
    "sink-record-read-rate",
    "sink-record-read-total",
    "sink-record-redelivery-total",
    "sink-record-reject-rate",
    "sink-record-reject-total",
    "sink-record-release-rate",
    "sink-record-release-total",
    "sink-record-send-rate",
    "sink-record-send-total",
    "task-count",
    "task-failed-total",
];

/// A max and average of durations, in milliseconds.
#[derive(Default)]
struct Timing {
    sum_us: AtomicU64,
    count: AtomicU64,
    max_us: AtomicU64,
}

impl Timing {
    fn record(&self, d: Duration) {
        let us = d.as_micros().min(u64::MAX as u128) as u64;
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// (max, avg) in ms; NaN for the average before the first sample, as Kafka's `Avg`.
    fn read(&self) -> (f64, f64) {
        let n = self.count.load(Ordering::Relaxed);
        let max = self.max_us.load(Ordering::Relaxed) as f64 / 1000.0;
        let avg = if n == 0 { f64::NAN } else { self.sum_us.load(Ordering::Relaxed) as f64 / n as f64 / 1000.0 };
        (max, avg)
    }
}

#[derive(Default)]
struct Counters {
    acquire: AtomicU64,
    acknowledge: AtomicU64,
    release: AtomicU64,
    reject: AtomicU64,
    read: AtomicU64,
    send: AtomicU64,
}

impl Counters {
    fn values(&self) -> [u64; 6] {
        [
            self.acquire.load(Ordering::Relaxed),
            self.acknowledge.load(Ordering::Relaxed),
            self.release.load(Ordering::Relaxed),
            self.reject.load(Ordering::Relaxed),
            self.read.load(Ordering::Relaxed),
            self.send.load(Ordering::Relaxed),
        ]
    }
}

/// The live counters of one connector (shared by its tasks).
pub(crate) struct SinkMetrics {
    connector: String,
    counters: Counters,
    redelivery: AtomicU64,
    dead_letter: AtomicU64,
    active: AtomicI64,
    tasks: AtomicI64,
    failed_tasks: AtomicU64,
    ack_time: Timing,
    put_time: Timing,
    /// Earlier readings of the counters, oldest first, for the rates.
    samples: Mutex<VecDeque<(Instant, [u64; 6])>>,
}

impl SinkMetrics {
    pub(crate) fn new(connector: &str) -> SinkMetrics {
        SinkMetrics {
            connector: connector.to_string(),
            counters: Counters::default(),
            redelivery: AtomicU64::new(0),
            dead_letter: AtomicU64::new(0),
            active: AtomicI64::new(0),
            tasks: AtomicI64::new(0),
            failed_tasks: AtomicU64::new(0),
            ack_time: Timing::default(),
            put_time: Timing::default(),
            samples: Mutex::new(VecDeque::from([(Instant::now(), [0; 6])])),
        }
    }

    /// A poll handed out `records` records, `redelivered` of them delivered before.
    pub(crate) fn acquired(&self, records: usize, redelivered: usize) {
        let n = records as u64;
        self.counters.acquire.fetch_add(n, Ordering::Relaxed);
        self.counters.read.fetch_add(n, Ordering::Relaxed);
        self.redelivery.fetch_add(redelivered as u64, Ordering::Relaxed);
        self.active.fetch_add(records as i64, Ordering::Relaxed);
    }

    /// A batch of `records` went through `put` in `took`. As Connect's `sink-record-send`,
    /// this counts every record handed to `put`, whatever it answered.
    pub(crate) fn put(&self, records: usize, took: Duration) {
        self.put_time.record(took);
        self.counters.send.fetch_add(records as u64, Ordering::Relaxed);
    }

    /// Records were ACCEPTed.
    pub(crate) fn accepted(&self, n: usize) {
        self.counters.acknowledge.fetch_add(n as u64, Ordering::Relaxed);
        self.active.fetch_sub(n as i64, Ordering::Relaxed);
    }

    /// Records were RELEASEd.
    pub(crate) fn released(&self, n: usize) {
        self.counters.release.fetch_add(n as u64, Ordering::Relaxed);
        self.active.fetch_sub(n as i64, Ordering::Relaxed);
    }

    /// Records were REJECTed.
    pub(crate) fn rejected(&self, n: usize) {
        self.counters.reject.fetch_add(n as u64, Ordering::Relaxed);
        self.active.fetch_sub(n as i64, Ordering::Relaxed);
    }

    /// Records left this task without an acknowledgement of ours (a lock lost during a
    /// renewal, a close that released them).
    pub(crate) fn dropped(&self, n: usize) {
        self.active.fetch_sub(n as i64, Ordering::Relaxed);
    }

    /// A record was copied to the dead-letter topic.
    pub(crate) fn dead_lettered(&self) {
        self.dead_letter.fetch_add(1, Ordering::Relaxed);
    }

    /// A batch was acknowledged `took` after its poll returned it.
    pub(crate) fn acknowledge_time(&self, took: Duration) {
        self.ack_time.record(took);
    }

    pub(crate) fn task_started(&self) {
        self.tasks.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn task_ended(&self, failed: bool) {
        self.tasks.fetch_sub(1, Ordering::Relaxed);
        if failed {
            self.failed_tasks.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads every metric.
    pub(crate) fn snapshot(&self) -> SinkMetricsSnapshot {
        let now = Instant::now();
        let totals = self.counters.values();
        let (since, base) = {
            let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
            // Keep the newest sample older than the window as the rate's base.
            while samples.len() > 1 && samples.get(1).is_some_and(|(t, _)| now.duration_since(*t) >= RATE_WINDOW) {
                samples.pop_front();
            }
            let base = samples.front().copied().unwrap_or((now, [0; 6]));
            samples.push_back((now, totals));
            base
        };
        let secs = now.duration_since(since).as_secs_f64().max(1e-3);
        let mut values = BTreeMap::new();
        for (i, name) in COUNTED.iter().enumerate() {
            values.insert(format!("{name}-total"), totals[i] as f64);
            values.insert(format!("{name}-rate"), totals[i].saturating_sub(base[i]) as f64 / secs);
        }
        values.insert("sink-record-redelivery-total".into(), self.redelivery.load(Ordering::Relaxed) as f64);
        values.insert("sink-record-dead-letter-total".into(), self.dead_letter.load(Ordering::Relaxed) as f64);
        values.insert("sink-record-active-count".into(), self.active.load(Ordering::Relaxed).max(0) as f64);
        values.insert("task-count".into(), self.tasks.load(Ordering::Relaxed).max(0) as f64);
        values.insert("task-failed-total".into(), self.failed_tasks.load(Ordering::Relaxed) as f64);
        let (max, avg) = self.ack_time.read();
        values.insert("acknowledge-time-max".into(), max);
        values.insert("acknowledge-time-avg".into(), avg);
        let (max, avg) = self.put_time.read();
        values.insert("put-batch-time-max".into(), max);
        values.insert("put-batch-time-avg".into(), avg);
        SinkMetricsSnapshot { connector: self.connector.clone(), values }
    }
}

/// One reading of a connector's metrics (see [`METRIC_NAMES`]). Times are in milliseconds;
/// an average with no sample yet is NaN.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkMetricsSnapshot {
    connector: String,
    values: BTreeMap<String, f64>,
}

impl SinkMetricsSnapshot {
    /// The connector's name.
    pub fn connector(&self) -> &str {
        &self.connector
    }

    /// A metric by its KIP-1302 name, e.g. `sink-record-acknowledge-total`.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.values.get(name).copied()
    }

    /// Every metric, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.values.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_names() {
        let m = SinkMetrics::new("c");
        m.acquired(10, 2);
        m.put(10, Duration::from_millis(4));
        m.accepted(7);
        m.released(2);
        m.rejected(1);
        m.acknowledge_time(Duration::from_millis(8));
        let s = m.snapshot();
        assert_eq!(s.get("sink-record-acquire-total"), Some(10.0));
        assert_eq!(s.get("sink-record-read-total"), Some(10.0));
        assert_eq!(s.get("sink-record-send-total"), Some(10.0));
        assert_eq!(s.get("sink-record-acknowledge-total"), Some(7.0));
        assert_eq!(s.get("sink-record-release-total"), Some(2.0));
        assert_eq!(s.get("sink-record-reject-total"), Some(1.0));
        assert_eq!(s.get("sink-record-redelivery-total"), Some(2.0));
        assert_eq!(s.get("sink-record-active-count"), Some(0.0));
        assert_eq!(s.get("put-batch-time-max"), Some(4.0));
        assert_eq!(s.get("acknowledge-time-avg"), Some(8.0));
        assert!(s.get("sink-record-acquire-rate").is_some_and(|r| r > 0.0));
        let names: Vec<&str> = s.iter().map(|(k, _)| k).collect();
        assert_eq!(names, METRIC_NAMES);
    }
}
