//! What a poll hands out.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

pub use crate::protocol::records::{Header, TimestampType};
pub use crate::topic_partition::TopicPartition;

/// One record delivered to this consumer, held under an acquisition lock until acknowledged.
#[derive(Clone)]
pub struct ConsumerRecord {
    /// Topic name (shared by the records of one fetch: cloning it is cheap).
    pub topic: Arc<str>,
    /// Partition index.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// Timestamp (ms since the epoch).
    pub timestamp: i64,
    /// Create time or log-append time.
    pub timestamp_type: TimestampType,
    /// Key (None for a null key).
    pub key: Option<Bytes>,
    /// Value (None for a null value).
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<Header>,
    /// How many times this record has been delivered (1 the first time). The broker archives
    /// a record once it reaches the group's `share.delivery.count.limit`.
    pub delivery_count: i16,
    /// The leader epoch of the batch, if known.
    pub leader_epoch: Option<i32>,
    /// A conservative local deadline for the acquisition lock: computed from the moment the
    /// fetch request was *sent*, since the broker's clock started before the response arrived.
    pub(crate) lock_deadline: Option<Instant>,
    /// Where `acknowledge` records this record's acknowledgement: its slot in the batch of
    /// the poll that handed it out (set by that poll; None before). Clones share it.
    pub(crate) ack_slot: Option<super::AckSlot>,
}

// By hand, to leave out `ack_slot` (it would print its whole poll batch); otherwise what
// `#[derive(Debug)]` printed.
impl fmt::Debug for ConsumerRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsumerRecord")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .field("timestamp", &self.timestamp)
            .field("timestamp_type", &self.timestamp_type)
            .field("key", &self.key)
            .field("value", &self.value)
            .field("headers", &self.headers)
            .field("delivery_count", &self.delivery_count)
            .field("leader_epoch", &self.leader_epoch)
            .field("lock_deadline", &self.lock_deadline)
            .finish()
    }
}

impl ConsumerRecord {
    /// A bare record for unit tests: no key, value or headers, first delivery.
    #[cfg(test)]
    pub(crate) fn for_test(topic: Arc<str>, partition: i32, offset: i64) -> ConsumerRecord {
        ConsumerRecord {
            topic,
            partition,
            offset,
            timestamp: 0,
            timestamp_type: TimestampType::CreateTime,
            key: None,
            value: None,
            headers: Vec::new(),
            delivery_count: 1,
            leader_epoch: None,
            lock_deadline: None,
            ack_slot: None,
        }
    }

    /// The record's topic-partition.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.to_string(), self.partition)
    }

    /// When this consumer's hold on the record ends at the latest (conservative: it may end a
    /// little later on the broker, never earlier). Acknowledge before then, or RENEW.
    pub fn lock_deadline(&self) -> Option<Instant> {
        self.lock_deadline
    }

    /// The value as UTF-8 text, if it is.
    pub fn value_str(&self) -> Option<&str> {
        self.value.as_deref().and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The key as UTF-8 text, if it is.
    pub fn key_str(&self) -> Option<&str> {
        self.key.as_deref().and_then(|v| std::str::from_utf8(v).ok())
    }
}
