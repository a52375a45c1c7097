//! The contract between the runtime and a sink: [`SinkTask`], what `put` may answer
//! ([`SinkError`]), and how a connector class becomes tasks ([`SinkTaskFactory`]).
//!
//! KIP-1302's `WorkerShareSinkTask` keeps Connect's task life cycle minus rebalances:
//! `start`, then `open` once for every subscribed topic, then `put` / `flush` until `stop`.
//! The runtime acknowledges a batch only after `put` returned (explicit mode), so a sink
//! that returns `Ok` has taken the records for good.

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;

use crate::consumer::ConsumerRecord;

use super::data::RecordSchemas;

/// The settings a task is started with: the connector's configuration, every key as given
/// (`name`, `connector.class`, `topics`, the sink's own keys such as `file`).
pub type TaskConfig = BTreeMap<String, String>;

/// A record as a sink sees it: the share consumer's record (topic, partition, offset,
/// key, value, headers, timestamp, delivery count).
pub type SinkRecord = ConsumerRecord;

/// One sink task. The runtime owns each task on one tokio task and calls it from there
/// only, so `&mut self` needs no locking; it must be `Send` to move there.
///
/// Methods return boxed futures so that tasks can be chosen at run time by
/// `connector.class` (a trait object), which `async fn` in traits cannot yet be.
pub trait SinkTask: Send + 'static {
    /// Called once before anything else, with the connector's configuration. An error here
    /// stops the task before it takes any record.
    fn start(&mut self, config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>>;

    /// Called once after `start` with every subscribed topic (share groups have no
    /// assignment, so there is nothing to open or close per partition later).
    fn open<'a>(&'a mut self, topics: &'a [String]) -> BoxFuture<'a, Result<(), SinkError>> {
        let _ = topics;
        Box::pin(async { Ok(()) })
    }

    /// Writes a batch. `Ok` means every record is durably the sink's: the runtime ACCEPTs
    /// them. See [`SinkError`] for the other answers.
    ///
    /// The records are lent, not copied: the runtime holds each one until its outcome is
    /// settled, and a batch is a list of references to them (8 bytes a record). A sink
    /// that keeps a record past `put` clones it (`(*records[i]).clone()`: the key and
    /// value buffers are shared, not copied).
    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>>;

    /// As `put`, with the schemas each record's key and value came with from their converters
    /// (`schemas[i]` is `records[i]`'s; JsonConverter with `schemas.enable` makes them): the
    /// runtime calls this instead of `put` when a batch has any. A sink that types its output
    /// by a schema (a database table's columns) overrides it; the default ignores them.
    fn put_with_schemas<'a>(
        &'a mut self,
        records: &'a [&'a SinkRecord],
        schemas: &'a [RecordSchemas],
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        let _ = schemas;
        self.put(records)
    }

    /// Makes what `put` accepted durable (the runtime calls it before committing
    /// acknowledgements and at stop). The default does nothing, for sinks whose `put` is
    /// already durable.
    fn flush(&mut self) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async { Ok(()) })
    }

    /// Called once at the end (also after a fatal error). Release resources here.
    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Makes the tasks of one connector class (one call per task).
pub trait SinkTaskFactory: Send + Sync + 'static {
    /// A new, not yet started task. The configuration is the one `start` will get, so a
    /// factory can refuse a bad one early.
    fn create(&self, config: &TaskConfig) -> Result<Box<dyn SinkTask>, SinkError>;
}

impl<F> SinkTaskFactory for F
where
    F: Fn(&TaskConfig) -> Result<Box<dyn SinkTask>, SinkError> + Send + Sync + 'static,
{
    fn create(&self, config: &TaskConfig) -> Result<Box<dyn SinkTask>, SinkError> {
        self(config)
    }
}

/// What a failed `put` (or `start`, `flush`) means for its records.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// A passing failure (the target is down, a timeout) of the whole batch: the batch is
    /// tried again, split in halves (so a record that fails on its own is told apart from
    /// its batch-mates), its locks renewed meanwhile; a record that keeps failing alone
    /// reaches the dead-letter path after `share.max.delivery.count` failures alone. (Implicit
    /// mode: the same, in place, the locks not renewed: the consumer can neither release nor
    /// renew.)
    #[error("retriable: {reason}")]
    Retriable {
        /// What went wrong, for the log.
        reason: String,
    },
    /// Some records cannot be written however often they are tried (a 4xx answer, a
    /// constraint violation): those go the dead-letter path (the dead-letter topic, else
    /// REJECT); every other record of the batch is taken and ACCEPTed.
    #[error("{} record(s) failed: {}", failed.len(), failed.first().map(|f| f.to_string()).unwrap_or_default())]
    Records {
        /// The failed records, by their index in the batch given to `put`.
        failed: Vec<RecordFailure>,
    },
    /// Some records failed for a passing reason of their own (the target answered 5xx for
    /// that record): those are tried again, alone, after a backoff (their locks renewed),
    /// and reach the dead-letter path only if they keep failing alone; the records in
    /// `failed` go the dead-letter path now; every other record was taken and is ACCEPTed.
    #[error("{} record(s) failed for now: {}", retriable.len(), retriable.first().map(|f| f.to_string()).unwrap_or_default())]
    RetriableRecords {
        /// The records to try again, by their index in the batch given to `put`.
        retriable: Vec<RecordFailure>,
        /// Records that cannot be written (as in [`SinkError::Records`]).
        failed: Vec<RecordFailure>,
    },
    /// The task cannot go on (bad configuration, lost credentials): it stops, its
    /// unacknowledged records are RELEASEd for the other tasks, and the worker reports it.
    #[error("fatal: {reason}")]
    Fatal {
        /// What went wrong, for the log and the worker's status.
        reason: String,
    },
}

impl SinkError {
    /// A [`SinkError::Retriable`].
    pub fn retriable(reason: impl Into<String>) -> Self {
        SinkError::Retriable { reason: reason.into() }
    }

    /// A [`SinkError::Fatal`].
    pub fn fatal(reason: impl Into<String>) -> Self {
        SinkError::Fatal { reason: reason.into() }
    }

    /// A [`SinkError::Records`] for one record.
    pub fn record(index: usize, reason: impl Into<String>) -> Self {
        SinkError::Records { failed: vec![RecordFailure { index, reason: reason.into() }] }
    }
}

/// One record a sink could not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFailure {
    /// Its index in the batch given to `put`.
    pub index: usize,
    /// Why (copied into the dead-letter record's error headers).
    pub reason: String,
}

impl fmt::Display for RecordFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record {}: {}", self.index, self.reason)
    }
}
