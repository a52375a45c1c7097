//! What a caller hands to `send`, and what it gets back.
//!
//! Completion is per batch, not per record: every record of a batch shares one
//! [`BatchDone`], and a [`DeliveryFuture`] is that handle plus the record's index. Sending a
//! record therefore allocates nothing for its future.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};

use bytes::Bytes;

use crate::error::{Error, Result};

/// A record to send. Build it with [`ProducerRecord::new`] and the builder methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The topic.
    pub topic: String,
    /// The partition; `None` lets the partitioner choose (by key hash, or sticky).
    pub partition: Option<i32>,
    /// The key; `None` for a null key.
    pub key: Option<Bytes>,
    /// The value; `None` for a null value (a tombstone).
    pub value: Option<Bytes>,
    /// Headers, in order (keys may repeat).
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Create time in ms since the epoch; `None` uses the time of `send`.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record with a value and nothing else.
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            partition: None,
            key: None,
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp: None,
        }
    }

    /// A record with a key and a null value (a tombstone for compacted topics).
    pub fn tombstone(topic: impl Into<String>, key: impl Into<Bytes>) -> Self {
        ProducerRecord { value: None, ..ProducerRecord::new(topic, Bytes::new()).key(key) }
    }

    /// Sets the key (which also decides the partition, unless one is set).
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sends to this partition.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.headers.push((key.into(), Some(value.into())));
        self
    }

    /// Adds a header with a null value.
    pub fn null_header(mut self, key: impl Into<String>) -> Self {
        self.headers.push((key.into(), None));
        self
    }

    /// Sets the create time (ms since the epoch).
    pub fn timestamp(mut self, timestamp_ms: i64) -> Self {
        self.timestamp = Some(timestamp_ms);
        self
    }
}

/// Where a record was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The record's offset in the partition.
    pub offset: i64,
    /// The record's timestamp: the broker's append time if the topic uses LogAppendTime,
    /// otherwise the create time that was sent.
    pub timestamp: i64,
}

/// What the broker said about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchOutcome {
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time: i64,
}

#[derive(Default)]
struct DoneState {
    result: Option<Result<BatchOutcome>>,
    /// One slot per waiting future; a future re-polled replaces its own slot, so the list
    /// grows with the number of waiters, not the number of polls.
    wakers: Vec<Option<Waker>>,
}

/// The shared completion of one batch.
#[derive(Default)]
pub(crate) struct BatchDone {
    state: Mutex<DoneState>,
}

impl BatchDone {
    fn lock(&self) -> std::sync::MutexGuard<'_, DoneState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the result (the first call wins) and wakes every waiter.
    pub(crate) fn complete(&self, result: Result<BatchOutcome>) {
        let wakers = {
            let mut st = self.lock();
            if st.result.is_some() {
                return;
            }
            st.result = Some(result);
            std::mem::take(&mut st.wakers)
        };
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
    }

    /// Whether the batch has a result.
    pub(crate) fn is_done(&self) -> bool {
        self.lock().result.is_some()
    }

    fn poll_done(&self, cx: &mut TaskContext<'_>, slot: &mut Option<usize>) -> Poll<Result<BatchOutcome>> {
        let mut st = self.lock();
        if let Some(r) = &st.result {
            return Poll::Ready(r.clone());
        }
        let waker = Some(cx.waker().clone());
        match *slot {
            Some(i) if i < st.wakers.len() => st.wakers[i] = waker,
            _ => {
                *slot = Some(st.wakers.len());
                st.wakers.push(waker);
            }
        }
        Poll::Pending
    }
}

/// Waits for a batch, ignoring its result (for flush).
pub(crate) struct WaitDone {
    pub done: Arc<BatchDone>,
    slot: Option<usize>,
}

impl WaitDone {
    pub(super) fn new(done: Arc<BatchDone>) -> Self {
        WaitDone { done, slot: None }
    }
}

impl Future for WaitDone {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.done.poll_done(cx, &mut this.slot).map(|_| ())
    }
}

/// Resolves to where a sent record was written, or why it could not be.
///
/// Dropping it does not cancel the delivery; the record is sent either way.
#[must_use = "the future tells whether the record was delivered"]
pub struct DeliveryFuture {
    done: Arc<BatchDone>,
    slot: Option<usize>,
    topic: String,
    partition: i32,
    index: i32,
    timestamp: i64,
}

impl std::fmt::Debug for DeliveryFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryFuture")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("done", &self.done.is_done())
            .finish()
    }
}

impl DeliveryFuture {
    pub(crate) fn new(done: Arc<BatchDone>, topic: String, partition: i32, index: i32, timestamp: i64) -> Self {
        DeliveryFuture { done, slot: None, topic, partition, index, timestamp }
    }

    /// The partition the record was assigned to.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.done.poll_done(cx, &mut this.slot).map(|r| {
            r.map(|o| RecordMetadata {
                topic: this.topic.clone(),
                partition: this.partition,
                offset: if o.base_offset >= 0 { o.base_offset + i64::from(this.index) } else { -1 },
                timestamp: if o.log_append_time >= 0 { o.log_append_time } else { this.timestamp },
            })
        })
    }
}

/// Fails a batch that was dropped without an answer (producer closed or its task stopped).
pub(crate) fn dropped_error() -> Error {
    Error::Closed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_fills_fields() {
        let r = ProducerRecord::new("t", "v").key("k").partition(2).header("h", "x").null_header("n").timestamp(7);
        assert_eq!(r.topic, "t");
        assert_eq!(r.partition, Some(2));
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"v"[..]));
        assert_eq!(r.headers, vec![("h".into(), Some(Bytes::from("x"))), ("n".into(), None)]);
        assert_eq!(r.timestamp, Some(7));
        let t = ProducerRecord::tombstone("t", "k");
        assert_eq!((t.value, t.key.as_deref()), (None, Some(&b"k"[..])));
    }

    #[tokio::test]
    async fn futures_resolve_with_base_plus_index() {
        let done = Arc::new(BatchDone::default());
        let f0 = DeliveryFuture::new(done.clone(), "t".into(), 1, 0, 100);
        let f2 = DeliveryFuture::new(done.clone(), "t".into(), 1, 2, 300);
        let waiter = tokio::spawn(f2);
        tokio::task::yield_now().await;
        done.complete(Ok(BatchOutcome { base_offset: 40, log_append_time: -1 }));
        done.complete(Err(Error::Closed)); // ignored: first result wins
        let m = f0.await.unwrap();
        assert_eq!((m.partition, m.offset, m.timestamp), (1, 40, 100));
        let m = waiter.await.unwrap().unwrap();
        assert_eq!((m.offset, m.timestamp), (42, 300));
        let f = DeliveryFuture::new(done, "t".into(), 1, 0, 5);
        assert_eq!(f.await.unwrap().offset, 40);
    }

    #[tokio::test]
    async fn errors_reach_every_future() {
        let done = Arc::new(BatchDone::default());
        let f = DeliveryFuture::new(done.clone(), "t".into(), 0, 3, 0);
        done.complete(Err(dropped_error()));
        assert!(matches!(f.await, Err(Error::Closed)));
        WaitDone::new(done).await;
    }
}
