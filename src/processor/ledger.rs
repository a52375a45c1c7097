//! What the engine holds and what it decides, sans-IO: fed the driver's answers, the
//! handlers' outcomes and `now`; it says which records to start, which acknowledgements to
//! send (outcomes, RENEWs, RELEASEs of records that waited too long), how many records to
//! ask for, and when it next wants to be woken. The engine's core (`core/`) drives it and
//! turns its decisions into events; the shell (`run.rs`) only carries these out.
//!
//! A record the engine holds is in one of four states:
//! - **queued**: acquired, not started (FIFO; RELEASEd once it waited `max_unstarted`, and
//!   only while no slot is free to start it);
//! - **kept**: queued past its bound, but it went back to the group once already (its
//!   delivery count is above 1), so it is kept and started first instead: every RELEASE
//!   of a record never started uses up one of its `share.delivery.count.limit` deliveries,
//!   and a record bounced that many times is archived without ever being processed. Kept
//!   records are RENEWed like running ones (without RENEW, 4.1, they go back after three
//!   quarters of their lock, before it lapses);
//! - **running**: in a handler (its lock RENEWed once half of it is gone);
//! - **waiting**: a handler asked to try it again later (kept, renewed, started again after
//!   a backoff). In batch form a record that failed in a batch of `n` goes next into a batch
//!   of at most `n / 2`, so a record that fails alone is told apart from its batch-mates.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::deadline::later;
use super::held::{Block, Blocks};
use super::metrics::ProcessorMetrics;
use super::whole_batches::{batch_key, Key, WholeBatches};
use super::{Delivery, Outcome};
use crate::backoff::Backoff;
use crate::consumer::driver::{AckEntry, Delivered, PollAnswer};
use crate::metrics::HistogramTally;
use crate::share::acks::AckKind;
use crate::share::TopicIdPartition;

/// The limits the ledger keeps (from `ProcessorConfig`).
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Handlers that may run at once.
    pub slots: usize,
    /// Records a handler call takes at most (1: the per-record form).
    pub batch_size: usize,
    /// Records acquired beyond what the running handlers hold, ready for the next free slot.
    pub prefetch: usize,
    /// The prefetch is one call's worth per slot, and follows the slots when they change
    /// (the sink's tasks come and go).
    pub prefetch_follows_slots: bool,
    /// The prefetch is the default one (the user set none): it grows with the engine's
    /// measured outcome rate (`adapt_prefetch`), up to [`PREFETCH_GROWTH`] times itself.
    pub prefetch_adapts: bool,
    /// How long a record may wait unstarted before it goes back to the group (None: a
    /// quarter of the lock, 5 s until the lock is known).
    pub max_unstarted: Option<Duration>,
    /// Retry outcomes a record may get on its own before `on_exhausted` applies.
    pub max_retries: u32,
    pub backoff: Duration,
    pub backoff_max: Duration,
    pub on_exhausted: AckKind,
}

/// One record held by the engine.
struct Entry {
    tp: TopicIdPartition,
    node: i32,
    generation: u64,
    /// The acquired batch it came in (`whole_batches.rs`).
    batch: (i64, i64),
    offset: i64,
    delivery_count: i16,
    lock_deadline: Option<Instant>,
    /// Where the record and the lock deadline its handler sees (updated on renewal) are: its
    /// poll answer's batch in `Ledger::blocks`, and its index there (`held.rs`).
    block: usize,
    index: usize,
    acquired: Instant,
    state: State,
    /// Handler calls so far.
    attempts: u32,
    /// Retry outcomes it got while handled alone.
    retries: u32,
    /// The largest batch it may go in next (batch form; after a failed batch of n: n / 2).
    split: usize,
    /// A RENEW is on its way; its outcome comes with a poll answer.
    renewing: bool,
    /// A renewal failed: the broker may have given it to someone else.
    lost: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Queued,
    Kept,
    Running,
    Waiting { until: Instant },
}

/// Records started together (one handler call): their ledger ids and what the handler gets.
pub(crate) struct Unit {
    pub ids: Vec<usize>,
    pub deliveries: Vec<Delivery>,
}

pub(crate) struct Ledger {
    limits: Limits,
    /// The retry backoff (`limits.backoff` doubling up to `limits.backoff_max`).
    backoff: Backoff,
    metrics: Arc<ProcessorMetrics>,
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    /// The poll answers' records (`held.rs`): no allocation per record.
    blocks: Blocks,
    queued: VecDeque<usize>,
    /// Queued records past their bound that are not sent back again (see the module doc).
    kept: VecDeque<usize>,
    waiting: Vec<usize>,
    running_records: usize,
    running_units: usize,
    renewing: HashMap<(TopicIdPartition, i64), usize>,
    acks: Vec<AckEntry>,
    /// ACCEPTs waiting for the rest of their acquired batch (`whole_batches.rs`).
    whole: WholeBatches,
    /// Whether the cluster takes RENEW.
    renew: bool,
    /// The lock duration the broker reported (zero until it has).
    lock: Duration,
    /// No renewal is due before this (recomputed by each scan).
    next_renewal: Option<Instant>,
    /// Records waited out their bound while every slot was busy: acquire nothing more until
    /// a slot frees (prefetching for slots that stay busy would only cycle records through
    /// this member, acquired and released, while other members could take them).
    stalled: bool,
    /// The engine is stopping: nothing starts any more, so what waits goes back whether a
    /// slot is free or not.
    closing: bool,
    /// The prefetch in force (`limits.prefetch`, or more once it adapts).
    prefetch: usize,
    /// Records whose handler call ended so far (releases of unstarted records do not count:
    /// they would feed the prefetch that caused them), and where the current rate window started (when, and the
    /// count then).
    settled: u64,
    rate_window: Option<(Instant, u64)>,
    /// Per-record counts since the last `publish`, which adds them to the shared metrics:
    /// atomics once per step, not per record.
    tally: Tally,
}

/// What `settle` and `start` count per record, until `publish`.
#[derive(Default)]
struct Tally {
    accepted: u64,
    released: u64,
    rejected: u64,
    lapsed: u64,
    outcome_time: HistogramTally,
    wait_time: HistogramTally,
    /// The last (acquired, now) measured and its duration: the records of one answer were
    /// acquired together and a call's end settles them at one `now`, so most records repeat
    /// the one before (an `Instant` difference is ~50 instructions; a comparison a few).
    last: Option<(Instant, Instant, Duration)>,
}

impl Tally {
    fn since(&mut self, acquired: Instant, now: Instant) -> Duration {
        match self.last {
            Some((a, n, d)) if a == acquired && n == now => d,
            _ => {
                let d = now.saturating_duration_since(acquired);
                self.last = Some((acquired, now, d));
                d
            }
        }
    }

    /// A record started for the first time.
    fn waited(&mut self, acquired: Instant, now: Instant) {
        let d = self.since(acquired, now);
        self.wait_time.record(d);
    }

    /// A record's outcome is decided.
    fn settled(&mut self, acquired: Instant, now: Instant) {
        let d = self.since(acquired, now);
        self.outcome_time.record(d);
    }
}

/// How far the default prefetch may grow over itself with the outcome rate.
const PREFETCH_GROWTH: usize = 8;
/// How long the outcome rate is measured over before the prefetch follows it.
const RATE_WINDOW: Duration = Duration::from_millis(250);
/// How far ahead of its handlers the adapted prefetch reaches: a few fetch round trips of
/// outcomes, what keeps the slots busy while the next fetch is on its way. Every record
/// beyond that only waits in the queue: bench-process (64 slots of ~1.5 ms, issue 36, one
/// run) did 17.8k records/s with p50 acquisition -> outcome 32.8 ms at a quarter of the
/// bound (512 ahead), 17.6-18.1k with 16.4 ms at 10 ms, 17.6k with 8.2 ms at 5 ms.
const PREFETCH_AHEAD: Duration = Duration::from_millis(5);

impl Ledger {
    pub(crate) fn new(limits: Limits, renew: bool, metrics: Arc<ProcessorMetrics>) -> Ledger {
        let limits_prefetch = limits.prefetch;
        Ledger {
            backoff: Backoff::new(limits.backoff, limits.backoff_max),
            limits,
            metrics,
            entries: Vec::new(),
            free: Vec::new(),
            blocks: Blocks::default(),
            queued: VecDeque::new(),
            kept: VecDeque::new(),
            waiting: Vec::new(),
            running_records: 0,
            running_units: 0,
            renewing: HashMap::new(),
            acks: Vec::new(),
            whole: WholeBatches::default(),
            renew,
            lock: Duration::ZERO,
            next_renewal: None,
            stalled: false,
            closing: false,
            prefetch: limits_prefetch,
            settled: 0,
            rate_window: None,
            tally: Tally::default(),
        }
    }

    /// The lock duration, once the broker said it.
    pub(crate) fn set_lock(&mut self, lock: Option<Duration>) {
        if let Some(l) = lock {
            self.lock = l;
        }
    }

    /// The handler slots now (the batch form's pool changes while running).
    pub(crate) fn set_slots(&mut self, slots: usize) {
        if slots != self.limits.slots {
            self.limits.slots = slots;
            if self.limits.prefetch_follows_slots {
                self.limits.prefetch = slots.saturating_mul(self.limits.batch_size.max(1));
                self.prefetch = self.limits.prefetch;
            }
        }
    }

    /// Whether the cluster stopped taking RENEW (the driver learned it is v1 after all).
    pub(crate) fn set_renew(&mut self, renew: bool) {
        self.renew = renew;
    }

    fn max_unstarted(&self) -> Duration {
        self.limits
            .max_unstarted
            .unwrap_or(if self.lock.is_zero() { Duration::from_secs(5) } else { self.lock / 4 })
    }

    /// Takes a poll's answer: new records are queued, renewals' outcomes applied.
    pub(crate) fn received(&mut self, answer: PollAnswer, now: Instant) {
        for r in answer.renewed {
            let Some(id) = self.renewing.remove(&(r.tp, r.offset)) else { continue };
            let Some(e) = self.entries.get_mut(id).and_then(Option::as_mut) else { continue };
            e.renewing = false;
            match r.result {
                Ok(()) => {
                    e.lock_deadline = r.lock_deadline.or(e.lock_deadline);
                    if let Some(state) = self.blocks.state(e.block, e.index) {
                        state.set_lock(e.lock_deadline);
                    }
                    self.next_renewal = Some(now); // look again for its next renewal
                }
                Err(err) => {
                    tracing::debug!(offset = r.offset, error = %err, "renewal failed: the record's lock is gone");
                    e.lost = true;
                    ProcessorMetrics::add(&self.metrics.renewals_failed, 1);
                }
            }
        }
        if !answer.records.is_empty() {
            self.hold(answer.records, now);
        }
        if self.closing && !self.queued.is_empty() {
            // Records of a poll answered after the stop began: nothing starts them.
            return self.release_unstarted(now);
        }
        self.publish();
    }

    /// Queues a poll answer's records: the answer is one batch (`held.rs`), each record an
    /// entry naming its place there.
    fn hold(&mut self, records: Vec<Delivered>, now: Instant) {
        let batch = Block::new(records);
        let block = self.blocks.insert(Arc::clone(&batch));
        // The records of an answer come in runs of one acquired batch with one lock
        // deadline: what follows from those is worked out once per run.
        let mut last_key = None;
        let mut last_acquired: Option<(Option<Instant>, Instant)> = None;
        for (index, d) in batch.records.iter().enumerate() {
            let r = &d.record;
            // Acquired when its fetch left (its lock counts from then), not when the driver
            // handed it over: it may have waited in the driver's buffer, and the bound on
            // waiting unstarted is a bound on the lock it uses up.
            let acquired = match last_acquired {
                Some((deadline, acquired)) if deadline == r.lock_deadline => acquired,
                _ => {
                    let acquired = match r.lock_deadline {
                        Some(d) if !self.lock.is_zero() => d.checked_sub(self.lock).map_or(now, |t| t.min(now)),
                        _ => now,
                    };
                    last_acquired = Some((r.lock_deadline, acquired));
                    acquired
                }
            };
            let key = batch_key(d.tp, d.generation, d.batch);
            if last_key != Some(key) {
                self.whole.received(key, now);
                last_key = Some(key);
            }
            let entry = Entry {
                tp: d.tp,
                node: d.node,
                generation: d.generation,
                batch: d.batch,
                offset: r.offset,
                delivery_count: r.delivery_count,
                lock_deadline: r.lock_deadline,
                block,
                index,
                acquired,
                state: State::Queued,
                attempts: 0,
                retries: 0,
                split: self.limits.batch_size,
                renewing: false,
                lost: false,
            };
            let id = self.insert(entry);
            self.queued.push_back(id);
        }
    }

    fn insert(&mut self, e: Entry) -> usize {
        match self.free.pop() {
            Some(id) => {
                self.entries[id] = Some(e);
                id
            }
            None => {
                self.entries.push(Some(e));
                self.entries.len() - 1
            }
        }
    }

    /// Handler calls that may start now: retries that are due first, then queued records.
    pub(crate) fn start(&mut self, now: Instant) -> Vec<Unit> {
        let mut units = Vec::new();
        while self.running_units < self.limits.slots {
            let Some(ids) = self.next_unit(now) else { break };
            let mut deliveries = Vec::with_capacity(ids.len());
            // A call's records mostly share their lock deadline: its renewal is worked out
            // once per deadline, not per record.
            let mut last_deadline = None;
            for &id in &ids {
                let Some(e) = self.entries[id].as_mut() else { continue };
                let Some(held) = self.blocks.held(e.block, e.index) else { continue };
                e.state = State::Running;
                e.attempts = e.attempts.saturating_add(1);
                if e.attempts == 1 {
                    self.tally.waited(e.acquired, now);
                }
                deliveries.push(Delivery::new(held, e.attempts, e.retries, self.limits.max_retries));
                if let Some(d) = e.lock_deadline.filter(|d| last_deadline != Some(*d)) {
                    last_deadline = Some(d);
                    let due = d.checked_sub(self.lock / 2).unwrap_or(d);
                    self.next_renewal = Some(self.next_renewal.map_or(due, |t| t.min(due)));
                }
            }
            self.running_records += ids.len();
            self.running_units += 1;
            ProcessorMetrics::add(&self.metrics.started, 1);
            units.push(Unit { ids, deliveries });
        }
        if !units.is_empty() {
            self.publish();
        }
        units
    }

    fn next_unit(&mut self, now: Instant) -> Option<Vec<usize>> {
        // Due retries, in batches no larger than any member's split.
        let due: Vec<usize> = self
            .waiting
            .iter()
            .copied()
            .filter(|&id| matches!(self.entries[id].as_ref().map(|e| e.state), Some(State::Waiting { until }) if until <= now))
            .collect();
        if let Some(&first) = due.first() {
            let mut cap = self.split_of(first);
            let mut ids = vec![first];
            for &id in &due[1..] {
                let s = self.split_of(id);
                if ids.len() >= cap.min(s) {
                    continue;
                }
                cap = cap.min(s);
                ids.push(id);
            }
            self.waiting.retain(|id| !ids.contains(id));
            return Some(ids);
        }
        // Then the kept records (the oldest), then the queue, spread over the free slots: a
        // call that takes a whole batch while other slots stay idle would make its records
        // wait for each other (and a slow call would hold them all).
        let held = self.kept.len() + self.queued.len();
        let free = self.limits.slots.saturating_sub(self.running_units).max(1);
        let n = self.limits.batch_size.max(1).min(held.div_ceil(free));
        if n == 0 {
            return None;
        }
        let from_kept = n.min(self.kept.len());
        let mut ids: Vec<usize> = self.kept.drain(..from_kept).collect();
        ids.extend(self.queued.drain(..n - from_kept));
        Some(ids)
    }

    fn split_of(&self, id: usize) -> usize {
        self.entries[id].as_ref().map_or(1, |e| e.split.max(1))
    }

    /// A handler call ended: each record's outcome (missing ones: RELEASE).
    pub(crate) fn finished(&mut self, ids: &[usize], outcomes: &[Outcome], elapsed: Duration, now: Instant) {
        self.running_units = self.running_units.saturating_sub(1);
        self.running_records = self.running_records.saturating_sub(ids.len());
        self.settled = self.settled.saturating_add(ids.len() as u64);
        self.stalled = false;
        self.metrics.handler_time.record(elapsed);
        if outcomes.len() != ids.len() {
            tracing::warn!(records = ids.len(), outcomes = outcomes.len(), "a batch handler answered with a different number of outcomes than records; the missing ones are released");
        }
        let n = ids.len();
        // Consecutive records of one acquired batch given one outcome (a `put` that took its
        // whole batch) reach `whole_batches` as one run: one step there, not one a record.
        let mut run: Option<(Key, AckEntry)> = None;
        for (i, &id) in ids.iter().enumerate() {
            let kind = match outcomes.get(i).copied().unwrap_or(Outcome::Release) {
                Outcome::Accept => AckKind::Accept,
                Outcome::Release => AckKind::Release,
                // A dead letter reaches the ledger only where no destination took it (no
                // `dead_letter` set): unprocessable, so REJECT.
                Outcome::Reject | Outcome::DeadLetter => AckKind::Reject,
                Outcome::Retry => {
                    // In order: what was settled before it leaves before what it may settle.
                    self.hand_on(run.take(), now);
                    self.retry(id, n, now);
                    continue;
                }
            };
            self.settle_into(id, kind, now, &mut run);
        }
        self.hand_on(run, now);
        self.publish();
    }

    /// Hands a settled run of records on to `whole_batches` (which may hold it).
    fn hand_on(&mut self, run: Option<(Key, AckEntry)>, now: Instant) {
        if let Some((k, ack)) = run {
            self.whole.settled(k, ack, now, &mut self.acks);
        }
    }

    fn retry(&mut self, id: usize, batch: usize, now: Instant) {
        let (limits, renew) = (&self.limits, self.renew);
        // The crate's one backoff, un-jittered (a record's retries are counted on it).
        if self.closing {
            // Stopping: nothing starts it again; it goes back to the group now.
            return self.settle(id, AckKind::Release, now);
        }
        let Some(e) = self.entries[id].as_mut() else { return };
        if batch <= 1 {
            e.retries = e.retries.saturating_add(1);
            if e.retries > limits.max_retries {
                ProcessorMetrics::add(&self.metrics.exhausted, 1);
                let kind = limits.on_exhausted;
                return self.settle(id, kind, now);
            }
        }
        e.split = (batch / 2).max(1);
        // A record that failed alone backs off exponentially; one split off a failed batch
        // tries again after the base backoff (its batch-mates are what is being ruled out).
        let exp = if batch <= 1 { e.retries.saturating_sub(1) } else { 0 };
        let wait = self.backoff.delay_at(exp);
        let until = later(now, wait);
        // Without RENEW a record cannot be kept past its lock: give it back to the group
        // instead of trying after the broker took it away.
        if !renew && e.lock_deadline.is_some_and(|d| later(until, Duration::from_millis(100)) >= d) {
            return self.settle(id, AckKind::Release, now);
        }
        e.state = State::Waiting { until };
        self.waiting.push(id);
        ProcessorMetrics::add(&self.metrics.retried, 1);
        if let Some(d) = e.lock_deadline {
            let due = d.checked_sub(self.lock / 2).unwrap_or(d);
            self.next_renewal = Some(self.next_renewal.map_or(due, |t| t.min(due)));
        }
    }

    /// A record's final outcome: an acknowledgement to send, the record forgotten.
    fn settle(&mut self, id: usize, kind: AckKind, now: Instant) {
        let mut run = None;
        self.settle_into(id, kind, now, &mut run);
        self.hand_on(run, now);
    }

    /// [`settle`](Self::settle), its acknowledgement added to `run` when it continues it;
    /// otherwise `run` is handed on and the record starts the next one.
    fn settle_into(&mut self, id: usize, kind: AckKind, now: Instant, run: &mut Option<(Key, AckEntry)>) {
        let Some(e) = self.entries.get_mut(id).and_then(Option::take) else { return };
        self.free.push(id);
        self.blocks.settled(e.block);
        if e.renewing {
            self.renewing.remove(&(e.tp, e.offset));
        }
        if e.lost || e.lock_deadline.is_some_and(|d| now >= d) {
            // Sent all the same: the driver refuses it (never applied to a newer delivery)
            // and the commit callback hears why.
            self.tally.lapsed += 1;
        }
        let t = &mut self.tally;
        match kind {
            AckKind::Accept => t.accepted += 1,
            AckKind::Reject => t.rejected += 1,
            AckKind::Release | AckKind::ReleaseUnseen | AckKind::Gap | AckKind::Renew => t.released += 1,
        }
        t.settled(e.acquired, now);
        if let Some((k, r)) = run.as_mut() {
            if continues(k, r, &e, kind) {
                r.len += 1;
                return;
            }
        }
        let done = run.replace((batch_key(e.tp, e.generation, e.batch), ack_of(&e, kind)));
        self.hand_on(done, now);
    }

    /// RENEWs for the records running or waiting whose lock is half gone, and RELEASEs for
    /// those that waited unstarted too long. They join the acknowledgements to send.
    ///
    /// The bound applies to records waiting while no slot is free: the engine ticks before
    /// it starts, and a record a free slot is about to start is not sent back, however short
    /// the bound (zero too). Once every slot is busy, what waited past it goes back.
    pub(crate) fn tick(&mut self, now: Instant) {
        let bound = self.max_unstarted();
        self.adapt_prefetch(bound, now);
        let mut released = 0;
        // A free slot starts the queue's head this very turn: nothing of it goes back.
        let slot_free = !self.closing && self.running_units < self.limits.slots;
        while let Some(&id) = self.queued.front().filter(|_| !slot_free) {
            let Some(e) = self.entries[id].as_mut() else {
                self.queued.pop_front();
                continue;
            };
            if now < later(e.acquired, bound) {
                break;
            }
            self.queued.pop_front();
            if e.delivery_count > 1 {
                // It went back once already: keep it (see the module doc).
                e.state = State::Kept;
                self.kept.push_back(id);
                if let Some(d) = e.lock_deadline {
                    let due = d.checked_sub(self.lock / 2).unwrap_or(d);
                    self.next_renewal = Some(self.next_renewal.map_or(due, |t| t.min(due)));
                }
                ProcessorMetrics::add(&self.metrics.kept, 1);
                continue;
            }
            self.settle(id, AckKind::Release, now);
            released += 1;
        }
        // Without RENEW a kept record cannot outlive its lock: back before it lapses.
        while let Some(&id) = self.kept.front() {
            if self.renew || now < self.kept_until(id, now) {
                break;
            }
            self.kept.pop_front();
            self.settle(id, AckKind::Release, now);
            released += 1;
        }
        if released > 0 {
            self.stalled |= self.running_units >= self.limits.slots;
            tracing::debug!(released, after = ?bound, "records acquired but not started in time: released to the group");
            ProcessorMetrics::add(&self.metrics.released_unstarted, released);
            self.publish();
        }
        if self.next_renewal.is_some_and(|t| now >= t) {
            self.scan_renewals(now);
        }
        self.whole.flush_due(now, &mut self.acks);
    }

    /// The default prefetch follows the outcome rate: enough records ahead for what the
    /// handlers finish in [`PREFETCH_AHEAD`] (or a quarter of the unstarted bound, if
    /// shorter, so a record acquired ahead still starts well within it), never less than the
    /// configured prefetch and at most [`PREFETCH_GROWTH`] times it. A fixed prefetch of one record per slot starves fast
    /// handlers while the next fetch is on its way (bench-process, 64 slots of ~1.5 ms: the
    /// engine waited on fetches of at most 128 records); slow handlers keep the small one.
    fn adapt_prefetch(&mut self, bound: Duration, now: Instant) {
        if !self.limits.prefetch_adapts {
            return;
        }
        let Some((since, count)) = self.rate_window else {
            self.rate_window = Some((now, self.settled));
            return;
        };
        let elapsed = now.saturating_duration_since(since);
        if elapsed < RATE_WINDOW {
            return;
        }
        let rate = self.settled.saturating_sub(count) as f64 / elapsed.as_secs_f64();
        let base = self.limits.prefetch;
        let horizon = (bound / 4).min(PREFETCH_AHEAD);
        let ahead = (rate * horizon.as_secs_f64()).min(usize::MAX as f64) as usize;
        self.prefetch = ahead.clamp(base, base.saturating_mul(PREFETCH_GROWTH).max(base));
        self.rate_window = Some((now, self.settled));
    }

    fn scan_renewals(&mut self, now: Instant) {
        self.next_renewal = None;
        if !self.renew || self.lock.is_zero() {
            return;
        }
        let half = self.lock / 2;
        for (id, slot) in self.entries.iter_mut().enumerate() {
            let Some(e) = slot.as_mut() else { continue };
            if e.state == State::Queued || e.renewing || e.lost {
                continue;
            }
            let Some(deadline) = e.lock_deadline else { continue };
            let due = deadline.checked_sub(half).unwrap_or(deadline);
            if now < due {
                self.next_renewal = Some(self.next_renewal.map_or(due, |t| t.min(due)));
                continue;
            }
            if now >= deadline {
                e.lost = true; // too late: its lock is gone already
                continue;
            }
            e.renewing = true;
            self.renewing.insert((e.tp, e.offset), id);
            self.acks.push(ack_of(e, AckKind::Renew));
            ProcessorMetrics::add(&self.metrics.renewals, 1);
        }
    }

    /// Without RENEW: when a kept record goes back (three quarters of its lock gone).
    /// (`now` when its lock is unknown: it goes back at once.)
    fn kept_until(&self, id: usize, now: Instant) -> Instant {
        self.entries[id]
            .as_ref()
            .and_then(|e| e.lock_deadline)
            .map_or(now, |d| d.checked_sub(self.lock / 4).unwrap_or(d))
    }

    /// The acknowledgements decided since the last call.
    pub(crate) fn take_acks(&mut self) -> Vec<AckEntry> {
        std::mem::take(&mut self.acks)
    }

    /// How many more records to ask the driver for now (0: enough held).
    pub(crate) fn want(&self) -> usize {
        if self.stalled {
            return 0;
        }
        // Room for the free slots' calls and the prefetch. Records in a running call do not
        // count: a call that took fewer records than a batch leaves no room to start more
        // until it ends (they would only wait behind it, locked).
        let free = self.limits.slots.saturating_sub(self.running_units);
        let room = free.saturating_mul(self.limits.batch_size.max(1)).saturating_add(self.prefetch);
        room.saturating_sub(self.queued.len() + self.kept.len() + self.waiting.len())
    }

    /// Whether a poll is worth its round trip now: the engine would starve without one, or
    /// a good part of its room is free (one poll per freed record would cost a driver round
    /// trip per record).
    pub(crate) fn should_poll(&self) -> bool {
        let want = self.want();
        let cap = self.limits.slots.saturating_mul(self.limits.batch_size.max(1)).saturating_add(self.prefetch);
        want > 0 && (self.queued.is_empty() && self.kept.is_empty() || want >= (cap / 4).max(1))
    }

    /// Records held: queued, running and waiting.
    #[cfg(test)]
    pub(crate) fn held_records(&self) -> usize {
        self.queued.len() + self.kept.len() + self.running_records + self.waiting.len()
    }

    pub(crate) fn running_units(&self) -> usize {
        self.running_units
    }

    pub(crate) fn renewals_in_flight(&self) -> bool {
        !self.renewing.is_empty()
    }

    /// Shutting down: the queued and waiting records go back to the group.
    pub(crate) fn release_unstarted(&mut self, now: Instant) {
        self.closing = true;
        // Records waiting to be tried again reached a handler already: released, but not
        // counted as unstarted (the simulation's count of the engine's releases found them
        // in it).
        let n = (self.queued.len() + self.kept.len()) as u64;
        let ids: Vec<usize> = self.queued.drain(..).chain(self.kept.drain(..)).chain(self.waiting.drain(..)).collect();
        for id in ids {
            self.settle(id, AckKind::Release, now);
        }
        self.whole.flush_all(&mut self.acks);
        ProcessorMetrics::add(&self.metrics.released_unstarted, n);
        self.publish();
    }

    /// The next moment the ledger has something to decide: a retry due, a renewal due, the
    /// oldest queued record's bound.
    pub(crate) fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let bound = self.max_unstarted();
        let queued = self.queued.front().and_then(|&id| self.entries[id].as_ref()).map(|e| later(e.acquired, bound));
        // A retry due while every slot is busy waits for a call's end (an input), not for a
        // moment: as a deadline it would be past at once, and the shell would spin on it
        // (the engine did, before the simulation ran it).
        let slot_free = self.running_units < self.limits.slots;
        let retry = self
            .waiting
            .iter()
            .filter(|_| slot_free)
            .filter_map(|&id| match self.entries[id].as_ref()?.state {
                State::Waiting { until } => Some(until),
                _ => None,
            })
            .min();
        let renew = if self.renew && !self.lock.is_zero() { self.next_renewal } else { None };
        let kept = if self.renew { None } else { self.kept.front().map(|&id| self.kept_until(id, now)) };
        [queued, retry, renew, kept, self.whole.next_deadline()].into_iter().flatten().min()
    }

    /// Hands the step's figures to the shared metrics (every step that settles or starts a
    /// record ends here).
    fn publish(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        let (m, t) = (&self.metrics, &mut self.tally);
        for (counter, n) in [
            (&m.accepted, &mut t.accepted),
            (&m.released, &mut t.released),
            (&m.rejected, &mut t.rejected),
            (&m.lapsed, &mut t.lapsed),
        ] {
            if *n > 0 {
                ProcessorMetrics::add(counter, std::mem::take(n));
            }
        }
        m.outcome_time.add(&mut t.outcome_time);
        m.wait_time.add(&mut t.wait_time);
        self.metrics.in_flight.store(self.running_records as u64, Relaxed);
        self.metrics.queued.store((self.queued.len() + self.kept.len()) as u64, Relaxed);
    }
}

/// Whether the record `e`, settled as `kind`, is the next of the run `r` of batch `k`: what
/// `AckEntry::absorb` asks, read off the entry without building its acknowledgement (this
/// runs once a record), and the same acquired batch.
#[inline]
fn continues(k: &Key, r: &AckEntry, e: &Entry, kind: AckKind) -> bool {
    r.offset.checked_add(i64::from(r.len)) == Some(e.offset)
        && r.kind == kind
        && kind != AckKind::Renew
        && r.len < u32::MAX
        && (k.2, k.3) == e.batch
        && r.tp == e.tp
        && r.delivery_count == e.delivery_count
        && r.lock_deadline == e.lock_deadline
        && r.node == e.node
        && r.generation == e.generation
}

fn ack_of(e: &Entry, kind: AckKind) -> AckEntry {
    AckEntry {
        tp: e.tp,
        offset: e.offset,
        delivery_count: e.delivery_count,
        lock_deadline: e.lock_deadline,
        kind,
        node: e.node,
        generation: e.generation,
        len: 1,
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
