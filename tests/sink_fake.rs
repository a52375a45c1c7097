//! The sink runtime against the fake cluster (features `sink` and `test-util`): what needs no
//! real broker. Every wait is for a condition with a generous deadline.

mod fake_broker;

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

    fn put<'a>(&'a mut self, records: &'a [SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        self.0.lock().unwrap().extend(records.iter().map(|r| r.offset));
        Box::pin(async { Ok(()) })
    }
}

/// The runtime chooses record_limit (it was not configured); a 4.1 cluster has no ShareFetch
/// v2, so the consumer refuses it at connect with `Error::AcquireModeUnsupported`, and the
/// task falls back to batch_optimized instead of failing.
#[tokio::test]
async fn on_a_v1_cluster_a_task_falls_back_from_record_limit_to_batch_optimized() {
    let fake = FakeCluster::start(FakeConfig::default().v1_only().records(10)).await;
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
    connector.stop(T).await.unwrap();
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
