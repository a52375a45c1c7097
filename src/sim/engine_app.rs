//! The processing engine as the simulation's application: the engine's own core
//! (`processor::core::EngineCore`) over the driver core, as `processor/run.rs` runs it over
//! the consumer, with handlers simulated in virtual time. Its events become the driver's
//! commands (`Poll`, `Outcomes`, `Busy`, `AcquireMode`, `Close`), the driver's replies its
//! inputs. Handlers are drawn from the seed (`EnginePlan`): quick, slow past the lock, stuck
//! until the faults end, panicking; outcomes ACCEPT mostly, RETRY, RELEASE or REJECT in some;
//! a first consumer shuts its engine down (or aborts it) at a drawn moment, and a new one
//! joins.
//!
//! What it checks, every step (a `problem` fails the seed):
//! - each delivery's final outcome is handed on at most once (`double outcome`);
//! - no record waits unstarted while a slot is free, and none is released unstarted while a
//!   slot was free (the bound applies only while every slot is busy);
//! - at the close, every record never started was released, and the report counts exactly
//!   those releases (`released_unstarted`);
//! - no outcome lost: every handler outcome reached the driver (by the close at the latest).
//!
//! The broker model checks the rest (an outcome never applied to a newer delivery).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::consumer::driver::{AckEntry, Command, PollAnswer, ReplyId};
use crate::processor::core::{EngineCore, Event, Finished, UnitId};
use crate::processor::ledger::Limits;
use crate::processor::Outcome;
use crate::share::acks::AckKind;

use super::invariants::Ledger;
use super::reply::Reply;
use super::rng::SplitMix;
use super::state::ClientId;

/// A delivery: partition, offset, delivery count.
type Key = (i32, i64, i16);

/// How the engine and its handlers behave in one seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnginePlan {
    pub slots: usize,
    /// `max_unstarted` (None: a quarter of the lock).
    pub max_unstarted: Option<Duration>,
    /// A handler's usual time.
    pub handler: Duration,
    /// Per mille of calls slow past the lock, stuck (until the faults end), panicking.
    pub slow_permille: u32,
    pub stuck_permille: u32,
    pub panic_permille: u32,
    /// Per mille of outcomes RETRY, RELEASE, REJECT (else ACCEPT).
    pub retry_permille: u32,
    pub release_permille: u32,
    pub reject_permille: u32,
    /// A first consumer stops its engine then: gracefully with this grace, or aborts (None).
    pub stop_at: Option<(Duration, Option<Duration>)>,
    /// The lock, and whether the cluster takes RENEW.
    pub lock: Duration,
    pub v2: bool,
    /// A fault injected into what the core emits (the checks' own test).
    pub injected: Option<Injected>,
}

/// A fault injected into what the core emits, to show the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Injected {
    /// Every final outcome is handed on twice.
    DoubleOutcome,
    /// The close drops the releases of the records never started.
    LostRelease,
}

struct Call {
    unit: UnitId,
    keys: Vec<Key>,
    /// None: stuck until aborted (or until `until_calm`).
    ends: Instant,
    panics: bool,
}

enum Phase {
    Running,
    Closing { id: ReplyId, deadline: Instant },
    Closed,
}

pub(crate) struct EngineApp {
    client: ClientId,
    plan: EnginePlan,
    core: EngineCore,
    rng: SplitMix,
    calm_from: Instant,
    stop_at: Option<Instant>,
    phase: Phase,
    last_id: u64,
    poll: Option<ReplyId>,
    reply: Option<(ReplyId, Reply)>,
    calls: Vec<Call>,
    /// Records received and not started: when they came.
    unstarted: BTreeMap<Key, Instant>,
    /// Final outcomes handed on, per delivery.
    handed: BTreeMap<Key, AckKind>,
    /// Outcomes the handlers gave that must be handed on.
    owed: BTreeMap<Key, AckKind>,
    /// Releases of records never started.
    released_unstarted: u64,
    stopped: bool,
    /// The simulation closed it (its end), rather than it stopping on its own.
    told_to_close: bool,
    injected: Option<Injected>,
    pub problems: Vec<String>,
    pub closed_ok: bool,
    pub replace: bool,
    pub wake: Option<Instant>,
}

impl std::fmt::Debug for EngineApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineApp").field("plan", &self.plan).field("calls", &self.calls.len()).finish()
    }
}

impl EngineApp {
    pub(crate) fn new(
        client: ClientId,
        plan: EnginePlan,
        first: bool,
        seed: u64,
        now: Instant,
        calm_from: Instant,
    ) -> Self {
        let limits = Limits {
            slots: plan.slots,
            batch_size: 1,
            prefetch: plan.slots,
            prefetch_follows_slots: false,
            prefetch_adapts: true,
            max_unstarted: plan.max_unstarted,
            max_retries: 2,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            on_exhausted: AckKind::Release,
        };
        let mut core = EngineCore::new(limits, Arc::default(), false, None, "sim".into(), plan.v2, 0, now);
        core.handle_start(plan.v2, crate::acquire_mode::AcquireMode::BatchOptimized, now);
        EngineApp {
            client,
            plan,
            core,
            rng: SplitMix::new(super::rng::mix(seed ^ 0xe9_0000 ^ client as u64)),
            calm_from,
            stop_at: plan.stop_at.filter(|_| first).map(|(at, _)| now + at),
            phase: Phase::Running,
            last_id: 0,
            poll: None,
            reply: None,
            calls: Vec::new(),
            unstarted: BTreeMap::new(),
            handed: BTreeMap::new(),
            owed: BTreeMap::new(),
            released_unstarted: 0,
            stopped: false,
            told_to_close: false,
            injected: plan.injected,
            problems: Vec::new(),
            closed_ok: false,
            replace: false,
            wake: Some(now),
        }
    }

    fn next_id(&mut self) -> ReplyId {
        self.last_id += 1;
        ReplyId(self.last_id)
    }

    pub(crate) fn replied(&mut self, id: ReplyId, reply: Reply) {
        let waits = self.poll == Some(id) || matches!(self.phase, Phase::Closing { id: c, .. } if c == id);
        if waits {
            self.reply = Some((id, reply));
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed)
    }

    pub(crate) fn phase_name(&self) -> &'static str {
        match self.phase {
            Phase::Running => "engine running",
            Phase::Closing { .. } => "engine closing",
            Phase::Closed => "engine closed",
        }
    }

    /// The simulation is done: a graceful shutdown, the handlers given a while.
    pub(crate) fn close(&mut self, now: Instant, ledger: &mut Ledger) -> Vec<Command> {
        if matches!(self.phase, Phase::Running) {
            self.told_to_close = true;
            self.core.handle_shutdown(now + Duration::from_secs(5), now);
        }
        self.step(now, ledger)
    }

    /// The process dies: its consumer is dropped (the driver releases what it holds).
    pub(crate) fn crash(&mut self, now: Instant) -> Vec<Command> {
        self.phase = Phase::Closed;
        vec![Command::Close { acks: Vec::new(), deadline: now + Duration::from_secs(5), id: None }]
    }

    pub(crate) fn step(&mut self, now: Instant, ledger: &mut Ledger) -> Vec<Command> {
        let mut out = Vec::new();
        if let Phase::Closing { id, deadline } = self.phase {
            match self.reply.take() {
                Some((of, Reply::Close(r))) if of == id => {
                    self.closed_ok = r.is_ok();
                    self.phase = Phase::Closed;
                }
                _ if now > deadline + Duration::from_millis(1) => {
                    self.problems.push("the engine's close did not finish in time".into());
                    self.phase = Phase::Closed;
                }
                other => self.reply = other,
            }
            self.wake = matches!(self.phase, Phase::Closing { .. }).then_some(deadline);
            return out;
        }
        if matches!(self.phase, Phase::Closed) {
            self.wake = None;
            return out;
        }
        if let Some((id, Reply::Poll(answer))) = self.reply.take() {
            if self.poll == Some(id) {
                self.poll = None;
                self.answered(answer, now);
            }
        }
        if self.stop_at.is_some_and(|t| t <= now) && !self.stopped {
            self.stopped = true;
            match self.plan.stop_at.and_then(|(_, grace)| grace) {
                Some(grace) => self.core.handle_shutdown(now + grace, now),
                None => self.core.handle_abort(now),
            }
        }
        let ended: Vec<Call> = {
            let (ended, running) = self.calls.drain(..).partition(|c| c.ends <= now);
            self.calls = running;
            ended
        };
        for call in ended {
            self.end_call(call, false, now);
        }
        self.core.handle_consumer(Some(self.plan.lock), self.plan.v2, 0);
        let timed_out = self.core.next_timeout(now).is_some_and(|t| t <= now);
        if timed_out {
            self.core.handle_timeout(now);
        } else {
            self.core.drive(now);
        }
        for _ in 0..100 {
            let fed = self.perform_all(now, ledger, &mut out);
            if !fed {
                break;
            }
            self.core.drive(now);
        }
        self.check_slots();
        let mut wake = self.core.next_timeout(now);
        for c in &self.calls {
            wake = Some(wake.map_or(c.ends, |w| w.min(c.ends)));
        }
        if let Some(t) = self.stop_at.filter(|_| !self.stopped) {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        if let Phase::Closing { deadline, .. } = self.phase {
            wake = Some(deadline);
        }
        self.wake = wake;
        out
    }

    fn answered(&mut self, answer: crate::error::Result<PollAnswer>, now: Instant) {
        if let Ok(a) = &answer {
            for d in &a.records {
                let key = (d.tp.partition, d.record.offset, d.record.delivery_count);
                self.unstarted.insert(key, now);
            }
        }
        self.core.handle_poll_answer(answer, now);
    }

    fn end_call(&mut self, call: Call, aborted: bool, now: Instant) {
        let finished = if aborted {
            Finished::Aborted
        } else if call.panics {
            Finished::Panicked
        } else {
            let roll = self.rng.gen_range(0..1000);
            let p = &self.plan;
            let outcome = if roll < p.retry_permille {
                Outcome::Retry
            } else if roll < p.retry_permille + p.release_permille {
                Outcome::Release
            } else if roll < p.retry_permille + p.release_permille + p.reject_permille {
                Outcome::Reject
            } else {
                Outcome::Accept
            };
            let kind = match outcome {
                Outcome::Accept => Some(AckKind::Accept),
                Outcome::Release => Some(AckKind::Release),
                // Without a destination (the simulation has none) a dead letter is a REJECT;
                // with one, the handler's wrapper turns it into an ACCEPT before the core.
                Outcome::Reject | Outcome::DeadLetter => Some(AckKind::Reject),
                Outcome::Retry => None,
            };
            if let Some(kind) = kind {
                for k in &call.keys {
                    self.owed.insert(*k, kind);
                }
            }
            Finished::One(outcome)
        };
        self.core.handle_finished(call.unit, finished, Duration::ZERO, now);
    }

    /// Performs the core's events; true if that fed it an input.
    fn perform_all(&mut self, now: Instant, ledger: &mut Ledger, out: &mut Vec<Command>) -> bool {
        let mut fed = false;
        while let Some(event) = self.core.poll_event() {
            match event {
                Event::AcquireMode { mode, sized } => out.push(Command::AcquireMode { mode, sized }),
                Event::Start { unit, deliveries } => {
                    let keys: Vec<Key> = deliveries
                        .iter()
                        .map(|d| (d.record().partition, d.record().offset, d.record().delivery_count))
                        .collect();
                    for k in &keys {
                        self.unstarted.remove(k);
                    }
                    let roll = self.rng.gen_range(0..1000);
                    let p = self.plan;
                    let base = p.handler.mul_f64(self.rng.gen_range(0.5..1.5));
                    let (ends, panics) = if roll < p.panic_permille {
                        (now + base / 2, true)
                    } else if roll < p.panic_permille + p.slow_permille {
                        (now + p.lock + base, false)
                    } else if roll < p.panic_permille + p.slow_permille + p.stuck_permille {
                        (self.calm_from.max(now) + Duration::from_secs(1), false)
                    } else {
                        (now + base, false)
                    };
                    self.calls.push(Call { unit, keys, ends, panics });
                }
                Event::Poll { max, wait, renewing, acks } => {
                    let acks = self.hand(acks, ledger);
                    let id = self.next_id();
                    self.poll = Some(id);
                    out.push(Command::Poll { max, wait, renewing, acks, id });
                }
                Event::Acknowledge(acks) => {
                    let acks = self.hand(acks, ledger);
                    out.push(Command::Outcomes(acks));
                }
                Event::ExpirePoll => {
                    fed = true;
                    match (self.poll.take(), self.reply.take()) {
                        (Some(id), Some((of, Reply::Poll(answer)))) if of == id => self.answered(answer, now),
                        (Some(id), _) => {
                            out.push(Command::PollAbandoned(id));
                            self.core.handle_poll_expired();
                        }
                        (None, _) => self.core.handle_poll_expired(),
                    }
                }
                Event::Busy(b) => out.push(Command::Busy(b)),
                Event::AbortHandlers => {
                    fed = true;
                    for call in std::mem::take(&mut self.calls) {
                        self.end_call(call, true, now);
                    }
                }
                Event::Close(acks) => {
                    let acks = self.hand(acks, ledger);
                    self.check_close();
                    let id = self.next_id();
                    let deadline = now + Duration::from_secs(10);
                    out.push(Command::Close { acks, deadline, id: Some(id) });
                    self.phase = Phase::Closing { id, deadline };
                    if !self.told_to_close {
                        // It stopped before the simulation's end (its plan, a fatal error):
                        // another takes its place.
                        self.replace = true;
                    }
                }
            }
        }
        fed
    }

    /// Checks and notes acknowledgements the core hands on (with a fault injected, if so).
    fn hand(&mut self, mut acks: Vec<AckEntry>, ledger: &mut Ledger) -> Vec<AckEntry> {
        match self.injected {
            Some(Injected::DoubleOutcome) => {
                let again: Vec<AckEntry> = acks.iter().filter(|a| a.kind != AckKind::Renew).cloned().collect();
                acks.extend(again);
            }
            Some(Injected::LostRelease) if self.core.is_stopping() => {
                // Per record: the lost RELEASE may lie inside a run.
                acks = acks.into_iter().flat_map(AckEntry::singles).collect();
                let unstarted = &self.unstarted;
                acks.retain(|a| {
                    !(a.kind == AckKind::Release
                        && unstarted.contains_key(&(a.tp.partition, a.offset, a.delivery_count)))
                });
            }
            _ => {}
        }
        // Checked per record; handed on as they came (runs and all), so the driver routes
        // what the engine really sends.
        for a in acks.iter().flat_map(|a| a.clone().singles()) {
            if a.kind == AckKind::Renew {
                ledger.renew_asked(self.client, a.tp.partition, a.offset, a.delivery_count);
                continue;
            }
            ledger.app_acked(self.client, a.tp.partition, a.offset, a.delivery_count, a.kind);
            let key = (a.tp.partition, a.offset, a.delivery_count);
            if let Some(first) = self.handed.insert(key, a.kind) {
                self.problems
                    .push(format!("double outcome: delivery {key:?} handed on as {first:?}, then as {:?}", a.kind));
            }
            if self.unstarted.remove(&key).is_some() {
                if a.kind != AckKind::Release {
                    self.problems.push(format!("record {key:?} never started, handed on as {:?}", a.kind));
                }
                self.released_unstarted += 1;
                if !self.core.is_stopping() && self.core.running_units() < self.plan.slots {
                    self.problems.push(format!("record {key:?} released unstarted while a slot was free"));
                }
            }
        }
        acks
    }

    /// No record waits unstarted while a slot is free (but while stopping: nothing starts).
    fn check_slots(&mut self) {
        if matches!(self.phase, Phase::Running)
            && !self.core.is_stopping()
            && self.core.running_units() < self.plan.slots
            && !self.unstarted.is_empty()
        {
            let first = self.unstarted.keys().next().copied();
            self.problems.push(format!(
                "{} records unstarted while {} of {} slots run (first {first:?})",
                self.unstarted.len(),
                self.core.running_units(),
                self.plan.slots
            ));
        }
    }

    /// At the close: every record never started went back and was counted; no outcome lost.
    fn check_close(&mut self) {
        if let Some(k) = self.unstarted.keys().next() {
            self.problems.push(format!(
                "{} records never started were not released at the close (first {k:?})",
                self.unstarted.len()
            ));
        }
        let report = self.core.report();
        if report.released_unstarted != self.released_unstarted {
            self.problems.push(format!(
                "the report counts {} releases of unstarted records; the engine handed on {}",
                report.released_unstarted, self.released_unstarted
            ));
        }
        let owed = std::mem::take(&mut self.owed);
        for (key, kind) in owed {
            if self.handed.get(&key) != Some(&kind) {
                self.problems.push(format!(
                    "outcome lost: {kind:?} of delivery {key:?} (handed on: {:?})",
                    self.handed.get(&key)
                ));
                break;
            }
        }
    }
}

/// Draws the engine's plan for a seed.
pub(crate) fn draw(seed: u64, horizon: Duration, lock: Duration, v2: bool, injected: Option<Injected>) -> EnginePlan {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(super::rng::mix(seed ^ 0xe9_91e3));
    let faulty = !seed.is_multiple_of(4);
    let per_mille = |rng: &mut rand::rngs::StdRng, max: u32| if faulty { rng.gen_range(0..=max) } else { 0 };
    let slots = rng.gen_range(1..=6);
    EnginePlan {
        slots,
        // Zero on 4.1 too (whole log batches, no record_limit): it was left out while each
        // freed slot fetched a batch, started one record and released the rest, a fetch per
        // handler call; since fetches ask for the engine's room and a stalled engine asks
        // for nothing, 4,000 seeds with it drawn keep every invariant and the request guard.
        max_unstarted: match rng.gen_range(0..4) {
            0 => Some(Duration::ZERO),
            1 => Some(Duration::from_millis(rng.gen_range(1..3000))),
            _ => None,
        },
        // At most ~25 calls a second in all: each outcome leaves at once, and the simulation
        // takes more than 100 requests a virtual second from one client for a spin.
        handler: Duration::from_millis(rng.gen_range(40..400) * slots as u64),
        slow_permille: per_mille(&mut rng, 30),
        stuck_permille: per_mille(&mut rng, 10),
        panic_permille: per_mille(&mut rng, 30),
        retry_permille: per_mille(&mut rng, 150),
        release_permille: per_mille(&mut rng, 50),
        reject_permille: per_mille(&mut rng, 30),
        stop_at: (faulty && rng.gen_bool(0.5)).then(|| {
            let at = Duration::from_millis(rng.gen_range(0..horizon.as_millis().max(1) as u64));
            (at, rng.gen_bool(0.7).then(|| Duration::from_millis(rng.gen_range(0..3000))))
        }),
        lock,
        v2,
        injected,
    }
}
