//! The acknowledgement commit callback, run on the application's side.
//!
//! The driver only records completions (`Callbacks::completed`, which the shell calls for
//! each `Output::AckCompleted` of the driver core); the handle runs the callback
//! over them inside `poll`, `commit_sync`, an awaited `commit_async` and `close`, as Java's
//! `KafkaShareConsumer` does on the application thread. So the callback never blocks the
//! background task (heartbeats, fetches), may take locks the application holds elsewhere,
//! and sees completions in order. A panic in it is caught and logged; the consumer goes on.
//! Calling the consumer from inside it is refused (see [`refuse_reentry`]): the call would
//! run in the middle of the one that runs the callback.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::topic_partition::TopicPartition;

/// A callback told of every completed acknowledgement: partition, offsets, outcome.
pub type AckCallback = Arc<dyn Fn(&TopicPartition, &[i64], &Result<()>) + Send + Sync>;

/// One completed acknowledgement round of a partition.
struct Completion {
    tp: TopicPartition,
    offsets: Vec<i64>,
    result: Result<()>,
}

/// The callback and the completions it has not been told of yet.
#[derive(Default)]
pub(crate) struct Callbacks {
    callback: Mutex<Option<AckCallback>>,
    /// Whether a callback is set: without one the driver records nothing.
    set: AtomicBool,
    pending: Mutex<Vec<Completion>>,
}

thread_local! {
    /// Set while this thread runs an acknowledgement commit callback.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Refuses a consumer call made from inside the acknowledgement commit callback.
pub(crate) fn refuse_reentry() -> Result<()> {
    if IN_CALLBACK.with(Cell::get) {
        return Err(Error::CalledFromCallback);
    }
    Ok(())
}

impl Callbacks {
    /// Sets (or with None removes) the callback. Completions recorded before are told to the
    /// new callback.
    pub(crate) fn set(&self, callback: Option<AckCallback>) {
        let mut cb = self.callback.lock().unwrap_or_else(|p| p.into_inner());
        self.set.store(callback.is_some(), Ordering::Release);
        if callback.is_none() {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        *cb = callback;
    }

    /// Whether completions are wanted (the driver's cheap check before building one).
    pub(crate) fn wanted(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Records a completion for the next `run` (driver side).
    pub(crate) fn completed(&self, tp: TopicPartition, offsets: Vec<i64>, result: Result<()>) {
        if self.wanted() {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).push(Completion { tp, offsets, result });
        }
    }

    /// Tells the callback of every completion recorded so far (handle side). Returns how
    /// many calls panicked (each is logged).
    pub(crate) fn run(&self) -> usize {
        let done = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        if done.is_empty() {
            return 0;
        }
        let Some(cb) = self.callback.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return 0;
        };
        let mut panics = 0;
        for c in done {
            IN_CALLBACK.with(|f| f.set(true));
            let outcome = catch_unwind(AssertUnwindSafe(|| cb(&c.tp, &c.offsets, &c.result)));
            IN_CALLBACK.with(|f| f.set(false));
            if let Err(panic) = outcome {
                panics += 1;
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string payload".into());
                tracing::error!(partition = %c.tp, panic = %what, "the acknowledgement commit callback panicked; the consumer goes on");
            }
        }
        panics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_the_caller_catches_panics_and_refuses_reentry() {
        let cbs = Callbacks::default();
        let tp = TopicPartition::new("t", 0);
        cbs.completed(tp.clone(), vec![1], Ok(()));
        assert_eq!(cbs.run(), 0, "nothing recorded without a callback");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        cbs.set(Some(Arc::new(move |_tp: &TopicPartition, offsets: &[i64], _r: &Result<()>| {
            s.lock().unwrap().push((offsets.to_vec(), refuse_reentry().is_err()));
            if offsets == [2] {
                panic!("boom");
            }
        })));
        cbs.completed(tp.clone(), vec![2], Ok(()));
        cbs.completed(tp.clone(), vec![3], Err(Error::Closed));
        assert_eq!(cbs.run(), 1);
        assert_eq!(*seen.lock().unwrap(), vec![(vec![2], true), (vec![3], true)], "in order, all of them");
        assert!(refuse_reentry().is_ok(), "outside the callback calls are fine");
        assert_eq!(cbs.run(), 0);
    }
}
