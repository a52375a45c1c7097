//! The processing engine against the fake cluster (feature `test-util`): what needs no real
//! broker. Every setting at its extreme runs through a real engine; the cases that used to
//! abort the process (a panic in `Drop` while panicking) run in a child process, so an
//! abort fails the test instead of ending the test binary. Every wait is for a condition
//! with a generous deadline.

use crate::fake_broker;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fake_broker::{eventually, FakeCluster, FakeConfig};
use futures::future::BoxFuture;
use kafka_share::processor::{
    BatchHandler, Delivery, Handler, Outcome, Processor, ProcessorConfig, Running, Stop, PROCESSOR,
};
use kafka_share::ShareConsumer;

const T: Duration = Duration::from_secs(30);
const RECORDS: i64 = 20;

/// Selects the case a child process runs (see `child_case`).
const CHILD: &str = "KAFKA_SHARE_PROCESSOR_FAKE_CHILD";

async fn fake() -> FakeCluster {
    FakeCluster::start(FakeConfig::default().records(RECORDS)).await
}

/// A consumer on the fake, subscribed and never polled (the engine takes its records).
async fn consumer(fake: &FakeCluster) -> ShareConsumer {
    let c = ShareConsumer::connect(fake.consumer_config("g")).await.expect("connect to the fake");
    c.subscribe([fake.topic()]).expect("subscribe");
    c
}

/// Runs a per-record engine that accepts everything.
async fn accept_all(fake: &FakeCluster, config: ProcessorConfig) -> (Running, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let running = Processor::new(consumer(fake).await, config).run(move |_d: Delivery| {
        seen.fetch_add(1, Ordering::Relaxed);
        async { Outcome::Accept }
    });
    (running, calls)
}

async fn wait_all_accepted(fake: &FakeCluster) {
    let done = eventually(T, || fake.accepted(0).len() == RECORDS as usize).await;
    assert!(done, "accepted {:?} of {RECORDS}:\n{}", fake.accepted(0), fake.dump());
}

/// Runs the engine with `config` to the end of the topic and shuts it down cleanly.
async fn runs_to_the_end(config: ProcessorConfig) {
    let fake = fake().await;
    let (running, _) = accept_all(&fake, config).await;
    wait_all_accepted(&fake).await;
    let report = running.close(T).await.expect("a clean shutdown");
    assert_eq!(report.accepted, RECORDS as u64, "{report:?}");
}

#[tokio::test]
async fn concurrency_usize_max_runs() {
    runs_to_the_end(ProcessorConfig::new().concurrency(usize::MAX)).await;
}

#[tokio::test]
async fn prefetch_usize_max_runs() {
    runs_to_the_end(ProcessorConfig::new().prefetch(usize::MAX)).await;
}

#[tokio::test]
async fn max_unstarted_duration_max_runs() {
    runs_to_the_end(ProcessorConfig::new().max_unstarted(Duration::MAX)).await;
}

/// Accepts every batch.
struct AcceptBatches;

impl BatchHandler for AcceptBatches {
    fn handle<'a>(&'a mut self, batch: &'a [Delivery]) -> BoxFuture<'a, Result<Vec<Outcome>, Stop>> {
        Box::pin(async move { Ok(vec![Outcome::Accept; batch.len()]) })
    }
}

#[tokio::test]
async fn batch_size_usize_max_with_a_pool_runs() {
    let fake = fake().await;
    let config = ProcessorConfig::new().batch_size(usize::MAX);
    let running = Processor::new(consumer(&fake).await, config).run_batch_pool(vec![AcceptBatches, AcceptBatches]);
    wait_all_accepted(&fake).await;
    let report = running.close(T).await.expect("a clean shutdown");
    assert_eq!(report.accepted, RECORDS as u64, "{report:?}");
}

/// The longest backoff there is: each record is tried once, then waits (held here) until the
/// shutdown gives it back.
#[tokio::test]
async fn retry_backoff_duration_max_holds_the_record_until_shutdown() {
    let fake = fake().await;
    let config = ProcessorConfig::new().retry_backoff(Duration::MAX, Duration::MAX);
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let running = Processor::new(consumer(&fake).await, config).run(move |_d: Delivery| {
        seen.fetch_add(1, Ordering::Relaxed);
        async { Outcome::Retry }
    });
    let tried = eventually(T, || calls.load(Ordering::Relaxed) >= RECORDS as usize).await;
    assert!(tried, "handler calls {} of {RECORDS}:\n{}", calls.load(Ordering::Relaxed), fake.dump());
    let report = running.close(T).await.expect("a clean shutdown");
    assert_eq!(calls.load(Ordering::Relaxed), RECORDS as usize, "no record tried twice");
    assert_eq!((report.accepted, report.released), (0, RECORDS as u64), "{report:?}");
}

#[tokio::test]
async fn a_handle_shutdown_with_duration_max_stops_the_engine() {
    let fake = fake().await;
    let (running, _) = accept_all(&fake, ProcessorConfig::new()).await;
    wait_all_accepted(&fake).await;
    running.handle().close(Duration::MAX);
    let report = running.join().await.expect("a clean stop");
    assert_eq!(report.accepted, RECORDS as u64, "{report:?}");
}

/// Zero: no record waits unstarted while every slot is busy. With more free slots than the
/// topic has records and no prefetch, a slot is free for every record the engine acquires:
/// none may go back unstarted.
#[tokio::test]
async fn max_unstarted_zero_releases_nothing_a_free_slot_can_start() {
    let fake = fake().await;
    let config = ProcessorConfig::new().concurrency(64).prefetch(0).max_unstarted(Duration::ZERO);
    let (running, calls) = accept_all(&fake, config).await;
    wait_all_accepted(&fake).await;
    let report = running.close(T).await.expect("a clean shutdown");
    assert_eq!(report.released_unstarted, 0, "{report:?}");
    assert_eq!(calls.load(Ordering::Relaxed), RECORDS as usize);
}

/// The child process's side of `in_a_child_process`: runs the case named in `CHILD`, and
/// nothing when it is unset (as one of the parent's tests).
#[tokio::test]
async fn child_case() {
    let Ok(case) = std::env::var(CHILD) else { return };
    let fake = fake().await;
    let config = ProcessorConfig::new().close_timeout(Duration::MAX);
    let (running, _) = accept_all(&fake, config).await;
    wait_all_accepted(&fake).await;
    match case.as_str() {
        // Used to panic in `shutdown`, then again in `Drop` while unwinding: an abort.
        "shutdown-none" => {
            let report = running.close(None).await.expect("a clean shutdown");
            assert_eq!(report.accepted, RECORDS as u64, "{report:?}");
        }
        // Used to panic in `Drop`.
        "drop" => {
            drop(running);
            // The engine shuts down on its own: its consumer leaves the group.
            let left = eventually(T, || fake.log().iter().any(|l| l.is_leave())).await;
            assert!(left, "no leave after the drop:\n{}", fake.dump());
        }
        other => panic!("unknown case {other}"),
    }
}

/// Runs `child_case` with `case` in a child process (this test binary again) and expects
/// it to pass: an abort there ends the child, not this process.
fn in_a_child_process(case: &str) {
    let exe = std::env::current_exe().expect("the test binary's path");
    // The test's name in this binary: its module path without the crate's name.
    let name = format!("{}::child_case", module_path!().split_once("::").map_or("", |(_, m)| m));
    let out = Command::new(exe)
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .output()
        .expect("run the test binary again");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "case {case}: the child ended with {}\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("1 passed"), "case {case}: the child did not run it\n{stdout}\n{stderr}");
}

#[test]
fn shutdown_timeout_duration_max_then_shutdown_none_neither_panics_nor_aborts() {
    in_a_child_process("shutdown-none");
}

#[test]
fn shutdown_timeout_duration_max_then_drop_does_not_panic() {
    in_a_child_process("drop");
}

/// One engine shared three ways, as a service holds it: a metrics endpoint and a signal
/// handler on clones of its handle, and the task that joins `Running`. The metrics stay
/// readable while the shutdown waits for a running handler, and after the end.
#[tokio::test]
async fn one_handle_serves_metrics_and_shutdown_while_running_is_joined() {
    let fake = fake().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let (g, seen) = (gate.clone(), calls.clone());
    // One record is held in its handler until the gate opens; the others are accepted.
    let running = Processor::new(consumer(&fake).await, ProcessorConfig::new()).run(move |_d: Delivery| {
        let (g, first) = (g.clone(), seen.fetch_add(1, Ordering::Relaxed) == 0);
        async move {
            if first {
                let _ = g.acquire().await;
            }
            Outcome::Accept
        }
    });
    let handle = running.handle();
    let endpoint = handle.clone();
    let in_flight = |h: &kafka_share::processor::ProcessorHandle| h.metrics().get(PROCESSOR, "records-in-flight");
    let accepted = |h: &kafka_share::processor::ProcessorHandle| h.metrics().get(PROCESSOR, "records-accepted-total");
    let all_but_one = eventually(T, || accepted(&endpoint) == Some((RECORDS - 1) as f64)).await;
    assert!(all_but_one, "accepted {:?}:\n{}", accepted(&endpoint), fake.dump());

    let joiner = tokio::spawn(running.join());
    let signal = handle.clone();
    tokio::spawn(async move { signal.close(T) }).await.expect("the signal task");
    // Shutting down, one handler still running: the endpoint still reads the engine.
    let held = eventually(T, || in_flight(&endpoint) == Some(1.0)).await;
    assert!(held, "in flight {:?} during the shutdown", in_flight(&endpoint));
    assert!(!handle.is_stopped());
    gate.add_permits(1);
    let report = joiner.await.expect("the joining task").expect("a clean stop");
    assert_eq!(report.accepted, RECORDS as u64, "{report:?}");
    assert!(handle.is_stopped());
    // After the end: the last figures, not a blank snapshot.
    assert_eq!(accepted(&endpoint), Some(RECORDS as f64));
    assert_eq!(in_flight(&endpoint), Some(0.0));
}

/// A service with state, not `Clone`: the engine lends it to every call by reference.
struct CountingService {
    calls: AtomicUsize,
    /// A `Handler` needs no `Clone`: this field would forbid it.
    _not_clone: std::sync::Mutex<()>,
}

impl Handler for CountingService {
    async fn handle(&self, delivery: Delivery) -> Outcome {
        self.calls.fetch_add(1, Ordering::Relaxed);
        match delivery.record().offset % 2 {
            0 => Outcome::Accept,
            _ => Outcome::Reject,
        }
    }
}

#[tokio::test]
async fn a_handler_type_with_state_runs_beside_closures() {
    let fake = fake().await;
    let service = CountingService { calls: AtomicUsize::new(0), _not_clone: std::sync::Mutex::new(()) };
    let running = Processor::new(consumer(&fake).await, ProcessorConfig::new()).run(service);
    let half = (RECORDS / 2) as usize;
    let done = eventually(T, || fake.accepted(0).len() == half && fake.rejected(0).len() == half).await;
    assert!(done, "accepted {:?}, rejected {:?}:\n{}", fake.accepted(0), fake.rejected(0), fake.dump());
    let report = running.close(T).await.expect("a clean shutdown");
    assert_eq!((report.accepted, report.rejected), ((RECORDS / 2) as u64, (RECORDS / 2) as u64), "{report:?}");
}

/// Counts a handler's end (its future dropped: finished or aborted).
struct Ended(Arc<AtomicUsize>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The next "signal": a future that ends when `n` is notified (a permit waits if no one
/// listens yet), standing in for `tokio::signal::ctrl_c`.
fn signal_from(n: &Arc<tokio::sync::Notify>) -> impl FnMut() -> BoxFuture<'static, ()> {
    let n = n.clone();
    move || {
        let n = n.clone();
        Box::pin(async move { n.notified().await })
    }
}

/// The first signal shuts down gracefully (the running handler is waited for), the second
/// aborts it: the helper every service would write, fed futures instead of real signals.
#[tokio::test]
async fn shutdown_on_a_first_signal_waits_and_a_second_aborts() {
    let fake = fake().await;
    let (started, ended) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, e) = (started.clone(), ended.clone());
    // One handler slot; every handler runs until aborted, and counts its end in `ended`.
    let running =
        Processor::new(consumer(&fake).await, ProcessorConfig::new().concurrency(1)).run(move |_d: Delivery| {
            s.fetch_add(1, Ordering::Relaxed);
            let end = Ended(e.clone());
            async move {
                let _end = end;
                std::future::pending::<Outcome>().await
            }
        });
    let began = eventually(T, || started.load(Ordering::Relaxed) == 1).await;
    assert!(began, "no handler started:\n{}", fake.dump());
    let handle = running.handle();
    let notify = Arc::new(tokio::sync::Notify::new());
    let helper = tokio::spawn({
        let (handle, signal) = (handle.clone(), signal_from(&notify));
        async move { handle.close_on(signal, Duration::MAX).await }
    });
    let joiner = tokio::spawn(running.join());

    notify.notify_one();
    // The shutdown began: what waited for the busy slot went back unstarted...
    let unstarted = |h: &kafka_share::processor::ProcessorHandle| {
        h.metrics().get(PROCESSOR, "records-released-unstarted-total").unwrap_or(0.0)
    };
    let stopping = eventually(T, || unstarted(&handle) >= 1.0).await;
    assert!(stopping, "nothing released unstarted after the first signal:\n{}", fake.dump());
    // ...and, graceful without a deadline, the running handler goes on.
    assert_eq!(ended.load(Ordering::Relaxed), 0, "the first signal must not abort the handler");
    assert!(!handle.is_stopped() && !helper.is_finished() && !joiner.is_finished());

    notify.notify_one();
    let report = tokio::time::timeout(T, joiner).await.expect("stops after the second signal");
    let report = report.expect("the joining task").expect("an aborted stop is still a clean one");
    assert_eq!((report.aborted, ended.load(Ordering::Relaxed)), (1, 1), "{report:?}");
    tokio::time::timeout(T, helper)
        .await
        .expect("the helper ends with the engine")
        .expect("the helper task");
    assert!(handle.is_stopped());
}

/// An engine that stops for another reason ends the helper too: no task is left waiting
/// for a signal that will never matter.
#[tokio::test]
async fn shutdown_on_returns_when_the_engine_stops_otherwise() {
    let fake = fake().await;
    let (running, _) = accept_all(&fake, ProcessorConfig::new()).await;
    let handle = running.handle();
    let notify = Arc::new(tokio::sync::Notify::new());
    let helper = tokio::spawn({
        let (handle, signal) = (handle.clone(), signal_from(&notify));
        async move { handle.close_on(signal, T).await }
    });
    running.close(T).await.expect("a clean shutdown");
    tokio::time::timeout(T, helper)
        .await
        .expect("the helper ends with the engine")
        .expect("the helper task");
}

/// A worker on a topic that does not exist used to idle without a word: the consumer says
/// it at WARN, naming the topic. (One thread: the subscriber set here sees the driver's
/// tasks.)
#[tokio::test(flavor = "current_thread")]
async fn a_missing_input_topic_is_said_at_warn_naming_it() {
    let (logs, _guard) = crate::logs::Logs::warnings();
    let fake = fake().await;
    let c = ShareConsumer::connect(fake.consumer_config("g")).await.expect("connect to the fake");
    c.subscribe(["no-such-topic"]).expect("subscribe");
    let running = Processor::new(c, ProcessorConfig::new()).run(|_d: Delivery| async { Outcome::Accept });
    let said = eventually(T, || logs.text().lines().any(|l| l.contains("WARN") && l.contains("no-such-topic"))).await;
    assert!(said, "no warning naming the topic:\n{}", logs.text());
    running.close(T).await.expect("a clean shutdown");
}

/// `Outcome::DeadLetter` without a destination is a REJECT: the broker archives the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_without_a_destination_is_rejected() {
    let fake = fake().await;
    let running = Processor::new(consumer(&fake).await, ProcessorConfig::new()).run(|d: Delivery| async move {
        if d.record().offset % 2 == 0 {
            d.dead_letter("even")
        } else {
            Outcome::Accept
        }
    });
    let done = eventually(T, || fake.done(0).len() == RECORDS as usize).await;
    assert!(done, "settled {:?} of {RECORDS}:\n{}", fake.done(0), fake.dump());
    let report = running.close(T).await.expect("a clean shutdown");
    assert_eq!((report.accepted, report.rejected), (RECORDS as u64 / 2, RECORDS as u64 / 2), "{report:?}");
    assert_eq!(fake.state(0, 0), fake_broker::RecordState::Rejected);
}

/// Dead-letters even offsets at their first delivery and accepts the rest (a batch handler).
struct DeadLetterEvenFirst;

impl BatchHandler for DeadLetterEvenFirst {
    fn handle<'a>(&'a mut self, batch: &'a [Delivery]) -> BoxFuture<'a, Result<Vec<Outcome>, Stop>> {
        Box::pin(async move {
            let decide = |d: &Delivery| match d.record().offset % 2 == 0 && d.delivery_count() == 1 {
                true => d.dead_letter("even, first delivery"),
                false => Outcome::Accept,
            };
            Ok(batch.iter().map(decide).collect())
        })
    }
}

/// The batch form: `Outcome::DeadLetter` without a destination is a REJECT, as in the
/// per-record form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_handlers_dead_letter_without_a_destination_is_rejected() {
    let fake = fake().await;
    let running = Processor::new(consumer(&fake).await, ProcessorConfig::new()).run_batches(DeadLetterEvenFirst);
    let done = eventually(T, || fake.done(0).len() == RECORDS as usize).await;
    assert!(done, "settled {:?} of {RECORDS}:\n{}", fake.done(0), fake.dump());
    let report = running.close(T).await.expect("a clean shutdown");
    assert_eq!((report.accepted, report.rejected), (RECORDS as u64 / 2, RECORDS as u64 / 2), "{report:?}");
    assert_eq!(fake.state(0, 0), fake_broker::RecordState::Rejected);
}

/// A dead-letter destination on the fake whose copies all fail: the fake answers no
/// Produce, and a short delivery timeout ends each copy soon.
async fn failing_dead_letter(fake: &FakeCluster) -> kafka_share::processor::DeadLetter {
    let mut pc = kafka_share::producer::ProducerConfig::new(fake.bootstrap());
    pc.cluster.request_timeout = Duration::from_millis(100);
    (pc.linger, pc.delivery_timeout, pc.max_block) =
        (Duration::ZERO, Duration::from_millis(200), Duration::from_millis(200));
    let producer = kafka_share::Producer::connect(pc).await.expect("a producer on the fake");
    kafka_share::processor::DeadLetter::topic(fake.topic()).producer(producer)
}

/// The batch form: a copy that cannot be sent RELEASEs its record (the batch-mates are
/// ACCEPTed); it comes back and is accepted at its next delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_handlers_dead_letter_copy_that_fails_releases_the_record() {
    let fake = fake().await;
    let config = ProcessorConfig::new().dead_letter(failing_dead_letter(&fake).await);
    let running = Processor::new(consumer(&fake).await, config).run_batches(DeadLetterEvenFirst);
    wait_all_accepted(&fake).await;
    let failures = running.metrics().get(PROCESSOR, "dead-letter-failures-total");
    let report = running.close(T).await.expect("a clean shutdown");
    let half = RECORDS as u64 / 2;
    assert_eq!((report.accepted, report.released, report.rejected), (RECORDS as u64, half, 0), "{report:?}");
    assert_eq!(failures, Some(half as f64));
}

/// A dead-letter copy that cannot be sent (the fake serves no Produce) RELEASEs the record:
/// it comes back, nothing is lost, and each failure is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_copy_that_fails_releases_the_record() {
    let fake = fake().await;
    let config = ProcessorConfig::new().dead_letter(failing_dead_letter(&fake).await);
    let running = Processor::new(consumer(&fake).await, config).run(|d: Delivery| async move {
        if d.delivery_count() == 1 {
            d.dead_letter("first delivery")
        } else {
            Outcome::Accept
        }
    });
    wait_all_accepted(&fake).await;
    let failures = running.metrics().get(PROCESSOR, "dead-letter-failures-total");
    let report = running.close(T).await.expect("a clean shutdown");
    assert_eq!((report.accepted, report.released), (RECORDS as u64, RECORDS as u64), "{report:?}");
    assert_eq!(failures, Some(RECORDS as f64));
}
