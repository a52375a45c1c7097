//! A broker with nothing of its own (no faults, no notes beyond violations) for the share RPC
//! handlers' unit tests: one topic, member ids as lock holders, as Kafka holds them.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::protocol::share::{AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint};

use super::broker::ShareBroker;
use super::partition::{ShareLimits, SharePartition};
use super::sessions::ShareSessions;

pub(crate) const LOCK: Duration = Duration::from_secs(30);

pub(crate) struct TestBroker {
    pub sessions: ShareSessions<(i32, String)>,
    /// (leader, share state) by partition.
    pub parts: Vec<(i32, SharePartition<String>)>,
    pub violations: Vec<String>,
    pub acks_at_once: bool,
}

impl TestBroker {
    /// `partitions` partitions of `records` records each, led by `leaders[p]`.
    pub(crate) fn new(leaders: &[i32], records: usize) -> TestBroker {
        let limits = ShareLimits { lock: LOCK, delivery_limit: 5 };
        TestBroker {
            sessions: ShareSessions::default(),
            parts: leaders.iter().map(|l| (*l, SharePartition::new(records, limits))).collect(),
            violations: Vec::new(),
            acks_at_once: false,
        }
    }

    pub(crate) fn held_until(&self, p: usize, o: i64) -> Option<Instant> {
        match &self.parts[p].1.get(o)?.state {
            super::record_state::ShareState::Acquired { until, .. } => Some(*until),
            _ => None,
        }
    }
}

impl ShareBroker for TestBroker {
    type Member = String;
    type Holder = String;

    fn holder(&self, _node: i32, member: &String, _session: u64) -> String {
        member.clone()
    }
    fn sessions(&self) -> &ShareSessions<(i32, String)> {
        &self.sessions
    }
    fn sessions_mut(&mut self) -> &mut ShareSessions<(i32, String)> {
        &mut self.sessions
    }
    fn topic_id(&self) -> uuid::Uuid {
        uuid::Uuid::from_u128(1)
    }
    fn lock_timeout_ms(&self) -> i32 {
        LOCK.as_millis() as i32
    }
    fn leader(&self, p: i32) -> Option<LeaderIdAndEpoch> {
        let (leader, _) = self.parts.get(usize::try_from(p).ok()?)?;
        Some(LeaderIdAndEpoch { leader_id: *leader, leader_epoch: 0 })
    }
    fn share_mut(&mut self, p: i32) -> Option<&mut SharePartition<String>> {
        self.parts.get_mut(usize::try_from(p).ok()?).map(|(_, s)| s)
    }
    fn endpoint(&self, node: i32) -> Option<NodeEndpoint> {
        Some(NodeEndpoint { node_id: node, host: format!("b{node}"), port: 9092, rack: None })
    }
    fn release_member(&mut self, _node: i32, member: &String) {
        for (_, s) in &mut self.parts {
            s.release_where(|h| h == member);
        }
    }
    fn violation(&mut self, what: String) {
        self.violations.push(what);
    }
    fn record_batches(&mut self, _m: &String, _p: i32, _got: &[AcquiredRecords]) -> Result<Option<Bytes>, String> {
        Ok(None)
    }
    fn answers_acks_at_once(&self) -> bool {
        self.acks_at_once
    }
}
