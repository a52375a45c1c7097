//! What leaves the driver core as values: [`Output`]s, queued in the order decided and taken
//! with [`DriverCore::poll_event`] after each call. The core writes no state it shares with
//! the handle for these; the shell (`shell.rs`) performs each one, and the simulation takes
//! them directly, so the same core runs under both without a wrapper.

use std::collections::BTreeMap;

use super::DriverCore;

/// One result of the core for the world outside it.
#[derive(Debug)]
pub(crate) enum Output {
    /// The open share sessions changed (one opened, closed, or moved its epoch): broker node
    /// id -> the epoch its next request carries. Emitted only on a change, so a turn that
    /// changed none costs no allocation and no lock.
    SessionEpochs(BTreeMap<i32, i32>),
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
}
