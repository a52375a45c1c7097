//! Fault injection: errors that repeat must be retried with backoff, never in a hot loop.

use crate::fake_broker;

use std::time::{Duration, Instant};

use fake_broker::{code, poll_until, Action, FakeCluster, Rule, SHARE_FETCH};
use kafka_share::ShareConsumer;

/// Overall limit of a wait: generous (a loaded machine is slow); tests end on the condition.
const T: Duration = Duration::from_secs(30);

/// Polls (as an application would) for at least `d` and until at least `min` ShareFetch
/// requests went out (a loaded machine may need longer for the first ones); returns how many
/// went out and over how long, for a bound that scales with the window actually watched.
async fn fetches_during(fake: &FakeCluster, c: &ShareConsumer, d: Duration, min: usize) -> (usize, Duration) {
    let before = fake.count(|l| l.is_fetch());
    let start = Instant::now();
    let sent = || fake.count(|l| l.is_fetch()) - before;
    while start.elapsed() < d || sent() < min {
        assert!(start.elapsed() < T, "only {} ShareFetch requests in {T:?}:\n{}", sent(), fake.dump());
        let _ = c.poll(Duration::from_millis(100)).await.expect("poll");
    }
    (sent(), start.elapsed())
}

/// Most requests a backoff of 100 ms doubling to 1 s allows in `window` (about 5 in 1.5 s,
/// then one a second), with room to spare: a hot loop makes hundreds.
fn backoff_bound(window: Duration) -> usize {
    8 + 2 * window.as_secs() as usize
}

#[tokio::test]
async fn share_session_limit_reached_is_retried_with_backoff() {
    let fake = FakeCluster::single(1, 5).await;
    fake.script(Rule::on(SHARE_FETCH, Action::TopLevelError(code::SHARE_SESSION_LIMIT_REACHED)).always());
    let c = fake.consumer(fake.consumer_config("g")).await;
    let (n, window) = fetches_during(&fake, &c, Duration::from_millis(1500), 2).await;
    assert!(n <= backoff_bound(window), "{n} ShareFetch requests in {window:?}:\n{}", fake.dump());
    assert!(fake.share_log().iter().all(|l| l.epoch() == Some(0)), "each attempt opens a session");
    fake.clear_script();
    let got = poll_until(&c, 5, T).await;
    assert_eq!(got.len(), 5, "recovers once the broker has room:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn dropped_fetch_connections_in_a_loop_are_retried_with_backoff() {
    let fake = FakeCluster::single(1, 5).await;
    fake.script(Rule::on(SHARE_FETCH, Action::DropConnection).always());
    let c = fake.consumer(fake.consumer_config("g")).await;
    let (n, window) = fetches_during(&fake, &c, Duration::from_millis(1500), 2).await;
    assert!(n <= backoff_bound(window), "{n} ShareFetch requests in {window:?}:\n{}", fake.dump());
    fake.clear_script();
    assert_eq!(poll_until(&c, 5, T).await.len(), 5);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn garbage_fetch_responses_in_a_loop_are_retried_with_backoff() {
    let fake = FakeCluster::single(1, 5).await;
    fake.script(Rule::on(SHARE_FETCH, Action::Garbage).always());
    let c = fake.consumer(fake.consumer_config("g")).await;
    let (n, window) = fetches_during(&fake, &c, Duration::from_millis(1500), 2).await;
    assert!(n <= backoff_bound(window), "{n} ShareFetch requests in {window:?}:\n{}", fake.dump());
    fake.clear_script();
    assert_eq!(poll_until(&c, 5, T).await.len(), 5);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

/// A broker answers every fetch at once with a partition error. A client that refetches at
/// once (and refreshes metadata each time) spins; the bound allows one fetch per 50 ms.
async fn partition_error_does_not_hot_loop(code: i16, leader: Option<i32>) {
    let fake = FakeCluster::single(1, 5).await;
    fake.script(Rule::on(SHARE_FETCH, Action::PartitionError { partition: 0, code, leader }).always());
    let c = fake.consumer(fake.consumer_config("g")).await;
    let (n, window) = fetches_during(&fake, &c, Duration::from_secs(1), 1).await;
    let metadata = fake.count(|l| matches!(l.req, fake_broker::Req::Metadata(_)));
    let bound = 1 + (window.as_millis() / 50) as usize;
    assert!(n <= bound, "{n} ShareFetch requests and {metadata} Metadata requests in {window:?} for a partition that keeps failing with {code}");
    fake.clear_script();
    assert_eq!(poll_until(&c, 5, T).await.len(), 5, "recovers:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn unknown_topic_or_partition_on_fetch_does_not_hot_loop() {
    partition_error_does_not_hot_loop(code::UNKNOWN_TOPIC_OR_PARTITION, None).await;
}

#[tokio::test]
async fn not_leader_with_no_known_leader_does_not_hot_loop() {
    partition_error_does_not_hot_loop(code::NOT_LEADER_OR_FOLLOWER, None).await;
}

#[tokio::test]
async fn not_leader_naming_the_same_broker_does_not_hot_loop() {
    partition_error_does_not_hot_loop(code::NOT_LEADER_OR_FOLLOWER, Some(1)).await;
}

/// A broker that hands out whole batches (`min_fetch_records`) does so in batch_optimized
/// mode only: a record_limit fetch acquires at most its MaxRecords, as on Kafka (the fake and
/// the simulation share that rule, `broker_model/share_fetch.rs`).
#[tokio::test]
async fn record_limit_mode_acquires_max_records_even_where_batches_are_whole() {
    let fake = FakeCluster::start(fake_broker::FakeConfig::default().records(10).min_fetch_records(10)).await;
    let cfg = fake
        .consumer_config("g")
        .acquire_mode(kafka_share::consumer::AcquireMode::RecordLimit)
        .max_poll_records(3);
    let c = fake.consumer(cfg).await;
    let got = fake_broker::poll_until(&c, 1, T).await;
    assert!(!got.is_empty() && got.len() <= 3, "a poll returned {} records", got.len());
    let held = fake.held().len();
    assert!(held <= 3, "{held} records locked at once in record_limit mode:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn record_limit_mode_never_holds_more_than_max_poll_records_and_never_hangs() {
    let fake = FakeCluster::start(fake_broker::FakeConfig::cluster(&[1, 2], &[1, 2]).records(10)).await;
    let cfg = fake
        .consumer_config("g")
        .acquire_mode(kafka_share::consumer::AcquireMode::RecordLimit)
        .max_poll_records(3);
    let c = fake.consumer(cfg).await;
    let mut seen = std::collections::BTreeSet::new();
    let deadline = Instant::now() + T;
    while seen.len() < 20 && Instant::now() < deadline {
        let got = c.poll(Duration::from_millis(300)).await.expect("poll");
        assert!(got.len() <= 3, "a poll returned {} records", got.len());
        for r in &got {
            assert!(seen.insert((r.partition, r.offset)), "redelivered {}-{}", r.partition, r.offset);
        }
        let held = fake.held().len();
        assert!(held <= 3, "{held} records locked at once in record_limit mode:\n{}", fake.dump());
    }
    assert_eq!(seen.len(), 20, "every record arrives:\n{}", fake.dump());
    for l in fake.share_log().iter().filter(|l| l.is_fetch()) {
        if let fake_broker::Req::Fetch(r) = &l.req {
            assert_eq!((r.share_acquire_mode, r.max_records), (1, 3), "{}", l.summary());
        }
    }
    c.close(T).await.unwrap();
    fake.assert_clean();
}
