//! The one backoff helper every retry loop uses.
//!
//! Exponential with full jitter, as the Java client does (`retry.backoff.ms` doubling up to
//! `retry.backoff.max.ms`, +/-20% jitter), so a fleet of consumers hitting the same broker
//! error do not retry in lockstep.

use std::time::Duration;

use rand::Rng;

/// Exponential backoff state for one retry loop.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempts: u32,
}

impl Backoff {
    /// A backoff starting at `initial` and capped at `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff { initial, max: max.max(initial), attempts: 0 }
    }

    /// The delay before the next attempt; each call doubles the base delay.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.base_delay();
        self.attempts = self.attempts.saturating_add(1);
        base.mul_f64(jitter()).min(self.max)
    }

    /// The un-jittered delay for the current attempt.
    fn base_delay(&self) -> Duration {
        self.delay_at(self.attempts)
    }

    /// The un-jittered delay before attempt `n` (0: the first retry), whatever the state:
    /// for a loop that keeps its attempts elsewhere, as the processing engine keeps each
    /// record's retries on the record (a `Backoff` per record would cost its size on every
    /// record held). Never jittered, so a record's next try is known exactly.
    pub(crate) fn delay_at(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.min(20));
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// How many delays were handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Call after a success: the next failure starts from `initial` again.
    pub fn reset(&mut self) {
        self.attempts = 0;
    }
}

#[cfg(test)]
thread_local! {
    /// The simulation's jitter source (`seed_jitter`): a seeded sequence, so a seed replays.
    static JITTER: std::cell::RefCell<Option<rand::rngs::StdRng>> = const { std::cell::RefCell::new(None) };
}

/// Makes this thread's backoff jitter a sequence drawn from `seed` (`None`: random again).
/// Test builds only: the simulation (`src/sim/`) replays a seed exactly only if every delay
/// the driver core picks is drawn from it.
#[cfg(test)]
pub(crate) fn seed_jitter(seed: Option<u64>) {
    use rand::SeedableRng;
    JITTER.with(|j| *j.borrow_mut() = seed.map(rand::rngs::StdRng::seed_from_u64));
}

/// A factor in 0.8..1.2.
fn jitter() -> f64 {
    #[cfg(test)]
    if let Some(j) = JITTER.with(|j| j.borrow_mut().as_mut().map(|r| r.gen_range(0.8..1.2))) {
        return j;
    }
    rand::thread_rng().gen_range(0.8..1.2)
}

impl Default for Backoff {
    /// The Java defaults: `retry.backoff.ms` = 100, `retry.backoff.max.ms` = 1000.
    fn default() -> Self {
        Backoff::new(Duration::from_millis(100), Duration::from_millis(1000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let d: Vec<_> = (0..8).map(|_| b.next_delay()).collect();
        assert!(d[0] >= Duration::from_millis(80) && d[0] <= Duration::from_millis(120));
        assert!(d[2] >= Duration::from_millis(320) && d[2] <= Duration::from_millis(480));
        assert!(d.iter().all(|x| *x <= Duration::from_millis(1000)));
        assert_eq!(b.attempts(), 8);
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(120));
    }
}
