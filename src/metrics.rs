//! What every client's metrics are read into: [`MetricsSnapshot`], values and latency
//! histograms at one moment keyed by (Java group, Java metric name), and the lock-free
//! [`Histogram`] the clients record durations into.
//!
//! The histogram's buckets are powers of two of a microsecond, so finding a value's bucket is
//! one `leading_zeros`, and a record is three relaxed atomic operations: the bucket's count,
//! the sum, and (only when it grows) the maximum. The count is the buckets' sum, read at
//! snapshot time, so a snapshot's count always equals its `+Inf` bucket.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The live histogram's buckets: bucket `i` counts values of at most 2^i µs (after rounding
/// up to whole microseconds), the last one everything above 2^(N-2) µs.
const FINE_BUCKETS: usize = 32;

/// The buckets a snapshot exports ([`HistogramSnapshot::buckets`], Prometheus' `le`): the
/// fine buckets from 2^7 µs (128 µs) to 2^26 µs (67.1 s). Fewer series per histogram than the
/// fine ones; the quantile gauges keep using the fine ones.
const EXPORTED: std::ops::RangeInclusive<usize> = 7..=26;

/// The fine bucket of a duration of `ns` nanoseconds: the smallest `i` with
/// `ceil(ns / 1000) <= 2^i`, capped at the overflow bucket.
#[inline]
fn bucket_of(ns: u64) -> usize {
    let us = ns.div_ceil(1000);
    let i = (u64::BITS - us.saturating_sub(1).leading_zeros()) as usize;
    i.min(FINE_BUCKETS - 1)
}

/// The upper bound of fine bucket `i` (the overflow bucket has none).
fn upper_bound(i: usize) -> Duration {
    Duration::from_micros(1u64 << i)
}

/// A latency histogram that any thread records into without a lock: a handful of relaxed
/// atomics, no allocation. (Public only with `unstable-internals`, for its bench.)
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; FINE_BUCKETS],
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Counts one duration.
    #[inline]
    pub fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        // The maximum rarely moves: a load instead of a compare-and-swap loop in the usual case.
        if ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.fetch_max(ns, Ordering::Relaxed);
        }
    }

    /// Adds what `tally` counted, and empties it: one atomic step per bucket used, not per
    /// duration (the engine counts a handler call's records this way).
    pub(crate) fn add(&self, tally: &mut HistogramTally) {
        if tally.count == 0 {
            return;
        }
        for (bucket, n) in self.buckets.iter().zip(tally.buckets.iter()) {
            if *n > 0 {
                bucket.fetch_add(*n, Ordering::Relaxed);
            }
        }
        self.sum_ns.fetch_add(tally.sum_ns, Ordering::Relaxed);
        if tally.max_ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.fetch_max(tally.max_ns, Ordering::Relaxed);
        }
        *tally = HistogramTally::default();
    }

    /// The counts so far. Not one atomic read: a record racing the snapshot may show in its
    /// sum and not its count, never the other way round inside one bucket.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
            max_ns: self.max_ns.load(Ordering::Relaxed),
        }
    }
}

/// Durations counted by one owner without atomics, added to a [`Histogram`] in one step
/// ([`Histogram::add`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct HistogramTally {
    buckets: [u64; FINE_BUCKETS],
    sum_ns: u64,
    max_ns: u64,
    count: u64,
}

impl HistogramTally {
    /// Counts one duration.
    #[inline]
    pub(crate) fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(ns)] += 1;
        self.sum_ns = self.sum_ns.wrapping_add(ns);
        self.max_ns = self.max_ns.max(ns);
        self.count += 1;
    }
}

/// A latency histogram at one moment (see [`MetricsSnapshot::histogram`]): how many
/// durations were recorded, their sum and maximum, and how many fell at or under each bucket
/// bound. Every histogram of the clients measures a duration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistogramSnapshot {
    buckets: [u64; FINE_BUCKETS],
    sum_ns: u64,
    max_ns: u64,
}

impl HistogramSnapshot {
    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Their sum.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_ns)
    }

    /// The largest one (zero when none was recorded).
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// Their mean (zero when none was recorded).
    pub fn mean(&self) -> Duration {
        match self.count() {
            0 => Duration::ZERO,
            n => Duration::from_nanos(self.sum_ns / n),
        }
    }

    /// Cumulative counts: `(bound, n)` says `n` durations were at most `bound` (rounded up to
    /// whole microseconds). The bounds are powers of two microseconds from 128 µs to 67.1 s
    /// (2^7 .. 2^26 µs), Prometheus' `le` labels; [`count`](Self::count) is the `+Inf` bucket.
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        let mut seen: u64 = self.buckets[..*EXPORTED.start()].iter().sum();
        EXPORTED.map(move |i| {
            seen += self.buckets[i];
            (upper_bound(i), seen)
        })
    }

    /// An estimate of the `q` quantile (0 ..= 1): the upper bound of the power-of-two bucket
    /// (from 1 µs up) it falls in, at most the largest duration seen; zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        let count = self.count();
        if count == 0 {
            return Duration::ZERO;
        }
        let max = self.max();
        let rank = ((count as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate().take(FINE_BUCKETS - 1) {
            seen += n;
            if seen >= rank {
                return upper_bound(i).min(max);
            }
        }
        max
    }
}

/// Metric values and latency histograms at one moment, keyed by (Java group, Java metric
/// name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsSnapshot {
    values: BTreeMap<(&'static str, &'static str), f64>,
    histograms: BTreeMap<(&'static str, &'static str), HistogramSnapshot>,
}

impl MetricsSnapshot {
    pub(crate) fn put(&mut self, group: &'static str, name: &'static str, value: f64) {
        self.values.insert((group, name), value);
    }

    pub(crate) fn put_histogram(&mut self, group: &'static str, name: &'static str, h: HistogramSnapshot) {
        self.histograms.insert((group, name), h);
    }

    /// One metric, e.g. `get(FETCH_MANAGER, "records-consumed-total")`.
    pub fn get(&self, group: &str, name: &str) -> Option<f64> {
        self.values.iter().find(|((g, n), _)| *g == group && *n == name).map(|(_, v)| *v)
    }

    /// Every metric value (histograms apart: [`histograms`](Self::histograms)).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &'static str, f64)> + '_ {
        self.values.iter().map(|((g, n), v)| (*g, *n, *v))
    }

    /// One latency histogram, e.g. `histogram(FETCH_MANAGER, "fetch-latency")`.
    pub fn histogram(&self, group: &str, name: &str) -> Option<&HistogramSnapshot> {
        self.histograms.iter().find(|((g, n), _)| *g == group && *n == name).map(|(_, h)| h)
    }

    /// Every latency histogram.
    pub fn histograms(&self) -> impl Iterator<Item = (&'static str, &'static str, &HistogramSnapshot)> + '_ {
        self.histograms.iter().map(|((g, n), h)| (*g, *n, h))
    }
}

/// Adds a client's connection counters (Java's names) to `s` under `group`.
pub(crate) fn put_network(s: &mut MetricsSnapshot, group: &'static str, n: &crate::cluster::NetworkStats) {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
    s.put(group, "connection-creation-total", get(&n.connections_created));
    s.put(group, "successful-authentication-total", get(&n.authentications));
    s.put(group, "successful-reauthentication-total", get(&n.reauthentications));
    s.put(group, "failed-reauthentication-total", get(&n.failed_reauthentications));
}

/// A duration in Java's metric unit for latencies, milliseconds (from whole nanoseconds, so
/// that 1.024 ms reads as `1.024`).
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_lands_in_the_smallest_bucket_whose_bound_is_at_least_it() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0); // 1 ns rounds up to 1 us: <= 2^0 us
        assert_eq!(bucket_of(1_000), 0);
        assert_eq!(bucket_of(1_001), 1);
        assert_eq!(bucket_of(2_000), 1);
        assert_eq!(bucket_of(2_001), 2);
        assert_eq!(bucket_of(128_000), 7); // exactly on a bound: that bucket (le)
        assert_eq!(bucket_of(128_001), 8);
        assert_eq!(bucket_of(1_000_000), 10); // 1 ms <= 1.024 ms
        assert_eq!(bucket_of(u64::MAX), FINE_BUCKETS - 1);
        for i in 0..FINE_BUCKETS - 1 {
            let bound = upper_bound(i).as_nanos() as u64;
            assert_eq!(bucket_of(bound), i, "bound of {i}");
            assert_eq!(bucket_of(bound + 1), i + 1, "just past the bound of {i}");
        }
    }

    #[test]
    fn exported_buckets_are_cumulative_from_128us_to_67s() {
        let h = Histogram::default();
        h.record(Duration::from_micros(5)); // under the first bound
        h.record(Duration::from_micros(128)); // on it
        h.record(Duration::from_millis(3)); // <= 4.096 ms
        h.record(Duration::from_secs(100)); // past the last: only +Inf
        let s = h.snapshot();
        assert_eq!(s.count(), 4);
        assert_eq!(s.sum(), Duration::from_micros(5 + 128 + 3_000) + Duration::from_secs(100));
        assert_eq!(s.max(), Duration::from_secs(100));
        let b: Vec<(Duration, u64)> = s.buckets().collect();
        assert_eq!(b.len(), 20);
        assert_eq!(b[0], (Duration::from_micros(128), 2));
        assert_eq!(b[4], (Duration::from_micros(2_048), 2));
        assert_eq!(b[5], (Duration::from_micros(4_096), 3));
        assert_eq!(*b.last().unwrap(), (Duration::from_micros(1 << 26), 3));
        assert!(b.windows(2).all(|w| w[0].0 * 2 == w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn quantiles_come_from_the_buckets_and_never_exceed_the_max() {
        let h = Histogram::default();
        assert_eq!(h.snapshot().quantile(0.5), Duration::ZERO);
        assert_eq!(h.snapshot().mean(), Duration::ZERO);
        for _ in 0..99 {
            h.record(Duration::from_millis(1));
        }
        h.record(Duration::from_millis(500));
        let s = h.snapshot();
        assert_eq!(s.quantile(0.5), Duration::from_micros(1_024));
        assert_eq!(s.quantile(0.99), Duration::from_micros(1_024));
        assert_eq!(s.quantile(1.0), Duration::from_millis(500));
        assert_eq!(s.mean(), Duration::from_micros((99_000 + 500_000) / 100));
    }

    #[test]
    fn records_from_many_threads_all_count() {
        let h = std::sync::Arc::new(Histogram::default());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        h.record(Duration::from_micros(t * 100 + i % 7));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 40_000);
        assert_eq!(s.max(), Duration::from_micros(306));
    }

    #[test]
    fn a_snapshot_keeps_values_and_histograms_apart() {
        let mut s = MetricsSnapshot::default();
        s.put("g", "a-total", 1.0);
        let h = Histogram::default();
        h.record(Duration::from_millis(2));
        s.put_histogram("g", "a-latency", h.snapshot());
        assert_eq!(s.iter().count(), 1);
        assert_eq!(s.get("g", "a-latency"), None);
        assert_eq!(s.histogram("g", "a-latency").map(HistogramSnapshot::count), Some(1));
        assert_eq!(s.histograms().map(|(g, n, _)| (g, n)).collect::<Vec<_>>(), [("g", "a-latency")]);
    }

    #[test]
    fn a_tally_adds_what_recording_each_would() {
        let durations = [Duration::from_micros(3), Duration::from_millis(2), Duration::from_micros(3), Duration::ZERO];
        let (each, tallied) = (Histogram::default(), Histogram::default());
        let mut tally = HistogramTally::default();
        for d in durations {
            each.record(d);
            tally.record(d);
        }
        tallied.add(&mut tally);
        assert_eq!(tallied.snapshot(), each.snapshot());
        tallied.add(&mut tally);
        assert_eq!(tallied.snapshot(), each.snapshot(), "added once: the tally is empty after");
    }
}
