//! The one launcher of the `kafka-share-sink` binary for the tests of every binary (broker,
//! postgres): started with the arguments a test gives, it waits for the addresses those
//! arguments make the binary print (the metrics endpoint with `--metrics-port` /
//! `--metrics-address`, the REST API with `--rest`), keeps its stdout lines, and optionally
//! its stderr. Dropped, the process is killed, so a failed test leaves nothing running.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_kafka-share-sink");

/// How long the binary may take to print an address: a distributed worker serves only once
/// it has read its config topic.
const ANNOUNCE: Duration = Duration::from_secs(90);

const METRICS_LINE: &str = "kafka-share-sink: metrics on http://";
const REST_LINE: &str = "kafka-share-sink: REST API on http://";

/// What to start: `SinkBin::new().metrics().args([worker, connector]).start()`.
#[must_use]
pub struct SinkBin {
    args: Vec<OsString>,
    dir: Option<PathBuf>,
    log: String,
    capture_stderr: bool,
}

impl SinkBin {
    /// No arguments yet, `RUST_LOG=warn`, stderr inherited, in the test's directory.
    pub fn new() -> SinkBin {
        SinkBin { args: Vec::new(), dir: None, log: "warn".to_string(), capture_stderr: false }
    }

    /// The metrics endpoint on a free port of 127.0.0.1 (`--metrics-port 0`).
    pub fn metrics(self) -> SinkBin {
        self.args(["--metrics-port", "0"])
    }

    /// The REST API on a free port of 127.0.0.1 (`--rest 127.0.0.1:0`).
    pub fn rest(self) -> SinkBin {
        self.args(["--rest", "127.0.0.1:0"])
    }

    /// More arguments (options, then the worker and connector files).
    pub fn args<I, S>(mut self, args: I) -> SinkBin
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Runs in `dir` (created if missing): a connector's relative `file` lands there.
    pub fn in_dir(mut self, dir: &Path) -> SinkBin {
        self.dir = Some(dir.to_path_buf());
        self
    }

    /// `RUST_LOG` for the process.
    pub fn log(mut self, filter: &str) -> SinkBin {
        self.log = filter.to_string();
        self
    }

    /// Keeps stderr (a pipe, so plain text) for [`SinkProc::terminate`].
    pub fn capture_stderr(mut self) -> SinkBin {
        self.capture_stderr = true;
        self
    }

    /// Starts the binary and waits until it printed every address its arguments ask for.
    pub fn start(self) -> SinkProc {
        let wants_metrics = self.args.iter().any(|a| a == "--metrics-port" || a == "--metrics-address");
        let wants_rest = self.args.iter().any(|a| a == "--rest");
        let mut cmd = Command::new(BIN);
        cmd.args(&self.args).env("RUST_LOG", &self.log).stdout(Stdio::piped());
        cmd.stderr(if self.capture_stderr { Stdio::piped() } else { Stdio::inherit() });
        if let Some(dir) = &self.dir {
            std::fs::create_dir_all(dir).expect("the process's directory");
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().expect("start kafka-share-sink");
        let stderr = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = std::io::Read::read_to_string(&mut err, &mut text);
                text
            })
        });
        let out = child.stdout.take().expect("stdout");
        let (tx, stdout) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = SinkProc { child, metrics: String::new(), rest: String::new(), stdout, stderr };
        while (wants_metrics && p.metrics.is_empty()) || (wants_rest && p.rest.is_empty()) {
            let line = p.stdout.recv_timeout(ANNOUNCE).unwrap_or_else(|e| {
                panic!("kafka-share-sink printed no address (metrics {wants_metrics}, REST {wants_rest}): {e}")
            });
            if let Some(rest) = line.strip_prefix(METRICS_LINE) {
                p.metrics = rest.strip_suffix("/metrics").unwrap_or(rest).to_string();
            } else if let Some(rest) = line.strip_prefix(REST_LINE) {
                p.rest = rest.to_string();
            }
        }
        p
    }
}

/// A running `kafka-share-sink`.
pub struct SinkProc {
    child: Child,
    /// The metrics endpoint's HOST:PORT (empty without `--metrics-*`).
    pub metrics: String,
    /// The REST API's HOST:PORT (empty without `--rest`).
    pub rest: String,
    stdout: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
}

/// How a [`SinkProc`] ended.
pub struct Ended {
    pub status: ExitStatus,
    /// The stdout lines after the addresses.
    pub stdout: Vec<String>,
    /// The stderr text (empty unless captured).
    pub stderr: String,
}

impl SinkProc {
    /// SIGTERM (a graceful close), then how it ended.
    pub fn terminate(mut self) -> Ended {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
        self.ended()
    }

    /// SIGKILL (`kill -9`: no close at all), waited for.
    pub fn kill_9(mut self) {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("wait");
    }

    fn ended(&mut self) -> Ended {
        let status = self.child.wait().expect("wait");
        // The reader thread may still hold the last lines: read until it ends (at EOF).
        let mut stdout = Vec::new();
        while let Ok(l) = self.stdout.recv_timeout(Duration::from_secs(10)) {
            stdout.push(l);
        }
        // The process is gone: its stderr is at EOF.
        let stderr = self.stderr.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default();
        Ended { status, stdout, stderr }
    }
}

impl Drop for SinkProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
