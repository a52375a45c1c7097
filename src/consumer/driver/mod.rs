//! The consumer's driver, in two parts (see DESIGN.md, "The driver core"):
//!
//! * [`DriverCore`], sans-IO: it owns two sub-machines, the group manager (`group/`) and the
//!   session manager (`sessions/`, where the pacing policy lives), and itself keeps the
//!   fetched-but-not-delivered buffer, the close phases and the commit waiters. It is
//!   fed commands (from the public handle), events (finished requests) and `now`, and emits
//!   [`Transmit`]s (requests to send) and [`Output`]s (replies, acknowledgement completions,
//!   what the handle reads: `output.rs`), which the shell performs. It never reads the
//!   clock, spawns a task or touches a socket (`state_machine.rs`).
//! * `Driver`, the async shell (`shell.rs`): the only place that awaits. It owns the cluster's
//!   connections, one small tokio task per request in flight, and the real clock.
//!
//! One turn of the shell: hand the core one input (command, finished request, or timer),
//! call `drive` (the core decides what to send and answers a waiting poll if records are
//! buffered; every decider runs, each returning at once when it has nothing to do),
//! perform every `Output` it queued, then send every `Transmit`. Acks reach the core with
//! the poll/commit/close that follows them, as in the Java client.

mod activity;
mod answers;
mod assignment;
mod close;
mod commits;
#[cfg(test)]
mod core_tests;
mod deliver;
mod from_handle;
mod group;
mod output;
mod poll_interval;
mod sessions;
mod shell;
#[cfg(all(test, feature = "test-util"))]
mod shell_tests;
mod state_machine;
mod timers;
mod topic_errors;
pub(crate) mod topic_pattern;
mod topology;
mod wire;

use close::Closing;
pub use commits::CommitResults;
pub(crate) use commits::CommitWaiter;
pub(crate) use from_handle::FromHandle;
pub(crate) use output::{Output, Replies};
pub(crate) use shell::Driver;
pub(crate) use state_machine::Transmit;
pub(crate) use topology::Topology;
pub(crate) use wire::Wire;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use tracing::{debug, warn};

use super::config::ShareConsumerConfig;
use super::metrics::Metrics;
use super::record::{ConsumerRecord, TopicPartition};
use crate::acquire_mode::AcquireMode;
use crate::error::{Error, Result};
use crate::protocol::share::{ShareAcknowledgeResponse, ShareFetchResponse};
use crate::share::acks::AckKind;
use crate::share::session::Sent;
use crate::share::TopicIdPartition;

/// One acknowledgement on its way to the driver, tagged with where its records came from:
/// one record, or a run of `len` records at consecutive offsets from `offset` that share
/// everything else (partition, delivery count, lock deadline, kind, broker, session). A run
/// is what a whole batch given one outcome becomes (`AckEntry::absorb`): the driver routes
/// and queues it in one step (`route_acks`), where it took one step a record.
#[derive(Debug, Clone)]
pub(crate) struct AckEntry {
    pub tp: TopicIdPartition,
    pub offset: i64,
    /// The delivery acknowledged (see `share::redeliveries`).
    pub delivery_count: i16,
    /// When that delivery's lock ends at the latest (conservative), unless it was renewed.
    pub lock_deadline: Option<Instant>,
    pub kind: AckKind,
    pub node: i32,
    pub generation: u64,
    /// Records covered: offsets `offset..offset + len` (1: one record; never 0). Only final
    /// kinds form runs: a RENEW is always one record (its outcome is reported per offset).
    pub len: u32,
}

impl AckEntry {
    /// The last offset covered.
    pub(crate) fn last(&self) -> i64 {
        self.offset.saturating_add(i64::from(self.len.max(1)) - 1)
    }

    /// Takes `next` into this run when it is the record right after it with the same
    /// everything else; returns whether it did. What the run's records share is what the
    /// driver checks once per run instead of once per record.
    #[inline]
    pub(crate) fn absorb(&mut self, next: &AckEntry) -> bool {
        let joins = self.kind != AckKind::Renew
            && next.kind == self.kind
            && self.len < u32::MAX - next.len
            && self.offset.checked_add(i64::from(self.len)) == Some(next.offset)
            && next.tp == self.tp
            && next.delivery_count == self.delivery_count
            && next.lock_deadline == self.lock_deadline
            && next.node == self.node
            && next.generation == self.generation;
        if joins {
            self.len += next.len;
        }
        joins
    }

    /// Pushes `ack` onto `out`, into its last run when it continues it.
    #[inline]
    pub(crate) fn push_into(out: &mut Vec<AckEntry>, ack: AckEntry) {
        if let Some(last) = out.last_mut() {
            if last.absorb(&ack) {
                return;
            }
        }
        out.push(ack);
    }

    /// The records covered, one entry each.
    pub(crate) fn singles(self) -> impl Iterator<Item = AckEntry> {
        (0..self.len.max(1)).map(move |i| AckEntry {
            offset: self.offset.saturating_add(i64::from(i)),
            len: 1,
            ..self.clone()
        })
    }
}

/// A record handed to the handle, with its routing tag.
#[derive(Debug)]
pub(crate) struct Delivered {
    pub record: ConsumerRecord,
    pub tp: TopicIdPartition,
    pub node: i32,
    pub generation: u64,
    /// The acquired range the record came in (first and last offset): the broker's in-flight
    /// batch, which it tracks as one state until an acknowledgement covers only part of it.
    pub batch: (i64, i64),
}

/// The outcome of a RENEW the driver sent: the record's partition and offset, and until when
/// the record is now locked (conservatively).
#[derive(Debug)]
pub(crate) struct Renewed {
    pub tp: TopicIdPartition,
    pub offset: i64,
    pub result: Result<()>,
    pub lock_deadline: Option<Instant>,
}

/// What the driver answers a poll with: records to hand out, and the outcomes of renewals.
#[derive(Debug, Default)]
pub(crate) struct PollAnswer {
    pub records: Vec<Delivered>,
    pub renewed: Vec<Renewed>,
}

impl PollAnswer {
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty() && self.renewed.is_empty()
    }
}

/// Names a command that wants an answer, so that the answer (an [`Output`]) can say which
/// it answers: the core knows nothing of how it travels back. Whoever hands the core such a
/// command picks the id (the shell counts; the simulation too), unique among those waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ReplyId(pub u64);

pub(crate) enum Command {
    Subscribe(Vec<String>),
    /// Subscribe to the topics matching a pattern, now and as they come and go.
    SubscribePattern(Arc<topic_pattern::PatternSubscription>),
    /// A poll. `wait: false` (a zero timeout) is answered at once with what is buffered,
    /// so `poll(Duration::ZERO)` returns buffered records every time, deterministically.
    ///
    /// `renewing`: the handle waits for renewals; until one completes the poll gets no new
    /// records, only the renewals' outcomes (as in Java 4.4).
    Poll {
        max: usize,
        wait: bool,
        renewing: bool,
        acks: Vec<AckEntry>,
        id: ReplyId,
    },
    /// The poll `id` gave up (it timed out, was woken, or its future was dropped): it takes
    /// no answer, and what is buffered stays for the next one. The shell says so when it
    /// finds the poll's receiver closed, before it drives the core.
    PollAbandoned(ReplyId),
    /// Acks to send now; `id`: answered with their results once they complete.
    Commit {
        acks: Vec<AckEntry>,
        id: Option<ReplyId>,
    },
    /// The processing engine's outcomes: acks that nobody waits for but that free records
    /// the broker holds for this member. From the first one on, queued acks that no fetch
    /// carries now go at once instead of lingering (see `ACK_LINGER` in `sessions/pace.rs`): the engine asks
    /// for records only as slots free, so a fetch may not come soon, and lingering acks keep
    /// the partition's lock budget (`share.partition.max.record.locks`) taken.
    Outcomes(Vec<AckEntry>),
    /// Records a poll received but could not hand out (its future was dropped): they go
    /// back to the front of the buffer, for the next poll.
    Requeue(PollAnswer),
    /// The partitions paused now (the whole set: pause and resume send it).
    Paused(HashSet<TopicPartition>),
    Close {
        acks: Vec<AckEntry>,
        deadline: Instant,
        id: Option<ReplyId>,
    },
    /// The application entered (`true`) or left (`false`) a consumer call that waits, such
    /// as `commit_sync` (see `consumer::busy`): while inside one it is not idle, so buffered
    /// records are not released for want of a poll. Sent in pairs; each `true` is followed by
    /// one `false`, also when the call's future is dropped.
    Busy(bool),
    /// The processing engine's acquisition (`raw_acquire_mode`): record_limit acquires
    /// exactly the room the engine asks for, so no record waits here, acquired, for a slot
    /// that is not free; `sized`: a batch_optimized fetch asks for that room too, not for
    /// what the drain rate affords (4.1, which has no record_limit: the broker still
    /// completes the log batch it starts).
    AcquireMode {
        mode: AcquireMode,
        sized: bool,
    },
}

/// A finished request.
pub(crate) enum Event {
    Coordinator(Result<i32>),
    Heartbeat(Result<kafka_protocol::messages::ShareGroupHeartbeatResponse>),
    Fetch {
        node: i32,
        sent: Sent,
        sent_at: Instant,
        result: Result<ShareFetchResponse>,
    },
    Ack {
        node: i32,
        sent: Sent,
        result: Result<ShareAcknowledgeResponse>,
    },
    /// A refresh for the subscription, with the topics it refused and their codes.
    Metadata(Result<Vec<(String, i16)>>),
    /// A listing of all topics, for a pattern subscription.
    TopicList(Result<Vec<String>>),
}

/// Records of one acquired range of one partition, not yet handed out.
pub(crate) struct Fetched {
    pub tp: TopicIdPartition,
    pub node: i32,
    pub generation: u64,
    /// The acquired range (first and last offset) these records belong to.
    pub batch: (i64, i64),
    pub records: VecDeque<ConsumerRecord>,
}

struct PollWaiter {
    max: usize,
    renewing: bool,
    id: ReplyId,
    /// The poll gave up (`Command::PollAbandoned`): it is dropped when next looked at.
    abandoned: bool,
}

/// Shared with the handle: read-mostly facts and metrics.
pub(crate) struct Shared {
    pub metrics: Metrics,
    pub acquisition_lock_timeout_ms: std::sync::atomic::AtomicI64,
    pub renew_supported: std::sync::atomic::AtomicBool,
    /// The cluster speaks ShareFetch v2 (`share.acquire.mode=record_limit`, Kafka 4.2+), as
    /// the broker asked at connect said.
    pub record_limit_supported: std::sync::atomic::AtomicBool,
    /// Open share sessions: broker node id -> next epoch (for observability and tests),
    /// written by the shell from `Output::SessionEpochs`.
    pub sessions: std::sync::Mutex<BTreeMap<i32, i32>>,
    /// Connection counters (connections made, SASL logins) for the metrics.
    pub network: Option<Arc<crate::cluster::NetworkStats>>,
    /// The acknowledgement commit callback and the completions it is to be told of (the
    /// shell records them from `Output::AckCompleted`; the core never touches this).
    pub callbacks: super::callback::Callbacks,
    /// Request tasks a test makes panic (`shell.rs`).
    #[cfg(test)]
    pub request_panics: Arc<shell::RequestPanics>,
}

impl Shared {
    /// Nothing measured or learned yet: the lock duration unknown until a broker says it.
    pub(crate) fn new(renew_supported: bool, network: Option<Arc<crate::cluster::NetworkStats>>) -> Shared {
        Shared {
            metrics: Metrics::new(),
            acquisition_lock_timeout_ms: std::sync::atomic::AtomicI64::new(-1),
            renew_supported: std::sync::atomic::AtomicBool::new(renew_supported),
            // ShareFetch v2 came with ShareAcknowledge v2 (Kafka 4.2); connect sets what the
            // broker said.
            record_limit_supported: std::sync::atomic::AtomicBool::new(renew_supported),
            sessions: std::sync::Mutex::new(BTreeMap::new()),
            network,
            callbacks: Default::default(),
            #[cfg(test)]
            request_panics: Default::default(),
        }
    }
}

/// The driver's decisions and all their state (sans-IO: see the module doc).
pub(crate) struct DriverCore {
    /// Topic names and partition leaders (the cluster's metadata, or a simulation's).
    topology: Arc<dyn Topology>,
    cfg: ShareConsumerConfig,
    shared: Arc<Shared>,
    /// Coordinator, membership, heartbeats, metadata and pattern refreshes (`group/`).
    group: group::GroupManager,
    /// Every broker's share session and its pacing (`sessions/`).
    sessions: sessions::SessionManager,
    buffer: VecDeque<Fetched>,
    waiter: Option<PollWaiter>,
    commits: Vec<CommitWaiter>,
    /// Requests decided and not yet handed to the shell (`poll_transmit`).
    outbox: VecDeque<Transmit>,
    /// Outputs decided and not yet taken by the shell (`poll_event`).
    events: VecDeque<Output>,
    /// The open sessions' epochs as last told (`Output::SessionEpochs`).
    epochs_told: BTreeMap<i32, i32>,
    fatal: Option<Error>,
    closing: Option<Closing>,
    drain: activity::DrainRate,
    activity: activity::Activity,
    topic_errors: topic_errors::TopicErrors,
    /// RENEWs sent and not answered yet, by partition and offset: the broker they went to.
    /// An answer counts for a renewal only from that broker: the same offset may meanwhile
    /// have been delivered again by another leader and acknowledged there, and that answer
    /// must not hand the renewed (older) delivery back to the application.
    renewing: HashMap<(TopicIdPartition, i64), i32>,
    /// Outcomes of renewals, for the next poll.
    renewed: Vec<Renewed>,
    /// Partitions the application paused: not fetched (see `reconcile_assignment`).
    paused: HashSet<TopicPartition>,
    /// Records the last poll asked for: the smallest fetch batch_optimized makes, and
    /// record_limit's exact fetch size. The public poll always asks for `max.poll.records`;
    /// the processing engine asks for the room it has, so a slow engine acquires only that.
    poll_size: usize,
    /// Acks go at once when no fetch carries them (set by the engine's `Command::Outcomes`).
    eager_acks: bool,
}

impl DriverCore {
    /// Queues acks on the sessions that delivered their records (the session manager's
    /// `route_acks`); returns, with the reason, those that must not be sent.
    fn route_acks(&mut self, acks: Vec<AckEntry>, now: Instant) -> Vec<(AckEntry, Error)> {
        let lock = self.lock_duration();
        let renew_ok = self.shared.renew_supported.load(std::sync::atomic::Ordering::Relaxed);
        let routed = self.sessions.route_acks(acks, now, lock, renew_ok);
        let mut failed = routed.failed;
        for (tp, offset, node) in routed.renewing {
            self.renewing.insert((tp, offset), node);
        }
        for (a, superseded) in routed.lapsed {
            debug!(tp = %a.tp, offset = a.offset, delivery = a.delivery_count, superseded, "ack of a lapsed delivery refused");
            let e = self.lock_expired(&a.tp, a.offset, a.delivery_count, superseded);
            failed.push((a, e));
        }
        failed
    }

    /// The error of an ack not sent because the lock of its delivery lapsed (`redelivered`:
    /// the record came to this member again).
    fn lock_expired(&self, tp: &TopicIdPartition, offset: i64, delivery_count: i16, redelivered: bool) -> Error {
        let tp = self.to_topic_partition(tp);
        Error::LockExpired { topic: tp.topic, partition: tp.partition, offset, delivery_count, redelivered }
    }

    /// Whether the consumer failed and is not closing: every poll answers with the failure
    /// from now on, so the group sends nothing more (no metadata, lookups or heartbeats). A
    /// failure such as a login that no longer works would otherwise have the consumer dial,
    /// and ask the token provider, behind the application's back for as long as it lives. A
    /// close still leaves the group; a member that never does is dropped after the group's
    /// session timeout, and records are not held by an assignment.
    pub(super) fn halted(&self) -> bool {
        self.fatal.is_some() && self.closing.is_none()
    }

    /// Errors and metadata a fatal failure leaves for the next poll.
    fn set_fatal(&mut self, e: Error) {
        warn!(group = self.cfg.group_id, error = %e, "share consumer failed");
        if self.fatal.is_none() {
            self.fatal = Some(e);
        }
    }

    fn topic_name(&self, id: &uuid::Uuid) -> Option<Arc<str>> {
        self.topology.topic_name(id)
    }

    fn to_topic_partition(&self, tp: &TopicIdPartition) -> TopicPartition {
        let name = self.topic_name(&tp.topic_id).map(|s| s.to_string()).unwrap_or_else(|| tp.topic_id.to_string());
        TopicPartition::new(name, tp.partition)
    }
}

/// The error for acks whose share session was lost: the broker released those records.
pub(crate) fn session_gone(node: i32) -> Error {
    Error::Broker {
        context: crate::error::Context::api("ShareAcknowledge").broker(node),
        code: crate::error::ErrorCode::SHARE_SESSION_NOT_FOUND,
        message: Some(format!(
            "the share session with broker {node} was reset after these records were delivered; the broker released them and will deliver them again"
        )),
    }
}
