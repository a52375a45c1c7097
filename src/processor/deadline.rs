//! Deadlines that cannot overflow. `Instant + Duration` panics when the sum is past what the
//! platform's clock can hold, and a user's setting (a `Duration::MAX` timeout, backoff or
//! bound) may be added to `now` anywhere in the engine, on its task or in the caller's
//! `Drop`. Every deadline the engine computes goes through [`later`].

use std::time::{Duration, Instant};

/// `now + d`, or the farthest instant the clock can hold past `now` when that sum cannot be
/// represented: a deadline too far to reach is as good as one that never comes.
pub(crate) fn later(now: Instant, d: Duration) -> Instant {
    if let Some(t) = now.checked_add(d) {
        return t;
    }
    // Halve down to the largest step the clock takes (at most ~64 tries: a Duration's
    // seconds are a u64; each halving passes one more bit).
    let mut step = d;
    while !step.is_zero() {
        step /= 2;
        if let Some(t) = now.checked_add(step) {
            return t;
        }
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_representable_sum_is_the_sum() {
        let now = Instant::now();
        assert_eq!(later(now, Duration::from_secs(5)), now + Duration::from_secs(5));
        assert_eq!(later(now, Duration::ZERO), now);
    }

    #[test]
    fn duration_max_is_far_in_the_future_not_a_panic() {
        let now = Instant::now();
        let t = later(now, Duration::MAX);
        assert!(t > now + Duration::from_secs(100 * 365 * 24 * 3600), "{:?}", t - now);
        assert!(later(t, Duration::MAX) >= t, "and from there on, no further but no panic");
    }
}
