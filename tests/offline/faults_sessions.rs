//! Fault injection: share sessions lost, connections dropped, malformed answers, leaders moving.

use crate::fake_broker;

use std::time::Duration;

use fake_broker::{
    accept_and_commit, ack_recorder, code, poll_all_at_once, poll_until, poll_while_not, Action, FakeCluster,
    FakeConfig, Logged, Rule, HEARTBEAT, SHARE_FETCH,
};
use kafka_share::consumer::{AcknowledgementMode, TopicPartition};
use kafka_share::{ErrorCode, ShareConsumerConfig};

/// Overall limit of a wait: generous (a loaded machine is slow); tests end on the condition.
const T: Duration = Duration::from_secs(30);

fn explicit(cfg: ShareConsumerConfig) -> ShareConsumerConfig {
    cfg.acknowledgement_mode(AcknowledgementMode::Explicit)
}

/// The share request right after the first one that carried acks (waits for it).
async fn after_first_acks(fake: &FakeCluster) -> (Logged, Logged) {
    fake.wait_for("a share request after the first one with acks", T, |log| {
        log.iter().filter(|l| l.is_share()).skip_while(|l| l.acks().is_empty()).count() >= 2
    })
    .await;
    let log = fake.share_log();
    let i = log.iter().position(|l| !l.acks().is_empty()).expect("a request with acks");
    let next = log.get(i + 1).cloned().unwrap_or_else(|| panic!("nothing after the acks:\n{}", fake.dump()));
    (log[i].clone(), next)
}

#[tokio::test]
async fn session_not_found_fails_the_piggybacked_acks_and_reopens_at_epoch_0() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    let (cb, seen) = ack_recorder();
    c.set_acknowledgement_commit_callback(move |t, o, r| cb(t, o, r)).unwrap();
    let got = poll_until(&c, 5, T).await;
    assert_eq!(got.len(), 5);
    fake.script(Rule::on(SHARE_FETCH, Action::TopLevelError(code::SHARE_SESSION_NOT_FOUND)).with_acks());
    let failed = || seen.lock().unwrap().iter().any(|o| o.result.is_err());
    let mut again = Vec::new();
    assert!(poll_while_not(&c, T, &mut again, failed).await, "acks lost silently:\n{}", fake.dump());
    let outcome = seen.lock().unwrap().iter().find(|o| o.result.is_err()).cloned().unwrap();
    assert_eq!(outcome.offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(outcome.result.unwrap_err().code(), Some(ErrorCode::SHARE_SESSION_NOT_FOUND));
    // The broker released the records with the session: they come back and get accepted.
    assert!(poll_while_not(&c, T, &mut again, || fake.done(0).len() == 5).await, "{}", fake.dump());
    let (failed_req, next) = after_first_acks(&fake).await;
    assert!(failed_req.epoch().unwrap() > 0);
    assert_eq!(next.epoch(), Some(0), "reopen at epoch 0: {}", next.summary());
    assert!(next.acks().is_empty(), "no acks on the reopening request: {}", next.summary());
    assert!(again.iter().all(|r| r.delivery_count == 2), "redelivered");
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn invalid_session_epoch_fails_the_commit_and_reopens_at_epoch_0() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(explicit(fake.consumer_config("g"))).await;
    let got = poll_all_at_once(&fake, &c, 5).await;
    fake.script(Rule::any(Action::TopLevelError(code::INVALID_SHARE_SESSION_EPOCH)).with_acks());
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    let r = &results[&TopicPartition::new(fake.topic(), 0)];
    assert_eq!(r.as_ref().unwrap_err().code(), Some(ErrorCode::INVALID_SHARE_SESSION_EPOCH), "{results:?}");
    // The next poll makes the member fetch again, on a new session.
    assert!(c.poll(Duration::ZERO).await.unwrap().is_empty());
    let (_, next) = after_first_acks(&fake).await;
    assert_eq!(next.epoch(), Some(0), "{}", next.summary());
    assert!(next.acks().is_empty());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn dropped_connection_fails_pending_acks_and_reopens_at_epoch_0() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(explicit(fake.consumer_config("g"))).await;
    let got = poll_all_at_once(&fake, &c, 5).await;
    fake.script(Rule::any(Action::DropConnection).with_acks());
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    assert!(results[&TopicPartition::new(fake.topic(), 0)].is_err(), "{results:?}");
    // The broker released the records when the connection dropped: they come back.
    let again = poll_all_at_once(&fake, &c, 5).await;
    assert!(again.iter().all(|r| r.delivery_count == 2));
    let (failed_req, next) = after_first_acks(&fake).await;
    assert_eq!(next.epoch(), Some(0), "{}", next.summary());
    assert!(next.acks().is_empty());
    assert_ne!(next.conn, failed_req.conn, "a new connection");
    accept_and_commit(&c, &again, T).await;
    assert_eq!(fake.done(0), vec![0, 1, 2, 3, 4]);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn broker_losing_the_session_without_a_leader_change_reports_the_acks_as_failed() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    let (cb, seen) = ack_recorder();
    c.set_acknowledgement_commit_callback(move |t, o, r| cb(t, o, r)).unwrap();
    let got = poll_until(&c, 5, T).await;
    assert_eq!(got.len(), 5);
    fake.drop_sessions(1); // a restart: nobody is told
    let mut again = Vec::new();
    let failed = || seen.lock().unwrap().iter().any(|o| o.result.is_err());
    assert!(poll_while_not(&c, T, &mut again, failed).await, "acks lost silently:\n{}", fake.dump());
    let e = seen.lock().unwrap().iter().find(|o| o.result.is_err()).cloned().unwrap();
    assert_eq!(e.offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(e.result.unwrap_err().code(), Some(ErrorCode::SHARE_SESSION_NOT_FOUND));
    assert!(poll_while_not(&c, T, &mut again, || fake.done(0).len() == 5).await, "{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn acks_for_records_of_a_reset_session_fail_locally_and_are_never_sent() {
    let fake = FakeCluster::single(2, 5).await;
    let c = fake.consumer(explicit(fake.consumer_config("g"))).await;
    let got = poll_all_at_once(&fake, &c, 10).await;
    // Partition 1's acknowledgements lose the connection: the session is gone on both sides,
    // and with it the locks of partition 0's records, which the application still holds.
    fake.script(Rule::any(Action::DropConnection).acks_for(1));
    for r in got.iter().filter(|r| r.partition == 1) {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    assert!(results[&TopicPartition::new(fake.topic(), 1)].is_err(), "{results:?}");
    for r in got.iter().filter(|r| r.partition == 0) {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    let r = &results[&TopicPartition::new(fake.topic(), 0)];
    assert_eq!(r.as_ref().unwrap_err().code(), Some(ErrorCode::SHARE_SESSION_NOT_FOUND), "{results:?}");
    // The commit completed without sending them: nothing of partition 0 was ever sent.
    assert!(fake.acks_sent().iter().all(|(_, _, a)| a.partition != 0), "stale acks sent:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn garbage_share_fetch_response_is_an_error_and_the_consumer_recovers() {
    let fake = FakeCluster::single(1, 10).await;
    fake.script(Rule::on(SHARE_FETCH, Action::Garbage));
    let c = fake.consumer(fake.consumer_config("g")).await;
    let mut got = poll_until(&c, 10, T).await;
    assert_eq!(got.len(), 10, "{}", fake.dump());
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 10).await, "{}", fake.dump());
    let fetch_conns: std::collections::BTreeSet<u64> = fake.share_log().iter().map(|l| l.conn).collect();
    assert!(fetch_conns.len() >= 2, "the poisoned connection was replaced:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn truncated_share_fetch_response_is_an_error_and_the_consumer_recovers() {
    let fake = FakeCluster::single(1, 10).await;
    let cfg = fake.consumer_config("g").max_poll_records(5);
    let c = fake.consumer(cfg).await;
    let mut got = poll_until(&c, 5, T).await;
    fake.script(Rule::on(SHARE_FETCH, Action::Truncated).with_acks());
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 10).await, "{}", fake.dump());
    assert!(fake.count(|l| matches!(l.req, fake_broker::Req::ConnClosed)) >= 1);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn leader_change_sends_no_old_acks_to_the_new_leader_and_fetches_from_it() {
    let fake = FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1]).records(10)).await;
    let cfg = fake.consumer_config("g").max_poll_records(5);
    let c = fake.consumer(cfg).await;
    let mut got = poll_until(&c, 5, T).await;
    fake.move_leader(0, 2);
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 10).await, "{}", fake.dump());
    let log = fake.share_log();
    assert!(log.iter().any(|l| l.node == 2 && l.is_fetch() && l.listed().contains(&0)), "fetched from the new leader");
    assert!(got.iter().any(|r| r.delivery_count == 2), "redelivered by the new leader");
    // Node 2 only ever saw acks for records it delivered (assert_clean checks the holder), and
    // each offset was accepted there exactly once.
    let on_new: Vec<_> = fake.acks_sent().into_iter().filter(|(n, _, _)| *n == 2).collect();
    assert_eq!(on_new.len(), 10, "{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn leader_change_with_other_partitions_on_the_old_leader_does_not_strand_acks() {
    let fake = FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1, 1]).records(5)).await;
    let c = fake.consumer(explicit(fake.consumer_config("g"))).await;
    let got = poll_all_at_once(&fake, &c, 10).await;
    fake.move_leader(0, 2);
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    // Partition 0's acks belong to node 1's session, which keeps fetching partition 1: they
    // must still complete (as errors: node 1 no longer leads it), not wait forever.
    let results = c
        .commit_sync(T)
        .await
        .unwrap_or_else(|e| panic!("commit_sync: {e}; acks stranded on the old leader's session?\n{}", fake.dump()));
    let topic = fake.topic();
    assert!(results[&TopicPartition::new(&topic, 1)].is_ok(), "{results:?}");
    assert!(results[&TopicPartition::new(&topic, 0)].is_err(), "{results:?}");
    assert!(fake.acks_sent().iter().all(|(n, _, a)| a.partition == 1 || *n == 1), "old acks went to the new leader");
    // Polling on, the member fetches partition 0 from its new leader.
    let mut more = Vec::new();
    let moved = || fake.log().iter().any(|l| l.node == 2 && l.is_fetch() && l.listed().contains(&0));
    assert!(poll_while_not(&c, T, &mut more, moved).await, "partition 0 fetched from node 2:\n{}", fake.dump());
    for r in &more {
        c.acknowledge(r).unwrap();
    }
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn share_acknowledge_timeout_fails_the_acks_and_reopens_at_epoch_0() {
    let fake = FakeCluster::single(1, 5).await;
    let cfg = explicit(fake.consumer_config("g")).request_timeout(Duration::from_millis(800));
    let c = fake.consumer(cfg).await;
    let got = poll_all_at_once(&fake, &c, 5).await;
    // Held far past the 800 ms request timeout, so the client's timeout surely fires first
    // however the machine stalls.
    fake.script(Rule::any(Action::Delay(Duration::from_secs(20))).with_acks());
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    assert!(results[&TopicPartition::new(fake.topic(), 0)].is_err(), "{results:?}");
    // The next poll makes the member fetch again, on a new session.
    assert!(c.poll(Duration::ZERO).await.unwrap().is_empty());
    let (slow, next) = after_first_acks(&fake).await;
    assert_eq!(next.epoch(), Some(0), "{}", next.summary());
    assert!(next.acks().is_empty());
    assert_ne!(next.conn, slow.conn);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn fenced_member_fails_held_acks_locally_and_rejoins() {
    // The new session (epoch 0) replaces the old one, whose records stay acquired, as on
    // Kafka: they come back when their locks lapse, so the lock is short.
    let fake = FakeCluster::start(FakeConfig::default().records(5).lock_timeout_ms(2000)).await;
    let c = fake.consumer(explicit(fake.consumer_config("g"))).await;
    let got = poll_all_at_once(&fake, &c, 5).await;
    fake.script(Rule::on(HEARTBEAT, Action::TopLevelError(110)));
    fake.wait_for("a rejoin heartbeat", T, |log| {
        log.iter().filter(|l| matches!(l.req, fake_broker::Req::Heartbeat { epoch: 0, .. })).count() >= 2
    })
    .await;
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    assert!(results[&TopicPartition::new(fake.topic(), 0)].is_err(), "{results:?}");
    assert!(fake.acks_sent().iter().all(|(_, _, a)| a.kind != 1), "stale acks sent:\n{}", fake.dump());
    // The next poll fetches on a new session (epoch 0) and gets the records again once their
    // locks lapsed: their second delivery.
    let again = poll_until(&c, 5, T).await;
    assert_eq!(again.len(), 5, "{}", fake.dump());
    assert!(again.iter().all(|r| r.delivery_count == 2), "{}", fake.dump());
    assert!(fake.count(|l| l.is_fetch() && l.epoch() == Some(0)) >= 2, "{}", fake.dump());
    for r in &again {
        c.acknowledge(r).unwrap();
    }
    c.close(T).await.unwrap();
    fake.assert_clean();
}
