//! What runs between the consumer and a sink's `put`, as in Connect's `WorkerSinkTask`: the
//! key converter, the value converter, then the transform chain, each record on its own.
//! The sink gets the records that came through, their key and value as the bytes of the
//! converted, transformed data ([`Data::to_bytes`]); a record a transform dropped is
//! ACCEPTed unwritten; a record that failed here is the record's failure, decided with the
//! sink's own failures in one `decide` call (`decide.rs`), its dead-letter copy (the record
//! as consumed) marked with the stage: `KEY_CONVERTER`, `VALUE_CONVERTER` or
//! `TRANSFORMATION`.
//!
//! A connector that sets no converter and no transform has no pipeline: its sink gets the
//! records as consumed, at no cost.
//!
//! Settings (Connect's): `key.converter`, `value.converter` (with their `.*` settings),
//! `transforms=a,b`, `transforms.a.type`, `transforms.a.predicate`, `transforms.a.negate`,
//! `transforms.a.<setting>`, `predicates=p`, `predicates.p.type`, `predicates.p.<setting>`.
//! A worker file's `key.converter*` / `value.converter*` are every connector's defaults.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;

use crate::dead_letter::{STAGE_TASK_PUT, STAGE_VALUE_CONVERTER};
use crate::error::{Error, Result};

use super::converter::{Converter, ConverterConfig, JsonConverter, CONNECT_JSON_CONVERTER};
use super::data::{ConnectRecord, RecordSchemas};
use super::metrics::SinkMetrics;
use super::registry::Registry;
use super::task::{RecordFailure, SinkError, SinkRecord, SinkTask, TaskConfig};
use super::transform::{Predicate, TransformSettings, Transformation, CONNECT_TRANSFORMS_PACKAGE};
use super::transforms::flat::{FlatChain, FlatOp};

/// Connect's stage names for failures before `put`.
pub(crate) const STAGE_KEY_CONVERTER: &str = "KEY_CONVERTER";
pub(crate) const STAGE_TRANSFORMATION: &str = "TRANSFORMATION";

struct Step {
    alias: String,
    transform: Box<dyn Transformation>,
    /// The predicate, and whether it is negated.
    predicate: Option<(Arc<dyn Predicate>, bool)>,
}

/// A connector's converters and transforms.
pub(crate) struct Pipeline {
    key: Box<dyn Converter>,
    value: Box<dyn Converter>,
    steps: Vec<Step>,
    /// The same value converter and steps without a tree per record, when they allow it
    /// (`transforms/flat.rs`): schemaless JSON through built-in InsertField$Value /
    /// ReplaceField$Value only.
    fast: Option<FlatChain>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("transforms", &self.steps.iter().map(|s| &s.alias).collect::<Vec<_>>())
            .finish()
    }
}

/// What became of one record in the pipeline.
#[derive(Debug)]
pub(crate) enum Passed {
    /// Goes to the sink as this.
    Record(SinkRecord, RecordSchemas),
    /// A transform dropped it.
    Dropped,
    /// Failed at `stage`, for `reason`.
    Failed { stage: &'static str, reason: String },
}

fn under(config: &TaskConfig, prefix: &str) -> BTreeMap<String, String> {
    config
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(prefix).map(|r| (r.to_string(), v.clone())))
        .collect()
}

fn aliases(config: &TaskConfig, key: &str) -> Vec<String> {
    config
        .get(key)
        .map(|v| v.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect())
        .unwrap_or_default()
}

impl Pipeline {
    /// The pipeline `config` asks for, or `None` when it sets no converter and no transform.
    /// Refuses an unknown class, a predicate alias not in `predicates`, a transform's bad
    /// setting (naming the key), as Connect refuses the connector.
    pub(crate) fn from_config(config: &TaskConfig, registry: &Registry) -> Result<Option<Pipeline>> {
        let transforms = aliases(config, "transforms");
        let no_converter = |side: &str| config.get(side).is_none_or(|c| c.trim().is_empty());
        if transforms.is_empty() && no_converter("key.converter") && no_converter("value.converter") {
            return Ok(None);
        }
        let converter = |side: &str, is_key: bool| -> Result<Box<dyn Converter>> {
            let class = config.get(side).map(|c| c.trim()).filter(|c| !c.is_empty()).unwrap_or("bytes");
            let factory = registry.converter(class).map_err(|e| Error::config(side, e))?;
            let cfg = ConverterConfig { settings: under(config, &format!("{side}.")), is_key };
            factory(&cfg).map_err(|e| Error::config(side, e))
        };
        let key = converter("key.converter", true)?;
        let value = converter("value.converter", false)?;
        let mut predicates: BTreeMap<String, Arc<dyn Predicate>> = BTreeMap::new();
        for alias in aliases(config, "predicates") {
            let prefix = format!("predicates.{alias}.");
            let type_key = format!("{prefix}type");
            let class = config.get(&type_key).map(|c| c.trim()).unwrap_or("");
            if class.is_empty() {
                return Err(Error::config(type_key, format!("missing: predicate {alias:?} needs its class")));
            }
            let factory = registry.predicate(class).map_err(|e| Error::config(type_key.clone(), e))?;
            let mut settings = under(config, &prefix);
            settings.remove("type");
            let p = factory(&settings).map_err(|e| Error::config(format!("{prefix}*"), format!("{class}: {e}")))?;
            predicates.insert(alias, Arc::from(p));
        }
        let mut steps = Vec::with_capacity(transforms.len());
        let mut fast = fast_converter(config, registry).then(Vec::new);
        for alias in transforms {
            let prefix = format!("transforms.{alias}.");
            let type_key = format!("{prefix}type");
            let class = config.get(&type_key).map(|c| c.trim()).unwrap_or("");
            if class.is_empty() {
                return Err(Error::config(type_key, format!("missing: transform {alias:?} needs its class")));
            }
            let factory = registry.transform(class).map_err(|e| Error::config(type_key.clone(), e))?;
            let mut settings: TransformSettings = under(config, &prefix);
            settings.remove("type");
            let predicate = match settings.remove("predicate").map(|p| p.trim().to_string()).filter(|p| !p.is_empty()) {
                None => None,
                Some(p) => match predicates.get(&p) {
                    Some(pred) => Some(pred.clone()),
                    None => {
                        return Err(Error::config(
                            format!("{prefix}predicate"),
                            format!("{p:?} is not in predicates (add predicates={p} and predicates.{p}.type)"),
                        ))
                    }
                },
            };
            let negate = match settings.remove("negate").map(|n| n.trim().to_ascii_lowercase()) {
                None => false,
                Some(n) if n == "true" => true,
                Some(n) if n == "false" => false,
                Some(n) => return Err(Error::config(format!("{prefix}negate"), format!("{n:?}: use true or false"))),
            };
            if negate && predicate.is_none() {
                return Err(Error::config(
                    format!("{prefix}negate"),
                    "applies to a predicate: set transforms.<alias>.predicate",
                ));
            }
            let transform =
                factory(&settings).map_err(|e| Error::config(format!("{prefix}*"), format!("{class}: {e}")))?;
            let flat = (predicate.is_none() && registry.is_builtin(class))
                .then(|| FlatOp::of(class.strip_prefix(CONNECT_TRANSFORMS_PACKAGE).unwrap_or(class), &settings))
                .flatten();
            fast = match (fast, flat) {
                (Some(mut ops), Some(op)) => {
                    ops.push(op);
                    Some(ops)
                }
                _ => None,
            };
            steps.push(Step { alias, transform, predicate: predicate.map(|p| (p, negate)) });
        }
        let fast = fast.map(|ops| FlatChain { ops });
        Ok(Some(Pipeline { key, value, steps, fast }))
    }

    /// One record through the converters and the transforms.
    #[cfg(test)]
    pub(crate) fn run(&self, record: &SinkRecord) -> Passed {
        self.run_in(record, &mut BytesMut::new())
    }

    /// As `run`, the converted key's and value's bytes written into `buf` (empty, shared by
    /// the records of a batch: see [`Data::to_bytes_in`](super::data::Data::to_bytes_in)).
    pub(crate) fn run_in(&self, record: &SinkRecord, buf: &mut BytesMut) -> Passed {
        if let Some(passed) = self.run_fast(record, buf) {
            return passed;
        }
        let topic: &str = &record.topic;
        let (key, key_schema) = match self.key.to_data_and_schema(topic, record.key.as_ref()) {
            Ok(k) => k,
            Err(reason) => return Passed::Failed { stage: STAGE_KEY_CONVERTER, reason },
        };
        let (value, value_schema) = match self.value.to_data_and_schema(topic, record.value.as_ref()) {
            Ok(v) => v,
            Err(reason) => return Passed::Failed { stage: STAGE_VALUE_CONVERTER, reason },
        };
        let mut r = ConnectRecord {
            topic: topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            timestamp: record.timestamp,
            key,
            value,
            headers: record.headers.clone(),
            key_schema,
            value_schema,
        };
        for step in &self.steps {
            if let Some((p, negate)) = &step.predicate {
                if p.test(&r) == *negate {
                    continue;
                }
            }
            r = match step.transform.apply(r) {
                Ok(Some(r)) => r,
                Ok(None) => return Passed::Dropped,
                Err(e) => {
                    return Passed::Failed {
                        stage: STAGE_TRANSFORMATION,
                        reason: format!("transform {:?}: {e}", step.alias),
                    }
                }
            };
        }
        let mut out = record.clone();
        if *out.topic != *r.topic {
            out.topic = Arc::from(r.topic.as_str());
        }
        out.key = r.key.as_ref().map(|d| d.to_bytes_in(buf));
        out.value = r.value.as_ref().map(|d| d.to_bytes_in(buf));
        out.headers = r.headers;
        out.timestamp = r.timestamp;
        Passed::Record(out, RecordSchemas::new(r.key_schema, r.value_schema))
    }
}

impl Pipeline {
    /// The fast path (`transforms/flat.rs`), or `None` for the generic one: no fast chain, or
    /// a value it declines (then converted again there, which says why it fails if it does).
    fn run_fast(&self, record: &SinkRecord, buf: &mut BytesMut) -> Option<Passed> {
        let fast = self.fast.as_ref()?;
        // The key first, as the generic path: its failure is the record's, whatever the value.
        let (key, key_schema) = match self.key.to_data_and_schema(&record.topic, record.key.as_ref()) {
            Ok(k) => k,
            Err(reason) => return Some(Passed::Failed { stage: STAGE_KEY_CONVERTER, reason }),
        };
        let value = fast.value(record, buf)?;
        let mut out = record.clone();
        out.key = key.as_ref().map(|d| d.to_bytes_in(buf));
        out.value = Some(value);
        // InsertField and ReplaceField leave topic, headers and timestamp as they are, and the
        // value has no schema (schemas.enable=false).
        Some(Passed::Record(out, RecordSchemas::new(key_schema, None)))
    }
}

/// Whether `value.converter` is the built-in JsonConverter with `schemas.enable=false`.
fn fast_converter(config: &TaskConfig, registry: &Registry) -> bool {
    let class = config.get("value.converter").map(|c| c.trim()).unwrap_or("");
    if !matches!(class, "json" | CONNECT_JSON_CONVERTER) || !registry.is_builtin(class) {
        return false;
    }
    let cfg = ConverterConfig { settings: under(config, "value.converter."), is_key: false };
    JsonConverter::from_config(&cfg).is_ok_and(|c| !c.schemas_enable)
}

/// `put` (then `flush`) of a batch through the pipeline, if any. Answers for the whole
/// batch, indexes as given, so one `decide` covers the sink's failures and the pipeline's;
/// the second part is each record's stage (for the dead-letter headers).
///
/// A whole-batch `Retriable` from the sink, in a batch where the pipeline failed records,
/// becomes a `RetriableRecords` naming every record the sink got: the pipeline's failures
/// must stay failures for good, and the records tried again then count one failure alone
/// (a batch of their own comes next, without the failed ones).
///
/// `stop_at_failure` (`errors.tolerance=none`): the first record that fails here ends the
/// batch, as in Connect, where the task fails at it: only the records before it go to the
/// sink. The third part is the index of the first record the sink was not given (the
/// batch's length when all were): none of those may be ACCEPTed.
pub(crate) async fn put_through(
    pipeline: Option<&Pipeline>,
    sink: &mut dyn SinkTask,
    batch: &[&SinkRecord],
    m: &SinkMetrics,
    stop_at_failure: bool,
) -> (std::result::Result<(), SinkError>, Vec<&'static str>, usize) {
    let Some(p) = pipeline else {
        return (put_and_flush(sink, batch, &[], m).await, Vec::new(), batch.len());
    };
    let mut given = batch.len();
    let mut stages = vec![STAGE_TASK_PUT; batch.len()];
    let mut failed = Vec::new();
    let mut passed = Vec::with_capacity(batch.len());
    // The batch index of each record the sink gets.
    let mut origin = Vec::with_capacity(batch.len());
    let mut schemas = Vec::with_capacity(batch.len());
    // Room for the batch's converted values (about their size as consumed, plus what the
    // transforms add); it grows in chunks if not.
    let room: usize = batch.iter().map(|r| r.value.as_ref().map_or(0, |v| v.len()) + 32).sum();
    let mut buf = BytesMut::with_capacity(room);
    for (i, r) in batch.iter().enumerate() {
        match p.run_in(r, &mut buf) {
            Passed::Record(r, s) => {
                passed.push(r);
                schemas.push(s);
                origin.push(i);
            }
            Passed::Dropped => {}
            Passed::Failed { stage, reason } => {
                stages[i] = stage;
                failed.push(RecordFailure { index: i, reason });
                if stop_at_failure {
                    given = i;
                    break;
                }
            }
        }
    }
    let put = if passed.is_empty() {
        Ok(())
    } else {
        // The converted records are owned here and lent to the sink, as the consumed ones are.
        let lent: Vec<&SinkRecord> = passed.iter().collect();
        put_and_flush(sink, &lent, &schemas, m).await
    };
    let map = |fs: Vec<RecordFailure>| -> Vec<RecordFailure> {
        fs.into_iter()
            // An index outside the batch stays outside (decide ignores it, the log names it).
            .map(|f| RecordFailure { index: origin.get(f.index).copied().unwrap_or(usize::MAX), reason: f.reason })
            .collect()
    };
    let result = match put {
        Ok(()) if failed.is_empty() => Ok(()),
        Ok(()) => Err(SinkError::Records { failed }),
        Err(SinkError::Records { failed: f }) => {
            failed.extend(map(f));
            Err(SinkError::Records { failed })
        }
        Err(SinkError::RetriableRecords { retriable, failed: f }) => {
            failed.extend(map(f));
            Err(SinkError::RetriableRecords { retriable: map(retriable), failed })
        }
        Err(SinkError::Retriable { reason }) if failed.is_empty() => Err(SinkError::Retriable { reason }),
        Err(SinkError::Retriable { reason }) => Err(SinkError::RetriableRecords {
            retriable: origin.iter().map(|&index| RecordFailure { index, reason: reason.clone() }).collect(),
            failed,
        }),
        Err(e @ SinkError::Fatal { .. }) => Err(e),
    };
    (result, stages, given)
}

/// The stage of record `i` (`TASK_PUT` without a pipeline).
pub(crate) fn stage_of(stages: &[&'static str], i: usize) -> &'static str {
    stages.get(i).copied().unwrap_or(STAGE_TASK_PUT)
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;

/// `put`, then `flush` if the sink took any of the batch: what was taken must be durable
/// before it is ACCEPTed. A failed flush answers for the batch.
pub(crate) async fn put_and_flush(
    sink: &mut dyn SinkTask,
    records: &[&SinkRecord],
    schemas: &[RecordSchemas],
    m: &SinkMetrics,
) -> Result<(), SinkError> {
    let started = Instant::now();
    // Only a converter with schemas made any: every other batch takes the plain `put`.
    let put = if schemas.iter().any(|s| s.key.is_some() || s.value.is_some()) {
        sink.put_with_schemas(records, schemas).await
    } else {
        sink.put(records).await
    };
    m.put(records.len(), started.elapsed());
    match put {
        Ok(()) => sink.flush().await,
        Err(e @ (SinkError::Records { .. } | SinkError::RetriableRecords { .. })) => sink.flush().await.and(Err(e)),
        Err(e @ (SinkError::Retriable { .. } | SinkError::Fatal { .. })) => Err(e),
    }
}

#[cfg(test)]
#[path = "pipeline_flat_tests.rs"]
mod flat_tests;
