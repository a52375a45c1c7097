//! The core's timers, by name: each one a deadline that one part of the core owns. The shell
//! sleeps until the earliest ([`DriverCore::poll_timeout`]); nothing else wakes the core
//! but an input. An idle member in a stable group therefore wakes for its heartbeat only
//! (there used to be a one-second tick on top, which hid deadlines nobody had armed).
//!
//! Every time-dependent decision in the core either has its moment here or only stops an
//! action as time passes (a buffer that ages past three quarters of its lock stops a
//! prefetch; a drain rate that decays shrinks the next fetch): those need no wake-up, as
//! the next input finds them so.

use std::time::{Duration, Instant};

use super::{Coordinator, DriverCore};

/// A named deadline of the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The next ShareGroupHeartbeat is due (or its throttle or coordinator backoff ends).
    Heartbeat,
    /// A broker's session may send again: its backoff or throttle ends.
    SessionRetry(i32),
    /// Pacing: queued acknowledgements become overdue, a parked session's quiet time ends, or
    /// buffered records go back to the group for want of a poll.
    Pace,
    /// A metadata refresh is due (or its backoff ends).
    Metadata,
    /// A pattern subscription lists the topics again.
    Pattern,
    /// No poll came within `max.poll.interval.ms`.
    PollInterval,
    /// The close gives up.
    Close,
}

/// How long the shell sleeps when no timer is armed (a consumer not subscribed, say): only a
/// guard, as any input wakes the core anyway.
const UNARMED: Duration = Duration::from_secs(3600);

impl DriverCore {
    /// The earliest armed timer and its moment (possibly already past).
    pub(crate) fn next_timer(&self, now: Instant) -> Option<(Timer, Instant)> {
        let mut best: Option<(Timer, Instant)> = None;
        let mut arm = |timer: Timer, at: Option<Instant>| {
            if let Some(at) = at {
                if best.is_none_or(|(_, b)| at < b) {
                    best = Some((timer, at));
                }
            }
        };
        arm(Timer::Heartbeat, self.heartbeat_deadline(now));
        // Fetch pacing and retries mean nothing once closing (`drive_nodes` sends nothing
        // then; the close phases have their own deadline).
        if self.closing.is_none() {
            for (&id, n) in self.nodes.iter().filter(|(_, n)| !n.session.in_flight()) {
                arm(Timer::SessionRetry(id), n.retry_at);
            }
            arm(Timer::Pace, self.next_pace_deadline(now));
        }
        // A refresh is only sent for a subscription (`drive_group`): with none (left, or
        // leaving), a wanted one waits for the next.
        arm(Timer::Metadata, self.metadata.wakeup().filter(|_| !self.membership.subscription().is_empty()));
        arm(Timer::Pattern, self.pattern.wakeup());
        arm(Timer::PollInterval, self.poll_interval_deadline());
        arm(Timer::Close, self.closing.as_ref().map(|c| c.deadline));
        best
    }

    /// When `drive` must run again if no input comes first: the earliest timer, not before
    /// `now`.
    pub(crate) fn poll_timeout(&self, now: Instant) -> Instant {
        self.next_timer(now).map_or(now + UNARMED, |(_, at)| at).max(now)
    }

    /// When the next heartbeat may go. One due while another is in flight, or while the
    /// coordinator is being looked up, waits for that answer (an input wakes the core): as
    /// a deadline it would only make the shell spin. A muted coordinator connection, or a
    /// lookup backing off, holds it back until that is over.
    fn heartbeat_deadline(&self, now: Instant) -> Option<Instant> {
        if self.heartbeat_in_flight || self.coordinator == Coordinator::Finding {
            return None;
        }
        let h = self.membership.poll_timeout()?;
        let mut due = self.throttles.heartbeat_until(now).map_or(h, |u| h.max(u));
        if let Coordinator::BackingOff(until) = self.coordinator {
            due = due.max(until);
        }
        Some(due)
    }
}
