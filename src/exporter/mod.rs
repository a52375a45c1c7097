//! Share-group backlog as Prometheus metrics and a KEDA external scaler (feature `exporter`):
//! the library side of the `kafka-share-exporter` binary.
//!
//! An [`Exporter`] refreshes a cache on an interval: it lists the share groups (all, or a
//! [`GroupFilter`]), describes them in batches (one ShareGroupDescribe per group coordinator
//! carrying all its groups) and reads their offsets (DescribeShareGroupOffsets: the start
//! offset and, on Kafka 4.2+, the lag of KIP-1226) one group per request, a bounded number in
//! flight per coordinator (Kafka 4.4 answers a request carrying several groups only after
//! ~2.5 s, one group in milliseconds), then reads each share partition's log end and the
//! timestamp of the record at its start offset with a plain Fetch that acquires nothing
//! ([`Admin::peek`]). A scrape ([`ExporterCollector`]) and the scaler read the cache only:
//! they never wait on the cluster. Each refresh counts its requests by API
//! ([`Snapshot::requests`]).
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

use std::collections::BTreeMap;
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
    /// Group coordinators asked at a time (default 8). ShareGroupDescribe goes in batches,
    /// one request per coordinator carrying all its groups.
    pub max_in_flight: usize,
    /// DescribeShareGroupOffsets requests in flight at a time toward each coordinator
    /// (default 16). They carry one group each: Kafka 4.4 answers a request carrying several
    /// groups only after ~2.5 s, one group in milliseconds, so a thousand groups are read in
    /// a fraction of a second this way and in seconds batched.
    pub offsets_in_flight_per_coordinator: usize,
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
            offsets_in_flight_per_coordinator: 16,
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
        let r = refresh::refresh(&admin, &config).await;
        let last = tx.borrow().clone();
        // The groups are not copied from the last snapshot unless this refresh could not list
        // them: thousands of groups' views would be held twice over for nothing.
        let (groups, last_success) = match r.groups {
            Some(groups) => (groups, Some(SystemTime::now())),
            None => (last.groups.clone(), last.last_success),
        };
        let mut next = Snapshot {
            groups,
            last_success,
            refresh_duration: started.elapsed(),
            refreshes: last.refreshes + 1,
            errors: last.errors.clone(),
            requests: BTreeMap::new(),
            requests_total: last.requests_total.clone(),
            coordinators: r.coordinators,
        };
        drop(last);
        for e in r.errors {
            *next.errors.entry(e).or_default() += 1;
        }
        for (api, n) in &r.requests {
            *next.requests_total.entry(api).or_default() += n;
        }
        next.requests = r.requests;
        tx.send_replace(Arc::new(next));
        tokio::time::sleep(config.refresh_interval).await;
    }
}
