//! A blocking share consumer for programs without an async runtime: the Java-style
//! thread-per-consumer loop, with `wakeup` from another thread. It has the async
//! consumer's calls, blocking: [`ShareConsumer::iter`] is the async `stream`,
//! [`ShareConsumer::commit_async`] returns a [`CommitHandle`] to wait on (or drop).
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

/// A blocking wrapper around [`super::ShareConsumer`]. It owns a small runtime whose one
/// worker thread runs the background driver, so heartbeats and prefetching go on while your
/// thread processes records.
pub struct ShareConsumer {
    inner: Option<super::ShareConsumer>,
    rt: Runtime,
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
        let inner = rt.block_on(super::ShareConsumer::connect(cfg))?;
        Ok(ShareConsumer { inner: Some(inner), rt })
    }

    fn c(&self) -> Result<&super::ShareConsumer> {
        self.inner.as_ref().ok_or(Error::Closed)
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
        self.inner.as_ref().map(|c| c.subscription()).unwrap_or_default()
    }

    /// See [`super::ShareConsumer::poll`].
    pub fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        let c = self.c()?;
        self.rt.block_on(c.poll(timeout))
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
        self.inner.as_ref().map(|c| c.paused()).unwrap_or_default()
    }

    /// See [`super::ShareConsumer::acknowledge_offset`].
    pub fn acknowledge_offset(&self, topic: &str, partition: i32, offset: i64, t: AcknowledgeType) -> Result<()> {
        self.c()?.acknowledge_offset(topic, partition, offset, t)
    }

    /// See [`super::ShareConsumer::commit_sync`].
    pub fn commit_sync(&self, timeout: impl Into<Option<Duration>>) -> Result<CommitResults> {
        let c = self.c()?;
        self.rt.block_on(c.commit_sync(timeout.into()))
    }

    /// Sends pending acknowledgements without waiting (see
    /// [`super::ShareConsumer::commit_async`]). [`CommitHandle::wait`] blocks for the
    /// per-partition results; dropped, the results go to the acknowledgement commit callback.
    pub fn commit_async(&self) -> Result<CommitHandle> {
        let inner = self.c()?.commit_async()?;
        Ok(CommitHandle { inner, rt: self.rt.handle().clone() })
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
        if let Some(c) = self.inner.as_ref() {
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
        self.inner.as_ref().and_then(|c| c.acquisition_lock_timeout())
    }

    /// See [`super::ShareConsumer::metrics`].
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.as_ref().map(|c| c.metrics()).unwrap_or_default()
    }

    /// A handle whose `wakeup()` ends a blocked poll from any thread.
    pub fn wakeup_handle(&self) -> WakeupHandle {
        self.inner.as_ref().map(|c| c.wakeup_handle()).unwrap_or_default()
    }

    /// See [`super::ShareConsumer::close`].
    pub fn close(mut self, timeout: impl Into<Option<Duration>>) -> Result<()> {
        let timeout = timeout.into();
        match self.inner.take() {
            Some(c) => {
                let r = self.rt.block_on(c.close(timeout));
                drop(c);
                r
            }
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
        if let Some(c) = self.inner.take() {
            // Give the driver a moment to release what we hold before the runtime stops.
            let _ = self.rt.block_on(c.close(Duration::from_secs(5)));
        }
    }
}
