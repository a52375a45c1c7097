//! Share sessions outbound: deciding, per broker, whether to send a ShareFetch (with the acks
//! it can carry) or a ShareAcknowledge now, and building it. Pacing (`pace.rs`) says how
//! much to fetch; the answers are handled in `answers.rs`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::pace::FetchPlan;
use super::{DriverCore, Node, Transmit};
use crate::acquire_mode::AcquireMode;
use crate::protocol::share::{ShareAcknowledgeRequest, ShareFetchRequest};
use crate::share::session::Sent;

impl DriverCore {
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
                tracing::trace!(node = id, urgent, "acknowledgements go now, by ShareAcknowledge");
                self.send_ack(id, req, sent);
                continue;
            }
            if plan != FetchPlan::None {
                if let Some((req, sent)) = n.session.build_fetch(&group, &member, params) {
                    n.in_flight_acks = !sent.acks.is_empty();
                    if n.in_flight_acks {
                        // Their linger is over: acks queued from now on start their own. Kept
                        // from the first ack ever queued, it would make every ack "overdue" once
                        // acks keep arriving while fetches are in flight (a steady stream), and
                        // each pause of the prefetch would then send a ShareAcknowledge of its own
                        // that holds the session from the next fetch.
                        n.pace.acks_since = None;
                    }
                    n.pace.nowait_in_flight = plan == FetchPlan::NoWait;
                    n.pace.parked = None;
                    n.pace.releases_queued &= n.session.has_acks();
                    if !waiting && !n.pace.demand {
                        n.pace.refill = false; // the one refill of the last poll
                    }
                    n.pace.demand = false;
                    self.spawn_fetch(id, req, sent, now);
                    continue;
                }
            }
            // No fetch will carry the acks soon: after a short linger they go on their own.
            if overdue {
                tracing::trace!(node = id, "acknowledgements lingered with no fetch to carry them: ShareAcknowledge");
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
            n.pace.acks_since = None;
            n.pace.releases_queued &= n.session.has_acks();
        }
        self.outbox.push_back(Transmit::Acknowledge { node: id, request: req, sent });
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

    fn spawn_fetch(&mut self, node: i32, req: ShareFetchRequest, sent: Sent, now: Instant) {
        self.outbox.push_back(Transmit::Fetch { node, request: req, sent, sent_at: now });
    }

    /// How long a fetch may wait at the broker (the shell adds it to the request timeout).
    pub(crate) fn fetch_max_wait(&self) -> Duration {
        self.cfg.fetch_max_wait
    }
}
