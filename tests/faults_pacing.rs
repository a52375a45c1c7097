//! Pacing on the share session: no long poll while the member holds records, no spinning
//! when the broker has nothing more to give, and acks that ride on fetches.

mod fake_broker;

use std::time::Duration;

use fake_broker::{poll_all_at_once, poll_until, FakeCluster, Req};
use kafka_share::consumer::AcknowledgementMode;

const T: Duration = Duration::from_secs(5);

fn fetch_waits(fake: &FakeCluster, after_seq: usize) -> Vec<i32> {
    fake.share_log()
        .iter()
        .filter(|l| l.seq > after_seq)
        .filter_map(|l| match &l.req {
            Req::Fetch(r) => Some(r.max_wait_ms),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn holding_records_means_no_long_poll_and_no_spinning() {
    let fake = FakeCluster::single(1, 20).await;
    let cfg = fake
        .consumer_config("g")
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .fetch_max_wait(Duration::from_secs(3));
    let c = fake.consumer(cfg).await;
    let got = poll_all_at_once(&fake, &c, 20).await;
    let delivered_at = fake.share_log().iter().filter(|l| l.is_fetch()).map(|l| l.seq).max().unwrap();
    // The member holds all 20 records for a second: the broker has nothing more for it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let waits = fetch_waits(&fake, delivered_at);
    assert!(waits.len() <= 2, "the consumer spun while holding records: {waits:?}\n{}", fake.dump());
    assert!(waits.iter().all(|&w| w == 0), "long poll while holding records: {waits:?}\n{}", fake.dump());
    // Acks go at once on commit (nothing long-polls in front of them).
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let started = std::time::Instant::now();
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.is_ok(), "{results:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "commit waited behind a long poll: {:?}", started.elapsed());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn a_member_holding_nothing_long_polls() {
    let fake = FakeCluster::single(1, 0).await;
    let cfg = fake.consumer_config("g").fetch_max_wait(Duration::from_millis(400));
    let c = fake.consumer(cfg).await;
    let none = c.poll(Duration::from_millis(1500)).await.unwrap();
    assert!(none.is_empty());
    let waits = fetch_waits(&fake, 0);
    assert!(!waits.is_empty() && waits.iter().all(|&w| w == 400), "{waits:?}\n{}", fake.dump());
    assert!(waits.len() <= 6, "{waits:?}");
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn in_steady_consumption_acks_never_go_alone() {
    let fake = FakeCluster::single(2, 300).await;
    let cfg = fake.consumer_config("g").max_poll_records(25);
    let c = fake.consumer(cfg).await;
    let got = poll_until(&c, 600, T).await;
    assert_eq!(got.len(), 600, "{}", fake.dump());
    let _ = c.poll(Duration::from_millis(10)).await.unwrap(); // accepts the last poll's records
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.is_ok(), "{results:?}");
    // Only the commit's own ShareAcknowledge (if anything was left) goes alone; the 100 ms
    // linger never fires while the application keeps polling.
    let alone = fake.share_log().iter().filter(|l| l.is_ack()).count();
    assert!(alone <= 2, "{alone} ShareAcknowledge requests:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}
