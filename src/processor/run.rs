//! The engine's loop: the only part that awaits. Each turn it lets the ledger decide (start
//! handlers for free slots, renew, release what waited too long), hands the decided
//! acknowledgements to the driver, keeps one poll under way for the room the ledger has, and
//! waits for whichever comes first: a poll's answer, a handler's end, the ledger's next
//! deadline, a signal.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::deadline::later;
use super::ledger::{Ledger, Limits, Unit};
use super::metrics::ProcessorMetrics;
use super::pool::{HandlerKey, Pool, PoolCommand};
use super::{BatchHandler, Delivery, Outcome, Report, Signal, Stop};
use crate::acquire_mode::AcquireMode;
use crate::consumer::driver::PollAnswer;
use crate::consumer::ShareConsumer;
use crate::error::{Error, Result};

pub(crate) type RecordFn = Arc<dyn Fn(Delivery) -> BoxFuture<'static, Outcome> + Send + Sync>;

pub(crate) enum Handler {
    PerRecord(RecordFn),
    /// The batch handlers, one per slot: a call moves its handler into the call's task and
    /// it comes back with the outcomes.
    Batches(Pool),
}

enum Done {
    Record(Outcome),
    Batch(std::result::Result<Vec<Outcome>, Stop>, HandlerKey, Box<dyn BatchHandler>),
}

/// How long a poll that waits for records stays under way before it is asked again (so the
/// loop sees renewal outcomes and the poll interval is kept).
const POLL_WAIT: Duration = Duration::from_millis(1000);
/// How often to ask for renewal outcomes while renewals are under way.
const RENEWAL_POLL: Duration = Duration::from_millis(50);
/// How often to poll (taking nothing) while every slot is busy: keeps `max.poll.interval.ms`
/// and collects renewal outcomes.
const KEEPALIVE_POLL: Duration = Duration::from_millis(1000);

struct PendingPoll {
    rx: oneshot::Receiver<Result<PollAnswer>>,
    expires: Instant,
}

pub(crate) struct Engine {
    consumer: Arc<ShareConsumer>,
    ledger: Ledger,
    metrics: Arc<ProcessorMetrics>,
    handler: Handler,
    signals: watch::Receiver<Signal>,
    signals_open: bool,
    tasks: JoinSet<(Done, Duration)>,
    /// Each call's records, and its batch handler's key.
    units: HashMap<tokio::task::Id, (Vec<usize>, Option<HandlerKey>)>,
    /// Changes to the batch handlers' pool while running (the sink's tasks).
    commands: Option<mpsc::UnboundedReceiver<PoolCommand>>,
    poll: Option<PendingPoll>,
    last_keepalive: Instant,
    poll_backoff: Duration,
    poll_retry_at: Option<Instant>,
    /// Set when the engine is stopping: the deadline for the running handlers.
    stopping: Option<Instant>,
    fatal: Option<Error>,
    aborted: u64,
    /// Time with no handler running, waiting for records.
    starved: Duration,
    /// Held while a handler runs: the driver must not take the engine for an application
    /// that stopped taking records (its keep-alive polls take none while every slot is
    /// busy) and give the records it buffered back to the group. The ledger decides what
    /// waits too long, with the records' lock time counted from their fetch.
    busy: Option<crate::consumer::BusyGuard>,
    /// The acquisition mode the user asked for (None: record_limit where the cluster has it).
    acquire: Option<AcquireMode>,
    /// The consumer's count of records released unseen, as far as the engine's metrics
    /// have taken it in (`count_consumer_releases`).
    unseen_counted: u64,
}

impl Engine {
    pub(crate) fn new(
        consumer: Arc<ShareConsumer>,
        limits: Limits,
        metrics: Arc<ProcessorMetrics>,
        handler: Handler,
        signals: watch::Receiver<Signal>,
        commands: Option<mpsc::UnboundedReceiver<PoolCommand>>,
        acquire: Option<AcquireMode>,
    ) -> Engine {
        let renew = consumer.renew_supported();
        let consumer_unseen = consumer.released_unseen();
        Engine {
            ledger: Ledger::new(limits, renew, metrics.clone()),
            consumer,
            metrics,
            handler,
            signals,
            signals_open: true,
            tasks: JoinSet::new(),
            units: HashMap::new(),
            commands,
            poll: None,
            last_keepalive: Instant::now(),
            poll_backoff: Duration::from_millis(100),
            poll_retry_at: None,
            stopping: None,
            fatal: None,
            aborted: 0,
            starved: Duration::ZERO,
            busy: None,
            acquire,
            unseen_counted: consumer_unseen,
        }
    }

    pub(crate) async fn run(mut self) -> Result<Report> {
        if !self.consumer.renew_supported() {
            tracing::warn!(
                group = self.consumer.config().group_id,
                "this cluster has no RENEW (ShareAcknowledge v2, Kafka 4.2+): a handler that runs longer than the acquisition lock loses its record to redelivery (counted as lock-lapses-total)"
            );
        }
        // Tells the driver at once that outcomes come from an engine (they must not linger
        // for a fetch: see `Command::Outcomes`), whichever way the first ones travel.
        if let Err(e) = self.consumer.raw_acks(Vec::new()) {
            tracing::debug!(error = %e, "the consumer is closed already");
        }
        self.choose_acquire_mode();
        let abort = loop {
            let now = Instant::now();
            if let Some(abort) = self.on_signal(now) {
                if abort {
                    break true;
                }
            }
            self.ledger.set_lock(self.consumer.acquisition_lock_timeout());
            self.ledger.set_renew(self.consumer.renew_supported());
            if let Handler::Batches(pool) = &self.handler {
                let (slots, retiring) = (pool.slots(), pool.retiring());
                self.ledger.set_slots(slots);
                if !retiring && slots == 0 && self.ledger.running_units() == 0 && self.fatal.is_none() {
                    self.fatal = Some(Error::InvalidArgument("the processor was given no batch handler to run".into()));
                    self.begin_stop(now, now);
                }
            }
            self.ledger.tick(now);
            if self.stopping.is_none() {
                for unit in self.ledger.start(now) {
                    self.spawn(unit);
                }
            } else if self.ledger.running_units() == 0 {
                break false;
            } else if self.stopping.is_some_and(|d| now >= d) {
                break true;
            }
            let working = self.ledger.running_units() > 0;
            if working != self.busy.is_some() {
                self.busy = working.then(|| self.consumer.busy_guard());
            }
            self.send(now);
            let idle = !working && self.stopping.is_none();
            self.wait(now).await;
            self.count_consumer_releases();
            if idle {
                self.starved += now.elapsed();
            }
        };
        self.finish(abort).await
    }

    /// Acquisition that follows free capacity: record_limit (each fetch acquires at most the
    /// room the engine asks for) where the cluster has it, unless the user chose otherwise.
    fn choose_acquire_mode(&mut self) {
        let supported = self.consumer.record_limit_supported();
        let configured = self.consumer.config().acquire_mode;
        // Without record_limit, batch_optimized fetches ask for the engine's room all the
        // same (the broker completes the log batch it starts, no more), unless the user
        // chose whole batches with the consumer's prefetch.
        let sized = self.acquire.is_none();
        let mode = match self.acquire {
            Some(AcquireMode::RecordLimit) if !supported => {
                let now = Instant::now();
                self.fatal = Some(Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, broker: None });
                self.begin_stop(now, now);
                return;
            }
            Some(mode) => mode,
            None if supported => AcquireMode::RecordLimit,
            None => {
                tracing::warn!(
                    group = self.consumer.config().group_id,
                    "this cluster has no record_limit acquisition (ShareFetch v2, Kafka 4.2+): the broker hands out whole log batches, so records beyond the free handler slots may wait and go back to the group unstarted (records-released-unstarted-total)"
                );
                configured
            }
        };
        if mode != configured || sized {
            if let Err(e) = self.consumer.raw_acquire_mode(mode, sized) {
                tracing::debug!(error = %e, "the consumer is closed already");
            }
        }
    }

    /// The records the consumer under the engine fetched and released without handing them
    /// over (its buffer at close, or while no handler ran and no poll waited) are releases
    /// on the engine's behalf: counted as its own unstarted ones, in the metrics and the
    /// report.
    fn count_consumer_releases(&mut self) {
        let total = self.consumer.released_unseen();
        let new = total.saturating_sub(self.unseen_counted);
        if new > 0 {
            self.unseen_counted = total;
            ProcessorMetrics::add(&self.metrics.released, new);
            ProcessorMetrics::add(&self.metrics.released_unstarted, new);
        }
    }

    /// Reads the signal; Some(true): abort now.
    fn on_signal(&mut self, now: Instant) -> Option<bool> {
        let signal = *self.signals.borrow_and_update();
        match signal {
            Signal::Run => None,
            Signal::Shutdown(deadline) => {
                self.begin_stop(deadline, now);
                Some(false)
            }
            Signal::Abort => Some(true),
        }
    }

    fn begin_stop(&mut self, deadline: Instant, now: Instant) {
        if self.stopping.is_some() {
            return;
        }
        tracing::debug!(running = self.ledger.running_units(), "processor stopping: releasing what has not started");
        self.stopping = Some(deadline);
        self.ledger.release_unstarted(now);
    }

    fn spawn(&mut self, unit: Unit) {
        let Unit { ids, deliveries } = unit;
        let handle = match &mut self.handler {
            Handler::PerRecord(f) => {
                let Some(d) = deliveries.into_iter().next() else { return };
                // With `otel`: the record's span, a child of its producer's, around the whole
                // call (the handler's synchronous part too), entered on every poll of it.
                #[cfg(feature = "otel")]
                let span = crate::trace::process_span(d.record(), Some(&self.consumer.config().group_id));
                #[cfg(feature = "otel")]
                let fut = tracing::Instrument::instrument(span.in_scope(|| f(d)), span);
                #[cfg(not(feature = "otel"))]
                let fut = f(d);
                self.tasks.spawn(async move {
                    let started = Instant::now();
                    let outcome = fut.await;
                    (Done::Record(outcome), started.elapsed())
                })
            }
            Handler::Batches(pool) => {
                let Some((key, mut h)) = pool.take() else {
                    // Cannot be: the ledger starts no more calls than the pool has slots.
                    let now = Instant::now();
                    self.ledger.finished(&ids, &[], Duration::ZERO, now);
                    return;
                };
                // With `otel`: one span for the call, linked to each record's producer span.
                #[cfg(feature = "otel")]
                let span =
                    crate::trace::batch_span(deliveries.iter().map(|d| d.record()), &self.consumer.config().group_id);
                let call = async move {
                    let started = Instant::now();
                    let out = h.handle(&deliveries).await;
                    (Done::Batch(out, key, h), started.elapsed())
                };
                #[cfg(feature = "otel")]
                let call = tracing::Instrument::instrument(call, span);
                let handle = self.tasks.spawn(call);
                self.units.insert(handle.id(), (ids, Some(key)));
                return;
            }
        };
        self.units.insert(handle.id(), (ids, None));
    }

    /// Hands the decided acknowledgements to the driver, and keeps a poll under way.
    fn send(&mut self, now: Instant) {
        let mut acks = self.ledger.take_acks();
        if self.poll.is_none() && self.fatal.is_none() {
            let wants = self.stopping.is_none() && self.ledger.should_poll();
            let backing_off = self.poll_retry_at.is_some_and(|t| now < t);
            let renewals = self.ledger.renewals_in_flight();
            let keepalive = if renewals { RENEWAL_POLL } else { KEEPALIVE_POLL };
            let result = if wants && !backing_off {
                // While renewals are under way the poll must come back at once: a waiting
                // poll is answered only when records arrive, and their outcomes with it.
                let wait = !renewals;
                let expires = later(now, if wait { POLL_WAIT } else { RENEWAL_POLL });
                Some((self.consumer.raw_poll(self.ledger.want(), wait, false, std::mem::take(&mut acks)), expires))
            } else if now >= later(self.last_keepalive, keepalive) && !backing_off {
                self.last_keepalive = now;
                Some((self.consumer.raw_poll(0, false, true, std::mem::take(&mut acks)), later(now, RENEWAL_POLL)))
            } else {
                None
            };
            match result {
                Some((Ok(rx), expires)) => self.poll = Some(PendingPoll { rx, expires }),
                Some((Err(e), _)) => self.poll_failed(e, now),
                None => {}
            }
        }
        if !acks.is_empty() {
            if let Err(e) = self.consumer.raw_acks(acks) {
                tracing::debug!(error = %e, "acknowledgements not handed to the consumer");
            }
        }
    }

    fn poll_failed(&mut self, e: Error, now: Instant) {
        if e.is_retriable() {
            tracing::warn!(error = %e, "processor: poll failed, retrying");
            self.poll_retry_at = Some(later(now, self.poll_backoff));
            self.poll_backoff = (self.poll_backoff * 2).min(Duration::from_secs(10));
            return;
        }
        tracing::error!(error = %e, "processor: the consumer failed; stopping");
        if self.fatal.is_none() {
            self.fatal = Some(e);
        }
        self.begin_stop(later(now, Duration::from_secs(10)), now);
    }

    async fn wait(&mut self, now: Instant) {
        let mut deadline = later(now, KEEPALIVE_POLL);
        for t in [self.ledger.next_deadline(), self.poll.as_ref().map(|p| p.expires), self.stopping, self.poll_retry_at]
            .into_iter()
            .flatten()
        {
            deadline = deadline.min(t);
        }
        if self.poll.is_none() && self.ledger.renewals_in_flight() {
            deadline = deadline.min(later(self.last_keepalive, RENEWAL_POLL));
        }
        let deadline = deadline.max(now);
        let poll = async {
            match self.poll.as_mut() {
                Some(p) => (&mut p.rx).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            changed = self.signals.changed(), if self.signals_open => {
                if changed.is_err() {
                    // Every handle is gone without a word: stop as a drop of `Running` would.
                    self.signals_open = false;
                    let now = Instant::now();
                    self.begin_stop(later(now, Duration::from_secs(30)), now);
                }
            }
            Some(done) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                self.on_done(done);
                // Take every other handler that ended meanwhile, in one turn.
                while let Some(done) = self.tasks.try_join_next_with_id() {
                    self.on_done(done);
                }
            }
            Some(cmd) = recv(&mut self.commands) => {
                if let Handler::Batches(pool) = &mut self.handler {
                    pool.command(cmd);
                }
            }
            answer = poll => {
                self.poll = None;
                self.on_answer(answer.unwrap_or(Ok(PollAnswer::default())));
            }
            _ = tokio::time::sleep_until(deadline.into()) => {
                if self.poll.as_ref().is_some_and(|p| Instant::now() >= p.expires) {
                    if let Some(mut p) = self.poll.take() {
                        p.rx.close();
                        if let Ok(answer) = p.rx.try_recv() {
                            self.on_answer(answer);
                        }
                    }
                }
            }
        }
    }

    fn on_answer(&mut self, answer: Result<PollAnswer>) {
        let now = Instant::now();
        match answer {
            Ok(answer) => {
                self.poll_backoff = Duration::from_millis(100);
                self.poll_retry_at = None;
                self.ledger.received(answer, now);
            }
            Err(e) => self.poll_failed(e, now),
        }
        self.consumer.run_callbacks();
    }

    fn on_done(&mut self, done: std::result::Result<(tokio::task::Id, (Done, Duration)), tokio::task::JoinError>) {
        let now = Instant::now();
        match done {
            Ok((id, (done, elapsed))) => {
                let (ids, _) = self.units.remove(&id).unwrap_or_default();
                match done {
                    Done::Record(outcome) => self.ledger.finished(&ids, &[outcome], elapsed, now),
                    Done::Batch(out, key, h) => {
                        let Handler::Batches(pool) = &mut self.handler else { return };
                        match out {
                            Ok(outcomes) => {
                                pool.returned(key, h);
                                self.ledger.finished(&ids, &outcomes, elapsed, now);
                            }
                            Err(Stop(reason)) if pool.retiring() => {
                                // Its records go back; the other handlers go on.
                                drop(h);
                                pool.retire(key, reason);
                                self.ledger.finished(&ids, &[], elapsed, now);
                            }
                            Err(Stop(reason)) => {
                                pool.returned(key, h);
                                self.ledger.finished(&ids, &[], elapsed, now);
                                if self.fatal.is_none() {
                                    self.fatal = Some(Error::ProcessorStopped { reason });
                                }
                                self.begin_stop(now, now);
                            }
                        }
                    }
                }
            }
            Err(e) => {
                let (ids, key) = self.units.remove(&e.id()).unwrap_or_default();
                if e.is_panic() {
                    ProcessorMetrics::add(&self.metrics.handler_panics, 1);
                    tracing::error!(records = ids.len(), "a handler panicked: its records are released");
                } else {
                    self.aborted += ids.len() as u64;
                }
                self.ledger.finished(&ids, &[], Duration::ZERO, now);
                if let (Handler::Batches(pool), Some(key)) = (&mut self.handler, key) {
                    // The batch handler went down with its task: it is out of the pool.
                    let why = if e.is_panic() { "the batch handler panicked" } else { "the batch handler was aborted" };
                    let retiring = pool.retiring();
                    pool.retire(key, why.into());
                    if e.is_panic() && !retiring && self.fatal.is_none() {
                        self.fatal = Some(Error::ProcessorStopped { reason: why.into() });
                        self.begin_stop(now, now);
                    }
                }
            }
        }
    }

    /// Ends the run: aborts what still runs (if told to, or out of time), sends the last
    /// outcomes with the close (which releases whatever else the consumer holds).
    async fn finish(mut self, abort: bool) -> Result<Report> {
        let now = Instant::now();
        self.begin_stop(now, now);
        if abort && !self.tasks.is_empty() {
            self.tasks.abort_all();
            while let Some(done) = self.tasks.join_next_with_id().await {
                self.on_done(done);
            }
        }
        // A poll under way may hold records handed over: take them, to release them.
        if let Some(mut p) = self.poll.take() {
            p.rx.close();
            if let Ok(Ok(answer)) = p.rx.try_recv() {
                self.ledger.received(answer, now);
            }
        }
        self.ledger.release_unstarted(now);
        let acks = self.ledger.take_acks();
        let closed = self.consumer.raw_close(acks, Duration::from_secs(10)).await;
        self.count_consumer_releases();
        let m = &self.metrics;
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let report = Report {
            accepted: get(&m.accepted),
            released: get(&m.released),
            rejected: get(&m.rejected),
            released_unstarted: get(&m.released_unstarted),
            renewals: get(&m.renewals),
            lapses: get(&m.lapsed),
            aborted: self.aborted,
            starved: self.starved,
        };
        if let Some(e) = self.fatal {
            return Err(e);
        }
        closed.map(|()| report)
    }
}

/// The next pool command (pending forever without a channel, or once it closed).
async fn recv(commands: &mut Option<mpsc::UnboundedReceiver<PoolCommand>>) -> Option<PoolCommand> {
    let Some(rx) = commands.as_mut() else { return std::future::pending().await };
    match rx.recv().await {
        Some(cmd) => Some(cmd),
        None => {
            *commands = None;
            std::future::pending().await
        }
    }
}
