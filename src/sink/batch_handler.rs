//! A sink task as the processing engine's batch handler (explicit mode): `put` (then
//! `flush`) answers, `decide.rs` says what each record becomes, and this file does it (the
//! dead-letter copies) and hands the engine its outcomes. The engine does the rest: the next
//! batch is acquired while `put` runs, locks are renewed while it runs long, outcomes leave
//! at once, and a `Retry` comes back in a batch half the size after a backoff.
//!
//! A record whose dead-letter copy could not be written is RELEASEd, so a later delivery
//! tries again (the broker archives it at its own `share.delivery.count.limit` at the latest).

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use tokio::sync::Mutex;

use super::config::ErrorTolerance;
use super::connector::ConnectorShared;
use super::decide::{decide, stray_indexes, Decision, Verdict};
use super::pipeline::{put_through, stage_of};
use super::task::{SinkRecord, SinkTask};
use crate::processor::{BatchHandler, Delivery, Outcome, Stop};

pub(crate) struct SinkHandler {
    pub(crate) id: usize,
    pub(crate) shared: Arc<ConnectorShared>,
    /// Shared with the runner, which stops the sink once the engine is done with it.
    pub(crate) sink: Arc<Mutex<Box<dyn SinkTask>>>,
    /// A stopped batch's outcomes for the engine (`outcomes_at_stop`): ACCEPT for what the
    /// sink has, RELEASE for the rest.
    pub(crate) at_stop: Vec<Outcome>,
}

impl BatchHandler for SinkHandler {
    fn handle<'a>(&'a mut self, batch: &'a [Delivery]) -> BoxFuture<'a, Result<Vec<Outcome>, Stop>> {
        Box::pin(self.put(batch))
    }

    fn outcomes_at_stop(&mut self) -> Vec<Outcome> {
        std::mem::take(&mut self.at_stop)
    }
}

impl SinkHandler {
    async fn put(&mut self, batch: &[Delivery]) -> Result<Vec<Outcome>, Stop> {
        let m = self.shared.metrics.clone();
        // Counted in one pass, no list of them: first attempts, and those redelivered.
        let (first, redelivered) = batch
            .iter()
            .filter(|d| d.attempt() == 1)
            .fold((0, 0), |(n, r), d| (n + 1, r + usize::from(d.delivery_count() > 1)));
        if first > 0 {
            m.acquired(first, redelivered);
        }
        // Lent, not copied: the engine holds each record until its outcome is settled.
        let records: Vec<&SinkRecord> = batch.iter().map(Delivery::record).collect();
        let started = Instant::now();
        // Under tolerance none a record that fails in the pipeline ends the batch there, as
        // Connect's task fails at it: nothing after it is put.
        let stop_at_failure = self.shared.config.tolerance == ErrorTolerance::None;
        let pipeline = self.shared.pipeline.as_ref();
        let (result, stages, given) =
            put_through(pipeline, &mut **self.sink.lock().await, &records, &m, stop_at_failure).await;
        if result.is_ok() {
            // The common case, kept off the per-record path below (a decision, an `act` and a
            // match per record): every record is accepted. At a million records a second the
            // per-record steps cost as much as the file write.
            m.accepted(batch.len());
            m.acknowledge_time(started.elapsed());
            return Ok(vec![Outcome::Accept; batch.len()]);
        }
        for i in stray_indexes(&result, batch.len()) {
            tracing::warn!(connector = %self.shared.config.name, task = self.id, "the sink reported a failure for record {i} of a batch of {}; ignored", batch.len());
        }
        let retries: Vec<u32> = batch.iter().map(Delivery::retries).collect();
        let decisions = match decide(&result, &retries, &self.shared.policy()) {
            Verdict::Records(d) => d,
            Verdict::Stop { record, why, written } => {
                // What the sink has (before the records it was not given) is ACCEPTed, so a
                // restart starts at the failed record and writes nothing twice; the engine
                // releases the rest (`outcomes_at_stop`).
                self.at_stop =
                    written.iter().take(given).map(|&w| if w { Outcome::Accept } else { Outcome::Release }).collect();
                let accepted = self.at_stop.iter().filter(|o| **o == Outcome::Accept).count();
                if accepted > 0 {
                    m.accepted(accepted);
                }
                m.released(batch.len() - accepted);
                return Err(Stop(match record.and_then(|i| batch.get(i)) {
                    Some(d) => format!("{} {why}", describe(d.record())),
                    None => why,
                }));
            }
        };
        let mut out = Vec::with_capacity(batch.len());
        // Counted first, then added once each: three shared counters per batch, not per record.
        let (mut accepted, mut released, mut rejected) = (0, 0, 0);
        for (i, (d, decision)) in batch.iter().zip(decisions).enumerate() {
            let outcome = self.act(d, decision, stage_of(&stages, i)).await;
            match outcome {
                Outcome::Accept => accepted += 1,
                Outcome::Release => released += 1,
                Outcome::Reject | Outcome::DeadLetter => rejected += 1,
                // Still held by the engine: counted when it settles.
                Outcome::Retry => {}
            }
            out.push(outcome);
        }
        if accepted > 0 {
            m.accepted(accepted);
        }
        if released > 0 {
            m.released(released);
        }
        if rejected > 0 {
            m.rejected(rejected);
        }
        m.acknowledge_time(started.elapsed());
        Ok(out)
    }

    /// Carries out one record's decision: the engine's outcome for it.
    async fn act(&self, d: &Delivery, decision: Decision<'_>, stage: &str) -> Outcome {
        let (name, id, record) = (&self.shared.config.name, self.id, d.record());
        match decision {
            Decision::Accept => Outcome::Accept,
            Decision::Retry { reason } => {
                tracing::debug!(connector = %name, task = id, retries = d.retries(), "retriable, tried again: {}: {reason}", describe(record));
                Outcome::Retry
            }
            Decision::DeadLetter { reason } => {
                let Some(dlq) = &self.shared.dead_letter else {
                    // `policy()` asks for a copy only when the writer runs.
                    tracing::warn!(connector = %name, task = id, "{} rejected (no dead-letter writer): {reason}", describe(record));
                    return Outcome::Reject;
                };
                match dlq.send(record, id, reason, stage).await {
                    Ok(()) => {
                        self.shared.metrics.dead_lettered();
                        Outcome::Accept
                    }
                    Err(e) => {
                        tracing::warn!(connector = %name, task = id, "could not copy {} to {}: {e}", describe(record), dlq.topic);
                        Outcome::Release
                    }
                }
            }
            Decision::BrokerDeadLetter { reason } => {
                // The broker writes it to the group's dead-letter topic on the REJECT.
                tracing::warn!(connector = %name, task = id, "{} rejected to the broker's dead-letter queue: {reason}", describe(record));
                self.shared.metrics.dead_lettered();
                Outcome::Reject
            }
            Decision::Reject { reason } => {
                tracing::warn!(connector = %name, task = id, "{} rejected (no errors.deadletterqueue.topic.name): {reason}", describe(record));
                Outcome::Reject
            }
        }
    }
}

pub(crate) fn describe(r: &SinkRecord) -> String {
    format!("{}-{}@{} (delivery {})", r.topic, r.partition, r.offset, r.delivery_count)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::consumer::{ConsumerRecord, ShareConsumerConfig};
    use crate::processor::Held;
    use crate::sink::metrics::SinkMetrics;
    use crate::sink::{ConnectorConfig, Registry, SinkError};

    /// A sink that fails the record at `fail` (if any) and counts its `put`s.
    struct Put {
        fail: Option<usize>,
        puts: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl SinkTask for Put {
        fn start(&mut self, _config: &crate::sink::TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
            Box::pin(async { Ok(()) })
        }

        fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
            self.puts.fetch_add(records.len(), std::sync::atomic::Ordering::Relaxed);
            let fail = self.fail;
            Box::pin(async move {
                match fail {
                    Some(i) => Err(SinkError::record(i, "bad value")),
                    None => Ok(()),
                }
            })
        }
    }

    fn handler(fail: Option<usize>, puts: Arc<std::sync::atomic::AtomicUsize>) -> SinkHandler {
        handler_with(fail, puts, "all")
    }

    fn handler_with(fail: Option<usize>, puts: Arc<std::sync::atomic::AtomicUsize>, tolerance: &str) -> SinkHandler {
        let config = ConnectorConfig::from_pairs([
            ("name", "c"),
            ("connector.class", "file"),
            ("topics", "t"),
            ("errors.tolerance", tolerance),
        ])
        .expect("a valid connector");
        let shared = ConnectorShared {
            consumer: ShareConsumerConfig::new("127.0.0.1:9", "g"),
            record_limit_fallback: false,
            record_limit_refused: AtomicBool::new(false),
            factory: Registry::with_builtins().get("file").expect("the built-in file sink"),
            metrics: Arc::new(SinkMetrics::new(&config.name)),
            dead_letter: None,
            pipeline: None,
            failures: std::sync::Mutex::new(Vec::new()),
            config,
        };
        SinkHandler {
            id: 0,
            shared: Arc::new(shared),
            sink: Arc::new(Mutex::new(Box::new(Put { fail, puts }))),
            at_stop: Vec::new(),
        }
    }

    fn batch(n: i64) -> Vec<Delivery> {
        (0..n)
            .map(|o| Delivery::new(Held::one(ConsumerRecord::for_test("t".into(), 0, o)), 1, 0, 3))
            .collect()
    }

    fn accepted(h: &SinkHandler) -> Option<f64> {
        h.shared.metrics.snapshot().get("sink-record-acknowledge-total")
    }

    #[tokio::test]
    async fn a_whole_batch_written_is_accepted_and_counted_once() {
        let puts = Arc::default();
        let mut h = handler(None, Arc::clone(&puts));
        let out = h.put(&batch(4)).await.expect("no stop");
        assert_eq!(out, vec![Outcome::Accept; 4]);
        assert_eq!(puts.load(std::sync::atomic::Ordering::Relaxed), 4);
        assert_eq!(accepted(&h), Some(4.0));
    }

    #[tokio::test]
    async fn a_record_the_sink_failed_still_gets_its_own_outcome() {
        let mut h = handler(Some(2), Arc::default());
        let out = h.put(&batch(4)).await.expect("errors.tolerance=all: no stop");
        assert_eq!(out, vec![Outcome::Accept, Outcome::Accept, Outcome::Reject, Outcome::Accept]);
        assert_eq!(accepted(&h), Some(3.0));
    }

    #[tokio::test]
    async fn under_tolerance_none_a_failed_record_stops_the_task_keeping_what_the_sink_has() {
        let mut h = handler_with(Some(2), Arc::default(), "none");
        let Err(Stop(why)) = h.put(&batch(4)).await else { panic!("tolerance none stops") };
        assert!(why.starts_with("t-0@2 (delivery 1)"), "{why}");
        // The sink wrote all but the failed one: accepted, the failed one goes back.
        let kept = vec![Outcome::Accept, Outcome::Accept, Outcome::Release, Outcome::Accept];
        assert_eq!(h.outcomes_at_stop(), kept);
        assert!(h.outcomes_at_stop().is_empty(), "asked once");
        assert_eq!(accepted(&h), Some(3.0));
    }
}
