//! Tests against the real three-broker cluster (`scripts/kafka up --nodes 3`; env
//! `KAFKA_CLUSTER_BOOTSTRAP`, default 127.0.0.1:29092): replication, leader moves, brokers
//! stopped and killed under the clients. Every test fails when the cluster is absent. Run with
//! `scripts/test --test cluster`.
//!
//! A new test joins this binary when it needs more than one broker.

#[path = "../common/mod.rs"]
mod common;

mod chaos_support;

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Every test here uses the same three brokers. The ones that stop, kill or cut them
/// ([`disrupting`]) run alone; the others ([`sharing`]) run side by side with each other only,
/// as they did when each file was its own binary and cargo ran binaries one after another.
static CLUSTER: RwLock<()> = RwLock::const_new(());

/// The cluster to itself: no other test runs until the guard drops.
async fn disrupting() -> RwLockWriteGuard<'static, ()> {
    CLUSTER.write().await
}

/// The cluster beside other sharing tests, never during a disrupting one.
async fn sharing() -> RwLockReadGuard<'static, ()> {
    CLUSTER.read().await
}
#[path = "../producer_support/mod.rs"]
mod producer_support;

mod chaos_broker_kill;
mod chaos_brokers;
mod chaos_consumer_kill;
mod chaos_network;
#[cfg(feature = "exporter")]
mod exporter_coordinator_kill;
#[cfg(feature = "exporter")]
mod exporter_outage;
mod producer;
mod share_consumer_cluster;
