//! ShareFetch (API key 78), versions 1 and 2.
//!
//! Wire layout (`M/ShareFetchRequest.json`, `M/ShareFetchResponse.json`); all structs end in a
//! tagged-field section, all strings and arrays are compact:
//!
//! ```text
//! Request:  GroupId MemberId ShareSessionEpoch MaxWaitMs MinBytes MaxBytes MaxRecords BatchSize
//!           [v2: ShareAcquireMode:i8 IsRenewAck:bool]
//!           Topics[TopicId Partitions[PartitionIndex AcknowledgementBatches[..]]]
//!           ForgottenTopicsData[TopicId Partitions[i32]]
//! Response: ThrottleTimeMs ErrorCode ErrorMessage AcquisitionLockTimeoutMs
//!           Responses[TopicId Partitions[PartitionIndex ErrorCode ErrorMessage
//!             AcknowledgeErrorCode AcknowledgeErrorMessage CurrentLeader{LeaderId LeaderEpoch}
//!             Records AcquiredRecords[FirstOffset LastOffset DeliveryCount]]]
//!           NodeEndpoints[NodeId Host Port Rack]
//! ```
//!
//! The response is the same at v1 and v2. `CurrentLeader` and `NodeEndpoints` are ordinary
//! fields here, not tagged fields as in the classic FetchResponse.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::common::*;
use crate::protocol::compact::*;
use crate::protocol::CodecError;

const REQ: &str = "ShareFetchRequest";
const RESP: &str = "ShareFetchResponse";

/// `ShareAcquireMode` 0: acquire whole batches; `max_records` may be exceeded (v1 behaviour).
pub const ACQUIRE_MODE_BATCH_OPTIMIZED: i8 = 0;
/// `ShareAcquireMode` 1: acquire at most `max_records` records. Version 2 only.
pub const ACQUIRE_MODE_RECORD_LIMIT: i8 = 1;

/// A ShareFetch request body (no request header).
///
/// `group_id` and `member_id` are nullable on the wire; a client always sends both, so they are
/// plain strings here and never encoded as null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareFetchRequest {
    /// The share group.
    pub group_id: String,
    /// The member id (chosen by the client, at most 36 chars).
    pub member_id: String,
    /// 0 opens a share session, -1 closes it, otherwise the next epoch.
    pub share_session_epoch: i32,
    /// Longest time the broker may hold the request.
    pub max_wait_ms: i32,
    /// Bytes to accumulate before answering.
    pub min_bytes: i32,
    /// Most bytes to return (default `i32::MAX`, as in the schema).
    pub max_bytes: i32,
    /// Most records to acquire (v1+).
    pub max_records: i32,
    /// Preferred size of acquired-record batches (v1+).
    pub batch_size: i32,
    /// v2 only: [`ACQUIRE_MODE_BATCH_OPTIMIZED`] or [`ACQUIRE_MODE_RECORD_LIMIT`].
    pub share_acquire_mode: i8,
    /// v2 only: set when any batch carries [`ACK_RENEW`]. The broker then requires
    /// `max_wait_ms`, `min_bytes`, `max_bytes` and `max_records` to be 0 and fetches nothing.
    pub is_renew_ack: bool,
    /// Partitions to fetch from, and acknowledgements to piggyback.
    pub topics: Vec<FetchTopic>,
    /// Partitions to drop from the share session.
    pub forgotten_topics_data: Vec<ForgottenTopic>,
}

impl Default for ShareFetchRequest {
    fn default() -> Self {
        Self {
            group_id: String::new(),
            member_id: String::new(),
            share_session_epoch: 0,
            max_wait_ms: 0,
            min_bytes: 0,
            max_bytes: i32::MAX,
            max_records: 0,
            batch_size: 0,
            share_acquire_mode: ACQUIRE_MODE_BATCH_OPTIMIZED,
            is_renew_ack: false,
            topics: Vec::new(),
            forgotten_topics_data: Vec::new(),
        }
    }
}

/// A topic in a [`ShareFetchRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchTopic {
    /// The topic id.
    pub topic_id: Uuid,
    /// Its partitions.
    pub partitions: Vec<FetchPartition>,
}

/// A partition in a [`ShareFetchRequest`]. (v0's `PartitionMaxBytes` is gone from v1.)
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchPartition {
    /// The partition index.
    pub partition_index: i32,
    /// Acknowledgements for records this broker delivered earlier.
    pub acknowledgement_batches: Vec<AcknowledgementBatch>,
}

/// Partitions to remove from the share session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ForgottenTopic {
    /// The topic id.
    pub topic_id: Uuid,
    /// The partition indexes to forget.
    pub partitions: Vec<i32>,
}

/// A ShareFetch response body (the response header already stripped).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareFetchResponse {
    /// Quota throttle time.
    pub throttle_time_ms: i32,
    /// Top-level error code.
    pub error_code: i16,
    /// Top-level error message.
    pub error_message: Option<String>,
    /// How long acquired records stay locked.
    pub acquisition_lock_timeout_ms: i32,
    /// Per-topic results.
    pub responses: Vec<FetchTopicResponse>,
    /// Endpoints of the leaders named in NOT_LEADER_OR_FOLLOWER partitions.
    pub node_endpoints: Vec<NodeEndpoint>,
}

/// A topic in a [`ShareFetchResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchTopicResponse {
    /// The topic id.
    pub topic_id: Uuid,
    /// Per-partition results.
    pub partitions: Vec<FetchPartitionResponse>,
}

/// A partition in a [`ShareFetchResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchPartitionResponse {
    /// The partition index.
    pub partition_index: i32,
    /// Fetch error code.
    pub error_code: i16,
    /// Fetch error message.
    pub error_message: Option<String>,
    /// Error for the acknowledgements piggybacked on the request.
    pub acknowledge_error_code: i16,
    /// Message for `acknowledge_error_code`.
    pub acknowledge_error_message: Option<String>,
    /// The partition's leader as this broker knows it.
    pub current_leader: LeaderIdAndEpoch,
    /// Raw record batches: a zero-copy slice of the response buffer. Only offsets inside
    /// `acquired_records` belong to this member.
    pub records: Option<Bytes>,
    /// The offset ranges acquired by this member.
    pub acquired_records: Vec<AcquiredRecords>,
}

/// A range of offsets acquired by the member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AcquiredRecords {
    /// First acquired offset.
    pub first_offset: i64,
    /// Last acquired offset, inclusive.
    pub last_offset: i64,
    /// How many times these records have been delivered (this delivery included).
    pub delivery_count: i16,
}

/// The form [`decode_acquired`](crate::protocol::records::decode_acquired) takes.
impl From<AcquiredRecords> for crate::protocol::records::AcquiredRange {
    fn from(a: AcquiredRecords) -> Self {
        crate::protocol::records::AcquiredRange {
            first_offset: a.first_offset,
            last_offset: a.last_offset,
            delivery_count: a.delivery_count,
        }
    }
}

impl ShareFetchRequest {
    /// Encodes the body at `version` (1 or 2) onto `buf`.
    ///
    /// At v1, a v2-only value (`share_acquire_mode != 0`, `is_renew_ack`, or an [`ACK_RENEW`]
    /// type) is [`CodecError::Invalid`]: it cannot be sent and must not be silently dropped.
    /// On error `buf` may hold a partial message; discard it.
    pub fn encode(&self, version: i16, buf: &mut BytesMut) -> Result<(), CodecError> {
        check_version(REQ, version)?;
        if version < 2 {
            if self.share_acquire_mode != ACQUIRE_MODE_BATCH_OPTIMIZED {
                return Err(needs_v2(REQ, "ShareFetch", "ShareAcquireMode other than 0"));
            }
            if self.is_renew_ack {
                return Err(needs_v2(REQ, "ShareFetch", "IsRenewAck"));
            }
            let mut partitions = self.topics.iter().flat_map(|t| &t.partitions);
            if partitions.any(|p| has_renew(&p.acknowledgement_batches)) {
                return Err(needs_v2(REQ, "ShareFetch", "acknowledge type 4 (Renew)"));
            }
        }
        put_string(buf, &self.group_id, "ShareFetchRequest.GroupId")?;
        put_string(buf, &self.member_id, "ShareFetchRequest.MemberId")?;
        buf.put_i32(self.share_session_epoch);
        buf.put_i32(self.max_wait_ms);
        buf.put_i32(self.min_bytes);
        buf.put_i32(self.max_bytes);
        buf.put_i32(self.max_records);
        buf.put_i32(self.batch_size);
        if version >= 2 {
            buf.put_i8(self.share_acquire_mode);
            put_bool(buf, self.is_renew_ack);
        }
        put_array(buf, &self.topics, "ShareFetchRequest.Topics", |buf, t| {
            put_uuid(buf, &t.topic_id);
            put_array(buf, &t.partitions, "FetchTopic.Partitions", |buf, p| {
                buf.put_i32(p.partition_index);
                let what = "FetchPartition.AcknowledgementBatches";
                put_array(buf, &p.acknowledgement_batches, what, put_ack_batch)?;
                put_empty_tagged_fields(buf);
                Ok(())
            })?;
            put_empty_tagged_fields(buf);
            Ok(())
        })?;
        let what = "ShareFetchRequest.ForgottenTopicsData";
        put_array(buf, &self.forgotten_topics_data, what, |buf, t| {
            put_uuid(buf, &t.topic_id);
            put_array(buf, &t.partitions, "ForgottenTopic.Partitions", |buf, p| {
                buf.put_i32(*p);
                Ok(())
            })?;
            put_empty_tagged_fields(buf);
            Ok(())
        })?;
        put_empty_tagged_fields(buf);
        Ok(())
    }

    /// Decodes a request body (for tests and fake brokers). Same contract as
    /// [`ShareFetchResponse::decode`]; a null `GroupId` or `MemberId` is `Invalid`.
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, CodecError> {
        check_version(REQ, version)?;
        decode_whole(buf, REQ, |buf| {
            let mut req = ShareFetchRequest {
                group_id: get_string(buf, "ShareFetchRequest.GroupId")?,
                member_id: get_string(buf, "ShareFetchRequest.MemberId")?,
                share_session_epoch: get_i32(buf, "ShareFetchRequest.ShareSessionEpoch")?,
                max_wait_ms: get_i32(buf, "ShareFetchRequest.MaxWaitMs")?,
                min_bytes: get_i32(buf, "ShareFetchRequest.MinBytes")?,
                max_bytes: get_i32(buf, "ShareFetchRequest.MaxBytes")?,
                max_records: get_i32(buf, "ShareFetchRequest.MaxRecords")?,
                batch_size: get_i32(buf, "ShareFetchRequest.BatchSize")?,
                ..Default::default()
            };
            if version >= 2 {
                req.share_acquire_mode = get_i8(buf, "ShareFetchRequest.ShareAcquireMode")?;
                req.is_renew_ack = get_bool(buf, "ShareFetchRequest.IsRenewAck")?;
            }
            req.topics = get_array(buf, "ShareFetchRequest.Topics", |buf| {
                let topic_id = get_uuid(buf, "FetchTopic.TopicId")?;
                let partitions = get_array(buf, "FetchTopic.Partitions", |buf| {
                    let partition_index = get_i32(buf, "FetchPartition.PartitionIndex")?;
                    let what = "FetchPartition.AcknowledgementBatches";
                    let acknowledgement_batches = get_array(buf, what, get_ack_batch)?;
                    skip_tagged_fields(buf, "FetchPartition tagged fields")?;
                    Ok(FetchPartition { partition_index, acknowledgement_batches })
                })?;
                skip_tagged_fields(buf, "FetchTopic tagged fields")?;
                Ok(FetchTopic { topic_id, partitions })
            })?;
            req.forgotten_topics_data = get_array(buf, "ShareFetchRequest.ForgottenTopicsData", |buf| {
                let topic_id = get_uuid(buf, "ForgottenTopic.TopicId")?;
                let partitions =
                    get_array(buf, "ForgottenTopic.Partitions", |buf| get_i32(buf, "ForgottenTopic.Partition"))?;
                skip_tagged_fields(buf, "ForgottenTopic tagged fields")?;
                Ok(ForgottenTopic { topic_id, partitions })
            })?;
            skip_tagged_fields(buf, "ShareFetchRequest tagged fields")?;
            Ok(req)
        })
    }
}

impl ShareFetchResponse {
    /// Decodes a response body at `version` (1 or 2).
    ///
    /// `buf` must hold exactly one body: leftover bytes are [`CodecError::TrailingBytes`]. On
    /// success `buf` is empty and every `records` field is a zero-copy slice of it; on error
    /// `buf` is unchanged. Unknown tagged fields are skipped.
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, CodecError> {
        check_version(RESP, version)?;
        decode_whole(buf, RESP, |buf| {
            let resp = ShareFetchResponse {
                throttle_time_ms: get_i32(buf, "ShareFetchResponse.ThrottleTimeMs")?,
                error_code: get_i16(buf, "ShareFetchResponse.ErrorCode")?,
                error_message: get_nullable_string(buf, "ShareFetchResponse.ErrorMessage")?,
                acquisition_lock_timeout_ms: get_i32(buf, "ShareFetchResponse.AcquisitionLockTimeoutMs")?,
                responses: get_array(buf, "ShareFetchResponse.Responses", get_topic)?,
                node_endpoints: get_array(buf, "ShareFetchResponse.NodeEndpoints", get_node)?,
            };
            skip_tagged_fields(buf, "ShareFetchResponse tagged fields")?;
            Ok(resp)
        })
    }

    /// Encodes the body at `version` (1 or 2) onto `buf` (for tests and fake brokers).
    pub fn encode(&self, version: i16, buf: &mut BytesMut) -> Result<(), CodecError> {
        check_version(RESP, version)?;
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_nullable_string(buf, self.error_message.as_deref(), "ErrorMessage")?;
        buf.put_i32(self.acquisition_lock_timeout_ms);
        put_array(buf, &self.responses, "ShareFetchResponse.Responses", put_topic)?;
        put_array(buf, &self.node_endpoints, "NodeEndpoints", put_node)?;
        put_empty_tagged_fields(buf);
        Ok(())
    }
}

fn get_topic(buf: &mut Bytes) -> Result<FetchTopicResponse, CodecError> {
    let topic_id = get_uuid(buf, "FetchTopicResponse.TopicId")?;
    let partitions = get_array(buf, "FetchTopicResponse.Partitions", get_partition)?;
    skip_tagged_fields(buf, "FetchTopicResponse tagged fields")?;
    Ok(FetchTopicResponse { topic_id, partitions })
}

fn get_partition(buf: &mut Bytes) -> Result<FetchPartitionResponse, CodecError> {
    let p = FetchPartitionResponse {
        partition_index: get_i32(buf, "PartitionData.PartitionIndex")?,
        error_code: get_i16(buf, "PartitionData.ErrorCode")?,
        error_message: get_nullable_string(buf, "PartitionData.ErrorMessage")?,
        acknowledge_error_code: get_i16(buf, "PartitionData.AcknowledgeErrorCode")?,
        acknowledge_error_message: get_nullable_string(buf, "PartitionData.AcknowledgeErrorMessage")?,
        current_leader: get_leader(buf)?,
        records: get_nullable_bytes(buf, "PartitionData.Records")?,
        acquired_records: get_array(buf, "PartitionData.AcquiredRecords", |buf| {
            let a = AcquiredRecords {
                first_offset: get_i64(buf, "AcquiredRecords.FirstOffset")?,
                last_offset: get_i64(buf, "AcquiredRecords.LastOffset")?,
                delivery_count: get_i16(buf, "AcquiredRecords.DeliveryCount")?,
            };
            skip_tagged_fields(buf, "AcquiredRecords tagged fields")?;
            Ok(a)
        })?,
    };
    skip_tagged_fields(buf, "PartitionData tagged fields")?;
    Ok(p)
}

fn put_topic(buf: &mut BytesMut, t: &FetchTopicResponse) -> Result<(), CodecError> {
    put_uuid(buf, &t.topic_id);
    put_array(buf, &t.partitions, "FetchTopicResponse.Partitions", |buf, p| {
        buf.put_i32(p.partition_index);
        buf.put_i16(p.error_code);
        put_nullable_string(buf, p.error_message.as_deref(), "ErrorMessage")?;
        buf.put_i16(p.acknowledge_error_code);
        let what = "AcknowledgeErrorMessage";
        put_nullable_string(buf, p.acknowledge_error_message.as_deref(), what)?;
        put_leader(buf, &p.current_leader);
        put_nullable_bytes(buf, p.records.as_ref(), "PartitionData.Records")?;
        put_array(buf, &p.acquired_records, "AcquiredRecords", |buf, a| {
            buf.put_i64(a.first_offset);
            buf.put_i64(a.last_offset);
            buf.put_i16(a.delivery_count);
            put_empty_tagged_fields(buf);
            Ok(())
        })?;
        put_empty_tagged_fields(buf);
        Ok(())
    })?;
    put_empty_tagged_fields(buf);
    Ok(())
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
