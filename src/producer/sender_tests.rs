//! The sender's decisions: reading a broker's answer per batch, and retry or fail.

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::error::ErrorCode;
use crate::producer::batch::Batch;
use crate::producer::request::partition_result;

fn response(partition: PartitionProduceResponse) -> ProduceResponse {
    ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partition_responses(vec![partition])])
}

#[test]
fn answers_map_to_offsets_or_typed_errors() {
    let b = Batch::for_test("t", 0);
    let ok =
        response(PartitionProduceResponse::default().with_index(0).with_base_offset(42).with_log_append_time_ms(-1));
    let o = partition_result(&ok, 1, &b).unwrap();
    assert_eq!((o.base_offset, o.log_append_time), (42, -1));

    let moved = response(PartitionProduceResponse::default().with_index(0).with_error_code(6));
    let e = partition_result(&moved, 1, &b).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NOT_LEADER_OR_FOLLOWER));
    assert!(e.is_retriable());
    assert!(e.to_string().contains("Produce broker 1 t-0"), "{e}");

    let invalid =
        response(PartitionProduceResponse::default().with_index(0).with_error_code(87).with_record_errors(vec![
            BatchIndexAndErrorMessage::default()
                .with_batch_index(3)
                .with_batch_index_error_message(Some(StrBytes::from_static_str("bad key"))),
        ]));
    let e = partition_result(&invalid, 1, &b).unwrap_err();
    assert!(!e.is_retriable());
    assert!(e.to_string().contains("record 3 of the batch: bad key"), "{e}");

    let other = response(PartitionProduceResponse::default().with_index(1));
    let e = partition_result(&other, 1, &b).unwrap_err();
    assert!(matches!(e, Error::IncompleteResponse { api: "Produce", .. }), "{e}");
}

#[test]
fn retriable_errors_back_off_until_the_delivery_timeout() {
    let now = Instant::now();
    let timeout = Duration::from_secs(120);
    let retriable = || Error::from_code(6, None, Default::default()).unwrap();

    let mut b = Batch::for_test("t", 0);
    schedule_retry(&mut b, retriable(), now, 10, timeout, false).unwrap();
    assert_eq!(b.attempts, 1);
    let at = b.retry_at.unwrap();
    assert!(at >= now + Duration::from_millis(80) && at <= now + Duration::from_millis(120));

    let too_large = Error::from_code(10, None, Default::default()).unwrap();
    let e = schedule_retry(&mut b, too_large, now, 10, timeout, false).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode(10)), "not retriable: the error itself");

    let e = schedule_retry(&mut b, retriable(), now, 1, timeout, false).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NOT_LEADER_OR_FOLLOWER), "retries used up");

    let late = now + Duration::from_secs(119) + Duration::from_millis(950);
    let e = schedule_retry(&mut b, retriable(), late, 10, timeout, false).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("last error"), "{e}");
}
