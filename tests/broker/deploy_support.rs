//! What the deploy/ tests share: the `kafka-share-exporter` binary started as a user starts
//! it, a scrape with a chosen `Accept` header, the tools from outside (promtool, Go) found or
//! failed on with how to install them, and `kedaprobe` (tests/keda): KEDA's own generated
//! gRPC client calling the scaler, its answers read back with their gRPC status codes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The exporter binary, running until dropped (then killed: a test that checks its clean
/// stop does so itself).
pub struct ExporterBin {
    child: Child,
    /// HOST:PORT of /metrics.
    pub metrics: String,
    /// HOST:PORT of the KEDA scaler.
    pub scaler: String,
}

impl ExporterBin {
    /// Starts it on the broker with `args` (e.g. `--group G`), /metrics and the scaler on
    /// free ports of 127.0.0.1, refreshing every 0.2 s. `$KAFKA_SHARE_EXPORTER` names another
    /// build of it (a target directory shared by several checkouts may hold another's).
    pub fn start(args: &[&str]) -> ExporterBin {
        use std::io::{BufRead, BufReader};
        let bin = std::env::var_os("KAFKA_SHARE_EXPORTER")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kafka-share-exporter")));
        let mut child = Command::new(bin)
            .args(["--bootstrap-server", &crate::common::bootstrap(), "--listen", "127.0.0.1:0"])
            .args(["--scaler-listen", "127.0.0.1:0", "--refresh-interval", "0.2"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start kafka-share-exporter");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut next = || lines.next().expect("a line from kafka-share-exporter").expect("read its stdout");
        let (metrics, scaler) = (next(), next());
        let metrics = metrics
            .strip_prefix("metrics: http://")
            .and_then(|m| m.strip_suffix("/metrics"))
            .unwrap_or_else(|| panic!("{metrics}"))
            .to_string();
        let scaler = scaler.strip_prefix("scaler: ").unwrap_or_else(|| panic!("{scaler}")).to_string();
        ExporterBin { child, metrics, scaler }
    }
}

impl Drop for ExporterBin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /metrics` with `Accept: accept` (no header when `None`): (Content-Type, body).
pub async fn scrape(addr: &str, accept: Option<&str>) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect to /metrics");
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: localhost\r\n{accept}\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP head: {out}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let ctype = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or_else(|| panic!("no Content-Type: {head}"))
        .to_string();
    (ctype, body.to_string())
}

/// A tool from outside: `$ENV` when set, else `name` on the PATH, else under `extra`. Fails
/// saying how to install it.
pub fn tool(name: &str, env: &str, extra: &[&str], install: &str) -> PathBuf {
    let candidates = std::env::var_os(env)
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("PATH")
                .into_iter()
                .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .map(|d| d.join(name)),
        )
        .chain(extra.iter().map(PathBuf::from));
    for c in candidates {
        if c.is_file() {
            return c;
        }
    }
    panic!("{name} not found: {install} (or set {env}); .ci/run installs it");
}

/// `promtool`, from Debian's `prometheus` package.
pub fn promtool() -> PathBuf {
    tool("promtool", "PROMTOOL", &[], "apt-get install prometheus (Debian's, 2.42)")
}

/// The repository root (deploy/, tests/keda).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The target directory this test binary was built in (target/debug/deps/broker-* is three
/// below it), where `kedaprobe` is built.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors().nth(3).map(Path::to_path_buf).unwrap_or_else(|| repo().join("target"))
}

/// `kedaprobe` (tests/keda, KEDA's generated client): `$KEDAPROBE` when set, else built into
/// `<target>/keda/kedaprobe` once per test process with `go build` (.ci/run builds it first,
/// so here it is Go's cache answering).
pub fn kedaprobe() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    if let Some(p) = std::env::var_os("KEDAPROBE") {
        return PathBuf::from(p);
    }
    BUILT
        .get_or_init(|| {
            let out = target_dir().join("keda").join("kedaprobe");
            let go = tool("go", "GO", &["/usr/local/go/bin/go"], "install Go (https://go.dev/dl)");
            let r = Command::new(go)
                .current_dir(repo().join("tests/keda"))
                .args(["build", "-buildvcs=false", "-o"])
                .arg(&out)
                .arg(".")
                .output()
                .map_err(|e| format!("cannot run go: {e}"))?;
            if !r.status.success() {
                return Err(format!(
                    "go build in tests/keda failed (it needs the Go module proxy for KEDA's client): {}",
                    String::from_utf8_lossy(&r.stderr)
                ));
            }
            Ok(out)
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A gRPC error as KEDA's client saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct GrpcError {
    pub code: tonic::Code,
    pub message: String,
}

/// One line of kedaprobe: which trigger (its index in the manifest), its type, the call, and
/// the answer (the proto's JSON mapping: camelCase names, int64 as strings) or the error.
#[derive(Debug, Clone)]
pub struct Answer {
    pub trigger: usize,
    pub kind: String,
    pub call: String,
    pub result: Result<Value, GrpcError>,
}

impl Answer {
    /// The answer, failing the test with the error when there is none.
    pub fn ok(&self) -> &Value {
        self.result.as_ref().unwrap_or_else(|e| panic!("{} of trigger {}: {e:?}", self.call, self.trigger))
    }

    /// The error, failing the test when the call succeeded.
    pub fn err(&self) -> &GrpcError {
        match &self.result {
            Err(e) => e,
            Ok(v) => panic!("{} of trigger {} answered {v}, not an error", self.call, self.trigger),
        }
    }
}

/// What kedaprobe sends: the metadata of one ScaledObject trigger, or a manifest's external
/// and external-push triggers.
pub enum Sent<'a> {
    Metadata(&'a [(&'a str, &'a str)]),
    Manifest(&'a Path),
}

fn command(addr: &str, sent: Sent<'_>, calls: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(kedaprobe());
    cmd.args(["-addr", addr]);
    match sent {
        Sent::Metadata(m) => {
            let m: serde_json::Map<String, Value> =
                m.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect();
            cmd.args(["-name", "worker", "-namespace", "default", "-metadata", &Value::Object(m).to_string()]);
        }
        Sent::Manifest(p) => {
            cmd.arg("-manifest").arg(p);
        }
    }
    cmd.args(calls).kill_on_drop(true);
    cmd
}

/// One line of kedaprobe's output read into an [`Answer`].
fn answer(line: &str) -> Answer {
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("kedaprobe printed {line:?}: {e}"));
    let result = if v["ok"] == Value::Bool(true) {
        Ok(v["response"].clone())
    } else {
        let num = v["code_num"].as_i64().unwrap_or(-1);
        let code = if num < 0 { tonic::Code::Unknown } else { tonic::Code::from_i32(num as i32) };
        Err(GrpcError { code, message: v["message"].as_str().unwrap_or_default().to_string() })
    };
    Answer {
        trigger: v["trigger"].as_u64().unwrap_or(0) as usize,
        kind: v["type"].as_str().unwrap_or_default().to_string(),
        call: v["call"].as_str().unwrap_or_default().to_string(),
        result,
    }
}

/// Runs kedaprobe against the scaler at `addr` with `calls` (see tests/keda/main.go) and
/// returns its answers in order.
pub async fn probe(addr: &str, sent: Sent<'_>, calls: &[&str]) -> Vec<Answer> {
    let out = command(addr, sent, calls).output().await.expect("run kedaprobe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "kedaprobe failed: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(answer).collect()
}

/// kedaprobe running, its answers read as they come (a stream's pushes).
pub struct Running {
    _child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Running {
    /// Starts kedaprobe with `calls`.
    pub fn start(addr: &str, sent: Sent<'_>, calls: &[&str]) -> Running {
        let mut child = command(addr, sent, calls).stdout(Stdio::piped()).spawn().expect("start kedaprobe");
        let stdout = child.stdout.take().expect("stdout");
        Running { _child: child, lines: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout)) }
    }

    /// The next answer, `None` once kedaprobe has ended.
    pub async fn next(&mut self) -> Option<Answer> {
        self.lines.next_line().await.expect("read kedaprobe's stdout").map(|l| answer(&l))
    }
}
