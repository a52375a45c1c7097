//! Fault injection: what close sends, and in which order.

use crate::fake_broker;

use std::collections::BTreeMap;
use std::time::Duration;

use fake_broker::{poll_all_at_once, poll_until, FakeCluster, FakeConfig, Logged};
use kafka_share::consumer::AcknowledgementMode;

/// Overall limit of a wait: generous (a loaded machine is slow); tests end on the condition.
const T: Duration = Duration::from_secs(30);

/// The ack type each (partition, offset) got on the wire, last one wins.
fn ack_types(log: &[Logged]) -> BTreeMap<(i32, i64), i8> {
    log.iter().flat_map(|l| l.acks()).map(|a| ((a.partition, a.offset), a.kind)).collect()
}

/// Checks the close sequence in `after` (the log since close started): per session, the
/// epoch -1 ShareAcknowledge is its last share request; every one of them comes before the
/// leave heartbeat; nothing share-related follows the leave.
fn assert_close_order(fake: &FakeCluster, after: &[Logged], nodes: &[i32]) {
    let leave = after
        .iter()
        .find(|l| l.is_leave())
        .unwrap_or_else(|| panic!("no leave heartbeat:\n{}", fake.dump()));
    for &n in nodes {
        let closes: Vec<&Logged> =
            after.iter().filter(|l| l.node == n && l.is_ack() && l.epoch() == Some(-1)).collect();
        assert_eq!(closes.len(), 1, "one session close on node {n}:\n{}", fake.dump());
        assert!(closes[0].seq < leave.seq, "session on node {n} closed after the leave heartbeat:\n{}", fake.dump());
        let last = after.iter().rev().find(|l| l.node == n && l.is_share()).unwrap();
        assert_eq!(last.seq, closes[0].seq, "the close is the session's last request:\n{}", fake.dump());
    }
    assert!(
        after.iter().filter(|l| l.seq > leave.seq).all(|l| !l.is_share()),
        "share requests after the leave:\n{}",
        fake.dump()
    );
}

#[tokio::test]
async fn close_sends_pending_acks_then_closes_each_session_then_leaves() {
    let fake = FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1, 2]).records(5)).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let got = poll_all_at_once(&fake, &c, 10).await;
    for r in got.iter().filter(|r| !(r.partition == 1 && r.offset == 4)) {
        c.acknowledge(r).unwrap();
    }
    let start = fake.log().len();
    c.close(T).await.unwrap();
    let after: Vec<Logged> = fake.log().split_off(start);
    assert_close_order(&fake, &after, &[1, 2]);
    let types = ack_types(&after);
    for p in 0..2 {
        for o in 0..5 {
            let want = if (p, o) == (1, 4) { 2 } else { 1 };
            assert_eq!(types.get(&(p, o)), Some(&want), "{p}-{o}:\n{}", fake.dump());
        }
    }
    assert_eq!(fake.done(0), vec![0, 1, 2, 3, 4]);
    assert_eq!(fake.done(1), vec![0, 1, 2, 3]);
    assert!(fake.held().is_empty(), "nothing left locked: {:?}", fake.held());
    fake.assert_clean();
}

#[tokio::test]
async fn close_in_implicit_mode_releases_the_last_poll_instead_of_accepting_it() {
    let fake = FakeCluster::single(1, 10).await;
    let c = fake.consumer(fake.consumer_config("g").max_poll_records(5)).await;
    let first = poll_until(&c, 5, T).await;
    assert_eq!(first.len(), 5);
    let second = poll_until(&c, 5, T).await; // accepts the first poll's records
    assert_eq!(second.len(), 5);
    c.close(T).await.unwrap();
    let types = ack_types(&fake.log());
    for r in &first {
        assert_eq!(types.get(&(0, r.offset)), Some(&1), "first poll accepted:\n{}", fake.dump());
    }
    for r in &second {
        assert_eq!(types.get(&(0, r.offset)), Some(&2), "last poll released, not accepted:\n{}", fake.dump());
    }
    let accepted: Vec<i64> = first.iter().map(|r| r.offset).collect();
    assert_eq!(fake.done(0), accepted);
    assert!(fake.held().is_empty());
    fake.assert_clean();
}

#[tokio::test]
async fn close_releases_prefetched_records_nobody_polled() {
    let fake = FakeCluster::single(2, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    fake.wait_held(10).await;
    c.close(T).await.unwrap();
    assert!(fake.held().is_empty(), "prefetched records still locked: {:?}", fake.held());
    assert!(fake.acks_sent().iter().all(|(_, _, a)| a.kind == 2), "only releases:\n{}", fake.dump());
    assert!(fake.done(0).is_empty() && fake.done(1).is_empty());
    let after = fake.log();
    assert_close_order(&fake, &after, &[1]);
    fake.assert_clean();
}

#[tokio::test]
async fn close_closes_the_session_even_when_everything_was_acknowledged() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    let got = poll_until(&c, 5, T).await;
    assert_eq!(got.len(), 5);
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    assert_eq!(fake.done(0), vec![0, 1, 2, 3, 4]);
    let start = fake.log().len();
    c.close(T).await.unwrap();
    let after: Vec<Logged> = fake.log().split_off(start);
    assert_close_order(&fake, &after, &[1]);
    assert!(after.iter().all(|l| l.acks().is_empty()), "nothing left to acknowledge:\n{}", fake.dump());
    fake.assert_clean();
}

#[tokio::test]
async fn dropping_the_consumer_without_close_still_releases_and_leaves() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g").max_poll_records(5)).await;
    let got = poll_until(&c, 5, T).await;
    assert_eq!(got.len(), 5);
    drop(c);
    fake.wait_for("the leave heartbeat", T, |log| log.iter().any(|l| l.is_leave())).await;
    assert!(fake.held().is_empty(), "{:?}", fake.held());
    assert!(fake.done(0).is_empty(), "the unprocessed poll is released, not accepted");
    let after = fake.log();
    assert_close_order(&fake, &after, &[1]);
    fake.assert_clean();
}

#[tokio::test]
async fn close_finishes_and_leaves_when_the_session_close_fails() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    assert_eq!(poll_until(&c, 5, T).await.len(), 5);
    fake.script(fake_broker::Rule::on(fake_broker::SHARE_ACKNOWLEDGE, fake_broker::Action::DropConnection));
    // Close goes on without the lost session's answer: it returns before its (long) timeout.
    let r = c.close(Duration::from_secs(600)).await;
    assert!(!matches!(r, Err(kafka_share::Error::Timeout { .. })), "close waited for its timeout: {r:?}");
    fake.wait_for("the leave heartbeat", T, |log| log.iter().any(|l| l.is_leave())).await;
    assert!(fake_broker::eventually(T, || fake.held().is_empty()).await, "{:?}", fake.held());
    fake.assert_clean();
}

#[tokio::test]
async fn close_gives_up_at_its_timeout_when_the_broker_does_not_answer() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    assert_eq!(poll_until(&c, 5, T).await.len(), 5);
    // The broker never answers within the test: close must give up at its own timeout. The
    // outer bound only turns a hang into a failure; it is far above any load's delay.
    fake.script(fake_broker::Rule::on(
        fake_broker::SHARE_ACKNOWLEDGE,
        fake_broker::Action::Delay(Duration::from_secs(3600)),
    ));
    let r = tokio::time::timeout(T, c.close(Duration::from_millis(500))).await;
    let r = r.unwrap_or_else(|_| panic!("close ignored its 500 ms timeout:\n{}", fake.dump()));
    // It says what it could not finish: which broker left the final acknowledgements
    // unanswered, and that the group was not left.
    match &r {
        Err(kafka_share::Error::Timeout { what, after }) => {
            assert_eq!(*after, Duration::from_millis(500));
            assert!(what.contains("brokers [1] did not answer the final acknowledgements"), "{what}");
            assert!(what.contains("the group was not left"), "{what}");
        }
        other => panic!("expected a close timeout, got {other:?}"),
    }
    // The connection goes with the consumer: the broker releases what it held.
    assert!(fake_broker::eventually(T, || fake.held().is_empty()).await, "{:?}", fake.held());
}

// Paused time: the fake holds the heartbeat on a tokio timer, so its 5 s pass as soon as
// every task waits (the fake reads no wall clock on this path: no lock lapses here).
#[tokio::test(start_paused = true)]
async fn close_sends_the_leave_even_when_a_heartbeat_is_in_flight() {
    // Found by running these tests on a loaded machine: a regular heartbeat in flight when
    // close reached its leave step had its answer taken for the leave's, so no leave was sent.
    // Here the fake holds one heartbeat for 5 s, and close starts while it is held.
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    assert_eq!(poll_until(&c, 5, T).await.len(), 5);
    fake.script(fake_broker::Rule::on(fake_broker::HEARTBEAT, fake_broker::Action::Delay(Duration::from_secs(5))));
    assert!(fake_broker::eventually(T, || fake.rules_left() == 0).await, "no heartbeat came");
    let start = fake.log().len();
    c.close(T).await.unwrap();
    let after: Vec<Logged> = fake.log().split_off(start);
    assert_close_order(&fake, &after, &[1]);
    fake.assert_clean();
}
