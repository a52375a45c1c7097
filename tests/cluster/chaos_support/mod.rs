//! Support of the chaos tests on the three-broker cluster (`tests/chaos_*.rs`): the no-loss
//! harness, the brokers' stop/kill/start and the waits around them, and a loopback TCP fault
//! proxy. Every wait is for a condition, with a generous deadline only as a failure limit.
#![allow(dead_code)]

pub mod brokers;
pub mod ledger;
pub mod no_loss;
pub mod proxy;
pub mod workers;
