//! One sink task on its own share consumer, until stopped: implicit mode
//! (`share.acknowledgement.mode=implicit`; explicit mode runs the connector's tasks on one
//! engine, `task_pool.rs`). This mode keeps the poll -> put -> poll loop.
//!
//! The consumer accepts a poll's records on the next poll (or commit), so nothing can be
//! RELEASEd or REJECTed one by one: the decisions are `decide.rs`'s as in explicit mode, but
//! a retry happens in place (the batch split in halves per retry, as the engine does, with
//! the same backoff), and a record that failed for good is copied to the dead-letter topic
//! or, without one, skipped (accepted and counted as rejected). A stop (fatal error, or a
//! failed record under `errors.tolerance=none`) closes the consumer without committing,
//! which releases the whole batch to the group.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::backoff::Backoff;
use crate::consumer::ShareConsumer;

use super::batch_handler::describe;
use super::config::ErrorTolerance;
use super::connector::ConnectorShared;
use super::decide::{decide, stray_indexes, Decision, Verdict};
use super::pipeline::{put_through, stage_of};
use super::task::{SinkRecord, SinkTask};

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
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
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
                    backoff.reset();
                    r
                }
                Err(e) if e.is_retriable() => {
                    tracing::warn!(connector = %self.shared.config.name, task = self.id, "poll failed, retrying: {e}");
                    tokio::time::sleep(backoff.next_delay()).await;
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

    /// Handles one poll's records.
    async fn batch(&mut self, records: Vec<SinkRecord>) -> Step {
        let m = self.shared.metrics.clone();
        let acquired = Instant::now();
        let redelivered = records.iter().filter(|r| r.delivery_count > 1).count();
        m.acquired(records.len(), redelivered);
        let policy = self.shared.policy();
        // Per record: failures alone so far (as the engine's `Delivery::retries`).
        let mut retries = vec![0u32; records.len()];
        // What is left to put, as batch indexes: first the whole poll, then the halves of
        // what failed retriably.
        let mut todo: VecDeque<Vec<usize>> = VecDeque::from([(0..records.len()).collect()]);
        let (mut accepted, mut skipped) = (0, 0);
        while let Some(group) = todo.pop_front() {
            // Lent to the sink, not copied (a retry's part too).
            let batch: Vec<&SinkRecord> = group.iter().filter_map(|&i| records.get(i)).collect();
            let batch = batch.as_slice();
            let pipeline = self.shared.pipeline.as_ref();
            // Under tolerance none nothing past a failed record is put (the close releases the
            // whole poll all the same: implicit mode cannot acknowledge part of it).
            let stop_at_failure = self.shared.config.tolerance == ErrorTolerance::None;
            let sink = &mut **self.sink.get_mut().unwrap_or_else(|p| p.into_inner());
            let (result, stages, _) = put_through(pipeline, sink, batch, &m, stop_at_failure).await;
            for i in stray_indexes(&result, batch.len()) {
                tracing::warn!(connector = %self.shared.config.name, task = self.id, "the sink reported a failure for record {i} of a batch of {}; ignored", batch.len());
            }
            let tried: Vec<u32> = group.iter().map(|&i| retries[i]).collect();
            let decisions = match decide(&result, &tried, &policy) {
                Verdict::Records(d) => d,
                Verdict::Stop { record, why, .. } => {
                    // The close without a commit releases the whole poll (done parts too).
                    m.dropped(records.len());
                    return Err(match record.and_then(|k| group.get(k)) {
                        Some(&i) => format!("{} {why}", describe(&records[i])),
                        None => why,
                    });
                }
            };
            let mut again = Vec::new();
            for (k, (&i, decision)) in group.iter().zip(decisions).enumerate() {
                match decision {
                    Decision::Accept => accepted += 1,
                    Decision::Retry { reason } => {
                        tracing::debug!(connector = %self.shared.config.name, task = self.id, retries = retries[i], "retriable, retrying in place: {}: {reason}", describe(&records[i]));
                        again.push(i);
                    }
                    Decision::DeadLetter { reason } => {
                        if self.dead_letter(&records[i], reason, stage_of(&stages, k)).await {
                            accepted += 1;
                        } else {
                            skipped += 1;
                        }
                    }
                    // No dead-letter topic (broker mode is refused with implicit mode), and no
                    // REJECT in implicit mode: the next poll accepts it.
                    Decision::BrokerDeadLetter { reason } | Decision::Reject { reason } => {
                        tracing::warn!(connector = %self.shared.config.name, task = self.id, "{} skipped (no errors.deadletterqueue.topic.name; implicit mode accepts the whole batch, set share.acknowledgement.mode=explicit to REJECT it): {reason}", describe(&records[i]));
                        skipped += 1;
                    }
                }
            }
            if again.is_empty() {
                continue;
            }
            tokio::time::sleep(retry_wait(group.len(), &again, &mut retries)).await;
            for part in split(group.len(), again).into_iter().rev() {
                todo.push_front(part);
            }
        }
        m.acknowledge_time(acquired.elapsed());
        if skipped > 0 {
            m.rejected(skipped);
        }
        m.accepted(accepted);
        Ok(())
    }

    /// Copies a record that failed for good to the dead-letter topic; false if it could
    /// not (it is accepted all the same: implicit mode cannot give it back).
    async fn dead_letter(&self, record: &SinkRecord, reason: &str, stage: &str) -> bool {
        let Some(dlq) = &self.shared.dead_letter else { return false };
        match dlq.send(record, self.id, reason, stage).await {
            Ok(()) => {
                self.shared.metrics.dead_lettered();
                true
            }
            Err(e) => {
                tracing::warn!(connector = %self.shared.config.name, task = self.id, "could not copy {} to {}: {e}; skipped", describe(record), dlq.topic);
                false
            }
        }
    }

    /// Graceful end: flush, commit (accepting the last poll), stop the sink, close the
    /// consumer. After a failure: stop the sink and close, which releases the last poll.
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
        // After a failure the last poll is not committed (a commit would accept it): the
        // close releases it.
        if result.is_ok() {
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
        }
        self.sink().stop().await;
        if let Err(e) = self.consumer.close(CLOSE_TIMEOUT).await {
            tracing::warn!(connector = %name, task = self.id, "close: {e}");
        }
    }
}

/// The first retry's wait, and the most a retry alone waits (the engine's, in `task_pool.rs`).
const RETRY_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// The wait before trying `again` (records of a failed batch of `batch`), as the engine
/// waits: a record that failed alone counts the failure and backs off exponentially; one
/// split off a larger batch tries again after the base wait.
fn retry_wait(batch: usize, again: &[usize], retries: &mut [u32]) -> Duration {
    let (first, max) = RETRY_BACKOFF;
    if batch > 1 {
        return first;
    }
    let mut exp = 0;
    for &i in again {
        retries[i] = retries[i].saturating_add(1);
        exp = exp.max(retries[i].saturating_sub(1).min(16));
    }
    first.saturating_mul(1 << exp).min(max)
}

/// The batches the records of `again` (what failed retriably in a batch of `batch`) are
/// tried in next, in order: as the engine, at most half the failed batch each, so that a
/// record failing on its own ends up alone.
fn split(batch: usize, again: Vec<usize>) -> Vec<Vec<usize>> {
    let half = (batch / 2).max(1);
    if again.len() <= half {
        return vec![again];
    }
    again.chunks(half).map(<[usize]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_batch_is_tried_again_in_halves_until_alone() {
        assert_eq!(split(8, (0..8).collect()), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(split(4, vec![4, 5, 6, 7]), vec![vec![4, 5], vec![6, 7]]);
        assert_eq!(split(2, vec![6, 7]), vec![vec![6], vec![7]]);
        assert_eq!(split(1, vec![7]), vec![vec![7]]);
        // An odd batch: halves rounded down, the rest in a third.
        assert_eq!(split(5, (0..5).collect()), vec![vec![0, 1], vec![2, 3], vec![4]]);
        // Only some failed (RetriableRecords): they fit in one half.
        assert_eq!(split(10, vec![2, 7]), vec![vec![2, 7]]);
    }

    #[test]
    fn a_split_waits_the_base_and_counts_nothing() {
        let mut retries = vec![0, 4];
        assert_eq!(retry_wait(2, &[0, 1], &mut retries), RETRY_BACKOFF.0);
        assert_eq!(retries, vec![0, 4]);
    }

    #[test]
    fn a_record_alone_counts_and_doubles_up_to_the_cap() {
        let mut retries = vec![0];
        let waits: Vec<u64> = (0..8).map(|_| retry_wait(1, &[0], &mut retries).as_millis() as u64).collect();
        assert_eq!(waits, vec![100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(retries, vec![8]);
    }
}
