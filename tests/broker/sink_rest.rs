//! The `kafka-share-sink` binary's REST API (`--rest`) against a real broker
//! (`scripts/kafka up`; fails without one): a connector created, read, paused, resumed,
//! restarted, reconfigured, validated, stopped and deleted through HTTP, with the file
//! sink's output checked at each step (records reach the file while RUNNING, none while
//! PAUSED: the connector's share group then has no member; they come after RESUME), and the
//! configuration kept across a restart of the process (`config.storage.file.filename`).
//! Every wait is for a condition with a generous deadline.

use crate::common;
use crate::common::sink_bin::{SinkBin, SinkProc};
use crate::sink_rest_client::{call, state, wait_for, Answer};

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

/// The binary with `--rest 127.0.0.1:0` on `worker`, in the test's directory.
fn start(worker: &Path) -> SinkProc {
    SinkBin::new().rest().args([worker]).start()
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|t| t.lines().count()).unwrap_or(0)
}

async fn wait_for_lines(path: &Path, n: usize) {
    let end = tokio::time::Instant::now() + Duration::from_secs(120);
    while lines(path) < n {
        assert!(tokio::time::Instant::now() < end, "{}: {} lines, want {n}", path.display(), lines(path));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn expect(a: &Answer, status: u16, what: &str) {
    assert_eq!(a.status, status, "{what}: {a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_api_drives_a_file_sink_and_survives_a_restart() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkrest", 2).await;
    let group = common::unique("connect-rest");
    let dir = common::temp_dir("sinkrest");
    let out = dir.join("out.txt");
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\nconfig.storage.file.filename={}\n",
            common::bootstrap(),
            dir.join("connectors.json").display()
        ),
    )
    .unwrap();
    let p = start(&worker);
    let rest = p.rest.clone();
    let name = "rest-file";
    let config = json!({
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "file": out.display().to_string(), "topics": topic,
        "tasks.max": "2", "share.group.id": group, "share.auto.offset.reset": "earliest",
        "consumer.override.fetch.max.wait.ms": "200"
    });

    let a = call(&rest, "GET", "/", None).await;
    expect(&a, 200, "GET /");
    assert!(a.body.as_ref().and_then(|b| b["kafka_cluster_id"].as_str()).is_some(), "{a:?}");
    let a = call(&rest, "GET", "/connector-plugins", None).await;
    assert!(a.body.as_ref().and_then(Value::as_array).is_some_and(|p| p.iter().any(|p| p["class"] == "file")), "{a:?}");

    // An unknown class is refused as Connect refuses a bad configuration.
    let bad_class = json!({"name": name, "config": {"connector.class": "nope", "topics": topic}});
    let a = call(&rest, "POST", "/connectors", Some(&bad_class)).await;
    expect(&a, 400, "unknown class");
    assert_eq!(a.body.as_ref().map(|b| b["error_code"].clone()), Some(json!(400)));

    let a = call(&rest, "POST", "/connectors", Some(&json!({"name": name}))).await;
    expect(&a, 400, "no config");
    assert!(a.body.as_ref().unwrap()["message"].as_str().unwrap().contains("\"config\""), "{a:?}");

    // Create: 201, the configuration echoed with its name; a second create is 409.
    let a = call(&rest, "POST", "/connectors", Some(&json!({"name": name, "config": config}))).await;
    expect(&a, 201, "create");
    let body = a.body.clone().unwrap();
    assert_eq!(body["name"], name);
    assert_eq!(body["type"], "sink");
    assert_eq!(body["config"]["name"], name);
    assert_eq!(body["tasks"], json!([{"connector": name, "task": 0}, {"connector": name, "task": 1}]));
    expect(&call(&rest, "POST", "/connectors", Some(&json!({"name": name, "config": config}))).await, 409, "dup");
    let a = call(&rest, "GET", &format!("/connectors/{name}/config"), None).await;
    expect(&a, 200, "get config");
    let mut want = config.clone();
    want["name"] = json!(name);
    assert_eq!(a.body, Some(want));
    let a = call(&rest, "GET", "/connectors", None).await;
    assert_eq!(a.body, Some(json!([name])));

    // RUNNING: records reach the file.
    let status = format!("/connectors/{name}/status");
    let a = wait_for(&rest, &status, "RUNNING with 2 tasks", |a| {
        state(a) == Some("RUNNING")
            && a.body.as_ref().is_some_and(|b| {
                b["tasks"].as_array().is_some_and(|t| t.len() == 2 && t.iter().all(|t| t["state"] == "RUNNING"))
            })
    })
    .await;
    assert_eq!(a.body.as_ref().unwrap()["connector"]["worker_id"], json!(rest));
    common::produce(&common::bootstrap(), &topic, 2, 50, "first").await;
    wait_for_lines(&out, 50).await;

    // PAUSED: the connector's consumer leaves its group, so nothing more can be written.
    expect(&call(&rest, "PUT", &format!("/connectors/{name}/pause"), None).await, 202, "pause");
    let a = call(&rest, "GET", &status, None).await;
    assert_eq!(state(&a), Some("PAUSED"), "{a:?}");
    assert!(a.body.as_ref().unwrap()["tasks"].as_array().unwrap().iter().all(|t| t["state"] == "PAUSED"), "{a:?}");
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while !admin.describe_share_group(&group).await.is_ok_and(|d| d.members.is_empty()) {
        assert!(tokio::time::Instant::now() < end, "the paused connector's consumer never left {group}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    common::produce(&common::bootstrap(), &topic, 2, 30, "paused").await;
    assert_eq!(lines(&out), 50, "a paused connector wrote records");

    // RESUME: the records produced meanwhile arrive.
    expect(&call(&rest, "PUT", &format!("/connectors/{name}/resume"), None).await, 202, "resume");
    assert_eq!(state(&call(&rest, "GET", &status, None).await), Some("RUNNING"));
    wait_for_lines(&out, 80).await;

    // RESTART: 204, running again, and still writing.
    expect(&call(&rest, "POST", &format!("/connectors/{name}/restart"), None).await, 204, "restart");
    wait_for(&rest, &status, "RUNNING after restart", |a| state(a) == Some("RUNNING")).await;
    common::produce(&common::bootstrap(), &topic, 2, 20, "restarted").await;
    wait_for_lines(&out, 100).await;

    // A new configuration: 200 (it existed), one task now.
    let mut one = config.clone();
    one["tasks.max"] = json!("1");
    let a = call(&rest, "PUT", &format!("/connectors/{name}/config"), Some(&one)).await;
    expect(&a, 200, "put config");
    assert_eq!(a.body.as_ref().unwrap()["tasks"].as_array().map(Vec::len), Some(1));
    wait_for(&rest, &status, "one RUNNING task", |a| {
        state(a) == Some("RUNNING")
            && a.body.as_ref().is_some_and(|b| b["tasks"].as_array().is_some_and(|t| t.len() == 1))
    })
    .await;

    // Validation of a bad configuration: 200 with the error on its setting; creating it: 400.
    let mut bad = one.clone();
    bad["tasks.max"] = json!("0");
    bad["name"] = json!(name);
    let a = call(&rest, "PUT", "/connector-plugins/FileStreamSinkConnector/config/validate", Some(&bad)).await;
    expect(&a, 200, "validate");
    let v = a.body.unwrap();
    assert_eq!(v["error_count"], 1, "{v}");
    let with_errors: Vec<&Value> = v["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["value"]["errors"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(with_errors.len(), 1, "{v}");
    assert_eq!(with_errors[0]["value"]["name"], "tasks.max");
    let a = call(&rest, "POST", "/connectors", Some(&json!({"name": "other", "config": {"name": "other", "tasks.max": "0", "connector.class": "file", "topics": topic}}))).await;
    expect(&a, 400, "create a bad config");
    assert!(a.body.as_ref().unwrap()["message"].as_str().unwrap().contains("tasks.max"), "{a:?}");

    // The configuration outlives the process: started again, writing again.
    assert!(p.terminate().status.success());
    let p = start(&worker);
    let rest = p.rest.clone();
    assert_eq!(call(&rest, "GET", "/connectors", None).await.body, Some(json!([name])));
    assert_eq!(
        call(&rest, "GET", &format!("/connectors/{name}/config"), None).await.body,
        Some(json!(one.as_object().map(|o| {
            let mut o = o.clone();
            o.insert("name".into(), json!(name));
            o
        })))
    );
    wait_for(&rest, &status, "RUNNING after the process restarted", |a| state(a) == Some("RUNNING")).await;
    common::produce(&common::bootstrap(), &topic, 2, 20, "after").await;
    wait_for_lines(&out, 120).await;

    // STOPPED: no tasks reported; expand=status shows it.
    expect(&call(&rest, "PUT", &format!("/connectors/{name}/stop"), None).await, 204, "stop");
    let a = call(&rest, "GET", "/connectors?expand=status&expand=info", None).await;
    let b = a.body.unwrap();
    assert_eq!(b[name]["status"]["connector"]["state"], "STOPPED", "{b}");
    assert_eq!(b[name]["status"]["tasks"], json!([]), "{b}");
    assert_eq!(b[name]["info"]["name"], name, "{b}");

    // DELETE: 204, then 404 in Connect's error shape, everywhere.
    expect(&call(&rest, "DELETE", &format!("/connectors/{name}"), None).await, 204, "delete");
    for (m, path) in
        [("GET", format!("/connectors/{name}")), ("GET", status.clone()), ("PUT", format!("/connectors/{name}/pause"))]
    {
        let a = call(&rest, m, &path, None).await;
        expect(&a, 404, &path);
        assert_eq!(a.body.as_ref().unwrap()["error_code"], 404, "{a:?}");
        assert!(a.body.as_ref().unwrap()["message"].as_str().unwrap().contains(name), "{a:?}");
    }
    assert_eq!(call(&rest, "GET", "/connectors", None).await.body, Some(json!([])));
    assert!(p.terminate().status.success());
    let stored = std::fs::read_to_string(dir.join("connectors.json")).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&stored).unwrap(), json!({"connectors": {}}));
}
