//! The fake broker's own detectors, driven by hand over a raw connection: the fault tests
//! only mean something if the fake really catches the protocol mistakes they look for. Also
//! what users of `kafka_share::test_util` rely on: produced records arrive as produced, record
//! states follow the acknowledgements, misuse is a panic that names it.

use crate::fake_broker;

use std::time::Duration;

use fake_broker::{poll_until, FakeCluster, FakeConfig, RecordState};
use kafka_share::connection::{Connection, ConnectionConfig};
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::producer::ProducerRecord;
use kafka_share::protocol::share::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch, FetchPartition, FetchTopic, ShareAcknowledgeRequest,
    ShareFetchRequest,
};
use kafka_share::AcknowledgeType;

const TOPIC_ID: uuid::Uuid = uuid::Uuid::from_u128(0x5ca1_ab1e_0000_4000_8000_0000_0000_0001);

async fn connect(fake: &FakeCluster) -> Connection {
    Connection::connect_tcp(&fake.bootstrap(), ConnectionConfig::default(), Duration::from_secs(2))
        .await
        .unwrap()
}

fn fetch(epoch: i32, wait_ms: i32, acks: Vec<AcknowledgementBatch>) -> ShareFetchRequest {
    ShareFetchRequest {
        group_id: "g".into(),
        member_id: "m".into(),
        share_session_epoch: epoch,
        max_wait_ms: wait_ms,
        min_bytes: 1,
        max_records: 500,
        batch_size: 500,
        topics: vec![FetchTopic {
            topic_id: TOPIC_ID,
            partitions: vec![FetchPartition { partition_index: 0, acknowledgement_batches: acks }],
        }],
        ..Default::default()
    }
}

fn ack(epoch: i32, first: i64, last: i64, kind: i8) -> ShareAcknowledgeRequest {
    ShareAcknowledgeRequest {
        group_id: "g".into(),
        member_id: "m".into(),
        share_session_epoch: epoch,
        is_renew_ack: false,
        topics: vec![AcknowledgeTopic {
            topic_id: TOPIC_ID,
            partitions: vec![AcknowledgePartition {
                partition_index: 0,
                acknowledgement_batches: vec![AcknowledgementBatch {
                    first_offset: first,
                    last_offset: last,
                    acknowledge_types: vec![kind],
                }],
            }],
        }],
    }
}

fn batch(first: i64, last: i64, kind: i8) -> AcknowledgementBatch {
    AcknowledgementBatch { first_offset: first, last_offset: last, acknowledge_types: vec![kind] }
}

#[tokio::test]
async fn a_well_behaved_session_is_clean_and_delivers_records() {
    let fake = FakeCluster::single(1, 3).await;
    let conn = connect(&fake).await;
    let r = conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.acquired_records[0].first_offset, p.acquired_records[0].last_offset), (0, 2));
    let recs = kafka_share::protocol::records::decode_batches(p.records.clone().unwrap()).unwrap();
    assert_eq!(recs.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![0, 1, 2]);
    let r = conn.call(&fetch(1, 0, vec![batch(0, 2, 1)]), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);
    let mut close = ack(-1, 0, 0, 1);
    close.topics.clear();
    let r = conn.call(&close, 2).await.unwrap();
    assert_eq!(r.error_code, 0);
    assert_eq!(fake.done(0), vec![0, 1, 2]);
    fake.assert_clean();
}

#[tokio::test]
async fn two_requests_in_flight_on_one_session_are_caught() {
    let fake = FakeCluster::single(1, 0).await;
    let conn = connect(&fake).await;
    conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    // The first long-polls an empty log for 2 s: the second surely arrives while it waits.
    let (first, second) = (fetch(1, 2000, vec![]), fetch(2, 0, vec![]));
    let (a, b) = tokio::join!(conn.call(&first, 2), conn.call(&second, 2));
    a.unwrap();
    b.unwrap();
    let p = fake.problems();
    assert!(p.iter().any(|m| m.contains("two requests in flight")), "{p:?}");
}

#[tokio::test]
async fn epoch_skips_and_acks_on_epoch_0_are_caught() {
    let fake = FakeCluster::single(1, 3).await;
    let conn = connect(&fake).await;
    let r = conn.call(&fetch(0, 0, vec![batch(0, 0, 1)]), 2).await.unwrap();
    assert_eq!(r.error_code, 42, "acks on an epoch-0 fetch are INVALID_REQUEST");
    conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    let r = conn.call(&fetch(5, 0, vec![]), 2).await.unwrap();
    assert_eq!(r.error_code, 123);
    let r = conn.call(&ack(0, 0, 0, 1), 2).await.unwrap();
    assert_eq!(r.error_code, 123, "ShareAcknowledge at epoch 0");
    let p = fake.problems().join("\n");
    assert!(p.contains("epoch-0 request carrying acks") || p.contains("carrying acks"), "{p}");
    assert!(p.contains("epoch 5"), "{p}");
    assert!(p.contains("ShareAcknowledge at epoch 0"), "{p}");
}

#[tokio::test]
async fn acks_for_records_not_held_and_bad_batches_are_caught() {
    let fake = FakeCluster::start(FakeConfig::default().records(3)).await;
    let conn = connect(&fake).await;
    let mut open = fetch(0, 0, vec![]);
    open.max_records = 1;
    conn.call(&open, 2).await.unwrap(); // acquires offset 0 only
    let r = conn.call(&ack(1, 1, 2, 1), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].error_code, 121);
    let mut bad = ack(2, 0, 0, 1);
    bad.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types = vec![1, 1];
    let r = conn.call(&bad, 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].error_code, 42);
    let r = conn.call(&ack(3, 0, 0, 4), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].error_code, 42, "Renew without IsRenewAck");
    let p = fake.problems().join("\n");
    assert!(p.contains("does not hold"), "{p}");
    assert!(p.contains("invalid acknowledgement batches"), "{p}");
    assert!(p.contains("acknowledge type 4"), "{p}");
}

#[tokio::test]
async fn a_dropped_connection_releases_the_session_and_its_records() {
    let fake = FakeCluster::single(1, 3).await;
    let conn = connect(&fake).await;
    conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    assert_eq!(fake.held().len(), 3);
    conn.close(None);
    drop(conn);
    assert!(fake_broker::eventually(Duration::from_secs(2), || fake.held().is_empty()).await);
    let conn = connect(&fake).await;
    let r = conn.call(&fetch(1, 0, vec![]), 2).await.unwrap();
    assert_eq!(r.error_code, 122, "the session went with the connection");
    let r = conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].acquired_records[0].delivery_count, 2);
}

#[tokio::test]
async fn a_late_ack_after_the_lock_lapsed_is_refused_and_no_violation() {
    let fake = FakeCluster::start(FakeConfig::default().records(3).lock_timeout_ms(200)).await;
    let conn = connect(&fake).await;
    conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    assert_eq!(fake.held().len(), 3);
    assert!(fake_broker::eventually(Duration::from_secs(5), || fake.held().is_empty()).await, "the locks lapse");
    assert_eq!(fake.state(0, 0), RecordState::Available);
    let r = conn.call(&ack(1, 0, 2, 1), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].error_code, 121, "INVALID_RECORD_STATE");
    assert!(fake.problems().is_empty(), "a late ack is a race, not a client bug: {:?}", fake.problems());
    let r = conn.call(&fetch(2, 0, vec![]), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].acquired_records[0].delivery_count, 2);
}

#[tokio::test]
async fn a_wrong_epoch_is_refused_and_the_session_kept() {
    let fake = FakeCluster::single(1, 3).await;
    let conn = connect(&fake).await;
    conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    let r = conn.call(&fetch(5, 0, vec![]), 2).await.unwrap();
    assert_eq!(r.error_code, 123);
    assert_eq!(fake.held().len(), 3, "nothing released");
    let r = conn.call(&fetch(1, 0, vec![batch(0, 2, 1)]), 2).await.unwrap();
    assert_eq!((r.error_code, r.responses[0].partitions[0].acknowledge_error_code), (0, 0), "the session goes on");
    assert_eq!(fake.done(0), vec![0, 1, 2]);
}

#[tokio::test]
async fn epoch_0_replaces_the_session_and_the_member_keeps_its_records() {
    let fake = FakeCluster::single(1, 3).await;
    let conn = connect(&fake).await;
    conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    // A new session for the same member: its records stay acquired by the member (Kafka holds
    // by member id), so the new session acknowledges them.
    let r = conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    assert!(r.responses.iter().all(|t| t.partitions.iter().all(|p| p.acquired_records.is_empty())));
    assert_eq!(fake.held().len(), 3);
    let r = conn.call(&ack(1, 0, 2, 1), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    assert_eq!(fake.done(0), vec![0, 1, 2]);
    fake.assert_clean();
}

#[tokio::test]
async fn acks_for_wild_offset_ranges_are_caught_without_expanding_them() {
    let fake = FakeCluster::single(1, 3).await;
    let conn = connect(&fake).await;
    conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    // Past the log end, and as long as an i64 allows: answered at once, not expanded.
    let r = conn.call(&ack(1, 2, i64::MAX, 1), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].error_code, 121);
    let r = conn.call(&ack(2, i64::MIN, i64::MAX, 1), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].error_code, 121);
    let p = fake.problems().join("\n");
    assert!(p.contains("outside its log"), "{p}");
    // The log shows them (capped), and the fake still serves the session.
    assert!(!fake.acks_sent().is_empty());
    let r = conn.call(&fetch(3, 0, vec![batch(0, 2, 1)]), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);
    assert_eq!(fake.done(0), vec![0, 1, 2]);
}

#[tokio::test]
async fn dropping_the_cluster_closes_its_open_connections() {
    let fake = FakeCluster::single(1, 3).await;
    let conn = connect(&fake).await;
    conn.call(&fetch(0, 0, vec![]), 2).await.unwrap();
    drop(fake);
    let r = tokio::time::timeout(Duration::from_secs(10), conn.call(&fetch(1, 0, vec![]), 2)).await;
    assert!(matches!(r, Ok(Err(_))), "a request to a dropped cluster fails: {r:?}");
}

#[tokio::test]
#[should_panic(
    expected = "FakeCluster::start: this FakeConfig cannot make a cluster: the leader of partition 1, node 3"
)]
async fn a_config_that_is_no_cluster_is_refused_by_name() {
    FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1, 3])).await;
}

#[tokio::test]
#[should_panic(expected = "FakeCluster::done: partition 2 does not exist (the topic has partitions 0..2)")]
async fn a_partition_the_topic_lacks_is_named_in_the_panic() {
    FakeCluster::single(2, 1).await.done(2);
}

#[tokio::test]
async fn produced_records_reach_the_consumer_as_produced() {
    let fake = FakeCluster::start(FakeConfig::default().partitions(2).records(0).topic("orders")).await;
    assert_eq!(fake.topic(), "orders");
    assert_eq!(fake.produce(1, "k1", "v1"), 0);
    let record = ProducerRecord::new("orders", "v2").partition(1).header("h", "x").null_header("n").timestamp(1234);
    assert_eq!(fake.produce_record(record), 1);
    assert_eq!(fake.produce_record(ProducerRecord::tombstone("orders", "gone")), 0, "partition 0 by default");
    assert_eq!(fake.produce_generated(1, 2), 2..4);
    let c = fake.consumer(fake.consumer_config("g")).await;
    let mut got = poll_until(&c, 5, Duration::from_secs(30)).await;
    got.sort_by_key(|r| (r.partition, r.offset));
    let seen: Vec<_> = got.iter().map(|r| (r.partition, r.offset, r.key_str(), r.value_str())).collect();
    assert_eq!(
        seen,
        vec![
            (0, 0, Some("gone"), None),
            (1, 0, Some("k1"), Some("v1")),
            (1, 1, None, Some("v2")),
            (1, 2, Some("k2"), Some("p1-2")),
            (1, 3, Some("k3"), Some("p1-3")),
        ]
    );
    let h: Vec<_> = got[2].headers.iter().map(|h| (h.key_str().unwrap(), h.value.clone())).collect();
    assert_eq!(h, vec![("h", Some("x".into())), ("n", None)]);
    assert_eq!(got[2].timestamp, 1234);
    c.close(Duration::from_secs(30)).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
#[should_panic(expected = "FakeCluster::produce_record: the record is for topic \"other\"")]
async fn producing_to_another_topic_is_refused_by_name() {
    FakeCluster::single(1, 0).await.produce_record(ProducerRecord::new("other", "v"));
}

#[tokio::test]
async fn record_states_follow_deliveries_and_acknowledgements() {
    let fake = FakeCluster::single(1, 4).await;
    assert_eq!(fake.states(0), vec![RecordState::Available; 4]);
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit).max_poll_records(4);
    let c = fake.consumer(cfg).await;
    let got = poll_until(&c, 4, Duration::from_secs(30)).await;
    assert_eq!(fake.states(0), vec![RecordState::Acquired; 4]);
    for (r, t) in got.iter().zip([AcknowledgeType::Accept, AcknowledgeType::Reject, AcknowledgeType::Release]) {
        c.acknowledge_with(r, t).unwrap();
    }
    c.acknowledge(&got[3]).unwrap();
    let results = c.commit_sync(Duration::from_secs(30)).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    // Offset 2 was released: available again, or already delivered anew by a prefetch.
    assert!(matches!(fake.state(0, 2), RecordState::Available | RecordState::Acquired));
    assert_eq!(fake.accepted(0), vec![0, 3]);
    assert_eq!(fake.rejected(0), vec![1]);
    assert_eq!(fake.done(0), vec![0, 1, 3]);
    let sent: Vec<_> = fake.acks_sent().iter().map(|(_, _, a)| (a.offset, a.ack_type())).collect();
    assert!(sent.contains(&(1, Some(AcknowledgeType::Reject))), "{sent:?}");
    assert!(sent.contains(&(2, Some(AcknowledgeType::Release))), "{sent:?}");
    c.close(Duration::from_secs(30)).await.unwrap();
    fake.assert_clean();
}
