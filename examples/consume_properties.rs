//! A share consumer configured by a properties file: the client file Confluent Cloud gives
//! you, or any Java client file (`security.protocol`, `sasl.*`, `ssl.*` included).
//!
//! ```text
//! cargo run --features tls --example consume_properties -- client.properties <topic> [group]
//! ```
//!
//! The group is argv[3], else the file's `group.id`, else `kafka-share-example`. Prints each
//! record (offset, delivery count, value) and acknowledges it; stops after 20 s without a
//! record, or after `MAX_RECORDS` records when that is set. Nothing is created: the topic
//! must exist, and a new group starts at the latest offset unless its
//! share.auto.offset.reset says otherwise.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use kafka_share::config::Properties;
use kafka_share::ShareConsumer;

type BoxError = Box<dyn std::error::Error>;

const IDLE_LIMIT: Duration = Duration::from_secs(20);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(n) => {
            println!("consumed {n} records");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<usize, BoxError> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: consume_properties <client.properties> <topic> [group]";
    let file = args.next().ok_or(usage)?;
    let topic = args.next().ok_or(usage)?;
    let mut props = Properties::load(&file)?;
    if let Some(group) = args.next() {
        props.set("group.id", group);
    } else if !props.contains("group.id") {
        props.set("group.id", "kafka-share-example");
    }
    let max: Option<usize> = std::env::var("MAX_RECORDS").ok().map(|v| v.parse()).transpose()?;

    let consumer = ShareConsumer::from_properties(&props).await?;
    consumer.subscribe([topic.as_str()])?;
    let mut received = 0;
    let mut last = Instant::now();
    while last.elapsed() < IDLE_LIMIT && max.is_none_or(|m| received < m) {
        // Implicit mode (unless the file says explicit): the next poll accepts these.
        for r in consumer.poll(Duration::from_secs(1)).await? {
            received += 1;
            last = Instant::now();
            let value = r.value.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
            println!("{}-{} offset {} (delivery {}): {value}", r.topic, r.partition, r.offset, r.delivery_count);
        }
    }
    consumer.close(Duration::from_secs(10)).await?;
    Ok(received)
}
