//! The share-group state machines: membership, share sessions, acknowledgements.
//!
//! Sans-IO: nothing here awaits, dials or reads a clock. The consumer driver feeds them
//! responses and `now`, and sends what they build. Tests drive them with made-up time.

pub mod acks;
pub mod membership;
pub mod redeliveries;
pub mod session;

use std::fmt;

use uuid::Uuid;

/// A partition named by topic id, as the share RPCs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicIdPartition {
    /// The topic id.
    pub topic_id: Uuid,
    /// The partition index.
    pub partition: i32,
}

impl fmt::Display for TopicIdPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic_id, self.partition)
    }
}
