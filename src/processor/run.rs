//! The engine's shell: the only part that awaits. Every decision is the core's
//! (`core/`, sans-IO); the shell feeds it what happened (a poll's answer, a handler's end, a
//! signal, a pool command, what the consumer says), performs the [`Event`]s it emits on the
//! consumer and the handlers' tasks, and sleeps until the core's next timer or input.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::core::{EngineCore, Event, Finished, UnitId};
use super::ledger::Limits;
use super::metrics::ProcessorMetrics;
use super::pool::{HandlerKey, Pool, PoolCommand};
use super::{BatchHandler, Delivery, Outcome, Report, Signal, Stop};
use crate::acquire_mode::AcquireMode;
use crate::consumer::driver::{AckEntry, PollAnswer};
use crate::consumer::ShareConsumer;
use crate::error::Result;

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

/// How long the close may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct Engine {
    core: EngineCore,
    consumer: Arc<ShareConsumer>,
    handler: Handler,
    signals: watch::Receiver<Signal>,
    signals_open: bool,
    tasks: JoinSet<(Done, Duration)>,
    /// Each call's unit, and its batch handler's key.
    units: HashMap<tokio::task::Id, (UnitId, Option<HandlerKey>)>,
    /// Changes to the batch handlers' pool while running (the sink's tasks).
    commands: Option<mpsc::UnboundedReceiver<PoolCommand>>,
    poll: Option<oneshot::Receiver<Result<PollAnswer>>>,
    /// Held while a handler runs (`Event::Busy`).
    busy: Option<crate::consumer::BusyGuard>,
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
        let batch = matches!(handler, Handler::Batches(_));
        let core = EngineCore::new(
            limits,
            metrics,
            batch,
            acquire,
            consumer.config().group_id.clone(),
            consumer.renew_supported(),
            consumer.released_unseen(),
            Instant::now(),
        );
        Engine {
            core,
            consumer,
            handler,
            signals,
            signals_open: true,
            tasks: JoinSet::new(),
            units: HashMap::new(),
            commands,
            poll: None,
            busy: None,
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
        let configured = self.consumer.config().acquire_mode;
        self.core.handle_start(self.consumer.record_limit_supported(), configured, Instant::now());
        let mut timed_out = false;
        let acks = loop {
            let now = Instant::now();
            self.feed_state(now);
            if std::mem::take(&mut timed_out) {
                self.core.handle_timeout(now);
            } else {
                self.core.drive(now);
            }
            let mut fed = false;
            let mut close = None;
            while let Some(event) = self.core.poll_event() {
                match event {
                    Event::Close(acks) => close = Some(acks),
                    event => fed |= self.perform(event, now),
                }
            }
            if let Some(acks) = close {
                break acks;
            }
            if !fed {
                timed_out = self.wait(now).await;
            }
        };
        let closed = self.consumer.raw_close(acks, CLOSE_TIMEOUT).await;
        self.core.handle_closed(self.consumer.released_unseen());
        self.core.into_result(closed)
    }

    /// What the core reads each turn: the signal, the consumer's state, the pool's slots.
    fn feed_state(&mut self, now: Instant) {
        match *self.signals.borrow_and_update() {
            Signal::Run => {}
            Signal::Shutdown(deadline) => self.core.handle_shutdown(deadline, now),
            Signal::Abort => self.core.handle_abort(now),
        }
        let c = &self.consumer;
        self.core.handle_consumer(c.acquisition_lock_timeout(), c.renew_supported(), c.released_unseen());
        if let Handler::Batches(pool) = &self.handler {
            self.core.handle_slots(pool.slots(), pool.retiring(), now);
        }
    }

    /// Performs one event; true if that fed the core an input (it must be driven again).
    fn perform(&mut self, event: Event, now: Instant) -> bool {
        match event {
            Event::AcquireMode { mode, sized } => {
                if let Err(e) = self.consumer.raw_acquire_mode(mode, sized) {
                    tracing::debug!(error = %e, "the consumer is closed already");
                }
            }
            Event::Start { unit, deliveries } => return self.spawn(unit, deliveries, now),
            Event::Poll { max, wait, renewing, acks } => match self.consumer.raw_poll(max, wait, renewing, acks) {
                Ok(rx) => self.poll = Some(rx),
                Err(e) => {
                    self.core.handle_poll_failed(e, now);
                    return true;
                }
            },
            Event::Acknowledge(acks) => self.acknowledge(acks),
            Event::ExpirePoll => {
                let answer = self.poll.take().and_then(|mut rx| {
                    rx.close();
                    rx.try_recv().ok()
                });
                match answer {
                    Some(answer) => self.answered(answer, now),
                    None => self.core.handle_poll_expired(),
                }
                return true;
            }
            Event::Busy(working) => {
                if working != self.busy.is_some() {
                    self.busy = working.then(|| self.consumer.busy_guard());
                }
            }
            Event::AbortHandlers => self.tasks.abort_all(),
            // Taken by `run`.
            Event::Close(acks) => self.acknowledge(acks),
        }
        false
    }

    fn acknowledge(&self, acks: Vec<AckEntry>) {
        if let Err(e) = self.consumer.raw_acks(acks) {
            tracing::debug!(error = %e, "acknowledgements not handed to the consumer");
        }
    }

    /// Starts a handler call on its own task; true if it could not start (the core was told).
    fn spawn(&mut self, unit: UnitId, deliveries: Vec<Delivery>, now: Instant) -> bool {
        let handle = match &mut self.handler {
            Handler::PerRecord(f) => {
                let Some(d) = deliveries.into_iter().next() else {
                    self.core.handle_finished(unit, Finished::Outcomes(Vec::new()), Duration::ZERO, now);
                    return true;
                };
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
                    // Cannot be: the core starts no more calls than the pool has slots.
                    self.core.handle_finished(unit, Finished::Outcomes(Vec::new()), Duration::ZERO, now);
                    return true;
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
                self.units.insert(handle.id(), (unit, Some(key)));
                return false;
            }
        };
        self.units.insert(handle.id(), (unit, None));
        false
    }

    /// Waits for the next input and feeds it; true if it was the core's timer.
    async fn wait(&mut self, now: Instant) -> bool {
        let deadline = self.core.next_timeout(now).unwrap_or(now);
        let poll = async {
            match self.poll.as_mut() {
                Some(rx) => rx.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            changed = self.signals.changed(), if self.signals_open => {
                if changed.is_err() {
                    self.signals_open = false;
                    self.core.handle_orphaned(Instant::now());
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
                // A poll whose sender dropped without an answer answered nothing.
                self.answered(answer.unwrap_or(Ok(PollAnswer::default())), Instant::now());
            }
            _ = tokio::time::sleep_until(deadline.into()) => return true,
        }
        false
    }

    fn answered(&mut self, answer: Result<PollAnswer>, now: Instant) {
        self.core.handle_poll_answer(answer, now);
        self.consumer.run_callbacks();
    }

    fn on_done(&mut self, done: std::result::Result<(tokio::task::Id, (Done, Duration)), tokio::task::JoinError>) {
        let now = Instant::now();
        match done {
            Ok((id, (done, elapsed))) => {
                let Some((unit, _)) = self.units.remove(&id) else { return };
                let finished = match done {
                    Done::Record(outcome) => Finished::One(outcome),
                    Done::Batch(out, key, mut h) => {
                        let Handler::Batches(pool) = &mut self.handler else { return };
                        match out {
                            Ok(outcomes) => {
                                pool.returned(key, h);
                                Finished::Outcomes(outcomes)
                            }
                            Err(Stop(reason)) if pool.retiring() => {
                                // Its records go back but for those it finished; the other
                                // handlers go on.
                                let done = h.outcomes_at_stop();
                                drop(h);
                                pool.retire(key, reason.clone());
                                Finished::Stopped(reason, done)
                            }
                            Err(Stop(reason)) => {
                                let done = h.outcomes_at_stop();
                                pool.returned(key, h);
                                Finished::Stopped(reason, done)
                            }
                        }
                    }
                };
                self.core.handle_finished(unit, finished, elapsed, now);
            }
            Err(e) => {
                let Some((unit, key)) = self.units.remove(&e.id()) else { return };
                if let (Handler::Batches(pool), Some(key)) = (&mut self.handler, key) {
                    // The batch handler went down with its task: it is out of the pool.
                    let why = if e.is_panic() { "the batch handler panicked" } else { "the batch handler was aborted" };
                    pool.retire(key, why.into());
                }
                let finished = if e.is_panic() { Finished::Panicked } else { Finished::Aborted };
                self.core.handle_finished(unit, finished, Duration::ZERO, now);
            }
        }
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
