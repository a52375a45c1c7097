//! The processing engine (`kafka_share::processor`) against the real broker: lock renewal
//! for long handlers, no head-of-line blocking behind a stuck handler, retry-later, and a
//! graceful shutdown that hands unstarted records to another member.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_share::processor::{Delivery, Outcome, Processor, ProcessorConfig, PROCESSOR};
use kafka_share::TopicPartition;

type Seen = Arc<Mutex<HashMap<(i32, i64), Vec<i16>>>>;

fn metric(running: &kafka_share::processor::Running, name: &str) -> f64 {
    running.metrics().get(PROCESSOR, name).unwrap_or(-1.0)
}

/// Waits for `cond`, looking every 50 ms, failing after `timeout` with `what`.
async fn wait_for(what: &str, timeout: Duration, cond: impl FnMut() -> bool) {
    assert!(waited_for(timeout, cond).await, "timed out waiting for {what}");
}

/// Waits for `cond` at most `timeout`; whether it came.
async fn waited_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while !cond() {
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// `PROCESSOR_LOG=kafka_share=debug` shows what the engine and the driver did.
fn log_from_env() {
    if let Ok(filter) = std::env::var("PROCESSOR_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_handlers_keep_their_records_by_renewal_and_every_record_is_accepted_once() {
    log_from_env();
    const N: usize = 10_000;
    // 4 s: a renewal goes at half the lock, so the engine may be held up to 2 s (a busy CI
    // machine held it ~1 s once, and a 2 s lock lapsed) before a lock is lost.
    const LOCK_MS: u64 = 4000;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-renew", 4).await;
    let group = common::new_group(&admin, "g-proc-renew", Some(LOCK_MS as u32)).await;
    common::produce(&common::bootstrap(), &topic, 4, N, "r").await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let processor = Processor::connect(cfg, ProcessorConfig::new().concurrency(64)).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let seen: Seen = Arc::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (s, c) = (seen.clone(), calls.clone());
    let running = processor.run(move |d: Delivery| {
        let (s, c) = (s.clone(), c.clone());
        async move {
            let n = c.fetch_add(1, Ordering::Relaxed);
            // One handler in 100 runs for three locks; the others take 20 ms.
            let work = if n % 100 == 99 { Duration::from_millis(3 * LOCK_MS) } else { Duration::from_millis(20) };
            tokio::time::sleep(work).await;
            let r = d.record();
            s.lock().unwrap().entry((r.partition, r.offset)).or_default().push(r.delivery_count);
            Outcome::Accept
        }
    });
    if !waited_for(Duration::from_secs(180), || seen.lock().unwrap().len() >= N).await {
        let seen = seen.lock().unwrap();
        let mut missing: Vec<(i32, i64)> = Vec::new();
        let mut last = HashMap::new();
        for &(p, o) in seen.keys() {
            let e = last.entry(p).or_insert(-1i64);
            *e = (*e).max(o);
        }
        for (&p, &max) in &last {
            missing.extend((0..=max).map(|o| (p, o)).filter(|k| !seen.contains_key(k)));
        }
        missing.sort();
        panic!(
            "timed out waiting for every record processed: {} of {N} seen, handler calls {}, last offsets {last:?}, \
             missing below them (first 20) {:?}; engine {:?}",
            seen.len(),
            calls.load(Ordering::Relaxed),
            &missing[..missing.len().min(20)],
            running.metrics().iter().filter(|(g, _, _)| *g == PROCESSOR).collect::<Vec<_>>()
        );
    }
    let renewals = metric(&running, "lock-renewals-total");
    let lapses = metric(&running, "lock-lapses-total");
    let released_unstarted = metric(&running, "records-released-unstarted-total");
    let kept = metric(&running, "records-kept-unstarted-total");
    let unseen = running
        .metrics()
        .get(kafka_share::consumer::FETCH_MANAGER, "records-released-unseen-total")
        .unwrap_or(-1.0);
    let report = running.close(Duration::from_secs(20)).await.expect("shutdown");
    let seen = seen.lock().unwrap();
    let redelivered = seen.values().filter(|v| v.iter().any(|&c| c > 1)).count();
    let most = seen.values().flat_map(|v| v.iter().copied()).max().unwrap_or(0);
    println!(
        "renewals {renewals}, lapses {lapses}, released unstarted {released_unstarted}, kept {kept}, \
         released by the driver {unseen}, \
         redelivered {redelivered}, highest delivery count {most}, {report:?}"
    );
    if common::broker_has_v2() {
        let twice: Vec<_> = seen.iter().filter(|(_, v)| v.len() > 1).take(5).collect();
        assert!(twice.is_empty(), "a record was handled twice: {twice:?}");
        assert!(renewals >= 100.0, "each of the 100 long handlers needs renewals: {renewals}");
        assert_eq!(lapses, 0.0, "a renewed record never lapses");
        // Only a record that waited unstarted past its bound goes back (and comes back with
        // delivery count 2); none of the running ones does.
        assert!(
            redelivered as f64 <= released_unstarted,
            "{redelivered} redelivered, {released_unstarted} released unstarted"
        );
        assert_eq!(report.accepted as usize, N, "{report:?}");
        // The engine sends a record back unstarted at most once (then it keeps it), so its
        // releases never use up the deliveries: no record comes near the group's delivery
        // limit (5). (A record may still be delivered a third time: one the engine has not
        // taken yet can go back from the consumer's buffer when every slot stays busy.)
        assert!(most < 5, "a record was delivered {most} times");
    } else {
        // 4.1: no RENEW; the long handlers lose their locks, and the engine says so.
        assert_eq!(renewals, 0.0);
        assert!(lapses >= 1.0, "the lapses are counted: {lapses}");
        assert!(redelivered >= 1, "a lapsed record is delivered again");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stuck_handler_holds_only_its_own_record() {
    const N: usize = 2000;
    // Lock and bound long enough that a busy machine holding the engine up for a second
    // neither loses a lock nor makes a record wait past twice its bound (seen with 2 s and
    // 400 ms on a loaded CI rehearsal).
    const LOCK_MS: u64 = 4000;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-stuck", 2).await;
    let group = common::new_group(&admin, "g-proc-stuck", Some(LOCK_MS as u32)).await;
    common::produce(&common::bootstrap(), &topic, 2, N, "s").await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let bound = Duration::from_millis(1000);
    let processor = Processor::connect(cfg, ProcessorConfig::new().concurrency(8).max_unstarted(bound))
        .await
        .expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let done = Arc::new(AtomicUsize::new(0));
    let stuck = Arc::new(AtomicBool::new(false));
    let release = Arc::new(tokio::sync::Notify::new());
    // The longest a first delivery waited from acquisition to its handler, in µs (its
    // acquisition is its first lock deadline less the lock). A record that went back once
    // (delivery count 2, e.g. released unstarted while the machine was slow) is kept past
    // the bound by design (see the ledger's module doc); those are checked apart below.
    let first_wait = Arc::new(AtomicUsize::new(0));
    let (dn, st, rl, fw) = (done.clone(), stuck.clone(), release.clone(), first_wait.clone());
    let running = processor.run(move |d: Delivery| {
        let (dn, st, rl, fw) = (dn.clone(), st.clone(), rl.clone(), fw.clone());
        async move {
            if let (1, 1, Some(deadline)) = (d.attempt(), d.delivery_count(), d.lock_deadline()) {
                let acquired = deadline.checked_sub(Duration::from_millis(LOCK_MS)).unwrap_or(deadline);
                fw.fetch_max(acquired.elapsed().as_micros() as usize, Ordering::Relaxed);
            }
            // The first record of partition 0 is stuck until the test lets it go.
            // (Its first delivery only: on 4.1, without RENEW, its lock lapses and the
            // broker delivers it again, to another slot, which processes it at once.)
            if d.record().partition == 0 && d.record().offset == 0 && d.attempt() == 1 && d.delivery_count() == 1 {
                st.store(true, Ordering::SeqCst);
                rl.notified().await;
            } else {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            dn.fetch_add(1, Ordering::Relaxed);
            Outcome::Accept
        }
    });
    wait_for("the stuck handler to start", Duration::from_secs(60), || stuck.load(Ordering::SeqCst)).await;
    let stuck_since = Instant::now();
    // While it is stuck (for two locks; KAFKA_SHARE_TEST_STUCK_MS makes it longer, e.g. 60000
    // outside CI), the other seven slots take every other record.
    let stuck_for = std::env::var("KAFKA_SHARE_TEST_STUCK_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_millis(2 * LOCK_MS), Duration::from_millis);
    wait_for("the others processed", Duration::from_secs(60), || done.load(Ordering::Relaxed) >= N - 1).await;
    tokio::time::sleep(stuck_for.saturating_sub(stuck_since.elapsed())).await;
    let while_stuck = done.load(Ordering::Relaxed);
    let wait_max = metric(&running, "wait-time-max");
    release.notify_one();
    wait_for("the stuck one processed", Duration::from_secs(30), || done.load(Ordering::Relaxed) >= N).await;
    let renewals = metric(&running, "lock-renewals-total");
    let kept = metric(&running, "records-kept-unstarted-total");
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    let first_wait_ms = first_wait.load(Ordering::Relaxed) as f64 / 1000.0;
    println!(
        "{while_stuck} processed while one was stuck for {stuck_for:?}; wait max {wait_max} ms (first deliveries {first_wait_ms} ms); renewals {renewals}; kept {kept}; {report:?}"
    );
    if common::broker_has_v2() {
        assert_eq!(while_stuck, N - 1, "no record waited behind the stuck one");
    } else {
        // The lapsed record's second delivery is processed by another slot meanwhile.
        assert!(while_stuck >= N - 1, "no record waited behind the stuck one: {while_stuck}");
    }
    // The bound holds where the broker acquires only what the engine has room for (4.2+,
    // record_limit). On 4.1 the broker hands out whole log batches: records beyond the free
    // slots age in the consumer's buffer, and one that reaches the engine past its bound
    // while a slot is free is started, not released (a release would use up one of its
    // deliveries for nothing): its wait is the batch's, not the engine's.
    if common::broker_has_v2() {
        assert!(
            first_wait_ms <= 2.0 * bound.as_millis() as f64,
            "a first delivery waited {first_wait_ms} ms unstarted (bound {bound:?})"
        );
        // Kept records (delivery count 2) go back, or are renewed, before their lock is gone.
        let wait_bound = if kept > 0.0 { LOCK_MS as f64 } else { 2.0 * bound.as_millis() as f64 };
        assert!(wait_max <= wait_bound, "a record waited {wait_max} ms unstarted (bound {wait_bound} ms, {kept} kept)");
    }
    if common::broker_has_v2() {
        assert!(renewals >= 2.0, "the stuck record kept its lock: {renewals}");
        assert_eq!(report.lapses, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_later_keeps_the_record_and_its_delivery_count() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-retry", 1).await;
    let group = common::new_group(&admin, "g-proc-retry", None).await;
    common::produce(&common::bootstrap(), &topic, 1, 1, "x").await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let pc = ProcessorConfig::new()
        .concurrency(2)
        .retry_backoff(Duration::from_millis(50), Duration::from_millis(200));
    let processor = Processor::connect(cfg, pc).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let calls: Arc<Mutex<Vec<(u32, i16)>>> = Arc::default();
    let c = calls.clone();
    let running = processor.run(move |d: Delivery| {
        let c = c.clone();
        async move {
            c.lock().unwrap().push((d.attempt(), d.delivery_count()));
            if d.attempt() < 3 {
                Outcome::Retry
            } else {
                Outcome::Accept
            }
        }
    });
    wait_for("three handler calls", Duration::from_secs(60), || calls.lock().unwrap().len() >= 3).await;
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    assert_eq!(*calls.lock().unwrap(), vec![(1, 1), (2, 1), (3, 1)], "three calls on one delivery");
    assert_eq!((report.accepted, report.released), (1, 0), "{report:?}");

    // ACCEPTed for good: a new member of the group gets nothing.
    let other = kafka_share::ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("connect");
    other.subscribe([topic.clone()]).expect("subscribe");
    let got = common::poll_until(&other, 1, Duration::from_secs(4), |_| {}).await;
    assert!(got.is_empty(), "the accepted record came back: {got:?}");
    other.close(None).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_hands_unstarted_records_to_another_member_and_finishes_the_running() {
    const N: usize = 200;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-shut", 1).await;
    let group = common::new_group(&admin, "g-proc-shut", Some(30_000)).await;
    common::produce(&common::bootstrap(), &topic, 1, N, "z").await;

    // The other member joins first, paused, so it takes nothing until the shutdown.
    let other = kafka_share::ShareConsumer::connect(
        common::consumer_config(&common::bootstrap(), &group)
            .acknowledgement_mode(kafka_share::consumer::AcknowledgementMode::Explicit),
    )
    .await
    .expect("connect");
    other.subscribe([topic.clone()]).expect("subscribe");
    other.pause([TopicPartition::new(topic.clone(), 0)]).expect("pause");
    assert!(other.poll(Duration::from_millis(500)).await.expect("poll").is_empty());

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let processor = Processor::connect(cfg, ProcessorConfig::new().concurrency(4).prefetch(20)).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let finished: Arc<Mutex<Vec<i64>>> = Arc::default();
    let f = finished.clone();
    let running = processor.run(move |d: Delivery| {
        let f = f.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            f.lock().unwrap().push(d.record().offset);
            Outcome::Accept
        }
    });
    common::wait_for_members(&admin, &group, 2, Duration::from_secs(30)).await;
    wait_for("four running and some queued", Duration::from_secs(30), || {
        metric(&running, "records-in-flight") == 4.0 && metric(&running, "records-queued") >= 1.0
    })
    .await;
    let handle = running.handle();
    let shutdown = tokio::spawn(running.close(Duration::from_secs(20)));
    let signalled = Instant::now();
    other.resume([TopicPartition::new(topic.clone(), 0)]).expect("resume");
    let mut first_redelivery = None;
    let mut redelivered = Vec::new();
    while signalled.elapsed() < Duration::from_secs(10) && first_redelivery.is_none() {
        for r in other.poll(Duration::from_millis(100)).await.expect("poll") {
            if r.delivery_count == 2 {
                first_redelivery.get_or_insert(signalled.elapsed());
                redelivered.push(r.offset);
            }
            other.acknowledge_with(&r, kafka_share::AcknowledgeType::Release).expect("ack");
        }
    }
    let report = shutdown.await.expect("join").expect("shutdown");
    drop(handle);
    let took = first_redelivery.expect("no released record reached the other member");
    println!("first redelivery after {took:?}; {report:?}");
    assert!(took <= Duration::from_secs(2), "released records reached the other member after {took:?}");
    let finished = finished.lock().unwrap().clone();
    assert!(finished.len() >= 4, "the running handlers finished: {finished:?}");
    assert_eq!(report.accepted as usize, finished.len(), "and were accepted: {report:?}");
    assert!(redelivered.iter().all(|o| !finished.contains(o)), "a finished record was released");
    other.close(None).await.expect("close");
}

/// Issue 34: at default settings the engine acquires for its free slots (and its prefetch),
/// not whole broker batches. 5,000 records on 4 partitions, 64 handlers, a 4 s lock, one
/// handler in 100 runs 12 s: on 4.2+ (record_limit under the engine) no record waits out its
/// bound and goes back unstarted, so every record reaches a handler on its first delivery.
/// (The other handlers take 40 ms: 64 slots take ~1,600 records/s, so records fetched ahead
/// of them in whole log batches would wait past the 1 s bound.)
/// On 4.1 (no record_limit) the fetch is sized to the free slots and no record is released
/// unstarted more than once before a handler sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acquisition_follows_free_slots_at_default_settings() {
    log_from_env();
    const N: usize = 5_000;
    // 4 s (renewals at half the lock tolerate the engine held up 2 s on a busy machine; a 2 s
    // lock lapsed there once), so the unstarted bound is 1 s, and the handlers take 40 ms:
    // whole log batches would still wait past the bound, as in the doc above.
    const LOCK_MS: u64 = 4000;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-pace", 4).await;
    let group = common::new_group(&admin, "g-proc-pace", Some(LOCK_MS as u32)).await;
    common::produce(&common::bootstrap(), &topic, 4, N, "p").await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let processor = Processor::connect(cfg, ProcessorConfig::new().concurrency(64)).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let seen: Seen = Arc::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (s, c) = (seen.clone(), calls.clone());
    let running = processor.run(move |d: Delivery| {
        let (s, c) = (s.clone(), c.clone());
        async move {
            let n = c.fetch_add(1, Ordering::Relaxed);
            let work = if n % 100 == 99 { Duration::from_millis(3 * LOCK_MS) } else { Duration::from_millis(40) };
            let r = d.record();
            s.lock().unwrap().entry((r.partition, r.offset)).or_default().push(r.delivery_count);
            tokio::time::sleep(work).await;
            Outcome::Accept
        }
    });
    wait_for("every record handled", Duration::from_secs(120), || seen.lock().unwrap().len() >= N).await;
    let released_unstarted = metric(&running, "records-released-unstarted-total");
    let unseen = running
        .metrics()
        .get(kafka_share::consumer::FETCH_MANAGER, "records-released-unseen-total")
        .unwrap_or(-1.0);
    let report = running.close(Duration::from_secs(20)).await.expect("shutdown");
    let seen = seen.lock().unwrap();
    let first_counts: Vec<i16> = seen.values().map(|v| v[0]).collect();
    let late = first_counts.iter().filter(|&&c| c > 1).count();
    let most = first_counts.iter().copied().max().unwrap_or(0);
    println!(
        "released unstarted {released_unstarted}, released unseen by the consumer {unseen}, \
         first deliveries with count > 1: {late}, highest first count {most}, {report:?}"
    );
    if common::broker_has_v2() {
        assert_eq!(report.accepted as usize, N, "{report:?}");
        assert_eq!(released_unstarted, 0.0, "a record went back unstarted although acquisition follows the free slots");
        assert_eq!(unseen, 0.0, "the consumer under the engine released records it had fetched ahead");
        assert_eq!(late, 0, "a record reached its first handler with a delivery count above 1");
    } else {
        // 4.1: a log batch may still be larger than the free slots, but a record the engine
        // sent back once is kept. (The 6 s handlers lose their 2 s locks without RENEW: those
        // records are delivered and accepted again, so more than N are accepted.)
        assert!(report.accepted as usize >= N, "{report:?}");
        assert!(most <= 2, "a record was released unstarted more than once before a handler saw it: count {most}");
    }
}

/// Issue 34: a `Report` counts every record released on the engine's behalf, the records the
/// consumer under it had fetched and not handed over included. An engine with 32 slots closed
/// mid-stream: every record it did not finish reaches another member, and its report's
/// `released` is at least the number of them that come back with delivery count 2 (with
/// whole-batch acquisition, so that the consumer holds records the engine never took).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_report_counts_every_release_of_an_engine_closed_mid_stream() {
    log_from_env();
    const N: usize = 4_000;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-count", 2).await;
    let group = common::new_group(&admin, "g-proc-count", Some(30_000)).await;
    common::produce(&common::bootstrap(), &topic, 2, N, "c").await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    // Whole batches (the consumer's prefetch), so the consumer holds records the engine
    // has not taken when it closes.
    let pc = ProcessorConfig::new()
        .concurrency(32)
        .acquire_mode(Some(kafka_share::consumer::AcquireMode::BatchOptimized));
    let processor = Processor::connect(cfg, pc).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let done = Arc::new(AtomicUsize::new(0));
    let d2 = done.clone();
    let running = processor.run(move |_d: Delivery| {
        let d2 = d2.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            d2.fetch_add(1, Ordering::Relaxed);
            Outcome::Accept
        }
    });
    wait_for("some records handled", Duration::from_secs(60), || done.load(Ordering::Relaxed) >= 200).await;
    let report = running.close(Duration::from_secs(20)).await.expect("shutdown");

    // Another member takes what is left: the released records come with delivery count 2.
    let other = kafka_share::ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("connect");
    other.subscribe([topic.clone()]).expect("subscribe");
    let left = N - report.accepted as usize;
    let got = common::poll_until(&other, left, Duration::from_secs(60), |_| {}).await;
    other.close(None).await.expect("close");
    let second = got.iter().filter(|r| r.delivery_count >= 2).count();
    println!("left {left}, the other member got {}, {second} with delivery count 2; {report:?}", got.len());
    assert_eq!(got.len(), left, "every record not accepted reached the other member");
    assert!(
        report.released as usize >= second,
        "the report says {} released, but {second} records came back released: {report:?}",
        report.released
    );
    assert!(report.released_unstarted <= report.released, "{report:?}");
}

/// A worker subscribed to a topic the broker does not have says so at WARN, naming it,
/// instead of idling without a word. (One thread: the subscriber set here sees the
/// driver's tasks.)
#[tokio::test(flavor = "current_thread")]
async fn a_missing_input_topic_is_said_at_warn_naming_it() {
    let (logs, _guard) = crate::logs::Logs::warnings();
    let admin = common::admin().await;
    let group = common::new_group(&admin, "g-proc-missing", None).await;
    let missing = format!("proc-missing-{group}");
    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let processor = Processor::connect(cfg, ProcessorConfig::new()).await.expect("connect");
    processor.consumer().subscribe([missing.clone()]).expect("subscribe");
    let running = processor.run(|_d: Delivery| async { Outcome::Accept });
    let text = || logs.text();
    let said =
        waited_for(Duration::from_secs(30), || text().lines().any(|l| l.contains("WARN") && l.contains(&missing)))
            .await;
    assert!(said, "no warning naming {missing}:\n{}", text());
    running.close(Duration::from_secs(10)).await.expect("a clean shutdown");
}
