//! The simulated group coordinator: member epochs (a group epoch; a stale member epoch is
//! fenced), a round-robin assignment of the topic's partitions to the members in the order
//! they joined, members that time out. ShareGroupHeartbeat is answered by the broker model's
//! handler (`broker_model::share_group_heartbeat`, the public fake's too) over [`Coordinator`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::state::ClientId;
use crate::broker_model::broker::Cx;
use crate::broker_model::share_group_heartbeat::{self, ShareCoordinator};
use crate::error::ErrorCode;

/// A member as the coordinator knows it.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub member_id: String,
    pub epoch: i32,
    pub last_seen: Instant,
}

/// The group and its coordinator.
#[derive(Debug)]
pub(crate) struct Group {
    /// The broker that coordinates the group.
    pub coordinator: i32,
    /// Heartbeats get COORDINATOR_LOAD_IN_PROGRESS until then (a fault).
    pub loading_until: Option<Instant>,
    pub epoch: i32,
    /// Members by client, i.e. in the order the clients were created (not by random member id).
    pub members: BTreeMap<ClientId, Member>,
    interval: Duration,
    timeout: Duration,
}

impl Group {
    pub(crate) fn new(coordinator: i32, interval: Duration, timeout: Duration) -> Group {
        Group { coordinator, loading_until: None, epoch: 0, members: BTreeMap::new(), interval, timeout }
    }

    /// The partitions of `client` (round-robin over members in client order).
    pub(crate) fn assignment(&self, client: ClientId, partitions: i32) -> Vec<i32> {
        let Some(i) = self.members.keys().position(|c| *c == client) else {
            return Vec::new();
        };
        let n = self.members.len() as i32;
        (0..partitions).filter(|p| p % n == i as i32).collect()
    }

    /// Whether `client` is a member now.
    pub(crate) fn is_member(&self, client: ClientId) -> bool {
        self.members.contains_key(&client)
    }

    /// Members silent past the session timeout are removed; returns them (their records go
    /// back).
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<ClientId> {
        let gone: Vec<ClientId> =
            self.members.iter().filter(|(_, m)| m.last_seen + self.timeout <= now).map(|(c, _)| *c).collect();
        for c in &gone {
            self.members.remove(c);
        }
        if !gone.is_empty() {
            self.bump();
        }
        gone
    }

    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.members.values().map(|m| m.last_seen + self.timeout).min()
    }

    /// A new group epoch (share groups reassign at once, with no revocation phase): each
    /// member gets it with its next heartbeat's answer.
    fn bump(&mut self) {
        self.epoch += 1;
    }

    /// Answers a heartbeat that reached broker `node` (by the broker model's handler,
    /// `broker_model::share_group_heartbeat`). Returns the answer and, for a member that
    /// left (epoch -1), the client whose records go back.
    pub(crate) fn heartbeat(
        &mut self,
        node: i32,
        client: ClientId,
        r: &ShareGroupHeartbeatRequest,
        topic_id: uuid::Uuid,
        partitions: i32,
        now: Instant,
    ) -> (ShareGroupHeartbeatResponse, Option<ClientId>) {
        let cx = Cx { node, conn: 0, version: HEARTBEAT_VERSION, now };
        let mut at = Coordinator { group: self, topic_id, partitions, left: None };
        let resp = share_group_heartbeat::handle(&mut at, &cx, &client, r);
        (resp, at.left)
    }
}

/// The ShareGroupHeartbeat version of the simulated requests (the answer is not encoded).
const HEARTBEAT_VERSION: i16 = 1;

/// The group as the heartbeat handler sees it, with the topic it assigns.
struct Coordinator<'a> {
    group: &'a mut Group,
    topic_id: uuid::Uuid,
    partitions: i32,
    /// The client that left with this heartbeat, if any.
    left: Option<ClientId>,
}

impl ShareCoordinator for Coordinator<'_> {
    type Member = ClientId;

    fn topic_id(&self) -> uuid::Uuid {
        self.topic_id
    }

    fn heartbeat_interval_ms(&self) -> i32 {
        i32::try_from(self.group.interval.as_millis()).unwrap_or(i32::MAX)
    }

    fn leave(&mut self, client: &ClientId) {
        if self.group.members.remove(client).is_some() {
            self.group.bump();
            self.left = Some(*client);
        }
    }

    fn join(&mut self, client: &ClientId, member_id: &str, cx: &Cx) {
        let known = self.group.members.get(client).is_some_and(|m| m.member_id == member_id);
        if !known {
            let member = Member { member_id: member_id.to_string(), epoch: 0, last_seen: cx.now };
            self.group.members.insert(*client, member);
        }
        self.group.bump();
    }

    /// The epoch of the member's last answer, exactly (the group coordinator's check for
    /// share groups); a lost answer fences the member.
    fn check_epoch(&self, client: &ClientId, epoch: i32) -> Result<(), ErrorCode> {
        match self.group.members.get(client) {
            None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
            Some(m) if m.epoch != epoch => Err(ErrorCode::FENCED_MEMBER_EPOCH),
            Some(_) => Ok(()),
        }
    }

    /// The member moves to the group's epoch at once (share groups have no revocation phase).
    fn settle(&mut self, client: &ClientId, cx: &Cx) -> Option<(i32, Vec<i32>)> {
        let assignment = self.group.assignment(*client, self.partitions);
        let epoch = self.group.epoch;
        let m = self.group.members.get_mut(client)?;
        m.last_seen = cx.now;
        m.epoch = epoch;
        Some((epoch, assignment))
    }

    fn coordinates(&self, node: i32) -> bool {
        node == self.group.coordinator
    }

    fn loading(&self, cx: &Cx) -> bool {
        self.group.loading_until.is_some_and(|t| cx.now < t)
    }
}
