//! The exporter's series in Prometheus form, read from the cached [`Snapshot`] at each scrape:
//! a scrape never waits on the cluster.
//!
//! Base units in the names (`_seconds`, counters `_total`), the unit in each HELP text.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use tokio::sync::watch;

use super::snapshot::{GroupView, PartitionView, Snapshot};

/// Per group and share partition: records not yet delivered-and-acknowledged.
pub const PARTITION_LAG: &str = "kafka_share_group_partition_lag";
/// Per group and share partition: the share-partition start offset.
pub const PARTITION_START_OFFSET: &str = "kafka_share_group_partition_start_offset";
/// Per group and share partition: the partition's log end offset (high watermark).
pub const PARTITION_LOG_END_OFFSET: &str = "kafka_share_group_partition_log_end_offset";
/// Per group and share partition: age of the oldest record not yet acknowledged.
pub const PARTITION_OLDEST_AGE: &str = "kafka_share_group_partition_oldest_unacknowledged_age_seconds";
/// Per group: lag summed over its share partitions.
pub const GROUP_LAG: &str = "kafka_share_group_lag";
/// Per group: age of its oldest record not yet acknowledged, over its partitions.
pub const GROUP_OLDEST_AGE: &str = "kafka_share_group_oldest_unacknowledged_age_seconds";
/// Per group: members.
pub const GROUP_MEMBERS: &str = "kafka_share_group_members";
/// Per group: partitions assigned to its members.
pub const GROUP_ASSIGNED_PARTITIONS: &str = "kafka_share_group_assigned_partitions";
/// Per group: 1 with its state as a label.
pub const GROUP_STATE: &str = "kafka_share_group_state";
/// Per group: when the refresh that last read its backlog in full finished (its series are
/// from that refresh).
pub const GROUP_LAST_READ: &str = "kafka_share_group_last_read_timestamp_seconds";
/// The exporter: how long the last refresh took.
pub const REFRESH_DURATION: &str = "kafka_share_exporter_refresh_duration_seconds";
/// The exporter: how long the previous scrape took to render.
pub const SCRAPE_DURATION: &str = "kafka_share_exporter_scrape_duration_seconds";
/// The exporter: refreshes run (counter).
pub const REFRESHES: &str = "kafka_share_exporter_refreshes_total";
/// The exporter: errors by operation and kind (counter).
pub const ERRORS: &str = "kafka_share_exporter_errors_total";
/// The exporter: when the last successful refresh finished (it listed the groups, when not
/// named, and read every group's offsets and logs: see [`Snapshot::last_success`]).
pub const LAST_SUCCESS: &str = "kafka_share_exporter_last_successful_refresh_timestamp_seconds";
/// The exporter: groups exported.
pub const GROUPS: &str = "kafka_share_exporter_groups";
/// The exporter: groups whose backlog its last refresh could not read in full.
pub const UNREAD_GROUPS: &str = "kafka_share_exporter_unread_groups";
/// The exporter: requests its last refresh sent, by API (label `api`).
pub const REFRESH_REQUESTS: &str = "kafka_share_exporter_refresh_requests";
/// The exporter: requests sent by all its refreshes, by API (counter).
pub const REQUESTS: &str = "kafka_share_exporter_requests_total";
/// The exporter: group coordinators that answered for the groups in the last refresh.
pub const COORDINATORS: &str = "kafka_share_exporter_coordinators";

/// Every series name the exporter serves (counters with their `_total`).
pub const SERIES: &[&str] = &[
    PARTITION_LAG,
    PARTITION_START_OFFSET,
    PARTITION_LOG_END_OFFSET,
    PARTITION_OLDEST_AGE,
    GROUP_LAG,
    GROUP_OLDEST_AGE,
    GROUP_MEMBERS,
    GROUP_ASSIGNED_PARTITIONS,
    GROUP_STATE,
    GROUP_LAST_READ,
    REFRESH_DURATION,
    SCRAPE_DURATION,
    REFRESHES,
    ERRORS,
    LAST_SUCCESS,
    GROUPS,
    UNREAD_GROUPS,
    REFRESH_REQUESTS,
    REQUESTS,
    COORDINATORS,
];

/// The exporter's [`Collector`]: register it in a
/// [`Registry`](crate::prometheus::Registry) and serve it with
/// [`prometheus::serve`](crate::prometheus::serve).
#[derive(Debug, Clone)]
pub struct ExporterCollector {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    last_scrape_nanos: Arc<AtomicU64>,
}

impl ExporterCollector {
    pub(crate) fn new(snapshots: watch::Receiver<Arc<Snapshot>>) -> Self {
        ExporterCollector { snapshots, last_scrape_nanos: Arc::new(AtomicU64::new(0)) }
    }
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

fn gauge_family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels<'_>, f64)],
) -> Result<(), std::fmt::Error> {
    gauges(encoder, name, help, series.iter().map(|(l, v)| (l.as_slice(), *v)))
}

/// A family of gauges, one series for each `(labels, value)` that `series` yields, encoded as
/// it is yielded: a scrape of a thousand groups of 16 partitions holds no list of 64,000
/// series (with their label lists) beside the text it writes.
fn gauges<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A share partition's labels: group, topic, partition.
type PartitionLabels<'a> = ([(&'static str, &'a str); 2], [(&'static str, i32); 1]);

fn partition_labels<'a>(group: &'a str, p: &'a PartitionView) -> PartitionLabels<'a> {
    ([("group", group), ("topic", p.topic.as_str())], [("partition", p.partition)])
}

fn group(g: &GroupView) -> [(&'static str, &str); 1] {
    [("group", g.group.as_str())]
}

fn estimate(estimated: bool) -> [(&'static str, &'static str); 1] {
    [("estimate", if estimated { "true" } else { "false" })]
}

impl Collector for ExporterCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let started = Instant::now();
        let s = self.snapshots.borrow().clone();
        let now = SystemTime::now();
        // Each family walks the cached groups once and encodes as it goes (see `gauges`).
        let partitions = || s.groups.iter().flat_map(|g| g.partitions.iter().map(move |p| (g.group.as_str(), p)));
        gauges(
            &mut encoder,
            PARTITION_LAG,
            "Records of the share partition not yet delivered and acknowledged, in records (KIP-1226; estimate=\"true\": log end minus start offset, Kafka 4.1)",
            partitions().filter_map(|(g, p)| p.lag.map(|l| ((partition_labels(g, p), estimate(p.lag_estimated)), l as f64))),
        )?;
        gauges(
            &mut encoder,
            PARTITION_START_OFFSET,
            "Share-partition start offset, an offset",
            partitions().map(|(g, p)| (partition_labels(g, p), p.start_offset as f64)),
        )?;
        gauges(
            &mut encoder,
            PARTITION_LOG_END_OFFSET,
            "Log end offset (high watermark) of the partition, an offset",
            partitions().filter_map(|(g, p)| p.end_offset.map(|e| (partition_labels(g, p), e as f64))),
        )?;
        gauges(
            &mut encoder,
            PARTITION_OLDEST_AGE,
            "Age of the oldest record not yet acknowledged, in seconds (the record at log end minus lag, or at the start offset when above; estimate=\"true\": at the start offset, Kafka 4.1)",
            partitions().filter_map(|(g, p)| {
                p.oldest_age(now).map(|a| ((partition_labels(g, p), estimate(p.lag_estimated)), a.as_secs_f64()))
            }),
        )?;
        gauges(
            &mut encoder,
            GROUP_LAG,
            "Lag summed over the group's share partitions, in records (estimate=\"true\" when any part is an estimate)",
            s.groups.iter().filter_map(|g| g.lag(None).map(|(l, est)| ((group(g), estimate(est)), l as f64))),
        )?;
        gauges(
            &mut encoder,
            GROUP_OLDEST_AGE,
            "Age of the group's oldest record not yet acknowledged, in seconds (estimate=\"true\" when any part is an estimate)",
            s.groups
                .iter()
                .filter_map(|g| g.oldest_age(None, now).map(|a| ((group(g), estimate(g.estimated(None))), a.as_secs_f64()))),
        )?;
        gauges(
            &mut encoder,
            GROUP_MEMBERS,
            "Members of the share group, a count",
            s.groups.iter().map(|g| (group(g), g.members as f64)),
        )?;
        gauges(
            &mut encoder,
            GROUP_ASSIGNED_PARTITIONS,
            "Partitions assigned to the group's members, a count",
            s.groups.iter().map(|g| (group(g), g.assigned_partitions as f64)),
        )?;
        gauges(
            &mut encoder,
            GROUP_STATE,
            "1 for the share group's state (label state)",
            s.groups.iter().map(|g| ([("group", g.group.as_str()), ("state", g.state.as_str())], 1.0)),
        )?;
        gauges(
            &mut encoder,
            GROUP_LAST_READ,
            "When the refresh that last read the group's backlog in full finished (its series are from it), in seconds since the Unix epoch",
            s.groups.iter().filter_map(|g| {
                g.last_read.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map(|d| (group(g), d.as_secs_f64()))
            }),
        )?;

        let secs = |d: std::time::Duration| d.as_secs_f64();
        gauge_family(
            &mut encoder,
            REFRESH_DURATION,
            "How long the exporter's last refresh took, in seconds",
            &[(vec![], secs(s.refresh_duration))],
        )?;
        let scrape = std::time::Duration::from_nanos(self.last_scrape_nanos.load(Ordering::Relaxed));
        gauge_family(
            &mut encoder,
            SCRAPE_DURATION,
            "How long the exporter's previous scrape took to render, in seconds",
            &[(vec![], secs(scrape))],
        )?;
        {
            let name = REFRESHES.trim_end_matches("_total");
            let metric = ConstCounter::new(s.refreshes);
            let mut family = encoder.encode_descriptor(
                name,
                "Refreshes the exporter ran (connect attempts included), a count",
                None,
                metric.metric_type(),
            )?;
            metric.encode(family.encode_family(&Labels::new())?)?;
        }
        {
            let name = ERRORS.trim_end_matches("_total");
            let mut family = encoder.encode_descriptor(
                name,
                "Errors in the exporter's refreshes by operation and kind, a count",
                None,
                MetricType::Counter,
            )?;
            for ((op, kind), n) in &s.errors {
                let labels: Labels<'_> = vec![("operation", op), ("kind", kind.as_str())];
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        let last: Vec<(Labels<'_>, f64)> = s
            .last_success
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| (vec![], d.as_secs_f64()))
            .into_iter()
            .collect();
        gauge_family(
            &mut encoder,
            LAST_SUCCESS,
            "When the exporter's last successful refresh finished (it listed the groups and read every group's offsets and logs), in seconds since the Unix epoch",
            &last,
        )?;
        gauge_family(&mut encoder, GROUPS, "Share groups exported, a count", &[(vec![], s.groups.len() as f64)])?;
        gauge_family(
            &mut encoder,
            UNREAD_GROUPS,
            "Share groups whose backlog the exporter's last refresh could not read in full (their series are from an earlier refresh), a count",
            &[(vec![], s.unread.len() as f64)],
        )?;
        let per_refresh: Vec<(Labels<'_>, f64)> =
            s.requests.iter().map(|(api, n)| (vec![("api", *api)], *n as f64)).collect();
        gauge_family(
            &mut encoder,
            REFRESH_REQUESTS,
            "Requests the exporter's last refresh sent, by API, retries included, a count",
            &per_refresh,
        )?;
        {
            let name = REQUESTS.trim_end_matches("_total");
            let mut family = encoder.encode_descriptor(
                name,
                "Requests the exporter's refreshes sent, by API, a count",
                None,
                MetricType::Counter,
            )?;
            for (api, n) in &s.requests_total {
                let labels: Labels<'_> = vec![("api", api)];
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        gauge_family(
            &mut encoder,
            COORDINATORS,
            "Group coordinators that answered for the groups in the exporter's last refresh, a count",
            &[(vec![], s.coordinators as f64)],
        )?;
        let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_scrape_nanos.store(took, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use tokio::sync::watch;

    use super::*;
    use crate::exporter::{GroupView, PartitionView};
    use crate::prometheus::{render, Registry};

    fn part(topic: &str, partition: i32, lag: Option<i64>, end: Option<i64>) -> PartitionView {
        PartitionView {
            topic: topic.into(),
            partition,
            start_offset: 4,
            end_offset: end,
            lag,
            lag_estimated: false,
            oldest_timestamp_ms: None,
            oldest_offset: 4,
        }
    }

    #[test]
    fn each_series_is_rendered_with_its_labels_in_order_and_unknowns_left_out() {
        let mut estimated = part("u", 0, Some(2), Some(6));
        estimated.lag_estimated = true;
        let g = GroupView {
            group: "g".into(),
            state: "Stable".into(),
            members: 2,
            assigned_partitions: 3,
            partitions: vec![part("t", 3, Some(5), Some(9)), part("t", 4, None, None), estimated],
            last_read: Some(UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)),
        };
        let s = Snapshot { groups: vec![g], last_success: Some(SystemTime::now()), ..Snapshot::default() };
        let (_tx, rx) = watch::channel(Arc::new(s));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ExporterCollector::new(rx)));
        let text = render(&registry);
        let has = |line: &str| assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        has(r#"kafka_share_group_partition_lag{group="g",topic="t",partition="3",estimate="false"} 5.0"#);
        has(r#"kafka_share_group_partition_lag{group="g",topic="u",partition="0",estimate="true"} 2.0"#);
        has(r#"kafka_share_group_partition_start_offset{group="g",topic="t",partition="4"} 4.0"#);
        has(r#"kafka_share_group_partition_log_end_offset{group="g",topic="t",partition="3"} 9.0"#);
        has(r#"kafka_share_group_lag{group="g",estimate="true"} 7.0"#);
        has(r#"kafka_share_group_members{group="g"} 2.0"#);
        has(r#"kafka_share_group_assigned_partitions{group="g"} 3.0"#);
        has(r#"kafka_share_group_state{group="g",state="Stable"} 1.0"#);
        has(r#"kafka_share_group_last_read_timestamp_seconds{group="g"} 1700000000.0"#);
        has("kafka_share_exporter_unread_groups 0.0");
        let lags = text.lines().filter(|l| l.starts_with("kafka_share_group_partition_lag{")).count();
        assert_eq!(lags, 2, "a partition with no known lag has no lag series:\n{text}");
        let ends = text.lines().filter(|l| l.starts_with("kafka_share_group_partition_log_end_offset{")).count();
        assert_eq!(ends, 2, "nor a log end series when its log was not read:\n{text}");
    }
}
