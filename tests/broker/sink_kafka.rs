//! The `kafka` sink against a real broker: records consumed from one topic are copied to
//! another with key, value, headers and timestamp, `put` returns only once every copy is
//! acknowledged, and a transform can rewrite or drop records.

use crate::common;

use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::sink::{KafkaSink, Registry, SinkError, SinkTask, TaskConfig};
use kafka_share::{ConsumerRecord, ShareConsumer};

/// The records as `put` takes them: lent, not copied.
fn lent(records: &[kafka_share::sink::SinkRecord]) -> Vec<&kafka_share::sink::SinkRecord> {
    records.iter().collect()
}

const N: usize = 30;

/// Produces `N` records with keys, headers and fixed timestamps over 2 partitions of a new
/// topic.
async fn produce_source(topic: &str) {
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    let mut futs = Vec::new();
    for i in 0..N {
        let rec = ProducerRecord::new(topic, format!("v-{i}"))
            .key(format!("k{i}"))
            .partition((i % 2) as i32)
            .header("h", format!("x{i}"))
            .null_header("empty")
            .timestamp(1_700_000_000_000 + i as i64);
        futs.push(p.send(rec).await.expect("send"));
    }
    for f in futs {
        f.await.expect("delivered");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
}

/// Everything a new share group reads from `topic` (at least `n` records).
async fn read_all(topic: &str, n: usize) -> Vec<ConsumerRecord> {
    let admin = common::admin().await;
    let group = common::new_group(&admin, "g-sink-kafka", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    c.subscribe([topic.to_string()]).expect("subscribe");
    let mut got = common::poll_until(&c, n, Duration::from_secs(30), |_| {}).await;
    // A few more polls: nothing beyond `n` may arrive.
    got.extend(common::poll_until(&c, 1, Duration::from_secs(2), |_| {}).await);
    c.close(Duration::from_secs(10)).await.expect("close");
    got.sort_by_key(|r| (r.partition, r.offset));
    got
}

fn config(pairs: &[(&str, &str)]) -> TaskConfig {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn copies_records_with_key_value_headers_timestamp_and_partition() {
    let admin = common::admin().await;
    let source = common::new_topic(&admin, "sink-kafka-src", 2).await;
    let target = format!("{source}.copy");
    common::create_kept_topic(&admin, &target, 2).await;
    produce_source(&source).await;
    let records = read_all(&source, N).await;
    assert_eq!(records.len(), N);

    let bs = common::bootstrap();
    let cfg = config(&[
        ("connector.class", "kafka"),
        ("bootstrap.servers", bs.as_str()),
        ("target.topic.format", "${topic}.copy"),
        ("target.partition.preserve", "true"),
        ("producer.linger.ms", "5"),
    ]);
    let mut task = Registry::with_builtins().get("kafka").unwrap().create(&cfg).unwrap();
    task.start(&cfg).await.unwrap();
    task.put(&lent(&records)).await.unwrap();
    task.flush().await.unwrap();
    task.stop().await;

    // `put` returned after every acknowledgement, so the copies are all there now.
    let copies = read_all(&target, N).await;
    assert_eq!(copies.len(), N, "one copy per record, no more");
    for (src, copy) in records.iter().zip(&copies) {
        assert_eq!(copy.partition, src.partition, "partition preserved");
        assert_eq!(copy.key, src.key);
        assert_eq!(copy.value, src.value);
        assert_eq!(copy.timestamp, src.timestamp);
        let hs: Vec<(&[u8], Option<&[u8]>)> = copy.headers.iter().map(|h| (&h.key[..], h.value.as_deref())).collect();
        let want: Vec<(&[u8], Option<&[u8]>)> = src.headers.iter().map(|h| (&h.key[..], h.value.as_deref())).collect();
        assert_eq!(hs, want);
    }
}

#[tokio::test]
async fn a_transform_rewrites_and_drops_records() {
    let admin = common::admin().await;
    let source = common::new_topic(&admin, "sink-kafka-tx-src", 2).await;
    let target = common::new_topic(&admin, "sink-kafka-tx-dst", 1).await;
    produce_source(&source).await;
    let records = read_all(&source, N).await;

    let dst = target.clone();
    let mut task = KafkaSink::with_transform(move |r| {
        // Keep even offsets of partition 0 only, upper-cased.
        (r.partition == 0 && r.offset % 2 == 0).then(|| {
            ProducerRecord::new(&dst, r.value_str().unwrap_or("").to_uppercase()).key(r.key.clone().unwrap_or_default())
        })
    });
    task.start(&config(&[("bootstrap.servers", common::bootstrap().as_str())])).await.unwrap();
    task.put(&lent(&records)).await.unwrap();
    task.stop().await;

    let want: Vec<String> = records
        .iter()
        .filter(|r| r.partition == 0 && r.offset % 2 == 0)
        .map(|r| r.value_str().unwrap().to_uppercase())
        .collect();
    assert!(!want.is_empty());
    let copies = read_all(&target, want.len()).await;
    let got: Vec<String> = copies.iter().map(|r| r.value_str().unwrap().to_string()).collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_missing_target_topic_is_retriable_and_bad_settings_are_fatal() {
    let admin = common::admin().await;
    let source = common::new_topic(&admin, "sink-kafka-err", 2).await;
    produce_source(&source).await;
    let records = read_all(&source, N).await;
    let bs = common::bootstrap();

    let mut task = KafkaSink::new();
    let missing = common::unique("no-such-topic");
    task.start(&config(&[
        ("bootstrap.servers", bs.as_str()),
        ("target.topic", missing.as_str()),
        ("producer.max.block.ms", "2000"),
    ]))
    .await
    .unwrap();
    let e = task.put(&lent(&records[..3])).await.unwrap_err();
    assert!(matches!(e, SinkError::Retriable { .. }), "{e:?}");
    task.stop().await;

    let factory = Registry::with_builtins().get("kafka").unwrap();
    let e =
        factory.create(&config(&[("bootstrap.servers", bs.as_str()), ("target.topic", "t"), ("producer.acks", "2")]));
    let e = e.err().unwrap();
    assert!(matches!(e, SinkError::Fatal { .. }) && e.to_string().contains("acks"), "{e}");
    let e = factory.create(&config(&[("target.topic", "t")])).err().unwrap();
    assert!(e.to_string().contains("bootstrap.servers"), "{e}");
}
