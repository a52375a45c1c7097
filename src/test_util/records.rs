//! Records as the fake keeps them: what [`FakeCluster::produce`](super::FakeCluster::produce)
//! stores, and the share state of each offset as a test sees it ([`RecordState`]).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::broker_model::record_state::{Archived, OffsetShare, ShareState};
use crate::producer::ProducerRecord;
use crate::protocol::records::{Header, RecordInput};

/// The share state of one offset of the fake topic, as the fake broker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordState {
    /// Waiting for a consumer: never delivered yet, or given back (RELEASE, a lapsed
    /// acquisition lock, a closed or lost share session, a leader change) before its
    /// delivery limit.
    Available,
    /// Delivered and not yet acknowledged: a member holds its acquisition lock, until the
    /// member acknowledges it, its share session ends, or the lock lapses
    /// ([`FakeConfig::lock_timeout_ms`](super::FakeConfig::lock_timeout_ms) after it was
    /// acquired).
    Acquired,
    /// Acknowledged with ACCEPT: processed, never delivered again.
    Accepted,
    /// Acknowledged with REJECT: never delivered again.
    Rejected,
    /// Acknowledged as a gap: the offset holds no record (see
    /// [`FakeCluster::set_gaps`](super::FakeCluster::set_gaps)).
    Gap,
    /// Given back after its last allowed delivery
    /// ([`FakeConfig::delivery_limit`](super::FakeConfig::delivery_limit)): archived, never
    /// delivered again.
    Archived,
}

impl RecordState {
    /// The state of an offset.
    pub(crate) fn of(s: &OffsetShare<String>) -> RecordState {
        match s.state {
            ShareState::Available => RecordState::Available,
            ShareState::Acquired { .. } => RecordState::Acquired,
            ShareState::Acknowledged => RecordState::Accepted,
            ShareState::Archived(Archived::Rejected) => RecordState::Rejected,
            ShareState::Archived(Archived::Gap) => RecordState::Gap,
            ShareState::Archived(Archived::DeliveryLimit) => RecordState::Archived,
        }
    }
}

/// The milliseconds since the epoch now (0 if the clock is before it).
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A record with `key` and `value`, stamped now.
pub(crate) fn keyed(key: Bytes, value: Bytes) -> RecordInput {
    RecordInput { key: Some(key), value: Some(value), headers: Vec::new(), timestamp: now_ms() }
}

/// What the fake stores of a producer record: key, value, headers and timestamp (now if the
/// record has none).
pub(crate) fn from_producer_record(r: ProducerRecord) -> RecordInput {
    RecordInput {
        key: r.key,
        value: r.value,
        headers: r.headers.into_iter().map(|(k, v)| Header::new(k, v)).collect(),
        timestamp: r.timestamp.unwrap_or_else(now_ms),
    }
}
