//! The share RPCs on the simulated brokers: ShareFetch (acquire, with piggybacked acks) and
//! ShareAcknowledge (RENEW at v2), as a 4.2+ broker answers them. Sessions, epochs and the
//! acknowledgement checks are the broker model's (`crate::broker_model`); here they meet the
//! seeded faults and the ledger.
//!
//! A fetch that finds nothing to hand out waits (long poll): the broker keeps it as
//! [`Parked`] and answers when records become available or its `MaxWaitMs` passes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::broker_model::acknowledge::{validate_batches, AckRefusal};
use crate::broker_model::sessions::{SessionRefusal, SessionRequest, SessionUse};
use crate::broker_model::share_fetch::{blank, fetch_budget, no_leader, topic_responses};
use crate::error::ErrorCode;
use crate::protocol::share::{
    AcknowledgePartitionResponse, AcknowledgeTopicResponse, AcknowledgementBatch, FetchPartitionResponse,
    FetchTopicResponse, LeaderIdAndEpoch, NodeEndpoint, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
    ShareFetchRequest, ShareFetchResponse,
};
use crate::share::acks::AckKind;

use super::cluster::SimCluster;
use super::state::{ClientId, Holder};

/// A fetch waiting for records.
#[derive(Debug, Clone)]
pub(crate) struct Parked {
    pub node: i32,
    pub client: ClientId,
    pub session: u64,
    pub request: ShareFetchRequest,
    pub deadline: Instant,
}

/// What a ShareFetch gets: an answer now, or a wait.
#[derive(Debug)]
pub(crate) enum FetchOutcome {
    Answer(ShareFetchResponse),
    Wait(Parked),
}

fn endpoint(node: i32) -> NodeEndpoint {
    NodeEndpoint { node_id: node, host: format!("sim-broker-{node}"), port: 9092, rack: None }
}

impl SimCluster {
    /// Checks a share request's session and epoch by the broker model's rules; opens or
    /// advances the session. Returns the top-level error code and the session id (0 when
    /// none). The faults come first (a forced error, a session limit); then Kafka's rules: a
    /// wrong epoch is refused and the session kept, epoch 0 replaces the session and leaves
    /// what the old one held to its locks (nothing can acknowledge those records meanwhile:
    /// the sim's holder is the session).
    fn check_session(&mut self, node: i32, client: ClientId, epoch: i32, request: SessionRequest) -> (i16, u64) {
        let key = (node, client);
        if let Some(code) = self.forced_errors.remove(&key) {
            let forgets =
                code == ErrorCode::SHARE_SESSION_NOT_FOUND.0 || code == ErrorCode::INVALID_SHARE_SESSION_EPOCH.0;
            if forgets && self.sessions.end(&key).is_some() {
                self.release_member(node, client);
            }
            return (code, 0);
        }
        let opens = matches!(request, SessionRequest::Fetch { has_acks: false, .. });
        if epoch == 0 && opens && self.session_limit.contains(&node) {
            return (ErrorCode::SHARE_SESSION_LIMIT_REACHED.0, 0);
        }
        match self.sessions.take(&key, epoch, request) {
            // A replaced session's records stay acquired, as on Kafka: they go back when their
            // locks lapse, or with the member's others when its session here ends.
            Ok(SessionUse::Opened { id, .. } | SessionUse::Next { id } | SessionUse::Final { id }) => (0, id),
            Err(refusal) => {
                match refusal {
                    SessionRefusal::AcksOnInitialFetch => {
                        self.violation(format!("client {client}: an epoch-0 ShareFetch to broker {node} carried acks"));
                    }
                    SessionRefusal::InvalidEpoch { .. }
                    | SessionRefusal::NotFound
                    | SessionRefusal::InitialAcknowledge => {}
                }
                (refusal.code().0, 0)
            }
        }
    }

    /// Ends a session closed by epoch -1: what it still holds goes back.
    fn close_session(&mut self, node: i32, client: ClientId) {
        if self.sessions.end(&(node, client)).is_some() {
            self.release_member(node, client);
        }
    }

    /// A connection closed: the sessions it opened end.
    pub(crate) fn conn_closed(&mut self, node: i32, conn: u64) {
        for ((n, c), _) in self.sessions.end_where(|(n, _), s| *n == node && s.conn == conn) {
            self.release_member(n, c);
        }
    }

    /// Applies one partition's acknowledgement batches from a client's session; returns the
    /// partition's error code. Acks that break the protocol or land on the wrong broker,
    /// session or delivery are violations (a correct client never sends them).
    #[allow(clippy::too_many_arguments)]
    fn apply_acks(
        &mut self,
        node: i32,
        client: ClientId,
        session: u64,
        p: i32,
        batches: &[AcknowledgementBatch],
        renew_allowed: bool,
        now: Instant,
        what: &str,
    ) -> i16 {
        if self.partition(p).is_some() {
            if let Some(code) = self.forced_ack_errors.remove(&(node, client)) {
                // Refused unapplied: the records stay acquired until their locks lapse.
                return code;
            }
        }
        let Some(part) = self.partition(p) else {
            self.violation(format!("{what}: client {client} acked unknown partition {p}"));
            return ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0;
        };
        // The shape first (KafkaApis does, before it looks for the leader). Offsets outside
        // the log are refused here already, before the routing check reads their deliveries
        // (with the model's code; a correct client never sends them).
        let end = part.share.log_end();
        let outside = batches.iter().find(|b| b.first_offset < 0 || b.last_offset >= end);
        if let Err(e) = validate_batches(batches, renew_allowed) {
            match e {
                AckRefusal::TypeNotAllowed { offset, ty } => {
                    self.violation(format!("{what}: client {client} sent type {ty} for partition {p} offset {offset}"))
                }
                _ => self
                    .violation(format!("{what}: client {client} sent invalid batches for partition {p}: {batches:?}")),
            }
            return e.code().0;
        }
        if let Some(b) = outside {
            let refusal = AckRefusal::OutsideLog { first: b.first_offset, last: b.last_offset, log_end: end };
            self.violation(format!("{what}: client {client} acked outside the log of partition {p}: {refusal:?}"));
            return refusal.code().0;
        }
        let acks: Vec<(i64, i8)> = batches
            .iter()
            .flat_map(|b| {
                (b.first_offset..=b.last_offset).enumerate().map(move |(i, o)| {
                    (o, if b.acknowledge_types.len() == 1 { b.acknowledge_types[0] } else { b.acknowledge_types[i] })
                })
            })
            .collect();
        // Routing: each ack must go to the broker and session that delivered the record, once.
        for &(o, t) in &acks {
            let hist = &self.parts[p as usize].log[o as usize].history;
            let mine = hist.iter().rev().find(|(c, d)| *c == client && d.node == node && d.session == session);
            let problem = match mine {
                Some((_, d)) if d.acked => Some(format!("twice (delivery {})", d.count)),
                Some(_) => None,
                None => Some(match hist.iter().rev().find(|(c, _)| *c == client) {
                    None => "never delivered to it".to_string(),
                    Some((_, d)) => format!(
                        "on broker {node} session {session}; it was delivered by broker {} session {} (delivery {})",
                        d.node, d.session, d.count
                    ),
                }),
            };
            if let Some(problem) = problem {
                let kind = ack_kind(t);
                self.violation(format!("{what}: client {client} acked {kind:?} p{p} offset {o} {problem}"));
            }
        }
        if self.partition(p).is_some_and(|x| x.leader != Some(node)) {
            return ErrorCode::NOT_LEADER_OR_FOLLOWER.0;
        }
        // All or nothing per partition, as the broker does (the model's check).
        let holder = Holder { client, node, session };
        let applied = self.parts[p as usize].share.acknowledge(&holder, batches, renew_allowed, now);
        let applied = match applied {
            Ok(applied) => {
                self.version += 1;
                applied
            }
            Err(refusal) => {
                for &(o, t) in &acks {
                    self.ledger.refused(client, p, o, ack_kind(t));
                }
                return refusal.code().0;
            }
        };
        for (o, kind, delivery) in applied {
            if kind != AckKind::Renew {
                let log = &mut self.parts[p as usize].log[o as usize];
                let mine =
                    log.history.iter_mut().rev().find(|(c, d)| *c == client && d.node == node && d.session == session);
                if let Some((_, d)) = mine {
                    d.acked = true;
                }
            }
            self.ledger.applied(client, node, session, p, o, delivery, kind);
        }
        0
    }

    /// Answers a ShareFetch that reached broker `node` on connection `conn`.
    pub(crate) fn share_fetch(
        &mut self,
        node: i32,
        client: ClientId,
        conn: u64,
        r: &ShareFetchRequest,
        now: Instant,
    ) -> FetchOutcome {
        let mut resp =
            ShareFetchResponse { acquisition_lock_timeout_ms: self.cfg.lock.as_millis() as i32, ..Default::default() };
        if !self.group.is_member(client) {
            // A broker serves only members of the group (4.2+ checks the member id).
            resp.error_code = ErrorCode::UNKNOWN_MEMBER_ID.0;
            return FetchOutcome::Answer(resp);
        }
        let has_acks = r.topics.iter().flat_map(|t| &t.partitions).any(|p| !p.acknowledgement_batches.is_empty());
        let request = SessionRequest::Fetch { conn, has_acks };
        let (code, session) = self.check_session(node, client, r.share_session_epoch, request);
        if code != 0 {
            resp.error_code = code;
            return FetchOutcome::Answer(resp);
        }
        if r.is_renew_ack && (r.max_records != 0 || r.max_wait_ms != 0 || r.min_bytes != 0 || r.max_bytes != 0) {
            self.violation(format!("client {client}: a renewing ShareFetch asked for records"));
        }
        let mut parts: BTreeMap<i32, FetchPartitionResponse> = BTreeMap::new();
        if let Some(s) = self.sessions.get_mut(&(node, client)) {
            let added = r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.partition_index);
            s.update(added, r.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().copied()));
        }
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            if p.acknowledgement_batches.is_empty() {
                continue;
            }
            let i = p.partition_index;
            let c = self.apply_acks(
                node,
                client,
                session,
                i,
                &p.acknowledgement_batches,
                r.is_renew_ack,
                now,
                "ShareFetch",
            );
            let e = parts.entry(i).or_insert_with(|| blank(i));
            e.acknowledge_error_code = c;
            if c == ErrorCode::NOT_LEADER_OR_FOLLOWER.0 {
                e.current_leader = self.leader_of(i);
            }
        }
        if r.share_session_epoch == -1 {
            self.close_session(node, client);
            resp.responses = self.topic_responses(parts);
            return FetchOutcome::Answer(resp);
        }
        let found = self.gather(node, client, session, r, now, &mut parts, &mut resp.node_endpoints);
        if found || !parts.is_empty() || r.max_wait_ms <= 0 {
            resp.responses = self.topic_responses(parts);
            return FetchOutcome::Answer(resp);
        }
        let deadline = now + Duration::from_millis(r.max_wait_ms as u64);
        FetchOutcome::Wait(Parked { node, client, session, request: r.clone(), deadline })
    }

    /// A ShareFetch leaves `client` for broker `node`: the partitions it lists, and those the
    /// broker's session will list once it takes it, must all be assigned to the client, as far
    /// as it knows (`Ledger::session_lists`, LANDSCAPE bug 8). The client forgets a partition
    /// that moved away with its next fetch to that broker (its acks go by ShareAcknowledge,
    /// which never adds one), and only a fetch acquires: so nothing of it is acquired for the
    /// client while it is not assigned. Checked when the request leaves: one request is in flight per
    /// session, so the broker's session is now what the request will find (or gone, and the
    /// request fails).
    pub(crate) fn fetch_sent(&mut self, client: ClientId, node: i32, r: &ShareFetchRequest) {
        let listed = || r.topics.iter().flat_map(|t| &t.partitions);
        let with_acks = listed().filter(|p| !p.acknowledgement_batches.is_empty()).map(|p| p.partition_index);
        self.ledger.acks_sent(client, with_acks);
        let forgotten: BTreeSet<i32> =
            r.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().copied()).collect();
        if !forgotten.is_empty() {
            self.ledger.forgets += 1;
        }
        let mut after = match r.share_session_epoch {
            0 => BTreeSet::new(),
            -1 => return,
            epoch => match self.sessions.get(&(node, client)) {
                Some(s) if s.epoch == epoch => s.parts.clone(),
                _ => return,
            },
        };
        after.extend(listed().map(|p| p.partition_index));
        after.retain(|p| !forgotten.contains(p));
        // A partition listed and forgotten at once leaves no trace on the broker, but listing
        // one that is not assigned (for its acks, say) is the bug all the same.
        after.extend(listed().map(|p| p.partition_index));
        self.ledger.session_lists(client, node, &after);
    }

    /// Looks again at a waiting fetch: its answer if records came or its time is up.
    pub(crate) fn retry_parked(&mut self, w: &Parked, now: Instant) -> Option<ShareFetchResponse> {
        let mut resp =
            ShareFetchResponse { acquisition_lock_timeout_ms: self.cfg.lock.as_millis() as i32, ..Default::default() };
        let alive = self.sessions.get(&(w.node, w.client)).is_some_and(|s| s.id == w.session);
        let mut parts = BTreeMap::new();
        let found =
            alive && self.gather(w.node, w.client, w.session, &w.request, now, &mut parts, &mut resp.node_endpoints);
        if found || !alive || now >= w.deadline {
            resp.responses = self.topic_responses(parts);
            return Some(resp);
        }
        None
    }

    /// One pass over the session's partitions: errors and acquired records. True if anything
    /// worth answering at once was found.
    #[allow(clippy::too_many_arguments)]
    fn gather(
        &mut self,
        node: i32,
        client: ClientId,
        session: u64,
        r: &ShareFetchRequest,
        now: Instant,
        parts: &mut BTreeMap<i32, FetchPartitionResponse>,
        endpoints: &mut Vec<NodeEndpoint>,
    ) -> bool {
        let Some(s) = self.sessions.get(&(node, client)) else {
            return false;
        };
        let mut remaining = fetch_budget(r, 0);
        let mut found = false;
        for p in s.parts.clone() {
            let Some(part) = self.partition(p) else {
                parts.entry(p).or_insert_with(|| blank(p)).error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0;
                found = true;
                continue;
            };
            if part.leader != Some(node) {
                let e = parts.entry(p).or_insert_with(|| blank(p));
                e.error_code = ErrorCode::NOT_LEADER_OR_FOLLOWER.0;
                e.current_leader = self.leader_of(p);
                if let Some(l) = part.leader {
                    if !endpoints.iter().any(|x| x.node_id == l) {
                        endpoints.push(endpoint(l));
                    }
                }
                found = true;
                continue;
            }
            if remaining == 0 {
                continue;
            }
            let got = self.acquire(p, client, node, session, remaining, now);
            if got.is_empty() {
                continue;
            }
            remaining -= got.iter().map(|g| (g.last_offset - g.first_offset + 1) as usize).sum::<usize>();
            found = true;
            let corrupt = self.corrupt_next.remove(&p);
            let (records, corrupted) = self.records(p, &got, corrupt);
            if let Some((first, last)) = corrupted {
                for r in &got {
                    for o in r.first_offset.max(first)..=r.last_offset.min(last) {
                        self.ledger.corrupted(client, p, o, r.delivery_count);
                    }
                }
            }
            let e = parts.entry(p).or_insert_with(|| blank(p));
            e.records = records;
            e.acquired_records = got;
        }
        found
    }

    fn leader_of(&self, p: i32) -> LeaderIdAndEpoch {
        match self.partition(p) {
            Some(part) => LeaderIdAndEpoch { leader_id: part.leader.unwrap_or(-1), leader_epoch: part.leader_epoch },
            None => no_leader(),
        }
    }

    fn topic_responses(&self, parts: BTreeMap<i32, FetchPartitionResponse>) -> Vec<FetchTopicResponse> {
        topic_responses(self.topic_id, parts)
    }

    /// Answers a ShareAcknowledge that reached broker `node` (v2 when the cluster speaks it).
    /// A ShareAcknowledge opens no session: its connection (`_conn`) is not read.
    pub(crate) fn share_acknowledge(
        &mut self,
        node: i32,
        client: ClientId,
        _conn: u64,
        r: &ShareAcknowledgeRequest,
        now: Instant,
    ) -> ShareAcknowledgeResponse {
        let mut resp = ShareAcknowledgeResponse {
            acquisition_lock_timeout_ms: self.cfg.v2.then_some(self.cfg.lock.as_millis() as i32),
            ..Default::default()
        };
        if r.is_renew_ack && !self.cfg.v2 {
            self.violation(format!("client {client}: RENEW sent to a v1 broker {node}"));
            resp.error_code = ErrorCode::INVALID_REQUEST.0;
            return resp;
        }
        let request = SessionRequest::Acknowledge;
        let (code, session) = self.check_session(node, client, r.share_session_epoch, request);
        if code != 0 {
            resp.error_code = code;
            return resp;
        }
        let mut partitions = Vec::new();
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            let i = p.partition_index;
            let renew_ok = r.is_renew_ack && self.cfg.v2;
            let c = self.apply_acks(
                node,
                client,
                session,
                i,
                &p.acknowledgement_batches,
                renew_ok,
                now,
                "ShareAcknowledge",
            );
            let mut leader = no_leader();
            if c == ErrorCode::NOT_LEADER_OR_FOLLOWER.0 {
                leader = self.leader_of(i);
                if leader.leader_id >= 0 && !resp.node_endpoints.iter().any(|x| x.node_id == leader.leader_id) {
                    resp.node_endpoints.push(endpoint(leader.leader_id));
                }
            }
            partitions.push(AcknowledgePartitionResponse {
                partition_index: i,
                error_code: c,
                error_message: None,
                current_leader: leader,
            });
        }
        if r.share_session_epoch == -1 {
            self.close_session(node, client);
        }
        if !partitions.is_empty() {
            resp.responses = vec![AcknowledgeTopicResponse { topic_id: self.topic_id, partitions }];
        }
        resp
    }
}

/// The kind of a wire type that passed `validate_batches` (types there are 0..=4).
fn ack_kind(t: i8) -> AckKind {
    match t {
        0 => AckKind::Gap,
        1 => AckKind::Accept,
        2 => AckKind::Release,
        3 => AckKind::Reject,
        _ => AckKind::Renew,
    }
}
