//! What the driver core needs to know of the cluster's layout, and may teach it.
//!
//! The real implementation is the [`Cluster`]'s metadata; a simulation implements it over its
//! own model. Lookups go one at a time (no lock held across them): the core never needs a
//! consistent view of several partitions at once, only the latest word on each.

use std::sync::Arc;

use uuid::Uuid;

use crate::cluster::{BrokerInfo, Cluster};

/// Topic names, partition leaders and broker addresses, as far as they are known.
pub(crate) trait Topology: Send + Sync {
    /// The name of a topic id, if the metadata has it.
    fn topic_name(&self, id: &Uuid) -> Option<Arc<str>>;
    /// The leader of a partition, if known.
    fn leader(&self, topic: &str, partition: i32) -> Option<i32>;
    /// A broker's address, for error messages.
    fn broker_addr(&self, node: i32) -> Option<String>;
    /// A share answer named a partition's new leader (NOT_LEADER_OR_FOLLOWER with
    /// CurrentLeader): remembered until the next metadata refresh says otherwise.
    fn learn_leader(&self, topic: &str, partition: i32, leader: i32, leader_epoch: i32);
    /// A share answer's NodeEndpoints: brokers the metadata may not list yet.
    fn learn_brokers(&self, brokers: Vec<BrokerInfo>);
}

impl Topology for Cluster {
    fn topic_name(&self, id: &Uuid) -> Option<Arc<str>> {
        self.with_metadata(|m| m.topic_name(id).map(Arc::from))
    }

    fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.with_metadata(|m| m.leader(topic, partition))
    }

    fn broker_addr(&self, node: i32) -> Option<String> {
        self.with_metadata(|m| m.brokers.get(&node).map(|b| b.addr()))
    }

    fn learn_leader(&self, topic: &str, partition: i32, leader: i32, leader_epoch: i32) {
        Cluster::learn_leader(self, topic, partition, leader, leader_epoch)
    }

    fn learn_brokers(&self, brokers: Vec<BrokerInfo>) {
        Cluster::learn_brokers(self, brokers)
    }
}
