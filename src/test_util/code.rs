//! Kafka error codes the fake answers with, for [`Action`](super::Action)s and
//! [`FakeCluster::set_topic_error`](super::FakeCluster::set_topic_error): [`ErrorCode`]'s
//! constants (the crate's one vocabulary of codes, which the simulation and the fake's
//! handlers use too), as the plain `i16`s a script takes. Any other code can be scripted too.

use crate::error::ErrorCode;

/// The broker failed in a way it cannot say more about (the fake: records it cannot encode).
pub const UNKNOWN_SERVER_ERROR: i16 = ErrorCode::UNKNOWN_SERVER_ERROR.0;
/// The topic or partition does not exist (here: a partition index past the topic's).
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0;
/// The partition has no leader right now.
pub const LEADER_NOT_AVAILABLE: i16 = ErrorCode::LEADER_NOT_AVAILABLE.0;
/// This broker does not lead the partition (the answer names the leader).
pub const NOT_LEADER_OR_FOLLOWER: i16 = ErrorCode::NOT_LEADER_OR_FOLLOWER.0;
/// The topic name is not valid.
pub const INVALID_TOPIC_EXCEPTION: i16 = ErrorCode::INVALID_TOPIC_EXCEPTION.0;
/// The client may not read the topic.
pub const TOPIC_AUTHORIZATION_FAILED: i16 = ErrorCode::TOPIC_AUTHORIZATION_FAILED.0;
/// The request broke the protocol (e.g. malformed acknowledgement batches).
pub const INVALID_REQUEST: i16 = ErrorCode::INVALID_REQUEST.0;
/// The topic id is not known.
pub const UNKNOWN_TOPIC_ID: i16 = ErrorCode::UNKNOWN_TOPIC_ID.0;
/// An acknowledgement for a record the member does not hold (its lock expired, or it was
/// never delivered to it).
pub const INVALID_RECORD_STATE: i16 = ErrorCode::INVALID_RECORD_STATE.0;
/// The share session is not known (the broker lost or closed it).
pub const SHARE_SESSION_NOT_FOUND: i16 = ErrorCode::SHARE_SESSION_NOT_FOUND.0;
/// The request's share session epoch is not the one expected.
pub const INVALID_SHARE_SESSION_EPOCH: i16 = ErrorCode::INVALID_SHARE_SESSION_EPOCH.0;
/// The broker has no room for another share session.
pub const SHARE_SESSION_LIMIT_REACHED: i16 = ErrorCode::SHARE_SESSION_LIMIT_REACHED.0;
