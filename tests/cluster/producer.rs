//! The producer against a real broker (`scripts/kafka up`): partitioning, offsets, content,
//! compression, errors, and volume. Records are read back with a classic Fetch.

use crate::common;
use crate::producer_support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use kafka_share::config::Properties;
use kafka_share::producer::{partition_for_key, Acks, DeliveryFuture, Producer, ProducerConfig, ProducerRecord};
use kafka_share::protocol::records::Compression;
use kafka_share::Error;
use producer_support::read_back;

fn config() -> ProducerConfig {
    ProducerConfig::new(common::bootstrap()).delivery_timeout(Duration::from_secs(60))
}

async fn producer(config: ProducerConfig) -> Producer {
    Producer::connect(config).await.expect("producer (is the broker up? `scripts/kafka up`)")
}

/// Checks each partition's offsets are exactly 0..n (no gap, no duplicate).
fn assert_consecutive(offsets: &HashMap<i32, Vec<i64>>) {
    for (p, offs) in offsets {
        let mut sorted = offs.clone();
        sorted.sort_unstable();
        let expected: Vec<i64> = (0..sorted.len() as i64).collect();
        assert_eq!(sorted, expected, "offsets of partition {p}");
    }
}

#[tokio::test]
async fn keys_headers_and_partitions_round_trip() {
    let _turn = crate::sharing().await;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "produce-keys", 3).await;
    let p = producer(config()).await;
    let mut sent: Vec<(ProducerRecord, DeliveryFuture)> = Vec::new();
    for i in 0..60 {
        let mut r = ProducerRecord::new(topic.clone(), format!("value-{i}")).header("n", i.to_string());
        r = match i % 3 {
            0 => r.key(format!("key-{i}")),
            1 => r.partition(2).null_header("empty"),
            _ => r.timestamp(1_600_000_000_000 + i),
        };
        let f = p.send(r.clone()).await.expect("send");
        sent.push((r, f));
    }
    let mut offsets: HashMap<i32, Vec<i64>> = HashMap::new();
    let mut expected: BTreeMap<(i32, i64), ProducerRecord> = BTreeMap::new();
    for (r, f) in sent {
        let m = f.await.expect("delivered");
        assert_eq!(m.topic, topic);
        match (&r.key, r.partition) {
            (Some(k), _) => assert_eq!(m.partition, partition_for_key(k, 3), "murmur2 partition of {k:?}"),
            (None, Some(p)) => assert_eq!(m.partition, p),
            _ => {}
        }
        if let Some(ts) = r.timestamp {
            assert_eq!(m.timestamp, ts);
        }
        offsets.entry(m.partition).or_default().push(m.offset);
        expected.insert((m.partition, m.offset), r);
    }
    assert_consecutive(&offsets);
    for (partition, offs) in &offsets {
        for rec in read_back(p.cluster(), &topic, *partition, offs.len()).await {
            let want = &expected[&(*partition, rec.offset)];
            assert_eq!(rec.key, want.key);
            assert_eq!(rec.value, want.value);
            let headers: Vec<(String, Option<Bytes>)> =
                rec.headers.iter().map(|h| (h.key_str().unwrap().to_string(), h.value.clone())).collect();
            assert_eq!(headers, want.headers);
            if let Some(ts) = want.timestamp {
                assert_eq!(rec.timestamp, ts);
            }
        }
    }
    p.close(Duration::from_secs(10)).await.expect("close");
}

#[tokio::test]
async fn every_compression_round_trips() {
    let _turn = crate::sharing().await;
    let admin = common::admin().await;
    for compression in Compression::ALL {
        let topic = common::new_topic(&admin, &format!("produce-{compression}"), 1).await;
        let p = producer(config().compression(compression).acks(Acks::Leader).enable_idempotence(false)).await;
        let mut futures = Vec::new();
        for i in 0..300 {
            let value = format!("{compression} record {i} {}", "x".repeat(i % 50));
            futures.push(p.send(ProducerRecord::new(topic.clone(), value)).await.expect("send"));
        }
        for (i, f) in futures.into_iter().enumerate() {
            assert_eq!(f.await.expect("delivered").offset, i as i64, "{compression}");
        }
        let back = read_back(p.cluster(), &topic, 0, 300).await;
        for (i, r) in back.iter().enumerate() {
            let value = format!("{compression} record {i} {}", "x".repeat(i % 50));
            assert_eq!(r.value.as_deref(), Some(value.as_bytes()), "{compression} offset {i}");
        }
        p.close(Duration::from_secs(10)).await.expect("close");
    }
}

#[tokio::test]
async fn bad_records_fail_fast_with_clear_errors() {
    let _turn = crate::sharing().await;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "produce-errors", 2).await;
    let p = producer(config().max_request_size(10_000)).await;

    let missing = common::unique("no-such-topic");
    let e = p.send(ProducerRecord::new(missing.clone(), "v")).await.unwrap_err();
    assert!(matches!(&e, Error::UnknownTopic(t) if *t == missing), "{e:?}");

    let e = p.send(ProducerRecord::new(topic.clone(), vec![0u8; 20_000])).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("max.request.size"), "{e}");

    let e = p.send(ProducerRecord::new(topic.clone(), "v").partition(2)).await.unwrap_err();
    assert!(e.to_string().contains("partition 2 of topic") && e.to_string().contains("2 partitions"), "{e}");

    let e = p.send(ProducerRecord::new(topic.clone(), "v").timestamp(-5)).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    // The producer still works after refusals, and refuses everything once closed.
    let m = p.send_and_wait(ProducerRecord::new(topic.clone(), "ok").partition(1)).await.expect("send");
    assert_eq!((m.partition, m.offset), (1, 0));
    p.close(Duration::from_secs(10)).await.expect("close");
    let e = p.send(ProducerRecord::new(topic.clone(), "late")).await.unwrap_err();
    assert!(matches!(e, Error::Closed), "{e}");
    p.close(Duration::from_secs(1)).await.expect("closing twice is fine");
}

#[tokio::test]
async fn properties_refuse_unsupported_settings() {
    let _turn = crate::sharing().await;
    let mut props = Properties::from_pairs([("bootstrap.servers", common::bootstrap())]);
    props.set("enable.idempotence", "true");
    props.set("acks", "1");
    let e = Producer::from_properties(&props).await.unwrap_err();
    assert!(matches!(&e, Error::Config { key, .. } if key == "acks"), "{e}");
    props.set("transactional.id", "tx");
    let e = Producer::from_properties(&props).await.unwrap_err();
    assert!(e.to_string().contains("not supported yet"), "{e}");

    let props = Properties::from_pairs([
        ("bootstrap.servers", common::bootstrap()),
        ("linger.ms", "1".into()),
        ("compression.type", "lz4".into()),
    ]);
    let p = Producer::from_properties(&props).await.expect("producer from properties");
    assert_eq!(p.config().compression, Compression::Lz4);
    p.close(Duration::from_secs(5)).await.expect("close");
}

#[tokio::test]
async fn hundred_thousand_records_all_accounted_for() {
    let _turn = crate::sharing().await;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "produce-volume", 3).await;
    let cfg = config().batch_size(65_536).linger(Duration::from_millis(10)).buffer_memory(4 << 20);
    let p = producer(cfg).await;
    let value = Bytes::from(vec![b'v'; 100]);
    let mut futures = Vec::with_capacity(100_000);
    for i in 0..100_000u32 {
        let r = if i % 2 == 0 {
            ProducerRecord::new(topic.clone(), value.clone()).key(i.to_be_bytes().to_vec())
        } else {
            ProducerRecord::new(topic.clone(), value.clone())
        };
        futures.push(p.send(r).await.expect("send"));
    }
    p.flush().await;
    let mut offsets: HashMap<i32, Vec<i64>> = HashMap::new();
    for f in futures {
        let m = f.await.expect("delivered");
        offsets.entry(m.partition).or_default().push(m.offset);
    }
    assert_eq!(offsets.values().map(Vec::len).sum::<usize>(), 100_000);
    assert_eq!(offsets.len(), 3, "keys and the sticky partitioner use every partition");
    assert_consecutive(&offsets);
    // The log agrees: the last offset of each partition holds a record.
    for (partition, offs) in &offsets {
        let back = read_back(p.cluster(), &topic, *partition, offs.len()).await;
        assert_eq!(back.len(), offs.len());
    }
    p.close(Duration::from_secs(10)).await.expect("close");
}

#[tokio::test]
async fn dropping_the_producer_still_delivers() {
    let _turn = crate::sharing().await;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "produce-drop", 1).await;
    let p = producer(config().linger(Duration::from_millis(50))).await;
    let mut futures = Vec::new();
    for i in 0..20 {
        futures.push(p.send(ProducerRecord::new(topic.clone(), format!("{i}"))).await.expect("send"));
    }
    drop(p);
    for (i, f) in futures.into_iter().enumerate() {
        assert_eq!(f.await.expect("delivered after drop").offset, i as i64);
    }
}

/// Runs on the 3-node cluster that scripts/test starts (`scripts/kafka up --nodes 3`).
#[tokio::test]
async fn three_node_cluster_acks_all() {
    let _turn = crate::sharing().await;
    use kafka_share::admin::NewTopic;
    let admin = common::cluster_admin().await;
    let topic = common::unique("produce-cluster");
    let created = admin.create_topics(&[NewTopic::new(&topic, 6).replication_factor(3)]).await.expect("create");
    created.into_iter().for_each(|r| r.expect("topic created"));
    let p = producer(ProducerConfig::new(common::cluster_bootstrap()).acks(Acks::All)).await;
    let mut futures = Vec::new();
    for i in 0..6_000u32 {
        let r = ProducerRecord::new(topic.clone(), format!("v{i}")).key(format!("k{}", i % 97));
        futures.push(p.send(r).await.expect("send"));
    }
    let mut offsets: HashMap<i32, Vec<i64>> = HashMap::new();
    for f in futures {
        let m = f.await.expect("delivered");
        offsets.entry(m.partition).or_default().push(m.offset);
    }
    assert_consecutive(&offsets);
    let leaders: std::collections::HashSet<i32> =
        p.cluster().with_metadata(|m| (0..6).filter_map(|q| m.leader(&topic, q)).collect());
    assert!(leaders.len() > 1, "partitions spread over brokers: {leaders:?}");
    for (partition, offs) in &offsets {
        assert_eq!(read_back(p.cluster(), &topic, *partition, offs.len()).await.len(), offs.len());
    }
    p.close(Duration::from_secs(10)).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_connections_are_retried() {
    let _turn = crate::sharing().await;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "produce-retry", 1).await;
    let p = producer(config().batch_size(4096).linger(Duration::from_millis(1))).await;
    let mut futures = Vec::new();
    for i in 0..20_000u32 {
        futures.push(p.send(ProducerRecord::new(topic.clone(), format!("r{i}"))).await.expect("send"));
        if i % 500 == 250 {
            // Cut the connection under in-flight requests: they fail, and must be retried.
            let leader = p.cluster().with_metadata(|m| m.leader(&topic, 0)).expect("leader");
            p.cluster().close_broker(leader);
        }
    }
    let mut offsets = Vec::new();
    for f in futures {
        offsets.push(f.await.expect("delivered despite the broken connections").offset);
    }
    // Idempotent (the default): retries neither duplicate nor reorder.
    for w in offsets.windows(2) {
        assert!(w[0] < w[1], "offsets go back or repeat: {} then {}", w[0], w[1]);
    }
    assert_eq!(offsets.last(), Some(&19_999), "no batch written twice");
    p.close(Duration::from_secs(10)).await.expect("close");
}
