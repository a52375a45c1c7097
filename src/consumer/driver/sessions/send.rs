//! Share sessions outbound: deciding, per broker, whether to send a ShareFetch (with the acks
//! it can carry) or a ShareAcknowledge now, and building it. Pacing (`pace.rs`) says how
//! much to fetch; the answers come back through the manager's `handle_*` (`answers.rs`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::pace::{FetchPlan, ACK_CARRYING_WAIT};
use super::{Demand, Node, SessionManager, Settings};
use crate::acquire_mode::AcquireMode;
use crate::consumer::driver::{Transmit, Wire};
use crate::error::Error;
use crate::protocol::share::{
    ShareAcknowledgeRequest, ShareFetchRequest, ACQUIRE_MODE_BATCH_OPTIMIZED, MAX_VERSION, MIN_VERSION,
};
use crate::share::session::{FetchParams, Sent};

impl SessionManager {
    /// Queues on `out` what each free session sends now: urgent acks or renewals by
    /// ShareAcknowledge, a fetch as pacing allows (carrying the queued acks), or acks that
    /// lingered long enough with no fetch to carry them.
    pub(in crate::consumer::driver) fn poll_transmit(
        &mut self,
        now: Instant,
        d: &Demand,
        out: &mut VecDeque<Transmit>,
    ) {
        let mut ids: Vec<i32> = self.nodes.keys().copied().collect();
        ids.sort_unstable();
        // Acks queued un-park their session first: record_limit's pick skips parked ones.
        for n in self.nodes.values_mut() {
            n.pace.note_acks(n.session.has_acks(), now);
        }
        let fetch_turn = self.record_limit_pick(&ids, now, d);
        for id in ids {
            // A session with a request in flight (the usual case) has nothing to decide.
            let busy = self.nodes.get(&id).is_none_or(|n| n.session.in_flight() || n.retry_at.is_some_and(|t| t > now));
            if busy {
                continue;
            }
            let plan = self.fetch_plan(id, fetch_turn, now, d);
            let overdue = self.acks_overdue(id, now, d);
            // Any consumer's, the public poll's as well as the engine's (see
            // `ACK_CARRYING_WAIT`). On a 3-node cluster 71% of our acks' no-wait answers came
            // back empty (the partitions' lock window still held by the very records they
            // accept) and the next fetch got the records; with the wait, 30% fewer fetches and
            // 17% less broker CPU per record (issue 36; as franz-go, whose fetches carrying
            // acks wait). On one broker, one session answers for every partition and the
            // count of fetches does not change.
            let carries_acks = self.nodes.get(&id).is_some_and(|n| n.session.has_acks());
            let params = self.fetch_params(plan == FetchPlan::NoWait, carries_acks, d);
            let group = self.settings.group_id.as_str();
            let Some(n) = self.nodes.get_mut(&id) else {
                continue;
            };
            n.retry_at = None;
            // Acks someone waits for (commit, close) or that no fetch can carry go now, by
            // ShareAcknowledge: piggybacked on a long poll, their results would wait for it.
            // RELEASEs too, unless a poll waits (its fetch carries them): released records
            // are for the other members, now.
            let urgent = d.commits.iter().any(|w| w.nodes.contains(&id))
                || n.session.has_acks_outside_wanted()
                || (n.pace.releases_queued && !d.waiting);
            let send_ack = |n: &mut Node, renew: bool| n.session.build_ack(group, d.member, renew);
            let ack = if urgent && n.session.has_acks() && !(d.renew_ok && n.session.has_renew()) {
                send_ack(n, false)
            } else if d.renew_ok && n.session.has_renew() {
                send_ack(n, true)
            } else {
                None
            };
            if let Some((req, sent)) = ack {
                tracing::trace!(node = id, urgent, "acknowledgements go now, by ShareAcknowledge");
                send_acks(n, id, req, sent, self.settings.ack_wire(), out);
                continue;
            }
            if plan != FetchPlan::None {
                if let Some((request, sent)) = n.session.build_fetch(group, d.member, params) {
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
                    if !d.waiting && !n.pace.demand {
                        n.pace.refill = false; // the one refill of the last poll
                    }
                    n.pace.demand = false;
                    let wire = self.settings.fetch_wire(id, &request);
                    out.push_back(Transmit::Fetch { node: id, request, sent, sent_at: now, wire });
                    continue;
                }
            }
            // No fetch will carry the acks soon: after a short linger they go on their own.
            if overdue {
                tracing::trace!(node = id, "acknowledgements lingered with no fetch to carry them: ShareAcknowledge");
                if let Some((req, sent)) = send_ack(n, false) {
                    send_acks(n, id, req, sent, self.settings.ack_wire(), out);
                }
            }
        }
    }

    fn fetch_params(&self, no_wait: bool, carries_acks: bool, d: &Demand) -> FetchParams {
        let s = &self.settings;
        let max = s.max_poll_records.min(i32::MAX as usize) as i32;
        let wait = match (no_wait, carries_acks) {
            (false, _) => s.fetch_max_wait,
            (true, false) => Duration::ZERO,
            (true, true) => s.fetch_max_wait.min(ACK_CARRYING_WAIT),
        };
        FetchParams {
            max_wait_ms: wait.as_millis().min(i32::MAX as u128) as i32,
            min_bytes: s.fetch_min_bytes,
            max_bytes: s.fetch_max_bytes,
            max_records: self.fetch_max_records(d).min(i32::MAX as usize) as i32,
            batch_size: max,
            acquire_mode: match s.acquire_mode {
                AcquireMode::BatchOptimized => 0,
                AcquireMode::RecordLimit => 1,
            },
        }
    }

    /// record_limit: no prefetch. Fetch only for a waiting poll with nothing buffered, from
    /// one broker at a time (taking turns), so no more than max.poll.records are acquired.
    fn record_limit_pick(&mut self, ids: &[i32], now: Instant, d: &Demand) -> Option<i32> {
        if self.settings.acquire_mode != AcquireMode::RecordLimit
            || !d.can_fetch
            || !self.wants_records(d)
            || !d.buffer.is_empty()
            || self.nodes.values().any(|n| n.session.in_flight() && !n.session.wanted().is_empty())
        {
            return None;
        }
        let eligible: Vec<i32> = ids
            .iter()
            .copied()
            .filter(|id| {
                // A parked session (its last no-wait fetch came back empty) waits for acks
                // that may free records (they un-park it) or its quiet time, as in
                // batch_optimized: it never spins on empty answers.
                self.nodes.get(id).is_some_and(|n| {
                    !n.session.wanted().is_empty()
                        && n.retry_at.is_none_or(|t| t <= now)
                        && n.pace.parked.is_none_or(|since| now >= since + self.park_limit())
                })
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
}

/// Queues a ShareAcknowledge built from the session of `id`.
fn send_acks(
    n: &mut Node,
    id: i32,
    request: ShareAcknowledgeRequest,
    sent: Sent,
    wire: Wire,
    out: &mut VecDeque<Transmit>,
) {
    n.in_flight_acks = true;
    n.pace.acks_since = None;
    n.pace.releases_queued &= n.session.has_acks();
    out.push_back(Transmit::Acknowledge { node: id, request, sent, wire });
}

impl Settings {
    /// How a ShareFetch to `node` goes: any version the codec speaks, within `request.timeout.ms` on top of
    /// `fetch.max.wait.ms` (the broker may hold it that long). record_limit is a v2 field:
    /// on a broker that picks v1 the fetch fails here, naming the broker (connect checked
    /// only the broker it asked).
    pub(super) fn fetch_wire(&self, node: i32, request: &ShareFetchRequest) -> Wire {
        let wire = Wire::new((MIN_VERSION, MAX_VERSION), self.request_timeout + self.fetch_max_wait);
        if request.share_acquire_mode == ACQUIRE_MODE_BATCH_OPTIMIZED {
            return wire;
        }
        wire.needing(2, Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, broker: Some(node) })
    }

    /// How a ShareAcknowledge goes: any version the codec speaks (RENEW is sent only where
    /// v2 is, `renew_ok`), within `request.timeout.ms`.
    pub(super) fn ack_wire(&self) -> Wire {
        Wire::new((MIN_VERSION, MAX_VERSION), self.request_timeout)
    }
}
