//! Produces N records of 100 bytes and prints the rate.
//!
//! ```text
//! cargo run --release --example produce -- <bootstrap> <topic> <count> [key=value ...]
//! cargo run --release --example produce -- 127.0.0.1:19092 bench 2000000 compression.type=lz4
//! ```
//!
//! Creates the topic (env `PARTITIONS`, default 3) if it is missing. Extra arguments are
//! producer properties by their Java names; the defaults here are tuned for throughput
//! (`batch.size=262144`, `linger.ms=10`). Every record's delivery is checked.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_share::admin::Admin;
use kafka_share::config::Properties;
use kafka_share::producer::{DeliveryFuture, Producer, ProducerRecord};

/// Deliveries are checked this many records behind the send loop, so the check costs no
/// waiting and no memory for millions of futures.
const CHECK_WINDOW: usize = 200_000;

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        return Err("usage: produce <bootstrap> <topic> <count> [key=value ...]".into());
    }
    let (bootstrap, topic) = (args[0].clone(), args[1].clone());
    let count: u64 = args[2].parse().map_err(|_| format!("count {:?} is not a number", args[2]))?;
    let partitions: i32 = std::env::var("PARTITIONS").ok().and_then(|p| p.parse().ok()).unwrap_or(3);

    let admin = Admin::connect_to(&bootstrap).await?;
    admin.create_topic(&topic, partitions).await?;

    let mut props = Properties::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("batch.size", "262144"),
        ("linger.ms", "10"),
    ]);
    for kv in &args[3..] {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("{kv:?} is not key=value"))?;
        props.set(k, v);
    }
    let producer = Producer::from_properties(&props).await?;
    let value = Bytes::from(vec![b'x'; 100]);

    let start = Instant::now();
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::with_capacity(CHECK_WINDOW + 1);
    let mut failed = 0u64;
    let mut first_error = None;
    let mut check = |r: kafka_share::Result<_>| {
        if let Err(e) = r {
            failed += 1;
            first_error.get_or_insert(e);
        }
    };
    for _ in 0..count {
        pending.push_back(producer.send(ProducerRecord::new(topic.clone(), value.clone())).await?);
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
    let elapsed = start.elapsed();
    producer.close(Duration::from_secs(30)).await?;

    let secs = elapsed.as_secs_f64();
    println!(
        "produced {} records of 100 bytes to {topic} in {secs:.2} s: {:.0} records/s, {:.1} MB/s (values)",
        count - failed,
        count as f64 / secs,
        count as f64 * 100.0 / secs / 1e6
    );
    match first_error {
        Some(e) => Err(format!("{failed} records failed; the first: {e}").into()),
        None => Ok(()),
    }
}
