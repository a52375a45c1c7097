//! The group's answers as the core takes them: the group manager's outcomes, and turning
//! the assignment into each broker's fetch set (the session manager's `set_wanted`).

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use kafka_protocol::messages::ShareGroupHeartbeatResponse;
use tracing::{debug, info, warn};

use super::topic_errors::PollAnswer;
use super::{DriverCore, TopicPartition};
use crate::error::{Error, Result};
use crate::share::membership::Outcome;
use crate::share::TopicIdPartition;

impl DriverCore {
    /// The group manager's turn: metadata, topic listings, coordinator lookups, heartbeats.
    pub(super) fn drive_group(&mut self, now: Instant) {
        if self.group.poll_transmit(now, &mut self.outbox) {
            self.shared.metrics.record_heartbeat();
        }
    }

    /// A Metadata answer for the subscription: per-topic refusals wait for the next poll
    /// (see `topic_errors.rs`), then the assignment is mapped onto the brokers again.
    pub(super) fn on_metadata(&mut self, r: Result<Vec<(String, i16)>>, now: Instant) {
        self.group.handle_metadata(r.is_ok());
        match r {
            Ok(errors) => {
                for (topic, code) in &errors {
                    debug!(topic, code, "metadata refused a subscribed topic");
                }
                for topic in super::topic_errors::missing(self.group.subscription(), &errors) {
                    warn!(group = self.cfg.group_id, topic, "subscribed topic does not exist: no records until it is created (asked again at the next metadata refresh)");
                }
                self.topic_errors.on_metadata(self.group.subscription(), &errors);
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
        let waiting = self.waiter.as_ref().is_some_and(|w| !w.abandoned);
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
                    self.reply_poll(w.id, Err(e));
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

    /// A pattern subscription's listing: a changed subscription is mapped again.
    pub(super) fn on_topic_list(&mut self, r: Result<Vec<String>>, now: Instant) {
        if self.group.handle_topic_list(r, now, &mut self.events) {
            self.topic_errors.subscription_changed();
            self.reconcile_assignment(now);
        }
    }

    /// A coordinator lookup's answer (the group manager retries what can be retried).
    pub(super) fn on_coordinator(&mut self, r: Result<i32>, now: Instant) {
        if let Some(e) = self.group.handle_coordinator(r, now) {
            self.set_fatal(e);
        }
    }

    /// A heartbeat's answer, as the group manager took it.
    pub(super) fn on_heartbeat(&mut self, r: Result<ShareGroupHeartbeatResponse>, now: Instant) {
        let outcome = self.group.handle_heartbeat(r, now);
        self.shared.metrics.set_rebalances(self.group.rebalances());
        match outcome {
            Outcome::Ok | Outcome::Left | Outcome::FindCoordinator => {}
            Outcome::AssignmentChanged => {
                info!(
                    group = self.cfg.group_id,
                    epoch = self.group.epoch(),
                    partitions = self.group.assignment().values().map(|p| p.len()).sum::<usize>(),
                    "assignment changed"
                );
                self.reconcile_assignment(now);
            }
            Outcome::Fenced => {
                info!(group = self.cfg.group_id, "member fenced; rejoining with the same member id");
                // Our sessions start anew at epoch 0; their queued acks fail (the records will
                // be redelivered). The brokers still hold the old sessions and their records:
                // a close ends them (epoch -1) so the records go back at once.
                let ids = self.sessions.ids();
                for id in ids {
                    self.abandon_session(id, crate::consumer::driver::session_gone(id));
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
        for (topic_id, parts) in self.group.assignment() {
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
            self.group.want_metadata();
        } else {
            self.group.metadata_settled();
        }
        let demand = self.fresh_demand(now);
        self.sessions.set_wanted(per_node, demand, now);
        // Records buffered for partitions we no longer fetch from their broker go back.
        let wanted = self.sessions.wanted();
        self.release_buffer(|f| !wanted.get(&f.node).is_some_and(|w| w.contains(&f.tp)));
    }
}
