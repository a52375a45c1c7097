//! The REST API with Kafka Connect 4.4 standalone as the oracle (a real broker,
//! `scripts/kafka up`; Java and Connect's classpath as `sink_connect_oracle` builds it; fails
//! without them): the same sequence of calls (create, a duplicate, get config, status,
//! pause, resume, restart, update config, validate a bad config, create it, stop, expand,
//! delete, unknown connector, plugins, version) against Connect (REST on 8084 +
//! `KAFKA_PORT_OFFSET`: 8083 + offset is `sink_connect_oracle`'s Connect, which may run
//! beside it in this test binary) and against `kafka-share-sink --rest`. The status codes must be
//! equal, and the JSON bodies too, field by field, apart from what differs by nature: the
//! connector's name and class, worker ids, messages and traces, versions and cluster ids.
//! A validate answer is compared by its fields, `error_count` and the settings with errors
//! (Connect defines many more settings than the runtime has). Every disagreement is
//! listed; the test fails if there is one.

use crate::common;
use crate::common::sink_bin::SinkBin;
use crate::common::temp_dir;
use crate::sink_connect_oracle::{connect_classpath, KillOnDrop};
use crate::sink_rest_client::{call, state, try_call, wait_for, Answer};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Map, Value};

/// One runtime under test: where its API is, and what differs by nature.
#[derive(Clone)]
struct Side {
    rest: String,
    name: String,
    class: String,
    /// The class in a validate path.
    plugin: String,
    config: Value,
}

/// The answer with what differs by nature replaced by placeholders.
fn normalize(v: &Value, side: &Side) -> Value {
    match v {
        Value::String(s) if *s == side.name => json!("<name>"),
        Value::String(s) if *s == side.class => json!("<class>"),
        Value::Array(a) => Value::Array(a.iter().map(|x| normalize(x, side)).collect()),
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, x) in o {
                let key = if *k == side.name { "<name>".to_string() } else { k.clone() };
                let value = match k.as_str() {
                    "worker_id" | "message" | "trace" | "version" | "commit" | "kafka_cluster_id" => json!("<any>"),
                    // Same keys on both sides (the values differ by class and file).
                    "config" => json!(x.as_object().map(|c| c.keys().cloned().collect::<Vec<_>>())),
                    _ => normalize(x, side),
                };
                out.insert(key, value);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// A validate answer: its fields, error count, settings with errors, whether "Common" is a group.
fn validate_shape(v: &Value) -> Value {
    let keys: Vec<&String> = v.as_object().map(|o| o.keys().collect()).unwrap_or_default();
    let mut with_errors: Vec<String> = v["configs"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|c| c["value"]["errors"].as_array().is_some_and(|e| !e.is_empty()))
                .filter_map(|c| c["value"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    with_errors.sort();
    let config_keys: Vec<Vec<String>> = v["configs"]
        .as_array()
        .map(|c| {
            let mut all: Vec<Vec<String>> = c
                .iter()
                .map(|c| {
                    let d = c["definition"].as_object().map(|d| d.keys().cloned().collect()).unwrap_or_default();
                    let v: Vec<String> =
                        c["value"].as_object().map(|d| d.keys().cloned().collect()).unwrap_or_default();
                    [d, v].concat()
                })
                .collect();
            all.dedup();
            all.sort();
            all.dedup();
            all
        })
        .unwrap_or_default();
    let common = v["groups"].as_array().is_some_and(|g| g.iter().any(|g| g == "Common"));
    json!({"keys": keys, "error_count": v["error_count"], "with_errors": with_errors, "config_fields": config_keys, "common_group": common})
}

/// The plugins answer: the fields of its entries, whether a sink is among them.
fn plugins_shape(v: &Value) -> Value {
    let mut fields: Vec<Vec<String>> = v
        .as_array()
        .map(|a| a.iter().map(|p| p.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()).collect())
        .unwrap_or_default();
    fields.sort();
    fields.dedup();
    let sink = v.as_array().is_some_and(|a| a.iter().any(|p| p["type"] == "sink"));
    json!({"fields": fields, "has_sink": sink})
}

/// Starts Connect standalone without connectors, its REST listener on 8084 + offset.
fn run_connect(dir: &Path) -> (KillOnDrop, String) {
    let offset: u16 = std::env::var("KAFKA_PORT_OFFSET").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let rest = format!("127.0.0.1:{}", 8084 + offset);
    let worker = dir.join("connect-worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\nkey.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             offset.storage.file.filename={}\nlisteners=http://{rest}\nplugin.discovery=service_load\n",
            common::bootstrap(),
            dir.join("connect.offsets").display(),
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("connect.log")).unwrap();
    let child = Command::new("java")
        .args(["-Xms256M", "-Xmx1G", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", &connect_classpath()])
        .arg("org.apache.kafka.connect.cli.ConnectStandalone")
        .arg(&worker)
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("java (Connect is the oracle)");
    (KillOnDrop(child), rest)
}

/// The calls, run on one side; each answer normalized, with a label.
async fn sequence(s: &Side) -> Vec<(String, u16, Value)> {
    let mut out = Vec::new();
    let n = &s.name;
    let mut record = |label: &str, a: &Answer, shape: Value| out.push((label.to_string(), a.status, shape));
    let norm = |a: &Answer| a.body.as_ref().map(|b| normalize(b, s)).unwrap_or(Value::Null);
    let running = |a: &Answer| {
        state(a) == Some("RUNNING")
            && a.body.as_ref().is_some_and(|b| {
                b["tasks"].as_array().is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["state"] == "RUNNING"))
            })
    };
    let status = format!("/connectors/{n}/status");

    let a = call(&s.rest, "GET", "/", None).await;
    record("GET /", &a, norm(&a));
    let a = call(&s.rest, "GET", "/connector-plugins", None).await;
    record("GET /connector-plugins", &a, a.body.as_ref().map(plugins_shape).unwrap_or_default());
    let a = call(&s.rest, "GET", "/connectors", None).await;
    record("GET /connectors (none)", &a, norm(&a));

    let create = json!({"name": n, "config": s.config});
    let a = call(&s.rest, "POST", "/connectors", Some(&create)).await;
    assert_eq!(a.body.as_ref().map(|b| b["config"]["connector.class"].clone()), Some(json!(s.class)), "{a:?}");
    record("POST /connectors", &a, norm(&a));
    let a = call(&s.rest, "POST", "/connectors", Some(&create)).await;
    record("POST /connectors (again)", &a, norm(&a));
    let a = call(&s.rest, "GET", &format!("/connectors/{n}/config"), None).await;
    let mut want = s.config.clone();
    want["name"] = json!(n);
    assert_eq!(a.body.as_ref(), Some(&want), "GET config on {}", s.rest);
    // The same settings on both sides (their values differ by class and file).
    let keys = a.body.as_ref().and_then(Value::as_object).map(|o| o.keys().cloned().collect::<Vec<_>>());
    record("GET config", &a, json!(keys));
    let a = wait_for(&s.rest, &status, "RUNNING", running).await;
    record("GET status (running)", &a, norm(&a));
    let a = call(&s.rest, "GET", &format!("/connectors/{n}"), None).await;
    record("GET connector", &a, norm(&a));

    let a = call(&s.rest, "GET", &format!("/connectors/{n}/tasks"), None).await;
    record("GET tasks", &a, norm(&a));
    let a = call(&s.rest, "GET", &format!("/connectors/{n}/tasks/0/status"), None).await;
    record("GET task 0 status", &a, norm(&a));
    let a = call(&s.rest, "GET", &format!("/connectors/{n}/tasks/7/status"), None).await;
    record("GET task 7 status", &a, norm(&a));
    let a = call(&s.rest, "POST", &format!("/connectors/{n}/tasks/0/restart"), None).await;
    record("POST task 0 restart", &a, norm(&a));
    let a = wait_for(&s.rest, &status, "RUNNING after the task's restart", running).await;
    record("GET status (task restarted)", &a, norm(&a));
    let a = call(&s.rest, "PATCH", &format!("/connectors/{n}/config"), Some(&json!({"tasks.max": "1"}))).await;
    record("PATCH config", &a, norm(&a));
    let a = call(&s.rest, "POST", &format!("/connectors/{n}/restart?includeTasks=true"), None).await;
    record("POST restart?includeTasks=true", &a, norm(&a));
    let a = wait_for(&s.rest, &status, "RUNNING after restarting the tasks", running).await;
    record("GET status (tasks restarted)", &a, norm(&a));

    // Other names: created by PUT, created paused, a body without config, a name that
    // disagrees with the URL's.
    let other = format!("{n}-put");
    let a = call(&s.rest, "PUT", &format!("/connectors/{other}/config"), Some(&s.config)).await;
    record(
        "PUT config (new)",
        &a,
        normalize(&a.body.clone().unwrap_or_default(), &Side { name: other.clone(), ..s.clone() }),
    );
    let a = call(&s.rest, "DELETE", &format!("/connectors/{other}"), None).await;
    record("DELETE (new)", &a, norm(&a));
    let paused = format!("{n}-paused");
    let body = json!({"name": paused, "config": s.config, "initial_state": "PAUSED"});
    let a = call(&s.rest, "POST", "/connectors", Some(&body)).await;
    record("POST initial_state=PAUSED", &a, a.body.as_ref().map(|_| json!("<info>")).unwrap_or_default());
    let a = wait_for(&s.rest, &format!("/connectors/{paused}/status"), "PAUSED", |a| state(a) == Some("PAUSED")).await;
    record("GET status (created paused)", &a, json!(state(&a)));
    let a = call(&s.rest, "DELETE", &format!("/connectors/{paused}"), None).await;
    record("DELETE (paused)", &a, norm(&a));
    // (A body without "config": Connect answers 500, a NullPointerException inside; ours
    // 400, the body's fault. Not compared; ours is checked in sink_rest.)
    let mut mismatched = s.config.clone();
    mismatched["name"] = json!("something-else");
    let a = call(&s.rest, "PUT", &format!("/connectors/{n}/config"), Some(&mismatched)).await;
    record("PUT config (name differs)", &a, norm(&a));

    let a = call(&s.rest, "PUT", &format!("/connectors/{n}/pause"), None).await;
    record("PUT pause", &a, norm(&a));
    // Connect pauses the tasks after the connector: wait for both.
    let a = wait_for(&s.rest, &status, "PAUSED", |a| {
        state(a) == Some("PAUSED")
            && a.body
                .as_ref()
                .is_some_and(|b| b["tasks"].as_array().is_some_and(|t| t.iter().all(|t| t["state"] == "PAUSED")))
    })
    .await;
    record("GET status (paused)", &a, norm(&a));
    let a = call(&s.rest, "PUT", &format!("/connectors/{n}/resume"), None).await;
    record("PUT resume", &a, norm(&a));
    let a = wait_for(&s.rest, &status, "RUNNING again", running).await;
    record("GET status (resumed)", &a, norm(&a));
    let a = call(&s.rest, "POST", &format!("/connectors/{n}/restart"), None).await;
    record("POST restart", &a, norm(&a));
    let a = wait_for(&s.rest, &status, "RUNNING after restart", running).await;
    record("GET status (restarted)", &a, norm(&a));

    let mut two = s.config.clone();
    two["tasks.max"] = json!("2");
    let a = call(&s.rest, "PUT", &format!("/connectors/{n}/config"), Some(&two)).await;
    record("PUT config", &a, norm(&a));
    let a = wait_for(&s.rest, &status, "two RUNNING tasks", |a| {
        running(a) && a.body.as_ref().is_some_and(|b| b["tasks"].as_array().is_some_and(|t| t.len() == 2))
    })
    .await;
    record("GET status (two tasks)", &a, norm(&a));

    let mut bad = two.clone();
    bad["tasks.max"] = json!("0");
    let a = call(&s.rest, "PUT", &format!("/connector-plugins/{}/config/validate", s.plugin), Some(&bad)).await;
    record("PUT validate (bad)", &a, a.body.as_ref().map(validate_shape).unwrap_or_default());
    let a = call(&s.rest, "POST", "/connectors", Some(&json!({"name": format!("{n}-bad"), "config": bad}))).await;
    record("POST /connectors (bad)", &a, norm(&a));

    let a = call(&s.rest, "PUT", &format!("/connectors/{n}/stop"), None).await;
    record("PUT stop", &a, norm(&a));
    let a = wait_for(&s.rest, &status, "STOPPED", |a| state(a) == Some("STOPPED")).await;
    record("GET status (stopped)", &a, norm(&a));
    let a = call(&s.rest, "GET", "/connectors?expand=status&expand=info", None).await;
    record("GET /connectors?expand", &a, norm(&a));

    let a = call(&s.rest, "DELETE", &format!("/connectors/{n}"), None).await;
    record("DELETE", &a, norm(&a));
    for (label, path) in [
        ("GET deleted", format!("/connectors/{n}")),
        ("GET deleted status", status.clone()),
        ("GET unknown config", "/connectors/no-such-connector/config".to_string()),
    ] {
        let a = wait_for(&s.rest, &path, "gone", |a| a.status != 200).await;
        record(label, &a, norm(&a));
    }
    let a = call(&s.rest, "PUT", "/connectors/no-such-connector/pause", None).await;
    record("PUT unknown pause", &a, norm(&a));
    let a = call(&s.rest, "GET", "/connectors", None).await;
    record("GET /connectors (after)", &a, norm(&a));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_ours_answer_the_same_rest_calls_alike() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "restoracle", 1).await;
    let dir = temp_dir("restoracle");
    let (_connect, connect_rest) = run_connect(&dir);
    let end = tokio::time::Instant::now() + Duration::from_secs(180);
    while try_call(&connect_rest, "GET", "/connectors").await.is_none_or(|a| a.status != 200) {
        assert!(
            tokio::time::Instant::now() < end,
            "Connect's REST API never answered; see {}",
            dir.join("connect.log").display()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, format!("bootstrap.servers={}\n", common::bootstrap())).unwrap();
    let ours = SinkBin::new().rest().args([&worker]).start();

    let config = |class: &str, file: &str| json!({"connector.class": class, "topics": topic, "tasks.max": "1", "file": dir.join(file).display().to_string()});
    let connect_class = "bench.connect.BenchFileSinkConnector";
    let theirs = Side {
        rest: connect_rest,
        name: common::unique("oracle-rest-connect"),
        class: connect_class.into(),
        plugin: "BenchFileSinkConnector".into(),
        config: config(connect_class, "connect.txt"),
    };
    let our_class = kafka_share::sink::CONNECT_FILE_SINK_CLASS;
    let ours_side = Side {
        rest: ours.rest.clone(),
        name: common::unique("oracle-rest-ours"),
        class: our_class.into(),
        plugin: "FileStreamSinkConnector".into(),
        config: config(our_class, "ours.txt"),
    };
    let (want, got) = futures::future::join(sequence(&theirs), sequence(&ours_side)).await;
    let mut disagreements = Vec::new();
    for ((label, ws, wb), (_, gs, gb)) in want.iter().zip(&got) {
        if ws != gs || wb != gb {
            disagreements.push(format!("{label}:\n  Connect: {ws} {wb}\n  ours:    {gs} {gb}"));
        }
    }
    assert_eq!(want.len(), got.len());
    assert!(disagreements.is_empty(), "{} disagreement(s):\n{}", disagreements.len(), disagreements.join("\n"));
    assert!(ours.terminate().status.success());
}
