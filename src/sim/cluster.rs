//! The simulated cluster's state in virtual time: brokers, the topic's partitions with the
//! share state of every offset, leaders, crashes. The share state itself (offsets, locks,
//! delivery counts, the delivery limit, share sessions and epochs) is the broker model's
//! (`crate::broker_model`), the one the fake cluster serves from too; here it is wrapped with
//! virtual time, seeded faults and the ledger the invariants read. The group coordinator is in
//! `group.rs`, the share RPCs in `share.rs`, what the sim adds to an offset (its deliveries,
//! gaps) in `state.rs`.
//!
//! Nothing here reads a clock: every call takes `now`, an `Instant` the runner computes as
//! base + virtual offset. Nothing iterates a `HashMap`: the same calls give the same state.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::protocol::records::{BatchBuilder, Compression, RecordInput};
use crate::protocol::share::AcquiredRecords;

use super::group::Group;
use super::invariants::Ledger;
use super::state::{ClientId, Delivery, Holder, OffsetLog};
use crate::broker_model::partition::{ShareLimits, SharePartition};
use crate::broker_model::record_state::ShareState;
use crate::broker_model::sessions::ShareSessions;

/// The simulated topic's name.
pub(crate) const TOPIC: &str = "sim-topic";

/// How the cluster is built.
#[derive(Debug, Clone)]
pub(crate) struct SimConfig {
    pub brokers: Vec<i32>,
    pub partitions: i32,
    pub records_per_partition: i64,
    /// `share.record.lock.duration.ms`.
    pub lock: Duration,
    /// `share.delivery.count.limit`.
    pub delivery_limit: i16,
    /// `share.heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `share.session.timeout.ms`: a member silent this long is removed.
    pub member_timeout: Duration,
    /// Whether the brokers speak ShareFetch/ShareAcknowledge v2 (RENEW, record_limit).
    pub v2: bool,
    /// How many seeds play the handle scenarios (see `FaultPlan::draw_handle_scenarios`).
    pub handle_scenarios: HandleScenarios,
}

/// How many seeds play the scenarios of LANDSCAPE bugs 6 and 9.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandleScenarios {
    /// None: every seed runs as it did before they were added (the regression seeds replay
    /// the runs that found their bugs).
    Off,
    /// Some: one seed in four goes through the handle, one with faults in six has gaps.
    Some,
    /// Every application goes through the handle; more fail; half the seeds have gaps.
    All,
    /// Every application is the processing engine (`engine_app.rs`), with this fault
    /// injected into its core's events, if any.
    Engine(Option<super::engine_app::Injected>),
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            brokers: vec![1, 2, 3],
            partitions: 3,
            records_per_partition: 20,
            lock: Duration::from_secs(30),
            delivery_limit: 5,
            heartbeat_interval: Duration::from_secs(5),
            member_timeout: Duration::from_secs(45),
            v2: true,
            handle_scenarios: HandleScenarios::Some,
        }
    }
}

/// One partition of the topic.
#[derive(Debug, Clone)]
pub(crate) struct Partition {
    /// None while no live broker can lead it.
    pub leader: Option<i32>,
    pub leader_epoch: i32,
    /// The share state of every offset (the broker model's).
    pub share: SharePartition<Holder>,
    /// What the sim adds to each offset, by offset: its deliveries, whether it is a gap.
    pub log: Vec<OffsetLog>,
}

/// Everything the simulated cluster knows.
#[derive(Debug)]
pub(crate) struct SimCluster {
    pub cfg: SimConfig,
    pub topic_id: uuid::Uuid,
    pub parts: Vec<Partition>,
    /// Broker id -> up.
    pub up: BTreeMap<i32, bool>,
    pub group: Group,
    /// Share sessions by (broker, client).
    pub sessions: ShareSessions<(i32, ClientId)>,
    /// Epoch-0 fetches get SHARE_SESSION_LIMIT_REACHED on these brokers (a fault).
    pub session_limit: BTreeSet<i32>,
    /// The next share request of a client to a broker gets this top-level error (a fault).
    pub forced_errors: BTreeMap<(i32, ClientId), i16>,
    /// The next acknowledgements of a client to a broker (one partition's) get this
    /// partition-level error, unapplied (a fault).
    pub forced_ack_errors: BTreeMap<(i32, ClientId), i16>,
    /// Partitions whose next served batch is corrupted (a fault).
    pub corrupt_next: BTreeSet<i32>,
    /// What was delivered, acknowledged and applied: for the invariants.
    pub ledger: Ledger,
    /// Broken invariants seen by the brokers (a correct client causes none).
    pub violations: Vec<String>,
    /// Bumped by every change to the share state: waiting fetches are looked at again, and
    /// the next lock expiry computed again, only after one (a debug run spends its time there).
    pub version: u64,
    next_change: std::cell::Cell<(u64, Option<Instant>)>,
}

impl SimCluster {
    pub(crate) fn new(cfg: SimConfig) -> SimCluster {
        let n = cfg.brokers.len().max(1);
        let limits = ShareLimits { lock: cfg.lock, delivery_limit: cfg.delivery_limit };
        let len = cfg.records_per_partition.max(0) as usize;
        let parts = (0..cfg.partitions)
            .map(|p| Partition {
                leader: cfg.brokers.get(p as usize % n).copied(),
                leader_epoch: 0,
                share: SharePartition::new(len, limits),
                log: vec![OffsetLog::default(); len],
            })
            .collect();
        let coordinator = cfg.brokers.first().copied().unwrap_or(1);
        SimCluster {
            up: cfg.brokers.iter().map(|b| (*b, true)).collect(),
            topic_id: uuid::Uuid::from_u128(0x51a1_0000_0000_4000_8000_0000_0000_0001),
            parts,
            group: Group::new(coordinator, cfg.heartbeat_interval, cfg.member_timeout),
            sessions: ShareSessions::default(),
            session_limit: BTreeSet::new(),
            forced_errors: BTreeMap::new(),
            forced_ack_errors: BTreeMap::new(),
            corrupt_next: BTreeSet::new(),
            ledger: Ledger::default(),
            violations: Vec::new(),
            version: 1,
            next_change: std::cell::Cell::new((0, None)),
            cfg,
        }
    }

    pub(crate) fn is_up(&self, node: i32) -> bool {
        self.up.get(&node).copied().unwrap_or(false)
    }

    pub(crate) fn violation(&mut self, what: String) {
        self.violations.push(what);
    }

    /// The brokers where `client` has a share session open.
    pub(crate) fn brokers_with_sessions_of(&self, client: ClientId) -> Vec<i32> {
        self.sessions.keys().filter(|(_, c)| *c == client).map(|(n, _)| *n).collect()
    }

    pub(crate) fn partition(&self, p: i32) -> Option<&Partition> {
        usize::try_from(p).ok().and_then(|i| self.parts.get(i))
    }

    /// Time passes: expired locks give their records back (archived at the delivery limit),
    /// silent members leave the group.
    pub(crate) fn tick(&mut self, now: Instant) {
        if self.next_change().is_none_or(|t| t > now) {
            return;
        }
        self.version += 1;
        for part in &mut self.parts {
            part.share.expire(now);
        }
        for client in self.group.expire(now) {
            self.release_client(client);
        }
    }

    /// The earliest moment something changes by itself (a lock expires, a member times out).
    pub(crate) fn next_change(&self) -> Option<Instant> {
        let (v, cached) = self.next_change.get();
        if v == self.version {
            return cached;
        }
        let locks = self.parts.iter().filter_map(|p| p.share.earliest_lock_deadline()).min();
        let next = [locks, self.group.next_expiry()].into_iter().flatten().min();
        self.next_change.set((self.version, next));
        next
    }

    /// Whether every record is done (accepted or archived).
    pub(crate) fn all_done(&self) -> bool {
        self.parts.iter().flat_map(|p| p.share.offsets()).all(|o| o.is_done())
    }

    /// Counts of (available, acquired, acknowledged, archived) offsets.
    pub(crate) fn census(&self) -> [usize; 4] {
        let mut c = [0; 4];
        for o in self.parts.iter().flat_map(|p| p.share.offsets()) {
            c[match o.state {
                ShareState::Available => 0,
                ShareState::Acquired { .. } => 1,
                ShareState::Acknowledged => 2,
                ShareState::Archived(_) => 3,
            }] += 1;
        }
        c
    }

    /// Notes the runs `got` just acquired on partition `p` for a client's session (maybe
    /// none): every offset's delivery, for the routing checks and the ledger.
    pub(crate) fn delivered(&mut self, p: i32, client: ClientId, node: i32, session: u64, got: &[AcquiredRecords]) {
        self.version += 1;
        let Some(part) = usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)) else {
            return;
        };
        for r in got {
            for off in r.first_offset..=r.last_offset {
                let delivery = Delivery { node, session, count: r.delivery_count, acked: false };
                if let Some(log) = part.log.get_mut(off as usize) {
                    log.history.push((client, delivery));
                }
                self.ledger.delivered(client, node, session, p, off, r.delivery_count);
            }
        }
    }

    /// Releases what `client` holds through broker `node` (its session there ended: closed,
    /// its connection lost, its broker crashed, forgotten by a fault). As Kafka releases by
    /// member id: the records of the client's older, replaced sessions there go back too.
    pub(crate) fn release_member(&mut self, node: i32, client: ClientId) {
        self.version += 1;
        for p in &mut self.parts {
            p.share.release_where(|h| h.client == client && h.node == node);
        }
    }

    /// Releases everything a client holds anywhere (it left the group or was removed).
    pub(crate) fn release_client(&mut self, client: ClientId) {
        self.version += 1;
        for p in &mut self.parts {
            p.share.release_where(|h| h.client == client);
        }
        self.sessions.end_where(|(_, c), _| *c == client);
    }

    /// Moves a partition's leadership: the new leader loads its share state without the old
    /// leader's acquisitions (they are released).
    pub(crate) fn move_leader(&mut self, p: i32, to: Option<i32>) {
        self.version += 1;
        let Some(part) = usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)) else {
            return;
        };
        part.leader = to;
        part.leader_epoch += 1;
        part.share.release_where(|_| true);
    }

    /// A broker crashes: its sessions vanish, its partitions move to the next live broker
    /// (or have no leader), the coordinator moves if it was there.
    pub(crate) fn crash(&mut self, node: i32) {
        self.version += 1;
        if !self.is_up(node) {
            return;
        }
        self.up.insert(node, false);
        for ((n, c), _) in self.sessions.end_where(|(n, _), _| *n == node) {
            self.release_member(n, c);
        }
        let led: Vec<i32> = (0..self.cfg.partitions)
            .filter(|p| self.partition(*p).is_some_and(|x| x.leader == Some(node)))
            .collect();
        for p in led {
            let next = self.next_live(node);
            self.move_leader(p, next);
        }
        if self.group.coordinator == node {
            if let Some(next) = self.next_live(node) {
                self.group.coordinator = next;
            }
        }
    }

    /// A crashed broker is back; partitions without a leader get it.
    pub(crate) fn restart(&mut self, node: i32) {
        self.version += 1;
        if self.is_up(node) || !self.up.contains_key(&node) {
            return;
        }
        self.up.insert(node, true);
        let orphans: Vec<i32> = (0..self.cfg.partitions)
            .filter(|p| self.partition(*p).is_some_and(|x| x.leader.is_none()))
            .collect();
        for p in orphans {
            self.move_leader(p, Some(node));
        }
        if !self.is_up(self.group.coordinator) {
            self.group.coordinator = node;
        }
    }

    /// The live broker after `node` in id order (wrapping), if any other is up.
    pub(crate) fn next_live(&self, node: i32) -> Option<i32> {
        let live: Vec<i32> = self.up.iter().filter(|(id, up)| **up && **id != node).map(|(id, _)| *id).collect();
        live.iter().copied().find(|id| *id > node).or_else(|| live.first().copied())
    }

    /// The cluster with these (partition, offset)s as gaps: offsets without a record (see
    /// [`OffsetLog::gap`]).
    pub(crate) fn with_gaps(mut self, gaps: &[(i32, i64)]) -> SimCluster {
        for &(p, o) in gaps {
            let offset = usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)?.log.get_mut(o as usize));
            if let Some(off) = offset {
                off.gap = true;
                self.ledger.gap(p, o);
            }
        }
        self
    }

    /// The record batches of `ranges` of partition `p`: one batch per run of offsets with a
    /// record (each value is unique: `p{p}-o{offset}`). A run of gaps is left out, or served
    /// as an empty batch (no records, its offsets in the header: what compaction leaves), by
    /// the parity of its first offset; a range of gaps only may thus come with no records at
    /// all. With `corrupt`, the first batch has a byte flipped under its CRC (the client must
    /// REJECT its records, not have them redelivered forever); its offsets are returned too.
    pub(crate) fn records(
        &self,
        p: i32,
        ranges: &[AcquiredRecords],
        corrupt: bool,
    ) -> (Option<Bytes>, Option<(i64, i64)>) {
        let mut out = BytesMut::new();
        let mut corrupted = None;
        let log = &self.parts[p as usize].log;
        let gap = |o: i64| log.get(o as usize).is_some_and(|x| x.gap);
        let mut first_batch = true;
        for r in ranges {
            let mut o = r.first_offset;
            while o <= r.last_offset {
                let is_gap = gap(o);
                let mut end = o;
                while end < r.last_offset && gap(end + 1) == is_gap {
                    end += 1;
                }
                let batch = if !is_gap {
                    Some(record_batch(p, o, end))
                } else if (o + i64::from(p)) % 2 == 0 {
                    Some(crate::protocol::records::empty_batch(o, end))
                } else {
                    None
                };
                if let Some(batch) = batch {
                    let mut batch = BytesMut::from(&batch[..]);
                    if corrupt && first_batch {
                        // The last byte is under the CRC.
                        let last = batch.len() - 1;
                        batch[last] ^= 0x20;
                        corrupted = Some((o, end));
                    }
                    first_batch = false;
                    out.extend_from_slice(&batch);
                }
                o = end + 1;
            }
        }
        ((!out.is_empty()).then(|| out.freeze()), corrupted)
    }
}

/// A batch of the records at `first..=last` of partition `p`.
fn record_batch(p: i32, first: i64, last: i64) -> Bytes {
    let mut b = BatchBuilder::new();
    for o in first..=last {
        let rec = RecordInput {
            key: None,
            value: Some(Bytes::from(record_value(p, o))),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + o,
        };
        b.push(&rec).expect("a small record fits a batch");
    }
    let batch = b.finish(Compression::None).expect("an uncompressed batch encodes");
    let mut batch = BytesMut::from(&batch[..]);
    // The base offset is outside the CRC: patching it keeps the batch valid.
    batch[..8].copy_from_slice(&first.to_be_bytes());
    batch.freeze()
}

/// The value of the record at `offset` of partition `p`: unique in the run.
pub(crate) fn record_value(p: i32, offset: i64) -> String {
    format!("p{p}-o{offset}")
}
