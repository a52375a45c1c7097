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

use super::DriverCore;

/// A named deadline of the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The next ShareGroupHeartbeat is due (or its throttle or coordinator backoff ends).
    Heartbeat,
    /// A broker's session may send again: its backoff or throttle ends.
    SessionRetry(i32),
    /// Pacing (the session manager's): queued acknowledgements become overdue, or a parked
    /// session's quiet time ends.
    Pace,
    /// Buffered records go back to the group for want of a poll (`activity.rs`).
    Idle,
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
    /// Calls `f` with every armed timer and its moment, some possibly past (in a fixed order;
    /// `Pace` may come twice, for queued acks and for a parked session);
    /// [`DriverCore::next_timer`] picks the earliest.
    pub(crate) fn each_timer(&self, now: Instant, f: &mut dyn FnMut(Timer, Instant)) {
        let mut arm = |timer: Timer, at: Option<Instant>| {
            if let Some(at) = at {
                f(timer, at);
            }
        };
        // A failed consumer's group sends nothing until a close (see `halted`).
        let group = !self.halted();
        arm(Timer::Heartbeat, self.group.heartbeat_deadline(now).filter(|_| group));
        // Fetch pacing and retries mean nothing once closing (the session manager sends nothing
        // then; the close phases have their own deadline).
        if self.closing.is_none() {
            self.sessions.arm_timers(&mut arm);
            arm(Timer::Idle, self.idle_deadline());
        }
        arm(Timer::Metadata, self.group.metadata_deadline().filter(|_| group));
        arm(Timer::Pattern, self.group.pattern_deadline().filter(|_| group));
        arm(Timer::PollInterval, self.poll_interval_deadline());
        arm(Timer::Close, self.closing.as_ref().map(|c| c.deadline));
    }

    /// The earliest armed timer and its moment (possibly already past).
    pub(crate) fn next_timer(&self, now: Instant) -> Option<(Timer, Instant)> {
        let mut best: Option<(Timer, Instant)> = None;
        self.each_timer(now, &mut |timer, at| {
            // Idleness and pacing count only with a deadline still ahead: one that passed was
            // seen by the `drive` that followed it (a parked session whose application takes
            // nothing stays parked past its limit, say), so as a deadline it would only make
            // the shell spin.
            if matches!(timer, Timer::Idle | Timer::Pace) && at <= now {
                return;
            }
            if best.is_none_or(|(_, b)| at < b) {
                best = Some((timer, at));
            }
        });
        best
    }

    /// When `drive` must run again if no input comes first: the earliest timer, not before
    /// `now`.
    pub(crate) fn poll_timeout(&self, now: Instant) -> Instant {
        self.next_timer(now).map_or(now + UNARMED, |(_, at)| at).max(now)
    }
}
