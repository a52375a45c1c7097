//! What leaves the driver core as values: [`Output`]s, queued in the order decided and taken
//! with [`DriverCore::poll_event`] after each call. The core writes no state it shares with
//! the handle for these and sends on no channel: a reply names the command it answers by
//! its [`ReplyId`], and whoever holds the way back (the shell its oneshot senders,
//! `from_handle.rs`; the simulation its application) implements [`Replies`]. The shell
//! performs each output ([`Output::perform`]), and the simulation takes them directly, so
//! the same core runs under both without a wrapper.
//!
//! Replies travel in the same queue as the completions for a reason: the handle runs the
//! acknowledgement commit callback when a poll, commit or close returns, so a completion
//! decided before a reply must be recorded before that reply is sent. One queue, performed
//! in order, keeps that.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::topic_pattern::PatternSubscription;
use super::{CommitResults, DriverCore, PollAnswer, ReplyId, Shared};
use crate::error::Result;
use crate::topic_partition::TopicPartition;

/// One result of the core for the world outside it.
#[derive(Debug)]
pub(crate) enum Output {
    /// The open share sessions changed (one opened, closed, or moved its epoch): broker node
    /// id -> the epoch its next request carries. Emitted only on a change, so a turn that
    /// changed none costs no allocation and no lock.
    SessionEpochs(BTreeMap<i32, i32>),
    /// One partition's acknowledgement round completed: for the acknowledgement commit
    /// callback. Emitted whether or not one is set (the shell's `Callbacks` drops it then):
    /// the core does not read the handle's callback state.
    AckCompleted { tp: TopicPartition, offsets: Vec<i64>, result: Result<()> },
    /// A listing of all topics matched these for a pattern subscription (what the handle's
    /// `subscription()` shows).
    PatternMatched { sub: Arc<PatternSubscription>, topics: BTreeSet<String> },
    /// The answer of the poll `id`. If the poll has gone meanwhile, its records come back to
    /// the core (`Command::Requeue`, as when the poll's future drops after the answer).
    Polled { id: ReplyId, answer: Result<PollAnswer> },
    /// The per-partition results of the commit `id`.
    Committed { id: ReplyId, results: CommitResults },
    /// The outcome of the close `id`.
    Closed { id: ReplyId, result: Result<()> },
}

/// Where replies go, by the id of the command that asked: the shell's oneshot senders, or
/// the simulated application. The core never sees how.
pub(crate) trait Replies {
    /// Hands the poll `id` its answer. Returns the answer if that poll is gone (its records
    /// go back to the core).
    fn polled(&mut self, id: ReplyId, answer: Result<PollAnswer>) -> Option<PollAnswer>;
    /// Hands the commit `id` its results (dropped if nobody waits any more).
    fn committed(&mut self, id: ReplyId, results: CommitResults);
    /// Hands the close `id` its outcome (dropped if nobody waits any more).
    fn closed(&mut self, id: ReplyId, result: Result<()>);
}

impl Output {
    /// Does what the output says, on the handle's side of `shared`, replies through
    /// `replies`. Returns what a poll that is gone could not take, for the core to take back.
    pub(crate) fn perform(self, shared: &Shared, replies: &mut impl Replies) -> Option<PollAnswer> {
        match self {
            Output::SessionEpochs(open) => *shared.sessions.lock().unwrap_or_else(|p| p.into_inner()) = open,
            Output::AckCompleted { tp, offsets, result } => shared.callbacks.completed(tp, offsets, result),
            Output::PatternMatched { sub, topics } => sub.set_matched(topics),
            Output::Polled { id, answer } => return replies.polled(id, answer),
            Output::Committed { id, results } => replies.committed(id, results),
            Output::Closed { id, result } => replies.closed(id, result),
        }
        None
    }
}

impl DriverCore {
    /// The next output, in the order decided.
    pub(crate) fn poll_event(&mut self) -> Option<Output> {
        self.events.pop_front()
    }

    /// Queues the open sessions' epochs if they differ from those told last. Called at the
    /// end of each `drive`: the shell drives after every input, so no change goes untold.
    pub(super) fn tell_session_epochs(&mut self) {
        if !self.sessions.epochs_differ(&self.epochs_told) {
            return;
        }
        self.epochs_told = self.sessions.open_epochs();
        self.events.push_back(Output::SessionEpochs(self.epochs_told.clone()));
    }

    pub(super) fn reply_poll(&mut self, id: ReplyId, answer: Result<PollAnswer>) {
        self.events.push_back(Output::Polled { id, answer });
    }

    pub(super) fn reply_commit(&mut self, id: ReplyId, results: CommitResults) {
        self.events.push_back(Output::Committed { id, results });
    }

    pub(super) fn reply_close(&mut self, id: ReplyId, result: Result<()>) {
        self.events.push_back(Output::Closed { id, result });
    }
}
