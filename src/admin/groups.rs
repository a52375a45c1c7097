//! Listing, describing and deleting share groups.

use std::collections::BTreeMap;
use std::fmt;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::share_group_describe_response::DescribedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, GroupId, ListGroupsRequest, ShareGroupDescribeRequest, ShareGroupDescribeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::by_coordinator::Fanout;
use super::configs::group_ctx;
use super::coordinator::CoordinatorResponse;
use super::Admin;
use crate::cluster::{BrokerInfo, TrafficClass};
use crate::error::{Context, Error, ErrorCode, Result};

/// The state of a share group (Java `GroupState` restricted to share groups).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShareGroupState {
    /// No members.
    Empty,
    /// Has members.
    Stable,
    /// Being removed, or no longer exists.
    Dead,
    /// A state this client does not know, as the broker spelt it.
    Unknown(String),
}

impl ShareGroupState {
    /// Parses the broker's spelling (case-insensitive).
    pub fn parse(s: &str) -> Self {
        match s.to_ascii_lowercase().as_str() {
            "empty" => ShareGroupState::Empty,
            "stable" => ShareGroupState::Stable,
            "dead" => ShareGroupState::Dead,
            _ => ShareGroupState::Unknown(s.to_string()),
        }
    }
}

impl fmt::Display for ShareGroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShareGroupState::Empty => f.write_str("Empty"),
            ShareGroupState::Stable => f.write_str("Stable"),
            ShareGroupState::Dead => f.write_str("Dead"),
            ShareGroupState::Unknown(s) if s.is_empty() => f.write_str("Unknown"),
            ShareGroupState::Unknown(s) => f.write_str(s),
        }
    }
}

/// One share group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupListing {
    /// Group id.
    pub group_id: String,
    /// State.
    pub state: ShareGroupState,
}

/// One member of a share group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMemberDescription {
    /// Member id (chosen by the client, a UUID string for the Java client).
    pub member_id: String,
    /// `client.id` of the member.
    pub client_id: String,
    /// Host the member connects from (as the broker saw it, e.g. `/127.0.0.1`).
    pub client_host: String,
    /// Rack, if the member sent one.
    pub rack_id: Option<String>,
    /// The member's epoch.
    pub member_epoch: i32,
    /// Topics it subscribes to.
    pub subscribed_topic_names: Vec<String>,
    /// Assigned partitions: (topic, sorted partitions), sorted by topic.
    pub assignment: Vec<(String, Vec<i32>)>,
}

impl ShareMemberDescription {
    /// Number of assigned partitions.
    pub fn partition_count(&self) -> usize {
        self.assignment.iter().map(|(_, p)| p.len()).sum()
    }
}

/// A share group as ShareGroupDescribe reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupDescription {
    /// Group id.
    pub group_id: String,
    /// State.
    pub state: ShareGroupState,
    /// The coordinator that answered.
    pub coordinator: BrokerInfo,
    /// Group epoch.
    pub group_epoch: i32,
    /// Target assignment epoch.
    pub assignment_epoch: i32,
    /// Assignor name (e.g. `simple`).
    pub assignor_name: String,
    /// Members, sorted by member id.
    pub members: Vec<ShareMemberDescription>,
}

/// ShareGroupDescribe versions (v1 is the first Kafka 4.0 kept).
const DESCRIBE_VERSIONS: (i16, i16) = (1, 1);

/// A ShareGroupDescribe of `groups` (all on one coordinator).
fn describe_request(groups: &[&str]) -> ShareGroupDescribeRequest {
    ShareGroupDescribeRequest::default()
        .with_group_ids(groups.iter().map(|g| GroupId(StrBytes::from_string(g.to_string()))).collect())
        .with_include_authorized_operations(false)
}

/// Message for NON_EMPTY_GROUP on every destructive operation.
pub(crate) fn non_empty(group: &str) -> Error {
    Error::GroupNotEmpty { group: group.to_string() }
}

impl Admin {
    /// Lists the share groups of the whole cluster. Each broker only lists the groups it
    /// coordinates, so every broker is asked and the answers merged (sorted by id).
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn list_share_groups(&self) -> Result<Vec<ShareGroupListing>> {
        self.list_share_groups_in(&[]).await
    }

    /// As [`Admin::list_share_groups`], keeping only groups in `states` (all when empty).
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn list_share_groups_in(&self, states: &[ShareGroupState]) -> Result<Vec<ShareGroupListing>> {
        let req = ListGroupsRequest::default()
            .with_types_filter(vec![StrBytes::from_static_str("share")])
            .with_states_filter(states.iter().map(|s| StrBytes::from_string(s.to_string())).collect());
        let mut groups = BTreeMap::new();
        for g in self.list_groups(&req).await? {
            // Older brokers ignore the filter they do not know: filter again here.
            if !g.group_type.is_empty() && !g.group_type.eq_ignore_ascii_case("share") {
                continue;
            }
            let id = g.group_id.0.to_string();
            groups
                .insert(id.clone(), ShareGroupListing { group_id: id, state: ShareGroupState::parse(&g.group_state) });
        }
        Ok(groups.into_values().collect())
    }

    /// The type of group `group` as ListGroups reports it (`classic`, `consumer`, `share`,
    /// `streams`), or `None` when no broker lists it. A share group cannot take the id of a
    /// group of another type (its members' heartbeats fail with GROUP_ID_NOT_FOUND), so a
    /// program choosing a share group id can check it first.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn group_type(&self, group: &str) -> Result<Option<String>> {
        let listed = self.list_groups(&ListGroupsRequest::default()).await?;
        Ok(listed.into_iter().find(|g| g.group_id.0.as_str() == group).map(|g| g.group_type.to_string()))
    }

    /// One ListGroups to every broker (each lists the groups it coordinates), the answers
    /// together.
    async fn list_groups(&self, req: &ListGroupsRequest) -> Result<Vec<ListedGroup>> {
        self.cluster.refresh_metadata(&[]).await?;
        let mut nodes: Vec<i32> = self.cluster.with_metadata(|m| m.brokers.keys().copied().collect());
        nodes.sort_unstable();
        let mut groups = Vec::new();
        for node in nodes {
            let mut backoff = self.cluster.config().backoff();
            let resp = loop {
                let conn = self.cluster.broker(node, TrafficClass::Control).await?;
                // v5 is the first with TypesFilter; older brokers have no share groups anyway.
                let resp = self.cluster.send(&conn, req, (5, 5)).await?;
                if resp.error_code == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.0 && backoff.attempts() < 10 {
                    tokio::time::sleep(backoff.next_delay()).await;
                    continue;
                }
                break resp;
            };
            if let Some(e) =
                Error::from_code(resp.error_code, None, crate::error::Context::api("ListGroups").broker(node))
            {
                return Err(e);
            }
            groups.extend(resp.groups);
        }
        Ok(groups)
    }

    /// Describes share groups, one result per group in order (GROUP_ID_NOT_FOUND when a
    /// group does not exist or is not a share group). One FindCoordinator for all of them,
    /// then one ShareGroupDescribe per coordinator; each group keeps its own error.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn describe_share_groups(&self, groups: &[&str]) -> Result<Vec<Result<ShareGroupDescription>>> {
        Ok(self.describe_share_groups_bounded(groups, usize::MAX).await)
    }

    /// As [`Admin::describe_share_groups`], with at most `max_in_flight` coordinators asked at
    /// a time (the exporter's bound).
    pub(crate) async fn describe_share_groups_bounded(
        &self,
        groups: &[&str],
        max_in_flight: usize,
    ) -> Vec<Result<ShareGroupDescription>> {
        let split = |r: CoordinatorResponse<ShareGroupDescribeResponse>| {
            let node = r.node;
            r.response
                .groups
                .into_iter()
                .map(|g| {
                    let id = g.group_id.0.to_string();
                    let code = g.error_code;
                    let d = self.description(&id, node, g);
                    (id, code, d)
                })
                .collect()
        };
        self.call_coordinators(groups, DESCRIBE_VERSIONS, Fanout::batched(max_in_flight), describe_request, split)
            .await
    }

    /// Describes one share group.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn describe_share_group(&self, group: &str) -> Result<ShareGroupDescription> {
        let req = describe_request(&[group]);
        let code = |r: &ShareGroupDescribeResponse| r.groups.first().map(|g| g.error_code).unwrap_or(0);
        let r = self.call_coordinator(group, &req, DESCRIBE_VERSIONS, code).await?;
        let g = r.response.groups.into_iter().find(|g| g.group_id.0.as_str() == group).ok_or_else(|| {
            Error::IncompleteResponse { api: "ShareGroupDescribe", missing: format!("group {group}") }
        })?;
        self.description(group, r.node, g)
    }

    /// One group of a ShareGroupDescribe answer from coordinator `node`.
    fn description(&self, group: &str, node: i32, g: DescribedGroup) -> Result<ShareGroupDescription> {
        if let Some(e) = Error::from_code(
            g.error_code,
            g.error_message.map(|m| m.to_string()),
            group_ctx("ShareGroupDescribe", group),
        ) {
            return Err(e);
        }
        let coordinator = self.cluster.with_metadata(|m| m.brokers.get(&node).cloned()).unwrap_or(BrokerInfo {
            node_id: node,
            host: String::new(),
            port: -1,
            rack: None,
        });
        let mut unresolved = Vec::new();
        let mut members: Vec<ShareMemberDescription> = g
            .members
            .into_iter()
            .map(|m| {
                let mut assignment: Vec<(String, Vec<i32>)> = m
                    .assignment
                    .topic_partitions
                    .into_iter()
                    .map(|tp| {
                        let mut name = tp.topic_name.0.to_string();
                        if name.is_empty() {
                            // Names come with the response; fall back to metadata by id.
                            name = self
                                .cluster
                                .with_metadata(|md| md.topic_name(&tp.topic_id).map(str::to_string))
                                .unwrap_or_else(|| {
                                    unresolved.push(tp.topic_id);
                                    tp.topic_id.to_string()
                                });
                        }
                        let mut p = tp.partitions;
                        p.sort_unstable();
                        (name, p)
                    })
                    .collect();
                assignment.sort();
                ShareMemberDescription {
                    member_id: m.member_id.to_string(),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    rack_id: m.rack_id.map(|r| r.to_string()),
                    member_epoch: m.member_epoch,
                    subscribed_topic_names: m.subscribed_topic_names.into_iter().map(|t| t.0.to_string()).collect(),
                    assignment,
                }
            })
            .collect();
        if !unresolved.is_empty() {
            tracing::debug!(group, ?unresolved, "topic ids not in metadata; shown as ids");
        }
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        Ok(ShareGroupDescription {
            group_id: group.to_string(),
            state: ShareGroupState::parse(&g.group_state),
            coordinator,
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor_name: g.assignor_name.to_string(),
            members,
        })
    }

    /// Deletes share groups (with their share-partition state); one result per group in
    /// order. A group with members is refused ("has active members; stop them first") and
    /// left unchanged; an id that is not a share group is refused too, so this never deletes
    /// a consumer or streams group by mistake.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn delete_share_groups(&self, groups: &[&str]) -> Result<Vec<Result<()>>> {
        let mut out = Vec::with_capacity(groups.len());
        for g in groups {
            out.push(self.delete_share_group(g).await);
        }
        Ok(out)
    }

    async fn delete_share_group(&self, group: &str) -> Result<()> {
        let d = self.describe_share_group(group).await?;
        match d.state {
            ShareGroupState::Empty => {}
            ShareGroupState::Dead => {
                return Err(Error::Broker {
                    context: Context::api("DeleteGroups"),
                    code: ErrorCode::GROUP_ID_NOT_FOUND,
                    message: Some(format!("share group {group} is already being deleted")),
                })
            }
            _ => return Err(non_empty(group)),
        }
        let req =
            DeleteGroupsRequest::default().with_groups_names(vec![GroupId(StrBytes::from_string(group.to_string()))]);
        let code =
            |r: &kafka_protocol::messages::DeleteGroupsResponse| r.results.first().map(|g| g.error_code).unwrap_or(0);
        let r = self.call_coordinator(group, &req, (0, 2), code).await?;
        let res = r
            .response
            .results
            .iter()
            .find(|x| x.group_id.0.as_str() == group)
            .ok_or_else(|| Error::IncompleteResponse { api: "DeleteGroups", missing: format!("group {group}") })?;
        if res.error_code == ErrorCode::NON_EMPTY_GROUP.0 {
            return Err(non_empty(group));
        }
        match Error::from_code(res.error_code, None, group_ctx("DeleteGroups", group)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
