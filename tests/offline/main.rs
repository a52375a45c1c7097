//! Tests that need nothing running: the client against in-process fake brokers (the crate's
//! `test_util` fake cluster and this binary's scripted `fake_broker`), faults a real broker
//! cannot produce, the processing engine's extremes. Run with
//! `cargo test --features test-util --test offline` (add `sink` for the sink's fake tests).
//!
//! A new test joins this binary when it starts no broker: add its file here and a `mod` line.

mod fake_broker;
#[path = "../support/logs.rs"]
mod logs;

#[cfg(feature = "exporter")]
mod exporter_fake;
#[cfg(feature = "exporter")]
mod exporter_manifests;
mod fake_redelivery;
mod faults_acks;
mod faults_backoff;
mod faults_close;
mod faults_dead_broker;
mod faults_fake_self_check;
mod faults_malformed;
mod faults_outcome_unknown;
mod faults_pacing;
mod faults_sessions;
mod faults_topics;
mod faults_versions;
mod processor_fake;
#[cfg(feature = "sink")]
mod sink_fake;
#[cfg(feature = "sink")]
mod sink_validate_cli;
mod test_util_example;
