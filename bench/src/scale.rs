//! Our side of `scripts/bench scale`: how the cost of share consumers grows with partitions and
//! with consumers per process.
//!
//! ```text
//! cargo run --release -p kafka-share-bench -- scale drain --bootstrap B --topic T --group G
//!       --records N [--idle-s 10] [--timeout-s 300]
//! cargo run --release -p kafka-share-bench -- scale idle --bootstrap B --topic T --group G
//!       [--consumers 1] [--idle-s 10] [--settle-s 2] [--timeout-s 120]
//! ```
//!
//! `drain`: one consumer (implicit acknowledgement) reads N records, confirms them with
//! `commit_sync`, then keeps polling an empty topic for `--idle-s` seconds, as an application
//! waiting for work would. `idle`: N consumers in this process join one share group and poll
//! for `--idle-s` seconds; nothing is produced meanwhile.
//!
//! Both print one line `RESULT {json}`. The process measures itself from /proc/self (CPU
//! user+sys, resident set, peak resident set, open sockets), so a phase can be told from the
//! start-up (the idle windows' CPU from the threads' schedstat, in nanoseconds); requests are counted at the wire: a tracing layer counts the connection task's
//! `send` events (one per request written, every API), by API name, and the bytes of its
//! `send` and `recv` events.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_share::consumer::COORDINATOR;
use kafka_share::{ShareConsumer, ShareConsumerConfig};
use tracing::field::{Field, Visit};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use crate::args::{Args, BoxError};
use crate::cli;

#[tokio::main]
pub async fn entry(raw: Vec<String>) {
    let requests = Requests::default();
    // Only the connection module's trace events reach the layer: the rest of the client stays
    // as quiet (and as cheap) as in an application without a subscriber.
    let filter = Targets::new().with_target("kafka_share::connection", tracing::Level::TRACE);
    tracing_subscriber::registry().with(requests.clone().with_filter(filter)).init();
    cli::exit_on_error("scale_bench: error: ", run(raw, requests).await);
}

async fn run(raw: Vec<String>, requests: Requests) -> Result<(), BoxError> {
    let Some(cmd) = raw.first() else {
        return Err("usage: kafka-share-bench scale drain|idle --bootstrap B --topic T --group G ...".into());
    };
    let args = Args::parse(raw[1..].iter().cloned())?;
    match cmd.as_str() {
        "drain" => drain(&args, &requests).await,
        "idle" => idle(&args, &requests).await,
        other => Err(format!("unknown subcommand {other:?}: use drain or idle").into()),
    }
}

/// Requests written to brokers, by API name (the `api` field of the connection's `send`), and
/// the bytes of requests and responses (keys `>bytes`, `<bytes`: no API name starts so).
#[derive(Clone, Default)]
struct Requests(Arc<Mutex<BTreeMap<String, u64>>>);

const BYTES_OUT: &str = ">bytes";
const BYTES_IN: &str = "<bytes";

impl Requests {
    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Bytes sent and received since `before`.
    fn bytes_since(&self, before: &BTreeMap<String, u64>) -> (u64, u64) {
        let now = self.snapshot();
        let d = |k: &str| now.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
        (d(BYTES_OUT), d(BYTES_IN))
    }

    /// Requests since `before`, by API, as a JSON object, and their total.
    fn since(&self, before: &BTreeMap<String, u64>) -> (String, u64) {
        let now = self.snapshot();
        let mut total = 0;
        let mut parts = Vec::new();
        for (api, n) in now.iter().filter(|(k, _)| !k.ends_with("bytes")) {
            let d = n - before.get(api).copied().unwrap_or(0);
            if d > 0 {
                total += d;
                parts.push(format!("\"{api}\":{d}"));
            }
        }
        (format!("{{{}}}", parts.join(",")), total)
    }
}

/// The fields of one connection event that matter here: "send" or "recv", its API, its bytes.
#[derive(Default)]
struct SendEvent {
    message: String,
    api: Option<String>,
    bytes: u64,
}

impl Visit for SendEvent {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "bytes" {
            self.bytes = value;
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "bytes" {
            self.bytes = value.max(0) as u64;
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "api" {
            self.api = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "api" => self.api = Some(format!("{value:?}").trim_matches('"').to_string()),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Requests {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut v = SendEvent::default();
        event.record(&mut v);
        let Ok(mut m) = self.0.lock() else { return };
        match v.message.as_str() {
            "send" => {
                *m.entry(v.api.unwrap_or_else(|| "?".into())).or_default() += 1;
                *m.entry(BYTES_OUT.into()).or_default() += v.bytes;
            }
            "recv" => *m.entry(BYTES_IN.into()).or_default() += v.bytes,
            _ => {}
        }
    }
}

/// The process as /proc/self shows it at one moment.
struct Proc {
    cpu_s: f64,
    rss_kb: u64,
    hwm_kb: u64,
    sockets: u64,
}

impl Proc {
    fn now() -> Proc {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name (which may hold spaces, hence the last ')'): utime and
        // stime are the 12th and 13th, in clock ticks of all threads; USER_HZ is 100 on Linux.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
        let cpu_s = (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0;
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let sockets = std::fs::read_dir("/proc/self/fd")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:")))
                    .count() as u64
            })
            .unwrap_or(0);
        Proc { cpu_s, rss_kb: kb("VmRSS:"), hwm_kb: kb("VmHWM:"), sockets }
    }
}

/// Nanoseconds each thread of the process has run (/proc/self/task/*/schedstat), by thread
/// id: finer than the 10 ms ticks of /proc/self/stat, which an idle window of a few seconds
/// needs.
fn thread_cpu_ns() -> BTreeMap<String, u64> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return BTreeMap::new() };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| {
            let s = std::fs::read_to_string(e.path().join("schedstat")).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), s.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

/// CPU seconds the process ran since `before` (a `thread_cpu_ns`): threads started since count
/// in full; a thread that ended in between loses its share (the runtime's workers live as long
/// as the process, so this is at most a blocking-pool thread's).
fn cpu_since(before: &BTreeMap<String, u64>) -> f64 {
    let ns: u64 = thread_cpu_ns().iter().map(|(t, n)| n.saturating_sub(before.get(t).copied().unwrap_or(0))).sum();
    ns as f64 / 1e9
}

fn config(a: &Args, client_id: String) -> Result<ShareConsumerConfig, BoxError> {
    Ok(ShareConsumerConfig::new(a.req("bootstrap")?, a.req("group")?).client_id(client_id))
}

async fn drain(a: &Args, requests: &Requests) -> Result<(), BoxError> {
    let topic = a.req("topic")?.to_string();
    let n: u64 = a.num("records", 0)?;
    let idle_s: f64 = a.num("idle-s", 10.0)?;
    let timeout = Duration::from_secs(a.num("timeout-s", 300)?);
    // Sockets the process holds before the client (inherited ones, the runtime's).
    let base_sockets = Proc::now().sockets;
    let c = ShareConsumer::connect(config(a, "scale-drain".into())?).await?;

    let start = Instant::now();
    let deadline = start + timeout;
    c.subscribe([topic])?;
    let (mut got, mut first_s) = (0u64, None::<f64>);
    while got < n && Instant::now() < deadline {
        let recs = c.poll(Duration::from_millis(100)).await?;
        if !recs.is_empty() {
            first_s.get_or_insert(start.elapsed().as_secs_f64());
        }
        got += recs.len() as u64;
    }
    let results = c.commit_sync(Duration::from_secs(30)).await?;
    if let Some((tp, Err(e))) = results.iter().find(|(_, r)| r.is_err()) {
        return Err(format!("acknowledgement of {tp} failed: {e}").into());
    }
    let drain_s = start.elapsed().as_secs_f64();
    let drained = Proc::now();
    if got < n {
        return Err(format!("timed out after {timeout:?} with {got} of {n} records").into());
    }

    // Idle: the application keeps polling (1 s at a time) a topic with nothing left.
    let before = requests.snapshot();
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    let mut late = 0u64;
    while t0.elapsed().as_secs_f64() < idle_s {
        late += c.poll(Duration::from_secs(1)).await?.len() as u64;
    }
    let idle_wall = t0.elapsed().as_secs_f64();
    let idle_cpu = cpu_since(&cpu0);
    let after = Proc::now();
    let (by_api, total) = requests.since(&before);
    let (out, inn) = requests.bytes_since(&before);
    let _ = c.close(Duration::from_secs(5)).await;
    println!(
        "RESULT {{\"records\":{got},\"first_s\":{:.4},\"drain_s\":{drain_s:.4},\"cpu_drain_s\":{:.2},\
         \"hwm_kb\":{},\"idle_s\":{idle_wall:.3},\"idle_cpu_s\":{idle_cpu:.4},\"idle_requests\":{total},\
         \"idle_by_api\":{by_api},\"idle_bytes_out\":{out},\"idle_bytes_in\":{inn},\"idle_rss_kb\":{},\
         \"base_sockets\":{base_sockets},\"sockets\":{},\"late_records\":{late}}}",
        first_s.unwrap_or(-1.0),
        drained.cpu_s,
        drained.hwm_kb,
        after.rss_kb,
        after.sockets,
    );
    Ok(())
}

async fn idle(a: &Args, requests: &Requests) -> Result<(), BoxError> {
    let topic = a.req("topic")?.to_string();
    let k: usize = a.num("consumers", 1)?;
    let idle_s: f64 = a.num("idle-s", 10.0)?;
    let settle = Duration::from_secs_f64(a.num("settle-s", 2.0)?);
    let timeout = Duration::from_secs(a.num("timeout-s", 120)?);
    let base = Proc::now();

    let start = Instant::now();
    let mut consumers = Vec::with_capacity(k);
    for i in 0..k {
        let c = Arc::new(ShareConsumer::connect(config(a, format!("scale-idle-{i}"))?).await?);
        c.subscribe([topic.clone()])?;
        consumers.push(c);
    }
    // Every consumer polls in its own task, 1 s at a time, as an application would.
    let stop = Arc::new(AtomicBool::new(false));
    let records = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(k);
    for c in &consumers {
        let (c, stop, records) = (c.clone(), stop.clone(), records.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                records.fetch_add(c.poll(Duration::from_secs(1)).await?.len() as u64, Ordering::Relaxed);
            }
            Ok::<(), kafka_share::Error>(())
        }));
    }
    // Joined: the coordinator answered a second heartbeat of every member (the first one
    // only makes the member; the second carries its assignment, empty or not).
    let joined = || consumers.iter().all(|c| c.metrics().get(COORDINATOR, "heartbeat-total").unwrap_or(0.0) >= 2.0);
    while !joined() {
        if start.elapsed() > timeout {
            stop.store(true, Ordering::Relaxed);
            return Err(format!("{k} consumers did not all join within {timeout:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let join_s = start.elapsed().as_secs_f64();
    tokio::time::sleep(settle).await;

    let before_req = requests.snapshot();
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(idle_s)).await;
    let idle_wall = t0.elapsed().as_secs_f64();
    let idle_cpu = cpu_since(&cpu0);
    let after = Proc::now();
    let (by_api, total) = requests.since(&before_req);
    let (out, inn) = requests.bytes_since(&before_req);

    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    for c in &consumers {
        let _ = c.close(Duration::from_secs(5)).await;
    }
    println!(
        "RESULT {{\"consumers\":{k},\"join_s\":{join_s:.3},\"base_rss_kb\":{},\"rss_kb\":{},\"hwm_kb\":{},\
         \"base_sockets\":{},\"sockets\":{},\"idle_s\":{idle_wall:.3},\"idle_cpu_s\":{idle_cpu:.4},\
         \"idle_requests\":{total},\"idle_by_api\":{by_api},\"idle_bytes_out\":{out},\"idle_bytes_in\":{inn},\
         \"records\":{}}}",
        base.rss_kb,
        after.rss_kb,
        after.hwm_kb,
        base.sockets,
        after.sockets,
        records.load(Ordering::Relaxed),
    );
    Ok(())
}
