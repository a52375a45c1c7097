//! One sink task on its own share consumer: poll -> put -> acknowledge, until stopped.
//!
//! # Acknowledgement rules (explicit mode, the default)
//! - `put` (then `flush`) `Ok`: ACCEPT the batch.
//! - `Retriable`: RELEASE the batch (the broker redelivers it, to any task, with a higher
//!   delivery count); a record already at `share.max.delivery.count` goes the dead-letter
//!   path instead, so a poison record stops coming back.
//! - `Records { failed }`: the failed records go the dead-letter path (copied to the DLQ
//!   topic then ACCEPTed, or REJECTed without one); the rest are ACCEPTed. With
//!   `errors.tolerance=none` a failed record stops the task instead (as in Connect).
//! - `Fatal`: RELEASE the batch and stop the task; the other tasks take its records.
//!
//! # Renewal
//! While a `put` runs longer than half the acquisition lock, the task RENEWs the batch's
//! records (Kafka 4.2+). The consumer hands a renewed record out again from its next poll,
//! so the task polls right after renewing and swaps the new handles in: the acknowledgement
//! after `put` must name the newest delivery, or it would be refused as superseded. A record
//! that does not come back (its lock was already gone) is left to the broker's redelivery.
//!
//! # Implicit mode
//! The consumer accepts a poll's records on the next poll, so nothing can be released: a
//! retriable error is retried in place (up to `share.max.delivery.count` attempts, then the
//! dead-letter path) and a fatal error closes the consumer, which releases the batch.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::consumer::{AcknowledgeType, AcquireMode, ShareConsumer, ShareConsumerConfig};
use crate::error::Error;

use super::config::{ConnectorConfig, ErrorTolerance, SinkAckMode};
use super::dead_letter::DeadLetter;
use super::metrics::SinkMetrics;
use super::task::{SinkError, SinkRecord, SinkTask, SinkTaskFactory};

/// How long one poll waits for records before the loop checks for a stop again.
const POLL_TIMEOUT: Duration = Duration::from_millis(500);
/// How long the final commit and the consumer's close may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// What every task of one connector shares.
pub(crate) struct ConnectorShared {
    pub(crate) config: ConnectorConfig,
    pub(crate) consumer: ShareConsumerConfig,
    /// record_limit was this runtime's choice, not the user's: fall back to batch_optimized
    /// on a cluster without ShareFetch v2.
    pub(crate) record_limit_fallback: bool,
    /// The cluster refused record_limit once: later tasks connect with batch_optimized at
    /// once instead of being refused again, one connection each.
    pub(crate) record_limit_refused: AtomicBool,
    pub(crate) factory: Arc<dyn SinkTaskFactory>,
    pub(crate) metrics: Arc<SinkMetrics>,
    pub(crate) dead_letter: Option<Arc<DeadLetter>>,
    /// Tasks that stopped on an error: (task id, why).
    pub(crate) failures: Mutex<Vec<(usize, String)>>,
}

impl ConnectorShared {
    fn failed(&self, id: usize, why: String) {
        tracing::error!(connector = %self.config.name, task = id, "task failed: {why}");
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).push((id, why));
    }
}

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
    /// Whether RENEW still seems to work (false after the broker or mode refused it once).
    renew: bool,
    /// Records a renewal's poll returned that belong to no batch in flight (see `renew`).
    carried: Vec<SinkRecord>,
}

impl Runner {
    async fn start(id: usize, shared: Arc<ConnectorShared>) -> Result<Runner, String> {
        let cfg = &shared.config;
        let mut sink = shared.factory.create(&cfg.task_config).map_err(|e| format!("creating the task: {e}"))?;
        let mut ccfg = shared.consumer.clone();
        // One client id per task, so broker logs and group descriptions tell tasks apart.
        if !cfg.consumer_overrides.contains_key("client.id") {
            ccfg.cluster.client_id = format!("{}-{}-task-{id}", cfg.group_id, cfg.name);
        }
        if shared.record_limit_fallback && shared.record_limit_refused.load(Ordering::Relaxed) {
            ccfg.acquire_mode = AcquireMode::BatchOptimized;
        }
        let consumer = match ShareConsumer::connect(ccfg.clone()).await {
            Err(Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, .. })
                if shared.record_limit_fallback =>
            {
                shared.record_limit_refused.store(true, Ordering::Relaxed);
                ccfg.acquire_mode = AcquireMode::BatchOptimized;
                ShareConsumer::connect(ccfg).await
            }
            other => other,
        }
        .map_err(|e| format!("connecting the consumer: {e}"))?;
        let subscribed = match &cfg.topics_regex {
            Some(re) => consumer.subscribe_pattern(re),
            None => consumer.subscribe(cfg.topics.iter().cloned()),
        };
        if let Err(e) = subscribed {
            let _ = consumer.close(CLOSE_TIMEOUT).await;
            return Err(format!("subscribing: {e}"));
        }
        let opened = async {
            sink.start(&cfg.task_config).await?;
            sink.open(&cfg.topics).await
        }
        .await;
        if let Err(e) = opened {
            sink.stop().await;
            let _ = consumer.close(CLOSE_TIMEOUT).await;
            return Err(format!("starting the sink: {e}"));
        }
        let renew = cfg.ack_mode == SinkAckMode::Explicit;
        Ok(Runner { id, shared, consumer, sink: Mutex::new(sink), renew, carried: Vec::new() })
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
            let records = if self.carried.is_empty() {
                tokio::select! {
                    r = self.consumer.poll(POLL_TIMEOUT) => r,
                    // A dropped sender is a stop too (the connector is gone).
                    _ = stop.changed() => return Ok(()),
                }
            } else {
                Ok(std::mem::take(&mut self.carried))
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

    /// Handles one poll's records.
    async fn batch(&mut self, records: Vec<SinkRecord>) -> Step {
        let m = self.shared.metrics.clone();
        let acquired = Instant::now();
        let redelivered = records.iter().filter(|r| r.delivery_count > 1).count();
        m.acquired(records.len(), redelivered);
        if self.shared.config.ack_mode == SinkAckMode::Implicit {
            return self.batch_implicit(records, acquired).await;
        }
        let (result, handles) = self.put(&records).await;
        let result = match result {
            Ok(()) => self.sink().flush().await,
            Err(SinkError::Records { failed }) => {
                // The records that were taken must be durable before they are ACCEPTed.
                match self.sink().flush().await {
                    Ok(()) => Err(SinkError::Records { failed }),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        let step = self.acknowledge(handles, result).await;
        m.acknowledge_time(acquired.elapsed());
        step
    }

    /// Runs `put`, renewing the batch's locks while it runs. Returns its answer and the
    /// newest handle of each record (None: its lock was lost during a renewal).
    async fn put(&mut self, records: &[SinkRecord]) -> (Result<(), SinkError>, Vec<Option<SinkRecord>>) {
        let mut handles: Vec<Option<SinkRecord>> = records.iter().cloned().map(Some).collect();
        let lock = self.consumer.acquisition_lock_timeout().unwrap_or(self.shared.config.lock_timeout);
        let every = (lock.min(self.shared.config.lock_timeout) / 2).max(Duration::from_millis(250));
        let started = Instant::now();
        // Disjoint borrows: the put holds the sink, the renewals the consumer.
        let Runner { sink, consumer, renew: renewing, carried, shared, .. } = self;
        let metrics = &shared.metrics;
        let result = {
            let put = sink.get_mut().unwrap_or_else(|p| p.into_inner()).put(records);
            tokio::pin!(put);
            loop {
                tokio::select! {
                    r = &mut put => break r,
                    _ = tokio::time::sleep(every), if *renewing => {
                        *renewing = renew(consumer, &mut handles, lock, carried, metrics).await;
                    }
                }
            }
        };
        self.shared.metrics.put(records.len(), started.elapsed());
        (result, handles)
    }

    /// Applies a batch's outcome (explicit mode).
    async fn acknowledge(&mut self, handles: Vec<Option<SinkRecord>>, result: Result<(), SinkError>) -> Step {
        let tolerance = self.shared.config.tolerance;
        let max = self.shared.config.max_delivery_count;
        match result {
            Ok(()) => {
                for h in handles.iter().flatten() {
                    self.ack(h, AcknowledgeType::Accept);
                }
                Ok(())
            }
            Err(SinkError::Retriable { reason }) => {
                tracing::debug!(connector = %self.shared.config.name, task = self.id, "retriable: {reason}");
                for h in handles.iter().flatten() {
                    if h.delivery_count >= max {
                        if tolerance == ErrorTolerance::None {
                            return self.fail_batch(&handles, format!("{} failed at delivery {} of share.max.delivery.count={max} and errors.tolerance=none: {reason}", describe(h), h.delivery_count));
                        }
                        self.dead_letter(h, &reason).await;
                    } else {
                        self.ack(h, AcknowledgeType::Release);
                    }
                }
                Ok(())
            }
            Err(SinkError::Records { failed }) => {
                let mut why: HashMap<usize, &str> = HashMap::new();
                for f in &failed {
                    if f.index < handles.len() {
                        why.insert(f.index, &f.reason);
                    } else {
                        tracing::warn!(connector = %self.shared.config.name, task = self.id, "the sink reported a failure for record {} of a batch of {}; ignored", f.index, handles.len());
                    }
                }
                if tolerance == ErrorTolerance::None && !why.is_empty() {
                    let first = failed.first().map(|f| f.to_string()).unwrap_or_default();
                    return self.fail_batch(&handles, format!("a record failed and errors.tolerance=none (set errors.tolerance=all to dead-letter it): {first}"));
                }
                for (i, h) in handles.iter().enumerate() {
                    let Some(h) = h else { continue };
                    match why.get(&i) {
                        Some(reason) => self.dead_letter(h, reason).await,
                        None => self.ack(h, AcknowledgeType::Accept),
                    }
                }
                Ok(())
            }
            Err(e) => self.fail_batch(&handles, e.to_string()),
        }
    }

    fn fail_batch(&self, handles: &[Option<SinkRecord>], why: String) -> Step {
        for h in handles.iter().flatten() {
            self.ack(h, AcknowledgeType::Release);
        }
        Err(why)
    }

    /// The dead-letter path for one record: the DLQ copy then ACCEPT, or REJECT.
    async fn dead_letter(&self, record: &SinkRecord, reason: &str) {
        let m = &self.shared.metrics;
        match &self.shared.dead_letter {
            Some(dlq) => match dlq.send(record, self.id, reason).await {
                Ok(()) => {
                    m.dead_lettered();
                    self.ack(record, AcknowledgeType::Accept);
                }
                Err(e) => {
                    // Not copied: give it back, so a later delivery tries again (the broker
                    // archives it at its own share.delivery.count.limit at the latest).
                    tracing::warn!(connector = %self.shared.config.name, task = self.id, "could not copy {} to {}: {e}", describe(record), dlq.topic);
                    self.ack(record, AcknowledgeType::Release);
                }
            },
            None => {
                tracing::warn!(connector = %self.shared.config.name, task = self.id, "{} rejected (no errors.deadletterqueue.topic.name): {reason}", describe(record));
                self.ack(record, AcknowledgeType::Reject);
            }
        }
    }

    /// Records one acknowledgement (it leaves with the next poll or commit) and counts it.
    fn ack(&self, record: &SinkRecord, ack: AcknowledgeType) {
        let m = &self.shared.metrics;
        match self.consumer.acknowledge_with(record, ack) {
            Ok(()) => match ack {
                AcknowledgeType::Accept => m.accepted(1),
                AcknowledgeType::Release => m.released(1),
                AcknowledgeType::Reject => m.rejected(1),
                _ => {}
            },
            Err(e) => {
                // Its lock lapsed (the broker delivers it again) or the consumer is closing.
                tracing::debug!(connector = %self.shared.config.name, task = self.id, "{ack:?} of {} not recorded: {e}", describe(record));
                m.dropped(1);
            }
        }
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
        if !self.carried.is_empty() {
            // Renewed records no batch took: give them back now rather than at close.
            let carried = std::mem::take(&mut self.carried);
            for r in &carried {
                self.ack(r, AcknowledgeType::Release);
            }
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

/// RENEWs every record of a running batch and takes the renewed handles from the poll that
/// returns them. Returns whether renewing should go on (false once refused: a 4.1 broker).
async fn renew(
    consumer: &ShareConsumer,
    handles: &mut [Option<SinkRecord>],
    lock: Duration,
    carried: &mut Vec<SinkRecord>,
    metrics: &SinkMetrics,
) -> bool {
    // Records carried over from an earlier renewal are held too: renew them as well, or
    // they would block this round's poll (an explicit consumer polls only when every held
    // record is acknowledged) and their locks would lapse while this put runs.
    let held_over = std::mem::take(carried);
    let mut waiting: HashMap<(String, i32, i64), Option<usize>> = HashMap::new();
    let batch = handles.iter().enumerate().filter_map(|(i, h)| h.as_ref().map(|r| (Some(i), r)));
    for (i, r) in batch.chain(held_over.iter().map(|r| (None, r))) {
        match consumer.acknowledge_with(r, AcknowledgeType::Renew) {
            Ok(()) => {
                waiting.insert((r.topic().to_string(), r.partition, r.offset), i);
            }
            Err(e @ Error::RenewUnsupported) => {
                tracing::warn!("cannot renew record locks on this cluster; a put longer than the lock gets its records redelivered: {e}");
                carried.extend(held_over);
                return false;
            }
            Err(e) => tracing::debug!("renew of {} not recorded: {e}", describe(r)),
        }
    }
    if waiting.is_empty() {
        return true;
    }
    // Send the RENEWs now; the answers come back through the polls below.
    if let Err(e) = consumer.commit_async() {
        tracing::warn!("sending renewals failed: {e}");
    }
    let deadline = Instant::now() + (lock / 2).max(Duration::from_secs(1));
    while !waiting.is_empty() && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(500)).await {
            Ok(records) => {
                for r in records {
                    match waiting.remove(&(r.topic().to_string(), r.partition, r.offset)) {
                        Some(Some(i)) => handles[i] = Some(r),
                        // A renewed record of an earlier batch, or a new one: the next batch.
                        _ => carried.push(r),
                    }
                }
            }
            // Records returned by an earlier round are held unacknowledged, so an explicit
            // consumer refuses another poll; the rest come back from the main loop's poll
            // and are then handled as a new batch (at least once).
            Err(e) => {
                tracing::debug!("poll for renewed records: {e}");
                break;
            }
        }
    }
    for (_, i) in waiting {
        // Its renewal failed or is late: the broker redelivers it after the lock; the
        // outcome of this put no longer applies to it.
        if let Some(r) = i.and_then(|i| handles[i].take()) {
            tracing::debug!("{} not renewed in time; left to redelivery", describe(&r));
            metrics.dropped(1);
        }
    }
    true
}

fn describe(r: &SinkRecord) -> String {
    format!("{}-{}@{} (delivery {})", r.topic(), r.partition, r.offset, r.delivery_count)
}
