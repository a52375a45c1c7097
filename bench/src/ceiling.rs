//! The ceiling of `scripts/bench process`: the processor engine's handlers (`work.rs`,
//! the same sleeps on the same tokio timer) at the same concurrency, on records fed from
//! memory: no Kafka, no fetch, no acknowledgement. What the handlers alone allow on this
//! machine in this run, so the engine's figure can be read as a ratio to it.
//!
//! ```text
//! cargo run --release -p kafka-share-bench -- ceiling --records N [--partitions 4]
//!       [--concurrency 64] [--work-ms 1] [--slow-every 1000] [--slow-ms 500]
//!       [--rate R (records/s; default 0: every record available at once)] [--timeout-s 600]
//! ```
//!
//! The records are those of the benchmark's topic: record `i` is offset `i / P` of partition
//! `i % P`, so the slow rule (`(offset + 1) % slow_every == 0`) picks as many as on the topic.
//! A dispatcher hands each record to a tokio task as soon as one of `--concurrency` slots is
//! free (a semaphore); with `--rate`, record `i` becomes available at `i / R` s, as from a
//! producer at a fixed rate. A record's "acquisition" is the later of the moment it became
//! available and the moment the dispatcher could take it (a slot free), so that at saturation
//! no record waits in a queue it could have skipped, and at a fixed rate a record waiting for
//! a slot counts that wait, as a record waiting in the engine's prefetch does.
//!
//! Prints `RESULT {json}` with the fields of `process.rs`: `records`, `seconds` (the
//! whole run), `records_per_sec` (`(records - 1) / (seconds - first_record_s)`),
//! `first_record_s`, and exact `p50_ms` / `p99_ms` / `max_ms` from acquisition to the end of
//! the handler; `handler_p50_ms` is the handler's own time (the sleep as tokio's timer ran it).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::args::{Args, BoxError};
use crate::cli;
use crate::work::Work;

#[tokio::main]
pub async fn entry(raw: Vec<String>) {
    cli::exit_on_error("ceiling_bench: error: ", run(raw).await);
}

/// Per record: microseconds from acquisition to outcome, and of the handler alone.
#[derive(Default)]
struct Times {
    outcome_us: Vec<u64>,
    handler_us: Vec<u64>,
}

async fn run(raw: Vec<String>) -> Result<(), BoxError> {
    let a = Args::parse(raw)?;
    let n: u64 = a.num("records", 0)?;
    if n == 0 {
        return Err("--records N (at least 1) is required".into());
    }
    let partitions: u64 = a.num("partitions", 4)?;
    let concurrency: usize = a.num("concurrency", 64)?;
    if partitions == 0 || concurrency == 0 {
        return Err("--partitions and --concurrency must be at least 1".into());
    }
    let permits = u32::try_from(concurrency).map_err(|_| format!("--concurrency {concurrency} is too large"))?;
    let work = Work {
        work: Duration::from_millis(a.num("work-ms", 1)?),
        slow_every: a.num("slow-every", 1000)?,
        slow: Duration::from_millis(a.num("slow-ms", 500)?),
    };
    let rate: f64 = a.num("rate", 0.0)?;
    if !(rate >= 0.0 && rate.is_finite()) {
        return Err(format!("--rate {rate}: records per second, 0 or more").into());
    }
    let timeout = Duration::from_secs(a.num("timeout-s", 600)?);

    let slots = Arc::new(Semaphore::new(concurrency));
    let times = Arc::new(Mutex::new(Times::default()));
    let start = Instant::now();
    let t0 = tokio::time::Instant::now();
    let mut first: Option<Duration> = None;
    for i in 0..n {
        let available = if rate > 0.0 {
            let at = t0 + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(at).await;
            Some(at.into_std())
        } else {
            None
        };
        let slot = slots.clone().acquire_owned().await.map_err(|e| format!("the slots closed: {e}"))?;
        let acquired = available.unwrap_or_else(Instant::now);
        first.get_or_insert_with(|| start.elapsed());
        if start.elapsed() > timeout {
            return Err(format!("timed out after {timeout:?} with {i} of {n} records started").into());
        }
        let offset = i64::try_from(i / partitions).map_err(|_| "offset out of range")?;
        let times = times.clone();
        tokio::spawn(async move {
            let began = Instant::now();
            work.handle(offset).await;
            let end = Instant::now();
            if let Ok(mut t) = times.lock() {
                t.outcome_us.push(micros(end - acquired));
                t.handler_us.push(micros(end - began));
            }
            drop(slot);
        });
    }
    // Every handler done: every slot back.
    let _all = slots.acquire_many(permits).await.map_err(|e| format!("the slots closed: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let mut t = std::mem::take(&mut *times.lock().map_err(|_| "a handler task panicked")?);
    let done = t.outcome_us.len() as u64;
    let first_s = first.map_or(0.0, |d| d.as_secs_f64());
    let steady = if done > 1 && seconds > first_s { (done - 1) as f64 / (seconds - first_s) } else { 0.0 };
    let (p50, p99, max) = (pct(&mut t.outcome_us, 0.50), pct(&mut t.outcome_us, 0.99), pct(&mut t.outcome_us, 1.0));
    let (h50, h99) = (pct(&mut t.handler_us, 0.50), pct(&mut t.handler_us, 0.99));
    println!(
        "RESULT {{\"side\":\"ceiling\",\"records\":{done},\"seconds\":{seconds:.4},\"records_per_sec\":{steady:.1},\
         \"first_record_s\":{first_s:.4},\"p50_ms\":{p50:.3},\"p99_ms\":{p99:.3},\"max_ms\":{max:.3},\
         \"handler_p50_ms\":{h50:.3},\"handler_p99_ms\":{h99:.3},\"rate\":{rate},\"concurrency\":{concurrency},\
         \"work_ms\":{},\"slow_every\":{},\"slow_ms\":{}}}",
        work.work.as_millis(),
        work.slow_every,
        work.slow.as_millis()
    );
    if done < n {
        return Err(format!("{done} of {n} records handled").into());
    }
    Ok(())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The `q` quantile (nearest rank) in milliseconds; 0 for no values.
fn pct(v: &mut [u64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1] as f64 / 1000.0
}
