//! Where connector configurations set through the REST API are kept across restarts: one
//! JSON file, named by the worker setting `config.storage.file.filename` (as Connect's
//! standalone worker names its offsets file by `offset.storage.file.filename`). Each change
//! rewrites it whole, through a temporary file and a rename, so a crash leaves the old
//! version or the new one, never half of one.
//!
//! ```json
//! {"connectors": {"orders": {"config": {"name": "orders", ...}, "state": "PAUSED"}}}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::error::RestError;

/// What a connector should be doing, as the user last said (Connect's target state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetState {
    /// Started (the default).
    Running,
    /// `PUT .../pause`: its tasks stopped, its configuration kept.
    Paused,
    /// `PUT .../stop`: the same here, and it reports no tasks (Connect's STOPPED).
    Stopped,
}

impl TargetState {
    /// Connect's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetState::Running => "RUNNING",
            TargetState::Paused => "PAUSED",
            TargetState::Stopped => "STOPPED",
        }
    }

    /// From Connect's name (`initial_state` in `POST /connectors`, and the store).
    pub fn parse(s: &str) -> Option<TargetState> {
        match s.trim().to_ascii_uppercase().as_str() {
            "RUNNING" => Some(TargetState::Running),
            "PAUSED" => Some(TargetState::Paused),
            "STOPPED" => Some(TargetState::Stopped),
            _ => None,
        }
    }
}

/// One connector as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) config: BTreeMap<String, String>,
    pub(crate) state: TargetState,
}

/// The file, or none (configurations then last as long as the process).
#[derive(Debug, Clone)]
pub(crate) struct Store {
    path: Option<PathBuf>,
}

fn store_error(path: &Path, reason: impl std::fmt::Display) -> RestError {
    RestError::Store { path: path.display().to_string(), reason: reason.to_string() }
}

impl Store {
    pub(crate) fn new(path: Option<PathBuf>) -> Store {
        Store { path }
    }

    /// The stored connectors; none when there is no file yet.
    pub(crate) fn load(&self) -> Result<BTreeMap<String, Stored>, RestError> {
        let Some(path) = &self.path else { return Ok(BTreeMap::new()) };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(store_error(path, e)),
        };
        parse(&text).map_err(|why| store_error(path, why))
    }

    /// Replaces the file's contents with `all`.
    pub(crate) fn save(&self, all: &BTreeMap<String, Stored>) -> Result<(), RestError> {
        let Some(path) = &self.path else { return Ok(()) };
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let text = render(all).to_string();
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| store_error(path, e))
    }
}

fn render(all: &BTreeMap<String, Stored>) -> Value {
    let connectors: Map<String, Value> = all
        .iter()
        .map(|(name, s)| (name.clone(), json!({"config": s.config, "state": s.state.as_str()})))
        .collect();
    json!({ "connectors": connectors })
}

fn parse(text: &str) -> Result<BTreeMap<String, Stored>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e}); fix or remove the file"))?;
    let connectors = v
        .get("connectors")
        .and_then(Value::as_object)
        .ok_or("no \"connectors\" object; fix or remove the file")?;
    let mut out = BTreeMap::new();
    for (name, entry) in connectors {
        let config = entry
            .get("config")
            .and_then(Value::as_object)
            .ok_or_else(|| format!("connector {name:?} has no \"config\" object"))?
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!("connector {name:?}: {k} is {other}, not a string")),
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?;
        let state = entry
            .get("state")
            .and_then(Value::as_str)
            .and_then(TargetState::parse)
            .unwrap_or(TargetState::Running);
        out.insert(name.clone(), Stored { config, state });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let mut all = BTreeMap::new();
        let config =
            BTreeMap::from([("name".to_string(), "a".to_string()), ("tasks.max".to_string(), "2".to_string())]);
        all.insert("a".to_string(), Stored { config, state: TargetState::Paused });
        assert_eq!(parse(&render(&all).to_string()).unwrap(), all);
        assert!(parse("{").unwrap_err().contains("fix or remove"));
        assert!(parse("{\"connectors\": {\"a\": {}}}").unwrap_err().contains("no \"config\""));
        assert!(parse("{\"connectors\": {\"a\": {\"config\": {\"k\": 1}}}}").unwrap_err().contains("not a string"));
    }

    #[test]
    fn a_missing_file_is_empty_and_saving_creates_it() {
        let dir = std::env::temp_dir().join(format!("rest-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::new(Some(dir.join("connectors.json")));
        assert!(store.load().unwrap().is_empty());
        let mut all = BTreeMap::new();
        all.insert("b".to_string(), Stored { config: BTreeMap::new(), state: TargetState::Stopped });
        store.save(&all).unwrap();
        assert_eq!(store.load().unwrap(), all);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn target_states_by_connect_names() {
        for s in [TargetState::Running, TargetState::Paused, TargetState::Stopped] {
            assert_eq!(TargetState::parse(s.as_str()), Some(s));
        }
        assert_eq!(TargetState::parse("paused"), Some(TargetState::Paused));
        assert_eq!(TargetState::parse("FAILED"), None);
    }
}
