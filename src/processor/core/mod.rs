//! The engine's core, sans-IO, in the driver core's shape (`consumer/driver`): it is fed
//! inputs `handle_*(.., now)` (a poll's answer, a handler call's end, a signal, what the
//! consumer under it says), decides in [`EngineCore::drive`], and emits what to do as
//! [`Event`]s taken with [`EngineCore::poll_event`]; its moments are named [`Timer`]s
//! (`timers.rs`). It reads no clock, spawns no task and awaits nothing: the shell (`run.rs`)
//! performs the events on the consumer and the handlers' tasks, and the simulation
//! (`crate::sim`, the engine application) performs them on its own model.
//!
//! What it owns: the [`Ledger`] (every record held and what becomes of it), the one poll
//! under way, the poll's retry backoff (the crate's [`Backoff`]), the stop (its deadline,
//! its fatal error, whether it aborts) and every counter of the [`Report`]: the ledger's
//! metrics, the handler calls aborted, the time starved, and the consumer's releases of
//! records it never handed over (fed in by `handle_consumer`), so that what the report and
//! the metrics say is what this core decided and was told.
//!
//! One turn: the shell feeds the inputs that came, calls `drive(now)` (or `handle_timeout`),
//! performs every event, and drives again at once if performing fed an input (a poll that
//! could not be made, an expired poll's answer); else it sleeps until
//! [`EngineCore::next_timeout`] or the next input.

mod events;
#[cfg(test)]
mod tests;
mod timers;

pub(crate) use events::{Event, Finished, UnitId};

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::deadline::later;
use super::ledger::{Ledger, Limits, Unit};
use super::metrics::ProcessorMetrics;
use super::Report;
use crate::acquire_mode::AcquireMode;
use crate::backoff::Backoff;
use crate::consumer::driver::PollAnswer;
use crate::error::{Error, Result};

/// How long a poll that waits for records stays under way before it is asked again (so the
/// engine sees renewal outcomes and the poll interval is kept).
pub(crate) const POLL_WAIT: Duration = Duration::from_millis(1000);
/// How often to ask for renewal outcomes while renewals are under way.
pub(crate) const RENEWAL_POLL: Duration = Duration::from_millis(50);
/// How often to poll (taking nothing) while every slot is busy: keeps `max.poll.interval.ms`
/// and collects renewal outcomes.
pub(crate) const KEEPALIVE_POLL: Duration = Duration::from_millis(1000);
/// The first and the longest wait before a failed poll is tried again.
const POLL_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(10));
/// How long the running handlers get when the engine stops on an error of its own (the
/// consumer's, a batch handler's Stop).
const FATAL_GRACE: Duration = Duration::from_secs(10);
/// How long the running handlers get when every handle is gone without a word (as a drop
/// of `Running` would give).
const ORPHAN_GRACE: Duration = Duration::from_secs(30);

/// The poll under way.
#[derive(Debug, Clone, Copy)]
struct PendingPoll {
    expires: Instant,
    /// `Event::ExpirePoll` was emitted: its answer or `handle_poll_expired` comes next.
    expiring: bool,
}

/// How far the engine's end has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The handlers still running were told to abort: waiting for each call's end.
    Aborting,
    /// No call runs any more: the close follows as soon as the poll under way is settled.
    Closing,
    /// `Event::Close` was emitted.
    Closed,
}

/// The engine's decisions (see the module doc).
pub(crate) struct EngineCore {
    ledger: Ledger,
    metrics: Arc<ProcessorMetrics>,
    /// The batch form (a handler that panics takes the engine down unless the pool retires).
    batch: bool,
    /// The pool retires a handler that stops or panics instead of stopping the engine.
    retiring: bool,
    /// The handler calls running, by `UnitId` (`events.rs`): their records.
    units: Units,
    events: VecDeque<Event>,
    poll: Option<PendingPoll>,
    last_keepalive: Instant,
    poll_backoff: Backoff,
    poll_retry_at: Option<Instant>,
    /// Set when the engine is stopping: the deadline for the running handlers.
    stopping: Option<Instant>,
    /// Told to abort the running handlers now.
    abort: bool,
    end: Option<End>,
    fatal: Option<Error>,
    aborted: u64,
    /// Time with no handler running, waiting for records, and since when it is so.
    starved: Duration,
    idle_since: Option<Instant>,
    /// Whether a handler runs, as the shell was last told (`Event::Busy`).
    busy: bool,
    /// The consumer's count of records released unseen, as far as counted here.
    unseen_counted: u64,
    /// The acquisition mode the user asked for (None: record_limit where the cluster has it).
    acquire: Option<AcquireMode>,
    /// For the log lines.
    group: String,
}

impl EngineCore {
    /// `renew`: whether the cluster takes RENEW as far as known; `released_unseen`: the
    /// consumer's count of records it released unseen so far (not the engine's).
    #[allow(clippy::too_many_arguments)] // each a different fact the shell knows at start
    pub(crate) fn new(
        limits: Limits,
        metrics: Arc<ProcessorMetrics>,
        batch: bool,
        acquire: Option<AcquireMode>,
        group: String,
        renew: bool,
        released_unseen: u64,
        now: Instant,
    ) -> EngineCore {
        EngineCore {
            ledger: Ledger::new(limits, renew, metrics.clone()),
            metrics,
            batch,
            retiring: false,
            units: Units::default(),
            events: VecDeque::new(),
            poll: None,
            last_keepalive: now,
            poll_backoff: Backoff::new(POLL_BACKOFF.0, POLL_BACKOFF.1),
            poll_retry_at: None,
            stopping: None,
            abort: false,
            end: None,
            fatal: None,
            aborted: 0,
            starved: Duration::ZERO,
            idle_since: None,
            busy: false,
            unseen_counted: released_unseen,
            acquire,
            group,
        }
    }

    /// The next thing to do, in the order decided.
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ---- inputs ----

    /// The engine starts: acquisition that follows free capacity (record_limit, each fetch
    /// acquiring at most the room the engine asks for) where the cluster has it, unless the
    /// user chose otherwise. `supported`: the cluster takes record_limit; `configured`: the
    /// consumer's own setting.
    pub(crate) fn handle_start(&mut self, supported: bool, configured: AcquireMode, now: Instant) {
        // Without record_limit, batch_optimized fetches ask for the engine's room all the
        // same (the broker completes the log batch it starts, no more), unless the user
        // chose whole batches with the consumer's prefetch.
        let sized = self.acquire.is_none();
        let mode = match self.acquire {
            Some(AcquireMode::RecordLimit) if !supported => {
                self.fail(Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, broker: None }, now, now);
                return;
            }
            Some(mode) => mode,
            None if supported => AcquireMode::RecordLimit,
            None => {
                tracing::warn!(
                    group = self.group,
                    "this cluster has no record_limit acquisition (ShareFetch v2, Kafka 4.2+): the broker hands out whole log batches, so records beyond the free handler slots may wait and go back to the group unstarted (records-released-unstarted-total)"
                );
                configured
            }
        };
        if mode != configured || sized {
            self.events.push_back(Event::AcquireMode { mode, sized });
        }
    }

    /// What the consumer says now: the lock duration (once the broker said it), whether the
    /// cluster takes RENEW, and its count of records released unseen. Those it fetched and
    /// released without handing them over (its buffer at close, or while no handler ran and
    /// no poll waited) are releases on the engine's behalf: counted as its own unstarted
    /// ones, in the metrics and the report.
    pub(crate) fn handle_consumer(&mut self, lock: Option<Duration>, renew: bool, released_unseen: u64) {
        self.ledger.set_lock(lock);
        self.ledger.set_renew(renew);
        self.count_unseen(released_unseen);
    }

    fn count_unseen(&mut self, released_unseen: u64) {
        let new = released_unseen.saturating_sub(self.unseen_counted);
        if new > 0 {
            self.unseen_counted = released_unseen;
            ProcessorMetrics::add(&self.metrics.released, new);
            ProcessorMetrics::add(&self.metrics.released_unstarted, new);
        }
    }

    /// The batch form's pool now: its slots, and whether it retires a handler that stops or
    /// panics. An empty pool that does not wait for handlers stops the engine.
    pub(crate) fn handle_slots(&mut self, slots: usize, retiring: bool, now: Instant) {
        self.retiring = retiring;
        self.ledger.set_slots(slots);
        if !retiring && slots == 0 && self.ledger.running_units() == 0 && self.fatal.is_none() {
            self.fail(Error::InvalidArgument("the processor was given no batch handler to run".into()), now, now);
        }
    }

    /// A graceful shutdown: the running handlers have until `deadline`.
    pub(crate) fn handle_shutdown(&mut self, deadline: Instant, now: Instant) {
        self.begin_stop(deadline, now);
    }

    /// Abort the running handlers and close now.
    pub(crate) fn handle_abort(&mut self, now: Instant) {
        self.begin_stop(now, now);
        self.abort = true;
    }

    /// Every handle is gone without a word: stop as a drop of `Running` would.
    pub(crate) fn handle_orphaned(&mut self, now: Instant) {
        self.begin_stop(later(now, ORPHAN_GRACE), now);
    }

    /// The poll under way was given up (`Event::ExpirePoll`) and no answer had come.
    pub(crate) fn handle_poll_expired(&mut self) {
        self.poll = None;
    }

    /// The poll under way answered (`Ok` with nothing when it was dropped unanswered).
    pub(crate) fn handle_poll_answer(&mut self, answer: Result<PollAnswer>, now: Instant) {
        self.poll = None;
        match answer {
            Ok(answer) => {
                self.poll_backoff.reset();
                self.poll_retry_at = None;
                self.ledger.received(answer, now);
            }
            Err(e) => self.handle_poll_failed(e, now),
        }
    }

    /// The poll could not be made, or failed: retried after a backoff if it may succeed,
    /// else the engine stops with the error.
    pub(crate) fn handle_poll_failed(&mut self, e: Error, now: Instant) {
        self.poll = None;
        if e.is_retriable() {
            tracing::warn!(error = %e, "processor: poll failed, retrying");
            self.poll_retry_at = Some(later(now, self.poll_backoff.next_delay()));
            return;
        }
        tracing::error!(error = %e, "processor: the consumer failed; stopping");
        self.fail(e, later(now, FATAL_GRACE), now);
    }

    /// A handler call ended. A second end of the same call is ignored (its records were
    /// settled by the first).
    pub(crate) fn handle_finished(&mut self, unit: UnitId, finished: Finished, elapsed: Duration, now: Instant) {
        let Some(ids) = self.units.remove(unit) else { return };
        match finished {
            Finished::One(outcome) => self.ledger.finished(&ids, std::slice::from_ref(&outcome), elapsed, now),
            Finished::Outcomes(outcomes) => self.ledger.finished(&ids, &outcomes, elapsed, now),
            Finished::Stopped(reason, done) => {
                // Its records go back but for those it finished; in the retiring pool the
                // other handlers go on.
                self.ledger.finished(&ids, &done, elapsed, now);
                if !self.retiring {
                    self.fail(Error::ProcessorStopped { reason }, now, now);
                }
            }
            Finished::Panicked => {
                ProcessorMetrics::add(&self.metrics.handler_panics, 1);
                tracing::error!(records = ids.len(), "a handler panicked: its records are released");
                self.ledger.finished(&ids, &[], Duration::ZERO, now);
                if self.batch && !self.retiring {
                    self.fail(Error::ProcessorStopped { reason: "the batch handler panicked".into() }, now, now);
                }
            }
            Finished::Aborted => {
                self.aborted = self.aborted.saturating_add(ids.len() as u64);
                self.ledger.finished(&ids, &[], Duration::ZERO, now);
            }
        }
    }

    /// The close the engine asked for (`Event::Close`) is done; `released_unseen` as in
    /// `handle_consumer` (the close released what the consumer still buffered).
    pub(crate) fn handle_closed(&mut self, released_unseen: u64) {
        self.count_unseen(released_unseen);
    }

    // ---- decisions ----

    /// Decides what the inputs so far call for: the end's next step, handler calls for the
    /// free slots, the releases and renewals due, the acknowledgements and the poll.
    pub(crate) fn drive(&mut self, now: Instant) {
        if let Some(since) = self.idle_since.take() {
            self.starved = self.starved.saturating_add(now.saturating_duration_since(since));
        }
        if self.end.is_none() {
            self.ledger.tick(now);
            match self.stopping {
                None => {
                    for Unit { ids, deliveries } in self.ledger.start(now) {
                        let unit = self.units.insert(ids);
                        self.events.push_back(Event::Start { unit, deliveries });
                    }
                }
                Some(_) if self.abort => self.begin_end(true, now),
                Some(_) if self.ledger.running_units() == 0 => self.begin_end(false, now),
                Some(deadline) if now >= deadline => self.begin_end(true, now),
                Some(_) => {}
            }
        }
        if self.end.is_some() {
            self.advance_end(now);
            return;
        }
        let working = self.ledger.running_units() > 0;
        if working != self.busy {
            self.busy = working;
            self.events.push_back(Event::Busy(working));
        }
        self.send(now);
        if !working && self.stopping.is_none() {
            self.idle_since = Some(now);
        }
    }

    /// Hands the decided acknowledgements on, and keeps a poll under way.
    fn send(&mut self, now: Instant) {
        let mut acks = self.ledger.take_acks();
        if self.poll.is_none() && self.fatal.is_none() {
            let wants = self.stopping.is_none() && self.ledger.should_poll();
            let backing_off = self.poll_retry_at.is_some_and(|t| now < t);
            let renewals = self.ledger.renewals_in_flight();
            if wants && !backing_off {
                // While renewals are under way the poll must come back at once: a waiting
                // poll is answered only when records arrive, and their outcomes with it.
                let wait = !renewals;
                let expires = later(now, if wait { POLL_WAIT } else { RENEWAL_POLL });
                self.poll = Some(PendingPoll { expires, expiring: false });
                let max = self.ledger.want();
                self.events.push_back(Event::Poll { max, wait, renewing: false, acks: std::mem::take(&mut acks) });
            } else if !backing_off && self.keepalive_due().is_some_and(|t| now >= t) {
                self.last_keepalive = now;
                self.poll = Some(PendingPoll { expires: later(now, RENEWAL_POLL), expiring: false });
                self.events.push_back(Event::Poll {
                    max: 0,
                    wait: false,
                    renewing: true,
                    acks: std::mem::take(&mut acks),
                });
            }
        }
        if !acks.is_empty() {
            self.events.push_back(Event::Acknowledge(acks));
        }
    }

    /// When the next keep-alive poll is due (none while a poll is under way or the engine
    /// failed).
    fn keepalive_due(&self) -> Option<Instant> {
        if self.poll.is_some() || self.fatal.is_some() || self.end.is_some() {
            return None;
        }
        let every = if self.ledger.renewals_in_flight() { RENEWAL_POLL } else { KEEPALIVE_POLL };
        Some(later(self.last_keepalive, every))
    }

    fn fail(&mut self, e: Error, deadline: Instant, now: Instant) {
        if self.fatal.is_none() {
            self.fatal = Some(e);
        }
        self.begin_stop(deadline, now);
    }

    fn begin_stop(&mut self, deadline: Instant, now: Instant) {
        if self.stopping.is_some() {
            return;
        }
        tracing::debug!(running = self.ledger.running_units(), "processor stopping: releasing what has not started");
        self.stopping = Some(deadline);
        self.idle_since = None;
        self.ledger.release_unstarted(now);
    }

    /// The end begins: what still runs is aborted if `abort` (told to, or out of time).
    fn begin_end(&mut self, abort: bool, now: Instant) {
        self.begin_stop(now, now);
        if abort && self.ledger.running_units() > 0 {
            self.end = Some(End::Aborting);
            self.events.push_back(Event::AbortHandlers);
        } else {
            self.end = Some(End::Closing);
        }
    }

    /// The end's next step: once no call runs, the poll under way is settled (a poll may
    /// hold records handed over: they are taken, to be released), then the close with the
    /// last outcomes (it releases whatever else the consumer holds).
    fn advance_end(&mut self, now: Instant) {
        if self.end == Some(End::Aborting) && self.ledger.running_units() == 0 {
            self.end = Some(End::Closing);
        }
        if self.end != Some(End::Closing) {
            return;
        }
        if let Some(p) = self.poll.as_mut() {
            if !p.expiring {
                p.expiring = true;
                self.events.push_back(Event::ExpirePoll);
            }
            return;
        }
        self.ledger.release_unstarted(now);
        let acks = self.ledger.take_acks();
        if self.busy {
            self.busy = false;
            self.events.push_back(Event::Busy(false));
        }
        self.events.push_back(Event::Close(acks));
        self.end = Some(End::Closed);
    }

    /// Whether the close was asked for (`Event::Close`): nothing more comes.
    pub(crate) fn is_closed(&self) -> bool {
        self.end == Some(End::Closed)
    }

    /// What the engine did, from its own counters.
    pub(crate) fn report(&self) -> Report {
        let m = &self.metrics;
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        Report {
            accepted: get(&m.accepted),
            released: get(&m.released),
            rejected: get(&m.rejected),
            released_unstarted: get(&m.released_unstarted),
            renewals: get(&m.renewals),
            lapses: get(&m.lapsed),
            aborted: self.aborted,
            starved: self.starved,
        }
    }

    /// The run's result once closed: the engine's own error first, else the close's, else
    /// the report.
    pub(crate) fn into_result(self, closed: Result<()>) -> Result<Report> {
        let report = self.report();
        if let Some(e) = self.fatal {
            return Err(e);
        }
        closed.map(|()| report)
    }

    /// Handler calls running.
    pub(crate) fn running_units(&self) -> usize {
        self.ledger.running_units()
    }

    /// Whether the engine is stopping (no handler call starts any more).
    #[cfg(test)]
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.is_some()
    }
}

/// The running handler calls: a slab of their records, each slot tagged with a serial so
/// that a stale id (a call ended twice) never names a newer call in a reused slot.
#[derive(Default)]
struct Units {
    slots: Vec<Option<(u64, Vec<usize>)>>,
    free: Vec<usize>,
    serial: u64,
}

impl Units {
    fn insert(&mut self, ids: Vec<usize>) -> UnitId {
        self.serial = self.serial.wrapping_add(1);
        let serial = self.serial;
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some((serial, ids));
                i
            }
            None => {
                self.slots.push(Some((serial, ids)));
                self.slots.len() - 1
            }
        };
        UnitId { slot, serial }
    }

    fn remove(&mut self, unit: UnitId) -> Option<Vec<usize>> {
        let s = self.slots.get_mut(unit.slot)?;
        if s.as_ref().is_none_or(|(serial, _)| *serial != unit.serial) {
            return None;
        }
        let (_, ids) = s.take()?;
        self.free.push(unit.slot);
        Some(ids)
    }
}
