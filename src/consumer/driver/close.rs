//! Closing: the final acknowledgements (epoch -1, which end each share session and release
//! what it still holds), then leaving the group, all within the close's deadline. Phases:
//! Draining (in-flight requests finish) -> SessionsClosing (final acks answered) -> Leaving.

use std::time::{Duration, Instant};

use tracing::warn;

use super::{AckEntry, DriverCore, ReplyId};
use crate::error::Error;

pub(super) enum ClosePhase {
    /// Waiting for in-flight requests to finish before sending the final acks.
    Draining,
    /// Final (epoch -1) acknowledgements sent; waiting for them.
    SessionsClosing,
    /// Leave heartbeat sent.
    Leaving,
}

pub(super) struct Closing {
    pub(super) phase: ClosePhase,
    pub(super) deadline: Instant,
    /// The close command's id, if it wants its outcome.
    pub(super) reply: Option<ReplyId>,
}

impl DriverCore {
    pub(super) fn start_close(&mut self, acks: Vec<AckEntry>, deadline: Instant, reply: Option<ReplyId>, now: Instant) {
        if self.closing.is_some() {
            if let Some(r) = reply {
                self.reply_close(r, Ok(()));
            }
            return;
        }
        let failed = self.route_acks(acks, now);
        self.report_local_failures(failed, None);
        // Whatever was fetched but never handed out goes back to the broker now.
        self.shared.metrics.record_released_unseen(self.buffered() as u64);
        self.release_buffer(|_| true);
        if let Some(w) = self.waiter.take() {
            self.reply_poll(w.id, Err(Error::Closed));
        }
        self.group.handle_close();
        self.closing = Some(Closing { phase: ClosePhase::Draining, deadline, reply });
    }

    pub(super) fn drive_close(&mut self, now: Instant) {
        let Some(c) = &mut self.closing else { return };
        if now >= c.deadline {
            let r = c.reply.take();
            let unfinished = self.close_unfinished();
            warn!(group = self.cfg.group_id, unfinished, "close timed out");
            if let Some(c) = &mut self.closing {
                c.phase = ClosePhase::Leaving;
            }
            self.group.stop(); // stop heartbeating
            if let Some(r) = r {
                let e = Error::Timeout { what: format!("close ({unfinished})"), after: Duration::ZERO };
                self.reply_close(r, Err(e));
            }
            return;
        }
        // A phase whose condition already holds gives way to the next in the same call: no
        // input may come to drive the core again (a consumer with no share session sends
        // nothing and waits for nothing), and no timer but the close's deadline is armed.
        loop {
            let before = self.closing.as_ref().map(|c| std::mem::discriminant(&c.phase));
            self.advance_close(now);
            if self.closing.as_ref().map(|c| std::mem::discriminant(&c.phase)) == before {
                return;
            }
        }
    }

    /// One step of the close: the next phase once the current one's condition holds.
    fn advance_close(&mut self, now: Instant) {
        let Some(c) = &self.closing else { return };
        match c.phase {
            ClosePhase::Draining => {
                if !self.sessions.any_in_flight() {
                    self.sessions.close_all(self.group.member_id(), &mut self.outbox);
                    if let Some(c) = &mut self.closing {
                        c.phase = ClosePhase::SessionsClosing;
                    }
                }
            }
            ClosePhase::SessionsClosing => {
                if !self.sessions.any_in_flight() {
                    self.group.leave(now);
                    if let Some(c) = &mut self.closing {
                        c.phase = ClosePhase::Leaving;
                    }
                }
            }
            ClosePhase::Leaving => {}
        }
    }

    /// What a close that ran out of time leaves undone, in words for its error.
    pub(super) fn close_unfinished(&self) -> String {
        let leave = "the group was not left (the broker drops the member after the group's session timeout)";
        match self.closing.as_ref().map(|c| &c.phase) {
            Some(ClosePhase::Draining) => format!(
                "requests to brokers [{}] did not finish, so the final acknowledgements were not sent: the brokers release the unacknowledged records when the connections drop, and acknowledgements not sent are lost; {leave}",
                self.sessions.in_flight_list()
            ),
            Some(ClosePhase::SessionsClosing) => format!(
                "brokers [{}] did not answer the final acknowledgements, so their outcome is unknown (records not acknowledged are released when the sessions end); {leave}",
                self.sessions.in_flight_list()
            ),
            _ => format!("the acknowledgements were sent, but {leave}"),
        }
    }

    /// Whether close has finished: the shell then stops.
    pub(crate) fn is_finished(&mut self, now: Instant) -> bool {
        let Some(c) = &mut self.closing else {
            return false;
        };
        if !matches!(c.phase, ClosePhase::Leaving) {
            return false;
        }
        let unanswered = self.group.leave_unanswered();
        if unanswered && now < c.deadline {
            return false;
        }
        if let Some(r) = c.reply.take() {
            let outcome = if unanswered {
                Err(Error::Timeout { what: format!("close ({})", self.close_unfinished()), after: Duration::ZERO })
            } else {
                Ok(())
            };
            self.reply_close(r, outcome);
        }
        // Everyone still waiting on a commit hears that the consumer closed.
        for w in std::mem::take(&mut self.commits) {
            if let Some(r) = w.id {
                self.reply_commit(r, w.results);
            }
        }
        true
    }
}
