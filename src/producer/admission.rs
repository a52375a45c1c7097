//! What `send` does before the accumulator: bounding a record's size, reserving buffer
//! memory (where `send` waits when the producer is behind), and loading a topic on first use.

use std::sync::Arc;

use tokio::sync::{Semaphore, TryAcquireError};

use super::sender::Shared;
use crate::error::{Error, ErrorCode, Result};

/// The v2 batch header, which every batch carries once.
pub(super) const BATCH_OVERHEAD: usize = 61;

/// Takes `size` bytes of buffer memory, waiting up to `max.block.ms`.
pub(super) async fn reserve(shared: &Shared, size: usize) -> Result<Reservation> {
    let memory = &shared.memory;
    let too_large = || {
        Error::InvalidArgument(format!(
            "the record is {size} bytes when serialized, larger than buffer.memory ({}); raise buffer.memory",
            shared.config.buffer_memory
        ))
    };
    let n = u32::try_from(size).map_err(|_| too_large())?;
    if size > shared.config.buffer_memory.min(Semaphore::MAX_PERMITS) {
        return Err(too_large());
    }
    let permit = match memory.try_acquire_many(n) {
        Ok(p) => p,
        Err(TryAcquireError::Closed) => return Err(Error::Closed),
        Err(TryAcquireError::NoPermits) => {
            let max_block = shared.config.max_block;
            let started = tokio::time::Instant::now();
            let waited = tokio::time::timeout(max_block, memory.acquire_many(n)).await;
            shared.metrics.buffer_wait(started.elapsed(), waited.is_err());
            match waited {
                Ok(Ok(p)) => p,
                Ok(Err(_)) => return Err(Error::Closed),
                Err(_) => {
                    return Err(Error::Timeout {
                        what: "waiting for buffer.memory to free up".into(),
                        after: max_block,
                    })
                }
            }
        }
    };
    permit.forget(); // given back when the batch is answered, or by the guard on failure
    Ok(Reservation(size, memory.clone()))
}

/// Loads a topic's metadata on its first use (bounded by `max.block.ms`).
pub(super) async fn load_topic(shared: &Shared, topic: &str) -> Result<()> {
    let max_block = shared.config.max_block;
    let topics = [topic.to_string()];
    let lookup = shared.cluster.ensure_topics(&topics);
    match tokio::time::timeout(max_block, lookup).await {
        Err(_) => return Err(Error::Timeout { what: format!("metadata of topic {topic}"), after: max_block }),
        Ok(Err(e)) if e.code() == Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION) => {
            return Err(Error::UnknownTopic(topic.to_string()))
        }
        Ok(Err(e)) => return Err(e),
        Ok(Ok(())) => {}
    }
    let n = shared.cluster.with_metadata(|m| m.topics.get(topic).map(|t| t.partitions.len()));
    match n {
        Some(n) if n > 0 => {
            shared.lock().set_partitions(topic, n);
            Ok(())
        }
        _ => Err(Error::UnknownTopic(topic.to_string())),
    }
}

/// Buffer memory held by a `send` in progress; returned if the record never reaches a batch.
pub(super) struct Reservation(pub usize, Arc<Semaphore>);

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.0 > 0 {
            self.1.add_permits(self.0);
        }
    }
}

/// An upper bound of a record's encoded size inside a batch: the data plus the largest
/// varints of the record framing (length 5, attributes 1, timestamp delta 10, offset delta 5,
/// key and value lengths 5 each, header count 5; 10 per header).
pub(super) fn record_size_bound(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(String, Option<bytes::Bytes>)],
) -> usize {
    let data = key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
    let hdrs: usize = headers.iter().map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, |v| v.len())).sum();
    36 + data + hdrs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::records::{Header, RecordInput};

    #[test]
    fn size_bound_covers_the_encoding() {
        use crate::protocol::records::BatchBuilder;
        let headers = vec![("h".to_string(), Some(bytes::Bytes::from_static(b"v"))), ("n".into(), None)];
        let rec = RecordInput {
            key: Some("key".into()),
            value: Some(vec![7u8; 100].into()),
            headers: headers.iter().map(|(k, v)| Header::new(k.clone(), v.clone())).collect(),
            timestamp: 1_700_000_000_000,
        };
        let bound = record_size_bound(rec.key.as_deref(), rec.value.as_deref(), &headers);
        let b = BatchBuilder::new();
        let exact = b.size_with(&rec) - BATCH_OVERHEAD;
        assert!(bound >= exact && bound < exact + 50, "bound {bound}, exact {exact}");
    }
}
