//! The fake cluster's shared state: partition logs with per-offset share state, share
//! sessions, members, the script, and the request log.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::task::AbortHandle;

use crate::broker_model::partition::{ShareLimits, SharePartition};
use crate::broker_model::sessions::ShareSessions;
use crate::protocol::records::{Compression, RecordInput};

use super::log::{Logged, Req};
use super::script::Rule;
use super::FakeConfig;

/// The state every node of a fake cluster shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// The tasks serving open connections, stopped with the cluster.
    pub(crate) connections: Mutex<Connections>,
}

/// The tasks serving open connections.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    tasks: Vec<AbortHandle>,
    /// The cluster was dropped: a connection accepted meanwhile is stopped at once.
    stopped: bool,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers a task that serves a connection (forgetting finished ones).
    pub(crate) fn track(&self, task: AbortHandle) {
        let mut c = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        if c.stopped {
            task.abort();
            return;
        }
        c.tasks.retain(|t| !t.is_finished());
        c.tasks.push(task);
    }

    /// Stops every task serving a connection, now and later: their sockets close. (The
    /// listener tasks are aborted first, but one may still be running on another thread and
    /// accept one more connection.)
    pub(crate) fn stop_connections(&self) {
        let mut c = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        c.stopped = true;
        for t in c.tasks.drain(..) {
            t.abort();
        }
    }
}

/// One partition of the fake topic: its leader, its share state (the broker model's
/// [`SharePartition`], held by member ids), and what its records are.
#[derive(Debug, Clone)]
pub(super) struct Partition {
    pub leader: i32,
    pub leader_epoch: i32,
    /// The share state of every offset.
    pub share: SharePartition<String>,
    /// The record produced at each offset (`FakeCluster::produce`), by offset; None: a
    /// generated one (key `k{offset}`, value `record_value`).
    pub records: Vec<Option<Arc<RecordInput>>>,
    /// Offsets with no record (compacted away): acquired and handed out as gaps.
    pub gaps: BTreeSet<i64>,
    /// Cover each gap run with an empty record batch instead of leaving it out.
    pub empty_batches: bool,
    /// Put one non-acquired neighbour record on each side of every acquired run in the batch.
    pub pad: bool,
    /// Offsets served in batches of their own whose CRC does not match (corrupted on the way).
    pub corrupt: BTreeSet<i64>,
    /// The codec of the batches served.
    pub compression: Compression,
}

impl Partition {
    /// Appends `record` (None: a generated one).
    pub(super) fn push(&mut self, record: Option<Arc<RecordInput>>) {
        self.share.push(1);
        self.records.push(record);
    }
}

/// A group member as the coordinator knows it.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub epoch: i32,
}

/// A share request received while another one of the same session was in flight on another
/// connection: a violation unless that connection closed right then (the client gave up on it).
#[derive(Debug, Clone)]
pub(super) struct Overlap {
    pub other_conn: u64,
    pub at: Instant,
    pub summary: String,
}

/// Everything the fake cluster knows.
#[derive(Debug)]
pub(super) struct State {
    pub cfg: FakeConfig,
    pub topic_id: uuid::Uuid,
    pub ports: BTreeMap<i32, u16>,
    pub parts: Vec<Partition>,
    /// Share sessions by (node, member id).
    pub sessions: ShareSessions<(i32, String)>,
    pub in_flight: HashMap<(i32, String), u64>,
    pub members: HashMap<String, Member>,
    pub assignment: Vec<i32>,
    pub rules: Vec<Rule>,
    pub log: Vec<Logged>,
    pub violations: Vec<String>,
    pub overlaps: Vec<Overlap>,
    pub closed_conns: HashSet<u64>,
    pub next_conn: u64,
    /// Topic-level error codes Metadata answers for these topic names.
    pub topic_errors: HashMap<String, i16>,
}

impl State {
    pub(super) fn new(cfg: FakeConfig) -> State {
        let limits = ShareLimits {
            lock: Duration::from_millis(cfg.lock_timeout_ms.max(1) as u64),
            delivery_limit: cfg.delivery_limit,
        };
        let len = cfg.records_per_partition as usize;
        let parts = (0..cfg.partitions)
            .map(|p| Partition {
                leader: cfg.leaders.get(p as usize).copied().unwrap_or(cfg.nodes[0]),
                leader_epoch: 0,
                share: SharePartition::new(len, limits),
                records: vec![None; len],
                gaps: BTreeSet::new(),
                empty_batches: false,
                pad: false,
                corrupt: BTreeSet::new(),
                compression: Compression::None,
            })
            .collect();
        State {
            topic_id: uuid::Uuid::from_u128(0x5ca1_ab1e_0000_4000_8000_0000_0000_0001),
            assignment: (0..cfg.partitions).collect(),
            cfg,
            ports: BTreeMap::new(),
            parts,
            sessions: ShareSessions::default(),
            in_flight: HashMap::new(),
            members: HashMap::new(),
            rules: Vec::new(),
            log: Vec::new(),
            violations: Vec::new(),
            overlaps: Vec::new(),
            closed_conns: HashSet::new(),
            next_conn: 1,
            topic_errors: HashMap::new(),
        }
    }

    pub(super) fn record(&mut self, node: i32, conn: u64, version: i16, req: Req) -> usize {
        let seq = self.log.len();
        self.log.push(Logged { seq, at: Instant::now(), node, conn, version, req });
        seq
    }

    pub(super) fn violation(&mut self, what: String) {
        self.violations.push(what);
    }

    pub(super) fn partition(&self, p: i32) -> Option<&Partition> {
        usize::try_from(p).ok().and_then(|i| self.parts.get(i))
    }

    /// Marks a share request of (node, member) in flight; notes an overlap if one already was.
    pub(super) fn start_request(&mut self, node: i32, member: &str, conn: u64, summary: String) {
        let key = (node, member.to_string());
        if let Some(other) = self.in_flight.insert(key, conn) {
            if other == conn {
                self.violation(format!("two requests in flight on one session (same connection): {summary}"));
            } else {
                self.overlaps.push(Overlap { other_conn: other, at: Instant::now(), summary });
            }
        }
    }

    pub(super) fn finish_request(&mut self, node: i32, member: &str, conn: u64) {
        let key = (node, member.to_string());
        if self.in_flight.get(&key) == Some(&conn) {
            self.in_flight.remove(&key);
        }
    }

    /// A connection closed: its sessions are gone and their records released.
    pub(super) fn conn_closed(&mut self, node: i32, conn: u64) {
        if !self.closed_conns.insert(conn) {
            return;
        }
        self.record(node, conn, 0, Req::ConnClosed);
        self.in_flight.retain(|_, c| *c != conn);
        for ((n, m), _) in self.sessions.conn_closed(conn) {
            self.release_member(n, &m);
        }
    }

    /// Releases what `member` holds on the partitions `node` leads (its session there ended):
    /// available again, or archived at the delivery limit.
    pub(super) fn release_member(&mut self, node: i32, member: &str) {
        for p in self.parts.iter_mut().filter(|p| p.leader == node) {
            p.share.release_where(|h| h == member);
        }
    }

    /// Locks that lapsed by `now` give their records back, on every partition.
    pub(super) fn expire_locks(&mut self, now: Instant) {
        for p in &mut self.parts {
            p.share.expire(now);
        }
    }

    /// Moves a partition's leadership; the new leader loads its share state without the old
    /// leader's acquisitions (they are released).
    pub(super) fn move_leader(&mut self, p: i32, node: i32) {
        if let Some(part) = usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)) {
            part.leader = node;
            part.leader_epoch += 1;
            part.share.release_where(|_| true);
        }
    }

    /// Overlaps that were not explained by the other connection closing at about that time.
    pub(super) fn unexplained_overlaps(&self) -> Vec<String> {
        self.overlaps
            .iter()
            .filter(|o| {
                !self.log.iter().any(|l| {
                    matches!(l.req, Req::ConnClosed)
                        && l.conn == o.other_conn
                        && l.at <= o.at + Duration::from_millis(250)
                })
            })
            .map(|o| format!("two requests in flight on one session (across connections): {}", o.summary))
            .collect()
    }
}
