//! Shared helpers for the integration tests. Every test here talks to a real broker started
//! by `scripts/kafka up`; when none answers, the test FAILS with a message saying how to start
//! one. Nothing is skipped silently.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_share::admin::Admin;
use kafka_share::cluster::{Cluster, ClusterConfig};

pub mod proxy;
pub mod secured;
#[cfg(feature = "sink")]
pub mod sink_bin;

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

/// A fresh directory under the system's temporary one, named by [`unique`].
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(unique(name));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
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
    create_kept_topic(admin, &name, partitions).await;
    name
}

/// Creates topic `name` with `retention.ms=-1`. Tests write records with fixed timestamps
/// from 2023 (their output is compared byte for byte), and with the broker's default
/// retention (7 days by record timestamp) its periodic check deleted them mid-test once the
/// segment rolled: a Java consumer found the topic empty (CI, `prints_what_java_prints`).
pub async fn create_kept_topic(admin: &Admin, name: &str, partitions: i32) {
    let topic = kafka_share::admin::NewTopic::new(name, partitions).config("retention.ms", "-1");
    let results = admin.create_topics(&[topic]).await.expect("create topic");
    for r in results {
        if let Err(e) = r {
            panic!("create topic {name}: {e}");
        }
    }
}

/// Describes `topic` once the broker's metadata has it with a leader on every partition (at
/// most 60 s). CreateTopics is answered when the controller has the topic; the broker asked
/// next may learn of it a moment later (on a busy machine, seconds).
pub async fn described_with_leaders(admin: &Admin, topic: &str) -> kafka_share::admin::TopicDescription {
    let wait = async {
        loop {
            if let Ok(t) = admin.describe_topic(topic).await {
                if !t.partitions.is_empty() && t.partitions.iter().all(|p| p.leader.is_some()) {
                    return t;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("{topic}: not described with leaders within 60 s"))
}

/// Produces `n` records `"{prefix}-{i}"` (key `k{i}`) round-robin over `partitions`
/// partitions of `topic`, and waits for all of them.
pub async fn produce(bootstrap: &str, topic: &str, partitions: i32, n: usize, prefix: &str) {
    use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
    let p = Producer::connect(ProducerConfig::new(bootstrap)).await.expect("producer");
    let mut futs = Vec::with_capacity(n);
    for i in 0..n {
        let rec = ProducerRecord::new(topic, format!("{prefix}-{i}"))
            .key(format!("k{i}"))
            .partition((i as i32) % partitions.max(1));
        futs.push(p.send(rec).await.expect("send"));
    }
    for f in futs {
        f.await.expect("delivered");
    }
    p.close(std::time::Duration::from_secs(10)).await.expect("producer close");
}

/// A new share group reading from the earliest offset (group config
/// share.auto.offset.reset=earliest), with an optional lock duration.
pub async fn new_group(admin: &Admin, prefix: &str, lock_ms: Option<u32>) -> String {
    let g = unique(prefix);
    admin.set_share_auto_offset_reset(&g, "earliest").await.expect("set share.auto.offset.reset");
    if let Some(ms) = lock_ms {
        admin
            .set_group_config(&g, "share.record.lock.duration.ms", &ms.to_string())
            .await
            .expect("set share.record.lock.duration.ms");
    }
    g
}

/// A share consumer config for tests: short waits so tests run fast.
pub fn consumer_config(bootstrap: &str, group: &str) -> kafka_share::ShareConsumerConfig {
    kafka_share::ShareConsumerConfig::new(bootstrap, group)
        .fetch_max_wait(std::time::Duration::from_millis(200))
        .client_id(format!("test-{group}"))
}

/// Polls until `want` records were received in total or `deadline` passes; in explicit mode
/// `on_record` must acknowledge each record.
pub async fn poll_until<F>(
    consumer: &kafka_share::ShareConsumer,
    want: usize,
    deadline: std::time::Duration,
    mut on_record: F,
) -> Vec<kafka_share::ConsumerRecord>
where
    F: FnMut(&kafka_share::ConsumerRecord),
{
    let end = tokio::time::Instant::now() + deadline;
    let mut got = Vec::new();
    while got.len() < want && tokio::time::Instant::now() < end {
        let recs = consumer.poll(std::time::Duration::from_millis(500)).await.expect("poll");
        for r in &recs {
            on_record(r);
        }
        got.extend(recs);
    }
    got
}

/// Waits until `group` has `n` members that all have partitions assigned.
pub async fn wait_for_members(admin: &Admin, group: &str, n: usize, timeout: std::time::Duration) {
    let end = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(d) = admin.describe_share_group(group).await {
            if d.members.len() >= n && d.members.iter().all(|m| m.partition_count() > 0) {
                return;
            }
        }
        assert!(tokio::time::Instant::now() < end, "group {group} never reached {n} members with assignments");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Produces `n` records to partition 0, one batch each (the broker hands out whole batches in
/// batch_optimized mode, so one-record batches let work spread over many members).
pub async fn produce_one_by_one(bootstrap: &str, topic: &str, n: usize, prefix: &str) {
    use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
    let p = Producer::connect(ProducerConfig::new(bootstrap)).await.expect("producer");
    for i in 0..n {
        p.send_and_wait(ProducerRecord::new(topic, format!("{prefix}-{i}")).partition(0))
            .await
            .expect("send");
    }
    p.close(std::time::Duration::from_secs(10)).await.expect("producer close");
}
