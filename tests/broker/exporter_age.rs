//! The age of the oldest record not yet acknowledged against the real broker, after a drain:
//! the persisted share-partition start offset trails the last acknowledgements (the state
//! write that moves it comes after them), so the record at the start offset is an old,
//! acknowledged one. The exporter reads the age at `max(start, end - lag)` instead: the first
//! of the records produced after the drain. Fails when the broker is absent.

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_share::consumer::{AcknowledgementMode, ShareConsumer};
use kafka_share::exporter::{Exporter, ExporterConfig, GroupFilter, Snapshot};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};

/// How long a wait for the broker's asynchronous state lasts before the test fails.
const WAIT: Duration = Duration::from_secs(90);

/// Records drained, then records left waiting.
const DRAINED: usize = 1_000;
const WAITING: usize = 100;

async fn produce_at(topic: &str, n: usize, timestamp_ms: i64) {
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    let mut sent = Vec::with_capacity(n);
    for i in 0..n {
        sent.push(
            p.send(ProducerRecord::new(topic, format!("v{i}")).partition(0).timestamp(timestamp_ms))
                .await
                .expect("send"),
        );
    }
    for s in sent {
        s.await.expect("delivered");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_drain_the_age_is_that_of_the_first_record_not_acknowledged() {
    if common::kafka_version() < (4, 2) {
        // No lag from the broker: the age stays at the start offset, labelled an estimate
        // (tests/broker/exporter.rs checks the estimate).
        return;
    }
    let admin = common::admin().await;
    let bs = common::bootstrap();
    let topic = common::new_topic(&admin, "exp-age", 1).await;
    let group = common::new_group(&admin, "exp-age-g", None).await;
    // Ten minutes old, drained; then one minute old, left waiting.
    let old = now_ms() - 600_000;
    produce_at(&topic, DRAINED, old).await;
    let c = ShareConsumer::connect(
        common::consumer_config(&bs, &group)
            .acknowledgement_mode(AcknowledgementMode::Explicit)
            .max_poll_records(300),
    )
    .await
    .expect("consumer");
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, DRAINED, WAIT, |r| c.acknowledge(r).expect("accept")).await;
    assert_eq!(got.len(), DRAINED);
    c.commit_sync(Duration::from_secs(10)).await.expect("commit");
    c.close(Duration::from_secs(10)).await.expect("close");
    let young = now_ms() - 60_000;
    produce_at(&topic, WAITING, young).await;

    let mut config = ExporterConfig::default();
    config.groups = GroupFilter::List(vec![group.clone()]);
    config.refresh_interval = Duration::from_millis(200);
    let exporter = Exporter::start(admin, config);
    let end = tokio::time::Instant::now() + WAIT;
    let s: std::sync::Arc<Snapshot> = loop {
        let s = exporter.next_refresh().await;
        if s.group(&group).is_some_and(|g| g.lag(None) == Some((WAITING as i64, false))) {
            break s;
        }
        assert!(tokio::time::Instant::now() < end, "lag {WAITING} never seen: {s:#?}");
    };
    let p = &s.group(&group).unwrap().partitions[0];
    eprintln!("after the drain: start offset {} (the first unacknowledged record is {DRAINED}), {p:?}", p.start_offset);
    assert_eq!(p.end_offset, Some((DRAINED + WAITING) as i64));
    assert_eq!(p.oldest_offset, DRAINED as i64, "{p:?}");
    assert_eq!(p.oldest_timestamp_ms, Some(young), "the first record produced after the drain: {p:?}");
    let age = s.group(&group).unwrap().oldest_age(None, SystemTime::now()).expect("an age");
    let since_young = Duration::from_millis((now_ms() - young) as u64);
    assert!(age <= since_young && age >= Duration::from_secs(60), "age {age:?}, the young records' {since_young:?}");
}
