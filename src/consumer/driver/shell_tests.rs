//! The shell against the fake cluster: a request task that panics is answered as a lost
//! request, so the session or the membership it belonged to goes on.

use std::time::Duration;

use crate::consumer::ShareConsumer;
use crate::test_util::FakeCluster;

/// Polls until `n` records came, each poll waiting for records rather than a time: a poll
/// ends as soon as records arrive, and a consumer left stuck returns none at all.
async fn poll_until(consumer: &ShareConsumer, n: usize) -> usize {
    let mut got = 0;
    for _ in 0..5 {
        got += consumer.poll(Duration::from_secs(10)).await.expect("poll").len();
        if got >= n {
            break;
        }
    }
    got
}

/// The first task of `api` panics; the consumer still gets the records.
async fn survives_a_panic_in(api: &'static str) {
    let fake = FakeCluster::single(1, 0).await;
    for i in 0..3 {
        fake.produce(0, format!("k{i}"), format!("v{i}"));
    }
    let consumer = ShareConsumer::connect(fake.consumer_config("g")).await.expect("connect");
    consumer.shared.request_panics.next(api);
    consumer.subscribe([fake.topic()]).expect("subscribe");

    assert_eq!(poll_until(&consumer, 3).await, 3, "every record came after the {api} task panicked");
    assert_eq!(consumer.shared.request_panics.due(), 0, "the {api} task did panic");
    consumer.close(Duration::from_secs(5)).await.expect("close");
}

#[tokio::test]
async fn a_share_fetch_task_that_panics_does_not_stop_the_session() {
    survives_a_panic_in("ShareFetch").await;
}

#[tokio::test]
async fn a_heartbeat_task_that_panics_does_not_stop_the_membership() {
    survives_a_panic_in("ShareGroupHeartbeat").await;
}
