//! The share RPCs on the simulated brokers: ShareFetch (acquire, with piggybacked acks) and
//! ShareAcknowledge (RENEW at v2), answered by the broker model's handlers
//! (`crate::broker_model::share_fetch`, `share_acknowledge`), the ones the public fake calls
//! too. Here the simulation lends them its state ([`ShareBroker`]): virtual time, the seeded
//! faults (forced errors, a session limit, failed acks, corrupt batches), its membership, and
//! the ledger and violations the invariants read.
//!
//! A fetch that finds nothing to hand out waits (long poll): the runner keeps it as
//! [`Parked`] and asks again ([`SimCluster::retry_parked`]) when the share state changed or
//! its `MaxWaitMs` passed.

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::Bytes;

use crate::broker_model::acknowledge::AckRefusal;
use crate::broker_model::broker::{AckEvent, AckSite, Cx, ShareBroker};
use crate::broker_model::partition::SharePartition;
use crate::broker_model::sessions::{SessionRefusal, SessionRequest, ShareSessions};
use crate::broker_model::{share_acknowledge, share_fetch};
use crate::protocol::share::{
    AcknowledgementBatch, AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, ShareAcknowledgeRequest,
    ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse, MAX_VERSION, MIN_VERSION,
};
use crate::share::acks::AckKind;

use super::cluster::SimCluster;
use super::state::{ClientId, Holder};

/// A fetch waiting for records.
pub(crate) type Parked = share_fetch::Pending<ClientId>;

/// What a ShareFetch gets: an answer now, or a wait.
pub(crate) type FetchOutcome = share_fetch::FetchOutcome<ClientId>;

impl SimCluster {
    /// Where and when broker `node` handles a request on connection `conn`: at v2 when the
    /// cluster speaks it.
    fn cx(&self, node: i32, conn: u64, now: Instant) -> Cx {
        Cx { node, conn, version: if self.cfg.v2 { MAX_VERSION } else { MIN_VERSION }, now }
    }

    /// A connection closed: the sessions it opened end.
    pub(crate) fn conn_closed(&mut self, node: i32, conn: u64) {
        for ((n, c), _) in self.sessions.end_where(|(n, _), s| *n == node && s.conn == conn) {
            self.release_member(n, c);
        }
    }

    /// Answers a ShareFetch that reached broker `node` on connection `conn`.
    pub(crate) fn share_fetch(
        &mut self,
        node: i32,
        client: ClientId,
        conn: u64,
        r: &ShareFetchRequest,
        now: Instant,
    ) -> FetchOutcome {
        let cx = self.cx(node, conn, now);
        share_fetch::handle(self, &cx, &client, r)
    }

    /// A ShareFetch leaves `client` for broker `node`: the partitions it lists, and those the
    /// broker's session will list once it takes it, must all be assigned to the client, as far
    /// as it knows (`Ledger::session_lists`, LANDSCAPE bug 8). The client forgets a partition
    /// that moved away with its next fetch to that broker (its acks go by ShareAcknowledge,
    /// which never adds one), and only a fetch acquires: so nothing of it is acquired for the
    /// client while it is not assigned. Checked when the request leaves: one request is in flight per
    /// session, so the broker's session is now what the request will find (or gone, and the
    /// request fails).
    pub(crate) fn fetch_sent(&mut self, client: ClientId, node: i32, r: &ShareFetchRequest) {
        let listed = || r.topics.iter().flat_map(|t| &t.partitions);
        let with_acks = listed().filter(|p| !p.acknowledgement_batches.is_empty()).map(|p| p.partition_index);
        self.ledger.acks_sent(client, with_acks);
        let forgotten: BTreeSet<i32> =
            r.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().copied()).collect();
        if !forgotten.is_empty() {
            self.ledger.forgets += 1;
        }
        let mut after = match r.share_session_epoch {
            0 => BTreeSet::new(),
            -1 => return,
            epoch => match self.sessions.get(&(node, client)) {
                Some(s) if s.epoch == epoch => s.parts.clone(),
                _ => return,
            },
        };
        after.extend(listed().map(|p| p.partition_index));
        after.retain(|p| !forgotten.contains(p));
        // A partition listed and forgotten at once leaves no trace on the broker, but listing
        // one that is not assigned (for its acks, say) is the bug all the same.
        after.extend(listed().map(|p| p.partition_index));
        self.ledger.session_lists(client, node, &after);
    }

    /// Looks again at a waiting fetch: its answer if records came or its time is up.
    pub(crate) fn retry_parked(&mut self, w: &Parked, now: Instant) -> Option<ShareFetchResponse> {
        share_fetch::poll(self, w, now)
    }

    /// Answers a ShareAcknowledge that reached broker `node` (v2 when the cluster speaks it).
    pub(crate) fn share_acknowledge(
        &mut self,
        node: i32,
        client: ClientId,
        conn: u64,
        r: &ShareAcknowledgeRequest,
        now: Instant,
    ) -> ShareAcknowledgeResponse {
        let cx = self.cx(node, conn, now);
        share_acknowledge::handle(self, &cx, &client, r)
    }
}

/// The simulated brokers as the share RPC handlers see them. Locks are held by (client,
/// broker, session): stricter than Kafka, so that an ack on the wrong session is seen.
impl ShareBroker for SimCluster {
    type Member = ClientId;
    type Holder = Holder;

    fn holder(&self, node: i32, member: &ClientId, session: u64) -> Holder {
        Holder { client: *member, node, session }
    }

    fn sessions(&self) -> &ShareSessions<(i32, ClientId)> {
        &self.sessions
    }

    fn sessions_mut(&mut self) -> &mut ShareSessions<(i32, ClientId)> {
        &mut self.sessions
    }

    fn topic_id(&self) -> uuid::Uuid {
        self.topic_id
    }

    fn lock_timeout_ms(&self) -> i32 {
        i32::try_from(self.cfg.lock.as_millis()).unwrap_or(i32::MAX)
    }

    fn leader(&self, p: i32) -> Option<LeaderIdAndEpoch> {
        let part = self.partition(p)?;
        Some(LeaderIdAndEpoch { leader_id: part.leader.unwrap_or(-1), leader_epoch: part.leader_epoch })
    }

    fn share_mut(&mut self, p: i32) -> Option<&mut SharePartition<Holder>> {
        usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)).map(|part| &mut part.share)
    }

    fn endpoint(&self, node: i32) -> Option<NodeEndpoint> {
        Some(NodeEndpoint { node_id: node, host: format!("sim-broker-{node}"), port: 9092, rack: None })
    }

    fn release_member(&mut self, node: i32, member: &ClientId) {
        SimCluster::release_member(self, node, *member);
    }

    fn violation(&mut self, what: String) {
        SimCluster::violation(self, what);
    }

    /// Serves the batches, corrupting the first if a fault asks (the ledger notes which).
    fn record_batches(&mut self, member: &ClientId, p: i32, got: &[AcquiredRecords]) -> Result<Option<Bytes>, String> {
        let corrupt = self.corrupt_next.remove(&p);
        let (records, corrupted) = self.records(p, got, corrupt);
        if let Some((first, last)) = corrupted {
            for r in got {
                for o in r.first_offset.max(first)..=r.last_offset.min(last) {
                    self.ledger.corrupted(*member, p, o, r.delivery_count);
                }
            }
        }
        Ok(records)
    }

    fn is_member(&self, member: &ClientId) -> bool {
        self.group.is_member(*member)
    }

    fn forced_error(&mut self, node: i32, member: &ClientId) -> Option<i16> {
        self.forced_errors.remove(&(node, *member))
    }

    fn session_limit_reached(&self, node: i32) -> bool {
        self.session_limit.contains(&node)
    }

    /// Only on a partition that exists: the fault waits for one that does.
    fn ack_fault(&mut self, node: i32, member: &ClientId, p: i32) -> Option<i16> {
        self.partition(p)?;
        self.forced_ack_errors.remove(&(node, *member))
    }

    /// The seeds were drawn with acknowledgement results answered at once.
    fn answers_acks_at_once(&self) -> bool {
        true
    }

    /// Only acks on an epoch-0 fetch are a client bug here: a wrong epoch or a lost session
    /// follow from the faults (a lost answer, a forgotten session).
    fn on_session_refused(&mut self, node: i32, member: &ClientId, _r: SessionRequest, why: &SessionRefusal) {
        if *why == SessionRefusal::AcksOnInitialFetch {
            self.violation(format!("client {member}: an epoch-0 ShareFetch to broker {node} carried acks"));
        }
    }

    /// Offsets outside the log are refused before the routing check reads their deliveries
    /// (a correct client never sends them). Then the routing: each ack must go to the broker
    /// and session that delivered the record, once (violations only; the model decides).
    fn check_acks(&mut self, at: &AckSite<'_, ClientId>, batches: &[AcknowledgementBatch]) -> Option<i16> {
        let (node, client, session, p, what) = (at.node, *at.member, at.session, at.partition, at.api);
        let end = self.partition(p)?.share.log_end();
        if let Some(b) = batches.iter().find(|b| b.first_offset < 0 || b.last_offset >= end) {
            let refusal = AckRefusal::OutsideLog { first: b.first_offset, last: b.last_offset, log_end: end };
            self.violation(format!("{what}: client {client} acked outside the log of partition {p}: {refusal:?}"));
            return Some(refusal.code().0);
        }
        for (o, kind) in expand(batches) {
            let hist = &self.parts[p as usize].log[o as usize].history;
            let mine = hist.iter().rev().find(|(c, d)| *c == client && d.node == node && d.session == session);
            let problem = match mine {
                Some((_, d)) if d.acked => Some(format!("twice (delivery {})", d.count)),
                Some(_) => None,
                None => Some(match hist.iter().rev().find(|(c, _)| *c == client) {
                    None => "never delivered to it".to_string(),
                    Some((_, d)) => format!(
                        "on broker {node} session {session}; it was delivered by broker {} session {} (delivery {})",
                        d.node, d.session, d.count
                    ),
                }),
            };
            if let Some(problem) = problem {
                self.violation(format!("{what}: client {client} acked {kind:?} p{p} offset {o} {problem}"));
            }
        }
        None
    }

    fn on_acks(&mut self, at: &AckSite<'_, ClientId>, batches: &[AcknowledgementBatch], e: AckEvent<'_>) {
        let (node, client, session, p, what) = (at.node, *at.member, at.session, at.partition, at.api);
        match e {
            AckEvent::UnknownPartition => {
                self.violation(format!("{what}: client {client} acked unknown partition {p}"));
            }
            AckEvent::Invalid(AckRefusal::TypeNotAllowed { offset, ty }) => {
                self.violation(format!("{what}: client {client} sent type {ty} for partition {p} offset {offset}"));
            }
            AckEvent::Invalid(_) => {
                self.violation(format!("{what}: client {client} sent invalid batches for partition {p}: {batches:?}"));
            }
            AckEvent::Refused(_) => {
                for (o, kind) in expand(batches) {
                    self.ledger.refused(client, p, o, kind);
                }
            }
            AckEvent::Applied(applied) => {
                self.version += 1;
                for &(o, kind, delivery) in applied {
                    if kind != AckKind::Renew {
                        let log = &mut self.parts[p as usize].log[o as usize];
                        let mine = log
                            .history
                            .iter_mut()
                            .rev()
                            .find(|(c, d)| *c == client && d.node == node && d.session == session);
                        if let Some((_, d)) = mine {
                            d.acked = true;
                        }
                    }
                    self.ledger.applied(client, node, session, p, o, delivery, kind);
                }
            }
        }
    }

    /// Notes every delivery (the share state changed, even when nothing was acquired: the
    /// runner looks at waiting fetches again after a change).
    fn on_acquired(&mut self, node: i32, member: &ClientId, session: u64, p: i32, got: &[AcquiredRecords]) {
        self.delivered(p, *member, node, session, got);
    }
}

/// The (offset, kind) of every ack in `batches`, which passed `validate_batches` and lie
/// inside the log.
fn expand(batches: &[AcknowledgementBatch]) -> impl Iterator<Item = (i64, AckKind)> + '_ {
    batches.iter().flat_map(|b| {
        (b.first_offset..=b.last_offset).enumerate().map(move |(i, o)| {
            let t = if b.acknowledge_types.len() == 1 { b.acknowledge_types[0] } else { b.acknowledge_types[i] };
            (o, ack_kind(t))
        })
    })
}
/// The kind of a wire type that passed `validate_batches` (types there are 0..=4).
fn ack_kind(t: i8) -> AckKind {
    match t {
        0 => AckKind::Gap,
        1 => AckKind::Accept,
        2 => AckKind::Release,
        3 => AckKind::Reject,
        _ => AckKind::Renew,
    }
}
