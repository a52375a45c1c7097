//! The group manager: everything about being a member of the share group.
//!
//! [`GroupManager`] owns the coordinator (where it is, the lookup in flight or backing off),
//! the membership state machine (`share::membership`: epochs, the assignment) and its
//! heartbeat in flight, the coordinator connection's throttle, the subscription's metadata
//! refreshes (`metadata_refresh.rs`), a pattern subscription's topic listings
//! (`pattern.rs`) and the subscription a member that missed its poll interval rejoins with.
//! Inputs: `handle_coordinator`, `handle_heartbeat`, `handle_metadata`, `handle_topic_list`,
//! `subscribe`/`subscribe_pattern`, and the close and poll-interval steps (`leave`,
//! `leave_stale`, `rejoin_if_stale`). Outputs: `poll_transmit` queues Metadata,
//! FindCoordinator, ShareGroupHeartbeat and topic listings on the parent's outbox; its timers
//! are the heartbeat's, the metadata refresh's and the pattern's (`*_deadline`). What the
//! assignment means for the share sessions is the parent's (`assignment.rs`), which hears of
//! it from `handle_heartbeat`'s [`Outcome`].

mod metadata_refresh;
mod pattern;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use kafka_protocol::messages::ShareGroupHeartbeatResponse;
use tracing::debug;

use super::sessions::throttle_end;
use super::{Transmit, Wire};
use crate::backoff::Backoff;
use crate::consumer::config::ShareConsumerConfig;
use crate::error::{Error, Result};
use crate::share::membership::{MemberState, Membership, Outcome};

/// Where the group coordinator is, as far as the core knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coordinator {
    Unknown,
    /// A FindCoordinator is in flight.
    Finding,
    /// The last lookup failed (retriable): the next one waits until then.
    BackingOff(Instant),
    Known(i32),
}

/// The member's side of the group (see the module doc).
pub(super) struct GroupManager {
    group_id: String,
    membership: Membership,
    coordinator: Coordinator,
    /// Spaces out coordinator lookups that fail (the shell sends each lookup once).
    coordinator_backoff: Backoff,
    /// How heartbeats go: v1, within `request.timeout.ms`.
    heartbeat_wire: Wire,
    heartbeat_in_flight: bool,
    /// Until when the coordinator's connection is muted (KIP-219: a heartbeat answer's
    /// throttle time; see `sessions/throttle.rs`).
    heartbeat_throttle: Option<Instant>,
    metadata: metadata_refresh::MetadataRefresh,
    /// A pattern subscription's topic listings (`pattern.rs`).
    pattern: pattern::PatternRefresh,
    /// Set while the member is out of the group for a missed poll interval: the
    /// subscription the next poll rejoins with.
    stale: Option<BTreeSet<String>>,
    /// The consumer is closing: no new subscription, no more listings.
    closing: bool,
    /// A new pattern subscription's listing backoff starts as this one.
    backoff: Backoff,
    metadata_max_age: Duration,
}

impl GroupManager {
    pub(super) fn new(cfg: &ShareConsumerConfig) -> GroupManager {
        GroupManager {
            group_id: cfg.group_id.clone(),
            membership: Membership::new(cfg.group_id.clone(), cfg.client_rack.clone()),
            coordinator: Coordinator::Unknown,
            coordinator_backoff: cfg.cluster.backoff(),
            heartbeat_wire: Wire::new((1, 1), cfg.cluster.request_timeout),
            heartbeat_in_flight: false,
            heartbeat_throttle: None,
            metadata: Default::default(),
            pattern: Default::default(),
            stale: None,
            closing: false,
            backoff: cfg.cluster.backoff(),
            metadata_max_age: cfg.metadata_max_age,
        }
    }

    // --- what the rest of the core reads ---

    pub(super) fn member_id(&self) -> &str {
        self.membership.member_id()
    }

    /// In the group (joined or joining): its partitions may be fetched.
    pub(super) fn is_active(&self) -> bool {
        self.membership.is_active()
    }

    pub(super) fn subscription(&self) -> &BTreeSet<String> {
        self.membership.subscription()
    }

    pub(super) fn assignment(&self) -> &BTreeMap<uuid::Uuid, BTreeSet<i32>> {
        self.membership.assignment()
    }

    pub(super) fn epoch(&self) -> i32 {
        self.membership.epoch()
    }

    pub(super) fn rebalances(&self) -> u64 {
        self.membership.rebalances()
    }

    /// Out of the group for a missed poll interval, until the next poll.
    pub(super) fn is_stale(&self) -> bool {
        self.stale.is_some()
    }

    /// Fresher metadata is needed (an unknown topic, a partition without a known leader, a
    /// moved partition, a lost broker).
    pub(super) fn want_metadata(&mut self) {
        self.metadata.want();
    }

    /// The metadata now covers everything the assignment needs: the backoff starts over.
    pub(super) fn metadata_settled(&mut self) {
        self.metadata.settled();
    }

    // --- inputs ---

    /// A subscription by names. Returns false while closing (nothing changes then).
    pub(super) fn subscribe(&mut self, topics: Vec<String>, now: Instant) -> bool {
        self.stale = None; // a new subscription replaces the one to rejoin with
        if self.closing {
            return false;
        }
        self.pattern.clear();
        self.membership.subscribe(topics, now);
        self.metadata.want();
        true
    }

    /// A coordinator lookup's answer. The shell sends each lookup once; retries of a
    /// retriable failure are the manager's, backing off (`retry.backoff.ms` doubling to
    /// `retry.backoff.max.ms`) for as long as the member wants a coordinator. A failure that
    /// is not retriable is returned: it is fatal for the consumer.
    pub(super) fn handle_coordinator(&mut self, r: Result<i32>, now: Instant) -> Option<Error> {
        self.coordinator = Coordinator::Unknown;
        match r {
            Ok(node) => {
                debug!(group = self.group_id, node, "group coordinator");
                self.coordinator_backoff.reset();
                self.coordinator = Coordinator::Known(node);
                None
            }
            Err(e) => {
                // A failure that is not retriable backs off too: a close's leave looks the
                // coordinator up again after one, and must not do so in a tight loop.
                let delay = self.coordinator_backoff.next_delay();
                self.coordinator = Coordinator::BackingOff(now + delay);
                if !e.is_retriable() {
                    return Some(e);
                }
                debug!(error = %e, ?delay, "coordinator lookup failed; retrying");
                None
            }
        }
    }

    /// A heartbeat's answer (or failure): what it means for the member. A coordinator to
    /// look up again is handled here; the other outcomes are for the core.
    pub(super) fn handle_heartbeat(&mut self, r: Result<ShareGroupHeartbeatResponse>, now: Instant) -> Outcome {
        self.heartbeat_in_flight = false;
        let outcome = match r {
            Ok(resp) => {
                if let Some(t) = throttle_end(resp.throttle_time_ms, now) {
                    self.heartbeat_throttle = Some(self.heartbeat_throttle.map_or(t, |h| h.max(t)));
                }
                self.membership.handle_response(&resp, now)
            }
            Err(e) => self.membership.handle_error(e, now),
        };
        if let Outcome::FindCoordinator = outcome {
            // Look it up again, unless a lookup is already on its way.
            if let Coordinator::Known(_) = self.coordinator {
                self.coordinator = Coordinator::Unknown;
            }
        }
        outcome
    }

    /// A Metadata answer for the subscription came (`ok`: it succeeded).
    pub(super) fn handle_metadata(&mut self, ok: bool) {
        self.metadata.answered(ok);
    }

    /// The consumer closes: no new subscription or listing from now on.
    pub(super) fn handle_close(&mut self) {
        self.closing = true;
    }

    /// Leaves the group (the close's last step): the leave heartbeat goes next.
    pub(super) fn leave(&mut self, now: Instant) {
        self.membership.leave(now);
    }

    /// Stops heartbeating at once (a close that ran out of time).
    pub(super) fn stop(&mut self) {
        self.membership = Membership::new(self.group_id.clone(), None);
    }

    /// Whether leaving is still unanswered: the member is in the group, leaving, or a
    /// heartbeat is in flight.
    pub(super) fn leave_unanswered(&self) -> bool {
        let leaving = self.membership.is_active() || matches!(self.membership.state(), MemberState::Leaving);
        leaving || self.heartbeat_in_flight
    }

    /// Leaves the group for a missed poll interval, keeping the subscription for the next
    /// poll to rejoin with.
    pub(super) fn leave_stale(&mut self, now: Instant) {
        self.stale = Some(self.membership.subscription().clone());
        self.membership.leave(now);
    }

    /// The first poll after leaving for a missed poll interval rejoins; returns whether it
    /// did.
    pub(super) fn rejoin_if_stale(&mut self, now: Instant) -> bool {
        match self.stale.take() {
            Some(topics) => {
                self.membership.subscribe(topics, now);
                true
            }
            None => false,
        }
    }

    // --- outputs ---

    /// Queues on `out` what the group sends now: a metadata refresh, a topic listing, a
    /// coordinator lookup or a heartbeat. Returns whether a heartbeat went.
    pub(super) fn poll_transmit(&mut self, now: Instant, out: &mut VecDeque<Transmit>) -> bool {
        self.poll_pattern(now, out);
        if self.metadata.due(now) && !self.membership.subscription().is_empty() {
            self.metadata.sent(now);
            let topics: Vec<String> = self.membership.subscription().iter().cloned().collect();
            out.push_back(Transmit::Metadata { topics });
        }
        if self.heartbeat_in_flight
            || self.membership.poll_timeout().is_none_or(|t| t > now)
            || self.heartbeat_throttle.is_some_and(|t| t > now)
        {
            return false;
        }
        let coordinator = match self.coordinator {
            Coordinator::Known(node) => node,
            Coordinator::Finding => return false,
            Coordinator::BackingOff(until) if until > now => return false,
            Coordinator::Unknown | Coordinator::BackingOff(_) => {
                self.coordinator = Coordinator::Finding;
                out.push_back(Transmit::FindCoordinator { group: self.group_id.clone() });
                return false;
            }
        };
        let Some(request) = self.membership.poll_heartbeat(now) else {
            return false;
        };
        self.heartbeat_in_flight = true;
        out.push_back(Transmit::Heartbeat { node: coordinator, request, wire: self.heartbeat_wire.clone() });
        true
    }

    /// When the next heartbeat may go. One due while another is in flight, or while the
    /// coordinator is being looked up, waits for that answer (an input wakes the core): as
    /// a deadline it would only make the shell spin. A muted coordinator connection, or a
    /// lookup backing off, holds it back until that is over.
    pub(super) fn heartbeat_deadline(&self, now: Instant) -> Option<Instant> {
        if self.heartbeat_in_flight || self.coordinator == Coordinator::Finding {
            return None;
        }
        let h = self.membership.poll_timeout()?;
        let mut due = self.heartbeat_throttle.filter(|u| *u > now).map_or(h, |u| h.max(u));
        if let Coordinator::BackingOff(until) = self.coordinator {
            due = due.max(until);
        }
        Some(due)
    }

    /// When a wanted metadata refresh may go. A refresh is only sent for a subscription:
    /// with none (left, or leaving), a wanted one waits for the next.
    pub(super) fn metadata_deadline(&self) -> Option<Instant> {
        self.metadata.wakeup().filter(|_| !self.membership.subscription().is_empty())
    }

    /// When a pattern subscription lists the topics again.
    pub(super) fn pattern_deadline(&self) -> Option<Instant> {
        self.pattern.wakeup()
    }
}
