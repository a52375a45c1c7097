//! The simulated group coordinator: ShareGroupHeartbeat, member epochs, a round-robin
//! assignment of the topic's partitions to the members in the order they joined.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::state::ClientId;
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

    /// Answers a heartbeat that reached broker `node`. Returns the answer and, for a member
    /// that left (epoch -1), the client whose records go back.
    pub(crate) fn heartbeat(
        &mut self,
        node: i32,
        client: ClientId,
        r: &ShareGroupHeartbeatRequest,
        topic_id: uuid::Uuid,
        partitions: i32,
        now: Instant,
    ) -> (ShareGroupHeartbeatResponse, Option<ClientId>) {
        let mut resp = ShareGroupHeartbeatResponse::default();
        let error = |resp: &mut ShareGroupHeartbeatResponse, code: ErrorCode| {
            resp.error_code = code.0;
            resp.member_epoch = 0;
        };
        if node != self.coordinator {
            error(&mut resp, ErrorCode::NOT_COORDINATOR);
            return (resp, None);
        }
        if self.loading_until.is_some_and(|t| now < t) {
            error(&mut resp, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
            return (resp, None);
        }
        resp.member_id = Some(r.member_id.clone());
        match r.member_epoch {
            -1 => {
                let left = self.members.remove(&client).map(|_| client);
                if left.is_some() {
                    self.bump();
                }
                resp.member_epoch = -1;
                return (resp, left);
            }
            0 => {
                if r.subscribed_topic_names.as_ref().is_none_or(|t| t.is_empty()) {
                    error(&mut resp, ErrorCode::INVALID_REQUEST);
                    return (resp, None);
                }
                let known = self.members.get(&client).is_some_and(|m| m.member_id == r.member_id.as_str());
                if !known {
                    self.members
                        .insert(client, Member { member_id: r.member_id.to_string(), epoch: 0, last_seen: now });
                }
                self.bump();
            }
            e => match self.members.get(&client) {
                None => {
                    error(&mut resp, ErrorCode::UNKNOWN_MEMBER_ID);
                    return (resp, None);
                }
                // The epoch of the member's last answer, exactly (the group coordinator's
                // check for share groups); a lost answer fences the member.
                Some(m) if e != m.epoch => {
                    error(&mut resp, ErrorCode::FENCED_MEMBER_EPOCH);
                    return (resp, None);
                }
                Some(_) => {}
            },
        }
        let interval = self.interval.as_millis() as i32;
        let assignment = self.assignment(client, partitions);
        let Some(m) = self.members.get_mut(&client) else {
            error(&mut resp, ErrorCode::UNKNOWN_MEMBER_ID);
            return (resp, None);
        };
        m.last_seen = now;
        m.epoch = self.epoch;
        resp.member_epoch = m.epoch;
        resp.heartbeat_interval_ms = interval;
        resp.assignment = Some(Assignment::default().with_topic_partitions(vec![
            TopicPartitions::default().with_topic_id(topic_id).with_partitions(assignment),
        ]));
        (resp, None)
    }
}
