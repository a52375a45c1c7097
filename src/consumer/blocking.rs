//! A blocking share consumer for programs without an async runtime: the Java-style
//! thread-per-consumer loop, with `wakeup` from another thread. It has the async
//! consumer's calls, blocking: [`ShareConsumer::iter`] is the async `stream`,
//! [`ShareConsumer::commit_async`] returns a [`CommitHandle`] to wait on (or drop).
//! Its companions for a service without an async runtime: [`crate::producer::blocking`],
//! [`crate::admin::blocking`] and (feature `prometheus`) `prometheus::blocking::serve` for
//! the metrics endpoint.
//!
//! ```no_run
//! use std::time::Duration;
//! use kafka_share::consumer::{blocking, ShareConsumerConfig};
//!
//! let consumer = blocking::ShareConsumer::connect(ShareConsumerConfig::new("127.0.0.1:19092", "g"))?;
//! consumer.subscribe(["orders"])?;
//! let wakeup = consumer.wakeup_handle();
//! std::thread::spawn(move || { std::thread::sleep(Duration::from_secs(10)); wakeup.wakeup(); });
//! loop {
//!     match consumer.poll(Duration::from_secs(1)) {
//!         Ok(records) => for r in records { println!("{}", r.offset) },
//!         Err(kafka_share::Error::Wakeup) => break,
//!         Err(e) => return Err(e),
//!     }
//! }
//! consumer.close(Duration::from_secs(5))?;
//! # Ok::<(), kafka_share::Error>(())
//! ```

use std::collections::BTreeSet;
use std::future::IntoFuture;
use std::time::Duration;

use tokio::runtime::Runtime;

use super::{
    AcknowledgeType, CommitResults, ConsumerRecord, MetricsSnapshot, ShareConsumerConfig, TopicPartition, WakeupHandle,
};
use crate::error::{Error, Result};

/// How long a drop gives the close (as the async consumer's own drop).
const CLOSE_ON_DROP: Duration = Duration::from_secs(5);

/// A blocking wrapper around [`super::ShareConsumer`]. It owns a small runtime whose one
/// worker thread runs the background driver, so heartbeats and prefetching go on while your
/// thread processes records.
///
/// Dropped without [`close`](Self::close), it closes itself (within 5 s): on a plain thread
/// the drop waits for that close; inside an async runtime (e.g. the last `Arc` clone held by a
/// metrics endpoint's task) it cannot block, so the close goes on in a thread of its own and
/// the drop returns at once. Call `close` where you can wait for it.
pub struct ShareConsumer {
    /// `None` once closed (or while being dropped).
    open: Option<Open>,
}

/// The async consumer and the runtime its driver runs on; they go away together.
struct Open {
    consumer: super::ShareConsumer,
    rt: Runtime,
}

impl Open {
    /// Closes the consumer and stops the runtime, blocking this thread: only where blocking
    /// is allowed (not inside an async runtime).
    fn close_blocking(self, timeout: Option<Duration>) -> Result<()> {
        let Open { consumer, rt } = self;
        let r = rt.block_on(consumer.close(timeout));
        drop(consumer);
        drop(rt);
        r
    }

    /// The close of a drop. Inside an async runtime, `block_on` panics ("Cannot start a
    /// runtime from within a runtime") and so does dropping a runtime, so the close is handed
    /// to a thread of its own; the drop does not wait for it.
    fn close_on_drop(self) {
        if tokio::runtime::Handle::try_current().is_err() {
            // Nothing to report to: a failed close is in the consumer's log already.
            let _ = self.close_blocking(Some(CLOSE_ON_DROP));
            return;
        }
        // The consumer is sent after the thread started, so a failed spawn leaves it here.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Open>(1);
        let spawned = std::thread::Builder::new().name("kafka-share-close".into()).spawn(move || {
            if let Ok(open) = rx.recv() {
                let _ = open.close_blocking(Some(CLOSE_ON_DROP));
            }
        });
        let unsent = match spawned {
            Ok(_) => tx.send(self).err().map(|e| e.0),
            Err(_) => Some(self),
        };
        if let Some(open) = unsent {
            open.abandon();
        }
    }

    /// No thread for the close (the system refused one): the async consumer's drop asks the
    /// driver to release what it holds, and the runtime stops without waiting (which does
    /// not block, nor panic, inside an async runtime), so that release may be cut short: the
    /// records then come back when their locks expire, and the member when its session does.
    fn abandon(self) {
        let Open { consumer, rt } = self;
        drop(consumer);
        rt.shutdown_background();
    }
}

impl ShareConsumer {
    /// Connects (see [`super::ShareConsumer::connect`]).
    pub fn connect(cfg: ShareConsumerConfig) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kafka-share")
            .enable_all()
            .build()
            .map_err(|e| Error::io("runtime", e))?;
        let consumer = rt.block_on(super::ShareConsumer::connect(cfg))?;
        Ok(ShareConsumer { open: Some(Open { consumer, rt }) })
    }

    fn c(&self) -> Result<&super::ShareConsumer> {
        self.open.as_ref().map(|o| &o.consumer).ok_or(Error::Closed)
    }

    fn rt_and_c(&self) -> Result<(&Runtime, &super::ShareConsumer)> {
        self.open.as_ref().map(|o| (&o.rt, &o.consumer)).ok_or(Error::Closed)
    }

    fn inner(&self) -> Option<&super::ShareConsumer> {
        self.open.as_ref().map(|o| &o.consumer)
    }

    /// See [`super::ShareConsumer::subscribe`].
    pub fn subscribe<I, S>(&self, topics: I) -> Result<()>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.c()?.subscribe(topics)
    }

    /// See [`super::ShareConsumer::subscribe_pattern`].
    pub fn subscribe_pattern(&self, pattern: &str) -> Result<()> {
        self.c()?.subscribe_pattern(pattern)
    }

    /// See [`super::ShareConsumer::unsubscribe`].
    pub fn unsubscribe(&self) -> Result<()> {
        self.c()?.unsubscribe()
    }

    /// See [`super::ShareConsumer::subscription`].
    pub fn subscription(&self) -> BTreeSet<String> {
        self.inner().map(|c| c.subscription()).unwrap_or_default()
    }

    /// See [`super::ShareConsumer::poll`].
    pub fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        let (rt, c) = self.rt_and_c()?;
        rt.block_on(c.poll(timeout))
    }

    /// See [`super::ShareConsumer::acknowledge`].
    pub fn acknowledge(&self, record: &ConsumerRecord) -> Result<()> {
        self.c()?.acknowledge(record)
    }

    /// See [`super::ShareConsumer::acknowledge_with`].
    pub fn acknowledge_with(&self, record: &ConsumerRecord, t: AcknowledgeType) -> Result<()> {
        self.c()?.acknowledge_with(record, t)
    }

    /// See [`super::ShareConsumer::acknowledge_all`].
    pub fn acknowledge_all(&self, t: AcknowledgeType) -> Result<usize> {
        self.c()?.acknowledge_all(t)
    }

    /// See [`super::ShareConsumer::pause`].
    pub fn pause<I: IntoIterator<Item = TopicPartition>>(&self, partitions: I) -> Result<()> {
        self.c()?.pause(partitions)
    }

    /// See [`super::ShareConsumer::resume`].
    pub fn resume<I: IntoIterator<Item = TopicPartition>>(&self, partitions: I) -> Result<()> {
        self.c()?.resume(partitions)
    }

    /// See [`super::ShareConsumer::paused`].
    pub fn paused(&self) -> BTreeSet<TopicPartition> {
        self.inner().map(|c| c.paused()).unwrap_or_default()
    }

    /// See [`super::ShareConsumer::acknowledge_offset`].
    pub fn acknowledge_offset(&self, topic: &str, partition: i32, offset: i64, t: AcknowledgeType) -> Result<()> {
        self.c()?.acknowledge_offset(topic, partition, offset, t)
    }

    /// See [`super::ShareConsumer::commit_sync`].
    pub fn commit_sync(&self, timeout: impl Into<Option<Duration>>) -> Result<CommitResults> {
        let (rt, c) = self.rt_and_c()?;
        rt.block_on(c.commit_sync(timeout.into()))
    }

    /// Sends pending acknowledgements without waiting (see
    /// [`super::ShareConsumer::commit_async`]). [`CommitHandle::wait`] blocks for the
    /// per-partition results; dropped, the results go to the acknowledgement commit callback.
    pub fn commit_async(&self) -> Result<CommitHandle> {
        let (rt, c) = self.rt_and_c()?;
        let inner = c.commit_async()?;
        Ok(CommitHandle { inner, rt: rt.handle().clone() })
    }

    /// The records of successive polls, one by one, as the async
    /// [`stream`](super::ShareConsumer::stream): it polls (waiting up to `poll_timeout`)
    /// when the last batch is used up; a failed poll is yielded as `Err` and the iterator
    /// goes on (that includes [`Error::Wakeup`]); it ends once the consumer is closed.
    /// Acknowledge as with [`poll`](Self::poll).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use kafka_share::consumer::{blocking, ShareConsumerConfig};
    /// let consumer = blocking::ShareConsumer::connect(ShareConsumerConfig::new("127.0.0.1:19092", "g"))?;
    /// consumer.subscribe(["orders"])?;
    /// for record in consumer.iter(Duration::from_secs(1)) {
    ///     match record {
    ///         Ok(r) => println!("{}@{}", r.partition, r.offset),
    ///         Err(kafka_share::Error::Wakeup) => break,
    ///         Err(e) => return Err(e),
    ///     }
    /// }
    /// # Ok::<(), kafka_share::Error>(())
    /// ```
    pub fn iter(&self, poll_timeout: Duration) -> Records<'_> {
        Records { consumer: self, poll_timeout, batch: Vec::new().into_iter() }
    }

    /// Makes the pending [`poll`](Self::poll) (or, if none is pending, the next one) return
    /// [`Error::Wakeup`]. Callable from another thread while this one blocks in `poll`
    /// (share the consumer with an `Arc`, or use [`wakeup_handle`](Self::wakeup_handle)).
    pub fn wakeup(&self) {
        if let Some(c) = self.inner() {
            c.wakeup();
        }
    }

    /// See [`super::ShareConsumer::set_acknowledgement_commit_callback`].
    pub fn set_acknowledgement_commit_callback<F>(&self, callback: F) -> Result<()>
    where
        F: Fn(&TopicPartition, &[i64], &Result<()>) + Send + Sync + 'static,
    {
        self.c()?.set_acknowledgement_commit_callback(callback)
    }

    /// See [`super::ShareConsumer::clear_acknowledgement_commit_callback`].
    pub fn clear_acknowledgement_commit_callback(&self) -> Result<()> {
        self.c()?.clear_acknowledgement_commit_callback()
    }

    /// See [`super::ShareConsumer::acquisition_lock_timeout`].
    pub fn acquisition_lock_timeout(&self) -> Option<Duration> {
        self.inner().and_then(|c| c.acquisition_lock_timeout())
    }

    /// See [`super::ShareConsumer::metrics`].
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner().map(|c| c.metrics()).unwrap_or_default()
    }

    /// A handle whose `wakeup()` ends a blocked poll from any thread.
    pub fn wakeup_handle(&self) -> WakeupHandle {
        self.inner().map(|c| c.wakeup_handle()).unwrap_or_default()
    }

    /// See [`super::ShareConsumer::close`].
    ///
    /// Blocks, as every call here: not callable from inside an async runtime (drop it there,
    /// or call it in `spawn_blocking`).
    pub fn close(mut self, timeout: impl Into<Option<Duration>>) -> Result<()> {
        match self.open.take() {
            Some(open) => open.close_blocking(timeout.into()),
            None => Ok(()),
        }
    }
}

/// The records of successive polls ([`ShareConsumer::iter`]).
pub struct Records<'a> {
    consumer: &'a ShareConsumer,
    poll_timeout: Duration,
    batch: std::vec::IntoIter<ConsumerRecord>,
}

impl Iterator for Records<'_> {
    type Item = Result<ConsumerRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.batch.next() {
                return Some(Ok(r));
            }
            match self.consumer.poll(self.poll_timeout) {
                Ok(batch) => self.batch = batch.into_iter(),
                Err(Error::Closed) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// The results of a blocking [`ShareConsumer::commit_async`]: the acknowledgements were sent
/// either way; [`wait`](Self::wait) blocks for their per-partition results, or drop it and
/// read them in the acknowledgement commit callback.
#[derive(Debug)]
pub struct CommitHandle {
    inner: super::CommitHandle,
    rt: tokio::runtime::Handle,
}

impl CommitHandle {
    /// Blocks until the broker answered every acknowledgement of this commit. Not callable
    /// from inside an async runtime (as every blocking call here).
    pub fn wait(self) -> Result<CommitResults> {
        self.rt.block_on(self.inner.into_future())
    }
}

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        // Give the driver a moment to release what we hold before the runtime stops; never
        // panic, wherever the last owner drops it (see the type's docs).
        if let Some(open) = self.open.take() {
            open.close_on_drop();
        }
    }
}
