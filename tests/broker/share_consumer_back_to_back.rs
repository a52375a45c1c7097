//! An application that polls back to back must get every record at its first delivery, and
//! the acknowledgement commit callback must tell it only of its own acknowledgements (real
//! broker).
//!
//! The race this pins (issue 34): a poll waits longer than a quarter of the lock and gives up
//! empty; the fetch it caused is still parked on the broker. A record produced in the few
//! milliseconds before the next poll makes the broker answer that fetch, and the record is
//! buffered while no poll waits. The consumer took the age of the last poll's *arrival* as
//! the application's idle time and released the record unseen (delivery count 2 on its way
//! back), and the callback reported that RELEASE as an acknowledgement of the application's.
//! Here every round recreates it on purpose: polls of 700 ms against a 2 s lock (idle after
//! 500 ms), a fetch wait of 2 s (the fetch outlives the poll), and one record produced right
//! after each empty poll, with 15 ms before the next.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_share::consumer::{AcknowledgementMode, FETCH_MANAGER};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::ShareConsumer;

const T: Duration = Duration::from_secs(10);
const RECORDS: usize = 8;

#[tokio::test]
async fn records_produced_between_back_to_back_polls_come_at_delivery_count_1() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "back-to-back", 1).await;
    let group = common::new_group(&admin, "g-back-to-back", Some(2000)).await;
    let cfg = common::consumer_config(&bs, &group)
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .fetch_max_wait(Duration::from_secs(2));
    let c = ShareConsumer::connect(cfg).await.unwrap();
    // Offsets the callback reported as acknowledged, and how often.
    let told: Arc<Mutex<BTreeMap<i64, usize>>> = Arc::default();
    let t = told.clone();
    c.set_acknowledgement_commit_callback(move |_tp, offsets, r| {
        if r.is_ok() {
            let mut told = t.lock().unwrap();
            for o in offsets {
                *told.entry(*o).or_default() += 1;
            }
        }
    })
    .unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let p = Producer::connect(ProducerConfig::new(&bs)).await.expect("producer");
    // Warm the producer (metadata, connection): a send in the gap between polls takes ms.
    p.send_and_wait(ProducerRecord::new(&topic, "warm").partition(0)).await.expect("send");
    let mut first: BTreeMap<i64, i16> = BTreeMap::new();
    let mut acked: BTreeMap<i64, usize> = BTreeMap::new();
    let mut produced = 1;
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while first.len() < RECORDS + 1 {
        assert!(tokio::time::Instant::now() < end, "only {} of {} records came: {first:?}", first.len(), RECORDS + 1);
        let recs = c.poll(Duration::from_millis(700)).await.unwrap();
        for r in &recs {
            first.entry(r.offset).or_insert(r.delivery_count);
            c.acknowledge(r).unwrap();
            *acked.entry(r.offset).or_default() += 1;
        }
        // The poll gave up empty while its fetch waits on the broker: a record now is the
        // answer to that fetch, arriving between two polls.
        if recs.is_empty() && produced < RECORDS + 1 && !first.is_empty() {
            p.send_and_wait(ProducerRecord::new(&topic, format!("v-{produced}")).partition(0))
                .await
                .expect("send");
            produced += 1;
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    c.commit_sync(T).await.unwrap();
    let released_unseen = c.metrics().get(FETCH_MANAGER, "records-released-unseen-total").unwrap_or(0.0);
    c.close(T).await.unwrap();
    p.close(T).await.expect("producer close");
    let told = told.lock().unwrap();
    println!("first delivery counts {first:?}, released unseen {released_unseen}, callback told {told:?}");
    let not_ours: Vec<_> = told.iter().filter(|(o, n)| acked.get(o).is_none_or(|a| *n > a)).collect();
    let later: Vec<_> = first.iter().filter(|(_, n)| **n != 1).collect();
    assert!(later.is_empty(), "records first delivered past delivery 1: {later:?}");
    assert_eq!(released_unseen, 0.0, "the consumer released records of an application that kept polling");
    assert!(not_ours.is_empty(), "the callback reported acknowledgements the application never made: {not_ours:?}");
    assert_eq!(told.values().sum::<usize>(), RECORDS + 1, "the callback told of every acknowledgement: {told:?}");
}

/// Offsets the callback reported as acknowledged, and how often, through `c`'s callback.
fn told_by(c: &ShareConsumer) -> Arc<Mutex<BTreeMap<i64, usize>>> {
    let told: Arc<Mutex<BTreeMap<i64, usize>>> = Arc::default();
    let t = told.clone();
    c.set_acknowledgement_commit_callback(move |_tp, offsets, r| {
        assert!(r.is_ok(), "{r:?}");
        let mut told = t.lock().unwrap();
        for o in offsets {
            *told.entry(*o).or_default() += 1;
        }
    })
    .unwrap();
    told
}

fn metric(c: &ShareConsumer, name: &str) -> f64 {
    c.metrics().get(FETCH_MANAGER, name).unwrap_or(0.0)
}

/// Records the consumer gives back on its own (the application stopped polling; then at
/// close) are not the application's acknowledgements: the callback hears only of the five
/// records the application accepted.
#[tokio::test]
async fn the_callback_hears_of_the_applications_acknowledgements_only() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "cb-own-releases", 1).await;
    common::produce(&bs, &topic, 1, 40, "v").await;
    let group = common::new_group(&admin, "g-cb-own-releases", Some(2000)).await;
    let cfg = common::consumer_config(&bs, &group)
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .max_poll_records(5);
    let c = ShareConsumer::connect(cfg).await.unwrap();
    let told = told_by(&c);
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 1, T, |r| c.acknowledge(r).unwrap()).await;
    assert_eq!(got.len(), 5, "one poll's worth");
    c.commit_sync(T).await.unwrap();
    // The application stops polling: what the consumer buffered goes back after a quarter of
    // the lock (0.5 s), and its RELEASEs complete.
    let end = tokio::time::Instant::now() + T;
    while metric(&c, "records-released-unseen-total") == 0.0 {
        assert!(tokio::time::Instant::now() < end, "nothing was buffered to release: {:?}", c.metrics());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let released = metric(&c, "records-released-unseen-total");
    while metric(&c, "acknowledgements-send-total") < 5.0 + released {
        assert!(tokio::time::Instant::now() < end, "the releases never completed: {:?}", c.metrics());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.commit_sync(T).await.unwrap(); // runs the callback over the completions
    let after_idle = told.lock().unwrap().clone();
    // It polls again and closes at once: what is buffered then goes back at close.
    let more = common::poll_until(&c, 1, T, |r| c.acknowledge(r).unwrap()).await;
    assert!(!more.is_empty());
    c.close(T).await.unwrap();
    let told = told.lock().unwrap();
    println!("released unseen {released}, callback told {told:?} ({} after the idle release)", after_idle.len());
    let expected: BTreeMap<i64, usize> = got.iter().chain(&more).map(|r| (r.offset, 1)).collect();
    let after_idle_expected: BTreeMap<i64, usize> = got.iter().map(|r| (r.offset, 1)).collect();
    assert_eq!(after_idle, after_idle_expected, "the idle release was reported as the application's");
    assert_eq!(*told, expected, "the callback must report exactly the application's acknowledgements");
}
