//! A snapshot of cluster metadata: brokers, topics (name <-> id), partition leaders.

use std::collections::HashMap;

use kafka_protocol::messages::MetadataResponse;
use uuid::Uuid;

/// One broker endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// The node id.
    pub node_id: i32,
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Rack, if configured.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// host:port.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition's leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition index.
    pub partition: i32,
    /// Leader node id (-1 when none).
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Partition-level error code from the metadata response.
    pub error_code: i16,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Name.
    pub name: String,
    /// Topic id.
    pub id: Uuid,
    /// Partitions, indexed by partition number.
    pub partitions: Vec<PartitionInfo>,
}

/// An immutable view of the cluster, replaced whole on each refresh.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// Brokers by node id.
    pub brokers: HashMap<i32, BrokerInfo>,
    /// Topics by name.
    pub topics: HashMap<String, TopicInfo>,
    /// Topic names by id.
    pub topic_names: HashMap<Uuid, String>,
    /// Controller node id, as the broker reports it.
    pub controller_id: i32,
    /// Cluster id.
    pub cluster_id: Option<String>,
}

impl Metadata {
    /// Builds a snapshot from a response; topics that came back with an error are left out
    /// (and listed in the second value with their error codes).
    pub fn from_response(r: &MetadataResponse) -> (Metadata, Vec<(String, i16)>) {
        let mut md = Metadata {
            controller_id: r.controller_id.0,
            cluster_id: r.cluster_id.as_ref().map(|c| c.to_string()),
            ..Default::default()
        };
        for b in &r.brokers {
            md.brokers.insert(
                b.node_id.0,
                BrokerInfo {
                    node_id: b.node_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                },
            );
        }
        let mut errors = Vec::new();
        for t in &r.topics {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            if t.error_code != 0 {
                errors.push((name, t.error_code));
                continue;
            }
            let mut partitions: Vec<PartitionInfo> = t
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    error_code: p.error_code,
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            md.topic_names.insert(t.topic_id, name.clone());
            md.topics.insert(name.clone(), TopicInfo { name, id: t.topic_id, partitions });
        }
        (md, errors)
    }

    /// Merges a partial refresh (some topics) into this snapshot.
    pub fn merge(&mut self, newer: Metadata) {
        self.brokers = newer.brokers;
        self.controller_id = newer.controller_id;
        if newer.cluster_id.is_some() {
            self.cluster_id = newer.cluster_id;
        }
        for (name, t) in newer.topics {
            if let Some(old) = self.topics.get(&name) {
                if old.id != t.id {
                    self.topic_names.remove(&old.id); // topic re-created under a new id
                }
            }
            self.topic_names.insert(t.id, name.clone());
            self.topics.insert(name, t);
        }
    }

    /// The leader of a partition, if known.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let p = self.topics.get(topic)?.partitions.iter().find(|p| p.partition == partition)?;
        (p.leader >= 0).then_some(p.leader)
    }

    /// The name of a topic id.
    pub fn topic_name(&self, id: &Uuid) -> Option<&str> {
        self.topic_names.get(id).map(|s| s.as_str())
    }
}
