//! The acknowledgement commit callback against a real broker: it runs on the application's
//! side (inside poll, commit and close, as in Java), survives its own panics, and refuses
//! calls back into the consumer.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_share::consumer::{AcknowledgementMode, FETCH_MANAGER};
use kafka_share::{Error, ShareConsumer};

const T: Duration = Duration::from_secs(10);

/// Waits until the driver has completed `n` acknowledgements (its metric says so), without
/// calling into the consumer otherwise.
async fn wait_for_completed_acks(c: &ShareConsumer, n: f64) {
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    while c.metrics().get(FETCH_MANAGER, "acknowledgements-send-total").unwrap_or(0.0) < n {
        assert!(tokio::time::Instant::now() < end, "acknowledgements never completed: {:?}", c.metrics());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Completions of a `commit_async` whose handle was dropped reach the callback only when the
/// application next calls the consumer (here a zero poll), never from the background task.
#[tokio::test]
async fn the_callback_runs_inside_the_applications_calls_only() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "cbside", 1).await;
    common::produce(&bs, &topic, 1, 10, "v").await;
    let group = common::new_group(&admin, "g-cbside", None).await;
    let cfg = common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = ShareConsumer::connect(cfg).await.unwrap();
    let told = Arc::new(AtomicUsize::new(0));
    let t = told.clone();
    c.set_acknowledgement_commit_callback(move |_tp, offsets, r| {
        assert!(r.is_ok(), "{r:?}");
        t.fetch_add(offsets.len(), Ordering::SeqCst);
    })
    .unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 10, Duration::from_secs(30), |r| c.acknowledge(r).unwrap()).await;
    assert_eq!(got.len(), 10);
    drop(c.commit_async().unwrap());
    wait_for_completed_acks(&c, 10.0).await;
    assert_eq!(told.load(Ordering::SeqCst), 0, "the background task must not run the callback");
    c.poll(Duration::ZERO).await.unwrap();
    assert_eq!(told.load(Ordering::SeqCst), 10, "the next poll tells the callback");
    c.close(T).await.unwrap();
}

/// A callback that panics, and one that calls back into the consumer: the panic is caught
/// (the consumer goes on: the next polls and commits work), the call is refused clearly.
#[tokio::test]
async fn a_panicking_or_reentrant_callback_does_not_break_the_consumer() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "cbpanic", 1).await;
    common::produce(&bs, &topic, 1, 20, "v").await;
    let group = common::new_group(&admin, "g-cbpanic", None).await;
    let cfg = common::consumer_config(&bs, &group)
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .max_poll_records(10);
    let c = Arc::new(ShareConsumer::connect(cfg).await.unwrap());
    let reentry: Arc<Mutex<Vec<String>>> = Arc::default();
    let (weak, seen) = (Arc::downgrade(&c), reentry.clone());
    c.set_acknowledgement_commit_callback(move |_tp, _offsets, _r| {
        if let Some(c) = weak.upgrade() {
            match c.commit_async() {
                Err(e @ Error::CalledFromCallback) => seen.lock().unwrap().push(e.to_string()),
                other => seen.lock().unwrap().push(format!("unexpected: {other:?}")),
            }
        }
        panic!("a bug in the application's callback");
    })
    .unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let first = common::poll_until(&c, 10, Duration::from_secs(30), |r| c.acknowledge(r).unwrap()).await;
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    let msgs = reentry.lock().unwrap().clone();
    assert!(!msgs.is_empty() && msgs.iter().all(|m| m.contains("acknowledgement commit callback")), "{msgs:?}");
    // The consumer goes on after the panic.
    let second = common::poll_until(&c, 10, Duration::from_secs(30), |r| c.acknowledge(r).unwrap()).await;
    assert_eq!(first.len() + second.len(), 20);
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    c.close(T).await.unwrap();
}
