//! What a fake broker lends the share RPC handlers (`share_fetch.rs`, `share_acknowledge.rs`):
//! its state, its faults and its bookkeeping, as the [`ShareBroker`] trait each fake implements
//! (the simulation's `SimCluster`, the public fake's per-request `FakeBroker`); and the two
//! steps both RPCs take: the session check and one partition's acknowledgements.
//!
//! The handlers decide everything Kafka decides (the order of the checks, the error codes,
//! the answer's shape); a fake decides only what is its own: how it names a member and a lock
//! holder, where a broker listens, which faults fire, and what it notes down (the simulation's
//! ledger, either fake's violations). No method reads a clock: the time is [`Cx::now`].

use std::time::Instant;

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::protocol::share::{AcknowledgementBatch, AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint};
use crate::share::acks::AckKind;

use super::acknowledge::{validate_batches, AckRefusal};
use super::partition::SharePartition;
use super::sessions::{SessionRefusal, SessionRequest, SessionUse, ShareSessions};

/// The first ShareFetch/ShareAcknowledge version with `IsRenewAck` and ShareAcknowledge's
/// `AcquisitionLockTimeoutMs` (KIP-1222; the codec speaks it as its `MAX_VERSION`).
pub(crate) const RENEW_VERSION: i16 = 2;
// The fakes cannot answer a version their codec does not speak.
const _: () = assert!(crate::protocol::share::MIN_VERSION < RENEW_VERSION);
const _: () = assert!(RENEW_VERSION <= crate::protocol::share::MAX_VERSION);

/// Where and when a request is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cx {
    /// The broker that received it.
    pub node: i32,
    /// The connection it came on (a ShareFetch at epoch 0 ties its session to it).
    pub conn: u64,
    /// Its version, as negotiated.
    pub version: i16,
    /// The time: the wall clock's for the fake, virtual for the simulation.
    pub now: Instant,
}

/// One partition's acknowledgements in a request: whose, on which session, in which API.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckSite<'a, M> {
    pub node: i32,
    pub member: &'a M,
    pub session: u64,
    pub partition: i32,
    /// "ShareFetch" or "ShareAcknowledge", for messages.
    pub api: &'static str,
}

/// What became of one partition's acknowledgements, for a fake's bookkeeping.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AckEvent<'a> {
    /// The partition does not exist (UNKNOWN_TOPIC_OR_PARTITION).
    UnknownPartition,
    /// The batches' shape is wrong, or a type is not allowed (INVALID_REQUEST).
    Invalid(&'a AckRefusal),
    /// The records' state refused them, all (INVALID_RECORD_STATE).
    Refused(&'a AckRefusal),
    /// Applied: (offset, kind, delivery count) of each ack (the simulation's ledger reads them).
    Applied(#[cfg_attr(not(test), allow(dead_code))] &'a [(i64, AckKind, i16)]),
}

/// A broker's state and its own choices, as the share RPC handlers use them. The required
/// methods are state; the provided ones are faults and bookkeeping a fake may add (the
/// defaults: none, as a real broker).
pub(crate) trait ShareBroker {
    /// Who sends a request: the fake's member id, the simulation's client.
    type Member: Ord + Clone + std::fmt::Display;
    /// Who holds an acquisition lock (the broker model's `SharePartition` holder).
    type Holder: Clone + PartialEq;

    /// The holder of what `member` acquires on `node` through `session`.
    fn holder(&self, node: i32, member: &Self::Member, session: u64) -> Self::Holder;
    fn sessions(&self) -> &ShareSessions<(i32, Self::Member)>;
    fn sessions_mut(&mut self) -> &mut ShareSessions<(i32, Self::Member)>;
    /// The id of the one topic the fakes serve.
    fn topic_id(&self) -> uuid::Uuid;
    /// `share.record.lock.duration.ms`, as the answers state it.
    fn lock_timeout_ms(&self) -> i32;
    /// Partition `p`'s leader (-1: none) and leader epoch; None: no such partition.
    fn leader(&self, p: i32) -> Option<LeaderIdAndEpoch>;
    /// Partition `p`'s share state; None: no such partition.
    fn share_mut(&mut self, p: i32) -> Option<&mut SharePartition<Self::Holder>>;
    /// Where broker `node` listens, if the fake knows.
    fn endpoint(&self, node: i32) -> Option<NodeEndpoint>;
    /// `member`'s session on `node` ended: what it holds there goes back.
    fn release_member(&mut self, node: i32, member: &Self::Member);
    /// Notes a protocol violation (a correct client causes none).
    fn violation(&mut self, what: String);
    /// The record batches for the runs `got` just acquired on partition `p`; an error when
    /// the fake cannot build them (the handler gives the records back).
    fn record_batches(
        &mut self,
        member: &Self::Member,
        p: i32,
        got: &[AcquiredRecords],
    ) -> Result<Option<Bytes>, String>;

    /// Whether `member` belongs to the group (4.2+ brokers serve members only).
    fn is_member(&self, _member: &Self::Member) -> bool {
        true
    }
    /// A fault: a top-level error for this request of `member` on `node`.
    fn forced_error(&mut self, _node: i32, _member: &Self::Member) -> Option<i16> {
        None
    }
    /// A fault: `node` opens no more share sessions.
    fn session_limit_reached(&self, _node: i32) -> bool {
        false
    }
    /// A fault: partition `p`'s acknowledgements fail with this code, unapplied.
    fn ack_fault(&mut self, _node: i32, _member: &Self::Member, _p: i32) -> Option<i16> {
        None
    }
    /// A fault: partition `p` answers a ShareFetch with this code and CurrentLeader.
    fn partition_fault(&self, _p: i32) -> Option<(i16, Option<i32>)> {
        None
    }
    /// At least this many records for a batch_optimized fetch (a real broker hands out
    /// whole batches); 0: what the fetch asks.
    fn whole_batch(&self) -> usize {
        0
    }
    /// Whether a ShareFetch whose acknowledgements have results is answered at once rather
    /// than held for records. Kafka holds it (the acknowledgements' results wait for the
    /// fetch); the simulation answers at once, as its seeds were drawn with.
    fn answers_acks_at_once(&self) -> bool {
        false
    }
    /// A request's session was refused: the fake's notes (violations).
    fn on_session_refused(&mut self, _node: i32, _member: &Self::Member, _r: SessionRequest, _why: &SessionRefusal) {}
    /// Checks of the fake's own, after the batches' shape and before the leader: a code
    /// refuses them unapplied.
    fn check_acks(&mut self, _at: &AckSite<'_, Self::Member>, _batches: &[AcknowledgementBatch]) -> Option<i16> {
        None
    }
    /// What became of one partition's acknowledgements: the fake's notes.
    fn on_acks(&mut self, _at: &AckSite<'_, Self::Member>, _batches: &[AcknowledgementBatch], _e: AckEvent<'_>) {}
    /// Records were acquired (`got`, maybe none) on partition `p` for `member`'s `session`.
    fn on_acquired(&mut self, _node: i32, _member: &Self::Member, _session: u64, _p: i32, _got: &[AcquiredRecords]) {}
}

/// A partition's CurrentLeader in an answer: its leader, or "none known" for no partition.
pub(crate) fn current_leader<B: ShareBroker + ?Sized>(b: &B, p: i32) -> LeaderIdAndEpoch {
    b.leader(p).unwrap_or_else(no_leader)
}

/// "No leader known", as a partition's `CurrentLeader` says it.
pub(crate) fn no_leader() -> LeaderIdAndEpoch {
    LeaderIdAndEpoch { leader_id: -1, leader_epoch: -1 }
}

/// Adds broker `node`'s endpoint to an answer's NodeEndpoints, once.
pub(crate) fn add_endpoint<B: ShareBroker + ?Sized>(b: &B, node: i32, endpoints: &mut Vec<NodeEndpoint>) {
    if node < 0 || endpoints.iter().any(|e| e.node_id == node) {
        return;
    }
    if let Some(e) = b.endpoint(node) {
        endpoints.push(e);
    }
}

/// The fault of a forced top-level error, if one fires: a broker that lost the session
/// (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH) forgets it and releases its records.
pub(crate) fn forced_error<B: ShareBroker + ?Sized>(b: &mut B, node: i32, member: &B::Member) -> Option<i16> {
    let code = b.forced_error(node, member)?;
    if code == ErrorCode::SHARE_SESSION_NOT_FOUND.0 || code == ErrorCode::INVALID_SHARE_SESSION_EPOCH.0 {
        end_session(b, node, member);
    }
    Some(code)
}

/// Checks a share request's session and epoch by the broker model's rules
/// (`sessions.rs`): opens or advances the session and returns its id, or the top-level error
/// code to answer. A wrong epoch is refused and the session kept; epoch 0 replaces the
/// session and leaves what the old one held to its locks (as on Kafka).
pub(crate) fn take_session<B: ShareBroker + ?Sized>(
    b: &mut B,
    node: i32,
    member: &B::Member,
    epoch: i32,
    request: SessionRequest,
) -> Result<u64, i16> {
    let opens = matches!(request, SessionRequest::Fetch { has_acks: false, .. });
    if epoch == 0 && opens && b.session_limit_reached(node) {
        return Err(ErrorCode::SHARE_SESSION_LIMIT_REACHED.0);
    }
    match b.sessions_mut().take(&(node, member.clone()), epoch, request) {
        Ok(SessionUse::Opened { id, .. } | SessionUse::Next { id } | SessionUse::Final { id }) => Ok(id),
        Err(refusal) => {
            b.on_session_refused(node, member, request, &refusal);
            Err(refusal.code().0)
        }
    }
}

/// Ends `member`'s session on `node` (epoch -1, or forgotten): what it held goes back.
pub(crate) fn end_session<B: ShareBroker + ?Sized>(b: &mut B, node: i32, member: &B::Member) {
    if b.sessions_mut().end(&(node, member.clone())).is_some() {
        b.release_member(node, member);
    }
}

/// Applies one partition's acknowledgement batches; returns the partition's error code (0:
/// applied). In Kafka's order: the batches' shape (KafkaApis, before it looks for the
/// leader), then the leader, then the records' state, all or nothing.
pub(crate) fn apply_acks<B: ShareBroker + ?Sized>(
    b: &mut B,
    at: &AckSite<'_, B::Member>,
    batches: &[AcknowledgementBatch],
    renew_allowed: bool,
    now: Instant,
) -> i16 {
    if let Some(code) = b.ack_fault(at.node, at.member, at.partition) {
        return code; // Refused unapplied: the records stay acquired until their locks lapse.
    }
    let Some(leader) = b.leader(at.partition) else {
        b.on_acks(at, batches, AckEvent::UnknownPartition);
        return ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0;
    };
    if let Err(e) = validate_batches(batches, renew_allowed) {
        b.on_acks(at, batches, AckEvent::Invalid(&e));
        return e.code().0;
    }
    if let Some(code) = b.check_acks(at, batches) {
        return code;
    }
    if leader.leader_id != at.node {
        return ErrorCode::NOT_LEADER_OR_FOLLOWER.0;
    }
    let holder = b.holder(at.node, at.member, at.session);
    let Some(share) = b.share_mut(at.partition) else {
        return ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0; // `leader` just found it
    };
    match share.acknowledge(&holder, batches, renew_allowed, now) {
        Ok(applied) => {
            b.on_acks(at, batches, AckEvent::Applied(&applied));
            0
        }
        Err(e) => {
            b.on_acks(at, batches, AckEvent::Refused(&e));
            e.code().0
        }
    }
}
