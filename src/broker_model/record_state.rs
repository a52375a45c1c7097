//! The share state of one offset of a share partition, as `SharePartition.java` keeps it in
//! its in-flight batches: AVAILABLE, ACQUIRED (by a member, until its lock's deadline),
//! ACKNOWLEDGED or ARCHIVED, and how many times it was delivered. A leaf: the partition
//! (`partition.rs`) changes it, the wrappers read it.

use std::time::Instant;

/// Why an offset was archived: it is never delivered again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Archived {
    /// A member acknowledged it with REJECT.
    Rejected,
    /// A member acknowledged it as a gap: the offset holds no record.
    Gap,
    /// It was released (by RELEASE, a lapsed lock or a session ending) after its
    /// `share.delivery.count.limit`-th delivery.
    DeliveryLimit,
}

/// The state of an offset. `H` is who holds an acquisition: the fake's member id, or the
/// simulation's (client, broker, session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShareState<H> {
    /// Waiting for a fetch: never delivered, or given back below the delivery limit.
    Available,
    /// Delivered to `holder`, whose lock lapses at `until` (the record then goes back).
    Acquired { holder: H, until: Instant },
    /// Accepted: done.
    Acknowledged,
    /// Done without being accepted.
    Archived(Archived),
}

/// One offset of a share partition.
#[derive(Debug, Clone)]
pub(crate) struct OffsetShare<H> {
    pub(crate) state: ShareState<H>,
    /// Deliveries so far: each acquisition counts one.
    pub(crate) delivery: i16,
    /// When it was last acquired.
    pub(crate) acquired_at: Option<Instant>,
    /// The holder whose lock on it lapsed last: an ack from them is a late one, not an ack of
    /// a record they were never given (both are INVALID_RECORD_STATE on the wire).
    pub(crate) lapsed: Option<H>,
}

impl<H> OffsetShare<H> {
    /// A new offset, never delivered.
    pub(crate) fn new() -> Self {
        OffsetShare { state: ShareState::Available, delivery: 0, acquired_at: None, lapsed: None }
    }

    /// Acknowledged or archived: never delivered again.
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.state, ShareState::Acknowledged | ShareState::Archived(_))
    }

    /// The holder of its acquisition lock, if it is acquired.
    pub(crate) fn holder(&self) -> Option<&H> {
        match &self.state {
            ShareState::Acquired { holder, .. } => Some(holder),
            _ => None,
        }
    }
}

impl<H> Default for OffsetShare<H> {
    fn default() -> Self {
        OffsetShare::new()
    }
}
