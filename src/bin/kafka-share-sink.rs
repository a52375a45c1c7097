//! `kafka-share-sink`: runs sink connectors on share groups (KIP-1302) from Connect-style
//! files.
//!
//! ```text
//! kafka-share-sink [--metrics-port N | --metrics-address HOST:PORT] [--rest HOST:PORT] [--log-format text|json] worker.properties [connector.properties|connector.json ...]
//! ```
//!
//! The worker file holds `bootstrap.servers` and the security settings; each connector file
//! holds `name`, `connector.class`, `topics`, `tasks.max` and the sink's keys. Several
//! processes started on the same connector files share the work through the broker.
//! SIGINT or SIGTERM stops it cleanly: the tasks stop taking records, finish or release
//! their batches, commit and close. Logs go to stderr (`RUST_LOG`, default `info`): plain
//! text (coloured only when stderr is a terminal), or one JSON object per line with
//! `--log-format json`, for log collectors.
//! With `--metrics-port N` (0 picks a free port) the metrics are served in Prometheus format
//! at `http://127.0.0.1:N/metrics`, this host only; `--metrics-address HOST:PORT` serves
//! them where it says, `0.0.0.0:9464` (or `[::]:9464`) on every interface, as a pod needs
//! for a Prometheus elsewhere to scrape it. The address is printed on stdout.
//!
//! With `--rest HOST:PORT` (or the worker setting `listeners=http://HOST:PORT`, as in
//! Connect) Kafka Connect's REST API is served there (`kafka_share::sink::rest`), and
//! connector files become optional: connectors are created, changed, paused, resumed,
//! restarted and deleted through it. The configurations set through it are kept in the
//! file the worker setting `config.storage.file.filename` names and started again on the
//! next start (without it they last as long as the process). A connector that fails to
//! start is then reported `FAILED` by the API instead of ending the process (exit code 1
//! only for a connector file the runtime refuses). The address is printed on stdout. Connect serves `http://:8083` by default; here the API is off unless asked for,
//! so two processes on one host do not fight over the port.
//!
//! Distributed mode: with the worker setting `config.storage.topic` (instead of
//! `config.storage.file.filename`) the configurations are kept in that compacted topic
//! (created when missing; `config.storage.replication.factor`) and every worker on it runs
//! them: a REST call on any worker changes the connector on all of them.
//!
//! `kafka-share-sink --validate worker.properties connector.properties ...` starts nothing: it
//! prints, for each connector file, what Connect's validate endpoint
//! (`PUT /connector-plugins/{class}/config/validate`) answers for it, as JSON, and exits 0
//! when no setting is refused, 1 otherwise.
//!
//! Exit codes: 0 clean stop, 1 a connector could not start or stop, 2 bad usage.

#[path = "support/stop_signal.rs"]
mod stop_signal;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use kafka_share::config::Properties;
use kafka_share::sink::rest::{self, ConfigTopic, Herder, RestServer};
use kafka_share::sink::{Connector, ConnectorConfig, MetricsSource, PrometheusServer, Registry, Worker, WorkerConfig};
use stop_signal::stop_signal;

/// Prints a status line on stdout. A closed stdout (the supervisor went away) must not
/// panic the process mid-shutdown, as `println!` would: the line is dropped instead.
fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
}

/// The same on stderr, for errors.
fn fail(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

const USAGE: &str =
    "usage: kafka-share-sink [--metrics-port N | --metrics-address HOST:PORT] [--rest HOST:PORT] [--log-format text|json] \
                     worker.properties [connector.properties|connector.json ...] (connector files are optional with --rest or listeners=)\n\
       kafka-share-sink --validate worker.properties connector.properties|connector.json ... (prints Connect's validate answer; exit 1 when a setting is refused)";

/// How long a clean stop may take before tasks are aborted (their records then come back
/// to the group when their locks lapse).
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    fn parse(v: &str) -> Result<LogFormat, String> {
        match v {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("--log-format {v:?}: use text or json")),
        }
    }
}

/// Where the metrics endpoint listens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MetricsAt {
    /// `--metrics-port N`: 127.0.0.1:N, this host only.
    Port(u16),
    /// `--metrics-address HOST:PORT`: as given (`0.0.0.0:9464` for every interface).
    Address(String),
}

impl MetricsAt {
    /// `HOST:PORT` with a port; the host is resolved when the endpoint starts.
    fn address(v: &str) -> Result<MetricsAt, String> {
        match v.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(MetricsAt::Address(v.into())),
            _ => Err(format!(
                "--metrics-address {v:?}: give HOST:PORT, e.g. 0.0.0.0:9464 for every interface, [::]:9464 for IPv6"
            )),
        }
    }

    fn port(v: &str) -> Result<MetricsAt, String> {
        v.parse::<u16>()
            .map(MetricsAt::Port)
            .map_err(|_| format!("--metrics-port {v:?}: not a port (0..=65535)"))
    }
}

#[derive(Debug)]
struct Args {
    metrics: Option<MetricsAt>,
    log_format: LogFormat,
    /// `--rest HOST:PORT`: where the REST API listens (over the worker's `listeners`).
    rest: Option<String>,
    /// `--validate`: check the connector files, start nothing.
    validate: bool,
    worker: String,
    connectors: Vec<String>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut metrics: Option<MetricsAt> = None;
    // Both options name the one endpoint: the second of them is a mistake, not an override.
    let mut set_metrics = |m: MetricsAt| match metrics.replace(m) {
        Some(_) => Err("give one of --metrics-port and --metrics-address, once".to_string()),
        None => Ok(()),
    };
    let mut log_format = LogFormat::Text;
    let mut rest = None;
    let mut validate = false;
    let mut files = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => return Err(String::new()),
            "--metrics-port" => {
                set_metrics(MetricsAt::port(&args.next().ok_or("--metrics-port needs a port number")?)?)?
            }
            s if s.starts_with("--metrics-port=") => set_metrics(MetricsAt::port(&s["--metrics-port=".len()..])?)?,
            "--metrics-address" => {
                set_metrics(MetricsAt::address(&args.next().ok_or("--metrics-address needs HOST:PORT")?)?)?
            }
            s if s.starts_with("--metrics-address=") => {
                set_metrics(MetricsAt::address(&s["--metrics-address=".len()..])?)?
            }
            "--rest" => rest = Some(args.next().ok_or("--rest needs HOST:PORT (e.g. 127.0.0.1:8083)")?),
            s if s.starts_with("--rest=") => rest = Some(s["--rest=".len()..].to_string()),
            "--validate" => validate = true,
            "--log-format" => log_format = LogFormat::parse(&args.next().ok_or("--log-format needs text or json")?)?,
            s if s.starts_with("--log-format=") => log_format = LogFormat::parse(&s["--log-format=".len()..])?,
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => files.push(a),
        }
    }
    if files.is_empty() {
        return Err("give a worker properties file (and connector files, or --rest to create them over HTTP)".into());
    }
    let worker = files.remove(0);
    if validate && files.is_empty() {
        return Err("--validate needs the worker file and at least one connector file".into());
    }
    Ok(Args { metrics, log_format, rest, validate, worker, connectors: files })
}

fn load_connector(path: &str) -> kafka_share::Result<ConnectorConfig> {
    if path.ends_with(".json") {
        let text = std::fs::read_to_string(path)
            .map_err(|e| kafka_share::Error::Config { key: path.to_string(), message: format!("cannot read: {e}") })?;
        ConnectorConfig::from_json(&text)
    } else {
        ConnectorConfig::from_properties(&Properties::load(path)?)
    }
}

/// Logs to stderr: colour codes only for a terminal (a file or a pipe gets plain text), or
/// JSON lines.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => fmt.json().with_ansi(false).init(),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // First: a SIGTERM from here on stops the worker cleanly (see `stop_signal`).
    let stop = stop_signal(|m| eprintln!("kafka-share-sink: {m}"));
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(msg) if msg.is_empty() => {
            say(USAGE);
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            fail(&format!("kafka-share-sink: {msg}\n{USAGE}"));
            return ExitCode::from(2);
        }
    };
    init_logging(args.log_format);
    // Read every file before starting anything, so a typo fails the whole run up front.
    let worker_props = match Properties::load(&args.worker) {
        Ok(p) => p,
        Err(e) => {
            fail(&format!("kafka-share-sink: {}: {e}", args.worker));
            return ExitCode::from(2);
        }
    };
    let rest = match rest_settings(&args, &worker_props) {
        Ok(r) => r,
        Err(e) => {
            fail(&format!("kafka-share-sink: {}: {e}", args.worker));
            return ExitCode::from(2);
        }
    };
    let config_topic = match ConfigTopic::from_worker_properties(&worker_props) {
        Ok(Some(_)) if rest.is_none() => {
            fail(&format!(
                "kafka-share-sink: {}: config.storage.topic is distributed mode, managed through the REST API: \
                 add listeners=http://:8083 to the worker file (or give --rest HOST:PORT)",
                args.worker
            ));
            return ExitCode::from(2);
        }
        Ok(t) => t,
        Err(e) => {
            fail(&format!("kafka-share-sink: {}: {e}", args.worker));
            return ExitCode::from(2);
        }
    };
    if rest.is_none() && args.connectors.is_empty() {
        fail(&format!(
            "kafka-share-sink: give at least one connector file, or serve the REST API (--rest HOST:PORT or listeners=)\n{USAGE}"
        ));
        return ExitCode::from(2);
    }
    let worker_config = match WorkerConfig::from_properties(&worker_props) {
        Ok(c) => c,
        Err(e) => {
            fail(&format!("kafka-share-sink: {}: {e}", args.worker));
            return ExitCode::from(2);
        }
    };
    if args.validate {
        return validate_files(&Worker::new(worker_config, Registry::with_builtins()), &args.connectors);
    }
    let mut configs = Vec::new();
    for path in &args.connectors {
        match load_connector(path) {
            Ok(c) => configs.push(c),
            Err(e) => {
                fail(&format!("kafka-share-sink: {path}: {e}"));
                return ExitCode::from(2);
            }
        }
    }

    let worker = Worker::new(worker_config, Registry::with_builtins());
    if let Some((at, store)) = rest {
        return run_rest(worker, configs, &at, Storage { file: store, topic: config_topic }, args.metrics, stop).await;
    }
    let mut connectors: Vec<Connector> = Vec::new();
    for c in configs {
        let name = c.name().to_string();
        match worker.start_connector(c).await {
            Ok(conn) => connectors.push(conn),
            Err(e) => {
                fail(&format!("kafka-share-sink: connector {name}: {e}"));
                let _ = worker.close(SHUTDOWN_TIMEOUT).await;
                return ExitCode::from(1);
            }
        }
    }
    let handles = connectors.clone();
    let source: MetricsSource = Arc::new(move || handles.iter().map(Connector::metrics).collect());
    let _server = match serve_metrics(args.metrics, source).await {
        Ok(s) => s,
        Err(e) => {
            fail(&format!("kafka-share-sink: {e}"));
            let _ = worker.close(SHUTDOWN_TIMEOUT).await;
            return ExitCode::from(1);
        }
    };
    say(&format!("kafka-share-sink: running {} connector(s); stop with SIGINT or SIGTERM", connectors.len()));

    stop.await;
    tracing::info!("stopping");
    match worker.close(SHUTDOWN_TIMEOUT).await {
        Ok(()) => {
            say("kafka-share-sink: stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            fail(&format!("kafka-share-sink: stop: {e}"));
            ExitCode::from(1)
        }
    }
}

/// `--validate`: each file's answer on stdout; 1 when any setting is refused, 2 when a file
/// cannot be read or names no class.
fn validate_files(worker: &Worker, paths: &[String]) -> ExitCode {
    let mut refused = false;
    for path in paths {
        match rest::validate_file(worker, std::path::Path::new(path)) {
            Ok(v) => {
                refused |= v.error_count > 0;
                say(&v.json);
            }
            Err(e) => {
                fail(&format!("kafka-share-sink: {path}: {e}"));
                return ExitCode::from(2);
            }
        }
    }
    if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Where the REST API listens (`--rest`, else the worker's `listeners`) and the worker's
/// `config.storage.file.filename`; `None` when no API is asked for.
fn rest_settings(args: &Args, worker: &Properties) -> kafka_share::Result<Option<(String, Option<PathBuf>)>> {
    let at = match (&args.rest, worker.get("listeners")) {
        (Some(at), _) => at.clone(),
        (None, Some(l)) => rest::listener_address(l)?,
        (None, None) => return Ok(None),
    };
    let store = worker
        .get("config.storage.file.filename")
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(PathBuf::from);
    Ok(Some((at, store)))
}

/// The metrics endpoint, when asked for; its address is printed on stdout.
async fn serve_metrics(at: Option<MetricsAt>, source: MetricsSource) -> kafka_share::Result<Option<PrometheusServer>> {
    let Some(at) = at else { return Ok(None) };
    let s = match at {
        MetricsAt::Port(port) => PrometheusServer::bind(port, source).await?,
        MetricsAt::Address(addr) => PrometheusServer::bind_to(addr.as_str(), source).await?,
    };
    // On stdout, so a supervisor (or a test) started with port 0 finds it.
    say(&format!("kafka-share-sink: metrics on http://{}/metrics", s.local_addr()));
    Ok(Some(s))
}

/// Where the REST API keeps connector configurations: a file (standalone) or a topic
/// (distributed), or neither.
struct Storage {
    file: Option<PathBuf>,
    topic: Option<ConfigTopic>,
}

/// The REST API's run: the stored connectors started again, the files' connectors put
/// (a file wins over the store for its name, as Connect's standalone files do), the API
/// served until SIGINT or SIGTERM.
async fn run_rest(
    worker: Worker,
    configs: Vec<ConnectorConfig>,
    at: &str,
    storage: Storage,
    metrics: Option<MetricsAt>,
    stop: impl std::future::Future<Output = ()>,
) -> ExitCode {
    let herder = match storage.topic {
        Some(topic) => {
            let name = topic.topic().to_string();
            match Herder::distributed(worker, topic).await {
                Ok(h) => {
                    let n = h.names().await.len();
                    say(&format!("kafka-share-sink: distributed: {n} connector(s) read from the config topic {name}"));
                    h
                }
                Err(e) => {
                    fail(&format!("kafka-share-sink: {e}"));
                    return ExitCode::from(1);
                }
            }
        }
        None => {
            if storage.file.is_none() {
                tracing::warn!("no config.storage.file.filename in the worker file: connectors created through the REST API are lost when the process stops");
            }
            Arc::new(Herder::new(worker, storage.file))
        }
    };
    let code = async {
        match herder.restore().await {
            Ok(n) if n > 0 => say(&format!("kafka-share-sink: {n} stored connector(s) restored")),
            Ok(_) => {}
            Err(e) => {
                fail(&format!("kafka-share-sink: {e}"));
                return Some(ExitCode::from(1));
            }
        }
        for c in configs {
            if let Err(e) = herder.put_config(c.name(), c.task_config().clone()).await {
                fail(&format!("kafka-share-sink: connector {}: {e}", c.name()));
                return Some(ExitCode::from(1));
            }
        }
        None
    }
    .await;
    if let Some(code) = code {
        herder.close().await;
        return code;
    }
    let source_herder = herder.clone();
    let source: MetricsSource = Arc::new(move || source_herder.worker().metrics());
    let servers: kafka_share::Result<_> = async {
        let metrics = serve_metrics(metrics, source).await?;
        let api = RestServer::bind(at, herder.clone()).await?;
        say(&format!("kafka-share-sink: REST API on http://{}", api.local_addr()));
        Ok((metrics, api))
    }
    .await;
    let _servers = match servers {
        Ok(s) => s,
        Err(e) => {
            fail(&format!("kafka-share-sink: {e}"));
            herder.close().await;
            return ExitCode::from(1);
        }
    };
    say(&format!("kafka-share-sink: running {} connector(s); stop with SIGINT or SIGTERM", herder.names().await.len()));
    stop.await;
    tracing::info!("stopping");
    herder.close().await;
    say("kafka-share-sink: stopped");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Result<Args, String> {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_port_and_files() {
        let a = args(&["--metrics-port", "9400", "w.properties", "c.json"]).unwrap();
        assert_eq!(
            (a.metrics, a.worker.as_str(), a.connectors.len()),
            (Some(MetricsAt::Port(9400)), "w.properties", 1)
        );
        assert_eq!(args(&["w", "c"]).unwrap().metrics, None);
        // The worker file alone parses: the REST API may create the connectors (main
        // refuses it without one).
        assert_eq!(args(&["w.properties"]).unwrap().connectors.len(), 0);
        assert!(args(&[]).is_err());
        assert_eq!(args(&["--rest", "127.0.0.1:0", "w"]).unwrap().rest.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(args(&["--rest=127.0.0.1:9", "w"]).unwrap().rest.as_deref(), Some("127.0.0.1:9"));
        assert!(args(&["w", "--rest"]).unwrap_err().contains("HOST:PORT"));
        assert!(args(&["--metrics-port", "x", "a", "b"]).unwrap_err().contains("not a port"));
        assert!(args(&["--bogus", "a", "b"]).is_err());
        assert_eq!(args(&["w", "c"]).unwrap().log_format, LogFormat::Text);
        assert_eq!(args(&["--log-format", "json", "w", "c"]).unwrap().log_format, LogFormat::Json);
        assert_eq!(args(&["--log-format=json", "w", "c"]).unwrap().log_format, LogFormat::Json);
        assert!(args(&["--log-format", "xml", "w", "c"]).unwrap_err().contains("text or json"));
    }

    #[test]
    fn parses_the_metrics_address() {
        for (given, want) in [("0.0.0.0:9464", "0.0.0.0:9464"), ("[::]:0", "[::]:0"), ("localhost:9", "localhost:9")] {
            let a = args(&["--metrics-address", given, "w", "c"]).unwrap();
            assert_eq!(a.metrics, Some(MetricsAt::Address(want.into())));
        }
        let a = args(&["--metrics-address=0.0.0.0:1", "w", "c"]).unwrap();
        assert_eq!(a.metrics, Some(MetricsAt::Address("0.0.0.0:1".into())));
        for bad in ["0.0.0.0", ":9464", "host:port", "host:70000"] {
            let e = args(&["--metrics-address", bad, "w", "c"]).unwrap_err();
            assert!(e.contains("give HOST:PORT, e.g. 0.0.0.0:9464"), "{bad}: {e}");
        }
        let e = args(&["--metrics-port", "1", "--metrics-address", "0.0.0.0:2", "w", "c"]).unwrap_err();
        assert!(e.contains("one of --metrics-port and --metrics-address"), "{e}");
    }
}
