//! Share-group backlog as Prometheus metrics and a KEDA external scaler (feature `exporter`):
//! the library side of the `kafka-share-exporter` binary.
//!
//! An [`Exporter`] refreshes a cache on an interval: it lists the share groups (all, or a
//! [`GroupFilter`]), describes them and reads their offsets (DescribeShareGroupOffsets: the
//! start offset and, on Kafka 4.2+, the lag of KIP-1226) in batches, one request per group
//! coordinator carrying all its groups, then reads each share partition's log end and the
//! timestamp of the record at its start offset with a plain Fetch that acquires nothing
//! ([`Admin::peek`]). A scrape ([`ExporterCollector`]) and the scaler read the cache only:
//! they never wait on the cluster. Each refresh counts its requests by API
//! ([`Snapshot::requests`]), so its cost is seen to grow with the brokers, not the groups.
//!
//! ```no_run
//! # async fn demo() -> kafka_share::Result<()> {
//! use std::sync::Arc;
//! use kafka_share::admin::Admin;
//! use kafka_share::exporter::{Exporter, ExporterConfig};
//! use kafka_share::prometheus::{serve, Registry};
//!
//! let exporter = Exporter::start(Admin::connect_to("127.0.0.1:9092").await?, ExporterConfig::default());
//! let mut registry = Registry::default();
//! registry.register_collector(Box::new(exporter.collector()));
//! let endpoint = serve("0.0.0.0:9464", Arc::new(registry)).await?;
//! # drop(endpoint); Ok(()) }
//! ```

mod collector;
mod error_kind;
mod filter;
mod refresh;
pub mod scaler;
mod snapshot;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

pub use collector::{
    ExporterCollector, COORDINATORS, ERRORS, GROUPS, GROUP_ASSIGNED_PARTITIONS, GROUP_LAG, GROUP_MEMBERS,
    GROUP_OLDEST_AGE, GROUP_STATE, LAST_SUCCESS, PARTITION_LAG, PARTITION_LOG_END_OFFSET, PARTITION_OLDEST_AGE,
    PARTITION_START_OFFSET, REFRESHES, REFRESH_DURATION, REFRESH_REQUESTS, REQUESTS, SCRAPE_DURATION, SERIES,
};
pub use filter::GroupFilter;
pub use snapshot::{GroupView, PartitionView, Snapshot};

use crate::admin::Admin;

/// How an [`Exporter`] refreshes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExporterConfig {
    /// Which groups to export (default: all).
    pub groups: GroupFilter,
    /// Time from the end of one refresh to the start of the next (default 15 s).
    pub refresh_interval: Duration,
    /// Requests in flight at a time toward the group coordinators (default 8): the groups
    /// go in batches, one request per coordinator, so this bounds how many coordinators are
    /// asked at once.
    pub max_in_flight: usize,
    /// The longest one step of a refresh may take before it counts as a `timeout` error
    /// (default 30 s).
    pub request_timeout: Duration,
}

impl Default for ExporterConfig {
    fn default() -> Self {
        ExporterConfig {
            groups: GroupFilter::All,
            refresh_interval: Duration::from_secs(15),
            max_in_flight: 8,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// The refresh task and its cache. Dropping it stops the task.
#[derive(Debug)]
pub struct Exporter {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Exporter {
    /// Starts refreshing at once, then every `refresh_interval`. Must be called within a
    /// tokio runtime.
    pub fn start(admin: Admin, config: ExporterConfig) -> Exporter {
        let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
        let task = tokio::spawn(run(admin, config, tx));
        Exporter { snapshots: rx, task }
    }

    /// The cache as of the last refresh.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshots.borrow().clone()
    }

    /// The snapshot of the next refresh to finish.
    pub async fn next_refresh(&self) -> Arc<Snapshot> {
        let mut rx = self.snapshots.clone();
        rx.mark_unchanged();
        // The sender lives as long as the task, which lives as long as `self`.
        let _ = rx.changed().await;
        let s = rx.borrow().clone();
        s
    }

    /// A receiver of every new snapshot (the KEDA scaler's stream reads it).
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.clone()
    }

    /// The collector rendering the cache at each scrape.
    pub fn collector(&self) -> ExporterCollector {
        ExporterCollector::new(self.snapshots.clone())
    }
}

async fn run(admin: Admin, config: ExporterConfig, tx: watch::Sender<Arc<Snapshot>>) {
    loop {
        let started = Instant::now();
        let r = refresh::refresh(&admin, &config.groups, config.max_in_flight, config.request_timeout).await;
        let mut next = Snapshot::clone(&tx.borrow());
        next.refreshes += 1;
        next.refresh_duration = started.elapsed();
        for e in r.errors {
            *next.errors.entry(e).or_default() += 1;
        }
        for (api, n) in &r.requests {
            *next.requests_total.entry(api).or_default() += n;
        }
        next.requests = r.requests;
        next.coordinators = r.coordinators;
        if let Some(groups) = r.groups {
            next.groups = groups;
            next.last_success = Some(SystemTime::now());
        }
        tx.send_replace(Arc::new(next));
        tokio::time::sleep(config.refresh_interval).await;
    }
}
