//! Listing and describing topics, and describing the cluster: the calls a user makes to find
//! out what is there (Java's `listTopics`, `describeTopics`, `describeCluster`).
//!
//! Topics come from a Metadata request (v10+, which carries topic ids), the cluster from
//! DescribeCluster (Kafka 2.8+; every share-group cluster has it). Neither changes the
//! client's own metadata snapshot.

use std::fmt;

use base64::Engine as _;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{DescribeClusterRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::Admin;
use crate::error::{Context, Error, ErrorCode, Result};
use crate::protocol::CodecError;

/// DescribeCluster versions: v1 names the endpoint type (brokers), v2 can include fenced
/// brokers (we ask it not to, as Java does by default).
const DESCRIBE_CLUSTER_VERSIONS: (i16, i16) = (0, 2);

/// A topic's id: the 16 bytes the cluster gave it when it was created. A topic deleted and
/// made again under the same name has a new one.
///
/// Shown as Kafka shows it (`kafka-topics.sh --describe`, Java's `Uuid::toString`): URL-safe
/// base64 without padding, e.g. `Zf3mCn7ZTz-_3TeaCJWqyg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicId([u8; 16]);

impl TopicId {
    /// The id's bytes (most significant first, as on the wire).
    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }

    fn from_uuid(id: Uuid) -> TopicId {
        TopicId(*id.as_bytes())
    }
}

impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0))
    }
}

/// A topic as [`Admin::list_topics`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicListing {
    /// The topic's name.
    pub name: String,
    /// The topic's id.
    pub topic_id: TopicId,
    /// Whether it is one of Kafka's own (`__consumer_offsets`, `__share_group_state`, ...).
    pub internal: bool,
}

/// A topic as [`Admin::describe_topics`] describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicDescription {
    /// The topic's name.
    pub name: String,
    /// The topic's id.
    pub topic_id: TopicId,
    /// Whether it is one of Kafka's own.
    pub internal: bool,
    /// Its partitions, by partition number.
    pub partitions: Vec<PartitionDescription>,
}

/// One partition of a [`TopicDescription`]. Brokers are named by node id (see
/// [`Admin::describe_cluster`] for their addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionDescription {
    /// The partition number.
    pub partition: i32,
    /// The leader's node id; `None` while the partition has no leader (its replicas are
    /// offline, or an election is under way).
    pub leader: Option<i32>,
    /// The leader epoch: it grows with every change of leader.
    pub leader_epoch: i32,
    /// Every replica's node id, the preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas on brokers that are offline.
    pub offline_replicas: Vec<i32>,
}

/// The cluster as [`Admin::describe_cluster`] describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: String,
    /// The node id the cluster names as its controller, if it names one. A KRaft cluster
    /// names one of its brokers (clients cannot reach the controllers themselves).
    pub controller_id: Option<i32>,
    /// The live brokers, by node id (fenced brokers are left out).
    pub brokers: Vec<BrokerDescription>,
}

/// A broker of a [`ClusterDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerDescription {
    /// The node id.
    pub id: i32,
    /// The host it advertises to clients.
    pub host: String,
    /// The port it advertises to clients.
    pub port: u16,
    /// Its rack (`broker.rack`), if it has one.
    pub rack: Option<String>,
}

impl BrokerDescription {
    /// `host:port`, as `bootstrap.servers` takes it.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl Admin {
    /// The topics of the cluster, by name, without Kafka's internal ones (as Java's
    /// `listTopics()`). With ACLs, the broker lists only the topics this principal may
    /// describe.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn list_topics(&self) -> Result<Vec<TopicListing>> {
        let mut topics = self.list_topics_with_internal().await?;
        topics.retain(|t| !t.internal);
        Ok(topics)
    }

    /// The topics of the cluster, by name, Kafka's internal ones included
    /// (`__consumer_offsets`, `__share_group_state`, ...; Java's `listInternal(true)`).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn list_topics_with_internal(&self) -> Result<Vec<TopicListing>> {
        let req = MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(false);
        let resp = self.cluster.metadata_call(&req).await?;
        let mut topics: Vec<TopicListing> = resp
            .topics
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| {
                Some(TopicListing {
                    name: t.name.as_ref()?.0.to_string(),
                    topic_id: TopicId::from_uuid(t.topic_id),
                    internal: t.is_internal,
                })
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// Describes topics: one result per name, in order. A topic that does not exist is
    /// [`Error::UnknownTopic`]; one this principal may not describe is
    /// [`Error::TopicAuthorizationFailed`]. Never creates a topic.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn describe_topics(&self, names: &[&str]) -> Result<Vec<Result<TopicDescription>>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let req = MetadataRequest::default()
            .with_topics(Some(
                names
                    .iter()
                    .map(|n| {
                        MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(n.to_string()))))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(false);
        let resp = self.cluster.metadata_call(&req).await?;
        Ok(names
            .iter()
            .map(|n| match resp.topics.iter().find(|t| t.name.as_ref().map(|x| x.0.as_str()) == Some(*n)) {
                None => Err(Error::IncompleteResponse { api: "Metadata", missing: format!("topic {n}") }),
                Some(t) => describe_topic(n, t),
            })
            .collect())
    }

    /// Describes one topic (see [`describe_topics`](Self::describe_topics)).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn describe_topic(&self, name: &str) -> Result<TopicDescription> {
        match self.describe_topics(&[name]).await?.pop() {
            Some(r) => r,
            None => Err(Error::IncompleteResponse { api: "Metadata", missing: format!("topic {name}") }),
        }
    }

    /// Describes the cluster: its id, the controller it names and its live brokers.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn describe_cluster(&self) -> Result<ClusterDescription> {
        let conn = self.cluster.any_broker().await?;
        let req = DescribeClusterRequest::default().with_endpoint_type(1);
        let resp = self.cluster.send(&conn, &req, DESCRIBE_CLUSTER_VERSIONS).await?;
        let context = || Context::api("DescribeCluster").broker(conn.node_id);
        if let Some(e) =
            Error::from_code(resp.error_code, resp.error_message.as_ref().map(|m| m.to_string()), context())
        {
            return Err(e);
        }
        let mut brokers = resp
            .brokers
            .iter()
            .map(|b| {
                let port = u16::try_from(b.port).map_err(|_| Error::Malformed {
                    context: context(),
                    source: CodecError::Invalid {
                        what: "broker port",
                        detail: format!("broker {} has port {}", b.broker_id.0, b.port),
                    },
                })?;
                Ok(BrokerDescription {
                    id: b.broker_id.0,
                    host: b.host.to_string(),
                    port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        brokers.sort_by_key(|b| b.id);
        Ok(ClusterDescription {
            cluster_id: resp.cluster_id.to_string(),
            controller_id: (resp.controller_id.0 >= 0).then_some(resp.controller_id.0),
            brokers,
        })
    }
}

/// One topic of a Metadata answer, or its error.
fn describe_topic(name: &str, t: &MetadataResponseTopic) -> Result<TopicDescription> {
    if ErrorCode::from_code(t.error_code) == Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION) {
        return Err(Error::UnknownTopic(name.to_string()));
    }
    if let Some(e) = Error::for_topic(t.error_code, "Metadata", name) {
        return Err(e);
    }
    let mut partitions: Vec<PartitionDescription> = t
        .partitions
        .iter()
        .map(|p| PartitionDescription {
            partition: p.partition_index,
            leader: (p.leader_id.0 >= 0).then_some(p.leader_id.0),
            leader_epoch: p.leader_epoch,
            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
            offline_replicas: p.offline_replicas.iter().map(|b| b.0).collect(),
        })
        .collect();
    partitions.sort_by_key(|p| p.partition);
    Ok(TopicDescription {
        name: name.to_string(),
        topic_id: TopicId::from_uuid(t.topic_id),
        internal: t.is_internal,
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_id_shows_as_kafka_does() {
        // Java: new Uuid(0x65fde60a7ed94f3fL, 0xbfdd379a0895aacaL).toString()
        let id = TopicId::from_uuid(Uuid::from_u128(0x65fd_e60a_7ed9_4f3f_bfdd_379a_0895_aaca));
        assert_eq!(id.to_string(), "Zf3mCn7ZTz-_3TeaCJWqyg");
        assert_eq!(id.to_bytes()[0], 0x65);
    }
}
