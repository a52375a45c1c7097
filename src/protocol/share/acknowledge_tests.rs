//! ShareAcknowledge codec tests: v1 against the `kafka-protocol` crate byte for byte, v2 against
//! hand-written bytes, round trips, truncation and version gating.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::share_acknowledge_request as kreq;
use kafka_protocol::messages::share_acknowledge_response as kresp;
use kafka_protocol::messages::{BrokerId, GroupId};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

use super::*;
use crate::protocol::share::test_util::hex;

const T1: Uuid = Uuid::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn encode_req(r: &ShareAcknowledgeRequest, version: i16) -> Result<Bytes, CodecError> {
    let mut buf = BytesMut::new();
    r.encode(version, &mut buf)?;
    Ok(buf.freeze())
}

fn encode_resp(r: &ShareAcknowledgeResponse, version: i16) -> Result<Bytes, CodecError> {
    let mut buf = BytesMut::new();
    r.encode(version, &mut buf)?;
    Ok(buf.freeze())
}

fn batch(first: i64, last: i64, types: &[i8]) -> AcknowledgementBatch {
    AcknowledgementBatch { first_offset: first, last_offset: last, acknowledge_types: types.to_vec() }
}

fn sample_request() -> ShareAcknowledgeRequest {
    ShareAcknowledgeRequest {
        group_id: "orders".into(),
        member_id: "member-1".into(),
        share_session_epoch: 12,
        is_renew_ack: false,
        topics: vec![AcknowledgeTopic {
            topic_id: T1,
            partitions: vec![
                AcknowledgePartition { partition_index: 0, acknowledgement_batches: vec![batch(0, 9, &[ACK_ACCEPT])] },
                AcknowledgePartition {
                    partition_index: 5,
                    acknowledgement_batches: vec![batch(20, 21, &[ACK_REJECT, ACK_RELEASE]), batch(30, 30, &[ACK_GAP])],
                },
            ],
        }],
    }
}

fn to_crate(r: &ShareAcknowledgeRequest) -> kreq::ShareAcknowledgeRequest {
    let topics = r.topics.iter().map(|t| {
        let parts = t.partitions.iter().map(|p| {
            let batches = p.acknowledgement_batches.iter().map(|b| {
                kreq::AcknowledgementBatch::default()
                    .with_first_offset(b.first_offset)
                    .with_last_offset(b.last_offset)
                    .with_acknowledge_types(b.acknowledge_types.clone())
            });
            kreq::AcknowledgePartition::default()
                .with_partition_index(p.partition_index)
                .with_acknowledgement_batches(batches.collect())
        });
        kreq::AcknowledgeTopic::default().with_topic_id(t.topic_id).with_partitions(parts.collect())
    });
    kreq::ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(&r.group_id))))
        .with_member_id(Some(s(&r.member_id)))
        .with_share_session_epoch(r.share_session_epoch)
        .with_topics(topics.collect())
}

#[test]
fn v1_request_matches_crate_byte_for_byte() {
    let closing = ShareAcknowledgeRequest {
        group_id: "g".into(),
        member_id: "m".into(),
        share_session_epoch: -1,
        ..Default::default()
    };
    for req in [sample_request(), closing] {
        let mut theirs = BytesMut::new();
        Encodable::encode(&to_crate(&req), &mut theirs, 1).unwrap();
        assert_eq!(encode_req(&req, 1).unwrap(), theirs.freeze());
    }
}

fn sample_response(lock: Option<i32>) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse {
        throttle_time_ms: 0,
        error_code: 0,
        error_message: None,
        acquisition_lock_timeout_ms: lock,
        responses: vec![AcknowledgeTopicResponse {
            topic_id: T1,
            partitions: vec![
                AcknowledgePartitionResponse {
                    partition_index: 0,
                    error_code: 0,
                    error_message: None,
                    current_leader: LeaderIdAndEpoch { leader_id: -1, leader_epoch: -1 },
                },
                AcknowledgePartitionResponse {
                    partition_index: 5,
                    error_code: 6,
                    error_message: Some("moved".into()),
                    current_leader: LeaderIdAndEpoch { leader_id: 2, leader_epoch: 11 },
                },
            ],
        }],
        node_endpoints: vec![NodeEndpoint { node_id: 2, host: "broker-2".into(), port: 9092, rack: Some("r1".into()) }],
    }
}

fn crate_response(r: &ShareAcknowledgeResponse) -> kresp::ShareAcknowledgeResponse {
    let ostr = |v: &Option<String>| v.as_deref().map(s);
    let topics = r.responses.iter().map(|t| {
        let parts = t.partitions.iter().map(|p| {
            kresp::PartitionData::default()
                .with_partition_index(p.partition_index)
                .with_error_code(p.error_code)
                .with_error_message(ostr(&p.error_message))
                .with_current_leader(
                    kresp::LeaderIdAndEpoch::default()
                        .with_leader_id(p.current_leader.leader_id)
                        .with_leader_epoch(p.current_leader.leader_epoch),
                )
        });
        kresp::ShareAcknowledgeTopicResponse::default()
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
    kresp::ShareAcknowledgeResponse::default()
        .with_throttle_time_ms(r.throttle_time_ms)
        .with_error_code(r.error_code)
        .with_error_message(ostr(&r.error_message))
        .with_responses(topics.collect())
        .with_node_endpoints(nodes.collect())
}

fn from_crate(k: &kresp::ShareAcknowledgeResponse) -> ShareAcknowledgeResponse {
    let opt = |v: &Option<StrBytes>| v.as_ref().map(|s| s.as_str().to_owned());
    ShareAcknowledgeResponse {
        throttle_time_ms: k.throttle_time_ms,
        error_code: k.error_code,
        error_message: opt(&k.error_message),
        acquisition_lock_timeout_ms: None,
        responses: (k.responses.iter())
            .map(|t| AcknowledgeTopicResponse {
                topic_id: t.topic_id,
                partitions: (t.partitions.iter())
                    .map(|p| AcknowledgePartitionResponse {
                        partition_index: p.partition_index,
                        error_code: p.error_code,
                        error_message: opt(&p.error_message),
                        current_leader: LeaderIdAndEpoch {
                            leader_id: p.current_leader.leader_id,
                            leader_epoch: p.current_leader.leader_epoch,
                        },
                    })
                    .collect(),
            })
            .collect(),
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

#[test]
fn v1_response_encoded_by_crate_decodes_field_by_field() {
    let expected = sample_response(None);
    let mut theirs = BytesMut::new();
    Encodable::encode(&crate_response(&expected), &mut theirs, 1).unwrap();
    let theirs = theirs.freeze();
    assert_eq!(encode_resp(&expected, 1).unwrap(), theirs);
    let ours = ShareAcknowledgeResponse::decode(&mut theirs.clone(), 1).unwrap();
    assert_eq!(ours, expected);
    let k = kresp::ShareAcknowledgeResponse::decode(&mut theirs.clone(), 1).unwrap();
    assert_eq!(from_crate(&k), ours);
}

#[test]
fn v2_request_hand_written_bytes() {
    let req = ShareAcknowledgeRequest {
        group_id: "g1".into(),
        member_id: "m".into(),
        share_session_epoch: 2,
        is_renew_ack: true,
        topics: vec![AcknowledgeTopic {
            topic_id: T1,
            partitions: vec![AcknowledgePartition {
                partition_index: 1,
                acknowledgement_batches: vec![batch(7, 8, &[ACK_RENEW])],
            }],
        }],
    };
    let expected = hex("
        03 67 31                                // GroupId \"g1\"
        02 6d                                   // MemberId \"m\"
        00 00 00 02                             // ShareSessionEpoch 2
        01                                      // IsRenewAck true, v2 only
        02                                      // Topics: 1 element
          00112233445566778899aabbccddeeff      //   TopicId
          02                                    //   Partitions: 1 element
            00 00 00 01                         //     PartitionIndex 1
            02                                  //     AcknowledgementBatches: 1 element
              00 00 00 00 00 00 00 07           //       FirstOffset 7
              00 00 00 00 00 00 00 08           //       LastOffset 8
              02 04                             //       AcknowledgeTypes [Renew] (whole range)
              00                                //       batch tagged fields
            00                                  //     partition tagged fields
          00                                    //   topic tagged fields
        00                                      // request tagged fields
    ");
    assert_eq!(encode_req(&req, 2).unwrap(), expected);
    assert_eq!(ShareAcknowledgeRequest::decode(&mut expected.clone(), 2).unwrap(), req);
}

fn v2_response_bytes() -> Bytes {
    hex("
        00 00 00 05                             // ThrottleTimeMs 5
        00 00                                   // ErrorCode 0
        00                                      // ErrorMessage null
        00 00 3a 98                             // AcquisitionLockTimeoutMs 15000, v2 only
        02                                      // Responses: 1 topic
          00112233445566778899aabbccddeeff      //   TopicId
          02                                    //   Partitions: 1 element
            00 00 00 01                         //     PartitionIndex 1
            00 06                               //     ErrorCode 6 NOT_LEADER_OR_FOLLOWER
            00                                  //     ErrorMessage null
            00 00 00 03  00 00 00 08            //     CurrentLeader {LeaderId 3, LeaderEpoch 8}
            02 00 01 11 07 00                   //     CurrentLeader tags: unknown 0 and 7, skipped
            00                                  //     partition tagged fields
          00                                    //   topic tagged fields
        02                                      // NodeEndpoints: 1 element
          00 00 00 03                           //   NodeId 3
          03 62 33                              //   Host \"b3\"
          00 00 23 85                           //   Port 9093
          03 72 31                              //   Rack \"r1\"
          00                                    //   tagged fields
        00                                      // tagged fields
    ")
}

fn v2_response_value() -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse {
        throttle_time_ms: 5,
        acquisition_lock_timeout_ms: Some(15_000),
        responses: vec![AcknowledgeTopicResponse {
            topic_id: T1,
            partitions: vec![AcknowledgePartitionResponse {
                partition_index: 1,
                error_code: 6,
                error_message: None,
                current_leader: LeaderIdAndEpoch { leader_id: 3, leader_epoch: 8 },
            }],
        }],
        node_endpoints: vec![NodeEndpoint { node_id: 3, host: "b3".into(), port: 9093, rack: Some("r1".into()) }],
        ..Default::default()
    }
}

#[test]
fn v2_response_hand_written_bytes() {
    let mut buf = v2_response_bytes();
    assert_eq!(ShareAcknowledgeResponse::decode(&mut buf, 2).unwrap(), v2_response_value());
    assert!(buf.is_empty());
    // The same bytes read as v1 misplace every field after ErrorMessage and must not pass.
    assert!(ShareAcknowledgeResponse::decode(&mut v2_response_bytes(), 1).is_err());
}

#[test]
fn round_trips_at_both_versions() {
    let mut renew = sample_request();
    renew.is_renew_ack = true;
    renew.topics[0].partitions[1].acknowledgement_batches[1].acknowledge_types = vec![ACK_RENEW];
    for (req, versions) in [(sample_request(), &[1, 2][..]), (renew, &[2][..])] {
        for &v in versions {
            let mut bytes = encode_req(&req, v).unwrap();
            assert_eq!(ShareAcknowledgeRequest::decode(&mut bytes, v).unwrap(), req);
        }
    }
    for (resp, v) in [
        (sample_response(None), 1),
        (sample_response(Some(30_000)), 2),
        (v2_response_value(), 2),
        (ShareAcknowledgeResponse::default(), 1),
    ] {
        let mut bytes = encode_resp(&resp, v).unwrap();
        assert_eq!(ShareAcknowledgeResponse::decode(&mut bytes, v).unwrap(), resp);
    }
}

#[test]
fn lock_timeout_is_v2_only() {
    // None at v2 is written as the schema default 0 and comes back as Some(0).
    let mut bytes = encode_resp(&sample_response(None), 2).unwrap();
    let back = ShareAcknowledgeResponse::decode(&mut bytes, 2).unwrap();
    assert_eq!(back.acquisition_lock_timeout_ms, Some(0));
    // A value cannot be encoded at v1.
    assert!(matches!(encode_resp(&sample_response(Some(1)), 1), Err(CodecError::Invalid { .. })));
}

#[test]
fn every_prefix_of_a_response_is_truncated() {
    let v1 = encode_resp(&sample_response(None), 1).unwrap();
    for (full, v) in [(v2_response_bytes(), 2), (v1, 1)] {
        for cut in 0..full.len() {
            let mut prefix = full.slice(..cut);
            let err = ShareAcknowledgeResponse::decode(&mut prefix, v).unwrap_err();
            assert!(matches!(err, CodecError::Truncated { .. }), "cut {cut}: {err:?}");
            assert_eq!(prefix.len(), cut);
        }
    }
}

#[test]
fn v1_refuses_v2_only_values() {
    let mut flag = sample_request();
    flag.is_renew_ack = true;
    let mut ack = sample_request();
    ack.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types = vec![ACK_RENEW];
    for req in [flag, ack] {
        match encode_req(&req, 1) {
            Err(CodecError::Invalid { detail, .. }) => {
                assert!(detail.contains("lacks ShareAcknowledge v2"), "{detail}")
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        assert!(encode_req(&req, 2).is_ok());
    }
}

#[test]
fn unsupported_versions() {
    for v in [0, 3] {
        assert!(matches!(encode_req(&sample_request(), v), Err(CodecError::UnsupportedVersion { .. })));
        assert!(matches!(
            ShareAcknowledgeResponse::decode(&mut v2_response_bytes(), v),
            Err(CodecError::UnsupportedVersion { .. })
        ));
    }
}
