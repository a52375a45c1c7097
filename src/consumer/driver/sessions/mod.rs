//! The session manager: every broker's share session and the policy of what to send on it.
//!
//! [`SessionManager`] owns, per broker (`Node`), the [`ShareSession`] (epochs, the fetch set,
//! queued acks), its backoff and throttle, the acks being retried (`ack_retry.rs`), the
//! redeliveries that make late acks of older deliveries fail, and the pacing state
//! (`pace.rs`: refill, demand, parked, the ack linger). **The pacing policy lives here, in
//! `sessions/pace.rs`, and only this module writes it**: the rest of the core tells the
//! manager what the application did (a poll arrived, records were delivered, handed back or
//! released, acks to route) and hands it a read-only [`Demand`] each turn; the manager
//! answers with [`Transmit`]s queued on the parent's outbox (`poll_transmit`), its timers
//! (`arm_timers`: a session's retry, pacing) and what its inputs settled (acks failed here,
//! the acks a reset dropped), for the parent to report.
//!
//! Inputs from the broker come in through `handle_*`-style calls the parent's `answers.rs`
//! makes while it walks an answer (the answer's records go to the parent's buffer, its
//! partition errors to the group's metadata).

mod ack_retry;
mod pace;
#[cfg(test)]
pub(super) use pace::ACK_CARRYING_WAIT;
mod send;
mod throttle;

pub(super) use throttle::until as throttle_end;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::timers::Timer;
use super::{session_gone, AckEntry, CommitWaiter, Fetched, Transmit};
use crate::acquire_mode::AcquireMode;
use crate::backoff::Backoff;
use crate::consumer::config::ShareConsumerConfig;
use crate::error::Error;
use crate::protocol::records::AcquiredRange;
use crate::share::acks::{AckKind, PartitionAcks, Settled};
use crate::share::redeliveries::Redeliveries;
use crate::share::session::{Sent, ShareSession};
use crate::share::TopicIdPartition;

/// The settings the session manager reads (copied from the consumer's config).
struct Settings {
    group_id: String,
    /// `request.timeout.ms`: how long a ShareAcknowledge may take, and a ShareFetch on top
    /// of its wait at the broker.
    request_timeout: Duration,
    fetch_max_wait: Duration,
    fetch_min_bytes: i32,
    fetch_max_bytes: i32,
    max_poll_records: usize,
    acquire_mode: AcquireMode,
    /// `share.acquire.mode` as configured: the processing engine may choose record_limit
    /// over it (`set_acquire_mode`), and goes back to it where a broker cannot.
    configured_acquire_mode: AcquireMode,
    /// Every fetch asks for the last poll's size (the processing engine's room), in either
    /// mode: no prefetch sized by the drain rate.
    sized_to_poll: bool,
    /// Each new node's backoff starts as this one.
    backoff: Backoff,
    /// How long acks are retried: `default.api.timeout.ms`, as Java bounds its retries.
    ack_retry_limit: Duration,
}

/// Per-broker state around its share session.
struct Node {
    session: ShareSession,
    backoff: Backoff,
    retry_at: Option<Instant>,
    in_flight_acks: bool,
    pace: pace::Pace,
    /// Offsets this session acquired again, so late acks of older deliveries are refused.
    redeliveries: Redeliveries,
    /// Partitions whose acks are being retried after a transient error (`ack_retry.rs`).
    ack_retries: HashMap<TopicIdPartition, ack_retry::AckRetry>,
}

impl Node {
    /// The session sends nothing before `at` (a backoff, a throttle): a later wait already set
    /// stands.
    fn hold_until(&mut self, at: Instant) {
        self.retry_at = Some(self.retry_at.map_or(at, |t| t.max(at)));
    }
}

/// The share sessions, one per broker, and their pacing (see the module doc).
pub(super) struct SessionManager {
    nodes: HashMap<i32, Node>,
    /// Connections a broker muted with a throttle time (`throttle.rs`).
    throttles: throttle::Throttles,
    record_limit_turn: usize,
    settings: Settings,
}

/// What the rest of the core tells pacing each turn, read-only: the application's demand
/// and the facts a fetch decision depends on.
pub(super) struct Demand<'a> {
    /// The records fetched and not handed out yet, in the order polls take them.
    pub buffer: &'a VecDeque<Fetched>,
    /// A poll waits for records.
    pub waiting: bool,
    /// The application has stopped taking records (`activity.rs`).
    pub app_idle: bool,
    /// Records per second the application takes.
    pub drain_per_sec: f64,
    /// Records the last poll asked for.
    pub poll_size: usize,
    /// The acquisition lock's duration (zero before a broker said it).
    pub lock: Duration,
    /// The member may fetch: in the group, and the consumer not failed.
    pub can_fetch: bool,
    /// The commits waiting: their brokers' acks are urgent.
    pub commits: &'a [CommitWaiter],
    /// Acks go at once when no fetch carries them (the processing engine's outcomes).
    pub eager_acks: bool,
    pub member: &'a str,
    /// The cluster speaks ShareAcknowledge v2 (RENEW).
    pub renew_ok: bool,
}

impl Demand<'_> {
    /// Records buffered from every broker.
    fn buffered(&self) -> usize {
        self.buffer.iter().map(|f| f.records.len()).sum()
    }

    fn buffered_from(&self, id: i32) -> usize {
        self.buffer.iter().filter(|f| f.node == id).map(|f| f.records.len()).sum()
    }

    /// Whether every record buffered from `id` has at least 3/4 of its lock left.
    fn buffer_fresh(&self, id: i32, now: Instant) -> bool {
        self.buffer
            .iter()
            .filter(|f| f.node == id)
            .filter_map(|f| f.records.front().and_then(|r| r.lock_deadline))
            .all(|d| d.saturating_duration_since(now) >= self.lock * 3 / 4)
    }
}

/// Routes one record's ack to its session `n` (see `route_acks`). Always inlined: the
/// consumer's own acks all come this way, one a record, and as a call (the entry moved
/// across it) it cost the consumer's `route_acks` 13% more (callgrind-poll explicit).
#[inline(always)]
fn route_one(n: &mut Node, a: AckEntry, now: Instant, lock: Duration, renew_ok: bool, routed: &mut Routed) {
    let node = a.node;
    // The handle refuses RENEW on a cluster without ShareAcknowledge v2; one that got here
    // anyway (the cluster learned to be v1 since) must not wait in the queue forever, nor go
    // to a broker that would reject its whole batch (LANDSCAPE bug 13).
    if a.kind == AckKind::Renew && !renew_ok {
        routed.failed.push((a, Error::RenewUnsupported));
        return;
    }
    if n.session.generation() != a.generation {
        routed.failed.push((a, session_gone(node)));
        return;
    }
    // A delivery whose lock has lapsed cannot be acknowledged: the broker may have handed the
    // record to someone else, delivered it to us again, or (once the group moved past it)
    // take the acknowledgement without a word.
    let superseded = n.redeliveries.check(a.tp, a.offset, a.delivery_count).is_err();
    let deadline = n.redeliveries.lock_until(a.tp, a.offset, a.lock_deadline);
    if superseded || deadline.is_some_and(|d| now >= d) {
        routed.lapsed.push((a, superseded));
        return;
    }
    if a.kind == AckKind::Renew {
        // Renewed from when the broker takes it, no earlier than now.
        n.redeliveries.renewed(a.tp, a.offset, now + lock);
        routed.renewing.push((a.tp, a.offset, node));
    } else {
        n.redeliveries.settled(a.tp, a.offset);
        n.pace.settled(1);
    }
    note_release(n, a.kind);
    n.session.queue_ack(a.tp, a.offset, a.kind)
}

/// A RELEASE queued on session `n` (one record's or a run's): released records are for the
/// other members, so no refill from this broker until the application polls again.
#[inline(always)]
fn note_release(n: &mut Node, kind: AckKind) {
    if matches!(kind, AckKind::Release | AckKind::ReleaseUnseen) {
        n.pace.refill = false;
        n.pace.releases_queued = true;
    }
}

/// Acks routed to their sessions: those refused here, for the parent to report.
#[derive(Default)]
pub(super) struct Routed {
    /// Not sent, with why: no session, a reset since, RENEW unsupported.
    pub failed: Vec<(AckEntry, Error)>,
    /// Not sent: the delivery's lock lapsed (`true`: superseded by a later delivery).
    pub lapsed: Vec<(AckEntry, bool)>,
    /// RENEWs queued: (partition, offset, the broker they go to).
    pub renewing: Vec<(TopicIdPartition, i64, i32)>,
}

/// How an answer stands against its session.
pub(super) enum Answered {
    /// The node is gone.
    Gone,
    /// The session was reset while the request was in flight.
    Stale,
    /// The answer of the session's request in flight, now taken.
    Current,
}

impl SessionManager {
    /// The processing engine's choice of acquisition mode (record_limit where the cluster
    /// has it: each fetch acquires no more than the engine has room for); `sized`: a
    /// batch_optimized fetch asks for that room as well.
    pub(super) fn set_acquire_mode(&mut self, mode: AcquireMode, sized: bool) {
        self.settings.acquire_mode = mode;
        self.settings.sized_to_poll = sized;
    }

    /// Whether each fetch asks for exactly the last poll's size (record_limit, or the
    /// engine's sized batch_optimized fetches).
    pub(super) fn fetches_sized_to_poll(&self) -> bool {
        self.settings.acquire_mode == AcquireMode::RecordLimit || self.settings.sized_to_poll
    }

    /// A broker refused the acquisition mode: if the engine chose it (the configured mode is
    /// another), fall back to the configured one and say whether it did; a configured
    /// record_limit stays (the error is the user's to see).
    pub(super) fn fall_back_acquire_mode(&mut self) -> bool {
        let s = &mut self.settings;
        if s.acquire_mode == s.configured_acquire_mode {
            return false;
        }
        s.acquire_mode = s.configured_acquire_mode;
        true
    }

    pub(super) fn new(cfg: &ShareConsumerConfig) -> SessionManager {
        SessionManager {
            nodes: HashMap::new(),
            throttles: Default::default(),
            record_limit_turn: 0,
            settings: Settings {
                group_id: cfg.group_id.clone(),
                request_timeout: cfg.cluster.request_timeout,
                fetch_max_wait: cfg.fetch_max_wait,
                fetch_min_bytes: cfg.fetch_min_bytes,
                fetch_max_bytes: cfg.fetch_max_bytes,
                max_poll_records: cfg.max_poll_records,
                acquire_mode: cfg.acquire_mode,
                configured_acquire_mode: cfg.acquire_mode,
                sized_to_poll: false,
                backoff: cfg.cluster.backoff(),
                ack_retry_limit: cfg.default_api_timeout,
            },
        }
    }

    /// The brokers with a session, in no particular order.
    pub(super) fn ids(&self) -> Vec<i32> {
        self.nodes.keys().copied().collect()
    }

    /// Whether the open sessions' epochs are other than `told` (no allocation: this runs on
    /// every turn of the driver).
    pub(super) fn epochs_differ(&self, told: &BTreeMap<i32, i32>) -> bool {
        let mut open = 0;
        for (id, n) in self.nodes.iter().filter(|(_, n)| n.session.is_open()) {
            open += 1;
            if told.get(id) != Some(&n.session.epoch()) {
                return true;
            }
        }
        open != told.len()
    }

    /// Open share sessions: broker -> next epoch (for observability and tests).
    pub(super) fn open_epochs(&self) -> BTreeMap<i32, i32> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.session.is_open())
            .map(|(id, n)| (*id, n.session.epoch()))
            .collect()
    }

    /// Arms the manager's timers: each free session's retry (backoff or throttle) and
    /// pacing's deadlines (passed ones too: `next_timer` skips those, `drive` marks them).
    pub(super) fn arm_timers(&self, arm: &mut dyn FnMut(Timer, Option<Instant>)) {
        for (&id, n) in self.nodes.iter().filter(|(_, n)| !n.session.in_flight()) {
            arm(Timer::SessionRetry(id), n.retry_at);
        }
        let (acks, parked) = self.pace_deadlines();
        arm(Timer::Pace, acks);
        arm(Timer::Pace, parked);
    }

    // --- what the application did ---

    /// A poll arrived: each broker may send one refill for the next poll, and, when it
    /// found nothing buffered, owes it a fetch.
    pub(super) fn poll_arrived(&mut self, buffer_empty: bool) {
        for n in self.nodes.values_mut() {
            n.pace.refill = true;
            n.pace.demand |= buffer_empty;
        }
    }

    /// A poll was answered with records. Under record_limit it owes no fetch any more: a
    /// poll that gave up while the fetch for it was in flight left its successor's demand
    /// behind, and the answer that served that successor then drew a second fetch, which
    /// acquired one more poll's worth than the mode allows. In the `renewal_loop` example
    /// that record sat unseen behind a slow one, went back to the group when the application
    /// stopped polling, and came back at delivery count 2. batch_optimized keeps the owed
    /// fetch: there it is the prefetch.
    pub(super) fn poll_served(&mut self) {
        if self.settings.acquire_mode != AcquireMode::RecordLimit {
            return;
        }
        for n in self.nodes.values_mut() {
            n.pace.demand = false;
        }
    }

    /// `count` records from `node` were handed to the application.
    pub(super) fn delivered(&mut self, node: i32, count: usize) {
        if let Some(n) = self.nodes.get_mut(&node) {
            n.pace.delivered(count);
        }
    }

    /// `count` records delivered from `node` came back unseen (a poll that could not hand
    /// them out).
    pub(super) fn handed_back(&mut self, node: i32, count: usize) {
        if let Some(n) = self.nodes.get_mut(&node) {
            n.pace.settled(count);
        }
    }

    /// Buffered records of `node` (fetched in `generation`) go back to the broker: the
    /// client's own RELEASEs on its session ([`AckKind::ReleaseUnseen`]: never reported as
    /// the application's), if that session is still the one that acquired them.
    pub(super) fn release(
        &mut self,
        node: i32,
        generation: u64,
        tp: TopicIdPartition,
        offsets: impl ExactSizeIterator<Item = i64>,
    ) {
        let Some(n) = self.nodes.get_mut(&node) else { return };
        if n.session.generation() == generation && offsets.len() > 0 {
            for o in offsets {
                n.session.queue_ack(tp, o, AckKind::ReleaseUnseen);
            }
            n.pace.releases_queued = true;
        }
    }

    /// Queues acks on the sessions that delivered their records; returns, with the reason,
    /// those that must not be sent: their session was reset since (the broker released the
    /// records: sending would only earn INVALID_RECORD_STATE), or the session holds a newer
    /// delivery of the offset (the ack would land on a delivery nobody processed).
    pub(super) fn route_acks(&mut self, acks: Vec<AckEntry>, now: Instant, lock: Duration, renew_ok: bool) -> Routed {
        let mut routed = Routed::default();
        // Acks come in runs of one broker (a poll's records do): one lookup of the node a
        // run, not one a record (hashing the node id was a tenth of the implicit-mode cost).
        let mut acks = acks.into_iter().peekable();
        while let Some(first) = acks.next() {
            let node = first.node;
            // A RENEW refused (see `route_one`) says so even where the session is gone.
            let refused = |a: &AckEntry| (a.kind == AckKind::Renew && !renew_ok).then_some(Error::RenewUnsupported);
            let Some(n) = self.nodes.get_mut(&node) else {
                let mut next = Some(first);
                while let Some(run) = next.take().or_else(|| acks.next_if(|a| a.node == node)) {
                    // Failures are reported per record (the commit callback's offsets).
                    for a in run.singles() {
                        let e = refused(&a).unwrap_or_else(|| session_gone(node));
                        routed.failed.push((a, e));
                    }
                }
                continue;
            };
            let mut next = Some(first);
            while let Some(a) = next.take().or_else(|| acks.next_if(|a| a.node == node)) {
                if a.len <= 1 {
                    route_one(n, a, now, lock, renew_ok, &mut routed);
                    continue;
                }
                // A run of records given one outcome (a whole batch, say): what the checks
                // below look at is the same for each of them unless the session tracks a
                // redelivery or a renewal, so it is queued in one step. Otherwise, and when
                // the run fails, record by record: each gets what a single ack would.
                let whole = a.kind != AckKind::Renew
                    && n.session.generation() == a.generation
                    && n.redeliveries.is_quiet()
                    && a.lock_deadline.is_none_or(|d| now < d);
                if !whole {
                    for one in a.singles() {
                        route_one(n, one, now, lock, renew_ok, &mut routed);
                    }
                    continue;
                }
                n.pace.settled(a.len as usize);
                note_release(n, a.kind);
                n.session.queue_ack_range(a.tp, a.offset, a.last(), a.kind);
            }
        }
        routed
    }

    // --- the assignment ---

    /// Sets each broker's fetch set from the assignment; a broker new to it gets a session
    /// (owing the last poll a fetch when `demand`).
    pub(super) fn set_wanted(
        &mut self,
        mut per_node: HashMap<i32, BTreeSet<TopicIdPartition>>,
        demand: bool,
        now: Instant,
    ) {
        for (id, n) in self.nodes.iter_mut() {
            n.session.set_wanted(per_node.remove(id).unwrap_or_default());
        }
        for (id, wanted) in per_node {
            let mut session = ShareSession::new(id);
            session.set_wanted(wanted);
            self.nodes.insert(
                id,
                Node {
                    session,
                    backoff: self.settings.backoff.clone(),
                    // A broker that muted the connection before this node was made again.
                    retry_at: self.throttles.share_until(id, now),
                    in_flight_acks: false,
                    pace: pace::Pace { demand, ..Default::default() },
                    redeliveries: Default::default(),
                    ack_retries: Default::default(),
                },
            );
        }
    }

    /// Each broker's fetch set.
    pub(super) fn wanted(&self) -> HashMap<i32, BTreeSet<TopicIdPartition>> {
        self.nodes.iter().map(|(id, n)| (*id, n.session.wanted().clone())).collect()
    }

    // --- answers ---

    /// A share-session answer asked for a throttle: the session sends nothing more until it
    /// ends. Returns until when, if it asked for one.
    pub(super) fn handle_throttle(&mut self, node: i32, throttle_ms: i32, now: Instant) -> Option<Instant> {
        let until = self.throttles.note_share(node, throttle_ms, now)?;
        if let Some(n) = self.nodes.get_mut(&node) {
            n.hold_until(until);
        }
        Some(until)
    }

    /// Takes an answer of the session's request in flight, if it is still the session's.
    pub(super) fn handle_answer(&mut self, node: i32, sent: &Sent) -> Answered {
        let Some(n) = self.nodes.get_mut(&node) else {
            return Answered::Gone;
        };
        if sent.generation != n.session.generation() {
            return Answered::Stale;
        }
        n.in_flight_acks = false;
        n.session.on_success(sent);
        Answered::Current
    }

    /// A ShareFetch answered with partition errors (`failed`) backs the broker off: an
    /// immediate refetch would meet them again. One without resets the backoff.
    pub(super) fn handle_partition_errors(&mut self, node: i32, failed: bool, now: Instant) {
        let Some(n) = self.nodes.get_mut(&node) else { return };
        if failed {
            let delay = n.backoff.next_delay();
            n.hold_until(now + delay);
        } else {
            n.backoff.reset();
        }
    }

    /// A request failed as a whole: the session's one in flight is over, and a request of
    /// the current session backs the broker off. Returns whether it was stale (its session
    /// was reset meanwhile, or the node is gone).
    pub(super) fn handle_request_failed(&mut self, node: i32, sent: &Sent, now: Instant) -> bool {
        match self.nodes.get_mut(&node) {
            Some(n) => {
                // This was the session's one request in flight, of its generation or (stale)
                // of the one a reset ended: nothing else was sent meanwhile.
                n.session.clear_in_flight();
                n.in_flight_acks = false;
                let stale = sent.generation != n.session.generation();
                if !stale {
                    let delay = n.backoff.next_delay();
                    n.hold_until(now + delay);
                }
                stale
            }
            None => true,
        }
    }

    /// The answer of a request whose session was reset meanwhile came: it was the session's
    /// one in flight, so nothing of the new generation was sent meanwhile.
    pub(super) fn handle_stale_answer(&mut self, node: i32) {
        if let Some(n) = self.nodes.get_mut(&node) {
            n.session.clear_in_flight();
            n.in_flight_acks = false;
        }
    }

    /// A fetch answer acquired these ranges of `tp` (recorded for later deliveries' acks).
    /// None when the node is gone; else the acks still queued for an earlier delivery of
    /// records delivered again here, taken out of the queue, and the first of them with its
    /// new delivery (the application's first, if any: what the error of its failure names).
    ///
    /// Such an ack was checked against the delivery the session held when it was queued
    /// (`route_acks`), then waited (behind a fetch in flight, say) while the lock lapsed and
    /// the broker handed the record to this member again. The broker knows a record by
    /// offset only: sent now, it would settle the new delivery, which the application has
    /// not seen. Only a redelivery (count above 1) can supersede one.
    pub(super) fn handle_acquired(
        &mut self,
        node: i32,
        tp: TopicIdPartition,
        ranges: &[AcquiredRange],
        now: Instant,
    ) -> Option<(Settled, Option<(i64, i16)>)> {
        let n = self.nodes.get_mut(&node)?;
        let (mut superseded, mut first) = (Settled::default(), None);
        for r in ranges {
            n.redeliveries.acquired(tp, r.first_offset, r.last_offset, r.delivery_count, now);
            if r.delivery_count > 1 && n.session.has_acks() {
                let taken = n.session.take_queued(tp, r.first_offset, r.last_offset);
                let lowest = taken.reported.first().or(taken.unseen.first()).map(|&o| (o, r.delivery_count));
                if first.is_none() || (superseded.reported.is_empty() && !taken.reported.is_empty()) {
                    first = lowest.or(first);
                }
                superseded.merge(taken);
            }
        }
        Some((superseded, first))
    }

    /// Queues acks the core decided itself (gaps, rejected corrupt batches, released
    /// invalid ranges) on `node`'s session.
    pub(super) fn queue_acks(
        &mut self,
        node: i32,
        tp: TopicIdPartition,
        offsets: impl Iterator<Item = i64>,
        kind: AckKind,
    ) {
        if let Some(n) = self.nodes.get_mut(&node) {
            for o in offsets {
                n.session.queue_ack(tp, o, kind);
            }
        }
    }

    /// A fetch answered with `records` records (`carried_acks`: it carried acks).
    pub(super) fn handle_fetched(
        &mut self,
        node: i32,
        records: usize,
        carried_acks: bool,
        lock: Duration,
        now: Instant,
    ) {
        if let Some(n) = self.nodes.get_mut(&node) {
            n.pace.fetched(records, carried_acks, now);
            n.redeliveries.expire(now, lock);
        }
    }

    /// Resets a broker's session; returns the acks it had queued (they fail), or `None`
    /// without a session.
    pub(super) fn reset(&mut self, node: i32) -> Option<BTreeMap<TopicIdPartition, PartitionAcks>> {
        self.reset_with(node, ShareSession::reset)
    }

    /// [`Self::reset`] after a fence: the broker still holds the session (see
    /// [`ShareSession::abandon`]), so a close still ends it.
    pub(super) fn abandon(&mut self, node: i32) -> Option<BTreeMap<TopicIdPartition, PartitionAcks>> {
        self.reset_with(node, ShareSession::abandon)
    }

    fn reset_with(
        &mut self,
        node: i32,
        reset: fn(&mut ShareSession) -> BTreeMap<TopicIdPartition, PartitionAcks>,
    ) -> Option<BTreeMap<TopicIdPartition, PartitionAcks>> {
        let n = self.nodes.get_mut(&node)?;
        let failed = reset(&mut n.session);
        n.pace.reset();
        n.ack_retries.clear();
        n.redeliveries.clear();
        Some(failed)
    }

    // --- commits and renewals ---

    /// Whether `node` has acks queued or in flight (a commit waits for it).
    pub(super) fn has_pending_acks(&self, node: i32) -> bool {
        self.nodes.get(&node).is_some_and(|n| n.session.has_acks() || n.in_flight_acks)
    }

    /// The brokers with acks queued or in flight.
    pub(super) fn pending_ack_nodes(&self) -> impl Iterator<Item = i32> + '_ {
        self.nodes.iter().filter(|(_, n)| n.session.has_acks() || n.in_flight_acks).map(|(id, _)| *id)
    }

    /// Until when `node`'s session holds the lock of `tp`'s `offset`, as far as renewals tell.
    pub(super) fn lock_until(&self, node: i32, tp: TopicIdPartition, offset: i64) -> Option<Instant> {
        self.nodes.get(&node).and_then(|n| n.redeliveries.lock_until(tp, offset, None))
    }

    // --- closing ---

    /// Whether any session has a request in flight.
    pub(super) fn any_in_flight(&self) -> bool {
        self.nodes.values().any(|n| n.session.in_flight())
    }

    /// The brokers with a request in flight, in words ("1, 2").
    pub(super) fn in_flight_list(&self) -> String {
        let mut ids: Vec<i32> = self.nodes.iter().filter(|(_, n)| n.session.in_flight()).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.iter().map(|id| id.to_string()).collect::<Vec<_>>().join(", ")
    }

    /// Sends every session's final acknowledgements (epoch -1), which end it.
    pub(super) fn close_all(&mut self, member: &str, out: &mut VecDeque<Transmit>) {
        for (id, n) in self.nodes.iter_mut() {
            if let Some((request, sent)) = n.session.build_close(&self.settings.group_id, member) {
                n.in_flight_acks = !sent.acks.is_empty();
                let wire = self.settings.ack_wire();
                out.push_back(Transmit::Acknowledge { node: *id, request, sent, wire });
            }
        }
    }

    /// Ends `node`'s session (epoch -1: the broker releases what it acquired), unless a
    /// request is in flight; the caller resets the session next.
    pub(super) fn close_session(&mut self, node: i32, member: &str, out: &mut VecDeque<Transmit>) {
        let Some(n) = self.nodes.get_mut(&node) else { return };
        if let Some((request, sent)) = n.session.build_close(&self.settings.group_id, member) {
            let wire = self.settings.ack_wire();
            out.push_back(Transmit::Acknowledge { node, request, sent, wire });
        }
    }

    #[cfg(test)]
    pub(super) fn releases_queued(&self, node: i32) -> bool {
        self.nodes.get(&node).is_some_and(|n| n.pace.releases_queued)
    }

    #[cfg(test)]
    pub(super) fn parked(&self, node: i32) -> bool {
        self.nodes.get(&node).is_some_and(|n| n.pace.parked.is_some())
    }
}
