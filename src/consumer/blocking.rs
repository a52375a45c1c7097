//! A blocking share consumer for programs without an async runtime: the Java-style
//! thread-per-consumer loop, with `wakeup` from another thread.
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

    /// Sends pending acknowledgements without waiting; results go to the callback.
    pub fn commit_async(&self) -> Result<()> {
        self.c()?.commit_async().map(drop)
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

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        if let Some(c) = self.inner.take() {
            // Give the driver a moment to release what we hold before the runtime stops.
            let _ = self.rt.block_on(c.close(Duration::from_secs(5)));
        }
    }
}
