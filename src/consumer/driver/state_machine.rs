//! The driver core's entry points: construction, the requests it emits, and the calls that
//! feed it (`handle_command`, `handle_event`, `handle_gone`, `drive`). The decisions live
//! in two owned sub-machines and the parent: the group manager (`group/`: coordinator,
//! membership, heartbeats, metadata and pattern refreshes), the session manager
//! (`sessions/`: every broker's share session, its pacing, throttles, ack retries and
//! redeliveries), and on [`DriverCore`] itself delivery to the handle (`deliver.rs`,
//! `activity.rs`), the answers walked into the buffer (`answers.rs`), the assignment mapped
//! onto brokers (`assignment.rs`), commits (`commits.rs`) and close (`close.rs`). Each
//! sub-machine queues its requests on the core's outbox and names its deadlines, which
//! `timers.rs` gathers.
//!
//! Style of quinn-proto: the caller owns IO and time. It feeds inputs with `now`, calls
//! `drive(now)`, drains [`DriverCore::poll_transmit`] and [`DriverCore::poll_event`]
//! (`output.rs`), and calls `drive` again by
//! [`DriverCore::poll_timeout`] (the earliest of its named timers) if nothing happens sooner.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ShareGroupHeartbeatRequest;
use tracing::warn;

use super::group::GroupManager;
use super::sessions::{Demand, SessionManager};
use super::{Command, CommitResults, CommitWaiter, DriverCore, Event, PollWaiter, Shared, Topology, Wire};
use crate::consumer::config::ShareConsumerConfig;
use crate::protocol::share::{ShareAcknowledgeRequest, ShareFetchRequest};
use crate::share::session::Sent;

/// A request the core decided to send. The shell sends it and feeds the answer (or the
/// failure) back as the matching [`super::Event`]. One that goes to a broker says how
/// ([`Wire`]: versions, timeout, what its content needs), so the shell decides nothing.
#[derive(Debug)]
pub(crate) enum Transmit {
    /// Refresh the metadata of these topics; answered by `Event::Metadata` (after the topology
    /// learned the new metadata) with the topics refused and their codes.
    Metadata { topics: Vec<String> },
    /// Look up the group's coordinator; answered by `Event::Coordinator`.
    FindCoordinator { group: String },
    /// A ShareGroupHeartbeat to the coordinator; answered by `Event::Heartbeat`.
    Heartbeat { node: i32, request: ShareGroupHeartbeatRequest, wire: Wire },
    /// A ShareFetch on the broker's share-session connection; answered by `Event::Fetch`,
    /// which carries `sent` and `sent_at` back.
    Fetch { node: i32, request: ShareFetchRequest, sent: Sent, sent_at: Instant, wire: Wire },
    /// A ShareAcknowledge on the same connection; answered by `Event::Ack`.
    Acknowledge { node: i32, request: ShareAcknowledgeRequest, sent: Sent, wire: Wire },
    /// List every topic (a pattern subscription); answered by `Event::TopicList`.
    ListTopics,
}

impl DriverCore {
    pub(crate) fn new(cfg: ShareConsumerConfig, shared: Arc<Shared>, topology: Arc<dyn Topology>) -> DriverCore {
        let cfg_poll_size = cfg.max_poll_records.max(1);
        DriverCore {
            sessions: SessionManager::new(&cfg),
            group: GroupManager::new(&cfg),
            topology,
            cfg,
            shared,
            buffer: VecDeque::new(),
            waiter: None,
            commits: Vec::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            epochs_told: BTreeMap::new(),
            fatal: None,
            closing: None,
            drain: Default::default(),
            activity: Default::default(),
            topic_errors: Default::default(),
            renewing: HashMap::new(),
            renewed: Vec::new(),
            paused: HashSet::new(),
            poll_size: cfg_poll_size,
            eager_acks: false,
        }
    }

    /// The member id this consumer joins with.
    pub(crate) fn member_id(&self) -> &str {
        self.group.member_id()
    }

    /// A command from the public handle.
    pub(crate) fn handle_command(&mut self, cmd: Command, now: Instant) {
        match cmd {
            Command::Subscribe(topics) => {
                if self.group.subscribe(topics, now) {
                    self.topic_errors.subscription_changed();
                    self.reconcile_assignment(now);
                }
            }
            Command::Poll { max, wait, renewing, acks, id } => {
                self.activity.last_poll_call = Some(now);
                self.rejoin_if_stale(now);
                // First the poll (it grants each broker a refill), then its acks (a RELEASE
                // among them withdraws its broker's). A poll waiting for renewals takes no
                // records: it grants nothing.
                if !renewing {
                    self.note_poll(now);
                    if max > 0 {
                        // The public poll asks for `max.poll.records`; the processing engine
                        // for the room it has (its slots' calls and its prefetch, which may
                        // be more than one poll's worth): where it sizes the fetches
                        // (record_limit, or `sized`) they acquire exactly that. Otherwise the
                        // poll size stays within `max.poll.records`, as the pacing was tuned.
                        self.poll_size = if self.sessions.fetches_sized_to_poll() {
                            max
                        } else {
                            max.min(self.cfg.max_poll_records).max(1)
                        };
                    }
                }
                let failed = self.route_acks(acks, now);
                self.report_local_failures(failed, None);
                self.shared.metrics.record_poll();
                self.waiter = Some(PollWaiter { max, renewing, id, abandoned: false });
                if !wait {
                    // Answer now, with whatever is buffered (perhaps nothing), or an error.
                    self.report_topic_error();
                    self.try_deliver(now);
                    if let Some(w) = self.waiter.take() {
                        self.answer(w, Vec::new());
                    }
                }
            }
            Command::PollAbandoned(id) => {
                if let Some(w) = self.waiter.as_mut().filter(|w| w.id == id) {
                    w.abandoned = true;
                    if !w.renewing {
                        self.note_poll_ended(now);
                    }
                }
            }
            Command::Commit { acks, id } => {
                let failed = self.route_acks(acks, now);
                let mut waiter = CommitWaiter { nodes: HashSet::new(), results: CommitResults::default(), id };
                self.report_local_failures(failed, Some(&mut waiter));
                waiter.nodes.extend(self.sessions.pending_ack_nodes());
                if waiter.nodes.is_empty() {
                    if let Some(r) = waiter.id.take() {
                        self.reply_commit(r, waiter.results);
                    }
                } else {
                    self.commits.push(waiter);
                }
            }
            Command::Outcomes(acks) => {
                self.eager_acks = true;
                let failed = self.route_acks(acks, now);
                self.report_local_failures(failed, None);
            }
            Command::SubscribePattern(sub) => self.group.subscribe_pattern(sub, now),
            Command::Requeue(back) => self.requeue(back),
            Command::Paused(paused) => {
                self.paused = paused;
                self.reconcile_assignment(now);
            }
            Command::Close { acks, deadline, id } => self.start_close(acks, deadline, id, now),
            Command::Busy(entered) => self.note_busy(entered, now),
            Command::AcquireMode { mode, sized } => self.sessions.set_acquire_mode(mode, sized),
        }
    }

    /// A finished request.
    pub(crate) fn handle_event(&mut self, ev: Event, now: Instant) {
        match ev {
            Event::Coordinator(r) => self.on_coordinator(r, now),
            Event::Heartbeat(r) => self.on_heartbeat(r, now),
            Event::Fetch { node, sent, sent_at, result } => self.on_fetch(node, sent, sent_at, result, now),
            Event::Ack { node, sent, result } => self.on_ack(node, sent, result, now),
            Event::Metadata(r) => self.on_metadata(r, now),
            Event::TopicList(r) => self.on_topic_list(r, now),
        }
    }

    /// Decides whatever the state machines want sent now (queued for `poll_transmit`), and
    /// answers a waiting poll from the buffer. Every decider runs on every turn, in this
    /// order (as quinn-proto's `poll_transmit` looks at every part): each one that has
    /// nothing to do returns at once, so no table of which input wakes which decider is
    /// kept by hand (a missed entry there stalled the consumer until the next heartbeat).
    /// A decider that changes what an earlier one reads leaves it to the next `drive`, and
    /// arms that one's timer where it must act at once (the leave heartbeat of a close or
    /// of a missed poll interval is due now, so the shell drives again in the same instant).
    pub(crate) fn drive(&mut self, now: Instant) {
        if !self.halted() {
            self.drive_group(now);
        }
        self.report_topic_error();
        // A poll answered from the buffer first: the fetch plan then sees whether a poll
        // still waits for records (only then may a fetch acquire without a refill).
        self.try_deliver(now);
        self.release_if_idle(now);
        self.enforce_poll_interval(now);
        self.drive_sessions(now);
        self.drive_close(now);
        self.tell_session_epochs();
    }

    /// The session manager's turn: what each broker's session sends now, given what the
    /// application wants (the [`Demand`] it reads).
    fn drive_sessions(&mut self, now: Instant) {
        if self.closing.is_some() {
            return;
        }
        let waiting = self.waiting_for_records();
        let app_idle = self.app_idle(now);
        let lock = self.lock_duration();
        let demand = Demand {
            buffer: &self.buffer,
            waiting,
            app_idle,
            drain_per_sec: self.drain.per_sec(now),
            poll_size: self.poll_size,
            lock,
            can_fetch: self.fatal.is_none() && self.group.is_active(),
            commits: &self.commits,
            eager_acks: self.eager_acks,
            member: self.group.member_id(),
            renew_ok: self.shared.renew_supported.load(std::sync::atomic::Ordering::Relaxed),
        };
        self.sessions.poll_transmit(now, &demand, &mut self.outbox);
    }

    /// The next request to send, in the order decided.
    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// The public handle was dropped without close: release what it held and leave, as
    /// close would, within a short time.
    pub(crate) fn handle_gone(&mut self, now: Instant) {
        if self.closing.is_none() {
            warn!(group = self.cfg.group_id, "share consumer dropped without close(); releasing its records");
            self.start_close(Vec::new(), now + Duration::from_secs(5), None, now);
        }
    }
}
