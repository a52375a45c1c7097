//! A share consumer in *explicit* acknowledgement mode: the application decides, record by
//! record, whether it is done (ACCEPT), should be tried again (RELEASE), or can never be
//! processed (REJECT). Every record of a poll must be acknowledged before the next poll.
//!
//! ```text
//! cargo run --example explicit -- [bootstrap] [topic]
//! ```
//!
//! What it shows:
//! - one order in ten is RELEASEd on its first delivery and comes back with delivery count 2;
//! - records whose value does not parse are REJECTed with `acknowledge_offset`, which needs
//!   only where the record is (as when a decoding layer reports a failure by position);
//! - `commit_async` sends each batch's acknowledgements without waiting, and an
//!   acknowledgement commit callback reports how they went.
//!
//! Bootstrap: argv[1], else env `KAFKA_BOOTSTRAP`, else 127.0.0.1:19092. Topic: argv[2], else
//! `kafka-share-demo`. Produces `DEMO_RECORDS` (default 100) records, one in fifty of them
//! unparseable, and consumes until each is accepted or rejected (or 20 s pass).

use std::collections::{BTreeMap, HashSet};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_share::admin::Admin;
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{AcknowledgeType, ConsumerRecord, ShareConsumer, ShareConsumerConfig};

type BoxError = Box<dyn std::error::Error>;

const DEADLINE: Duration = Duration::from_secs(20);

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

/// Our "deserializer": values are `order-<number>`.
fn parse_order(record: &ConsumerRecord) -> Result<u64, String> {
    let value = record.value_str().ok_or("value is not UTF-8")?;
    let id = value.strip_prefix("order-").ok_or_else(|| format!("{value:?} is not an order"))?;
    id.parse().map_err(|e| format!("bad order id {id:?}: {e}"))
}

async fn run() -> Result<(), BoxError> {
    let (bootstrap, topic, n) = args();
    let group = format!("{topic}-explicit");
    setup(&bootstrap, &topic, &group, n).await?;

    let config = ShareConsumerConfig::new(&bootstrap, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = ShareConsumer::connect(config).await?;
    consumer.subscribe([topic.as_str()])?;

    // Told of every acknowledgement the broker answered, inside our own poll and commit calls
    // (as in Java), so it may touch our state freely. A failure usually means the record's
    // lock had expired.
    let confirmed = Arc::new(AtomicUsize::new(0));
    let counter = confirmed.clone();
    consumer.set_acknowledgement_commit_callback(move |partition, offsets, result| match result {
        Ok(()) => {
            counter.fetch_add(offsets.len(), Ordering::Relaxed);
        }
        Err(e) => eprintln!("acknowledging {partition} offsets {offsets:?} failed: {e}"),
    })?;

    let start = Instant::now();
    let mut done = HashSet::new(); // (partition, offset) of records accepted or rejected
    let (mut accepted, mut released, mut rejected) = (0, 0, 0);
    let mut by_delivery_count = BTreeMap::<i16, usize>::new();
    while done.len() < n && start.elapsed() < DEADLINE {
        for record in consumer.poll(Duration::from_secs(1)).await? {
            *by_delivery_count.entry(record.delivery_count).or_default() += 1;
            match parse_order(&record) {
                Err(why) => {
                    // Unprocessable: REJECT it so it is never delivered again (archived, or
                    // sent to the group's dead-letter topic if one is configured).
                    println!("rejecting {}-{}@{}: {why}", record.topic, record.partition, record.offset);
                    consumer.acknowledge_offset(
                        &record.topic,
                        record.partition,
                        record.offset,
                        AcknowledgeType::Reject,
                    )?;
                    rejected += 1;
                    done.insert((record.partition, record.offset));
                }
                Ok(id) if id % 10 == 0 && record.delivery_count == 1 => {
                    // Pretend processing failed for now: RELEASE makes the record available
                    // again at once, with a higher delivery count.
                    consumer.acknowledge_with(&record, AcknowledgeType::Release)?;
                    released += 1;
                }
                Ok(_) => {
                    consumer.acknowledge(&record)?; // ACCEPT: processed
                    accepted += 1;
                    done.insert((record.partition, record.offset));
                }
            }
        }
        // Send this batch's acknowledgements now (without this they would go with the next
        // poll). The results reach the callback; we do not await the returned handle.
        consumer.commit_async()?;
    }

    // Send anything still pending and wait for the answers, then leave the group.
    for (partition, result) in consumer.commit_sync(Duration::from_secs(10)).await? {
        result.map_err(|e| format!("acknowledging {partition} failed: {e}"))?;
    }
    consumer.close(Duration::from_secs(10)).await?;

    println!("received {} records from {topic} (group {group})", done.len());
    println!("accepted {accepted}, rejected {rejected}, released {released} (then redelivered)");
    println!("records by delivery count: {by_delivery_count:?}");
    println!("the broker confirmed {} acknowledgements", confirmed.load(Ordering::Relaxed));
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
/// produces `n` demo records, one in fifty of them unparseable.
async fn setup(bootstrap: &str, topic: &str, group: &str, n: usize) -> Result<(), BoxError> {
    let admin = Admin::connect_to(bootstrap).await?;
    admin.create_topic(topic, 3).await?; // "already exists" counts as success
                                         // A new share group starts at the *latest* offset by default; read what is there.
    admin.set_share_auto_offset_reset(group, "earliest").await?;

    let producer = Producer::connect(ProducerConfig::new(bootstrap)).await?;
    let mut deliveries = Vec::with_capacity(n);
    for i in 0..n {
        let value = if i % 50 == 49 { format!("garbage-{i}") } else { format!("order-{i}") };
        deliveries.push(producer.send(ProducerRecord::new(topic, value).key(format!("customer-{i}"))).await?);
    }
    for delivery in deliveries {
        delivery.await?;
    }
    producer.close(Duration::from_secs(10)).await?;
    Ok(())
}
