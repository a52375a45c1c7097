//! The processing engine's side of `scripts/bench process`: `kafka_share::processor` with
//! `--concurrency` handlers, each record's handler sleeping as in `barrier.rs`, timed.
//!
//! ```text
//! cargo run --release -p kafka-share-bench -- process --bootstrap B --topic T --group G --records N
//!       [--concurrency 64] [--work-ms 1] [--slow-every 1000] [--slow-ms 500] [--timeout-s 600]
//!       [--prefetch N (default: the engine's, one record per handler)]
//! ```
//!
//! The engine's defaults otherwise (prefetch one record per handler, unstarted records
//! released after a quarter of the lock). A handler sleeps `--work-ms`, or `--slow-ms` for
//! the record at offset `o` with `(o + 1) % slow_every == 0`, then answers ACCEPT; the
//! engine sends it at once. The run ends once N records were handled, with a graceful
//! shutdown (the last outcomes go with the close, which waits for them).
//!
//! Prints `RESULT {json}` with the fields of `barrier.rs`: `seconds` (from just before
//! `subscribe` to the end of the shutdown), `records_per_sec` (`(records - 1) / (seconds -
//! first_record_s)`), `first_record_s` (to the first handler call), and `p50_ms` / `p99_ms`
//! / `max_ms` from acquisition (the fetch that took the record) to its outcome, from the
//! engine's histogram (bucket upper edges: powers of two microseconds).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kafka_share::processor::{Delivery, Outcome, Processor, ProcessorConfig, PROCESSOR};
use kafka_share::ShareConsumerConfig;

use crate::args::{Args, BoxError};
use crate::cli;
use crate::work::Work;

#[tokio::main]
pub async fn entry(raw: Vec<String>) {
    cli::exit_on_error("processor_bench: error: ", run(raw).await);
}

async fn run(raw: Vec<String>) -> Result<(), BoxError> {
    let a = Args::parse(raw)?;
    let topic = a.req("topic")?.to_string();
    let n: u64 = a.num("records", 0)?;
    if n == 0 {
        return Err("--records N (at least 1) is required".into());
    }
    let concurrency: usize = a.num("concurrency", 64)?;
    let work = Duration::from_millis(a.num("work-ms", 1)?);
    let slow_every: i64 = a.num("slow-every", 1000)?;
    let slow = Duration::from_millis(a.num("slow-ms", 500)?);
    let timeout = Duration::from_secs(a.num("timeout-s", 600)?);
    let prefetch: usize = a.num("prefetch", 0)?;
    // The handler of every Rust side (work.rs): ceiling.rs runs it too.
    let handler_work = Work { work, slow_every, slow };

    let config = ShareConsumerConfig::new(a.req("bootstrap")?, a.req("group")?).client_id("processor-bench");
    let mut pc = ProcessorConfig::new().concurrency(concurrency);
    if prefetch > 0 {
        pc = pc.prefetch(prefetch);
    }
    let processor = Processor::connect(config, pc).await?;
    let start = Instant::now();
    processor.consumer().subscribe([topic.as_str()])?;
    let done = Arc::new(AtomicU64::new(0));
    let redelivered = Arc::new(AtomicU64::new(0));
    let first: Arc<OnceLock<Duration>> = Arc::default();
    let (d, r, f) = (done.clone(), redelivered.clone(), first.clone());
    let running = processor.run(move |delivery: Delivery| {
        let (d, r, f) = (d.clone(), r.clone(), f.clone());
        async move {
            f.get_or_init(|| start.elapsed());
            let record = delivery.record();
            if record.delivery_count > 1 && delivery.attempt() == 1 {
                r.fetch_add(1, Ordering::Relaxed);
            }
            handler_work.handle(record.offset).await;
            d.fetch_add(1, Ordering::Relaxed);
            Outcome::Accept
        }
    });
    let deadline = start + timeout;
    while done.load(Ordering::Relaxed) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let m = running.metrics();
    let get = |name: &str| m.get(PROCESSOR, name).unwrap_or(-1.0);
    let (p50, p99, max) = (get("outcome-time-p50"), get("outcome-time-p99"), get("outcome-time-max"));
    let (renewals, released_unstarted) = (get("lock-renewals-total"), get("records-released-unstarted-total"));
    let (handler_p50, handler_p99, wait_p50) = (get("handler-time-p50"), get("handler-time-p99"), get("wait-time-p50"));
    let report = running.close(Duration::from_secs(30)).await?;
    let seconds = start.elapsed().as_secs_f64();
    let done = done.load(Ordering::Relaxed);
    let first_s = first.get().map_or(-1.0, |d| d.as_secs_f64());
    let steady = if done > 1 && seconds > first_s { (done - 1) as f64 / (seconds - first_s) } else { 0.0 };
    println!(
        "RESULT {{\"side\":\"ours\",\"records\":{done},\"seconds\":{seconds:.4},\"records_per_sec\":{steady:.1},\
         \"first_record_s\":{first_s:.4},\"p50_ms\":{p50:.3},\"p99_ms\":{p99:.3},\"max_ms\":{max:.3},\
         \"redelivered\":{},\"renewals\":{renewals},\"handler_p50_ms\":{handler_p50:.3},\"handler_p99_ms\":{handler_p99:.3},\"wait_p50_ms\":{wait_p50:.3},\"released_unstarted\":{released_unstarted},\
         \"accepted\":{},\"concurrency\":{concurrency},\"work_ms\":{},\"slow_every\":{slow_every},\"slow_ms\":{}}}",
        redelivered.load(Ordering::Relaxed),
        report.accepted,
        work.as_millis(),
        slow.as_millis()
    );
    if done < n {
        return Err(format!("timed out after {timeout:?} with {done} of {n} records").into());
    }
    Ok(())
}
