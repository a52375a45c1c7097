//! What one refresh found: the cache a scrape and the KEDA scaler read, never the cluster.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One share partition of a group, as the last refresh saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionView {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The share-partition start offset (persisted: see
    /// [`SharePartitionOffset::start_offset`](crate::admin::SharePartitionOffset::start_offset)).
    pub start_offset: i64,
    /// The partition's log end offset (high watermark); `None` when its leader could not be read.
    pub end_offset: Option<i64>,
    /// Records not yet delivered-and-acknowledged; `None` when unknown.
    pub lag: Option<i64>,
    /// Whether `lag` is computed here (end offset minus start offset: Kafka 4.1, whose answer
    /// has no lag) rather than reported by the broker (KIP-1226, 4.2+). The estimate counts
    /// acknowledged records above the start offset as lag.
    pub lag_estimated: bool,
    /// Timestamp (ms since the epoch) of the oldest record not yet acknowledged: the first
    /// record at or after [`oldest_offset`](Self::oldest_offset). `None` when there is none
    /// (nothing to deliver).
    pub oldest_timestamp_ms: Option<i64>,
    /// Where the oldest record not yet acknowledged was looked for. With the broker's lag
    /// (4.2+): `max(start offset, end offset - lag)`. The `lag` records not yet acknowledged
    /// are distinct offsets below the end, so the first of them is at or below `end - lag`;
    /// the persisted start offset trails a run of acknowledged records above it (the state
    /// write that moves it comes after the acknowledgements), so reading at `end - lag` is
    /// exact when the acknowledged records above the start form one run from it, and
    /// otherwise (a record left unacknowledged below acknowledged ones) reads a younger
    /// record: the age is understated, never overstated. Without the broker's lag (4.1): the
    /// start offset, the age then an estimate (`lag_estimated`) that counts acknowledged
    /// records above the start as waiting.
    pub oldest_offset: i64,
}

impl PartitionView {
    /// The age of the oldest record not yet acknowledged, at `now`: zero when nothing is
    /// waiting (lag 0 — the persisted start offset can trail the acknowledgements, the lag
    /// cannot — or no record at the start offset); `None` when unknown.
    pub fn oldest_age(&self, now: SystemTime) -> Option<Duration> {
        if self.lag == Some(0) {
            return Some(Duration::ZERO);
        }
        match self.oldest_timestamp_ms {
            None if self.end_offset.is_some_and(|e| e <= self.oldest_offset) => Some(Duration::ZERO),
            None => None,
            Some(ts) => {
                let now_ms = now.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
                let ts = u128::try_from(ts).unwrap_or(0);
                // A record stamped in the future (a producer's clock ahead) is not old.
                Some(Duration::from_millis(u64::try_from(now_ms.saturating_sub(ts)).unwrap_or(u64::MAX)))
            }
        }
    }
}

/// One share group, as the last refresh saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupView {
    /// The group id.
    pub group: String,
    /// Its state (`Stable`, `Empty`, ...), as the broker spells it.
    pub state: String,
    /// Its members.
    pub members: usize,
    /// Partitions assigned to its members, summed over members.
    pub assigned_partitions: usize,
    /// The share partitions it has state for, by topic and partition.
    pub partitions: Vec<PartitionView>,
    /// When the refresh that read this view finished: the last time the group's backlog (its
    /// offsets and the log reads of every partition) was read in full. A view kept from an
    /// earlier refresh (see [`Snapshot::unread`]) has an older one.
    pub last_read: Option<SystemTime>,
}

impl GroupView {
    /// The group's lag summed over its partitions (of `topic` only, when given); `None` when
    /// no partition's lag is known. The flag says whether any part of it is an estimate.
    pub fn lag(&self, topic: Option<&str>) -> Option<(i64, bool)> {
        let mut known = self
            .partitions
            .iter()
            .filter(|p| topic.is_none_or(|t| p.topic == t))
            .filter_map(|p| p.lag.map(|l| (l, p.lag_estimated)));
        let first = known.next()?;
        Some(known.fold(first, |(sum, est), (l, e)| (sum.saturating_add(l), est || e)))
    }

    /// The age of the oldest record not yet acknowledged over its partitions (of `topic`
    /// only, when given); `None` when no partition's is known.
    pub fn oldest_age(&self, topic: Option<&str>, now: SystemTime) -> Option<Duration> {
        self.partitions
            .iter()
            .filter(|p| topic.is_none_or(|t| p.topic == t))
            .filter_map(|p| p.oldest_age(now))
            .max()
    }

    /// Whether any of its partitions' lag and age (of `topic` only, when given) is an
    /// estimate (Kafka 4.1: no lag from the broker).
    pub fn estimated(&self, topic: Option<&str>) -> bool {
        self.partitions.iter().filter(|p| topic.is_none_or(|t| p.topic == t)).any(|p| p.lag_estimated)
    }
}

/// A group whose backlog the last refresh could not read in full: its last good view (if
/// any) stays in [`Snapshot::groups`] with its [`GroupView::last_read`], and the scaler
/// answers UNAVAILABLE for it rather than a value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unread {
    /// What could not be read, as `operation: kind` (`offsets: timeout`).
    pub cause: String,
    /// When its backlog was last read in full; `None` when never since the exporter started.
    pub last_read: Option<SystemTime>,
}

/// Everything the exporter knows, as of its last refresh.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Snapshot {
    /// The groups exported, by id.
    pub groups: Vec<GroupView>,
    /// When the last successful refresh finished: one that listed the groups (when not
    /// named), found each group or learnt from the cluster that it does not exist, and read
    /// every group's backlog in full (offsets, and the log of each partition). `None` before
    /// the first.
    pub last_success: Option<SystemTime>,
    /// Groups whose backlog the last refresh could not read in full, by id, with the cause.
    /// Their last good views stay in `groups`.
    pub unread: BTreeMap<String, Unread>,
    /// Why the last refresh could not list the groups (`list_groups: timeout`); `None` when
    /// it could, or named them. While set, a group not in `groups` is unknown, not absent.
    pub listing_failed: Option<String>,
    /// How long the last refresh took.
    pub refresh_duration: Duration,
    /// Refreshes run so far (successful or not).
    pub refreshes: u64,
    /// Errors so far, by (operation, kind): `("offsets", "group_authorization_failed")`.
    pub errors: BTreeMap<(&'static str, String), u64>,
    /// Requests the last refresh sent, by API name (`"DescribeShareGroupOffsets"`), retries
    /// included: the descriptions go one request per coordinator, the offsets one per group.
    pub requests: BTreeMap<&'static str, u64>,
    /// Requests sent by all refreshes so far, by API name.
    pub requests_total: BTreeMap<&'static str, u64>,
    /// Group coordinators that answered for the groups in the last refresh.
    pub coordinators: usize,
}

impl Snapshot {
    /// The group named `group`, if it is exported (its view may be from an earlier refresh:
    /// see [`unread`](Self::unread)).
    pub fn group(&self, group: &str) -> Option<&GroupView> {
        self.groups.iter().find(|g| g.group == group)
    }

    /// Errors so far of `operation`, of any kind.
    pub fn errors_of(&self, operation: &str) -> u64 {
        self.errors.iter().filter(|((op, _), _)| *op == operation).map(|(_, n)| n).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(lag: Option<i64>, start: i64, end: Option<i64>, ts: Option<i64>) -> PartitionView {
        PartitionView {
            topic: "t".into(),
            partition: 0,
            start_offset: start,
            end_offset: end,
            lag,
            lag_estimated: false,
            oldest_timestamp_ms: ts,
            oldest_offset: start,
        }
    }

    #[test]
    fn age_is_zero_when_nothing_waits_and_grows_with_the_clock_otherwise() {
        let now = UNIX_EPOCH + Duration::from_secs(100);
        assert_eq!(part(Some(0), 5, Some(10), Some(1_000)).oldest_age(now), Some(Duration::ZERO), "lag 0 wins");
        assert_eq!(part(None, 10, Some(10), None).oldest_age(now), Some(Duration::ZERO), "at the end");
        assert_eq!(part(Some(3), 7, None, None).oldest_age(now), None, "unknown");
        assert_eq!(part(Some(3), 7, Some(10), Some(40_000)).oldest_age(now), Some(Duration::from_secs(60)));
        assert_eq!(part(Some(3), 7, Some(10), Some(200_000)).oldest_age(now), Some(Duration::ZERO), "future");
        assert_eq!(part(Some(3), 7, Some(10), Some(-5)).oldest_age(now), Some(Duration::from_secs(100)));
    }

    #[test]
    fn group_lag_sums_known_partitions_and_says_if_any_is_estimated() {
        let mut a = part(Some(3), 0, Some(3), None);
        let mut b = part(Some(4), 0, Some(4), None);
        b.partition = 1;
        b.lag_estimated = true;
        let c = PartitionView { topic: "u".into(), lag: None, ..a.clone() };
        a.lag_estimated = false;
        let g = GroupView {
            group: "g".into(),
            state: "Stable".into(),
            members: 1,
            assigned_partitions: 2,
            partitions: vec![a, b, c],
            last_read: None,
        };
        assert_eq!(g.lag(None), Some((7, true)));
        assert_eq!(g.lag(Some("u")), None);
        assert_eq!(g.lag(Some("nope")), None);
    }
}
