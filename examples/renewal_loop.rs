//! Processing that takes longer than the acquisition lock, kept alive with RENEW: the loop
//! of the Java 4.4 `KafkaShareConsumer` documentation ("Extending processing times using
//! renewal acknowledgement"), in Rust.
//!
//! ```text
//! cargo run --example renewal_loop -- [bootstrap] [topic]
//! ```
//!
//! Each record is processed on a task of its own. The loop waits for it up to half of what
//! is left of the record's lock (`lock_deadline`); then ACCEPT (done), REJECT (failed), or
//! RENEW (still working). A renewed
//! record comes back from the next poll with its lock extended (and while a renewal is
//! pending, poll hands out nothing else); the loop then waits for the same task again.
//!
//! The demo group locks records for 2 s; one record in 25 takes 3 s to process, so it is
//! renewed at least once and still delivered only once. Bootstrap: argv[1], else env
//! `KAFKA_BOOTSTRAP`, else 127.0.0.1:19092. Topic: argv[2], else `kafka-share-demo`. Produces
//! `DEMO_RECORDS` (default 100) records and consumes until each is done (or 30 s pass).

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kafka_share::admin::Admin;
use kafka_share::consumer::{AcknowledgementMode, AcquireMode};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{AcknowledgeType, ShareConsumer, ShareConsumerConfig};
use tokio::task::JoinHandle;

type BoxError = Box<dyn std::error::Error>;

const DEADLINE: Duration = Duration::from_secs(30);
const LOCK: Duration = Duration::from_secs(2);

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

/// The work: most records take 10 ms, one in 25 takes one and a half locks.
async fn process(value: String) -> Result<(), String> {
    let id: u64 = value.strip_prefix("job-").and_then(|i| i.parse().ok()).ok_or("not a job")?;
    let took = if id.is_multiple_of(25) { LOCK * 3 / 2 } else { Duration::from_millis(10) };
    tokio::time::sleep(took).await;
    Ok(())
}

async fn run() -> Result<(), BoxError> {
    let (bootstrap, topic, n) = args();
    let group = format!("{topic}-renewal");
    setup(&bootstrap, &topic, &group, n).await?;

    // One record at a time, so that a slow one holds up nothing else it was fetched with.
    let config = ShareConsumerConfig::new(&bootstrap, &group)
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .acquire_mode(AcquireMode::RecordLimit)
        .max_poll_records(1);
    let consumer = ShareConsumer::connect(config).await?;
    consumer.subscribe([topic.as_str()])?;

    let start = Instant::now();
    let mut processing: HashMap<(i32, i64), JoinHandle<Result<(), String>>> = HashMap::new();
    let (mut done, mut renewals) = (0usize, 0usize);
    let mut by_delivery_count = BTreeMap::<i16, usize>::new();
    while done < n && start.elapsed() < DEADLINE {
        for record in consumer.poll(Duration::from_secs(1)).await? {
            let key = (record.partition, record.offset);
            // Renew once half of what is left of this record's lock is gone: its deadline
            // counts from when the broker locked it (it may have waited in the buffer, or
            // been renewed), not from when poll returned it.
            let lock = consumer.acquisition_lock_timeout().unwrap_or(Duration::from_secs(10));
            let wait = record.lock_deadline().map_or(lock / 2, |d| d.saturating_duration_since(Instant::now()) / 2);
            let task = processing.entry(key).or_insert_with(|| {
                // First delivery (not a renewed one coming back): start the work.
                *by_delivery_count.entry(record.delivery_count).or_default() += 1;
                tokio::spawn(process(record.value_str().unwrap_or_default().to_string()))
            });
            match tokio::time::timeout(wait, task).await {
                Ok(outcome) => {
                    processing.remove(&key);
                    let ack = match outcome {
                        Ok(Ok(())) => AcknowledgeType::Accept,
                        _ => AcknowledgeType::Reject, // failed (or panicked): never again
                    };
                    consumer.acknowledge_with(&record, ack)?;
                    done += 1;
                }
                Err(_) => {
                    // Still working: keep the record ours for another lock.
                    consumer.acknowledge_with(&record, AcknowledgeType::Renew)?;
                    renewals += 1;
                }
            }
        }
    }
    for (partition, result) in consumer.commit_sync(Duration::from_secs(10)).await? {
        result.map_err(|e| format!("acknowledging {partition} failed: {e}"))?;
    }
    consumer.close(Duration::from_secs(10)).await?;

    println!("processed {done} records from {topic} (group {group}) in {:.1?}", start.elapsed());
    println!("renewals: {renewals}");
    println!("records by delivery count: {by_delivery_count:?}");
    if done < n {
        return Err(format!("only {done} of {n} records were processed within {DEADLINE:?}").into());
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

/// Creates the topic if it is missing, makes the group start from the earliest offset with a
/// 2 s acquisition lock, and produces `n` jobs.
async fn setup(bootstrap: &str, topic: &str, group: &str, n: usize) -> Result<(), BoxError> {
    let admin = Admin::connect_to(bootstrap).await?;
    admin.create_topic(topic, 1).await?; // "already exists" counts as success
    admin.set_share_auto_offset_reset(group, "earliest").await?;
    admin
        .set_group_config(group, "share.record.lock.duration.ms", &LOCK.as_millis().to_string())
        .await?;

    let producer = Producer::connect(ProducerConfig::new(bootstrap)).await?;
    let mut deliveries = Vec::with_capacity(n);
    for i in 0..n {
        deliveries.push(producer.send(ProducerRecord::new(topic, format!("job-{i}"))).await?);
    }
    for delivery in deliveries {
        delivery.await?;
    }
    producer.close(Duration::from_secs(10)).await?;
    Ok(())
}
