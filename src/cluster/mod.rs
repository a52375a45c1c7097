//! The cluster: bootstrap, metadata, coordinators, and the broker connection pool.
//!
//! [`Cluster`] is shared (`Arc`) by the consumer driver, the producer and the admin client.
//! It knows nothing about share sessions or membership: it answers "send this to broker N"
//! and "who leads this partition / coordinates this group".

mod coordinators;
mod metadata;
mod pool;
mod request_counts;
pub mod sasl;
mod settings;
mod versions;

use std::sync::{Arc, RwLock};

use kafka_protocol::messages::{
    metadata_request::MetadataRequestTopic, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tracing::debug;

pub use metadata::{BrokerInfo, Metadata, PartitionInfo, TopicInfo};
pub use pool::{dial, BrokerConnection, DialConfig, Pool, TrafficClass};
pub use request_counts::RequestCounts;
pub use settings::{ClusterConfig, NetworkStats};
pub use versions::ApiVersions;

use crate::connection::ConnectionConfig;
use crate::error::{Error, Result};
use crate::protocol::api::ApiRequest;

/// Metadata API versions this client speaks (v10+ carries topic ids).
const METADATA_VERSIONS: (i16, i16) = (10, 12);
/// FindCoordinator versions (v4+ batches keys).
const FIND_COORDINATOR_VERSIONS: (i16, i16) = (4, 6);

/// A shared view of one Kafka cluster.
pub struct Cluster {
    config: ClusterConfig,
    dial: DialConfig,
    metadata: RwLock<Metadata>,
    pool: Pool,
    network: Arc<NetworkStats>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("bootstrap", &self.config.bootstrap_servers).finish()
    }
}

impl Cluster {
    /// Connects to the first bootstrap server that answers and loads broker metadata.
    pub async fn connect(config: ClusterConfig) -> Result<Arc<Cluster>> {
        if config.bootstrap_servers.is_empty() {
            return Err(Error::config("bootstrap.servers", "no servers given; set it to host:port[,host:port...]"));
        }
        config.security.check_supported()?;
        let network = Arc::new(NetworkStats::default());
        let conn = ConnectionConfig {
            client_id: config.client_id.clone(),
            #[cfg(feature = "tls")]
            tls: settings::tls_client_config(&config)?,
            ..Default::default()
        };
        let dial = DialConfig {
            conn,
            sasl: settings::sasl_login(&config, network.clone())?,
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
        };
        let cluster = Arc::new(Cluster {
            dial,
            config,
            metadata: RwLock::new(Metadata::default()),
            pool: Pool::new(network.clone()),
            network,
        });
        cluster.refresh_metadata(&[]).await?;
        Ok(cluster)
    }

    /// The settings.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// A copy of the current metadata snapshot.
    pub fn metadata(&self) -> Metadata {
        self.metadata.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the snapshot under the lock without cloning it.
    pub fn with_metadata<T>(&self, f: impl FnOnce(&Metadata) -> T) -> T {
        f(&self.metadata.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// A connection to any broker (the bootstrap list first time, then known brokers).
    ///
    /// Brokers whose last dial or request failed go last, oldest failure first: a dead broker
    /// stays in the metadata until the controller fences it (~9 s), and trying it first would
    /// make every metadata refresh and coordinator lookup wait for it (the connect or request
    /// timeout when it does not refuse connections) before asking a live one.
    pub async fn any_broker(&self) -> Result<BrokerConnection> {
        let known: Vec<BrokerInfo> = self.with_metadata(|m| {
            let mut b: Vec<_> = m.brokers.values().cloned().collect();
            b.sort_by_key(|b| (self.pool.failing_since(b.node_id), b.node_id));
            b
        });
        let mut last_err = None;
        for b in &known {
            let addr = b.addr();
            match self.pool.get(b.node_id, TrafficClass::Control, &addr, &self.dial).await {
                Ok(c) => return Ok(c),
                Err(e) => last_err = Some(e),
            }
        }
        for addr in &self.config.bootstrap_servers {
            match self.pool.get(-1, TrafficClass::Control, addr, &self.dial).await {
                Ok(c) => return Ok(c),
                Err(e) => {
                    debug!(addr, error = %e, "bootstrap server failed");
                    last_err = Some(e)
                }
            }
        }
        Err(last_err.unwrap_or_else(|| Error::config("bootstrap.servers", "no broker could be reached")))
    }

    /// A connection to broker `node_id` for `class`.
    pub async fn broker(&self, node_id: i32, class: TrafficClass) -> Result<BrokerConnection> {
        let addr = self.with_metadata(|m| m.brokers.get(&node_id).map(|b| b.addr()));
        let addr = match addr {
            Some(a) => a,
            None => {
                self.refresh_metadata(&[]).await?;
                self.with_metadata(|m| m.brokers.get(&node_id).map(|b| b.addr()))
                    .ok_or(Error::UnknownBroker { node_id })?
            }
        };
        self.pool.get(node_id, class, &addr, &self.dial).await
    }

    /// Sends `req` to a connection, picking the highest common version in `versions`.
    pub async fn send<R: ApiRequest>(
        &self,
        conn: &BrokerConnection,
        req: &R,
        versions: (i16, i16),
    ) -> Result<R::Response> {
        let v = conn.versions.pick(R::KEY, versions.0, versions.1)?;
        self.send_at(conn, req, v, self.config.request_timeout).await
    }

    /// Sends `req` at version `v` (picked by the caller), allowing it `timeout`; a
    /// connection error or timeout counts against the broker as in [`send`](Self::send).
    pub async fn send_at<R: ApiRequest>(
        &self,
        conn: &BrokerConnection,
        req: &R,
        v: i16,
        timeout: std::time::Duration,
    ) -> Result<R::Response> {
        self.network.requests.note(R::KEY);
        let r = conn.conn.call_timeout(req, v, timeout).await;
        if let Err(e) = &r {
            if e.is_connection_error() || matches!(e, Error::Timeout { .. }) {
                self.pool.note_failure(conn.node_id);
            }
        }
        r
    }

    /// Refreshes metadata for `topics` (all brokers always; no topics when empty).
    pub async fn refresh_metadata(&self, topics: &[String]) -> Result<Vec<(String, i16)>> {
        let req = MetadataRequest::default()
            .with_topics(Some(
                topics
                    .iter()
                    .map(|t| {
                        MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(false);
        let resp = self.metadata_call(&req).await?;
        let (md, errors) = Metadata::from_response(&resp);
        self.metadata.write().unwrap_or_else(|p| p.into_inner()).merge(md);
        Ok(errors)
    }

    /// Lists every topic the cluster shows this client (a Metadata request for all topics),
    /// merging their metadata into the snapshot. Returns the names of those that came back
    /// without an error and are not internal (`__consumer_offsets`, `__share_group_state`...).
    /// With ACLs, the broker lists only the topics this principal may describe.
    pub async fn list_topics(&self) -> Result<Vec<String>> {
        let req = MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(false);
        let resp = self.metadata_call(&req).await?;
        let names = resp
            .topics
            .iter()
            .filter(|t| t.error_code == 0 && !t.is_internal)
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect();
        let (md, _) = Metadata::from_response(&resp);
        self.metadata.write().unwrap_or_else(|p| p.into_inner()).merge(md);
        Ok(names)
    }

    /// Sends a Metadata request to any broker, retrying retriable failures a few times.
    pub(crate) async fn metadata_call(&self, req: &MetadataRequest) -> Result<kafka_protocol::messages::MetadataResponse> {
        let mut backoff = self.config.backoff();
        loop {
            let conn = self.any_broker().await?;
            match self.send(&conn, req, METADATA_VERSIONS).await {
                Ok(r) => return Ok(r),
                Err(e) if e.is_retriable() && backoff.attempts() < 5 => {
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Makes sure metadata knows `topics`; fails with UnknownTopic for any that do not exist.
    pub async fn ensure_topics(&self, topics: &[String]) -> Result<()> {
        let missing: Vec<String> =
            self.with_metadata(|m| topics.iter().filter(|t| !m.topics.contains_key(*t)).cloned().collect());
        if missing.is_empty() {
            return Ok(());
        }
        let errors = self.refresh_metadata(&missing).await?;
        if let Some((t, code)) = errors.first() {
            return Err(Error::for_topic(*code, "Metadata", t).unwrap_or_else(|| Error::UnknownTopic(t.clone())));
        }
        Ok(())
    }

    /// Finds the coordinator of a group (key type 0) and returns its node id.
    pub async fn find_group_coordinator(&self, group_id: &str) -> Result<i32> {
        let mut backoff = self.config.backoff();
        loop {
            match self.find_group_coordinator_once(group_id).await {
                Ok(node) => return Ok(node),
                Err(e) if e.is_retriable() && backoff.attempts() < 10 => {
                    debug!(group_id, error = %e, "FindCoordinator retry");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One FindCoordinator, no retry: for callers that schedule their own retries (the share
    /// consumer's driver core backs off between lookups in virtual time).
    pub(crate) async fn find_group_coordinator_once(&self, group_id: &str) -> Result<i32> {
        let mut found = self.find_group_coordinators(&[group_id]).await?;
        found.pop().unwrap_or_else(|| {
            Err(Error::IncompleteResponse { api: "FindCoordinator", missing: format!("the coordinator of {group_id}") })
        })
    }

    /// Adds or updates broker endpoints learnt from a response (e.g. ShareFetch NodeEndpoints).
    pub fn learn_brokers(&self, brokers: impl IntoIterator<Item = BrokerInfo>) {
        let mut md = self.metadata.write().unwrap_or_else(|p| p.into_inner());
        for b in brokers {
            md.brokers.insert(b.node_id, b);
        }
    }

    /// Records a partition's new leader (from CurrentLeader in a response).
    pub fn learn_leader(&self, topic: &str, partition: i32, leader: i32, leader_epoch: i32) {
        let mut md = self.metadata.write().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = md.topics.get_mut(topic) {
            if let Some(p) = t.partitions.iter_mut().find(|p| p.partition == partition) {
                if leader_epoch >= p.leader_epoch {
                    p.leader = leader;
                    p.leader_epoch = leader_epoch;
                }
            }
        }
    }

    /// Connection counters (connections made, SASL logins and re-authentications).
    pub fn network_stats(&self) -> Arc<NetworkStats> {
        self.network.clone()
    }

    /// Closes every connection.
    pub fn close(&self) {
        self.pool.close_all();
    }

    /// Closes the connections to one broker.
    pub fn close_broker(&self, node_id: i32) {
        self.pool.close_node(node_id);
    }
}
