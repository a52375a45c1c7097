//! One broker-side model of share groups (KIP-932), as Kafka 4.4 keeps them, for the two
//! brokers the crate's tests run against: the public fake cluster (`test_util`, feature
//! `test-util`: TCP and the wall clock) and the simulation (`sim`, test builds: virtual time
//! and seeded faults). In the shape of franz-go's `kfake/share_groups.go`: the state and its
//! rules live here; each wrapper's per-API handlers decode, add their faults and bookkeeping
//! (the fake's request log and violations, the sim's ledger), call it and encode.
//!
//! The lock holder is a type parameter: the fake holds by member id, as Kafka does; the
//! simulation by (client, broker, session), so an ack sent on the wrong session is refused
//! where Kafka would take it, and the simulation sees the client bug.
//!
//! - `record_state.rs`: the share state of one offset (available, acquired with a lock
//!   deadline, acknowledged, archived and why) and its delivery count; a leaf.
//! - `partition.rs`: a share partition: its offsets, the share-partition start offset
//!   (SPSO), acquisition, lock expiry, the delivery limit, releases.
//! - `acknowledge.rs`: acknowledgement batches: their shape (INVALID_REQUEST), then whether
//!   the member holds every offset (INVALID_RECORD_STATE, with why: another member, a lapsed
//!   lock, never delivered), applied all or nothing.
//! - `sessions.rs`: share sessions per (node, member) and their epochs.
//! - `broker.rs`: what a fake lends the share RPC handlers (the `ShareBroker` trait: its
//!   state, faults and bookkeeping) and the steps both RPCs take (the session check, one
//!   partition's acknowledgements).
//! - `share_fetch.rs`, `share_acknowledge.rs`, `share_group_heartbeat.rs`: ShareFetch,
//!   ShareAcknowledge and ShareGroupHeartbeat, handled once for both fakes (one file per API
//!   key, as kfake's `78_share_fetch.go`): a new API key's fake handling goes into a file of
//!   its own here, beside them, and both fakes call it.
//!
//! Nothing here reads a clock or does IO: every call that depends on time takes `now`, which
//! the wrapper supplies (`Instant::now()` for the fake, base + virtual offset for the
//! simulation). Nothing iterates a `HashMap`: the same calls give the same state.

pub(crate) mod acknowledge;
pub(crate) mod broker;
pub(crate) mod partition;
pub(crate) mod record_state;
pub(crate) mod sessions;
pub(crate) mod share_acknowledge;
pub(crate) mod share_fetch;
pub(crate) mod share_group_heartbeat;
#[cfg(test)]
mod test_broker;
