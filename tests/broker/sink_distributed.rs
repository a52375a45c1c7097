//! Distributed mode of the `kafka-share-sink` binary against a real broker (`scripts/kafka
//! up`; fails without one): workers with the same `config.storage.topic` share connectors.
//! A connector created through worker A's REST API runs on B too, and the records are
//! written once, by the two together, into each worker's own file (a relative `file` path,
//! each worker in its own directory); a configuration changed through B reaches A; a worker
//! started later reads the connectors from the topic; a delete through A stops it on all; a
//! restart through A restarts B's failed task.
//! Every wait is for a condition with a generous deadline.

use crate::common;
use crate::common::sink_bin::{SinkBin, SinkProc};
use crate::sink_rest_client::{call, state, wait_for, Answer};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kafka-share-sink");

/// A worker with `--rest 127.0.0.1:0` in a directory of its own (a connector's relative
/// `file` lands there).
fn start_in(dir: &Path, worker: &Path) -> SinkProc {
    SinkBin::new().rest().in_dir(dir).args([worker]).start()
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).map(|t| t.lines().map(str::to_string).collect()).unwrap_or_default()
}

fn running_tasks(a: &Answer, n: usize) -> bool {
    state(a) == Some("RUNNING")
        && a.body.as_ref().is_some_and(|b| {
            b["tasks"].as_array().is_some_and(|t| t.len() == n && t.iter().all(|t| t["state"] == "RUNNING"))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_on_one_config_topic_share_their_connectors() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkdist", 2).await;
    let config_topic = common::unique("connect-configs");
    let group = common::unique("connect-dist");
    let dir = common::temp_dir("sinkdist");
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\ngroup.id=dist-test\nconfig.storage.topic={config_topic}\nconfig.storage.replication.factor=1\n",
            common::bootstrap()
        ),
    )
    .unwrap();
    let (dir_a, dir_b, dir_c) = (dir.join("a"), dir.join("b"), dir.join("c"));
    let a = start_in(&dir_a, &worker);
    let b = start_in(&dir_b, &worker);

    // The worker created the topic, compacted, one partition.
    let configs = admin.describe_topic_configs(&config_topic).await.expect("the config topic exists");
    let policy = configs.iter().find(|c| c.name == "cleanup.policy").and_then(|c| c.value.clone());
    assert_eq!(policy.as_deref(), Some("compact"));
    assert_eq!(common::described_with_leaders(&admin, &config_topic).await.partitions.len(), 1);

    // Created through A: B runs it too.
    let name = "dist-file";
    let config = json!({
        "connector.class": "FileStreamSink", "file": "out.txt", "topics": topic, "tasks.max": "1",
        "share.group.id": group, "share.auto.offset.reset": "earliest",
        "consumer.override.fetch.max.wait.ms": "200"
    });
    // Timings are printed, not asserted: how long a change takes to reach the other worker.
    let t0 = std::time::Instant::now();
    let created = call(&a.rest, "POST", "/connectors", Some(&json!({"name": name, "config": config}))).await;
    let answered = t0.elapsed();
    assert_eq!(created.status, 201, "{created:?}");
    // The answer comes after A applied it: A lists it at once.
    assert_eq!(call(&a.rest, "GET", "/connectors", None).await.body, Some(json!([name])));
    let status = format!("/connectors/{name}/status");
    wait_for(&a.rest, &status, "RUNNING on A", |s| running_tasks(s, 1)).await;
    let on_b = wait_for(&b.rest, &status, "RUNNING on B", |s| running_tasks(s, 1)).await;
    eprintln!("distributed: create answered by A in {answered:?}, RUNNING on B after {:?}", t0.elapsed());
    assert_eq!(on_b.body.as_ref().unwrap()["connector"]["worker_id"], json!(b.rest));
    // A second create of the name, through either worker, is 409.
    let dup = call(&b.rest, "POST", "/connectors", Some(&json!({"name": name, "config": config}))).await;
    assert_eq!(dup.status, 409, "{dup:?}");
    common::wait_for_members(&admin, &group, 2, Duration::from_secs(90)).await;

    // Records in the shared topic that are not this runtime's, or not readable, are skipped:
    // a task record as Connect writes it, a value that is not JSON, a key that is not UTF-8.
    {
        use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
        let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
        for r in [
            ProducerRecord::new(&config_topic, r#"{"properties":{}}"#).key("task-dist-file-0"),
            ProducerRecord::new(&config_topic, "not json").key("connector-garbage"),
            // (A compacted topic refuses a record without a key.)
            ProducerRecord::new(&config_topic, "{}").key(bytes::Bytes::from_static(&[0xff, 0xfe])),
        ] {
            p.send_and_wait(r.partition(0)).await.expect("written");
        }
        p.close(Duration::from_secs(10)).await.expect("producer close");
    }

    // Every record written once, by the two workers together.
    let n = 200;
    common::produce(&common::bootstrap(), &topic, 2, n, "rec").await;
    let (out_a, out_b) = (dir_a.join("out.txt"), dir_b.join("out.txt"));
    let end = tokio::time::Instant::now() + Duration::from_secs(120);
    while read_lines(&out_a).len() + read_lines(&out_b).len() < n {
        assert!(
            tokio::time::Instant::now() < end,
            "written: {} + {}",
            read_lines(&out_a).len(),
            read_lines(&out_b).len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for line in read_lines(&out_a).into_iter().chain(read_lines(&out_b)) {
        *seen.entry(line).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = (0..n).map(|i| (format!("rec-{i}"), 1)).collect();
    assert_eq!(seen, want, "each record once over A's and B's files");
    eprintln!("distributed: A wrote {}, B wrote {}", read_lines(&out_a).len(), read_lines(&out_b).len());

    // Changed through B: both follow (two tasks each).
    let mut two = config.clone();
    two["tasks.max"] = json!("2");
    let t0 = std::time::Instant::now();
    let put = call(&b.rest, "PUT", &format!("/connectors/{name}/config"), Some(&two)).await;
    let answered = t0.elapsed();
    assert_eq!(put.status, 200, "{put:?}");
    wait_for(&a.rest, &status, "two tasks on A", |s| running_tasks(s, 2)).await;
    eprintln!("distributed: update answered by B in {answered:?}, two tasks on A after {:?}", t0.elapsed());
    wait_for(&b.rest, &status, "two tasks on B", |s| running_tasks(s, 2)).await;
    let on_a = call(&a.rest, "GET", &format!("/connectors/{name}/config"), None).await;
    assert_eq!(on_a.body.as_ref().map(|c| c["tasks.max"].clone()), Some(json!("2")), "{on_a:?}");

    // Paused through A, resumed through B.
    assert_eq!(call(&a.rest, "PUT", &format!("/connectors/{name}/pause"), None).await.status, 202);
    wait_for(&b.rest, &status, "PAUSED on B", |s| state(s) == Some("PAUSED")).await;
    assert_eq!(call(&b.rest, "PUT", &format!("/connectors/{name}/resume"), None).await.status, 202);
    wait_for(&a.rest, &status, "RUNNING again on A", |s| running_tasks(s, 2)).await;

    // Created PAUSED through B (Connect writes the target state first): paused on A too.
    let other = json!({"connector.class": "FileStreamSink", "file": "other.txt", "topics": topic, "share.group.id": common::unique("connect-dist-other")});
    let paused = call(
        &b.rest,
        "POST",
        "/connectors",
        Some(&json!({"name": "dist-other", "config": other, "initial_state": "PAUSED"})),
    )
    .await;
    assert_eq!(paused.status, 201, "{paused:?}");
    wait_for(&a.rest, "/connectors/dist-other/status", "PAUSED on A", |s| state(s) == Some("PAUSED")).await;
    // Stopped through A: STOPPED, no tasks, on B.
    assert_eq!(call(&a.rest, "PUT", "/connectors/dist-other/stop", None).await.status, 204);
    let stopped =
        wait_for(&b.rest, "/connectors/dist-other/status", "STOPPED on B", |s| state(s) == Some("STOPPED")).await;
    assert_eq!(stopped.body.as_ref().map(|b| b["tasks"].clone()), Some(json!([])), "{stopped:?}");
    assert_eq!(call(&b.rest, "DELETE", "/connectors/dist-other", None).await.status, 204);
    wait_for(&a.rest, "/connectors/dist-other/status", "dist-other gone on A", |s| s.status == 404).await;

    // A worker started later reads the connector from the topic before it serves.
    let c = start_in(&dir_c, &worker);
    assert_eq!(call(&c.rest, "GET", "/connectors", None).await.body, Some(json!([name])));
    let on_c = call(&c.rest, "GET", &format!("/connectors/{name}/config"), None).await;
    assert_eq!(on_c.body.as_ref().map(|c| c["tasks.max"].clone()), Some(json!("2")), "{on_c:?}");
    wait_for(&c.rest, &status, "RUNNING on C", |s| running_tasks(s, 2)).await;

    // Deleted through A: gone, and stopped, everywhere.
    assert_eq!(call(&a.rest, "DELETE", &format!("/connectors/{name}"), None).await.status, 204);
    assert_eq!(call(&a.rest, "GET", &status, None).await.status, 404);
    for w in [&b, &c] {
        wait_for(&w.rest, &status, "404 after the delete", |s| s.status == 404).await;
        assert_eq!(call(&w.rest, "GET", "/connectors", None).await.body, Some(json!([])));
    }
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while !admin.describe_share_group(&group).await.is_ok_and(|d| d.members.is_empty()) {
        assert!(tokio::time::Instant::now() < end, "a deleted connector's consumer stayed in {group}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for w in [a, b, c] {
        assert!(w.terminate().status.success());
    }

    // The topic reads as Connect's: `connector-<name>` with `{"properties"}`, target states
    // with `state.v2`, tombstones for the deleted.
    let readers = common::new_group(&admin, "dist-config-reader", None).await;
    let reader = kafka_share::ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &readers))
        .await
        .expect("consumer");
    reader.subscribe([config_topic.clone()]).expect("subscribe");
    // 2 + 3 (creates, stop, delete of dist-other) + 3 skipped + 1 update + 2 pause/resume + 2 delete.
    let got = common::poll_until(&reader, 13, Duration::from_secs(60), |_| {}).await;
    let by_key = |k: &str| -> Vec<Option<String>> {
        got.iter().filter(|r| r.key_str() == Some(k)).map(|r| r.value_str().map(str::to_string)).collect()
    };
    let file = by_key("connector-dist-file");
    assert_eq!(file.len(), 3, "create, update, delete: {file:?}");
    let first: serde_json::Value = serde_json::from_str(file[0].as_deref().unwrap_or("")).expect("JSON");
    assert_eq!(first["properties"]["file"], "out.txt", "{first}");
    assert_eq!(file[2], None, "a delete is a tombstone");
    let other = by_key("target-state-dist-other");
    assert!(
        other
            .iter()
            .flatten()
            .any(|v| v.contains(r#""state.v2":"STOPPED""#) && v.contains(r#""state":"PAUSED""#)),
        "{other:?}"
    );
}

#[test]
fn a_config_topic_the_worker_file_cannot_use_is_refused_with_what_to_do() {
    let dir = common::temp_dir("sinkdist-bad");
    let worker = dir.join("worker.properties");
    for (file, says) in [
        ("config.storage.topic=c\nlisteners=http://127.0.0.1:0\n", "bootstrap.servers"),
        ("bootstrap.servers=127.0.0.1:1\nconfig.storage.topic=c\n", "listeners"),
        (
            "bootstrap.servers=127.0.0.1:1\nconfig.storage.topic=c\nconfig.storage.file.filename=/tmp/x.json\nlisteners=http://127.0.0.1:0\n",
            "remove one",
        ),
        (
            "bootstrap.servers=127.0.0.1:1\nconfig.storage.topic=c\nconfig.storage.replication.factor=0\nlisteners=http://127.0.0.1:0\n",
            "config.storage.replication.factor",
        ),
    ] {
        std::fs::write(&worker, file).unwrap();
        let out = Command::new(BIN).arg(&worker).output().expect("run kafka-share-sink");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(says), "{file}: {err}");
    }
}

/// A restart through worker A reaches worker B (Connect's `restart-connector-<name>` record
/// in the config topic): the connector's task fails on B alone (its `out.txt` is a
/// directory there), the cause is removed, and `restart?onlyFailed=true` sent to A brings
/// B's task back to RUNNING. Before, a restart acted on the worker asked only, and B's task
/// stayed FAILED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_through_one_worker_restarts_the_failed_tasks_of_another() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkdist-restart", 1).await;
    let config_topic = common::unique("connect-configs-restart");
    let dir = common::temp_dir("sinkdist-restart");
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\ngroup.id=dist-restart\nconfig.storage.topic={config_topic}\nconfig.storage.replication.factor=1\n",
            common::bootstrap()
        ),
    )
    .unwrap();
    let (dir_a, dir_b) = (dir.join("a"), dir.join("b"));
    // On B the file sink cannot open `out.txt`: it is a directory.
    let blocked = dir_b.join("out.txt");
    std::fs::create_dir_all(&blocked).unwrap();
    let a = start_in(&dir_a, &worker);
    let b = start_in(&dir_b, &worker);

    let name = "dist-restart";
    let config = json!({
        "connector.class": "FileStreamSink", "file": "out.txt", "topics": topic, "tasks.max": "1",
        "share.group.id": common::unique("connect-dist-restart"), "share.auto.offset.reset": "earliest"
    });
    let created = call(&a.rest, "POST", "/connectors", Some(&json!({"name": name, "config": config}))).await;
    assert_eq!(created.status, 201, "{created:?}");
    let status = format!("/connectors/{name}/status");
    wait_for(&a.rest, &status, "RUNNING on A", |s| running_tasks(s, 1)).await;
    let task_failed = |s: &Answer| s.body.as_ref().is_some_and(|b| b["tasks"][0]["state"] == "FAILED");
    wait_for(&b.rest, &status, "the task FAILED on B", task_failed).await;

    std::fs::remove_dir(&blocked).unwrap();
    let restart = format!("/connectors/{name}/restart?includeTasks=true&onlyFailed=true");
    let answer = call(&a.rest, "POST", &restart, None).await;
    // A's own plan: nothing failed there, so nothing restarts there.
    assert_eq!(answer.status, 202, "{answer:?}");
    assert_eq!(answer.body.as_ref().map(|b| b["connector"]["state"].clone()), Some(json!("RUNNING")), "{answer:?}");
    wait_for(&b.rest, &status, "B's task RUNNING again after a restart sent to A", |s| running_tasks(s, 1)).await;
    assert!(dir_b.join("out.txt").is_file(), "B's restarted task created its file");

    for w in [a, b] {
        assert!(w.terminate().status.success());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
