//! Reading a partition back with a classic Fetch, for the producer tests.
#![allow(dead_code)]

use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_share::cluster::{Cluster, TrafficClass};
use kafka_share::protocol::records::{decode_batches, Record};

/// The partition's high watermark (the offset the next record would get).
pub async fn high_watermark(cluster: &Cluster, topic: &str, partition: i32) -> i64 {
    let leader = cluster.with_metadata(|m| m.leader(topic, partition)).expect("partition leader");
    let conn = cluster.broker(leader, TrafficClass::Fetch).await.expect("connect to leader");
    let part = FetchPartition::default().with_partition(partition).with_fetch_offset(0).with_partition_max_bytes(1);
    let req = FetchRequest::default().with_max_wait_ms(0).with_min_bytes(0).with_max_bytes(1).with_topics(vec![
        FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![part]),
    ]);
    let resp = cluster.send(&conn, &req, (4, 12)).await.expect("fetch");
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch error on {topic}-{partition}");
    p.high_watermark
}

/// Reads `count` records of one partition from offset 0 with Fetch (v4-v12 name topics).
pub async fn read_back(cluster: &Cluster, topic: &str, partition: i32, count: usize) -> Vec<Record> {
    let leader = cluster.with_metadata(|m| m.leader(topic, partition)).expect("partition leader");
    let conn = cluster.broker(leader, TrafficClass::Fetch).await.expect("connect to leader");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut out: Vec<Record> = Vec::new();
    let mut offset = 0;
    while out.len() < count {
        assert!(tokio::time::Instant::now() < deadline, "read {} of {count} records of {topic}-{partition}", out.len());
        let part = FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(8 << 20);
        let req = FetchRequest::default()
            .with_max_wait_ms(200)
            .with_min_bytes(1)
            .with_max_bytes(16 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![part])]);
        let resp = cluster.send(&conn, &req, (4, 12)).await.expect("fetch");
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch error on {topic}-{partition}");
        let records = decode_batches(p.records.clone().unwrap_or_default()).expect("decode");
        // A compressed batch comes back whole, possibly starting before `offset`.
        let from = offset;
        for r in records.into_iter().filter(|r| r.offset >= from) {
            offset = r.offset + 1;
            out.push(r);
        }
    }
    out
}

/// The values of a partition's log, in offset order, parsed as decimal numbers.
pub async fn logged_numbers(cluster: &Cluster, topic: &str, partition: i32, count: usize) -> Vec<u64> {
    read_back(cluster, topic, partition, count)
        .await
        .iter()
        .map(|r| {
            let v = r.value.as_deref().expect("a value");
            std::str::from_utf8(v).expect("utf-8").parse::<u64>().expect("a number")
        })
        .collect()
}
