//! The consumer's driver, reached below the public poll loop: what the processing engine
//! (`crate::processor`) is built on.
//!
//! The public `poll` keeps Java's rules (explicit mode: every record of a poll acknowledged
//! before the next; a RENEWed record comes back from the next poll). The engine keeps its own
//! bookkeeping of what it holds instead of [`Held`](super::held::Held): it asks the driver for
//! exactly as many records as it has room for, sends each record's outcome as soon as it is
//! known, renews the locks of the records still running, and closes with its own final
//! acknowledgements. These calls are the whole of that contract; nothing else of the handle
//! is bypassed (subscription, pause, callbacks and metrics are the consumer's own).

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::oneshot;

use super::driver::{AckEntry, Command, FromHandle, PollAnswer};
use super::ShareConsumer;
use crate::acquire_mode::AcquireMode;
use crate::error::Result;

impl ShareConsumer {
    /// Asks the driver for up to `max` records (`wait`: answered once some are buffered;
    /// otherwise at once with what is there), sending `acks` first. `renewing`: the caller
    /// only wants the outcomes of its renewals (no record is taken, and the poll does not
    /// count as the application taking records). Sends a pending subscription first, as a
    /// public poll does.
    pub(crate) fn raw_poll(
        &self,
        max: usize,
        wait: bool,
        renewing: bool,
        acks: Vec<AckEntry>,
    ) -> Result<oneshot::Receiver<Result<PollAnswer>>> {
        self.ready_to_poll(&mut self.lock())?;
        let (reply, rx) = oneshot::channel();
        self.send(FromHandle::Poll { max, wait, renewing, acks, reply })?;
        Ok(rx)
    }

    /// Hands outcomes to the driver: they ride on a fetch leaving now, or go at once on
    /// their own (`Command::Outcomes`). Their results reach the commit callback.
    pub(crate) fn raw_acks(&self, acks: Vec<AckEntry>) -> Result<()> {
        self.send(Command::Outcomes(acks))
    }

    /// Closes the consumer with `acks` as its final acknowledgements (everything else it was
    /// given is released by the close), within `timeout`.
    pub(crate) async fn raw_close(&self, acks: Vec<AckEntry>, timeout: Duration) -> Result<()> {
        {
            let _local = self.lock();
            if self.is_closed() {
                return Ok(());
            }
            self.closed.store(true, Ordering::Release);
        }
        self.send_close(acks, timeout).await
    }

    /// Sets how the driver acquires for the engine (`share.acquire.mode` as the engine
    /// chooses it; the consumer's configured mode stays the fallback where a broker cannot).
    /// `sized`: batch_optimized fetches ask for the engine's room, not for a prefetch.
    pub(crate) fn raw_acquire_mode(&self, mode: AcquireMode, sized: bool) -> Result<()> {
        self.send(Command::AcquireMode { mode, sized })
    }

    /// Whether the cluster takes record_limit acquisition (ShareFetch v2, Kafka 4.2+).
    pub(crate) fn record_limit_supported(&self) -> bool {
        self.shared.record_limit_supported.load(Ordering::Relaxed)
    }

    /// Records the consumer gave back unseen (buffered, never handed over): the engine's
    /// report counts them among its releases.
    pub(crate) fn released_unseen(&self) -> u64 {
        self.shared.metrics.released_unseen()
    }

    /// Whether the cluster takes RENEW (ShareAcknowledge v2, Kafka 4.2+).
    pub(crate) fn renew_supported(&self) -> bool {
        self.shared.renew_supported.load(Ordering::Relaxed)
    }

    /// Tells the acknowledgement commit callback of the completions so far, on this task.
    pub(crate) fn run_callbacks(&self) {
        self.shared.callbacks.run();
    }
}
