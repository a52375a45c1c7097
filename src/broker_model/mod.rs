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
//! - `share_fetch.rs`: ShareFetch's rules that need no broker state (how many records a
//!   fetch acquires, record_limit's among them; the answer's blank entries and topics).
//!
//! Nothing here reads a clock or does IO: every call that depends on time takes `now`, which
//! the wrapper supplies (`Instant::now()` for the fake, base + virtual offset for the
//! simulation). Nothing iterates a `HashMap`: the same calls give the same state.

pub(crate) mod acknowledge;
pub(crate) mod partition;
pub(crate) mod record_state;
pub(crate) mod sessions;
pub(crate) mod share_fetch;
