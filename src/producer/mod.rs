//! A minimal producer: test data, benchmarks, dead-letter topics.
//!
//! ```no_run
//! # async fn demo() -> kafka_share::Result<()> {
//! use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
//! let producer = Producer::connect(ProducerConfig::new("127.0.0.1:19092")).await?;
//! let delivery = producer.send(ProducerRecord::new("orders", "hello").key("k1")).await?;
//! let meta = delivery.await?; // where it landed
//! println!("{}-{}@{}", meta.topic, meta.partition, meta.offset);
//! producer.close(std::time::Duration::from_secs(10)).await?;
//! # Ok(()) }
//! ```
//!
//! How it works: [`Producer::send`] picks the partition (as the Java client does: explicit,
//! else `murmur2(key)`, else sticky), encodes the record straight into that partition's open
//! batch under a short lock, and returns a [`DeliveryFuture`]. A background task sends a batch
//! when it is full (`batch.size`) or has waited `linger.ms`, grouping ready batches by leader
//! into one ProduceRequest per broker, with up to `max.in.flight.requests.per.connection`
//! requests pipelined per broker. Retriable failures (leader moved, connection lost, timeouts)
//! refresh metadata and retry with backoff until `delivery.timeout.ms`.
//!
//! Requests to one broker reach its connection in the order the background task built them
//! (each request task queues its request only after the previous one did), so a partition's
//! batches are written in send order when nothing fails.
//!
//! Guarantees and limits:
//! * **Idempotent by default** (`enable.idempotence=true`, as in Java): the producer gets a
//!   producer id (InitProducerId) and stamps each batch with it, an epoch and the partition's
//!   next sequence number. A retry resends the same batch with the same sequence, so the
//!   broker drops duplicates; a retried batch is resent before any later batch of its
//!   partition, so retries do not reorder. Sequence gaps (OUT_OF_ORDER_SEQUENCE_NUMBER for the
//!   next batch, UNKNOWN_PRODUCER_ID, a batch that failed for good) bump the epoch and restart
//!   the partition's sequences; INVALID_PRODUCER_EPOCH gets a new producer id. A
//!   DUPLICATE_SEQUENCE_NUMBER answer counts as delivered, with offset -1 (the broker no
//!   longer knows where the batch went). Needs `acks=all`, at most 5 requests in flight.
//!   Costs one round trip per partition and epoch (its first batch goes alone, since a
//!   broker with no state for the producer takes any sequence) and, after a failure, the
//!   partition's in-flight depth (its retries go one at a time, new batches wait).
//!   Known limit: restamping after a gap (new epoch) can still write twice a batch whose
//!   first send was written but unanswered.
//! * With `enable.idempotence=false`, a retry after a lost response can write a batch twice,
//!   and with more than one request in flight a retried batch can land after a later one.
//!   `transactional.id` and `acks=0` are refused as not supported.
//! * Batches too large for the broker (MESSAGE_TOO_LARGE) fail; they are not split.
//! * `buffer.memory` bounds the bytes waiting for delivery: `send` waits (up to `max.block.ms`)
//!   while it is exhausted.
//! * Dropping every handle without [`Producer::close`] lets the background task send what is
//!   queued (best effort, while the tokio runtime runs), then stop.

pub use crate::protocol::records::Compression;

mod accumulator;
mod admission;
mod batch;
pub mod blocking;
mod config;
pub(crate) mod metrics;
mod partitioner;
mod record;
mod request;
mod sender;
mod sequences;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

pub use config::{Acks, ProducerConfig};
pub use metrics::PRODUCER;
// Java's key hash, for tests that check where a key lands: not API (a custom partitioner
// would be a trait, not the hash).
#[cfg(feature = "unstable-internals")]
pub use partitioner::{murmur2, partition_for_key, to_positive};
pub use record::{DeliveryFuture, ProducerRecord, RecordMetadata};

use accumulator::{Accumulator, Limits};
use admission::{load_topic, record_size_bound, reserve, BATCH_OVERHEAD};
use partitioner::PartitionChoice;
use record::WaitDone;
use sender::Shared;
use sequences::Sequences;

use crate::cluster::Cluster;
use crate::config::Properties;
use crate::error::{Error, Result};
use crate::metrics::MetricsSnapshot;
use crate::protocol::records::{Header, RecordInput};

/// A producer. Cheap to clone: clones share the buffer, the batches and the background task.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: the task sends what is queued, then stops.
        self.shared.closed.store(true, Ordering::Release);
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
    }
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").field("cluster", &self.inner.shared.cluster).finish()
    }
}

/// How long `close(None)` waits for the flush: 30 s, as the consumer's and Java's `close()`.
pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

impl Producer {
    /// Connects to the cluster and starts the background task (named as
    /// [`ShareConsumer::connect`](crate::ShareConsumer::connect) and
    /// [`Admin::connect`](crate::admin::Admin::connect)).
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn connect(config: ProducerConfig) -> Result<Producer> {
        Producer::connect_config(config).await
    }

    /// Connects to `bootstrap` (`host:port[,host:port]`) with default settings, as
    /// [`Admin::connect_to`](crate::admin::Admin::connect_to) and
    /// [`ShareConsumer::connect_to`](crate::ShareConsumer::connect_to).
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn connect_to(bootstrap: &str) -> Result<Producer> {
        Producer::connect(ProducerConfig::new(bootstrap)).await
    }

    async fn connect_config(mut config: ProducerConfig) -> Result<Producer> {
        config.validate()?;
        if config.cluster.client_id.is_empty() {
            // Java's default client.id: producer-<n>, n counting this process's producers.
            config.cluster.client_id = crate::config::numbered_client_id(crate::config::Client::Producer);
        }
        let cluster = Cluster::connect(config.cluster.clone()).await?;
        Ok(Producer::start(cluster, config, true))
    }

    /// Connects with Java-named properties; see [`ProducerConfig::from_properties`].
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn from_properties(p: &Properties) -> Result<Producer> {
        Producer::connect(ProducerConfig::from_properties(p)?).await
    }

    /// Produces through an existing cluster handle (e.g. an admin client's); its connection
    /// settings win over `config.cluster`. Must be called inside a tokio runtime.
    /// (Feature `unstable-internals`.)
    #[cfg(feature = "unstable-internals")]
    pub fn with_cluster(cluster: Arc<Cluster>, config: ProducerConfig) -> Result<Producer> {
        config.validate()?;
        Ok(Producer::start(cluster, config, false))
    }

    fn start(cluster: Arc<Cluster>, config: ProducerConfig, owns_cluster: bool) -> Producer {
        let memory = Arc::new(Semaphore::new(config.buffer_memory.min(Semaphore::MAX_PERMITS)));
        let limits = Limits {
            batch_size: config.batch_size,
            linger: config.linger,
            delivery_timeout: config.delivery_timeout,
            max_request_size: config.max_request_size,
            max_in_flight: config.max_in_flight,
            retry_backoff: (cluster.config().retry_backoff, cluster.config().retry_backoff_max),
        };
        let mut acc = Accumulator::new(limits, memory.clone());
        if config.enable_idempotence {
            acc.seqs = Some(Sequences::default());
        }
        let shared = Arc::new(Shared {
            acc: Mutex::new(acc),
            cluster,
            config,
            wake: Notify::new(),
            memory,
            closed: Default::default(),
            abort: Default::default(),
            owns_cluster,
            metrics: Default::default(),
        });
        let task = tokio::spawn(sender::run(shared.clone()));
        Producer { inner: Arc::new(Inner { shared, task: Mutex::new(Some(task)) }) }
    }

    /// The settings in use.
    pub fn config(&self) -> &ProducerConfig {
        &self.inner.shared.config
    }

    /// Metrics under the Java producer's names (group [`PRODUCER`]: `record-send-total`,
    /// `request-latency-avg`, ...), and the request latency and record queue time as
    /// histograms ([`MetricsSnapshot::histogram`]). The same snapshot type as the
    /// consumer's, so `kafka_share::prometheus::SnapshotCollector` renders it (feature
    /// `prometheus`).
    ///
    /// What is counted where: `record-send-total` counts the records of each Produce request
    /// queued on a connection (a retried batch again, as in Java); `record-retry-total` the
    /// records of batches scheduled for a retry; `record-error-total` the records that failed
    /// for good (refused, expired, not encodable, or dropped by a `close` that timed out);
    /// `request-total` and `request-latency-*` Produce requests only (Java counts every
    /// request of its network client); `batch-size-*` bytes as sent (compressed);
    /// `compression-rate-avg` the mean of compressed / uncompressed per batch sent.
    pub fn metrics(&self) -> MetricsSnapshot {
        let shared = &self.inner.shared;
        let buffer = (shared.config.buffer_memory, shared.memory.available_permits());
        let mut s = shared.metrics.snapshot(buffer);
        crate::metrics::put_network(&mut s, PRODUCER, &shared.cluster.network_stats());
        s
    }

    /// The cluster handle. (Feature `unstable-internals`.)
    #[cfg(feature = "unstable-internals")]
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.inner.shared.cluster
    }

    /// Queues a record and returns once it is in a batch; await the returned future for its
    /// offset. Waits only for buffer memory or, on a topic's first use, its metadata (both
    /// bounded by `max.block.ms`).
    ///
    /// Fails at once with [`Error::UnknownTopic`] for a topic that does not exist,
    /// [`Error::InvalidArgument`] for a partition that does not exist, a negative timestamp, or
    /// a record larger than `max.request.size` or `buffer.memory`, and [`Error::Closed`] after
    /// [`Producer::close`].
    ///
    /// # Cancel safety
    /// Cancel-safe: the record is appended to its batch in one step after any wait, so a
    /// dropped future sent nothing (and gave back the buffer memory it had reserved). Once it
    /// has returned, dropping the [`DeliveryFuture`] does not take the record back.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture> {
        // A send rarely waits, so a tight send loop would never yield: on a current-thread
        // runtime the sender task could not run until the loop ends. Yield now and then.
        tokio::task::coop::consume_budget().await;
        let shared = &self.inner.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let cfg = &shared.config;
        let ProducerRecord { topic, partition, key, value, headers, timestamp } = record;
        let timestamp = match timestamp {
            Some(t) if t < 0 => return Err(Error::InvalidArgument(format!("timestamp {t} is negative"))),
            Some(t) => t,
            None => now_ms(),
        };
        let size = record_size_bound(key.as_deref(), value.as_deref(), &headers);
        if size + BATCH_OVERHEAD > cfg.max_request_size {
            return Err(Error::InvalidArgument(format!(
                "the record is {} bytes when serialized, larger than max.request.size ({}); raise \
                 max.request.size (and the topic's max.message.bytes) or send a smaller record",
                size + BATCH_OVERHEAD,
                cfg.max_request_size
            )));
        }
        let choice = PartitionChoice::new(partition, key.as_deref(), cfg.partitioner_ignore_keys);
        let input = RecordInput {
            key,
            value,
            headers: headers.into_iter().map(|(k, v)| Header::new(k, v)).collect(),
            timestamp,
        };
        let mut reservation = reserve(shared, size).await?;
        let mut loaded = false;
        loop {
            let appended = shared.lock().append(&topic, choice, &input, size)?;
            match appended {
                Some(a) => {
                    reservation.0 = 0; // the batch holds the memory now
                    if a.wake {
                        shared.wake.notify_one();
                    }
                    return Ok(DeliveryFuture::new(a.done, topic, a.partition, a.index, timestamp));
                }
                None if !loaded => {
                    load_topic(shared, &topic).await?;
                    loaded = true;
                }
                None => return Err(Error::UnknownTopic(topic)),
            }
        }
    }

    /// Sends a record and waits until it is written (or failed).
    ///
    /// # Cancel safety
    /// Dropped before the record is queued, nothing is sent; dropped after, the record is
    /// still delivered (only the wait for its offset is abandoned).
    pub async fn send_and_wait(&self, record: ProducerRecord) -> Result<RecordMetadata> {
        self.send(record).await?.await
    }

    /// Sends everything queued at once (ignoring `linger.ms`) and waits until every record
    /// sent before this call is delivered or failed. Per-record results stay in their futures.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping it only stops the wait; the records still go out.
    pub async fn flush(&self) {
        let shared = &self.inner.shared;
        let pending = {
            let mut acc = shared.lock();
            acc.flushing += 1;
            acc.incomplete()
        };
        let _hurry = FlushGuard(shared);
        shared.wake.notify_one();
        for done in pending {
            WaitDone::new(done).await;
        }
    }

    /// Flushes, then stops the background task (and closes the connections the producer
    /// opened). Later sends fail with [`Error::Closed`]. If the flush does not finish within
    /// `timeout` (`None`: 30 s, as the consumer's and Java's `close()`), undelivered records
    /// fail with [`Error::Closed`] (some may still have been written) and this returns
    /// [`Error::Timeout`]. Closing again is a no-op.
    ///
    /// # Cancel safety
    /// Dropping it leaves the producer closed to new sends while the records already queued
    /// still go out in the background; call `close` again to wait for them.
    pub async fn close(&self, timeout: impl Into<Option<Duration>>) -> Result<()> {
        let timeout = timeout.into().unwrap_or(DEFAULT_CLOSE_TIMEOUT);
        let shared = &self.inner.shared;
        shared.closed.store(true, Ordering::Release);
        let flushed = tokio::time::timeout(timeout, self.flush()).await.is_ok();
        shared.lock().closing = true;
        if !flushed {
            shared.abort.store(true, Ordering::Release);
            shared.memory.close(); // wakes sends waiting for memory
        }
        shared.wake.notify_one();
        let task = self.inner.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut task) = task {
            if tokio::time::timeout(sender::TASK_STOP_GRACE, &mut task).await.is_err() {
                // Only a send racing with close can keep it busy; stop it for good.
                shared.abort.store(true, Ordering::Release);
                shared.wake.notify_one();
                let _ = task.await;
            }
        }
        if flushed {
            Ok(())
        } else {
            Err(Error::Timeout {
                what: "closing the producer (undelivered records were failed)".into(),
                after: timeout,
            })
        }
    }
}

/// Ends a flush's "send now" mode, also when the flush is cancelled.
struct FlushGuard<'a>(&'a Shared);

impl Drop for FlushGuard<'_> {
    fn drop(&mut self) {
        let mut acc = self.0.lock();
        acc.flushing = acc.flushing.saturating_sub(1);
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Compile-time check: the producer and its futures can move across tasks and threads.
#[cfg(test)]
#[allow(dead_code)]
fn futures_are_send(p: &Producer, r: ProducerRecord) {
    fn is_send<T: Send>(_: T) {}
    fn is_sync<T: Send + Sync>() {}
    is_sync::<Producer>();
    is_sync::<DeliveryFuture>();
    is_send(p.send(r.clone()));
    is_send(p.send_and_wait(r));
    is_send(p.flush());
    is_send(p.close(Duration::ZERO));
}
