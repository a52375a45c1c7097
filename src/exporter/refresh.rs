//! One refresh: list the share groups, describe them (one FindCoordinator, then one request per
//! coordinator carrying all its groups) and read their offsets (one FindCoordinator, then one
//! request per group, a bounded number in flight per coordinator), then read every share
//! partition's log end and the record at its start offset (one Fetch per leader). What fails
//! is counted by operation and kind, and left out of the views: a deleted group or topic drops
//! its series, the rest are still exported. Groups named in a [`GroupFilter::List`] are
//! described without listing: a missing or forbidden one is counted (`group_id_not_found`,
//! `group_authorization_failed`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::error_kind::error_kind;
use super::filter::GroupFilter;
use super::snapshot::{GroupView, PartitionView};
use super::ExporterConfig;
use crate::admin::{Admin, Fanout, PeekedRecord, ShareGroupDescription, ShareGroupOffsets, TopicPartition};
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::api::api_name;

/// What one refresh found and what failed in it.
#[derive(Debug, Default)]
pub(crate) struct Refreshed {
    /// The groups, or `None` when they could not even be listed (the last views stay).
    pub groups: Option<Vec<GroupView>>,
    /// (operation, kind) of each failure.
    pub errors: Vec<(&'static str, String)>,
    /// Requests the refresh sent, by API name (its admin client's, retries included).
    pub requests: BTreeMap<&'static str, u64>,
    /// Group coordinators that described the groups.
    pub coordinators: usize,
}

impl Refreshed {
    fn failed(&mut self, operation: &'static str, e: &Error) {
        tracing::debug!(operation, error = %e, "exporter refresh");
        self.errors.push((operation, error_kind(e)));
    }
}

/// Runs one refresh, each step bounded by `config.request_timeout`, the requests toward the
/// coordinators bounded as `config` says, counting the requests it sent.
pub(crate) async fn refresh(admin: &Admin, config: &ExporterConfig) -> Refreshed {
    let before = admin.requests_sent();
    let mut out = read(admin, config).await;
    out.requests = requests_between(&before, &admin.requests_sent());
    out
}

async fn read(admin: &Admin, config: &ExporterConfig) -> Refreshed {
    let (filter, timeout) = (&config.groups, config.request_timeout);
    let mut out = Refreshed::default();
    let ids: Vec<String> = match filter {
        // Named groups are described as named: one that is missing or that this principal may
        // not describe is an error of its own (ListGroups would silently leave it out).
        GroupFilter::List(ids) => ids.clone(),
        _ => match bounded(timeout, "listing the share groups", admin.list_share_groups()).await {
            Ok(l) => l.into_iter().map(|l| l.group_id).filter(|g| filter.admits(g)).collect(),
            Err(e) => {
                out.failed("list_groups", &e);
                return out;
            }
        },
    };
    // One FindCoordinator for each of the two reads. The descriptions go in one request per
    // coordinator carrying all its groups. The offsets go one group per request, a bounded
    // number in flight per coordinator: Kafka 4.4 holds a multi-group DescribeShareGroupOffsets
    // ~2.5 s before answering, and answers a single group in milliseconds.
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    let offsets_fanout = Fanout::one_group_each(config.max_in_flight, config.offsets_in_flight_per_coordinator);
    let (described, offsets) = futures::join!(
        bounded(timeout, "describing the share groups", async {
            Ok(admin.describe_share_groups_bounded(&names, config.max_in_flight).await)
        }),
        bounded(timeout, "reading the share groups' offsets", async {
            Ok(admin.list_share_groups_offsets_bounded(&names, offsets_fanout).await)
        }),
    );
    // A whole read that ran out of time fails each of its groups, as asking each alone would.
    let described = described.unwrap_or_else(|e| vec![Err(e); names.len()]);
    let offsets = offsets.unwrap_or_else(|e| vec![Err(e); names.len()]);

    let mut groups = Vec::new();
    let mut coordinators = BTreeSet::new();
    let mut wanted: BTreeMap<TopicPartition, BTreeSet<i64>> = BTreeMap::new();
    for (d, o) in described.into_iter().zip(offsets) {
        let d = match d {
            Ok(d) => d,
            Err(e) => {
                // Deleted between the listing and the describe, or not authorized: no series.
                out.failed("describe_group", &e);
                continue;
            }
        };
        coordinators.insert(d.coordinator.node_id);
        let o = match o {
            Ok(o) => Some(o),
            Err(e) => {
                out.failed("offsets", &e);
                None
            }
        };
        if let Some(o) = &o {
            for (tp, r) in &o.partitions {
                match r {
                    Ok(p) => {
                        if let Some(start) = p.start_offset {
                            wanted.entry(tp.clone()).or_default().insert(start);
                        }
                    }
                    Err(e) => out.failed("offsets", e),
                }
            }
        }
        groups.push((d, o));
    }
    out.coordinators = coordinators.len();

    let peeked = peek_all(admin, &wanted, timeout, &mut out).await;
    let mut views: Vec<GroupView> = groups.into_iter().map(|(d, o)| view(d, o.as_ref(), &peeked)).collect();
    views.sort_by(|a, b| a.group.cmp(&b.group));
    out.groups = Some(views);
    out
}

/// Requests sent by API name between two readings of [`Admin::requests_sent`].
fn requests_between(before: &[(i16, u64)], after: &[(i16, u64)]) -> BTreeMap<&'static str, u64> {
    let mut sent = BTreeMap::new();
    for (key, n) in after {
        let earlier = before.iter().find(|(k, _)| k == key).map_or(0, |(_, n)| *n);
        let n = n.saturating_sub(earlier);
        if n > 0 {
            *sent.entry(api_name(*key)).or_default() += n;
        }
    }
    sent
}

/// The record at each (partition, offset), in rounds of one offset per partition (groups on
/// the same partition are usually at different offsets); each round is one Fetch per leader.
async fn peek_all(
    admin: &Admin,
    wanted: &BTreeMap<TopicPartition, BTreeSet<i64>>,
    timeout: Duration,
    out: &mut Refreshed,
) -> Peeked {
    let mut found = Peeked::default();
    let rounds = wanted.values().map(BTreeSet::len).max().unwrap_or(0);
    for round in 0..rounds {
        let at: Vec<(TopicPartition, i64)> =
            wanted.iter().filter_map(|(tp, offs)| offs.iter().nth(round).map(|o| (tp.clone(), *o))).collect();
        // By partition: a refresh of a thousand groups asks for tens of thousands.
        let asked: BTreeMap<&TopicPartition, i64> = at.iter().map(|(tp, o)| (tp, *o)).collect();
        match bounded(timeout, "reading the log ends", admin.peek(&at)).await {
            Ok(m) => {
                for (tp, r) in m {
                    let Some(&offset) = asked.get(&tp) else { continue };
                    match r {
                        Ok(p) => {
                            found.records.insert((tp, offset), p);
                        }
                        Err(e) => {
                            let code = e.code();
                            if code == Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                                || code == Some(ErrorCode::UNKNOWN_TOPIC_ID)
                            {
                                found.gone.insert(tp);
                            }
                            out.failed("log", &e)
                        }
                    }
                }
            }
            Err(e) => out.failed("log", &e),
        }
    }
    found
}

/// The log reads of one refresh.
#[derive(Debug, Default)]
struct Peeked {
    /// The record at each (partition, offset) read.
    records: BTreeMap<(TopicPartition, i64), PeekedRecord>,
    /// Partitions whose topic the cluster no longer has (deleted): left out of every view,
    /// whatever the share state still says.
    gone: BTreeSet<TopicPartition>,
}

/// A group's view from its description, offsets and the log reads. A partition whose log could
/// not be read is left out when the broker gave no lag either (nothing to say about it).
fn view(d: ShareGroupDescription, o: Option<&ShareGroupOffsets>, peeked: &Peeked) -> GroupView {
    let mut partitions = Vec::new();
    for (tp, r) in o.map(|o| o.partitions.as_slice()).unwrap_or(&[]) {
        let Ok(p) = r else { continue };
        let Some(start) = p.start_offset else { continue };
        if peeked.gone.contains(tp) {
            continue;
        }
        let log = peeked.records.get(&(tp.clone(), start));
        let end = log.map(|l| l.high_watermark);
        let (lag, lag_estimated) = match (p.lag, o.is_some_and(|o| o.lag_supported)) {
            (Some(l), _) => (Some(l), false),
            (None, false) => (end.map(|e| (e - start).max(0)), true),
            (None, true) => (None, false),
        };
        if log.is_none() && p.lag.is_none() {
            continue;
        }
        partitions.push(PartitionView {
            topic: tp.topic.clone(),
            partition: tp.partition,
            start_offset: start,
            end_offset: end,
            lag,
            lag_estimated,
            oldest_timestamp_ms: log.and_then(|l| l.timestamp),
        });
    }
    GroupView {
        state: d.state.to_string(),
        members: d.members.len(),
        assigned_partitions: d.members.iter().map(|m| m.partition_count()).sum(),
        group: d.group_id,
        partitions,
    }
}

/// `f` within `limit`: a broker that never answers must not stall every later refresh.
async fn bounded<T>(limit: Duration, what: &str, f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r,
        Err(_) => Err(Error::Timeout { what: format!("{what} (exporter refresh)"), after: limit }),
    }
}

#[cfg(test)]
mod tests {
    use super::requests_between;

    #[test]
    fn requests_of_a_refresh_are_the_difference_by_api_name() {
        let before = [(10, 4), (90, 2)];
        let after = [(3, 1), (10, 5), (90, 2), (77, 1)];
        let sent = requests_between(&before, &after);
        let sent: Vec<(&str, u64)> = sent.into_iter().collect();
        assert_eq!(sent, vec![("FindCoordinator", 1), ("Metadata", 1), ("ShareGroupDescribe", 1)]);
    }
}
