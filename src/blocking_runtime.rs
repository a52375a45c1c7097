//! The small runtime a blocking client owns (`producer::blocking`, `admin::blocking`,
//! `prometheus::blocking`), as `consumer::blocking` owns one: one worker thread that runs the
//! client's background tasks while the caller's thread blocks in its calls.
//!
//! Two things tokio panics on are kept out of reach: `Runtime::block_on` inside an async
//! runtime, and dropping a runtime inside one. A blocking call polls its future on the
//! caller's thread with `futures`' thread-parking executor, this runtime entered (so the
//! future's timers, sockets and spawned tasks are this runtime's, driven by its worker):
//! that works on any thread, a `spawn_blocking` one included, and never panics; on an async
//! runtime's worker it blocks that worker meanwhile, as any blocking call does. A drop hands
//! the client's last words and the runtime's shutdown to a thread of its own, or stops the
//! runtime in the background.

use std::future::Future;
use std::time::Duration;

use tokio::runtime::Runtime;

use crate::error::{Error, Result};

/// How long a drop gives a client to finish (a producer's flush), as the blocking consumer's.
pub(crate) const FINISH_ON_DROP: Duration = Duration::from_secs(5);

/// A one-worker runtime that never panics when dropped.
#[derive(Debug)]
pub(crate) struct OwnedRuntime {
    /// `None` only while being dropped.
    rt: Option<Runtime>,
}

/// Whether this thread is inside an async runtime, where blocking would stall (and tokio's
/// `block_on` panics).
pub(crate) fn inside_async_runtime() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

impl OwnedRuntime {
    /// A runtime whose one worker thread is called `name`.
    pub(crate) fn new(name: &str) -> Result<OwnedRuntime> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(name)
            .enable_all()
            .build()
            .map_err(|e| Error::io("runtime", e))?;
        Ok(OwnedRuntime { rt: Some(rt) })
    }

    /// Runs `f` to its end, blocking the caller (see the module docs); [`Error::Closed`]
    /// only while the runtime is being dropped, which no caller sees.
    pub(crate) fn block_on<F: Future>(&self, f: F) -> Result<F::Output> {
        let rt = self.rt.as_ref().ok_or(Error::Closed)?;
        Ok(block_on_entered(rt, f))
    }

    /// Ends a client: `finish(rt, client)` (a producer's flush and close, through
    /// [`block_on_entered`]) runs to its end, then the runtime stops. On a plain thread this waits for both; inside an
    /// async runtime it cannot block, so both go on in a thread of its own and this returns
    /// at once. Without a thread (the system refused one) the client is dropped and the
    /// runtime stopped in the background: what `finish` would have done is cut short.
    pub(crate) fn finish<T, F>(mut self, client: T, finish: F)
    where
        T: Send + 'static,
        F: FnOnce(&Runtime, T) + Send + 'static,
    {
        let Some(rt) = self.rt.take() else { return };
        if !inside_async_runtime() {
            finish(&rt, client);
            return;
        }
        // The work is sent after the thread started, so a failed spawn leaves it here, where
        // it is dropped without blocking.
        let (tx, rx) = std::sync::mpsc::sync_channel::<(Runtime, T, F)>(1);
        let spawned = std::thread::Builder::new().name("kafka-share-close".into()).spawn(move || {
            if let Ok((rt, client, finish)) = rx.recv() {
                finish(&rt, client);
            }
        });
        let unsent = match spawned {
            Ok(_) => tx.send((rt, client, finish)).err().map(|e| e.0),
            Err(_) => Some((rt, client, finish)),
        };
        if let Some((rt, client, _)) = unsent {
            drop(client);
            rt.shutdown_background();
        }
    }
}

/// `f` polled on this thread until done, with `rt` entered (see the module docs).
pub(crate) fn block_on_entered<F: Future>(rt: &Runtime, f: F) -> F::Output {
    let _entered = rt.enter();
    futures::executor::block_on(f)
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        // Dropping a runtime waits for its worker; inside an async runtime that panics.
        if let Some(rt) = self.rt.take() {
            if inside_async_runtime() {
                rt.shutdown_background();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that needs this runtime's timer and spawns onto it.
    async fn sleeps_and_spawns() -> u32 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        tokio::spawn(async { 7 }).await.unwrap_or(0)
    }

    #[test]
    fn blocks_on_a_plain_thread() {
        let rt = OwnedRuntime::new("t").unwrap();
        assert_eq!(rt.block_on(sleeps_and_spawns()).unwrap(), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn blocks_inside_a_runtime_and_a_spawn_blocking_without_panicking() {
        let rt = OwnedRuntime::new("t").unwrap();
        // On the runtime's only thread: tokio's own block_on would panic here.
        assert_eq!(rt.block_on(sleeps_and_spawns()).unwrap(), 7);
        let rt = tokio::task::spawn_blocking(move || {
            assert_eq!(rt.block_on(sleeps_and_spawns()).unwrap(), 7);
            rt
        })
        .await
        .unwrap();
        // And dropping it here does not panic.
        drop(rt);
    }

    #[tokio::test]
    async fn finishing_inside_a_runtime_hands_the_work_to_a_thread() {
        let rt = tokio::task::spawn_blocking(|| OwnedRuntime::new("t")).await.unwrap().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.finish(tx, |rt, tx| {
            let v = block_on_entered(rt, async { 42 });
            let _ = tx.send((v, std::thread::current().name().map(str::to_string)));
        });
        let (v, thread) = tokio::task::spawn_blocking(move || rx.recv().unwrap()).await.unwrap();
        assert_eq!((v, thread.as_deref()), (42, Some("kafka-share-close")));
    }
}
