//! What the public handle sends the driver task, and the way each answer goes back. The
//! handle waits on oneshot channels; the core knows none: the shell (`shell.rs`) turns each
//! [`FromHandle`] into a [`Command`] carrying a [`ReplyId`], keeps the sender under that id
//! ([`Waiting`]), and sends on it when the core's reply for that id comes out.

use std::collections::HashMap;
use std::time::Instant;

use tokio::sync::oneshot;

use super::{AckEntry, Command, CommitResults, PollAnswer, Replies, ReplyId};
use crate::error::Result;

/// A message from the public handle to the driver task.
pub(crate) enum FromHandle {
    /// A command that wants no answer, handed to the core as it is.
    Tell(Command),
    /// A poll (see `Command::Poll`), answered on `reply`. Dropping the receiver (closing it)
    /// abandons the poll: what the driver sends after that comes back to the core.
    Poll { max: usize, wait: bool, renewing: bool, acks: Vec<AckEntry>, reply: oneshot::Sender<Result<PollAnswer>> },
    /// A commit (see `Command::Commit`), answered on `reply`.
    Commit { acks: Vec<AckEntry>, reply: oneshot::Sender<CommitResults> },
    /// A close (see `Command::Close`), answered on `reply`.
    Close { acks: Vec<AckEntry>, deadline: Instant, reply: oneshot::Sender<Result<()>> },
}

impl From<Command> for FromHandle {
    fn from(cmd: Command) -> FromHandle {
        FromHandle::Tell(cmd)
    }
}

/// The senders of the commands the core has not answered yet, by the id it was given.
#[derive(Default)]
pub(crate) struct Waiting {
    next: u64,
    polls: HashMap<ReplyId, oneshot::Sender<Result<PollAnswer>>>,
    commits: HashMap<ReplyId, oneshot::Sender<CommitResults>>,
    closes: HashMap<ReplyId, oneshot::Sender<Result<()>>>,
}

impl Waiting {
    /// The core's command for `msg`, its sender kept under a new id.
    pub(crate) fn command(&mut self, msg: FromHandle) -> Command {
        match msg {
            FromHandle::Tell(cmd) => cmd,
            FromHandle::Poll { max, wait, renewing, acks, reply } => {
                let id = self.next_id();
                self.polls.insert(id, reply);
                Command::Poll { max, wait, renewing, acks, id }
            }
            FromHandle::Commit { acks, reply } => {
                let id = self.next_id();
                self.commits.insert(id, reply);
                Command::Commit { acks, id: Some(id) }
            }
            FromHandle::Close { acks, deadline, reply } => {
                let id = self.next_id();
                self.closes.insert(id, reply);
                Command::Close { acks, deadline, id: Some(id) }
            }
        }
    }

    fn next_id(&mut self) -> ReplyId {
        self.next += 1;
        ReplyId(self.next)
    }

    /// Forgets the polls whose receiver is closed (they timed out, were woken or dropped)
    /// and calls `gone` with each one's id, for the core to hear of it.
    pub(crate) fn abandoned_polls(&mut self, mut gone: impl FnMut(ReplyId)) {
        self.polls.retain(|id, reply| {
            let open = !reply.is_closed();
            if !open {
                gone(*id);
            }
            open
        });
    }
}

impl Replies for Waiting {
    fn polled(&mut self, id: ReplyId, answer: Result<PollAnswer>) -> Option<PollAnswer> {
        // A poll forgotten as abandoned fares as one whose receiver closed since.
        let Some(reply) = self.polls.remove(&id) else { return answer.ok() };
        match reply.send(answer) {
            Ok(()) => None,
            Err(back) => back.ok(),
        }
    }

    fn committed(&mut self, id: ReplyId, results: CommitResults) {
        if let Some(reply) = self.commits.remove(&id) {
            let _ = reply.send(results);
        }
    }

    fn closed(&mut self, id: ReplyId, result: Result<()>) {
        if let Some(reply) = self.closes.remove(&id) {
            let _ = reply.send(result);
        }
    }
}
