//! Membership: coordinator lookup, heartbeats, and turning the assignment into fetch sets.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use kafka_protocol::messages::ShareGroupHeartbeatResponse;
use tracing::{debug, info, warn};

use super::topic_errors::PollAnswer;
use super::{Coordinator, DriverCore, Node, TopicPartition, Transmit};
use crate::error::{Error, Result};
use crate::share::membership::Outcome;
use crate::share::session::ShareSession;
use crate::share::TopicIdPartition;

impl DriverCore {
    pub(super) fn drive_group(&mut self, now: Instant) {
        if self.metadata.due(now) && !self.membership.subscription().is_empty() {
            self.metadata.sent(now);
            let topics: Vec<String> = self.membership.subscription().iter().cloned().collect();
            self.outbox.push_back(Transmit::Metadata { topics });
        }
        if self.heartbeat_in_flight
            || self.membership.poll_timeout().is_none_or(|t| t > now)
            || self.throttles.heartbeat_until(now).is_some()
        {
            return;
        }
        let coordinator = match self.coordinator {
            Coordinator::Known(node) => node,
            Coordinator::Finding => return,
            Coordinator::BackingOff(until) if until > now => return,
            Coordinator::Unknown | Coordinator::BackingOff(_) => {
                self.coordinator = Coordinator::Finding;
                self.outbox.push_back(Transmit::FindCoordinator { group: self.cfg.group_id.clone() });
                return;
            }
        };
        let Some(req) = self.membership.poll_heartbeat(now) else {
            return;
        };
        self.heartbeat_in_flight = true;
        self.shared.metrics.record_heartbeat();
        self.outbox.push_back(Transmit::Heartbeat { node: coordinator, request: req });
    }

    /// A Metadata answer for the subscription: per-topic refusals wait for the next poll
    /// (see `topic_errors.rs`), then the assignment is mapped onto the brokers again.
    pub(super) fn on_metadata(&mut self, r: Result<Vec<(String, i16)>>, now: Instant) {
        self.metadata.answered(r.is_ok());
        match r {
            Ok(errors) => {
                for (topic, code) in &errors {
                    debug!(topic, code, "metadata refused a subscribed topic");
                }
                self.topic_errors.on_metadata(self.membership.subscription(), &errors);
            }
            Err(e) => {
                debug!(error = %e, "metadata refresh failed");
            }
        }
        self.reconcile_assignment(now);
    }

    /// Answers a waiting poll with a topic refusal it has not reported yet (before records:
    /// with a busy healthy topic, a poll would otherwise never get to say it), or with a
    /// corrupt batch once the records ahead of it are handed out; until then the poll may take
    /// only those (see `topic_errors.rs`). Call it before `try_deliver`.
    pub(super) fn report_topic_error(&mut self) {
        let waiting = self.waiter.as_ref().is_some_and(|w| !w.reply.is_closed());
        if !waiting || self.fatal.is_some() || !self.topic_errors.has_pending() {
            return;
        }
        let runs = self.buffer.iter().map(|f| (f.tp, f.records.iter().map(|r| r.offset)));
        match self.topic_errors.poll_answer(runs) {
            PollAnswer::Error(e) => {
                if let Some(w) = self.waiter.take() {
                    if !matches!(e, Error::CorruptRecord { .. }) {
                        warn!(group = self.cfg.group_id, error = %e, "subscribed topic refused");
                    }
                    let _ = w.reply.send(Err(e));
                }
            }
            PollAnswer::UpTo(n) => {
                if let Some(w) = self.waiter.as_mut() {
                    w.max = w.max.min(n);
                }
            }
            PollAnswer::Records => {}
        }
    }

    /// A coordinator lookup's answer. The shell sends each lookup once; retries of a
    /// retriable failure are the core's, backing off (`retry.backoff.ms` doubling to
    /// `retry.backoff.max.ms`) for as long as the member wants a coordinator.
    pub(super) fn on_coordinator(&mut self, r: Result<i32>, now: Instant) {
        self.coordinator = Coordinator::Unknown;
        match r {
            Ok(node) => {
                debug!(group = self.cfg.group_id, node, "group coordinator");
                self.coordinator_backoff.reset();
                self.coordinator = Coordinator::Known(node);
            }
            Err(e) if e.is_retriable() => {
                let delay = self.coordinator_backoff.next_delay();
                debug!(error = %e, ?delay, "coordinator lookup failed; retrying");
                self.coordinator = Coordinator::BackingOff(now + delay);
            }
            Err(e) => self.set_fatal(e),
        }
    }

    pub(super) fn on_heartbeat(&mut self, r: Result<ShareGroupHeartbeatResponse>, now: Instant) {
        self.heartbeat_in_flight = false;
        let outcome = match r {
            Ok(resp) => {
                self.throttles.note_heartbeat(resp.throttle_time_ms, now);
                self.membership.handle_response(&resp, now)
            }
            Err(e) => self.membership.handle_error(e, now),
        };
        self.shared.metrics.set_rebalances(self.membership.rebalances());
        match outcome {
            Outcome::Ok | Outcome::Left => {}
            Outcome::AssignmentChanged => {
                info!(
                    group = self.cfg.group_id,
                    epoch = self.membership.epoch(),
                    partitions = self.membership.assignment().values().map(|p| p.len()).sum::<usize>(),
                    "assignment changed"
                );
                self.reconcile_assignment(now);
            }
            Outcome::FindCoordinator => {
                // Look it up again, unless a lookup is already on its way.
                if let Coordinator::Known(_) = self.coordinator {
                    self.coordinator = Coordinator::Unknown;
                }
            }
            Outcome::Fenced => {
                info!(group = self.cfg.group_id, "member fenced; rejoining with the same member id");
                // The broker dropped what we held; our sessions' acks cannot succeed.
                let ids: Vec<i32> = self.nodes.keys().copied().collect();
                for id in ids {
                    self.reset_session(id, crate::consumer::driver::session_gone(id));
                }
                self.reconcile_assignment(now);
            }
            Outcome::Fatal(e) => self.set_fatal(e),
        }
    }

    /// Recomputes which partitions to fetch from which broker.
    pub(super) fn reconcile_assignment(&mut self, now: Instant) {
        let mut per_node: HashMap<i32, BTreeSet<TopicIdPartition>> = HashMap::new();
        let mut missing = false;
        for (topic_id, parts) in self.membership.assignment() {
            let Some(name) = self.topology.topic_name(topic_id) else {
                missing = true;
                continue;
            };
            for &p in parts {
                if !self.paused.is_empty() && self.paused.contains(&TopicPartition::new(&*name, p)) {
                    continue; // paused: not fetched (its records already held keep their locks)
                }
                match self.topology.leader(&name, p) {
                    Some(leader) => {
                        per_node
                            .entry(leader)
                            .or_default()
                            .insert(TopicIdPartition { topic_id: *topic_id, partition: p });
                    }
                    None => missing = true,
                }
            }
        }
        if missing {
            self.metadata.want();
        } else {
            self.metadata.settled();
        }
        for (id, n) in self.nodes.iter_mut() {
            n.session.set_wanted(per_node.remove(id).unwrap_or_default());
        }
        let demand = self.fresh_demand(now);
        for (id, wanted) in per_node {
            let mut session = ShareSession::new(id);
            session.set_wanted(wanted);
            self.nodes.insert(
                id,
                Node {
                    session,
                    backoff: self.cfg.cluster.backoff(),
                    // A broker that muted the connection before this node was made again.
                    retry_at: self.throttles.share_until(id, now),
                    in_flight_acks: false,
                    pace: super::pace::Pace { demand, ..Default::default() },
                    redeliveries: Default::default(),
                    ack_retries: Default::default(),
                },
            );
        }
        // Records buffered for partitions we no longer fetch from their broker go back.
        let wanted: HashMap<i32, BTreeSet<TopicIdPartition>> =
            self.nodes.iter().map(|(id, n)| (*id, n.session.wanted().clone())).collect();
        self.release_buffer(|f| !wanted.get(&f.node).is_some_and(|w| w.contains(&f.tp)));
    }
}
