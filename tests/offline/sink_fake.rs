//! The sink runtime against the fake cluster (features `sink` and `test-util`): what needs no
//! real broker. Every wait is for a condition with a generous deadline.

use crate::fake_broker;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_broker::{eventually, FakeCluster, FakeConfig, Req};
use futures::future::BoxFuture;
use kafka_share::sink::{ConnectorConfig, Registry, SinkError, SinkRecord, SinkTask, TaskConfig, Worker, WorkerConfig};

const T: Duration = Duration::from_secs(30);

/// A sink that notes the offsets it was given.
struct Collect(Arc<Mutex<Vec<i64>>>);

impl SinkTask for Collect {
    fn start(&mut self, _config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async { Ok(()) })
    }

    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        self.0.lock().unwrap().extend(records.iter().map(|r| r.offset));
        Box::pin(async { Ok(()) })
    }
}

/// The runtime chooses record_limit (it was not configured); a 4.1 cluster has no ShareFetch
/// v2, so the consumer refuses it at connect with `Error::AcquireModeUnsupported`, and the
/// task falls back to batch_optimized instead of failing.
#[tokio::test]
async fn on_a_v1_cluster_a_task_falls_back_from_record_limit_to_batch_optimized() {
    let fake = FakeCluster::start(FakeConfig::default().max_share_version(1).records(10)).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut registry = Registry::new();
    let sink = seen.clone();
    registry.register("collect", move |_: &TaskConfig| Ok(Box::new(Collect(sink.clone())) as Box<dyn SinkTask>));
    let worker = Worker::new(WorkerConfig::new(fake.bootstrap()), registry);
    let config = ConnectorConfig::from_pairs([
        ("name", "fallback"),
        ("connector.class", "collect"),
        ("topics", &fake.topic()),
        ("tasks.max", "1"),
        ("share.group.id", "g"),
        ("consumer.override.fetch.max.wait.ms", "100"),
    ])
    .expect("connector config");
    let connector = worker.start_connector(config).await.expect("the connector starts");
    let all = eventually(T, || seen.lock().unwrap().len() >= 10).await;
    assert!(all, "records put: {:?}; failures: {:?}\n{}", seen.lock().unwrap(), connector.failures(), fake.dump());
    assert!(connector.failures().is_empty(), "{:?}", connector.failures());
    connector.close(T).await.unwrap();
    let mut offsets = seen.lock().unwrap().clone();
    offsets.sort_unstable();
    assert_eq!(offsets, (0..10).collect::<Vec<i64>>());
    let modes: Vec<i8> = fake
        .share_log()
        .iter()
        .filter_map(|l| match &l.req {
            Req::Fetch(r) => Some(r.share_acquire_mode),
            _ => None,
        })
        .collect();
    assert!(!modes.is_empty() && modes.iter().all(|&m| m == 0), "ShareFetch acquire modes: {modes:?}");
    assert_eq!(fake.done(0), (0..10).collect::<Vec<i64>>());
}

/// A sink that fails, retriably, every batch holding offset `bad` (a record that fails on
/// its own), and notes the batches it was given.
struct FailsWith {
    bad: i64,
    fatal: bool,
    batches: Arc<Mutex<Vec<Vec<i64>>>>,
}

impl SinkTask for FailsWith {
    fn start(&mut self, _config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async { Ok(()) })
    }

    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        let hit = offsets.contains(&self.bad);
        self.batches.lock().unwrap().push(offsets);
        let fatal = self.fatal;
        Box::pin(async move {
            match (hit, fatal) {
                (false, _) => Ok(()),
                (true, false) => Err(SinkError::retriable("the target refused it")),
                (true, true) => Err(SinkError::fatal("credentials gone")),
            }
        })
    }
}

async fn failing_connector(
    fake: &FakeCluster,
    mode: &str,
    fatal: bool,
) -> (kafka_share::sink::Connector, Arc<Mutex<Vec<Vec<i64>>>>) {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let mut registry = Registry::new();
    let b = batches.clone();
    registry.register("fails", move |_: &TaskConfig| {
        Ok(Box::new(FailsWith { bad: 3, fatal, batches: b.clone() }) as Box<dyn SinkTask>)
    });
    let worker = Worker::new(WorkerConfig::new(fake.bootstrap()), registry);
    let config = ConnectorConfig::from_pairs([
        ("name", "fails"),
        ("connector.class", "fails"),
        ("topics", &fake.topic()),
        ("tasks.max", "1"),
        ("share.group.id", "g"),
        ("share.acknowledgement.mode", mode),
        ("share.max.delivery.count", "2"),
        ("errors.tolerance", "all"),
        ("consumer.override.fetch.max.wait.ms", "100"),
    ])
    .expect("connector config");
    (worker.start_connector(config).await.expect("the connector starts"), batches)
}

/// Both modes decide alike (`decide.rs`): a retriable failure splits the batch until the
/// failing record is alone, the good records are accepted, and only the failing one takes
/// the dead-letter path after `share.max.delivery.count` failures alone (REJECT in explicit
/// mode; skipped, counted as rejected, in implicit mode, which cannot REJECT).
#[tokio::test]
async fn a_retriable_failure_of_one_record_reaches_only_that_record_in_both_modes() {
    for mode in ["explicit", "implicit"] {
        let fake = FakeCluster::start(FakeConfig::default().records(10)).await;
        let (connector, batches) = failing_connector(&fake, mode, false).await;
        let done = eventually(T, || fake.done(0).len() == 10).await;
        assert!(done, "{mode}: done {:?}; batches {:?}\n{}", fake.done(0), batches.lock().unwrap(), fake.dump());
        let good: Vec<i64> = (0..10).filter(|&o| o != 3).collect();
        let bad_alone = batches.lock().unwrap().iter().filter(|b| b.as_slice() == [3]).count();
        assert_eq!(bad_alone, 2, "{mode}: offset 3 put alone twice, then given up: {:?}", batches.lock().unwrap());
        let m = connector.metrics();
        assert_eq!(m.get("sink-record-reject-total"), Some(1.0), "{mode}");
        match mode {
            "explicit" => {
                assert_eq!(fake.accepted(0), good, "{mode}");
                assert_eq!(fake.state(0, 3), kafka_share::test_util::RecordState::Rejected, "{mode}");
                assert_eq!(m.get("sink-record-acknowledge-total"), Some(9.0), "{mode}");
            }
            _ => {
                assert_eq!(fake.accepted(0), (0..10).collect::<Vec<i64>>(), "{mode}");
                assert_eq!(m.get("sink-record-acknowledge-total"), Some(9.0), "{mode}");
            }
        }
        assert!(connector.failures().is_empty(), "{mode}: {:?}", connector.failures());
        connector.close(T).await.unwrap();
    }
}

/// A fatal error gives the batch back in both modes: implicit mode closes its consumer
/// without committing (a commit would accept the batch the sink never took).
#[tokio::test]
async fn a_fatal_error_releases_the_batch_in_both_modes() {
    for mode in ["explicit", "implicit"] {
        let fake = FakeCluster::start(FakeConfig::default().records(10)).await;
        let (connector, batches) = failing_connector(&fake, mode, true).await;
        let failed = eventually(T, || !connector.failures().is_empty()).await;
        assert!(failed, "{mode}: batches {:?}\n{}", batches.lock().unwrap(), fake.dump());
        assert!(connector.failures()[0].1.contains("credentials gone"), "{mode}: {:?}", connector.failures());
        // The batch holding offset 3 is back: available, or delivered again (explicit mode's
        // engine goes on fetching with no task left), never accepted.
        let first: Vec<i64> = batches.lock().unwrap().iter().find(|b| b.contains(&3)).cloned().unwrap_or_default();
        let back = eventually(T, || {
            first.iter().all(|&o| {
                fake.state(0, o) == kafka_share::test_util::RecordState::Available || fake.delivery(0, o) >= 2
            })
        })
        .await;
        assert!(back, "{mode}: batch {first:?}, accepted {:?}\n{}", fake.accepted(0), fake.dump());
        assert!(first.iter().all(|o| !fake.accepted(0).contains(o)), "{mode}: accepted {:?}", fake.accepted(0));
        connector.close(T).await.unwrap();
    }
}
