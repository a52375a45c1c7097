//! ShareFetch and ShareAcknowledge, answered with the crate's own codec.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::protocol::records::{BatchBuilder, RecordInput};
use crate::protocol::share::{
    AcknowledgePartitionResponse, AcknowledgeTopicResponse, AcquiredRecords, FetchPartitionResponse,
    FetchTopicResponse, LeaderIdAndEpoch, NodeEndpoint, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
    ShareFetchRequest, ShareFetchResponse,
};
use bytes::{BufMut, Bytes, BytesMut};

use super::script::{Action, Effects};
use super::state::{Partition, Shared, State};
use super::wire::Out;
use crate::broker_model::sessions::{SessionRefusal, SessionRequest};
use crate::broker_model::share_fetch::{self, blank, fetch_budget};
use crate::error::ErrorCode;

fn reply_fetch(shared: &Shared, resp: &ShareFetchResponse, version: i16) -> Out {
    let mut buf = BytesMut::new();
    match resp.encode(version, &mut buf) {
        Ok(()) => Out::Reply(buf),
        Err(e) => {
            shared.lock().violation(format!("fake broker failed to encode ShareFetch response: {e}"));
            Out::Drop
        }
    }
}

fn reply_ack(shared: &Shared, resp: &ShareAcknowledgeResponse, version: i16) -> Out {
    let mut buf = BytesMut::new();
    match resp.encode(version, &mut buf) {
        Ok(()) => Out::Reply(buf),
        Err(e) => {
            shared.lock().violation(format!("fake broker failed to encode ShareAcknowledge response: {e}"));
            Out::Drop
        }
    }
}

/// Session bookkeeping common to both APIs, by the broker model's rules (`broker_model/sessions.rs`):
/// opens, advances or refuses the member's session on `node`. Returns a top-level error code
/// to answer with (0: go on). An epoch out of sequence, a ShareAcknowledge at epoch 0 and
/// acks on an epoch-0 ShareFetch are client bugs: violations. A replaced session's records
/// stay acquired, as on Kafka: they go back when their locks lapse.
fn check_session(st: &mut State, node: i32, member: &str, epoch: i32, request: SessionRequest) -> i16 {
    let key = (node, member.to_string());
    let used = st.sessions.take(&key, epoch, request);
    let Err(refusal) = used else {
        return 0;
    };
    let problem = match &refusal {
        SessionRefusal::NotFound => None,
        SessionRefusal::InitialAcknowledge => Some(format!("ShareAcknowledge at epoch 0 (node {node})")),
        SessionRefusal::AcksOnInitialFetch => Some(format!("ShareFetch at epoch 0 carrying acks (node {node})")),
        SessionRefusal::InvalidEpoch { expected, got } => {
            Some(format!("{} epoch {got} on node {node}, session expects {expected}", request.api()))
        }
    };
    if let Some(problem) = problem {
        st.violation(problem);
    }
    refusal.code().0
}

fn leader_of(part: &Partition) -> LeaderIdAndEpoch {
    LeaderIdAndEpoch { leader_id: part.leader, leader_epoch: part.leader_epoch }
}

fn endpoint(st: &State, node: i32) -> Option<NodeEndpoint> {
    st.ports.get(&node).map(|port| NodeEndpoint {
        node_id: node,
        host: "127.0.0.1".into(),
        port: *port as i32,
        rack: None,
    })
}

pub(super) async fn fetch(
    shared: &Shared,
    node: i32,
    conn: u64,
    version: i16,
    r: &ShareFetchRequest,
    fx: &Effects,
) -> Out {
    let member = r.member_id.as_str();
    let mut resp = ShareFetchResponse::default();
    let mut parts: BTreeMap<i32, FetchPartitionResponse> = BTreeMap::new();
    {
        let mut st = shared.lock();
        resp.acquisition_lock_timeout_ms = st.cfg.lock_timeout_ms;
        if let Some(Action::TopLevelError(c)) = fx.terminal {
            if c == ErrorCode::SHARE_SESSION_NOT_FOUND.0 || c == ErrorCode::INVALID_SHARE_SESSION_EPOCH.0 {
                st.drop_session(node, member);
            }
            resp.error_code = c;
            drop(st);
            return reply_fetch(shared, &resp, version);
        }
        if let Some(t) = r.topics.iter().find(|t| t.topic_id != st.topic_id) {
            st.violation(format!("ShareFetch names unknown topic id {}", t.topic_id));
        }
        let has_acks = r.topics.iter().flat_map(|t| &t.partitions).any(|p| !p.acknowledgement_batches.is_empty());
        let epoch = r.share_session_epoch;
        let c = check_session(&mut st, node, member, epoch, SessionRequest::Fetch { conn, has_acks });
        if c != 0 {
            resp.error_code = c;
            drop(st);
            return reply_fetch(shared, &resp, version);
        }
        if let Some(s) = st.sessions.get_mut(&(node, member.to_string())) {
            let added = r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.partition_index);
            s.update(added, r.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().copied()));
        }
        let now = Instant::now();
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            if p.acknowledgement_batches.is_empty() {
                continue;
            }
            let i = p.partition_index;
            let c = fx.ack_error(i).unwrap_or_else(|| {
                st.apply_acks(node, member, i, &p.acknowledgement_batches, false, now, "ShareFetch")
            });
            let e = parts.entry(i).or_insert_with(|| blank(i));
            e.acknowledge_error_code = c;
            if c == ErrorCode::NOT_LEADER_OR_FOLLOWER.0 {
                if let Some(part) = st.partition(i) {
                    e.current_leader = leader_of(part);
                }
            }
        }
        if epoch == -1 {
            st.drop_session(node, member);
            drop(st);
            resp.responses = topic_responses(shared, parts);
            return reply_fetch(shared, &resp, version);
        }
    }
    // Long poll: answer as soon as there are records or errors, else after MaxWaitMs.
    let deadline = Instant::now() + Duration::from_millis(r.max_wait_ms.max(0) as u64);
    loop {
        let done = {
            let mut st = shared.lock();
            let found = gather(&mut st, node, member, r, fx, &mut parts, &mut resp.node_endpoints);
            found || st.sessions.get(&(node, member.to_string())).is_none()
        };
        if done || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    resp.responses = topic_responses(shared, parts);
    reply_fetch(shared, &resp, version)
}

fn topic_responses(shared: &Shared, parts: BTreeMap<i32, FetchPartitionResponse>) -> Vec<FetchTopicResponse> {
    share_fetch::topic_responses(shared.lock().topic_id, parts)
}

/// One pass over the session's partitions: errors and acquired records. True if anything
/// worth answering at once was found.
fn gather(
    st: &mut State,
    node: i32,
    member: &str,
    r: &ShareFetchRequest,
    fx: &Effects,
    parts: &mut BTreeMap<i32, FetchPartitionResponse>,
    endpoints: &mut Vec<NodeEndpoint>,
) -> bool {
    let Some(session) = st.sessions.get(&(node, member.to_string())) else {
        return false;
    };
    let mut remaining = fetch_budget(r, st.cfg.min_fetch_records);
    let mut found = false;
    for p in session.parts.clone() {
        let blank = blank(p);
        let Some((leader_id, leader_epoch)) = st.partition(p).map(|part| (part.leader, part.leader_epoch)) else {
            parts.entry(p).or_insert(blank).error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0;
            found = true;
            continue;
        };
        let error = match fx.partition_error(p) {
            Some((c, leader)) => Some((c, leader)),
            None if leader_id != node => Some((ErrorCode::NOT_LEADER_OR_FOLLOWER.0, Some(leader_id))),
            None => None,
        };
        if let Some((c, leader)) = error {
            let e = parts.entry(p).or_insert(blank);
            e.error_code = c;
            if let Some(l) = leader {
                e.current_leader = LeaderIdAndEpoch { leader_id: l, leader_epoch };
                if let Some(ep) = endpoint(st, l) {
                    if !endpoints.contains(&ep) {
                        endpoints.push(ep);
                    }
                }
            }
            found = true;
            continue;
        }
        if remaining == 0 {
            continue;
        }
        let got = st.acquire(p, member, remaining, Instant::now());
        if got.is_empty() {
            continue;
        }
        let taken: i64 = got.iter().map(|r| r.last_offset - r.first_offset + 1).sum();
        remaining = remaining.saturating_sub(taken as usize);
        found = true;
        let e = parts.entry(p).or_insert(blank);
        let built = match st.partition(p) {
            Some(part) => build_records(part, p, &got),
            None => Err("the partition is gone".to_string()), // `acquire` just found it
        };
        match built {
            Ok((records, acquired)) => {
                e.records = records;
                e.acquired_records = acquired;
            }
            Err(problem) => {
                // Records too large for one batch: give them back and answer an error.
                e.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.0;
                st.release(p, &got);
                st.violation(format!("the fake broker cannot hand out partition {p}: {problem}"));
            }
        }
    }
    found
}

/// The record batches for the acquired runs `got`, and the runs; an error if the records do
/// not fit in a batch.
pub(super) fn build_records(
    part: &Partition,
    p: i32,
    got: &[AcquiredRecords],
) -> Result<(Option<Bytes>, Vec<AcquiredRecords>), String> {
    let ranges = got.to_vec();
    let end = part.share.log_end();
    let mut data: Vec<i64> = Vec::new();
    let mut gap_runs: Vec<(i64, i64)> = Vec::new();
    for r in &ranges {
        let (lo, hi) = if part.pad {
            ((r.first_offset - 1).max(0), (r.last_offset + 1).min(end - 1))
        } else {
            (r.first_offset, r.last_offset)
        };
        for o in lo..=hi {
            if part.gaps.contains(&o) {
                match gap_runs.last_mut() {
                    Some(g) if g.1 + 1 == o => g.1 = o,
                    _ => gap_runs.push((o, o)),
                }
            } else {
                data.push(o);
            }
        }
    }
    data.sort_unstable();
    data.dedup();
    let mut batches: Vec<(i64, Bytes)> = Vec::new();
    let mut run: Vec<i64> = Vec::new();
    // A run of consecutive offsets is one batch; corrupt offsets get batches of their own.
    let corrupt = |o: &i64| part.corrupt.contains(o);
    let batch = |run: &[i64]| -> Result<(i64, Bytes), String> {
        let (base, b) = data_batch(part, p, run)?;
        Ok((base, if corrupt(&base) { bad_crc(b) } else { b }))
    };
    for o in data {
        if run.last().is_some_and(|l| l + 1 != o || corrupt(l) != corrupt(&o)) {
            batches.push(batch(&run)?);
            run.clear();
        }
        run.push(o);
    }
    if !run.is_empty() {
        batches.push(batch(&run)?);
    }
    if part.empty_batches {
        batches.extend(gap_runs.iter().map(|&(a, b)| (a, crate::protocol::records::empty_batch(a, b))));
    }
    batches.sort_by_key(|(base, _)| *base);
    let mut out = BytesMut::new();
    for (_, b) in batches {
        out.put_slice(&b);
    }
    let records = (!out.is_empty()).then(|| out.freeze());
    Ok((records, ranges))
}

/// The value of the record the fake generates at `offset` of partition `p` (`"p{p}-{offset}"`;
/// its key is `"k{offset}"`).
pub fn record_value(p: i32, offset: i64) -> String {
    format!("p{p}-{offset}")
}

/// One batch holding the records at consecutive `offsets` (not empty) of partition `p`.
fn data_batch(part: &Partition, p: i32, offsets: &[i64]) -> Result<(i64, Bytes), String> {
    let mut b = BatchBuilder::new();
    for &o in offsets {
        let produced = usize::try_from(o).ok().and_then(|i| part.records.get(i)).and_then(|r| r.as_deref());
        let generated;
        let record = match produced {
            Some(r) => r,
            None => {
                generated = RecordInput {
                    key: Some(Bytes::from(format!("k{o}"))),
                    value: Some(Bytes::from(record_value(p, o))),
                    headers: Vec::new(),
                    timestamp: 1_700_000_000_000 + o,
                };
                &generated
            }
        };
        b.push(record).map_err(|e| format!("offset {o}: {e}"))?;
    }
    let batch = b.finish(part.compression).map_err(|e| e.to_string())?;
    let mut batch = BytesMut::from(&batch[..]);
    // The base offset is outside the CRC: patching it keeps the batch valid.
    batch[..8].copy_from_slice(&offsets[0].to_be_bytes());
    Ok((offsets[0], batch.freeze()))
}

/// `batch` with its stored CRC flipped: only the checksum is wrong.
fn bad_crc(batch: Bytes) -> Bytes {
    let mut b = BytesMut::from(&batch[..]);
    b[17] ^= 0xff;
    b.freeze()
}

pub(super) fn acknowledge(shared: &Shared, node: i32, version: i16, r: &ShareAcknowledgeRequest, fx: &Effects) -> Out {
    let member = r.member_id.as_str();
    let mut st = shared.lock();
    let mut resp = ShareAcknowledgeResponse {
        acquisition_lock_timeout_ms: (version >= 2).then_some(st.cfg.lock_timeout_ms),
        ..Default::default()
    };
    if let Some(Action::TopLevelError(c)) = fx.terminal {
        if c == ErrorCode::SHARE_SESSION_NOT_FOUND.0 || c == ErrorCode::INVALID_SHARE_SESSION_EPOCH.0 {
            st.drop_session(node, member);
        }
        resp.error_code = c;
        drop(st);
        return reply_ack(shared, &resp, version);
    }
    let epoch = r.share_session_epoch;
    let c = check_session(&mut st, node, member, epoch, SessionRequest::Acknowledge);
    if c != 0 {
        resp.error_code = c;
        drop(st);
        return reply_ack(shared, &resp, version);
    }
    let renew_ok = r.is_renew_ack && version >= 2;
    let now = Instant::now();
    let mut partitions = Vec::new();
    for p in r.topics.iter().flat_map(|t| &t.partitions) {
        let i = p.partition_index;
        let c = fx.ack_error(i).unwrap_or_else(|| {
            st.apply_acks(node, member, i, &p.acknowledgement_batches, renew_ok, now, "ShareAcknowledge")
        });
        let mut leader = share_fetch::no_leader();
        if c == ErrorCode::NOT_LEADER_OR_FOLLOWER.0 {
            if let Some(part) = st.partition(i) {
                leader = leader_of(part);
                if let Some(ep) = endpoint(&st, part.leader) {
                    if !resp.node_endpoints.contains(&ep) {
                        resp.node_endpoints.push(ep);
                    }
                }
            }
        }
        partitions.push(AcknowledgePartitionResponse {
            partition_index: i,
            error_code: c,
            error_message: None,
            current_leader: leader,
        });
    }
    if epoch == -1 {
        st.drop_session(node, member);
    }
    if !partitions.is_empty() {
        resp.responses = vec![AcknowledgeTopicResponse { topic_id: st.topic_id, partitions }];
    }
    drop(st);
    reply_ack(shared, &resp, version)
}
