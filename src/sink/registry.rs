//! `connector.class` names to task factories: the built-in sinks under their names (and the
//! Connect class names they stand in for), plus whatever a library user registers.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::task::{SinkError, SinkTaskFactory};

/// Connector classes the runtime can start.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Arc<dyn SinkTaskFactory>>,
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

    /// The factory for `class`, or an error listing the classes there are.
    pub fn get(&self, class: &str) -> Result<Arc<dyn SinkTaskFactory>, SinkError> {
        self.factories.get(class).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.factories.keys().map(String::as_str).collect();
            SinkError::fatal(format!(
                "connector.class {class:?} is not known; this runtime has: {}",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ))
        })
    }

    /// The registered class names, sorted.
    pub fn classes(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("classes", &self.factories.keys().collect::<Vec<_>>()).finish()
    }
}
