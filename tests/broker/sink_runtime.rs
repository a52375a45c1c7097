//! The sink runtime against a real broker (`scripts/kafka up`; fails without one), with
//! in-memory sinks defined here. Every wait is for a condition with a generous deadline;
//! nothing asserts on how long something took.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::sink::{
    Connector, ConnectorConfig, Registry, SinkError, SinkRecord, SinkTask, TaskConfig, Worker, WorkerConfig,
};
use kafka_share::ShareConsumer;

/// What a put decides, given the task number and the batch.
type Behavior = Arc<dyn Fn(usize, Vec<SinkRecord>) -> BoxFuture<'static, Result<(), SinkError>> + Send + Sync>;

#[derive(Debug, Clone)]
struct Seen {
    task: usize,
    partition: i32,
    offset: i64,
    delivery: i16,
    /// Whether `put` took it (answered Ok, or it was not among the failed records).
    taken: bool,
}

#[derive(Clone, Default)]
struct Probe {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Probe {
    fn all(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    /// (partition, offset) -> how many times a put took it.
    fn taken(&self) -> BTreeMap<(i32, i64), usize> {
        let mut m = BTreeMap::new();
        for s in self.all().into_iter().filter(|s| s.taken) {
            *m.entry((s.partition, s.offset)).or_insert(0) += 1;
        }
        m
    }
    fn tasks_that_took(&self) -> BTreeSet<usize> {
        self.all().into_iter().filter(|s| s.taken).map(|s| s.task).collect()
    }
}

struct MemSink {
    task: usize,
    probe: Probe,
    behavior: Behavior,
}

impl SinkTask for MemSink {
    fn start(&mut self, _config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async { Ok(()) })
    }

    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let r = (self.behavior)(self.task, records.iter().map(|r| (*r).clone()).collect()).await;
            let failed: BTreeSet<usize> = match &r {
                Ok(()) => BTreeSet::new(),
                Err(SinkError::Records { failed }) => failed.iter().map(|f| f.index).collect(),
                Err(_) => (0..records.len()).collect(),
            };
            let mut seen = self.probe.seen.lock().unwrap();
            for (i, rec) in records.iter().enumerate() {
                seen.push(Seen {
                    task: self.task,
                    partition: rec.partition,
                    offset: rec.offset,
                    delivery: rec.delivery_count,
                    taken: !failed.contains(&i),
                });
            }
            r
        })
    }
}

fn registry(probe: &Probe, behavior: Behavior) -> Registry {
    let next = Arc::new(AtomicUsize::new(0));
    let probe = probe.clone();
    let mut r = Registry::new();
    r.register("mem", move |_: &TaskConfig| {
        let task = next.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(MemSink { task, probe: probe.clone(), behavior: behavior.clone() }) as Box<dyn SinkTask>)
    });
    r
}

fn ok_after(delay: Duration) -> Behavior {
    Arc::new(move |_, _| {
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok(())
        })
    })
}

fn worker(probe: &Probe, behavior: Behavior) -> Worker {
    Worker::new(WorkerConfig::new(common::bootstrap()), registry(probe, behavior))
}

/// A connector on `topic` in `group` with `tasks` tasks, fast polls, plus `extra`.
fn connector(name: &str, topic: &str, group: &str, tasks: usize, extra: &[(&str, &str)]) -> ConnectorConfig {
    let mut pairs: Vec<(String, String)> = vec![
        ("name".into(), name.into()),
        ("connector.class".into(), "mem".into()),
        ("topics".into(), topic.into()),
        ("tasks.max".into(), tasks.to_string()),
        ("share.group.id".into(), group.into()),
        ("consumer.override.fetch.max.wait.ms".into(), "200".into()),
    ];
    pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    ConnectorConfig::from_pairs(pairs).expect("connector config")
}

/// Spreads the work: at most a few records per poll, so many tasks get some.
const SMALL_POLLS: [(&str, &str); 2] =
    [("consumer.override.share.acquire.mode", "record_limit"), ("consumer.override.max.poll.records", "5")];

async fn wait_until(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + deadline;
    while !cond() {
        assert!(tokio::time::Instant::now() < end, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Produces one record per request (small batches spread over members), round-robin over
/// `partitions`, until stopped; counts what it produced.
struct Feed {
    stop: Arc<AtomicBool>,
    produced: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Feed {
    async fn start(topic: &str, partitions: i32, limit: usize) -> Feed {
        let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
        let stop = Arc::new(AtomicBool::new(false));
        let produced = Arc::new(AtomicUsize::new(0));
        let (s, n, topic) = (stop.clone(), produced.clone(), topic.to_string());
        let task = tokio::spawn(async move {
            let mut i = 0usize;
            while !s.load(Ordering::SeqCst) && i < limit {
                let rec = ProducerRecord::new(topic.clone(), format!("v-{i}")).partition(i as i32 % partitions);
                p.send_and_wait(rec).await.expect("produce");
                i += 1;
                n.store(i, Ordering::SeqCst);
                // Paced, so records keep flowing while the test changes things.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            p.close(Duration::from_secs(10)).await.expect("producer close");
        });
        Feed { stop, produced, task }
    }

    fn count(&self) -> usize {
        self.produced.load(Ordering::SeqCst)
    }

    async fn finish(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("producer task");
        self.produced.load(Ordering::SeqCst)
    }
}

fn metric(c: &Connector, name: &str) -> f64 {
    c.metrics().get(name).unwrap_or_else(|| panic!("no metric {name}"))
}

/// Every produced record was taken by a put exactly once.
fn assert_each_taken_once(probe: &Probe, produced: usize) {
    let taken = probe.taken();
    assert_eq!(taken.len(), produced, "records taken: {} of {produced}", taken.len());
    let twice: Vec<_> = taken.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "taken more than once: {twice:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_tasks_on_three_partitions_all_work_and_accept_each_record_once() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink12", 3).await;
    let group = common::new_group(&admin, "g-sink12", None).await;
    let probe = Probe::default();
    let w = worker(&probe, ok_after(Duration::from_millis(20)));
    let c = w.start_connector(connector("twelve", &topic, &group, 12, &SMALL_POLLS)).await.unwrap();
    assert_eq!(c.tasks(), 12);
    let feed = Feed::start(&topic, 3, 20_000).await;
    wait_until("all 12 tasks to take records", Duration::from_secs(120), || probe.tasks_that_took().len() == 12).await;
    let produced = feed.finish().await;
    wait_until("every record accepted", Duration::from_secs(60), || {
        metric(&c, "sink-record-acknowledge-total") as usize >= produced
    })
    .await;
    assert_each_taken_once(&probe, produced);
    assert_eq!(metric(&c, "sink-record-acknowledge-total") as usize, produced);
    assert_eq!(metric(&c, "sink-record-release-total"), 0.0);
    assert_eq!(metric(&c, "sink-record-active-count"), 0.0);
    assert!(c.failures().is_empty(), "{:?}", c.failures());
    w.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_put_blocks_nobody_and_its_records_are_renewed_not_redelivered() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkhol", 3).await;
    // A 6 s lock (the test broker allows it), so the slow put outlives it.
    let group = common::new_group(&admin, "g-sinkhol", Some(6000)).await;
    let probe = Probe::default();
    let slow_taken = Arc::new(AtomicBool::new(false));
    let release = Arc::new(tokio::sync::Notify::new());
    let slow_batch: Arc<Mutex<Vec<(i32, i64)>>> = Arc::default();
    let behavior: Behavior = {
        let (slow_taken, release, slow_batch) = (slow_taken.clone(), release.clone(), slow_batch.clone());
        Arc::new(move |_, records| {
            let slow = !slow_taken.swap(true, Ordering::SeqCst);
            let (release, slow_batch) = (release.clone(), slow_batch.clone());
            Box::pin(async move {
                if slow {
                    *slow_batch.lock().unwrap() = records.iter().map(|r| (r.partition, r.offset)).collect();
                    release.notified().await;
                } else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(())
            })
        })
    };
    let w = worker(&probe, behavior);
    let c = w
        .start_connector(connector(
            "hol",
            &topic,
            &group,
            4,
            &[SMALL_POLLS[0], SMALL_POLLS[1], ("share.acquisition.lock.timeout.ms", "6000")],
        ))
        .await
        .unwrap();
    let feed = Feed::start(&topic, 3, 300).await;
    wait_until("the slow put to start", Duration::from_secs(60), || !slow_batch.lock().unwrap().is_empty()).await;
    let started = tokio::time::Instant::now();
    let produced = loop {
        if feed.count() >= 300 {
            break feed.finish().await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stuck = slow_batch.lock().unwrap().len();
    // Everything but the slow batch gets through while it is stuck.
    wait_until("the other tasks to take every other record", Duration::from_secs(90), || {
        probe.taken().len() >= produced - stuck
    })
    .await;
    assert!(
        slow_batch.lock().unwrap().iter().all(|k| !probe.taken().contains_key(k)),
        "the slow batch is still in put"
    );
    // Hold it past the lock (6 s), so only renewals keep it.
    let hold = Duration::from_secs(9);
    if started.elapsed() < hold {
        tokio::time::sleep(hold - started.elapsed()).await;
    }
    release.notify_one();
    wait_until("the slow batch accepted", Duration::from_secs(60), || {
        metric(&c, "sink-record-acknowledge-total") as usize >= produced
    })
    .await;
    assert_each_taken_once(&probe, produced);
    if common::broker_has_v2() {
        // Renewed: none of the slow batch was delivered to anyone a second time.
        let slow: BTreeSet<(i32, i64)> = slow_batch.lock().unwrap().iter().copied().collect();
        let again: Vec<Seen> = probe
            .all()
            .into_iter()
            .filter(|s| slow.contains(&(s.partition, s.offset)) && s.delivery > 1)
            .collect();
        assert!(again.is_empty(), "slow records redelivered: {again:?}");
    }
    w.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_come_and_go_while_records_flow() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkscale", 3).await;
    let group = common::new_group(&admin, "g-sinkscale", None).await;
    let probe = Probe::default();
    let w = worker(&probe, ok_after(Duration::from_millis(10)));
    let c = w.start_connector(connector("scale", &topic, &group, 4, &SMALL_POLLS)).await.unwrap();
    let feed = Feed::start(&topic, 3, 50_000).await;
    let acked = |c: &Connector| metric(c, "sink-record-acknowledge-total") as usize;
    wait_until("first records", Duration::from_secs(60), || acked(&c) >= 50).await;
    c.set_tasks(8).await.unwrap();
    assert_eq!(c.tasks(), 8);
    let mark = acked(&c);
    wait_until("the 4 new tasks (4..8) to work", Duration::from_secs(90), || {
        (4..8).all(|t| probe.tasks_that_took().contains(&t))
    })
    .await;
    assert!(acked(&c) > mark, "acknowledgements went on while tasks were added");
    c.set_tasks(4).await.unwrap();
    assert_eq!(c.tasks(), 4);
    assert_eq!(metric(&c, "task-count"), 4.0);
    let mark = acked(&c);
    wait_until("progress after removing 4 tasks", Duration::from_secs(60), || acked(&c) >= mark + 50).await;
    let produced = feed.finish().await;
    wait_until("every record accepted", Duration::from_secs(60), || acked(&c) >= produced).await;
    assert_each_taken_once(&probe, produced);
    assert!(c.failures().is_empty(), "{:?}", c.failures());
    w.close(Duration::from_secs(30)).await.unwrap();
}

/// The group's members and the partitions each holds, by client id; empty until every member
/// has an assignment the broker reports.
async fn members(admin: &kafka_share::admin::Admin, group: &str) -> BTreeMap<String, Vec<i32>> {
    let Ok(d) = admin.describe_share_group(group).await else { return BTreeMap::new() };
    d.members
        .iter()
        .map(|m| (m.client_id.clone(), m.assignment.iter().flat_map(|(_, p)| p.clone()).collect()))
        .collect()
}

/// Waits until the group has `n` members that hold `partitions` partitions between them, each
/// a different one (the broker's assignor splits the partitions while there are no more
/// members than partitions).
async fn wait_for_members(admin: &kafka_share::admin::Admin, group: &str, n: usize, partitions: usize) {
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let m = members(admin, group).await;
        let held: Vec<i32> = m.values().flatten().copied().collect();
        let distinct: BTreeSet<i32> = held.iter().copied().collect();
        if m.len() == n && held.len() == partitions && distinct.len() == partitions {
            return;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {n} members over {partitions} partitions: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_mode_runs_a_consumer_per_partition_each_with_two_tasks_or_more() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkmembers", 3).await;
    let group = common::new_group(&admin, "g-sinkmembers", None).await;
    let probe = Probe::default();
    let w = worker(&probe, ok_after(Duration::from_millis(5)));
    // Six tasks on three partitions: three members of two tasks, a partition each, so each
    // partition has a share session of its own.
    let c = w.start_connector(connector("members", &topic, &group, 6, &[])).await.unwrap();
    assert_eq!(c.tasks(), 6);
    let feed = Feed::start(&topic, 3, 50_000).await;
    wait_for_members(&admin, &group, 3, 3).await;
    let acked = |c: &Connector| metric(c, "sink-record-acknowledge-total") as usize;
    wait_until("first records", Duration::from_secs(60), || acked(&c) >= 30).await;
    // Three tasks: one member (a consumer keeps two tasks or more), holding all three
    // partitions; the others' tasks finished their puts, flushed and stopped.
    c.set_tasks(3).await.unwrap();
    assert_eq!(c.tasks(), 3);
    wait_for_members(&admin, &group, 1, 3).await;
    let mark = acked(&c);
    wait_until("progress with three tasks", Duration::from_secs(60), || acked(&c) >= mark + 30).await;
    // Five tasks: two members (tasks 3 and 2).
    c.set_tasks(5).await.unwrap();
    assert_eq!(c.tasks(), 5);
    assert_eq!(metric(&c, "task-count"), 5.0);
    wait_for_members(&admin, &group, 2, 3).await;
    let produced = feed.finish().await;
    wait_until("every record accepted", Duration::from_secs(60), || acked(&c) >= produced).await;
    assert_each_taken_once(&probe, produced);
    assert!(c.failures().is_empty(), "{:?}", c.failures());
    w.close(Duration::from_secs(30)).await.unwrap();
    assert!(members(&admin, &group).await.is_empty(), "every member left at close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_consumers_max_sets_the_members() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkchosen", 3).await;
    common::produce(&common::bootstrap(), &topic, 3, 60, "m").await;
    // 1: one member for six tasks; 3: a member per task, as Connect runs its tasks.
    for (max, tasks, want) in [("1", 6, 1), ("3", 3, 3)] {
        let group = common::new_group(&admin, "g-sinkchosen", None).await;
        let probe = Probe::default();
        let w = worker(&probe, ok_after(Duration::from_millis(5)));
        let c = w
            .start_connector(connector("chosen", &topic, &group, tasks, &[("share.consumers.max", max)]))
            .await
            .unwrap();
        assert_eq!(c.tasks(), tasks);
        wait_until("all 60 accepted", Duration::from_secs(60), || metric(&c, "sink-record-acknowledge-total") >= 60.0)
            .await;
        wait_for_members(&admin, &group, want, 3).await;
        assert_each_taken_once(&probe, 60);
        w.close(Duration::from_secs(30)).await.unwrap();
    }
}

/// A behaviour that fails every batch holding a record it has not seen before (retriably),
/// so each record's first put fails and its next one goes through.
fn fail_first_sight() -> Behavior {
    let seen: Arc<Mutex<HashSet<i64>>> = Arc::default();
    Arc::new(move |_, records| {
        let mut s = seen.lock().unwrap();
        let mut new = false;
        for r in &records {
            new |= s.insert(r.offset);
        }
        Box::pin(async move {
            if new {
                Err(SinkError::retriable("not yet"))
            } else {
                Ok(())
            }
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retriable_batch_is_tried_again_here_and_keeps_its_delivery_count() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkretry", 1).await;
    let group = common::new_group(&admin, "g-sinkretry", None).await;
    common::produce(&common::bootstrap(), &topic, 1, 30, "r").await;
    let probe = Probe::default();
    let w = worker(&probe, fail_first_sight());
    let c = w.start_connector(connector("retry", &topic, &group, 2, &[])).await.unwrap();
    wait_until("all 30 accepted", Duration::from_secs(60), || metric(&c, "sink-record-acknowledge-total") >= 30.0)
        .await;
    assert_each_taken_once(&probe, 30);
    for s in probe.all() {
        assert_eq!(s.delivery, 1, "the record stayed here, under its lock: {s:?}");
    }
    assert_eq!(metric(&c, "sink-record-release-total"), 0.0);
    assert_eq!(metric(&c, "sink-record-redelivery-total"), 0.0);
    w.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_error_stops_the_task_and_others_take_its_records() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkfatal", 1).await;
    let group = common::new_group(&admin, "g-sinkfatal", None).await;
    common::produce(&common::bootstrap(), &topic, 1, 30, "f").await;
    let probe = Probe::default();
    let fired = Arc::new(AtomicBool::new(false));
    let behavior: Behavior = {
        let fired = fired.clone();
        Arc::new(move |_, _| {
            let fatal = !fired.swap(true, Ordering::SeqCst);
            Box::pin(async move {
                if fatal {
                    Err(SinkError::fatal("credentials revoked"))
                } else {
                    Ok(())
                }
            })
        })
    };
    let w = worker(&probe, behavior);
    let c = w.start_connector(connector("fatal", &topic, &group, 3, &[])).await.unwrap();
    wait_until("all 30 accepted", Duration::from_secs(60), || metric(&c, "sink-record-acknowledge-total") >= 30.0)
        .await;
    assert_each_taken_once(&probe, 30);
    wait_until("the failed task gone", Duration::from_secs(30), || c.tasks() == 2).await;
    let failures = c.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].1.contains("credentials revoked"), "{failures:?}");
    assert_eq!(metric(&c, "task-failed-total"), 1.0);
    assert!(metric(&c, "sink-record-release-total") >= 1.0);
    // set_tasks brings the count back.
    c.set_tasks(3).await.unwrap();
    assert_eq!(c.tasks(), 3);
    w.close(Duration::from_secs(30)).await.unwrap();
}

/// Reads `n` records of `topic` from the start, with a fresh group.
async fn read_topic(admin: &kafka_share::admin::Admin, topic: &str, n: usize) -> Vec<kafka_share::ConsumerRecord> {
    let group = common::new_group(admin, "g-read", None).await;
    let cons = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group)).await.unwrap();
    cons.subscribe([topic.to_string()]).unwrap();
    let got = common::poll_until(&cons, n, Duration::from_secs(60), |_| {}).await;
    cons.close(Duration::from_secs(10)).await.unwrap();
    got
}

fn header<'a>(r: &'a kafka_share::ConsumerRecord, key: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|h| h.key.as_ref() == key.as_bytes())
        .and_then(|h| h.value.as_ref())
        .and_then(|v| std::str::from_utf8(v).ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_goes_to_the_dead_letter_topic_after_the_delivery_limit() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkpoison", 1).await;
    let dlq = common::unique("sinkdlq");
    let group = common::new_group(&admin, "g-sinkpoison", None).await;
    common::produce(&common::bootstrap(), &topic, 1, 10, "p").await;
    let probe = Probe::default();
    let behavior: Behavior = Arc::new(|_, records| {
        let poison = records.iter().any(|r| r.value_str() == Some("p-7"));
        Box::pin(async move {
            if poison {
                Err(SinkError::retriable("p-7 cannot be written"))
            } else {
                Ok(())
            }
        })
    });
    let w = worker(&probe, behavior);
    let c = w
        .start_connector(connector(
            "poison",
            &topic,
            &group,
            2,
            &[
                // One record per poll, so the poison record's retries hold back nothing else.
                SMALL_POLLS[0],
                ("consumer.override.max.poll.records", "1"),
                ("share.max.delivery.count", "3"),
                ("errors.tolerance", "all"),
                ("errors.deadletterqueue.topic.name", &dlq),
                ("errors.deadletterqueue.context.headers.enable", "true"),
            ],
        ))
        .await
        .unwrap();
    wait_until("9 taken and 1 dead-lettered", Duration::from_secs(90), || {
        probe.taken().len() == 9 && metric(&c, "sink-record-dead-letter-total") >= 1.0
    })
    .await;
    wait_until("all acknowledged", Duration::from_secs(30), || metric(&c, "sink-record-acknowledge-total") >= 10.0)
        .await;
    // Tried alone share.max.delivery.count times, here, under its lock (renewed as needed).
    let poison: Vec<Seen> = probe.all().into_iter().filter(|s| s.offset == 7).collect();
    assert_eq!(poison.len(), 3, "{poison:?}");
    assert!(poison.iter().all(|s| s.delivery == 1), "{poison:?}");
    let got = read_topic(&admin, &dlq, 1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let r = &got[0];
    assert_eq!(r.value_str(), Some("p-7"));
    assert_eq!(header(r, "__connect.errors.topic"), Some(topic.as_str()));
    assert_eq!(header(r, "__connect.errors.partition"), Some("0"));
    assert_eq!(header(r, "__connect.errors.offset"), Some("7"));
    assert_eq!(header(r, "__connect.errors.connector.name"), Some("poison"));
    assert!(header(r, "__connect.errors.exception.message").is_some_and(|m| m.contains("cannot be written")), "{r:?}");
    assert_eq!(header(r, "__connect.errors.delivery.count"), Some("1"));
    w.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_dead_letter_topic_a_failed_record_is_rejected_and_counted() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkreject", 1).await;
    let group = common::new_group(&admin, "g-sinkreject", None).await;
    common::produce(&common::bootstrap(), &topic, 1, 10, "x").await;
    let probe = Probe::default();
    let behavior: Behavior = Arc::new(|_, records| {
        let bad = records.iter().position(|r| r.value_str() == Some("x-3"));
        Box::pin(async move {
            match bad {
                Some(i) => Err(SinkError::record(i, "x-3 violates a constraint")),
                None => Ok(()),
            }
        })
    });
    let w = worker(&probe, behavior);
    let c = w
        .start_connector(connector("reject", &topic, &group, 1, &[("errors.tolerance", "all")]))
        .await
        .unwrap();
    wait_until("9 accepted and 1 rejected", Duration::from_secs(60), || {
        metric(&c, "sink-record-acknowledge-total") >= 9.0 && metric(&c, "sink-record-reject-total") >= 1.0
    })
    .await;
    assert_eq!(probe.taken().len(), 9);
    assert_eq!(metric(&c, "sink-record-reject-total"), 1.0);
    // REJECTed: never delivered again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(probe.all().iter().filter(|s| s.offset == 3).count(), 1);
    w.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test]
async fn exactly_once_is_refused_with_what_it_needs() {
    let e = ConnectorConfig::from_pairs([
        ("name", "eos"),
        ("connector.class", "mem"),
        ("topics", "t"),
        ("share.delivery.semantics", "exactly-once"),
    ])
    .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("share.delivery.semantics") && msg.contains("KIP-1289"), "{msg}");
    let w = Worker::new(WorkerConfig::new(common::bootstrap()), Registry::new());
    let e = w.start_connector(connector("unknown", "t", "g", 1, &[])).await.unwrap_err();
    assert!(e.to_string().contains("connector.class"), "{e}");
}

/// Scrapes a Prometheus endpoint: name -> value.
async fn scrape(addr: std::net::SocketAddr) -> BTreeMap<String, f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("metrics port");
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(n, v)| (n.split('{').next().unwrap_or(n).to_string(), v.parse().unwrap_or(f64::NAN)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_moves_as_expected_through_the_prometheus_endpoint() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkprom", 1).await;
    let group = common::new_group(&admin, "g-sinkprom", None).await;
    let probe = Probe::default();
    // First deliveries fail (RELEASE, redelivered); then y-3 fails for good (REJECT).
    let seen: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let behavior: Behavior = Arc::new(move |_, records| {
        let mut s = seen.lock().unwrap();
        let mut first = false;
        for r in &records {
            first |= s.insert(r.offset);
        }
        let bad = records.iter().position(|r| r.value_str() == Some("y-3"));
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            match (first, bad) {
                (true, _) => Err(SinkError::retriable("warming up")),
                (false, Some(i)) => Err(SinkError::record(i, "bad")),
                (false, None) => Ok(()),
            }
        })
    });
    let w = worker(&probe, behavior);
    let c = w
        .start_connector(connector("prom", &topic, &group, 1, &[("errors.tolerance", "all")]))
        .await
        .unwrap();
    let source = {
        let c = c.clone();
        Arc::new(move || vec![c.metrics()]) as kafka_share::sink::MetricsSource
    };
    let server = kafka_share::sink::PrometheusServer::bind(0, source).await.unwrap();
    let get = |m: &BTreeMap<String, f64>, n: &str| {
        // The times (kept in ms) are exported in seconds, with the unit in the name.
        let unit = if n.contains("-time-") { "_seconds" } else { "" };
        let key = format!("kafka_connect_sink_task_{}{unit}", n.replace('-', "_"));
        *m.get(&key).unwrap_or_else(|| panic!("no {key}: {m:?}"))
    };
    let before = scrape(server.local_addr()).await;
    for n in [
        "sink-record-acquire-total",
        "sink-record-acknowledge-total",
        "sink-record-release-total",
        "sink-record-reject-total",
        "sink-record-redelivery-total",
        "sink-record-read-total",
        "sink-record-send-total",
        "sink-record-active-count",
    ] {
        assert_eq!(get(&before, n), 0.0, "{n}");
    }
    assert!(get(&before, "put-batch-time-avg").is_nan());
    common::produce(&common::bootstrap(), &topic, 1, 10, "y").await;
    let mut last = before;
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while get(&last, "sink-record-acknowledge-total") < 9.0 || get(&last, "sink-record-reject-total") < 1.0 {
        assert!(tokio::time::Instant::now() < end, "metrics never settled: {last:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        last = scrape(server.local_addr()).await;
    }
    let s = last;
    assert_eq!(get(&s, "sink-record-acknowledge-total"), 9.0);
    assert_eq!(get(&s, "sink-record-reject-total"), 1.0);
    // A retriable put is tried again here: nothing released, nothing redelivered.
    assert_eq!(get(&s, "sink-record-release-total"), 0.0, "{s:?}");
    assert_eq!(get(&s, "sink-record-redelivery-total"), 0.0);
    assert_eq!(get(&s, "sink-record-acquire-total"), 10.0);
    assert_eq!(get(&s, "sink-record-read-total"), get(&s, "sink-record-acquire-total"));
    // As in Connect: every record handed to put, whatever put answered (retries again).
    assert!(get(&s, "sink-record-send-total") >= 20.0, "{s:?}");
    assert_eq!(get(&s, "sink-record-active-count"), 0.0);
    // At least the sink's 5 ms, in seconds.
    assert!(get(&s, "put-batch-time-max") >= 0.005 && get(&s, "put-batch-time-avg") >= 0.005, "{s:?}");
    assert!(get(&s, "put-batch-time-max") < 5.0, "in seconds, not milliseconds: {s:?}");
    assert!(get(&s, "acknowledge-time-max") > 0.0 && get(&s, "acknowledge-time-avg") > 0.0);
    assert!(get(&s, "sink-record-acknowledge-rate") > 0.0);
    assert!(get(&s, "sink-record-reject-rate") > 0.0 && get(&s, "sink-record-acquire-rate") > 0.0);
    assert!(get(&s, "sink-record-read-rate") > 0.0);
    assert_eq!(get(&s, "task-count"), 1.0);
    w.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implicit_mode_accepts_on_the_next_poll() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinkimplicit", 3).await;
    let group = common::new_group(&admin, "g-sinkimplicit", None).await;
    common::produce(&common::bootstrap(), &topic, 3, 60, "i").await;
    let probe = Probe::default();
    let w = worker(&probe, ok_after(Duration::from_millis(1)));
    let c = w
        .start_connector(connector("implicit", &topic, &group, 2, &[("share.acknowledgement.mode", "implicit")]))
        .await
        .unwrap();
    wait_until("60 taken", Duration::from_secs(60), || probe.taken().len() == 60).await;
    // The last batch is accepted by the next poll or by the commit at stop.
    w.close(Duration::from_secs(30)).await.unwrap();
    assert_each_taken_once(&probe, 60);
    assert_eq!(metric(&c, "sink-record-acknowledge-total"), 60.0);
    // Nothing comes back: a second run of the connector gets no record.
    let probe2 = Probe::default();
    let w2 = worker(&probe2, ok_after(Duration::ZERO));
    let c2 = w2.start_connector(connector("implicit", &topic, &group, 1, &[])).await.unwrap();
    common::produce(&common::bootstrap(), &topic, 3, 3, "after").await;
    wait_until("the 3 new records", Duration::from_secs(60), || probe2.taken().len() >= 3).await;
    assert_eq!(probe2.taken().len(), 3, "only the new records: {:?}", probe2.all());
    assert_eq!(metric(&c2, "sink-record-redelivery-total"), 0.0);
    w2.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_timeout_is_set_on_the_group_when_allowed() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sinklock", 1).await;
    let group = common::new_group(&admin, "g-sinklock", None).await;
    let probe = Probe::default();
    let w = worker(&probe, ok_after(Duration::ZERO));
    let lock_of = |entries: Vec<kafka_share::admin::ConfigEntry>| {
        entries.into_iter().find(|e| e.name == "share.record.lock.duration.ms").and_then(|e| e.value)
    };
    // Not allowed: the group keeps its value (the runtime warns).
    let c = w
        .start_connector(connector("lock1", &topic, &group, 1, &[("share.acquisition.lock.timeout.ms", "20000")]))
        .await
        .unwrap();
    let before = lock_of(admin.describe_group_configs(&group).await.unwrap());
    assert_ne!(before.as_deref(), Some("20000"));
    c.close(Duration::from_secs(30)).await.unwrap();
    // Allowed: set.
    w.start_connector(connector(
        "lock2",
        &topic,
        &group,
        1,
        &[("share.acquisition.lock.timeout.ms", "20000"), ("share.group.config.update", "true")],
    ))
    .await
    .unwrap();
    let after = lock_of(admin.describe_group_configs(&group).await.unwrap());
    assert_eq!(after.as_deref(), Some("20000"));
    w.close(Duration::from_secs(30)).await.unwrap();
}
