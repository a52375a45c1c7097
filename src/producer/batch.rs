//! One batch of one partition, from its first record until the broker answers for it: the
//! records encoded so far, the finished (compressed, stamped) payload, its retries and its
//! idempotence stamp. The accumulator fills and drains batches, the sequences stamp them, the
//! sender sends them; none of them is needed to say what a batch is.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::record::{dropped_error, BatchDone};
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::protocol::records::{restamp, BatchBuilder, Compression, ProducerStamp, RecordInput};
use crate::protocol::CodecError;

/// One batch of one partition, from its first record until the broker answers for it.
pub(crate) struct Batch {
    pub topic: Arc<str>,
    pub partition: i32,
    pub done: Arc<BatchDone>,
    pub created: Instant,
    pub records: usize,
    /// Open batches are encoded into; drained ones are finished into `payload`.
    builder: Option<BatchBuilder>,
    payload: Option<Bytes>,
    /// No more appends: full, drained, or retried.
    pub closed: bool,
    pub attempts: u32,
    pub retry_at: Option<Instant>,
    pub backoff: Backoff,
    /// Idempotence: the producer id, epoch and base sequence, from the first drain on.
    pub stamp: Option<ProducerStamp>,
    /// Idempotence: the batch's place among its partition's stamped batches.
    pub order: u64,
    /// The stamp the finished payload carries (it changes when a reset restamps the batch).
    written: Option<ProducerStamp>,
    /// The records' encoded size before compression, known once finished (for the metrics).
    pub uncompressed: usize,
    /// Buffer memory held until the batch is answered (released on drop).
    reserved: usize,
    memory: Arc<Semaphore>,
}

impl Batch {
    pub(super) fn new(
        topic: Arc<str>,
        partition: i32,
        capacity: usize,
        memory: Arc<Semaphore>,
        backoff: Backoff,
    ) -> Self {
        Batch {
            topic,
            partition,
            done: Arc::default(),
            created: Instant::now(),
            records: 0,
            builder: Some(BatchBuilder::with_capacity(capacity)),
            payload: None,
            closed: false,
            attempts: 0,
            retry_at: None,
            backoff,
            stamp: None,
            order: 0,
            written: None,
            uncompressed: 0,
            reserved: 0,
            memory,
        }
    }

    /// Whether `rec` fits in the batch without taking it past `batch_size` (an empty batch
    /// takes any record: a record larger than batch.size gets a batch of its own).
    pub(super) fn fits(&self, rec: &RecordInput, batch_size: usize) -> bool {
        self.records == 0 || self.builder.as_ref().is_some_and(|b| b.size_with(rec) <= batch_size)
    }

    /// Appends `rec`, holding `reserved` bytes of buffer memory until the batch is answered;
    /// its index in the batch, or None if the batch was finished already.
    pub(super) fn append(&mut self, rec: &RecordInput, reserved: usize) -> Result<Option<i32>> {
        let Some(builder) = self.builder.as_mut() else {
            return Ok(None);
        };
        let index = builder.push(rec).map_err(|e| Error::InvalidArgument(format!("record cannot be encoded: {e}")))?;
        self.records += 1;
        self.reserved += reserved;
        Ok(Some(index))
    }

    /// Uncompressed size so far (the exact size of a finished uncompressed batch).
    pub(super) fn size(&self) -> usize {
        match (&self.builder, &self.payload) {
            (Some(b), _) => b.size_estimate(),
            (None, Some(p)) => p.len(),
            (None, None) => 0,
        }
    }

    /// Compresses and seals the batch (once; a retried batch keeps its bytes, restamped only
    /// if an epoch bump gave it a new sequence).
    pub(super) fn finish(&mut self, compression: Compression) -> Result<Bytes, CodecError> {
        let stamp = self.stamp.unwrap_or(ProducerStamp::NONE);
        if let Some(b) = self.builder.take() {
            self.uncompressed = b.size_estimate();
            self.payload = Some(b.finish_stamped(compression, stamp)?);
            self.written = self.stamp;
        }
        let payload = self
            .payload
            .as_mut()
            .ok_or_else(|| CodecError::Invalid { what: "record batch", detail: "batch has no records".into() })?;
        if self.written != self.stamp {
            *payload = restamp(payload, stamp)?;
            self.written = self.stamp;
        }
        Ok(payload.clone())
    }

    /// Whether the sender may take the batch now; otherwise when it may.
    pub(super) fn ready_at(&self, linger: Duration, hurry: bool) -> Instant {
        let sendable = if self.closed || hurry { self.created } else { self.created + linger };
        self.retry_at.map_or(sendable, |r| r.max(sendable))
    }

    pub(super) fn deadline(&self, delivery_timeout: Duration) -> Instant {
        self.created + delivery_timeout
    }
}

#[cfg(test)]
impl Batch {
    /// A batch with one record, for tests of the sender.
    pub(super) fn for_test(topic: &str, partition: i32) -> Batch {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let mut b = Batch::new(Arc::from(topic), partition, 1024, Arc::new(Semaphore::new(0)), backoff);
        let rec = RecordInput { value: Some(Bytes::from_static(b"v")), ..Default::default() };
        if let Some(builder) = b.builder.as_mut() {
            let _ = builder.push(&rec);
            b.records = 1;
        }
        b
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // A batch dropped unanswered (close timed out, task stopped) must not leave futures
        // hanging; an answered batch ignores this second completion.
        self.done.complete(Err(dropped_error()));
        if self.reserved > 0 {
            self.memory.add_permits(self.reserved);
        }
    }
}
