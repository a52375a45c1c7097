//! The settings at their extremes: each is clamped where it is given, and nothing computed
//! from them (the ledger's limits, a shutdown's deadline) overflows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::*;

#[test]
fn counts_are_clamped_to_their_documented_ranges() {
    let max = ProcessorConfig::new().concurrency(usize::MAX).prefetch(usize::MAX).batch_size(usize::MAX);
    assert_eq!(max.concurrency, ProcessorConfig::MAX_CONCURRENCY);
    assert_eq!(max.prefetch, Some(ProcessorConfig::MAX_PREFETCH));
    assert_eq!(max.batch_size, Some(ProcessorConfig::MAX_BATCH_SIZE));
    let min = ProcessorConfig::new().concurrency(0).prefetch(0).batch_size(0);
    assert_eq!((min.concurrency, min.prefetch, min.batch_size), (1, Some(0), Some(1)));
}

#[test]
fn durations_are_clamped_to_the_documented_maximum() {
    let max = ProcessorConfig::MAX_DURATION;
    let c = ProcessorConfig::new()
        .max_unstarted(Duration::MAX)
        .retry_backoff(Duration::MAX, Duration::MAX)
        .close_timeout(Duration::MAX);
    assert_eq!((c.max_unstarted, c.retry_backoff, c.retry_backoff_max, c.shutdown_timeout), (Some(max), max, max, max));
    let c = ProcessorConfig::new().retry_backoff(Duration::from_secs(5), Duration::from_secs(1));
    assert_eq!(
        (c.retry_backoff, c.retry_backoff_max),
        (Duration::from_secs(5), Duration::from_secs(5)),
        "max >= first"
    );
    let zero = ProcessorConfig::new().max_unstarted(Duration::ZERO);
    assert_eq!(zero.max_unstarted, Some(Duration::ZERO), "zero is a bound of its own (see the ledger's tick)");
}

#[test]
fn a_pool_with_the_largest_batch_size_does_not_overflow_its_limits() {
    let c = ProcessorConfig::new().batch_size(usize::MAX);
    let l = c.limits(Some(usize::MAX), 500);
    assert_eq!((l.slots, l.batch_size, l.prefetch), (usize::MAX, ProcessorConfig::MAX_BATCH_SIZE, usize::MAX));
    // The default batch size (the consumer's max.poll.records) is clamped too.
    let l = ProcessorConfig::new().limits(Some(2), usize::MAX);
    assert_eq!(l.batch_size, ProcessorConfig::MAX_BATCH_SIZE);
}

fn handle() -> (ProcessorHandle, watch::Receiver<Signal>) {
    let (tx, rx) = watch::channel(Signal::Run);
    (ProcessorHandle { signal: Arc::new(tx), metrics: Arc::new(MetricsSnapshot::default) }, rx)
}

#[test]
fn a_handle_shutdown_with_duration_max_is_a_far_deadline_then_an_abort() {
    let (h, rx) = handle();
    let before = Instant::now();
    h.close(Duration::MAX);
    match *rx.borrow() {
        Signal::Shutdown(deadline) => assert!(deadline > before + ProcessorConfig::MAX_DURATION),
        other => panic!("{other:?}"),
    }
    h.close(Duration::MAX);
    assert_eq!(*rx.borrow(), Signal::Abort, "the second call aborts");
}
