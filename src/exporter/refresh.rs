//! One refresh: list the share groups, describe them (one FindCoordinator, then one request per
//! coordinator carrying all its groups) and read their offsets (one FindCoordinator, then one
//! request per group, a bounded number in flight per coordinator), then read every share
//! partition's log end and the record at its start offset (one Fetch per leader), and, where
//! the broker's lag says the first unacknowledged record lies above the start offset, the
//! record there (one more Fetch per leader, only for those partitions).
//!
//! What fails is counted by operation and kind. A group whose backlog could not be read in
//! full (its description, its offsets or one of its partitions' log reads failed) is *unread*:
//! the refresh says so and why, and the exporter keeps serving its last good view rather than
//! a partial one (a missing partition would read as less lag). Only the cluster's own word
//! makes a group absent: GROUP_ID_NOT_FOUND, or a listing without it. A deleted topic drops
//! its partitions from the views. Groups named in a [`GroupFilter::List`] are described
//! without listing: a missing one is counted (`group_id_not_found`), a forbidden one too
//! (`group_authorization_failed`) and is unread.

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
    /// The groups read in full, or `None` when they could not even be listed.
    pub groups: Option<Vec<GroupView>>,
    /// Groups found (listed or named) whose backlog could not be read in full, with the
    /// cause (`offsets: timeout`).
    pub unread: Vec<(String, String)>,
    /// Why the listing failed (`list_groups: timeout`), with `groups` `None`.
    pub listing_failed: Option<String>,
    /// (operation, kind, message) of each failure.
    pub errors: Vec<(&'static str, String, String)>,
    /// Requests the refresh sent, by API name (its admin client's, retries included).
    pub requests: BTreeMap<&'static str, u64>,
    /// Group coordinators that described the groups.
    pub coordinators: usize,
    /// Whether the cluster answered anything (the listing, or a description, if only with an
    /// error of its own): `false` when it could not be reached at all.
    pub reached: bool,
}

impl Refreshed {
    /// Counts a failure; returns its cause as `operation: kind`.
    fn failed(&mut self, operation: &'static str, e: &Error) -> String {
        let kind = error_kind(e);
        let cause = format!("{operation}: {kind}");
        self.errors.push((operation, kind, e.to_string()));
        cause
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

/// A group being read: its description, then its offsets, then what its partitions' log
/// reads gave, or why it could not be read in full.
struct Reading {
    d: ShareGroupDescription,
    o: ShareGroupOffsets,
    unread: Option<String>,
}

async fn read(admin: &Admin, config: &ExporterConfig) -> Refreshed {
    let (filter, timeout) = (&config.groups, config.request_timeout);
    let mut out = Refreshed::default();
    let ids: Vec<String> = match filter {
        // Named groups are described as named: one that is missing or that this principal may
        // not describe is an error of its own (ListGroups would silently leave it out).
        GroupFilter::List(ids) => ids.clone(),
        _ => match bounded(timeout, "listing the share groups", admin.list_share_groups()).await {
            Ok(l) => {
                out.reached = true;
                l.into_iter().map(|l| l.group_id).filter(|g| filter.admits(g)).collect()
            }
            Err(e) => {
                out.listing_failed = Some(out.failed("list_groups", &e));
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

    let mut readings = Vec::new();
    let mut coordinators = BTreeSet::new();
    let mut wanted: BTreeMap<TopicPartition, BTreeSet<i64>> = BTreeMap::new();
    for ((id, d), o) in ids.iter().zip(described).zip(offsets) {
        out.reached |= d.as_ref().map_or_else(|e| e.code().is_some(), |_| true);
        let d = match d {
            Ok(d) => d,
            Err(e) => {
                let cause = out.failed("describe_group", &e);
                // Deleted between the listing and the describe, or never made: the cluster
                // says it does not exist. Anything else (a timeout, a refusal) says nothing
                // about the group's backlog.
                if e.code() != Some(ErrorCode::GROUP_ID_NOT_FOUND) {
                    out.unread.push((id.clone(), cause));
                }
                continue;
            }
        };
        coordinators.insert(d.coordinator.node_id);
        let o = match o {
            Ok(o) => o,
            Err(e) => {
                let cause = out.failed("offsets", &e);
                out.unread.push((id.clone(), cause));
                continue;
            }
        };
        let mut unread = None;
        for (tp, r) in &o.partitions {
            match r {
                Ok(p) => {
                    if let Some(start) = p.start_offset {
                        wanted.entry(tp.clone()).or_default().insert(start);
                    }
                }
                Err(e) => unread = Some(out.failed("offsets", e)),
            }
        }
        if unread.is_none() {
            unread = unreported_topics(&d, &o).map(|t| {
                let e = Error::Broker {
                    context: crate::error::Context::api("DescribeShareGroupOffsets"),
                    code: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                    message: Some(format!(
                        "the offsets of share group {} leave out topic {}, assigned to its members: not authorized \
                         to describe it?",
                        super::shown(&d.group_id),
                        super::shown(&t)
                    )),
                };
                out.failed("offsets", &e)
            });
        }
        readings.push(Reading { d, o, unread });
    }
    out.coordinators = coordinators.len();
    blind_principal(admin, timeout, &mut readings, &mut out).await;

    let mut peeked = peek_all(admin, &wanted, timeout, &mut out).await;
    // Where the broker's lag puts the first unacknowledged record above the start offset,
    // read the record there too (see `PartitionView::oldest_offset`).
    let mut above: BTreeMap<TopicPartition, BTreeSet<i64>> = BTreeMap::new();
    for r in &readings {
        for (tp, p) in r.o.partitions.iter().filter_map(|(tp, p)| p.as_ref().ok().map(|p| (tp, p))) {
            let (Some(start), Some(lag)) = (p.start_offset, p.lag) else { continue };
            if let Some(log) = peeked.records.get(&(tp.clone(), start)) {
                let at = log.high_watermark - lag;
                if lag > 0 && at > start {
                    above.entry(tp.clone()).or_default().insert(at);
                }
            }
        }
    }
    if !above.is_empty() {
        let more = peek_all(admin, &above, timeout, &mut out).await;
        peeked.records.extend(more.records);
        peeked.gone.extend(more.gone);
        peeked.failed.extend(more.failed);
    }

    let mut views = Vec::new();
    for r in readings {
        let id = r.d.group_id.clone();
        match r.unread.map_or_else(|| view(r.d, &r.o, &peeked), Err) {
            Ok(v) => views.push(v),
            Err(cause) => {
                // A cause no failed request counted (an answer that left something out).
                if let Some((operation, kind)) = uncounted(&cause) {
                    out.errors.push((
                        operation,
                        kind.to_string(),
                        format!("share group {}: {cause}", super::shown(&id)),
                    ));
                }
                out.unread.push((id, cause))
            }
        }
    }
    views.sort_by(|a, b| a.group.cmp(&b.group));
    out.groups = Some(views);
    out
}

/// An empty group that had members (epoch above 0) and whose offsets show no partition: either
/// it has no share state (its topics deleted, or never initialized), or this principal may not
/// describe its topics (Kafka leaves them out without an error, and an empty group has no
/// assignment to compare with). Told apart where it can be: a principal that may describe no
/// topic at all (one Metadata request, only when such a group is met) reads no backlog, so
/// those groups are unread (`topic_authorization_failed`). One that may describe some topics
/// is not told apart: its groups read as without state.
async fn blind_principal(admin: &Admin, timeout: Duration, readings: &mut [Reading], out: &mut Refreshed) {
    let suspect =
        |r: &Reading| r.unread.is_none() && r.o.partitions.is_empty() && r.d.members.is_empty() && r.d.group_epoch > 0;
    if !readings.iter().any(suspect) {
        return;
    }
    let cause = match bounded(timeout, "listing the topics", admin.list_topics_with_internal()).await {
        Ok(topics) if !topics.is_empty() => return,
        Ok(_) => None,
        Err(e) => Some(out.failed("metadata", &e)),
    };
    for r in readings.iter_mut().filter(|r| suspect(r)) {
        r.unread = Some(match &cause {
            Some(c) => c.clone(),
            None => {
                let e = Error::Broker {
                    context: crate::error::Context::api("DescribeShareGroupOffsets"),
                    code: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                    message: Some(format!(
                        "share group {} had members but its offsets show no partition, and this principal may \
                         describe no topic: not authorized to describe its topics",
                        super::shown(&r.d.group_id)
                    )),
                };
                out.failed("offsets", &e)
            }
        });
    }
}

/// The causes [`view`] finds in answers, not in failed requests: (operation, kind) to count.
fn uncounted(cause: &str) -> Option<(&'static str, &'static str)> {
    if cause.starts_with(NO_LAG) {
        Some(("offsets", "lag_unknown"))
    } else if cause.starts_with(NOT_READ) {
        Some(("log", "not_read"))
    } else {
        None
    }
}

/// A partition's offsets without a lag from a broker that reports lag.
const NO_LAG: &str = "offsets: lag_unknown";
/// A partition the log reads gave no answer for.
const NOT_READ: &str = "log: not_read";

/// A topic assigned to the group's members that its offsets leave out. Kafka leaves out of
/// a DescribeShareGroupOffsets answer the topics the principal may not describe, without an
/// error: a group read that way would show less lag than it has.
fn unreported_topics(d: &ShareGroupDescription, o: &ShareGroupOffsets) -> Option<String> {
    let reported: BTreeSet<&str> = o.partitions.iter().map(|(tp, _)| tp.topic.as_str()).collect();
    d.members
        .iter()
        .flat_map(|m| m.assignment.iter())
        .map(|(t, _)| t.as_str())
        .find(|t| !reported.contains(t))
        .map(str::to_string)
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
                            let cause = out.failed("log", &e);
                            if code == Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                                || code == Some(ErrorCode::UNKNOWN_TOPIC_ID)
                            {
                                found.gone.insert(tp);
                            } else {
                                found.failed.insert(tp, cause);
                            }
                        }
                    }
                }
            }
            Err(e) => {
                let cause = out.failed("log", &e);
                for (tp, _) in at {
                    found.failed.insert(tp, cause.clone());
                }
            }
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
    /// Partitions whose log could not be read, with the cause (`log: timeout`).
    failed: BTreeMap<TopicPartition, String>,
}

/// A group's view from its description, offsets and the log reads; `Err` with the cause when
/// one of its partitions' logs could not be read (the group is then unread).
fn view(d: ShareGroupDescription, o: &ShareGroupOffsets, peeked: &Peeked) -> std::result::Result<GroupView, String> {
    let mut partitions = Vec::new();
    for (tp, r) in &o.partitions {
        let Ok(p) = r else { continue };
        let Some(start) = p.start_offset else { continue };
        if peeked.gone.contains(tp) {
            continue;
        }
        let unread =
            |at: i64| peeked.failed.get(tp).cloned().unwrap_or_else(|| format!("{NOT_READ} (offset {at} of {tp})"));
        let log = peeked.records.get(&(tp.clone(), start)).ok_or_else(|| unread(start))?;
        let end = log.high_watermark;
        let (lag, lag_estimated) = match p.lag {
            Some(l) => (l, false),
            // Kafka 4.1: no lag from the broker.
            None if !o.lag_supported => ((end - start).max(0), true),
            None => return Err(format!("{NO_LAG} ({tp}: no lag from a broker that reports lag)")),
        };
        let at = if lag_estimated || lag == 0 { start } else { (end - lag).max(start) };
        let oldest = if at == start { log } else { peeked.records.get(&(tp.clone(), at)).ok_or_else(|| unread(at))? };
        partitions.push(PartitionView {
            topic: tp.topic.clone(),
            partition: tp.partition,
            start_offset: start,
            end_offset: Some(end),
            lag: Some(lag),
            lag_estimated,
            oldest_timestamp_ms: oldest.timestamp,
            oldest_offset: at,
        });
    }
    Ok(GroupView {
        state: d.state.to_string(),
        members: d.members.len(),
        assigned_partitions: d.members.iter().map(|m| m.partition_count()).sum(),
        group: d.group_id,
        partitions,
        last_read: None,
    })
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
