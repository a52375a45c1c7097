//! The application's side of pacing: when it last came for records, how fast it takes them,
//! and whether it has stopped (then what is buffered goes back to the group). The session
//! manager's pacing policy (`sessions/pace.rs`) reads these facts through its
//! [`Demand`](super::sessions::Demand) view; it never writes them.

use std::time::{Duration, Instant};

use super::DriverCore;

/// Until the broker has said how long its locks last: no poll for this long and none
/// waiting means the application has stopped taking records. Once the lock is known, a
/// quarter of it: the prefetch horizon keeps the buffer to what a polling application takes
/// far sooner, so only an application that stopped leaves records there that long, and
/// three quarters of their lock are still left for another member.
pub(crate) const IDLE_AFTER: Duration = Duration::from_secs(1);

/// When the application last came for records: the driver's view of whether anyone is
/// taking what it acquires.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    /// When a poll last arrived, or last ended (left with records, or gave up); a poll
    /// waiting counts as now.
    pub last_poll: Option<Instant>,
    /// When a poll last found nothing buffered (see the session manager's `Pace::demand`).
    pub demand_at: Option<Instant>,
    /// When the application last called poll, whatever for (see `poll_interval.rs`).
    pub last_poll_call: Option<Instant>,
    /// Consumer calls that wait (`commit_sync`) the application is inside now
    /// (`Command::Busy`). An application blocked in one of our calls has not stopped taking
    /// records: a commit the broker holds for seconds (a leader failover) must not cost the
    /// buffered records a delivery attempt, nor send their RELEASEs to that same broker.
    pub busy: usize,
}

/// How fast the application takes records: records handed out per second, smoothed over
/// windows of [`DrainRate::WINDOW`].
#[derive(Debug, Default)]
pub(crate) struct DrainRate {
    window_start: Option<Instant>,
    count: usize,
    per_sec: f64,
}

impl DrainRate {
    const WINDOW: Duration = Duration::from_millis(200);

    /// `n` records were handed to the application at `now`.
    pub(super) fn record(&mut self, n: usize, now: Instant) {
        let start = *self.window_start.get_or_insert(now);
        self.count += n;
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= Self::WINDOW {
            let rate = self.count as f64 / elapsed.as_secs_f64();
            self.per_sec = if self.per_sec == 0.0 { rate } else { (self.per_sec + rate) / 2.0 };
            self.window_start = Some(now);
            self.count = 0;
        }
    }

    /// Records per second; an application that stopped taking records slows it at once.
    pub(super) fn per_sec(&self, now: Instant) -> f64 {
        match self.window_start {
            Some(start) if now.saturating_duration_since(start) > Self::WINDOW => {
                let elapsed = now.saturating_duration_since(start).as_secs_f64();
                self.per_sec.min(self.count as f64 / elapsed)
            }
            _ => self.per_sec,
        }
    }
}

impl DriverCore {
    /// The lock duration the broker reported (zero before it said).
    pub(super) fn lock_duration(&self) -> Duration {
        Duration::from_millis(
            self.shared.acquisition_lock_timeout_ms.load(std::sync::atomic::Ordering::Relaxed).max(0) as u64
        )
    }

    /// Whether a poll waits for records. A poll that waits for renewals takes none (as in
    /// Java 4.4), so it neither calls for a fetch nor counts as the application taking records:
    /// what is buffered meanwhile goes back to the group once the application has taken
    /// nothing for a quarter of the lock, instead of ageing here.
    pub(super) fn waiting_for_records(&self) -> bool {
        self.waiter.as_ref().is_some_and(|w| !w.renewing)
    }

    /// Whether a broker that joins the fetch plan now owes the last poll a fetch.
    pub(super) fn fresh_demand(&self, now: Instant) -> bool {
        self.activity.demand_at.is_some_and(|t| now < t + self.idle_after())
    }

    /// Whether the application has stopped taking records: no poll waits, it is not inside
    /// a consumer call that waits, and no poll came for a quarter of the lock
    /// ([`IDLE_AFTER`] before the lock is known).
    pub(super) fn app_idle(&self, now: Instant) -> bool {
        !self.waiting_for_records()
            && self.activity.busy == 0
            && self.activity.last_poll.is_none_or(|t| now >= t + self.idle_after())
    }

    /// The application entered (`true`) or left a consumer call that waits. Leaving the last
    /// one counts as a poll for idleness: the quarter lock starts when the call returns, as
    /// the application gets its first chance to poll again only then.
    pub(super) fn note_busy(&mut self, entered: bool, now: Instant) {
        let a = &mut self.activity;
        if entered {
            a.busy = a.busy.saturating_add(1);
        } else if a.busy > 0 {
            a.busy -= 1;
            if a.busy == 0 {
                a.last_poll = Some(now);
            }
        }
    }

    fn idle_after(&self) -> Duration {
        let lock = self.lock_duration();
        if lock.is_zero() {
            IDLE_AFTER
        } else {
            lock / 4
        }
    }

    /// When buffered records go back to the group if no poll comes first.
    pub(super) fn idle_deadline(&self) -> Option<Instant> {
        if self.waiting_for_records() || self.activity.busy > 0 || self.buffer.is_empty() {
            return None;
        }
        self.activity.last_poll.map(|t| t + self.idle_after())
    }

    /// A poll arrived (or left with records) at `now`: the application is taking records,
    /// and each broker may send one refill for its next poll.
    pub(super) fn note_poll(&mut self, now: Instant) {
        self.activity.last_poll = Some(now);
        let empty = self.buffer.is_empty();
        if empty {
            self.activity.demand_at = Some(now);
        }
        self.sessions.poll_arrived(empty);
    }

    /// A poll that waited for records gave up (timed out, woken, dropped) by `now`: the
    /// application was inside it until then, so its idle time counts from here, not from
    /// the poll's arrival. Else a poll that waited past a quarter of the lock and gave up
    /// empty left the application "idle" at once: a fetch answer arriving before its next
    /// poll, milliseconds later, was released unseen and came back at delivery count 2
    /// (issue 34). The shell tells the core of a poll that gave up only when it next drives
    /// it, so `now` may be later than the give-up: that only delays an idle release.
    pub(super) fn note_poll_ended(&mut self, now: Instant) {
        self.activity.last_poll = Some(now);
    }

    /// Releases what is buffered once the application has stopped polling, so other members
    /// get those records now rather than after their locks lapse here.
    pub(super) fn release_if_idle(&mut self, now: Instant) {
        if self.buffer.is_empty() || !self.app_idle(now) {
            return;
        }
        let released = self.buffered();
        tracing::debug!(released, "application stopped polling: buffered records released to the group");
        self.shared.metrics.record_released_unseen(released as u64);
        self.release_buffer(|_| true);
    }

    /// Records buffered from every broker.
    pub(super) fn buffered(&self) -> usize {
        self.buffer.iter().map(|f| f.records.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_rate_follows_the_application_and_drops_when_it_stops() {
        let t0 = Instant::now();
        let mut d = DrainRate::default();
        assert_eq!(d.per_sec(t0), 0.0);
        for i in 0..=10 {
            d.record(500, t0 + Duration::from_millis(50 * i)); // 10,000 records/s
        }
        let fast = d.per_sec(t0 + Duration::from_millis(500));
        assert!((8_000.0..=14_000.0).contains(&fast), "{fast}");
        // Ten seconds without a poll: the estimate falls at once, before any new window.
        let idle = d.per_sec(t0 + Duration::from_secs(10));
        assert!(idle < 1_000.0, "{idle}");
    }
}
