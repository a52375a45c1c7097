//! `wakeup()`: end a blocked poll from anywhere.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A cloneable handle that makes the pending poll (or, if none is pending, the next one)
/// return [`Error::Wakeup`](crate::Error::Wakeup), as Java's `wakeup()` does. Usable from any
/// thread or task, with or without a runtime.
#[derive(Debug, Clone, Default)]
pub struct WakeupHandle {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    flag: AtomicBool,
    notify: Notify,
}

impl WakeupHandle {
    /// Wakes the consumer up.
    pub fn wakeup(&self) {
        self.inner.flag.store(true, Ordering::SeqCst);
        self.inner.notify.notify_one();
    }

    /// Consumes a pending wakeup, if any.
    pub(crate) fn take(&self) -> bool {
        self.inner.flag.swap(false, Ordering::SeqCst)
    }

    /// Completes when `wakeup` is called (or was called since the last `take`).
    pub(crate) async fn woken(&self) {
        loop {
            if self.inner.flag.load(Ordering::SeqCst) {
                return;
            }
            self.inner.notify.notified().await;
        }
    }
}
