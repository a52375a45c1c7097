//! What every task of one connector shares: its settings, the task factory, the metrics,
//! the dead-letter path and the failures. The worker (`worker.rs`) makes it; each task's
//! runner (`task_runner.rs`) and its batch handler (`batch_handler.rs`) read it.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use crate::consumer::ShareConsumerConfig;

use super::config::ConnectorConfig;
use super::dead_letter::DeadLetter;
use super::metrics::SinkMetrics;
use super::task::SinkTaskFactory;

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
    /// Records that task `id` stopped on an error (logged).
    pub(super) fn failed(&self, id: usize, why: String) {
        tracing::error!(connector = %self.config.name, task = id, "task failed: {why}");
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).push((id, why));
    }
}
