//! Fault injection: where acknowledgements go, and what happens when they fail.

use crate::fake_broker;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fake_broker::{
    code, eventually, offsets, poll_all_at_once, poll_through_fetches, poll_until, poll_while_not, record_value,
    Action, FakeCluster, FakeConfig, Rule,
};
use kafka_share::consumer::{AcknowledgementMode, TopicPartition};
use kafka_share::ErrorCode;

/// Overall limit of a wait: generous (a loaded machine is slow); tests end on the condition.
const T: Duration = Duration::from_secs(30);

/// How many times each (partition, offset) was acknowledged on the wire.
fn ack_counts(fake: &FakeCluster) -> BTreeMap<(i32, i64), usize> {
    let mut m = BTreeMap::new();
    for (_, _, a) in fake.acks_sent() {
        *m.entry((a.partition, a.offset)).or_insert(0) += 1;
    }
    m
}

#[tokio::test]
async fn acks_ride_on_the_next_share_fetch_to_the_broker_that_delivered_them() {
    let fake = FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1, 2]).records(10)).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    let mut got = poll_until(&c, 20, T).await;
    assert_eq!(got.len(), 20);
    let all_done = || fake.done(0).len() == 10 && fake.done(1).len() == 10;
    assert!(poll_while_not(&c, T, &mut got, all_done).await, "{}", fake.dump());
    assert_eq!(got.len(), 20, "nothing redelivered");
    for (node, on_fetch, a) in fake.acks_sent() {
        assert_eq!(node, if a.partition == 0 { 1 } else { 2 }, "ack {a:?} went to node {node}");
        assert!(on_fetch, "ack {a:?} should ride on a ShareFetch:\n{}", fake.dump());
        assert_eq!(a.kind, 1, "implicit mode accepts");
    }
    assert!(ack_counts(&fake).values().all(|&n| n == 1), "{}", fake.dump());
    assert_eq!(ack_counts(&fake).len(), 20);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn commit_pressure_never_puts_two_requests_in_flight_on_one_session() {
    let fake = FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1, 2, 1, 2]).records(25)).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit).max_poll_records(7);
    let c = fake.consumer(cfg).await;
    let mut seen = BTreeSet::new();
    let deadline = std::time::Instant::now() + T;
    while seen.len() < 100 && std::time::Instant::now() < deadline {
        for r in c.poll(Duration::from_millis(50)).await.unwrap() {
            assert!(seen.insert((r.partition, r.offset)), "redelivered {}-{}", r.partition, r.offset);
            c.acknowledge(&r).unwrap();
            // Fire-and-forget commits while fetches are in flight.
            c.commit_async().unwrap();
        }
    }
    assert_eq!(seen.len(), 100, "{}", fake.dump());
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    assert!(eventually(T, || (0..4).all(|p| fake.done(p).len() == 25)).await, "{}", fake.dump());
    assert!(ack_counts(&fake).values().all(|&n| n == 1));
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn unknown_topic_or_partition_on_acks_is_reported_not_retried() {
    let fake = FakeCluster::single(2, 5).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let got = poll_all_at_once(&fake, &c, 10).await;
    fake.script(Rule::any(Action::AckError { partition: 0, code: code::UNKNOWN_TOPIC_OR_PARTITION }).acks_for(0));
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    let topic = fake.topic();
    let p0 = results.get(&TopicPartition::new(&topic, 0)).expect("a result for partition 0");
    let err = p0.as_ref().expect_err("partition 0 failed");
    assert_eq!(err.code(), Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION), "{err}");
    assert!(results[&TopicPartition::new(&topic, 1)].is_ok(), "{results:?}");
    // Let the consumer fetch a few more times: the failed acks must not come back on any of
    // them (counted in requests, not in time, so a slow machine checks as much).
    let more = poll_through_fetches(&fake, &c, 3).await;
    assert!(more.is_empty());
    assert!(ack_counts(&fake).values().all(|&n| n == 1), "acks resent:\n{}", fake.dump());
    assert_eq!(fake.done(1), vec![0, 1, 2, 3, 4]);
    assert!(fake.done(0).is_empty());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn partly_failed_ack_round_reports_only_the_failed_partition_and_resends_nothing() {
    let fake = FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1, 2]).records(5)).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let (cb, seen) = fake_broker::ack_recorder();
    c.set_acknowledgement_commit_callback(move |t, o, r| cb(t, o, r)).unwrap();
    let got = poll_all_at_once(&fake, &c, 10).await;
    fake.script(Rule::any(Action::AckError { partition: 1, code: code::INVALID_RECORD_STATE }).node(2).acks_for(1));
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    let topic = fake.topic();
    assert!(results[&TopicPartition::new(&topic, 0)].is_ok(), "{results:?}");
    let e = results[&TopicPartition::new(&topic, 1)].as_ref().expect_err("partition 1 failed");
    assert_eq!(e.code(), Some(ErrorCode::INVALID_RECORD_STATE));
    poll_through_fetches(&fake, &c, 3).await;
    assert!(ack_counts(&fake).values().all(|&n| n == 1), "acks resent:\n{}", fake.dump());
    assert_eq!(ack_counts(&fake).len(), 10);
    let seen = seen.lock().unwrap().clone();
    let failed: Vec<_> = seen.iter().filter(|o| o.result.is_err()).collect();
    assert_eq!(failed.len(), 1, "{seen:?}");
    assert_eq!(failed[0].tp.partition, 1);
    assert_eq!(failed[0].offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(fake.done(0), vec![0, 1, 2, 3, 4]);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn revoked_partition_is_forgotten_and_its_acks_go_by_share_acknowledge() {
    let fake = FakeCluster::single(2, 5).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let got = poll_all_at_once(&fake, &c, 10).await;
    let heartbeat_epoch = |log: &[fake_broker::Logged]| {
        log.iter()
            .filter_map(|l| match l.req {
                fake_broker::Req::Heartbeat { epoch, .. } => Some(epoch),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    };
    let before = heartbeat_epoch(&fake.log());
    fake.set_assignment(vec![0]);
    // The member learns the new assignment (its next heartbeat carries the new epoch).
    fake.wait_for("a heartbeat at the new member epoch", T, |log| heartbeat_epoch(log) > before).await;
    let revoked_at = fake.log().last().map(|l| l.seq).unwrap_or(0);
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap_or_else(|e| panic!("{e}\n{}", fake.dump()));
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    assert_eq!(fake.done(1), vec![0, 1, 2, 3, 4], "{}", fake.dump());
    assert_eq!(fake.done(0), vec![0, 1, 2, 3, 4]);
    // The broker hears of the revoked partition with the next fetch, which a poll asks for
    // (a member whose application is not polling sends no fetch: it would acquire records).
    let mut more = Vec::new();
    poll_while_not(&c, T, &mut more, || fake.log().iter().any(|l| l.forgotten() == vec![1])).await;
    assert!(more.is_empty(), "nothing more was produced");
    let log = fake.log();
    assert!(log.iter().any(|l| l.forgotten() == vec![1]), "partition 1 in ForgottenTopicsData:\n{}", fake.dump());
    let forgot_at = revoked_at;
    for l in log.iter().filter(|l| l.seq > forgot_at) {
        assert!(
            !(l.is_fetch() && l.listed().contains(&1)),
            "partition 1 added back to the fetch session: {}",
            l.summary()
        );
        if l.acks().iter().any(|a| a.partition == 1) {
            assert!(l.is_ack(), "acks of a revoked partition must go by ShareAcknowledge: {}", l.summary());
        }
    }
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn acquired_offsets_without_records_are_acknowledged_as_gaps() {
    let fake = FakeCluster::single(1, 10).await;
    fake.set_gaps(0, [3, 4, 7]);
    let c = fake.consumer(fake.consumer_config("g")).await;
    let mut got = poll_until(&c, 7, T).await;
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 10).await, "{}", fake.dump());
    assert_eq!(offsets(&got), vec![(0, 0), (0, 1), (0, 2), (0, 5), (0, 6), (0, 8), (0, 9)]);
    for (_, _, a) in fake.acks_sent() {
        let want = if [3, 4, 7].contains(&a.offset) { 0 } else { 1 };
        assert_eq!(a.kind, want, "offset {} acked as {}", a.offset, a.kind);
    }
    assert!(ack_counts(&fake).values().all(|&n| n == 1));
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn empty_record_batches_over_gaps_do_not_panic() {
    let fake = FakeCluster::single(1, 10).await;
    fake.set_gaps(0, [0, 1, 5, 6, 9]);
    fake.set_empty_batches(0);
    let c = fake.consumer(fake.consumer_config("g")).await;
    let mut got = poll_until(&c, 5, T).await;
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 10).await, "{}", fake.dump());
    assert_eq!(offsets(&got), vec![(0, 2), (0, 3), (0, 4), (0, 7), (0, 8)]);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn acquired_ranges_with_no_records_at_all_are_all_gaps() {
    let fake = FakeCluster::single(1, 6).await;
    fake.set_gaps(0, 0..6);
    let c = fake.consumer(fake.consumer_config("g")).await;
    let mut got = Vec::new();
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 6).await, "{}", fake.dump());
    assert!(got.is_empty());
    assert!(fake.acks_sent().iter().all(|(_, _, a)| a.kind == 0));
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn records_outside_the_acquired_ranges_are_never_delivered() {
    let fake = FakeCluster::single(1, 12).await;
    fake.set_pad(0);
    let cfg = fake.consumer_config("g").max_poll_records(3);
    let c = fake.consumer(cfg).await;
    let mut got = poll_until(&c, 12, T).await;
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 12).await, "{}", fake.dump());
    let offs: Vec<i64> = got.iter().map(|r| r.offset).collect();
    assert_eq!(offs, (0..12).collect::<Vec<_>>(), "each acquired record once, no neighbours");
    for r in &got {
        assert_eq!(r.value_str(), Some(record_value(0, r.offset).as_str()));
        assert_eq!(r.delivery_count, 1);
    }
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn a_dropped_poll_future_does_not_lose_the_acks_it_took() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    let got = poll_until(&c, 5, T).await;
    assert_eq!(got.len(), 5);
    {
        // This poll takes the implicit acks of the last one, then is dropped mid-wait.
        let fut = c.poll(Duration::from_secs(5));
        let _ = tokio::time::timeout(Duration::from_millis(20), fut).await;
    }
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    assert!(eventually(T, || fake.done(0).len() == 5).await, "acks lost:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn lock_deadline_counts_from_when_the_fetch_was_sent() {
    let fake = FakeCluster::start(FakeConfig::default().records(3).lock_timeout_ms(3000)).await;
    // The broker starts the lock clock when it acquires; the answer arrives 600 ms later.
    fake.script(Rule::on(fake_broker::SHARE_FETCH, Action::Delay(Duration::from_millis(600))).always());
    let c = fake.consumer(fake.consumer_config("g")).await;
    let got = poll_until(&c, 3, T).await;
    assert_eq!(got.len(), 3);
    // The fetch that acquired them: the last one that arrived before the fake acquired (one
    // request in flight per session). Not simply the first fetch: an earlier one may have
    // found nothing (the consumer helper holds records back during its first poll).
    let acquired_at = fake.acquired_at(0, 0).expect("offset 0 was acquired");
    let fetch = fake
        .share_log()
        .into_iter()
        .rfind(|l| l.is_fetch() && l.at <= acquired_at)
        .expect("a fetch before the acquisition");
    for r in &got {
        let d = r.lock_deadline().expect("a lock deadline");
        assert!(
            d <= fetch.at + Duration::from_millis(3000),
            "deadline {:?} after the broker's lock expiry",
            d - fetch.at
        );
    }
    assert_eq!(c.acquisition_lock_timeout(), Some(Duration::from_millis(3000)));
    c.close(T).await.unwrap();
    fake.assert_clean();
}

/// COORDINATOR_LOAD_IN_PROGRESS for one partition's acks (the share coordinator is loading):
/// those acks, and only those, go again to the same broker, and the commit succeeds.
#[tokio::test]
async fn transiently_failed_acks_are_retried_alone_until_they_succeed() {
    let fake = FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1, 2]).records(5)).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let got = poll_all_at_once(&fake, &c, 10).await;
    const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    fake.script(
        Rule::any(Action::AckError { partition: 1, code: COORDINATOR_LOAD_IN_PROGRESS })
            .node(2)
            .acks_for(1)
            .times(2),
    );
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}\n{}", fake.dump());
    let counts = ack_counts(&fake);
    assert!((0..5).all(|o| counts[&(0, o)] == 1), "partition 0 sent once: {counts:?}");
    assert!((0..5).all(|o| counts[&(1, o)] == 3), "partition 1 sent three times (two refusals): {counts:?}");
    assert_eq!(fake.done(1), vec![0, 1, 2, 3, 4]);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

/// REQUEST_TIMED_OUT (the state write may have happened), then INVALID_RECORD_STATE on the
/// retry: the first attempt most likely took effect, so the outcome is reported as unknown,
/// not as a failure.
#[tokio::test]
async fn a_retry_after_an_unknown_outcome_that_meets_invalid_record_state_reports_unknown() {
    let fake = FakeCluster::single(1, 3).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let got = poll_all_at_once(&fake, &c, 3).await;
    const REQUEST_TIMED_OUT: i16 = 7;
    fake.script(Rule::any(Action::AckError { partition: 0, code: REQUEST_TIMED_OUT }).acks_for(0));
    fake.script(Rule::any(Action::AckError { partition: 0, code: code::INVALID_RECORD_STATE }).acks_for(0).after(1));
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    let e = results[&TopicPartition::new(fake.topic(), 0)].as_ref().expect_err("not a success");
    assert!(e.is_outcome_unknown(), "{e}");
    assert!(format!("{e:?}").contains("InvalidRecordState"), "{e:?}");
    assert!((0..3).all(|o| ack_counts(&fake)[&(0, o)] == 2), "sent twice: {:?}", ack_counts(&fake));
    c.close(T).await.unwrap();
    fake.assert_clean();
}

/// `commit_sync(None)` waits `default.api.timeout.ms`, as Java's `commitSync()` does.
#[tokio::test]
async fn commit_sync_without_a_timeout_waits_default_api_timeout() {
    let fake = FakeCluster::single(1, 2).await;
    let cfg = fake
        .consumer_config("g")
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .default_api_timeout(Duration::from_millis(700));
    let c = fake.consumer(cfg).await;
    let got = poll_all_at_once(&fake, &c, 2).await;
    fake.script(Rule::any(Action::Delay(Duration::from_secs(3600))).with_acks());
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    match c.commit_sync(None).await {
        Err(kafka_share::Error::Timeout { what, after }) => {
            assert_eq!(after, Duration::from_millis(700));
            assert_eq!(what, "commit_sync");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    let _ = c.close(Duration::from_millis(500)).await;
}
