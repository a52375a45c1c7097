//! A member whose application is not polling must not hoard records or burn their delivery
//! attempts, and a late acknowledgement must never land on a newer delivery (real broker).
//!
//! Each scenario lets one member idle for longer than the group's lock. That wait *is* the
//! scenario (an application that stopped polling), not a guess about ordering: every
//! assertion waits for the condition it checks, with a generous deadline.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_share::consumer::{AcknowledgementMode, FETCH_MANAGER};
use kafka_share::{AcknowledgeType, ErrorCode, ShareConsumer, ShareConsumerConfig};

const T: Duration = Duration::from_secs(10);

fn explicit(bs: &str, group: &str) -> ShareConsumerConfig {
    common::consumer_config(bs, group).acknowledgement_mode(AcknowledgementMode::Explicit)
}

fn fetches(c: &ShareConsumer) -> f64 {
    c.metrics().get(FETCH_MANAGER, "fetch-total").unwrap_or(0.0)
}

#[tokio::test]
async fn an_idle_member_sends_no_record_acquiring_fetch() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "idle-fetches", 1).await;
    common::produce_one_by_one(&bs, &topic, 40, "v").await;
    let group = common::new_group(&admin, "g-idle-fetches", Some(2000)).await;
    let a = ShareConsumer::connect(explicit(&bs, &group).max_poll_records(5)).await.unwrap();
    a.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&a, 1, T, |_| {}).await;
    assert!(!got.is_empty(), "member A received records");
    // A's application stops polling for 2.5 locks.
    let before = fetches(&a);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = fetches(&a) - before;
    println!("idle member: {during} ShareFetch requests answered in 5 s without a poll (lock 2 s)");
    assert!(during <= 1.0, "an idle member may send at most the one refill of its last poll, not {during} fetches");
    for r in &got {
        a.acknowledge_with(r, AcknowledgeType::Release).unwrap();
    }
    a.close(T).await.unwrap();
}

#[tokio::test]
async fn a_record_released_by_a_member_that_stops_polling_reaches_another_member_at_delivery_count_2() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "idle-release", 1).await;
    // The default 30 s lock: the record must reach B long before any lock could lapse.
    let group = common::new_group(&admin, "g-idle-release", None).await;
    let a = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    a.subscribe([topic.clone()]).unwrap();
    assert!(a.poll(Duration::from_millis(200)).await.unwrap().is_empty());
    common::wait_for_members(&admin, &group, 1, T).await;
    common::produce(&bs, &topic, 1, 1, "only").await;
    let got = common::poll_until(&a, 1, T, |_| {}).await;
    assert_eq!(got.len(), 1, "A received the record");
    assert_eq!(got[0].delivery_count, 1);
    a.acknowledge_with(&got[0], AcknowledgeType::Release).unwrap();
    let res = a.commit_sync(T).await.unwrap();
    assert!(res.is_ok(), "{res:?}");
    // A's application stops polling; B starts.
    let started = std::time::Instant::now();
    let b = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    b.subscribe([topic.clone()]).unwrap();
    let at_b = common::poll_until(&b, 1, T, |r| b.acknowledge(r).unwrap()).await;
    println!("released record reached member B after {:?} (lock 30 s)", started.elapsed());
    assert_eq!(at_b.len(), 1, "the released record went to B, not back to idle A");
    assert_eq!((at_b[0].offset, at_b[0].delivery_count), (got[0].offset, 2));
    b.commit_sync(T).await.unwrap();
    b.close(T).await.unwrap();
    a.close(T).await.unwrap();
}

#[tokio::test]
async fn records_an_idle_member_polled_reach_the_other_member_at_delivery_count_2_and_its_late_ack_fails() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "idle-polled", 1).await;
    common::produce_one_by_one(&bs, &topic, 20, "v").await;
    let group = common::new_group(&admin, "g-idle-polled", Some(2000)).await;
    let a = ShareConsumer::connect(explicit(&bs, &group).max_poll_records(5)).await.unwrap();
    a.subscribe([topic.clone()]).unwrap();
    let held = common::poll_until(&a, 1, T, |_| {}).await;
    assert!(!held.is_empty());
    let held_offsets: BTreeSet<i64> = held.iter().map(|r| r.offset).collect();
    // B polls and accepts everything; A's application does nothing for 2.5 locks.
    let b = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    b.subscribe([topic.clone()]).unwrap();
    let mut at_b: BTreeMap<i64, i16> = BTreeMap::new();
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    while at_b.len() < 20 && tokio::time::Instant::now() < end {
        for r in b.poll(Duration::from_millis(500)).await.unwrap() {
            b.acknowledge(&r).unwrap();
            at_b.insert(r.offset, r.delivery_count);
        }
    }
    b.commit_sync(T).await.unwrap();
    println!("delivery counts seen by B: {at_b:?} (A polled {held_offsets:?} and went idle)");
    assert_eq!(at_b.len(), 20, "B got every record: {at_b:?}");
    for o in &held_offsets {
        assert_eq!(at_b[o], 2, "offset {o}, polled by idle A, reached B at delivery count 2: {at_b:?}");
    }
    assert!(at_b.values().all(|&d| d <= 2), "no record burned more than one attempt at idle A: {at_b:?}");
    // A comes back and accepts what it polled long ago: that must fail, not land anywhere.
    for r in &held {
        a.acknowledge(r).unwrap();
    }
    let res = a.commit_sync(T).await.unwrap();
    let r = res.values().next().expect("a result for the partition");
    let e = r.as_ref().expect_err("a late acknowledgement must fail");
    assert_eq!(e.code(), Some(ErrorCode::INVALID_RECORD_STATE), "{e}");
    a.close(T).await.unwrap();
    b.close(T).await.unwrap();
}

#[tokio::test]
async fn records_buffered_by_a_member_that_stops_polling_go_back_to_the_group_unseen() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "idle-buffer", 1).await;
    // One producer batch of 20: batch_optimized hands out whole batches, so A's fetch for a
    // 5-record poll acquires all 20 and 15 wait in A's buffer.
    common::produce(&bs, &topic, 1, 20, "v").await;
    let group = common::new_group(&admin, "g-idle-buffer", Some(2000)).await;
    let a = ShareConsumer::connect(explicit(&bs, &group).max_poll_records(5)).await.unwrap();
    a.subscribe([topic.clone()]).unwrap();
    let held = common::poll_until(&a, 1, T, |_| {}).await;
    assert_eq!(held.len(), 5);
    let metric = |name| a.metrics().get(FETCH_MANAGER, name).unwrap_or(0.0) as usize;
    let buffered = metric("records-consumed-total") - held.len();
    // A's application stops polling: after a quarter of the lock its buffer goes back.
    let end = tokio::time::Instant::now() + T;
    while metric("records-released-unseen-total") < buffered && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "idle member: {buffered} records buffered beyond its poll, {} released unseen",
        metric("records-released-unseen-total")
    );
    assert_eq!(metric("records-released-unseen-total"), buffered);
    // B gets them at once, at delivery count 2 (one acquisition at A), long before A's locks
    // on its 5 polled records lapse... which B then gets as well.
    let b = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    b.subscribe([topic.clone()]).unwrap();
    let at_b = common::poll_until(&b, 20, Duration::from_secs(30), |r| b.acknowledge(r).unwrap()).await;
    let counts: BTreeMap<i64, i16> = at_b.iter().map(|r| (r.offset, r.delivery_count)).collect();
    assert_eq!(counts.len(), 20, "{counts:?}");
    assert!(counts.values().all(|&d| d == 2), "{counts:?}");
    b.commit_sync(T).await.unwrap();
    b.close(T).await.unwrap();
    a.close(T).await.unwrap();
}

#[tokio::test]
async fn with_a_delivery_limit_of_2_a_slow_member_archives_nothing_unseen() {
    if common::kafka_version() < (4, 3) {
        println!(
            "share.delivery.count.limit is a group config from Kafka 4.3 on: nothing to check on {:?}",
            common::kafka_version()
        );
        return;
    }
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "idle-limit", 1).await;
    common::produce_one_by_one(&bs, &topic, 20, "v").await;
    let group = common::new_group(&admin, "g-idle-limit", Some(2000)).await;
    admin
        .set_group_config(&group, "share.delivery.count.limit", "2")
        .await
        .expect("set share.delivery.count.limit");
    // One slow member: 5 records a poll, 600 ms each, so everything it polls lapses in its
    // hands (lock 2 s). That is allowed: those records *were* returned by a poll, and come
    // back once more. What must not happen is its client acquiring records while the
    // application sleeps and letting them lapse unseen: twice, and they are archived.
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group).max_poll_records(5)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let mut seen: BTreeSet<i64> = BTreeSet::new();
    let mut empty_polls = 0;
    let end = tokio::time::Instant::now() + Duration::from_secs(120);
    // Until every record was seen, or nothing more comes for 10 polls (well over a lock:
    // everything is accepted or archived by then).
    while seen.len() < 20 && empty_polls < 10 && tokio::time::Instant::now() < end {
        let recs = c.poll(Duration::from_millis(300)).await.unwrap();
        if recs.is_empty() {
            empty_polls += 1;
            continue;
        }
        empty_polls = 0;
        seen.extend(recs.iter().map(|r| r.offset));
        tokio::time::sleep(Duration::from_millis(600) * recs.len() as u32).await;
    }
    c.close(T).await.unwrap();
    println!("delivery limit 2, one slow member: {} of 20 records returned by a poll", seen.len());
    assert_eq!(seen.len(), 20, "records were archived without any application seeing them: saw {seen:?}");
}

/// Produces `n` records to partition 0 at once, in batches of about ten records: fast (the
/// backlog is there before anyone could drain it) and fine-grained (the broker hands out
/// whole batches, so small ones let the work spread over the members).
async fn produce_small_batches(bs: &str, topic: &str, n: usize) {
    use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
    let p = Producer::connect(ProducerConfig::new(bs).batch_size(400).linger(Duration::ZERO))
        .await
        .expect("producer");
    let mut futs = Vec::with_capacity(n);
    for i in 0..n {
        futs.push(p.send(ProducerRecord::new(topic, format!("v-{i}")).partition(0)).await.expect("send"));
    }
    for f in futs {
        f.await.expect("delivered");
    }
    p.close(T).await.expect("producer close");
}

/// Runs members with the given per-record processing times on one partition, until `n`
/// records are accepted; returns how many each processed.
async fn share_of_work(prefix: &str, per_record: &[Duration], n: usize) -> Vec<usize> {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, prefix, 1).await;
    let group = common::new_group(&admin, &format!("g-{prefix}"), None).await;
    let processed: Arc<Mutex<Vec<BTreeSet<i64>>>> = Arc::new(Mutex::new(vec![BTreeSet::new(); per_record.len()]));
    let done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (i, &cost) in per_record.iter().enumerate() {
        let (bs, group, topic, processed, done) =
            (bs.clone(), group.clone(), topic.clone(), processed.clone(), done.clone());
        let c = ShareConsumer::connect(common::consumer_config(&bs, &group).max_poll_records(20)).await.unwrap();
        c.subscribe([topic]).unwrap();
        tasks.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let recs = c.poll(Duration::from_millis(200)).await.unwrap();
                tokio::time::sleep(cost * recs.len() as u32).await;
                processed.lock().unwrap()[i].extend(recs.iter().map(|r| r.offset));
            }
            c.commit_sync(T).await.unwrap();
            c.close(T).await.unwrap();
        }));
    }
    common::wait_for_members(&admin, &group, per_record.len(), T).await;
    produce_small_batches(&bs, &topic, n).await;
    let end = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let total: BTreeSet<i64> = processed.lock().unwrap().iter().flatten().copied().collect();
        if total.len() >= n || tokio::time::Instant::now() >= end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let per_member: Vec<usize> = processed.lock().unwrap().iter().map(|s| s.len()).collect();
    let total: BTreeSet<i64> = processed.lock().unwrap().iter().flatten().copied().collect();
    assert_eq!(total.len(), n, "every record processed: {per_member:?}");
    per_member
}

#[tokio::test]
async fn fairness_a_ten_times_slower_member_takes_a_small_share() {
    let work = share_of_work("fair-slow", &[Duration::from_millis(1), Duration::from_millis(10)], 2000).await;
    let total: usize = work.iter().sum();
    let fast = work[0] as f64 / total as f64;
    println!(
        "fairness, 1 partition, one member 10x slower: fast {:.0}%, slow {:.0}% ({work:?})",
        fast * 100.0,
        (1.0 - fast) * 100.0
    );
    assert!(fast >= 0.80, "the fast member did {:.0}% of the work", fast * 100.0);
}

#[tokio::test]
async fn fairness_four_equal_members_share_one_partition() {
    let work = share_of_work("fair-equal", &[Duration::from_millis(2); 4], 4000).await;
    let total: usize = work.iter().sum();
    let shares: Vec<f64> = work.iter().map(|&w| w as f64 / total as f64).collect();
    println!(
        "fairness, 1 partition, four equal members: {} ({work:?})",
        shares.iter().map(|s| format!("{:.0}%", s * 100.0)).collect::<Vec<_>>().join(" / ")
    );
    for s in &shares {
        assert!((0.15..=0.35).contains(s), "each member does 15-35% of the work: {shares:?}");
    }
}
