//! The driver core's entry points: construction, the requests it emits, and the calls that
//! feed it (`handle_command`, `handle_event`, `handle_gone`, `drive`). The decisions
//! themselves live in the sibling files (`fetch.rs`, `group.rs`, `deliver.rs`, `pace.rs`,
//! ...), all on [`DriverCore`].
//!
//! Style of quinn-proto: the caller owns IO and time. It feeds inputs with `now`, calls
//! `drive(now)`, drains [`DriverCore::poll_transmit`], and calls `drive` again by
//! [`DriverCore::poll_timeout`] if nothing happens sooner.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ShareGroupHeartbeatRequest;
use tracing::warn;

use super::{pace, DriverCore, Shared, Topology};
use crate::backoff::Backoff;
use crate::consumer::config::ShareConsumerConfig;
use crate::protocol::share::{ShareAcknowledgeRequest, ShareFetchRequest};
use crate::share::membership::Membership;
use crate::share::session::Sent;

/// A request the core decided to send. The shell sends it and feeds the answer (or the
/// failure) back as the matching [`super::Event`].
#[derive(Debug)]
pub(crate) enum Transmit {
    /// Refresh the metadata of these topics; answered by `Event::Metadata` (after the topology
    /// learned the new metadata) with the topics refused and their codes.
    Metadata { topics: Vec<String> },
    /// Look up the group's coordinator; answered by `Event::Coordinator`.
    FindCoordinator { group: String },
    /// A ShareGroupHeartbeat to the coordinator; answered by `Event::Heartbeat`.
    Heartbeat { node: i32, request: ShareGroupHeartbeatRequest },
    /// A ShareFetch on the broker's share-session connection; answered by `Event::Fetch`,
    /// which carries `sent` and `sent_at` back.
    Fetch { node: i32, request: ShareFetchRequest, sent: Sent, sent_at: Instant },
    /// A ShareAcknowledge on the same connection; answered by `Event::Ack`.
    Acknowledge { node: i32, request: ShareAcknowledgeRequest, sent: Sent },
    /// List every topic (a pattern subscription); answered by `Event::TopicList`.
    ListTopics,
}

impl DriverCore {
    pub(crate) fn new(cfg: ShareConsumerConfig, shared: Arc<Shared>, topology: Arc<dyn Topology>) -> DriverCore {
        DriverCore {
            membership: Membership::new(cfg.group_id.clone(), cfg.client_rack.clone()),
            topology,
            cfg,
            shared,
            coordinator: None,
            finding_coordinator: false,
            heartbeat_in_flight: false,
            metadata_in_flight: false,
            need_metadata: false,
            metadata_backoff: Backoff::default(),
            metadata_retry_at: None,
            nodes: HashMap::new(),
            buffer: VecDeque::new(),
            waiter: None,
            commits: Vec::new(),
            outbox: VecDeque::new(),
            fatal: None,
            closing: None,
            record_limit_turn: 0,
            drain: pace::DrainRate::default(),
            activity: pace::Activity::default(),
            topic_errors: Default::default(),
            renewing: HashSet::new(),
            renewed: Vec::new(),
            pattern: Default::default(),
            paused: HashSet::new(),
            stale: None,
        }
    }

    /// The member id this consumer joins with.
    pub(crate) fn member_id(&self) -> &str {
        self.membership.member_id()
    }

    /// The next request to send, in the order decided.
    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// The public handle was dropped without close: release what it held and leave, as
    /// close would, within a short time.
    pub(crate) fn handle_gone(&mut self, now: Instant) {
        if self.closing.is_none() {
            warn!(group = self.cfg.group_id, "share consumer dropped without close(); releasing its records");
            self.start_close(Vec::new(), now + Duration::from_secs(5), None, now);
        }
    }
}
