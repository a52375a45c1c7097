//! `kafka-share-exporter`: share-group lag, the age of the oldest unacknowledged record and
//! the exporter's own health as Prometheus metrics, refreshed on an interval into a cache a
//! scrape reads; with `--scaler-listen`, KEDA's external scaler over gRPC from the same cache.
//!
//! ```text
//! kafka-share-exporter --command-config client.properties --listen 0.0.0.0:9464 --scaler-listen 0.0.0.0:9465
//! ```
//!
//! Connects with the same properties as every client of this crate (`bootstrap.servers`,
//! `security.protocol`, `sasl.*`, `ssl.*`: a Confluent Cloud file works unchanged). Prints
//! `metrics: http://ADDR/metrics` (and `scaler: ADDR`) on stdout once listening; SIGINT or
//! SIGTERM stops it. A cluster that cannot be reached (at start or later) is retried with a
//! backoff while /metrics serves the errors (`operation="connect"`) and the scaler answers
//! UNAVAILABLE. Logs go to stderr (`RUST_LOG`, default `info`): a line at start, one when the
//! cluster becomes reachable or unreachable, one per refresh failure (the same operation and
//! kind at most once a minute). Exit codes: 0 clean stop, 1 a bad client file or an address
//! it cannot listen on, 2 bad usage.

#[path = "support/stop_signal.rs"]
mod stop_signal;
#[path = "support/usage.rs"]
mod usage;

#[path = "kafka_share_exporter/args.rs"]
mod args;

use std::process::ExitCode;
use std::sync::Arc;

use kafka_share::config::Properties;
use kafka_share::exporter::scaler::{serve_scaler, Scaler};
use kafka_share::exporter::{Exporter, ExporterConfig, GroupFilter};
use kafka_share::prometheus::{serve, Registry};

const PROG: &str = "kafka-share-exporter";

/// A status line on stdout; a closed stdout must not panic the process.
fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
}

fn fail(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{PROG}: {line}");
}

// One thread: the exporter is a small daemon whose work is waiting on the cluster, and a
// scrape's rendering takes milliseconds. A multi-thread runtime gave each worker its own
// malloc arena: a refresh on one worker and a scrape on the other each kept their own peak
// (peak RSS 45 MB on two workers, 27 MB on one thread, for 1,000 groups of 16 partitions
// scraped every 0.2 s through their refreshes).
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let stop = stop_signal::stop_signal(fail);
    init_logging();
    let a = match args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(u) => {
            fail(&u.0);
            return ExitCode::from(2);
        }
    };
    if a.help {
        print!("{}", args::HELP);
        return ExitCode::SUCCESS;
    }
    match run(a, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fail(&e.replace('\n', " "));
            ExitCode::from(1)
        }
    }
}

/// `tracing` lines on stderr, filtered by `RUST_LOG` (default `info`).
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

async fn run(a: args::Args, stop: impl std::future::Future<Output = ()>) -> Result<(), String> {
    let mut p = match &a.command_config {
        Some(f) => Properties::load(f).map_err(|e| e.to_string())?,
        None => Properties::new(),
    };
    if let Some(b) = &a.bootstrap {
        p.set("bootstrap.servers", b.clone());
    }
    let groups = match (&a.pattern, a.groups.is_empty()) {
        // Checked by `args::parse` (a bad pattern is bad usage).
        (Some(pat), _) => GroupFilter::pattern(pat).map_err(|e| e.to_string())?,
        (None, false) => GroupFilter::List(a.groups.clone()),
        (None, true) => GroupFilter::All,
    };
    let mut config = ExporterConfig::default();
    config.groups = groups;
    config.refresh_interval = a.refresh_interval;
    config.max_in_flight = a.max_in_flight;
    config.offsets_in_flight_per_coordinator = a.offsets_in_flight;
    config.request_timeout = a.request_timeout;
    let bootstrap = p.get("bootstrap.servers").unwrap_or_default().to_string();
    tracing::info!(
        bootstrap = %bootstrap,
        groups = %describe_filter(&config.groups),
        refresh_interval = ?config.refresh_interval,
        "kafka-share-exporter {} starting",
        env!("CARGO_PKG_VERSION")
    );
    // Connects in the background: a cluster not reachable yet is retried while /metrics
    // serves the errors, rather than an exit into a restart loop.
    let exporter = Exporter::connect(&p, config).map_err(|e| e.to_string())?;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exporter.collector()));
    let endpoint = serve(a.listen.as_str(), Arc::new(registry)).await.map_err(|e| e.to_string())?;
    say(&format!("metrics: http://{}/metrics", endpoint.local_addr()));
    let scaler = match &a.scaler_listen {
        Some(addr) => {
            let s = serve_scaler(addr, Scaler::new(exporter.subscribe())).await.map_err(|e| e.to_string())?;
            say(&format!("scaler: {}", s.local_addr()));
            Some(s)
        }
        None => None,
    };
    stop.await;
    drop(scaler);
    drop(endpoint);
    drop(exporter);
    Ok(())
}

/// The groups exported, for the start line.
fn describe_filter(f: &GroupFilter) -> String {
    match f {
        GroupFilter::Pattern(r) => format!("matching {}", r.as_str()),
        GroupFilter::List(l) => format!("{} named", l.len()),
        _ => "all".to_string(),
    }
}
