//! The connectors the REST API manages, by name: each one's configuration, what the user
//! last asked it to do (running, paused, stopped) and, while it runs, the worker's
//! [`Connector`]. Every change goes through the [`Worker`] (start, stop, `set_tasks`) and is
//! written to the store; this decides nothing the runtime does not.
//!
//! Pausing and stopping both stop the connector's tasks (its share consumer leaves the
//! group, its records go to the other members, as in a rebalance); they differ in what the
//! status reports. Resuming, restarting and a new configuration start it again.
//!
//! Calls are serialized: one change at a time, as Connect's standalone herder does.
//!
//! In distributed mode ([`Herder::distributed`]) a change is not made here directly: it is
//! written to the config topic, and made when the topic's follower reads it back
//! (`Herder::apply`), on this worker as on every other, in the topic's order; the call
//! answers after this worker's follower has applied it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::config_records::{
    connector_record, connector_tombstone, restart_record, target_record, target_tombstone, ConfigRecord,
};
use super::config_topic::{ConfigTopic, Distributed};
use super::error::RestError;
use super::store::{Store, Stored, TargetState};
use crate::sink::{Connector, ConnectorConfig, Worker};

/// How long stopping a connector's tasks may take (they finish their batch and commit).
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A connector's or a task's state, by Connect's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectorState {
    /// Running.
    Running,
    /// Paused by the user.
    Paused,
    /// Stopped by the user (no tasks).
    Stopped,
    /// Failed: it could not start, or the task stopped on an error.
    Failed,
    /// Not running here yet (a task the connector has not started).
    Unassigned,
    /// Being restarted (in the answer to a restart).
    Restarting,
}

impl ConnectorState {
    /// Connect's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectorState::Running => "RUNNING",
            ConnectorState::Paused => "PAUSED",
            ConnectorState::Stopped => "STOPPED",
            ConnectorState::Failed => "FAILED",
            ConnectorState::Unassigned => "UNASSIGNED",
            ConnectorState::Restarting => "RESTARTING",
        }
    }
}

/// One task's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStatus {
    /// 0 .. `tasks.max`.
    pub id: usize,
    /// Its state.
    pub state: ConnectorState,
    /// Why it failed.
    pub trace: Option<String>,
}

/// `GET /connectors/{name}/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorStatus {
    /// The connector.
    pub name: String,
    /// The connector's state.
    pub state: ConnectorState,
    /// Why it failed.
    pub trace: Option<String>,
    /// Its tasks (none when stopped).
    pub tasks: Vec<TaskStatus>,
}

/// `GET /connectors/{name}`: the configuration and the task count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorInfo {
    /// The connector.
    pub name: String,
    /// Its configuration, as given.
    pub config: BTreeMap<String, String>,
    /// How many tasks it has (`tasks.max`; none when stopped).
    pub tasks: usize,
}

struct Entry {
    config: BTreeMap<String, String>,
    target: TargetState,
    running: Option<Connector>,
    /// Why the last start failed.
    failure: Option<String>,
}

/// The connectors under REST management on one [`Worker`]. Its methods are the REST API's
/// calls without HTTP (so a program embeds the same control); [`RestServer`](super::RestServer)
/// serves them.
pub struct Herder {
    worker: Worker,
    store: Store,
    entries: Mutex<BTreeMap<String, Entry>>,
    /// Distributed mode: changes go through the config topic (see `config_topic`).
    distributed: Option<Distributed>,
}

impl std::fmt::Debug for Herder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Herder")
            .field("worker", &self.worker)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// Parses a configuration as the worker would start it; a 400 answer if it refuses it.
fn parse(worker: &Worker, config: &BTreeMap<String, String>) -> Result<ConnectorConfig, RestError> {
    let class = config.get("connector.class").map(String::as_str).unwrap_or("").to_string();
    let parsed = ConnectorConfig::from_pairs(config.clone()).map_err(|e| RestError::invalid_config(&class, &e))?;
    worker.check_connector(parsed.clone()).map_err(|e| RestError::invalid_config(&class, &e))?;
    Ok(parsed)
}

impl Herder {
    /// Manages connectors on `worker`, keeping their configurations in `store_file` (the
    /// worker setting `config.storage.file.filename`; `None`: kept in memory only).
    pub fn new(worker: Worker, store_file: Option<std::path::PathBuf>) -> Herder {
        Herder { worker, store: Store::new(store_file), entries: Mutex::new(BTreeMap::new()), distributed: None }
    }

    /// Distributed mode: the connectors are kept in the compacted topic `topic` (created when
    /// missing) and shared by every worker on it. The herder reads the topic to its end
    /// (starting the connectors there) before it returns, then follows it: a change made
    /// through any worker's REST API reaches this one's connectors too.
    ///
    /// # Errors
    /// The cluster cannot be reached, the topic cannot be created, or it cannot be read to
    /// its end within a minute.
    pub async fn distributed(worker: Worker, topic: ConfigTopic) -> crate::Result<Arc<Herder>> {
        let link = Distributed::connect(&worker, &topic).await?;
        let herder = Arc::new(Herder {
            worker,
            store: Store::new(None),
            entries: Mutex::new(BTreeMap::new()),
            distributed: Some(link),
        });
        if let Some(d) = &herder.distributed {
            if let Err(e) = d.follow(Arc::downgrade(&herder)).await {
                herder.close().await;
                return Err(e);
            }
        }
        Ok(herder)
    }

    /// Applies one record of the config topic to this worker's connectors.
    pub(super) async fn apply(&self, record: ConfigRecord) {
        let Some(d) = &self.distributed else { return };
        match record {
            ConfigRecord::Connector { name, config: Some(config) } => {
                let target = d.take_target(&name);
                if let Err(e) = self.put(&name, config, target, false).await {
                    tracing::warn!(connector = %name, "configuration from the config topic refused: {e}");
                }
            }
            ConfigRecord::Connector { name, config: None } => {
                d.hold_target(&name, None);
                // A tombstone of a connector this worker never ran (deleted before it
                // started) is the usual NotFound: nothing to do.
                match self.remove(&name).await {
                    Ok(()) | Err(RestError::NotFound { .. }) => {}
                    Err(e) => tracing::warn!(connector = %name, "deletion from the config topic failed: {e}"),
                }
            }
            ConfigRecord::Target { name, state } => {
                let known = self.entries.lock().await.contains_key(&name);
                match (known, state) {
                    (true, Some(s)) => {
                        if let Err(e) = self.change_target(&name, s).await {
                            tracing::warn!(connector = %name, "target state from the config topic not applied: {e}");
                        }
                    }
                    (_, state) => d.hold_target(&name, state),
                }
            }
            ConfigRecord::Restart { name, only_failed, .. } => {
                // Each worker restarts its own tasks, judged failed or not by its own status.
                match self.restart_here(&name, only_failed).await {
                    Ok(_) | Err(RestError::NotFound { .. }) => {}
                    Err(e) => tracing::warn!(connector = %name, "restart from the config topic failed: {e}"),
                }
            }
            ConfigRecord::Other(_) => {}
        }
    }

    /// The worker it runs connectors on.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// Starts the connectors in the store, each in the state it was left in (a paused one
    /// stays paused). Call once, before serving. Answers how many there were.
    pub async fn restore(&self) -> Result<usize, RestError> {
        let stored = self.store.load()?;
        let n = stored.len();
        for (name, s) in stored {
            if let Err(e) = self.put(&name, s.config, Some(s.state), false).await {
                // A stored configuration this build refuses stays listed, FAILED, so the
                // user sees it and can fix it through PUT .../config.
                tracing::warn!(connector = %name, "stored configuration refused: {e}");
            }
        }
        Ok(n)
    }

    /// The connectors' names, sorted.
    pub async fn names(&self) -> Vec<String> {
        self.entries.lock().await.keys().cloned().collect()
    }

    /// `POST /connectors`: a new connector (409 if the name exists), started in `initial`
    /// (running when `None`).
    pub async fn create(
        &self,
        name: &str,
        config: BTreeMap<String, String>,
        initial: Option<TargetState>,
    ) -> Result<ConnectorInfo, RestError> {
        if self.entries.lock().await.contains_key(name) {
            return Err(RestError::Conflict { name: name.to_string() });
        }
        self.put(name, config, initial, true).await.map(|(info, _)| info)
    }

    /// `PUT /connectors/{name}/config`: creates the connector, or restarts it with the new
    /// configuration (a paused one stays paused). Answers whether it was created.
    pub async fn put_config(
        &self,
        name: &str,
        config: BTreeMap<String, String>,
    ) -> Result<(ConnectorInfo, bool), RestError> {
        self.put(name, config, None, true).await
    }

    /// `PATCH /connectors/{name}/config` (KIP-477): the settings given replace theirs, a
    /// `None` removes one; then as [`put_config`](Self::put_config). 404 if it does not exist.
    pub async fn patch_config(
        &self,
        name: &str,
        patch: BTreeMap<String, Option<String>>,
    ) -> Result<ConnectorInfo, RestError> {
        let mut config = self.config(name).await?;
        for (k, v) in patch {
            match v {
                Some(v) => config.insert(k, v),
                None => config.remove(&k),
            };
        }
        self.put(name, config, None, true).await.map(|(info, _)| info)
    }

    async fn put(
        &self,
        name: &str,
        mut config: BTreeMap<String, String>,
        target: Option<TargetState>,
        persist: bool,
    ) -> Result<(ConnectorInfo, bool), RestError> {
        match config.get("name") {
            Some(n) if n != name => {
                return Err(RestError::BadRequest {
                    message: format!(
                        "Connector name configuration ({n}) doesn't match connector name in the URL ({name})"
                    ),
                })
            }
            Some(_) => {}
            None => {
                config.insert("name".to_string(), name.to_string());
            }
        }
        let mut checked = parse(&self.worker, &config);
        if let (true, Ok(parsed)) = (persist, &checked) {
            // A user's call: a group id held by a group of another type is a 400 now, not a
            // task failing at its first heartbeat.
            if let Err(e) = self.worker.check_group(parsed).await {
                checked = Err(RestError::invalid_config(parsed.connector_class(), &e));
            }
        }
        if let (true, Some(d)) = (persist, &self.distributed) {
            checked?;
            let created = !self.entries.lock().await.contains_key(name);
            let mut records = Vec::new();
            if let Some(t) = target {
                records.push(target_record(name, t));
            }
            records.push(connector_record(name, &config));
            d.publish(records).await?;
            return Ok((self.info(name).await?, created));
        }
        let mut entries = self.entries.lock().await;
        let created = !entries.contains_key(name);
        if let Err(e) = checked {
            if persist || !created {
                return Err(e);
            }
            // A stored configuration that no longer parses: kept, FAILED, fixable.
            let failure = Some(e.to_string());
            entries.insert(
                name.to_string(),
                Entry { config, target: target.unwrap_or(TargetState::Running), running: None, failure },
            );
            return Err(e);
        }
        if let Some(e) = entries.get(name) {
            // The same settings again (a connector file at every start): nothing to restart.
            let settled = e.target != TargetState::Running || e.running.is_some();
            if e.config == config && target.is_none_or(|t| t == e.target) && settled {
                return Ok((info_of(name, e), false));
            }
        }
        let entry = entries.entry(name.to_string()).or_insert_with(|| Entry {
            config: BTreeMap::new(),
            target: TargetState::Running,
            running: None,
            failure: None,
        });
        halt(&self.worker, entry).await;
        entry.config = config;
        if let Some(t) = target {
            entry.target = t;
        }
        if entry.target == TargetState::Running {
            start(&self.worker, entry).await;
        }
        let info = info_of(name, entry);
        if persist {
            self.save(&entries)?;
        }
        Ok((info, created))
    }

    /// `GET /connectors/{name}`.
    pub async fn info(&self, name: &str) -> Result<ConnectorInfo, RestError> {
        let entries = self.entries.lock().await;
        entries.get(name).map(|e| info_of(name, e)).ok_or_else(|| not_found(name))
    }

    /// `GET /connectors/{name}/config`.
    pub async fn config(&self, name: &str) -> Result<BTreeMap<String, String>, RestError> {
        Ok(self.info(name).await?.config)
    }

    /// `GET /connectors/{name}/status`.
    pub async fn status(&self, name: &str) -> Result<ConnectorStatus, RestError> {
        let entries = self.entries.lock().await;
        let e = entries.get(name).ok_or_else(|| not_found(name))?;
        Ok(status_of(name, e))
    }

    /// `PUT /connectors/{name}/pause`: its tasks stop; its configuration stays.
    pub async fn pause(&self, name: &str) -> Result<(), RestError> {
        self.set_target(name, TargetState::Paused).await
    }

    /// `PUT /connectors/{name}/stop`.
    pub async fn stop(&self, name: &str) -> Result<(), RestError> {
        self.set_target(name, TargetState::Stopped).await
    }

    /// `PUT /connectors/{name}/resume`: started again if paused or stopped.
    pub async fn resume(&self, name: &str) -> Result<(), RestError> {
        self.set_target(name, TargetState::Running).await
    }

    async fn set_target(&self, name: &str, target: TargetState) -> Result<(), RestError> {
        if let Some(d) = &self.distributed {
            if !self.entries.lock().await.contains_key(name) {
                return Err(not_found(name));
            }
            return d.publish(vec![target_record(name, target)]).await;
        }
        self.change_target(name, target).await
    }

    async fn change_target(&self, name: &str, target: TargetState) -> Result<(), RestError> {
        let mut entries = self.entries.lock().await;
        let e = entries.get_mut(name).ok_or_else(|| not_found(name))?;
        if e.target == target && (target != TargetState::Running || e.running.is_some()) {
            return Ok(());
        }
        e.target = target;
        match target {
            TargetState::Running => start(&self.worker, e).await,
            TargetState::Paused | TargetState::Stopped => halt(&self.worker, e).await,
        }
        self.save(&entries)
    }

    /// `POST /connectors/{name}/restart`: a running (or failed) connector stopped and
    /// started again, with its tasks (they are one engine here: Connect's restart of the
    /// connector alone restarts them too, so `include_tasks` changes nothing here but is
    /// kept in the config topic's record for Connect's readers); a paused or stopped one is
    /// left so. With `only_failed` (Connect's `onlyFailed=true`) only a connector with a
    /// failure is restarted. Answers the status as it was, what restarts marked
    /// `RESTARTING`, as Connect's `includeTasks=true` answer shows it.
    ///
    /// In distributed mode the restart is a `restart-connector-<name>` record in the config
    /// topic, as Connect writes it: every worker restarts its own tasks of the connector
    /// (with `only_failed`, the workers where it failed), and the answer (this worker's
    /// plan) comes once this worker has applied it.
    pub async fn restart(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<ConnectorStatus, RestError> {
        if let Some(d) = &self.distributed {
            let plan = {
                let entries = self.entries.lock().await;
                restart_plan(name, entries.get(name).ok_or_else(|| not_found(name))?, only_failed).0
            };
            d.publish(vec![restart_record(name, include_tasks, only_failed)]).await?;
            return Ok(plan);
        }
        self.restart_here(name, only_failed).await
    }

    /// The restart on this worker alone (a task restart, or a restart record read from the
    /// config topic).
    pub(super) async fn restart_here(&self, name: &str, only_failed: bool) -> Result<ConnectorStatus, RestError> {
        let mut entries = self.entries.lock().await;
        let e = entries.get_mut(name).ok_or_else(|| not_found(name))?;
        let (plan, restarts) = restart_plan(name, e, only_failed);
        if restarts {
            halt(&self.worker, e).await;
            start(&self.worker, e).await;
        }
        Ok(plan)
    }

    /// `DELETE /connectors/{name}`: stopped and forgotten.
    pub async fn delete(&self, name: &str) -> Result<(), RestError> {
        if let Some(d) = &self.distributed {
            if !self.entries.lock().await.contains_key(name) {
                return Err(not_found(name));
            }
            return d.publish(vec![connector_tombstone(name), target_tombstone(name)]).await;
        }
        self.remove(name).await
    }

    async fn remove(&self, name: &str) -> Result<(), RestError> {
        let mut entries = self.entries.lock().await;
        let mut e = entries.remove(name).ok_or_else(|| not_found(name))?;
        halt(&self.worker, &mut e).await;
        self.save(&entries)
    }

    /// Closes every connector (the process is ending; the store keeps them for the next
    /// start).
    pub async fn close(&self) {
        if let Some(d) = &self.distributed {
            d.stop_following();
        }
        let mut entries = self.entries.lock().await;
        for e in entries.values_mut() {
            halt(&self.worker, e).await;
        }
    }

    fn save(&self, entries: &BTreeMap<String, Entry>) -> Result<(), RestError> {
        let all = entries
            .iter()
            .map(|(n, e)| (n.clone(), Stored { config: e.config.clone(), state: e.target }))
            .collect();
        self.store.save(&all)
    }
}

fn not_found(name: &str) -> RestError {
    RestError::NotFound { name: name.to_string() }
}

/// Starts the entry's connector; a refusal is kept as its failure.
async fn start(worker: &Worker, e: &mut Entry) {
    e.failure = None;
    let started = match ConnectorConfig::from_pairs(e.config.clone()) {
        Ok(c) => worker.start_connector(c).await,
        Err(err) => Err(err),
    };
    match started {
        Ok(c) => e.running = Some(c),
        Err(err) => {
            tracing::warn!(connector = ?e.config.get("name"), "connector failed to start: {err}");
            e.failure = Some(err.to_string());
        }
    }
}

/// Stops the entry's connector, if it runs.
async fn halt(worker: &Worker, e: &mut Entry) {
    if let Some(c) = e.running.take() {
        if let Err(err) = c.close(STOP_TIMEOUT).await {
            tracing::warn!(connector = %c.name(), "stopping: {err}");
        }
        worker.forget_stopped();
    }
}

/// What a restart of `e` does: its status with what restarts marked `RESTARTING`, and
/// whether anything restarts (a paused or stopped connector, or with `only_failed` one
/// without a failure, is left so).
fn restart_plan(name: &str, e: &Entry, only_failed: bool) -> (ConnectorStatus, bool) {
    let mut plan = status_of(name, e);
    let failed = plan.state == ConnectorState::Failed || plan.tasks.iter().any(|t| t.state == ConnectorState::Failed);
    if e.target != TargetState::Running || (only_failed && !failed) {
        return (plan, false);
    }
    plan.state = ConnectorState::Restarting;
    plan.trace = None;
    for t in &mut plan.tasks {
        t.state = ConnectorState::Restarting;
        t.trace = None;
    }
    (plan, true)
}

fn tasks_max(e: &Entry) -> usize {
    e.config.get("tasks.max").and_then(|v| v.trim().parse().ok()).unwrap_or(1)
}

fn info_of(name: &str, e: &Entry) -> ConnectorInfo {
    let tasks = if e.target == TargetState::Stopped { 0 } else { tasks_max(e) };
    ConnectorInfo { name: name.to_string(), config: e.config.clone(), tasks }
}

/// The status, from the target state and the running connector: tasks 0 .. `tasks.max`,
/// the live ones RUNNING, the rest FAILED with the last task failure.
fn status_of(name: &str, e: &Entry) -> ConnectorStatus {
    let n = tasks_max(e);
    let each = |state, trace: Option<String>| -> Vec<TaskStatus> {
        (0..n).map(|id| TaskStatus { id, state, trace: trace.clone() }).collect()
    };
    let (state, trace, tasks) = match (e.target, &e.running, &e.failure) {
        (TargetState::Stopped, _, _) => (ConnectorState::Stopped, None, Vec::new()),
        (TargetState::Paused, _, _) => (ConnectorState::Paused, None, each(ConnectorState::Paused, None)),
        (TargetState::Running, None, failure) => {
            let why = failure.clone().unwrap_or_else(|| "not started".to_string());
            (ConnectorState::Failed, Some(why), Vec::new())
        }
        (TargetState::Running, Some(c), _) => {
            let live = c.tasks();
            let last_failure = c.failures().last().map(|(_, why)| why.clone());
            let tasks = (0..n)
                .map(|id| match id < live {
                    true => TaskStatus { id, state: ConnectorState::Running, trace: None },
                    false => TaskStatus {
                        id,
                        state: if last_failure.is_some() { ConnectorState::Failed } else { ConnectorState::Unassigned },
                        trace: last_failure.clone(),
                    },
                })
                .collect();
            (ConnectorState::Running, None, tasks)
        }
    };
    ConnectorStatus { name: name.to_string(), state, trace, tasks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::{Registry, WorkerConfig};

    fn herder(store: Option<std::path::PathBuf>) -> Herder {
        Herder::new(Worker::new(WorkerConfig::new("127.0.0.1:1"), Registry::with_builtins()), store)
    }

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[tokio::test]
    async fn unknown_names_are_404_everywhere() {
        let h = herder(None);
        assert_eq!(h.info("x").await.unwrap_err().status(), 404);
        assert_eq!(h.config("x").await.unwrap_err().status(), 404);
        assert_eq!(h.status("x").await.unwrap_err().status(), 404);
        assert_eq!(h.pause("x").await.unwrap_err().status(), 404);
        assert_eq!(h.resume("x").await.unwrap_err().status(), 404);
        assert_eq!(h.stop("x").await.unwrap_err().status(), 404);
        assert_eq!(h.restart("x", false, false).await.unwrap_err().status(), 404);
        assert_eq!(h.delete("x").await.unwrap_err().status(), 404);
        assert_eq!(h.patch_config("x", BTreeMap::new()).await.unwrap_err().status(), 404);
        assert!(h.names().await.is_empty());
    }

    #[tokio::test]
    async fn refused_configurations_are_400_and_leave_nothing_behind() {
        let h = herder(None);
        let e = h
            .create("a", config(&[("connector.class", "file"), ("topics", "t"), ("tasks.max", "0")]), None)
            .await;
        let e = e.unwrap_err();
        assert_eq!(e.status(), 400);
        assert!(e.to_string().contains("tasks.max"), "{e}");
        assert!(e.to_string().contains("/connector-plugins/file/config/validate"), "{e}");
        let e = h.create("a", config(&[("connector.class", "nope"), ("topics", "t")]), None).await.unwrap_err();
        assert!(e.to_string().contains("connector.class"), "{e}");
        let e = h.put_config("a", config(&[("name", "b"), ("connector.class", "file"), ("topics", "t")])).await;
        assert!(e.unwrap_err().to_string().contains("doesn't match"));
        assert!(h.names().await.is_empty());
    }

    #[tokio::test]
    async fn created_stopped_it_reports_no_tasks_and_is_stored() {
        let dir = std::env::temp_dir().join(format!("rest-herder-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("connectors.json");
        let h = herder(Some(file.clone()));
        // STOPPED and PAUSED start nothing, so no broker is needed.
        let c = config(&[("connector.class", "file"), ("topics", "t"), ("tasks.max", "3")]);
        let info = h.create("a", c.clone(), Some(TargetState::Stopped)).await.unwrap();
        assert_eq!((info.tasks, info.config.get("name").map(String::as_str)), (0, Some("a")));
        assert_eq!(h.create("a", c.clone(), None).await.unwrap_err().status(), 409);
        let s = h.status("a").await.unwrap();
        assert_eq!((s.state, s.tasks.len()), (ConnectorState::Stopped, 0));
        h.pause("a").await.unwrap();
        let s = h.status("a").await.unwrap();
        assert_eq!(s.state, ConnectorState::Paused);
        assert!(s.tasks.iter().all(|t| t.state == ConnectorState::Paused) && s.tasks.len() == 3);
        // A restart leaves a paused connector paused.
        assert_eq!(h.restart("a", true, false).await.unwrap().state, ConnectorState::Paused);
        let patched = h.patch_config("a", BTreeMap::from([("tasks.max".to_string(), None)])).await.unwrap();
        assert_eq!(patched.config.get("tasks.max"), None);
        // What a restart of the process finds.
        let again = herder(Some(file.clone()));
        assert_eq!(again.restore().await.unwrap(), 1);
        assert_eq!(again.status("a").await.unwrap().state, ConnectorState::Paused);
        assert_eq!(again.config("a").await.unwrap(), patched.config);
        again.delete("a").await.unwrap();
        assert!(herder(Some(file)).store.load().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }
}
