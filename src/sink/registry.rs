//! `connector.class` names to task factories: the built-in sinks under their names (and the
//! Connect class names they stand in for), plus whatever a library user registers; the same
//! for converters, transforms and predicates (`converter.rs`, `transform.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::converter::{Converter, ConverterConfig, ConverterFactory};
use super::task::{SinkError, SinkTaskFactory};
use super::transform::{Predicate, PredicateFactory, TransformFactory, TransformSettings, Transformation};

/// Connector classes the runtime can start, and the converters, transforms and predicates
/// their configurations may name.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Arc<dyn SinkTaskFactory>>,
    pub(super) converters: BTreeMap<String, ConverterFactory>,
    pub(super) transforms: BTreeMap<String, TransformFactory>,
    pub(super) predicates: BTreeMap<String, PredicateFactory>,
    /// Converter and transform names a user registered (replacing a built-in, maybe): the
    /// pipeline's fast path (`transforms/flat.rs`) stands in for built-ins only.
    user_named: BTreeSet<String>,
}

/// The entry for `name` in `map`, or an error listing the names there are.
fn lookup<T: Clone>(map: &BTreeMap<String, T>, what: &str, name: &str) -> Result<T, String> {
    map.get(name).cloned().ok_or_else(|| {
        // Connect's class names double the list: show the short names.
        let known: Vec<&str> = map.keys().map(String::as_str).filter(|k| !k.starts_with("org.apache.kafka.")).collect();
        format!(
            "{what} {name:?} is not known; this runtime has: {} (and Connect's class names for them)",
            known.join(", ")
        )
    })
}

impl Registry {
    /// An empty registry (no built-in sink).
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `factory` under `class` (replacing an earlier one of that name).
    pub fn register(&mut self, class: impl Into<String>, factory: impl SinkTaskFactory) -> &mut Self {
        self.factories.insert(class.into(), Arc::new(factory));
        self
    }

    /// The factory for `class`, or an error listing the classes there are. As in Connect, a
    /// class also answers to its aliases: its simple name (`FileStreamSinkConnector`) and
    /// that without the `Connector` suffix (`FileStreamSink`), when only one class has it.
    pub fn get(&self, class: &str) -> Result<Arc<dyn SinkTaskFactory>, SinkError> {
        if let Some(f) = self.factories.get(class) {
            return Ok(f.clone());
        }
        let aliased = |full: &str| {
            let simple = full.rsplit('.').next().unwrap_or(full);
            full.contains('.') && (simple == class || simple.strip_suffix("Connector") == Some(class))
        };
        let mut hits = self.factories.iter().filter(|(k, _)| aliased(k));
        if let (Some((_, f)), None) = (hits.next(), hits.next()) {
            return Ok(f.clone());
        }
        let known: Vec<&str> = self.factories.keys().map(String::as_str).collect();
        Err(SinkError::fatal(format!(
            "connector.class {class:?} is not known; this runtime has: {}",
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        )))
    }

    /// Registers a converter under `name` (for `key.converter` / `value.converter`).
    pub fn register_converter(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn(&ConverterConfig) -> Result<Box<dyn Converter>, String> + Send + Sync + 'static,
    ) -> &mut Self {
        let name = name.into();
        self.user_named.insert(name.clone());
        self.converters.insert(name, Arc::new(factory));
        self
    }

    /// Registers a transform under `name` (for `transforms.<alias>.type`).
    pub fn register_transform(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn(&TransformSettings) -> Result<Box<dyn Transformation>, String> + Send + Sync + 'static,
    ) -> &mut Self {
        let name = name.into();
        self.user_named.insert(name.clone());
        self.transforms.insert(name, Arc::new(factory));
        self
    }

    /// Registers a predicate under `name` (for `predicates.<alias>.type`).
    pub fn register_predicate(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn(&TransformSettings) -> Result<Box<dyn Predicate>, String> + Send + Sync + 'static,
    ) -> &mut Self {
        self.predicates.insert(name.into(), Arc::new(factory));
        self
    }

    pub(crate) fn converter(&self, name: &str) -> Result<ConverterFactory, String> {
        lookup(&self.converters, "converter", name)
    }

    pub(crate) fn transform(&self, name: &str) -> Result<TransformFactory, String> {
        lookup(&self.transforms, "transform", name)
    }

    /// Whether the converter or transform `name` is still the built-in one (a user may have
    /// registered another under its name).
    pub(crate) fn is_builtin(&self, name: &str) -> bool {
        !self.user_named.contains(name)
    }

    pub(crate) fn predicate(&self, name: &str) -> Result<PredicateFactory, String> {
        lookup(&self.predicates, "predicate", name)
    }

    /// The registered class names, sorted.
    pub fn classes(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("classes", &self.factories.keys().collect::<Vec<_>>())
            .field("converters", &self.converters.len())
            .field("transforms", &self.transforms.len())
            .field("predicates", &self.predicates.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_answers_to_connects_aliases() {
        let r = Registry::with_builtins();
        for name in [
            "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "FileStreamSinkConnector",
            "FileStreamSink",
            "file",
        ] {
            assert!(r.get(name).is_ok(), "{name}");
        }
        assert!(r.get("FileStream").is_err());
        assert!(r.get("Connector").is_err());
    }
}
