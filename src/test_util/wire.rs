//! What passes between the fake broker's connections (`server.rs`) and its handlers
//! (`handlers.rs`, `share.rs`): a request as read off the wire, and how to answer it. A leaf,
//! so that neither side needs the other's file for the words they share.

use bytes::BytesMut;
use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest, ShareGroupHeartbeatRequest};

use crate::protocol::share::{ShareAcknowledgeRequest, ShareFetchRequest};

/// A decoded request body.
#[derive(Debug)]
pub(super) enum Decoded {
    ApiVersions,
    Metadata(MetadataRequest),
    FindCoordinator(FindCoordinatorRequest),
    /// Decoded to check it, answered the same whatever it filters on.
    ListGroups,
    Heartbeat(ShareGroupHeartbeatRequest),
    Fetch(ShareFetchRequest),
    Ack(ShareAcknowledgeRequest),
}

/// One request as read off the wire.
#[derive(Debug)]
pub(super) struct Incoming {
    pub api: i16,
    pub version: i16,
    pub correlation_id: i32,
    pub body: Decoded,
    /// The member of a share request (whose session it belongs to).
    pub share_member: Option<String>,
    /// Partitions carrying acknowledgements.
    pub ack_partitions: Vec<i32>,
}

/// How to answer one request.
pub(super) enum Out {
    /// A response body.
    Reply(BytesMut),
    /// Close the connection without answering.
    Drop,
    /// Answer these bytes as the body.
    Raw(&'static [u8]),
    /// Answer a truncated frame and close.
    Truncated,
}
