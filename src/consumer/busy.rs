//! Telling the driver that the application waits inside one of our calls.
//!
//! The driver gives buffered records back to the group when the application stops taking
//! them (no poll for a quarter of the lock: `driver/pace.rs`). An application blocked in
//! `commit_sync` while the broker holds the answer (seconds, in a leader failover) has not
//! stopped: released then, its prefetched records would come back with a burnt delivery
//! attempt, and the RELEASEs would queue behind the same stuck broker. The driver core reads
//! no clock or flag of the handle, so the handle says so with `Command::Busy`.

use tokio::sync::mpsc;

use super::driver::Command;

/// While alive, the application counts as inside a consumer call that waits: the driver does
/// not release buffered records for want of a poll. Sends `Command::Busy(true)` when made and
/// `Command::Busy(false)` when dropped, so a cancelled call (its future dropped) leaves too.
///
/// It owns a clone of the command channel, so it is `'static` and may be held across tasks
/// (a processing engine that waits on the consumer's behalf). A driver already gone is no
/// error: there is nothing left to tell.
#[must_use = "the application counts as busy only while the guard lives"]
pub(crate) struct BusyGuard {
    tx: mpsc::UnboundedSender<Command>,
}

impl BusyGuard {
    pub(crate) fn enter(tx: mpsc::UnboundedSender<Command>) -> BusyGuard {
        let _ = tx.send(Command::Busy(true));
        BusyGuard { tx }
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Busy(false));
    }
}

impl std::fmt::Debug for BusyGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BusyGuard").finish_non_exhaustive()
    }
}
