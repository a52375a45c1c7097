//! An in-process, scripted fake Kafka cluster for testing share consumers without a broker
//! (feature `test-util`).
//!
//! Each node listens on its own 127.0.0.1 port; all nodes share one state: one topic with a
//! fixed topic id and N partitions (each with a leader), per-offset share state (available,
//! acquired by a member, done), share sessions per (node, member), and group members. It
//! speaks the real wire protocol: ApiVersions v3, Metadata 10-12, FindCoordinator 4-6,
//! ShareGroupHeartbeat v1, ShareFetch and ShareAcknowledge v1-2 (the crate's own codec).
//!
//! Tests script faults with [`Rule`]s, and assert on the request [`Logged`] log and on
//! [`FakeCluster::problems`]: protocol violations the fake saw (bad epochs, two requests in
//! flight on one session, acks for records the member does not hold, acks on an epoch-0
//! fetch, Renew on v1, malformed batches).

mod cluster;
pub mod code;
mod config;
mod handlers;
mod log;
mod records;
mod script;
mod server;
mod share;
mod state;

pub use cluster::FakeCluster;
pub use config::FakeConfig;
pub use log::{AckedOffset, Logged, Req};
pub use records::RecordState;
pub use script::{Action, Rule};
pub use share::record_value;

/// Metadata API key.
pub const METADATA: i16 = 3;
/// FindCoordinator API key.
pub const FIND_COORDINATOR: i16 = 10;
/// ShareGroupHeartbeat API key.
pub const HEARTBEAT: i16 = 76;
/// ShareFetch API key.
pub const SHARE_FETCH: i16 = 78;
/// ShareAcknowledge API key.
pub const SHARE_ACKNOWLEDGE: i16 = 79;
