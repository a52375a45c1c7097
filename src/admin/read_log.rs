//! Reading a partition's records from an offset on, for a reader that follows a small
//! topic from its start (the sink runtime's config topic): a plain Fetch (key 1) to the
//! partition's leader as a replica-less reader (`replica_id` -1), so nothing is acquired,
//! committed or joined. The answer waits at the broker up to `max_wait` for a record, so a
//! follower calls it in a loop without spinning.
//!
//! Topics are named (Fetch v4..=v12), as in [`peek`](super::peek).

use std::time::Duration;

use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::offsets::TopicPartition;
use super::peek::{partition_of, plain_fetch, FETCH_VERSIONS, OFFSET_OUT_OF_RANGE};
use super::Admin;
use crate::cluster::TrafficClass;
use crate::error::{Context, Error, Result};
use crate::protocol::records::{decode_batches, Batches, Record};

/// Bytes asked per call; the broker returns a larger first batch whole (KIP-74).
const MAX_BYTES: i32 = 1 << 20;

/// What one [`Admin::read_log`] call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogChunk {
    /// The records at or after the offset asked for, in offset order.
    pub(crate) records: Vec<Record>,
    /// Where the next call starts: after the last record, at the log start when the offset
    /// asked for was deleted, else the offset asked for.
    pub(crate) next_offset: i64,
    /// The partition's high watermark.
    pub(crate) high_watermark: i64,
}

impl Admin {
    /// The records of `tp` from `offset` on (as many as one answer carries), waiting up to
    /// `max_wait` at the broker when there are none yet (at most half `request.timeout.ms`).
    /// An offset below the log start (compaction or retention removed it) reads from the
    /// log start.
    ///
    /// The long poll goes on the Fetch connection, so it does not hold up this admin's
    /// other requests.
    ///
    /// # Errors
    /// The leader cannot be found or reached, or the partition answers an error (unknown
    /// topic, not the leader any more); the metadata is then asked for again, so calling
    /// again (after a backoff) reads from the new leader.
    pub(crate) async fn read_log(&self, tp: &TopicPartition, offset: i64, max_wait: Duration) -> Result<LogChunk> {
        // The metadata is asked for on the first read and after a failed one only: a
        // follower calls this twice a second or more, and the leader rarely moves.
        let cached = self.cluster.with_metadata(|m| m.leader(&tp.topic, tp.partition));
        let leader = match cached {
            Some(l) => l,
            None => self.refresh_leader(tp).await?,
        };
        let read = self.read_at(leader, tp, offset, max_wait).await;
        if read.is_err() {
            // Not the leader any more, a broker gone: the next call asks for the leader anew.
            let _ = self.cluster.refresh_metadata(std::slice::from_ref(&tp.topic)).await;
        }
        read
    }

    async fn refresh_leader(&self, tp: &TopicPartition) -> Result<i32> {
        let topic_errors = self.cluster.refresh_metadata(std::slice::from_ref(&tp.topic)).await?;
        if let Some(e) = topic_errors.iter().find_map(|(t, c)| Error::for_topic(*c, "Fetch", t)) {
            return Err(e);
        }
        let (by_leader, mut leaderless) = self.by_leader("Fetch", [(tp.clone(), ())]);
        if let Some((_, e)) = leaderless.pop() {
            return Err(e);
        }
        by_leader
            .keys()
            .next()
            .copied()
            .ok_or_else(|| Error::IncompleteResponse { api: "Fetch", missing: format!("a leader for {tp}") })
    }

    async fn read_at(&self, leader: i32, tp: &TopicPartition, offset: i64, max_wait: Duration) -> Result<LogChunk> {
        // The wait at the broker must end well before the request times out here.
        let max_wait = max_wait.min(self.cluster.config().request_timeout / 2);
        let conn = self.cluster.broker(leader, TrafficClass::Fetch).await?;
        let resp = self.cluster.send(&conn, &fetch_request(tp, offset, max_wait), FETCH_VERSIONS).await?;
        if let Some(e) = Error::from_code(resp.error_code, None, Context::api("Fetch").broker(leader)) {
            return Err(e);
        }
        read_answer(&resp, leader, tp, offset)
    }
}

fn fetch_request(tp: &TopicPartition, offset: i64, max_wait: Duration) -> FetchRequest {
    plain_fetch(&[(tp.clone(), offset)], max_wait, 1, MAX_BYTES)
}

fn read_answer(resp: &FetchResponse, leader: i32, tp: &TopicPartition, offset: i64) -> Result<LogChunk> {
    let p = partition_of(resp, tp)?;
    let ctx = || Context::api("Fetch").broker(leader).partition(&tp.topic, tp.partition);
    if p.error_code == OFFSET_OUT_OF_RANGE && p.log_start_offset > offset {
        return Ok(LogChunk { records: Vec::new(), next_offset: p.log_start_offset, high_watermark: p.high_watermark });
    }
    if let Some(e) = Error::from_code(p.error_code, None, ctx()) {
        return Err(e);
    }
    let raw = p.records.clone().unwrap_or_default();
    // Where the complete batches end: a compacted batch may hold no record at or after the
    // offset asked for (compaction removed them, the batch keeps its last offset), so the
    // next read starts after the batch, not after its last record.
    let mut batches_end = offset;
    for batch in Batches::new(raw.clone()) {
        let last = batch.and_then(|b| b.last_offset()).map_err(|source| Error::Malformed { context: ctx(), source })?;
        batches_end = batches_end.max(last.saturating_add(1));
    }
    if batches_end == offset && !raw.is_empty() && offset < p.high_watermark {
        // Bytes, but not one whole batch: asking again at once would spin on the same answer.
        return Err(Error::IncompleteResponse {
            api: "Fetch",
            missing: format!("a whole record batch at {offset} of {tp}"),
        });
    }
    let mut records = decode_batches(raw).map_err(|source| Error::Malformed { context: ctx(), source })?;
    // A batch comes whole: the records before the offset asked for were read before.
    records.retain(|r| r.offset >= offset);
    records.sort_by_key(|r| r.offset);
    Ok(LogChunk { records, next_offset: batches_end, high_watermark: p.high_watermark })
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::error::ErrorCode;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};

    fn answer(p: PartitionData) -> FetchResponse {
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![p.with_partition_index(0)])])
    }

    #[test]
    fn the_request_waits_at_the_broker_and_opens_no_session() {
        let req = fetch_request(&TopicPartition::new("t", 0), 7, Duration::from_millis(500));
        assert_eq!(req.replica_id, BrokerId(-1));
        assert_eq!((req.session_id, req.session_epoch), (0, -1));
        assert_eq!((req.max_wait_ms, req.min_bytes), (500, 1));
        assert_eq!(req.topics[0].partitions[0].fetch_offset, 7);
    }

    #[test]
    fn an_empty_answer_stays_put_and_a_deleted_offset_moves_to_the_log_start() {
        let tp = TopicPartition::new("t", 0);
        let empty = answer(PartitionData::default().with_high_watermark(3));
        let c = read_answer(&empty, 1, &tp, 3).unwrap();
        assert_eq!((c.records.len(), c.next_offset, c.high_watermark), (0, 3, 3));
        let gone = answer(
            PartitionData::default()
                .with_error_code(OFFSET_OUT_OF_RANGE)
                .with_log_start_offset(5)
                .with_high_watermark(9),
        );
        assert_eq!(read_answer(&gone, 1, &tp, 0).unwrap().next_offset, 5);
    }

    #[test]
    fn records_before_the_offset_are_dropped_and_the_next_read_starts_after_the_batch() {
        use crate::protocol::records::{BatchBuilder, Compression, RecordInput};
        let mut b = BatchBuilder::new();
        for i in 0..3 {
            let rec = RecordInput { key: Some(format!("k{i}").into()), value: None, headers: Vec::new(), timestamp: i };
            b.push(&rec).unwrap();
        }
        let batch = b.finish(Compression::None).unwrap();
        let tp = TopicPartition::new("t", 0);
        let resp = answer(PartitionData::default().with_high_watermark(3).with_records(Some(batch.clone())));
        let c = read_answer(&resp, 1, &tp, 1).unwrap();
        let offsets: Vec<i64> = c.records.iter().map(|r| r.offset).collect();
        assert_eq!((offsets, c.next_offset), (vec![1, 2], 3));
        // Asked past every record of the batch (compaction removed them): after the batch.
        let c = read_answer(&resp, 1, &tp, 3).unwrap();
        assert_eq!((c.records.len(), c.next_offset), (0, 3));
    }

    #[test]
    fn errors_and_garbage_are_values() {
        let tp = TopicPartition::new("t", 0);
        let unknown = answer(PartitionData::default().with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0));
        assert!(read_answer(&unknown, 1, &tp, 0).is_err());
        let bad = answer(
            PartitionData::default()
                .with_high_watermark(10)
                .with_records(Some(bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0xff]))),
        );
        assert!(read_answer(&bad, 1, &tp, 0).is_err());
        let missing = FetchResponse::default();
        assert!(read_answer(&missing, 1, &tp, 0).is_err());
        // A batch cut off below the high watermark: an error (the follower backs off), no spin.
        let cut = answer(
            PartitionData::default()
                .with_high_watermark(10)
                .with_records(Some(bytes::Bytes::from_static(&[0; 20]))),
        );
        assert!(read_answer(&cut, 1, &tp, 0).is_err());
        assert!(read_answer(&missing, 1, &tp, 0).is_err());
    }
}
