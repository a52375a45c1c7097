//! The krabka peer of scripts/bench peers, measured as bench/src/peers.rs is.
//!
//! ```text
//! krabka-share-bench consume --bootstrap B --topic T --group G --records N
//!     [--mode implicit|explicit] [--timeout-s 300]
//! ```
//! Times from just before the consumer joins (krabka subscribes in its builder) until the last
//! acknowledgement is sent: in explicit mode `commit` (a `ShareAcknowledge` whose errors it
//! returns); in implicit mode `close`, krabka's only way to send the last poll's acceptance
//! (it logs a failed final acknowledgement instead of returning it). Prints `RESULT {json}`.

use std::time::{Duration, Instant};

use krabka_client_consumer::{ShareAckMode, ShareAckType, ShareConsumer};
use krabka_units::convert::TimeExt as _;
use krabka_units::Time;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("krabka bench: error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), BoxError> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) != Some("consume") {
        return Err("usage: krabka-share-bench consume --bootstrap B --topic T --group G --records N".into());
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

    let start = Instant::now();
    let deadline = start + timeout;
    let mut consumer = ShareConsumer::builder()
        .bootstrap(get("bootstrap")?)
        .client_id("krabka-bench")
        .group_id(get("group")?)
        .subscribe(vec![get("topic")?])
        .ack_mode(if explicit { ShareAckMode::Explicit } else { ShareAckMode::Implicit })
        .build()
        .await?;
    let (mut got, mut bytes, mut first) = (0u64, 0u64, None);
    while got < n && Instant::now() < deadline {
        let recs = consumer.poll(Time::from_millis(100)).await?;
        if first.is_none() && !recs.is_empty() {
            first = Some(start.elapsed().as_secs_f64());
        }
        for r in &recs {
            bytes += (r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len())) as u64;
            if explicit {
                consumer.acknowledge(r, ShareAckType::Accept)?;
            }
        }
        got += recs.len() as u64;
    }
    if explicit {
        consumer.commit().await?;
    }
    consumer.close().await?;
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "RESULT {{\"records\":{got},\"bytes\":{bytes},\"elapsed_s\":{elapsed:.4},\"first_s\":{:.4}}}",
        first.unwrap_or(0.0)
    );
    if got < n {
        return Err(format!("timed out after {timeout:?} with {got} of {n} records").into());
    }
    Ok(())
}
