//! A sink task as the processing engine's batch handler (explicit mode): `put` (then
//! `flush`) decides each record's outcome, and the engine does the rest: the next batch is
//! acquired while `put` runs, locks are renewed while it runs long, outcomes leave at once.
//!
//! # Outcomes
//! - `Ok`: every record ACCEPTed.
//! - `Retriable` (the whole batch): every record is tried again later; the engine splits the
//!   batch in halves on each retry, so the records that fail on their own are found. Only a
//!   record that failed alone `share.max.delivery.count` times takes the dead-letter path.
//! - `RetriableRecords`: the named records are tried again (as above); `failed` ones take
//!   the dead-letter path; the others are ACCEPTed.
//! - `Records { failed }`: the failed records take the dead-letter path (copied to the DLQ
//!   topic then ACCEPTed, or REJECTed without one); the rest are ACCEPTed. With
//!   `errors.tolerance=none` a failed record stops the task instead, naming that record.
//! - `Fatal`: the task stops; the engine releases the batch for the other tasks.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use tokio::sync::Mutex;

use super::config::{DeadLetterMode, ErrorTolerance};
use super::connector::ConnectorShared;
use super::task::{RecordFailure, SinkError, SinkRecord, SinkTask};
use crate::processor::{BatchHandler, Delivery, Outcome, Stop};

pub(crate) struct SinkHandler {
    pub(crate) id: usize,
    pub(crate) shared: Arc<ConnectorShared>,
    /// Shared with the runner, which stops the sink once the engine is done with it.
    pub(crate) sink: Arc<Mutex<Box<dyn SinkTask>>>,
}

impl BatchHandler for SinkHandler {
    fn handle<'a>(&'a mut self, batch: &'a [Delivery]) -> BoxFuture<'a, Result<Vec<Outcome>, Stop>> {
        Box::pin(self.put(batch))
    }
}

impl SinkHandler {
    async fn put(&mut self, batch: &[Delivery]) -> Result<Vec<Outcome>, Stop> {
        let m = self.shared.metrics.clone();
        let first: Vec<&Delivery> = batch.iter().filter(|d| d.attempt() == 1).collect();
        if !first.is_empty() {
            m.acquired(first.len(), first.iter().filter(|d| d.delivery_count() > 1).count());
        }
        let records: Vec<SinkRecord> = batch.iter().map(|d| d.record().clone()).collect();
        let started = Instant::now();
        let result = {
            let mut sink = self.sink.lock().await;
            let r = sink.put(&records).await;
            m.put(records.len(), started.elapsed());
            match r {
                // What was taken must be durable before it is ACCEPTed.
                Ok(()) => sink.flush().await,
                Err(e @ (SinkError::Records { .. } | SinkError::RetriableRecords { .. })) => match sink.flush().await {
                    Ok(()) => Err(e),
                    Err(flush) => Err(flush),
                },
                Err(e) => Err(e),
            }
        };
        let mut out = vec![Outcome::Accept; batch.len()];
        match result {
            Ok(()) => {}
            Err(SinkError::Retriable { reason }) => {
                for (i, d) in batch.iter().enumerate() {
                    out[i] = self.retry_or_dead_letter(d, batch.len(), &reason).await?;
                }
            }
            Err(SinkError::RetriableRecords { retriable, failed }) => {
                let failed = self.dead_letter_failed(batch, &failed).await?;
                for (i, o) in failed {
                    out[i] = o;
                }
                for f in retriable.iter().filter(|f| f.index < batch.len()) {
                    // Its own failure: counted as alone.
                    out[f.index] = self.retry_or_dead_letter(&batch[f.index], 1, &f.reason).await?;
                }
            }
            Err(SinkError::Records { failed }) => {
                for (i, o) in self.dead_letter_failed(batch, &failed).await? {
                    out[i] = o;
                }
            }
            Err(e @ SinkError::Fatal { .. }) => {
                m.released(batch.len());
                return Err(Stop(e.to_string()));
            }
        }
        // Counted first, then added once each: three shared counters per batch, not per record.
        let (mut accepted, mut released, mut rejected) = (0, 0, 0);
        for o in &out {
            match o {
                Outcome::Accept => accepted += 1,
                Outcome::Release => released += 1,
                Outcome::Reject => rejected += 1,
                _ => {}
            }
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

    /// A record that failed for a passing reason, in a batch of `batch`: tried again, unless
    /// it has failed alone `share.max.delivery.count` times (then the dead-letter path).
    async fn retry_or_dead_letter(&self, d: &Delivery, batch: usize, reason: &str) -> Result<Outcome, Stop> {
        let max = self.shared.config.max_delivery_count.max(1) as u32;
        if batch > 1 || d.retries() + 1 < max {
            tracing::debug!(connector = %self.shared.config.name, task = self.id, batch, "retriable, tried again: {}: {reason}", describe(d.record()));
            return Ok(Outcome::Retry);
        }
        if self.shared.config.tolerance == ErrorTolerance::None {
            return Err(Stop(format!(
                "{} failed {} times on its own (share.max.delivery.count={max}) and errors.tolerance=none: {reason}",
                describe(d.record()),
                d.retries() + 1
            )));
        }
        Ok(self.dead_letter(d.record(), reason).await)
    }

    /// The records that cannot be written: their dead-letter outcomes, by index. With
    /// `errors.tolerance=none` the first stops the task.
    async fn dead_letter_failed(
        &self,
        batch: &[Delivery],
        failed: &[RecordFailure],
    ) -> Result<Vec<(usize, Outcome)>, Stop> {
        let mut why: HashMap<usize, &str> = HashMap::new();
        for f in failed {
            if f.index < batch.len() {
                why.entry(f.index).or_insert(&f.reason);
            } else {
                tracing::warn!(connector = %self.shared.config.name, task = self.id, "the sink reported a failure for record {} of a batch of {}; ignored", f.index, batch.len());
            }
        }
        if self.shared.config.tolerance == ErrorTolerance::None {
            if let Some(f) = failed.iter().find(|f| f.index < batch.len()) {
                return Err(Stop(format!(
                    "{} failed and errors.tolerance=none (set errors.tolerance=all to dead-letter it): {}",
                    describe(batch[f.index].record()),
                    f.reason
                )));
            }
        }
        let mut out = Vec::with_capacity(why.len());
        let mut indexes: Vec<usize> = why.keys().copied().collect();
        indexes.sort_unstable();
        for i in indexes {
            out.push((i, self.dead_letter(batch[i].record(), why[&i]).await));
        }
        Ok(out)
    }

    /// The dead-letter path for one record: the DLQ copy then ACCEPT, or REJECT.
    async fn dead_letter(&self, record: &SinkRecord, reason: &str) -> Outcome {
        match &self.shared.dead_letter {
            Some(dlq) => match dlq.send(record, self.id, reason).await {
                Ok(()) => {
                    self.shared.metrics.dead_lettered();
                    Outcome::Accept
                }
                Err(e) => {
                    // Not copied: give it back, so a later delivery tries again (the broker
                    // archives it at its own share.delivery.count.limit at the latest).
                    tracing::warn!(connector = %self.shared.config.name, task = self.id, "could not copy {} to {}: {e}", describe(record), dlq.topic);
                    Outcome::Release
                }
            },
            None if self.shared.config.dlq_mode == DeadLetterMode::Broker => {
                // The broker writes it to the group's dead-letter topic on the REJECT.
                tracing::warn!(connector = %self.shared.config.name, task = self.id, "{} rejected to the broker's dead-letter queue: {reason}", describe(record));
                self.shared.metrics.dead_lettered();
                Outcome::Reject
            }
            None => {
                tracing::warn!(connector = %self.shared.config.name, task = self.id, "{} rejected (no errors.deadletterqueue.topic.name): {reason}", describe(record));
                Outcome::Reject
            }
        }
    }
}

pub(crate) fn describe(r: &SinkRecord) -> String {
    format!("{}-{}@{} (delivery {})", r.topic, r.partition, r.offset, r.delivery_count)
}
