//! The real driver core (`consumer::driver::DriverCore`) as the runner drives it, and the
//! simulated topology as the core reads it. A request's timeout is the one the core put on
//! its transmit (`Wire`), as the shell applies it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::cluster::BrokerInfo;
use crate::consumer::driver::{
    Command, CommitResults, DriverCore, Event, Output, PollAnswer, Replies, ReplyId, Shared, Topology, Transmit,
};
use crate::consumer::{AcquireMode, ShareConsumerConfig};
use crate::error::Result;

use super::reply::Reply;
use super::run::{Completion, Driven, SimTransmit};
use super::state::ClientId;
use super::topology::SimTopology;

impl Topology for SimTopology {
    fn topic_name(&self, id: &uuid::Uuid) -> Option<Arc<str>> {
        SimTopology::topic_name(self, id)
    }

    fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        SimTopology::leader(self, topic, partition)
    }

    fn broker_addr(&self, node: i32) -> Option<String> {
        Some(super::net::addr(node))
    }

    fn learn_leader(&self, topic: &str, partition: i32, leader: i32, leader_epoch: i32) {
        SimTopology::learn_leader(self, topic, partition, leader, leader_epoch)
    }

    fn learn_brokers(&self, _brokers: Vec<BrokerInfo>) {}
}

/// A driver core, and where its outputs go: the runner performs
/// them as the shell does, right after each call, except that completions go to the sink
/// the invariants read instead of to a callback.
pub(crate) struct RealCore {
    core: DriverCore,
    shared: Arc<Shared>,
    completions: Arc<Mutex<Vec<Completion>>>,
    replies: ToApp,
}

/// The application's side of the replies, as the shell's senders are the handle's: the ids
/// it still waits for, and the replies to them for the runner to hand over.
#[derive(Default)]
struct ToApp {
    /// Commands handed to the core that want an answer, not answered or abandoned yet.
    waiting: HashSet<ReplyId>,
    replies: Vec<(ReplyId, Reply)>,
}

impl ToApp {
    /// Notes what `cmd` asks to be answered, or that a poll gave up (as the shell forgets
    /// the sender of a poll whose receiver closed).
    fn note(&mut self, cmd: &Command) {
        match cmd {
            Command::Poll { id, .. } | Command::Commit { id: Some(id), .. } | Command::Close { id: Some(id), .. } => {
                self.waiting.insert(*id);
            }
            Command::PollAbandoned(id) => {
                self.waiting.remove(id);
            }
            _ => {}
        }
    }
}

impl Replies for ToApp {
    fn polled(&mut self, id: ReplyId, answer: Result<PollAnswer>) -> Option<PollAnswer> {
        if !self.waiting.remove(&id) {
            // The poll gave up: as a send on a dropped receiver, the records come back.
            return answer.ok();
        }
        self.replies.push((id, Reply::Poll(answer)));
        None
    }

    fn committed(&mut self, id: ReplyId, results: CommitResults) {
        if self.waiting.remove(&id) {
            self.replies.push((id, Reply::Commit(results)));
        }
    }

    fn closed(&mut self, id: ReplyId, result: Result<()>) {
        if self.waiting.remove(&id) {
            self.replies.push((id, Reply::Close(result)));
        }
    }
}

/// How the simulated consumer is set up: whether its brokers take RENEW (ShareAcknowledge v2,
/// as the shell learns from ApiVersions) and its `share.acquire.mode`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoreOptions {
    pub renew: bool,
    pub acquire_mode: AcquireMode,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions { renew: true, acquire_mode: AcquireMode::BatchOptimized }
    }
}

/// A new consumer's core: its config (defaults, group `sim-group`), its topology, and the
/// sink every acknowledgement completion goes to for the invariants.
pub(crate) fn new_core(
    _client: ClientId,
    topology: Arc<SimTopology>,
    completions: Arc<Mutex<Vec<Completion>>>,
    options: CoreOptions,
) -> Box<dyn Driven> {
    let cfg = ShareConsumerConfig::new("sim-broker-1:9092", "sim-group").acquire_mode(options.acquire_mode);
    let shared = Arc::new(Shared::new(options.renew, None));
    let core = DriverCore::new(cfg, shared.clone(), topology);
    Box::new(RealCore { core, shared, completions, replies: ToApp::default() })
}

impl RealCore {
    /// Performs the core's outputs in order, as the shell does (`Driver::perform`); returns
    /// whether records came back from a poll that was gone.
    fn perform(&mut self, now: Instant) -> bool {
        let mut handed_back = false;
        while let Some(out) = self.core.poll_event() {
            let back = match out {
                Output::AckCompleted { tp, offsets, result } => {
                    self.completions.lock().unwrap_or_else(|p| p.into_inner()).push((tp.partition, offsets, result));
                    None
                }
                out => out.perform(&self.shared, &mut self.replies),
            };
            if let Some(back) = back {
                self.core.handle_command(Command::Requeue(back), now);
                handed_back = true;
            }
        }
        handed_back
    }
}

impl Driven for RealCore {
    fn handle_command(&mut self, cmd: Command, now: Instant) {
        self.replies.note(&cmd);
        self.core.handle_command(cmd, now);
        let _ = self.perform(now);
    }

    fn handle_gone(&mut self, now: Instant) {
        self.core.handle_gone(now);
        let _ = self.perform(now);
    }

    fn handle_event(&mut self, ev: Event, now: Instant) {
        self.core.handle_event(ev, now);
        let _ = self.perform(now);
    }

    fn drive(&mut self, now: Instant) {
        self.core.drive(now);
        // As the shell: records handed back are driven in the same turn.
        while self.perform(now) {
            self.core.drive(now);
        }
    }

    fn poll_transmit(&mut self) -> Option<SimTransmit> {
        let t = self.core.poll_transmit()?;
        Some(match t {
            Transmit::Metadata { topics } => SimTransmit::Metadata { topics },
            Transmit::FindCoordinator { .. } => SimTransmit::FindCoordinator,
            Transmit::Heartbeat { node, request, .. } => SimTransmit::Heartbeat { node, request },
            Transmit::Fetch { node, request, sent, sent_at, wire } => {
                SimTransmit::Fetch { node, request, sent, sent_at, timeout: wire.timeout }
            }
            Transmit::Acknowledge { node, request, sent, wire } => {
                SimTransmit::Acknowledge { node, request, sent, timeout: wire.timeout }
            }
            Transmit::ListTopics => SimTransmit::ListTopics,
        })
    }

    fn poll_timeout(&self, now: Instant) -> Instant {
        self.core.poll_timeout(now)
    }

    fn is_finished(&mut self, now: Instant) -> bool {
        let done = self.core.is_finished(now);
        let _ = self.perform(now);
        done
    }

    fn take_replies(&mut self) -> Vec<(ReplyId, Reply)> {
        std::mem::take(&mut self.replies.replies)
    }
}
