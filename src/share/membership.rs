//! Share-group membership as a sans-IO state machine (ShareGroupHeartbeat, KIP-932).
//!
//! The driver feeds it `now`, responses and failures; it answers with the next heartbeat to
//! send and when. It does no IO and reads no clock, so tests drive it with made-up instants.
//!
//! ```text
//!  Unsubscribed --subscribe--> Joining(epoch 0) --ok--> Stable(epoch n) --interval--> heartbeat
//!        ^                        ^   |                    |  FENCED / UNKNOWN_MEMBER_ID
//!        |                        |   +---- fatal ----> Fatal(error)      |
//!        |                        +---------------------------------------+ (same member id)
//!        +-- Left <--ok/any-- Leaving(epoch -1) <-- leave / unsubscribe
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::share_group_heartbeat_response::Assignment;
use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::backoff::Backoff;
use crate::error::{Context, Error, ErrorCode};

/// Epoch sent to join (or rejoin).
pub const JOIN_EPOCH: i32 = 0;
/// Epoch sent to leave.
pub const LEAVE_EPOCH: i32 = -1;

/// Where the member stands.
#[derive(Debug, Clone)]
pub enum MemberState {
    /// No subscription: nothing to do.
    Unsubscribed,
    /// Joining (or rejoining) at epoch 0.
    Joining,
    /// Member of the group with an epoch; heartbeating.
    Stable,
    /// Sending the leave heartbeat (epoch -1).
    Leaving,
    /// Left the group (after leave, or never joined).
    Left,
    /// A fatal error: the consumer cannot go on. The error is surfaced by poll.
    Fatal(Error),
}

/// What the driver should do after a heartbeat outcome.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Nothing special.
    Ok,
    /// The assignment changed: reconcile share sessions.
    AssignmentChanged,
    /// The coordinator moved or is unknown: find it again before the next heartbeat.
    FindCoordinator,
    /// The member was fenced: everything it held is gone; rejoining.
    Fenced,
    /// The leave heartbeat finished.
    Left,
    /// A fatal error (also kept in the state).
    Fatal(Error),
}

// Errors compare by their text: enough to tell states apart, and Error holds io errors that
// have no equality of their own.
impl PartialEq for MemberState {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (MemberState::Fatal(a), MemberState::Fatal(b)) => a.to_string() == b.to_string(),
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Outcome::Fatal(a), Outcome::Fatal(b)) => a.to_string() == b.to_string(),
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

/// The membership state machine.
#[derive(Debug)]
pub struct Membership {
    group_id: String,
    member_id: String,
    rack_id: Option<String>,
    epoch: i32,
    state: MemberState,
    subscription: BTreeSet<String>,
    send_subscription: bool,
    interval: Duration,
    next_heartbeat: Option<Instant>,
    in_flight: bool,
    /// The heartbeat in flight is the leave (epoch -1). A regular one may still be in flight
    /// when `leave` is called; its answer is not the leave's.
    leave_in_flight: bool,
    assignment: BTreeMap<Uuid, BTreeSet<i32>>,
    backoff: Backoff,
    rebalances: u64,
    heartbeats: u64,
}

impl Membership {
    /// A new member with a fresh client-generated member id (a UUID, kept for life).
    pub fn new(group_id: impl Into<String>, rack_id: Option<String>) -> Self {
        Membership {
            group_id: group_id.into(),
            member_id: new_member_id(),
            rack_id,
            epoch: JOIN_EPOCH,
            state: MemberState::Unsubscribed,
            subscription: BTreeSet::new(),
            send_subscription: false,
            interval: Duration::from_secs(5),
            next_heartbeat: None,
            in_flight: false,
            leave_in_flight: false,
            assignment: BTreeMap::new(),
            backoff: Backoff::new(Duration::from_millis(100), Duration::from_secs(1)),
            rebalances: 0,
            heartbeats: 0,
        }
    }

    /// The member id sent in every share request.
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The current member epoch.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// The state.
    pub fn state(&self) -> &MemberState {
        &self.state
    }

    /// The subscribed topic names.
    pub fn subscription(&self) -> &BTreeSet<String> {
        &self.subscription
    }

    /// The assigned partitions by topic id.
    pub fn assignment(&self) -> &BTreeMap<Uuid, BTreeSet<i32>> {
        &self.assignment
    }

    /// How many times the assignment changed (metric `rebalance-total`).
    pub fn rebalances(&self) -> u64 {
        self.rebalances
    }

    /// How many heartbeats were sent.
    pub fn heartbeats(&self) -> u64 {
        self.heartbeats
    }

    /// Whether the member is in the group (or joining it).
    pub fn is_active(&self) -> bool {
        matches!(self.state, MemberState::Joining | MemberState::Stable)
    }

    /// Replaces the subscription; an empty one is `unsubscribe`.
    pub fn subscribe(&mut self, topics: impl IntoIterator<Item = String>, now: Instant) {
        let topics: BTreeSet<String> = topics.into_iter().collect();
        if topics.is_empty() {
            self.leave(now);
            return;
        }
        if topics != self.subscription || !self.is_active() {
            self.subscription = topics;
            self.send_subscription = true;
            if !self.is_active() {
                self.state = MemberState::Joining;
                self.epoch = JOIN_EPOCH;
            }
            self.next_heartbeat = Some(now);
        }
    }

    /// Starts leaving the group (heartbeat at epoch -1). The assignment is dropped at once.
    pub fn leave(&mut self, now: Instant) {
        self.subscription.clear();
        // A join heartbeat in flight may make us a member (a rejoin after a fence, above all:
        // the coordinator assigns partitions while the share-partition leaders still hold the
        // member's records). Its answer is awaited, then the leave goes, as after a regular
        // heartbeat; without it the member stays in the group until its session times out.
        let join_in_flight = self.in_flight && self.epoch == JOIN_EPOCH;
        if self.is_active() && (self.epoch != JOIN_EPOCH || join_in_flight) {
            self.state = MemberState::Leaving;
            self.next_heartbeat = Some(now);
        } else if !matches!(self.state, MemberState::Fatal(_)) {
            // Never joined (or joining with no epoch yet): nothing to tell the coordinator.
            self.state = MemberState::Left;
            self.next_heartbeat = None;
        }
        if !self.assignment.is_empty() {
            self.assignment.clear();
            self.rebalances += 1;
        }
    }

    /// When the next heartbeat is due (None when none will be).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.in_flight {
            None
        } else {
            self.next_heartbeat
        }
    }

    /// The heartbeat to send now, if one is due. Marks it in flight.
    pub fn poll_heartbeat(&mut self, now: Instant) -> Option<ShareGroupHeartbeatRequest> {
        if self.in_flight || self.next_heartbeat.is_none_or(|t| t > now) {
            return None;
        }
        let epoch = match self.state {
            MemberState::Joining | MemberState::Stable => self.epoch,
            MemberState::Leaving => LEAVE_EPOCH,
            _ => return None,
        };
        let joining = epoch == JOIN_EPOCH;
        let names = if joining || self.send_subscription {
            Some(self.subscription.iter().map(|t| TopicName(StrBytes::from_string(t.clone()))).collect())
        } else {
            None
        };
        self.in_flight = true;
        self.leave_in_flight = epoch == LEAVE_EPOCH;
        self.heartbeats += 1;
        Some(
            ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(self.group_id.clone())))
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_member_epoch(epoch)
                .with_rack_id(if joining { self.rack_id.clone().map(StrBytes::from_string) } else { None })
                .with_subscribed_topic_names(if epoch == LEAVE_EPOCH { None } else { names }),
        )
    }

    /// Feeds a heartbeat response.
    pub fn handle_response(&mut self, resp: &ShareGroupHeartbeatResponse, now: Instant) -> Outcome {
        self.in_flight = false;
        if self.state == MemberState::Leaving {
            if !std::mem::take(&mut self.leave_in_flight) {
                // The answer to a heartbeat sent before `leave`: the leave itself is still to
                // go (taking this as its answer would leave the member in the group until
                // its session times out).
                self.next_heartbeat = Some(now);
                return Outcome::Ok;
            }
            self.state = MemberState::Left;
            self.next_heartbeat = None;
            self.epoch = LEAVE_EPOCH;
            return Outcome::Left;
        }
        if let Some(code) = ErrorCode::from_code(resp.error_code) {
            let err = Error::Broker {
                context: Context::api("ShareGroupHeartbeat"),
                code,
                message: resp.error_message.as_ref().map(|m| m.to_string()),
            };
            return self.handle_error(err, now);
        }
        self.backoff.reset();
        if let Some(id) = &resp.member_id {
            // The broker echoes our id; adopt it if it ever assigns one (older protocol shape).
            if !id.is_empty() {
                self.member_id = id.to_string();
            }
        }
        self.epoch = resp.member_epoch;
        if self.state == MemberState::Joining {
            self.state = MemberState::Stable;
        }
        self.send_subscription = false;
        if resp.heartbeat_interval_ms > 0 {
            self.interval = Duration::from_millis(resp.heartbeat_interval_ms as u64);
        }
        self.next_heartbeat = Some(now + self.interval);
        match &resp.assignment {
            Some(a) => self.apply_assignment(a),
            None => Outcome::Ok,
        }
    }

    fn apply_assignment(&mut self, a: &Assignment) -> Outcome {
        let mut next: BTreeMap<Uuid, BTreeSet<i32>> = BTreeMap::new();
        for tp in &a.topic_partitions {
            if !tp.partitions.is_empty() {
                next.entry(tp.topic_id).or_default().extend(tp.partitions.iter().copied());
            }
        }
        if next == self.assignment {
            return Outcome::Ok;
        }
        self.assignment = next;
        self.rebalances += 1;
        Outcome::AssignmentChanged
    }

    /// Feeds a failed heartbeat: a broker error code or a transport error.
    pub fn handle_error(&mut self, err: Error, now: Instant) -> Outcome {
        self.in_flight = false;
        if self.state == MemberState::Leaving {
            if !std::mem::take(&mut self.leave_in_flight) {
                // An earlier heartbeat failed; the leave is still to go.
                self.next_heartbeat = Some(now);
                return Outcome::Ok;
            }
            // Best effort: the coordinator drops us after the session timeout anyway.
            self.state = MemberState::Left;
            self.next_heartbeat = None;
            return Outcome::Left;
        }
        match err.code() {
            Some(code) if code.is_coordinator_moved() => {
                self.next_heartbeat = Some(now + self.backoff.next_delay());
                Outcome::FindCoordinator
            }
            Some(code) if code.is_member_fenced() => {
                // Rejoin with the same member id; what we held is gone.
                self.epoch = JOIN_EPOCH;
                self.state = MemberState::Joining;
                self.send_subscription = true;
                self.next_heartbeat = Some(now);
                if !self.assignment.is_empty() {
                    self.assignment.clear();
                    self.rebalances += 1;
                }
                Outcome::Fenced
            }
            Some(code) if code.is_fatal_for_member() => {
                self.state = MemberState::Fatal(err.clone());
                self.next_heartbeat = None;
                Outcome::Fatal(err)
            }
            _ if err.is_connection_error() => {
                self.next_heartbeat = Some(now + self.backoff.next_delay());
                Outcome::FindCoordinator
            }
            _ if err.is_retriable() => {
                self.next_heartbeat = Some(now + self.backoff.next_delay());
                Outcome::Ok
            }
            _ => {
                self.state = MemberState::Fatal(err.clone());
                self.next_heartbeat = None;
                Outcome::Fatal(err)
            }
        }
    }
}

/// A fresh member id in Kafka's own UUID text form: URL-safe base64 of the 16 bytes, no
/// padding (22 characters), as Java's `Uuid.randomUuid().toString()`. Kafka 4.1 brokers parse
/// the member id of a ShareFetch with `Uuid.fromString` and fail the request (UNKNOWN_SERVER_ERROR)
/// on the hyphenated form; like Java, ids starting with '-' are avoided.
pub fn new_member_id() -> String {
    loop {
        let id = kafka_uuid_string(&Uuid::new_v4());
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// Kafka's text form of a UUID (base64url, no padding).
pub fn kafka_uuid_string(id: &Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1; // 3 bytes -> 4 chars, 1 byte -> 2 chars (no padding)
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests;
