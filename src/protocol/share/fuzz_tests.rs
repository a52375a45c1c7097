//! Property tests: no input makes a decoder panic, and encode/decode round-trip arbitrary values.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use uuid::Uuid;

use super::*;

/// Runs every decoder at every version (including unsupported ones) over `input`.
fn decode_all(input: &[u8]) {
    for v in -1..=3 {
        let _ = ShareFetchResponse::decode(&mut Bytes::copy_from_slice(input), v);
        let _ = ShareAcknowledgeResponse::decode(&mut Bytes::copy_from_slice(input), v);
        let _ = ShareFetchRequest::decode(&mut Bytes::copy_from_slice(input), v);
        let _ = ShareAcknowledgeRequest::decode(&mut Bytes::copy_from_slice(input), v);
    }
}

fn ack_batch() -> impl Strategy<Value = AcknowledgementBatch> {
    (any::<i64>(), any::<i64>(), prop::collection::vec(0i8..=4, 0..4)).prop_map(|(f, l, t)| AcknowledgementBatch {
        first_offset: f,
        last_offset: l,
        acknowledge_types: t,
    })
}

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

fn opt_string() -> impl Strategy<Value = Option<String>> {
    prop::option::of(".{0,12}")
}

fn fetch_request() -> impl Strategy<Value = ShareFetchRequest> {
    let partition = (any::<i32>(), prop::collection::vec(ack_batch(), 0..3))
        .prop_map(|(i, b)| FetchPartition { partition_index: i, acknowledgement_batches: b });
    let topic = (uuid(), prop::collection::vec(partition, 0..3))
        .prop_map(|(topic_id, partitions)| FetchTopic { topic_id, partitions });
    let forgotten = (uuid(), prop::collection::vec(any::<i32>(), 0..3))
        .prop_map(|(topic_id, partitions)| ForgottenTopic { topic_id, partitions });
    (
        (".{0,12}", ".{0,36}", any::<[i32; 6]>()),
        (any::<i8>(), any::<bool>()),
        prop::collection::vec(topic, 0..3),
        prop::collection::vec(forgotten, 0..2),
    )
        .prop_map(|((g, m, n), (mode, renew), topics, forgotten)| ShareFetchRequest {
            group_id: g,
            member_id: m,
            share_session_epoch: n[0],
            max_wait_ms: n[1],
            min_bytes: n[2],
            max_bytes: n[3],
            max_records: n[4],
            batch_size: n[5],
            share_acquire_mode: mode,
            is_renew_ack: renew,
            topics,
            forgotten_topics_data: forgotten,
        })
}

fn fetch_response() -> impl Strategy<Value = ShareFetchResponse> {
    let acquired = (any::<i64>(), any::<i64>(), any::<i16>()).prop_map(|(f, l, d)| AcquiredRecords {
        first_offset: f,
        last_offset: l,
        delivery_count: d,
    });
    let partition = (
        (any::<i32>(), any::<i16>(), opt_string(), any::<i16>(), opt_string()),
        (any::<i32>(), any::<i32>()),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..32)),
        prop::collection::vec(acquired, 0..3),
    )
        .prop_map(|((i, e, em, ae, aem), (lid, lep), rec, acq)| FetchPartitionResponse {
            partition_index: i,
            error_code: e,
            error_message: em,
            acknowledge_error_code: ae,
            acknowledge_error_message: aem,
            current_leader: LeaderIdAndEpoch { leader_id: lid, leader_epoch: lep },
            records: rec.map(Bytes::from),
            acquired_records: acq,
        });
    let topic = (uuid(), prop::collection::vec(partition, 0..3))
        .prop_map(|(topic_id, partitions)| FetchTopicResponse { topic_id, partitions });
    let node = (any::<i32>(), ".{0,12}", any::<i32>(), opt_string()).prop_map(|(id, h, p, r)| NodeEndpoint {
        node_id: id,
        host: h,
        port: p,
        rack: r,
    });
    (
        (any::<i32>(), any::<i16>(), opt_string(), any::<i32>()),
        prop::collection::vec(topic, 0..3),
        prop::collection::vec(node, 0..3),
    )
        .prop_map(|((t, e, em, lock), responses, nodes)| ShareFetchResponse {
            throttle_time_ms: t,
            error_code: e,
            error_message: em,
            acquisition_lock_timeout_ms: lock,
            responses,
            node_endpoints: nodes,
        })
}

proptest! {
    #[test]
    fn random_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&input);
    }

    /// Corrupting a few bytes of a valid message reaches deeper decode paths than pure noise.
    #[test]
    fn corrupted_valid_messages_never_panic(
        resp in fetch_response(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut buf = BytesMut::new();
        resp.encode(2, &mut buf).unwrap();
        let mut bytes = buf.to_vec();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        decode_all(&bytes);
    }

    #[test]
    fn fetch_request_round_trips_at_v2(req in fetch_request()) {
        let mut buf = BytesMut::new();
        req.encode(2, &mut buf).unwrap();
        prop_assert_eq!(ShareFetchRequest::decode(&mut buf.freeze(), 2).unwrap(), req);
    }

    #[test]
    fn fetch_response_round_trips(resp in fetch_response(), v in 1i16..=2) {
        let mut buf = BytesMut::new();
        resp.encode(v, &mut buf).unwrap();
        prop_assert_eq!(ShareFetchResponse::decode(&mut buf.freeze(), v).unwrap(), resp);
    }
}
