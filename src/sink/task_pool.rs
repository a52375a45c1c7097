//! Explicit mode (the default): a share consumer and its processing engine, its tasks the
//! engine's batch handlers (`batch_handler.rs`); a connector runs one such pool per
//! consumer (`worker.rs`, `consumer_count`). A batch acquired goes to
//! whichever task is free, never to one fixed behind a slow `put`, and the records are
//! spread over the free tasks; the next batches are acquired while `put`s run, the engine
//! renews the locks of a long `put`, and each batch's outcomes leave as soon as it is done.
//!
//! Adding a task is a handler (a slot) more; removing one waits for its `put` to end, then
//! flushes and stops it; the other tasks run on throughout. A task whose `put` fails
//! fatally (or panics) is retired alone: its batch goes back to the group, the failure is
//! recorded, the others go on. A consumer that fails ends every task (each one recorded);
//! the next `set_tasks` starts a new consumer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::consumer::AcquireMode;
use crate::processor::{PoolControl, Processor, ProcessorConfig, ProcessorHandle, Retired};

use super::batch_handler::SinkHandler;
use super::connector::ConnectorShared;
use super::task::SinkTask;

/// How long the final outcomes and the consumer's close may take, and a removed task's `put`.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

type SharedSink = Arc<tokio::sync::Mutex<Box<dyn SinkTask>>>;

/// The live tasks, by id.
type Tasks = Arc<Mutex<BTreeMap<usize, SharedSink>>>;

pub(crate) struct TaskPool {
    shared: Arc<ConnectorShared>,
    control: PoolControl,
    handle: ProcessorHandle,
    tasks: Tasks,
    /// The engine's end and the cleanup after it (every task flushed and stopped).
    ended: Mutex<Option<JoinHandle<()>>>,
}

fn lock(tasks: &Tasks) -> std::sync::MutexGuard<'_, BTreeMap<usize, SharedSink>> {
    tasks.lock().unwrap_or_else(|p| p.into_inner())
}

impl TaskPool {
    /// Connects consumer `index` of the connector's `of` and starts its engine, with no task
    /// yet.
    pub(crate) async fn start(shared: Arc<ConnectorShared>, index: usize, of: usize) -> Result<TaskPool, String> {
        // One client id per connector (and consumer), so broker logs and group descriptions
        // tell them apart.
        let client_id = match of {
            1 => format!("{}-{}", shared.config.group_id, shared.config.name),
            _ => format!("{}-{}-{index}", shared.config.group_id, shared.config.name),
        };
        let consumer = shared.connect_consumer(client_id).await?;
        let cfg = &shared.config;
        let max = cfg.max_delivery_count.max(1) as u32;
        let config = ProcessorConfig::new()
            // A record that keeps failing alone reaches the dead-letter path by the handler's
            // count (share.max.delivery.count attempts alone), before the engine's own limit.
            .max_retries(max)
            .retry_backoff(Duration::from_millis(100), Duration::from_secs(5))
            .close_timeout(CLOSE_TIMEOUT);
        // record_limit asks for no prefetch: acquire only what the free tasks take.
        let config =
            if consumer.config().acquire_mode == AcquireMode::RecordLimit { config.prefetch(0) } else { config };
        let (retired_tx, retired) = mpsc::unbounded_channel();
        let (running, control) = Processor::new(consumer, config).run_retiring_pool(retired_tx);
        let handle = running.handle();
        let tasks: Tasks = Arc::default();
        let ended = tokio::spawn(watch(shared.clone(), tasks.clone(), running.join(), retired));
        Ok(TaskPool { shared, control, handle, tasks, ended: Mutex::new(Some(ended)) })
    }

    /// Whether the engine has ended (a consumer failure, or stopped).
    pub(crate) fn is_finished(&self) -> bool {
        self.ended.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_none_or(|j| j.is_finished())
    }

    /// The live tasks' ids, oldest first.
    pub(crate) fn live(&self) -> Vec<usize> {
        lock(&self.tasks).keys().copied().collect()
    }

    /// Starts task `id`: its sink, then a slot in the engine. A sink that refuses to start is
    /// recorded as the task's failure.
    pub(crate) async fn add(&self, id: usize) {
        let cfg = &self.shared.config;
        let sink = match self.shared.open_task().await {
            Ok(s) => s,
            Err(e) => return self.shared.failed(id, e),
        };
        let sink: SharedSink = Arc::new(tokio::sync::Mutex::new(sink));
        lock(&self.tasks).insert(id, sink.clone());
        let handler = SinkHandler { id, shared: self.shared.clone(), sink: sink.clone(), at_stop: Vec::new() };
        if !self.control.add(id as u64, Box::new(handler)) {
            lock(&self.tasks).remove(&id);
            sink.lock().await.stop().await;
            return self.shared.failed(id, "the connector's consumer has stopped".into());
        }
        self.shared.metrics.task_started();
        tracing::info!(connector = %cfg.name, task = id, "task started");
    }

    /// Stops task `id` once its `put` (if any) ends: flush, stop. The others run on.
    pub(crate) async fn remove(&self, id: usize) {
        let name = &self.shared.config.name;
        tracing::info!(connector = %name, task = id, "stopping task");
        let out = tokio::time::timeout(CLOSE_TIMEOUT * 3, self.control.remove(id as u64)).await;
        let Some(sink) = lock(&self.tasks).remove(&id) else { return };
        if out.is_err() {
            tracing::warn!(connector = %name, task = id, "its put did not end in time: stopped anyway");
        }
        stop_sink(&self.shared, id, &sink, true).await;
        self.shared.metrics.task_ended(false);
        tracing::info!(connector = %name, task = id, failed = false, "task stopped");
    }

    /// Aborts the running `put`s and closes the consumer now.
    pub(crate) fn abort(&self) {
        self.handle.abort();
    }

    /// Stops every task gracefully: no more records, the running `put`s finish, what was not
    /// started goes back, the outcomes are sent, the consumer closes; then each task flushes
    /// and stops.
    pub(crate) async fn stop(&self) {
        self.handle.close(CLOSE_TIMEOUT);
        let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(j) = ended {
            if let Err(e) = j.await {
                tracing::error!(connector = %self.shared.config.name, "the connector's engine task failed: {e}");
            }
        }
    }
}

/// Follows the engine: a retired task is recorded and stopped; when the engine ends, every
/// task left is flushed (unless the engine failed) and stopped.
async fn watch(
    shared: Arc<ConnectorShared>,
    tasks: Tasks,
    join: impl std::future::Future<Output = crate::Result<crate::processor::Report>>,
    mut retired: mpsc::UnboundedReceiver<Retired>,
) {
    let name = shared.config.name.clone();
    tokio::pin!(join);
    let result = loop {
        tokio::select! {
            r = &mut join => break r,
            Some((key, why)) = retired.recv() => {
                let id = key as usize;
                let sink = lock(&tasks).remove(&id);
                shared.failed(id, why);
                if let Some(sink) = sink {
                    stop_sink(&shared, id, &sink, false).await;
                }
                shared.metrics.task_ended(true);
                tracing::info!(connector = %name, task = id, failed = true, "task stopped");
            }
        }
    };
    // Retirements told before the end (e.g. handlers aborted at the deadline).
    while let Ok((key, why)) = retired.try_recv() {
        let id = key as usize;
        let sink = lock(&tasks).remove(&id);
        if let Some(sink) = sink {
            tracing::warn!(connector = %name, task = id, "{why}");
            stop_sink(&shared, id, &sink, false).await;
            shared.metrics.task_ended(true);
        }
    }
    let failed = match &result {
        Ok(report) => {
            tracing::info!(connector = %name, ?report, "engine stopped");
            None
        }
        Err(e) => Some(e.to_string()),
    };
    let left: Vec<(usize, SharedSink)> = std::mem::take(&mut *lock(&tasks)).into_iter().collect();
    for (id, sink) in left {
        if let Some(why) = &failed {
            shared.failed(id, why.clone());
        }
        stop_sink(&shared, id, &sink, failed.is_none()).await;
        shared.metrics.task_ended(failed.is_some());
        tracing::info!(connector = %name, task = id, failed = failed.is_some(), "task stopped");
    }
}

/// Flushes (if asked) and stops one task's sink.
async fn stop_sink(shared: &ConnectorShared, id: usize, sink: &SharedSink, flush: bool) {
    let mut sink = sink.lock().await;
    if flush {
        if let Err(e) = sink.flush().await {
            tracing::warn!(connector = %shared.config.name, task = id, "flush at stop failed: {e}");
        }
    }
    sink.stop().await;
}
