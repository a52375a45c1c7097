//! Async correctness of the share consumer against a real broker: a poll whose future is
//! dropped (a `select!` arm that lost, a `timeout`) strands no record, and a second poll
//! running at the same time is told so.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use kafka_share::{Error, ShareConsumer};
use rand::Rng;

/// A loop of `select!` between poll and a short random timer over a 50,000-record topic:
/// every record arrives once, with delivery count 1. Before polls were cancel-safe, records
/// the driver had handed to a dropped poll were lost until their lock expired and came back
/// with delivery count 2.
#[tokio::test]
async fn dropped_polls_strand_no_records() {
    const N: usize = 50_000;
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "cancel", 2).await;
    common::produce(&bs, &topic, 2, N, "v").await;
    let group = common::new_group(&admin, "g-cancel", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group).max_poll_records(200)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();

    let mut seen: HashSet<(i32, i64)> = HashSet::with_capacity(N);
    let (mut polls, mut dropped) = (0u64, 0u64);
    let end = tokio::time::Instant::now() + Duration::from_secs(240);
    while seen.len() < N {
        assert!(
            tokio::time::Instant::now() < end,
            "only {} of {N} records after {polls} polls ({dropped} dropped)",
            seen.len()
        );
        let timer = Duration::from_micros(rand::thread_rng().gen_range(0..3_000));
        polls += 1;
        tokio::select! {
            r = c.poll(Duration::from_secs(2)) => {
                for rec in r.expect("poll") {
                    assert_eq!(rec.delivery_count, 1, "{}-{} offset {} was delivered again", rec.topic, rec.partition, rec.offset);
                    assert!(seen.insert((rec.partition, rec.offset)), "{}-{} offset {} twice", rec.topic, rec.partition, rec.offset);
                }
            }
            _ = tokio::time::sleep(timer) => dropped += 1,
        }
    }
    eprintln!("cancel safety: {N} records, {polls} polls, {dropped} dropped mid-way");
    assert!(dropped > 0, "the test must drop some polls");
    let results = c.commit_sync(Duration::from_secs(10)).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    c.close(Duration::from_secs(10)).await.unwrap();
}

/// Two polls at once on one consumer: the second is refused with a clear error (not
/// `Closed`), and the first goes on.
#[tokio::test]
async fn a_second_concurrent_poll_is_refused() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "twopolls", 1).await;
    common::produce(&bs, &topic, 1, 10, "v").await;
    let group = common::new_group(&admin, "g-twopolls", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    // join! polls the first future first: it is waiting when the second starts.
    let (first, second) = tokio::join!(c.poll(Duration::from_secs(30)), c.poll(Duration::from_secs(30)));
    match second {
        Err(Error::ConcurrentPoll) => {}
        other => panic!("expected ConcurrentPoll for the second poll, got {other:?}"),
    }
    assert!(!first.unwrap().is_empty());
    // Once the first is done, polling works again.
    c.poll(Duration::ZERO).await.unwrap();
    c.close(Duration::from_secs(10)).await.unwrap();
}
