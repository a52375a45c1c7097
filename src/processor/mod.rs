//! A processing engine on the share consumer: one consumer feeding many concurrent
//! handlers, as a queue worker pool is used.
//!
//! ```rust,no_run
//! use std::time::Duration;
//! use kafka_share::processor::{Delivery, Outcome, Processor, ProcessorConfig};
//! use kafka_share::ShareConsumerConfig;
//!
//! # async fn run() -> kafka_share::Result<()> {
//! let consumer = ShareConsumerConfig::new("127.0.0.1:19092", "my-group");
//! let processor = Processor::connect(consumer, ProcessorConfig::new().concurrency(64)).await?;
//! processor.consumer().subscribe(["orders"])?;
//! let running = processor.run(|delivery: Delivery| async move {
//!     match delivery.record().value_str() {
//!         Some(_order) => Outcome::Accept, // your processing here
//!         None if delivery.total_attempts() < 3 => Outcome::Retry,
//!         None => Outcome::Reject,
//!     }
//! });
//! tokio::signal::ctrl_c().await.ok();
//! let report = running.close(Duration::from_secs(30)).await?;
//! println!("{report:?}");
//! # Ok(()) }
//! ```
//!
//! # Behaviour
//! - **Each record's outcome is its own.** A handler answers [`Outcome::Accept`],
//!   [`Release`](Outcome::Release), [`Reject`](Outcome::Reject) or [`Retry`](Outcome::Retry)
//!   (kept here under its lock, tried again after a backoff, at most
//!   [`max_retries`](ProcessorConfig::max_retries) times, then
//!   [`on_exhausted`](ProcessorConfig::on_exhausted)). The outcome leaves at once (on the next
//!   fetch to its broker, or alone within 100 ms): no record waits for its batch-mates, and
//!   there is no poll barrier as in explicit mode.
//! - **Acquisition follows free capacity.** The engine asks for records only to fill its free
//!   handler slots plus a bounded [`prefetch`](ProcessorConfig::prefetch), so a slow handler
//!   holds its own record and nothing else. On Kafka 4.2+ the broker acquires exactly that
//!   many for the per-record form (`share.acquire.mode=record_limit` under the engine,
//!   whatever the consumer's config says: [`ProcessorConfig::acquire_mode`]; the batch
//!   forms take whole log batches unless told otherwise); on 4.1, which has no record_limit,
//!   each fetch asks for the engine's room too, but the broker completes every log batch it
//!   starts, so a batch larger than the free room may leave records waiting (the engine
//!   warns at start). A record acquired but not started within
//!   [`max_unstarted`](ProcessorConfig::max_unstarted) (a quarter of the lock by default)
//!   because every slot stayed busy goes back to the group (RELEASE) at once instead of
//!   lapsing here (never while a slot is free to start it), **once**: a record that
//!   comes back with a delivery count above 1 is kept past the bound (renewed while it
//!   waits, and started before newer records), because each release of a record never
//!   processed uses up one of its `share.delivery.count.limit` deliveries, and a record
//!   bounced that often would be archived without ever reaching a handler.
//! - **Dead letters, client-side.** With a [`dead_letter`](ProcessorConfig::dead_letter)
//!   destination, a record the handler gives up on ([`Outcome::DeadLetter`],
//!   [`Delivery::dead_letter`]), one past its retries under
//!   `on_exhausted(Outcome::DeadLetter)`, or one that fails to decode
//!   ([`run_decoded`](Processor::run_decoded)) is copied to a topic with the sink runtime's
//!   error headers, the copy awaited, then ACCEPTed; a failed copy RELEASEs it (never lost).
//!   The batch forms do the same for each record a [`BatchHandler`] call answers so, the
//!   call ending once its copies are answered. It works on any Kafka with share groups
//!   (4.1-4.3 have no broker-side DLQ).
//! - **Automatic lock renewal.** A record whose handler (or retry wait) outlives half of its
//!   acquisition lock is RENEWed (Kafka 4.2+, ShareAcknowledge v2), just that record, without
//!   blocking the others; [`Delivery::lock_deadline`] moves with it. On a 4.1 cluster the
//!   engine warns at start that long handlers lose their locks, and counts the lapses
//!   (`lock-lapses-total`). An outcome after a lost lock is reported through the consumer's
//!   acknowledgement commit callback as [`Error::LockExpired`],
//!   never applied to a newer delivery of the record.
//! - **Graceful close** ([`Running::close`], the crate's one stop verb, as
//!   [`ShareConsumer::close`](crate::ShareConsumer::close)): stop acquiring, give back every
//!   record not started, let running handlers finish within the deadline, send their
//!   outcomes, close the consumer. A second [`ProcessorHandle::close`] (or the deadline)
//!   aborts the handlers still running ([`ProcessorHandle::abort`] at once); the close then
//!   releases their records ([`ProcessorHandle::close_on`] does both on a first and a second
//!   signal). Cancel-safe: dropping the `close` future leaves the close running in the
//!   background.
//! - **Batches** ([`Processor::run_batches`], for sinks): one [`BatchHandler`] call at a time
//!   per engine, with the next batch already acquired while it runs;
//!   [`Processor::run_batch_pool`]: a call per idle handler, the records spread over them. A batch whose records
//!   come back as `Retry` is split: each record goes next into a batch of at most half the
//!   size, so the records that fail on their own are found and the others get through.
//! - Metrics: [`Running::metrics`] or [`ProcessorHandle::metrics`] (readable during and
//!   after the shutdown), the consumer's metrics plus the group
//!   [`PROCESSOR`]: records in flight and queued, handler time,
//!   acquisition-to-start and acquisition-to-outcome time (avg, max, p50, p99 in ms, and
//!   as the histograms `handler-time`, `wait-time`, `outcome-time`:
//!   [`MetricsSnapshot::histogram`]), renewals, releases of unstarted
//!   records (`records-released-unstarted-total`) and those kept instead
//!   (`records-kept-unstarted-total`), lapses, dead letters (`records-dead-lettered-total`,
//!   `dead-letter-failures-total`).
//!
//! The public [`ShareConsumer::poll`](crate::ShareConsumer::poll) and its Java semantics are
//! untouched: the engine drives the consumer's driver directly and the two are not mixed on
//! one consumer (a `Processor` owns its consumer).

pub(crate) mod core;
mod dead_letter;
mod deadline;
mod held;
pub(crate) mod ledger;
pub(crate) mod metrics;
mod pool;
mod properties;
mod run;
mod whole_batches;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};

use crate::acquire_mode::AcquireMode;
use crate::consumer::{ConsumerRecord, MetricsSnapshot, ShareConsumer, ShareConsumerConfig};
use crate::decode::{Decode, DecodeError};
use crate::error::{Error, Result};
use crate::share::acks::AckKind;
use deadline::later;
pub(crate) use held::Held;

pub use crate::dead_letter::ERROR_HEADER_PREFIX;
pub use dead_letter::DeadLetter;
pub use metrics::PROCESSOR;
#[cfg(feature = "sink")]
pub(crate) use pool::{PoolControl, Retired};

/// What becomes of one record, as its handler decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Processed: the broker marks it done.
    Accept,
    /// Give it back now: the broker delivers it again (to any member), delivery count + 1.
    Release,
    /// Unprocessable: the broker archives it, never delivered again.
    Reject,
    /// Try again later, here: the record stays held (its lock renewed), and the handler is
    /// called again after a backoff. The delivery count does not change.
    Retry,
    /// Unprocessable, and kept: copied to the engine's
    /// [`dead_letter`](ProcessorConfig::dead_letter) topic, then ACCEPTed (RELEASEd if the
    /// copy fails, so it is never lost). [`Delivery::dead_letter`] gives the reason the copy's
    /// headers carry. Without a destination it is a REJECT.
    DeadLetter,
}

/// One record handed to a handler, with what the handler may want to know of its lock.
#[derive(Debug, Clone)]
///
/// # Which counter means what
/// | counter | counts | starts | grows on | restarts |
/// |---|---|---|---|---|
/// | [`delivery_count`](Self::delivery_count) | the broker's deliveries of the record (to any member) | 1 | each redelivery (a RELEASE, a lost lock or member) | never |
/// | [`attempt`](Self::attempt) | handler calls within this delivery | 1 | each call (a `Retry` brings the next) | at 1 on each redelivery |
/// | [`retries`](Self::retries) | `Retry` outcomes within this delivery (per-record form) | 0 | each `Retry` the record got alone | at 0 on each redelivery |
/// | [`total_attempts`](Self::total_attempts) | handler calls in all, across deliveries | 1 | each call and each redelivery | never |
///
/// To give up after `n` tries in all, compare [`total_attempts`](Self::total_attempts), not
/// `attempt` (which restarts when the engine's own `on_exhausted` RELEASE brings the record
/// back): `if d.total_attempts() >= n { Outcome::Reject } else { Outcome::Retry }`.
pub struct Delivery {
    /// The record, in its poll answer's batch (`held.rs`): shared with the engine, which
    /// updates its lock deadline on renewal.
    held: Held,
    attempt: u32,
    retries: u32,
    /// The engine's `max_retries`: how many calls an earlier delivery is counted as.
    max_retries: u32,
}

impl Delivery {
    pub(crate) fn new(held: Held, attempt: u32, retries: u32, max_retries: u32) -> Delivery {
        Delivery { held, attempt, retries, max_retries }
    }

    /// The record.
    pub fn record(&self) -> &ConsumerRecord {
        self.held.record()
    }

    /// The record, by value (a copy: the engine holds it until its outcome is settled; the
    /// copy shares the key and value buffers).
    pub fn into_record(self) -> ConsumerRecord {
        self.held.into_record()
    }

    /// How often the broker has delivered it (1 the first time), to this member or any
    /// other: a redelivery follows a RELEASE (the handler's, `on_exhausted`'s, a shutdown's)
    /// or a lost lock or member. The broker archives the record after
    /// `share.delivery.count.limit` deliveries.
    pub fn delivery_count(&self) -> i16 {
        self.held.record().delivery_count
    }

    /// This handler call's number **within this delivery** (1 the first time; `Retry` adds
    /// one). It restarts at 1 when the record is delivered again: to cap tries in all, use
    /// [`total_attempts`](Self::total_attempts).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Handler calls in all, across deliveries, counting this one:
    /// `(delivery_count - 1) × (max_retries + 1) + attempt`.
    ///
    /// The broker counts deliveries, not calls, so each earlier delivery counts as the
    /// calls the engine gives a record before [`on_exhausted`](ProcessorConfig::on_exhausted)
    /// RELEASEs it (`max_retries + 1`). That is exact when the redeliveries came from used-up
    /// retries (the usual way with `Retry` and the default `on_exhausted`), and more than the
    /// truth when an earlier delivery ended sooner (released unstarted or by the handler,
    /// a lost lock or member). So `if d.total_attempts() >= n { Outcome::Reject }` never lets
    /// a record be tried more than `n` times, given every member runs with the same
    /// `max_retries` in the per-record form (a batch call's `Retry` is not counted against
    /// `max_retries`). Saturates at `u32::MAX`.
    pub fn total_attempts(&self) -> u32 {
        let earlier = u32::try_from(self.delivery_count().saturating_sub(1)).unwrap_or(0);
        earlier.saturating_mul(self.max_retries.saturating_add(1)).saturating_add(self.attempt)
    }

    /// `Retry` outcomes this record got **within this delivery** while handled alone (in the
    /// batch form, failures inside a larger batch are not counted: they may have been a
    /// batch-mate's). Past [`max_retries`](ProcessorConfig::max_retries) the record goes to
    /// [`on_exhausted`](ProcessorConfig::on_exhausted). Restarts at 0 on a redelivery.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// [`Outcome::DeadLetter`] with the reason the dead-letter copy carries
    /// (`__connect.errors.exception.message`): `return delivery.dead_letter("no such customer")`.
    pub fn dead_letter(&self, reason: impl std::fmt::Display) -> Outcome {
        self.set_failure(dead_letter::Failure::handler(reason.to_string()));
        Outcome::DeadLetter
    }

    /// The record decoded with `decoder` (see [`crate::decode`]); a failure names the record.
    /// `Err(e) => return delivery.dead_letter(&e)` sends it to the dead-letter topic.
    pub fn decode<D: Decode + ?Sized>(&self, decoder: &D) -> std::result::Result<D::Output, DecodeError> {
        self.record().decode(decoder)
    }

    fn set_failure(&self, failure: dead_letter::Failure) {
        self.held.state().set_failure(failure);
    }

    pub(crate) fn take_failure(&self) -> Option<dead_letter::Failure> {
        self.held.state().take_failure()
    }

    /// Until when the record is surely locked for this consumer (conservative: counted from
    /// when the fetch left); moves on when the engine renews it. None before the broker said
    /// how long its locks last.
    pub fn lock_deadline(&self) -> Option<Instant> {
        self.held.state().lock_deadline()
    }
}

/// A per-record handler: what [`Processor::run`] calls for each record, up to
/// [`concurrency`](ProcessorConfig::concurrency) calls at once.
///
/// A closure `Fn(Delivery) -> impl Future<Output = Outcome>` is one already. Implement it on a
/// service's own type when the handler has state (clients, caches, settings): the engine
/// holds the value once and lends it to every call by reference, so nothing is cloned per
/// record (a closure would have to clone its captures into each call's future).
///
/// ```rust,no_run
/// use kafka_share::processor::{Delivery, Handler, Outcome, Processor};
///
/// struct OrderService {
///     max_len: usize,
/// }
///
/// impl Handler for OrderService {
///     async fn handle(&self, delivery: Delivery) -> Outcome {
///         match delivery.record().value_str() {
///             Some(order) if order.len() <= self.max_len => Outcome::Accept,
///             _ => Outcome::Reject,
///         }
///     }
/// }
///
/// # fn f(processor: Processor) {
/// let running = processor.run(OrderService { max_len: 1024 });
/// # }
/// ```
pub trait Handler: Send + Sync + 'static {
    /// Handles one record; its [`Outcome`] is the record's fate. A panic counts as
    /// [`Outcome::Release`].
    fn handle(&self, delivery: Delivery) -> impl Future<Output = Outcome> + Send;
}

impl<F, Fut> Handler for F
where
    F: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    fn handle(&self, delivery: Delivery) -> impl Future<Output = Outcome> + Send {
        self(delivery)
    }
}

/// A handler of batches (the sink's form): one call at a time, the next batch acquired while
/// it runs. It answers one [`Outcome`] per record, in order (missing ones are RELEASEd), or
/// [`Stop`] to end the engine (its batch is released). With a
/// [`dead_letter`](ProcessorConfig::dead_letter) destination, the records it answers
/// [`Outcome::DeadLetter`] are copied there before the call counts as ended, as in the
/// per-record form.
pub trait BatchHandler: Send + 'static {
    /// Handles `batch`.
    fn handle<'a>(&'a mut self, batch: &'a [Delivery]) -> BoxFuture<'a, std::result::Result<Vec<Outcome>, Stop>>;

    /// Asked once right after `handle` answered [`Stop`]: the outcomes of that batch's
    /// records the handler finished before it stopped, in order; the records it leaves out
    /// (all, by default) are RELEASEd. A handler that stops partway through a batch answers
    /// for what it did (e.g. ACCEPT for the records it wrote before the failed one), so that
    /// only the rest comes back.
    fn outcomes_at_stop(&mut self) -> Vec<Outcome> {
        Vec::new()
    }
}

/// A batch handler's request to stop the engine, with the reason (reported by
/// [`Running::join`] as [`Error::ProcessorStopped`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop(pub String);

/// The engine's settings.
///
/// Every setter takes any value and clamps it to a documented range (the `MAX_*`
/// constants), so no setting can make the engine panic or abort later: a count past what a
/// process could hold, or a time past what the clock can count to, means "as many" or
/// "never" within the range.
#[derive(Debug, Clone)]
pub struct ProcessorConfig {
    concurrency: usize,
    prefetch: Option<usize>,
    batch_size: Option<usize>,
    max_unstarted: Option<Duration>,
    max_retries: u32,
    retry_backoff: Duration,
    retry_backoff_max: Duration,
    on_exhausted: Outcome,
    shutdown_timeout: Duration,
    acquire_mode: Option<AcquireMode>,
    dead_letter: Option<DeadLetter>,
}

impl Default for ProcessorConfig {
    fn default() -> Self {
        ProcessorConfig {
            concurrency: 16,
            prefetch: None,
            batch_size: None,
            max_unstarted: None,
            max_retries: 3,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(10),
            on_exhausted: Outcome::Release,
            shutdown_timeout: Duration::from_secs(30),
            acquire_mode: None,
            dead_letter: None,
        }
    }
}

impl ProcessorConfig {
    /// The most handlers [`concurrency`](Self::concurrency) allows (each is a tokio task).
    pub const MAX_CONCURRENCY: usize = 65_536;
    /// The largest [`prefetch`](Self::prefetch) (records held locked, unstarted).
    pub const MAX_PREFETCH: usize = 1_048_576;
    /// The largest [`batch_size`](Self::batch_size).
    pub const MAX_BATCH_SIZE: usize = 1_048_576;
    /// The longest time any setting takes (one year): deadlines counted from now stay
    /// within what the clock can hold.
    pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

    /// The defaults: 16 handlers, prefetch one record per handler, at most 3 retries (100 ms
    /// doubling to 10 s), then RELEASE; unstarted records released after a quarter of the lock.
    pub fn new() -> Self {
        Self::default()
    }

    /// Handlers that may run at once (per-record form; the batch form runs one batch at a
    /// time). Clamped to `1..=`[`MAX_CONCURRENCY`](Self::MAX_CONCURRENCY).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.clamp(1, Self::MAX_CONCURRENCY);
        self
    }

    /// Records acquired ahead of the running handlers (default: one per handler; in the
    /// batch form one batch). Clamped to `0..=`[`MAX_PREFETCH`](Self::MAX_PREFETCH).
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n.min(Self::MAX_PREFETCH));
        self
    }

    /// Records per handler call in the batch form (default: the consumer's
    /// `max.poll.records`). Clamped to `1..=`[`MAX_BATCH_SIZE`](Self::MAX_BATCH_SIZE), the
    /// default too.
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = Some(n.clamp(1, Self::MAX_BATCH_SIZE));
        self
    }

    /// How long a record may wait acquired and unstarted, while every handler slot is busy,
    /// before it goes back to the group (default: a quarter of the acquisition lock). A
    /// record a free slot can start is never sent back, so zero means: nothing waits here
    /// for a slot. A record delivered more than once is kept past it instead (renewed while
    /// it waits), so releases never use up its deliveries. Clamped to at most
    /// [`MAX_DURATION`](Self::MAX_DURATION).
    pub fn max_unstarted(mut self, d: Duration) -> Self {
        self.max_unstarted = Some(d.min(Self::MAX_DURATION));
        self
    }

    /// `Retry` outcomes a record may get (handled alone) within one delivery before
    /// [`on_exhausted`](Self::on_exhausted) (default 3). A redelivery starts the count over:
    /// to cap tries across deliveries, see [`Delivery::total_attempts`].
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The first retry's wait, doubled per retry up to `max` (at least `first`). Both are
    /// clamped to at most [`MAX_DURATION`](Self::MAX_DURATION).
    pub fn retry_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.retry_backoff = first.min(Self::MAX_DURATION);
        self.retry_backoff_max = max.clamp(self.retry_backoff, Self::MAX_DURATION);
        self
    }

    /// What a record that used up its retries becomes: RELEASE (default: the broker delivers
    /// it again, up to its delivery limit), REJECT, or [`Outcome::DeadLetter`]: copied to the
    /// [`dead_letter`](Self::dead_letter) topic and ACCEPTed (REJECT without one), so a record
    /// gets `max_retries + 1` handler calls in all (in the batch forms: calls alone, as
    /// [`Delivery::retries`] counts). (`Accept` and `Retry` mean RELEASE.)
    pub fn on_exhausted(mut self, outcome: Outcome) -> Self {
        self.on_exhausted = outcome;
        self
    }

    /// Where records go that are given up on ([`Outcome::DeadLetter`], a decode failure in
    /// [`Processor::run_decoded`], retries used up under
    /// `on_exhausted(Outcome::DeadLetter)`): copied to a topic with the error headers the sink
    /// runtime writes, then ACCEPTed; a failed copy RELEASEs the record. The client's own
    /// dead-lettering: it works on Kafka 4.1-4.3 too, which have no broker-side DLQ.
    /// Every form: [`Processor::run`] and [`Processor::run_decoded`] copy inside the handler's
    /// call; [`Processor::run_batches`] and [`Processor::run_batch_pool`] copy each record a
    /// [`BatchHandler`] call answered so, together, once the call returns. Either way the
    /// copies are awaited before the call ends (their time counts as handler time).
    pub fn dead_letter(mut self, destination: DeadLetter) -> Self {
        self.dead_letter = Some(destination);
        self
    }

    /// How long [`Running::close`] with no time of its own, or a dropped [`Running`],
    /// lets the running handlers finish (default 30 s; property `shutdown.timeout.ms`).
    /// Clamped to at most [`MAX_DURATION`](Self::MAX_DURATION).
    pub fn close_timeout(mut self, d: Duration) -> Self {
        self.shutdown_timeout = d.min(Self::MAX_DURATION);
        self
    }

    /// How the engine acquires records. By default (`None`) the per-record form
    /// ([`Processor::run`]) asks the broker for exactly the records its free slots and
    /// prefetch have room for, with
    /// [`AcquireMode::RecordLimit`] on a cluster that has it (Kafka 4.2+): no record is
    /// acquired to wait here for a slot that is not free. On a 4.1 cluster (no record_limit)
    /// it falls back to the consumer's `share.acquire.mode` and says so at start: the broker
    /// then hands out whole log batches, and records beyond the free slots may wait past
    /// [`max_unstarted`](Self::max_unstarted) and go back to the group unstarted (once: see
    /// the module doc). The batch forms ([`Processor::run_batches`],
    /// [`Processor::run_batch_pool`], the sink) take whole batches by default
    /// (`Some(BatchOptimized)`): their unit is a batch, and sized fetches made the plain
    /// file sink 4x slower.
    ///
    /// `Some(RecordLimit)` requires it: on a cluster without it the engine stops at once
    /// with [`Error::AcquireModeUnsupported`]. `Some(BatchOptimized)` takes whole batches
    /// with the consumer's prefetch even where record_limit exists (more records per round
    /// trip, for handlers fast enough to start them within the bound).
    pub fn acquire_mode(mut self, mode: Option<AcquireMode>) -> Self {
        self.acquire_mode = mode;
        self
    }

    /// `handlers`: the batch form's pool size (None: the per-record form).
    fn limits(&self, handlers: Option<usize>, max_poll_records: usize) -> ledger::Limits {
        let batch = handlers.is_some();
        let (slots, batch_size) = match handlers {
            Some(n) => (n, self.batch_size.unwrap_or(max_poll_records).clamp(1, Self::MAX_BATCH_SIZE)),
            None => (self.concurrency, 1),
        };
        ledger::Limits {
            slots,
            batch_size,
            // A pool's size is the caller's: the product saturates (the ledger's sums do too).
            prefetch: self.prefetch.unwrap_or(slots.saturating_mul(batch_size)),
            prefetch_follows_slots: batch && self.prefetch.is_none(),
            prefetch_adapts: !batch && self.prefetch.is_none(),
            max_unstarted: self.max_unstarted,
            max_retries: self.max_retries,
            backoff: self.retry_backoff,
            backoff_max: self.retry_backoff_max,
            on_exhausted: match self.on_exhausted {
                // With a destination every form copies it before the ledger sees it.
                Outcome::Reject | Outcome::DeadLetter => AckKind::Reject,
                Outcome::Accept | Outcome::Release | Outcome::Retry => AckKind::Release,
            },
        }
    }
}

/// A share consumer made for the engine, not running yet: subscribe (and set a callback)
/// through [`consumer`](Self::consumer), then [`run`](Self::run) or
/// [`run_batches`](Self::run_batches).
pub struct Processor {
    consumer: ShareConsumer,
    config: ProcessorConfig,
}

impl std::fmt::Debug for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor").field("consumer", &self.consumer).field("config", &self.config).finish()
    }
}

impl Processor {
    /// Connects a share consumer for the engine. The consumer's acknowledgement mode does
    /// not matter (the engine acknowledges every record itself); `max.poll.records` is the
    /// batch form's default batch size.
    pub async fn connect(consumer: ShareConsumerConfig, config: ProcessorConfig) -> Result<Processor> {
        Ok(Processor::new(ShareConsumer::connect(consumer).await?, config))
    }

    /// The engine on a consumer already connected (and perhaps subscribed). It must not have
    /// been polled: records a poll handed out are not the engine's (the close releases them).
    pub fn new(consumer: ShareConsumer, config: ProcessorConfig) -> Processor {
        Processor { consumer, config }
    }

    /// The consumer, to subscribe, pause, set the acknowledgement commit callback, read
    /// metrics. Do not poll it: the engine takes its records.
    pub fn consumer(&self) -> &ShareConsumer {
        &self.consumer
    }

    /// Starts the engine with a per-record [`Handler`] (a closure, or a type of yours that
    /// implements it), up to `concurrency` calls at once, each on its own tokio task. A
    /// handler that panics counts as [`Outcome::Release`].
    pub fn run<H: Handler>(self, handler: H) -> Running {
        self.run_as(handler, std::any::type_name::<H>())
    }

    /// [`run`](Self::run), with `class` as the handler's name on dead-letter copies.
    fn run_as<H: Handler>(self, handler: H, class: &'static str) -> Running {
        let metrics = Arc::new(metrics::ProcessorMetrics::default());
        let dead_letters = self.dead_letters(class, &metrics);
        let handler = Arc::new(handler);
        let handler: run::RecordFn = Arc::new(move |d| {
            let (handler, dead_letters) = (handler.clone(), dead_letters.clone());
            Box::pin(async move {
                match dead_letters {
                    None => handler.handle(d).await,
                    Some(dl) => {
                        // The Delivery goes to the handler; the record stays shared (an Arc).
                        let outcome = handler.handle(d.clone()).await;
                        dl.settle(&d, outcome, 1).await
                    }
                }
            })
        });
        self.start_with(run::Handler::PerRecord(handler), None, metrics)
    }

    /// Starts the engine with a typed handler: each record is first decoded with `decoder`
    /// (see [`crate::decode`]; with the `json` feature `JsonDecoder::<Order>::new()`), and
    /// `handler` gets the delivery and its decoded value. A record that fails to decode never
    /// reaches the handler: it goes to the [`dead_letter`](ProcessorConfig::dead_letter)
    /// topic (stage `VALUE_CONVERTER`, the [`DecodeError`] as the message, then ACCEPTed),
    /// or without one is REJECTed with a warning naming its topic, partition and offset.
    ///
    /// ```rust,no_run
    /// use kafka_share::decode::Utf8;
    /// use kafka_share::processor::{DeadLetter, Delivery, Outcome, Processor, ProcessorConfig};
    /// # async fn f(consumer: kafka_share::ShareConsumerConfig) -> kafka_share::Result<()> {
    /// let config = ProcessorConfig::new().dead_letter(DeadLetter::topic("orders.dlq"));
    /// let processor = Processor::connect(consumer, config).await?;
    /// processor.consumer().subscribe(["orders"])?;
    /// let running = processor.run_decoded(Utf8, |_d: Delivery, text: String| async move {
    ///     if text.is_empty() { Outcome::DeadLetter } else { Outcome::Accept }
    /// });
    /// # Ok(()) }
    /// ```
    pub fn run_decoded<D, F, Fut>(self, decoder: D, handler: F) -> Running
    where
        D: Decode,
        F: Fn(Delivery, D::Output) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let decoder = Arc::new(decoder);
        let typed = move |d: Delivery| {
            let call = d.decode(&*decoder).map(|value| handler(d.clone(), value));
            async move {
                match call {
                    Ok(call) => call.await,
                    Err(e) => {
                        tracing::warn!(
                            topic = %e.topic, partition = e.partition, offset = e.offset, error = %e,
                            "processor: a record failed to decode; dead-lettered, or REJECTed without a destination"
                        );
                        d.set_failure(dead_letter::Failure::decode(&e));
                        Outcome::DeadLetter
                    }
                }
            }
        };
        self.run_as(typed, std::any::type_name::<F>())
    }

    fn dead_letters(
        &self,
        class: &'static str,
        m: &Arc<metrics::ProcessorMetrics>,
    ) -> Option<Arc<dead_letter::DeadLetters>> {
        let c = &self.config;
        if c.dead_letter.is_none() && c.on_exhausted == Outcome::DeadLetter {
            tracing::warn!(
                "processor: on_exhausted(DeadLetter) without a dead_letter destination: \
                 records that use up their retries are REJECTed"
            );
        }
        let d = c.dead_letter.as_ref()?;
        let exhausted = c.on_exhausted == Outcome::DeadLetter;
        let consumer = self.consumer.config();
        Some(Arc::new(dead_letter::DeadLetters::new(d, consumer, class, c.max_retries, exhausted, m.clone())))
    }

    /// Starts the engine with a batch handler (see [`BatchHandler`]): one call at a time.
    pub fn run_batches<H: BatchHandler>(self, handler: H) -> Running {
        self.run_batch_pool(vec![handler])
    }

    /// Starts the engine with a pool of batch handlers: up to one call per handler at once,
    /// each call on whichever handler is idle, so a batch never waits behind a slow call
    /// while another handler could take it. Records are spread over the idle handlers
    /// (at most [`batch_size`](ProcessorConfig::batch_size) per call). A handler's
    /// [`Stop`] stops the engine, as in [`run_batches`](Self::run_batches). An empty pool
    /// stops at once with [`Error::InvalidArgument`].
    pub fn run_batch_pool<H: BatchHandler>(self, handlers: Vec<H>) -> Running {
        let metrics = Arc::new(metrics::ProcessorMetrics::default());
        let dead_letters = self.dead_letters(std::any::type_name::<H>(), &metrics);
        let handlers = handlers
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                let h = Box::new(h) as Box<dyn BatchHandler>;
                let h = match &dead_letters {
                    Some(dl) => Box::new(dead_letter::DeadLettering::new(h, dl.clone())),
                    None => h,
                };
                (i as u64, h)
            })
            .collect();
        self.start_with(run::Handler::Batches(pool::Pool::new(handlers, None)), None, metrics)
    }

    /// The sink runtime's form: a pool that changes while the engine runs (`PoolControl`),
    /// in which a handler's Stop or panic retires that handler alone (told on `retired`),
    /// and an empty pool waits for handlers.
    #[cfg(feature = "sink")]
    pub(crate) fn run_retiring_pool(self, retired: mpsc::UnboundedSender<pool::Retired>) -> (Running, PoolControl) {
        let (tx, rx) = mpsc::unbounded_channel();
        let running = self.start_with(
            run::Handler::Batches(pool::Pool::new(Vec::new(), Some(retired))),
            Some(rx),
            Arc::default(),
        );
        (running, PoolControl { tx })
    }

    fn start_with(
        self,
        handler: run::Handler,
        commands: Option<mpsc::UnboundedReceiver<pool::PoolCommand>>,
        metrics: Arc<metrics::ProcessorMetrics>,
    ) -> Running {
        let handlers = match &handler {
            run::Handler::Batches(pool) => Some(pool.slots()),
            run::Handler::PerRecord(_) => None,
        };
        let limits = self.config.limits(handlers, self.consumer.config().max_poll_records);
        let (signal, signals) = watch::channel(Signal::Run);
        let consumer = Arc::new(self.consumer);
        // The batch forms (the sink's) take whole log batches unless told otherwise: a batch
        // handler's unit is a batch, and record_limit made the plain file sink 4x slower
        // (bench-sink, 6M records: 0.33-0.36M records/s against 1.24-1.32M), each fetch
        // acquiring only the free calls' room.
        let acquire = self.config.acquire_mode.or(handlers.map(|_| AcquireMode::BatchOptimized));
        let engine = run::Engine::new(consumer.clone(), limits, metrics.clone(), handler, signals, commands, acquire);
        let task = tokio::spawn(engine.run());
        let source = {
            let (consumer, metrics) = (consumer.clone(), metrics.clone());
            Arc::new(move || {
                let mut s = consumer.metrics();
                metrics.put(&mut s);
                s
            })
        };
        Running {
            handle: ProcessorHandle { signal: Arc::new(signal), metrics: source },
            task: Some(task),
            consumer,
            shutdown_timeout: self.config.shutdown_timeout,
        }
    }
}

/// What the engine was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Run,
    /// Stop acquiring, finish the running handlers by then, close.
    Shutdown(Instant),
    /// Abort the running handlers and close now.
    Abort,
}

/// The engine's metrics as a handle reads them: the consumer's plus the engine's.
type MetricsSource = Arc<dyn Fn() -> MetricsSnapshot + Send + Sync>;

/// A running engine's shared face: its metrics, and the way to stop it. Cheap to clone, so
/// one engine can be shared by a metrics endpoint, a signal handler and the task that
/// [`join`](Running::join)s its [`Running`] (which stays where the end is awaited):
///
/// ```rust,no_run
/// # use std::time::Duration;
/// # use kafka_share::processor::{Delivery, Outcome, Processor};
/// # async fn f(processor: Processor) -> kafka_share::Result<()> {
/// let running = processor.run(|_d: Delivery| async { Outcome::Accept });
/// let handle = running.handle();
/// let for_metrics = handle.clone(); // e.g. moved into a scrape endpoint's collector
/// let _snapshot = for_metrics.metrics();
/// tokio::spawn(async move {
///     // The first Ctrl-C closes gracefully, a second one aborts.
///     handle.close_on(tokio::signal::ctrl_c, Duration::from_secs(30)).await
/// });
/// let report = running.join().await?; // a fatal engine error comes here too
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ProcessorHandle {
    signal: Arc<watch::Sender<Signal>>,
    metrics: MetricsSource,
}

impl std::fmt::Debug for ProcessorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessorHandle").field("signal", &*self.signal.borrow()).finish_non_exhaustive()
    }
}

impl ProcessorHandle {
    /// The consumer's metrics plus the engine's (group [`PROCESSOR`]), as
    /// [`Running::metrics`]. Readable for as long as the handle lives: while the engine
    /// runs, while it shuts down, and after it stopped (the last figures, frozen).
    pub fn metrics(&self) -> MetricsSnapshot {
        (self.metrics)()
    }

    /// Whether the engine has stopped (its task ended: the [`Report`] or error waits in
    /// [`Running::join`]).
    pub fn is_stopped(&self) -> bool {
        self.signal.is_closed()
    }

    /// The first call starts a graceful close with `timeout` for the running handlers (as
    /// [`Running::close`], without waiting: [`Running::join`] waits); a second call aborts
    /// them. Any `timeout` is taken: one past what the clock can count to (`Duration::MAX`)
    /// means the handlers are waited for without a deadline.
    pub fn close(&self, timeout: Duration) {
        self.signal.send_modify(|s| {
            *s = match *s {
                Signal::Run => Signal::Shutdown(later(Instant::now(), timeout)),
                _ => Signal::Abort,
            }
        });
    }

    /// Aborts the running handlers and closes at once.
    pub fn abort(&self) {
        self.signal.send_replace(Signal::Abort);
    }

    /// Stops the engine on a signal, as a service does on SIGTERM or Ctrl-C: the first
    /// signal starts a graceful [`close`](Self::close) with `timeout` for the running
    /// handlers, a second one [`abort`](Self::abort)s them. `signal` makes the future of the
    /// next signal (called at most twice); e.g. `tokio::signal::ctrl_c`, or for SIGTERM a
    /// closure over a `tokio::signal::unix::Signal`'s `recv`. Returns once the engine has
    /// stopped, for whatever reason (the [`Report`] waits in [`Running::join`]), or right
    /// after the abort; so it can be spawned beside the task that joins and ends with it.
    ///
    /// ```rust,no_run
    /// # use std::time::Duration;
    /// # use kafka_share::processor::Running;
    /// # async fn f(running: Running) -> kafka_share::Result<()> {
    /// let handle = running.handle();
    /// tokio::spawn(async move { handle.close_on(tokio::signal::ctrl_c, Duration::from_secs(30)).await });
    /// let report = running.join().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close_on<S, F>(&self, mut signal: S, timeout: Duration)
    where
        S: FnMut() -> F,
        F: Future,
    {
        let stopped = self.signal.closed();
        tokio::pin!(stopped);
        tokio::select! {
            _ = &mut stopped => return,
            _ = signal() => {}
        }
        tracing::info!(?timeout, "processor: shutdown signal; a second one aborts the running handlers");
        self.close(timeout);
        tokio::select! {
            _ = &mut stopped => return,
            _ = signal() => {}
        }
        tracing::warn!("processor: second shutdown signal; aborting the running handlers");
        self.abort();
    }
}

/// What the engine did, as it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// Records whose outcome was ACCEPT.
    pub accepted: u64,
    /// Records released (by their handler, unstarted, at shutdown, after retries).
    pub released: u64,
    /// Records rejected.
    pub rejected: u64,
    /// Of those released: records that never reached a handler.
    pub released_unstarted: u64,
    /// Locks renewed.
    pub renewals: u64,
    /// Outcomes sent after the record's lock was gone (refused by the consumer).
    pub lapses: u64,
    /// Handlers aborted at shutdown (their records released by the close).
    pub aborted: u64,
    /// Time with no handler running while the engine waited for records (from the first
    /// turn: the group join is in it).
    pub starved: Duration,
}

/// A running engine.
///
/// Dropping it without a shutdown shuts the engine down in the background (see `Drop`);
/// neither that nor any shutdown panics, whatever timeout it was given.
pub struct Running {
    handle: ProcessorHandle,
    task: Option<tokio::task::JoinHandle<Result<Report>>>,
    consumer: Arc<ShareConsumer>,
    shutdown_timeout: Duration,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("consumer", &self.consumer).finish_non_exhaustive()
    }
}

impl Running {
    /// A handle to read the metrics and stop the engine from elsewhere (cheap to clone).
    pub fn handle(&self) -> ProcessorHandle {
        self.handle.clone()
    }

    /// The consumer's metrics plus the engine's (group [`PROCESSOR`]); the same as
    /// [`ProcessorHandle::metrics`], which stays readable while `close` or `join` wait.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.handle.metrics()
    }

    /// The consumer (to pause, resume, read its metrics; not to poll).
    pub fn consumer(&self) -> &ShareConsumer {
        &self.consumer
    }

    /// Closes gracefully, giving the running handlers `timeout` (`None`: the config's
    /// [`close_timeout`](ProcessorConfig::close_timeout)), and waits for the end.
    ///
    /// # Cancel safety
    /// Cancel-safe: the close was signalled before the first await and goes on in the
    /// background.
    pub async fn close(mut self, timeout: impl Into<Option<Duration>>) -> Result<Report> {
        self.handle.close(timeout.into().unwrap_or(self.shutdown_timeout));
        self.wait().await
    }

    /// Waits until the engine stops (a shutdown from a [`ProcessorHandle`], or a fatal
    /// error: the consumer's, or a batch handler's [`Stop`]).
    pub async fn join(mut self) -> Result<Report> {
        self.wait().await
    }

    async fn wait(&mut self) -> Result<Report> {
        match self.task.take() {
            Some(t) => {
                t.await.map_err(|e| Error::TaskFailed { task: "processing engine".into(), detail: e.to_string() })?
            }
            None => Err(Error::Closed),
        }
    }
}

impl Drop for Running {
    /// Dropped without a shutdown: the engine shuts down on its own with the configured
    /// timeout (its task goes on in the background).
    fn drop(&mut self) {
        if self.task.is_some() {
            self.handle.signal.send_if_modified(|s| {
                if *s == Signal::Run {
                    *s = Signal::Shutdown(later(Instant::now(), self.shutdown_timeout));
                    true
                } else {
                    false
                }
            });
        }
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod config_tests;
