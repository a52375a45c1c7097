//! Valid encodings to mutate: realistic responses built with this crate's encoders (share
//! RPCs, record batches) and the `kafka-protocol` crate's message structs (everything else).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    api_versions_response::{ApiVersion, FinalizedFeatureKey},
    find_coordinator_response::Coordinator,
    metadata_response::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic},
    share_group_heartbeat_response::{Assignment, TopicPartitions},
    ApiVersionsResponse, BrokerId, FindCoordinatorResponse, MetadataResponse, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_share::protocol::records::{BatchBuilder, Compression, Header, RecordInput};
use kafka_share::protocol::share::{
    AcknowledgePartitionResponse, AcknowledgeTopicResponse, AcknowledgementBatch, AcquiredRecords, FetchPartition,
    FetchPartitionResponse, FetchTopic, FetchTopicResponse, ForgottenTopic, LeaderIdAndEpoch, NodeEndpoint,
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use uuid::Uuid;

/// One valid encoding and the version it is valid at.
pub type Entry = (i16, Vec<u8>);

fn records(n: usize, from: usize) -> Vec<RecordInput> {
    (from..from + n)
        .map(|i| RecordInput {
            key: (i % 3 != 0).then(|| Bytes::from(format!("key-{i}"))),
            value: (i % 5 != 0).then(|| Bytes::from(format!("value {i} ").repeat(i % 7 + 1))),
            headers: (0..i % 3).map(|h| Header::new(format!("h{h}"), (h != 1).then(|| Bytes::from("hv")))).collect(),
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect()
}

/// One batch of `n` records at `base`, compressed with `c`.
pub fn batch(c: Compression, base: i64, n: usize) -> Bytes {
    let mut b = BatchBuilder::new();
    for r in records(n, base as usize) {
        b.push(&r).expect("record");
    }
    let mut batch = BytesMut::from(&b.finish(c).expect("batch")[..]);
    // The base offset is outside the CRC: moving it keeps the batch valid.
    batch[..8].copy_from_slice(&base.to_be_bytes());
    batch.freeze()
}

/// Record sets as a ShareFetch partition carries them: one batch, several, every codec.
pub fn record_sets() -> Vec<Bytes> {
    let mut out = Vec::new();
    for c in Compression::ALL {
        out.push(batch(c, 0, 1));
        out.push(batch(c, 0, 6));
        let mut two = BytesMut::from(&batch(c, 0, 3)[..]);
        two.put_slice(&batch(Compression::None, 3, 2));
        two.put_slice(&batch(c, 5, 4));
        out.push(two.freeze());
    }
    out
}

fn share_fetch_responses() -> Vec<ShareFetchResponse> {
    let sets = record_sets();
    let partition = |i: usize, records: Option<Bytes>| FetchPartitionResponse {
        partition_index: i as i32,
        error_code: if i % 4 == 3 { 6 } else { 0 },
        error_message: (i % 4 == 3).then(|| "not leader".to_string()),
        acknowledge_error_code: 0,
        acknowledge_error_message: None,
        current_leader: LeaderIdAndEpoch { leader_id: 1, leader_epoch: 3 },
        records,
        acquired_records: vec![
            AcquiredRecords { first_offset: 0, last_offset: 2, delivery_count: 1 },
            AcquiredRecords { first_offset: 4, last_offset: 8, delivery_count: 2 },
        ],
    };
    let mut out: Vec<ShareFetchResponse> = sets
        .chunks(3)
        .map(|sets| ShareFetchResponse {
            acquisition_lock_timeout_ms: 30_000,
            responses: vec![FetchTopicResponse {
                topic_id: Uuid::from_u128(0x1234),
                partitions: sets.iter().enumerate().map(|(i, s)| partition(i, Some(s.clone()))).collect(),
            }],
            ..Default::default()
        })
        .collect();
    out.push(ShareFetchResponse {
        error_code: 0,
        responses: vec![FetchTopicResponse { topic_id: Uuid::from_u128(7), partitions: vec![partition(3, None)] }],
        node_endpoints: vec![NodeEndpoint { node_id: 2, host: "broker-2".into(), port: 9092, rack: Some("r1".into()) }],
        ..Default::default()
    });
    out.push(ShareFetchResponse { error_code: 72, error_message: Some("session".into()), ..Default::default() });
    out
}

fn share_acknowledge_response(v: i16) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse {
        acquisition_lock_timeout_ms: (v >= 2).then_some(30_000),
        responses: vec![AcknowledgeTopicResponse {
            topic_id: Uuid::from_u128(9),
            partitions: (0..3)
                .map(|i| AcknowledgePartitionResponse {
                    partition_index: i,
                    error_code: if i == 1 { 6 } else { 0 },
                    error_message: (i == 1).then(|| "moved".to_string()),
                    current_leader: LeaderIdAndEpoch { leader_id: 2, leader_epoch: 5 },
                })
                .collect(),
        }],
        node_endpoints: vec![NodeEndpoint { node_id: 2, host: "b2".into(), port: 9093, rack: None }],
        ..Default::default()
    }
}

fn acks() -> Vec<AcknowledgementBatch> {
    vec![
        AcknowledgementBatch { first_offset: 0, last_offset: 3, acknowledge_types: vec![1] },
        AcknowledgementBatch { first_offset: 5, last_offset: 7, acknowledge_types: vec![1, 2, 3] },
    ]
}

pub fn share_fetch() -> Vec<Entry> {
    let mut out = Vec::new();
    for v in 1..=2 {
        for r in share_fetch_responses() {
            let mut b = BytesMut::new();
            r.encode(v, &mut b).expect("ShareFetch response");
            out.push((v, b.to_vec()));
        }
    }
    out
}

pub fn share_acknowledge() -> Vec<Entry> {
    (1..=2)
        .map(|v| {
            let mut b = BytesMut::new();
            share_acknowledge_response(v).encode(v, &mut b).expect("ShareAcknowledge response");
            (v, b.to_vec())
        })
        .collect()
}

pub fn share_fetch_request() -> Vec<Entry> {
    let r = ShareFetchRequest {
        group_id: "g".into(),
        member_id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
        share_session_epoch: 3,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 52_428_800,
        max_records: 500,
        batch_size: 500,
        topics: vec![FetchTopic {
            topic_id: Uuid::from_u128(5),
            partitions: vec![FetchPartition { partition_index: 0, acknowledgement_batches: acks() }],
        }],
        forgotten_topics_data: vec![ForgottenTopic { topic_id: Uuid::from_u128(6), partitions: vec![1, 2] }],
        ..Default::default()
    };
    (1..=2)
        .map(|v| {
            let mut b = BytesMut::new();
            r.encode(v, &mut b).expect("ShareFetch request");
            (v, b.to_vec())
        })
        .collect()
}

pub fn share_acknowledge_request() -> Vec<Entry> {
    let r = ShareAcknowledgeRequest {
        group_id: "g".into(),
        member_id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
        share_session_epoch: 4,
        is_renew_ack: false,
        topics: vec![kafka_share::protocol::share::AcknowledgeTopic {
            topic_id: Uuid::from_u128(5),
            partitions: vec![kafka_share::protocol::share::AcknowledgePartition {
                partition_index: 0,
                acknowledgement_batches: acks(),
            }],
        }],
    };
    (1..=2)
        .map(|v| {
            let mut b = BytesMut::new();
            r.encode(v, &mut b).expect("ShareAcknowledge request");
            (v, b.to_vec())
        })
        .collect()
}

/// `msg` encoded at every version in `versions` the crate can encode it at, plus a copy
/// with an unknown tagged field at the flexible ones.
pub fn crate_message<M: Encodable + Clone>(msgs: &[M], versions: std::ops::RangeInclusive<i16>) -> Vec<Entry> {
    let mut out = Vec::new();
    for v in versions {
        for m in msgs {
            let mut b = BytesMut::new();
            if m.encode(&mut b, v).is_ok() {
                out.push((v, b.to_vec()));
            }
        }
    }
    out
}

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

pub fn metadata() -> Vec<MetadataResponse> {
    let partition = |i| {
        MetadataResponsePartition::default()
            .with_partition_index(i)
            .with_leader_id(BrokerId(1))
            .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
            .with_isr_nodes(vec![BrokerId(1)])
    };
    vec![
        MetadataResponse::default(),
        MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default().with_node_id(BrokerId(1)).with_host(s("b1")).with_port(9092),
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(2))
                    .with_host(s("b2"))
                    .with_rack(Some(s("r"))),
            ])
            .with_cluster_id(Some(s("cluster")))
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(s("orders"))))
                .with_topic_id(Uuid::from_u128(5))
                .with_partitions(vec![partition(0), partition(1)])])
            .with_unknown_tagged_field(7, Bytes::from_static(b"tag")),
    ]
}

pub fn heartbeat() -> Vec<ShareGroupHeartbeatResponse> {
    vec![
        ShareGroupHeartbeatResponse::default(),
        ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(s("AAAAAAAAAAAAAAAAAAAAAA")))
            .with_member_epoch(3)
            .with_heartbeat_interval_ms(5000)
            .with_assignment(Some(Assignment::default().with_topic_partitions(vec![
                TopicPartitions::default().with_topic_id(Uuid::from_u128(5)).with_partitions(vec![0, 1, 2]),
            ]))),
    ]
}

pub fn api_versions() -> Vec<ApiVersionsResponse> {
    vec![ApiVersionsResponse::default()
        .with_api_keys(
            [18, 3, 10, 76, 78, 79]
                .into_iter()
                .map(|k| ApiVersion::default().with_api_key(k).with_min_version(0).with_max_version(2))
                .collect(),
        )
        .with_finalized_features(vec![FinalizedFeatureKey::default()
            .with_name(s("share.version"))
            .with_max_version_level(1)
            .with_min_version_level(1)])]
}

pub fn find_coordinator() -> Vec<FindCoordinatorResponse> {
    vec![
        FindCoordinatorResponse::default().with_host(s("b1")).with_port(9092),
        FindCoordinatorResponse::default().with_coordinators(vec![Coordinator::default()
            .with_key(s("g"))
            .with_node_id(BrokerId(1))
            .with_host(s("b1"))
            .with_port(9092)]),
    ]
}

/// A DescribeShareGroupOffsets response body at `v` (0 or 1): one group, topic and partition.
pub fn describe_offsets(v: i16) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i32(0);
    b.put_slice(&[2, 2, b'g', 2, 2, b't']);
    b.put_slice(&[7u8; 16]);
    b.put_u8(2);
    b.put_i32(3);
    b.put_i64(42);
    b.put_i32(5);
    if v >= 1 {
        b.put_i64(8);
    }
    b.put_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.to_vec()
}
