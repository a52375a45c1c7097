//! The kafkit peer of scripts/bench peers, measured as bench/src/peers.rs is.
//!
//! ```text
//! kafkit-share-bench consume --bootstrap B --topic T --group G --records N
//!     [--mode explicit] [--timeout-s 300]
//! ```
//! kafkit's `KafkaShareConsumer` has no implicit mode (records not acknowledged stay acquired
//! until their lock expires), so only `--mode explicit` runs: `acknowledge(ACCEPT)` each record
//! (sent with the next poll), `commit_sync` at the end. Times from just before `subscribe` (the
//! consumer has connected to the group coordinator) until `commit_sync` confirms the last
//! acknowledgement; prints `RESULT {json}`.

use std::time::{Duration, Instant};

use kafkit_client::{AcknowledgeType, ConsumerConfig, KafkaShareConsumer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("kafkit bench: error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), BoxError> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) != Some("consume") {
        return Err("usage: kafkit-share-bench consume --bootstrap B --topic T --group G --records N".into());
    }
    let mut kv = std::collections::HashMap::new();
    for p in argv[1..].chunks(2) {
        let k = p[0].strip_prefix("--").ok_or_else(|| format!("bad argument {:?}", p[0]))?;
        kv.insert(k.to_string(), p.get(1).cloned().ok_or_else(|| format!("--{k} needs a value"))?);
    }
    let get = |k: &str| kv.get(k).cloned().ok_or_else(|| BoxError::from(format!("--{k} is required")));
    let n: u64 = get("records")?.parse()?;
    match kv.get("mode").map(String::as_str).unwrap_or("explicit") {
        "explicit" => {}
        m => return Err(format!("--mode {m:?}: kafkit-client has no implicit mode; use explicit").into()),
    }
    let timeout = Duration::from_secs(kv.get("timeout-s").map(|s| s.parse()).transpose()?.unwrap_or(300));

    let config = ConsumerConfig::new(get("bootstrap")?, get("group")?).with_client_id("kafkit-bench");
    let mut consumer = KafkaShareConsumer::connect(config).await?;
    let start = Instant::now();
    let deadline = start + timeout;
    consumer.subscribe(vec![get("topic")?]).await?;
    let (mut got, mut bytes, mut first) = (0u64, 0u64, None);
    while got < n && Instant::now() < deadline {
        let recs = consumer.poll_for(Duration::from_millis(100)).await?;
        if first.is_none() && !recs.is_empty() {
            first = Some(start.elapsed().as_secs_f64());
        }
        for r in recs.iter() {
            let rec = &r.record;
            bytes += (rec.key.as_ref().map_or(0, |k| k.len()) + rec.value.as_ref().map_or(0, |v| v.len())) as u64;
            consumer.acknowledge(r, AcknowledgeType::Accept);
        }
        got += recs.len() as u64;
    }
    consumer.commit_sync().await?;
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "RESULT {{\"records\":{got},\"bytes\":{bytes},\"elapsed_s\":{elapsed:.4},\"first_s\":{:.4}}}",
        first.unwrap_or(0.0)
    );
    let _ = consumer.shutdown().await;
    if got < n {
        return Err(format!("timed out after {timeout:?} with {got} of {n} records").into());
    }
    Ok(())
}
