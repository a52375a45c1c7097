//! Single message transforms and their predicates, as Connect's `Transformation` and
//! `Predicate`: each a small type behind the [`Registry`](super::Registry)
//! (`register_transform`, `register_predicate`), the built-ins under Connect's class names
//! (`org.apache.kafka.connect.transforms.InsertField$Value`, ...) and the same names without
//! the package (`InsertField$Value`). The chain is read from a connector's settings in
//! `pipeline.rs` (`transforms`, `transforms.<alias>.type`, `.predicate`, `.negate`,
//! `predicates`, `predicates.<alias>.type`).
//!
//! A transform works on the data its converter made (see `data.rs`); one that needs fields
//! refuses bytes and non-objects as Connect refuses them ("Only Map objects supported"), and
//! that refusal is the record's failure (stage `TRANSFORMATION`). Tombstones pass the field
//! transforms unchanged, as in Connect.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::data::{ConnectRecord, Data};

/// One transform (Connect's `Transformation.apply`).
pub trait Transformation: Send + Sync + 'static {
    /// The record transformed; `Ok(None)` drops it (the runtime ACCEPTs it unwritten, as
    /// Connect skips it); an error is the record's failure.
    fn apply(&self, record: ConnectRecord) -> Result<Option<ConnectRecord>, String>;
}

/// A condition a transform is applied under (Connect's `Predicate.test`).
pub trait Predicate: Send + Sync + 'static {
    /// Whether `record` matches.
    fn test(&self, record: &ConnectRecord) -> bool;
}

/// A transform's or predicate's own settings (`transforms.<alias>.*` without the prefix and
/// without `type`, `predicate`, `negate`).
pub type TransformSettings = BTreeMap<String, String>;

/// Makes a transform from its settings; an error names the setting and what to do.
pub(crate) type TransformFactory =
    Arc<dyn Fn(&TransformSettings) -> Result<Box<dyn Transformation>, String> + Send + Sync>;

/// Makes a predicate from its settings.
pub(crate) type PredicateFactory = Arc<dyn Fn(&TransformSettings) -> Result<Box<dyn Predicate>, String> + Send + Sync>;

/// Connect's package of its built-in transforms.
pub(crate) const CONNECT_TRANSFORMS_PACKAGE: &str = "org.apache.kafka.connect.transforms.";
/// Connect's package of its built-in predicates.
pub(crate) const CONNECT_PREDICATES_PACKAGE: &str = "org.apache.kafka.connect.transforms.predicates.";

/// Which part of the record a `$Key` / `$Value` transform works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Key,
    Value,
}

impl Side {
    pub(crate) fn of(self, r: &mut ConnectRecord) -> &mut Option<Data> {
        match self {
            Side::Key => &mut r.key,
            Side::Value => &mut r.value,
        }
    }
}

/// A required setting, trimmed.
pub(crate) fn required<'a>(s: &'a TransformSettings, key: &str) -> Result<&'a str, String> {
    match s.get(key).map(|v| v.trim()) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(format!("missing setting {key:?}")),
    }
}

/// A comma-separated list setting (empty when absent).
pub(crate) fn list(s: &TransformSettings, key: &str) -> Vec<String> {
    s.get(key)
        .map(|v| v.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The JSON object a field transform works on, or Connect's refusal.
pub(crate) fn object_of<'a>(
    data: &'a mut Data,
    purpose: &str,
) -> Result<&'a mut serde_json::Map<String, serde_json::Value>, String> {
    let kind = data.kind();
    match data {
        Data::Json(serde_json::Value::Object(m)) => Ok(m),
        _ => Err(format!("Only Map objects supported in absence of schema for [{purpose}], found: {kind}")),
    }
}
