//! When to send what on each share session: the pacing policy.
//!
//! Each session has at most one request in flight (a broker answers a connection's requests
//! one at a time), so every request must earn its round trip:
//! - Acks ride on the next ShareFetch. They go alone (ShareAcknowledge) only when someone
//!   waits for them (commit, close), when no fetch can carry them (partition no longer
//!   fetched here, renewals), or when they have waited [`ACK_LINGER`] because no fetch is due.
//! - batch_optimized keeps a fetch under way while the application drains the buffer: the
//!   next one leaves while less than two responses (or one poll) are buffered, and asks for
//!   as many records as the application takes in a quarter of the acquisition lock.
//! - A fetch does not long-poll while the member holds records from that broker (buffered,
//!   delivered and unacknowledged, or acks queued): the broker may have nothing more to give
//!   until those are acknowledged (its per-partition cap on acquired records), and a parked
//!   fetch would hold back the acks that free them. When such a no-wait fetch comes back
//!   empty the session is *parked*: nothing more is sent until new acks arrive, a poll
//!   waits on an empty buffer, or `fetch.max.wait.ms` passes (then one long poll), so a
//!   member never spins.
//! - Records are acquired only for an application that is taking them (see
//!   [`Activity`]): a fetch that may acquire records leaves while a poll waits, or as the one
//!   refill a poll allows per broker, and only while the buffer holds less than the
//!   application takes in [`PREFETCH_HORIZON`]. A member whose application stops polling
//!   acquires nothing more, and what it had buffered goes back to the group after a quarter
//!   of the lock (RELEASE, at once by ShareAcknowledge) instead of lapsing in the
//!   buffer: a lapsed lock costs the record a delivery attempt that no application made,
//!   and holds it from members that are polling. An application waiting inside a consumer
//!   call (`commit_sync`: [`Activity::busy`]) has not stopped: it polls once the call
//!   returns.

use std::time::{Duration, Instant};

use super::DriverCore;
use crate::acquire_mode::AcquireMode;

/// How long queued acks may wait for a fetch to carry them before they go on their own.
pub(crate) const ACK_LINGER: Duration = Duration::from_millis(100);

/// Per-session pacing state.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// Records handed to the application from this broker and not finally acknowledged.
    pub outstanding: usize,
    /// When the oldest ack still queued on the session was queued.
    pub acks_since: Option<Instant>,
    /// Records in the last response that had any: the prefetch target.
    pub last_response: usize,
    /// Since when the session is parked: its last no-wait fetch came back empty.
    pub parked: Option<Instant>,
    /// The fetch in flight was sent with max_wait 0.
    pub nowait_in_flight: bool,
    /// The one fetch a poll allows without a poll waiting (the refill that serves the next
    /// poll): granted by each poll, taken by such a fetch, and withdrawn by a RELEASE (the
    /// released records must go to other members, not back to this idle one).
    pub refill: bool,
    /// RELEASE acks are queued: they go at once by ShareAcknowledge unless a poll waits
    /// (then the fetch for it carries them).
    pub releases_queued: bool,
    /// A poll found nothing buffered and this broker has not fetched since: it owes that
    /// poll a fetch even if the poll gave up meanwhile (a `poll(Duration::ZERO)` loop must
    /// get records too), as long as the application has not gone idle.
    pub demand: bool,
}

impl Pace {
    /// Notes whether acks are queued: starts their linger, and un-parks the session (new
    /// acks may free records the broker holds back for us).
    pub(crate) fn note_acks(&mut self, queued: bool, now: Instant) {
        if queued {
            self.parked = None;
            self.acks_since.get_or_insert(now);
        } else {
            self.acks_since = None;
        }
    }

    /// Records handed to the application.
    pub(crate) fn delivered(&mut self, n: usize) {
        self.outstanding = self.outstanding.saturating_add(n);
    }

    /// Records finally acknowledged (or handed back).
    pub(crate) fn settled(&mut self, n: usize) {
        self.outstanding = self.outstanding.saturating_sub(n);
    }

    /// A fetch answered with `records` records; `carried_acks`: it carried acknowledgements.
    ///
    /// An empty no-wait fetch parks the session, unless it carried acks: the broker answers
    /// the fetch part without waiting for the acks beside it, so the window those acks free
    /// (a partition acquires at most `share.partition.max.record.locks` offsets past its
    /// oldest unacknowledged one) shows only to the next fetch. Parked, that fetch would wait
    /// for more acks or `fetch.max.wait.ms`; a slow record holding the window open makes
    /// this the common case (bench-sink's head-of-line case).
    pub(crate) fn fetched(&mut self, records: usize, carried_acks: bool, now: Instant) {
        if records > 0 {
            self.last_response = records;
        } else if self.nowait_in_flight && !carried_acks {
            self.parked = Some(now);
        }
        self.nowait_in_flight = false;
    }

    /// The session was reset: the broker released everything it had given us.
    pub(crate) fn reset(&mut self) {
        *self = Pace { last_response: self.last_response, refill: self.refill, demand: self.demand, ..Pace::default() };
    }
}

/// Most records one batch_optimized fetch asks for, however fast the application is.
pub(crate) const FETCH_RECORDS_CAP: usize = 10_000;

/// How far ahead of the application records are acquired: the buffer holds no more than it
/// takes in this time (or a quarter of the lock, if shorter), beyond what one waiting poll
/// asks for. At 650k records/s that is far above the fetch cap (the benchmarks lose nothing);
/// a slow application gets no prefetch at all, so a faster member of the group takes the
/// records it could not process in time.
pub(crate) const PREFETCH_HORIZON: Duration = Duration::from_millis(250);

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
    /// When a poll last arrived, or last left with records (a poll waiting counts as now).
    pub last_poll: Option<Instant>,
    /// When a poll last found nothing buffered (see [`Pace::demand`]).
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

/// What a session may send now, besides urgent acks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchPlan {
    /// No fetch now.
    None,
    /// A fetch that returns at once (max_wait 0).
    NoWait,
    /// A fetch that may wait `fetch.max.wait.ms` for records.
    LongPoll,
}

impl DriverCore {
    /// Whether the member holds records from broker `id`: buffered, delivered and not yet
    /// acknowledged, or acknowledged but not sent.
    fn holding(&self, id: i32, buffered: usize) -> bool {
        buffered > 0 || self.nodes.get(&id).is_some_and(|n| n.pace.outstanding > 0 || n.session.has_acks())
    }

    /// Records buffered from every broker.
    fn buffered(&self) -> usize {
        self.buffer.iter().map(|f| f.records.len()).sum()
    }

    pub(super) fn buffered_from(&self, id: i32) -> usize {
        self.buffer.iter().filter(|f| f.node == id).map(|f| f.records.len()).sum()
    }

    /// batch_optimized: whether to fetch from broker `id` now, and how.
    pub(super) fn batch_plan(&self, id: i32, now: Instant) -> FetchPlan {
        let Some(n) = self.nodes.get(&id) else {
            return FetchPlan::None;
        };
        if self.fatal.is_some() || !self.membership.is_active() {
            return FetchPlan::None;
        }
        // Every fetch may acquire records: only for a poll that waits (or gave up waiting),
        // or as the refill of an application that is taking records and has room ahead.
        let owed = self.waiting_for_records() || self.owes_fetch(id, now);
        if !owed && !self.may_refill(id, now) {
            return FetchPlan::None;
        }
        // The broker must hear of added and forgotten partitions whatever is buffered.
        if n.session.has_changes() {
            return FetchPlan::NoWait;
        }
        // Keep fetching while less than two responses' worth is buffered: the broker often
        // answers with less than it was asked for (its cap on records acquired per
        // partition), and the buffer must not run dry during the next round trip. Measured
        // on 1M records: a half-response target took 4.1-4.6 s, two responses 2.3-3.0 s.
        let buffered = self.buffered_from(id);
        let target = self.poll_size.max(n.pace.last_response.saturating_mul(2));
        if buffered >= target {
            return FetchPlan::None;
        }
        // Beyond one poll's worth, prefetch only while the buffer is fresh: records that sit
        // past their lock would be dropped and redelivered with a higher delivery count.
        if buffered >= self.poll_size && !self.buffer_fresh(id, now) {
            return FetchPlan::None;
        }
        let holding = self.holding(id, buffered);
        if let Some(since) = n.pace.parked {
            // Nothing new since the broker said it had nothing: wait for acks (which un-park
            // the session), or long-poll for a poll that finds nothing buffered, or after a
            // while anyway (to learn of new records, moved leaders, a lost session). But while
            // records from this broker are out with the application (the processing engine's
            // running handlers), their acks are what the broker waits for, and a long poll
            // would hold them back on the session for `fetch.max.wait.ms` (one request at a
            // time): then only a no-wait fetch, after the quiet time.
            let unacked = n.pace.outstanding > 0;
            let waiting = owed && self.buffer.is_empty() && !unacked;
            return match (waiting, now >= since + self.park_limit()) {
                (true, _) => FetchPlan::LongPoll,
                (false, true) if unacked => FetchPlan::NoWait,
                (false, true) => FetchPlan::LongPoll,
                (false, false) => FetchPlan::None,
            };
        }
        if holding {
            FetchPlan::NoWait
        } else {
            FetchPlan::LongPoll
        }
    }

    /// The lock duration the broker reported (zero before it said).
    pub(super) fn lock_duration(&self) -> Duration {
        Duration::from_millis(
            self.shared.acquisition_lock_timeout_ms.load(std::sync::atomic::Ordering::Relaxed).max(0) as u64
        )
    }

    /// Takes `limit`, or a quarter of the lock when that is shorter (and known).
    fn within_lock(&self, limit: Duration) -> Duration {
        let lock = self.lock_duration();
        if lock.is_zero() {
            limit
        } else {
            limit.min(lock / 4)
        }
    }

    /// Whether a fetch without a waiting poll may go to broker `id`: the application took
    /// records lately (its last poll granted the refill and it has not gone idle), and the
    /// buffer plus that fetch stay within what it takes in the prefetch horizon.
    fn may_refill(&self, id: i32, now: Instant) -> bool {
        if !self.nodes.get(&id).is_some_and(|n| n.pace.refill) || self.app_idle(now) {
            return false;
        }
        let horizon = self.within_lock(PREFETCH_HORIZON).as_secs_f64();
        let room = self.drain.per_sec(now) * horizon;
        (self.buffered() + self.fetch_max_records(now)) as f64 <= room
    }

    /// Whether broker `id` owes a poll that found nothing buffered a fetch.
    pub(super) fn owes_fetch(&self, id: i32, now: Instant) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.pace.demand) && !self.app_idle(now)
    }

    /// Whether a poll waits for records. A poll that waits for renewals takes none (as in
    /// Java 4.4), so it neither calls for a fetch nor counts as the application taking records:
    /// what is buffered meanwhile goes back to the group once the application has taken
    /// nothing for a quarter of the lock, instead of ageing here.
    pub(super) fn waiting_for_records(&self) -> bool {
        self.waiter.as_ref().is_some_and(|w| !w.renewing)
    }

    /// Whether a poll wants records now: one waits, or one found nothing buffered lately.
    pub(super) fn wants_records(&self, now: Instant) -> bool {
        self.waiting_for_records() || self.nodes.keys().any(|&id| self.owes_fetch(id, now))
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
        for n in self.nodes.values_mut() {
            n.pace.refill = true;
            n.pace.demand |= empty;
        }
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

    /// Whether every record buffered from `id` has at least 3/4 of its lock left.
    fn buffer_fresh(&self, id: i32, now: Instant) -> bool {
        let lock = self.lock_duration();
        self.buffer
            .iter()
            .filter(|f| f.node == id)
            .filter_map(|f| f.records.front().and_then(|r| r.lock_deadline))
            .all(|d| d.saturating_duration_since(now) >= lock * 3 / 4)
    }

    /// Whether the session's queued acks have waited long enough to go on their own.
    /// record_limit sends them at once: they free the records the next fetch (from any
    /// broker) may acquire, and the mode promises to hold no more than one poll's worth.
    pub(super) fn acks_overdue(&self, id: i32, now: Instant) -> bool {
        if self.cfg.acquire_mode == AcquireMode::RecordLimit || self.eager_acks {
            return true;
        }
        self.nodes.get(&id).and_then(|n| n.pace.acks_since).is_some_and(|t| now >= t + ACK_LINGER)
    }

    /// How long a parked session stays quiet without a reason to fetch.
    pub(super) fn park_limit(&self) -> Duration {
        self.cfg.fetch_max_wait.max(Duration::from_millis(100))
    }

    /// The next moment pacing wants the driver awake: queued acks become overdue, or a
    /// parked session's quiet time ends.
    ///
    /// Only sessions free to send count: one with a request in flight waits for its answer,
    /// one backing off for its `retry_at` (both wake the core anyway), and a parked one with
    /// nothing to fetch has nothing to un-park. And only deadlines still ahead: one that has
    /// passed was seen by the `drive` that followed it (a parked session whose application
    /// takes nothing stays parked past its limit, say), so as a deadline it would only make
    /// the shell spin.
    pub(super) fn next_pace_deadline(&self, now: Instant) -> Option<Instant> {
        let free = || self.nodes.values().filter(|n| !n.session.in_flight() && n.retry_at.is_none());
        let acks = free().filter_map(|n| n.pace.acks_since).min().map(|t| t + ACK_LINGER);
        let parked = free()
            .filter(|n| !n.session.wanted().is_empty())
            .filter_map(|n| n.pace.parked)
            .min()
            .map(|t| t + self.park_limit());
        acks.into_iter().chain(parked).chain(self.idle_deadline()).filter(|&t| t > now).min()
    }

    /// MaxRecords of the next fetch. record_limit: exactly `max.poll.records` (a hard cap).
    /// batch_optimized: what the application takes in the prefetch horizon (or a quarter of
    /// the lock, if shorter), at least one poll's worth and at most [`FETCH_RECORDS_CAP`].
    /// Bigger fetches mean fewer round trips on the session's one-at-a-time connection (the
    /// broker's time per fetch hardly depends on its size), but records must not wait for an
    /// application that takes them slowly: other members could process them meanwhile.
    pub(super) fn fetch_max_records(&self, now: Instant) -> usize {
        let poll = self.poll_size;
        if self.cfg.acquire_mode == AcquireMode::RecordLimit {
            return poll;
        }
        let affordable = self.drain.per_sec(now) * self.within_lock(PREFETCH_HORIZON).as_secs_f64();
        (affordable as usize).clamp(poll, poll.max(FETCH_RECORDS_CAP))
    }

    /// The fetch plan for broker `id` under the configured acquire mode.
    pub(super) fn fetch_plan(&self, id: i32, record_limit_turn: Option<i32>, now: Instant) -> FetchPlan {
        match self.cfg.acquire_mode {
            AcquireMode::BatchOptimized => self.batch_plan(id, now),
            // record_limit fetches for a waiting poll only, so it may long-poll.
            AcquireMode::RecordLimit if record_limit_turn == Some(id) => FetchPlan::LongPoll,
            AcquireMode::RecordLimit => FetchPlan::None,
        }
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

    #[test]
    fn pace_parks_only_after_an_empty_no_wait_fetch_and_acks_unpark_it() {
        let now = Instant::now();
        let mut p = Pace { nowait_in_flight: false, ..Pace::default() };
        p.fetched(0, false, now);
        assert!(p.parked.is_none(), "an empty long poll does not park");
        p.nowait_in_flight = true;
        p.fetched(0, true, now);
        assert!(p.parked.is_none(), "an empty no-wait fetch that carried acks does not park");
        p.nowait_in_flight = true;
        p.fetched(0, false, now);
        assert_eq!(p.parked, Some(now));
        p.note_acks(true, now);
        assert!(p.parked.is_none() && p.acks_since == Some(now));
        p.nowait_in_flight = true;
        p.fetched(1200, false, now);
        assert_eq!((p.last_response, p.parked), (1200, None));
        p.delivered(10);
        p.settled(4);
        assert_eq!(p.outstanding, 6);
        p.settled(100);
        assert_eq!(p.outstanding, 0);
        p.reset();
        assert_eq!((p.last_response, p.acks_since), (1200, None));
    }
}
