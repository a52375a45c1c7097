//! The fake cluster as the broker model's handlers see it (`crate::broker_model::share_fetch`,
//! `share_acknowledge`, `share_group_heartbeat`, the ones the simulation calls too): its state
//! under the lock, the scripted faults that fired for this request, and the violations it
//! reports. Locks are held by member id, as Kafka holds them.

use bytes::Bytes;

use crate::broker_model::acknowledge::AckRefusal;
use crate::broker_model::broker::{AckEvent, AckSite, Cx, ShareBroker};
use crate::broker_model::partition::SharePartition;
use crate::broker_model::sessions::{SessionRefusal, SessionRequest, ShareSessions};
use crate::broker_model::share_group_heartbeat::ShareCoordinator;
use crate::error::ErrorCode;
use crate::protocol::share::{AcknowledgementBatch, AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint};

use super::script::{Action, Effects};
use super::share::build_records;
use super::state::{Member, State};

/// One request's view of the fake cluster: its state and the faults that fired for it.
pub(super) struct FakeBroker<'a> {
    pub(super) st: &'a mut State,
    pub(super) fx: &'a Effects,
}

impl ShareBroker for FakeBroker<'_> {
    type Member = String;
    type Holder = String;

    fn holder(&self, _node: i32, member: &String, _session: u64) -> String {
        member.clone()
    }

    fn sessions(&self) -> &ShareSessions<(i32, String)> {
        &self.st.sessions
    }

    fn sessions_mut(&mut self) -> &mut ShareSessions<(i32, String)> {
        &mut self.st.sessions
    }

    fn topic_id(&self) -> uuid::Uuid {
        self.st.topic_id
    }

    fn lock_timeout_ms(&self) -> i32 {
        self.st.cfg.lock_timeout_ms
    }

    fn leader(&self, p: i32) -> Option<LeaderIdAndEpoch> {
        let part = self.st.partition(p)?;
        Some(LeaderIdAndEpoch { leader_id: part.leader, leader_epoch: part.leader_epoch })
    }

    fn share_mut(&mut self, p: i32) -> Option<&mut SharePartition<String>> {
        usize::try_from(p).ok().and_then(|i| self.st.parts.get_mut(i)).map(|part| &mut part.share)
    }

    fn endpoint(&self, node: i32) -> Option<NodeEndpoint> {
        let port = self.st.ports.get(&node)?;
        Some(NodeEndpoint { node_id: node, host: "127.0.0.1".into(), port: i32::from(*port), rack: None })
    }

    fn release_member(&mut self, node: i32, member: &String) {
        self.st.release_member(node, member);
    }

    fn violation(&mut self, what: String) {
        self.st.violation(what);
    }

    fn record_batches(&mut self, _member: &String, p: i32, got: &[AcquiredRecords]) -> Result<Option<Bytes>, String> {
        match self.st.partition(p) {
            Some(part) => build_records(part, p, got),
            None => Err("the partition is gone".to_string()), // the handler just acquired on it
        }
    }

    fn forced_error(&mut self, _node: i32, _member: &String) -> Option<i16> {
        match self.fx.terminal {
            Some(Action::TopLevelError(code)) => Some(code),
            _ => None,
        }
    }

    fn ack_fault(&mut self, _node: i32, _member: &String, p: i32) -> Option<i16> {
        self.fx.ack_error(p)
    }

    fn partition_fault(&self, p: i32) -> Option<(i16, Option<i32>)> {
        self.fx.partition_error(p)
    }

    fn whole_batch(&self) -> usize {
        self.st.cfg.min_fetch_records
    }

    /// An epoch out of sequence, a ShareAcknowledge at epoch 0 and acks on an epoch-0
    /// ShareFetch are client bugs; a session the broker does not know is not (it forgot it).
    fn on_session_refused(&mut self, node: i32, _member: &String, r: SessionRequest, why: &SessionRefusal) {
        let problem = match why {
            SessionRefusal::NotFound => return,
            SessionRefusal::InitialAcknowledge => format!("ShareAcknowledge at epoch 0 (node {node})"),
            SessionRefusal::AcksOnInitialFetch => format!("ShareFetch at epoch 0 carrying acks (node {node})"),
            SessionRefusal::InvalidEpoch { expected, got } => {
                format!("{} epoch {got} on node {node}, session expects {expected}", r.api())
            }
        };
        self.st.violation(problem);
    }

    /// Invalid batches and acks for records the member does not hold are violations; an ack
    /// that comes after its lock lapsed is refused the same way, but is no violation (a late
    /// ack is a race, not a client bug).
    fn on_acks(&mut self, at: &AckSite<'_, String>, batches: &[AcknowledgementBatch], e: AckEvent<'_>) {
        let (member, p, what) = (at.member, at.partition, at.api);
        let why = match e {
            AckEvent::UnknownPartition => format!("acks for unknown partition {p}"),
            AckEvent::Invalid(AckRefusal::TypeNotAllowed { offset, ty }) => {
                format!("acknowledge type {ty} not allowed here (partition {p} offset {offset})")
            }
            AckEvent::Invalid(_) => format!("invalid acknowledgement batches for partition {p}: {batches:?}"),
            AckEvent::Refused(AckRefusal::OutsideLog { first, last, log_end }) => format!(
                "acks from {member} for records it does not hold: partition {p} offsets {first}..={last}, outside its log (0..{log_end})"
            ),
            AckEvent::Refused(AckRefusal::NotHeld { offsets }) => {
                format!("acks from {member} for records it does not hold: partition {p} offsets {offsets:?}")
            }
            AckEvent::Refused(_) | AckEvent::Applied(_) => return,
        };
        self.st.violation(format!("{what}: {why}"));
    }
}

/// One heartbeat's view of the fake coordinator: lenient, as the fake's users rely on. Every
/// member gets the assignment the test set (`FakeCluster::set_assignment`); a member's epoch
/// counts its joins (and assignment changes); any epoch is accepted and a member it does not
/// know is taken in; no subscription is required; a member that leaves keeps its records
/// until its sessions end or its locks lapse.
pub(super) struct FakeCoordinator<'a> {
    pub(super) st: &'a mut State,
    pub(super) fx: &'a Effects,
}

impl ShareCoordinator for FakeCoordinator<'_> {
    type Member = String;

    fn topic_id(&self) -> uuid::Uuid {
        self.st.topic_id
    }

    fn heartbeat_interval_ms(&self) -> i32 {
        self.st.cfg.heartbeat_interval_ms
    }

    fn leave(&mut self, member: &String) {
        self.st.members.remove(member);
    }

    fn join(&mut self, member: &String, _member_id: &str, _cx: &Cx) {
        let m = self.st.members.entry(member.clone()).or_insert(Member { epoch: 0 });
        m.epoch = m.epoch.saturating_add(1);
    }

    fn check_epoch(&self, _member: &String, _epoch: i32) -> Result<(), ErrorCode> {
        Ok(())
    }

    fn settle(&mut self, member: &String, _cx: &Cx) -> Option<(i32, Vec<i32>)> {
        let epoch = self.st.members.entry(member.clone()).or_insert(Member { epoch: 0 }).epoch;
        Some((epoch, self.st.assignment.clone()))
    }

    fn forced_error(&mut self) -> Option<i16> {
        match self.fx.terminal {
            Some(Action::TopLevelError(code)) => Some(code),
            _ => None,
        }
    }

    fn requires_subscription(&self) -> bool {
        false
    }
}
