//! `PUT /connector-plugins/{class}/config/validate`: what the runtime says of a
//! configuration, in Connect's shape (`name`, `error_count`, `groups`, `configs[]` each
//! with a `definition` and a `value` carrying its `errors`). The check is the one a start
//! makes before it connects (`Worker::check_connector`), so the answer agrees with what
//! `POST /connectors` would do; each refused setting is reported (the check is run again
//! past each one).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::error::Error;
use crate::sink::{ConnectorConfig, Worker};

/// A setting's definition, as Connect describes one.
#[derive(Clone, Copy)]
struct Definition<'a> {
    name: &'a str,
    ty: &'static str,
    default: Option<&'static str>,
    importance: &'static str,
    group: &'static str,
    doc: &'static str,
}

const fn def(
    name: &'static str,
    ty: &'static str,
    default: Option<&'static str>,
    importance: &'static str,
    group: &'static str,
    doc: &'static str,
) -> Definition<'static> {
    Definition { name, ty, default, importance, group, doc }
}

/// The settings every connector has: name, type, default, importance, group, what it does.
const DEFINITIONS: &[Definition<'static>] = &[
    def("name", "STRING", None, "HIGH", "Common", "Globally unique name to use for this connector."),
    def(
        "connector.class",
        "STRING",
        None,
        "HIGH",
        "Common",
        "The sink's class: a built-in name or Connect's class name.",
    ),
    def("tasks.max", "INT", Some("1"), "HIGH", "Common", "How many tasks share the connector's share group."),
    def("topics", "LIST", Some(""), "HIGH", "Common", "The topics to consume (or topics.regex)."),
    def("topics.regex", "STRING", Some(""), "HIGH", "Common", "A pattern of topics to consume (or topics)."),
    def("key.converter", "CLASS", None, "LOW", "Common", "How record keys become the sink's data."),
    def("value.converter", "CLASS", None, "LOW", "Common", "How record values become the sink's data."),
    def("transforms", "LIST", Some(""), "LOW", "Transforms", "Aliases of the transforms to apply, in order."),
    def("predicates", "LIST", Some(""), "LOW", "Predicates", "Aliases of the predicates the transforms use."),
    def(
        "errors.tolerance",
        "STRING",
        Some("none"),
        "MEDIUM",
        "Error Handling",
        "none stops the task on a failed record; all goes on.",
    ),
    def(
        "errors.deadletterqueue.topic.name",
        "STRING",
        Some(""),
        "MEDIUM",
        "Error Handling",
        "Where failed records are copied.",
    ),
    def(
        "errors.deadletterqueue.context.headers.enable",
        "BOOLEAN",
        Some("false"),
        "MEDIUM",
        "Error Handling",
        "Adds the failure's context as headers.",
    ),
    def(
        "errors.deadletterqueue.mode",
        "STRING",
        Some("client"),
        "MEDIUM",
        "Error Handling",
        "client writes the DLQ; broker lets the broker write it (Kafka 4.4+).",
    ),
    def("share.group.id", "STRING", None, "MEDIUM", "Share", "The share group (connect-<name> by default)."),
    def(
        "share.auto.offset.reset",
        "STRING",
        None,
        "MEDIUM",
        "Share",
        "Where the group starts: earliest, latest or by_duration:<ISO-8601>; unset, earliest on a group without \
         a setting of its own (as a Connect sink starts).",
    ),
    def(
        "share.acknowledgement.mode",
        "STRING",
        Some("explicit"),
        "MEDIUM",
        "Share",
        "explicit (per record) or implicit (per batch).",
    ),
    def(
        "share.acquisition.lock.timeout.ms",
        "LONG",
        Some("30000"),
        "MEDIUM",
        "Share",
        "How long a delivered record stays locked to its task.",
    ),
    def(
        "share.max.delivery.count",
        "INT",
        Some("5"),
        "MEDIUM",
        "Share",
        "Failed deliveries before a record is dead-lettered.",
    ),
];

/// A setting outside the table (the sink's own, a converter's, a transform's).
const SINK_SETTING: Definition<'static> =
    def("", "STRING", None, "MEDIUM", "Sink", "A setting of the sink or its plugins.");

/// The setting a refusal names, and its message.
fn refusal(e: &Error) -> (String, String) {
    match e {
        Error::Config { key, message } => (key.clone(), message.clone()),
        e => ("name".to_string(), e.to_string()),
    }
}

/// Connect's validate answer for one connector file, as `kafka-share-sink --validate`
/// prints it: what `PUT /connector-plugins/{class}/config/validate` answers for the file's
/// settings under its own `connector.class`.
#[derive(Debug, Clone)]
pub struct Validation {
    /// How many settings are refused (the answer's `error_count`).
    pub error_count: usize,
    /// The answer, as pretty-printed JSON.
    pub json: String,
}

/// Validates the connector file at `path` (`.json`: Connect's `{"name":..,"config":{..}}`
/// or flat settings; anything else: a properties file) as the REST API's validate endpoint
/// would. An unreadable file, or one without `connector.class`, is an error; refused
/// settings are the answer's, not an error.
pub fn validate_file(worker: &Worker, path: &std::path::Path) -> crate::Result<Validation> {
    let settings = if path.extension().is_some_and(|e| e == "json") {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config { key: path.display().to_string(), message: format!("cannot read: {e}") })?;
        crate::sink::config::settings_of_json(&text)?
    } else {
        crate::sink::config::settings_of_properties(&crate::config::Properties::load(path)?)
    };
    let class = match settings.get("connector.class").map(|c| c.trim()) {
        Some(c) if !c.is_empty() => c.to_string(),
        _ => {
            return Err(Error::config(
                "connector.class",
                "missing: say which sink to validate against (e.g. connector.class=file)",
            ))
        }
    };
    let answer = validate(worker, &class, settings).map_err(|m| Error::config("connector.class", m))?;
    let error_count = answer.get("error_count").and_then(Value::as_u64).unwrap_or(0) as usize;
    let json = serde_json::to_string_pretty(&answer).unwrap_or_else(|_| answer.to_string());
    Ok(Validation { error_count, json })
}

/// The answer for `config` under `class` (the path's class; a `connector.class` in the
/// config must name the same, as Connect requires).
pub(crate) fn validate(worker: &Worker, class: &str, config: BTreeMap<String, String>) -> Result<Value, String> {
    let config = with_class(worker, class, config)?;
    Ok(answer(class, &config, &errors(worker, &config)))
}

/// As [`validate`], with the check a create makes against the cluster too
/// (`Worker::check_group`): a `share.group.id` (default `connect-<name>`) that a group of
/// another type holds, such as Kafka Connect's own consumer group of the same name.
pub(crate) async fn validate_with_cluster(
    worker: &Worker,
    class: &str,
    config: BTreeMap<String, String>,
) -> Result<Value, String> {
    let config = with_class(worker, class, config)?;
    let mut found = errors(worker, &config);
    if !found.iter().any(|(k, _)| k == "share.group.id" || k == "name") {
        if let Ok(parsed) = ConnectorConfig::from_pairs(config.clone()) {
            if let Err(e) = worker.check_group(&parsed).await {
                found.push(refusal(&e));
            }
        }
    }
    Ok(answer(class, &config, &found))
}

/// `config` with its `connector.class`, which must be `class` when given.
fn with_class(
    worker: &Worker,
    class: &str,
    mut config: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    match config.get("connector.class") {
        Some(c) if !same_class(c, class) => {
            return Err(format!("Included connector type {c} does not match request type {class}"))
        }
        Some(_) => {}
        None => {
            // The path may name the class by its simple name, as Connect allows.
            let registered = worker.registry().classes().find(|c| same_class(c, class)).unwrap_or(class);
            config.insert("connector.class".to_string(), registered.to_string());
        }
    }
    Ok(config)
}

/// Every refusal in `config`: the checks stop at the first, so each refused setting is set
/// to its default (removed when it has none) and the check runs again; a setting refused
/// once more (a required one, such as `topics`, missing) gets a stand-in value, so the
/// settings after it are still checked. It ends when the check passes or a stand-in is
/// refused too.
fn errors(worker: &Worker, config: &BTreeMap<String, String>) -> Vec<(String, String)> {
    const STAND_IN: &str = "validate";
    let mut trial = config.clone();
    let mut found: Vec<(String, String)> = Vec::new();
    let mut stood_in: Vec<String> = Vec::new();
    for _ in 0..=2 * (DEFINITIONS.len() + config.len()) {
        let refused = match ConnectorConfig::from_pairs(trial.clone()) {
            Ok(parsed) => worker.check_connector(parsed).err().map(|e| refusal(&e)),
            Err(e) => Some(refusal(&e)),
        };
        let Some((key, message)) = refused else { break };
        let first = !found.iter().any(|(k, _)| *k == key);
        let default = DEFINITIONS.iter().find(|d| d.name == key).and_then(|d| d.default);
        match (key.as_str(), default) {
            ("name", _) if first => _ = trial.insert(key.clone(), STAND_IN.to_string()),
            (_, Some(default)) if first => _ = trial.insert(key.clone(), default.to_string()),
            _ if first && trial.contains_key(&key) => _ = trial.remove(&key),
            _ if !stood_in.contains(&key) => {
                trial.insert(key.clone(), STAND_IN.to_string());
                stood_in.push(key.clone());
            }
            _ => break,
        }
        if first {
            found.push((key, message));
        }
    }
    found
}

/// Connect accepts a class by its full or its simple name.
fn same_class(a: &str, b: &str) -> bool {
    let simple = |s: &str| s.rsplit('.').next().unwrap_or(s).to_string();
    a == b || simple(a) == simple(b)
}

fn answer(class: &str, config: &BTreeMap<String, String>, errors: &[(String, String)]) -> Value {
    let mut rows: Vec<Definition> = DEFINITIONS.to_vec();
    // The sink's own settings, and a refused one outside the table, are listed too.
    let mut extra: Vec<&str> = config.keys().map(String::as_str).collect();
    extra.extend(errors.iter().map(|(k, _)| k.as_str()));
    for k in extra {
        if !rows.iter().any(|r| r.name == k) {
            rows.push(Definition { name: k, ..SINK_SETTING });
        }
    }
    let mut groups: Vec<&str> = Vec::new();
    let configs: Vec<Value> = rows
        .iter()
        .enumerate()
        .map(|(order, d)| {
            let Definition { name, ty, default, importance, group, doc } = *d;
            if !groups.contains(&group) {
                groups.push(group);
            }
            let errors: Vec<&String> = errors.iter().filter(|(k, _)| k == name).map(|(_, m)| m).collect();
            json!({
                "definition": {
                    "name": name, "type": ty, "required": default.is_none() && matches!(name, "name" | "connector.class"),
                    "default_value": default, "importance": importance, "documentation": doc, "group": group,
                    "width": "NONE", "display_name": name, "dependents": [], "order_in_group": order + 1
                },
                "value": {"name": name, "value": config.get(name), "recommended_values": [], "errors": errors, "visible": true}
            })
        })
        .collect();
    json!({"name": class, "error_count": errors.len(), "groups": groups, "configs": configs})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker() -> Worker {
        Worker::new(crate::sink::WorkerConfig::new("127.0.0.1:1"), crate::sink::Registry::with_builtins())
    }

    /// The settings an answer refuses, sorted.
    fn refused(v: &Value) -> Vec<&str> {
        let mut names: Vec<&str> = v["configs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| !c["value"]["errors"].as_array().unwrap().is_empty())
            .map(|c| c["value"]["name"].as_str().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_error_sits_on_its_setting() {
        let config =
            BTreeMap::from([("tasks.max".to_string(), "0".to_string()), ("file".to_string(), "/x".to_string())]);
        let v = answer("file", &config, &[("tasks.max".into(), "must be at least 1".into())]);
        assert_eq!(v["name"], "file");
        assert_eq!(v["error_count"], 1);
        assert_eq!(v["groups"][0], "Common");
        let with_errors: Vec<&Value> = v["configs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| !c["value"]["errors"].as_array().unwrap().is_empty())
            .collect();
        assert_eq!(with_errors.len(), 1);
        assert_eq!(with_errors[0]["value"]["name"], "tasks.max");
        assert_eq!(with_errors[0]["value"]["value"], "0");
        // The sink's own setting is listed, without a definition of ours.
        assert!(v["configs"].as_array().unwrap().iter().any(|c| c["definition"]["name"] == "file"));
    }

    #[test]
    fn every_refused_setting_is_reported() {
        let worker = worker();
        let config = BTreeMap::from([
            ("topics".to_string(), "t".to_string()),
            ("tasks.max".to_string(), "0".to_string()),
            ("errors.tolerance".to_string(), "some".to_string()),
        ]);
        let v = validate(&worker, "FileStreamSinkConnector", config).unwrap();
        let with_errors = refused(&v);
        assert_eq!(with_errors, ["errors.tolerance", "name", "tasks.max"], "{v}");
        assert_eq!(v["error_count"], 3);
        // The simple name found the registered class.
        let class = v["configs"].as_array().unwrap().iter().find(|c| c["value"]["name"] == "connector.class").unwrap();
        assert_eq!(class["value"]["value"], crate::sink::CONNECT_FILE_SINK_CLASS);
        // A good configuration has none.
        let good = BTreeMap::from([("name".to_string(), "a".to_string()), ("topics".to_string(), "t".to_string())]);
        assert_eq!(validate(&worker, "file", good).unwrap()["error_count"], 0);
        assert!(
            validate(&worker, "kafka", BTreeMap::from([("connector.class".to_string(), "file".to_string())])).is_err()
        );
    }

    #[test]
    fn a_missing_required_setting_does_not_hide_the_others() {
        // `topics` has no default: removing it could not make the check pass, and the
        // settings checked after it went unreported.
        let worker = worker();
        let config = BTreeMap::from([
            ("name".to_string(), "f".to_string()),
            ("tasks.max".to_string(), "zero".to_string()),
            ("errors.tolerance".to_string(), "some".to_string()),
        ]);
        let v = validate(&worker, "FileStreamSink", config).unwrap();
        let with_errors = refused(&v);
        assert_eq!(with_errors, ["errors.tolerance", "tasks.max", "topics"], "{v}");
    }

    #[test]
    fn a_file_is_validated_under_its_own_class() {
        let worker = worker();
        let dir = std::env::temp_dir().join(format!("ks-validate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.properties");
        std::fs::write(&good, "name=f\nconnector.class=FileStreamSink\ntopics=t\nfile=/tmp/x\n").unwrap();
        let v = validate_file(&worker, &good).unwrap();
        assert_eq!(v.error_count, 0, "{}", v.json);
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"name":"f","config":{"connector.class":"file","topics":"t","tasks.max":0}}"#).unwrap();
        let v = validate_file(&worker, &bad).unwrap();
        assert_eq!(v.error_count, 1, "{}", v.json);
        assert!(v.json.contains("tasks.max"), "{}", v.json);
        let classless = dir.join("classless.properties");
        std::fs::write(&classless, "name=f\ntopics=t\n").unwrap();
        let e = validate_file(&worker, &classless).unwrap_err();
        assert!(matches!(&e, Error::Config { key, .. } if key == "connector.class"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn connects_auto_offset_reset_is_checked_as_the_groups_start() {
        let worker = worker();
        let with = |key: &str, value: &str| {
            BTreeMap::from([
                ("name".to_string(), "a".to_string()),
                ("topics".to_string(), "t".to_string()),
                (key.to_string(), value.to_string()),
            ])
        };
        const CONNECT: &str = "consumer.override.auto.offset.reset";
        for good in ["earliest", "latest", "EARLIEST"] {
            let v = validate(&worker, "file", with(CONNECT, good)).unwrap();
            assert_eq!(v["error_count"], 0, "{good}: {v}");
        }
        for bad in ["none", "by_duration:P1D", "smallest"] {
            let v = validate(&worker, "file", with(CONNECT, bad)).unwrap();
            assert_eq!(refused(&v), [CONNECT], "{bad}: {v}");
            assert!(v.to_string().contains("share.auto.offset.reset"), "{v}");
        }
        let v = validate(&worker, "file", with("share.auto.offset.reset", "by_duration:PT1H")).unwrap();
        assert_eq!(v["error_count"], 0, "{v}");
        let v = validate(&worker, "file", with("share.auto.offset.reset", "none")).unwrap();
        assert_eq!(refused(&v), ["share.auto.offset.reset"], "{v}");
        let mut both = with(CONNECT, "latest");
        both.insert("share.auto.offset.reset".into(), "earliest".into());
        assert_eq!(refused(&validate(&worker, "file", both).unwrap()), [CONNECT]);
    }

    #[test]
    fn classes_match_by_full_or_simple_name() {
        assert!(same_class("org.apache.kafka.connect.file.FileStreamSinkConnector", "FileStreamSinkConnector"));
        assert!(same_class("file", "file"));
        assert!(!same_class("file", "kafka"));
    }
}
