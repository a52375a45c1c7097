//! The `kafka-share-sink` binary against a real broker (`scripts/kafka up`; fails without
//! one): two processes on one connector file share the work, metrics are read through the
//! Prometheus endpoint, SIGTERM stops cleanly. Waits are for conditions, never for time.

use crate::common;
use crate::common::sink_bin::{SinkBin, SinkProc};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_kafka-share-sink");

/// The binary on a worker and a connector file, its metrics on a free port.
fn start(worker: &Path, connector: &Path) -> SinkProc {
    SinkBin::new().metrics().args([worker, connector]).start()
}

/// Started with `args` and `RUST_LOG=info`, its stderr (a pipe) kept for `terminate`.
fn start_logging(worker: &Path, connector: &Path, args: &[&str]) -> SinkProc {
    // A free port on 127.0.0.1 unless the test gives the address.
    let bin = if args.contains(&"--metrics-address") { SinkBin::new() } else { SinkBin::new().metrics() };
    bin.args(args).args([worker, connector]).log("info").capture_stderr().start()
}

/// Scrapes `/metrics` and returns name -> value (summed over connectors).
async fn scrape(addr: &str) -> BTreeMap<String, f64> {
    tokio::time::timeout(Duration::from_secs(30), scrape_once(addr))
        .await
        .expect("the metrics endpoint answers")
}

async fn scrape_once(addr: &str) -> BTreeMap<String, f64> {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect to the metrics port");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    let mut out = BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (name, value) = line.rsplit_once(' ').expect("name value");
        let name = name.split('{').next().unwrap_or(name);
        let v: f64 = value.parse().unwrap_or(f64::NAN);
        *out.entry(name.to_string()).or_insert(0.0) += v;
    }
    out
}

fn m(metrics: &BTreeMap<String, f64>, name: &str) -> f64 {
    // The times (kept in ms) are exported in seconds, with the unit in the name.
    let unit = if name.contains("-time-") { "_seconds" } else { "" };
    let key = format!("kafka_connect_sink_task_{}{unit}", name.replace('-', "_"));
    *metrics.get(&key).unwrap_or_else(|| panic!("no {key} in {metrics:?}"))
}

async fn wait_until_async<F, Fut>(what: &str, deadline: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + deadline;
    while !cond().await {
        assert!(tokio::time::Instant::now() < end, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_connector_share_the_work_and_stop_cleanly() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkbin", 3).await;
    let group = common::unique("connect-bin");
    let dir = common::temp_dir("sinkbin");
    let out = dir.join("out.txt");
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\nkey.converter=org.apache.kafka.connect.storage.StringConverter\n",
            common::bootstrap()
        ),
    )
    .unwrap();
    let connector = dir.join("file-sink.properties");
    std::fs::write(
        &connector,
        format!(
            "name=bin-file\nconnector.class=file\nfile={}\ntopics={topic}\ntasks.max=2\nshare.group.id={group}\n\
             share.auto.offset.reset=earliest\nconsumer.override.fetch.max.wait.ms=200\n\
             consumer.override.share.acquire.mode=record_limit\nconsumer.override.max.poll.records=5\n",
            out.display()
        ),
    )
    .unwrap();
    let a = start(&worker, &connector);
    let b = start(&worker, &connector);
    let before = scrape(&a.metrics).await;
    assert_eq!(m(&before, "sink-record-acquire-total"), 0.0);

    // Feed records until both processes have written some.
    let producer = Producer::connect(ProducerConfig::new(common::bootstrap())).await.unwrap();
    let mut produced = 0usize;
    let end = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        for _ in 0..20 {
            let rec = ProducerRecord::new(topic.clone(), format!("line-{produced}")).partition(produced as i32 % 3);
            producer.send_and_wait(rec).await.unwrap();
            produced += 1;
        }
        let (ma, mb) = (scrape(&a.metrics).await, scrape(&b.metrics).await);
        if m(&ma, "sink-record-send-total") > 0.0 && m(&mb, "sink-record-send-total") > 0.0 {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "both processes never did work: {ma:?} {mb:?}");
    }
    producer.close(Duration::from_secs(10)).await.unwrap();

    wait_until_async("every record acknowledged by one of the two", Duration::from_secs(60), || async {
        let (ma, mb) = (scrape(&a.metrics).await, scrape(&b.metrics).await);
        m(&ma, "sink-record-acknowledge-total") + m(&mb, "sink-record-acknowledge-total") >= produced as f64
    })
    .await;
    let (ma, mb) = (scrape(&a.metrics).await, scrape(&b.metrics).await);
    for s in [&ma, &mb] {
        let acked = m(s, "sink-record-acknowledge-total");
        assert!(acked > 0.0);
        assert_eq!(m(s, "sink-record-acquire-total"), acked, "{s:?}");
        assert_eq!(m(s, "sink-record-read-total"), acked);
        assert_eq!(m(s, "sink-record-send-total"), acked);
        assert_eq!(m(s, "sink-record-active-count"), 0.0);
        assert_eq!(m(s, "task-count"), 2.0);
        assert_eq!(m(s, "sink-record-release-total"), 0.0);
        assert_eq!(m(s, "sink-record-reject-total"), 0.0);
        assert!(m(s, "put-batch-time-max") > 0.0 && m(s, "put-batch-time-avg") > 0.0);
        assert!(m(s, "acknowledge-time-max") > 0.0 && m(s, "acknowledge-time-avg") > 0.0);
        assert!(m(s, "sink-record-acquire-rate") > 0.0);
    }
    assert_eq!(m(&ma, "sink-record-acknowledge-total") + m(&mb, "sink-record-acknowledge-total"), produced as f64);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let distinct: BTreeSet<&str> = lines.iter().copied().collect();
    assert_eq!((lines.len(), distinct.len()), (produced, produced), "each record written once");

    for p in [a, b] {
        let ended = p.terminate();
        assert!(ended.status.success(), "exit {:?}: {:?}", ended.status, ended.stdout);
        assert!(ended.stdout.iter().any(|l| l.contains("stopped")), "{:?}", ended.stdout);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_files_exit_2_saying_why() {
    let dir = common::temp_dir("sinkbad");
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, "bootstrap.servers=127.0.0.1:1\n").unwrap();
    let eos = dir.join("eos.json");
    std::fs::write(
        &eos,
        r#"{"name":"eos","config":{"connector.class":"file","topics":"t","share.delivery.semantics":"exactly-once"}}"#,
    )
    .unwrap();
    let out = Command::new(BIN).arg(&worker).arg(&eos).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("KIP-1289"), "{err}");
    let out = Command::new(BIN).arg(&worker).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--metrics-address 0.0.0.0:0`: the endpoint listens on every interface (as a pod needs
/// for a Prometheus elsewhere), not on 127.0.0.1 alone; scraped here through 127.0.0.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_address_is_the_one_given() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkaddr", 1).await;
    let dir = common::temp_dir("sinkaddr");
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, format!("bootstrap.servers={}\n", common::bootstrap())).unwrap();
    let connector = dir.join("addr.properties");
    let out = dir.join("out.txt");
    std::fs::write(
        &connector,
        format!(
            "name=addr\nconnector.class=file\nfile={}\ntopics={topic}\nshare.group.id={}\n",
            out.display(),
            common::unique("connect-addr")
        ),
    )
    .unwrap();
    let p = start_logging(&worker, &connector, &["--metrics-address", "0.0.0.0:0"]);
    let (ip, port) = p.metrics.rsplit_once(':').expect("HOST:PORT printed");
    assert_eq!(ip, "0.0.0.0", "printed {}", p.metrics);
    let metrics = scrape(&format!("127.0.0.1:{port}")).await;
    assert_eq!(m(&metrics, "task-count"), 1.0, "{metrics:?}");
    // The times are in seconds, with the unit in the name (NaN: no batch yet).
    assert!(metrics.contains_key("kafka_connect_sink_task_put_batch_time_avg_seconds"), "{metrics:?}");
    let status = p.terminate().status;
    assert!(status.success());
    // A bad address is a usage error that says what to give.
    let bad = Command::new(BIN).args(["--metrics-address", "0.0.0.0", "w", "c"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("give HOST:PORT"), "{bad:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_loses_nothing_a_second_worker_takes_the_rest() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkkill", 1).await;
    // A 6 s lock: what the killed process held comes back to the group soon.
    let group = common::new_group(&admin, "connect-kill", Some(6000)).await;
    let dir = common::temp_dir("sinkkill");
    let out = dir.join("out.txt");
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, format!("bootstrap.servers={}\n", common::bootstrap())).unwrap();
    let connector = dir.join("kill.json");
    std::fs::write(
        &connector,
        format!(
            r#"{{"name":"kill","config":{{"connector.class":"file","file":{:?},"topics":"{topic}","tasks.max":2,
               "share.group.id":"{group}","share.acquisition.lock.timeout.ms":6000,
               "consumer.override.fetch.max.wait.ms":"200"}}}}"#,
            out.display().to_string()
        ),
    )
    .unwrap();
    let a = start(&worker, &connector);
    common::produce(&common::bootstrap(), &topic, 1, 200, "k").await;
    wait_until_async("the first worker to take records", Duration::from_secs(60), || async {
        m(&scrape(&a.metrics).await, "sink-record-acquire-total") > 0.0
    })
    .await;
    a.kill_9();
    common::produce(&common::bootstrap(), &topic, 1, 200, "l").await;
    let b = start(&worker, &connector);
    let want: BTreeSet<String> = (0..200).flat_map(|i| [format!("k-{i}"), format!("l-{i}")]).collect();
    wait_until_async("every record in the file", Duration::from_secs(90), || async {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let have: BTreeSet<String> = text.lines().map(str::to_string).collect();
        want.is_subset(&have)
    })
    .await;
    let status = b.terminate().status;
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A worker's log goes to a file or a pipe as plain text (no colour codes, which only a
/// terminal reads), or as one JSON object per line with `--log-format json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_to_a_pipe_are_plain_text_or_json_lines() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinklog", 1).await;
    let dir = common::temp_dir("sinklog");
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, format!("bootstrap.servers={}\n", common::bootstrap())).unwrap();
    let connector = dir.join("file-sink.properties");
    std::fs::write(
        &connector,
        format!(
            "name=log-file\nconnector.class=file\nfile={}\ntopics={topic}\ntasks.max=1\nshare.group.id={}\n",
            dir.join("out.txt").display(),
            common::unique("connect-log")
        ),
    )
    .unwrap();
    let ended = start_logging(&worker, &connector, &[]).terminate();
    let (status, text) = (ended.status, ended.stderr);
    assert!(status.success(), "{status:?}");
    assert!(text.contains("INFO"), "the info lines are there: {text}");
    assert!(!text.contains('\u{1b}'), "no ANSI escape codes in a pipe: {text:?}");

    let ended = start_logging(&worker, &connector, &["--log-format", "json"]).terminate();
    let (status, text) = (ended.status, ended.stderr);
    assert!(status.success(), "{status:?}");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "json lines were written");
    for line in lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
        assert!(v.get("level").is_some() && v.get("fields").is_some(), "{line}");
    }
}
