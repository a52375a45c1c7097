//! The config topic's records, in Kafka Connect's format so that people (and tools) who know
//! Connect's `config.storage.topic` can read it:
//!
//! | key | value |
//! |---|---|
//! | `connector-<name>` | `{"properties": {...}}`: the connector's configuration; a tombstone deletes it |
//! | `target-state-<name>` | `{"state": "PAUSED", "state.v2": "STOPPED"}`: what the user asked (`state` is the value older Connect workers read: `STOPPED` is written there as `PAUSED`, as Connect does) |
//! | `restart-connector-<name>` | `{"include-tasks": true, "only-failed": false}`: a restart, applied by every worker that reads it live (not by one catching up at its start, as Connect) |
//!
//! Connect's other keys (`task-*`, `commit-*`, `session-key`, ...) are read as
//! [`ConfigRecord::Other`] and ignored: tasks here are not assigned by a leader.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::store::TargetState;

const CONNECTOR: &str = "connector-";
const TARGET_STATE: &str = "target-state-";
const RESTART: &str = "restart-connector-";

/// One record of the config topic, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConfigRecord {
    /// `connector-<name>`: its configuration, or `None` (a tombstone): deleted.
    Connector { name: String, config: Option<BTreeMap<String, String>> },
    /// `target-state-<name>`: its target state, or `None` (a tombstone, written after a delete).
    Target { name: String, state: Option<TargetState> },
    /// `restart-connector-<name>`: restart it (Connect's `includeTasks` and `onlyFailed`).
    Restart { name: String, include_tasks: bool, only_failed: bool },
    /// A key this runtime does not use (Connect's task and commit records), with the key.
    Other(String),
}

/// The key and value of the record that sets `name`'s configuration.
pub(crate) fn connector_record(name: &str, config: &BTreeMap<String, String>) -> (String, Option<Vec<u8>>) {
    (format!("{CONNECTOR}{name}"), Some(json!({ "properties": config }).to_string().into_bytes()))
}

/// The tombstone that deletes `name`.
pub(crate) fn connector_tombstone(name: &str) -> (String, Option<Vec<u8>>) {
    (format!("{CONNECTOR}{name}"), None)
}

/// The record that sets `name`'s target state.
pub(crate) fn target_record(name: &str, state: TargetState) -> (String, Option<Vec<u8>>) {
    let v1 = match state {
        TargetState::Stopped => TargetState::Paused,
        s => s,
    };
    let value = json!({"state": v1.as_str(), "state.v2": state.as_str()});
    (format!("{TARGET_STATE}{name}"), Some(value.to_string().into_bytes()))
}

/// The tombstone that forgets `name`'s target state.
pub(crate) fn target_tombstone(name: &str) -> (String, Option<Vec<u8>>) {
    (format!("{TARGET_STATE}{name}"), None)
}

/// The record that asks every worker to restart `name`.
pub(crate) fn restart_record(name: &str, include_tasks: bool, only_failed: bool) -> (String, Option<Vec<u8>>) {
    let value = json!({"include-tasks": include_tasks, "only-failed": only_failed});
    (format!("{RESTART}{name}"), Some(value.to_string().into_bytes()))
}

/// Reads one record. A record that is not what its key says (not JSON, no `properties`, a
/// setting that is not a string) is an error naming the key, never a panic: the topic is
/// shared and anyone with write access may have written it.
pub(crate) fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<ConfigRecord, String> {
    let key = match key.map(std::str::from_utf8) {
        Some(Ok(k)) => k,
        Some(Err(_)) => return Err("a record whose key is not UTF-8".to_string()),
        None => return Err("a record without a key".to_string()),
    };
    // `target-state-` and `restart-connector-` do not start with `connector-`, so the order
    // of these tests is free.
    if let Some(name) = key.strip_prefix(RESTART) {
        let v = value.ok_or_else(|| format!("{key}: a tombstone, not a restart request"))?;
        let o = json_object(v).map_err(|why| format!("{key}: {why}"))?;
        // As Connect: a flag that is missing or not a boolean is false.
        let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
        return Ok(ConfigRecord::Restart {
            name: name.to_string(),
            include_tasks: flag("include-tasks"),
            only_failed: flag("only-failed"),
        });
    }
    if let Some(name) = key.strip_prefix(TARGET_STATE) {
        let state = match value {
            None => None,
            Some(v) => Some(target_state(v).map_err(|why| format!("{key}: {why}"))?),
        };
        return Ok(ConfigRecord::Target { name: name.to_string(), state });
    }
    if let Some(name) = key.strip_prefix(CONNECTOR) {
        let config = match value {
            None => None,
            Some(v) => Some(properties(v).map_err(|why| format!("{key}: {why}"))?),
        };
        return Ok(ConfigRecord::Connector { name: name.to_string(), config });
    }
    Ok(ConfigRecord::Other(key.to_string()))
}

fn json_object(v: &[u8]) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(v) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(other) => Err(format!("the value is {other}, not a JSON object")),
        Err(e) => Err(format!("the value is not JSON ({e})")),
    }
}

fn properties(v: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let o = json_object(v)?;
    let Some(Value::Object(props)) = o.get("properties") else {
        return Err("no \"properties\" object".to_string());
    };
    props
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(format!("{k} is {other}, not a string")),
        })
        .collect()
}

fn target_state(v: &[u8]) -> Result<TargetState, String> {
    let o = json_object(v)?;
    // `state.v2` first: it is the only one that can say STOPPED.
    ["state.v2", "state"]
        .iter()
        .find_map(|k| o.get(*k).and_then(Value::as_str).and_then(TargetState::parse))
        .ok_or_else(|| "no \"state\" of RUNNING, PAUSED or STOPPED".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(r: (String, Option<Vec<u8>>)) -> Result<ConfigRecord, String> {
        decode(Some(r.0.as_bytes()), r.1.as_deref())
    }

    #[test]
    fn what_is_written_reads_back() {
        let config = BTreeMap::from([("name".to_string(), "a-b".to_string()), ("topics".to_string(), "t".to_string())]);
        assert_eq!(
            read(connector_record("a-b", &config)),
            Ok(ConfigRecord::Connector { name: "a-b".into(), config: Some(config) })
        );
        assert_eq!(read(connector_tombstone("a")), Ok(ConfigRecord::Connector { name: "a".into(), config: None }));
        for s in [TargetState::Running, TargetState::Paused, TargetState::Stopped] {
            assert_eq!(read(target_record("a", s)), Ok(ConfigRecord::Target { name: "a".into(), state: Some(s) }));
        }
        assert_eq!(read(target_tombstone("a")), Ok(ConfigRecord::Target { name: "a".into(), state: None }));
        for (include_tasks, only_failed) in [(false, false), (true, false), (false, true), (true, true)] {
            assert_eq!(
                read(restart_record("a-b", include_tasks, only_failed)),
                Ok(ConfigRecord::Restart { name: "a-b".into(), include_tasks, only_failed })
            );
        }
    }

    #[test]
    fn reads_connects_own_records() {
        // As a Connect 4.x worker writes them.
        let v = br#"{"properties":{"connector.class":"FileStreamSink","name":"f","topics":"t"}}"#;
        let r = decode(Some(b"connector-f"), Some(v)).unwrap();
        assert!(matches!(r, ConfigRecord::Connector { ref name, config: Some(ref c) } if name == "f" && c.len() == 3));
        let v = br#"{"state":"PAUSED","state.v2":"STOPPED"}"#;
        let r = decode(Some(b"target-state-f"), Some(v)).unwrap();
        assert_eq!(r, ConfigRecord::Target { name: "f".into(), state: Some(TargetState::Stopped) });
        let r = decode(Some(b"target-state-f"), Some(br#"{"state":"PAUSED"}"#)).unwrap();
        assert_eq!(r, ConfigRecord::Target { name: "f".into(), state: Some(TargetState::Paused) });
        let v = br#"{"include-tasks":true,"only-failed":true}"#;
        let r = decode(Some(b"restart-connector-f"), Some(v)).unwrap();
        assert_eq!(r, ConfigRecord::Restart { name: "f".into(), include_tasks: true, only_failed: true });
        // A flag that is missing or not a boolean is false, as Connect reads it.
        let r = decode(Some(b"restart-connector-f"), Some(br#"{"only-failed":"yes"}"#)).unwrap();
        assert_eq!(r, ConfigRecord::Restart { name: "f".into(), include_tasks: false, only_failed: false });
        let task = decode(Some(b"task-f-0"), Some(br#"{"properties":{}}"#)).unwrap();
        assert_eq!(task, ConfigRecord::Other("task-f-0".into()));
    }

    #[test]
    fn garbage_is_an_error_naming_the_key() {
        for (k, v) in [
            (&b"connector-a"[..], &b"{"[..]),
            (b"connector-a", b"[1]"),
            (b"connector-a", br#"{"props":{}}"#),
            (b"connector-a", br#"{"properties":{"x":1}}"#),
            (b"target-state-a", br#"{"state":"SLEEPING"}"#),
            (b"restart-connector-a", b"true"),
        ] {
            let e = decode(Some(k), Some(v)).unwrap_err();
            assert!(e.starts_with(std::str::from_utf8(k).unwrap()), "{e}");
        }
        assert!(decode(Some(b"restart-connector-a"), None).unwrap_err().contains("tombstone"));
        assert!(decode(None, Some(b"{}")).is_err());
        assert!(decode(Some(&[0xff, 0xfe]), None).is_err());
    }
}
