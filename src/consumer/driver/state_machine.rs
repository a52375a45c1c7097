//! The driver core's entry points: construction, the requests it emits, and the calls that
//! feed it (`handle_command`, `handle_event`, `handle_gone`, `drive`). The decisions
//! themselves live in the sibling files (`send.rs`, `answers.rs`, `group.rs`, `deliver.rs`,
//! `pace.rs`, ...), all on [`DriverCore`]; its deadlines are named in `timers.rs`.
//!
//! Style of quinn-proto: the caller owns IO and time. It feeds inputs with `now`, calls
//! `drive(now)`, drains [`DriverCore::poll_transmit`], and calls `drive` again by
//! [`DriverCore::poll_timeout`] (the earliest of its named timers) if nothing happens sooner.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ShareGroupHeartbeatRequest;
use tracing::warn;

use super::{pace, Command, CommitResults, CommitWaiter, Coordinator, DriverCore, Event, PollWaiter, Shared, Topology};
use crate::consumer::config::ShareConsumerConfig;
use crate::protocol::share::{ShareAcknowledgeRequest, ShareFetchRequest};
use crate::share::membership::Membership;
use crate::share::session::Sent;

/// A request the core decided to send. The shell sends it and feeds the answer (or the
/// failure) back as the matching [`super::Event`].
#[derive(Debug)]
pub(crate) enum Transmit {
    /// Refresh the metadata of these topics; answered by `Event::Metadata` (after the topology
    /// learned the new metadata) with the topics refused and their codes.
    Metadata { topics: Vec<String> },
    /// Look up the group's coordinator; answered by `Event::Coordinator`.
    FindCoordinator { group: String },
    /// A ShareGroupHeartbeat to the coordinator; answered by `Event::Heartbeat`.
    Heartbeat { node: i32, request: ShareGroupHeartbeatRequest },
    /// A ShareFetch on the broker's share-session connection; answered by `Event::Fetch`,
    /// which carries `sent` and `sent_at` back.
    Fetch { node: i32, request: ShareFetchRequest, sent: Sent, sent_at: Instant },
    /// A ShareAcknowledge on the same connection; answered by `Event::Ack`.
    Acknowledge { node: i32, request: ShareAcknowledgeRequest, sent: Sent },
    /// List every topic (a pattern subscription); answered by `Event::TopicList`.
    ListTopics,
}

impl DriverCore {
    pub(crate) fn new(cfg: ShareConsumerConfig, shared: Arc<Shared>, topology: Arc<dyn Topology>) -> DriverCore {
        let cfg_poll_size = cfg.max_poll_records.max(1);
        DriverCore {
            coordinator_backoff: cfg.cluster.backoff(),
            membership: Membership::new(cfg.group_id.clone(), cfg.client_rack.clone()),
            topology,
            cfg,
            shared,
            coordinator: Coordinator::Unknown,
            heartbeat_in_flight: false,
            metadata: Default::default(),
            nodes: HashMap::new(),
            buffer: VecDeque::new(),
            waiter: None,
            commits: Vec::new(),
            outbox: VecDeque::new(),
            fatal: None,
            closing: None,
            record_limit_turn: 0,
            drain: pace::DrainRate::default(),
            activity: pace::Activity::default(),
            topic_errors: Default::default(),
            renewing: HashMap::new(),
            renewed: Vec::new(),
            pattern: Default::default(),
            paused: HashSet::new(),
            stale: None,
            throttles: Default::default(),
            poll_size: cfg_poll_size,
            eager_acks: false,
        }
    }

    /// The member id this consumer joins with.
    pub(crate) fn member_id(&self) -> &str {
        self.membership.member_id()
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
                    self.metadata.want();
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
                    if max > 0 {
                        self.poll_size = max.min(self.cfg.max_poll_records).max(1);
                    }
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
            Command::Outcomes(acks) => {
                self.eager_acks = true;
                let failed = self.route_acks(acks, now);
                self.report_local_failures(failed, None);
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
            Command::Busy(entered) => self.note_busy(entered, now),
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
