//! Records as the fake keeps them: what [`FakeCluster::produce`](super::FakeCluster::produce)
//! stores, and the share state of each offset as a test sees it ([`RecordState`]).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::state::OffsetState;
use crate::producer::ProducerRecord;
use crate::protocol::records::{Header, RecordInput};

/// The share state of one offset of the fake topic, as the fake broker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordState {
    /// Waiting for a consumer: never delivered yet, or given back (RELEASE, a closed or lost
    /// share session, a leader change).
    Available,
    /// Delivered and not yet acknowledged: a member holds it. (The fake never expires an
    /// acquisition lock: a held record stays held until acknowledged or its session ends.)
    Acquired,
    /// Acknowledged with ACCEPT: processed, never delivered again.
    Accepted,
    /// Acknowledged with REJECT: never delivered again.
    Rejected,
    /// Acknowledged as a gap: the offset holds no record (see
    /// [`FakeCluster::set_gaps`](super::FakeCluster::set_gaps)).
    Gap,
}

impl RecordState {
    /// The state of an offset.
    pub(crate) fn of(s: &OffsetState) -> RecordState {
        match (s.done, s.done_by) {
            (true, Some(0)) => RecordState::Gap,
            (true, Some(3)) => RecordState::Rejected,
            (true, _) => RecordState::Accepted,
            (false, _) if s.holder.is_some() => RecordState::Acquired,
            (false, _) => RecordState::Available,
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
