//! ShareFetch (key 78) as both fake brokers answer it (franz-go's kfake `78_share_fetch.go`):
//! the member check, the session's epoch, the piggybacked acknowledgements, one pass over the
//! session's partitions (errors, then acquisition within the fetch's budget), and the long
//! poll: [`handle`] answers at once or returns a [`Pending`] fetch, which the fake looks at
//! again with [`poll`] (the simulation when its state changed, the public fake every few
//! milliseconds) until records come or its `MaxWaitMs` passes. The fakes only decode, call
//! these with their [`ShareBroker`] and encode.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::error::ErrorCode;
use crate::protocol::share::{
    FetchPartitionResponse, FetchTopicResponse, LeaderIdAndEpoch, NodeEndpoint, ShareFetchRequest, ShareFetchResponse,
    ACQUIRE_MODE_RECORD_LIMIT,
};

pub(crate) use super::broker::no_leader;
use super::broker::{
    add_endpoint, apply_acks, current_leader, end_session, forced_error, take_session, AckSite, Cx, ShareBroker,
    RENEW_VERSION,
};
use super::sessions::SessionRequest;

/// A fetch that found nothing to hand out and waits for records (long poll).
#[derive(Debug, Clone)]
pub(crate) struct Pending<M> {
    pub node: i32,
    pub member: M,
    /// The session it came on: when that ends, the fetch is answered.
    pub session: u64,
    pub request: ShareFetchRequest,
    /// When it is answered, records or not.
    pub deadline: Instant,
    /// What the answer has so far (its acknowledgements' results).
    parts: BTreeMap<i32, FetchPartitionResponse>,
}

/// What a ShareFetch gets: an answer now, or a wait.
#[derive(Debug)]
pub(crate) enum FetchOutcome<M> {
    Answer(ShareFetchResponse),
    Wait(Pending<M>),
}

/// Answers ShareFetch `r` from `member` as broker `cx.node` at `cx.now`, or parks it.
pub(crate) fn handle<B: ShareBroker + ?Sized>(
    b: &mut B,
    cx: &Cx,
    member: &B::Member,
    r: &ShareFetchRequest,
) -> FetchOutcome<B::Member> {
    let node = cx.node;
    let mut resp = ShareFetchResponse { acquisition_lock_timeout_ms: b.lock_timeout_ms(), ..Default::default() };
    if !b.is_member(member) {
        // A broker serves only members of the group (4.2+ checks the member id).
        resp.error_code = ErrorCode::UNKNOWN_MEMBER_ID.0;
        return FetchOutcome::Answer(resp);
    }
    if let Some(code) = forced_error(b, node, member) {
        resp.error_code = code;
        return FetchOutcome::Answer(resp);
    }
    let topic_id = b.topic_id();
    if let Some(t) = r.topics.iter().find(|t| t.topic_id != topic_id) {
        b.violation(format!("ShareFetch names unknown topic id {}", t.topic_id));
    }
    let listed = || r.topics.iter().flat_map(|t| &t.partitions);
    let has_acks = listed().any(|p| !p.acknowledgement_batches.is_empty());
    let request = SessionRequest::Fetch { conn: cx.conn, has_acks };
    let session = match take_session(b, node, member, r.share_session_epoch, request) {
        Ok(id) => id,
        Err(code) => {
            resp.error_code = code;
            return FetchOutcome::Answer(resp);
        }
    };
    if r.is_renew_ack && (r.max_records != 0 || r.max_wait_ms != 0 || r.min_bytes != 0 || r.max_bytes != 0) {
        b.violation(format!("member {member}: a renewing ShareFetch asked for records"));
    }
    if let Some(s) = b.sessions_mut().get_mut(&(node, member.clone())) {
        s.update(
            listed().map(|p| p.partition_index),
            r.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().copied()),
        );
    }
    let renew_allowed = r.is_renew_ack && cx.version >= RENEW_VERSION;
    let mut parts: BTreeMap<i32, FetchPartitionResponse> = BTreeMap::new();
    for p in listed().filter(|p| !p.acknowledgement_batches.is_empty()) {
        let i = p.partition_index;
        let at = AckSite { node, member, session, partition: i, api: "ShareFetch" };
        let code = apply_acks(b, &at, &p.acknowledgement_batches, renew_allowed, cx.now);
        let e = parts.entry(i).or_insert_with(|| blank(i));
        e.acknowledge_error_code = code;
        if code == ErrorCode::NOT_LEADER_OR_FOLLOWER.0 {
            e.current_leader = current_leader(b, i);
        }
    }
    if r.share_session_epoch == -1 {
        end_session(b, node, member);
        resp.responses = topic_responses(topic_id, parts);
        return FetchOutcome::Answer(resp);
    }
    let found = gather(b, node, member, session, r, cx.now, &mut parts, &mut resp.node_endpoints);
    let acks_answered = b.answers_acks_at_once() && !parts.is_empty();
    if found || acks_answered || r.max_wait_ms <= 0 {
        resp.responses = topic_responses(topic_id, parts);
        return FetchOutcome::Answer(resp);
    }
    let deadline = cx.now + Duration::from_millis(r.max_wait_ms.unsigned_abs().into());
    FetchOutcome::Wait(Pending { node, member: member.clone(), session, request: r.clone(), deadline, parts })
}

/// Looks again at a waiting fetch at `now`: its answer if records came, its session ended,
/// or its time is up.
pub(crate) fn poll<B: ShareBroker + ?Sized>(
    b: &mut B,
    w: &Pending<B::Member>,
    now: Instant,
) -> Option<ShareFetchResponse> {
    let mut resp = ShareFetchResponse { acquisition_lock_timeout_ms: b.lock_timeout_ms(), ..Default::default() };
    let alive = b.sessions().get(&(w.node, w.member.clone())).is_some_and(|s| s.id == w.session);
    let mut parts = w.parts.clone();
    let found = alive && gather(b, w.node, &w.member, w.session, &w.request, now, &mut parts, &mut resp.node_endpoints);
    if found || !alive || now >= w.deadline {
        resp.responses = topic_responses(b.topic_id(), parts);
        return Some(resp);
    }
    None
}

/// One pass over the session's partitions: errors and acquired records. True if anything
/// worth answering at once was found.
#[allow(clippy::too_many_arguments)]
fn gather<B: ShareBroker + ?Sized>(
    b: &mut B,
    node: i32,
    member: &B::Member,
    session: u64,
    r: &ShareFetchRequest,
    now: Instant,
    parts: &mut BTreeMap<i32, FetchPartitionResponse>,
    endpoints: &mut Vec<NodeEndpoint>,
) -> bool {
    let Some(listed) = b.sessions().get(&(node, member.clone())).map(|s| s.parts.clone()) else {
        return false;
    };
    let mut remaining = fetch_budget(r, b.whole_batch());
    let mut found = false;
    for p in listed {
        let Some(leader) = b.leader(p) else {
            parts.entry(p).or_insert_with(|| blank(p)).error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0;
            found = true;
            continue;
        };
        let error = match b.partition_fault(p) {
            Some((code, l)) => {
                Some((code, l.map(|leader_id| LeaderIdAndEpoch { leader_id, leader_epoch: leader.leader_epoch })))
            }
            None if leader.leader_id != node => Some((ErrorCode::NOT_LEADER_OR_FOLLOWER.0, Some(leader))),
            None => None,
        };
        if let Some((code, current)) = error {
            let e = parts.entry(p).or_insert_with(|| blank(p));
            e.error_code = code;
            if let Some(l) = current {
                e.current_leader = l;
                add_endpoint(b, l.leader_id, endpoints);
            }
            found = true;
            continue;
        }
        if remaining == 0 {
            continue;
        }
        let holder = b.holder(node, member, session);
        let got = b.share_mut(p).map(|s| s.acquire(&holder, remaining, now)).unwrap_or_default();
        b.on_acquired(node, member, session, p, &got);
        if got.is_empty() {
            continue;
        }
        let taken: i64 = got.iter().map(|g| g.last_offset - g.first_offset + 1).sum();
        remaining = remaining.saturating_sub(usize::try_from(taken).unwrap_or(usize::MAX));
        found = true;
        let built = b.record_batches(member, p, &got);
        let e = parts.entry(p).or_insert_with(|| blank(p));
        match built {
            Ok(records) => {
                e.records = records;
                e.acquired_records = got;
            }
            Err(problem) => {
                // The fake cannot build them (too large for one batch): give them back.
                e.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.0;
                if let Some(share) = b.share_mut(p) {
                    share.unacquire(&got);
                }
                b.violation(format!("the fake broker cannot hand out partition {p}: {problem}"));
            }
        }
    }
    found
}

/// What a broker acquires for a batch_optimized fetch that names no `MaxRecords`.
const DEFAULT_MAX_RECORDS: usize = 500;

/// How many records `r` may acquire, across its partitions. A renewing fetch acquires none;
/// record_limit acquires exactly `MaxRecords` at most; batch_optimized takes `MaxRecords`
/// (500 when none) but at least `whole_batch` (a real broker hands out whole batches: the
/// public fake's `min_fetch_records`; 0 for none).
pub(crate) fn fetch_budget(r: &ShareFetchRequest, whole_batch: usize) -> usize {
    let asked = usize::try_from(r.max_records).unwrap_or(0);
    if r.is_renew_ack {
        return 0;
    }
    if r.share_acquire_mode == ACQUIRE_MODE_RECORD_LIMIT {
        return asked;
    }
    let asked = if asked == 0 { DEFAULT_MAX_RECORDS } else { asked };
    asked.max(whole_batch)
}

/// Partition `p`'s entry in an answer, before anything is written into it.
pub(crate) fn blank(p: i32) -> FetchPartitionResponse {
    FetchPartitionResponse { partition_index: p, current_leader: no_leader(), ..Default::default() }
}

/// The answer's topics: the one topic both fakes serve, with its partitions in order, or
/// none when no partition has anything to say.
pub(crate) fn topic_responses(
    topic_id: uuid::Uuid,
    parts: BTreeMap<i32, FetchPartitionResponse>,
) -> Vec<FetchTopicResponse> {
    if parts.is_empty() {
        return Vec::new();
    }
    vec![FetchTopicResponse { topic_id, partitions: parts.into_values().collect() }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker_model::test_broker::{TestBroker, LOCK};
    use crate::protocol::share::{
        AcknowledgementBatch, FetchPartition, FetchTopic, ACK_ACCEPT, ACK_RENEW, ACQUIRE_MODE_BATCH_OPTIMIZED,
    };

    fn member() -> String {
        "m".to_string()
    }

    fn cx(version: i16, now: Instant) -> Cx {
        Cx { node: 1, conn: 7, version, now }
    }

    /// A fetch of partition 0 at `epoch`, waiting up to `wait_ms`, with `acks` for offset 0.
    fn request(epoch: i32, wait_ms: i32, acks: &[i8]) -> ShareFetchRequest {
        let batches = acks
            .iter()
            .map(|t| AcknowledgementBatch { first_offset: 0, last_offset: 0, acknowledge_types: vec![*t] })
            .collect();
        ShareFetchRequest {
            share_session_epoch: epoch,
            max_wait_ms: wait_ms,
            max_records: 1,
            topics: vec![FetchTopic {
                topic_id: uuid::Uuid::from_u128(1),
                partitions: vec![FetchPartition { partition_index: 0, acknowledgement_batches: batches }],
            }],
            ..Default::default()
        }
    }

    fn answer(o: FetchOutcome<String>) -> ShareFetchResponse {
        match o {
            FetchOutcome::Answer(r) => r,
            FetchOutcome::Wait(w) => panic!("waits until {:?}", w.deadline),
        }
    }

    #[test]
    fn acknowledgement_results_wait_for_records_as_on_kafka_unless_the_broker_answers_them_at_once() {
        let now = Instant::now();
        for at_once in [false, true] {
            let mut b = TestBroker::new(&[1], 1);
            b.acks_at_once = at_once;
            let r = answer(handle(&mut b, &cx(2, now), &member(), &request(0, 0, &[])));
            assert_eq!(r.responses[0].partitions[0].acquired_records.len(), 1);
            let o = handle(&mut b, &cx(2, now), &member(), &request(1, 500, &[ACK_ACCEPT]));
            match o {
                FetchOutcome::Wait(w) => {
                    assert!(!at_once);
                    assert!(poll(&mut b, &w, now + Duration::from_millis(499)).is_none());
                    let r = poll(&mut b, &w, w.deadline).expect("answered at its deadline");
                    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0, "the ack's result kept");
                }
                FetchOutcome::Answer(r) => {
                    assert!(at_once);
                    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);
                }
            }
        }
    }

    #[test]
    fn a_renewing_fetch_renews_at_v2_and_is_refused_at_v1() {
        let now = Instant::now();
        let mut b = TestBroker::new(&[1], 1);
        answer(handle(&mut b, &cx(2, now), &member(), &request(0, 0, &[])));
        let mut renew = request(1, 0, &[ACK_RENEW]);
        (renew.is_renew_ack, renew.max_records) = (true, 0);
        let later = now + Duration::from_secs(5);
        let r = answer(handle(&mut b, &cx(1, later), &member(), &renew));
        assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, ErrorCode::INVALID_REQUEST.0);
        renew.share_session_epoch = 2;
        let r = answer(handle(&mut b, &cx(2, later), &member(), &renew));
        assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);
        assert_eq!(b.held_until(0, 0), Some(later + LOCK));
        assert!(r.responses[0].partitions[0].acquired_records.is_empty(), "a renewing fetch acquires nothing");
    }

    #[test]
    fn a_waiting_fetch_is_answered_when_its_session_is_replaced() {
        let now = Instant::now();
        let mut b = TestBroker::new(&[1], 0);
        let FetchOutcome::Wait(w) = handle(&mut b, &cx(2, now), &member(), &request(0, 500, &[])) else {
            panic!("an empty log has nothing to answer with")
        };
        assert!(poll(&mut b, &w, now).is_none());
        answer(handle(&mut b, &cx(2, now), &member(), &request(0, 0, &[])));
        let r = poll(&mut b, &w, now).expect("its session is gone");
        assert!(r.responses.is_empty());
    }

    fn fetch(max_records: i32, mode: i8, renew: bool) -> ShareFetchRequest {
        ShareFetchRequest { max_records, share_acquire_mode: mode, is_renew_ack: renew, ..Default::default() }
    }

    #[test]
    fn record_limit_is_exact_and_batch_optimized_takes_whole_batches() {
        assert_eq!(fetch_budget(&fetch(3, ACQUIRE_MODE_RECORD_LIMIT, false), 10), 3, "record_limit: exactly");
        assert_eq!(fetch_budget(&fetch(0, ACQUIRE_MODE_RECORD_LIMIT, false), 0), 0);
        assert_eq!(fetch_budget(&fetch(3, ACQUIRE_MODE_BATCH_OPTIMIZED, false), 10), 10, "a whole batch");
        assert_eq!(fetch_budget(&fetch(0, ACQUIRE_MODE_BATCH_OPTIMIZED, false), 0), DEFAULT_MAX_RECORDS);
        assert_eq!(fetch_budget(&fetch(-5, ACQUIRE_MODE_BATCH_OPTIMIZED, false), 0), DEFAULT_MAX_RECORDS);
        assert_eq!(
            fetch_budget(&fetch(0, ACQUIRE_MODE_BATCH_OPTIMIZED, true), 10),
            0,
            "a renewing fetch acquires nothing"
        );
    }

    #[test]
    fn an_answer_with_nothing_to_say_lists_no_topic() {
        let id = uuid::Uuid::from_u128(7);
        assert!(topic_responses(id, BTreeMap::new()).is_empty());
        let parts = BTreeMap::from([(2, blank(2)), (0, blank(0))]);
        let topics = topic_responses(id, parts);
        let order: Vec<i32> = topics[0].partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!((topics.len(), order), (1, vec![0, 2]));
        assert_eq!(topics[0].partitions[0].current_leader, no_leader());
    }
}
