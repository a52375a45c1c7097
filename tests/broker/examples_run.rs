//! The examples, run as programs against the real broker (each on its own topic), and
//! `ShareConsumer::stream` against the real broker.
//!
//! The tests run the example binaries in target/<profile>/examples/. A plain `cargo test`,
//! `cargo build --examples` or `cargo build --all-targets` builds them; `cargo test --test
//! examples_run` alone does not, and `cargo test --all-targets` builds examples only as test
//! harnesses (examples/<name>-<hash>), which cannot run them. A missing or outdated binary
//! fails the test with that advice; nothing is skipped.

use crate::common;

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::{AcknowledgeType, Error, ShareConsumer};

/// How long one example may run (it gives up on its own after about 20 s of consuming).
const EXAMPLE_TIMEOUT: Duration = Duration::from_secs(120);

/// target/<profile>/examples/<name>, next to this test binary (target/<profile>/deps/...).
fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>");
    let bin = profile_dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let built = match std::fs::metadata(&bin).and_then(|m| m.modified()) {
        Ok(t) => t,
        Err(_) => panic!(
            "example binary {} is missing: run `cargo build --examples` (or a plain `cargo test`, \
             which builds them) first; `cargo test --all-targets` builds examples only as test harnesses",
            bin.display()
        ),
    };
    // The sources the example was built from (cargo's dep-info next to it) must not have
    // changed since, or it runs outdated code. Edits made after this test binary was built
    // are ignored: they are not in this test either.
    let this_build = mtime(&exe).expect("the test binary's mtime");
    for src in dep_info_sources(&bin.with_extension("d")) {
        if let Some(t) = mtime(&src) {
            assert!(
                t > this_build || t <= built,
                "example binary {} is older than {}: rebuild it with `cargo build --examples`",
                bin.display(),
                src.display()
            );
        }
    }
    bin
}

/// The files listed in a cargo dep-info file (`target: dep dep ...`, spaces escaped as `\ `).
fn dep_info_sources(d: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(d).unwrap_or_default();
    let deps = text.lines().next().and_then(|l| l.split_once(": ")).map_or("", |(_, deps)| deps);
    let mut out = Vec::new();
    let mut path = String::new();
    for token in deps.split(' ') {
        if let Some(part) = token.strip_suffix('\\') {
            path.push_str(part);
            path.push(' ');
            continue;
        }
        path.push_str(token);
        if !path.is_empty() {
            out.push(PathBuf::from(std::mem::take(&mut path)));
        }
    }
    out
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Runs an example on a fresh topic with 100 demo records; returns its stdout after checking
/// that it exited with status 0 and printed `expected` (each line of it).
fn run_example(name: &str, expected: &[&str]) -> String {
    let bin = example_binary(name);
    let topic = common::unique(&format!("example-{name}"));
    let mut child = Command::new(&bin)
        .args([common::bootstrap(), topic.clone()])
        .env("DEMO_RECORDS", "100")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    // Read both pipes on threads so a chatty child never blocks on a full pipe.
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().expect("stdout")));
    let err = read(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the example") {
            break status;
        }
        if start.elapsed() > EXAMPLE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "example {name} still running after {EXAMPLE_TIMEOUT:?}; stdout:\n{}\nstderr:\n{}",
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (stdout, stderr) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    assert!(
        status.success(),
        "example {name} on topic {topic} exited with {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for line in expected {
        assert!(stdout.contains(line), "example {name}: no {line:?} in stdout:\n{stdout}\nstderr:\n{stderr}");
    }
    stdout
}

#[test]
fn implicit_example_consumes_everything() {
    let out = run_example("implicit", &["received 100 records", "records by delivery count: {1: 100}"]);
    assert!(out.contains("records/s"), "{out}");
}

#[test]
fn explicit_example_releases_and_rejects() {
    run_example(
        "explicit",
        &[
            "received 100 records",
            "accepted 98, rejected 2, released 10",
            "records by delivery count: {1: 100, 2: 10}",
            "the broker confirmed 110 acknowledgements",
        ],
    );
}

#[test]
fn concurrent_workers_example_acks_from_workers() {
    let out = run_example(
        "concurrent_workers",
        &["received 100 records", "{Accept: 96, Release: 10, Reject: 4}", "records by delivery count: {1: 100, 2: 10}"],
    );
    assert!(out.contains("of 16 workers busy at once"), "{out}");
}

#[test]
fn processor_example_runs_handlers_concurrently_and_retries_in_place() {
    let out = run_example(
        "processor",
        &[
            "processed 100 records",
            "outcomes: {\"Accept\": 96, \"DeadLetter\": 4}",
            "records by delivery count: {1: 100}",
            "dead-lettered 4 to ",
        ],
    );
    assert!(out.contains("retried 10"), "{out}");
}

#[test]
fn renewal_loop_example_keeps_slow_records_with_renew() {
    let out = run_example("renewal_loop", &["processed 100 records", "records by delivery count: {1: 100}"]);
    let renewals: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("renewals: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no renewals line: {out}"));
    assert!(renewals >= 4, "the four slow records are renewed at least once each: {out}");
}

/// Built only with the `otel` feature (scripts/test turns it on).
#[cfg(feature = "otel")]
#[test]
fn traced_example_processes_each_record_in_its_producers_trace() {
    let out = run_example("traced", &["10 of 10 records processed in their producer's trace"]);
    // The console exporter's spans: a producer's span, and a consumer span that has one as parent.
    assert!(out.contains("Name         : checkout") && out.contains("Kind         : Consumer"), "{out}");
}

#[test]
fn blocking_example_stops_on_wakeup() {
    run_example("blocking", &["received 100 records", "records by delivery count: {1: 100}"]);
}

/// Collects `n` items of a stream (records, or the first error) within `within`.
async fn take_records<S>(stream: &mut S, n: usize, within: Duration) -> Vec<kafka_share::ConsumerRecord>
where
    S: futures::Stream<Item = kafka_share::Result<kafka_share::ConsumerRecord>> + Unpin,
{
    let mut got = Vec::new();
    let end = tokio::time::Instant::now() + within;
    while got.len() < n {
        match tokio::time::timeout_at(end, stream.next()).await {
            Ok(Some(Ok(r))) => got.push(r),
            Ok(Some(Err(e))) => panic!("the stream yielded an error after {} records: {e}", got.len()),
            Ok(None) => panic!("the stream ended after {} records", got.len()),
            Err(_) => panic!("only {} of {n} records within {within:?}", got.len()),
        }
    }
    got
}

#[tokio::test]
async fn stream_yields_every_record_once_and_ends_when_closed() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "stream", 3).await;
    common::produce(&bs, &topic, 3, 300, "v").await;
    let group = common::new_group(&admin, "g-stream", None).await;
    let consumer = ShareConsumer::connect(common::consumer_config(&bs, &group).max_poll_records(50)).await.unwrap();
    consumer.subscribe([topic.clone()]).unwrap();

    let mut records = consumer.stream(Duration::from_millis(500));
    let got = take_records(&mut records, 300, Duration::from_secs(30)).await;
    let distinct: HashSet<(i32, i64)> = got.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(distinct.len(), 300, "every record once");
    assert!(got.iter().all(|r| r.delivery_count == 1));
    let results = consumer.commit_sync(Duration::from_secs(10)).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");

    // Nothing is left: the stream keeps polling (yielding nothing) until the consumer is
    // closed from elsewhere, then ends.
    let (next, closed) = tokio::join!(tokio::time::timeout(Duration::from_secs(15), records.next()), async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        consumer.close(Duration::from_secs(10)).await
    });
    closed.unwrap();
    match next {
        Ok(None) => {}
        Ok(Some(item)) => panic!("expected the end of the stream, got {:?}", item.map(|r| (r.partition, r.offset))),
        Err(_) => panic!("the stream did not end after close"),
    }
    assert!(records.next().await.is_none(), "the stream stays ended");
}

#[tokio::test]
async fn stream_in_explicit_mode_redelivers_released_records_and_yields_wakeup() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "stream-explicit", 1).await;
    common::produce(&bs, &topic, 1, 10, "v").await;
    let group = common::new_group(&admin, "g-stream-explicit", None).await;
    let cfg = common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = ShareConsumer::connect(cfg).await.unwrap();
    consumer.subscribe([topic.clone()]).unwrap();

    // Acknowledge each record as it comes out: release offsets 0, 5 on their first delivery.
    let mut records = consumer.stream(Duration::from_millis(500));
    let mut seen = Vec::new();
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.len() < 12 {
        let r = match tokio::time::timeout_at(end, records.next()).await {
            Ok(Some(r)) => r.expect("a record"),
            other => panic!("after {} records: {:?}", seen.len(), other.map(|o| o.map(|r| r.map(|r| r.offset)))),
        };
        let ack =
            if r.offset % 5 == 0 && r.delivery_count == 1 { AcknowledgeType::Release } else { AcknowledgeType::Accept };
        consumer.acknowledge_with(&r, ack).unwrap();
        seen.push((r.offset, r.delivery_count));
    }
    let mut again: Vec<i64> = seen.iter().filter(|(_, dc)| *dc == 2).map(|(o, _)| *o).collect();
    again.sort();
    assert_eq!(again, vec![0, 5], "released records come back with delivery count 2: {seen:?}");
    let results = consumer.commit_sync(Duration::from_secs(10)).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");

    // wakeup() makes the pending poll fail: the stream yields the error and goes on.
    consumer.wakeup();
    match tokio::time::timeout(Duration::from_secs(5), records.next()).await {
        Ok(Some(Err(Error::Wakeup))) => {}
        other => panic!("expected Err(Wakeup), got {:?}", other.map(|o| o.map(|r| r.map(|r| r.offset)))),
    }
    consumer.close(Duration::from_secs(10)).await.unwrap();
    assert!(records.next().await.is_none(), "closed: the stream ends");
}
