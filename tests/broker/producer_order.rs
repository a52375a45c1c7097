//! The producer keeps each partition's records in send order (issue 9, point 5), against a
//! real broker (`scripts/kafka up`).

use crate::common;
use crate::producer_support;

use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use producer_support::{high_watermark, logged_numbers};

fn config() -> ProducerConfig {
    ProducerConfig::new(common::bootstrap()).delivery_timeout(Duration::from_secs(120))
}

async fn producer(config: ProducerConfig) -> Producer {
    Producer::connect(config).await.expect("producer (is the broker up? `scripts/kafka up`)")
}

/// The setup: one partition, one sending task, 5 requests in flight, linger 10 ms, no
/// errors. Every batch is one request, so many requests of the partition are in flight at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_partition_keeps_send_order_with_five_in_flight() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "order-one", 1).await;
    let p = producer(config().max_in_flight(5).linger(Duration::from_millis(10)).batch_size(4096)).await;
    const N: u64 = 60_000;
    let mut futures = Vec::with_capacity(N as usize);
    for i in 0..N {
        futures.push(p.send(ProducerRecord::new(topic.clone(), i.to_string())).await.expect("send"));
    }
    let mut last = -1;
    for (i, f) in futures.into_iter().enumerate() {
        let m = f.await.expect("delivered");
        assert!(m.offset > last, "record {i} got offset {} after offset {last}: reported offsets went back", m.offset);
        last = m.offset;
    }
    let logged = logged_numbers(p.cluster(), &topic, 0, N as usize).await;
    let out_of_place = logged.iter().enumerate().filter(|(o, v)| *o as u64 != **v).count();
    assert_eq!(out_of_place, 0, "{out_of_place} of {N} records are not at the offset of their send order");
    p.close(Duration::from_secs(10)).await.expect("close");
}

/// Sends `n` records over `partitions` partitions round-robin, each value its index within its
/// partition; calls `between(i)` after each send. Returns the reported offsets per partition.
async fn send_numbered(
    p: &Producer,
    topic: &str,
    partitions: i32,
    n: u64,
    mut between: impl FnMut(u64),
) -> Vec<Vec<i64>> {
    let mut futures = Vec::with_capacity(n as usize);
    for i in 0..n {
        let partition = (i % partitions as u64) as i32;
        let value = (i / partitions as u64).to_string();
        let r = ProducerRecord::new(topic.to_string(), value).partition(partition);
        futures.push((partition, p.send(r).await.expect("send")));
        between(i);
    }
    let mut offsets = vec![Vec::new(); partitions as usize];
    for (partition, f) in futures {
        offsets[partition as usize].push(f.await.expect("delivered").offset);
    }
    offsets
}

/// Every partition's log holds exactly its records, once each, in send order; then the
/// offsets the producer reported are those of the log.
async fn assert_logs_in_send_order(p: &Producer, topic: &str, offsets: &[Vec<i64>]) {
    for (partition, offs) in offsets.iter().enumerate() {
        let logged = logged_numbers(p.cluster(), topic, partition as i32, offs.len()).await;
        let misplaced = logged.iter().enumerate().filter(|(o, v)| *o as u64 != **v).count();
        assert_eq!(misplaced, 0, "partition {partition}: {misplaced} records not in send order");
        // Nothing beyond: a duplicate would sit after the last expected offset.
        let end = high_watermark(p.cluster(), topic, partition as i32).await;
        assert_eq!(end, offs.len() as i64, "partition {partition} holds more records than were sent");
    }
    for (partition, offs) in offsets.iter().enumerate() {
        let misreported = offs.iter().enumerate().filter(|(i, o)| *i as i64 != **o).count();
        assert_eq!(
            misreported,
            0,
            "partition {partition}: {misreported} of {} records reported at another offset than the log's \
             (first offsets {:?})",
            offs.len(),
            &offs[..offs.len().min(5)]
        );
    }
}

/// The test: 100,000 records over 10 partitions, 5 in flight, order checked per
/// partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_records_over_ten_partitions_keep_order() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "order-ten", 10).await;
    let p = producer(config().max_in_flight(5).linger(Duration::from_millis(10)).batch_size(4096)).await;
    assert!(p.config().enable_idempotence, "idempotent by default");
    let offsets = send_numbered(&p, &topic, 10, 100_000, |_| {}).await;
    assert_logs_in_send_order(&p, &topic, &offsets).await;
    p.close(Duration::from_secs(10)).await.expect("close");
}

/// Forced retries: the producer's connection to the leader is cut again and again under
/// requests in flight (the cluster's own pooled connection, closed from the test). Every
/// in-flight batch fails and is resent; the broker's sequence check must drop the copies it
/// already wrote, and the resends must land in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_neither_duplicate_nor_reorder() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "order-cut", 10).await;
    let p = producer(config().max_in_flight(5).linger(Duration::from_millis(1)).batch_size(2048)).await;
    let cluster = p.cluster().clone();
    let mut cuts = 0;
    let offsets = send_numbered(&p, &topic, 10, 100_000, |i| {
        if i % 7_000 == 3_500 {
            // Known once the first send loaded the topic.
            let leader = cluster.with_metadata(|m| m.leader(&topic, 0)).expect("leader");
            cluster.close_broker(leader);
            cuts += 1;
        }
    })
    .await;
    assert_eq!(cuts, 14);
    assert_logs_in_send_order(&p, &topic, &offsets).await;
    p.close(Duration::from_secs(10)).await.expect("close");
}
