//! `max.poll.interval.ms`, as Java enforces it for share consumers.
//!
//! An application that has not called poll for `max.poll.interval.ms` (default 5 minutes) is
//! taken to be stuck: the member leaves the group, so the group's partitions go to members
//! that do poll, and the records it holds go back to the group. Java's member only leaves
//! (its records wait for their locks to run out); here each share session is also closed
//! (epoch -1), which makes the broker release the records at once instead of a lock later.
//! The next poll rejoins with the same member id; acknowledgements of the records held from
//! before fail (their session is gone), as after any session loss.

use std::time::Instant;

use tracing::warn;

use super::{session_gone, DriverCore};

impl DriverCore {
    /// When the application must poll next before the member leaves (None: no poll yet, a
    /// poll waits, or the member is not in the group).
    pub(super) fn poll_interval_deadline(&self) -> Option<Instant> {
        if self.closing.is_some() || self.group.is_stale() || self.waiter.is_some() || !self.group.is_active() {
            return None;
        }
        self.activity.last_poll_call.map(|t| t + self.cfg.max_poll_interval)
    }

    /// Leaves the group when the application has not polled within `max.poll.interval.ms`.
    pub(super) fn enforce_poll_interval(&mut self, now: Instant) {
        if self.poll_interval_deadline().is_none_or(|d| now < d) {
            return;
        }
        warn!(
            group = self.cfg.group_id,
            max_poll_interval_ms = self.cfg.max_poll_interval.as_millis() as u64,
            "no poll within max.poll.interval.ms: leaving the group and releasing this member's records; the next poll rejoins. Poll more often, process less per poll (max.poll.records), or raise max.poll.interval.ms"
        );
        self.group.leave_stale(now);
        self.release_buffer(|_| true);
        self.reconcile_assignment(now);
        for id in self.sessions.ids() {
            // Closing the session releases everything it acquired. One in flight now (rare:
            // nothing fetches for an application that stopped polling) is dropped by the
            // reset below; its connection's session then ends with the broker's own timeout.
            self.sessions.close_session(id, self.group.member_id(), &mut self.outbox);
            // A new generation: acks of the records held from before fail at once.
            self.reset_session(id, session_gone(id));
        }
    }

    /// The first poll (or subscribe) after leaving for a missed poll interval rejoins.
    pub(super) fn rejoin_if_stale(&mut self, now: Instant) {
        if self.group.rejoin_if_stale(now) {
            self.reconcile_assignment(now);
        }
    }
}
