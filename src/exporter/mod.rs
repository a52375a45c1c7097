//! Share-group backlog as Prometheus metrics and a KEDA external scaler (feature `exporter`):
//! the library side of the `kafka-share-exporter` binary.
//!
//! An [`Exporter`] refreshes a cache on an interval: it lists the share groups (all, or a
//! [`GroupFilter`]), describes them in batches (one ShareGroupDescribe per group coordinator
//! carrying all its groups) and reads their offsets (DescribeShareGroupOffsets: the start
//! offset and, on Kafka 4.2+, the lag of KIP-1226) one group per request, a bounded number in
//! flight per coordinator (Kafka 4.4 answers a request carrying several groups only after
//! ~2.5 s, one group in milliseconds), then reads each share partition's log end and the
//! timestamp of its first record not yet acknowledged (at `max(start, end - lag)`: see
//! [`PartitionView::oldest_offset`]) with a plain Fetch that acquires nothing
//! ([`Admin::peek`]). A scrape ([`ExporterCollector`]) and the scaler read the cache only:
//! they never wait on the cluster. Each refresh counts its requests by API
//! ([`Snapshot::requests`]).
//!
//! Fail safe, as autoscalers need: a backlog that could not be read is never served as a
//! value. A group not read in full at a refresh keeps its last good view, with the time it
//! was read ([`GroupView::last_read`]), and is listed in [`Snapshot::unread`] with the cause;
//! the scaler answers UNAVAILABLE for it. [`Snapshot::last_success`] advances only with a
//! refresh that read everything. [`Exporter::connect`] starts without the cluster and retries.
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
mod log;
mod refresh;
pub mod scaler;
mod snapshot;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

pub use collector::{
    ExporterCollector, COORDINATORS, ERRORS, GROUPS, GROUP_ASSIGNED_PARTITIONS, GROUP_LAG, GROUP_LAST_READ,
    GROUP_MEMBERS, GROUP_OLDEST_AGE, GROUP_STATE, LAST_SUCCESS, PARTITION_LAG, PARTITION_LOG_END_OFFSET,
    PARTITION_OLDEST_AGE, PARTITION_START_OFFSET, REFRESHES, REFRESH_DURATION, REFRESH_REQUESTS, REQUESTS,
    SCRAPE_DURATION, SERIES, UNREAD_GROUPS,
};
pub use filter::GroupFilter;
pub use snapshot::{GroupView, PartitionView, Snapshot, Unread};

use crate::admin::Admin;
use crate::config::Properties;
use crate::error::Result;

/// Longest text quoted whole in a message.
const SHOWN: usize = 256;

/// `s` quoted, cut to its first [`SHOWN`] bytes (with its length said) when longer: a name
/// of megabytes is not echoed back whole.
pub(crate) fn shown(s: &str) -> String {
    if s.len() <= SHOWN {
        return format!("{s:?}");
    }
    format!("{:?}... ({} bytes)", &s[..floor_char_boundary(s, SHOWN)], s.len())
}

/// A message cut to `max` bytes (its length said) when longer.
pub(crate) fn cut(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    format!("{}... ({} bytes)", &s[..floor_char_boundary(s, max)], s.len()).into()
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

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

    /// Reads the client properties (`bootstrap.servers`, `security.protocol`, `sasl.*`, ...)
    /// and starts at once, connecting in the background: until the cluster answers, each
    /// attempt counts an error (`operation="connect"`), the scaler answers UNAVAILABLE and
    /// the next attempt comes after a backoff (from the refresh interval, at most one second,
    /// doubling up to the refresh interval or one second, whichever is longer, and 30 s at
    /// most). A daemon started before its cluster (or while it is down) serves its own health
    /// meanwhile, rather than exiting into a restart loop. Must be called within a tokio
    /// runtime.
    ///
    /// # Errors
    /// [`Error::Config`](crate::error::Error::Config) (or another configuration error) when
    /// the properties are wrong: nothing that retrying would mend.
    pub fn connect(properties: &Properties, config: ExporterConfig) -> Result<Exporter> {
        let cluster = Admin::config_from_properties(properties)?;
        let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
        let task = tokio::spawn(async move {
            if let Some(admin) = connect(cluster, &config, &tx).await {
                run(admin, config, tx).await;
            }
        });
        Ok(Exporter { snapshots: rx, task })
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

/// Connects, retrying with a backoff; each failed attempt is published as a refresh that
/// could not list the groups (`connect: <kind>`). `None` when nobody reads the snapshots any
/// more.
async fn connect(
    cluster: crate::cluster::ClusterConfig,
    config: &ExporterConfig,
    tx: &watch::Sender<Arc<Snapshot>>,
) -> Option<Admin> {
    let interval = config.refresh_interval;
    let mut backoff = crate::backoff::Backoff::new(
        interval.min(Duration::from_secs(1)),
        interval.max(Duration::from_secs(1)).min(Duration::from_secs(30)),
    );
    let mut log = log::RefreshLog::default();
    loop {
        let started = Instant::now();
        let attempt = tokio::time::timeout(config.request_timeout, Admin::connect(cluster.clone())).await;
        let e = match attempt {
            Ok(Ok(admin)) => return Some(admin),
            Ok(Err(e)) => e,
            Err(_) => crate::error::Error::Timeout {
                what: "connecting to the cluster (exporter)".into(),
                after: config.request_timeout,
            },
        };
        let mut r = refresh::Refreshed::default();
        let kind = error_kind::error_kind(&e);
        r.listing_failed = Some(format!("connect: {kind}"));
        r.errors.push(("connect", kind, e.to_string()));
        log.refreshed(&r);
        let last = tx.borrow().clone();
        let next = merge(&last, r, SystemTime::now(), started.elapsed());
        drop(last);
        tx.send_replace(Arc::new(next));
        if tx.is_closed() {
            return None;
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

async fn run(admin: Admin, config: ExporterConfig, tx: watch::Sender<Arc<Snapshot>>) {
    let mut log = log::RefreshLog::default();
    loop {
        let started = Instant::now();
        let r = refresh::refresh(&admin, &config).await;
        let now = SystemTime::now();
        log.refreshed(&r);
        let last = tx.borrow().clone();
        let next = merge(&last, r, now, started.elapsed());
        drop(last);
        tx.send_replace(Arc::new(next));
        tokio::time::sleep(config.refresh_interval).await;
    }
}

/// The snapshot after `last` from a refresh that finished at `now`. A group read in full gets
/// its new view; a group the refresh could not read in full keeps its last good view (if it
/// had one: the views of groups read in full are not copied) and is marked unread, so that
/// nothing reads the backlog it could not see as a value.
fn merge(last: &Snapshot, r: refresh::Refreshed, now: SystemTime, took: Duration) -> Snapshot {
    let mut unread = BTreeMap::new();
    let groups = match r.groups {
        Some(mut groups) => {
            for v in &mut groups {
                v.last_read = Some(now);
            }
            let by_id: BTreeMap<&str, &GroupView> = last.groups.iter().map(|g| (g.group.as_str(), g)).collect();
            for (g, cause) in r.unread {
                let kept = by_id.get(g.as_str()).map(|v| (*v).clone());
                unread.insert(g.clone(), Unread { cause, last_read: kept.as_ref().and_then(|v| v.last_read) });
                groups.extend(kept);
            }
            groups.sort_by(|a, b| a.group.cmp(&b.group));
            groups
        }
        // Not even listed: every group known is unread, as it was last read.
        None => {
            let cause = r.listing_failed.clone().unwrap_or_else(|| "list_groups".into());
            for g in &last.groups {
                unread.insert(g.group.clone(), Unread { cause: cause.clone(), last_read: g.last_read });
            }
            for (g, u) in &last.unread {
                unread.entry(g.clone()).or_insert_with(|| Unread { cause: cause.clone(), last_read: u.last_read });
            }
            last.groups.clone()
        }
    };
    let success = r.listing_failed.is_none() && unread.is_empty();
    let mut next = Snapshot {
        groups,
        last_success: if success { Some(now) } else { last.last_success },
        unread,
        listing_failed: r.listing_failed,
        refresh_duration: took,
        refreshes: last.refreshes + 1,
        errors: last.errors.clone(),
        requests: BTreeMap::new(),
        requests_total: last.requests_total.clone(),
        coordinators: r.coordinators,
    };
    for (op, kind, _) in r.errors {
        *next.errors.entry((op, kind)).or_default() += 1;
    }
    for (api, n) in &r.requests {
        *next.requests_total.entry(api).or_default() += n;
    }
    next.requests = r.requests;
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(group: &str, lag: i64) -> GroupView {
        GroupView {
            group: group.into(),
            state: "Stable".into(),
            members: 1,
            assigned_partitions: 1,
            partitions: vec![PartitionView {
                topic: "t".into(),
                partition: 0,
                start_offset: 0,
                end_offset: Some(lag),
                lag: Some(lag),
                lag_estimated: false,
                oldest_timestamp_ms: Some(1),
                oldest_offset: 0,
            }],
            last_read: None,
        }
    }

    fn refreshed(groups: Option<Vec<GroupView>>, unread: &[(&str, &str)]) -> refresh::Refreshed {
        let mut r = refresh::Refreshed { groups, ..Default::default() };
        r.unread = unread.iter().map(|(g, c)| (g.to_string(), c.to_string())).collect();
        if r.groups.is_none() {
            r.listing_failed = Some("list_groups: timeout".into());
        }
        r
    }

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    use std::time::UNIX_EPOCH;

    #[test]
    fn a_group_not_read_keeps_its_last_view_and_the_refresh_is_no_success() {
        let d = Duration::ZERO;
        let s1 = merge(&Snapshot::default(), refreshed(Some(vec![view("a", 5), view("b", 7)]), &[]), at(10), d);
        assert_eq!(s1.last_success, Some(at(10)));
        assert_eq!(s1.group("a").unwrap().last_read, Some(at(10)));

        // b's offsets time out: its last view stays, marked unread as of when it was read.
        let s2 = merge(&s1, refreshed(Some(vec![view("a", 4)]), &[("b", "offsets: timeout")]), at(20), d);
        assert_eq!(s2.group("a").unwrap().last_read, Some(at(20)));
        assert_eq!(s2.group("b").unwrap().partitions[0].lag, Some(7), "the last good reading");
        assert_eq!(s2.group("b").unwrap().last_read, Some(at(10)));
        assert_eq!(s2.unread["b"], Unread { cause: "offsets: timeout".into(), last_read: Some(at(10)) });
        assert_eq!(s2.last_success, Some(at(10)), "not a successful refresh");
        assert_eq!(s2.groups.iter().map(|g| g.group.as_str()).collect::<Vec<_>>(), ["a", "b"], "sorted");

        // A group never read and unreadable has no view, only its cause.
        let s3 = merge(&s2, refreshed(Some(vec![]), &[("c", "describe_group: timeout")]), at(30), d);
        assert!(s3.group("c").is_none());
        assert_eq!(s3.unread["c"].last_read, None);

        // The listing fails: every group known stays as last read, each unread.
        let s4 = merge(&s2, refreshed(None, &[]), at(40), d);
        assert_eq!(s4.groups, s2.groups);
        assert_eq!(s4.unread.len(), 2);
        assert_eq!(s4.unread["a"].last_read, Some(at(20)));
        assert_eq!(s4.listing_failed.as_deref(), Some("list_groups: timeout"));
        assert_eq!(s4.last_success, Some(at(10)));

        // Read again in full: a success, nothing unread; a group the cluster no longer has
        // (neither read nor unread) is gone.
        let s5 = merge(&s4, refreshed(Some(vec![view("b", 0)]), &[]), at(50), d);
        assert_eq!((s5.last_success, s5.unread.len(), s5.groups.len()), (Some(at(50)), 0, 1));
    }
}
