//! Fault injection: malformed answers to the non-share APIs (heartbeat, FindCoordinator).
//! A response that does not decode poisons its connection; the consumer must redial and go on,
//! as it does for ShareFetch, not give up for good. And corrupt record batches inside a good
//! ShareFetch answer (a bad CRC, a decompression bomb): rejected, reported once, consumption
//! goes on.

use crate::fake_broker;

use std::time::{Duration, Instant};

use fake_broker::{poll_until, poll_while_not, Action, FakeCluster, Rule, FIND_COORDINATOR, HEARTBEAT};
use kafka_share::producer::Compression;
use kafka_share::{ConsumerRecord, Error, ShareConsumer};

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

/// The next poll answer that is not an empty list of records.
async fn next_answer(c: &ShareConsumer) -> kafka_share::Result<Vec<ConsumerRecord>> {
    let deadline = Instant::now() + T;
    while Instant::now() < deadline {
        match c.poll(Duration::from_millis(200)).await {
            Ok(records) if records.is_empty() => continue,
            answer => return answer,
        }
    }
    panic!("no records and no error within {T:?}");
}

fn offsets(records: &[ConsumerRecord]) -> Vec<i64> {
    records.iter().map(|r| r.offset).collect()
}

#[tokio::test]
async fn a_corrupt_batch_is_rejected_reported_once_and_consumption_goes_on() {
    let fake = FakeCluster::single(1, 10).await;
    // One answer holds three batches: 0..=2, then 3..=4 with a bad CRC, then 5..=9.
    fake.set_corrupt(0, [3, 4]);
    let c = fake.consumer(fake.consumer_config("g")).await;

    // As in Java: the records before the bad batch first, then the error, then the rest.
    let before = next_answer(&c).await.expect("the records before the bad batch");
    assert_eq!(offsets(&before), [0, 1, 2], "{}", fake.dump());
    match next_answer(&c).await {
        Err(Error::CorruptRecord { topic, partition, first_offset, last_offset, detail }) => {
            assert_eq!((topic.as_str(), partition, first_offset, last_offset), (&*fake.topic(), 0, 3, 4));
            assert!(detail.contains("CRC"), "{detail}");
        }
        other => panic!("expected the corrupt batch, got {other:?}"),
    }
    let after = next_answer(&c).await.expect("the consumer carries on");
    assert_eq!(offsets(&after), [5, 6, 7, 8, 9]);

    // Told once: polling on (which accepts what came) brings no second error.
    let mut more = Vec::new();
    assert!(poll_while_not(&c, T, &mut more, || fake.done(0).len() == 10).await, "{}", fake.dump());
    assert!(more.is_empty(), "nothing is delivered twice: {:?}", offsets(&more));
    let mut rejected: Vec<i64> =
        fake.acks_sent().iter().filter(|(_, _, a)| a.kind == 3).map(|(_, _, a)| a.offset).collect();
    rejected.sort_unstable();
    assert_eq!(rejected, [3, 4], "exactly the bad batch is rejected:\n{}", fake.dump());
    assert_eq!(fake.delivery(0, 3), 1, "the bad batch was not delivered again");
    c.close(T).await.unwrap();
    fake.assert_clean();
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

/// A zstd batch of a few hundred bytes that inflates to 17 MiB, past the consumer's limit
/// (`fetch.max.bytes`, here its floor of 16 MiB): refused before it is inflated whole, rejected
/// and reported as a corrupt batch, and the consumer carries on.
#[tokio::test]
async fn a_decompression_bomb_is_rejected_reported_once_and_consumption_goes_on() {
    let fake = FakeCluster::single(1, 0).await;
    fake.set_compression(0, Compression::Zstd);
    assert_eq!(fake.produce(0, "bomb", vec![0u8; 17 << 20]), 0);
    let mut cfg = fake.consumer_config("g");
    cfg.fetch_max_bytes = 1; // the limit is then the 16 MiB floor
    let c = fake.consumer(cfg).await;

    match next_answer(&c).await {
        Err(Error::CorruptRecord { partition: 0, first_offset: 0, last_offset: 0, detail, .. }) => {
            assert!(detail.contains("zstd") && detail.contains("16777216"), "{detail}");
            assert!(detail.contains("fetch.max.bytes"), "says what to do: {detail}");
        }
        other => panic!("expected the bomb as a corrupt batch, got {other:?}"),
    }
    assert_eq!(fake.produce(0, "k", "after the bomb"), 1);
    let after = next_answer(&c).await.expect("the consumer carries on");
    assert_eq!(offsets(&after), [1]);

    let mut more = Vec::new();
    assert!(poll_while_not(&c, T, &mut more, || fake.done(0).len() == 2).await, "{}", fake.dump());
    let rejected: Vec<i64> =
        fake.acks_sent().iter().filter(|(_, _, a)| a.kind == 3).map(|(_, _, a)| a.offset).collect();
    assert_eq!(rejected, [0], "the bomb is rejected:\n{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}
