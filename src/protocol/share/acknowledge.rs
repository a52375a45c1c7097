//! ShareAcknowledge (API key 79), versions 1 and 2.
//!
//! Wire layout (`M/ShareAcknowledgeRequest.json`, `M/ShareAcknowledgeResponse.json`); all
//! structs end in a tagged-field section, all strings and arrays are compact:
//!
//! ```text
//! Request:  GroupId MemberId ShareSessionEpoch [v2: IsRenewAck:bool]
//!           Topics[TopicId Partitions[PartitionIndex AcknowledgementBatches[..]]]
//! Response: ThrottleTimeMs ErrorCode ErrorMessage [v2: AcquisitionLockTimeoutMs]
//!           Responses[TopicId Partitions[PartitionIndex ErrorCode ErrorMessage
//!             CurrentLeader{LeaderId LeaderEpoch}]]
//!           NodeEndpoints[NodeId Host Port Rack]
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::common::*;
use crate::protocol::compact::*;
use crate::protocol::CodecError;

const REQ: &str = "ShareAcknowledgeRequest";
const RESP: &str = "ShareAcknowledgeResponse";

/// A ShareAcknowledge request body (no request header).
///
/// `group_id` and `member_id` are nullable on the wire; a client always sends both, so they are
/// plain strings here and never encoded as null.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareAcknowledgeRequest {
    /// The share group.
    pub group_id: String,
    /// The member id.
    pub member_id: String,
    /// The share session epoch; never 0 (that is INVALID_SHARE_SESSION_EPOCH), -1 to close.
    pub share_session_epoch: i32,
    /// v2 only: set when any batch carries [`ACK_RENEW`].
    pub is_renew_ack: bool,
    /// The acknowledgements, per topic.
    pub topics: Vec<AcknowledgeTopic>,
}

/// A topic in a [`ShareAcknowledgeRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcknowledgeTopic {
    /// The topic id.
    pub topic_id: Uuid,
    /// Its partitions.
    pub partitions: Vec<AcknowledgePartition>,
}

/// A partition in a [`ShareAcknowledgeRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcknowledgePartition {
    /// The partition index.
    pub partition_index: i32,
    /// The acknowledgements.
    pub acknowledgement_batches: Vec<AcknowledgementBatch>,
}

/// A ShareAcknowledge response body (the response header already stripped).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareAcknowledgeResponse {
    /// Quota throttle time.
    pub throttle_time_ms: i32,
    /// Top-level error code.
    pub error_code: i16,
    /// Top-level error message.
    pub error_message: Option<String>,
    /// How long (renewed) records stay locked. The field exists from v2 only: `None` when
    /// decoded from v1, so "the broker did not say" is not mistaken for a 0 ms lock. Encoding
    /// `None` at v2 writes 0 (the schema default); encoding `Some` at v1 is an error.
    pub acquisition_lock_timeout_ms: Option<i32>,
    /// Per-topic results.
    pub responses: Vec<AcknowledgeTopicResponse>,
    /// Endpoints of the leaders named in NOT_LEADER_OR_FOLLOWER partitions.
    pub node_endpoints: Vec<NodeEndpoint>,
}

/// A topic in a [`ShareAcknowledgeResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcknowledgeTopicResponse {
    /// The topic id.
    pub topic_id: Uuid,
    /// Per-partition results.
    pub partitions: Vec<AcknowledgePartitionResponse>,
}

/// A partition in a [`ShareAcknowledgeResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcknowledgePartitionResponse {
    /// The partition index.
    pub partition_index: i32,
    /// Error code for this partition's acknowledgements.
    pub error_code: i16,
    /// Message for `error_code`.
    pub error_message: Option<String>,
    /// The partition's leader as this broker knows it.
    pub current_leader: LeaderIdAndEpoch,
}

impl ShareAcknowledgeRequest {
    /// Encodes the body at `version` (1 or 2) onto `buf`.
    ///
    /// At v1, `is_renew_ack` or an [`ACK_RENEW`] type is [`CodecError::Invalid`]: it cannot be
    /// sent and must not be silently dropped. On error `buf` may hold a partial message.
    pub fn encode(&self, version: i16, buf: &mut BytesMut) -> Result<(), CodecError> {
        check_version(REQ, version)?;
        if version < 2 {
            if self.is_renew_ack {
                return Err(needs_v2(REQ, "ShareAcknowledge", "IsRenewAck"));
            }
            let mut partitions = self.topics.iter().flat_map(|t| &t.partitions);
            if partitions.any(|p| has_renew(&p.acknowledgement_batches)) {
                return Err(needs_v2(REQ, "ShareAcknowledge", "acknowledge type 4 (Renew)"));
            }
        }
        put_string(buf, &self.group_id, "ShareAcknowledgeRequest.GroupId")?;
        put_string(buf, &self.member_id, "ShareAcknowledgeRequest.MemberId")?;
        buf.put_i32(self.share_session_epoch);
        if version >= 2 {
            put_bool(buf, self.is_renew_ack);
        }
        put_array(buf, &self.topics, "ShareAcknowledgeRequest.Topics", |buf, t| {
            put_uuid(buf, &t.topic_id);
            put_array(buf, &t.partitions, "AcknowledgeTopic.Partitions", |buf, p| {
                buf.put_i32(p.partition_index);
                let what = "AcknowledgePartition.AcknowledgementBatches";
                put_array(buf, &p.acknowledgement_batches, what, put_ack_batch)?;
                put_empty_tagged_fields(buf);
                Ok(())
            })?;
            put_empty_tagged_fields(buf);
            Ok(())
        })?;
        put_empty_tagged_fields(buf);
        Ok(())
    }

    /// Decodes a request body (for tests and fake brokers). Same contract as
    /// [`ShareAcknowledgeResponse::decode`]; a null `GroupId` or `MemberId` is `Invalid`.
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, CodecError> {
        check_version(REQ, version)?;
        decode_whole(buf, REQ, |buf| {
            let mut req = ShareAcknowledgeRequest {
                group_id: get_string(buf, "ShareAcknowledgeRequest.GroupId")?,
                member_id: get_string(buf, "ShareAcknowledgeRequest.MemberId")?,
                share_session_epoch: get_i32(buf, "ShareAcknowledgeRequest.ShareSessionEpoch")?,
                ..Default::default()
            };
            if version >= 2 {
                req.is_renew_ack = get_bool(buf, "ShareAcknowledgeRequest.IsRenewAck")?;
            }
            req.topics = get_array(buf, "ShareAcknowledgeRequest.Topics", |buf| {
                let topic_id = get_uuid(buf, "AcknowledgeTopic.TopicId")?;
                let partitions = get_array(buf, "AcknowledgeTopic.Partitions", |buf| {
                    let partition_index = get_i32(buf, "AcknowledgePartition.PartitionIndex")?;
                    let what = "AcknowledgePartition.AcknowledgementBatches";
                    let acknowledgement_batches = get_array(buf, what, get_ack_batch)?;
                    skip_tagged_fields(buf, "AcknowledgePartition tagged fields")?;
                    Ok(AcknowledgePartition { partition_index, acknowledgement_batches })
                })?;
                skip_tagged_fields(buf, "AcknowledgeTopic tagged fields")?;
                Ok(AcknowledgeTopic { topic_id, partitions })
            })?;
            skip_tagged_fields(buf, "ShareAcknowledgeRequest tagged fields")?;
            Ok(req)
        })
    }
}

impl ShareAcknowledgeResponse {
    /// Decodes a response body at `version` (1 or 2).
    ///
    /// `buf` must hold exactly one body: leftover bytes are [`CodecError::TrailingBytes`]. On
    /// success `buf` is empty; on error it is unchanged. Unknown tagged fields are skipped.
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, CodecError> {
        check_version(RESP, version)?;
        decode_whole(buf, RESP, |buf| {
            let throttle_time_ms = get_i32(buf, "ShareAcknowledgeResponse.ThrottleTimeMs")?;
            let error_code = get_i16(buf, "ShareAcknowledgeResponse.ErrorCode")?;
            let error_message = get_nullable_string(buf, "ShareAcknowledgeResponse.ErrorMessage")?;
            let acquisition_lock_timeout_ms = if version >= 2 {
                Some(get_i32(buf, "ShareAcknowledgeResponse.AcquisitionLockTimeoutMs")?)
            } else {
                None
            };
            let resp = ShareAcknowledgeResponse {
                throttle_time_ms,
                error_code,
                error_message,
                acquisition_lock_timeout_ms,
                responses: get_array(buf, "ShareAcknowledgeResponse.Responses", get_topic)?,
                node_endpoints: get_array(buf, "ShareAcknowledgeResponse.NodeEndpoints", get_node)?,
            };
            skip_tagged_fields(buf, "ShareAcknowledgeResponse tagged fields")?;
            Ok(resp)
        })
    }

    /// Encodes the body at `version` (1 or 2) onto `buf` (for tests and fake brokers).
    pub fn encode(&self, version: i16, buf: &mut BytesMut) -> Result<(), CodecError> {
        check_version(RESP, version)?;
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_nullable_string(buf, self.error_message.as_deref(), "ErrorMessage")?;
        match (version >= 2, self.acquisition_lock_timeout_ms) {
            (true, t) => buf.put_i32(t.unwrap_or(0)),
            (false, None) => {}
            (false, Some(_)) => return Err(needs_v2(RESP, "ShareAcknowledge", "AcquisitionLockTimeoutMs")),
        }
        put_array(buf, &self.responses, "ShareAcknowledgeResponse.Responses", |buf, t| {
            put_uuid(buf, &t.topic_id);
            put_array(buf, &t.partitions, "AcknowledgeTopicResponse.Partitions", |buf, p| {
                buf.put_i32(p.partition_index);
                buf.put_i16(p.error_code);
                put_nullable_string(buf, p.error_message.as_deref(), "ErrorMessage")?;
                put_leader(buf, &p.current_leader);
                put_empty_tagged_fields(buf);
                Ok(())
            })?;
            put_empty_tagged_fields(buf);
            Ok(())
        })?;
        put_array(buf, &self.node_endpoints, "NodeEndpoints", put_node)?;
        put_empty_tagged_fields(buf);
        Ok(())
    }
}

fn get_topic(buf: &mut Bytes) -> Result<AcknowledgeTopicResponse, CodecError> {
    let topic_id = get_uuid(buf, "AcknowledgeTopicResponse.TopicId")?;
    let partitions = get_array(buf, "AcknowledgeTopicResponse.Partitions", |buf| {
        let p = AcknowledgePartitionResponse {
            partition_index: get_i32(buf, "PartitionData.PartitionIndex")?,
            error_code: get_i16(buf, "PartitionData.ErrorCode")?,
            error_message: get_nullable_string(buf, "PartitionData.ErrorMessage")?,
            current_leader: get_leader(buf)?,
        };
        skip_tagged_fields(buf, "PartitionData tagged fields")?;
        Ok(p)
    })?;
    skip_tagged_fields(buf, "AcknowledgeTopicResponse tagged fields")?;
    Ok(AcknowledgeTopicResponse { topic_id, partitions })
}

#[cfg(test)]
#[path = "acknowledge_tests.rs"]
mod tests;
