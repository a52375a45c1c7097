//! Our side of `scripts/bench peers`: produce the benchmark topic, prepare share groups,
//! consume until every record is acknowledged, and measure end-to-end latency.
//!
//! ```text
//! cargo run --release -p kafka-share-bench -- produce --bootstrap B --topic T --records N
//!       [--size 100] [--partitions 4] [--rate R] [--linger-ms 10] [--batch-size 262144]
//!       [--values x|json]
//! cargo run --release -p kafka-share-bench -- group --bootstrap B --group G [--group G2 ...]
//! cargo run --release -p kafka-share-bench -- consume --bootstrap B --topic T --group G
//!     [--command-config client.properties]   (security settings; needs --features tls for SSL)
//!       --records N [--mode implicit|explicit] [--consumers 1] [--max-poll-records 500]
//!       [--timeout-s 300] [--shared-count DIR --process I]
//! cargo run --release -p kafka-share-bench -- latency --bootstrap B --topic T --group G
//!       --records N [--warmup-ms 5000] [--timeout-s 120]
//! cargo run --release -p kafka-share-bench -- cleanup --bootstrap B --topic T [--topic T2 ...]
//!       [--group G ...]
//! ```
//!
//! `consume` times from just before `subscribe` (the consumers are already connected) to
//! the moment `commit_sync` confirms the acknowledgement of the last record, and prints one
//! line `RESULT {json}` with `records`, `bytes` (keys + values) and `elapsed_s`.
//! With `--shared-count DIR --process I`, several processes share the topic's count: each
//! writes its own to `DIR/count-I` and stops when the counts in `DIR` add up to N (then
//! `records` is its own part, and `start_ms` says when its clock started, for the harness
//! that adds the processes up: `bench/lib/multi.sh`).
//! `latency` acknowledges every record explicitly (ACCEPT) and prints `LATENCY {json}` with
//! p50/p99/max of (wall clock at poll return - record timestamp), in milliseconds, over the
//! records produced after the warm-up.
//! `produce --rate R` sends at a fixed rate (records/s) with `linger.ms=0`; without it, as
//! fast as it can with large batches. Every delivery is checked. `--values json` writes JSON
//! objects of about `--size` bytes instead of `x` repeated (record n:
//! `{"id":n,"name":"customer-n","amount":m.25,"tag":"tk","note":"xx.."}`, the note padding it
//! to the size): the content of `scripts/bench sink`'s json-transforms case.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_share::admin::Admin;
use kafka_share::consumer::{AcknowledgementMode, CONSUMER, FETCH_MANAGER};
use kafka_share::producer::{DeliveryFuture, Producer, ProducerConfig, ProducerRecord};
use kafka_share::{ShareConsumer, ShareConsumerConfig};

use crate::args::{Args, BoxError};
use crate::cli;

#[tokio::main]
pub async fn entry(raw: Vec<String>) {
    cli::traces_from_env();
    cli::exit_on_error("bench_consumer: error: ", run(raw).await);
}

async fn run(raw: Vec<String>) -> Result<(), BoxError> {
    let Some(cmd) = raw.first() else {
        return Err("usage: bench_consumer produce|group|consume|latency|cleanup --bootstrap B ...".into());
    };
    let args = Args::parse(raw[1..].iter().cloned())?;
    match cmd.as_str() {
        "produce" => produce(&args).await,
        "group" => group(&args).await,
        "consume" => consume(&args).await,
        "latency" => latency(&args).await,
        "cleanup" => cli::cleanup(&args, "bench_consumer").await,
        other => Err(format!("unknown subcommand {other:?}: use produce, group, consume, latency or cleanup").into()),
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Deliveries are checked this many records behind the send loop.
const CHECK_WINDOW: usize = 200_000;

async fn produce(a: &Args) -> Result<(), BoxError> {
    let bootstrap = a.req("bootstrap")?;
    let topic = a.req("topic")?.to_string();
    let count: u64 = a.num("records", 0)?;
    let size: usize = a.num("size", 100)?;
    let partitions: i32 = a.num("partitions", 4)?;
    let rate: f64 = a.num("rate", 0.0)?;

    let admin = Admin::connect_to(bootstrap).await?;
    admin.create_topic(&topic, partitions).await?;

    let paced = rate > 0.0;
    let cfg = ProducerConfig::new(bootstrap)
        .client_id("bench-producer")
        .batch_size(a.num("batch-size", if paced { 16_384 } else { 262_144 })?)
        .linger(Duration::from_millis(a.num("linger-ms", if paced { 0 } else { 10 })?))
        .buffer_memory(64 << 20);
    let producer = Producer::connect(cfg).await?;
    let json = match a.get("values").unwrap_or("x") {
        "x" => false,
        "json" => true,
        other => return Err(format!("--values {other:?}: use x or json").into()),
    };
    let value = Bytes::from(vec![b'x'; size]);

    let start = Instant::now();
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::with_capacity(CHECK_WINDOW + 1);
    let (mut failed, mut first_error) = (0u64, None);
    let mut check = |r: kafka_share::Result<_>| {
        if let Err(e) = r {
            failed += 1;
            first_error.get_or_insert(e);
        }
    };
    for i in 0..count {
        if paced {
            // Send record i at start + i/rate; sleep in ~1 ms steps so the rate stays even.
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            let now = Instant::now();
            if due > now + Duration::from_micros(500) {
                tokio::time::sleep(due - now).await;
            }
        }
        let v = if json { json_value(i, size) } else { value.clone() };
        pending.push_back(producer.send(ProducerRecord::new(topic.clone(), v)).await?);
        if pending.len() > CHECK_WINDOW {
            if let Some(f) = pending.pop_front() {
                check(f.await);
            }
        }
    }
    producer.flush().await;
    for f in pending {
        check(f.await);
    }
    let secs = start.elapsed().as_secs_f64();
    producer.close(Duration::from_secs(30)).await?;
    eprintln!(
        "bench_consumer: produced {} records of {size} bytes to {topic} ({partitions} partitions) in {secs:.2} s: {:.0} records/s",
        count - failed,
        count as f64 / secs
    );
    match first_error {
        Some(e) => Err(format!("{failed} records failed; the first: {e}").into()),
        None => Ok(()),
    }
}

/// Record `i`'s JSON value, padded by its `note` to `size` bytes when it is shorter.
fn json_value(i: u64, size: usize) -> Bytes {
    let head = format!(r#"{{"id":{i},"name":"customer-{i}","amount":{}.25,"tag":"t{}","note":""#, i % 10_000, i % 7);
    let pad = size.saturating_sub(head.len() + 2);
    let mut v = Vec::with_capacity(head.len() + pad + 2);
    v.extend_from_slice(head.as_bytes());
    v.resize(head.len() + pad, b'x');
    v.extend_from_slice(b"\"}");
    Bytes::from(v)
}

async fn group(a: &Args) -> Result<(), BoxError> {
    let admin = Admin::connect_to(a.req("bootstrap")?).await?;
    let groups = a.all("group");
    if groups.is_empty() {
        return Err("--group is required".into());
    }
    for g in groups {
        admin.set_share_auto_offset_reset(g, "earliest").await?;
        // `--config key=value` (repeatable): more group settings for the run, e.g.
        // share.partition.max.record.locks for the lock-budget grid (scripts/bench grid).
        for kv in a.all("config") {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("--config {kv}: use key=value"))?;
            admin.set_group_config(g, k, v).await?;
        }
    }
    Ok(())
}

fn consumer_config(a: &Args, explicit: bool, client_id: String) -> Result<ShareConsumerConfig, BoxError> {
    let mode = if explicit { AcknowledgementMode::Explicit } else { AcknowledgementMode::Implicit };
    let mut cfg = ShareConsumerConfig::new(a.req("bootstrap")?, a.req("group")?)
        .client_id(client_id)
        .acknowledgement_mode(mode)
        .max_poll_records(a.num("max-poll-records", 500)?);
    // --command-config FILE: security settings (and the bootstrap) from a client file, e.g.
    // scripts/kafka's sasl_ssl-plain.properties for the SASL_SSL rows of bench-peers.
    if let Some(file) = a.get("command-config") {
        let p = kafka_share::config::Properties::load(file)?;
        cfg.cluster.security = kafka_share::security::SecurityConfig::from_properties(&p)?;
        if let Some(b) = p.get("bootstrap.servers") {
            cfg.cluster.bootstrap_servers = b.split(',').map(|s| s.trim().to_string()).collect();
        }
    }
    Ok(cfg)
}

fn rec_bytes(r: &kafka_share::ConsumerRecord) -> u64 {
    (r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len())) as u64
}

async fn consume(a: &Args) -> Result<(), BoxError> {
    let topic = a.req("topic")?.to_string();
    let n: u64 = a.num("records", 0)?;
    let k: usize = a.num("consumers", 1)?;
    let explicit = match a.get("mode").unwrap_or("implicit") {
        "implicit" => false,
        "explicit" => true,
        m => return Err(format!("--mode {m:?}: use implicit or explicit").into()),
    };
    let timeout = Duration::from_secs(a.num("timeout-s", 300)?);
    let shared = match a.get("shared-count") {
        Some(dir) => Some(SharedCount::new(dir.into(), a.num("process", 0)?)),
        None => None,
    };

    let mut consumers = Vec::with_capacity(k);
    for i in 0..k {
        consumers.push(Arc::new(ShareConsumer::connect(consumer_config(a, explicit, format!("bench-{i}"))?).await?));
    }
    let total = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    // Nanoseconds from start to the first record any consumer got (0: none yet).
    let first = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let start_ms = now_ms();
    let deadline = start + timeout;
    // The whole group's count when other processes share the topic: ours plus theirs, from
    // their files, refreshed every 20 ms (one stat and a few small reads).
    let group = Arc::new(AtomicU64::new(0));
    let watcher = shared.map(|sc| {
        let (total, group) = (total.clone(), group.clone());
        tokio::spawn(async move {
            loop {
                let others = sc.publish_and_sum(total.load(Ordering::Relaxed));
                group.store(others, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });
    let mut tasks = Vec::with_capacity(k);
    for c in &consumers {
        let (c, total, bytes, first, topic) = (c.clone(), total.clone(), bytes.clone(), first.clone(), topic.clone());
        let group = group.clone();
        tasks.push(tokio::spawn(async move {
            c.subscribe([topic])?;
            let mut mine = 0u64;
            let seen = || total.load(Ordering::Relaxed).max(group.load(Ordering::Relaxed));
            while seen() < n && Instant::now() < deadline {
                let recs = c.poll(Duration::from_millis(100)).await?;
                if recs.is_empty() {
                    continue;
                }
                let _ =
                    first.compare_exchange(0, start.elapsed().as_nanos() as u64, Ordering::Relaxed, Ordering::Relaxed);
                let mut b = 0;
                for r in &recs {
                    b += rec_bytes(r);
                    if explicit {
                        c.acknowledge(r)?;
                    }
                }
                mine += recs.len() as u64;
                bytes.fetch_add(b, Ordering::Relaxed);
                total.fetch_add(recs.len() as u64, Ordering::Relaxed);
            }
            // Sends what the last poll left (and, implicit, accepts it) and waits for it.
            let results = c.commit_sync(Duration::from_secs(30)).await?;
            if let Some((tp, Err(e))) = results.iter().find(|(_, r)| r.is_err()) {
                return Err(format!("acknowledgement of {tp} failed: {e}").into());
            }
            Ok::<u64, BoxError>(mine)
        }));
    }
    let mut per = Vec::with_capacity(k);
    for t in tasks {
        per.push(t.await??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    if let Some(w) = watcher {
        w.abort();
    }
    // Where the time went, from the client's own metrics (summed over consumers).
    let (mut fetches, mut lat_sum, mut lat_max, mut polls) = (0.0, 0.0, 0.0f64, 0.0);
    for c in &consumers {
        let m = c.metrics();
        let f = m.get(FETCH_MANAGER, "fetch-total").unwrap_or(0.0);
        fetches += f;
        lat_sum += f * m.get(FETCH_MANAGER, "fetch-latency-avg").unwrap_or(0.0);
        lat_max = lat_max.max(m.get(FETCH_MANAGER, "fetch-latency-max").unwrap_or(0.0));
        polls += m.get(CONSUMER, "poll-total").unwrap_or(0.0);
    }
    eprintln!(
        "bench_consumer: {fetches} ShareFetch requests ({:.0} records each), latency avg {:.2} ms max {lat_max:.1} ms, {polls} polls",
        total.load(Ordering::Relaxed) as f64 / fetches.max(1.0),
        lat_sum / fetches.max(1.0)
    );
    for c in &consumers {
        let _ = c.close(Duration::from_secs(5)).await;
    }
    let got = total.load(Ordering::Relaxed);
    println!(
        "RESULT {{\"records\":{got},\"bytes\":{},\"elapsed_s\":{elapsed:.4},\"first_s\":{:.4},\"per_consumer\":{per:?},\"start_ms\":{start_ms}}}",
        bytes.load(Ordering::Relaxed),
        first.load(Ordering::Relaxed) as f64 / 1e9
    );
    if got.max(group.load(Ordering::Relaxed)) < n {
        return Err(format!("timed out after {timeout:?} with {got} of {n} records").into());
    }
    Ok(())
}

async fn latency(a: &Args) -> Result<(), BoxError> {
    let topic = a.req("topic")?.to_string();
    let n: u64 = a.num("records", 0)?;
    let warmup: i64 = a.num("warmup-ms", 5000)?;
    let timeout = Duration::from_secs(a.num("timeout-s", 120)?);
    let c = ShareConsumer::connect(consumer_config(a, true, "bench-latency".into())?).await?;
    c.subscribe([topic])?;
    println!("READY");
    let deadline = Instant::now() + timeout;
    let mut lat: Vec<i64> = Vec::with_capacity(n as usize);
    let (mut got, mut first_ts) = (0u64, None::<i64>);
    while got < n && Instant::now() < deadline {
        let recs = c.poll(Duration::from_millis(500)).await?;
        let now = now_ms();
        for r in &recs {
            let t0 = *first_ts.get_or_insert(r.timestamp);
            if r.timestamp >= t0 + warmup {
                lat.push(now - r.timestamp);
            }
            c.acknowledge(r)?;
        }
        got += recs.len() as u64;
    }
    let _ = c.commit_sync(Duration::from_secs(10)).await;
    let _ = c.close(Duration::from_secs(5)).await;
    lat.sort_unstable();
    let pct = |p: f64| lat.get(((lat.len() as f64 * p).ceil() as usize).saturating_sub(1)).copied().unwrap_or(-1);
    println!(
        "LATENCY {{\"records\":{got},\"measured\":{},\"p50_ms\":{},\"p99_ms\":{},\"max_ms\":{}}}",
        lat.len(),
        pct(0.50),
        pct(0.99),
        lat.last().copied().unwrap_or(-1)
    );
    if got < n {
        return Err(format!("timed out after {timeout:?} with {got} of {n} records").into());
    }
    Ok(())
}

/// The topic's count shared by several bench processes through a directory: each writes its
/// own to `count-<process>` (whole-file replace by rename, so a reader never sees half a
/// number) and reads everyone's.
struct SharedCount {
    dir: std::path::PathBuf,
    process: u64,
}

impl SharedCount {
    fn new(dir: std::path::PathBuf, process: u64) -> SharedCount {
        SharedCount { dir, process }
    }

    /// Writes `mine` and returns the sum over every process's file (ours included).
    fn publish_and_sum(&self, mine: u64) -> u64 {
        let tmp = self.dir.join(format!(".count-{}.tmp", self.process));
        if std::fs::write(&tmp, mine.to_string()).is_ok() {
            let _ = std::fs::rename(&tmp, self.dir.join(format!("count-{}", self.process)));
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return mine };
        let theirs: u64 = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("count-"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse::<u64>().ok())
            .sum();
        theirs.max(mine)
    }
}
