//! What a user switching from Kafka Connect expects of a connector, against the real broker
//! with the built-in `file` sink (FileStreamSink's class name): a new connector reads the
//! backlog (Connect's consumer starts at the earliest offset, a new share group at the
//! latest), Connect's `consumer.override.auto.offset.reset` means the group's start, and
//! `errors.tolerance=none` stops at the bad record without writing past it or twice.
//! Every wait is for a condition with a deadline.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kafka_share::admin::Admin;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::sink::{Connector, ConnectorConfig, Registry, Worker, WorkerConfig, CONNECT_FILE_SINK_CLASS};

fn worker() -> Worker {
    Worker::new(WorkerConfig::new(common::bootstrap()), Registry::with_builtins())
}

fn temp_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{}.txt", common::unique(name)))
}

/// A FileStreamSink connector as a Connect user writes it: no `share.*` key, so the group is
/// the default `connect-<name>`; fast polls, plus `extra`.
fn file_connector(name: &str, topic: &str, file: &Path, extra: &[(&str, &str)]) -> ConnectorConfig {
    let mut pairs: Vec<(String, String)> = vec![
        ("name".into(), name.into()),
        ("connector.class".into(), CONNECT_FILE_SINK_CLASS.into()),
        ("topics".into(), topic.into()),
        ("file".into(), file.display().to_string()),
        ("consumer.override.fetch.max.wait.ms".into(), "200".into()),
    ];
    pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    ConnectorConfig::from_pairs(pairs).expect("connector config")
}

fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file).map(|s| s.lines().map(str::to_string).collect()).unwrap_or_default()
}

async fn wait_for_lines(file: &Path, n: usize) -> Vec<String> {
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = lines(file);
        if got.len() >= n {
            return got;
        }
        assert!(tokio::time::Instant::now() < end, "{} of {n} lines in {}", got.len(), file.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn group_reset(admin: &Admin, group: &str) -> Option<String> {
    let entries = admin.describe_group_configs(group).await.expect("describe group configs");
    entries.into_iter().find(|e| e.name == "share.auto.offset.reset").and_then(|e| e.value)
}

fn no_failures(c: &Connector) {
    assert!(c.failures().is_empty(), "failed tasks: {:?}", c.failures());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connector_writes_the_backlog_as_connect_does() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "parity-backlog", 1).await;
    common::produce(&common::bootstrap(), &topic, 1, 200, "b").await;
    let (name, file) = (common::unique("backlog"), temp_file("parity-backlog"));
    let w = worker();
    let c = w.start_connector(file_connector(&name, &topic, &file, &[])).await.expect("start");
    let got = wait_for_lines(&file, 200).await;
    assert_eq!(got.len(), 200);
    assert_eq!(got[0], "b-0");
    no_failures(&c);
    assert_eq!(group_reset(&admin, &format!("connect-{name}")).await.as_deref(), Some("earliest"));
    w.close(Duration::from_secs(30)).await.expect("close");
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connector_created_before_its_topic_writes_what_comes_later() {
    let admin = common::admin().await;
    // Not created yet: the connector starts first, as Connect's would.
    let topic = common::unique("parity-later");
    let (name, file) = (common::unique("later"), temp_file("parity-later"));
    let w = worker();
    let c = w.start_connector(file_connector(&name, &topic, &file, &[])).await.expect("start");
    let created = admin
        .create_topics(&[kafka_share::admin::NewTopic::new(topic.clone(), 1).config("retention.ms", "-1")])
        .await
        .expect("create topic");
    for r in created {
        // The consumer's metadata requests may have created it (auto.create.topics.enable).
        if let Err(e) = r {
            assert_eq!(e.code(), Some(kafka_share::ErrorCode::TOPIC_ALREADY_EXISTS), "create topic: {e}");
        }
    }
    common::produce(&common::bootstrap(), &topic, 1, 100, "l").await;
    let got = wait_for_lines(&file, 100).await;
    assert_eq!(got.len(), 100, "{got:?}");
    no_failures(&c);
    w.close(Duration::from_secs(30)).await.expect("close");
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connects_auto_offset_reset_override_is_the_groups_start() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "parity-override", 1).await;
    common::produce(&common::bootstrap(), &topic, 1, 20, "o").await;
    let (name, file) = (common::unique("override"), temp_file("parity-override"));
    let w = worker();
    let config = file_connector(&name, &topic, &file, &[("consumer.override.auto.offset.reset", "earliest")]);
    let c = w.start_connector(config).await.expect("start");
    assert_eq!(wait_for_lines(&file, 20).await.len(), 20);
    no_failures(&c);
    w.close(Duration::from_secs(30)).await.expect("close");
    let _ = std::fs::remove_file(&file);
    // What a share group cannot do is refused before anything runs, naming the way out.
    for bad in ["none", "by_duration:P1D", "smallest"] {
        let e = ConnectorConfig::from_pairs([
            ("name", "x"),
            ("connector.class", "file"),
            ("topics", "t"),
            ("consumer.override.auto.offset.reset", bad),
        ])
        .expect_err(bad)
        .to_string();
        assert!(e.contains("consumer.override.auto.offset.reset"), "{e}");
        assert!(e.contains("earliest or latest"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_own_start_is_left_as_it_is() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "parity-own", 1).await;
    let name = common::unique("own");
    let group = format!("connect-{name}");
    admin.set_share_auto_offset_reset(&group, "latest").await.expect("set latest");
    let file = temp_file("parity-own");
    let w = worker();
    let c = w.start_connector(file_connector(&name, &topic, &file, &[])).await.expect("start");
    assert_eq!(group_reset(&admin, &group).await.as_deref(), Some("latest"));
    no_failures(&c);
    w.close(Duration::from_secs(30)).await.expect("close");
    let _ = std::fs::remove_file(&file);
}

/// Produces `values` in order to `topic` (one partition), one request each.
async fn produce_values(topic: &str, values: &[&str]) {
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    for v in values {
        p.send_and_wait(ProducerRecord::new(topic, v.to_string())).await.expect("produce");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
}

async fn wait_for_failures(c: &Connector, n: usize) -> Vec<(usize, String)> {
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let f = c.failures();
        if f.len() >= n {
            return f;
        }
        assert!(tokio::time::Instant::now() < end, "{} of {n} task failures: {f:?}", f.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The group's lag on partition 0 of `topic` (records not acknowledged) reaches `want`.
async fn wait_for_lag(admin: &Admin, group: &str, topic: &str, want: i64) {
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let offsets = admin.list_share_group_offsets(group, Some(&[topic])).await.expect("offsets");
        let lag = offsets.partitions.iter().find_map(|(tp, r)| match r {
            Ok(o) if tp.partition == 0 => o.lag,
            _ => None,
        });
        if lag == Some(want) {
            return;
        }
        assert!(tokio::time::Instant::now() < end, "lag {lag:?}, want {want}: {offsets:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tolerance_none_stops_at_the_bad_record_and_a_restart_resumes_there() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "parity-none", 1).await;
    produce_values(&topic, &[r#"{"a":1}"#, r#"{"a":2}"#, r#"{"a":3}"#, "BAD", r#"{"a":5}"#, r#"{"a":6}"#]).await;
    let (name, file) = (common::unique("none"), temp_file("parity-none"));
    let w = worker();
    let config = file_connector(
        &name,
        &topic,
        &file,
        &[
            ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ("value.converter.schemas.enable", "false"),
        ],
    );
    let c = w.start_connector(config).await.expect("start");
    let failures = wait_for_failures(&c, 1).await;
    assert!(failures[0].1.contains(&format!("{topic}-0@3 (delivery 1)")), "{failures:?}");
    // What came before the bad record is written and acknowledged; nothing after it.
    let before = [r#"{"a":1}"#, r#"{"a":2}"#, r#"{"a":3}"#];
    assert_eq!(lines(&file), before);
    let group = format!("connect-{name}");
    // Records 3 to 5 wait (the bad one and the two after it), as in Connect.
    wait_for_lag(&admin, &group, &topic, 3).await;
    // A restart resumes at the bad record (delivered again) and writes nothing twice.
    c.set_tasks(1).await.expect("restart the task");
    let failures = wait_for_failures(&c, 2).await;
    assert!(failures[1].1.contains(&format!("{topic}-0@3 (delivery 2)")), "{failures:?}");
    assert_eq!(lines(&file), before);
    w.close(Duration::from_secs(30)).await.expect("close");
    let _ = std::fs::remove_file(&file);
}

/// Leaves a classic consumer group `group` with committed offsets on `topic`, as a deleted
/// Connect connector leaves its `connect-<name>` group (Java's ConsumerGroupCommand).
async fn classic_group(admin: &Admin, group: &str, topic: &str) {
    let root = env!("CARGO_MANIFEST_DIR");
    let args = [
        "tool",
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        &common::bootstrap(),
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    ]
    .map(str::to_string);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(format!("{root}/scripts/kafka"))
            .args(&args)
            .output()
            .expect("scripts/kafka tool")
    })
    .await
    .expect("tool task");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let kind = admin.group_type(group).await.expect("group type");
        if kind.as_deref() == Some("classic") {
            return;
        }
        assert!(tokio::time::Instant::now() < end, "group {group}: type {kind:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_connect_used_is_refused_at_validate_and_create_naming_share_group_id() {
    use kafka_share::sink::rest::{Herder, RestServer};
    use std::sync::Arc;

    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "parity-reused", 1).await;
    common::produce(&common::bootstrap(), &topic, 1, 5, "r").await;
    let name = common::unique("reused");
    let group = format!("connect-{name}");
    classic_group(&admin, &group, &topic).await;
    let file = temp_file("parity-reused");
    let settings = |extra: &[(&str, &str)]| {
        let mut m = serde_json::Map::new();
        m.insert("connector.class".into(), "FileStreamSink".into());
        m.insert("topics".into(), topic.clone().into());
        m.insert("file".into(), file.display().to_string().into());
        for (k, v) in extra {
            m.insert(k.to_string(), v.to_string().into());
        }
        serde_json::Value::Object(m)
    };
    let herder = Arc::new(Herder::new(worker(), None));
    let server = RestServer::bind("127.0.0.1:0", herder.clone()).await.expect("bind");
    let addr = server.local_addr().to_string();
    // Validate: the error sits on share.group.id.
    let mut body = settings(&[]);
    body["name"] = name.clone().into();
    let v =
        crate::sink_rest_client::call(&addr, "PUT", "/connector-plugins/FileStreamSink/config/validate", Some(&body))
            .await;
    assert_eq!(v.status, 200, "{v:?}");
    let v = v.body.expect("a body");
    assert_eq!(v["error_count"], 1, "{v}");
    let text = v.to_string();
    assert!(text.contains("share.group.id") && text.contains(&group), "{v}");
    // Create: a 400 naming the fix, and no connector left behind.
    let create = serde_json::json!({"name": name, "config": settings(&[])});
    let a = crate::sink_rest_client::call(&addr, "POST", "/connectors", Some(&create)).await;
    assert_eq!(a.status, 400, "{a:?}");
    assert!(a.body.as_ref().is_some_and(|b| b.to_string().contains("share.group.id")), "{a:?}");
    let list = crate::sink_rest_client::call(&addr, "GET", "/connectors", None).await;
    assert_eq!(list.body, Some(serde_json::json!([])));
    // A start from a file is refused the same way, before any task runs.
    let e = worker().start_connector(file_connector(&name, &topic, &file, &[])).await.expect_err("refused");
    assert!(e.to_string().contains("share.group.id"), "{e}");
    // The fix the message names: a share group id of its own.
    let own = format!("{group}-share");
    let create = serde_json::json!({"name": name, "config": settings(&[("share.group.id", own.as_str())])});
    let a = crate::sink_rest_client::call(&addr, "POST", "/connectors", Some(&create)).await;
    assert_eq!(a.status, 201, "{a:?}");
    assert_eq!(wait_for_lines(&file, 5).await.len(), 5);
    herder.close().await;
    drop(server);
    let _ = std::fs::remove_file(&file);
}

/// Waits until the REST API at `addr` (Connect's) answers for `path` at all.
async fn wait_for_rest(addr: &str, path: &str, log: &Path) {
    let end = tokio::time::Instant::now() + Duration::from_secs(180);
    while crate::sink_rest_client::try_call(addr, "GET", path).await.is_none_or(|a| a.status != 200) {
        assert!(
            tokio::time::Instant::now() < end,
            "Connect not up at {addr}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Points 1 and 4 side by side with Kafka Connect 4.4 standalone (its FileStreamSink-like
/// bench connector, as `sink_connect_oracle` runs it; REST on 8085 + `KAFKA_PORT_OFFSET`,
/// apart from the other oracles' 8083 and 8084): both write a backlog produced before the
/// connector, and on a record that fails to convert under `errors.tolerance=none` both fail
/// the task and write nothing at or past it. Connect converts a whole poll before `put`, so
/// it writes none of that poll; ours writes (and acknowledges) the records before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_ours_agree_on_the_backlog_and_on_a_bad_record_under_tolerance_none() {
    use crate::sink_connect_oracle::{connect_classpath, KillOnDrop};
    use std::process::{Command, Stdio};

    let admin = common::admin().await;
    let backlog = common::new_topic(&admin, "oracle-backlog", 1).await;
    common::produce(&common::bootstrap(), &backlog, 1, 200, "b").await;
    let bad = common::new_topic(&admin, "oracle-none", 1).await;
    produce_values(&bad, &[r#"{"a":1}"#, r#"{"a":2}"#, r#"{"a":3}"#, "BAD", r#"{"a":5}"#, r#"{"a":6}"#]).await;
    let dir = common::temp_dir("oracle-parity");
    let json = [
        ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("value.converter.schemas.enable", "false"),
    ];
    // Connect.
    let offset: u16 = std::env::var("KAFKA_PORT_OFFSET").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let rest = format!("127.0.0.1:{}", 8085 + offset);
    let worker_file = dir.join("worker.properties");
    std::fs::write(
        &worker_file,
        format!(
            "bootstrap.servers={}\nkey.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             offset.storage.file.filename={}\noffset.flush.interval.ms=500\nlisteners=http://{rest}\n\
             plugin.discovery=service_load\n",
            common::bootstrap(),
            dir.join("connect.offsets").display(),
        ),
    )
    .unwrap();
    let (connect_backlog, connect_none) = (common::unique("oracle-backlog-c"), common::unique("oracle-none-c"));
    let (file_backlog_c, file_none_c) = (dir.join("backlog-connect.txt"), dir.join("none-connect.txt"));
    let mut args = vec![worker_file.display().to_string()];
    for (name, topic, file, extra) in
        [(&connect_backlog, &backlog, &file_backlog_c, &[][..]), (&connect_none, &bad, &file_none_c, &json[..])]
    {
        let mut text = format!(
            "name={name}\nconnector.class=bench.connect.BenchFileSinkConnector\ntasks.max=1\ntopics={topic}\nfile={}\n",
            file.display()
        );
        for (k, v) in extra {
            text.push_str(&format!("{k}={v}\n"));
        }
        let f = dir.join(format!("{name}.properties"));
        std::fs::write(&f, text).unwrap();
        args.push(f.display().to_string());
    }
    let log = dir.join("connect.log");
    let out = std::fs::File::create(&log).unwrap();
    let connect = KillOnDrop(
        Command::new("java")
            .args(["-Xms256M", "-Xmx1G", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", &connect_classpath()])
            .arg("org.apache.kafka.connect.cli.ConnectStandalone")
            .args(&args)
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("java (Connect is the oracle)"),
    );
    // Ours, the same settings (its own names, so its own groups).
    let w = worker();
    let (file_backlog, file_none) = (dir.join("backlog-ours.txt"), dir.join("none-ours.txt"));
    w.start_connector(file_connector(&common::unique("oracle-backlog-o"), &backlog, &file_backlog, &[]))
        .await
        .expect("start");
    let none = w
        .start_connector(file_connector(&common::unique("oracle-none-o"), &bad, &file_none, &json))
        .await
        .expect("start");
    // Point 1: the backlog, on both.
    assert_eq!(wait_for_lines(&file_backlog, 200).await.len(), 200);
    wait_for_rest(&rest, "/connectors", &log).await;
    assert_eq!(wait_for_lines(&file_backlog_c, 200).await.len(), 200);
    // Point 4: both fail the task at the bad record.
    let status = format!("/connectors/{connect_none}/status");
    let failed = crate::sink_rest_client::wait_for(&rest, &status, "Connect's task FAILED", |a| {
        a.body.as_ref().and_then(|b| b["tasks"][0]["state"].as_str()) == Some("FAILED")
    })
    .await;
    let trace = failed.body.as_ref().and_then(|b| b["tasks"][0]["trace"].as_str()).unwrap_or("").to_string();
    assert!(trace.contains("BAD"), "Connect failed at the bad record: {trace}");
    let ours_failed = wait_for_failures(&none, 1).await;
    assert!(ours_failed[0].1.contains("@3 "), "{ours_failed:?}");
    // Neither wrote the bad record or anything after it; ours wrote what came before it.
    let theirs = lines(&file_none_c);
    let ours = lines(&file_none);
    let past = |l: &String| l.contains('5') || l.contains('6') || l.contains("BAD");
    assert!(!theirs.iter().any(past), "Connect: {theirs:?}");
    assert_eq!(ours, [r#"{"a":1}"#, r#"{"a":2}"#, r#"{"a":3}"#]);
    assert!(theirs.len() <= ours.len(), "Connect {theirs:?}, ours {ours:?}");
    w.close(Duration::from_secs(30)).await.expect("close");
    drop(connect);
    let _ = std::fs::remove_dir_all(&dir);
}
