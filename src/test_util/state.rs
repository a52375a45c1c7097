//! The fake cluster's shared state: partition logs with per-offset share state, share
//! sessions, members, the script, and the request log.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::task::AbortHandle;

use crate::protocol::records::{Compression, RecordInput};
use crate::protocol::share::AcknowledgementBatch;

use super::code;
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

/// The share state of one offset.
#[derive(Debug, Clone, Default)]
pub(crate) struct OffsetState {
    /// Deliveries so far.
    pub delivery: i16,
    /// The member holding its acquisition lock.
    pub holder: Option<String>,
    /// Accepted, rejected or acknowledged as a gap (archived).
    pub done: bool,
    /// The acknowledgement that made it done (wire type: 0 Gap, 1 Accept, 3 Reject).
    pub done_by: Option<i8>,
    /// When it was last acquired.
    pub acquired_at: Option<Instant>,
    /// The record produced at this offset (`FakeCluster::produce`); None: a generated one
    /// (key `k{offset}`, value `record_value`).
    pub record: Option<Arc<RecordInput>>,
}

/// One partition of the fake topic.
#[derive(Debug, Clone, Default)]
pub(super) struct Partition {
    pub leader: i32,
    pub leader_epoch: i32,
    pub offsets: Vec<OffsetState>,
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

/// A share session on one node.
#[derive(Debug, Clone)]
pub(super) struct Session {
    /// The epoch the next request must carry.
    pub epoch: i32,
    /// The connection that opened it.
    pub conn: u64,
    /// The partitions it fetches.
    pub parts: BTreeSet<i32>,
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
    pub sessions: HashMap<(i32, String), Session>,
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
        let parts = (0..cfg.partitions)
            .map(|p| Partition {
                leader: cfg.leaders.get(p as usize).copied().unwrap_or(cfg.nodes[0]),
                leader_epoch: 0,
                offsets: vec![OffsetState::default(); cfg.records_per_partition as usize],
                ..Default::default()
            })
            .collect();
        State {
            topic_id: uuid::Uuid::from_u128(0x5ca1_ab1e_0000_4000_8000_0000_0000_0001),
            assignment: (0..cfg.partitions).collect(),
            cfg,
            ports: BTreeMap::new(),
            parts,
            sessions: HashMap::new(),
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
        let gone: Vec<(i32, String)> =
            self.sessions.iter().filter(|(_, s)| s.conn == conn).map(|(k, _)| k.clone()).collect();
        for (n, m) in gone {
            self.drop_session(n, &m);
        }
    }

    /// Forgets a session and releases what its member holds on partitions this node leads.
    pub(super) fn drop_session(&mut self, node: i32, member: &str) {
        self.sessions.remove(&(node, member.to_string()));
        for p in self.parts.iter_mut().filter(|p| p.leader == node) {
            for o in p.offsets.iter_mut() {
                if o.holder.as_deref() == Some(member) && !o.done {
                    o.holder = None;
                }
            }
        }
    }

    /// Moves a partition's leadership; the new leader loads its share state without the old
    /// leader's acquisitions (they are released).
    pub(super) fn move_leader(&mut self, p: i32, node: i32) {
        if let Some(part) = usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)) {
            part.leader = node;
            part.leader_epoch += 1;
            for o in part.offsets.iter_mut() {
                if !o.done {
                    o.holder = None;
                }
            }
        }
    }

    /// Acquires up to `max` available offsets of partition `p` for `member`; returns
    /// (offset, delivery count) ascending.
    pub(super) fn acquire(&mut self, p: i32, member: &str, max: usize) -> Vec<(i64, i16)> {
        let mut out = Vec::new();
        let Some(part) = usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)) else {
            return out;
        };
        for (i, o) in part.offsets.iter_mut().enumerate() {
            if out.len() >= max {
                break;
            }
            if o.done || o.holder.is_some() {
                continue;
            }
            o.delivery = o.delivery.saturating_add(1);
            o.holder = Some(member.to_string());
            o.acquired_at = Some(Instant::now());
            out.push((i as i64, o.delivery));
        }
        out
    }

    /// Undoes [`acquire`](Self::acquire) of `got` on partition `p`: the offsets are available
    /// again, their delivery not counted.
    pub(super) fn release(&mut self, p: i32, got: &[(i64, i16)]) {
        let Some(part) = usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)) else {
            return;
        };
        for &(o, _) in got {
            if let Some(s) = usize::try_from(o).ok().and_then(|i| part.offsets.get_mut(i)) {
                s.holder = None;
                s.delivery = s.delivery.saturating_sub(1);
            }
        }
    }

    /// Applies one partition's acknowledgement batches from `member` on `node`; returns the
    /// partition error code (0: applied). Invalid batches and acks for records the member does
    /// not hold are violations (a correct client never sends them).
    pub(super) fn apply_acks(
        &mut self,
        node: i32,
        member: &str,
        p: i32,
        batches: &[AcknowledgementBatch],
        renew_allowed: bool,
        what: &str,
    ) -> i16 {
        let Some(part) = self.partition(p) else {
            self.violation(format!("{what}: acks for unknown partition {p}"));
            return code::UNKNOWN_TOPIC_OR_PARTITION;
        };
        if part.leader != node {
            return code::NOT_LEADER_OR_FOLLOWER;
        }
        let log_end = part.offsets.len() as i64;
        let mut acks: Vec<(i64, i8)> = Vec::new();
        let mut prev_last: Option<i64> = None;
        for b in batches {
            // As i128: a client may send any two offsets, and their distance must not overflow.
            let len = i128::from(b.last_offset) - i128::from(b.first_offset) + 1;
            let types_ok = b.acknowledge_types.len() == 1 || b.acknowledge_types.len() as i128 == len;
            if len < 1 || prev_last.is_some_and(|l| b.first_offset <= l) || !types_ok {
                self.violation(format!("{what}: invalid acknowledgement batches for partition {p}: {batches:?}"));
                return code::INVALID_REQUEST;
            }
            // Offsets outside the log are held by no one; checked before the batch is expanded,
            // so a wild range costs nothing.
            if b.first_offset < 0 || b.last_offset >= log_end {
                self.violation(format!(
                    "{what}: acks from {member} for records it does not hold: partition {p} offsets {}..={}, outside its log (0..{log_end})",
                    b.first_offset, b.last_offset
                ));
                return code::INVALID_RECORD_STATE;
            }
            prev_last = Some(b.last_offset);
            for (i, o) in (b.first_offset..=b.last_offset).enumerate() {
                let t = if b.acknowledge_types.len() == 1 { b.acknowledge_types[0] } else { b.acknowledge_types[i] };
                if !(0..=4).contains(&t) || (t == 4 && !renew_allowed) {
                    self.violation(format!("{what}: acknowledge type {t} not allowed here (partition {p} offset {o})"));
                    return code::INVALID_REQUEST;
                }
                acks.push((o, t));
            }
        }
        let part = &self.parts[p as usize];
        let bad: Vec<i64> = acks
            .iter()
            .filter(|(o, _)| {
                usize::try_from(*o)
                    .ok()
                    .and_then(|i| part.offsets.get(i))
                    .is_none_or(|s| s.done || s.holder.as_deref() != Some(member))
            })
            .map(|(o, _)| *o)
            .collect();
        if !bad.is_empty() {
            self.violation(format!(
                "{what}: acks from {member} for records it does not hold: partition {p} offsets {bad:?}"
            ));
            return code::INVALID_RECORD_STATE;
        }
        let part = &mut self.parts[p as usize];
        for (o, t) in acks {
            let s = &mut part.offsets[o as usize];
            match t {
                2 => s.holder = None,
                4 => {}
                _ => {
                    s.holder = None;
                    s.done = true;
                    s.done_by = Some(t);
                }
            }
        }
        0
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
