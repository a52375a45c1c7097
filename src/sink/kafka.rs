//! The `kafka` sink task; its settings and behaviour are documented on [`KafkaSink`], the one
//! public path (`kafka_share::sink::KafkaSink`).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::task::{RecordFailure, SinkError, SinkRecord, SinkTask, SinkTaskFactory, TaskConfig};
use crate::config::Properties;
use crate::error::Error;
use crate::producer::{Producer, ProducerConfig, ProducerRecord};

/// The fixed target topic.
pub(crate) const TARGET_TOPIC_CONFIG: &str = "target.topic";
/// A target topic name with `${topic}` for the source topic.
pub(crate) const TARGET_TOPIC_FORMAT_CONFIG: &str = "target.topic.format";
/// Keep the source partition number.
pub(crate) const PRESERVE_PARTITION_CONFIG: &str = "target.partition.preserve";
/// The prefix of producer overrides.
pub(crate) const PRODUCER_PREFIX: &str = "producer.";

/// How long `stop` waits for records still in flight.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A function from a source record to the record to write; `None` drops the record (it is
/// ACCEPTed without being copied).
pub type Transform = Arc<dyn Fn(&SinkRecord) -> Option<ProducerRecord> + Send + Sync>;

/// Where records go when there is no transform.
#[derive(Debug, Clone)]
enum Target {
    Topic(String),
    Format(String),
}

/// The `kafka` sink: copies records to another topic with the crate's
/// [`Producer`] (Kafka-to-Kafka pipelines, KIP-1302's first use
/// case), optionally through a transform function (library API only).
///
/// # Settings
///
/// | key | default | meaning |
/// |---|---|---|
/// | `target.topic` | (none) | the topic to write to |
/// | `target.topic.format` | (none) | instead of `target.topic`: a name in which `${topic}` stands for the source topic, e.g. `${topic}.copy` |
/// | `target.partition.preserve` | `false` | `true`: write each record to the partition number it came from (the target needs at least as many partitions); `false`: the producer's partitioner (key hash, or sticky for null keys) |
/// | `bootstrap.servers` | (required) | the cluster to write to |
/// | `security.protocol`, `sasl.*`, `ssl.*`, `client.id` | | passed to the producer as given |
/// | `producer.<key>` | | any producer setting (`producer.acks`, `producer.linger.ms`, `producer.bootstrap.servers`, ...); overrides the same key without the prefix |
///
/// Exactly one of `target.topic` and `target.topic.format` is needed, unless the sink was
/// built with [`KafkaSink::with_transform`], which decides the target itself. The runtime
/// hands the worker's client settings (`bootstrap.servers`, security) to the task through its
/// configuration, so a connector writing to the cluster it reads from needs no settings of
/// its own beyond the target. Producer settings are checked as the producer checks them
/// (an unknown key is refused, naming it).
///
/// Each copy keeps the key, value, headers and timestamp of its source record.
///
/// # Delivery
/// `put` sends the whole batch, then waits for every record's acknowledgement (with the
/// producer's `acks`, `all` by default) before it returns `Ok`, so the runtime ACCEPTs a
/// source record only once its copy is written. A retriable failure (timeout, lost leader,
/// unknown topic while metadata catches up) releases the whole batch: the records already
/// written are written again on redelivery (at-least-once into the target). A record the
/// broker refuses for itself (too large, corrupt) fails alone; an authorization or
/// configuration failure stops the task.
///
/// The `kafka` sink task.
pub struct KafkaSink {
    transform: Option<Transform>,
    target: Option<Target>,
    preserve_partition: bool,
    producer: Option<Producer>,
}

impl std::fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink")
            .field("transform", &self.transform.is_some())
            .field("target", &self.target)
            .field("preserve_partition", &self.preserve_partition)
            .field("started", &self.producer.is_some())
            .finish()
    }
}

impl Default for KafkaSink {
    fn default() -> Self {
        Self::new()
    }
}

impl KafkaSink {
    /// The fixed target topic.
    pub const TARGET_TOPIC_CONFIG: &'static str = TARGET_TOPIC_CONFIG;
    /// A target topic name with `${topic}` for the source topic.
    pub const TARGET_TOPIC_FORMAT_CONFIG: &'static str = TARGET_TOPIC_FORMAT_CONFIG;
    /// Keep the source partition number.
    pub const PRESERVE_PARTITION_CONFIG: &'static str = PRESERVE_PARTITION_CONFIG;
    /// The prefix of producer overrides.
    pub const PRODUCER_PREFIX: &'static str = PRODUCER_PREFIX;

    /// A task that writes to `target.topic` (or `target.topic.format`) from its settings.
    pub fn new() -> KafkaSink {
        KafkaSink { transform: None, target: None, preserve_partition: false, producer: None }
    }

    /// A task that writes what `transform` makes of each record (`None` drops it). The
    /// target settings are not read; the producer settings are.
    pub fn with_transform<F>(transform: F) -> KafkaSink
    where
        F: Fn(&SinkRecord) -> Option<ProducerRecord> + Send + Sync + 'static,
    {
        KafkaSink { transform: Some(Arc::new(transform)), ..KafkaSink::new() }
    }

    /// The registry's factory for the `kafka` class (no transform).
    pub fn factory() -> impl SinkTaskFactory {
        |config: &TaskConfig| -> Result<Box<dyn SinkTask>, SinkError> {
            target(config)?;
            producer_properties(config)?;
            Ok(Box::new(KafkaSink::new()))
        }
    }

    /// A factory whose tasks all use `transform`: register it under a class name of your own.
    pub fn transform_factory<F>(transform: F) -> impl SinkTaskFactory
    where
        F: Fn(&SinkRecord) -> Option<ProducerRecord> + Send + Sync + 'static,
    {
        let transform: Transform = Arc::new(transform);
        move |config: &TaskConfig| -> Result<Box<dyn SinkTask>, SinkError> {
            producer_properties(config)?;
            Ok(Box::new(KafkaSink { transform: Some(transform.clone()), ..KafkaSink::new() }))
        }
    }

    /// The copy of `r` by the settings (no transform).
    fn copy(&self, r: &SinkRecord) -> Option<ProducerRecord> {
        if let Some(t) = &self.transform {
            return t(r);
        }
        let topic = match self.target.as_ref()? {
            Target::Topic(t) => t.clone(),
            Target::Format(f) => f.replace("${topic}", &r.topic),
        };
        let mut out = ProducerRecord {
            topic,
            partition: None,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|h| (String::from_utf8_lossy(&h.key).into_owned(), h.value.clone()))
                .collect(),
            // A negative timestamp (-1: none) would be refused by `send`; let the producer
            // stamp those.
            timestamp: (r.timestamp >= 0).then_some(r.timestamp),
        };
        if self.preserve_partition {
            out.partition = Some(r.partition);
        }
        Some(out)
    }
}

/// The target settings: exactly one of `target.topic` and `target.topic.format`.
fn target(config: &TaskConfig) -> Result<Target, SinkError> {
    let get = |k: &str| config.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    match (get(TARGET_TOPIC_CONFIG), get(TARGET_TOPIC_FORMAT_CONFIG)) {
        (Some(_), Some(_)) => Err(SinkError::fatal(
            "both target.topic and target.topic.format are set: keep one (target.topic.format uses ${topic} for the source topic)",
        )),
        (Some(t), None) => Ok(Target::Topic(t)),
        (None, Some(f)) if f.contains("${topic}") => Ok(Target::Format(f)),
        (None, Some(f)) => Err(SinkError::fatal(format!(
            "target.topic.format={f:?} does not contain ${{topic}}: use target.topic for a fixed topic"
        ))),
        (None, None) => Err(SinkError::fatal(
            "the kafka sink needs target.topic (or target.topic.format, e.g. ${topic}.copy) to know where to write",
        )),
    }
}

/// The producer's properties from the task's settings: the worker's client keys as given,
/// then every `producer.*` key without its prefix (overriding).
fn producer_properties(config: &TaskConfig) -> Result<Properties, SinkError> {
    let mut p = Properties::new();
    for (k, v) in config {
        let client_key = k == "bootstrap.servers"
            || k == "client.id"
            || k == "security.protocol"
            || k.starts_with("sasl.")
            || k.starts_with("ssl.");
        if client_key {
            p.set(k.clone(), v.clone());
        }
    }
    for (k, v) in config {
        if let Some(stripped) = k.strip_prefix(PRODUCER_PREFIX) {
            p.set(stripped.to_string(), v.clone());
        }
    }
    if p.get("bootstrap.servers").is_none_or(|b| b.trim().is_empty()) {
        return Err(SinkError::fatal(
            "the kafka sink needs bootstrap.servers (the worker's, or producer.bootstrap.servers) for the cluster to write to",
        ));
    }
    // Parse now so that a bad key is refused before any task starts.
    ProducerConfig::from_properties(&p).map_err(|e| SinkError::fatal(format!("producer settings: {e}")))?;
    Ok(p)
}

/// What a producer error means for the batch.
enum Verdict {
    Retriable,
    Record,
    Fatal,
}

fn classify(e: &Error) -> Verdict {
    match e {
        Error::Config { .. }
        | Error::Authentication { .. }
        | Error::TopicAuthorizationFailed { .. }
        | Error::Tls { .. }
        | Error::InvalidTopic { .. }
        | Error::Closed => Verdict::Fatal,
        e if e.is_retriable() => Verdict::Retriable,
        // What is left is about the record itself: too large, corrupt, a partition the
        // target does not have (InvalidArgument), a broker code that is not retriable.
        _ => Verdict::Record,
    }
}

impl SinkTask for KafkaSink {
    fn start(&mut self, config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        let parsed = (|| {
            let target = if self.transform.is_some() { None } else { Some(target(config)?) };
            let preserve = super::file::parse_bool(config, PRESERVE_PARTITION_CONFIG, false)?;
            let props = producer_properties(config)?;
            // Properties is not Sync (it tracks used keys), so it stays out of the future.
            let producer_config = ProducerConfig::from_properties(&props)
                .map_err(|e| SinkError::fatal(format!("producer settings: {e}")))?;
            Ok::<_, SinkError>((target, preserve, producer_config))
        })();
        Box::pin(async move {
            let (target, preserve, producer_config) = parsed?;
            self.target = target;
            self.preserve_partition = preserve;
            let producer = Producer::connect(producer_config).await.map_err(|e| match classify(&e) {
                Verdict::Retriable => SinkError::retriable(format!("kafka sink: connecting the producer: {e}")),
                _ => SinkError::fatal(format!("kafka sink: the producer cannot start: {e}")),
            })?;
            self.producer = Some(producer);
            Ok(())
        })
    }

    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let Some(producer) = self.producer.as_ref() else {
                return Err(SinkError::fatal("the kafka sink was used before start (or after stop)"));
            };
            // Send everything first (the producer batches it), then wait for each answer.
            let mut pending = Vec::with_capacity(records.len());
            let mut failed: Vec<(usize, Error)> = Vec::new();
            for (i, r) in records.iter().enumerate() {
                let Some(copy) = self.copy(r) else { continue };
                match producer.send(copy).await {
                    Ok(f) => pending.push((i, f)),
                    Err(e) => failed.push((i, e)),
                }
            }
            for (i, f) in pending {
                if let Err(e) = f.await {
                    failed.push((i, e));
                }
            }
            if failed.is_empty() {
                return Ok(());
            }
            failed.sort_by_key(|(i, _)| *i);
            if let Some((i, e)) = failed.iter().find(|(_, e)| matches!(classify(e), Verdict::Fatal)) {
                return Err(SinkError::fatal(format!("kafka sink: record {i}: {e}")));
            }
            if let Some((i, e)) = failed.iter().find(|(_, e)| matches!(classify(e), Verdict::Retriable)) {
                return Err(SinkError::retriable(format!(
                    "kafka sink: {} of {} record(s) not written (first: record {i}: {e})",
                    failed.len(),
                    records.len()
                )));
            }
            Err(SinkError::Records {
                failed: failed.into_iter().map(|(index, e)| RecordFailure { index, reason: e.to_string() }).collect(),
            })
        })
    }

    fn flush(&mut self) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            // `put` already waited for every acknowledgement; this only covers a caller that
            // dropped a `put` future half-way.
            if let Some(p) = &self.producer {
                p.flush().await;
            }
            Ok(())
        })
    }

    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(p) = self.producer.take() {
                if let Err(e) = p.close(CLOSE_TIMEOUT).await {
                    tracing::warn!(error = %e, "kafka sink: closing the producer");
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> TaskConfig {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn target_needs_exactly_one_setting() {
        assert!(target(&config(&[])).unwrap_err().to_string().contains("target.topic"));
        let both = config(&[("target.topic", "a"), ("target.topic.format", "${topic}.b")]);
        assert!(target(&both).is_err());
        assert!(target(&config(&[("target.topic.format", "fixed")])).unwrap_err().to_string().contains("${topic}"));
        assert!(matches!(target(&config(&[("target.topic", "a")])), Ok(Target::Topic(t)) if t == "a"));
    }

    #[test]
    fn producer_keys_come_from_the_prefix_and_unknown_ones_are_refused() {
        let c = config(&[("bootstrap.servers", "127.0.0.1:1"), ("producer.linger.ms", "5"), ("topics", "x")]);
        let p = producer_properties(&c).unwrap();
        assert_eq!(p.get("linger.ms"), Some("5"));
        assert_eq!(p.get("topics"), None, "connector keys are not producer keys");
        let bad = config(&[("bootstrap.servers", "127.0.0.1:1"), ("producer.lingr.ms", "5")]);
        assert!(producer_properties(&bad).unwrap_err().to_string().contains("lingr.ms"));
        assert!(producer_properties(&config(&[])).unwrap_err().to_string().contains("bootstrap.servers"));
    }
}
