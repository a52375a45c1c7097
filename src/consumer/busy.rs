//! Telling the driver that the application waits inside one of our calls.
//!
//! The driver gives buffered records back to the group when the application stops taking
//! them (no poll for a quarter of the lock: `driver/activity.rs`). An application blocked in
//! `commit_sync` while the broker holds the answer (seconds, in a leader failover) has not
//! stopped: released then, its prefetched records would come back with a burnt delivery
//! attempt, and the RELEASEs would queue behind the same stuck broker. The driver core reads
//! no clock or flag of the handle, so the handle says so with `Command::Busy`.

use tokio::sync::mpsc;

use super::driver::{Command, FromHandle};

/// While alive, the application counts as inside a consumer call that waits: the driver does
/// not release buffered records for want of a poll. Sends `Command::Busy(true)` when made and
/// `Command::Busy(false)` when dropped, so a cancelled call (its future dropped) leaves too.
///
/// It owns a clone of the command channel, so it is `'static` and may be held across tasks
/// (a processing engine that waits on the consumer's behalf). A driver already gone is no
/// error: there is nothing left to tell.
#[must_use = "the application counts as busy only while the guard lives"]
pub(crate) struct BusyGuard {
    tx: mpsc::UnboundedSender<FromHandle>,
}

impl BusyGuard {
    pub(crate) fn enter(tx: mpsc::UnboundedSender<FromHandle>) -> BusyGuard {
        let _ = tx.send(Command::Busy(true).into());
        BusyGuard { tx }
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Busy(false).into());
    }
}

impl std::fmt::Debug for BusyGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BusyGuard").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::super::driver::{CommitResults, Shared};
    use super::super::{ShareConsumer, ShareConsumerConfig};
    use super::*;

    fn consumer() -> (ShareConsumer, mpsc::UnboundedReceiver<FromHandle>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let cfg = ShareConsumerConfig::new("127.0.0.1:9092", "g");
        (ShareConsumer::new(tx, Arc::new(Shared::new(true, None)), cfg), rx)
    }

    /// The messages sent so far, by name (`FromHandle` has no `Debug`: it carries senders).
    fn sent(rx: &mut mpsc::UnboundedReceiver<FromHandle>) -> Vec<&'static str> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|c| match c {
                FromHandle::Commit { .. } => "commit",
                FromHandle::Tell(Command::Busy(true)) => "busy",
                FromHandle::Tell(Command::Busy(false)) => "back",
                _ => "other",
            })
            .collect()
    }

    // Paused time: the 10 ms timeout below fires once every task waits, not after real time.
    #[tokio::test(start_paused = true)]
    async fn commit_sync_is_busy_while_it_waits_and_leaves_however_it_ends() {
        let (c, mut rx) = consumer();
        // Answered: busy from after the commit was handed over until the answer came.
        let commit = c.commit_sync(Duration::from_secs(60));
        let answer = async {
            tokio::task::yield_now().await;
            let Some(FromHandle::Commit { reply, .. }) = rx.recv().await else {
                panic!("the commit reaches the driver first");
            };
            assert_eq!(sent(&mut rx), ["busy"], "busy while waiting for the answer");
            let _ = reply.send(CommitResults::default());
        };
        let (results, ()) = tokio::join!(commit, answer);
        assert!(results.unwrap().is_ok());
        assert_eq!(sent(&mut rx), ["back"]);
        // Never answered, and the future dropped (a timeout, a select! arm that lost): it
        // leaves too, or the driver would never release for an application that stopped.
        let dropped = tokio::time::timeout(Duration::from_millis(10), c.commit_sync(Duration::from_secs(60))).await;
        assert!(dropped.is_err());
        assert_eq!(sent(&mut rx), ["commit", "busy", "back"]);
    }

    #[tokio::test]
    async fn a_static_guard_may_be_held_by_another_task() {
        let (c, mut rx) = consumer();
        let guard = c.busy_guard();
        assert_eq!(sent(&mut rx), ["busy"]);
        drop(c);
        tokio::spawn(async move { drop(guard) }).await.unwrap();
        // The consumer's drop sent its close; the guard's leave comes after it, harmlessly.
        assert_eq!(sent(&mut rx), ["other", "back"]);
    }
}
