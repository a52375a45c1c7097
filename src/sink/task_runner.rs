//! One sink task on its own share consumer, until stopped: implicit mode
//! (`share.acknowledgement.mode=implicit`; explicit mode runs the connector's tasks on one
//! engine, `task_pool.rs`).
//!
//! The consumer accepts a poll's records on the next poll, so nothing can be released: a
//! retriable error is retried in place (up to `share.max.delivery.count` attempts, then the
//! dead-letter path) and a fatal error closes the consumer, which releases the batch. This
//! mode keeps the poll -> put -> poll loop.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::consumer::ShareConsumer;

use super::batch_handler::describe;
use super::config::ErrorTolerance;
use super::connector::ConnectorShared;
use super::task::{SinkError, SinkRecord, SinkTask};

/// How long one poll waits for records before the loop checks for a stop again.
const POLL_TIMEOUT: Duration = Duration::from_millis(500);
/// How long the final commit and the consumer's close may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs task `id` until `stop` says so or it fails. Never panics on what the sink or the
/// broker does: a failure is recorded in `shared.failures`.
pub(crate) async fn run_task(id: usize, shared: Arc<ConnectorShared>, stop: watch::Receiver<bool>) {
    let name = shared.config.name.clone();
    let mut runner = match Runner::start(id, shared.clone()).await {
        Ok(r) => r,
        Err(why) => {
            shared.failed(id, why);
            return;
        }
    };
    shared.metrics.task_started();
    tracing::info!(connector = %name, task = id, "task started");
    let result = runner.run(stop).await;
    let failed = result.is_err();
    runner.finish(result).await;
    shared.metrics.task_ended(failed);
    tracing::info!(connector = %name, task = id, failed, "task stopped");
}

/// What a batch's handling decided for the task.
type Step = Result<(), String>;

struct Runner {
    id: usize,
    shared: Arc<ConnectorShared>,
    consumer: ShareConsumer,
    /// In a mutex only to make `Runner` `Sync` (methods taking `&self` await, and a boxed
    /// sink is `Send` only); it is reached through `get_mut`, never locked.
    sink: Mutex<Box<dyn SinkTask>>,
}

impl Runner {
    async fn start(id: usize, shared: Arc<ConnectorShared>) -> Result<Runner, String> {
        let cfg = &shared.config;
        // One client id per task, so broker logs and group descriptions tell tasks apart.
        let consumer = shared.connect_consumer(format!("{}-{}-task-{id}", cfg.group_id, cfg.name)).await?;
        let sink = match shared.open_task().await {
            Ok(s) => s,
            Err(e) => {
                let _ = consumer.close(CLOSE_TIMEOUT).await;
                return Err(e);
            }
        };
        Ok(Runner { id, shared, consumer, sink: Mutex::new(sink) })
    }

    fn sink(&mut self) -> &mut Box<dyn SinkTask> {
        self.sink.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(&mut self, mut stop: watch::Receiver<bool>) -> Step {
        let mut backoff = Duration::from_millis(100);
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            let records = tokio::select! {
                r = self.consumer.poll(POLL_TIMEOUT) => r,
                // A dropped sender is a stop too (the connector is gone).
                _ = stop.changed() => return Ok(()),
            };
            let records = match records {
                Ok(r) => {
                    backoff = Duration::from_millis(100);
                    r
                }
                Err(e) if e.is_retriable() => {
                    tracing::warn!(connector = %self.shared.config.name, task = self.id, "poll failed, retrying: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    continue;
                }
                Err(e) => return Err(format!("poll: {e}")),
            };
            if records.is_empty() {
                continue;
            }
            self.batch(records).await?;
        }
    }

    /// Handles one poll's records (implicit mode).
    async fn batch(&mut self, records: Vec<SinkRecord>) -> Step {
        let m = self.shared.metrics.clone();
        let acquired = Instant::now();
        let redelivered = records.iter().filter(|r| r.delivery_count > 1).count();
        m.acquired(records.len(), redelivered);
        self.batch_implicit(records, acquired).await
    }

    /// Implicit mode: the next poll accepts the batch whatever happens here.
    async fn batch_implicit(&mut self, records: Vec<SinkRecord>, acquired: Instant) -> Step {
        let m = self.shared.metrics.clone();
        let max = self.shared.config.max_delivery_count.max(1) as u32;
        let mut attempt = 1u32;
        let mut backoff = Duration::from_millis(100);
        let outcome = loop {
            let started = Instant::now();
            let mut r = self.sink().put(&records).await;
            if r.is_ok() {
                r = self.sink().flush().await;
            }
            m.put(records.len(), started.elapsed());
            match r {
                Err(SinkError::Retriable { reason }) if attempt < max => {
                    tracing::debug!(connector = %self.shared.config.name, task = self.id, attempt, "retriable, retrying in place: {reason}");
                    attempt += 1;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                other => break other,
            }
        };
        m.acknowledge_time(acquired.elapsed());
        let failed: Vec<(usize, String)> = match outcome {
            Ok(()) => Vec::new(),
            Err(SinkError::Retriable { reason }) => (0..records.len()).map(|i| (i, reason.clone())).collect(),
            Err(SinkError::RetriableRecords { retriable, failed }) => retriable
                .into_iter()
                .chain(failed)
                .filter(|f| f.index < records.len())
                .map(|f| (f.index, f.reason))
                .collect(),
            Err(SinkError::Records { failed }) => {
                failed.into_iter().filter(|f| f.index < records.len()).map(|f| (f.index, f.reason)).collect()
            }
            Err(e) => {
                // Closing without a commit releases the batch (the consumer does so in both modes).
                m.dropped(records.len());
                return Err(e.to_string());
            }
        };
        if !failed.is_empty() && self.shared.config.tolerance == ErrorTolerance::None {
            m.dropped(records.len());
            return Err(format!("{} record(s) failed and errors.tolerance=none: {}", failed.len(), failed[0].1));
        }
        let mut rejected = 0;
        for (i, reason) in &failed {
            match &self.shared.dead_letter {
                Some(dlq) => match dlq.send(&records[*i], self.id, reason).await {
                    Ok(()) => m.dead_lettered(),
                    Err(e) => {
                        tracing::warn!(connector = %self.shared.config.name, task = self.id, "could not copy {} to {}: {e}", describe(&records[*i]), dlq.topic);
                        rejected += 1
                    }
                },
                None => rejected += 1,
            }
        }
        if rejected > 0 {
            tracing::warn!(connector = %self.shared.config.name, task = self.id, "{rejected} failed record(s) dropped: implicit mode accepts the whole batch, set share.acknowledgement.mode=explicit to REJECT them");
        }
        m.rejected(rejected);
        m.accepted(records.len() - rejected);
        Ok(())
    }

    /// Graceful end (or after a failure): flush, commit what was acknowledged, stop the
    /// sink, close the consumer (which releases anything not acknowledged).
    async fn finish(mut self, result: Step) {
        let name = self.shared.config.name.clone();
        if let Err(why) = &result {
            self.shared.failed(self.id, why.clone());
        }
        if result.is_ok() {
            if let Err(e) = self.sink().flush().await {
                tracing::warn!(connector = %name, task = self.id, "flush at stop failed: {e}");
            }
        }
        match self.consumer.commit_sync(CLOSE_TIMEOUT).await {
            Ok(res) => {
                for (tp, r) in res.iter() {
                    if let Err(e) = r {
                        tracing::warn!(connector = %name, task = self.id, "final acknowledgements for {tp:?}: {e}");
                    }
                }
            }
            Err(e) => tracing::warn!(connector = %name, task = self.id, "final commit failed: {e}"),
        }
        self.sink().stop().await;
        if let Err(e) = self.consumer.close(CLOSE_TIMEOUT).await {
            tracing::warn!(connector = %name, task = self.id, "close: {e}");
        }
    }
}
