//! What leaves the driver core as values: [`Output`]s, queued in the order decided and taken
//! with [`DriverCore::poll_event`] after each call. The core writes no state it shares with
//! the handle for these and sends on no channel; the shell (`shell.rs`) performs each one
//! ([`Output::perform`]), and the simulation takes them directly, so the same core runs
//! under both without a wrapper.
//!
//! Replies travel in the same queue as the completions for a reason: the handle runs the
//! acknowledgement commit callback when a poll, commit or close returns, so a completion
//! decided before a reply must be recorded before that reply is sent. One queue, performed
//! in order, keeps that.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::topic_pattern::PatternSubscription;
use super::{CommitResults, DriverCore, PollAnswer, Shared};
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
    /// A poll's answer. If the poll has gone meanwhile, its records come back to the core
    /// (`Command::Requeue`, as when the poll's future drops after the answer).
    Polled { reply: oneshot::Sender<Result<PollAnswer>>, answer: Result<PollAnswer> },
    /// A commit's per-partition results.
    Committed { reply: oneshot::Sender<CommitResults>, results: CommitResults },
    /// A close's outcome.
    Closed { reply: oneshot::Sender<Result<()>>, result: Result<()> },
}

impl Output {
    /// Does what the output says, on the handle's side of `shared`. Returns what a poll that
    /// is gone could not take, for the core to take back.
    pub(crate) fn perform(self, shared: &Shared) -> Option<PollAnswer> {
        match self {
            Output::SessionEpochs(open) => *shared.sessions.lock().unwrap_or_else(|p| p.into_inner()) = open,
            Output::AckCompleted { tp, offsets, result } => shared.callbacks.completed(tp, offsets, result),
            Output::PatternMatched { sub, topics } => sub.set_matched(topics),
            Output::Polled { reply, answer } => {
                if let Err(Ok(back)) = reply.send(answer) {
                    return Some(back);
                }
            }
            Output::Committed { reply, results } => {
                let _ = reply.send(results);
            }
            Output::Closed { reply, result } => {
                let _ = reply.send(result);
            }
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

    pub(super) fn reply_poll(&mut self, reply: oneshot::Sender<Result<PollAnswer>>, answer: Result<PollAnswer>) {
        self.events.push_back(Output::Polled { reply, answer });
    }

    pub(super) fn reply_commit(&mut self, reply: oneshot::Sender<CommitResults>, results: CommitResults) {
        self.events.push_back(Output::Committed { reply, results });
    }

    pub(super) fn reply_close(&mut self, reply: oneshot::Sender<Result<()>>, result: Result<()>) {
        self.events.push_back(Output::Closed { reply, result });
    }
}
