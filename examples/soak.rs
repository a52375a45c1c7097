//! The programs of `scripts/soak`: a fixed-rate producer and a share consumer that runs for a
//! set time, in separate processes, so that the consumer's RSS and sockets are its own.
//!
//! ```text
//! cargo run --example soak -- setup   BOOTSTRAP TOPIC GROUP
//! cargo run --example soak -- produce BOOTSTRAP TOPIC RATE SECONDS
//! cargo run --example soak -- consume BOOTSTRAP TOPIC GROUP SECONDS
//! ```
//!
//! `setup` creates TOPIC (6 partitions, replication factor 3, min.insync.replicas 2) and makes
//! GROUP read from the earliest offset. `produce` writes RATE records a second for SECONDS
//! (a failed send is retried with the same value until it is written) and prints
//! `produced N failed N` at the end. `consume` ACCEPTs every record in explicit mode and
//! prints a line every 5 s:
//! `soak-sample t=S delivered=N accepted=N failed=N pending=N redelivered=N`, where pending
//! is the acknowledgements the application made whose result has not come back yet
//! (made - committed - failed). It closes after SECONDS.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_share::admin::{Admin, NewTopic};
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{ShareConsumer, ShareConsumerConfig};

type BoxError = Box<dyn std::error::Error>;

const SAMPLE_EVERY: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let secs = |i: usize| Duration::from_secs(arg(i).parse().unwrap_or(60));
    let r = match arg(0).as_str() {
        "setup" => setup(&arg(1), &arg(2), &arg(3)).await,
        "produce" => produce(&arg(1), &arg(2), arg(3).parse().unwrap_or(100), secs(4)).await,
        "consume" => consume(&arg(1), &arg(2), &arg(3), secs(4)).await,
        _ => Err("usage: soak setup|produce|consume ... (see the example's docs)".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak: error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn setup(bootstrap: &str, topic: &str, group: &str) -> Result<(), BoxError> {
    let admin = Admin::connect_to(bootstrap).await?;
    let topic = NewTopic::new(topic, 6).replication_factor(3).config("min.insync.replicas", "2");
    for r in admin.create_topics(&[topic]).await? {
        r?;
    }
    admin.set_share_auto_offset_reset(group, "earliest").await?;
    Ok(())
}

async fn produce(bootstrap: &str, topic: &str, rate: u32, run_for: Duration) -> Result<(), BoxError> {
    let producer = Arc::new(Producer::connect(ProducerConfig::new(bootstrap)).await?);
    let (produced, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut i = 0u64;
    while started.elapsed() < run_for {
        // Paced from the start: a stall does not lower the rate.
        tokio::time::sleep_until((started + Duration::from_secs_f64(i as f64 / rate.max(1) as f64)).into()).await;
        let (producer, topic, produced, failed) =
            (producer.clone(), topic.to_string(), produced.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let r = match producer.send(ProducerRecord::new(topic.as_str(), i.to_string())).await {
                    Ok(delivery) => delivery.await.map(|_| ()),
                    Err(e) => Err(e),
                };
                match r {
                    Ok(()) => break produced.fetch_add(1, Ordering::Relaxed),
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                };
            }
        }));
        tasks.retain(|t| !t.is_finished());
        i += 1;
    }
    for t in tasks {
        let _ = t.await;
    }
    producer.close(Duration::from_secs(30)).await?;
    println!("produced {} failed {}", produced.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    Ok(())
}

#[derive(Default)]
struct Counts {
    delivered: AtomicU64,
    redelivered: AtomicU64,
    acked: AtomicU64,
    accepted: AtomicU64,
    failed: AtomicU64,
}

async fn consume(bootstrap: &str, topic: &str, group: &str, run_for: Duration) -> Result<(), BoxError> {
    let cfg = ShareConsumerConfig::new(bootstrap, group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = ShareConsumer::connect(cfg).await?;
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    consumer.set_acknowledgement_commit_callback(move |_tp, offsets, r| {
        let n = offsets.len() as u64;
        match r {
            Ok(()) => c.accepted.fetch_add(n, Ordering::Relaxed),
            Err(_) => c.failed.fetch_add(n, Ordering::Relaxed),
        };
    })?;
    consumer.subscribe([topic])?;
    let started = Instant::now();
    let mut next_sample = started;
    while started.elapsed() < run_for {
        if Instant::now() >= next_sample {
            sample(&counts, started);
            next_sample += SAMPLE_EVERY;
        }
        match consumer.poll(Duration::from_millis(500)).await {
            Ok(recs) => {
                for r in &recs {
                    counts.delivered.fetch_add(1, Ordering::Relaxed);
                    if r.delivery_count > 1 {
                        counts.redelivered.fetch_add(1, Ordering::Relaxed);
                    }
                    if consumer.acknowledge(r).is_ok() {
                        counts.acked.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // A broker going away is reported and passes; the loop goes on.
            Err(e) => eprintln!("soak: poll: {e}"),
        }
    }
    let _ = consumer.commit_sync(Duration::from_secs(30)).await;
    sample(&counts, started);
    consumer.close(Duration::from_secs(30)).await?;
    Ok(())
}

fn sample(c: &Counts, started: Instant) {
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let done = get(&c.accepted) + get(&c.failed);
    println!(
        "soak-sample t={:.0} delivered={} accepted={} failed={} pending={} redelivered={}",
        started.elapsed().as_secs_f64(),
        get(&c.delivered),
        get(&c.accepted),
        get(&c.failed),
        get(&c.acked).saturating_sub(done),
        get(&c.redelivered)
    );
}
