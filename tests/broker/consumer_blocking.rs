//! The blocking consumer against the real broker: its iterator, `wakeup()` from another
//! thread ending a blocked poll, and `commit_async`'s handle waited on.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use kafka_share::consumer::{blocking, AcknowledgeType, AcknowledgementMode};
use kafka_share::Error;

const N: usize = 50;

#[test]
fn iter_yields_every_record_wakeup_ends_it_and_commit_async_can_be_waited_on() {
    let bs = common::bootstrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (topic, group) = rt.block_on(async {
        let admin = common::admin().await;
        let topic = common::new_topic(&admin, "blocking-iter", 2).await;
        common::produce(&bs, &topic, 2, N, "v").await;
        (topic.clone(), common::new_group(&admin, "g-blocking-iter", None).await)
    });
    drop(rt);
    let cfg = common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = Arc::new(blocking::ShareConsumer::connect(cfg).unwrap());
    consumer.subscribe([topic.as_str()]).unwrap();

    // Every record, acknowledged one by one; the commit's results waited on.
    let mut got = 0;
    for record in consumer.iter(Duration::from_millis(500)) {
        let record = record.expect("a record");
        consumer.acknowledge_with(&record, AcknowledgeType::Accept).unwrap();
        got += 1;
        if got == N {
            break;
        }
    }
    let results = consumer.commit_async().unwrap().wait().expect("commit results");
    assert!(results.is_ok(), "{:?}", results.first_error());
    let partitions = results.into_inner();
    assert!(!partitions.is_empty() && partitions.len() <= 2, "the topic's partitions: {partitions:?}");

    // Nothing left to read: the iterator's poll ends with Wakeup when another thread says
    // so. No race either way: a wakeup before the poll starts ends the next poll.
    let waker = {
        let c = consumer.clone();
        std::thread::spawn(move || c.wakeup())
    };
    let mut it = consumer.iter(Duration::from_secs(60));
    match it.next() {
        Some(Err(Error::Wakeup)) => {}
        other => panic!("expected Wakeup, got {other:?}"),
    }
    waker.join().unwrap();
    drop(it);
    Arc::try_unwrap(consumer).ok().expect("one owner").close(Duration::from_secs(10)).unwrap();
}

// Dropping the consumer wherever its last owner goes: a drop never panics, and it still
// closes the consumer (the member leaves the group). The group's session timeout is 60 s,
// so a member gone well before that left by a close, not by expiring.

/// A topic with records, a group whose members expire only after 60 s, and the admin (on a
/// runtime of its own, used only through `block_on` on this thread).
struct Fixture {
    rt: tokio::runtime::Runtime,
    admin: kafka_share::admin::Admin,
    bootstrap: String,
    topic: String,
    group: String,
}

const SLOW_SESSION_MS: &str = "60000";

fn fixture(prefix: &str) -> Fixture {
    let bootstrap = common::bootstrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (admin, topic, group) = rt.block_on(async {
        let admin = common::admin().await;
        let topic = common::new_topic(&admin, prefix, 1).await;
        common::produce(&bootstrap, &topic, 1, 10, "v").await;
        let group = common::new_group(&admin, &format!("g-{prefix}"), None).await;
        admin.set_group_config(&group, "share.session.timeout.ms", SLOW_SESSION_MS).await.unwrap();
        (admin, topic, group)
    });
    Fixture { rt, admin, bootstrap, topic, group }
}

impl Fixture {
    /// A member of the group holding records it has not acknowledged.
    fn consumer(&self) -> blocking::ShareConsumer {
        let cfg =
            common::consumer_config(&self.bootstrap, &self.group).acknowledgement_mode(AcknowledgementMode::Explicit);
        let consumer = blocking::ShareConsumer::connect(cfg).unwrap();
        consumer.subscribe([self.topic.as_str()]).unwrap();
        for _ in 0..60 {
            if !consumer.poll(Duration::from_millis(500)).unwrap().is_empty() {
                self.wait_members(1);
                return consumer;
            }
        }
        panic!("no records for {} in 30 s of polls", self.group);
    }

    /// Waits until the group has `n` members (a generous bound, far below the session
    /// timeout when `n` is 0).
    fn wait_members(&self, n: usize) {
        self.rt.block_on(async {
            let end = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                let d = self.admin.describe_share_group(&self.group).await.unwrap();
                if d.members.len() == n {
                    return;
                }
                assert!(tokio::time::Instant::now() < end, "{} has {} members, not {n}", self.group, d.members.len());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }
}

/// The panics on threads named `thread_name` (set up before the first one can happen). A
/// panic inside a task's drop is caught by tokio and would pass unseen otherwise.
#[cfg(feature = "prometheus")]
fn panics_on(thread_name: &'static str) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() == Some(thread_name) {
            record.lock().unwrap_or_else(|p| p.into_inner()).push(info.to_string());
        }
        previous(info);
    }));
    seen
}

#[test]
fn drop_inside_a_current_thread_runtime_closes_without_panicking() {
    let f = fixture("blocking-drop-ct");
    let consumer = f.consumer();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move { drop(consumer) });
    f.wait_members(0);
}

#[test]
fn drop_on_a_multi_thread_runtime_worker_closes_without_panicking() {
    let f = fixture("blocking-drop-mt");
    let consumer = f.consumer();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async move { tokio::spawn(async move { drop(consumer) }).await })
        .expect("the drop did not panic");
    f.wait_members(0);
}

#[test]
fn close_in_spawn_blocking_then_drop_does_not_panic() {
    let f = fixture("blocking-close-sb");
    let consumer = f.consumer();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let closed =
        rt.block_on(async move { tokio::task::spawn_blocking(move || consumer.close(Duration::from_secs(10))).await });
    closed.expect("no panic").expect("closed");
    f.wait_members(0);
    // And on a plain thread, as always.
    let consumer = f.consumer();
    consumer.close(Duration::from_secs(10)).unwrap();
    f.wait_members(0);
}

/// The docs' metrics pattern: the collector of a `/metrics` endpoint holds a clone of the
/// consumer; once the program's own clone is gone, stopping the endpoint drops the last one,
/// on a worker thread of the endpoint's runtime.
#[cfg(feature = "prometheus")]
#[test]
fn last_clone_held_by_a_metrics_endpoint_closes_when_the_endpoint_stops() {
    use kafka_share::prometheus::{serve, Registry, SnapshotCollector};
    use std::io::{Read, Write};

    const WORKER: &str = "metrics-endpoint-worker";
    let panics = panics_on(WORKER);
    let f = fixture("blocking-drop-prom");
    let consumer = Arc::new(f.consumer());
    let mut registry = Registry::default();
    let c = consumer.clone();
    registry.register_collector(Box::new(SnapshotCollector::new("blocking-drop", move || c.metrics())));
    let rt = tokio::runtime::Builder::new_multi_thread().thread_name(WORKER).enable_all().build().unwrap();
    let endpoint = rt.block_on(serve("127.0.0.1:0", Arc::new(registry))).unwrap();
    // One scrape: the collector reads the consumer.
    let mut s = std::net::TcpStream::connect(endpoint.local_addr()).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.contains("client_id=\"blocking-drop\""), "{text}");

    drop(consumer);
    // Stopping the endpoint aborts its task; the runtime drops it, and with it the last
    // clone, on one of its workers.
    drop(endpoint);
    f.wait_members(0);
    let panics = panics.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(panics.is_empty(), "{panics:?}");
    drop(rt);
}
