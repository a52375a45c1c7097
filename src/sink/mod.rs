//! Sink tasks on share groups (KIP-1302): Kafka Connect's sink model without its partition
//! limit, head-of-line blocking or rebalances.
//!
//! A [`SinkTask`] writes batches somewhere (a file, another topic, an HTTP endpoint, a
//! PostgreSQL table). The runtime runs `tasks.max` of them per connector, each on its own
//! [`ShareConsumer`](crate::ShareConsumer) in one share group, so any number of tasks share
//! any number of partitions, and several processes started on the same connector
//! configuration share the work through the broker alone. A batch is ACCEPTed after `put`
//! returns `Ok`; [`SinkError`] says what happens otherwise.
//!
//! Layering: this module sits on the public consumer and producer API only (it is a user of
//! the client, as Connect is of Java's); it reaches into no internal layer.

mod builtins;
mod config;
mod dead_letter;
mod metrics;
mod prometheus;
mod registry;
mod task;
mod task_runner;
mod worker;

pub use config::{ConnectorConfig, ErrorTolerance, SinkAckMode, WorkerConfig};
pub use dead_letter::ERROR_HEADER_PREFIX;
pub use metrics::{SinkMetricsSnapshot, METRIC_NAMES};
pub use prometheus::{render as render_prometheus, MetricsSource, PrometheusServer, PROMETHEUS_PREFIX};
pub use registry::Registry;
pub use task::{RecordFailure, SinkError, SinkRecord, SinkTask, SinkTaskFactory, TaskConfig};
pub use worker::{Connector, Worker};
