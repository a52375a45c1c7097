//! The blocking share consumer, for programs without an async runtime: the classic
//! thread-per-consumer loop, stopped from another thread with `wakeup()`.
//!
//! ```text
//! cargo run --example blocking -- [bootstrap] [topic]
//! ```
//!
//! The consumer thread polls until `poll` returns `Error::Wakeup`, then accepts what it got
//! and closes. The main thread watches its progress and calls `wakeup()` once every demo
//! record has arrived (or 20 s have passed), as a shutdown hook would.
//!
//! Bootstrap: argv[1], else env `KAFKA_BOOTSTRAP`, else 127.0.0.1:19092. Topic: argv[2], else
//! `kafka-share-demo`. Produces `DEMO_RECORDS` (default 100) demo records first.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use kafka_share::admin::Admin;
use kafka_share::consumer::{blocking, ShareConsumerConfig};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::Error;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const DEADLINE: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), BoxError> {
    let (bootstrap, topic, n) = args();
    let group = format!("{topic}-blocking");
    // Admin and producer are async: run the setup on a throwaway runtime. The consumer
    // below needs none of ours (it runs its own background thread).
    tokio::runtime::Runtime::new()?.block_on(setup(&bootstrap, &topic, &group, n))?;

    let consumer = blocking::ShareConsumer::connect(ShareConsumerConfig::new(&bootstrap, &group))?;
    consumer.subscribe([topic.as_str()])?;
    let wakeup = consumer.wakeup_handle(); // cloneable, usable from any thread

    let (progress_tx, progress) = mpsc::channel();
    let consumer_thread = thread::spawn(move || consume(consumer, progress_tx));

    // Wait until the consumer has seen every record (or the deadline), then stop it.
    let deadline = Instant::now() + DEADLINE;
    let mut seen = 0;
    while seen < n {
        match progress.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(count) => seen = count,
            Err(_) => break, // deadline passed, or the consumer thread ended (with an error)
        }
    }
    wakeup.wakeup(); // the consumer's pending (or next) poll returns Error::Wakeup

    let by_delivery_count = consumer_thread.join().map_err(|_| "the consumer thread panicked")??;
    let received: usize = by_delivery_count.values().sum();
    println!("received {received} records from {topic} (group {group})");
    println!("records by delivery count: {by_delivery_count:?}");
    if received < n {
        return Err(format!("only {received} of {n} records arrived within {DEADLINE:?}").into());
    }
    Ok(())
}

/// The consumer thread: poll until woken up, then accept the last records and close.
/// Reports the running count on `progress`; returns the records by delivery count.
fn consume(consumer: blocking::ShareConsumer, progress: mpsc::Sender<usize>) -> Result<BTreeMap<i16, usize>, BoxError> {
    let mut received = 0;
    let mut by_delivery_count = BTreeMap::new();
    loop {
        // Implicit mode: this poll accepts the records the previous one returned.
        match consumer.poll(Duration::from_secs(1)) {
            Ok(records) => {
                for record in &records {
                    received += 1;
                    *by_delivery_count.entry(record.delivery_count).or_default() += 1;
                }
                let _ = progress.send(received);
            }
            Err(Error::Wakeup) => break,    // asked to stop
            Err(e) => return Err(e.into()), // dropping the consumer closes it
        }
    }
    // Accept the last poll's records (close alone would release them), then leave the group.
    for (partition, result) in consumer.commit_sync(Duration::from_secs(10))? {
        result.map_err(|e| format!("acknowledging {partition} failed: {e}"))?;
    }
    consumer.close(Duration::from_secs(10))?;
    Ok(by_delivery_count)
}

/// (bootstrap, topic, number of demo records) from argv and the environment.
fn args() -> (String, String, usize) {
    let mut argv = std::env::args().skip(1);
    let bootstrap = argv
        .next()
        .or_else(|| std::env::var("KAFKA_BOOTSTRAP").ok())
        .unwrap_or_else(|| "127.0.0.1:19092".into());
    let topic = argv.next().unwrap_or_else(|| "kafka-share-demo".into());
    let n = std::env::var("DEMO_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    (bootstrap, topic, n)
}

/// Creates the topic if it is missing, makes the group start from the earliest offset, and
/// produces `n` demo records.
async fn setup(bootstrap: &str, topic: &str, group: &str, n: usize) -> Result<(), BoxError> {
    let admin = Admin::connect_to(bootstrap).await?;
    admin.create_topic(topic, 3).await?; // "already exists" counts as success
                                         // A new share group starts at the *latest* offset by default; read what is there.
    admin.set_share_auto_offset_reset(group, "earliest").await?;

    let producer = Producer::connect(ProducerConfig::new(bootstrap)).await?;
    let mut deliveries = Vec::with_capacity(n);
    for i in 0..n {
        let record = ProducerRecord::new(topic, format!("order-{i}")).key(format!("customer-{i}"));
        deliveries.push(producer.send(record).await?);
    }
    for delivery in deliveries {
        delivery.await?;
    }
    producer.close(Duration::from_secs(10)).await?;
    Ok(())
}
