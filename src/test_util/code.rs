//! Kafka error codes the fake answers with, for [`Action`](super::Action)s and
//! [`FakeCluster::set_topic_error`](super::FakeCluster::set_topic_error). (The same numbers as
//! [`ErrorCode`](crate::ErrorCode)'s constants, as plain `i16`s.) Any other code can be
//! scripted too.

/// The broker failed in a way it cannot say more about (the fake: records it cannot encode).
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
/// The topic or partition does not exist (here: a partition index past the topic's).
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// The partition has no leader right now.
pub const LEADER_NOT_AVAILABLE: i16 = 5;
/// This broker does not lead the partition (the answer names the leader).
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// The topic name is not valid.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// The client may not read the topic.
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// The request broke the protocol (e.g. malformed acknowledgement batches).
pub const INVALID_REQUEST: i16 = 42;
/// The topic id is not known.
pub const UNKNOWN_TOPIC_ID: i16 = 100;
/// An acknowledgement for a record the member does not hold (its lock expired, or it was
/// never delivered to it).
pub const INVALID_RECORD_STATE: i16 = 121;
/// The share session is not known (the broker lost or closed it).
pub const SHARE_SESSION_NOT_FOUND: i16 = 122;
/// The request's share session epoch is not the one expected.
pub const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
/// The broker has no room for another share session.
pub const SHARE_SESSION_LIMIT_REACHED: i16 = 133;
