//! The producer keeps each partition's records in send order (issue 9, point 5), against a
//! real broker (`scripts/kafka up`).

mod common;
mod producer_support;

use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use producer_support::logged_numbers;

fn config() -> ProducerConfig {
    ProducerConfig::new(common::bootstrap()).delivery_timeout(Duration::from_secs(120))
}

async fn producer(config: ProducerConfig) -> Producer {
    Producer::new(config).await.expect("producer (is the broker up? `scripts/kafka up`)")
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
