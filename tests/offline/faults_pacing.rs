//! Pacing on the share session: no long poll while the member holds records, no spinning
//! when the broker has nothing more to give, and acks that ride on fetches.

use crate::fake_broker;

use std::time::Duration;

use fake_broker::{poll_all_at_once, FakeCluster, Req};
use kafka_share::consumer::AcknowledgementMode;

/// Overall limit of a wait: generous (a loaded machine is slow); tests end on the condition.
const T: Duration = Duration::from_secs(30);

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
    // The member holds all 20 records for a second: the broker has nothing more for it. A
    // parked session may fetch again once fetch.max.wait.ms (3 s) passed: on a loaded
    // machine the second can last longer, so the bound counts the window actually watched.
    let watched = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let waits = fetch_waits(&fake, delivered_at);
    let bound = 2 + (watched.elapsed().as_secs() / 3) as usize;
    assert!(waits.len() <= bound, "the consumer spun while holding records: {waits:?}\n{}", fake.dump());
    assert!(waits.iter().all(|&w| w == 0), "long poll while holding records: {waits:?}\n{}", fake.dump());
    // Acks go at once on commit: no long poll is in flight in front of them. Checked on the
    // log (every fetch up to the one or the request carrying the acks was a no-wait one),
    // not on the commit's duration, which a loaded machine stretches.
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.is_ok(), "{results:?}");
    let log = fake.share_log();
    let carried = log.iter().find(|l| l.seq > delivered_at && !l.acks().is_empty()).expect("the commit's acks");
    let before: Vec<i32> = fetch_waits(&fake, delivered_at)
        .into_iter()
        .zip(log.iter().filter(|l| l.is_fetch() && l.seq > delivered_at))
        .filter(|(_, l)| l.seq <= carried.seq)
        .map(|(w, _)| w)
        .collect();
    assert!(before.iter().all(|&w| w == 0), "commit waited behind a long poll: {before:?}\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn a_member_holding_nothing_long_polls() {
    let fake = FakeCluster::single(1, 0).await;
    let cfg = fake.consumer_config("g").fetch_max_wait(Duration::from_millis(400));
    let c = fake.consumer(cfg).await;
    // Poll until two fetches went out (however long joining takes on a loaded machine), for
    // at least 1.5 s; then at most one long poll per 400 ms of the window, and a spare.
    let watched = std::time::Instant::now();
    loop {
        let none = c.poll(Duration::from_millis(100)).await.unwrap();
        assert!(none.is_empty());
        if watched.elapsed() >= Duration::from_millis(1500) && fetch_waits(&fake, 0).len() >= 2 {
            break;
        }
        assert!(watched.elapsed() < T, "no fetches:\n{}", fake.dump());
    }
    let waits = fetch_waits(&fake, 0);
    assert!(waits.iter().all(|&w| w == 400), "{waits:?}\n{}", fake.dump());
    let bound = 2 + (watched.elapsed().as_millis() / 400) as usize;
    assert!(waits.len() <= bound, "{waits:?} in {:?}", watched.elapsed());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn in_steady_consumption_acks_never_go_alone() {
    let fake = FakeCluster::single(2, 300).await;
    let cfg = fake.consumer_config("g").max_poll_records(25);
    let c = fake.consumer(cfg).await;
    // Poll as a busy application does, noting every pause between polls long enough for the
    // 100 ms linger to fire (a loaded machine makes some; the consumer is not to blame).
    let mut got = Vec::new();
    let mut pauses = 0;
    let mut last = std::time::Instant::now();
    let deadline = last + T;
    while got.len() < 600 && std::time::Instant::now() < deadline {
        got.extend(c.poll(Duration::from_millis(200)).await.unwrap());
        if last.elapsed() >= Duration::from_millis(50) {
            pauses += 1;
        }
        last = std::time::Instant::now();
    }
    assert_eq!(got.len(), 600, "{}", fake.dump());
    let _ = c.poll(Duration::from_millis(10)).await.unwrap(); // accepts the last poll's records
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.is_ok(), "{results:?}");
    // Only the commit's own ShareAcknowledge (if anything was left) goes alone; the 100 ms
    // linger never fires while the application keeps polling, so at most once per pause.
    let alone = fake.share_log().iter().filter(|l| l.is_ack()).count();
    assert!(alone <= 2 + pauses, "{alone} ShareAcknowledge requests, {pauses} pauses:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

/// `poll(Duration::ZERO)` hands out what is buffered every time, at once: after one waiting
/// poll took 2 of 10 records that came in one response, each zero poll returns the next 2.
#[tokio::test]
async fn zero_polls_return_buffered_records_every_time() {
    let fake = FakeCluster::start(fake_broker::FakeConfig::default().records(10).min_fetch_records(10)).await;
    let c = fake.consumer(fake.consumer_config("g").max_poll_records(2)).await;
    let mut offsets = Vec::new();
    let first = fake_broker::poll_until(&c, 1, T).await;
    assert_eq!(first.len(), 2, "one poll's worth");
    offsets.extend(first.iter().map(|r| r.offset));
    assert_eq!(fake.share_log().iter().filter(|l| matches!(l.req, Req::Fetch(_))).count(), 1, "{}", fake.dump());
    for _ in 0..4 {
        let got = c.poll(Duration::ZERO).await.unwrap();
        assert_eq!(got.len(), 2, "buffered records, at once: {}", fake.dump());
        offsets.extend(got.iter().map(|r| r.offset));
    }
    assert_eq!(offsets, (0..10).collect::<Vec<i64>>());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

/// An application waiting inside `commit_sync` while the broker holds the answer (a leader
/// failover holds it 8-11 s) has not stopped polling: the records buffered for its next poll
/// stay buffered. Released for want of a poll, they would come back at delivery count 2, and
/// the RELEASEs would queue behind the stuck broker. Here the answer is held longer than half
/// the lock (so past the quarter lock after which an application that stopped polling gets
/// its buffered records released).
#[tokio::test]
async fn records_buffered_while_commit_sync_waits_are_not_released() {
    let lock = Duration::from_secs(5);
    let held = Duration::from_secs(3);
    let cfg = fake_broker::FakeConfig::default().records(30).min_fetch_records(30).lock_timeout_ms(5000);
    let fake = FakeCluster::start(cfg).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit).max_poll_records(5);
    let c = fake.consumer(cfg).await;
    // One fetch acquires all 30; the poll takes 5, the other 25 are buffered.
    let first = fake_broker::poll_until(&c, 1, T).await;
    assert_eq!(first.len(), 5, "{}", fake.dump());
    assert_eq!(c.acquisition_lock_timeout(), Some(lock));
    fake.script(fake_broker::Rule::on(fake_broker::SHARE_ACKNOWLEDGE, fake_broker::Action::Delay(held)).with_acks());
    for r in &first {
        c.acknowledge(r).unwrap();
    }
    let started = std::time::Instant::now();
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.is_ok(), "{results:?}");
    assert_eq!(fake.rules_left(), 0, "the commit's acks went by ShareAcknowledge, held: {}", fake.dump());
    assert!(started.elapsed() >= held, "commit_sync waited for the held answer: {:?}", started.elapsed());
    // The next polls get the 25 buffered records, first delivery, none released meanwhile.
    let mut rest = Vec::new();
    let deadline = std::time::Instant::now() + T;
    while rest.len() < 25 && std::time::Instant::now() < deadline {
        for r in c.poll(Duration::from_millis(200)).await.unwrap() {
            c.acknowledge(&r).unwrap();
            rest.push(r);
        }
    }
    let offsets: Vec<i64> = rest.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (5..30).collect::<Vec<i64>>(), "{}", fake.dump());
    let counts: Vec<i16> = rest.iter().map(|r| r.delivery_count).collect();
    assert!(counts.iter().all(|&d| d == 1), "delivered again: {counts:?}\n{}", fake.dump());
    let released: Vec<_> = fake
        .share_log()
        .iter()
        .flat_map(|l| l.acks())
        .filter(|a| a.ack_type() == Some(kafka_share::AcknowledgeType::Release))
        .collect();
    assert!(released.is_empty(), "records released while the application waited: {released:?}\n{}", fake.dump());
    let unseen = c.metrics().get(kafka_share::consumer::FETCH_MANAGER, "records-released-unseen-total");
    assert_eq!(unseen, Some(0.0));
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.is_ok(), "{results:?}");
    c.close(T).await.unwrap();
    assert_eq!(fake.done(0), (0..30).collect::<Vec<i64>>());
    assert!((0..30).all(|o| fake.delivery(0, o) == 1), "{}", fake.dump());
    fake.assert_clean();
}
