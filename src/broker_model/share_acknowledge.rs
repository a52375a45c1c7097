//! ShareAcknowledge (key 79) as both fake brokers answer it (franz-go's kfake
//! `79_share_acknowledge.go`): RENEW only from v2, the session's epoch (a ShareAcknowledge
//! never opens a session), each partition's acknowledgements, the final epoch's end of the
//! session. The fakes only decode, call [`handle`] with their [`ShareBroker`] and encode.

use crate::error::ErrorCode;
use crate::protocol::share::{
    AcknowledgePartitionResponse, AcknowledgeTopicResponse, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
};

use super::broker::{
    add_endpoint, apply_acks, current_leader, end_session, forced_error, no_leader, take_session, AckSite, Cx,
    ShareBroker, RENEW_VERSION,
};
use super::sessions::SessionRequest;

/// Answers ShareAcknowledge `r` from `member` as broker `cx.node` at `cx.now`.
pub(crate) fn handle<B: ShareBroker + ?Sized>(
    b: &mut B,
    cx: &Cx,
    member: &B::Member,
    r: &ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    let renewing = cx.version >= RENEW_VERSION;
    let mut resp = ShareAcknowledgeResponse {
        acquisition_lock_timeout_ms: renewing.then(|| b.lock_timeout_ms()),
        ..Default::default()
    };
    if let Some(code) = forced_error(b, cx.node, member) {
        resp.error_code = code;
        return resp;
    }
    if r.is_renew_ack && !renewing {
        b.violation(format!("member {member}: RENEW sent to a v{} broker {}", cx.version, cx.node));
        resp.error_code = ErrorCode::INVALID_REQUEST.0;
        return resp;
    }
    let epoch = r.share_session_epoch;
    let session = match take_session(b, cx.node, member, epoch, SessionRequest::Acknowledge) {
        Ok(id) => id,
        Err(code) => {
            resp.error_code = code;
            return resp;
        }
    };
    let mut partitions = Vec::new();
    for p in r.topics.iter().flat_map(|t| &t.partitions) {
        let i = p.partition_index;
        let at = AckSite { node: cx.node, member, session, partition: i, api: "ShareAcknowledge" };
        let code = apply_acks(b, &at, &p.acknowledgement_batches, r.is_renew_ack, cx.now);
        let mut leader = no_leader();
        if code == ErrorCode::NOT_LEADER_OR_FOLLOWER.0 {
            leader = current_leader(b, i);
            add_endpoint(b, leader.leader_id, &mut resp.node_endpoints);
        }
        partitions.push(AcknowledgePartitionResponse {
            partition_index: i,
            error_code: code,
            error_message: None,
            current_leader: leader,
        });
    }
    if epoch == -1 {
        end_session(b, cx.node, member);
    }
    if !partitions.is_empty() {
        resp.responses = vec![AcknowledgeTopicResponse { topic_id: b.topic_id(), partitions }];
    }
    resp
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::broker_model::share_fetch::{self, FetchOutcome};
    use crate::broker_model::test_broker::{TestBroker, LOCK};
    use crate::protocol::share::{
        AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch, FetchPartition, FetchTopic, ShareFetchRequest,
        ACK_ACCEPT, ACK_RENEW,
    };

    fn cx(version: i16, now: Instant) -> Cx {
        Cx { node: 1, conn: 7, version, now }
    }

    fn open(b: &mut TestBroker, p: i32, now: Instant) {
        let r = ShareFetchRequest {
            share_session_epoch: 0,
            max_records: 10,
            topics: vec![FetchTopic {
                topic_id: uuid::Uuid::from_u128(1),
                partitions: vec![FetchPartition { partition_index: p, acknowledgement_batches: vec![] }],
            }],
            ..Default::default()
        };
        assert!(matches!(share_fetch::handle(b, &cx(2, now), &"m".to_string(), &r), FetchOutcome::Answer(_)));
    }

    fn ack(epoch: i32, p: i32, ty: i8, renew: bool) -> ShareAcknowledgeRequest {
        ShareAcknowledgeRequest {
            share_session_epoch: epoch,
            is_renew_ack: renew,
            topics: vec![AcknowledgeTopic {
                topic_id: uuid::Uuid::from_u128(1),
                partitions: vec![AcknowledgePartition {
                    partition_index: p,
                    acknowledgement_batches: vec![AcknowledgementBatch {
                        first_offset: 0,
                        last_offset: 0,
                        acknowledge_types: vec![ty],
                    }],
                }],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn renew_extends_the_lock_at_v2_and_is_an_invalid_request_at_v1() {
        let now = Instant::now();
        let mut b = TestBroker::new(&[1], 3);
        open(&mut b, 0, now);
        let later = now + Duration::from_secs(10);
        let r = handle(&mut b, &cx(1, later), &"m".to_string(), &ack(1, 0, ACK_RENEW, true));
        assert_eq!((r.error_code, r.acquisition_lock_timeout_ms), (ErrorCode::INVALID_REQUEST.0, None));
        assert_eq!(b.violations.len(), 1, "RENEW to a v1 broker is a client bug: {:?}", b.violations);
        let r = handle(&mut b, &cx(2, later), &"m".to_string(), &ack(1, 0, ACK_RENEW, true));
        assert_eq!(r.error_code, 0);
        assert_eq!(r.acquisition_lock_timeout_ms, Some(LOCK.as_millis() as i32));
        assert_eq!(r.responses[0].partitions[0].error_code, 0);
        assert_eq!(b.held_until(0, 0), Some(later + LOCK), "the lock runs from the renewal");
    }

    #[test]
    fn acks_on_a_partition_led_elsewhere_name_its_leader_and_endpoint() {
        let now = Instant::now();
        let mut b = TestBroker::new(&[1, 2], 3);
        open(&mut b, 0, now);
        let r = handle(&mut b, &cx(2, now), &"m".to_string(), &ack(1, 1, ACK_ACCEPT, false));
        let p = &r.responses[0].partitions[0];
        assert_eq!((p.error_code, p.current_leader.leader_id), (ErrorCode::NOT_LEADER_OR_FOLLOWER.0, 2));
        assert_eq!(r.node_endpoints.iter().map(|e| e.node_id).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn the_final_epoch_applies_the_acks_then_ends_the_session_and_releases() {
        let now = Instant::now();
        let mut b = TestBroker::new(&[1], 3);
        open(&mut b, 0, now);
        let r = handle(&mut b, &cx(2, now), &"m".to_string(), &ack(-1, 0, ACK_ACCEPT, false));
        assert_eq!((r.error_code, r.responses[0].partitions[0].error_code), (0, 0));
        assert!(b.sessions.get(&(1, "m".to_string())).is_none());
        assert!(b.held_until(0, 1).is_none(), "what the member held went back");
    }
}
