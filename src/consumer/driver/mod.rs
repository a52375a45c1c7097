//! The consumer's driver, in two parts (see DESIGN.md, "The driver core"):
//!
//! * [`DriverCore`], sans-IO: it owns the membership and share-session state machines, the
//!   fetched-but-not-delivered buffer, pacing, the close phases and the commit waiters. It is
//!   fed commands (from the public handle), events (finished requests) and `now`, and emits
//!   [`Transmit`]s (requests to send) and replies (the oneshot senders inside commands). It
//!   never reads the clock, spawns a task or touches a socket (`state_machine.rs`).
//! * `Driver`, the async shell (`shell.rs`): the only place that awaits. It owns the cluster's
//!   connections, one small tokio task per request in flight, and the real clock.
//!
//! One turn of the shell: hand the core one input (command, finished request, or timer),
//! call `drive` (the core decides what to send and answers a waiting poll if records are
//! buffered), then send every `Transmit` it queued. Acks reach the core with the
//! poll/commit/close that follows them, as in the Java client.

mod ack_retry;
mod deliver;
mod fetch;
mod group;
mod pace;
mod pattern;
mod poll_interval;
mod shell;
mod state_machine;
mod topic_errors;
mod topology;

pub(crate) use shell::Driver;
pub(crate) use state_machine::Transmit;
pub(crate) use topology::Topology;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tracing::{debug, warn};

use super::config::{AcquireMode, ShareConsumerConfig};
use super::metrics::Metrics;
use super::record::{ConsumerRecord, TopicPartition};
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::protocol::share::{ShareAcknowledgeResponse, ShareFetchResponse};
use crate::share::acks::AckKind;
use crate::share::membership::{MemberState, Membership};
use crate::share::session::{FetchParams, Sent, ShareSession};
use crate::share::TopicIdPartition;

/// Results of one commit, per partition: `Ok(())`, or why the broker did not take the
/// acknowledgements (e.g. INVALID_RECORD_STATE when the lock had expired). Derefs to the map.
#[derive(Debug, Clone, Default)]
pub struct CommitResults(HashMap<TopicPartition, Result<()>>);

impl CommitResults {
    /// Whether every partition succeeded.
    pub fn is_ok(&self) -> bool {
        self.0.values().all(|r| r.is_ok())
    }

    /// The first failure, if any (partitions in no particular order).
    pub fn first_error(&self) -> Option<(&TopicPartition, &Error)> {
        self.0.iter().find_map(|(tp, r)| r.as_ref().err().map(|e| (tp, e)))
    }

    /// `Ok(())` when every partition succeeded, else the first error.
    pub fn into_result(self) -> Result<()> {
        match self.first_error() {
            Some((_, e)) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The per-partition map.
    pub fn into_inner(self) -> HashMap<TopicPartition, Result<()>> {
        self.0
    }
}

impl IntoIterator for CommitResults {
    type Item = (TopicPartition, Result<()>);
    type IntoIter = std::collections::hash_map::IntoIter<TopicPartition, Result<()>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a CommitResults {
    type Item = (&'a TopicPartition, &'a Result<()>);
    type IntoIter = std::collections::hash_map::Iter<'a, TopicPartition, Result<()>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl std::ops::Deref for CommitResults {
    type Target = HashMap<TopicPartition, Result<()>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// A callback told of every completed acknowledgement: partition, offsets, outcome.
pub type AckCallback = Arc<dyn Fn(&TopicPartition, &[i64], &Result<()>) + Send + Sync>;

/// One acknowledgement on its way to the driver, tagged with where its record came from.
#[derive(Debug, Clone)]
pub(crate) struct AckEntry {
    pub tp: TopicIdPartition,
    pub offset: i64,
    /// The delivery acknowledged (see `share::redeliveries`).
    pub delivery_count: i16,
    /// When that delivery's lock ends at the latest (conservative), unless it was renewed.
    pub lock_deadline: Option<Instant>,
    pub kind: AckKind,
    pub node: i32,
    pub generation: u64,
}

/// A record handed to the handle, with its routing tag.
#[derive(Debug)]
pub(crate) struct Delivered {
    pub record: ConsumerRecord,
    pub tp: TopicIdPartition,
    pub node: i32,
    pub generation: u64,
}

/// The outcome of a RENEW the driver sent: the record's partition and offset, and until when
/// the record is now locked (conservatively).
#[derive(Debug)]
pub(crate) struct Renewed {
    pub tp: TopicIdPartition,
    pub offset: i64,
    pub result: Result<()>,
    pub lock_deadline: Option<Instant>,
}

/// What the driver answers a poll with: records to hand out, and the outcomes of renewals.
#[derive(Debug, Default)]
pub(crate) struct PollAnswer {
    pub records: Vec<Delivered>,
    pub renewed: Vec<Renewed>,
}

impl PollAnswer {
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty() && self.renewed.is_empty()
    }
}

pub(crate) enum Command {
    Subscribe(Vec<String>),
    /// Subscribe to the topics matching a pattern, now and as they come and go.
    SubscribePattern(Arc<crate::consumer::pattern::PatternSubscription>),
    /// A poll. `wait: false` (a zero timeout) is answered at once with what is buffered,
    /// so `poll(Duration::ZERO)` returns buffered records every time, deterministically.
    ///
    /// `renewing`: the handle waits for renewals; until one completes the poll gets no new
    /// records, only the renewals' outcomes (as in Java 4.4).
    Poll {
        max: usize,
        wait: bool,
        renewing: bool,
        acks: Vec<AckEntry>,
        reply: oneshot::Sender<Result<PollAnswer>>,
    },
    Commit {
        acks: Vec<AckEntry>,
        reply: Option<oneshot::Sender<CommitResults>>,
    },
    /// Records a poll received but could not hand out (its future was dropped): they go
    /// back to the front of the buffer, for the next poll.
    Requeue(PollAnswer),
    /// The partitions paused now (the whole set: pause and resume send it).
    Paused(HashSet<TopicPartition>),
    Close {
        acks: Vec<AckEntry>,
        deadline: Instant,
        reply: Option<oneshot::Sender<Result<()>>>,
    },
}

/// A finished request.
pub(crate) enum Event {
    Coordinator(Result<i32>),
    Heartbeat(Result<kafka_protocol::messages::ShareGroupHeartbeatResponse>),
    Fetch {
        node: i32,
        sent: Sent,
        sent_at: Instant,
        result: Result<ShareFetchResponse>,
    },
    Ack {
        node: i32,
        sent: Sent,
        result: Result<ShareAcknowledgeResponse>,
    },
    /// A refresh for the subscription, with the topics it refused and their codes.
    Metadata(Result<Vec<(String, i16)>>),
    /// A listing of all topics, for a pattern subscription.
    TopicList(Result<Vec<String>>),
}

/// Per-broker state around its share session.
pub(crate) struct Node {
    pub session: ShareSession,
    pub backoff: Backoff,
    pub retry_at: Option<Instant>,
    pub in_flight_acks: bool,
    pub pace: pace::Pace,
    /// Offsets this session acquired again, so late acks of older deliveries are refused.
    pub redeliveries: crate::share::redeliveries::Redeliveries,
    /// Partitions whose acks are being retried after a transient error (`ack_retry.rs`).
    pub ack_retries: HashMap<TopicIdPartition, ack_retry::AckRetry>,
}

/// Records fetched from one partition, not yet handed out.
pub(crate) struct Fetched {
    pub tp: TopicIdPartition,
    pub node: i32,
    pub generation: u64,
    pub records: VecDeque<ConsumerRecord>,
}

struct PollWaiter {
    max: usize,
    renewing: bool,
    reply: oneshot::Sender<Result<PollAnswer>>,
}

pub(crate) struct CommitWaiter {
    pub nodes: HashSet<i32>,
    pub results: CommitResults,
    pub reply: Option<oneshot::Sender<CommitResults>>,
}

enum ClosePhase {
    /// Waiting for in-flight requests to finish before sending the final acks.
    Draining,
    /// Final (epoch -1) acknowledgements sent; waiting for them.
    SessionsClosing,
    /// Leave heartbeat sent.
    Leaving,
}

struct Closing {
    phase: ClosePhase,
    deadline: Instant,
    reply: Option<oneshot::Sender<Result<()>>>,
}

/// Shared with the handle: read-mostly facts and metrics.
pub(crate) struct Shared {
    pub metrics: Metrics,
    pub acquisition_lock_timeout_ms: std::sync::atomic::AtomicI64,
    pub renew_supported: std::sync::atomic::AtomicBool,
    /// Open share sessions: broker node id -> next epoch (for observability and tests).
    pub sessions: std::sync::Mutex<BTreeMap<i32, i32>>,
    /// Connection counters (connections made, SASL logins) for the metrics.
    pub network: Option<Arc<crate::cluster::NetworkStats>>,
    /// The acknowledgement commit callback and the completions it is to be told of.
    pub callbacks: super::callback::Callbacks,
}

/// The driver's decisions and all their state (sans-IO: see the module doc).
pub(crate) struct DriverCore {
    /// Topic names and partition leaders (the cluster's metadata, or a simulation's).
    topology: Arc<dyn Topology>,
    cfg: ShareConsumerConfig,
    shared: Arc<Shared>,
    membership: Membership,
    coordinator: Option<i32>,
    finding_coordinator: bool,
    heartbeat_in_flight: bool,
    metadata_in_flight: bool,
    need_metadata: bool,
    metadata_backoff: Backoff,
    metadata_retry_at: Option<Instant>,
    nodes: HashMap<i32, Node>,
    buffer: VecDeque<Fetched>,
    waiter: Option<PollWaiter>,
    commits: Vec<CommitWaiter>,
    /// Requests decided and not yet handed to the shell (`poll_transmit`).
    outbox: VecDeque<Transmit>,
    fatal: Option<Error>,
    closing: Option<Closing>,
    record_limit_turn: usize,
    drain: pace::DrainRate,
    activity: pace::Activity,
    topic_errors: topic_errors::TopicErrors,
    /// RENEWs sent and not answered yet, by partition and offset.
    renewing: HashSet<(TopicIdPartition, i64)>,
    /// Outcomes of renewals, for the next poll.
    renewed: Vec<Renewed>,
    /// A pattern subscription's topic listings (`pattern.rs`).
    pattern: pattern::PatternRefresh,
    /// Partitions the application paused: not fetched (see `reconcile_assignment`).
    paused: HashSet<TopicPartition>,
    /// Set while the member is out of the group for a missed poll interval: the
    /// subscription the next poll rejoins with.
    stale: poll_interval::StaleSubscription,
}

impl DriverCore {
    /// When `drive` must run again if nothing else happens first.
    pub(crate) fn poll_timeout(&self, now: Instant) -> Instant {
        let mut t = now + Duration::from_secs(1);
        if let Some(h) = self.membership.poll_timeout() {
            t = t.min(h);
        }
        for n in self.nodes.values() {
            if let Some(r) = n.retry_at {
                t = t.min(r);
            }
        }
        if let Some(a) = self.next_pace_deadline() {
            t = t.min(a);
        }
        if let Some(r) = self.metadata_retry_at.filter(|_| self.need_metadata) {
            t = t.min(r);
        }
        if let Some(c) = &self.closing {
            t = t.min(c.deadline);
        }
        if let Some(p) = self.poll_interval_deadline() {
            t = t.min(p);
        }
        if let Some(p) = self.pattern.wakeup() {
            t = t.min(p);
        }
        t.max(now)
    }

    /// A command from the public handle.
    pub(crate) fn handle_command(&mut self, cmd: Command, now: Instant) {
        match cmd {
            Command::Subscribe(topics) => {
                self.stale = None; // a new subscription replaces the one to rejoin with
                if self.closing.is_none() {
                    self.pattern.clear();
                    self.membership.subscribe(topics, now);
                    self.topic_errors.subscription_changed();
                    self.need_metadata = true;
                    self.reconcile_assignment(now);
                }
            }
            Command::Poll { max, wait, renewing, acks, reply } => {
                self.activity.last_poll_call = Some(now);
                self.rejoin_if_stale(now);
                // First the poll (it grants each broker a refill), then its acks (a RELEASE
                // among them withdraws its broker's). A poll waiting for renewals takes no
                // records: it grants nothing.
                if !renewing {
                    self.note_poll(now);
                }
                let failed = self.route_acks(acks, now);
                self.report_local_failures(failed, None);
                self.shared.metrics.record_poll();
                self.waiter = Some(PollWaiter { max, renewing, reply });
                if !wait {
                    // Answer now, with whatever is buffered (perhaps nothing), or an error.
                    self.report_topic_error();
                    self.try_deliver(now);
                    if let Some(w) = self.waiter.take() {
                        self.answer(w, Vec::new());
                    }
                }
            }
            Command::Commit { acks, reply } => {
                let failed = self.route_acks(acks, now);
                let mut waiter = CommitWaiter { nodes: HashSet::new(), results: CommitResults::default(), reply };
                self.report_local_failures(failed, Some(&mut waiter));
                for (id, n) in &self.nodes {
                    if n.session.has_acks() || n.in_flight_acks {
                        waiter.nodes.insert(*id);
                    }
                }
                if waiter.nodes.is_empty() {
                    if let Some(r) = waiter.reply.take() {
                        let _ = r.send(waiter.results);
                    }
                } else {
                    self.commits.push(waiter);
                }
            }
            Command::SubscribePattern(sub) => {
                self.stale = None;
                self.subscribe_pattern(sub, now);
            }
            Command::Requeue(back) => self.requeue(back),
            Command::Paused(paused) => {
                self.paused = paused;
                self.reconcile_assignment(now);
            }
            Command::Close { acks, deadline, reply } => self.start_close(acks, deadline, reply, now),
        }
    }

    /// A finished request.
    pub(crate) fn handle_event(&mut self, ev: Event, now: Instant) {
        match ev {
            Event::Coordinator(r) => self.on_coordinator(r),
            Event::Heartbeat(r) => self.on_heartbeat(r, now),
            Event::Fetch { node, sent, sent_at, result } => self.on_fetch(node, sent, sent_at, result, now),
            Event::Ack { node, sent, result } => self.on_ack(node, sent, result, now),
            Event::Metadata(r) => self.on_metadata(r, now),
            Event::TopicList(r) => self.on_topic_list(r, now),
        }
    }

    /// Decides whatever the state machines want sent now (queued for `poll_transmit`), and
    /// answers a waiting poll from the buffer.
    pub(crate) fn drive(&mut self, now: Instant) {
        self.drive_pattern(now);
        self.drive_group(now);
        self.report_topic_error();
        // A poll answered from the buffer first: the fetch plan then sees whether a poll
        // still waits for records (only then may a fetch acquire without a refill).
        self.try_deliver(now);
        self.release_if_idle(now);
        self.enforce_poll_interval(now);
        self.drive_nodes(now);
        self.drive_close(now);
        let open: BTreeMap<i32, i32> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.session.is_open())
            .map(|(id, n)| (*id, n.session.epoch()))
            .collect();
        *self.shared.sessions.lock().unwrap_or_else(|p| p.into_inner()) = open;
    }

    fn fetch_params(&self, no_wait: bool, now: Instant) -> FetchParams {
        let max = self.cfg.max_poll_records.min(i32::MAX as usize) as i32;
        FetchParams {
            max_wait_ms: if no_wait { 0 } else { self.cfg.fetch_max_wait.as_millis().min(i32::MAX as u128) as i32 },
            min_bytes: self.cfg.fetch_min_bytes,
            max_bytes: self.cfg.fetch_max_bytes,
            max_records: self.fetch_max_records(now).min(i32::MAX as usize) as i32,
            batch_size: max,
            acquire_mode: match self.cfg.acquire_mode {
                AcquireMode::BatchOptimized => 0,
                AcquireMode::RecordLimit => 1,
            },
        }
    }

    /// Queues acks on the sessions that delivered their records; returns, with the reason,
    /// those that must not be sent: their session was reset since (the broker released the
    /// records: sending would only earn INVALID_RECORD_STATE), or the session holds a newer
    /// delivery of the offset (the ack would land on a delivery nobody processed).
    fn route_acks(&mut self, acks: Vec<AckEntry>, now: Instant) -> Vec<(AckEntry, Error)> {
        let mut failed = Vec::new();
        let lock = self.lock_duration();
        for a in acks {
            match self.nodes.get_mut(&a.node) {
                Some(n) if n.session.generation() == a.generation => {
                    // A delivery whose lock has lapsed cannot be acknowledged: the broker may
                    // have handed the record to someone else, delivered it to us again, or
                    // (once the group moved past it) take the acknowledgement without a word.
                    let superseded = n.redeliveries.check(a.tp, a.offset, a.delivery_count).is_err();
                    let deadline = n.redeliveries.lock_until(a.tp, a.offset, a.lock_deadline);
                    if superseded || deadline.is_some_and(|d| now >= d) {
                        debug!(tp = %a.tp, offset = a.offset, delivery = a.delivery_count, superseded, "ack of a lapsed delivery refused");
                        let tp = self.to_topic_partition(&a.tp);
                        let e = Error::LockExpired {
                            topic: tp.topic,
                            partition: tp.partition,
                            offset: a.offset,
                            delivery_count: a.delivery_count,
                            redelivered: superseded,
                        };
                        failed.push((a, e));
                        continue;
                    }
                    if a.kind == AckKind::Renew {
                        // Renewed from when the broker takes it, no earlier than now.
                        n.redeliveries.renewed(a.tp, a.offset, now + lock);
                        self.renewing.insert((a.tp, a.offset));
                    } else {
                        n.redeliveries.settled(a.tp, a.offset);
                        n.pace.settled(1);
                    }
                    if a.kind == AckKind::Release {
                        // Released records are for the other members: no refill from this
                        // broker until the application polls again.
                        n.pace.refill = false;
                        n.pace.releases_queued = true;
                    }
                    n.session.queue_ack(a.tp, a.offset, a.kind)
                }
                _ => {
                    let e = session_gone(a.node);
                    failed.push((a, e));
                }
            }
        }
        failed
    }

    fn start_close(
        &mut self,
        acks: Vec<AckEntry>,
        deadline: Instant,
        reply: Option<oneshot::Sender<Result<()>>>,
        now: Instant,
    ) {
        if self.closing.is_some() {
            if let Some(r) = reply {
                let _ = r.send(Ok(()));
            }
            return;
        }
        let failed = self.route_acks(acks, now);
        self.report_local_failures(failed, None);
        // Whatever was fetched but never handed out goes back to the broker now.
        self.release_buffer(|_| true);
        if let Some(w) = self.waiter.take() {
            let _ = w.reply.send(Err(Error::Closed));
        }
        self.closing = Some(Closing { phase: ClosePhase::Draining, deadline, reply });
    }

    fn drive_close(&mut self, now: Instant) {
        let Some(c) = &mut self.closing else { return };
        if now >= c.deadline {
            let r = c.reply.take();
            let unfinished = self.close_unfinished();
            warn!(group = self.cfg.group_id, unfinished, "close timed out");
            if let Some(c) = &mut self.closing {
                c.phase = ClosePhase::Leaving;
            }
            self.membership = Membership::new(self.cfg.group_id.clone(), None); // stop heartbeating
            if let Some(r) = r {
                let _ = r.send(Err(Error::Timeout { what: format!("close ({unfinished})"), after: Duration::ZERO }));
            }
            return;
        }
        match c.phase {
            ClosePhase::Draining => {
                if self.nodes.values().all(|n| !n.session.in_flight()) {
                    let group = self.cfg.group_id.clone();
                    let member = self.membership.member_id().to_string();
                    let mut sends = Vec::new();
                    for (id, n) in self.nodes.iter_mut() {
                        if let Some((req, sent)) = n.session.build_close(&group, &member) {
                            n.in_flight_acks = !sent.acks.is_empty();
                            sends.push((*id, req, sent));
                        }
                    }
                    for (id, req, sent) in sends {
                        self.outbox.push_back(Transmit::Acknowledge { node: id, request: req, sent });
                    }
                    if let Some(c) = &mut self.closing {
                        c.phase = ClosePhase::SessionsClosing;
                    }
                }
            }
            ClosePhase::SessionsClosing => {
                if self.nodes.values().all(|n| !n.session.in_flight()) {
                    self.membership.leave(now);
                    if let Some(c) = &mut self.closing {
                        c.phase = ClosePhase::Leaving;
                    }
                }
            }
            ClosePhase::Leaving => {}
        }
    }

    /// What a close that ran out of time leaves undone, in words for its error.
    fn close_unfinished(&self) -> String {
        let busy = |f: &dyn Fn(&Node) -> bool| {
            let mut ids: Vec<i32> = self.nodes.iter().filter(|(_, n)| f(n)).map(|(id, _)| *id).collect();
            ids.sort_unstable();
            ids.iter().map(|id| id.to_string()).collect::<Vec<_>>().join(", ")
        };
        let leave = "the group was not left (the broker drops the member after the group's session timeout)";
        match self.closing.as_ref().map(|c| &c.phase) {
            Some(ClosePhase::Draining) => format!(
                "requests to brokers [{}] did not finish, so the final acknowledgements were not sent: the brokers release the unacknowledged records when the connections drop, and acknowledgements not sent are lost; {leave}",
                busy(&|n| n.session.in_flight())
            ),
            Some(ClosePhase::SessionsClosing) => format!(
                "brokers [{}] did not answer the final acknowledgements, so their outcome is unknown (records not acknowledged are released when the sessions end); {leave}",
                busy(&|n| n.session.in_flight())
            ),
            _ => format!("the acknowledgements were sent, but {leave}"),
        }
    }

    /// Whether close has finished: the shell then stops.
    pub(crate) fn is_finished(&mut self, now: Instant) -> bool {
        let Some(c) = &mut self.closing else {
            return false;
        };
        if !matches!(c.phase, ClosePhase::Leaving) {
            return false;
        }
        let leaving = self.membership.is_active() || matches!(self.membership.state(), MemberState::Leaving);
        let unanswered = leaving || self.heartbeat_in_flight;
        if unanswered && now < c.deadline {
            return false;
        }
        if let Some(r) = c.reply.take() {
            let outcome = if unanswered {
                Err(Error::Timeout { what: format!("close ({})", self.close_unfinished()), after: Duration::ZERO })
            } else {
                Ok(())
            };
            let _ = r.send(outcome);
        }
        // Everyone still waiting on a commit hears that the consumer closed.
        for w in self.commits.drain(..) {
            if let Some(r) = w.reply {
                let _ = r.send(w.results);
            }
        }
        true
    }

    /// Errors and metadata a fatal failure leaves for the next poll.
    fn set_fatal(&mut self, e: Error) {
        warn!(group = self.cfg.group_id, error = %e, "share consumer failed");
        if self.fatal.is_none() {
            self.fatal = Some(e);
        }
    }

    fn topic_name(&self, id: &uuid::Uuid) -> Option<Arc<str>> {
        self.topology.topic_name(id)
    }

    fn to_topic_partition(&self, tp: &TopicIdPartition) -> TopicPartition {
        let name = self.topic_name(&tp.topic_id).map(|s| s.to_string()).unwrap_or_else(|| tp.topic_id.to_string());
        TopicPartition::new(name, tp.partition)
    }

    /// Hands completed acknowledgement results to commit waiters, the callback and metrics.
    fn complete_acks(&mut self, node: Option<i32>, results: BTreeMap<TopicIdPartition, (Vec<i64>, Result<()>)>) {
        for (tp, (offsets, r)) in results {
            if !self.renewing.is_empty() {
                self.note_renewals(node, tp, &offsets, &r);
            }
            let name = self.to_topic_partition(&tp);
            // The callback's record first: a completion counted is one the callback will see.
            let count = offsets.len() as u64;
            if self.shared.callbacks.wanted() {
                self.shared.callbacks.completed(name.clone(), offsets, r.clone());
            }
            self.shared.metrics.record_acks(count, r.is_err());
            for w in &mut self.commits {
                if node.is_none_or(|n| w.nodes.contains(&n)) {
                    match (w.results.get(&name), &r) {
                        (Some(Err(_)), Ok(())) => {} // keep the first failure
                        _ => {
                            w.results.0.insert(name.clone(), r.clone());
                        }
                    }
                }
            }
        }
        self.settle_commits();
    }

    /// Keeps the outcomes of the renewals among completed acks, for the next poll.
    fn note_renewals(&mut self, node: Option<i32>, tp: TopicIdPartition, offsets: &[i64], r: &Result<()>) {
        for &offset in offsets {
            if self.renewing.remove(&(tp, offset)) {
                let lock_deadline =
                    node.and_then(|n| self.nodes.get(&n)).and_then(|n| n.redeliveries.lock_until(tp, offset, None));
                self.renewed.push(Renewed { tp, offset, result: r.clone(), lock_deadline });
            }
        }
    }

    /// Completes commit waiters whose nodes have nothing left in flight or queued.
    fn settle_commits(&mut self) {
        let nodes = &self.nodes;
        for w in &mut self.commits {
            w.nodes.retain(|id| nodes.get(id).is_some_and(|n| n.session.has_acks() || n.in_flight_acks));
        }
        let (done, pending): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.commits).into_iter().partition(|w| w.nodes.is_empty());
        self.commits = pending;
        for mut w in done {
            if let Some(r) = w.reply.take() {
                let _ = r.send(w.results);
            }
        }
    }

    fn report_local_failures(&mut self, failed: Vec<(AckEntry, Error)>, waiter: Option<&mut CommitWaiter>) {
        if failed.is_empty() {
            return;
        }
        let mut by_tp: BTreeMap<TopicIdPartition, (Vec<i64>, Result<()>)> = BTreeMap::new();
        for (a, e) in failed {
            by_tp.entry(a.tp).or_insert_with(|| (Vec::new(), Err(e))).0.push(a.offset);
        }
        if let Some(w) = waiter {
            for (tp, (_, r)) in &by_tp {
                w.results.0.insert(self.to_topic_partition(tp), r.clone());
            }
        }
        self.complete_acks(None, by_tp);
    }
}

/// The error for acks whose share session was lost: the broker released those records.
pub(crate) fn session_gone(node: i32) -> Error {
    Error::Broker {
        context: crate::error::Context::api("ShareAcknowledge").broker(node),
        code: crate::error::ErrorCode::SHARE_SESSION_NOT_FOUND,
        message: Some(format!(
            "the share session with broker {node} was reset after these records were delivered; the broker released them and will deliver them again"
        )),
    }
}
