//! A blocking producer for programs without an async runtime (the blocking consumer's
//! companion, e.g. a thread-per-consumer service that sends results or dead letters). It owns
//! a small runtime whose one worker thread runs the producer's sender task, so batches go out
//! while your thread works.
//!
//! ```no_run
//! use std::time::Duration;
//! use kafka_share::producer::{blocking, ProducerConfig, ProducerRecord};
//!
//! let producer = blocking::Producer::connect(ProducerConfig::new("127.0.0.1:19092"))?;
//! // Queue without waiting for each record, then wait for them all...
//! let deliveries: Vec<blocking::Delivery> =
//!     (0..10).map(|i| producer.send(ProducerRecord::new("results", format!("r{i}")))).collect::<Result<_, _>>()?;
//! for d in deliveries {
//!     let written = d.wait()?;
//!     println!("{}@{}", written.partition, written.offset);
//! }
//! // ...or send one and wait for it.
//! producer.send_and_wait(ProducerRecord::new("results", "last"))?;
//! producer.close(Duration::from_secs(5))?;
//! # Ok::<(), kafka_share::Error>(())
//! ```
//!
//! Every call blocks its thread: in async code use the async [`super::Producer`] (a call made
//! on an async runtime's thread works, and never panics, but stalls that thread meanwhile).
//! Dropping one is fine anywhere, an async task included (see [`Producer`]).

use std::time::Duration;

use super::{ProducerConfig, ProducerRecord, RecordMetadata};
use crate::blocking_runtime::{block_on_entered, OwnedRuntime, FINISH_ON_DROP};
use crate::config::Properties;
use crate::error::{Error, Result};
use crate::metrics::MetricsSnapshot;

/// A blocking wrapper around [`super::Producer`] and the runtime its sender task runs on.
///
/// Dropped without [`close`](Self::close), it flushes and closes itself (within 5 s): on a
/// plain thread the drop waits for that; inside an async runtime (the last `Arc` clone held
/// by a task) it cannot block, so the close goes on in a thread of its own and the drop
/// returns at once. It never panics, wherever it is dropped.
pub struct Producer {
    /// `None` only while being dropped or closed.
    open: Option<Open>,
}

struct Open {
    producer: super::Producer,
    rt: OwnedRuntime,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::Producer")
            .field("producer", &self.open.as_ref().map(|o| &o.producer))
            .finish()
    }
}

impl Producer {
    /// Connects (see [`super::Producer::connect`]).
    pub fn connect(config: ProducerConfig) -> Result<Producer> {
        Producer::start(|| super::Producer::connect(config))
    }

    /// Connects with default settings (see [`super::Producer::connect_to`]).
    pub fn connect_to(bootstrap: &str) -> Result<Producer> {
        Producer::start(|| super::Producer::connect_to(bootstrap))
    }

    /// Connects with settings from a Java-style properties file's keys (see
    /// [`super::Producer::from_properties`]).
    pub fn from_properties(p: &Properties) -> Result<Producer> {
        Producer::start(|| super::Producer::from_properties(p))
    }

    fn start<F: std::future::Future<Output = Result<super::Producer>>>(
        connect: impl FnOnce() -> F,
    ) -> Result<Producer> {
        let rt = OwnedRuntime::new("kafka-share-producer")?;
        let producer = rt.block_on(connect())??;
        Ok(Producer { open: Some(Open { producer, rt }) })
    }

    fn open(&self) -> Result<&Open> {
        self.open.as_ref().ok_or(Error::Closed)
    }

    /// Queues a record, blocking only for buffer memory or a topic's first metadata (both
    /// bounded by `max.block.ms`), as [`super::Producer::send`]; [`Delivery::wait`] blocks
    /// for its offset. Fails as the async `send` does.
    pub fn send(&self, record: ProducerRecord) -> Result<Delivery> {
        let open = self.open()?;
        let future = open.rt.block_on(open.producer.send(record))??;
        Ok(Delivery { future })
    }

    /// Sends a record and waits until it is written (or failed).
    pub fn send_and_wait(&self, record: ProducerRecord) -> Result<RecordMetadata> {
        let open = self.open()?;
        open.rt.block_on(open.producer.send_and_wait(record))?
    }

    /// Sends everything queued at once and waits until every record sent before this call is
    /// delivered or failed (see [`super::Producer::flush`]); per-record results stay in their
    /// [`Delivery`].
    pub fn flush(&self) -> Result<()> {
        let open = self.open()?;
        open.rt.block_on(open.producer.flush())
    }

    /// See [`super::Producer::metrics`] (for a `prometheus::SnapshotCollector`).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.open.as_ref().map(|o| o.producer.metrics()).unwrap_or_default()
    }

    /// See [`super::Producer::config`].
    pub fn config(&self) -> Option<&ProducerConfig> {
        self.open.as_ref().map(|o| o.producer.config())
    }

    /// Flushes within `timeout` (`None`: 30 s) and closes, as [`super::Producer::close`];
    /// blocks until done (in async code, drop it instead: the drop closes it without
    /// blocking).
    pub fn close(mut self, timeout: impl Into<Option<Duration>>) -> Result<()> {
        let Some(Open { producer, rt }) = self.open.take() else { return Ok(()) };
        let r = rt.block_on(producer.close(timeout.into()));
        drop(producer);
        drop(rt);
        r?
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if let Some(Open { producer, rt }) = self.open.take() {
            rt.finish(producer, |rt, producer| {
                // Nothing to report to: a failed close fails the records' deliveries.
                let _ = block_on_entered(rt, producer.close(FINISH_ON_DROP));
            });
        }
    }
}

/// Where a record queued by [`Producer::send`] was written, once [`wait`](Self::wait)ed for.
/// Dropping it does not cancel the delivery.
#[derive(Debug)]
#[must_use = "wait tells whether the record was delivered"]
pub struct Delivery {
    future: super::DeliveryFuture,
}

impl Delivery {
    /// The partition the record was assigned to.
    pub fn partition(&self) -> i32 {
        self.future.partition()
    }

    /// Blocks until the record is written (or failed); in async code, await
    /// [`into_future`](Self::into_future) instead.
    pub fn wait(self) -> Result<RecordMetadata> {
        // The delivery future needs no runtime (the producer's task completes it): a plain
        // thread-parking executor waits for it.
        futures::executor::block_on(self.future)
    }

    /// The async future of the delivery, for code that runs in an async runtime.
    pub fn into_future(self) -> super::DeliveryFuture {
        self.future
    }
}
