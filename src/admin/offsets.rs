//! Share-group offsets: describe (start offset, leader epoch, lag), alter and delete.
//!
//! The "offset" of a share partition is its start offset: every record before it has been
//! acknowledged (or archived); records from it on may be delivered. Alter and delete need an
//! empty group: the broker answers NON_EMPTY_GROUP otherwise, reported here as a plain
//! "has active members; stop them first" error, with nothing changed.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, ApiKey, DeleteShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest, GroupId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::by_coordinator::Fanout;
use super::configs::group_ctx;
use super::coordinator::CoordinatorResponse;
use super::groups::non_empty;
use super::Admin;
use crate::error::{Context, Error, ErrorCode, Result};
use crate::protocol::share_group_offsets::{DescribeOffsetsRequest, DescribeOffsetsResponse, GroupOffsets};
pub use crate::topic_partition::TopicPartition;

/// Why lag is missing when the broker predates DescribeShareGroupOffsets v1.
pub const LAG_NEEDS_KAFKA_4_2: &str =
    "lag needs Kafka 4.2+ (DescribeShareGroupOffsets v1, KIP-1226); this broker only has v0";

/// The offset state of one share partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharePartitionOffset {
    /// The start offset; `None` when the partition has no share state yet. This is the
    /// *persisted* value: the broker writes a new start offset with the partition's next state
    /// write, so right after the last acknowledgement it can still show the old one while
    /// `lag` (4.2+) already counts the acknowledged records. The Java tool shows the same.
    pub start_offset: Option<i64>,
    /// The leader epoch the state was written at; `None` when unknown, and always when
    /// there is no start offset.
    pub leader_epoch: Option<i32>,
    /// Records from the start offset to the end that are not yet acknowledged; `None` when
    /// the broker does not report it (see [`ShareGroupOffsets::lag_unavailable_reason`]) or
    /// there is no start offset.
    pub lag: Option<i64>,
}

impl SharePartitionOffset {
    /// The answer's fields, negative values being the protocol's "unknown". A partition
    /// without a start offset has no state to describe: its leader epoch (0 from the broker,
    /// meaningless there) and lag are unknown too, as Java's admin reads it (no
    /// `SharePartitionOffsetInfo` at all) and its tool prints it (`-` in each column).
    fn from_wire(start_offset: i64, leader_epoch: i32, lag: i64) -> Self {
        if start_offset < 0 {
            return SharePartitionOffset { start_offset: None, leader_epoch: None, lag: None };
        }
        SharePartitionOffset {
            start_offset: Some(start_offset),
            leader_epoch: (leader_epoch >= 0).then_some(leader_epoch),
            lag: (lag >= 0).then_some(lag),
        }
    }
}

/// The offsets of one share group, per partition (sorted by topic, partition).
#[derive(Debug, Clone)]
pub struct ShareGroupOffsets {
    /// Group id.
    pub group_id: String,
    /// One result per partition the group has state for (or that was asked for).
    pub partitions: Vec<(TopicPartition, Result<SharePartitionOffset>)>,
    /// Whether the broker reports lag (DescribeShareGroupOffsets v1, Kafka 4.2+).
    pub lag_supported: bool,
}

impl ShareGroupOffsets {
    /// `Some(reason)` when lag cannot be reported by this broker.
    pub fn lag_unavailable_reason(&self) -> Option<&'static str> {
        (!self.lag_supported).then_some(LAG_NEEDS_KAFKA_4_2)
    }

    /// The successful start offsets, by partition.
    pub fn start_offsets(&self) -> BTreeMap<TopicPartition, i64> {
        self.partitions
            .iter()
            .filter_map(|(tp, r)| r.as_ref().ok().and_then(|o| o.start_offset).map(|o| (tp.clone(), o)))
            .collect()
    }
}

/// DescribeShareGroupOffsets versions: v1 (Kafka 4.2, KIP-1226) adds the lag.
const DESCRIBE_OFFSETS_VERSIONS: (i16, i16) = (0, 1);

/// One group of a DescribeShareGroupOffsets answer from coordinator `node` at `version`.
fn group_offsets(g: GroupOffsets, node: i32, version: i16) -> Result<ShareGroupOffsets> {
    let group = g.group_id;
    if let Some(e) = Error::from_code(g.error_code, g.error_message, group_ctx("DescribeShareGroupOffsets", &group)) {
        return Err(e);
    }
    let mut partitions = Vec::new();
    for t in g.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.name.clone(), p.partition);
            let ctx = Context::api("DescribeShareGroupOffsets").broker(node).partition(&t.name, p.partition);
            let res = match Error::from_code(p.error_code, p.error_message, ctx) {
                Some(e) => Err(e),
                None => Ok(SharePartitionOffset::from_wire(p.start_offset, p.leader_epoch, p.lag)),
            };
            partitions.push((tp, res));
        }
    }
    partitions.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(ShareGroupOffsets { group_id: group, partitions, lag_supported: version >= 1 })
}

/// A DescribeShareGroupOffsets of every partition each of `groups` has state for.
fn all_offsets_request(groups: &[&str]) -> DescribeOffsetsRequest {
    DescribeOffsetsRequest(
        DescribeShareGroupOffsetsRequest::default().with_groups(
            groups
                .iter()
                // Topics null, not the default empty list (which asks for nothing).
                .map(|g| DescribeShareGroupOffsetsRequestGroup::default().with_group_id(group_id(g)).with_topics(None))
                .collect(),
        ),
    )
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

impl Admin {
    /// Describes a share group's offsets: all partitions it has state for (`topics` None),
    /// or every partition of the given topics.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn list_share_group_offsets(&self, group: &str, topics: Option<&[&str]>) -> Result<ShareGroupOffsets> {
        let req_topics = match topics {
            None => None,
            Some(ts) => {
                let names: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
                self.cluster.ensure_topics(&names).await?;
                Some(self.cluster.with_metadata(|m| {
                    names
                        .iter()
                        .map(|t| {
                            let parts = m
                                .topics
                                .get(t)
                                .map(|ti| ti.partitions.iter().map(|p| p.partition).collect())
                                .unwrap_or_default();
                            DescribeShareGroupOffsetsRequestTopic::default()
                                .with_topic_name(topic_name(t))
                                .with_partitions(parts)
                        })
                        .collect()
                }))
            }
        };
        let req = DescribeOffsetsRequest(DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(group_id(group))
                    .with_topics(req_topics),
            ]));
        let code = |r: &DescribeOffsetsResponse| r.groups.first().map(|g| g.error_code).unwrap_or(0);
        let r = self.call_coordinator(group, &req, DESCRIBE_OFFSETS_VERSIONS, code).await?;
        let g =
            r.response
                .groups
                .into_iter()
                .find(|g| g.group_id == group)
                .ok_or_else(|| Error::IncompleteResponse {
                    api: "DescribeShareGroupOffsets",
                    missing: format!("group {group}"),
                })?;
        group_offsets(g, r.node, r.version)
    }

    /// The offsets of every partition each group has state for, one result per group in
    /// order: one FindCoordinator for all of them, then one DescribeShareGroupOffsets per
    /// coordinator carrying all its groups (the request takes several); each group keeps its
    /// own error (not found, not authorized, its coordinator unreachable).
    ///
    /// Fewer requests, not less time: a Kafka 4.4 broker was measured to answer a request
    /// carrying several groups only after ~2-2.5 s (sometimes twice that), where one group
    /// takes milliseconds (`scripts/bench exporter`); Java's `kafka-share-groups.sh` asks one
    /// group at a time. For a few groups and a person waiting, [`Admin::list_share_group_offsets`]
    /// per group is faster.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn list_share_groups_offsets(&self, groups: &[&str]) -> Vec<Result<ShareGroupOffsets>> {
        self.list_share_groups_offsets_bounded(groups, Fanout::batched(usize::MAX)).await
    }

    /// As [`Admin::list_share_groups_offsets`], with the requests split and bounded as
    /// `fanout` says (the exporter's: one group per request).
    pub(crate) async fn list_share_groups_offsets_bounded(
        &self,
        groups: &[&str],
        fanout: Fanout,
    ) -> Vec<Result<ShareGroupOffsets>> {
        let split = |r: CoordinatorResponse<DescribeOffsetsResponse>| {
            let (node, version) = (r.node, r.version);
            r.response
                .groups
                .into_iter()
                .map(|g| {
                    let (id, code) = (g.group_id.clone(), g.error_code);
                    (id, code, group_offsets(g, node, version))
                })
                .collect()
        };
        self.call_coordinators(groups, DESCRIBE_OFFSETS_VERSIONS, fanout, all_offsets_request, split).await
    }

    /// Sets start offsets. The group must have no members. One result per partition.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn alter_share_group_offsets(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        if offsets.is_empty() {
            return Ok(Vec::new());
        }
        if let Some((tp, o)) = offsets.iter().find(|(_, o)| **o < 0) {
            return Err(Error::InvalidArgument(format!("offset {o} for {tp} is negative")));
        }
        let mut topics: BTreeMap<&str, Vec<AlterShareGroupOffsetsRequestPartition>> = BTreeMap::new();
        for (tp, o) in offsets {
            topics.entry(&tp.topic).or_default().push(
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(tp.partition)
                    .with_start_offset(*o),
            );
        }
        let req = AlterShareGroupOffsetsRequest::default().with_group_id(group_id(group)).with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    AlterShareGroupOffsetsRequestTopic::default().with_topic_name(topic_name(t)).with_partitions(ps)
                })
                .collect(),
        );
        let r = self.call_coordinator(group, &req, (0, 0), |r| r.error_code).await?;
        // Kafka 4.1 brokers empty every AlterShareGroupOffsets request before the group
        // coordinator sees it (fixed in 4.2) and answer "no error" for nothing. They are the
        // brokers without DescribeShareGroupOffsets v1.
        let before_4_2 = r.versions.range(ApiKey::DescribeShareGroupOffsets as i16).is_none_or(|(_, max)| max < 1);
        if before_4_2 && r.response.error_code == 0 && r.response.responses.is_empty() {
            return Err(Error::Unsupported {
                what: format!("altering the start offsets of share group {group}"),
                needs: "Kafka 4.1 brokers drop AlterShareGroupOffsets requests without applying them \
                        (fixed in Kafka 4.2); upgrade the brokers to 4.2+",
            });
        }
        let resp = r.response;
        if resp.error_code == ErrorCode::NON_EMPTY_GROUP.0 {
            return Err(non_empty(group));
        }
        if let Some(e) = Error::from_code(
            resp.error_code,
            resp.error_message.map(|m| m.to_string()),
            group_ctx("AlterShareGroupOffsets", group),
        ) {
            return Err(e);
        }
        let mut out = Vec::new();
        for tp in offsets.keys() {
            let p = resp
                .responses
                .iter()
                .filter(|t| t.topic_name.0.as_str() == tp.topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == tp.partition);
            let res = match p {
                None => Err(Error::IncompleteResponse { api: "AlterShareGroupOffsets", missing: tp.to_string() }),
                Some(p) => match Error::from_code(
                    p.error_code,
                    p.error_message.as_ref().map(|m| m.to_string()),
                    Context::api("AlterShareGroupOffsets").broker(r.node).partition(&tp.topic, tp.partition),
                ) {
                    Some(e) => Err(e),
                    None => Ok(()),
                },
            };
            out.push((tp.clone(), res));
        }
        Ok(out)
    }

    /// Deletes the share state of `topics` for the group (the next consumer starts from
    /// `share.auto.offset.reset` again). The group must have no members. One result per topic.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn delete_share_group_offsets(&self, group: &str, topics: &[&str]) -> Result<Vec<(String, Result<()>)>> {
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let req = DeleteShareGroupOffsetsRequest::default().with_group_id(group_id(group)).with_topics(
            topics
                .iter()
                .map(|t| DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(topic_name(t)))
                .collect(),
        );
        let r = self.call_coordinator(group, &req, (0, 0), |r| r.error_code).await?;
        let resp = r.response;
        if resp.error_code == ErrorCode::NON_EMPTY_GROUP.0 {
            return Err(non_empty(group));
        }
        if let Some(e) = Error::from_code(
            resp.error_code,
            resp.error_message.map(|m| m.to_string()),
            group_ctx("DeleteShareGroupOffsets", group),
        ) {
            return Err(e);
        }
        Ok(topics
            .iter()
            .map(|t| {
                let res = match resp.responses.iter().find(|x| x.topic_name.0.as_str() == *t) {
                    None => {
                        Err(Error::IncompleteResponse { api: "DeleteShareGroupOffsets", missing: format!("topic {t}") })
                    }
                    Some(x) => match Error::from_code(
                        x.error_code,
                        x.error_message.as_ref().map(|m| m.to_string()),
                        Context {
                            topic: Some(t.to_string()),
                            ..Context::api("DeleteShareGroupOffsets").broker(r.node)
                        },
                    ) {
                        Some(e) => Err(e),
                        None => Ok(()),
                    },
                };
                (t.to_string(), res)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{all_offsets_request, SharePartitionOffset};

    #[test]
    fn a_batch_asks_each_group_for_all_its_partitions() {
        let r = all_offsets_request(&["a", "b"]).0;
        let asked: Vec<(&str, bool)> = r.groups.iter().map(|g| (g.group_id.0.as_str(), g.topics.is_none())).collect();
        assert_eq!(asked, vec![("a", true), ("b", true)], "null topics: every partition with state");
    }

    #[test]
    fn no_start_offset_means_no_epoch_and_no_lag() {
        // A 4.4 broker answers start -1, epoch 0 for a partition assigned but never fetched.
        let none = SharePartitionOffset { start_offset: None, leader_epoch: None, lag: None };
        assert_eq!(SharePartitionOffset::from_wire(-1, 0, 0), none);
        assert_eq!(SharePartitionOffset::from_wire(-1, -1, -1), none);
        assert_eq!(
            SharePartitionOffset::from_wire(3, 0, 7),
            SharePartitionOffset { start_offset: Some(3), leader_epoch: Some(0), lag: Some(7) }
        );
        assert_eq!(
            SharePartitionOffset::from_wire(0, -1, -1),
            SharePartitionOffset { start_offset: Some(0), leader_epoch: None, lag: None }
        );
    }
}
