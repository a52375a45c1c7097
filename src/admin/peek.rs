//! Reading the record at an offset without consuming it: a plain Fetch (key 1) to each
//! partition's leader, as a replica-less reader (`replica_id` -1), so it acquires nothing,
//! commits nothing and joins no group. The exporter reads the timestamp of the record at a
//! share partition's start offset with it: the age of the oldest record not yet acknowledged.
//!
//! Topics are named (Fetch v4..=v12): v13 and later name them by id, which would need the
//! topic ids first, for no gain here.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::offsets::TopicPartition;
use super::Admin;
use crate::cluster::TrafficClass;
use crate::error::{Context, Error, Result};
use crate::protocol::records::decode_batches;

/// The oldest and newest Fetch versions asked for: v4 is the oldest a Kafka 4 broker has,
/// v12 the newest that names topics.
pub(super) const FETCH_VERSIONS: (i16, i16) = (4, 12);

/// Bytes asked per partition. Most first batches fit; a larger one comes whole when its
/// partition is asked alone (the broker returns at least one batch for the first partition
/// of a response, KIP-74).
const PARTITION_MAX_BYTES: i32 = 64 * 1024;

/// Partitions per Fetch: bounds one answer to 8 MiB of records.
const PARTITIONS_PER_FETCH: usize = 128;

/// Fetch's answer for an offset outside the log.
pub(super) const OFFSET_OUT_OF_RANGE: i16 = 1;

/// What [`Admin::peek`] found in one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeekedRecord {
    /// The first data record at or after the offset asked for; `None` when there is none below
    /// the high watermark (the offset is the end of the log, or only control records follow).
    pub offset: Option<i64>,
    /// That record's timestamp (ms since the epoch, create or log-append time as the topic
    /// says); `None` with `offset`.
    pub timestamp: Option<i64>,
    /// The partition's high watermark: the offset the next record gets, as consumers see it.
    pub high_watermark: i64,
    /// The partition's log start offset (the oldest record kept).
    pub log_start_offset: i64,
}

impl Admin {
    /// The first record at or after each given offset, read with a plain Fetch from each
    /// partition's leader (nothing is acquired or committed), with the partition's high
    /// watermark. An offset below the log start (records deleted by retention) is read from
    /// the log start instead. One result per partition asked.
    ///
    /// # Errors
    /// The outer error when the metadata cannot be read or a leader cannot be reached; a
    /// partition's error (no leader, not the leader any more, unknown topic) in its own result.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait; Fetch changes nothing on the broker.
    pub async fn peek(&self, at: &[(TopicPartition, i64)]) -> Result<BTreeMap<TopicPartition, Result<PeekedRecord>>> {
        let mut out = BTreeMap::new();
        if at.is_empty() {
            return Ok(out);
        }
        let topics: Vec<String> =
            at.iter().map(|(tp, _)| tp.topic.clone()).collect::<BTreeSet<_>>().into_iter().collect();
        let topic_errors: BTreeMap<String, i16> = self.cluster.refresh_metadata(&topics).await?.into_iter().collect();
        let mut known = Vec::with_capacity(at.len());
        for (tp, offset) in at {
            // A topic the metadata refuses (deleted, not authorized) is its own error, not a
            // leaderless partition.
            match topic_errors.get(&tp.topic).and_then(|c| Error::for_topic(*c, "Fetch", &tp.topic)) {
                Some(e) => {
                    out.insert(tp.clone(), Err(e));
                }
                None => known.push((tp.clone(), *offset)),
            }
        }
        // Asked once: a partition without a leader answers that error (no retry here).
        let (by_leader, leaderless) = self.by_leader("Fetch", known);
        out.extend(leaderless.into_iter().map(|((tp, _), e)| (tp, Err(e))));
        for (leader, parts) in by_leader {
            let mut alone = Vec::new();
            let mut answers = Vec::with_capacity(parts.len());
            for chunk in parts.chunks(PARTITIONS_PER_FETCH) {
                answers.extend(self.peek_at_leader(leader, chunk).await?);
            }
            for (tp, res) in answers {
                match res {
                    Peek::Done(r) => {
                        out.insert(tp, r);
                    }
                    Peek::TooLarge(offset) => alone.push((tp, offset)),
                    Peek::Deleted(log_start) => alone.push((tp, log_start)),
                }
            }
            // Asked alone, the first batch comes whole whatever its size.
            for (tp, offset) in alone {
                let mut one = self.peek_at_leader(leader, &[(tp.clone(), offset)]).await?;
                let r = match one.pop() {
                    Some((_, Peek::Done(r))) => r,
                    _ => Err(Error::IncompleteResponse { api: "Fetch", missing: format!("a record batch of {tp}") }),
                };
                out.insert(tp, r);
            }
        }
        Ok(out)
    }

    async fn peek_at_leader(
        &self,
        leader: i32,
        parts: &[(TopicPartition, i64)],
    ) -> Result<Vec<(TopicPartition, Peek)>> {
        let conn = self.cluster.broker(leader, TrafficClass::Control).await?;
        let resp = self.cluster.send(&conn, &fetch_request(parts), FETCH_VERSIONS).await?;
        if let Some(e) = Error::from_code(resp.error_code, None, Context::api("Fetch").broker(leader)) {
            return Err(e);
        }
        Ok(parts.iter().map(|(tp, offset)| (tp.clone(), read_partition(&resp, leader, tp, *offset))).collect())
    }
}

/// One partition's answer, before any second ask.
#[derive(Debug)]
enum Peek {
    Done(Result<PeekedRecord>),
    /// Records below the high watermark, but none came: the first batch is larger than
    /// [`PARTITION_MAX_BYTES`] and the partition was not first in the response.
    TooLarge(i64),
    /// The offset is below the log start (retention deleted it): ask from the log start.
    Deleted(i64),
}

fn fetch_request(parts: &[(TopicPartition, i64)]) -> FetchRequest {
    plain_fetch(parts, Duration::ZERO, 0, PARTITION_MAX_BYTES)
}

/// A replica-less, sessionless Fetch of `parts`, each from its offset, `partition_max_bytes`
/// each, waiting at the broker up to `max_wait` for `min_bytes` (the module docs say why
/// replica-less; `read_log` asks the same way).
pub(super) fn plain_fetch(
    parts: &[(TopicPartition, i64)],
    max_wait: Duration,
    min_bytes: i32,
    partition_max_bytes: i32,
) -> FetchRequest {
    let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    for (tp, offset) in parts {
        topics.entry(&tp.topic).or_default().push(
            FetchPartition::default()
                .with_partition(tp.partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(*offset)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(partition_max_bytes),
        );
    }
    let n = i32::try_from(parts.len()).unwrap_or(i32::MAX);
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX))
        .with_min_bytes(min_bytes)
        .with_max_bytes(partition_max_bytes.saturating_mul(n))
        .with_isolation_level(0)
        .with_session_id(0)
        // -1: a sessionless, full fetch (KIP-227's FINAL_EPOCH); no fetch session is made.
        .with_session_epoch(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partitions(ps)
                })
                .collect(),
        )
}

/// The answer's entry for `tp`; an answer without it is incomplete.
pub(super) fn partition_of<'a>(resp: &'a FetchResponse, tp: &TopicPartition) -> Result<&'a PartitionData> {
    resp.responses
        .iter()
        .filter(|t| t.topic.0.as_str() == tp.topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == tp.partition)
        .ok_or_else(|| Error::IncompleteResponse { api: "Fetch", missing: tp.to_string() })
}

fn read_partition(resp: &FetchResponse, leader: i32, tp: &TopicPartition, offset: i64) -> Peek {
    let p = match partition_of(resp, tp) {
        Ok(p) => p,
        Err(e) => return Peek::Done(Err(e)),
    };
    let ctx = || Context::api("Fetch").broker(leader).partition(&tp.topic, tp.partition);
    if p.error_code == OFFSET_OUT_OF_RANGE && p.log_start_offset > offset {
        return Peek::Deleted(p.log_start_offset);
    }
    if let Some(e) = Error::from_code(p.error_code, None, ctx()) {
        return Peek::Done(Err(e));
    }
    let records = match p.records.clone().map(decode_batches).transpose() {
        Ok(r) => r.unwrap_or_default(),
        Err(source) => return Peek::Done(Err(Error::Malformed { context: ctx(), source })),
    };
    let first = records.iter().find(|r| r.offset >= offset);
    let empty = p.records.as_ref().is_none_or(|r| r.is_empty());
    if first.is_none() && empty && offset < p.high_watermark {
        return Peek::TooLarge(offset);
    }
    Peek::Done(Ok(PeekedRecord {
        offset: first.map(|r| r.offset),
        timestamp: first.map(|r| r.timestamp),
        high_watermark: p.high_watermark,
        log_start_offset: p.log_start_offset,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_reads_as_no_replica_and_opens_no_session() {
        let req = fetch_request(&[(TopicPartition::new("t", 0), 5), (TopicPartition::new("t", 1), 7)]);
        assert_eq!(req.replica_id, BrokerId(-1), "a consumer's fetch, not a follower's");
        assert_eq!((req.session_id, req.session_epoch), (0, -1), "sessionless");
        assert_eq!(req.max_wait_ms, 0, "never parks at the broker");
        assert_eq!(req.topics.len(), 1);
        let offsets: Vec<i64> = req.topics[0].partitions.iter().map(|p| p.fetch_offset).collect();
        assert_eq!(offsets, [5, 7]);
    }

    #[test]
    fn an_empty_answer_below_the_high_watermark_asks_again_alone() {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        let tp = TopicPartition::new("t", 0);
        let resp = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![PartitionData::default()
                .with_partition_index(0)
                .with_high_watermark(10)
                .with_records(Some(bytes::Bytes::new()))])]);
        assert!(matches!(read_partition(&resp, 1, &tp, 3), Peek::TooLarge(3)));
        // At the end of the log: nothing to read, no record, no second ask.
        match read_partition(&resp, 1, &tp, 10) {
            Peek::Done(Ok(r)) => assert_eq!((r.offset, r.timestamp, r.high_watermark), (None, None, 10)),
            other => panic!("{other:?}"),
        }
        // Garbage where records should be is an error value, not a panic.
        let bad = resp.clone().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![PartitionData::default()
                .with_partition_index(0)
                .with_high_watermark(10)
                .with_records(Some(bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0xff])))])]);
        assert!(matches!(read_partition(&bad, 1, &tp, 0), Peek::Done(_)));
    }
}
