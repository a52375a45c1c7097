//! Kafka Connect's REST API for the sink runtime: the same paths, JSON bodies, status
//! values and status codes, so the `curl` calls, UIs and CI scripts written for Connect
//! manage this runtime's connectors too.
//!
//! | call | answer |
//! |---|---|
//! | `GET /` | `{"version", "commit", "kafka_cluster_id"}` |
//! | `GET /connectors[?expand=status&expand=info]` | the names, or by name the parts asked for |
//! | `POST /connectors` `{"name", "config", "initial_state"?}` | 201 and the connector; 409 if the name exists; 400 on a configuration the runtime refuses |
//! | `GET /connectors/{name}` | `{"name", "config", "tasks": [{"connector", "task"}], "type": "sink"}` |
//! | `GET` / `PUT /connectors/{name}/config` | the settings; PUT answers 201 (created) or 200 and restarts it on the new ones |
//! | `PATCH /connectors/{name}/config` | 200: the settings given replace theirs (`null` removes one), then as PUT |
//! | `GET /connectors/{name}/status` | `{"name", "connector": {"state", "worker_id"}, "tasks": [{"id", "state", "worker_id"}], "type"}` |
//! | `GET /connectors/{name}/tasks` | `[{"id": {"connector", "task"}, "config"}]` (each task runs on the connector's settings) |
//! | `GET .../tasks/{id}/status`, `POST .../tasks/{id}/restart` | the task's state; 204 (the tasks are one engine: the connector restarts, on this worker) |
//! | `PUT .../pause`, `PUT .../resume` | 202 |
//! | `PUT .../stop`, `POST .../restart`, `DELETE /connectors/{name}` | 204 (`restart?includeTasks=true` or `onlyFailed=true`: 202 and the status, what restarts marked `RESTARTING`) |
//! | `GET /connector-plugins` | `[{"class", "type": "sink", "version"}]` |
//! | `PUT /connector-plugins/{class}/config/validate` | `{"name", "error_count", "groups", "configs": [{"definition", "value": {"errors"}}]}` |
//!
//! States are Connect's: `RUNNING`, `PAUSED`, `STOPPED`, `FAILED`, `UNASSIGNED`, `RESTARTING`. An error is
//! `{"error_code": N, "message": ...}` ([`RestError`]); an unknown connector is 404.
//!
//! A [`Herder`] holds the connectors and calls the [`Worker`](super::Worker) to start,
//! stop and restart them; pausing and stopping stop the connector's tasks (its records go
//! to the group's other members), resuming starts them again. Configurations set through
//! the API are written to the file named by the worker setting
//! `config.storage.file.filename` and started again, in their last state, when the process
//! restarts ([`Herder::restore`]).
//!
//! Distributed mode ([`Herder::distributed`], the worker setting `config.storage.topic`):
//! the configurations live in a compacted topic, in Connect's record format, and every
//! worker on the topic follows it and runs every connector; a change through any worker's
//! API reaches all of them. What differs from Connect's distributed workers:
//! - No task assignment: each worker runs `tasks.max` tasks of each connector, all on the
//!   connector's share group, which spreads the records over every task of every worker
//!   (Connect spreads `tasks.max` tasks over the workers; for T tasks on N workers here,
//!   set `tasks.max` to T/N). So no leader, no rebalance, and no `task-*` records.
//! - A status answer is the answering worker's: its own tasks, its address as `worker_id`.
//!   The connector's state (RUNNING, PAUSED, STOPPED) is the same on every worker.
//! - `POST /connectors/{name}/restart` restarts the connector on every worker: it is a
//!   `restart-connector-<name>` record in the topic, as Connect writes it, and each worker
//!   restarts its own tasks of it (with `onlyFailed=true`, the workers where it failed). A
//!   task restart (`.../tasks/{id}/restart`) restarts the asked worker's tasks only.
//! - Two workers creating one name at the same moment may both answer 201: the topic
//!   orders the two writes and the later configuration wins everywhere.
//! - No offset or status topics: share groups keep the progress on the broker.

mod bodies;
mod config_records;
mod config_topic;
mod error;
mod herder;
mod listeners;
mod routes;
mod server;
mod store;
mod validate;

pub use config_topic::ConfigTopic;
pub use error::RestError;
pub use herder::{ConnectorInfo, ConnectorState, ConnectorStatus, Herder, TaskStatus};
pub use listeners::listener_address;
pub use server::{RestServer, MAX_BODY};
pub use store::TargetState;
pub use validate::{validate_file, Validation};
