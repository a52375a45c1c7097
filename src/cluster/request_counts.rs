//! Requests a client sent, by API key: what the exporter reports per refresh, so a test (and
//! an operator) can see that many groups cost a few batched requests, not one per group.
//!
//! Counted where every request of the cluster layer goes out ([`Cluster::send_at`](super::Cluster::send_at)),
//! retries included. The connection's own setup (ApiVersions, SASL) and the consumer's share
//! traffic, which its driver sends on the connections directly, are not counted.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Above every API key Kafka has (4.x tops out below 100); a higher key is counted in the
/// last slot rather than lost or panicking.
const SLOTS: usize = 128;

/// Lock-free counters of requests sent, one per API key.
pub struct RequestCounts([AtomicU64; SLOTS]);

impl Default for RequestCounts {
    fn default() -> Self {
        RequestCounts(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl fmt::Debug for RequestCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.sent()).finish()
    }
}

fn slot(key: i16) -> usize {
    usize::try_from(key).unwrap_or(SLOTS - 1).min(SLOTS - 1)
}

impl RequestCounts {
    /// Counts one request of API `key`.
    pub fn note(&self, key: i16) {
        self.0[slot(key)].fetch_add(1, Ordering::Relaxed);
    }

    /// (API key, requests sent) for every key sent at least once, by key.
    pub fn sent(&self) -> Vec<(i16, u64)> {
        (0..SLOTS)
            .filter_map(|i| {
                let n = self.0[i].load(Ordering::Relaxed);
                (n > 0).then(|| (i16::try_from(i).unwrap_or(i16::MAX), n))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::RequestCounts;

    #[test]
    fn counts_by_key_and_never_panics_on_an_odd_key() {
        let c = RequestCounts::default();
        c.note(90);
        c.note(90);
        c.note(10);
        c.note(-1);
        c.note(i16::MAX);
        assert_eq!(c.sent(), vec![(10, 1), (90, 2), (127, 2)]);
    }
}
