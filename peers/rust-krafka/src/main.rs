//! The krafka peer of scripts/bench peers, measured as bench/src/peers.rs is.
//!
//! ```text
//! krafka-share-bench consume --bootstrap B --topic T --group G --records N
//!     [--mode implicit|explicit] [--timeout-s 300]
//! ```
//! Times from just before `subscribe` (the consumer is built) until `commit` confirms the
//! last acknowledgement; prints `RESULT {json}`.

use std::time::{Duration, Instant};

use krafka::share_consumer::AcknowledgementMode;
use krafka::Kafka;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("krafka bench: error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), BoxError> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) != Some("consume") {
        return Err("usage: krafka-share-bench consume --bootstrap B --topic T --group G --records N".into());
    }
    let mut kv = std::collections::HashMap::new();
    for p in argv[1..].chunks(2) {
        let k = p[0].strip_prefix("--").ok_or_else(|| format!("bad argument {:?}", p[0]))?;
        kv.insert(k.to_string(), p.get(1).cloned().ok_or_else(|| format!("--{k} needs a value"))?);
    }
    let get = |k: &str| kv.get(k).cloned().ok_or_else(|| BoxError::from(format!("--{k} is required")));
    let n: u64 = get("records")?.parse()?;
    let explicit = match kv.get("mode").map(String::as_str).unwrap_or("implicit") {
        "implicit" => false,
        "explicit" => true,
        m => return Err(format!("--mode {m:?}: use implicit or explicit").into()),
    };
    let timeout = Duration::from_secs(kv.get("timeout-s").map(|s| s.parse()).transpose()?.unwrap_or(300));

    let kafka = Kafka::builder(get("bootstrap")?).client_id("krafka-bench").connect().await?;
    let consumer = kafka
        .share_consumer(get("group")?)
        .acknowledgement_mode(if explicit { AcknowledgementMode::Explicit } else { AcknowledgementMode::Implicit })
        .build()
        .await?;
    let start = Instant::now();
    let deadline = start + timeout;
    consumer.subscribe([get("topic")?]).await?;
    let (mut got, mut bytes, mut first) = (0u64, 0u64, None);
    while got < n && Instant::now() < deadline {
        let recs = consumer.poll(Duration::from_millis(100)).await?;
        if first.is_none() && !recs.is_empty() {
            first = Some(start.elapsed().as_secs_f64());
        }
        for r in &recs {
            bytes += (r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len())) as u64;
            if explicit {
                consumer.ack(r)?;
            }
        }
        got += recs.len() as u64;
    }
    let results = consumer.commit().await?;
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "RESULT {{\"records\":{got},\"bytes\":{bytes},\"elapsed_s\":{elapsed:.4},\"first_s\":{:.4}}}",
        first.unwrap_or(0.0)
    );
    let _ = consumer.close().await;
    if let Some((tp, Err(e))) = results.iter().find(|(_, r)| r.is_err()) {
        return Err(format!("acknowledgement of {}-{} failed: {e}", tp.topic, tp.partition).into());
    }
    if got < n {
        return Err(format!("timed out after {timeout:?} with {got} of {n} records").into());
    }
    Ok(())
}
