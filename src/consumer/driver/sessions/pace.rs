//! When to send what on each share session: the pacing policy. All of it is here, on the
//! session manager: only this module and its siblings under `sessions/` write [`Pace`]; the
//! rest of the core hands over what the application does (polls, deliveries, releases)
//! through the manager's `handle_*`/notes and a read-only [`Demand`] view each turn.
//!
//! Each session has at most one request in flight (a broker answers a connection's requests
//! one at a time), so every request must earn its round trip:
//! - Acks ride on the next ShareFetch. They go alone (ShareAcknowledge) only when someone
//!   waits for them (commit, close), when no fetch can carry them (partition no longer
//!   fetched here, renewals), or when they have waited [`ACK_LINGER`] because no fetch is due
//!   (record_limit: at once, the engine's outcomes after [`RECORD_LIMIT_ACK_LINGER`];
//!   batch_optimized: the engine's at once).
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
//! - Such a fetch that carries acks waits a little all the same ([`ACK_CARRYING_WAIT`]): the
//!   broker looks for records before the acks beside them have freed any (it applies them
//!   once their state is written), so an answer at once is often empty and the freed records
//!   show only to the next fetch, a round trip later. With a short wait the broker answers as
//!   soon as the acks free records. Measured with the sink (6M records, 3 partitions, Kafka
//!   4.4): 39% of its fetches came back empty without the wait, 10% with it; the public
//!   consumer on a 3-node cluster: 71% of its ack-carrying fetches, and 30% fewer fetches
//!   with the wait.
//! - Records are acquired only for an application that is taking them (see
//!   `activity.rs`): a fetch that may acquire records leaves while a poll waits, or as the one
//!   refill a poll allows per broker, and only while the buffer holds less than the
//!   application takes in [`PREFETCH_HORIZON`]. A member whose application stops polling
//!   acquires nothing more, and what it had buffered goes back to the group after a quarter
//!   of the lock (RELEASE, at once by ShareAcknowledge) instead of lapsing in the
//!   buffer: a lapsed lock costs the record a delivery attempt that no application made,
//!   and holds it from members that are polling. An application waiting inside a consumer
//!   call (`commit_sync`: `Activity::busy`) has not stopped: it polls once the call
//!   returns.

use std::time::{Duration, Instant};

use super::{Demand, SessionManager};
use crate::acquire_mode::AcquireMode;

/// How long queued acks may wait for a fetch to carry them before they go on their own.
const ACK_LINGER: Duration = Duration::from_millis(100);

/// record_limit: how long queued acks wait for the fetch of the next poll before they go
/// alone (ShareAcknowledge), holding the session from that fetch for a round trip. Sent at
/// once, the engine's went alone as often as it fetched (bench-process, issue 36: 632
/// ShareAcknowledge beside 829 fetches for 40k records; 19-33 with this linger).
const RECORD_LIMIT_ACK_LINGER: Duration = Duration::from_millis(2);

/// The `max_wait` of a fetch that would not wait (the member holds records from the broker)
/// but carries acks: long enough for the broker to apply them (a write to its share-state
/// log, about a millisecond), short enough that acks queued behind it hardly wait.
pub(in crate::consumer::driver) const ACK_CARRYING_WAIT: Duration = Duration::from_millis(5);

/// Per-session pacing state.
#[derive(Debug, Default)]
pub(super) struct Pace {
    /// Records handed to the application from this broker and not finally acknowledged.
    pub(super) outstanding: usize,
    /// When the oldest ack still queued on the session was queued.
    pub(super) acks_since: Option<Instant>,
    /// Records in the last response that had any: the prefetch target.
    pub(super) last_response: usize,
    /// Since when the session is parked: its last no-wait fetch came back empty.
    pub(super) parked: Option<Instant>,
    /// The fetch in flight was sent with max_wait 0.
    pub(super) nowait_in_flight: bool,
    /// The one fetch a poll allows without a poll waiting (the refill that serves the next
    /// poll): granted by each poll, taken by such a fetch, and withdrawn by a RELEASE (the
    /// released records must go to other members, not back to this idle one).
    pub(super) refill: bool,
    /// RELEASE acks are queued: they go at once by ShareAcknowledge unless a poll waits
    /// (then the fetch for it carries them).
    pub(super) releases_queued: bool,
    /// A poll found nothing buffered and this broker has not fetched since: it owes that
    /// poll a fetch even if the poll gave up meanwhile (a `poll(Duration::ZERO)` loop must
    /// get records too), as long as the application has not gone idle.
    pub(super) demand: bool,
}

impl Pace {
    /// Notes whether acks are queued: starts their linger, and un-parks the session (new
    /// acks may free records the broker holds back for us).
    pub(super) fn note_acks(&mut self, queued: bool, now: Instant) {
        if queued {
            self.parked = None;
            self.acks_since.get_or_insert(now);
        } else {
            self.acks_since = None;
        }
    }

    /// Records handed to the application.
    pub(super) fn delivered(&mut self, n: usize) {
        self.outstanding = self.outstanding.saturating_add(n);
    }

    /// Records finally acknowledged (or handed back).
    pub(super) fn settled(&mut self, n: usize) {
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
    pub(super) fn fetched(&mut self, records: usize, carried_acks: bool, now: Instant) {
        if records > 0 {
            self.last_response = records;
        } else if self.nowait_in_flight && !carried_acks {
            self.parked = Some(now);
        }
        self.nowait_in_flight = false;
    }

    /// The session was reset: the broker released everything it had given us.
    pub(super) fn reset(&mut self) {
        *self = Pace { last_response: self.last_response, refill: self.refill, demand: self.demand, ..Pace::default() };
    }
}

/// Most records one batch_optimized fetch asks for, however fast the application is.
const FETCH_RECORDS_CAP: usize = 10_000;

/// How far ahead of the application records are acquired: the buffer holds no more than it
/// takes in this time (or a quarter of the lock, if shorter), beyond what one waiting poll
/// asks for. At 650k records/s that is far above the fetch cap (the benchmarks lose nothing);
/// a slow application gets no prefetch at all, so a faster member of the group takes the
/// records it could not process in time.
const PREFETCH_HORIZON: Duration = Duration::from_millis(250);

/// What a session may send now, besides urgent acks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FetchPlan {
    /// No fetch now.
    None,
    /// A fetch that returns at once (max_wait 0).
    NoWait,
    /// A fetch that may wait `fetch.max.wait.ms` for records.
    LongPoll,
}

/// Takes `limit`, or a quarter of the lock when that is shorter (and known).
fn within_lock(limit: Duration, lock: Duration) -> Duration {
    if lock.is_zero() {
        limit
    } else {
        limit.min(lock / 4)
    }
}

impl SessionManager {
    /// Whether the member holds records from broker `id`: buffered, delivered and not yet
    /// acknowledged, or acknowledged but not sent.
    fn holding(&self, id: i32, buffered: usize) -> bool {
        buffered > 0 || self.nodes.get(&id).is_some_and(|n| n.pace.outstanding > 0 || n.session.has_acks())
    }

    /// batch_optimized: whether to fetch from broker `id` now, and how.
    fn batch_plan(&self, id: i32, now: Instant, d: &Demand) -> FetchPlan {
        let Some(n) = self.nodes.get(&id) else {
            return FetchPlan::None;
        };
        if !d.can_fetch {
            return FetchPlan::None;
        }
        // Every fetch may acquire records: only for a poll that waits (or gave up waiting),
        // or as the refill of an application that is taking records and has room ahead.
        let owed = d.waiting || self.owes_fetch(id, d);
        if !owed && !self.may_refill(id, d) {
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
        let buffered = d.buffered_from(id);
        let target = d.poll_size.max(n.pace.last_response.saturating_mul(2));
        if buffered >= target {
            return FetchPlan::None;
        }
        // Beyond one poll's worth, prefetch only while the buffer is fresh: records that sit
        // past their lock would be dropped and redelivered with a higher delivery count.
        if buffered >= d.poll_size && !d.buffer_fresh(id, now) {
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
            let waiting = owed && d.buffer.is_empty() && !unacked;
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

    /// Whether a fetch without a waiting poll may go to broker `id`: the application took
    /// records lately (its last poll granted the refill and it has not gone idle), and the
    /// buffer plus that fetch stay within what it takes in the prefetch horizon.
    fn may_refill(&self, id: i32, d: &Demand) -> bool {
        if !self.nodes.get(&id).is_some_and(|n| n.pace.refill) || d.app_idle {
            return false;
        }
        let horizon = within_lock(PREFETCH_HORIZON, d.lock).as_secs_f64();
        let room = d.drain_per_sec * horizon;
        (d.buffered() + self.fetch_max_records(d)) as f64 <= room
    }

    /// Whether broker `id` owes a poll that found nothing buffered a fetch.
    fn owes_fetch(&self, id: i32, d: &Demand) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.pace.demand) && !d.app_idle
    }

    /// Whether a poll wants records now: one waits, or one found nothing buffered lately.
    pub(super) fn wants_records(&self, d: &Demand) -> bool {
        d.waiting || self.nodes.keys().any(|&id| self.owes_fetch(id, d))
    }

    /// Whether the session's queued acks have waited long enough to go on their own.
    /// record_limit sends the public poll's at once: they free the records the next fetch
    /// (from any broker) may acquire, and the mode promises to hold no more than one poll's
    /// worth. The processing engine's outcomes go at once under batch_optimized (see
    /// `the_engines_outcomes_do_not_linger_and_the_public_acks_still_do`); under
    /// record_limit they wait [`RECORD_LIMIT_ACK_LINGER`], about as long as the engine's
    /// next poll (for its freed slots) takes to come, and its fetch carries them.
    pub(in crate::consumer::driver) fn acks_overdue(&self, id: i32, now: Instant, d: &Demand) -> bool {
        // At once: the public poll's under record_limit, the engine's under batch_optimized.
        let record_limit = self.settings.acquire_mode == AcquireMode::RecordLimit;
        if record_limit != d.eager_acks {
            return true;
        }
        self.nodes.get(&id).and_then(|n| n.pace.acks_since).is_some_and(|t| now >= t + self.ack_linger())
    }

    /// How long queued acks wait for a fetch to carry them.
    fn ack_linger(&self) -> Duration {
        if self.settings.acquire_mode == AcquireMode::RecordLimit {
            RECORD_LIMIT_ACK_LINGER
        } else {
            ACK_LINGER
        }
    }

    /// How long a parked session stays quiet without a reason to fetch.
    pub(in crate::consumer::driver) fn park_limit(&self) -> Duration {
        self.settings.fetch_max_wait.max(Duration::from_millis(100))
    }

    /// The moments pacing wants the driver awake: the earliest when queued acks become
    /// overdue, and the earliest when a parked session's quiet time ends (either possibly
    /// past: the core's `next_timer` waits only for those still ahead).
    ///
    /// Only sessions free to send count: one with a request in flight waits for its answer,
    /// one backing off for its `retry_at` (both wake the core anyway), and a parked one with
    /// nothing to fetch has nothing to un-park.
    pub(super) fn pace_deadlines(&self) -> (Option<Instant>, Option<Instant>) {
        let free = || self.nodes.values().filter(|n| !n.session.in_flight() && n.retry_at.is_none());
        let acks = free().filter_map(|n| n.pace.acks_since).min().map(|t| t + self.ack_linger());
        let parked = free()
            .filter(|n| !n.session.wanted().is_empty())
            .filter_map(|n| n.pace.parked)
            .min()
            .map(|t| t + self.park_limit());
        (acks, parked)
    }

    /// MaxRecords of the next fetch. record_limit: exactly the last poll's size (the public
    /// poll's `max.poll.records`, a hard cap; the processing engine's room), and so for a
    /// batch_optimized fetch the engine sized (`sized_to_poll`). Otherwise batch_optimized: what the application takes in the prefetch horizon (or a quarter of
    /// the lock, if shorter), at least one poll's worth and at most [`FETCH_RECORDS_CAP`].
    /// Bigger fetches mean fewer round trips on the session's one-at-a-time connection (the
    /// broker's time per fetch hardly depends on its size), but records must not wait for an
    /// application that takes them slowly: other members could process them meanwhile.
    pub(super) fn fetch_max_records(&self, d: &Demand) -> usize {
        let poll = d.poll_size;
        if self.fetches_sized_to_poll() {
            return poll;
        }
        let affordable = d.drain_per_sec * within_lock(PREFETCH_HORIZON, d.lock).as_secs_f64();
        (affordable as usize).clamp(poll, poll.max(FETCH_RECORDS_CAP))
    }

    /// The fetch plan for broker `id` under the configured acquire mode.
    pub(super) fn fetch_plan(&self, id: i32, record_limit_turn: Option<i32>, now: Instant, d: &Demand) -> FetchPlan {
        match self.settings.acquire_mode {
            AcquireMode::BatchOptimized => self.batch_plan(id, now, d),
            // record_limit fetches for a waiting poll only, so it may long-poll, unless the
            // member holds records from this broker (the processing engine's running
            // handlers): the broker may have nothing to give until their acks free its
            // window, and a parked long poll would hold those acks back on the session for
            // `fetch.max.wait.ms` (bench-process: fetches of 505 ms beside a mean of 2.5).
            AcquireMode::RecordLimit if record_limit_turn == Some(id) => {
                if self.holding(id, d.buffered_from(id)) {
                    FetchPlan::NoWait
                } else {
                    FetchPlan::LongPoll
                }
            }
            AcquireMode::RecordLimit => FetchPlan::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn an_empty_fetch_that_carried_acks_does_not_park() {
        // The broker answers a fetch's records without waiting for the acks beside it: the
        // window they free shows to the next fetch, which must not wait for more acks.
        let mut p = Pace { nowait_in_flight: true, ..Default::default() };
        let now = Instant::now();
        p.fetched(0, true, now);
        assert!(p.parked.is_none());
    }
}
