//! The blocking producer, admin and metrics endpoint against the real broker
//! (`scripts/kafka up`; fails without one): what a service without an async runtime needs
//! beside the blocking consumer. Sends are checked by the log end offsets they leave, drops
//! on an async runtime's thread must not panic, and a drop still delivers what was queued.
//! Waits are for conditions, never for time.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use kafka_share::admin::{blocking::Admin, OffsetSpec};
use kafka_share::producer::{blocking::Producer, ProducerConfig, ProducerRecord};
use kafka_share::TopicPartition;

/// The sum of the topic's log end offsets over `partitions`, read with the blocking admin.
fn end_offsets(admin: &Admin, topic: &str, partitions: i32) -> i64 {
    let tps: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    let listed = admin.run(async |a| a.list_offsets(&tps, OffsetSpec::Latest).await).expect("list offsets");
    listed.values().map(|o| o.offset.unwrap_or(0)).sum()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(std::time::Instant::now() < end, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn admin() -> Admin {
    let bs = common::bootstrap();
    Admin::connect_to(&bs).unwrap_or_else(|e| {
        panic!("no Kafka broker answered at {bs}: {e}\nStart one with `scripts/kafka up`, or run `scripts/test`.")
    })
}

#[test]
fn a_blocking_service_sends_and_administers_without_a_runtime_of_its_own() {
    let admin = admin();
    let topic = common::unique("blocking-send");
    admin.create_topic(&topic, 2).expect("create topic");
    assert!(admin.list_topics().expect("list topics").iter().any(|t| t.name == topic));
    let cluster = admin.run(async |a| a.describe_cluster().await).expect("describe cluster");
    assert!(!cluster.brokers.is_empty());

    let producer = Producer::connect(ProducerConfig::new(common::bootstrap())).expect("producer");
    let deliveries: Vec<_> = (0..20)
        .map(|i| producer.send(ProducerRecord::new(&topic, format!("v{i}")).partition(i % 2)).expect("queued"))
        .collect();
    for d in deliveries {
        let written = d.wait().expect("delivered");
        assert!(written.offset >= 0 && (0..2).contains(&written.partition));
    }
    let last = producer.send_and_wait(ProducerRecord::new(&topic, "last").partition(0)).expect("sent");
    assert_eq!(last.offset, 10, "partition 0 had 10 records before it");
    producer.flush().expect("flush");
    assert_eq!(producer.metrics().get(kafka_share::producer::PRODUCER, "record-send-total"), Some(21.0));
    producer.close(Duration::from_secs(10)).expect("close");
    assert_eq!(end_offsets(&admin, &topic, 2), 21);

    // Sending to a topic that does not exist fails at once, typed.
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).expect("producer");
    match p.send(ProducerRecord::new(common::unique("no-such-topic"), "x")) {
        Err(kafka_share::Error::UnknownTopic(_)) => {}
        other => panic!("expected UnknownTopic, got {other:?}"),
    }
    assert_eq!(admin.delete_topics(&[&topic]).expect("delete").len(), 1);
}

/// The last owner of each blocking client is a task on a multi-threaded runtime (as a
/// metrics collector's clone is): dropping them there must not panic, and the producer's
/// drop still delivers the records it had queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_on_a_runtimes_thread_they_do_not_panic_and_queued_records_are_delivered() {
    let bs = common::bootstrap();
    let topic = common::unique("blocking-drop");
    let (admin, producer) = tokio::task::spawn_blocking({
        let (bs, topic) = (bs.clone(), topic.clone());
        move || {
            let admin = admin();
            admin.create_topic(&topic, 1).expect("create topic");
            // A long linger: the records are still queued when the producer is dropped.
            let cfg = ProducerConfig::new(&bs).linger(Duration::from_secs(30));
            let producer = Producer::connect(cfg).expect("producer");
            for i in 0..5 {
                let _ = producer.send(ProducerRecord::new(&topic, format!("q{i}"))).expect("queued");
            }
            (Arc::new(admin), Arc::new(producer))
        }
    })
    .await
    .expect("set up");
    let admin_clone = admin.clone();
    // The last clones go on a task; dropped there, on a worker thread of this runtime.
    tokio::spawn(async move {
        drop(producer);
        drop(admin_clone);
    })
    .await
    .expect("the drops did not panic");
    tokio::task::spawn_blocking(move || {
        wait_for("the queued records to be written by the drop's close", || end_offsets(&admin, &topic, 1) == 5);
    })
    .await
    .expect("delivered");
    // And the last admin dropped right here, on the test's runtime thread.
}

#[cfg(feature = "prometheus")]
#[test]
fn a_blocking_services_metrics_endpoint_serves_the_producers_metrics_in_seconds() {
    use std::io::{Read, Write};

    use kafka_share::prometheus::{blocking, Registry, SnapshotCollector};

    let admin = admin();
    let topic = common::unique("blocking-metrics");
    admin.create_topic(&topic, 1).expect("create topic");
    let producer = Arc::new(Producer::connect(ProducerConfig::new(common::bootstrap())).expect("producer"));
    producer.send_and_wait(ProducerRecord::new(&topic, "m")).expect("sent");
    let mut registry = Registry::default();
    let p = producer.clone();
    registry.register_collector(Box::new(SnapshotCollector::new("blocking", move || p.metrics())));
    let endpoint = blocking::serve("0.0.0.0:0", Arc::new(registry)).expect("endpoint");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", endpoint.local_addr().port())).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.contains("kafka_producer_metrics_record_send_total{client_id=\"blocking\"} 1"), "{text}");
    let max = text
        .lines()
        .find_map(|l| l.strip_prefix("kafka_producer_metrics_request_latency_max_seconds{client_id=\"blocking\"} "))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no request_latency_max_seconds in {text}"));
    // One request's latency, in seconds: above zero, far below the milliseconds it would be.
    assert!(max > 0.0 && max < 30.0, "{max}: {text}");
    drop(endpoint);
    drop(producer); // its last clone is in the registry, dropped with the endpoint
}
