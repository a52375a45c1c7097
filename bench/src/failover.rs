//! Our side of `scripts/bench failover`: a broker is killed under one explicit-mode share
//! consumer, and the consumer writes down everything it saw, for the script to measure.
//!
//! ```text
//! cargo run --release -p kafka-share-bench -- failover setup --bootstrap B --topic T --group G
//!       --records N [--partitions 6] [--size 100]
//! cargo run --release -p kafka-share-bench -- failover consume --bootstrap B --topic T --group G
//!       --records N --events FILE [--signal-at 20000 --signal-file FILE] [--timeout-s 180]
//! cargo run --release -p kafka-share-bench -- failover cleanup --bootstrap B [--topic T ...] [--group G ...]
//! ```
//!
//! `setup` creates the topic (replication factor 3, `min.insync.replicas=2`), writes N records
//! round-robin over its partitions, sets `share.auto.offset.reset=earliest` on the group and
//! prints one line `PLAN {json}`: the leader of every partition and the group's coordinator
//! (the script kills a leader that is not the coordinator).
//!
//! `consume` is the loop the scenario asks for, the same as `peers/java` `bench.FailoverBench`:
//! poll (100 ms), ACCEPT every record, `commit_sync` after every poll, until N distinct records
//! were accepted. Once `--signal-at` distinct records were accepted it creates
//! `--signal-file` (the script's cue to kill the broker). Every event goes to `--events`, one
//! line each, wall-clock milliseconds since the epoch (the script lines them up with the kill
//! and with the broker logs):
//!
//! ```text
//! S <ms>                                  before subscribe
//! D <ms> <partition> <offset> <count>     a record delivered (at the return of its poll)
//! F <ms> <partition> <offsets> <error>    the commit callback reported failed acknowledgements
//! C <ms> <partition> <error>              commit_sync reported a failed partition
//! E <ms> <distinct> <deliveries>          the end
//! ```

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_share::admin::{Admin, NewTopic};
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{Error, ShareConsumer, ShareConsumerConfig};

use crate::args::{Args, BoxError};
use crate::cli;

#[tokio::main]
pub async fn entry(raw: Vec<String>) {
    cli::traces_from_env();
    cli::exit_on_error("failover_bench: error: ", run(raw).await);
}

async fn run(raw: Vec<String>) -> Result<(), BoxError> {
    let args = Args::parse(raw.iter().skip(1).cloned())?;
    match raw.first().map(String::as_str) {
        Some("setup") => setup(&args).await,
        Some("consume") => consume(&args).await,
        Some("cleanup") => cli::cleanup(&args, "failover_bench").await,
        _ => Err("usage: kafka-share-bench failover setup|consume|cleanup --bootstrap B ...".into()),
    }
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64() * 1e3).unwrap_or(0.0)
}

async fn setup(a: &Args) -> Result<(), BoxError> {
    let bootstrap = a.req("bootstrap")?;
    let topic = a.req("topic")?.to_string();
    let group = a.req("group")?;
    let n: u64 = a.num("records", 0)?;
    let partitions: i32 = a.num("partitions", 6)?;
    let size: usize = a.num("size", 100)?;

    let admin = Admin::connect_to(bootstrap).await?;
    let created = admin
        .create_topics(&[NewTopic::new(&topic, partitions).replication_factor(3).config("min.insync.replicas", "2")])
        .await?;
    for r in created {
        r?;
    }
    admin.set_share_auto_offset_reset(group, "earliest").await?;

    let producer = Producer::connect(ProducerConfig::new(bootstrap).client_id("failover-producer")).await?;
    let value = Bytes::from(vec![b'x'; size]);
    let mut pending = Vec::with_capacity(n as usize);
    for i in 0..n {
        let p = (i % partitions as u64) as i32;
        pending.push(producer.send(ProducerRecord::new(topic.clone(), value.clone()).partition(p)).await?);
    }
    producer.flush().await;
    for f in pending {
        f.await?;
    }
    producer.close(Duration::from_secs(30)).await?;

    // The leaders as the cluster reports them now (every broker up: the preferred ones).
    let leaders: Vec<String> = admin
        .describe_topic(&topic)
        .await?
        .partitions
        .iter()
        .map(|p| format!("\"{}\":{}", p.partition, p.leader.unwrap_or(-1)))
        .collect();
    let coordinator = admin.cluster().find_group_coordinator(group).await?;
    println!("PLAN {{\"leaders\":{{{}}},\"coordinator\":{coordinator},\"records\":{n}}}", leaders.join(","));
    Ok(())
}

/// The events file, shared with the commit callback.
type Events = Arc<Mutex<BufWriter<File>>>;

fn event(events: &Events, line: std::fmt::Arguments<'_>) {
    if let Ok(mut w) = events.lock() {
        let _ = w.write_fmt(line);
        let _ = w.write_all(b"\n");
    }
}

/// An error on one line (the events file is line-based).
fn one_line(e: &Error) -> String {
    e.to_string().replace(['\n', '\r'], " ")
}

async fn consume(a: &Args) -> Result<(), BoxError> {
    let topic = a.req("topic")?.to_string();
    let n: usize = a.num("records", 0)?;
    let signal_at: usize = a.num("signal-at", 0)?;
    let signal_file = a.get("signal-file").map(str::to_string);
    let timeout = Duration::from_secs(a.num("timeout-s", 180)?);
    let events: Events = Arc::new(Mutex::new(BufWriter::new(File::create(a.req("events")?)?)));

    let cfg = ShareConsumerConfig::new(a.req("bootstrap")?, a.req("group")?)
        .client_id("failover-bench")
        .acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = ShareConsumer::connect(cfg).await?;
    let ev = events.clone();
    c.set_acknowledgement_commit_callback(move |tp, offsets, r| {
        if let Err(e) = r {
            event(&ev, format_args!("F {:.3} {} {} {}", now_ms(), tp.partition, offsets.len(), one_line(e)));
        }
    })?;

    event(&events, format_args!("S {:.3}", now_ms()));
    c.subscribe([topic])?;
    let deadline = Instant::now() + timeout;
    let mut distinct: HashSet<(i32, i64)> = HashSet::with_capacity(n);
    let (mut deliveries, mut signalled) = (0usize, false);
    while distinct.len() < n && Instant::now() < deadline {
        let recs = match c.poll(Duration::from_millis(100)).await {
            Ok(r) => r,
            Err(e) if e.is_retriable() => continue,
            Err(e) => return Err(e.into()),
        };
        if recs.is_empty() {
            continue;
        }
        let t = now_ms();
        for r in &recs {
            event(&events, format_args!("D {t:.3} {} {} {}", r.partition, r.offset, r.delivery_count));
            c.acknowledge(r)?;
            distinct.insert((r.partition, r.offset));
        }
        deliveries += recs.len();
        match c.commit_sync(Duration::from_secs(60)).await {
            Ok(results) => {
                for (tp, r) in results.into_inner() {
                    if let Err(e) = r {
                        event(&events, format_args!("C {:.3} {} {}", now_ms(), tp.partition, one_line(&e)));
                    }
                }
            }
            Err(e) => event(&events, format_args!("C {:.3} -1 {}", now_ms(), one_line(&e))),
        }
        if !signalled && signal_at > 0 && distinct.len() >= signal_at {
            signalled = true;
            if let Some(f) = &signal_file {
                File::create(f)?;
            }
        }
    }
    event(&events, format_args!("E {:.3} {} {deliveries}", now_ms(), distinct.len()));
    if let Ok(mut w) = events.lock() {
        w.flush()?;
    }
    let _ = c.close(Duration::from_secs(10)).await;
    if let Ok(mut w) = events.lock() {
        w.flush()?;
    }
    println!("RESULT {{\"side\":\"ours\",\"distinct\":{},\"deliveries\":{deliveries}}}", distinct.len());
    if distinct.len() < n {
        return Err(format!("timed out after {timeout:?} with {} of {n} records", distinct.len()).into());
    }
    Ok(())
}
