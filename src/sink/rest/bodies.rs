//! Connect's JSON bodies for connector info and status (pure functions, unit-tested).

use serde_json::{json, Map, Value};

use super::herder::{ConnectorInfo, ConnectorStatus, TaskStatus};

/// `GET /connectors/{name}`, and the answer to a create or a config change.
pub(crate) fn info(i: &ConnectorInfo) -> Value {
    let tasks: Vec<Value> = (0..i.tasks).map(|t| json!({"connector": i.name, "task": t})).collect();
    json!({"name": i.name, "config": i.config, "tasks": tasks, "type": "sink"})
}

/// `GET /connectors/{name}/status`; `worker_id` is the REST listener's host:port, as in
/// Connect; `version` is the plugin's version (Connect 4's KIP-891), here the runtime's.
pub(crate) fn status(s: &ConnectorStatus, worker_id: &str) -> Value {
    let version = env!("CARGO_PKG_VERSION");
    let mut connector = json!({"state": s.state.as_str(), "worker_id": worker_id, "version": version});
    if let Some(t) = &s.trace {
        connector["trace"] = json!(t);
    }
    let tasks: Vec<Value> = s.tasks.iter().map(|t| task_status(t, worker_id)).collect();
    json!({"name": s.name, "connector": connector, "tasks": tasks, "type": "sink"})
}

/// `GET /connectors/{name}/tasks`: each task's id and settings. Every task of a connector
/// runs on the connector's settings; `task.class` says which sink, as Connect's worker
/// adds it.
pub(crate) fn tasks(i: &ConnectorInfo) -> Value {
    let mut config = i.config.clone();
    if let Some(class) = i.config.get("connector.class") {
        config.insert("task.class".to_string(), class.clone());
    }
    let tasks: Vec<Value> =
        (0..i.tasks).map(|t| json!({"id": {"connector": i.name, "task": t}, "config": config})).collect();
    Value::Array(tasks)
}

/// `GET /connectors/{name}/tasks/{id}/status`.
pub(crate) fn task_status(t: &TaskStatus, worker_id: &str) -> Value {
    let mut v =
        json!({"id": t.id, "state": t.state.as_str(), "worker_id": worker_id, "version": env!("CARGO_PKG_VERSION")});
    if let Some(trace) = &t.trace {
        v["trace"] = json!(trace);
    }
    v
}

/// `GET /connectors?expand=...`: by name, the parts asked for.
pub(crate) fn expanded(parts: Vec<(String, Option<Value>, Option<Value>)>) -> Value {
    let mut out = Map::new();
    for (name, status, info) in parts {
        let mut one = Map::new();
        if let Some(s) = status {
            one.insert("status".into(), s);
        }
        if let Some(i) = info {
            one.insert("info".into(), i);
        }
        out.insert(name, Value::Object(one));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::rest::herder::ConnectorState;
    use std::collections::BTreeMap;

    #[test]
    fn info_lists_tasks_by_connector_and_number() {
        let i = ConnectorInfo {
            name: "a".into(),
            config: BTreeMap::from([("name".to_string(), "a".to_string())]),
            tasks: 2,
        };
        assert_eq!(
            info(&i),
            json!({"name": "a", "config": {"name": "a"}, "tasks": [{"connector": "a", "task": 0}, {"connector": "a", "task": 1}], "type": "sink"})
        );
    }

    #[test]
    fn status_carries_traces_only_when_failed() {
        let v = env!("CARGO_PKG_VERSION");
        let s = ConnectorStatus {
            name: "a".into(),
            state: ConnectorState::Running,
            trace: None,
            tasks: vec![
                TaskStatus { id: 0, state: ConnectorState::Running, trace: None },
                TaskStatus { id: 1, state: ConnectorState::Failed, trace: Some("boom".into()) },
            ],
        };
        assert_eq!(
            status(&s, "h:1"),
            json!({"name": "a", "connector": {"state": "RUNNING", "worker_id": "h:1", "version": v}, "tasks": [
                {"id": 0, "state": "RUNNING", "worker_id": "h:1", "version": v},
                {"id": 1, "state": "FAILED", "worker_id": "h:1", "trace": "boom", "version": v}
            ], "type": "sink"})
        );
    }

    #[test]
    fn tasks_carry_the_connectors_settings_and_the_class() {
        let i = ConnectorInfo {
            name: "a".into(),
            config: BTreeMap::from([("connector.class".to_string(), "file".to_string())]),
            tasks: 1,
        };
        assert_eq!(
            tasks(&i),
            json!([{"id": {"connector": "a", "task": 0}, "config": {"connector.class": "file", "task.class": "file"}}])
        );
    }

    #[test]
    fn expand_keeps_the_parts_asked_for() {
        let v = expanded(vec![("a".into(), Some(json!(1)), None), ("b".into(), Some(json!(2)), Some(json!(3)))]);
        assert_eq!(v, json!({"a": {"status": 1}, "b": {"status": 2, "info": 3}}));
    }
}
