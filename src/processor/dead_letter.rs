//! The engine's dead-letter destination: a record its handler gives up on
//! ([`Outcome::DeadLetter`], [`Delivery::dead_letter`]), one that used up its retries under
//! `on_exhausted(Outcome::DeadLetter)`, or one that failed to decode
//! ([`Processor::run_decoded`](super::Processor::run_decoded)) is copied to a topic with the
//! crate's producer, then ACCEPTed. This is the client's own dead-lettering, so it works on
//! any Kafka with share groups (4.1-4.3 have no broker-side DLQ).
//!
//! Both forms take one path: [`DeadLetters::settle`] decides and copies, called inside a
//! per-record handler's call, and by [`DeadLettering`] for each record of a batch handler's
//! call (the copies sent together, the call ending when all are answered).
//!
//! The order is what keeps a record from being lost: the copy is sent and the broker's
//! answer awaited **before** the handler's call ends; only then does the engine ACCEPT the
//! original. A copy that fails RELEASEs the original instead (it comes back with its delivery
//! count one higher, and is tried again), counted in `dead-letter-failures-total`. A crash or an abort
//! between the copy and the ACCEPT redelivers the original, so the topic can hold a record
//! twice (at least once, as every copy in Kafka without transactions).
//!
//! The copy is the sink runtime's (`crate::dead_letter`): key, value, timestamp, headers, and
//! Connect's `__connect.errors.*` headers (topic, partition, offset, stage, class.name,
//! exception.class.name, exception.message, delivery.count).

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::OnceCell;

use super::metrics::ProcessorMetrics;
use super::{BatchHandler, Delivery, Outcome, Stop};
use crate::consumer::{ConsumerRecord, ShareConsumerConfig};
use crate::dead_letter::{copy_of, ErrorContext, STAGE_TASK_PUT, STAGE_VALUE_CONVERTER};
use crate::decode::DecodeError;
use crate::error::Result;
use crate::producer::{Producer, ProducerConfig};

/// Where the engine copies the records it gives up on (see
/// [`ProcessorConfig::dead_letter`](super::ProcessorConfig::dead_letter)).
///
/// ```rust,no_run
/// use kafka_share::processor::{DeadLetter, Outcome, ProcessorConfig};
///
/// let config = ProcessorConfig::new()
///     .dead_letter(DeadLetter::topic("orders.dlq"))
///     .on_exhausted(Outcome::DeadLetter); // retries used up: to the topic too
/// ```
#[derive(Debug, Clone)]
pub struct DeadLetter {
    topic: String,
    producer: Option<Producer>,
    context_headers: bool,
}

impl DeadLetter {
    /// Copies to `topic` (it must exist, or the broker must create topics on first use).
    /// The engine's own producer sends them, connected with the consumer's connection
    /// settings (bootstrap, TLS, SASL) when the first record goes there.
    pub fn topic(topic: impl Into<String>) -> DeadLetter {
        DeadLetter { topic: topic.into(), producer: None, context_headers: true }
    }

    /// Sends with `producer` instead (e.g. the one the service already produces its results
    /// with, or one with settings of its own).
    pub fn producer(mut self, producer: Producer) -> DeadLetter {
        self.producer = Some(producer);
        self
    }

    /// Whether the copy gets the error-context headers (`__connect.errors.*`; default true).
    pub fn context_headers(mut self, on: bool) -> DeadLetter {
        self.context_headers = on;
        self
    }

    /// The dead-letter topic.
    pub fn topic_name(&self) -> &str {
        &self.topic
    }
}

/// Why a record goes to the dead-letter topic: what its error headers say.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) stage: &'static str,
    pub(crate) exception: &'static str,
    pub(crate) message: String,
}

impl Failure {
    /// The handler's own word ([`Delivery::dead_letter`], or a bare `Outcome::DeadLetter`).
    pub(crate) fn handler(message: String) -> Failure {
        Failure { stage: STAGE_TASK_PUT, exception: "kafka_share::processor::Outcome::DeadLetter", message }
    }

    /// The decode step failed ([`Processor::run_decoded`](super::Processor::run_decoded)).
    pub(crate) fn decode(e: &DecodeError) -> Failure {
        Failure { stage: STAGE_VALUE_CONVERTER, exception: "kafka_share::decode::DecodeError", message: e.to_string() }
    }
}

/// A running engine's dead-letter writer.
pub(crate) struct DeadLetters {
    topic: String,
    context_headers: bool,
    /// The handler's type, for `class.name`.
    class: &'static str,
    /// The producer: the user's, or the engine's own, connected on first use.
    producer: OnceCell<Producer>,
    /// How the engine's own connects (None: the user gave one).
    own: Option<ProducerConfig>,
    max_retries: u32,
    on_exhausted: bool,
    metrics: Arc<ProcessorMetrics>,
}

impl DeadLetters {
    pub(crate) fn new(
        d: &DeadLetter,
        consumer: &ShareConsumerConfig,
        class: &'static str,
        max_retries: u32,
        on_exhausted: bool,
        metrics: Arc<ProcessorMetrics>,
    ) -> DeadLetters {
        let own = d.producer.is_none().then(|| {
            let mut c = ProducerConfig { cluster: consumer.cluster.clone(), ..ProducerConfig::default() };
            // A client id of its own, so the broker's quotas and logs tell it from the
            // consumer (empty: the producer numbers itself, as Java's `producer-<n>`).
            if !c.cluster.client_id.is_empty() {
                c.cluster.client_id.push_str("-dead-letter");
            }
            c
        });
        let producer = d.producer.clone().map_or_else(OnceCell::new, |p| OnceCell::new_with(Some(p)));
        DeadLetters {
            topic: d.topic.clone(),
            context_headers: d.context_headers,
            class,
            producer,
            own,
            max_retries,
            on_exhausted,
            metrics,
        }
    }

    /// Turns a handler's outcome into the record's fate: a dead-letter outcome (or a `Retry`
    /// past the retries, under `on_exhausted(DeadLetter)`) becomes the copy and an ACCEPT,
    /// or a RELEASE if the copy fails; any other outcome is the handler's. `batch` is how
    /// many records the call had (1 in the per-record form): a `Retry` counts against the
    /// retries only when the record was handled alone, as the ledger counts it.
    pub(crate) async fn settle(&self, delivery: &Delivery, outcome: Outcome, batch: usize) -> Outcome {
        // Taken whatever the outcome, so a reason given and then not used does not label a
        // later dead letter of the record.
        let reason = delivery.take_failure();
        let retries =
            Retries { on_exhausted: self.on_exhausted, batch, retries: delivery.retries(), max: self.max_retries };
        let failure = match decide(outcome, retries) {
            Fate::Handler(other) => return other,
            Fate::DeadLetter => reason.unwrap_or_else(|| Failure::handler("dead-lettered by the handler".into())),
            Fate::Exhausted => {
                ProcessorMetrics::add(&self.metrics.exhausted, 1);
                Failure {
                    stage: STAGE_TASK_PUT,
                    exception: "kafka_share::processor::RetriesExhausted",
                    message: format!(
                        "retries exhausted: {} handler calls in this delivery (max_retries {})",
                        delivery.attempt(),
                        self.max_retries
                    ),
                }
            }
        };
        self.send(delivery.record(), &failure).await
    }

    /// [`settle`](Self::settle) for each record of a batch handler's call, the copies sent
    /// together and all awaited before this returns. `outcomes` keeps its length (a batch
    /// handler that answered too few or too many is the ledger's to report).
    pub(crate) async fn settle_batch(&self, batch: &[Delivery], mut outcomes: Vec<Outcome>) -> Vec<Outcome> {
        let n = batch.len();
        let settled = futures::future::join_all(
            batch.iter().zip(outcomes.iter()).map(|(delivery, &outcome)| self.settle(delivery, outcome, n)),
        )
        .await;
        for (slot, fate) in outcomes.iter_mut().zip(settled) {
            *slot = fate;
        }
        outcomes
    }

    /// Copies `record` and answers what becomes of the original.
    pub(crate) async fn send(&self, record: &ConsumerRecord, failure: &Failure) -> Outcome {
        match self.try_send(record, failure).await {
            Ok(()) => {
                ProcessorMetrics::add(&self.metrics.dead_lettered, 1);
                Outcome::Accept
            }
            Err(e) => {
                ProcessorMetrics::add(&self.metrics.dead_letter_failures, 1);
                tracing::warn!(
                    topic = %record.topic, partition = record.partition, offset = record.offset,
                    dead_letter_topic = %self.topic, error = %e,
                    "processor: the dead-letter copy failed; the record is released (delivered again) instead"
                );
                Outcome::Release
            }
        }
    }

    async fn try_send(&self, record: &ConsumerRecord, failure: &Failure) -> Result<()> {
        let producer = self
            .producer
            .get_or_try_init(|| async {
                // `own` is None only when the cell was filled with the user's producer.
                let config = self.own.clone().unwrap_or_default();
                Producer::connect(config).await
            })
            .await?;
        let context = ErrorContext {
            connector: None,
            stage: failure.stage,
            class: self.class,
            exception: failure.exception,
            message: &failure.message,
        };
        let copy = copy_of(&self.topic, record, self.context_headers.then_some(&context));
        producer.send_and_wait(copy).await.map(|_| ())
    }
}

/// A batch handler whose call ends only once its records' dead-letter copies are answered:
/// the batch forms' way to the same [`DeadLetters::settle`] as the per-record form's.
pub(crate) struct DeadLettering {
    inner: Box<dyn BatchHandler>,
    dead_letters: Arc<DeadLetters>,
}

impl DeadLettering {
    pub(crate) fn new(inner: Box<dyn BatchHandler>, dead_letters: Arc<DeadLetters>) -> DeadLettering {
        DeadLettering { inner, dead_letters }
    }
}

impl BatchHandler for DeadLettering {
    fn handle<'a>(&'a mut self, batch: &'a [Delivery]) -> BoxFuture<'a, std::result::Result<Vec<Outcome>, Stop>> {
        Box::pin(async move {
            // A Stop is the handler's word on the whole batch: nothing is copied, the
            // batch is released as without a destination.
            let outcomes = self.inner.handle(batch).await?;
            Ok(self.dead_letters.settle_batch(batch, outcomes).await)
        })
    }
}

/// What a handler's outcome makes of a record when there is a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// The handler's own outcome stands.
    Handler(Outcome),
    /// The handler gave it up: copy it.
    DeadLetter,
    /// A `Retry` past the retries under `on_exhausted(DeadLetter)`: copy it.
    Exhausted,
}

/// What decides whether a `Retry` uses up a record's retries.
#[derive(Debug, Clone, Copy)]
struct Retries {
    /// `on_exhausted(DeadLetter)` is set.
    on_exhausted: bool,
    /// Records in the call (1: the per-record form).
    batch: usize,
    /// `Retry` outcomes the record got alone so far in this delivery ([`Delivery::retries`]).
    retries: u32,
    /// `max_retries`.
    max: u32,
}

/// The decision, pure. A `Retry` counts against the retries only when the record was
/// handled alone (in a larger batch the failure may have been a batch-mate's; the ledger
/// splits the batch instead), and uses them up when `retries` already reached `max`: the
/// ledger's count (`Ledger::retry`), made before the ledger sees the outcome.
fn decide(outcome: Outcome, r: Retries) -> Fate {
    match outcome {
        Outcome::DeadLetter => Fate::DeadLetter,
        Outcome::Retry if r.on_exhausted && r.batch <= 1 && r.retries >= r.max => Fate::Exhausted,
        other => Fate::Handler(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alone(retries: u32) -> Retries {
        Retries { on_exhausted: true, batch: 1, retries, max: 2 }
    }

    #[test]
    fn a_dead_letter_is_always_copied_and_other_outcomes_are_the_handlers() {
        for r in [alone(0), alone(5), Retries { on_exhausted: false, batch: 9, retries: 0, max: 0 }] {
            assert_eq!(decide(Outcome::DeadLetter, r), Fate::DeadLetter);
            for o in [Outcome::Accept, Outcome::Release, Outcome::Reject] {
                assert_eq!(decide(o, r), Fate::Handler(o), "{o:?} is the handler's");
            }
        }
    }

    #[test]
    fn a_retry_is_copied_once_the_record_alone_used_up_its_retries() {
        // max 2: the calls after retries 0 and 1 may retry; the third call's Retry is one too many.
        assert_eq!(decide(Outcome::Retry, alone(0)), Fate::Handler(Outcome::Retry));
        assert_eq!(decide(Outcome::Retry, alone(1)), Fate::Handler(Outcome::Retry));
        assert_eq!(decide(Outcome::Retry, alone(2)), Fate::Exhausted);
        let off = Retries { on_exhausted: false, ..alone(2) };
        assert_eq!(decide(Outcome::Retry, off), Fate::Handler(Outcome::Retry), "on_exhausted is not DeadLetter");
    }

    /// The decision's count is the ledger's: a batch of 4 whose records answer `Retry` every
    /// call is split (4, 2, 1) and each record is exhausted in the ledger (REJECT, as
    /// `on_exhausted(DeadLetter)` without a destination) at the very call `decide` would copy it.
    #[test]
    fn a_retry_is_exhausted_at_the_call_where_the_ledger_exhausts_it() {
        use crate::consumer::driver::{Delivered, PollAnswer};
        use crate::processor::ledger::{Ledger, Limits};
        use crate::share::acks::AckKind;
        use crate::share::TopicIdPartition;
        use std::time::{Duration, Instant};

        let max = 2;
        let limits = Limits {
            slots: 1,
            batch_size: 4,
            prefetch: 4,
            prefetch_follows_slots: false,
            prefetch_adapts: false,
            max_unstarted: None,
            max_retries: max,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_millis(100),
            on_exhausted: AckKind::Reject,
        };
        let mut ledger = Ledger::new(limits, true, Arc::default());
        let mut now = Instant::now();
        ledger.set_lock(Some(Duration::from_secs(30)));
        let tp = TopicIdPartition { topic_id: uuid::Uuid::nil(), partition: 0 };
        let records = (0..4)
            .map(|o| {
                let mut record = ConsumerRecord::for_test("t".into(), 0, o);
                record.lock_deadline = Some(now + Duration::from_secs(30));
                Delivered { record, tp, node: 1, generation: 1, batch: (o, o) }
            })
            .collect();
        ledger.received(PollAnswer { records, renewed: Vec::new() }, now);
        let mut copied = Vec::new();
        let mut exhausted = Vec::new();
        for _ in 0..20 {
            for unit in ledger.start(now) {
                let n = unit.deliveries.len();
                for d in &unit.deliveries {
                    let r = Retries { on_exhausted: true, batch: n, retries: d.retries(), max };
                    if decide(Outcome::Retry, r) == Fate::Exhausted {
                        copied.push(d.record().offset);
                    }
                }
                ledger.finished(&unit.ids, &vec![Outcome::Retry; n], Duration::ZERO, now);
            }
            let acks = ledger.take_acks();
            exhausted.extend(acks.iter().filter(|a| a.kind == AckKind::Reject).map(|a| a.offset));
            now += Duration::from_millis(100);
            ledger.tick(now);
        }
        exhausted.extend(ledger.take_acks().iter().filter(|a| a.kind == AckKind::Reject).map(|a| a.offset));
        assert_eq!(exhausted.len(), 4, "every record used up its retries: {exhausted:?}");
        assert_eq!(copied, exhausted, "decided at the same call, in the same order");
    }

    #[test]
    fn a_retry_in_a_larger_batch_is_not_counted() {
        let in_batch = Retries { batch: 2, ..alone(7) };
        assert_eq!(decide(Outcome::Retry, in_batch), Fate::Handler(Outcome::Retry), "maybe a batch-mate's failure");
        assert_eq!(decide(Outcome::Retry, Retries { batch: 0, ..alone(2) }), Fate::Exhausted);
    }
}
