//! The processing engine: one share consumer feeding 16 concurrent handlers, each record's
//! outcome its own, with no poll barrier (compare `concurrent_workers.rs`).
//!
//! ```text
//! cargo run --example processor -- [bootstrap] [topic]
//! ```
//!
//! A handler sleeps 5 ms (one job in 20 takes 2 s: it holds only its own slot), fails once
//! and asks to be retried later for one job in ten (`Outcome::Retry`: it stays here, its
//! delivery count unchanged), and sends the poison jobs to the dead-letter topic
//! `<topic>.dlq` (`Outcome::DeadLetter`: copied with the error headers, then ACCEPTed). Ends
//! with a graceful shutdown.
//!
//! Bootstrap: argv[1], else env `KAFKA_BOOTSTRAP`, else 127.0.0.1:19092. Topic: argv[2], else
//! `kafka-share-demo`. Produces `DEMO_RECORDS` (default 100) jobs and processes until each is
//! done or rejected (or 20 s pass).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_share::admin::Admin;
use kafka_share::processor::{DeadLetter, Delivery, Outcome, Processor, ProcessorConfig, PROCESSOR};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::ShareConsumerConfig;

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
    let mut args = std::env::args().skip(1);
    let bootstrap = args
        .next()
        .or_else(|| std::env::var("KAFKA_BOOTSTRAP").ok())
        .unwrap_or_else(|| "127.0.0.1:19092".into());
    let topic = args.next().unwrap_or_else(|| "kafka-share-demo".into());
    let n: usize = std::env::var("DEMO_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let group = format!("processor-example-{}", std::process::id());
    setup(&bootstrap, &topic, &group, n).await?;

    let dlq = format!("{topic}.dlq");
    let config = ProcessorConfig::new().concurrency(16).dead_letter(DeadLetter::topic(&dlq));
    let processor = Processor::connect(ShareConsumerConfig::new(&bootstrap, &group), config).await?;
    processor.consumer().subscribe([topic.clone()])?;
    // Outcomes by job, and the delivery counts seen (a retried job keeps its count).
    let outcomes: Arc<Mutex<BTreeMap<String, Outcome>>> = Arc::default();
    let counts: Arc<Mutex<BTreeMap<i16, usize>>> = Arc::default();
    let (o, c) = (outcomes.clone(), counts.clone());
    let running = processor.run(move |d: Delivery| {
        let (o, c) = (o.clone(), c.clone());
        async move {
            let job = d.record().value_str().unwrap_or_default().to_string();
            let i: usize = job.strip_prefix("job-").and_then(|s| s.parse().ok()).unwrap_or(0);
            if d.attempt() == 1 {
                *c.lock().unwrap().entry(d.delivery_count()).or_default() += 1;
            }
            tokio::time::sleep(Duration::from_millis(if i % 20 == 7 { 2000 } else { 5 })).await;
            let outcome = if i % 25 == 24 {
                d.dead_letter(format!("{job} is poison")) // copied to the DLQ, then ACCEPTed
            } else if i % 10 == 3 && d.attempt() == 1 {
                Outcome::Retry // a passing failure: tried again here, later
            } else {
                Outcome::Accept
            };
            if outcome != Outcome::Retry {
                o.lock().unwrap().insert(job, outcome);
            }
            outcome
        }
    });
    let start = Instant::now();
    while outcomes.lock().unwrap().len() < n && start.elapsed() < DEADLINE {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = running.metrics();
    let report = running.close(Duration::from_secs(10)).await?;
    let outcomes = outcomes.lock().unwrap();
    let mut by_outcome: BTreeMap<String, usize> = BTreeMap::new();
    for o in outcomes.values() {
        *by_outcome.entry(format!("{o:?}")).or_default() += 1;
    }
    println!("processed {} records in {:.2} s", outcomes.len(), start.elapsed().as_secs_f64());
    println!("outcomes: {by_outcome:?}");
    println!("records by delivery count: {:?}", counts.lock().unwrap());
    let m = |name: &str| metrics.get(PROCESSOR, name).unwrap_or(0.0);
    println!("dead-lettered {} to {dlq}", m("records-dead-lettered-total"));
    println!(
        "retried {}, handler time p50 {:.1} ms, p99 {:.1} ms; {report:?}",
        m("records-retried-total"),
        m("handler-time-p50"),
        m("handler-time-p99")
    );
    if outcomes.len() < n {
        return Err(format!("only {} of {n} records processed within {DEADLINE:?}", outcomes.len()).into());
    }
    Ok(())
}

/// Creates the topic (3 partitions), has the group read from the earliest offset, and
/// produces `n` jobs `job-0` .. `job-{n-1}`.
async fn setup(bootstrap: &str, topic: &str, group: &str, n: usize) -> Result<(), BoxError> {
    let admin = Admin::connect_to(bootstrap).await?;
    admin.create_topic(topic, 3).await?;
    admin.create_topic(&format!("{topic}.dlq"), 1).await?;
    admin.set_share_auto_offset_reset(group, "earliest").await?;
    let producer = Producer::connect(ProducerConfig::new(bootstrap)).await?;
    let mut deliveries = Vec::with_capacity(n);
    for i in 0..n {
        deliveries.push(producer.send(ProducerRecord::new(topic, format!("job-{i}")).key(format!("key-{i}"))).await?);
    }
    for d in deliveries {
        d.await?;
    }
    producer.close(Duration::from_secs(10)).await?;
    Ok(())
}
