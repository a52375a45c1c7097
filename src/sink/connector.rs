//! What every task of one connector shares: its settings, the task factory, the metrics,
//! the dead-letter path and the failures. The worker (`worker.rs`) makes it; each task's
//! runner (`task_runner.rs`) and its batch handler (`batch_handler.rs`) read it. It also
//! connects a connector's consumers and opens its tasks, the same way for both modes (the
//! task pools' one each, implicit mode's one per task).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::consumer::{AcquireMode, ShareConsumer, ShareConsumerConfig};
use crate::error::Error;

use super::config::{ConnectorConfig, DeadLetterMode};
use super::dead_letter::DeadLetter;
use super::decide::{DeadLetterTo, Policy};
use super::metrics::SinkMetrics;
use super::pipeline::Pipeline;
use super::task::{SinkTask, SinkTaskFactory};

/// How long a consumer that failed to subscribe gets to leave the group.
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
    /// The converters and transforms (`pipeline.rs`); none when the connector sets neither.
    pub(crate) pipeline: Option<Pipeline>,
    /// Tasks that stopped on an error: (task id, why).
    pub(crate) failures: Mutex<Vec<(usize, String)>>,
}

impl ConnectorShared {
    /// Records that task `id` stopped on an error (logged).
    pub(super) fn failed(&self, id: usize, why: String) {
        tracing::error!(connector = %self.config.name, task = id, "task failed: {why}");
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).push((id, why));
    }

    /// The settings `decide` reads. A dead-letter topic counts when its writer runs (client
    /// mode), so the decision never asks for a copy nobody can write.
    pub(super) fn policy(&self) -> Policy {
        let cfg = &self.config;
        Policy {
            tolerance: cfg.tolerance,
            dead_letter: match (&self.dead_letter, cfg.dlq_mode) {
                (Some(_), _) => DeadLetterTo::Topic,
                (None, DeadLetterMode::Broker) => DeadLetterTo::Broker,
                (None, DeadLetterMode::Client) => DeadLetterTo::Nowhere,
            },
            max_failures: cfg.max_delivery_count.max(1) as u32,
        }
    }

    /// Connects a consumer and subscribes it to the connector's topics. `client_id` is the
    /// one it gets unless the user set `consumer.override.client.id`, so broker logs and
    /// group descriptions tell connectors (and implicit mode's tasks) apart. When
    /// record_limit was this runtime's choice and the cluster refuses it, the consumer
    /// falls back to batch_optimized, and so does every later one at once.
    pub(super) async fn connect_consumer(&self, client_id: String) -> Result<ShareConsumer, String> {
        let cfg = &self.config;
        let mut ccfg = self.consumer.clone();
        if !cfg.consumer_overrides.contains_key("client.id") {
            ccfg.cluster.client_id = client_id;
        }
        if self.record_limit_fallback && self.record_limit_refused.load(Ordering::Relaxed) {
            ccfg.acquire_mode = AcquireMode::BatchOptimized;
        }
        let consumer = match ShareConsumer::connect(ccfg.clone()).await {
            Err(Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, .. }) if self.record_limit_fallback => {
                self.record_limit_refused.store(true, Ordering::Relaxed);
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
        Ok(consumer)
    }

    /// Creates one sink task from the factory, starts it and opens it on the connector's
    /// topics; a task that fails to start or open is stopped before the error returns.
    pub(super) async fn open_task(&self) -> Result<Box<dyn SinkTask>, String> {
        let cfg = &self.config;
        let mut sink = self.factory.create(&cfg.task_config).map_err(|e| format!("creating the task: {e}"))?;
        let opened = async {
            sink.start(&cfg.task_config).await?;
            sink.open(&cfg.topics).await
        }
        .await;
        if let Err(e) = opened {
            sink.stop().await;
            return Err(format!("starting the sink: {e}"));
        }
        Ok(sink)
    }
}
