//! One share consumer feeding many concurrent workers: each record of a poll is processed on
//! its own tokio task (at most 16 at a time), and the worker acknowledges its record itself.
//!
//! ```text
//! cargo run --example concurrent_workers -- [bootstrap] [topic]
//! ```
//!
//! The consumer's methods take `&self`, so workers share it through an `Arc`. In explicit
//! mode every record of a poll must be acknowledged before the next poll, so the poll loop
//! waits for the batch's workers before polling again. A worker RELEASEs its record on a
//! (simulated) retriable failure, so it comes back later, and REJECTs poison records.
//!
//! Bootstrap: argv[1], else env `KAFKA_BOOTSTRAP`, else 127.0.0.1:19092. Topic: argv[2], else
//! `kafka-share-demo`. Produces `DEMO_RECORDS` (default 100) jobs and consumes until each is
//! done or rejected (or 20 s pass).

use std::collections::{BTreeMap, HashSet};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_share::admin::Admin;
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{AcknowledgeType, ConsumerRecord, ShareConsumer, ShareConsumerConfig};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error>;

const DEADLINE: Duration = Duration::from_secs(20);
const WORKERS: usize = 16;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why a job failed.
enum Failure {
    /// Worth another try later (a timeout, a busy downstream service...).
    Retriable,
    /// Will never work.
    Poison,
}

/// The work: a few milliseconds each. Jobs whose id ends in 3 fail the first time they are
/// tried; `poison` values always fail.
async fn process(record: &ConsumerRecord) -> Result<(), Failure> {
    let value = record.value_str().unwrap_or_default();
    let id: u64 = value.strip_prefix("job-").and_then(|id| id.parse().ok()).ok_or(Failure::Poison)?;
    tokio::time::sleep(Duration::from_millis(5 + id % 20)).await;
    if id % 10 == 3 && record.delivery_count == 1 {
        return Err(Failure::Retriable);
    }
    Ok(())
}

async fn run() -> Result<(), BoxError> {
    let (bootstrap, topic, n) = args();
    let group = format!("{topic}-workers");
    setup(&bootstrap, &topic, &group, n).await?;

    let config = ShareConsumerConfig::new(&bootstrap, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = Arc::new(ShareConsumer::connect(config).await?);
    consumer.subscribe([topic.as_str()])?;

    let workers = Arc::new(Semaphore::new(WORKERS)); // at most WORKERS jobs run at once
    let busy = Arc::new(AtomicUsize::new(0)); // jobs running now, to show the concurrency
    let mut most_busy = 0;
    let start = Instant::now();
    let mut done = HashSet::new(); // (partition, offset) of records accepted or rejected
    let mut acks = BTreeMap::<AcknowledgeType, usize>::new();
    let mut by_delivery_count = BTreeMap::<i16, usize>::new();
    while done.len() < n && start.elapsed() < DEADLINE {
        let records = consumer.poll(Duration::from_secs(1)).await?;
        let mut batch = JoinSet::new();
        for record in records {
            *by_delivery_count.entry(record.delivery_count).or_default() += 1;
            let (consumer, workers, busy) = (consumer.clone(), workers.clone(), busy.clone());
            batch.spawn(async move {
                let _slot = workers.acquire_owned().await.expect("the semaphore is never closed");
                let running = busy.fetch_add(1, Ordering::Relaxed) + 1;
                let ack = match process(&record).await {
                    Ok(()) => AcknowledgeType::Accept,
                    Err(Failure::Retriable) => AcknowledgeType::Release, // deliver it again later
                    Err(Failure::Poison) => AcknowledgeType::Reject,     // never again
                };
                busy.fetch_sub(1, Ordering::Relaxed);
                // Acknowledging from the worker is fine: it only records the decision; the
                // next poll (or a commit) sends it to the broker.
                consumer.acknowledge_with(&record, ack)?;
                Ok::<_, kafka_share::Error>((record.partition, record.offset, ack, running))
            });
        }
        // Explicit mode: all of this poll's records must be acknowledged before the next poll.
        while let Some(joined) = batch.join_next().await {
            let (partition, offset, ack, running) = joined??;
            most_busy = most_busy.max(running);
            *acks.entry(ack).or_default() += 1;
            if ack != AcknowledgeType::Release {
                done.insert((partition, offset));
            }
        }
    }

    let elapsed = start.elapsed();

    // Send the last acknowledgements and wait for the answers, then leave the group.
    for (partition, result) in consumer.commit_sync(Duration::from_secs(10)).await? {
        result.map_err(|e| format!("acknowledging {partition} failed: {e}"))?;
    }
    consumer.close(Duration::from_secs(10)).await?;

    println!("received {} records from {topic} (group {group})", done.len());
    println!("up to {most_busy} of {WORKERS} workers busy at once, {:.2} s in all", elapsed.as_secs_f64());
    println!("acknowledgements: {acks:?}");
    println!("records by delivery count: {by_delivery_count:?}");
    if done.len() < n {
        return Err(format!("only {} of {n} records were finished within {DEADLINE:?}", done.len()).into());
    }
    Ok(())
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
/// produces `n` jobs, one in twenty-five of them poison.
async fn setup(bootstrap: &str, topic: &str, group: &str, n: usize) -> Result<(), BoxError> {
    let admin = Admin::connect_to(bootstrap).await?;
    admin.create_topic(topic, 3).await?; // "already exists" counts as success
                                         // A new share group starts at the *latest* offset by default; read what is there.
    admin.set_share_auto_offset_reset(group, "earliest").await?;

    let producer = Producer::connect(ProducerConfig::new(bootstrap)).await?;
    let mut deliveries = Vec::with_capacity(n);
    for i in 0..n {
        let value = if i % 25 == 24 { "poison".to_string() } else { format!("job-{i}") };
        deliveries.push(producer.send(ProducerRecord::new(topic, value).key(format!("key-{i}"))).await?);
    }
    for delivery in deliveries {
        delivery.await?;
    }
    producer.close(Duration::from_secs(10)).await?;
    Ok(())
}
