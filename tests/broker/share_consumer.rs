//! The share consumer against a real broker: delivery, acknowledgement types, modes, commit,
//! wakeup and close.

use crate::common;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use kafka_share::consumer::{AcknowledgementMode, AcquireMode, FETCH_MANAGER};
use kafka_share::{AcknowledgeType, Error, ErrorCode, ShareConsumer};

fn explicit(bootstrap: &str, group: &str) -> kafka_share::ShareConsumerConfig {
    common::consumer_config(bootstrap, group).acknowledgement_mode(AcknowledgementMode::Explicit)
}

#[tokio::test]
async fn implicit_mode_receives_everything_once() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "implicit", 2).await;
    common::produce(&bs, &topic, 2, 200, "v").await;
    let group = common::new_group(&admin, "g-implicit", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 200, Duration::from_secs(30), |_| {}).await;
    let offsets: HashSet<(i32, i64)> = got.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(offsets.len(), 200, "every record once");
    assert!(got.iter().all(|r| r.delivery_count == 1));
    let r = &got[0];
    assert!(r.value_str().unwrap().starts_with("v-"));
    assert!(r.key_str().unwrap().starts_with('k'));
    // Commit accepts the last poll's records; per-partition results all Ok.
    let results = c.commit_sync(Duration::from_secs(10)).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    assert!(c.acquisition_lock_timeout().is_some());
    assert!(c.metrics().get(FETCH_MANAGER, "records-consumed-total").unwrap() >= 200.0);
    c.close(Duration::from_secs(10)).await.unwrap();
    // Nothing is left for a second consumer of the same group.
    let c2 = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    c2.subscribe([topic.clone()]).unwrap();
    let again = common::poll_until(&c2, 1, Duration::from_secs(3), |_| {}).await;
    assert!(
        again.is_empty(),
        "accepted records are never redelivered: {:?}",
        again.iter().map(|r| r.offset).collect::<Vec<_>>()
    );
    c2.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn release_redelivers_with_higher_delivery_count_and_reject_never() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "release", 1).await;
    common::produce(&bs, &topic, 1, 10, "v").await;
    let group = common::new_group(&admin, "g-release", None).await;
    let c = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    // First delivery: release even offsets, reject odd ones... except accept 1 and 3.
    let first = common::poll_until(&c, 10, Duration::from_secs(30), |r| {
        let t = match r.offset {
            o if o % 2 == 0 => AcknowledgeType::Release,
            1 | 3 => AcknowledgeType::Accept,
            _ => AcknowledgeType::Reject,
        };
        c.acknowledge_with(r, t).unwrap();
    })
    .await;
    assert_eq!(first.len(), 10);
    let res = c.commit_sync(Duration::from_secs(10)).await.unwrap();
    assert!(res.values().all(|r| r.is_ok()), "{res:?}");
    // Redelivered: exactly the released (even) offsets, with delivery count 2.
    let second = common::poll_until(&c, 5, Duration::from_secs(30), |r| c.acknowledge(r).unwrap()).await;
    let mut offs: Vec<i64> = second.iter().map(|r| r.offset).collect();
    offs.sort();
    assert_eq!(offs, vec![0, 2, 4, 6, 8]);
    assert!(
        second.iter().all(|r| r.delivery_count == 2),
        "{:?}",
        second.iter().map(|r| r.delivery_count).collect::<Vec<_>>()
    );
    c.commit_sync(Duration::from_secs(10)).await.unwrap();
    let third = common::poll_until(&c, 1, Duration::from_secs(3), |r| c.acknowledge(r).unwrap()).await;
    assert!(third.is_empty(), "rejected and accepted records never come back");
    c.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn explicit_mode_refuses_poll_with_unacknowledged_records() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "explicit", 1).await;
    common::produce(&bs, &topic, 1, 5, "v").await;
    let group = common::new_group(&admin, "g-explicit", None).await;
    let c = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 1, Duration::from_secs(30), |_| {}).await;
    assert!(!got.is_empty());
    let e = c.poll(Duration::from_millis(100)).await.unwrap_err();
    assert!(matches!(e, Error::UnacknowledgedRecords { count } if count == got.len()), "{e}");
    assert!(e.to_string().contains("not acknowledged"), "{e}");
    // Acknowledging something we do not hold is a clear error.
    let e = c.acknowledge_offset(&topic, 0, 999_999, AcknowledgeType::Accept).unwrap_err();
    assert!(e.to_string().contains("not held"), "{e}");
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    c.poll(Duration::from_millis(100)).await.unwrap();
    c.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn ack_by_topic_partition_offset() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "ackoff", 1).await;
    common::produce(&bs, &topic, 1, 3, "v").await;
    let group = common::new_group(&admin, "g-ackoff", None).await;
    let c = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 3, Duration::from_secs(30), |r| {
        c.acknowledge_offset(&topic, r.partition, r.offset, AcknowledgeType::Reject).unwrap()
    })
    .await;
    assert_eq!(got.len(), 3);
    let res = c.commit_sync(Duration::from_secs(10)).await.unwrap();
    assert_eq!(res.len(), 1);
    assert!(res.values().all(|r| r.is_ok()));
    c.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn lock_expiry_redelivers_and_late_ack_reports_invalid_record_state() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "expiry", 1).await;
    common::produce(&bs, &topic, 1, 3, "v").await;
    let group = common::new_group(&admin, "g-expiry", Some(1500)).await;
    // record_limit (4.2+) means no prefetch. batch_optimized (4.1) prefetches only for an
    // application that is polling, so nothing re-acquires the records behind our back
    // while their locks run out either.
    let v2 = common::broker_has_v2();
    let mut cfg = explicit(&bs, &group);
    if v2 {
        cfg = cfg.acquire_mode(AcquireMode::RecordLimit);
    }
    let c = ShareConsumer::connect(cfg).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 3, Duration::from_secs(30), |_| {}).await;
    assert_eq!(got.len(), 3);
    assert_eq!(c.acquisition_lock_timeout(), Some(Duration::from_millis(1500)));
    // The deadline shown is conservative: no later than now + lock.
    let dl = got[0].lock_deadline().unwrap();
    assert!(dl <= std::time::Instant::now() + Duration::from_millis(1500));
    // Wait until the locks surely expired: another member of the group gets the records
    // again, with delivery count 2 (a sleep would race the broker's lock timer on a loaded
    // machine). Then the first member's acknowledgement is late: INVALID_RECORD_STATE.
    let mut cfg2 = explicit(&bs, &group);
    if v2 {
        cfg2 = cfg2.acquire_mode(AcquireMode::RecordLimit);
    }
    let other = ShareConsumer::connect(cfg2).await.unwrap();
    other.subscribe([topic.clone()]).unwrap();
    let again = common::poll_until(&other, 3, Duration::from_secs(60), |r| other.acknowledge(r).unwrap()).await;
    assert_eq!(again.len(), 3);
    assert!(again.iter().all(|r| r.delivery_count >= 2));
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let res = c.commit_sync(Duration::from_secs(10)).await.unwrap();
    let r = res.values().next().expect("one partition");
    let e = r.as_ref().expect_err("a late acknowledgement fails");
    assert_eq!(e.code(), Some(ErrorCode::INVALID_RECORD_STATE), "{e}");
    other.commit_sync(Duration::from_secs(10)).await.unwrap();
    other.close(Duration::from_secs(10)).await.unwrap();
    c.close(Duration::from_secs(10)).await.unwrap();
}

/// RENEW as in Java 4.4: the renewed record comes back from the next poll with its lock
/// extended, and while the renewal is pending the poll hands out nothing else.
#[tokio::test]
async fn renew_keeps_a_record_past_its_lock_or_fails_clearly() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "renew", 1).await;
    common::produce(&bs, &topic, 1, 2, "v").await;
    // Lock 6 s, renewed every 4 s: 2 s of slack per step for a loaded machine.
    let group = common::new_group(&admin, "g-renew", Some(6000)).await;
    let c = ShareConsumer::connect(explicit(&bs, &group).max_poll_records(1)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 1, Duration::from_secs(30), |_| {}).await;
    let mut r = got[0].clone();
    if !common::broker_has_v2() {
        let e = c.acknowledge_with(&r, AcknowledgeType::Renew).unwrap_err();
        assert!(e.to_string().contains("RENEW needs"), "{e}");
        c.close(Duration::from_secs(10)).await.unwrap();
        return;
    }
    // Renew three times across 12 s (lock 6 s); each time the next poll returns the same
    // record (same offset, same delivery) and nothing else, though another record waits.
    for round in 0..3 {
        tokio::time::sleep(Duration::from_secs(4)).await;
        c.acknowledge_with(&r, AcknowledgeType::Renew).unwrap();
        let back = common::poll_until(&c, 1, Duration::from_secs(20), |_| {}).await;
        assert_eq!(back.len(), 1, "round {round}: {back:?}");
        assert_eq!((back[0].offset, back[0].delivery_count), (r.offset, 1), "round {round}: the renewed record");
        // The old handle's acknowledgement was sent: it can no longer change.
        let e = c.acknowledge(&r).unwrap_err();
        assert!(matches!(&e, Error::AlreadyAcknowledged { .. }), "{e}");
        r = back[0].clone();
    }
    c.acknowledge(&r).unwrap();
    let res = c.commit_sync(Duration::from_secs(10)).await.unwrap();
    assert!(res.values().all(|x| x.is_ok()), "accept after renew: {res:?}");
    // Then the other record. The first poll's refill may have acquired it; it went back to
    // the group once the consumer had taken nothing but renewals for a quarter of the lock,
    // so at most one attempt is spent on it (not one per renewal, as when every renewing poll
    // fetched for itself).
    let next = common::poll_until(&c, 1, Duration::from_secs(20), |r| c.acknowledge(r).unwrap()).await;
    assert_eq!(next.len(), 1, "{:?}", next.iter().map(|x| (x.offset, x.delivery_count)).collect::<Vec<_>>());
    assert_ne!(next[0].offset, r.offset);
    assert!(next[0].delivery_count <= 2, "delivery count {}", next[0].delivery_count);
    c.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn record_limit_caps_each_poll() {
    if !common::broker_has_v2() {
        // 4.1 has no record_limit: connect must say so.
        let admin = common::admin().await;
        let group = common::new_group(&admin, "g-rl", None).await;
        let cfg = common::consumer_config(&common::bootstrap(), &group).acquire_mode(AcquireMode::RecordLimit);
        let e = ShareConsumer::connect(cfg).await.unwrap_err();
        assert!(e.to_string().contains("record_limit"), "{e}");
        return;
    }
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "rlimit", 1).await;
    common::produce(&bs, &topic, 1, 100, "v").await;
    let group = common::new_group(&admin, "g-rlimit", None).await;
    let cfg = common::consumer_config(&bs, &group).acquire_mode(AcquireMode::RecordLimit).max_poll_records(7);
    let c = ShareConsumer::connect(cfg).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let mut total = 0;
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    while total < 100 && tokio::time::Instant::now() < end {
        let recs = c.poll(Duration::from_millis(500)).await.unwrap();
        assert!(recs.len() <= 7, "poll returned {}", recs.len());
        total += recs.len();
    }
    assert_eq!(total, 100);
    c.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn wakeup_from_another_thread_ends_a_blocked_poll() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "wakeup", 1).await;
    let group = common::new_group(&admin, "g-wakeup", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let w = c.wakeup_handle();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        w.wakeup();
    });
    // Far longer than any load can delay the wakeup: an Ok(empty) means it was missed.
    let e = c.poll(Duration::from_secs(300)).await.unwrap_err();
    assert!(matches!(e, Error::Wakeup), "{e}");
    t.join().unwrap();
    // The wakeup is consumed: the next poll works.
    c.poll(Duration::from_millis(100)).await.unwrap();
    c.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn close_releases_held_records_at_once() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "closerel", 1).await;
    common::produce(&bs, &topic, 1, 20, "v").await;
    // The longest lock the broker allows: if close did not release, the second consumer would
    // wait 60 s, past its 45 s limit; a loaded machine needs far less than that.
    let group = common::new_group(&admin, "g-closerel", Some(60_000)).await;
    let a = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    a.subscribe([topic.clone()]).unwrap();
    let held = common::poll_until(&a, 1, Duration::from_secs(30), |_| {}).await;
    assert!(!held.is_empty());
    a.close(Duration::from_secs(10)).await.unwrap();
    let b = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    b.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&b, 20, Duration::from_secs(45), |r| b.acknowledge(r).unwrap()).await;
    assert_eq!(got.len(), 20, "all records available to the next member before the lock ran out");
    let redelivered: Vec<_> = got.iter().filter(|r| r.delivery_count >= 2).map(|r| r.offset).collect();
    assert_eq!(redelivered.len(), held.len(), "the released ones come back with count 2");
    b.commit_sync(Duration::from_secs(10)).await.unwrap();
    b.close(Duration::from_secs(10)).await.unwrap();
    // The first member left the group.
    let d = admin.describe_share_group(&group).await.unwrap();
    assert!(d.members.iter().all(|m| !m.client_id.is_empty()));
    assert!(d.members.len() <= 1, "a left; only b may linger until its leave is processed: {:?}", d.members.len());
}

#[tokio::test]
async fn many_consumers_one_partition_each_record_accepted_once() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "many1", 1).await;
    let n = 600;
    let group = common::new_group(&admin, "g-many1", None).await;
    let consumers = 4;
    let mut handles = Vec::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, i64)>();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for i in 0..consumers {
        let bs = bs.clone();
        let group = group.clone();
        let topic = topic.clone();
        let tx = tx.clone();
        let stop = stop.clone();
        handles.push(tokio::spawn(async move {
            let c = ShareConsumer::connect(explicit(&bs, &group).max_poll_records(20)).await.unwrap();
            c.subscribe([topic]).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let recs = c.poll(Duration::from_millis(300)).await.unwrap();
                for r in &recs {
                    c.acknowledge(r).unwrap();
                    tx.send((i, r.offset)).unwrap();
                }
                // Slow processing spreads the records over members.
                if !recs.is_empty() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            let res = c.commit_sync(Duration::from_secs(10)).await.unwrap();
            assert!(res.values().all(|r| r.is_ok()), "{res:?}");
            c.close(Duration::from_secs(10)).await.unwrap();
        }));
    }
    drop(tx);
    // Produce once every member has its assignment, so the work can spread.
    common::wait_for_members(&admin, &group, consumers, Duration::from_secs(30)).await;
    common::produce_one_by_one(&bs, &topic, n, "v").await;
    let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
    let mut by_consumer = vec![0usize; consumers];
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while seen.len() < n && tokio::time::Instant::now() < end {
        if let Ok(Some((i, o))) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
            assert!(seen.insert(o, i).is_none(), "offset {o} delivered twice");
            by_consumer[i] += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in handles {
        h.await.unwrap();
    }
    while let Ok((i, o)) = rx.try_recv() {
        assert!(seen.insert(o, i).is_none(), "offset {o} delivered twice");
    }
    assert_eq!(seen.len(), n);
    let active = by_consumer.iter().filter(|&&c| c > 0).count();
    assert!(active >= 2, "work spread over members: {by_consumer:?}");
}

#[tokio::test]
async fn implicit_mode_next_poll_accepts_previous_records() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "implpoll", 1).await;
    common::produce(&bs, &topic, 1, 30, "v").await;
    let group = common::new_group(&admin, "g-implpoll", Some(30_000)).await;
    let a = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    a.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&a, 30, Duration::from_secs(30), |_| {}).await;
    assert_eq!(got.len(), 30);
    // One more poll accepts the last batch (no commit_sync anywhere).
    a.poll(Duration::from_millis(300)).await.unwrap();
    a.close(Duration::from_secs(10)).await.unwrap();
    let b = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    b.subscribe([topic.clone()]).unwrap();
    let again = common::poll_until(&b, 1, Duration::from_secs(3), |_| {}).await;
    assert!(again.is_empty(), "records accepted by the next poll never come back");
    b.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn dropping_without_close_releases_in_the_background() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "dropped", 1).await;
    common::produce(&bs, &topic, 1, 5, "v").await;
    // The longest lock the broker allows (60 s): only a release brings the records back
    // within the 45 s the second member waits.
    let group = common::new_group(&admin, "g-dropped", Some(60_000)).await;
    let a = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    a.subscribe([topic.clone()]).unwrap();
    let held = common::poll_until(&a, 5, Duration::from_secs(30), |_| {}).await;
    assert_eq!(held.len(), 5);
    drop(a);
    let b = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    b.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&b, 5, Duration::from_secs(45), |r| b.acknowledge(r).unwrap()).await;
    assert_eq!(got.len(), 5, "released before the lock ran out");
    assert!(got.iter().all(|r| r.delivery_count == 2));
    b.commit_sync(Duration::from_secs(10)).await.unwrap();
    b.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn commit_async_and_callback_report_per_partition() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "cbasync", 2).await;
    common::produce(&bs, &topic, 2, 20, "v").await;
    let group = common::new_group(&admin, "g-cbasync", None).await;
    let c = ShareConsumer::connect(explicit(&bs, &group)).await.unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, usize, bool)>::new()));
    let s2 = seen.clone();
    c.set_acknowledgement_commit_callback(move |tp, offsets, r| {
        s2.lock().unwrap().push((tp.to_string(), offsets.len(), r.is_ok()));
    })
    .unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 20, Duration::from_secs(30), |r| c.acknowledge(r).unwrap()).await;
    assert_eq!(got.len(), 20);
    let results = c.commit_async().unwrap().await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    let seen = seen.lock().unwrap().clone();
    let total: usize = seen.iter().map(|(_, n, _)| n).sum();
    assert_eq!(total, 20, "callback told of every acknowledged offset: {seen:?}");
    assert!(seen.iter().all(|(_, _, ok)| *ok));
    c.close(Duration::from_secs(10)).await.unwrap();
}
