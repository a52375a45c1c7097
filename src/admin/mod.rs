//! Administration: topics (list, describe, create, delete), the cluster's brokers, group
//! configs, share groups and their dead-letter queue, partitions' offsets and deleting records
//! below one.
//!
//! [`Admin`] is a thin, typed layer over the cluster: each call picks the broker that must
//! answer it (the controller-facing broker for topics, the group coordinator for groups),
//! negotiates the version, and turns per-item error codes into per-item results.

pub mod blocking;
mod by_coordinator;
mod configs;
mod coordinator;
mod delete_records;
mod describe;
mod groups;
mod list_offsets;
mod offsets;
mod peek;
// Only the sink runtime's distributed mode reads a topic from its start (its config topic).
#[cfg(feature = "sink")]
mod read_log;
mod reset;
mod share_settings;
mod to_leaders;
mod topics;

use std::sync::Arc;

#[cfg(feature = "exporter")]
pub(crate) use by_coordinator::Fanout;
pub use configs::{validate_group_config, ConfigEntry, ConfigSource, GROUP_RESOURCE};
pub use describe::{
    BrokerDescription, ClusterDescription, PartitionDescription, TopicDescription, TopicId, TopicListing,
};
pub use groups::{ShareGroupDescription, ShareGroupListing, ShareGroupState, ShareMemberDescription};
pub use list_offsets::{ListedOffset, OffsetSpec};
pub use offsets::{ShareGroupOffsets, SharePartitionOffset, TopicPartition, LAG_NEEDS_KAFKA_4_2};
pub use peek::PeekedRecord;
pub use reset::{parse_datetime, OffsetResetSpec, PlannedReset, ResetAdjustment, TopicSelection};
pub use share_settings::{
    DeadLetterQueue, ShareGroupSettings, DLQ_COPY_RECORD_KEY, DLQ_PREFIX_KEY, DLQ_TOPIC_ENABLE_KEY, DLQ_TOPIC_KEY,
};
pub use topics::NewTopic;

use crate::cluster::{Cluster, ClusterConfig};
use crate::config::{Client, Properties};
use crate::error::Result;

/// An admin client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Admin {
    cluster: Arc<Cluster>,
}

impl Admin {
    /// Connects with the given cluster settings.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn connect(config: ClusterConfig) -> Result<Admin> {
        Ok(Admin { cluster: Cluster::connect(config).await? })
    }

    /// Connects to `bootstrap` (`host:port[,host:port]`) with default settings.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn connect_to(bootstrap: &str) -> Result<Admin> {
        let mut c = ClusterConfig::new(bootstrap);
        c.client_id = crate::config::numbered_client_id(Client::Admin); // Java's adminclient-<n>
        Admin::connect(c).await
    }

    /// Connects with Java-named properties (bootstrap.servers, client.id, request.timeout.ms, ...).
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn from_properties(p: &Properties) -> Result<Admin> {
        Admin::connect(Admin::config_from_properties(p)?).await
    }

    /// The connection settings [`from_properties`](Self::from_properties) reads. Apart so
    /// that a caller whose future must be `Send` (a spawned task) holds no `&Properties`
    /// (not `Sync`) across the connect: `Admin::connect(Admin::config_from_properties(&p)?)`.
    pub(crate) fn config_from_properties(p: &Properties) -> Result<ClusterConfig> {
        // Its own marks: what another client read from a shared `Properties` first must not
        // hide a key from this one's warning.
        p.read_alone(|p| {
            crate::config::refuse(p, Client::Admin)?;
            let id = crate::config::client_id_or(p, || crate::config::numbered_client_id(Client::Admin));
            let mut c = ClusterConfig::from_properties(p, &id)?;
            c.client_id = id;
            crate::config::finish(p, Client::Admin)?;
            Ok(c)
        })
    }

    /// Closes the admin client's connections (its clones too: they share them). Calls made
    /// after it connect again. Nothing is pending in an admin client, so nothing is lost.
    pub fn close(&self) {
        self.cluster.close();
    }

    /// (API key, requests sent) by this client and its clones so far, retries included
    /// (the exporter reports them per refresh).
    #[cfg(feature = "exporter")]
    pub(crate) fn requests_sent(&self) -> Vec<(i16, u64)> {
        self.cluster.network_stats().requests.sent()
    }

    /// Shares an existing cluster handle. (Feature `unstable-internals`.)
    #[cfg(feature = "unstable-internals")]
    pub fn from_cluster(cluster: Arc<Cluster>) -> Admin {
        Admin { cluster }
    }

    /// The cluster handle. (Feature `unstable-internals`.)
    #[cfg(feature = "unstable-internals")]
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }
}
