//! ShareFetch and ShareAcknowledge codecs (v1 and v2).
//!
//! The `kafka-protocol` crate knows these two APIs at v1 only (it is generated from Kafka
//! 4.1); Kafka 4.2 added v2 (KIP-1206 `ShareAcquireMode`, KIP-1222 Renew acknowledgements), so
//! both are encoded and decoded here at both versions. Everything is body-only: the request
//! header ([`REQUEST_HEADER_VERSION`]) and response header ([`RESPONSE_HEADER_VERSION`]) are
//! the framing layer's job.
//!
//! Both APIs are flexible from v0: compact strings, arrays and bytes (length as an unsigned
//! varint `N + 1`, 0 = null) and a tagged-field section at the end of every struct. We write
//! empty sections and skip every tag we read (neither API defines any tagged field).
//!
//! Contracts:
//! - Requests refuse to encode at v1 anything that needs v2
//!   ([`crate::protocol::CodecError::Invalid`]) rather than silently send a request with a
//!   different meaning.
//! - Decoders take one whole body: leftover bytes are
//!   [`crate::protocol::CodecError::TrailingBytes`]. They never panic and never allocate more
//!   than the input's size, whatever the length prefixes claim. Record data is a zero-copy
//!   slice of the input.

mod acknowledge;
mod common;
mod fetch;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod test_util;

pub use acknowledge::{
    AcknowledgePartition, AcknowledgePartitionResponse, AcknowledgeTopic, AcknowledgeTopicResponse,
    ShareAcknowledgeRequest, ShareAcknowledgeResponse,
};
pub use common::{
    AcknowledgementBatch, LeaderIdAndEpoch, NodeEndpoint, ACK_ACCEPT, ACK_GAP, ACK_REJECT, ACK_RELEASE, ACK_RENEW,
};
pub use fetch::{
    AcquiredRecords, FetchPartition, FetchPartitionResponse, FetchTopic, FetchTopicResponse, ForgottenTopic,
    ShareFetchRequest, ShareFetchResponse, ACQUIRE_MODE_BATCH_OPTIMIZED, ACQUIRE_MODE_RECORD_LIMIT,
};

/// API key of ShareGroupHeartbeat.
pub const SHARE_GROUP_HEARTBEAT_API_KEY: i16 = 76;
/// API key of ShareFetch.
pub const SHARE_FETCH_API_KEY: i16 = 78;
/// API key of ShareAcknowledge.
pub const SHARE_ACKNOWLEDGE_API_KEY: i16 = 79;
/// Request header version for both APIs at every version (flexible: client id + tagged fields).
pub const REQUEST_HEADER_VERSION: i16 = 2;
/// Response header version for both APIs at every version (flexible: tagged fields).
pub const RESPONSE_HEADER_VERSION: i16 = 1;
/// Oldest version this codec speaks, for both APIs (v0 existed only in Kafka 4.0 early access).
pub const MIN_VERSION: i16 = 1;
/// Newest version this codec speaks, for both APIs (Kafka 4.2 to 4.4).
pub const MAX_VERSION: i16 = 2;
