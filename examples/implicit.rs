//! A share consumer in the default, *implicit* acknowledgement mode: every record a poll
//! returns is accepted by the next poll (or by `commit_sync`). No per-record calls at all.
//!
//! ```text
//! cargo run --example implicit -- [bootstrap] [topic]
//! ```
//!
//! Bootstrap: argv[1], else env `KAFKA_BOOTSTRAP`, else 127.0.0.1:19092. Topic: argv[2], else
//! `kafka-share-demo`. The example creates the topic if needed, produces `DEMO_RECORDS`
//! (default 100) demo records, and consumes until it has received that many (or 20 s pass).
//! The share group is `<topic>-implicit`: run it again and it carries on where it left off.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kafka_share::admin::Admin;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{ShareConsumer, ShareConsumerConfig};

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

async fn run() -> Result<(), BoxError> {
    let (bootstrap, topic, n) = args();
    let group = format!("{topic}-implicit");
    setup(&bootstrap, &topic, &group, n).await?;

    let consumer = ShareConsumer::connect(ShareConsumerConfig::new(&bootstrap, &group)).await?;
    consumer.subscribe([topic.as_str()])?;

    let start = Instant::now();
    let mut first_record = None;
    let mut received = 0;
    let mut by_delivery_count = BTreeMap::<i16, usize>::new();
    while received < n && start.elapsed() < DEADLINE {
        // Each poll first accepts everything the previous poll returned, then waits (up to
        // the timeout) for more. The first poll also joins the group.
        let records = consumer.poll(Duration::from_secs(1)).await?;
        if !records.is_empty() {
            first_record.get_or_insert_with(Instant::now);
        }
        for record in &records {
            received += 1;
            *by_delivery_count.entry(record.delivery_count).or_default() += 1;
        }
    }
    let finished = Instant::now();

    // Accept the last poll's records now: `close` alone would release them for redelivery.
    for (partition, result) in consumer.commit_sync(Duration::from_secs(10)).await? {
        result.map_err(|e| format!("acknowledging {partition} failed: {e}"))?;
    }
    consumer.close(Duration::from_secs(10)).await?;

    let joined = first_record.map_or(start.elapsed(), |t| t - start);
    let consuming = first_record.map_or(Duration::ZERO, |t| finished - t);
    println!("received {received} records from {topic} (group {group})");
    println!(
        "first records after {:.2} s (joining the group), then {:.0} records/s",
        joined.as_secs_f64(),
        received as f64 / consuming.as_secs_f64().max(1e-3)
    );
    println!("records by delivery count: {by_delivery_count:?}");
    if received < n {
        return Err(format!("only {received} of {n} records arrived within {DEADLINE:?}").into());
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
/// produces `n` demo records.
async fn setup(bootstrap: &str, topic: &str, group: &str, n: usize) -> Result<(), BoxError> {
    let admin = Admin::connect_to(bootstrap).await?;
    admin.create_topic(topic, 3).await?; // "already exists" counts as success
                                         // A new share group starts at the *latest* offset by default, so it would miss records
                                         // produced before its first fetch. `earliest` makes it read what is already there.
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
