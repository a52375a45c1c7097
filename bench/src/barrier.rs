//! The batch-barrier side of `scripts/bench process`: the pattern of
//! `examples/concurrent_workers.rs` (poll, hand every record of the batch to a concurrent
//! tokio task, wait for the whole batch, poll again), with simulated work, timed.
//!
//! ```text
//! cargo run --release -p kafka-share-bench -- barrier --bootstrap B --topic T --group G --records N
//!       [--concurrency 64] [--work-ms 1] [--slow-every 1000] [--slow-ms 500] [--timeout-s 600]
//! ```
//!
//! Explicit acknowledgement mode, one `Arc<ShareConsumer>`; at most `--concurrency` handlers
//! run at once (a `Semaphore`; one task per record in a `JoinSet`). A handler sleeps
//! `--work-ms`, or `--slow-ms` instead for the record at offset `o` with
//! `(o + 1) % slow_every == 0` (`--slow-every 0`: none), then acknowledges its record ACCEPT
//! itself (`acknowledge_with` only records the decision; the next poll sends it). The poll
//! loop waits for every task of the batch before it polls again (explicit mode: a poll's
//! records must all be acknowledged first). `commit_sync` at the end.
//!
//! Prints one line `RESULT {json}`, the same fields as peers/java's `ProcessBench`:
//! `records` (acknowledged), `seconds` (from just before `subscribe` until `commit_sync`
//! confirms the last acknowledgements), `records_per_sec` (`(records - 1) / (seconds -
//! first_record_s)`: the steady rate after the first record), `first_record_s` (to the first
//! non-empty poll: the join), `p50_ms`, `p99_ms`, `max_ms` (per record, from the return of
//! the poll that acquired it to its `acknowledge_with` call), `polls` (non-empty),
//! `max_batch`, `redelivered` (delivery count above 1), `slow_records` and the parameters.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_share::consumer::AcknowledgementMode;
use kafka_share::{AcknowledgeType, ShareConsumer, ShareConsumerConfig};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::args::{Args, BoxError};
use crate::cli;

#[tokio::main]
pub async fn entry(raw: Vec<String>) {
    cli::exit_on_error("barrier_bench: error: ", run(raw).await);
}

/// The p-quantile (nearest rank) of sorted nanoseconds, in milliseconds; -1 if empty.
fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return -1.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1);
    sorted[i.min(sorted.len() - 1)] as f64 / 1e6
}

async fn run(raw: Vec<String>) -> Result<(), BoxError> {
    let a = Args::parse(raw)?;
    let topic = a.req("topic")?.to_string();
    let n: u64 = a.num("records", 0)?;
    if n == 0 {
        return Err("--records N (at least 1) is required".into());
    }
    let concurrency: usize = a.num("concurrency", 64)?;
    if concurrency == 0 {
        return Err("--concurrency must be at least 1".into());
    }
    let work = Duration::from_millis(a.num("work-ms", 1)?);
    let slow_every: i64 = a.num("slow-every", 1000)?;
    let slow = Duration::from_millis(a.num("slow-ms", 500)?);
    let timeout = Duration::from_secs(a.num("timeout-s", 600)?);

    let config = ShareConsumerConfig::new(a.req("bootstrap")?, a.req("group")?)
        .client_id("barrier-bench")
        .acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = Arc::new(ShareConsumer::connect(config).await?);
    let slots = Arc::new(Semaphore::new(concurrency));

    let mut lat: Vec<u64> = Vec::with_capacity(n as usize + 1024);
    let (mut done, mut polls, mut max_batch, mut redelivered, mut slow_records) = (0u64, 0u64, 0usize, 0u64, 0u64);
    let mut first: Option<Duration> = None;
    let start = Instant::now();
    let deadline = start + timeout;
    consumer.subscribe([topic.as_str()])?;
    while done < n && Instant::now() < deadline {
        let records = consumer.poll(Duration::from_millis(100)).await?;
        if records.is_empty() {
            continue;
        }
        let acquired = Instant::now();
        first.get_or_insert(acquired - start);
        polls += 1;
        max_batch = max_batch.max(records.len());
        let mut batch = JoinSet::new();
        for record in records {
            let is_slow = slow_every > 0 && (record.offset + 1) % slow_every == 0;
            slow_records += u64::from(is_slow);
            redelivered += u64::from(record.delivery_count > 1);
            let (consumer, slots) = (consumer.clone(), slots.clone());
            batch.spawn(async move {
                let _slot = slots.acquire_owned().await.expect("the semaphore is never closed");
                tokio::time::sleep(if is_slow { slow } else { work }).await;
                consumer.acknowledge_with(&record, AcknowledgeType::Accept)?;
                Ok::<u64, kafka_share::Error>(acquired.elapsed().as_nanos() as u64)
            });
        }
        // The barrier: every record of this poll is acknowledged before the next poll.
        while let Some(joined) = batch.join_next().await {
            lat.push(joined??);
            done += 1;
        }
    }
    // Sends the last acknowledgements and waits for the broker's answers.
    for (partition, result) in consumer.commit_sync(Duration::from_secs(30)).await? {
        result.map_err(|e| format!("acknowledging {partition} failed: {e}"))?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let _ = consumer.close(Duration::from_secs(5)).await;

    lat.sort_unstable();
    let first_s = first.map_or(-1.0, |d| d.as_secs_f64());
    let steady = if done > 1 && seconds > first_s { (done - 1) as f64 / (seconds - first_s) } else { 0.0 };
    println!(
        "RESULT {{\"side\":\"barrier\",\"records\":{done},\"seconds\":{seconds:.4},\"records_per_sec\":{steady:.1},\
         \"first_record_s\":{first_s:.4},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"polls\":{polls},\
         \"max_batch\":{max_batch},\"redelivered\":{redelivered},\"slow_records\":{slow_records},\
         \"concurrency\":{concurrency},\"work_ms\":{},\"slow_every\":{slow_every},\"slow_ms\":{}}}",
        pct(&lat, 0.50),
        pct(&lat, 0.99),
        lat.last().map_or(-1.0, |&x| x as f64 / 1e6),
        work.as_millis(),
        slow.as_millis()
    );
    if done < n {
        return Err(format!("timed out after {timeout:?} with {done} of {n} records").into());
    }
    Ok(())
}
