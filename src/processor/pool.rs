//! The batch form's handlers: a pool of [`BatchHandler`]s, one per slot. A call takes an
//! idle handler and gives it back when it ends, so a batch acquired while every other
//! handler is busy goes to whichever frees first, not to one fixed behind a slow call.
//!
//! The sink runtime changes the pool while the engine runs (`PoolControl`): a task added is
//! a handler (a slot) more; a task removed leaves once its call ends. In that form a handler
//! that stops ([`Stop`](super::Stop)) or panics is *retired*: its records are released, the
//! owner hears why, the other handlers go on. The public forms stop the engine instead.

use std::collections::{HashMap, VecDeque};

use tokio::sync::{mpsc, oneshot};

use super::BatchHandler;

/// A handler's key: the owner's name for it (the sink's task id).
pub(crate) type HandlerKey = u64;

/// What the owner of a pool asks of the running engine.
#[cfg_attr(not(feature = "sink"), allow(dead_code))] // the sink runtime is its one user
pub(crate) enum PoolCommand {
    /// One handler (one slot) more.
    Add(HandlerKey, Box<dyn BatchHandler>),
    /// Takes the handler out once its call (if any) ends; `done` says it is out (false: no
    /// such handler, e.g. it was retired already).
    Remove(HandlerKey, oneshot::Sender<bool>),
}

/// Changes a running engine's pool (crate-internal: the sink runtime's tasks).
#[cfg_attr(not(feature = "sink"), allow(dead_code))] // the sink runtime is its one user
#[derive(Clone)]
pub(crate) struct PoolControl {
    pub(super) tx: mpsc::UnboundedSender<PoolCommand>,
}

#[cfg_attr(not(feature = "sink"), allow(dead_code))] // the sink runtime is its one user
impl PoolControl {
    /// Adds a handler; false when the engine is gone.
    pub(crate) fn add(&self, key: HandlerKey, handler: Box<dyn BatchHandler>) -> bool {
        self.tx.send(PoolCommand::Add(key, handler)).is_ok()
    }

    /// Removes a handler once it is idle; resolves to whether it was there (false too when
    /// the engine is gone).
    pub(crate) async fn remove(&self, key: HandlerKey) -> bool {
        let (done, rx) = oneshot::channel();
        if self.tx.send(PoolCommand::Remove(key, done)).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }
}

/// Why a handler left the pool on its own (retiring form only).
pub(crate) type Retired = (HandlerKey, String);

pub(crate) struct Pool {
    /// Idle handlers, the longest idle first (calls rotate over them).
    idle: VecDeque<(HandlerKey, Box<dyn BatchHandler>)>,
    /// Handlers in a call.
    busy: Vec<HandlerKey>,
    /// Busy handlers to take out when their call ends.
    removing: HashMap<HandlerKey, oneshot::Sender<bool>>,
    /// Some: the retiring form; a handler's Stop or panic retires it, told here.
    retired: Option<mpsc::UnboundedSender<Retired>>,
}

impl Pool {
    pub(crate) fn new(
        handlers: Vec<(HandlerKey, Box<dyn BatchHandler>)>,
        retired: Option<mpsc::UnboundedSender<Retired>>,
    ) -> Pool {
        Pool { idle: handlers.into(), busy: Vec::new(), removing: HashMap::new(), retired }
    }

    /// Whether a Stop or a panic retires the handler instead of stopping the engine.
    pub(crate) fn retiring(&self) -> bool {
        self.retired.is_some()
    }

    /// Slots: handlers not on their way out.
    pub(crate) fn slots(&self) -> usize {
        self.idle.len() + self.busy.len() - self.removing.len()
    }

    /// An idle handler for a call.
    pub(crate) fn take(&mut self) -> Option<(HandlerKey, Box<dyn BatchHandler>)> {
        let (key, h) = self.idle.pop_front()?;
        self.busy.push(key);
        Some((key, h))
    }

    /// A call ended: the handler is idle again, or out if its removal was asked.
    pub(crate) fn returned(&mut self, key: HandlerKey, handler: Box<dyn BatchHandler>) {
        self.busy.retain(|&k| k != key);
        match self.removing.remove(&key) {
            Some(done) => {
                let _ = done.send(true);
            }
            None => self.idle.push_back((key, handler)),
        }
    }

    /// A call ended with the handler gone (Stop in the retiring form, a panic): it leaves.
    pub(crate) fn retire(&mut self, key: HandlerKey, why: String) {
        self.busy.retain(|&k| k != key);
        if let Some(done) = self.removing.remove(&key) {
            let _ = done.send(true);
        }
        if let Some(tx) = &self.retired {
            let _ = tx.send((key, why));
        }
    }

    pub(crate) fn command(&mut self, cmd: PoolCommand) {
        match cmd {
            PoolCommand::Add(key, h) => self.idle.push_back((key, h)),
            PoolCommand::Remove(key, done) => {
                if let Some(i) = self.idle.iter().position(|(k, _)| *k == key) {
                    self.idle.remove(i);
                    let _ = done.send(true);
                } else if self.busy.contains(&key) {
                    self.removing.insert(key, done);
                } else {
                    let _ = done.send(false);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::processor::{Delivery, Outcome, Stop};
    use futures::future::BoxFuture;

    struct Nop;
    impl BatchHandler for Nop {
        fn handle<'a>(&'a mut self, b: &'a [Delivery]) -> BoxFuture<'a, Result<Vec<Outcome>, Stop>> {
            Box::pin(async move { Ok(vec![Outcome::Accept; b.len()]) })
        }
    }

    #[test]
    fn calls_rotate_and_a_removal_waits_for_the_call() {
        let mut p = Pool::new(vec![(1, Box::new(Nop)), (2, Box::new(Nop))], None);
        assert_eq!(p.slots(), 2);
        let (k1, h1) = p.take().unwrap();
        assert_eq!(k1, 1);
        let (done, mut rx) = oneshot::channel();
        p.command(PoolCommand::Remove(1, done));
        assert_eq!(p.slots(), 1, "a handler on its way out is no slot");
        assert!(rx.try_recv().is_err(), "not out while its call runs");
        p.returned(1, h1);
        assert_eq!(rx.try_recv(), Ok(true));
        assert_eq!(p.take().map(|(k, _)| k), Some(2));
        assert!(p.take().is_none());
        p.command(PoolCommand::Add(3, Box::new(Nop)));
        assert_eq!(p.slots(), 2);
    }

    #[test]
    fn a_retired_handler_is_told_and_leaves() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut p = Pool::new(vec![(7, Box::new(Nop))], Some(tx));
        assert!(p.retiring());
        let (k, _h) = p.take().unwrap();
        p.retire(k, "bad password".into());
        assert_eq!(p.slots(), 0);
        assert_eq!(rx.try_recv().ok(), Some((7, "bad password".to_string())));
        let (done, mut out) = oneshot::channel();
        p.command(PoolCommand::Remove(7, done));
        assert_eq!(out.try_recv(), Ok(false), "gone already");
    }
}
