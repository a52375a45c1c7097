//! Fault injection: malformed answers to the non-share APIs (heartbeat, FindCoordinator).
//! A response that does not decode poisons its connection; the consumer must redial and go on,
//! as it does for ShareFetch, not give up for good. And record batches with a bad CRC inside a
//! good ShareFetch answer.

mod fake_broker;

use std::time::Duration;

use fake_broker::{poll_until, poll_while_not, Action, FakeCluster, Rule, FIND_COORDINATOR, HEARTBEAT};
use kafka_share::ConsumerRecord;

/// Overall limit of a wait: generous (a loaded machine is slow); tests end on the condition.
const T: Duration = Duration::from_secs(30);

#[tokio::test]
async fn undecodable_heartbeat_responses_do_not_stop_consumption() {
    let fake = FakeCluster::single(1, 10).await;
    fake.script(Rule::on(HEARTBEAT, Action::ShortBody).times(2));
    let c = fake.consumer(fake.consumer_config("g").max_poll_records(5)).await;
    let mut got = poll_until(&c, 10, T).await;
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 10).await, "{}", fake.dump());
    assert_eq!(got.len(), 10);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn undecodable_find_coordinator_response_does_not_stop_consumption() {
    let fake = FakeCluster::single(1, 5).await;
    fake.script(Rule::on(FIND_COORDINATOR, Action::ShortBody));
    let c = fake.consumer(fake.consumer_config("g")).await;
    let mut got = poll_until(&c, 5, T).await;
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 5).await, "{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}

fn offsets(records: &[ConsumerRecord]) -> Vec<i64> {
    records.iter().map(|r| r.offset).collect()
}

#[tokio::test]
async fn without_check_crcs_a_batch_whose_only_fault_is_its_crc_is_delivered() {
    let fake = FakeCluster::single(1, 10).await;
    fake.set_corrupt(0, [3, 4]);
    let c = fake.consumer(fake.consumer_config("g").check_crcs(false)).await;
    let got = poll_until(&c, 10, T).await;
    assert_eq!(offsets(&got), (0..10).collect::<Vec<i64>>(), "{}", fake.dump());
    let mut more = Vec::new();
    assert!(poll_while_not(&c, T, &mut more, || fake.done(0).len() == 10).await, "{}", fake.dump());
    assert!(fake.acks_sent().iter().all(|(_, _, a)| a.kind == 1), "all accepted:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}
