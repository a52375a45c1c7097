//! The engine core's timers, by name: each a moment one part of the core owns. The shell
//! sleeps until the earliest ([`EngineCore::next_timeout`]) and then drives; nothing else
//! wakes the core but an input. (The engine used to wait over five deadlines with a
//! one-second guard on top.)

use std::time::{Duration, Instant};

use super::EngineCore;

/// A named moment of the engine's core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The ledger has something to decide: a retry due, a renewal due, a queued record's
    /// unstarted bound, a kept record's last moment (no RENEW), held acknowledgements to
    /// send (`whole_batches.rs`).
    Ledger,
    /// The poll under way is given up (asked again).
    PollExpires,
    /// A keep-alive poll is due (keeps `max.poll.interval.ms`, collects renewal outcomes).
    Keepalive,
    /// A failed poll may be tried again.
    PollRetry,
    /// The running handlers' time to stop is up: they are aborted.
    Stop,
}

/// How long the shell sleeps when no timer is armed: only a guard, as any input wakes the
/// core anyway.
const UNARMED: Duration = Duration::from_secs(3600);

impl EngineCore {
    /// Calls `f` with every armed timer and its moment (some possibly past).
    pub(crate) fn each_timer(&self, now: Instant, f: &mut dyn FnMut(Timer, Instant)) {
        let mut arm = |timer: Timer, at: Option<Instant>| {
            if let Some(at) = at {
                f(timer, at);
            }
        };
        // Once ending, the calls' ends and the poll's are inputs: the end needs no moment.
        if self.end.is_some() {
            return;
        }
        arm(Timer::Ledger, self.ledger.next_deadline(now));
        arm(Timer::PollExpires, self.poll.filter(|p| !p.expiring).map(|p| p.expires));
        let backing_off = self.poll_retry_at.is_some_and(|t| now < t);
        if self.poll.is_none() && self.fatal.is_none() {
            arm(Timer::PollRetry, self.poll_retry_at.filter(|_| backing_off));
        }
        if !backing_off {
            arm(Timer::Keepalive, self.keepalive_due());
        }
        arm(Timer::Stop, self.stopping.filter(|_| self.running_units() > 0));
    }

    /// The earliest armed timer and its moment (possibly past).
    pub(crate) fn next_timer(&self, now: Instant) -> Option<(Timer, Instant)> {
        let mut best: Option<(Timer, Instant)> = None;
        self.each_timer(now, &mut |timer, at| {
            if best.is_none_or(|(_, b)| at < b) {
                best = Some((timer, at));
            }
        });
        best
    }

    /// When `handle_timeout` must run if no input comes first: the earliest timer, not
    /// before `now` (None once closed: nothing more comes).
    pub(crate) fn next_timeout(&self, now: Instant) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        Some(self.next_timer(now).map_or(now + UNARMED, |(_, at)| at).max(now))
    }

    /// A timer's moment came: the poll under way is given up if its time is out (the shell
    /// answers `ExpirePoll` at once, and drives again), then the core decides as after any
    /// input.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if let Some(p) = self.poll.as_mut().filter(|p| !p.expiring && now >= p.expires) {
            p.expiring = true;
            self.events.push_back(super::Event::ExpirePoll);
        }
        self.drive(now);
    }
}
