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
//! SIGTERM stops it. Exit codes: 0 clean stop, 1 cannot connect or listen, 2 bad usage.

#[path = "support/stop_signal.rs"]
mod stop_signal;
#[path = "support/usage.rs"]
mod usage;

#[path = "kafka_share_exporter/args.rs"]
mod args;

use std::process::ExitCode;
use std::sync::Arc;

use kafka_share::admin::Admin;
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

async fn run(a: args::Args, stop: impl std::future::Future<Output = ()>) -> Result<(), String> {
    let mut p = match &a.command_config {
        Some(f) => Properties::load(f).map_err(|e| e.to_string())?,
        None => Properties::new(),
    };
    if let Some(b) = &a.bootstrap {
        p.set("bootstrap.servers", b.clone());
    }
    let groups = match (&a.pattern, a.groups.is_empty()) {
        (Some(pat), _) => GroupFilter::pattern(pat).map_err(|e| e.to_string())?,
        (None, false) => GroupFilter::List(a.groups.clone()),
        (None, true) => GroupFilter::All,
    };
    let admin = Admin::from_properties(&p).await.map_err(|e| e.to_string())?;
    let mut config = ExporterConfig::default();
    config.groups = groups;
    config.refresh_interval = a.refresh_interval;
    config.max_in_flight = a.max_in_flight;
    config.offsets_in_flight_per_coordinator = a.offsets_in_flight;
    config.request_timeout = a.request_timeout;
    let exporter = Exporter::start(admin, config);
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
