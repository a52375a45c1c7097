//! deploy/prometheus and deploy/grafana checked with Prometheus' own tools (Debian's
//! `prometheus` package, 2.42: `promtool`, and the server itself), and the exporter binary's
//! /metrics read by them in both exposition formats: `promtool check metrics` on the text
//! format 0.0.4 (its linter reads no other), a Prometheus server scraping OpenMetrics (it
//! asks for it first and parses it strictly: a scrape that does not parse marks the target
//! down). Fails when the broker is absent or promtool/prometheus are not installed.

use crate::common;
use crate::deploy_support::{probe, promtool, repo, scrape, tool, ExporterBin, Sent};

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(90);

/// Runs `promtool args...` (stdin from `input` when given): (success, stdout and stderr).
fn run_promtool(args: &[&str], input: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new(promtool())
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    let mut stdin = child.stdin.take().expect("stdin");
    if let Some(text) = input {
        stdin.write_all(text.as_bytes()).expect("write to promtool");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("promtool's output");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn the_alerts_pass_their_promtool_rules_test() {
    let (ok, out) = run_promtool(&["check", "rules", "deploy/prometheus/alerts.yaml"], None);
    assert!(ok, "{out}");
    let (ok, out) = run_promtool(&["test", "rules", "deploy/prometheus/alerts_test.yaml"], None);
    assert!(ok, "{out}");
}

/// Every PromQL expression of the Grafana dashboards (`expr` of each target, at any depth of
/// panels and rows), with Grafana's variables put as a query sees them.
fn dashboard_queries() -> Vec<(String, String)> {
    fn walk(v: &Value, file: &str, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(e)) = m.get("expr") {
                    let title = m.get("legendFormat").and_then(Value::as_str).unwrap_or("");
                    out.push((format!("{file} {title}"), grafana_vars(e)));
                }
                m.values().for_each(|v| walk(v, file, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, file, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo().join("deploy/grafana")).expect("deploy/grafana") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("a dashboard's JSON");
            walk(&v, &path.file_name().unwrap().to_string_lossy(), &mut out);
        }
    }
    assert!(out.len() >= 10, "the dashboards' queries were found: {out:?}");
    out
}

/// Grafana's variables as a query sees them: `$group` (multi-value, regex-matched) as `.*`,
/// the interval variables as durations.
fn grafana_vars(expr: &str) -> String {
    let mut e = expr.to_string();
    for (var, value) in
        [("$__rate_interval", "1m"), ("$__interval", "15s"), ("$__range", "1h"), ("${group}", ".*"), ("$group", ".*")]
    {
        e = e.replace(var, value);
    }
    assert!(!e.contains('$'), "a Grafana variable this test does not know: {expr}");
    e
}

/// The `query:` of every trigger of deploy/keda's Prometheus manifests.
fn keda_queries() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo().join("deploy/keda")).expect("deploy/keda") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).unwrap();
        for q in text.lines().filter_map(|l| l.trim().strip_prefix("query: ")) {
            out.push((path.file_name().unwrap().to_string_lossy().to_string(), q.to_string()));
        }
    }
    assert_eq!(out.len(), 2, "the Prometheus manifest's two queries: {out:?}");
    out
}

#[test]
fn the_dashboards_and_keda_queries_parse() {
    let mut queries = dashboard_queries();
    queries.extend(keda_queries());
    // Each as a recording rule, for promtool to parse.
    let mut rules = String::from("groups:\n  - name: deploy-queries\n    rules:\n");
    for (i, (_, q)) in queries.iter().enumerate() {
        rules.push_str(&format!("      - record: deploy:query_{i}\n        expr: {}\n", serde_json::json!(q)));
    }
    let file = std::env::temp_dir().join(format!("{}.yaml", common::unique("deploy-queries")));
    std::fs::write(&file, &rules).unwrap();
    let (ok, out) = run_promtool(&["check", "rules", file.to_str().unwrap()], None);
    let _ = std::fs::remove_file(&file);
    assert!(ok, "{out}\n{rules}");
}

/// The exporter binary on a group with a backlog, so that every family has samples:
/// (exporter, topic, group).
async fn exporter_with_a_group() -> (ExporterBin, String, String) {
    let admin = common::admin().await;
    let bs = common::bootstrap();
    let topic = common::new_topic(&admin, "promtool-t", 2).await;
    let group = common::new_group(&admin, "promtool-g", None).await;
    common::produce(&bs, &topic, 2, 20, "v").await;
    let c = kafka_share::ShareConsumer::connect(common::consumer_config(&bs, &group)).await.expect("consumer");
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 1, WAIT, |_| {}).await;
    assert!(!got.is_empty());
    c.close(Duration::from_secs(10)).await.expect("close");
    let exporter = ExporterBin::start(&["--group", &group]);
    // Until a refresh has read the group's partitions.
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, body) = scrape(&exporter.metrics, None).await;
        if body.contains(&format!("kafka_share_group_partition_lag{{group=\"{group}\"")) {
            return (exporter, topic, group);
        }
        assert!(tokio::time::Instant::now() < end, "the group never read: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_check_metrics_passes_on_the_text_format_of_a_live_scrape() {
    let (exporter, _, _) = exporter_with_a_group().await;
    for accept in [None, Some("text/plain;version=0.0.4"), Some("text/plain")] {
        let (ctype, body) = scrape(&exporter.metrics, accept).await;
        assert_eq!(ctype, "text/plain; version=0.0.4; charset=utf-8", "{accept:?}");
        assert!(!body.contains("# EOF"), "{body}");
        // promtool's linter: help on every family, counters named _total, base units...
        let (ok, out) = run_promtool(&["check", "metrics"], Some(&body));
        assert!(ok && out.trim().is_empty(), "promtool check metrics: {out}\n{body}");
    }
}

/// A Prometheus server of its own on 127.0.0.1, stopped (killed) when dropped.
struct Prometheus {
    child: std::process::Child,
    addr: String,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Scraping `target` every second, with deploy/prometheus/alerts.yaml loaded.
    async fn start(target: &str) -> Prometheus {
        let bin = tool("prometheus", "PROMETHEUS", &[], "apt-get install prometheus (Debian's, 2.42)");
        let dir = std::env::temp_dir().join(common::unique("prometheus"));
        std::fs::create_dir_all(&dir).unwrap();
        let alerts = repo().join("deploy/prometheus/alerts.yaml");
        let config = format!(
            "global: {{ scrape_interval: 1s, evaluation_interval: 1s }}\n\
             rule_files: [ {} ]\n\
             scrape_configs:\n  - job_name: exporter\n    static_configs: [ {{ targets: [ '{target}' ] }} ]\n",
            serde_json::json!(alerts.to_str().unwrap())
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        // A free port: taken from the OS, let go, given to Prometheus.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, addr, dir };
        let end = tokio::time::Instant::now() + WAIT;
        while get(&p.addr, "/-/ready").await.is_none_or(|(status, _)| status != 200) {
            let log = std::fs::read_to_string(p.dir.join("log")).unwrap_or_default();
            assert!(tokio::time::Instant::now() < end, "prometheus never ready: {log}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        p
    }

    /// An API call's `data`, failing on an error.
    async fn api(&self, path: &str) -> Value {
        let (status, body) = get(&self.addr, path).await.expect("prometheus answers");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert!(status == 200 && v["status"] == "success", "{path}: {status} {body}");
        v["data"].clone()
    }
}

/// `GET path` over HTTP/1.0 (no chunked answer to read): (status, body), `None` when
/// nothing listens.
async fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// `s` percent-encoded for a query string.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_openmetrics_and_runs_the_dashboards_and_alerts_on_it() {
    let (exporter, topic, group) = exporter_with_a_group().await;
    let (ctype, body) = scrape(&exporter.metrics, Some("application/openmetrics-text;version=1.0.0")).await;
    assert_eq!(ctype, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert!(body.ends_with("# EOF\n"), "{body}");

    let prometheus = Prometheus::start(&exporter.metrics).await;
    // The target up after a scrape: Prometheus asked for OpenMetrics and parsed it.
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let targets = prometheus.api("/api/v1/targets").await;
        let t = &targets["activeTargets"][0];
        if t["health"] == "up" {
            assert_eq!(t["lastError"], "", "{t}");
            break;
        }
        assert!(t["health"] != "down", "the scrape failed: {t}");
        assert!(tokio::time::Instant::now() < end, "never scraped: {targets}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Counters stored under their _total name, with their HELP and type.
    let metadata = prometheus.api("/api/v1/metadata").await;
    let refreshes = &metadata["kafka_share_exporter_refreshes"][0];
    assert_eq!(refreshes["type"], "counter", "{metadata}");
    assert!(refreshes["help"].as_str().is_some_and(|h| !h.is_empty()), "{metadata}");
    let lag_help = metadata["kafka_share_group_partition_lag"][0]["help"].as_str().unwrap_or_default().to_string();
    assert!(lag_help.contains("estimate=\"true\""), "HELP's quotes read back unescaped: {lag_help}");
    let r = prometheus
        .api(&format!("/api/v1/query?query={}", encode("kafka_share_exporter_refreshes_total")))
        .await;
    assert_eq!(r["result"].as_array().map(Vec::len), Some(1), "{r}");

    // The dashboards' and the KEDA manifest's queries run.
    let mut queries = dashboard_queries();
    queries.extend(keda_queries());
    for (what, q) in &queries {
        let (status, body) = get(&prometheus.addr, &format!("/api/v1/query?query={}", encode(q))).await.expect("query");
        assert_eq!(status, 200, "{what}: {q}: {body}");
    }
    // KEDA's Prometheus manifest and its external one scale on the same figures: its two
    // queries through Prometheus, and KEDA's client asking the scaler with the external
    // manifest's metadata, both naming this test's group and topic.
    let external = std::fs::read_to_string(repo().join("deploy/keda/scaledobject-external.yaml")).unwrap();
    let value_of =
        |key: &str| external.lines().find_map(|l| l.trim().strip_prefix(key)).map(str::trim).expect(key).to_string();
    let (m_group, m_topic) = (value_of("group:"), value_of("topic:"));
    let ours = |text: &str| {
        text.replace(&format!("group=\"{m_group}\""), &format!("group=\"{group}\""))
            .replace(&format!("topic=\"{m_topic}\""), &format!("topic=\"{topic}\""))
            .replace(&format!("group: {m_group}\n"), &format!("group: {group}\n"))
            .replace(&format!("topic: {m_topic}\n"), &format!("topic: {topic}\n"))
    };
    let copy = std::env::temp_dir().join(format!("{}.yaml", common::unique("scaledobject-external")));
    std::fs::write(&copy, ours(&external)).unwrap();
    let queries: Vec<String> = keda_queries().into_iter().map(|(_, q)| ours(&q)).collect();
    assert!(queries.iter().all(|q| q.contains(&group) && q.contains(&topic)), "{queries:?}");
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let mut through_prometheus = Vec::new();
        for q in &queries {
            let r = prometheus.api(&format!("/api/v1/query?query={}", encode(q))).await;
            through_prometheus.push(r["result"][0]["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()));
        }
        let scaler = probe(&exporter.scaler, Sent::Manifest(&copy), &["metrics"]).await;
        let through_scaler: Vec<Option<f64>> = scaler
            .iter()
            .map(|a| a.result.as_ref().ok().and_then(|v| v["metricValues"][0]["metricValueFloat"].as_f64()))
            .collect();
        // The lag the same; the age computed at each read, a few seconds apart at most.
        if let ([Some(pl), Some(pa)], [Some(sl), Some(sa)]) = (&through_prometheus[..], &through_scaler[..]) {
            if pl == sl && *pl > 0.0 && (pa - sa).abs() < 10.0 {
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < end,
            "Prometheus {through_prometheus:?} and the scaler {through_scaler:?} never agreed: {scaler:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = std::fs::remove_file(&copy);

    // The alerts loaded, and healthy (each evaluated without error).
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let rules = prometheus.api("/api/v1/rules").await;
        let all: Vec<&Value> = rules["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().into_iter().flatten())
            .collect();
        assert_eq!(all.len(), 5, "{rules}");
        if all.iter().all(|r| r["health"] == "ok") {
            break;
        }
        assert!(all.iter().all(|r| r["health"] != "err"), "{rules}");
        assert!(tokio::time::Instant::now() < end, "rules never evaluated: {rules}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
