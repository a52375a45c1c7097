//! The worker: runs connectors, each as a set of tasks on one share group.
//!
//! In explicit mode (the default) a connector is one or more [`ShareConsumer`](crate::ShareConsumer)s
//! (one per partition of its topics, each keeping two tasks or more: `consumers_for`), each with a
//! processing engine whose batch handlers are its share of the tasks (see `task_pool.rs`): a
//! batch goes to whichever of them is free. In implicit mode each task is a
//! tokio task with its own consumer (`task_runner.rs`). Either way adding or removing a
//! task leaves the others running, and two worker processes on the same connector
//! configuration split the work through the broker (the share group hands records to
//! whichever consumer asks).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin::Admin;
use crate::consumer::ShareConsumerConfig;
use crate::error::{Error, Result};
use crate::producer::{Producer, ProducerConfig};

use super::config::{ConnectorConfig, DeadLetterMode, SinkAckMode, WorkerConfig};
use super::connector::ConnectorShared;
use super::dead_letter::DeadLetter;
use super::metrics::{SinkMetrics, SinkMetricsSnapshot};
use super::pipeline::Pipeline;
use super::registry::Registry;
use super::task::SinkTaskFactory;
use super::task_pool::TaskPool;
use super::task_runner::run_task;

/// The group setting `share.acquisition.lock.timeout.ms` stands for.
const GROUP_LOCK_KEY: &str = "share.record.lock.duration.ms";

/// How long the REST API's check of a group id may take (`Worker::check_group`).
const GROUP_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// The group setting for where a new share group starts.
const OFFSET_RESET_KEY: &str = "share.auto.offset.reset";

/// Where a connector's group starts unless told: a Connect sink's consumer starts at the
/// earliest offset, a new share group at the latest.
const DEFAULT_OFFSET_RESET: &str = "earliest";

/// Runs connectors. Cheap to share by reference; [`close`](Self::close) stops them all.
#[derive(Debug)]
pub struct Worker {
    config: WorkerConfig,
    registry: Registry,
    connectors: Mutex<Vec<Connector>>,
}

impl Worker {
    /// A worker with these client settings and connector classes.
    pub fn new(config: WorkerConfig, registry: Registry) -> Worker {
        Worker { config, registry, connectors: Mutex::new(Vec::new()) }
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Connector>> {
        self.connectors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a connector with `tasks.max` tasks. Fails, before any task starts, on an
    /// unknown `connector.class`, a name already running here, or consumer settings the
    /// consumer refuses. Tasks that fail to start (the sink refused its configuration, no
    /// broker) are reported by [`Connector::failures`] and the log.
    pub async fn start_connector(&self, config: ConnectorConfig) -> Result<Connector> {
        if self.list().iter().any(|c| c.name() == config.name && !c.inner.stopped.load(Ordering::Acquire)) {
            return Err(Error::config(
                "name",
                format!("a connector named {:?} runs already on this worker", config.name),
            ));
        }
        let (factory, config, pipeline) = self.prepare(config)?;
        let mut props = self.config.consumer_properties(&config);
        props.set("group.id", config.group_id.clone());
        props.set(
            "share.acknowledgement.mode",
            match config.ack_mode {
                SinkAckMode::Explicit => "explicit",
                SinkAckMode::Implicit => "implicit",
            },
        );
        // Explicit mode runs on the processing engine, which acquires only for its batch in
        // `put` and the one after, and gives back what waits unstarted (or stops acquiring
        // while a `put` is stuck): batch_optimized's prefetch then costs nobody else, and
        // fetch and `put` overlap. Implicit mode keeps the poll loop, so a task acquires
        // only what it puts next (record_limit: no prefetch) unless told otherwise: records
        // prefetched behind a slow `put` would wait there, locked, while idle tasks could
        // take them. On a 4.1 cluster (no ShareFetch v2) it falls back to batch_optimized.
        let acquire_mode_chosen = props.contains("share.acquire.mode") || config.ack_mode == SinkAckMode::Explicit;
        if !acquire_mode_chosen {
            props.set("share.acquire.mode", "record_limit");
        }
        let consumer = ShareConsumerConfig::from_properties(&props)?;
        let admin = self.admin(&config).await;
        if let Some(admin) = &admin {
            if let Some(kind) = other_group_type(&config, admin).await {
                return Err(group_taken(&config, &kind));
            }
            self.prepare_group(&config, admin).await;
        }
        let consumers = match config.ack_mode {
            SinkAckMode::Explicit => consumer_count(&config, admin.as_ref()).await,
            SinkAckMode::Implicit => 1,
        };
        if config.dlq_mode == DeadLetterMode::Broker {
            // Unlike the other preparations this one must hold: without it the broker
            // archives a REJECTed record without a copy.
            self.prepare_broker_dead_letter(&config).await?;
        }
        let dead_letter = match &config.dlq_topic {
            Some(_) if config.dlq_mode == DeadLetterMode::Broker => None,
            Some(topic) => {
                let producer_config = ProducerConfig::from_properties(&self.config.producer_properties())?;
                let producer = Producer::connect(producer_config).await?;
                Some(Arc::new(DeadLetter::new(
                    topic.clone(),
                    producer,
                    config.dlq_context_headers,
                    &config.name,
                    &config.connector_class,
                )))
            }
            None => None,
        };
        let tasks = config.tasks_max;
        let shared = Arc::new(ConnectorShared {
            metrics: Arc::new(SinkMetrics::new(&config.name)),
            config,
            consumer,
            record_limit_fallback: !acquire_mode_chosen,
            record_limit_refused: AtomicBool::new(false),
            factory,
            dead_letter,
            pipeline,
            failures: Mutex::new(Vec::new()),
        });
        let connector = Connector {
            inner: Arc::new(ConnectorInner {
                shared,
                tasks: Mutex::new(Vec::new()),
                consumers,
                pools: Mutex::new(Vec::new()),
                changes: tokio::sync::Mutex::new(()),
                next_id: AtomicUsize::new(0),
                stopped: AtomicBool::new(false),
            }),
        };
        connector.set_tasks(tasks).await?;
        tracing::info!(connector = %connector.name(), tasks, group = %connector.inner.shared.config.group_id, "connector started");
        self.list().push(connector.clone());
        Ok(connector)
    }

    /// What a start decides before it connects anywhere: the class's factory, the worker's
    /// default converters filled in, the converters and transforms built.
    fn prepare(
        &self,
        config: ConnectorConfig,
    ) -> Result<(Arc<dyn SinkTaskFactory>, ConnectorConfig, Option<Pipeline>)> {
        let factory = self
            .registry
            .get(&config.connector_class)
            .map_err(|e| Error::config("connector.class", e.to_string()))?;
        let mut config = config;
        self.config.default_converters(&mut config.task_config);
        let pipeline = Pipeline::from_config(&config.task_config, &self.registry)?;
        Ok((factory, config, pipeline))
    }

    /// Checks `config` as [`start_connector`](Self::start_connector) would before it
    /// connects: a known `connector.class`, converters and transforms that build. Nothing
    /// starts (the REST API's validation and its 400 answers).
    pub(crate) fn check_connector(&self, config: ConnectorConfig) -> Result<()> {
        self.prepare(config).map(|_| ())
    }

    /// Refuses a `share.group.id` (by default `connect-<name>`) that a group of another type
    /// holds, as a start would: Kafka Connect's consumer group of a connector of the same
    /// name has that id, and a share group cannot take it (its heartbeats fail with
    /// GROUP_ID_NOT_FOUND). A cluster that cannot be asked (within `GROUP_CHECK_TIMEOUT`)
    /// refuses nothing: the start checks again.
    pub(crate) async fn check_group(&self, config: &ConnectorConfig) -> Result<()> {
        let Ok(admin_config) = Admin::config_from_properties(&self.config.admin_properties()) else { return Ok(()) };
        let check = async {
            let admin = Admin::connect(admin_config)
                .await
                .inspect_err(|e| tracing::debug!(connector = %config.name, "checking the group id: {e}"))
                .ok()?;
            other_group_type(config, &admin).await
        };
        match tokio::time::timeout(GROUP_CHECK_TIMEOUT, check).await {
            Ok(Some(kind)) => Err(group_taken(config, &kind)),
            _ => Ok(()),
        }
    }

    /// Its client settings.
    pub(crate) fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The connector classes this worker can start.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Drops the stopped connectors from [`connectors`](Self::connectors): the REST API
    /// restarts a connector as a new one, and deletes them.
    pub(crate) fn forget_stopped(&self) {
        self.list().retain(|c| !c.inner.stopped.load(Ordering::Acquire));
    }

    /// The admin client for a connector's start-up, or `None` (logged): the tasks can run
    /// without what it prepares.
    async fn admin(&self, config: &ConnectorConfig) -> Option<Admin> {
        let admin = match Admin::config_from_properties(&self.config.admin_properties()) {
            Ok(c) => Admin::connect(c).await,
            Err(e) => Err(e),
        };
        admin
            .inspect_err(
                |e| tracing::warn!(connector = %config.name, "no admin client to check the group's settings: {e}"),
            )
            .ok()
    }

    /// Group-side preparations through the admin client: the DLQ topic, the group's lock
    /// duration and offset reset. Each failure is logged, not fatal: the tasks can run
    /// without them (the producer creates a missing topic if the broker allows it).
    async fn prepare_group(&self, config: &ConnectorConfig, admin: &Admin) {
        if let Some(topic) = config.dlq_topic.as_ref().filter(|_| config.dlq_mode == DeadLetterMode::Client) {
            // Connect creates its DLQ topic too (one partition, the given replication).
            let new = crate::admin::NewTopic::new(topic.clone(), 1).replication_factor(config.dlq_replication_factor);
            match admin.create_topics(&[new]).await {
                Ok(results) => {
                    for r in results {
                        match r {
                            Err(e) if e.code() != Some(crate::ErrorCode::TOPIC_ALREADY_EXISTS) => {
                                tracing::warn!(connector = %config.name, "creating dead-letter topic {topic}: {e}")
                            }
                            _ => {}
                        }
                    }
                }
                Err(e) => tracing::warn!(connector = %config.name, "creating dead-letter topic {topic}: {e}"),
            }
        }
        let entries = admin
            .describe_group_configs(&config.group_id)
            .await
            .inspect_err(|e| tracing::debug!(connector = %config.name, "describing group configs: {e}"))
            .ok();
        self.prepare_offset_reset(config, admin, entries.as_deref()).await;
        let want = config.lock_timeout.as_millis().to_string();
        let current = entries.and_then(|e| e.into_iter().find(|e| e.name == GROUP_LOCK_KEY).and_then(|e| e.value));
        if current.as_deref() == Some(want.as_str()) {
            return;
        }
        if config.update_group_config {
            match admin.set_group_config(&config.group_id, GROUP_LOCK_KEY, &want).await {
                Ok(()) => {
                    tracing::info!(connector = %config.name, "set {GROUP_LOCK_KEY}={want} on group {}", config.group_id)
                }
                Err(e) => {
                    tracing::warn!(connector = %config.name, "setting {GROUP_LOCK_KEY}={want} on group {}: {e}", config.group_id)
                }
            }
        } else {
            tracing::warn!(
                connector = %config.name,
                "share.acquisition.lock.timeout.ms={want} but group {} has {GROUP_LOCK_KEY}={}; the group's value applies \
                 (set share.group.config.update=true to let the runtime set it, or alter the group config)",
                config.group_id,
                current.as_deref().unwrap_or("the broker default")
            );
        }
    }

    /// Where the group starts: the connector's `share.auto.offset.reset` (or
    /// `consumer.override.auto.offset.reset`) when given; else `earliest`, where Connect's
    /// consumer starts, on a group that has no setting of its own yet (a new share group
    /// would start at latest and skip the backlog). A group's own setting is left as it is.
    /// It runs before any member joins: the setting is the group's, so it covers partitions
    /// (and topics) that appear later too.
    async fn prepare_offset_reset(
        &self,
        config: &ConnectorConfig,
        admin: &Admin,
        entries: Option<&[crate::admin::ConfigEntry]>,
    ) {
        let (name, group) = (&config.name, &config.group_id);
        let reset = match &config.auto_offset_reset {
            Some(reset) => reset.as_str(),
            None => {
                let own = entries
                    .and_then(|e| e.iter().find(|e| e.name == OFFSET_RESET_KEY))
                    .filter(|e| e.source == crate::admin::ConfigSource::Group);
                if let Some(own) = own {
                    tracing::info!(
                        connector = %name,
                        "group {group} has {OFFSET_RESET_KEY}={} of its own: left as it is",
                        own.value.as_deref().unwrap_or("?")
                    );
                    return;
                }
                if entries.is_none() {
                    // Unknown: setting it anyway could move a group that has a setting.
                    tracing::warn!(connector = %name, "could not read group {group}'s configs; {OFFSET_RESET_KEY} left as it is");
                    return;
                }
                DEFAULT_OFFSET_RESET
            }
        };
        match admin.set_share_auto_offset_reset(group, reset).await {
            Ok(()) => tracing::info!(connector = %name, "set {OFFSET_RESET_KEY}={reset} on group {group}"),
            Err(e) => tracing::warn!(connector = %name, "setting {OFFSET_RESET_KEY}={reset} on {group}: {e}"),
        }
    }

    /// `errors.deadletterqueue.mode=broker`: the group's dead-letter queue on the broker, set
    /// up (or checked) before any task runs; an error stops the connector's start.
    async fn prepare_broker_dead_letter(&self, config: &ConnectorConfig) -> Result<()> {
        let Some(topic) = &config.dlq_topic else { return Ok(()) };
        let admin_config = Admin::config_from_properties(&self.config.admin_properties())?;
        let admin = Admin::connect(admin_config).await?;
        let dlq = crate::admin::DeadLetterQueue::new(topic.clone()).created_with(1, config.dlq_replication_factor);
        admin.enable_share_dead_letter_queue(&config.group_id, &dlq).await.map_err(|e| match e {
            Error::Unsupported { .. } | Error::Config { .. } => Error::config(
                "errors.deadletterqueue.mode",
                format!("broker: {e}; use errors.deadletterqueue.mode=client (the runtime writes the topic)"),
            ),
            e => e,
        })?;
        tracing::info!(connector = %config.name, "group {} dead-letters to {topic} on the broker", config.group_id);
        Ok(())
    }

    /// The connectors started here (running or stopped).
    pub fn connectors(&self) -> Vec<Connector> {
        self.list().clone()
    }

    /// The metrics of every running connector.
    pub fn metrics(&self) -> Vec<SinkMetricsSnapshot> {
        self.list()
            .iter()
            .filter(|c| !c.inner.stopped.load(Ordering::Acquire))
            .map(Connector::metrics)
            .collect()
    }

    /// Closes every connector (see [`Connector::close`]), all within `timeout`.
    pub async fn close(self, timeout: Duration) -> Result<()> {
        let connectors = self.list().clone();
        let results = futures::future::join_all(connectors.iter().map(|c| c.close(timeout))).await;
        results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    }
}

/// The type of the group holding the connector's group id when it is not a share group
/// (`classic`, `consumer`, `streams`); `None` for a share group, no group, or no answer
/// (logged).
async fn other_group_type(config: &ConnectorConfig, admin: &Admin) -> Option<String> {
    match admin.group_type(&config.group_id).await {
        Ok(Some(kind)) if !kind.eq_ignore_ascii_case("share") => Some(kind),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(connector = %config.name, "could not check the type of group {}: {e}", config.group_id);
            None
        }
    }
}

/// The refusal of a group id a group of type `kind` holds, naming the fix.
fn group_taken(config: &ConnectorConfig, kind: &str) -> Error {
    let group = &config.group_id;
    let default = format!("connect-{}", config.name) == *group;
    Error::config(
        "share.group.id",
        format!(
            "{group} is a {kind} group{}, and a share group cannot take the id of a group of another type: set \
             share.group.id to a new id (e.g. {group}-share; the connector then starts where \
             share.auto.offset.reset says, not at that group's offsets), or delete the old group if nothing uses \
             it (kafka-consumer-groups.sh --delete --group {group})",
            if default { " (the id Kafka Connect's consumer group of a connector of this name has)" } else { "" }
        ),
    )
}

/// How many share consumers explicit mode may spread a connector's tasks over:
/// `share.consumers.max`, else one per partition of `topics` at start (`consumers_for` says
/// how many of them run for a count of tasks). A share session has one request in flight, so
/// partitions sharing a consumer take turns: the fetch that carries one partition's
/// acknowledgements comes back with that partition's next batch while the other partitions'
/// acknowledgements wait behind it. A consumer per partition gives each its own session.
/// With `topics.regex`, or when the partitions cannot be read, one.
async fn consumer_count(config: &ConnectorConfig, admin: Option<&Admin>) -> usize {
    if let Some(n) = config.consumers_max {
        return n;
    }
    let (Some(admin), false) = (admin, config.topics.is_empty()) else { return 1 };
    let names: Vec<&str> = config.topics.iter().map(String::as_str).collect();
    match admin.describe_topics(&names).await {
        Ok(topics) => topics.iter().map(|t| t.as_ref().map_or(0, |d| d.partitions.len())).sum::<usize>().max(1),
        Err(e) => {
            tracing::warn!(connector = %config.name, "reading the topics' partitions (one consumer for all tasks): {e}");
            1
        }
    }
}

/// How many consumers run `n` tasks, at most `cap` (`consumer_count`). By default each keeps
/// at least two tasks: the broker gives each partition to one member while there are no
/// more members than partitions, so a consumer whose only task is stuck in a slow `put`
/// would hold its partitions back (the engine acquires nothing for a busy slot), which is
/// the head-of-line blocking a share group is for avoiding. With its second task the
/// partition's other records go on. `share.consumers.max`, when set, is the user's choice:
/// one task each is then allowed (Connect's own model, a consumer per task).
fn consumers_for(n: usize, cap: usize, chosen: bool) -> usize {
    let each = if chosen { 1 } else { 2 };
    if n == 0 {
        0
    } else {
        (n / each).clamp(1, cap.max(1))
    }
}

/// How many of `n` tasks each of `pools` consumers runs: as even as can be, the first ones
/// one more.
fn spread(n: usize, pools: usize) -> impl Iterator<Item = usize> {
    (0..pools).map(move |i| n / pools + usize::from(i < n % pools))
}

struct TaskHandle {
    id: usize,
    stop: watch::Sender<bool>,
    join: JoinHandle<()>,
}

struct ConnectorInner {
    shared: Arc<ConnectorShared>,
    /// Implicit mode: one tokio task (and consumer) per task.
    tasks: Mutex<Vec<TaskHandle>>,
    /// Explicit mode: at most this many consumers (see `consumer_count`).
    consumers: usize,
    /// Explicit mode: the connector's consumers, each with its engine, the tasks as their
    /// batch handlers (spread over them, `spread`).
    pools: Mutex<Vec<Arc<TaskPool>>>,
    /// Serializes `set_tasks` and `stop`, so two changes never count the same tasks.
    changes: tokio::sync::Mutex<()>,
    next_id: AtomicUsize,
    stopped: AtomicBool,
}

/// A running connector: a handle, cheap to clone.
#[derive(Clone)]
pub struct Connector {
    inner: Arc<ConnectorInner>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector").field("name", &self.name()).field("tasks", &self.tasks()).finish()
    }
}

impl Connector {
    /// `name`.
    pub fn name(&self) -> &str {
        &self.inner.shared.config.name
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ConnectorConfig {
        &self.inner.shared.config
    }

    fn handles(&self) -> std::sync::MutexGuard<'_, Vec<TaskHandle>> {
        self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts or stops tasks until `n` run. The other tasks keep running throughout: a new
    /// task joins the share group beside them, a removed one finishes its batch, commits
    /// its acknowledgements and closes (the newest tasks go first). A task that ended on
    /// its own (a fatal error) counts as gone, so this also restarts failed tasks.
    /// [`Error::Closed`] once the connector is stopped.
    pub async fn set_tasks(&self, n: usize) -> Result<()> {
        let _serial = self.inner.changes.lock().await;
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.inner.shared.config.ack_mode == SinkAckMode::Explicit {
            self.set_pool_tasks(n).await;
            return Ok(());
        }
        let removed: Vec<TaskHandle> = {
            let mut tasks = self.handles();
            tasks.retain(|t| !t.join.is_finished());
            while tasks.len() < n {
                let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                let (stop, rx) = watch::channel(false);
                let join = tokio::spawn(run_task(id, self.inner.shared.clone(), rx));
                tasks.push(TaskHandle { id, stop, join });
            }
            let keep = n.min(tasks.len());
            tasks.drain(keep..).collect()
        };
        for t in &removed {
            tracing::info!(connector = %self.name(), task = t.id, "stopping task");
            let _ = t.stop.send(true);
        }
        // A task never panics on purpose; if one did, its records went back on close/drop.
        futures::future::join_all(removed.into_iter().map(|t| t.join)).await;
        Ok(())
    }

    fn pools(&self) -> std::sync::MutexGuard<'_, Vec<Arc<TaskPool>>> {
        self.inner.pools.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Explicit mode's `set_tasks`: the tasks spread over `consumers_for(n)` engines, each
    /// with its own consumer. Engines that are not running (the first call, or after their
    /// consumer failed) are started anew; the newest engines stop whole when fewer are
    /// needed (each task finishes its `put`, flushes and stops); within an engine tasks are
    /// added, or removed newest first once their `put` ends.
    async fn set_pool_tasks(&self, n: usize) {
        let chosen = self.inner.shared.config.consumers_max.is_some();
        let want = consumers_for(n, self.inner.consumers, chosen);
        let mut pools: Vec<Arc<TaskPool>> = self.pools().iter().filter(|p| !p.is_finished()).cloned().collect();
        let gone: Vec<Arc<TaskPool>> = pools.drain(want.min(pools.len())..).collect();
        futures::future::join_all(gone.iter().map(|p| p.stop())).await;
        let mut counts = spread(n, want);
        for (i, pool) in pools.iter().enumerate() {
            let count = counts.next().unwrap_or(0);
            self.set_tasks_of(pool, count).await;
            tracing::debug!(connector = %self.name(), consumer = i, tasks = count, "consumer's tasks set");
        }
        for i in pools.len()..want {
            let count = counts.next().unwrap_or(0);
            match TaskPool::start(self.inner.shared.clone(), i, want).await {
                Ok(p) => {
                    let p = Arc::new(p);
                    self.set_tasks_of(&p, count).await;
                    pools.push(p);
                }
                Err(why) => {
                    // Each task that could not start is a failure, as in implicit mode.
                    for _ in 0..count {
                        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                        self.inner.shared.failed(id, why.clone());
                    }
                }
            }
        }
        *self.pools() = pools;
    }

    /// Adds tasks to one engine, or removes its newest, until `n` run there.
    async fn set_tasks_of(&self, pool: &TaskPool, n: usize) {
        let live = pool.live();
        for _ in live.len()..n {
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            pool.add(id).await;
        }
        // The newest go first; each leaves once its put ends.
        let extra = live.len().saturating_sub(n);
        futures::future::join_all(live.iter().rev().take(extra).map(|&id| pool.remove(id))).await;
    }

    /// How many tasks run.
    pub fn tasks(&self) -> usize {
        if self.inner.shared.config.ack_mode == SinkAckMode::Explicit {
            return self.pools().iter().map(|p| p.live().len()).sum();
        }
        self.handles().iter().filter(|t| !t.join.is_finished()).count()
    }

    /// Tasks that stopped on an error, as (task id, why), oldest first.
    pub fn failures(&self) -> Vec<(usize, String)> {
        self.inner.shared.failures.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The connector's metrics (all tasks together).
    pub fn metrics(&self) -> SinkMetricsSnapshot {
        self.inner.shared.metrics.snapshot()
    }

    /// Closes every task gracefully within `timeout`: each stops taking records, finishes
    /// its batch (acknowledging it), flushes, commits and closes. Tasks still running at the
    /// deadline are aborted (their consumer's drop gives their records back after the lock)
    /// and the answer is [`Error::Timeout`]. (Connect's `stop`, the STOPPED state that keeps
    /// the configuration, is the REST layer's [`Herder::stop`](super::rest::Herder::stop).)
    pub async fn close(&self, timeout: Duration) -> Result<()> {
        let _serial = self.inner.changes.lock().await;
        if self.inner.stopped.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let tasks: Vec<TaskHandle> = self.handles().drain(..).collect();
        for t in &tasks {
            let _ = t.stop.send(true);
        }
        let aborts: Vec<_> = tasks.iter().map(|t| t.join.abort_handle()).collect();
        let pools: Vec<Arc<TaskPool>> = std::mem::take(&mut *self.pools());
        let all = async {
            let stop_pools = futures::future::join_all(pools.iter().map(|p| p.stop()));
            futures::future::join(futures::future::join_all(tasks.into_iter().map(|t| t.join)), stop_pools).await
        };
        let outcome = tokio::time::timeout(timeout, all).await;
        if let Some(dlq) = &self.inner.shared.dead_letter {
            dlq.close().await;
        }
        match outcome {
            Ok(_) => {
                tracing::info!(connector = %self.name(), "connector stopped");
                Ok(())
            }
            Err(_) => {
                for a in aborts {
                    a.abort();
                }
                for p in &pools {
                    p.abort();
                }
                Err(Error::Timeout { what: format!("stopping connector {}", self.name()), after: timeout })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{consumers_for, spread};

    #[test]
    fn by_default_each_consumer_keeps_two_tasks_unless_the_user_chose_the_count() {
        // 3 partitions: 3 tasks run on one consumer, 4-5 on two, 6 and more on three.
        let by_default: Vec<usize> = (0..8).map(|n| consumers_for(n, 3, false)).collect();
        assert_eq!(by_default, [0, 1, 1, 1, 2, 2, 3, 3]);
        // share.consumers.max=3: a consumer per task up to 3.
        let chosen: Vec<usize> = (0..5).map(|n| consumers_for(n, 3, true)).collect();
        assert_eq!(chosen, [0, 1, 2, 3, 3]);
        // One partition (or a regex): one consumer whatever the tasks.
        assert_eq!(consumers_for(24, 1, false), 1);
    }

    #[test]
    fn tasks_spread_evenly_over_the_consumers_the_first_ones_one_more() {
        assert_eq!(spread(3, 3).collect::<Vec<_>>(), [1, 1, 1]);
        assert_eq!(spread(8, 3).collect::<Vec<_>>(), [3, 3, 2]);
        assert_eq!(spread(24, 3).collect::<Vec<_>>(), [8, 8, 8]);
        assert_eq!(spread(1, 1).collect::<Vec<_>>(), [1]);
        assert_eq!(spread(0, 0).count(), 0);
    }
}
