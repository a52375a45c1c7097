//! Share sessions inbound: ShareFetch and ShareAcknowledge answers (records taken into the
//! buffer, acknowledgement outcomes, partitions that moved) and whole-request failures.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::sessions::Answered;
use super::{DriverCore, Fetched};
use crate::cluster::BrokerInfo;
use crate::consumer::record::ConsumerRecord;
use crate::error::{check, Context, Error, ErrorCode, Result};
use crate::protocol::records::{decode_acquired_with, AcquiredRange, DecodeOptions};
use crate::protocol::share::{FetchPartitionResponse, NodeEndpoint, ShareAcknowledgeResponse, ShareFetchResponse};
use crate::share::acks::{AckKind, PartitionAcks, Settled};
use crate::share::session::Sent;
use crate::share::TopicIdPartition;

type AckResults = BTreeMap<TopicIdPartition, (Settled, Result<()>)>;

/// The acknowledgement answers of one response: results to report, and the partitions whose
/// acks were queued again (`sessions/ack_retry.rs`).
#[derive(Default)]
struct AckAnswers {
    results: AckResults,
    retried: BTreeSet<TopicIdPartition>,
}

impl DriverCore {
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
        if let Ok(r) = &result {
            // Error answers too: a broker throttles whatever it answers.
            self.note_share_throttle(node, r.throttle_time_ms, now);
        }
        let resp = match result
            .and_then(|r| code_result(r.error_code, r.error_message.clone(), "ShareFetch", node).map(|_| r))
        {
            Ok(r) => r,
            Err(e) => return self.request_failed(node, sent, e, now),
        };
        match self.sessions.handle_answer(node, &sent) {
            Answered::Gone => return,
            Answered::Stale => {
                // The session was reset meanwhile: the broker released what this response
                // acquired when the session went, but it did apply (or refuse) the acks it
                // carried.
                let answered = resp.responses.iter().flat_map(|t| {
                    t.partitions.iter().map(move |p| {
                        (t.topic_id, p.partition_index, p.acknowledge_error_code, &p.acknowledge_error_message)
                    })
                });
                return self.complete_stale(node, &sent, "ShareFetch", answered);
            }
            Answered::Current => {}
        }
        // A response whose partitions all failed must not be answered by an immediate refetch:
        // back off until metadata (or the broker) changes its mind.
        let partition_errors = resp.responses.iter().flat_map(|t| &t.partitions).any(|p| p.error_code != 0);
        self.sessions.handle_partition_errors(node, partition_errors, now);
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
        // The share cycle of each partition, for `RUST_LOG=kafka_share::cycle=trace` and
        // scripts/share-cycle: what each partition answered and whether this fetch carried its
        // acks (issue 36). Nothing is built unless that target is on.
        let mut cycle = tracing::enabled!(target: "kafka_share::cycle", tracing::Level::TRACE).then(String::new);
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
                let n = self.take_records(node, sent.generation, tp, p, deadline, now);
                records += n;
                if let Some(c) = cycle.as_mut() {
                    let acked = if sent.acks.contains_key(&tp) { "a" } else { "" };
                    // Writing to a String cannot fail.
                    let _ = write!(c, " {}:{n}{acked}", tp.partition);
                }
            }
        }
        if let Some(c) = cycle {
            let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
            tracing::trace!(target: "kafka_share::cycle", node, latency_us, partitions = c.as_str(), "fetch answered");
        }
        self.sessions.handle_fetched(node, records, !sent.acks.is_empty(), lock, now);
        self.complete_answered_acks(node, &sent, answers);
        if moved {
            self.reconcile_assignment(now);
        }
    }

    /// A share-session answer asked for a throttle: the session sends nothing more until it
    /// ends (`sessions/throttle.rs`). The close phases do not wait for it: the broker holds their
    /// requests while the connection is muted, within the close's own deadline.
    fn note_share_throttle(&mut self, node: i32, throttle_ms: i32, now: Instant) {
        if self.sessions.handle_throttle(node, throttle_ms, now).is_some() {
            debug!(node, throttle_ms, "broker throttled the share session's connection");
        }
    }

    /// Fails the queued acks a redelivery superseded (`SessionManager::handle_acquired`):
    /// their records are back with this member, to be processed again and acknowledged as
    /// the new delivery. The error names the delivery before the new one: the queue keeps no
    /// delivery count, and that is the one acknowledged unless another member held the record
    /// in between. The client's own releases among them just go (not the application's:
    /// their completion reports nothing).
    fn fail_superseded(&mut self, node: i32, tp: TopicIdPartition, superseded: Settled, first: (i64, i16)) {
        let (offset, newer) = first;
        debug!(node, %tp, offsets = superseded.count(), first = offset, "queued acks superseded by a redelivery: not sent");
        let e = self.lock_expired(&tp, offset, newer - 1, true);
        self.complete_acks(Some(node), BTreeMap::from([(tp, (superseded, Err(e)))]));
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
        let Some((superseded, first)) = self.sessions.handle_acquired(node, tp, &ranges, now) else {
            return 0;
        };
        if let Some(first) = first {
            self.fail_superseded(node, tp, superseded, first);
        }
        let options = DecodeOptions { check_crcs: self.cfg.check_crcs, max_decompressed: self.cfg.max_decompressed() };
        match decode_acquired_with(p.records.unwrap_or_default(), &ranges, options) {
            Ok(set) => {
                for (first, last) in set.gaps {
                    self.sessions.queue_acks(node, tp, first..=last, AckKind::Gap);
                }
                for bad in set.corrupt {
                    warn!(
                        topic = %topic, partition = tp.partition, first_offset = bad.first_offset,
                        last_offset = bad.last_offset, error = %bad.error, "corrupt record batch: its acquired records are rejected"
                    );
                    for &(first, last) in &bad.acquired {
                        self.sessions.queue_acks(node, tp, first..=last, AckKind::Reject);
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
                let records = set.records.into_iter().map(|r| ConsumerRecord {
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
                });
                // One `Fetched` per acquired range, so each record keeps the range it was
                // acquired in (see `Delivered::batch`). Usually the response is one range.
                if let [r] = ranges.as_slice() {
                    let batch = (r.first_offset, r.last_offset);
                    self.buffer.push_back(Fetched { tp, node, generation, batch, records: records.collect() });
                    return count;
                }
                let mut current: Option<Fetched> = None;
                for record in records {
                    let o = record.offset;
                    if !current.as_ref().is_some_and(|f| f.batch.0 <= o && o <= f.batch.1) {
                        let batch = ranges
                            .iter()
                            .find(|r| r.first_offset <= o && o <= r.last_offset)
                            .map_or((o, o), |r| (r.first_offset, r.last_offset));
                        // The first takes the whole response's room: usually it is all of it.
                        let room = if current.is_none() { count } else { 0 };
                        let next = Fetched { tp, node, generation, batch, records: VecDeque::with_capacity(room) };
                        if let Some(f) = current.replace(next) {
                            self.buffer.push_back(f);
                        }
                    }
                    if let Some(f) = current.as_mut() {
                        f.records.push_back(record);
                    }
                }
                if let Some(f) = current {
                    self.buffer.push_back(f);
                }
                count
            }
            Err(e) => {
                // Only the acquired ranges themselves can be invalid (first > last): the
                // records may be fine, so they go back to the group.
                warn!(topic = %topic, partition = tp.partition, error = %e, "invalid acquired ranges: records released");
                for r in &ranges {
                    self.sessions.queue_acks(node, tp, r.first_offset..=r.last_offset, AckKind::ReleaseUnseen);
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
                    Some(name) if leader.0 >= 0 => self.topology.learn_leader(&name, tp.partition, leader.0, leader.1),
                    _ => self.group.want_metadata(),
                }
                debug!(%tp, node, leader = leader.0, "partition moved");
                true
            }
            c if ErrorCode(c).is_unknown_topic_or_partition() => {
                self.group.want_metadata();
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
        self.topology.learn_brokers(
            endpoints
                .iter()
                .map(|e| BrokerInfo { node_id: e.node_id, host: e.host.clone(), port: e.port, rack: e.rack.clone() })
                .collect(),
        );
    }

    pub(super) fn on_ack(&mut self, node: i32, sent: Sent, result: Result<ShareAcknowledgeResponse>, now: Instant) {
        if let Ok(r) = &result {
            self.note_share_throttle(node, r.throttle_time_ms, now);
        }
        let resp = match result
            .and_then(|r| code_result(r.error_code, r.error_message.clone(), "ShareAcknowledge", node).map(|_| r))
        {
            Ok(r) => r,
            Err(e) => return self.request_failed(node, sent, e, now),
        };
        match self.sessions.handle_answer(node, &sent) {
            Answered::Gone => return,
            Answered::Stale => {
                let answered = resp.responses.iter().flat_map(|t| {
                    t.partitions.iter().map(move |p| (t.topic_id, p.partition_index, p.error_code, &p.error_message))
                });
                return self.complete_stale(node, &sent, "ShareAcknowledge", answered);
            }
            Answered::Current => {}
        }
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
            self.reconcile_assignment(now);
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
        let closing = self.closing.is_some();
        match self.sessions.ack_outcome(node, tp, acks, r, closing, &*self.topology, now) {
            Some(r) => {
                answers.results.insert(tp, (acks.settled(), r));
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
            results.entry(*tp).or_insert_with(|| (a.settled(), Ok(())));
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
        let stale = self.sessions.handle_request_failed(node, &sent, now);
        let results: AckResults = sent.acks.iter().map(|(tp, a)| (*tp, (a.settled(), Err(e.clone())))).collect();
        if stale {
            // A reset failed the acks still queued and started over; these were in flight.
            return self.complete_acks(Some(node), results);
        }
        if matches!(e, Error::AcquireModeUnsupported { .. }) && self.sessions.fall_back_acquire_mode() {
            warn!(
                node,
                group = self.cfg.group_id,
                "a broker has no record_limit acquisition (ShareFetch v2, Kafka 4.2+): the processing engine acquires whole batches from now on, and records beyond its free slots may wait and go back unstarted"
            );
        } else if matches!(
            e,
            Error::Config { .. }
                | Error::UnsupportedVersion { .. }
                | Error::FeatureDisabled { .. }
                | Error::AcquireModeUnsupported { .. }
        ) || e.code().is_some_and(ErrorCode::is_fatal_for_share_requests)
        {
            self.set_fatal(e.clone());
        }
        if e.is_connection_error() || matches!(e, Error::Timeout { .. }) {
            // The broker may be gone: learn who leads its partitions now.
            self.group.want_metadata();
        }
        self.complete_acks(Some(node), results);
        let unsent = match &e {
            Error::OutcomeUnknown { cause, .. } => (**cause).clone(),
            _ => e,
        };
        self.reset_session(node, unsent);
    }

    /// Completes the acks of a request whose session was reset while it was in flight, with
    /// what its answer says of each partition (a partition it does not mention succeeded).
    /// `reset_session` failed only the acks still queued: these would otherwise never be
    /// reported, and a commit waiting for them would wait until its deadline. Never retried:
    /// the reset released their records, so a resend could only earn INVALID_RECORD_STATE.
    ///
    /// `answered`: the answer's partitions as (topic id, partition, error code, message).
    fn complete_stale<'a>(
        &mut self,
        node: i32,
        sent: &Sent,
        api: &'static str,
        answered: impl Iterator<Item = (uuid::Uuid, i32, i16, &'a Option<String>)>,
    ) {
        let answered: BTreeMap<TopicIdPartition, Result<()>> = answered
            .map(|(topic_id, partition, code, message)| {
                (TopicIdPartition { topic_id, partition }, code_result(code, message.clone(), api, node))
            })
            .collect();
        self.sessions.handle_stale_answer(node);
        let results: AckResults = sent
            .acks
            .iter()
            .map(|(tp, a)| (*tp, (a.settled(), answered.get(tp).cloned().unwrap_or(Ok(())))))
            .collect();
        self.complete_acks(Some(node), results);
    }

    /// Resets a broker's session: queued acks fail with `e`, buffered records from it are
    /// dropped (the broker released them when the session went).
    pub(super) fn reset_session(&mut self, node: i32, e: Error) {
        let failed = self.sessions.reset(node);
        self.fail_session(node, failed, e);
    }

    /// [`Self::reset_session`] after a fence: the broker keeps the session and the records it
    /// acquired, so a close still ends it there (epoch -1) and they go back at once.
    pub(super) fn abandon_session(&mut self, node: i32, e: Error) {
        let failed = self.sessions.abandon(node);
        self.fail_session(node, failed, e);
    }

    fn fail_session(&mut self, node: i32, failed: Option<BTreeMap<TopicIdPartition, PartitionAcks>>, e: Error) {
        let Some(failed) = failed else {
            return;
        };
        self.buffer.retain(|f| f.node != node);
        let results: AckResults = failed.into_iter().map(|(tp, a)| (tp, (a.settled(), Err(e.clone())))).collect();
        self.complete_acks(Some(node), results);
    }
}

/// An error code from a share response as a `Result`, with the API and broker as context.
fn code_result(code: i16, message: Option<String>, api: &'static str, node: i32) -> Result<()> {
    check(code, message, || Context::api(api).broker(node))
}
