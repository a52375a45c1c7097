//! The shape of a fake cluster: nodes, partitions, leaders, versions.

/// The shape of a fake cluster: [`FakeConfig::default()`] is one node (id 1) serving one
/// topic, `test-topic`, of one partition with 10 records; change it with the builder methods
/// (or set the fields).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FakeConfig {
    /// Node ids (the first is the bootstrap server).
    pub nodes: Vec<i32>,
    /// Partitions of the topic.
    pub partitions: i32,
    /// Leader of each partition (missing: the first node).
    pub leaders: Vec<i32>,
    /// Records in each partition at start.
    pub records_per_partition: i64,
    /// Finalized `share.version` (0: share groups off).
    pub share_version: i16,
    /// The newest ShareFetch / ShareAcknowledge version offered (ApiVersions), within the
    /// codec's (`1` is Kafka 4.1; the default, the newest the crate speaks, is 4.2+).
    pub max_share_version: i16,
    /// The acquisition lock (`share.record.lock.duration.ms`): reported as
    /// AcquisitionLockTimeoutMs, and a record not acknowledged this long after it was acquired
    /// goes back (to be delivered again, its delivery count one higher).
    pub lock_timeout_ms: i32,
    /// `share.delivery.count.limit`: a record given back (RELEASE, a lapsed lock, a session
    /// that ended) after this many deliveries is archived, never delivered again. Kafka's
    /// default, 5; Kafka allows 2 to 10.
    pub delivery_limit: i16,
    /// The group coordinator node.
    pub coordinator: i32,
    /// The topic name.
    pub topic: String,
    /// HeartbeatIntervalMs given to members.
    pub heartbeat_interval_ms: i32,
    /// Records a batch_optimized fetch acquires at least (when there are that many), whatever
    /// its `max_records`: a real broker in that mode hands out whole batches. A record_limit
    /// fetch acquires at most its `max_records`, as on Kafka.
    pub min_fetch_records: usize,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            nodes: vec![1],
            partitions: 1,
            leaders: Vec::new(),
            records_per_partition: 10,
            share_version: 1,
            max_share_version: crate::protocol::share::MAX_VERSION,
            lock_timeout_ms: 30_000,
            delivery_limit: 5,
            coordinator: 1,
            topic: "test-topic".into(),
            heartbeat_interval_ms: 100,
            min_fetch_records: 0,
        }
    }
}

impl FakeConfig {
    /// Nodes `nodes` (the first is the bootstrap server and the group coordinator),
    /// partition `i` led by `leaders[i]`.
    pub fn cluster(nodes: &[i32], leaders: &[i32]) -> FakeConfig {
        FakeConfig {
            nodes: nodes.to_vec(),
            partitions: i32::try_from(leaders.len()).unwrap_or(i32::MAX),
            leaders: leaders.to_vec(),
            // No nodes: left as is, and `FakeCluster::start` says what is wrong.
            coordinator: nodes.first().copied().unwrap_or(1),
            ..Default::default()
        }
    }

    /// `n` partitions, all on the first node.
    pub fn partitions(mut self, n: i32) -> Self {
        self.partitions = n;
        self
    }

    /// The topic's name (`test-topic` by default).
    pub fn topic(mut self, name: impl Into<String>) -> Self {
        self.topic = name.into();
        self
    }

    /// `n` records per partition at start (generated: key `k{offset}`, value
    /// [`record_value`](super::record_value)).
    pub fn records(mut self, n: i64) -> Self {
        self.records_per_partition = n;
        self
    }

    /// Finalized `share.version`.
    pub fn share_version(mut self, level: i16) -> Self {
        self.share_version = level;
        self
    }

    /// The newest ShareFetch / ShareAcknowledge version offered (see
    /// [`FakeConfig::max_share_version`]): `1` is a Kafka 4.1 broker.
    pub fn max_share_version(mut self, version: i16) -> Self {
        self.max_share_version = version;
        self
    }

    /// Every fetch acquires at least `n` records (see [`FakeConfig::min_fetch_records`]).
    pub fn min_fetch_records(mut self, n: usize) -> Self {
        self.min_fetch_records = n;
        self
    }

    /// The acquisition lock, in milliseconds (see [`FakeConfig::lock_timeout_ms`]).
    pub fn lock_timeout_ms(mut self, ms: i32) -> Self {
        self.lock_timeout_ms = ms;
        self
    }

    /// `share.delivery.count.limit` (see [`FakeConfig::delivery_limit`]).
    pub fn delivery_limit(mut self, n: i16) -> Self {
        self.delivery_limit = n;
        self
    }

    /// What is wrong with this configuration, if anything: a fake cluster cannot start from it.
    pub(crate) fn problem(&self) -> Option<String> {
        let nodes = &self.nodes;
        let problem = if nodes.is_empty() {
            "it has no nodes".to_string()
        } else if let Some(n) = nodes.iter().find(|n| **n < 0) {
            format!("node id {n} is negative (broker ids are 0 or more)")
        } else if let Some(n) = nodes.iter().enumerate().find_map(|(i, n)| nodes[..i].contains(n).then_some(n)) {
            format!("node id {n} is listed twice in {nodes:?}")
        } else if self.partitions < 1 {
            format!("the topic needs at least one partition, not {}", self.partitions)
        } else if self.leaders.len() > self.partitions as usize {
            format!("{} leaders for {} partitions", self.leaders.len(), self.partitions)
        } else if let Some((p, l)) = self.leaders.iter().enumerate().find(|(_, l)| !nodes.contains(l)) {
            format!("the leader of partition {p}, node {l}, is not one of the nodes {nodes:?}")
        } else if !nodes.contains(&self.coordinator) {
            format!("the coordinator, node {}, is not one of the nodes {nodes:?}", self.coordinator)
        } else if !(0..=MAX_RECORDS_PER_PARTITION).contains(&self.records_per_partition) {
            format!(
                "{} records per partition: the fake keeps every offset's state in memory, so 0 to {MAX_RECORDS_PER_PARTITION}",
                self.records_per_partition
            )
        } else if self.share_version < 0 {
            format!("share.version {} is negative", self.share_version)
        } else if self.lock_timeout_ms <= 0 {
            format!("the acquisition lock timeout must be positive, not {} ms", self.lock_timeout_ms)
        } else if !(2..=10).contains(&self.delivery_limit) {
            format!(
                "the delivery limit must be 2 to 10 (as Kafka's share.delivery.count.limit), not {}",
                self.delivery_limit
            )
        } else if self.heartbeat_interval_ms <= 0 {
            format!("the heartbeat interval must be positive, not {} ms", self.heartbeat_interval_ms)
        } else if let Err(e) = crate::topic_name::validate_topic_name(&self.topic) {
            e.to_string()
        } else {
            return None;
        };
        Some(problem)
    }
}

/// The most records a partition of the fake holds at start: each offset's share state lives
/// in memory (and [`FakeCluster::produce`](super::FakeCluster::produce) adds more one by one).
pub(crate) const MAX_RECORDS_PER_PARTITION: i64 = 10_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(cfg: FakeConfig) -> String {
        cfg.problem().expect("a problem")
    }

    #[test]
    fn the_defaults_and_a_cluster_are_possible() {
        assert_eq!(FakeConfig::default().problem(), None);
        assert_eq!(FakeConfig::cluster(&[1, 2, 3], &[3, 1]).problem(), None);
    }

    #[test]
    fn impossible_clusters_are_named() {
        assert!(problem(FakeConfig::cluster(&[], &[])).contains("no nodes"));
        assert!(problem(FakeConfig::cluster(&[1, 1], &[1])).contains("node id 1 is listed twice"));
        assert!(problem(FakeConfig::cluster(&[-1], &[-1])).contains("negative"));
        assert!(problem(FakeConfig::default().partitions(0)).contains("at least one partition"));
        assert!(problem(FakeConfig::cluster(&[1], &[1, 2])).contains("leader of partition 1, node 2"));
        assert!(problem(FakeConfig { leaders: vec![1, 1], ..FakeConfig::default() }).contains("2 leaders for 1"));
        assert!(problem(FakeConfig { coordinator: 7, ..FakeConfig::default() }).contains("coordinator, node 7"));
        assert!(problem(FakeConfig::default().records(-1)).contains("-1 records per partition"));
        assert!(problem(FakeConfig::default().records(MAX_RECORDS_PER_PARTITION + 1)).contains("in memory"));
        assert!(problem(FakeConfig::default().lock_timeout_ms(0)).contains("lock timeout"));
        assert!(problem(FakeConfig::default().delivery_limit(1)).contains("delivery limit"));
        assert!(problem(FakeConfig { heartbeat_interval_ms: 0, ..FakeConfig::default() }).contains("heartbeat"));
        assert!(problem(FakeConfig { topic: "a b".into(), ..FakeConfig::default() }).contains("' '"));
    }
}
