//! Shared helpers for the integration tests. Every test here talks to a real broker started
//! by `scripts/kafka up`; when none answers, the test FAILS with a message saying how to start
//! one. Nothing is skipped silently.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use kafka_share::admin::Admin;
use kafka_share::cluster::{Cluster, ClusterConfig};

/// The single-node broker (env `KAFKA_BOOTSTRAP`, default 127.0.0.1:19092).
pub fn bootstrap() -> String {
    std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:19092".into())
}

/// The three-node cluster (env `KAFKA_CLUSTER_BOOTSTRAP`, default 127.0.0.1:29092).
pub fn cluster_bootstrap() -> String {
    std::env::var("KAFKA_CLUSTER_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:29092".into())
}

/// The broker version under test (env `KAFKA_VERSION`, default 4.4.0).
pub fn kafka_version() -> (u32, u32) {
    let v = std::env::var("KAFKA_VERSION").unwrap_or_else(|_| "4.4.0".into());
    let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(4), it.next().unwrap_or(4))
}

/// Whether the broker under test has the v2 share RPCs (4.2+).
pub fn broker_has_v2() -> bool {
    kafka_version() >= (4, 2)
}

fn no_broker(addr: &str, e: impl std::fmt::Display) -> ! {
    panic!(
        "no Kafka broker answered at {addr}: {e}\n\
         Start one with `scripts/kafka up` (single node) or `scripts/kafka up --nodes 3` (cluster), \
         or run the whole suite with `scripts/test`."
    )
}

/// A cluster handle on the single-node broker; panics (fails the test) if it is not running.
pub async fn cluster() -> Arc<Cluster> {
    let addr = bootstrap();
    match Cluster::connect(ClusterConfig::new(&addr)).await {
        Ok(c) => c,
        Err(e) => no_broker(&addr, e),
    }
}

/// An admin client on the single-node broker.
pub async fn admin() -> Admin {
    let addr = bootstrap();
    match Admin::connect_to(&addr).await {
        Ok(a) => a,
        Err(e) => no_broker(&addr, e),
    }
}

/// An admin client on the three-node cluster.
pub async fn cluster_admin() -> Admin {
    let addr = cluster_bootstrap();
    match Admin::connect_to(&addr).await {
        Ok(a) => a,
        Err(e) => no_broker(&addr, e),
    }
}

/// A name no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{prefix}-{nanos:x}-{:x}", rand_u32())
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish() as u32
}

/// Creates a fresh topic with `partitions` partitions and returns its name.
pub async fn new_topic(admin: &Admin, prefix: &str, partitions: i32) -> String {
    let name = unique(prefix);
    admin.create_topic(&name, partitions).await.expect("create topic");
    name
}
