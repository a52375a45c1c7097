//! What the simulation keeps of the share state beside the broker model's
//! (`crate::broker_model`, which holds each offset's state, lock and delivery count): who a
//! client is, who holds an acquisition, and every delivery of an offset. A leaf: the cluster
//! (`cluster.rs`) keeps them, the share RPCs (`share.rs`), the coordinator and the invariants
//! read and change them.

/// A consumer instance of the simulation (its index in the run): the sim keys everything by
/// it, never by the member id, which is random (`Uuid::new_v4`) and would make orders differ.
pub(crate) type ClientId = usize;

/// Who holds an acquisition lock in the simulation: a client's share session on a broker.
/// Stricter than Kafka, which holds by member id: an ack sent on another session of the same
/// client (after a reset) must be refused here, to be seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holder {
    pub client: ClientId,
    pub node: i32,
    pub session: u64,
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

/// What the simulation knows of one offset beyond its share state.
#[derive(Debug, Clone, Default)]
pub(crate) struct OffsetLog {
    /// Every delivery, in order, with the client it went to.
    pub history: Vec<(ClientId, Delivery)>,
    /// No record at this offset (compacted away): acquired like any other, served as no
    /// record at all or inside an empty batch, acknowledged by the client's GAP (LANDSCAPE 9).
    pub gap: bool,
}
