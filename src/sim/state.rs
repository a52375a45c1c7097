//! The values of the simulated share state: who a client is, the share state of each offset
//! and its deliveries, a broker's share sessions. A leaf: the cluster (`cluster.rs`) keeps
//! them, the share RPCs (`share.rs`), the coordinator and the invariants read and change them.

use std::collections::BTreeSet;
use std::time::Instant;

/// A consumer instance of the simulation (its index in the run): the sim keys everything by
/// it, never by the member id, which is random (`Uuid::new_v4`) and would make orders differ.
pub(crate) type ClientId = usize;

/// The share state of one offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Available,
    /// Locked for a client's share session on a broker until `until`.
    Acquired {
        client: ClientId,
        node: i32,
        session: u64,
        until: Instant,
    },
    /// Accepted.
    Acknowledged,
    /// Rejected, a gap, or past the delivery limit.
    Archived,
}

/// One delivery of an offset: where it came from and whether an ack of it was applied (a
/// second one is a client bug).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Delivery {
    pub node: i32,
    pub session: u64,
    pub count: i16,
    pub acked: bool,
}

/// One offset of a partition.
#[derive(Debug, Clone)]
pub(crate) struct Offset {
    pub state: State,
    pub delivery: i16,
    /// Every delivery, in order, with the client it went to.
    pub history: Vec<(ClientId, Delivery)>,
    /// No record at this offset (compacted away): acquired like any other, served as no
    /// record at all or inside an empty batch, acknowledged by the client's GAP (LANDSCAPE 9).
    pub gap: bool,
}

/// The state a released record goes to: available again, or archived once it was delivered
/// as often as the limit allows.
pub(crate) fn released(delivery: i16, limit: i16) -> State {
    if delivery >= limit {
        State::Archived
    } else {
        State::Available
    }
}

/// A share session on a broker.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// Unique in the run: acks are checked against the session that delivered the record.
    pub id: u64,
    /// The epoch the next request must carry.
    pub epoch: i32,
    /// The connection that opened it: the session ends when it closes.
    pub conn: u64,
    pub parts: BTreeSet<i32>,
}
