//! Share sessions on the wire: sending ShareFetch / ShareAcknowledge, handling their answers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::pace::FetchPlan;
use super::{Driver, Event, Fetched, Node};
use crate::cluster::{BrokerInfo, TrafficClass};
use crate::consumer::config::AcquireMode;
use crate::consumer::record::ConsumerRecord;
use crate::error::{check, Context, Error, ErrorCode, Result};
use crate::protocol::records::{decode_acquired_with, AcquiredRange, DecodeOptions};
use crate::protocol::share::{
    FetchPartitionResponse, NodeEndpoint, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse, ACK_REJECT, ACK_RELEASE,
};
use crate::share::acks::{PartitionAcks, GAP};
use crate::share::session::Sent;
use crate::share::TopicIdPartition;

type AckResults = BTreeMap<TopicIdPartition, (Vec<i64>, Result<()>)>;

/// The acknowledgement answers of one response: results to report, and the partitions whose
/// acks were queued again (`ack_retry.rs`).
#[derive(Default)]
struct AckAnswers {
    results: AckResults,
    retried: BTreeSet<TopicIdPartition>,
}

impl Driver {
    pub(super) fn drive_nodes(&mut self, now: Instant) {
        if self.closing.is_some() {
            return;
        }
        let group = self.cfg.group_id.clone();
        let member = self.membership.member_id().to_string();
        let renew_ok = self.shared.renew_supported.load(Ordering::Relaxed);
        let mut ids: Vec<i32> = self.nodes.keys().copied().collect();
        ids.sort_unstable();
        let fetch_turn = self.record_limit_pick(&ids, now);
        let urgent_nodes: std::collections::HashSet<i32> =
            self.commits.iter().flat_map(|w| w.nodes.iter().copied()).collect();
        let waiting = self.waiting_for_records();
        for n in self.nodes.values_mut() {
            n.pace.note_acks(n.session.has_acks(), now);
        }
        for id in ids {
            // A session with a request in flight (the usual case) has nothing to decide.
            let busy = self.nodes.get(&id).is_none_or(|n| n.session.in_flight() || n.retry_at.is_some_and(|t| t > now));
            if busy {
                continue;
            }
            let plan = self.fetch_plan(id, fetch_turn, now);
            let overdue = self.acks_overdue(id, now);
            let params = self.fetch_params(plan == FetchPlan::NoWait, now);
            let Some(n) = self.nodes.get_mut(&id) else {
                continue;
            };
            n.retry_at = None;
            // Acks someone waits for (commit, close) or that no fetch can carry go now, by
            // ShareAcknowledge: piggybacked on a long poll, their results would wait for it.
            // RELEASEs too, unless a poll waits (its fetch carries them): released records
            // are for the other members, now.
            let urgent = urgent_nodes.contains(&id)
                || n.session.has_acks_outside_wanted()
                || (n.pace.releases_queued && !waiting);
            let send_ack = |n: &mut Node, renew: bool| n.session.build_ack(&group, &member, renew);
            let ack = if urgent && n.session.has_acks() && !(renew_ok && n.session.has_renew()) {
                send_ack(n, false)
            } else if renew_ok && n.session.has_renew() {
                send_ack(n, true)
            } else {
                None
            };
            if let Some((req, sent)) = ack {
                self.send_ack(id, req, sent);
                continue;
            }
            if plan != FetchPlan::None {
                if let Some((req, sent)) = n.session.build_fetch(&group, &member, params) {
                    n.in_flight_acks = !sent.acks.is_empty();
                    n.pace.nowait_in_flight = plan == FetchPlan::NoWait;
                    n.pace.parked = None;
                    n.pace.releases_queued &= n.session.has_acks();
                    if !waiting && !n.pace.demand {
                        n.pace.refill = false; // the one refill of the last poll
                    }
                    n.pace.demand = false;
                    self.spawn_fetch(id, req, sent);
                    continue;
                }
            }
            // No fetch will carry the acks soon: after a short linger they go on their own.
            if overdue {
                if let Some((req, sent)) = send_ack(n, false) {
                    self.send_ack(id, req, sent);
                }
            }
        }
    }

    /// Sends a ShareAcknowledge built from the session of `id`.
    fn send_ack(&mut self, id: i32, req: ShareAcknowledgeRequest, sent: Sent) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.in_flight_acks = true;
            n.pace.releases_queued &= n.session.has_acks();
        }
        self.spawn_ack(id, req, sent);
    }

    /// record_limit: no prefetch. Fetch only for a waiting poll with nothing buffered, from
    /// one broker at a time (taking turns), so no more than max.poll.records are acquired.
    fn record_limit_pick(&mut self, ids: &[i32], now: Instant) -> Option<i32> {
        if self.cfg.acquire_mode != AcquireMode::RecordLimit
            || self.fatal.is_some()
            || !self.membership.is_active()
            || !self.wants_records(now)
            || !self.buffer.is_empty()
            || self.nodes.values().any(|n| n.session.in_flight() && !n.session.wanted().is_empty())
        {
            return None;
        }
        let eligible: Vec<i32> = ids
            .iter()
            .copied()
            .filter(|id| {
                self.nodes
                    .get(id)
                    .is_some_and(|n| !n.session.wanted().is_empty() && n.retry_at.is_none_or(|t| t <= now))
            })
            .collect();
        if eligible.is_empty() {
            return None;
        }
        self.record_limit_turn = self.record_limit_turn.wrapping_add(1);
        // One fetch serves the poll (record_limit holds no more than one poll's worth).
        for n in self.nodes.values_mut() {
            n.pace.demand = false;
        }
        Some(eligible[self.record_limit_turn % eligible.len()])
    }

    fn spawn_fetch(&mut self, node: i32, req: ShareFetchRequest, sent: Sent) {
        let cluster = self.cluster.clone();
        let timeout = cluster.config().request_timeout + self.cfg.fetch_max_wait;
        let sent_at = Instant::now();
        self.tasks.spawn(async move {
            let result = async {
                let conn = cluster.broker(node, TrafficClass::Fetch).await?;
                let v = conn.versions.pick(req_key::FETCH, 1, 2)?;
                if v < 2 && req.share_acquire_mode != 0 {
                    return Err(Error::config(
                        "share.acquire.mode",
                        format!("record_limit needs ShareFetch v2 (Kafka 4.2+); broker {node} speaks v1 only: use batch_optimized"),
                    ));
                }
                conn.conn.call_timeout(&req, v, timeout).await
            }
            .await;
            Event::Fetch {
                node,
                sent,
                sent_at,
                result,
            }
        });
    }

    pub(super) fn spawn_ack(&mut self, node: i32, req: ShareAcknowledgeRequest, sent: Sent) {
        let cluster = self.cluster.clone();
        let timeout = cluster.config().request_timeout;
        self.tasks.spawn(async move {
            let result = async {
                // Same connection as the fetches: the broker ties a share session to the
                // connection that opened it, and drops it when that connection closes.
                let conn = cluster.broker(node, TrafficClass::Fetch).await?;
                let v = conn.versions.pick(req_key::ACK, 1, 2)?;
                conn.conn.call_timeout(&req, v, timeout).await
            }
            .await;
            Event::Ack { node, sent, result }
        });
    }

    pub(super) fn on_fetch(
        &mut self,
        node: i32,
        sent: Sent,
        sent_at: Instant,
        result: Result<ShareFetchResponse>,
        now: Instant,
    ) {
        let latency = now.saturating_duration_since(sent_at);
        self.shared.metrics.record_fetch(latency);
        let resp = match result
            .and_then(|r| code_result(r.error_code, r.error_message.clone(), "ShareFetch", node).map(|_| r))
        {
            Ok(r) => r,
            Err(e) => return self.request_failed(node, sent, e, now),
        };
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        if sent.generation != n.session.generation() {
            // The session was reset meanwhile (its acks already failed); the broker released
            // what this response acquired when the session went.
            n.session.clear_in_flight();
            return;
        }
        n.in_flight_acks = false;
        n.session.on_success(&sent);
        // A response whose partitions all failed must not be answered by an immediate refetch:
        // back off until metadata (or the broker) changes its mind.
        let partition_errors = resp.responses.iter().flat_map(|t| &t.partitions).any(|p| p.error_code != 0);
        if partition_errors {
            let delay = n.backoff.next_delay();
            n.retry_at = Some(now + delay);
        } else {
            n.backoff.reset();
        }
        if resp.acquisition_lock_timeout_ms > 0 {
            self.shared
                .acquisition_lock_timeout_ms
                .store(resp.acquisition_lock_timeout_ms as i64, Ordering::Relaxed);
        }
        self.learn_endpoints(&resp.node_endpoints);
        let lock = self.lock_duration();
        let deadline = (lock > Duration::ZERO).then(|| sent_at + lock);
        let mut answers = AckAnswers::default();
        let mut moved = false;
        let mut records = 0;
        for t in resp.responses {
            for p in t.partitions {
                let tp = TopicIdPartition { topic_id: t.topic_id, partition: p.partition_index };
                if let Some(a) = sent.acks.get(&tp) {
                    let r =
                        code_result(p.acknowledge_error_code, p.acknowledge_error_message.clone(), "ShareFetch", node);
                    self.note_ack_answer(node, tp, a, r, now, &mut answers);
                }
                let leader = (p.current_leader.leader_id, p.current_leader.leader_epoch);
                moved |= self.partition_error(&tp, p.error_code, leader, node);
                records += self.take_records(node, sent.generation, tp, p, deadline, now);
            }
        }
        if let Some(n) = self.nodes.get_mut(&node) {
            n.pace.fetched(records, now);
            n.redeliveries.expire(now, lock);
        }
        self.complete_answered_acks(node, &sent, answers);
        if moved {
            self.reconcile_assignment();
        }
    }

    /// Turns one partition's acquired records into buffered records; gaps are acknowledged
    /// at once. The acquired records of a batch that cannot be decoded are rejected, as Java
    /// does (released, they would come back until the delivery limit, failing each time), and
    /// the next polls are told once (`topic_errors.rs`); the batches around it are delivered.
    /// Returns how many records were buffered.
    fn take_records(
        &mut self,
        node: i32,
        generation: u64,
        tp: TopicIdPartition,
        p: FetchPartitionResponse,
        deadline: Option<Instant>,
        now: Instant,
    ) -> usize {
        if p.acquired_records.is_empty() {
            return 0;
        }
        let ranges: Vec<AcquiredRange> = p.acquired_records.iter().map(|&a| AcquiredRange::from(a)).collect();
        let topic: Arc<str> = self.topic_name(&tp.topic_id).unwrap_or_else(|| Arc::from(tp.topic_id.to_string()));
        let Some(n) = self.nodes.get_mut(&node) else {
            return 0;
        };
        for r in &ranges {
            n.redeliveries.acquired(tp, r.first_offset, r.last_offset, r.delivery_count, now);
        }
        let options = DecodeOptions { check_crcs: self.cfg.check_crcs, max_decompressed: self.cfg.max_decompressed() };
        match decode_acquired_with(p.records.unwrap_or_default(), &ranges, options) {
            Ok(set) => {
                for (first, last) in set.gaps {
                    for o in first..=last {
                        n.session.queue_ack(tp, o, GAP);
                    }
                }
                for bad in set.corrupt {
                    warn!(
                        topic = %topic, partition = tp.partition, first_offset = bad.first_offset,
                        last_offset = bad.last_offset, error = %bad.error, "corrupt record batch: its acquired records are rejected"
                    );
                    for &(first, last) in &bad.acquired {
                        for o in first..=last {
                            n.session.queue_ack(tp, o, ACK_REJECT);
                        }
                    }
                    let error = Error::CorruptRecord {
                        topic: topic.to_string(),
                        partition: tp.partition,
                        first_offset: bad.first_offset,
                        last_offset: bad.last_offset,
                        detail: bad.error.to_string(),
                    };
                    self.topic_errors.corrupt_batch(tp, bad.first_offset, error);
                }
                if set.records.is_empty() {
                    return 0;
                }
                let count = set.records.len();
                self.shared.metrics.record_consumed(count as u64);
                let records: VecDeque<ConsumerRecord> = set
                    .records
                    .into_iter()
                    .map(|r| ConsumerRecord {
                        topic: topic.clone(),
                        partition: tp.partition,
                        offset: r.offset,
                        timestamp: r.timestamp,
                        timestamp_type: r.timestamp_type,
                        key: r.key,
                        value: r.value,
                        headers: r.headers,
                        delivery_count: r.delivery_count,
                        leader_epoch: (r.leader_epoch >= 0).then_some(r.leader_epoch),
                        lock_deadline: deadline,
                        ack_slot: None,
                    })
                    .collect();
                self.buffer.push_back(Fetched { tp, node, generation, records });
                count
            }
            Err(e) => {
                // Only the acquired ranges themselves can be invalid (first > last): the
                // records may be fine, so they go back to the group.
                warn!(topic = %topic, partition = tp.partition, error = %e, "invalid acquired ranges: records released");
                for r in &ranges {
                    for o in r.first_offset..=r.last_offset {
                        n.session.queue_ack(tp, o, ACK_RELEASE);
                    }
                }
                0
            }
        }
    }

    /// Handles a partition-level error; returns true when the partition moved to another
    /// leader (so the fetch sets must be recomputed).
    ///
    /// The one place that reads a partition's error in a ShareFetch or ShareAcknowledge
    /// answer: both carry the same code and current leader.
    fn partition_error(&mut self, tp: &TopicIdPartition, code: i16, leader: (i32, i32), node: i32) -> bool {
        match code {
            0 => false,
            c if ErrorCode(c).is_partition_moved() => {
                let name = self.topic_name(&tp.topic_id);
                match name {
                    Some(name) if leader.0 >= 0 => self.cluster.learn_leader(&name, tp.partition, leader.0, leader.1),
                    _ => self.need_metadata = true,
                }
                debug!(%tp, node, leader = leader.0, "partition moved");
                true
            }
            c if ErrorCode(c).is_unknown_topic_or_partition() => {
                self.need_metadata = true;
                false
            }
            c => {
                debug!(%tp, node, code = c, "partition error");
                false
            }
        }
    }

    fn learn_endpoints(&self, endpoints: &[NodeEndpoint]) {
        if endpoints.is_empty() {
            return;
        }
        self.cluster.learn_brokers(endpoints.iter().map(|e| BrokerInfo {
            node_id: e.node_id,
            host: e.host.clone(),
            port: e.port,
            rack: e.rack.clone(),
        }));
    }

    pub(super) fn on_ack(&mut self, node: i32, sent: Sent, result: Result<ShareAcknowledgeResponse>, now: Instant) {
        let resp = match result
            .and_then(|r| code_result(r.error_code, r.error_message.clone(), "ShareAcknowledge", node).map(|_| r))
        {
            Ok(r) => r,
            Err(e) => return self.request_failed(node, sent, e, now),
        };
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        if sent.generation != n.session.generation() {
            n.session.clear_in_flight(); // stale: its acks were failed by the reset
            return;
        }
        n.in_flight_acks = false;
        n.session.on_success(&sent);
        if let Some(ms) = resp.acquisition_lock_timeout_ms.filter(|ms| *ms > 0) {
            self.shared.acquisition_lock_timeout_ms.store(ms as i64, Ordering::Relaxed);
        }
        self.learn_endpoints(&resp.node_endpoints);
        let mut answers = AckAnswers::default();
        let mut moved = false;
        for t in &resp.responses {
            for p in &t.partitions {
                let tp = TopicIdPartition { topic_id: t.topic_id, partition: p.partition_index };
                if let Some(a) = sent.acks.get(&tp) {
                    let r = code_result(p.error_code, p.error_message.clone(), "ShareAcknowledge", node);
                    self.note_ack_answer(node, tp, a, r, now, &mut answers);
                }
                let leader = (p.current_leader.leader_id, p.current_leader.leader_epoch);
                moved |= self.partition_error(&tp, p.error_code, leader, node);
            }
        }
        self.complete_answered_acks(node, &sent, answers);
        if moved {
            self.reconcile_assignment();
        }
    }

    /// Files one partition's acknowledgement answer (from a ShareFetch or a ShareAcknowledge):
    /// a result to report, or, when `ack_outcome` queued the acks again, no news yet.
    fn note_ack_answer(
        &mut self,
        node: i32,
        tp: TopicIdPartition,
        acks: &PartitionAcks,
        r: Result<()>,
        now: Instant,
        answers: &mut AckAnswers,
    ) {
        match self.ack_outcome(node, tp, acks, r, now) {
            Some(r) => {
                answers.results.insert(tp, (acks.iter().map(|(o, _)| o).collect(), r));
            }
            None => {
                answers.retried.insert(tp);
            }
        }
    }

    /// Completes the acks of an answered request: those its answer did not mention succeeded
    /// (the broker lists only partitions with something to say); retried ones wait.
    fn complete_answered_acks(&mut self, node: i32, sent: &Sent, answers: AckAnswers) {
        let AckAnswers { mut results, retried } = answers;
        for (tp, a) in sent.acks.iter().filter(|(tp, _)| !retried.contains(tp)) {
            results.entry(*tp).or_insert_with(|| (a.iter().map(|(o, _)| o).collect(), Ok(())));
        }
        self.complete_acks(Some(node), results);
    }

    /// A request failed as a whole: its acks fail with the error (never resent: their
    /// records were released, or will be, and resending earns INVALID_RECORD_STATE), the
    /// session starts over at epoch 0, and the broker is backed off.
    ///
    /// When the request was written and its answer lost, its acks report
    /// [`Error::OutcomeUnknown`] (the broker may have applied them); acks still queued were
    /// never sent and fail with the plain cause.
    fn request_failed(&mut self, node: i32, sent: Sent, e: Error, now: Instant) {
        debug!(node, error = %e, "share request failed");
        let stale = match self.nodes.get_mut(&node) {
            Some(n) => {
                n.session.clear_in_flight();
                let stale = sent.generation != n.session.generation();
                if !stale {
                    n.in_flight_acks = false;
                    let delay = n.backoff.next_delay();
                    n.retry_at = Some(now + delay);
                }
                stale
            }
            None => true,
        };
        if stale {
            return; // a reset already failed these acks and started over
        }
        if matches!(e, Error::Config { .. } | Error::UnsupportedVersion { .. } | Error::FeatureDisabled { .. })
            || e.code().is_some_and(ErrorCode::is_fatal_for_share_requests)
        {
            self.set_fatal(e.clone());
        }
        if e.is_connection_error() || matches!(e, Error::Timeout { .. }) {
            // The broker may be gone: learn who leads its partitions now.
            self.need_metadata = true;
        }
        let results: AckResults = sent
            .acks
            .iter()
            .map(|(tp, a)| (*tp, (a.iter().map(|(o, _)| o).collect(), Err(e.clone()))))
            .collect();
        self.complete_acks(Some(node), results);
        let unsent = match &e {
            Error::OutcomeUnknown { cause, .. } => (**cause).clone(),
            _ => e,
        };
        self.reset_session(node, unsent);
    }

    /// Resets a broker's session: queued acks fail with `e`, buffered records from it are
    /// dropped (the broker released them when the session went).
    pub(super) fn reset_session(&mut self, node: i32, e: Error) {
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        let failed = n.session.reset();
        n.pace.reset();
        n.ack_retries.clear();
        n.redeliveries.clear();
        self.buffer.retain(|f| f.node != node);
        let results: AckResults = failed
            .into_iter()
            .map(|(tp, a)| (tp, (a.iter().map(|(o, _)| o).collect(), Err(e.clone()))))
            .collect();
        self.complete_acks(Some(node), results);
    }
}

/// An error code from a share response as a `Result`, with the API and broker as context.
fn code_result(code: i16, message: Option<String>, api: &'static str, node: i32) -> Result<()> {
    check(code, message, || Context::api(api).broker(node))
}

mod req_key {
    pub(super) const FETCH: i16 = crate::protocol::share::SHARE_FETCH_API_KEY;
    pub(super) const ACK: i16 = crate::protocol::share::SHARE_ACKNOWLEDGE_API_KEY;
}
