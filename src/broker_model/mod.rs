//! One broker-side model of share groups (KIP-932), as Kafka 4.4 keeps them, for the two
//! brokers the crate's tests run against: the public fake cluster (`test_util`, feature
//! `test-util`: TCP and the wall clock) and, in time, the simulation (`sim`: virtual time and
//! seeded faults). In the shape of franz-go's `kfake/share_groups.go`: the state lives here,
//! each wrapper's per-API handlers only decode, call it and encode.
//!
//! - `record_state.rs`: the share state of one offset (available, acquired with a lock
//!   deadline, acknowledged, archived and why) and its delivery count; a leaf.
//! - `partition.rs`: a share partition: its offsets, the share-partition start offset
//!   (SPSO), acquisition, lock expiry, the delivery limit, releases.
//! - `acknowledge.rs`: acknowledgement batches: their shape (INVALID_REQUEST), then whether
//!   the member holds every offset (INVALID_RECORD_STATE, with why: another member, a lapsed
//!   lock, never delivered), applied all or nothing.
//! - `sessions.rs`: share sessions per (node, member) and their epochs.
//!
//! Nothing here reads a clock or does IO: every call that depends on time takes `now`, which
//! the wrapper supplies (`Instant::now()` for the fake, base + virtual offset for the
//! simulation). Nothing iterates a `HashMap`: the same calls give the same state.

pub(crate) mod acknowledge;
pub(crate) mod partition;
pub(crate) mod record_state;
pub(crate) mod sessions;
