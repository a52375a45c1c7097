//! ShareFetch codec tests: v1 against the `kafka-protocol` crate byte for byte, v2 against
//! hand-written bytes, round trips, truncation and version gating.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::share_fetch_request as kreq;
use kafka_protocol::messages::share_fetch_response as kresp;
use kafka_protocol::messages::{BrokerId, GroupId};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

use super::*;
use crate::protocol::share::test_util::hex;

const T1: Uuid = Uuid::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff);
const T2: Uuid = Uuid::from_u128(0xffee_ddcc_bbaa_9988_7766_5544_3322_1100);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn encode_req(r: &ShareFetchRequest, version: i16) -> Result<Bytes, CodecError> {
    let mut buf = BytesMut::new();
    r.encode(version, &mut buf)?;
    Ok(buf.freeze())
}

fn encode_resp(r: &ShareFetchResponse, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    r.encode(version, &mut buf).unwrap();
    buf.freeze()
}

fn sample_request() -> ShareFetchRequest {
    ShareFetchRequest {
        group_id: "orders".into(),
        member_id: "2f1c9a3e-6b1d-4c55-9a4e-0c2b9d7d1e01".into(),
        share_session_epoch: 7,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 52_428_800,
        max_records: 500,
        batch_size: 500,
        topics: vec![FetchTopic {
            topic_id: T1,
            partitions: vec![
                FetchPartition {
                    partition_index: 0,
                    acknowledgement_batches: vec![
                        batch(10, 12, &[ACK_ACCEPT]),
                        batch(13, 15, &[ACK_RELEASE, ACK_GAP, ACK_REJECT]),
                    ],
                },
                FetchPartition { partition_index: 4, acknowledgement_batches: vec![] },
            ],
        }],
        forgotten_topics_data: vec![ForgottenTopic { topic_id: T2, partitions: vec![1, 2] }],
        ..Default::default()
    }
}

fn batch(first: i64, last: i64, types: &[i8]) -> AcknowledgementBatch {
    AcknowledgementBatch { first_offset: first, last_offset: last, acknowledge_types: types.to_vec() }
}

/// The same request as the crate's type, for the v1 byte-for-byte check.
fn to_crate(r: &ShareFetchRequest) -> kreq::ShareFetchRequest {
    let topics = r.topics.iter().map(|t| {
        let parts = t.partitions.iter().map(|p| {
            let batches = p.acknowledgement_batches.iter().map(|b| {
                kreq::AcknowledgementBatch::default()
                    .with_first_offset(b.first_offset)
                    .with_last_offset(b.last_offset)
                    .with_acknowledge_types(b.acknowledge_types.clone())
            });
            kreq::FetchPartition::default()
                .with_partition_index(p.partition_index)
                .with_acknowledgement_batches(batches.collect())
        });
        kreq::FetchTopic::default().with_topic_id(t.topic_id).with_partitions(parts.collect())
    });
    let forgotten = r
        .forgotten_topics_data
        .iter()
        .map(|f| kreq::ForgottenTopic::default().with_topic_id(f.topic_id).with_partitions(f.partitions.clone()));
    kreq::ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(&r.group_id))))
        .with_member_id(Some(s(&r.member_id)))
        .with_share_session_epoch(r.share_session_epoch)
        .with_max_wait_ms(r.max_wait_ms)
        .with_min_bytes(r.min_bytes)
        .with_max_bytes(r.max_bytes)
        .with_max_records(r.max_records)
        .with_batch_size(r.batch_size)
        .with_topics(topics.collect())
        .with_forgotten_topics_data(forgotten.collect())
}

#[test]
fn v1_request_matches_crate_byte_for_byte() {
    let empty = ShareFetchRequest {
        group_id: "g".into(),
        member_id: "m".into(),
        share_session_epoch: -1,
        ..Default::default()
    };
    for req in [sample_request(), empty] {
        let mut theirs = BytesMut::new();
        Encodable::encode(&to_crate(&req), &mut theirs, 1).unwrap();
        assert_eq!(encode_req(&req, 1).unwrap(), theirs.freeze());
    }
}

fn sample_response() -> ShareFetchResponse {
    ShareFetchResponse {
        throttle_time_ms: 3,
        error_code: 0,
        error_message: None,
        acquisition_lock_timeout_ms: 30_000,
        responses: vec![FetchTopicResponse {
            topic_id: T1,
            partitions: vec![
                FetchPartitionResponse {
                    partition_index: 0,
                    acknowledge_error_code: 121,
                    acknowledge_error_message: Some("lock expired".into()),
                    current_leader: LeaderIdAndEpoch { leader_id: 1, leader_epoch: 9 },
                    records: Some(Bytes::from_static(b"\x00\x01record-bytes")),
                    acquired_records: vec![
                        AcquiredRecords { first_offset: 100, last_offset: 149, delivery_count: 1 },
                        AcquiredRecords { first_offset: 151, last_offset: 151, delivery_count: 3 },
                    ],
                    ..Default::default()
                },
                FetchPartitionResponse {
                    partition_index: 2,
                    error_code: 6,
                    error_message: Some("not leader".into()),
                    current_leader: LeaderIdAndEpoch { leader_id: 3, leader_epoch: 4 },
                    ..Default::default()
                },
            ],
        }],
        node_endpoints: vec![
            NodeEndpoint { node_id: 3, host: "broker-3".into(), port: 9092, rack: Some("rack-a".into()) },
            NodeEndpoint { node_id: 4, host: "broker-4".into(), port: 9093, rack: None },
        ],
    }
}

fn opt(v: &Option<StrBytes>) -> Option<String> {
    v.as_ref().map(|s| s.as_str().to_owned())
}

/// Converts the crate's decoded response into ours, field by field.
fn from_crate(k: &kresp::ShareFetchResponse) -> ShareFetchResponse {
    let topic = |t: &kresp::ShareFetchableTopicResponse| FetchTopicResponse {
        topic_id: t.topic_id,
        partitions: t
            .partitions
            .iter()
            .map(|p| FetchPartitionResponse {
                partition_index: p.partition_index,
                error_code: p.error_code,
                error_message: opt(&p.error_message),
                acknowledge_error_code: p.acknowledge_error_code,
                acknowledge_error_message: opt(&p.acknowledge_error_message),
                current_leader: LeaderIdAndEpoch {
                    leader_id: p.current_leader.leader_id,
                    leader_epoch: p.current_leader.leader_epoch,
                },
                records: p.records.clone(),
                acquired_records: (p.acquired_records.iter())
                    .map(|a| AcquiredRecords {
                        first_offset: a.first_offset,
                        last_offset: a.last_offset,
                        delivery_count: a.delivery_count,
                    })
                    .collect(),
            })
            .collect(),
    };
    ShareFetchResponse {
        throttle_time_ms: k.throttle_time_ms,
        error_code: k.error_code,
        error_message: opt(&k.error_message),
        acquisition_lock_timeout_ms: k.acquisition_lock_timeout_ms,
        responses: k.responses.iter().map(topic).collect(),
        node_endpoints: (k.node_endpoints.iter())
            .map(|n| NodeEndpoint {
                node_id: n.node_id.0,
                host: n.host.as_str().to_owned(),
                port: n.port,
                rack: opt(&n.rack),
            })
            .collect(),
    }
}

/// Our response as the crate's type: built independently of our encoder.
fn crate_response(r: &ShareFetchResponse) -> kresp::ShareFetchResponse {
    let ostr = |v: &Option<String>| v.as_deref().map(s);
    let topics = r.responses.iter().map(|t| {
        let parts = t.partitions.iter().map(|p| {
            let acquired = p.acquired_records.iter().map(|a| {
                kresp::AcquiredRecords::default()
                    .with_first_offset(a.first_offset)
                    .with_last_offset(a.last_offset)
                    .with_delivery_count(a.delivery_count)
            });
            kresp::PartitionData::default()
                .with_partition_index(p.partition_index)
                .with_error_code(p.error_code)
                .with_error_message(ostr(&p.error_message))
                .with_acknowledge_error_code(p.acknowledge_error_code)
                .with_acknowledge_error_message(ostr(&p.acknowledge_error_message))
                .with_current_leader(
                    kresp::LeaderIdAndEpoch::default()
                        .with_leader_id(p.current_leader.leader_id)
                        .with_leader_epoch(p.current_leader.leader_epoch),
                )
                .with_records(p.records.clone())
                .with_acquired_records(acquired.collect())
        });
        kresp::ShareFetchableTopicResponse::default()
            .with_topic_id(t.topic_id)
            .with_partitions(parts.collect())
    });
    let nodes = r.node_endpoints.iter().map(|n| {
        kresp::NodeEndpoint::default()
            .with_node_id(BrokerId(n.node_id))
            .with_host(s(&n.host))
            .with_port(n.port)
            .with_rack(ostr(&n.rack))
    });
    kresp::ShareFetchResponse::default()
        .with_throttle_time_ms(r.throttle_time_ms)
        .with_error_code(r.error_code)
        .with_error_message(ostr(&r.error_message))
        .with_acquisition_lock_timeout_ms(r.acquisition_lock_timeout_ms)
        .with_responses(topics.collect())
        .with_node_endpoints(nodes.collect())
}

#[test]
fn v1_response_encoded_by_crate_decodes_field_by_field() {
    let expected = sample_response();
    let mut theirs = BytesMut::new();
    Encodable::encode(&crate_response(&expected), &mut theirs, 1).unwrap();
    let theirs = theirs.freeze();
    // Our encoder produces the very same bytes...
    assert_eq!(encode_resp(&expected, 1), theirs);
    // ...and our decoder reads theirs back into the same values.
    let mut buf = theirs.clone();
    let ours = ShareFetchResponse::decode(&mut buf, 1).unwrap();
    assert!(buf.is_empty());
    assert_eq!(ours, expected);
    // And the crate agrees with what we decoded.
    let k = kresp::ShareFetchResponse::decode(&mut theirs.clone(), 1).unwrap();
    assert_eq!(from_crate(&k), ours);
}

#[test]
fn v2_request_hand_written_bytes() {
    let req = ShareFetchRequest {
        group_id: "g1".into(),
        member_id: "m".into(),
        share_session_epoch: 1,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 0,
        max_records: 0,
        batch_size: 500,
        share_acquire_mode: ACQUIRE_MODE_RECORD_LIMIT,
        is_renew_ack: true,
        topics: vec![FetchTopic {
            topic_id: T1,
            partitions: vec![FetchPartition {
                partition_index: 3,
                acknowledgement_batches: vec![batch(100, 102, &[ACK_RENEW, ACK_ACCEPT, ACK_RENEW])],
            }],
        }],
        forgotten_topics_data: vec![ForgottenTopic { topic_id: T2, partitions: vec![0, 7] }],
    };
    let expected = hex("
        03 67 31                                // GroupId: compact len 2+1, \"g1\"
        02 6d                                   // MemberId: \"m\"
        00 00 00 01                             // ShareSessionEpoch 1
        00 00 00 00                             // MaxWaitMs 0 (renew: must be 0)
        00 00 00 00                             // MinBytes 0
        00 00 00 00                             // MaxBytes 0
        00 00 00 00                             // MaxRecords 0
        00 00 01 f4                             // BatchSize 500
        01                                      // ShareAcquireMode 1 (record_limit), v2 only
        01                                      // IsRenewAck true, v2 only
        02                                      // Topics: 1 element
          00112233445566778899aabbccddeeff      //   TopicId
          02                                    //   Partitions: 1 element
            00 00 00 03                         //     PartitionIndex 3
            02                                  //     AcknowledgementBatches: 1 element
              00 00 00 00 00 00 00 64           //       FirstOffset 100
              00 00 00 00 00 00 00 66           //       LastOffset 102
              04 04 01 04                       //       AcknowledgeTypes [Renew, Accept, Renew]
              00                                //       batch tagged fields
            00                                  //     partition tagged fields
          00                                    //   topic tagged fields
        02                                      // ForgottenTopicsData: 1 element
          ffeeddccbbaa99887766554433221100      //   TopicId
          03 00 00 00 00 00 00 00 07            //   Partitions [0, 7]
          00                                    //   forgotten topic tagged fields
        00                                      // request tagged fields
    ");
    assert_eq!(encode_req(&req, 2).unwrap(), expected);
    assert_eq!(ShareFetchRequest::decode(&mut expected.clone(), 2).unwrap(), req);
}

/// A v2 response with a moved partition (CurrentLeader + NodeEndpoints), records, and unknown
/// tagged fields that must be skipped.
fn v2_response_bytes() -> Bytes {
    hex("
        00 00 00 00                             // ThrottleTimeMs 0
        00 00                                   // ErrorCode 0
        00                                      // ErrorMessage null
        00 00 75 30                             // AcquisitionLockTimeoutMs 30000
        02                                      // Responses: 1 topic
          00112233445566778899aabbccddeeff      //   TopicId
          03                                    //   Partitions: 2 elements
            00 00 00 00                         //     PartitionIndex 0
            00 06                               //     ErrorCode 6 NOT_LEADER_OR_FOLLOWER
            03 6e 6c                            //     ErrorMessage \"nl\"
            00 00                               //     AcknowledgeErrorCode 0
            00                                  //     AcknowledgeErrorMessage null
            00 00 00 02  00 00 00 07  00        //     CurrentLeader {LeaderId 2, Epoch 7}, no tags
            00                                  //     Records null
            01                                  //     AcquiredRecords: empty
            01 05 02 ab cd                      //     tags: unknown tag 5, 2 bytes, skipped
            00 00 00 01                         //     PartitionIndex 1
            00 00                               //     ErrorCode 0
            00                                  //     ErrorMessage null
            00 79                               //     AcknowledgeErrorCode 121 INVALID_RECORD_STATE
            04 62 61 64                         //     AcknowledgeErrorMessage \"bad\"
            00 00 00 01  00 00 00 05  00        //     CurrentLeader {1, 5}
            04 de ad be                         //     Records: 3 bytes
            02                                  //     AcquiredRecords: 1 element
              00 00 00 00 00 00 00 0a           //       FirstOffset 10
              00 00 00 00 00 00 00 0c           //       LastOffset 12
              00 01                             //       DeliveryCount 1
              00                                //       tagged fields
            00                                  //     partition tagged fields
          00                                    //   topic tagged fields
        02                                      // NodeEndpoints: 1 element
          00 00 00 02                           //   NodeId 2
          03 62 32                              //   Host \"b2\"
          00 00 23 84                           //   Port 9092
          00                                    //   Rack null
          00                                    //   tagged fields
        01 00 01 00                             // tagged fields: unknown tag 0 (1 byte), skipped
    ")
}

fn v2_response_value() -> ShareFetchResponse {
    ShareFetchResponse {
        acquisition_lock_timeout_ms: 30_000,
        responses: vec![FetchTopicResponse {
            topic_id: T1,
            partitions: vec![
                FetchPartitionResponse {
                    partition_index: 0,
                    error_code: 6,
                    error_message: Some("nl".into()),
                    current_leader: LeaderIdAndEpoch { leader_id: 2, leader_epoch: 7 },
                    ..Default::default()
                },
                FetchPartitionResponse {
                    partition_index: 1,
                    acknowledge_error_code: 121,
                    acknowledge_error_message: Some("bad".into()),
                    current_leader: LeaderIdAndEpoch { leader_id: 1, leader_epoch: 5 },
                    records: Some(Bytes::from_static(&[0xde, 0xad, 0xbe])),
                    acquired_records: vec![AcquiredRecords { first_offset: 10, last_offset: 12, delivery_count: 1 }],
                    ..Default::default()
                },
            ],
        }],
        node_endpoints: vec![NodeEndpoint { node_id: 2, host: "b2".into(), port: 9092, rack: None }],
        ..Default::default()
    }
}

#[test]
fn v2_response_hand_written_bytes() {
    let input = v2_response_bytes();
    let mut buf = input.clone();
    let resp = ShareFetchResponse::decode(&mut buf, 2).unwrap();
    assert!(buf.is_empty());
    assert_eq!(resp, v2_response_value());
    // Records are a slice of the input, not a copy.
    let records = resp.responses[0].partitions[1].records.as_ref().unwrap();
    let start = input.windows(3).position(|w| w == [0xde, 0xad, 0xbe]).unwrap();
    assert_eq!(records.as_ptr(), input[start..].as_ptr());
}

#[test]
fn round_trips_at_both_versions() {
    let mut renew = sample_request();
    renew.share_acquire_mode = ACQUIRE_MODE_RECORD_LIMIT;
    renew.is_renew_ack = true;
    renew.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types = vec![ACK_RENEW];
    for (req, versions) in [(sample_request(), &[1, 2][..]), (renew, &[2][..])] {
        for &v in versions {
            let mut bytes = encode_req(&req, v).unwrap();
            assert_eq!(ShareFetchRequest::decode(&mut bytes, v).unwrap(), req);
            assert!(bytes.is_empty());
        }
    }
    for resp in [sample_response(), v2_response_value(), ShareFetchResponse::default()] {
        for v in [1, 2] {
            let mut bytes = encode_resp(&resp, v);
            assert_eq!(ShareFetchResponse::decode(&mut bytes, v).unwrap(), resp);
        }
    }
}

#[test]
fn every_prefix_of_a_response_is_truncated() {
    for (full, v) in [(v2_response_bytes(), 2), (encode_resp(&sample_response(), 1), 1)] {
        for cut in 0..full.len() {
            let mut prefix = full.slice(..cut);
            let err = ShareFetchResponse::decode(&mut prefix, v).unwrap_err();
            assert!(matches!(err, CodecError::Truncated { .. }), "cut {cut}: {err:?}");
            assert_eq!(prefix.len(), cut, "buffer left untouched on error");
        }
    }
}

#[test]
fn every_prefix_of_a_request_is_truncated() {
    let full = encode_req(&sample_request(), 2).unwrap();
    for cut in 0..full.len() {
        let err = ShareFetchRequest::decode(&mut full.slice(..cut), 2).unwrap_err();
        assert!(matches!(err, CodecError::Truncated { .. }), "cut {cut}: {err:?}");
    }
}

#[test]
fn trailing_bytes_are_reported_and_buffer_kept() {
    let mut with_extra = BytesMut::from(&v2_response_bytes()[..]);
    with_extra.extend_from_slice(&[1, 2]);
    let mut buf = with_extra.freeze();
    let before = buf.clone();
    let err = ShareFetchResponse::decode(&mut buf, 2).unwrap_err();
    assert_eq!(err, CodecError::TrailingBytes { what: "ShareFetchResponse", extra: 2 });
    assert_eq!(buf, before);
}

#[test]
fn v1_refuses_v2_only_values() {
    let mut mode = sample_request();
    mode.share_acquire_mode = ACQUIRE_MODE_RECORD_LIMIT;
    let mut flag = sample_request();
    flag.is_renew_ack = true;
    let mut ack = sample_request();
    ack.topics[0].partitions[1].acknowledgement_batches = vec![batch(5, 5, &[ACK_RENEW])];
    for req in [mode, flag, ack] {
        match encode_req(&req, 1) {
            Err(CodecError::Invalid { detail, .. }) => {
                assert!(detail.contains("lacks ShareFetch v2"), "{detail}")
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        assert!(encode_req(&req, 2).is_ok());
    }
}

#[test]
fn unsupported_versions() {
    for v in [0, 3, -1] {
        let unsupported = |e| matches!(e, CodecError::UnsupportedVersion { version, .. } if version == v);
        assert!(unsupported(encode_req(&sample_request(), v).unwrap_err()));
        let mut buf = BytesMut::new();
        assert!(unsupported(sample_response().encode(v, &mut buf).unwrap_err()));
        assert!(unsupported(ShareFetchResponse::decode(&mut v2_response_bytes(), v).unwrap_err()));
    }
}
