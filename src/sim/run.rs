//! The runner: a virtual clock, the simulated cluster, the network, the applications and
//! one driver core per consumer, stepped in a fixed order.
//!
//! One step: cluster faults due now, locks that expire, waiting fetches that can be answered,
//! network deliveries due now (by time, then by sequence), the applications (by client), then
//! every core is driven and its transmits handed to the network. Then the clock jumps to the
//! earliest thing due. Everything is ordered by `BTreeMap`s and counters: one seed, one run.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::ShareGroupHeartbeatRequest;

use crate::consumer::driver::{Command, Event, ReplyId};
use crate::error::{Error, Result};
use crate::protocol::share::{ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchResponse};
use crate::share::session::Sent;

use super::app::App;
use super::cluster::{SimCluster, SimConfig};
use super::faults::{Fate, Fault, FaultPlan};
use super::invariants::RateGuard;
use super::net::{self, Body, Class, InFlight, Net};
use super::share::{FetchOutcome, Parked};
use super::state::ClientId;
use super::topology::SimTopology;

// The network's side of a run: requests out, answers back, connections closed.
mod network;

/// A request the core wants sent (the core's `Transmit`, as the sim takes it).
#[derive(Debug)]
pub(crate) enum SimTransmit {
    Metadata { topics: Vec<String> },
    FindCoordinator,
    Heartbeat { node: i32, request: ShareGroupHeartbeatRequest },
    Fetch { node: i32, request: ShareFetchRequest, sent: Sent, sent_at: Instant, timeout: Duration },
    Acknowledge { node: i32, request: ShareAcknowledgeRequest, sent: Sent, timeout: Duration },
    ListTopics,
}

/// What the runner needs of a driver core (implemented by the real `Core`).
pub(crate) trait Driven {
    fn handle_command(&mut self, cmd: Command, now: Instant);
    fn handle_gone(&mut self, now: Instant);
    fn handle_event(&mut self, ev: Event, now: Instant);
    fn drive(&mut self, now: Instant);
    fn poll_transmit(&mut self) -> Option<SimTransmit>;
    fn poll_timeout(&self, now: Instant) -> Instant;
    fn is_finished(&mut self, now: Instant) -> bool;
    /// The replies to the application's commands since the last call (`reply::Reply`).
    fn take_replies(&mut self) -> Vec<(ReplyId, super::reply::Reply)>;
}

/// Makes the core of a new consumer: (client, its topology, its completions sink).
/// Makes a client's core. `Sync`: seeds run on several threads (`tests::run_seeds_on`).
pub(crate) type CoreFactory = dyn Fn(ClientId, Arc<SimTopology>, Arc<Mutex<Vec<Completion>>>) -> Box<dyn Driven> + Sync;

/// One completed acknowledgement round as the commit callback hears it.
pub(crate) type Completion = (i32, Vec<i64>, Result<()>);

/// Something due on the network at a virtual time.
enum Due {
    /// A request reaches its broker.
    Arrive(u64),
    /// An answer reaches its client.
    Answer(u64, Box<Answer>),
    /// The client stops waiting: its connection closes.
    Timeout(u64),
    /// The connection breaks while the answer is on its way.
    Reset(u64),
    /// The broker was down when the request was to be sent.
    Refused(u64),
    /// An answer that needs no connection (metadata, coordinator lookup).
    Direct(ClientId, Box<Event>),
}

#[derive(Debug)]
enum Answer {
    Fetch(ShareFetchResponse),
    Ack(crate::protocol::share::ShareAcknowledgeResponse),
    Heartbeat(kafka_protocol::messages::ShareGroupHeartbeatResponse),
}

struct Client {
    app: App,
    core: Box<dyn Driven>,
    topology: Arc<SimTopology>,
    completions: Arc<Mutex<Vec<Completion>>>,
    /// The core said it is finished (close done).
    core_done: bool,
    finished: bool,
    /// The checks at its end were made.
    checked: bool,
    /// It had an input since it was last driven.
    dirty: bool,
    /// Turns in a row at `idle_at` in which the core sent nothing.
    idle_turns: u32,
    idle_at: Instant,
}

/// How a run ended.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub failure: Option<String>,
    pub virtual_time: Duration,
    pub steps: u64,
    pub transmits: u64,
    pub spins_tolerated: u64,
    pub sessions_left_open: u64,
    /// Records served in a corrupted batch that the client rejected on its own.
    pub corrupt_rejected: u64,
    /// How often the scenarios of LANDSCAPE bugs 6, 8 and 9 came up (see `Scenarios`).
    pub scenarios: Scenarios,
}

/// How often the scenarios of LANDSCAPE bugs 6, 8 and 9 came up in a run.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Scenarios {
    /// Applications that failed mid-batch and closed or dropped their consumer (6).
    pub failures: u64,
    /// Acks sent for partitions no longer assigned; ShareFetches that forgot partitions (8).
    pub moved_partition_acks: u64,
    pub forgets: u64,
    /// Late or superseded acknowledgements the handle refused; GAP acks applied (9).
    pub stale_acks_refused: u64,
    pub gaps_acked: u64,
}

impl std::ops::AddAssign for Scenarios {
    fn add_assign(&mut self, o: Scenarios) {
        self.failures += o.failures;
        self.moved_partition_acks += o.moved_partition_acks;
        self.forgets += o.forgets;
        self.stale_acks_refused += o.stale_acks_refused;
        self.gaps_acked += o.gaps_acked;
    }
}

/// Steps kept for a failure's report (`SIM_TRACE=<n>` keeps n).
const TRACE: usize = 60;
/// Virtual time after the horizon within which every record must be done.
const SETTLE: Duration = Duration::from_secs(600);
/// Whether a core whose `poll_timeout` says "now" while `drive` has nothing to do is
/// tolerated (counted in `spins_tolerated`) rather than failed. The simulation found such
/// spins (a heartbeat due during a coordinator lookup; a parked session with nothing left to
/// fetch; acks lingering while a fetch is in flight); the core no longer has them, so they
/// fail a seed. Kept as a switch for looking past a new one while it is being fixed.
const TOLERATE_CORE_SPINS: bool = false;
/// Steps at one virtual instant before the run counts as spinning.
const SPIN: u32 = 10_000;

/// One simulation run.
pub(crate) struct Sim<'f> {
    plan: FaultPlan,
    base: Instant,
    now: Instant,
    cluster: SimCluster,
    net: Net,
    due: BTreeMap<(Instant, u64), Due>,
    seq: u64,
    parked: BTreeMap<u64, Parked>,
    clients: Vec<Client>,
    factory: &'f CoreFactory,
    faults_done: usize,
    /// Times a core asked to be driven again at once, turn after turn with nothing sent.
    pub spins_tolerated: u64,
    /// Clients that closed with a share session still open on a broker.
    pub sessions_left_open: u64,
    /// Whether such spins are tolerated (counted) rather than failures.
    tolerate_spins: bool,
    /// The cluster's version when the waiting fetches were last looked at.
    seen_version: u64,
    crashed: bool,
    closing: bool,
    rate: RateGuard,
    trace: VecDeque<String>,
    /// Whether to keep the last steps (formatting them costs more than the simulation: a
    /// failing seed is run again with it on, which replays it exactly).
    tracing: bool,
    trace_len: usize,
    pub transmits: u64,
    steps: u64,
    /// Applications that failed mid-batch (a new consumer joined for each).
    failures: u64,
}

impl<'f> Sim<'f> {
    pub(crate) fn new(seed: u64, cfg: SimConfig, factory: &'f CoreFactory) -> Sim<'f> {
        let mut plan = FaultPlan::from_seed(seed, &cfg.brokers, cfg.partitions);
        plan.draw_handle_scenarios(&cfg);
        // The core's backoffs draw their jitter from the seed too.
        crate::backoff::seed_jitter(Some(super::rng::mix(seed ^ 0xb0ff)));
        let base = Instant::now();
        let cluster = SimCluster::new(cfg).with_gaps(&plan.gaps);
        let mut sim = Sim {
            plan,
            base,
            now: base,
            cluster,
            net: Net::default(),
            due: BTreeMap::new(),
            seq: 0,
            parked: BTreeMap::new(),
            clients: Vec::new(),
            factory,
            faults_done: 0,
            spins_tolerated: 0,
            tolerate_spins: TOLERATE_CORE_SPINS,
            sessions_left_open: 0,
            seen_version: 0,
            crashed: false,
            closing: false,
            rate: RateGuard::default(),
            trace: VecDeque::new(),
            tracing: false,
            trace_len: std::env::var("SIM_TRACE").ok().and_then(|s| s.parse().ok()).unwrap_or(TRACE),
            transmits: 0,
            steps: 0,
            failures: 0,
        };
        for _ in 0..sim.plan.app.consumers {
            sim.add_client();
        }
        sim
    }

    /// Fails on a core that spins, even while `TOLERATE_CORE_SPINS` is on.
    pub(crate) fn strict(mut self) -> Self {
        self.tolerate_spins = false;
        self
    }

    /// Keeps the last steps for the failure report.
    pub(crate) fn traced(mut self) -> Self {
        self.tracing = true;
        self
    }

    fn elapsed(&self) -> Duration {
        self.now - self.base
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if !self.tracing {
            return;
        }
        let line = line();
        if self.trace.len() >= self.trace_len {
            self.trace.pop_front();
        }
        let t = self.elapsed();
        self.trace.push_back(format!("{:>9.3}s {line}", t.as_secs_f64()));
    }

    fn add_client(&mut self) {
        let id = self.clients.len();
        let topology = Arc::new(SimTopology::default());
        let completions = Arc::new(Mutex::new(Vec::new()));
        let mut core = (self.factory)(id, topology.clone(), completions.clone());
        core.handle_command(Command::Subscribe(vec![super::cluster::TOPIC.to_string()]), self.now);
        let app = App::new(id, self.plan.app.clone(), self.plan.seed, self.now, self.base + self.plan.horizon);
        let now = self.now;
        self.clients.push(Client {
            app,
            core,
            topology,
            completions,
            core_done: false,
            finished: false,
            checked: false,
            dirty: true,
            idle_turns: 0,
            idle_at: now,
        });
    }

    fn schedule(&mut self, at: Instant, d: Due) {
        self.seq += 1;
        self.due.insert((at, self.seq), d);
    }

    /// Runs to the end; the failure, if any, with the plan and the last steps.
    pub(crate) fn run(mut self) -> Outcome {
        let failure = self.run_inner().err().map(|why| {
            let mut s = format!("simulation failed: {why}\n{}", self.plan);
            let _ =
                writeln!(s, "cluster at the end (available, acquired, acked, archived): {:?}", self.cluster.census());
            let _ = writeln!(s, "last {} steps:", self.trace.len());
            for l in &self.trace {
                let _ = writeln!(s, "  {l}");
            }
            s
        });
        Outcome {
            failure,
            virtual_time: self.elapsed(),
            steps: self.steps,
            transmits: self.transmits,
            spins_tolerated: self.spins_tolerated,
            sessions_left_open: self.sessions_left_open,
            corrupt_rejected: self.cluster.ledger.corrupt_rejected,
            scenarios: Scenarios {
                failures: self.failures,
                moved_partition_acks: self.cluster.ledger.moved_partition_acks,
                forgets: self.cluster.ledger.forgets,
                stale_acks_refused: self.cluster.ledger.stale_acks_refused,
                gaps_acked: self.cluster.ledger.gaps_acked,
            },
        }
    }

    fn run_inner(&mut self) -> std::result::Result<(), String> {
        let mut last = self.now;
        let mut spins = 0;
        loop {
            self.steps += 1;
            self.step()?;
            self.check()?;
            if self.clients.iter().all(|c| c.finished) {
                return self.finish();
            }
            let limit = self.base + self.plan.horizon + SETTLE;
            if self.now > limit && self.cluster.all_done() {
                let open: Vec<String> = self
                    .clients
                    .iter()
                    .filter(|c| !c.finished)
                    .map(|c| format!("client {} ({}, core done: {})", c.app.client, c.app.phase_name(), c.core_done))
                    .collect();
                return Err(format!("every record is done, but consumers never finished closing: {}", open.join(", ")));
            }
            if self.now > limit {
                return Err(format!(
                    "not every record was accepted or archived {SETTLE:?} after the last fault (available, acquired, acked, archived: {:?})",
                    self.cluster.census()
                ));
            }
            let next = self.next_time();
            if next <= last {
                spins += 1;
                if spins > SPIN {
                    return Err(format!(
                        "{SPIN} steps at one virtual instant: a loop that never waits ({})",
                        self.due_now()
                    ));
                }
            } else {
                spins = 0;
            }
            self.now = next.max(self.now);
            last = self.now;
        }
    }

    /// The end: every record done, every consumer closed.
    fn finish(&mut self) -> std::result::Result<(), String> {
        if !self.cluster.all_done() {
            return Err(format!("every consumer closed with records left: {:?}", self.cluster.census()));
        }
        Ok(())
    }

    /// What is due now, for a spin's report.
    fn due_now(&self) -> String {
        let now = self.now;
        let mut why = Vec::new();
        if self.due.first_key_value().is_some_and(|((at, _), _)| *at <= now) {
            why.push("a network delivery".to_string());
        }
        for c in self.clients.iter().filter(|c| !c.finished) {
            if c.core.poll_timeout(now) <= now {
                why.push(format!("client {}'s core poll_timeout", c.app.client));
            }
            if c.app.wakeup().is_some_and(|w| w <= now) {
                why.push(format!("client {}'s application ({})", c.app.client, c.app.phase_name()));
            }
        }
        why.join(", ")
    }

    fn next_time(&mut self) -> Instant {
        // Only a guard: every party names its own next moment (the core its timers).
        let mut t = self.now + Duration::from_secs(60);
        if let Some(((at, _), _)) = self.due.first_key_value() {
            t = t.min(*at);
        }
        if let Some((at, _)) = self.plan.faults.get(self.faults_done) {
            t = t.min(self.base + *at);
        }
        if let Some(c) = self.cluster.next_change() {
            t = t.min(c);
        }
        for p in self.parked.values() {
            t = t.min(p.deadline);
        }
        for c in self.clients.iter().filter(|c| !c.finished) {
            let wake = c.core.poll_timeout(self.now);
            // "Again now" is fair once or twice (a decision that needs a second turn), not
            // turn after turn with nothing sent.
            if wake <= self.now && self.tolerate_spins && c.idle_at == self.now && c.idle_turns >= 3 {
                self.spins_tolerated += 1;
            } else {
                t = t.min(wake);
            }
            if let Some(w) = c.app.wakeup() {
                t = t.min(w);
            }
        }
        if let Some(at) = self.plan.app.crash_at.filter(|_| !self.crashed) {
            t = t.min(self.base + at);
        }
        t.max(self.now)
    }

    fn step(&mut self) -> std::result::Result<(), String> {
        let now = self.now;
        while let Some((at, f)) = self.plan.faults.get(self.faults_done).cloned() {
            if self.base + at > now {
                break;
            }
            self.faults_done += 1;
            self.fault(f);
        }
        self.cluster.tick(now);
        // Waiting fetches can only be answered after a change, or at their deadline.
        let changed = std::mem::replace(&mut self.seen_version, self.cluster.version) != self.cluster.version;
        let ids: Vec<u64> =
            self.parked.iter().filter(|(_, p)| changed || p.deadline <= now).map(|(id, _)| *id).collect();
        for id in ids {
            let Some(w) = self.parked.get(&id).cloned() else { continue };
            if let Some(resp) = self.cluster.retry_parked(&w, now) {
                self.parked.remove(&id);
                self.answered(id, Answer::Fetch(resp));
            }
        }
        while let Some(entry) = self.due.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let d = entry.remove();
            self.deliver(d);
        }
        if let Some(at) = self.plan.app.crash_at.filter(|_| !self.crashed) {
            if self.base + at <= now {
                self.crashed = true;
                if let Some(c) = self.clients.iter_mut().find(|c| !c.app.is_closed()) {
                    // Through the handle, the drop hands the core its last acks first.
                    for cmd in c.app.crash(now, &mut self.cluster.ledger) {
                        c.core.handle_command(cmd, now);
                    }
                    c.core.handle_gone(now);
                    c.dirty = true;
                    let id = c.app.client;
                    self.log(|| format!("client {id} crashes (dropped without close); a new one joins"));
                    self.add_client();
                }
            }
        }
        let settled = self.now >= self.base + self.plan.horizon && self.cluster.all_done();
        if settled && !self.closing {
            self.closing = true;
            self.log(|| "every record done: the applications close".into());
        }
        for i in 0..self.clients.len() {
            let c = &mut self.clients[i];
            for (id, reply) in c.core.take_replies() {
                c.app.replied(id, reply);
            }
            let mut cmds = if self.closing { c.app.close(now, &mut self.cluster.ledger) } else { Vec::new() };
            cmds.extend(c.app.step(now, &mut self.cluster.ledger));
            for cmd in cmds {
                c.core.handle_command(cmd, now);
                c.dirty = true;
            }
            if std::mem::take(&mut c.app.replace) {
                // It failed mid-batch and closed or dropped its consumer (LANDSCAPE bug 6).
                self.failures += 1;
                self.log(|| format!("client {i} failed mid-batch; a new one joins"));
                self.add_client();
            }
        }
        for i in 0..self.clients.len() {
            let c = &mut self.clients[i];
            // Driven after an input or at its timeout, as the shell does.
            if c.finished || !(c.dirty || c.core.poll_timeout(now) <= now) {
                continue;
            }
            c.dirty = false;
            self.clients[i].core.drive(now);
            let sent = self.transmits;
            while let Some(t) = self.clients[i].core.poll_transmit() {
                self.transmit(i, t)?;
            }
            let c = &mut self.clients[i];
            // is_finished also answers the close (the shell asks it after every turn).
            c.core_done |= c.core.is_finished(now);
            // A core that asks for another turn at once, turn after turn, with nothing sent.
            if sent == self.transmits {
                c.idle_turns = if c.idle_at == now { c.idle_turns + 1 } else { 1 };
            } else {
                c.idle_turns = 0;
            }
            c.idle_at = now;
        }
        for i in 0..self.clients.len() {
            let done = std::mem::take(&mut *self.clients[i].completions.lock().unwrap_or_else(|p| p.into_inner()));
            for (p, offsets, r) in done {
                self.cluster.ledger.completed(i, p, &offsets, &r);
            }
        }
        for i in 0..self.clients.len() {
            let c = &mut self.clients[i];
            c.finished |= c.core_done && c.app.is_closed();
            if c.finished && !c.checked {
                c.checked = true;
                // Checked before the shell closes the consumer's connections when the core is
                // done (the brokers then end the sessions opened on them).
                if c.app.closed_ok {
                    self.closed_cleanly(i);
                }
                for (node, conn) in self.net.conns_of(i) {
                    self.close_conn(node, conn);
                }
            }
        }
        Ok(())
    }

    /// A close that answered Ok left nothing behind on the brokers (LANDSCAPE bugs 4, 5): no
    /// record still locked for it, and every ack it was handed reported. A share session
    /// left open (an abandoned one: the connection's close ends it) is only counted.
    fn closed_cleanly(&mut self, client: ClientId) {
        self.cluster.ledger.closed(client);
        let sessions: Vec<i32> = self.cluster.brokers_with_sessions_of(client);
        if !sessions.is_empty() {
            self.sessions_left_open += 1;
            self.log(|| format!("client {client} closed with share sessions open on brokers {sessions:?}"));
        }
        let held = self
            .cluster
            .parts
            .iter()
            .flat_map(|p| p.share.offsets())
            .filter(|o| o.holder().is_some_and(|h| h.client == client))
            .count();
        if held > 0 {
            self.cluster
                .violation(format!("client {client} closed, but {held} records are still locked for it"));
        }
    }

    fn check(&mut self) -> std::result::Result<(), String> {
        if let Some(v) = self.cluster.violations.first() {
            return Err(format!("broker saw: {v}"));
        }
        if let Some(v) = self.cluster.ledger.violations.first() {
            return Err(v.clone());
        }
        for c in &self.clients {
            if let Some(p) = c.app.problems.iter().find(|p| !p.starts_with("poll failed")) {
                return Err(format!("client {}: {p}", c.app.client));
            }
        }
        Ok(())
    }

    fn fault(&mut self, f: Fault) {
        self.log(|| format!("FAULT {f:?}"));
        let now = self.now;
        match f {
            Fault::Crash(node) => {
                self.cluster.crash(node);
                for conn in self.net.conns_to(None, node) {
                    self.close_conn(node, conn);
                }
                self.parked.retain(|_, p| p.node != node);
            }
            Fault::Restart(node) => self.cluster.restart(node),
            Fault::MoveLeader(p) => {
                let from = self.cluster.partition(p).and_then(|x| x.leader);
                let to = from.and_then(|n| self.cluster.next_live(n));
                if to.is_some() {
                    self.cluster.move_leader(p, to);
                }
            }
            Fault::MoveCoordinator => {
                if let Some(n) = self.cluster.next_live(self.cluster.group.coordinator) {
                    self.cluster.group.coordinator = n;
                }
            }
            Fault::CoordinatorLoading(d) => self.cluster.group.loading_until = Some(now + d),
            Fault::SessionError { node, client, code } => {
                self.cluster.forced_errors.insert((node, client), code);
            }
            Fault::SessionLimit { node, for_ } => {
                self.cluster.session_limit.insert(node);
                self.plan.faults.insert(self.faults_done, (self.elapsed() + for_, Fault::SessionLimitEnds(node)));
                self.plan.faults[self.faults_done..].sort_by_key(|(t, _)| *t);
            }
            Fault::SessionLimitEnds(node) => {
                self.cluster.session_limit.remove(&node);
            }
            Fault::CorruptBatch(p) => {
                self.cluster.corrupt_next.insert(p);
            }
            Fault::AckError { node, client, code } => {
                self.cluster.forced_ack_errors.insert((node, client), code);
            }
            Fault::Disconnect { node, client } => {
                for conn in self.net.conns_to(Some(client), node) {
                    self.close_conn(node, conn);
                }
            }
        }
    }
}
