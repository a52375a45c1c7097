//! Structures ShareFetch and ShareAcknowledge have in common, and their wire form.

use bytes::{BufMut, Bytes, BytesMut};

use super::{MAX_VERSION, MIN_VERSION};
use crate::protocol::compact::*;
use crate::protocol::CodecError;

/// Acknowledge type 0: the offset holds no record (compaction, aborted transaction).
pub const ACK_GAP: i8 = 0;
/// Acknowledge type 1: processed; the record is done.
pub const ACK_ACCEPT: i8 = 1;
/// Acknowledge type 2: give the record back for redelivery.
pub const ACK_RELEASE: i8 = 2;
/// Acknowledge type 3: the record cannot be processed; archive it.
pub const ACK_REJECT: i8 = 3;
/// Acknowledge type 4: extend the acquisition lock (KIP-1222). Version 2 only.
pub const ACK_RENEW: i8 = 4;

/// A range of offsets acknowledged with one or more types.
///
/// `acknowledge_types` holds either one type for the whole range or exactly
/// `last_offset - first_offset + 1` types, one per offset. The codec does not check this (the
/// broker answers a partition-level INVALID_REQUEST); it only refuses [`ACK_RENEW`] on v1.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcknowledgementBatch {
    /// First offset of the range.
    pub first_offset: i64,
    /// Last offset of the range, inclusive.
    pub last_offset: i64,
    /// The acknowledge types ([`ACK_GAP`] .. [`ACK_RENEW`]).
    pub acknowledge_types: Vec<i8>,
}

/// The leader of a partition as the answering broker knows it.
///
/// The schema gives no default, so [`Default`] is `0/0`; brokers send `-1` for unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaderIdAndEpoch {
    /// The leader's node id, or -1 if unknown.
    pub leader_id: i32,
    /// The latest known leader epoch.
    pub leader_epoch: i32,
}

/// A broker endpoint, sent for leaders named in NOT_LEADER_OR_FOLLOWER partitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeEndpoint {
    /// The node id.
    pub node_id: i32,
    /// The host name.
    pub host: String,
    /// The port.
    pub port: i32,
    /// The rack, if the node has one.
    pub rack: Option<String>,
}

/// Fails unless `version` is one this codec speaks.
pub(crate) fn check_version(what: &'static str, version: i16) -> Result<(), CodecError> {
    if (MIN_VERSION..=MAX_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(CodecError::UnsupportedVersion { what, version })
    }
}

/// The error for a v2-only value that a v1 request cannot carry. Dropping it silently would
/// change what the request means (a renew would become a no-op, record_limit would become
/// batch_optimized), so the caller must decide instead.
pub(crate) fn needs_v2(what: &'static str, api: &str, field: &str) -> CodecError {
    CodecError::Invalid {
        what,
        detail: format!("{field} needs {api} v2, but the broker lacks {api} v2 (only v1 was negotiated)"),
    }
}

/// Whether any batch acknowledges with [`ACK_RENEW`].
pub(crate) fn has_renew(batches: &[AcknowledgementBatch]) -> bool {
    batches.iter().any(|b| b.acknowledge_types.contains(&ACK_RENEW))
}

pub(crate) fn put_ack_batch(buf: &mut BytesMut, b: &AcknowledgementBatch) -> Result<(), CodecError> {
    buf.put_i64(b.first_offset);
    buf.put_i64(b.last_offset);
    put_array(buf, &b.acknowledge_types, "AcknowledgeTypes", |buf, t| {
        buf.put_i8(*t);
        Ok(())
    })?;
    put_empty_tagged_fields(buf);
    Ok(())
}

pub(crate) fn get_ack_batch(buf: &mut Bytes) -> Result<AcknowledgementBatch, CodecError> {
    let batch = AcknowledgementBatch {
        first_offset: get_i64(buf, "AcknowledgementBatch.FirstOffset")?,
        last_offset: get_i64(buf, "AcknowledgementBatch.LastOffset")?,
        acknowledge_types: get_array(buf, "AcknowledgementBatch.AcknowledgeTypes", |b| get_i8(b, "AcknowledgeType"))?,
    };
    skip_tagged_fields(buf, "AcknowledgementBatch tagged fields")?;
    Ok(batch)
}

/// `LeaderIdAndEpoch` is a plain nested struct (not a tagged field) in both share responses,
/// unlike the classic FetchResponse, so it carries its own tagged-field section.
pub(crate) fn put_leader(buf: &mut BytesMut, l: &LeaderIdAndEpoch) {
    buf.put_i32(l.leader_id);
    buf.put_i32(l.leader_epoch);
    put_empty_tagged_fields(buf);
}

pub(crate) fn get_leader(buf: &mut Bytes) -> Result<LeaderIdAndEpoch, CodecError> {
    let leader = LeaderIdAndEpoch {
        leader_id: get_i32(buf, "CurrentLeader.LeaderId")?,
        leader_epoch: get_i32(buf, "CurrentLeader.LeaderEpoch")?,
    };
    skip_tagged_fields(buf, "CurrentLeader tagged fields")?;
    Ok(leader)
}

pub(crate) fn put_node(buf: &mut BytesMut, n: &NodeEndpoint) -> Result<(), CodecError> {
    buf.put_i32(n.node_id);
    put_string(buf, &n.host, "NodeEndpoint.Host")?;
    buf.put_i32(n.port);
    put_nullable_string(buf, n.rack.as_deref(), "NodeEndpoint.Rack")?;
    put_empty_tagged_fields(buf);
    Ok(())
}

pub(crate) fn get_node(buf: &mut Bytes) -> Result<NodeEndpoint, CodecError> {
    let node = NodeEndpoint {
        node_id: get_i32(buf, "NodeEndpoint.NodeId")?,
        host: get_string(buf, "NodeEndpoint.Host")?,
        port: get_i32(buf, "NodeEndpoint.Port")?,
        rack: get_nullable_string(buf, "NodeEndpoint.Rack")?,
    };
    skip_tagged_fields(buf, "NodeEndpoint tagged fields")?;
    Ok(node)
}
