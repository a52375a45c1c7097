//! A share session through the wire layer alone (no consumer): join with
//! ShareGroupHeartbeat, open a session with ShareFetch, acknowledge with ShareAcknowledge,
//! close at epoch -1. v2 on Kafka 4.2+, v1 on 4.1.

use crate::common;

use std::time::Duration;

use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_share::cluster::TrafficClass;
use kafka_share::protocol::records::{decode_acquired, AcquiredRange};
use kafka_share::protocol::share::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch, FetchPartition, FetchTopic, ShareAcknowledgeRequest,
    ShareFetchRequest, ACK_ACCEPT,
};

#[tokio::test]
async fn share_session_fetch_and_acknowledge_over_the_wire() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "wire-share", 1).await;
    common::produce(&bs, &topic, 1, 10, "w").await;
    let group = common::new_group(&admin, "g-wire", None).await;
    let cluster = admin.cluster().clone();
    let md = cluster.metadata();
    let t = md.topics.get(&topic).unwrap();
    let (topic_id, leader) = (t.id, t.partitions[0].leader);

    // Join: epoch 0 with a client-generated member id, until the broker assigns the partition.
    let member_id = kafka_share::share::membership::new_member_id();
    let coordinator = cluster.find_group_coordinator(&group).await.unwrap();
    let coord = cluster.broker(coordinator, TrafficClass::Control).await.unwrap();
    let mut epoch = 0;
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let hb = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.clone())))
            .with_member_id(StrBytes::from_string(member_id.clone()))
            .with_member_epoch(epoch)
            .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_string(topic.clone()))]));
        let r = cluster.send(&coord, &hb, (1, 1)).await.unwrap();
        if matches!(r.error_code, 14 | 15) {
            // COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE on a freshly started broker.
            assert!(tokio::time::Instant::now() < end, "coordinator never ready");
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        epoch = r.member_epoch;
        if r.assignment.is_some_and(|a| a.topic_partitions.iter().any(|tp| tp.topic_id == topic_id)) {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "no assignment");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let conn = cluster.broker(leader, TrafficClass::Fetch).await.unwrap();
    let fetch_v = conn.versions.pick(78, 1, 2).unwrap();
    let ack_v = conn.versions.pick(79, 1, 2).unwrap();
    let want_v = if common::broker_has_v2() { 2 } else { 1 };
    assert_eq!((fetch_v, ack_v), (want_v, want_v));

    // Open the session (epoch 0) and fetch until the records are acquired.
    let mut session_epoch = 0;
    let mut acquired = Vec::new();
    let mut records = Vec::new();
    while acquired.is_empty() {
        let req = ShareFetchRequest {
            group_id: group.clone(),
            member_id: member_id.clone(),
            share_session_epoch: session_epoch,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 1 << 20,
            max_records: 500,
            batch_size: 500,
            topics: if session_epoch == 0 {
                vec![FetchTopic {
                    topic_id,
                    partitions: vec![FetchPartition { partition_index: 0, acknowledgement_batches: vec![] }],
                }]
            } else {
                vec![]
            },
            ..Default::default()
        };
        let resp = conn.conn.call(&req, fetch_v).await.unwrap();
        assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
        session_epoch += 1;
        for tr in resp.responses {
            for p in tr.partitions {
                assert_eq!(p.error_code, 0, "{:?}", p.error_message);
                let ranges: Vec<AcquiredRange> = p.acquired_records.iter().map(|&a| AcquiredRange::from(a)).collect();
                if !ranges.is_empty() {
                    let set = decode_acquired(p.records.unwrap_or_default(), &ranges).unwrap();
                    records.extend(set.records);
                    acquired.extend(ranges);
                }
            }
        }
        assert!(tokio::time::Instant::now() < end, "nothing acquired");
    }
    assert_eq!(records.len(), 10);
    assert!(records.iter().all(|r| r.delivery_count == 1));
    assert_eq!(records[3].value.as_deref(), Some(&b"w-3"[..]));

    // Acknowledge everything with ShareAcknowledge at the next epoch.
    let ack = ShareAcknowledgeRequest {
        group_id: group.clone(),
        member_id: member_id.clone(),
        share_session_epoch: session_epoch,
        is_renew_ack: false,
        topics: vec![AcknowledgeTopic {
            topic_id,
            partitions: vec![AcknowledgePartition {
                partition_index: 0,
                acknowledgement_batches: vec![AcknowledgementBatch {
                    first_offset: records[0].offset,
                    last_offset: records[9].offset,
                    acknowledge_types: vec![ACK_ACCEPT],
                }],
            }],
        }],
    };
    let resp = conn.conn.call(&ack, ack_v).await.unwrap();
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    assert!(resp.responses.iter().flat_map(|t| &t.partitions).all(|p| p.error_code == 0));
    if ack_v >= 2 {
        assert!(resp.acquisition_lock_timeout_ms.unwrap_or(0) > 0);
    }
    session_epoch += 1;

    // A wrong epoch is refused by the broker (the session invariant we rely on).
    let bad = ShareAcknowledgeRequest { share_session_epoch: session_epoch + 5, topics: vec![], ..ack.clone() };
    let resp = conn.conn.call(&bad, ack_v).await.unwrap();
    assert_eq!(resp.error_code, 123, "INVALID_SHARE_SESSION_EPOCH");

    // Close the session at epoch -1 and leave the group.
    let close = ShareAcknowledgeRequest { share_session_epoch: -1, topics: vec![], ..ack };
    let resp = conn.conn.call(&close, ack_v).await.unwrap();
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let leave = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.clone())))
        .with_member_id(StrBytes::from_string(member_id.clone()))
        .with_member_epoch(-1);
    let r = cluster.send(&coord, &leave, (1, 1)).await.unwrap();
    assert_eq!(r.error_code, 0);

    // All ten were accepted: another member of the group gets none of them.
    let c = kafka_share::ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let again = common::poll_until(&c, 1, Duration::from_secs(3), |_| {}).await;
    assert!(again.is_empty(), "accepted records came back: {:?}", again.iter().map(|r| r.offset).collect::<Vec<_>>());
    c.close(Duration::from_secs(10)).await.unwrap();
}
