//! The fault tests' view of the fake cluster: everything `kafka_share::test_util` offers
//! (built with the `test-util` feature), plus the polling and waiting helpers these tests
//! share.
#![allow(dead_code, unused_imports)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_share::consumer::{AckCallback, TopicPartition};
use kafka_share::{ConsumerRecord, ShareConsumer};

pub use kafka_share::test_util::*;

/// How long a helper waits for a condition before it fails the test. Generous: the machine
/// may be loaded; a passing test never waits this long.
pub const WAIT: Duration = Duration::from_secs(30);

/// Polls until `n` records arrived in total or `timeout` passed; returns what arrived.
pub async fn poll_until(c: &ShareConsumer, n: usize, timeout: Duration) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        match c.poll(Duration::from_millis(200)).await {
            Ok(rs) => out.extend(rs),
            Err(e) => panic!("poll failed: {e}"),
        }
    }
    out
}

/// Keeps polling (which sends the acks of the previous poll) until `f` holds; false after
/// `timeout`. Records that arrive meanwhile are returned through `got`.
pub async fn poll_while_not(
    c: &ShareConsumer,
    timeout: Duration,
    got: &mut Vec<ConsumerRecord>,
    mut f: impl FnMut() -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() >= deadline {
            return false;
        }
        got.extend(c.poll(Duration::from_millis(50)).await.expect("poll"));
    }
    true
}

/// Records the consumer has buffered since it started (its records-consumed-total metric).
pub fn buffered_total(c: &ShareConsumer) -> usize {
    c.metrics().get(kafka_share::consumer::FETCH_MANAGER, "records-consumed-total").unwrap_or(0.0) as usize
}

/// Makes the consumer fetch `n` records and takes them all in one poll (explicit mode cannot
/// poll again before acknowledging): a zero-timeout poll that finds nothing buffered asks
/// every broker for one fetch; once `n` more records are buffered (from however many
/// brokers), one zero-timeout poll returns them all. No timing assumed: it waits for each
/// condition.
pub async fn poll_all_at_once(fake: &FakeCluster, c: &ShareConsumer, n: usize) -> Vec<ConsumerRecord> {
    let start = buffered_total(c);
    let first = c.poll(Duration::ZERO).await.expect("poll");
    if !first.is_empty() {
        assert_eq!(first.len(), n, "records were already buffered:\n{}", fake.dump());
        return first;
    }
    if !eventually(WAIT, || buffered_total(c) >= start + n).await {
        panic!("{} records buffered, waited for {n}; log:\n{}", buffered_total(c) - start, fake.dump());
    }
    let out = c.poll(Duration::ZERO).await.expect("poll");
    assert_eq!(out.len(), n, "one poll should return everything buffered:\n{}", fake.dump());
    out
}

/// Accepts every record of `records` and commits, expecting every partition's result to be ok.
pub async fn accept_and_commit(c: &ShareConsumer, records: &[ConsumerRecord], timeout: Duration) {
    for r in records {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(timeout).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
}

/// Keeps polling (sending the acks of each poll) until `n` more ShareFetch requests reached
/// the fake: the consumer had that many chances to do something it must not (resend an ack,
/// refetch a partition), however slow the machine. Returns the records that came meanwhile.
pub async fn poll_through_fetches(fake: &FakeCluster, c: &ShareConsumer, n: usize) -> Vec<ConsumerRecord> {
    let start = fake.count(|l| l.is_fetch());
    let mut got = Vec::new();
    let done = poll_while_not(c, WAIT, &mut got, || fake.count(|l| l.is_fetch()) >= start + n).await;
    assert!(done, "{n} more ShareFetch requests did not come:\n{}", fake.dump());
    got
}

/// One acknowledgement completion as the commit callback saw it.
#[derive(Debug, Clone)]
pub struct AckOutcome {
    /// The partition.
    pub tp: TopicPartition,
    /// The offsets.
    pub offsets: Vec<i64>,
    /// The outcome.
    pub result: kafka_share::Result<()>,
}

/// A commit callback that records every completion.
pub fn ack_recorder() -> (AckCallback, Arc<Mutex<Vec<AckOutcome>>>) {
    let seen: Arc<Mutex<Vec<AckOutcome>>> = Arc::default();
    let s = seen.clone();
    let cb: AckCallback = Arc::new(move |tp, offsets, result| {
        s.lock().unwrap_or_else(|p| p.into_inner()).push(AckOutcome {
            tp: tp.clone(),
            offsets: offsets.to_vec(),
            result: result.clone(),
        });
    });
    (cb, seen)
}

/// (partition, offset) of each record.
pub fn offsets(records: &[ConsumerRecord]) -> Vec<(i32, i64)> {
    records.iter().map(|r| (r.partition, r.offset)).collect()
}
