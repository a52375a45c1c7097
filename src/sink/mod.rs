//! Sink tasks on share groups (KIP-1302): Kafka Connect's sink model without its partition
//! limit, head-of-line blocking or rebalances.
//!
//! A [`SinkTask`] writes batches somewhere (a file, another topic, an HTTP endpoint, a
//! PostgreSQL table). The runtime runs `tasks.max` of them per connector in one share group,
//! so any number of tasks share any number of partitions, and several processes started on
//! the same connector configuration share the work through the broker alone. A batch is
//! ACCEPTed after `put` returns `Ok`; [`SinkError`] says what happens otherwise.
//!
//! Two task models, by `share.acknowledgement.mode`:
//! - explicit (the default): **one consumer per partition** of the connector's topics (each
//!   keeping two tasks or more; `share.consumers.max`), each with a processing engine
//!   ([`crate::processor`]), the tasks spread over them as their batch handlers
//!   (`task_pool.rs`, `batch_handler.rs`);
//! - implicit: **each task on its own [`ShareConsumer`](crate::ShareConsumer)** in implicit
//!   mode, in a poll -> put -> poll loop (`task_runner.rs`). It stays a model of its own
//!   because the engine needs explicit acknowledgement (it RELEASEs records waiting
//!   unstarted, RENEWs, REJECTs, gives back a stopped task's batch), which a consumer in
//!   implicit mode cannot send: as a policy of the engine, implicit mode would be an
//!   explicit consumer that only ever ACCEPTs, no longer the consumer mode the user asked
//!   for. (Folding it in anyway is open: it would drop this file and the per-task consumers.)
//!
//! Both models act on one decision (`decide.rs`): what a batch's answer means for each
//! record under `errors.tolerance`, `errors.deadletterqueue.*` and
//! `share.max.delivery.count`.
//!
//! Layering: this module is a user of the client, as Connect is of Java's: it runs on the
//! public consumer, producer and admin API and the public engine. It also reaches into the
//! crate where a second copy would be worse: the engine's crate-internal `PoolControl` (a
//! task retired alone instead of stopping the engine), `topic_name` (the broker's topic-name
//! rules, for `topics` and the DLQ topic), `backoff` (implicit mode's poll retries) and
//! `security::tls_client` (the HTTP and PostgreSQL sinks' TLS). Its Prometheus form goes
//! through the public [`crate::prometheus`] module (a collector, the one endpoint). Nothing
//! below the public API knows it exists.
//!
//! # Running connectors
//! A [`Worker`] (from a [`WorkerConfig`]: bootstrap and security settings) starts connectors
//! (a [`ConnectorConfig`]: `name`, `connector.class`, `topics`, `tasks.max`, KIP-1302's
//! `share.*` settings) whose class is in its [`Registry`]:
//!
//! ```no_run
//! # async fn run(registry: kafka_share::sink::Registry) -> kafka_share::Result<()> {
//! use kafka_share::sink::{ConnectorConfig, Worker, WorkerConfig};
//! let worker = Worker::new(WorkerConfig::new("127.0.0.1:9092"), registry);
//! let connector = worker
//!     .start_connector(ConnectorConfig::from_pairs([
//!         ("name", "orders-to-db"),
//!         ("connector.class", "my-sink"),
//!         ("topics", "orders"),
//!         ("tasks.max", "12"),
//!     ])?)
//!     .await?;
//! connector.set_tasks(16).await?; // four more, while the twelve keep going
//! println!("{:?}", connector.metrics().get("sink-record-acknowledge-total"));
//! worker.close(std::time::Duration::from_secs(30)).await
//! # }
//! ```
//!
//! # Behaviour
//! - A connector is one share consumer per partition of its topics (two tasks or more each)
//!   in its group (`share.group.id`, default `connect-<name>`), explicit acknowledgement by
//!   default, each with a processing engine ([`crate::processor`]) whose batch handlers are
//!   its share of the connector's tasks: a batch goes to whichever of them is free (the
//!   records spread over the free tasks), never waiting behind
//!   another task's slow `put`; the next batches are acquired while `put`s run, and a
//!   batch's acknowledgements leave as soon as `put` and `flush` returned. (In implicit mode
//!   each task has a share consumer of its own, and a retry happens in place.) `Ok` ACCEPTs
//!   the batch; a
//!   retriable error tries it again here (its locks kept, delivery count unchanged), split in
//!   halves on each retry so that a record failing on its own is told apart from its
//!   batch-mates; a record that failed for good (a per-record failure, or
//!   `share.max.delivery.count` retriable failures alone) is copied to
//!   `errors.deadletterqueue.topic.name` and ACCEPTed, or REJECTed without one. Good records
//!   are never dead-lettered for a batch-mate. With `errors.deadletterqueue.mode=broker`
//!   (Kafka 4.4+) the record is REJECTed and the broker writes it to the topic
//!   ([`DeadLetterMode::Broker`]). With `errors.tolerance=none` (the default) a record that
//!   failed for good stops its task instead, as Connect's task fails at it: a record that
//!   fails to convert or transform ends the batch there (nothing after it is put), what the
//!   sink has of the batch is ACCEPTed and the rest, the failed record with it, goes back to
//!   the group (RELEASE), so a restart resumes at the failed record and writes nothing twice.
//!   Implicit mode follows the same rules, except that it cannot REJECT (a record without a
//!   dead-letter topic is skipped: accepted, counted as rejected) nor acknowledge part of a
//!   batch (a stop gives the whole batch back).
//! - A `put` that runs past half the acquisition lock has its records RENEWed (Kafka 4.2+)
//!   while it runs, so a slow sink does not get its records redelivered elsewhere meanwhile.
//! - [`Connector::set_tasks`] adds or removes tasks while the others run; a removed task
//!   finishes its batch, commits and closes. [`Connector::close`] and [`Worker::close`] do
//!   that for every task.
//! - Metrics under KIP-1302's names ([`SinkMetricsSnapshot`], [`METRIC_NAMES`]); the
//!   [`PrometheusServer`] serves them as Prometheus (OpenMetrics) text, and a
//!   [`SinkCollector`] puts them in an application's own `prometheus-client` registry.
//!
//! # Converters and transforms
//! As in Connect: `key.converter` / `value.converter` ([`StringConverter`],
//! [`ByteArrayConverter`], [`JsonConverter`] with `schemas.enable`) and the transform chain
//! (`transforms`, `predicates`; InsertField, ReplaceField, MaskField, ValueToKey,
//! ExtractField, HoistField, Flatten, Cast, TimestampConverter, TimestampRouter, RegexRouter, Filter,
//! DropHeaders, InsertHeader, HeaderFrom; TopicNameMatches, HasHeaderKey, RecordIsTombstone)
//! run on each record before `put`, under Connect's class names. The sink gets the result as
//! bytes (a string as its text, other [`Data`] as JSON); a record a transform dropped is
//! ACCEPTed; one that fails here takes the dead-letter path with the stage `KEY_CONVERTER`,
//! `VALUE_CONVERTER` or `TRANSFORMATION`. Your own plug in through
//! [`Registry::register_converter`], [`Registry::register_transform`] and
//! [`Registry::register_predicate`].
//!
//! # Delivery semantics
//! At least once: a record is ACCEPTed only after the sink took it, so a crash between `put`
//! and the acknowledgement delivers it again. `share.delivery.semantics=exactly-once` is
//! refused (it needs transactional acknowledgements, KIP-1289, which no released broker has);
//! make the sink idempotent instead.

mod batch_handler;
mod builtins;
mod config;
mod connector;
mod converter;
mod data;
mod dead_letter;
mod decide;
mod file;
#[cfg(feature = "sink-http")]
mod http;
mod kafka;
mod metrics;
mod pipeline;
#[cfg(feature = "sink-postgres")]
mod postgres;
#[cfg(feature = "sink-postgres")]
mod postgres_fields;
#[cfg(feature = "sink-postgres")]
mod postgres_fields_config;
#[cfg(feature = "sink-postgres")]
mod postgres_fields_row;
#[cfg(feature = "sink-postgres")]
mod postgres_fields_sql;
#[cfg(feature = "sink-postgres")]
mod postgres_ident;
#[cfg(feature = "sink-postgres")]
mod postgres_tls;
mod prometheus;
mod registry;
pub mod rest;
mod task;
mod task_pool;
mod task_runner;
mod transform;
mod transforms;
mod worker;
mod writer_thread;

pub use builtins::CONNECT_FILE_SINK_CLASS;
pub use config::{ConnectorConfig, DeadLetterMode, ErrorTolerance, SinkAckMode, WorkerConfig};
pub use converter::{
    ByteArrayConverter, Converter, ConverterConfig, JsonConverter, StringConverter, CONNECT_BYTE_ARRAY_CONVERTER,
    CONNECT_JSON_CONVERTER, CONNECT_STRING_CONVERTER,
};
pub use data::{ConnectRecord, Data, RecordSchemas, Schema};
pub use file::FileSink;
#[cfg(feature = "sink-http")]
pub use http::HttpSink;
pub use kafka::{KafkaSink, Transform};
pub use metrics::{SinkMetricsSnapshot, METRIC_NAMES};
#[cfg(feature = "sink-postgres")]
pub use postgres::{PostgresSink, CONNECT_JDBC_SINK_CLASS};
pub use prometheus::{render as render_prometheus, MetricsSource, PrometheusServer, SinkCollector, PROMETHEUS_PREFIX};
pub use registry::Registry;
pub use task::{RecordFailure, SinkError, SinkRecord, SinkTask, SinkTaskFactory, TaskConfig};
pub use transform::{Predicate, TransformSettings, Transformation};
pub use worker::{Connector, Worker};
