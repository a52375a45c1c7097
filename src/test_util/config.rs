//! The shape of a fake cluster: nodes, partitions, leaders, versions.

/// The shape of the fake cluster.
#[derive(Debug, Clone)]
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
    /// Offer ShareFetch / ShareAcknowledge v1 only (Kafka 4.1).
    pub v1_only: bool,
    /// AcquisitionLockTimeoutMs reported.
    pub lock_timeout_ms: i32,
    /// The group coordinator node.
    pub coordinator: i32,
    /// The topic name.
    pub topic: String,
    /// HeartbeatIntervalMs given to members.
    pub heartbeat_interval_ms: i32,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            nodes: vec![1],
            partitions: 1,
            leaders: Vec::new(),
            records_per_partition: 10,
            share_version: 1,
            v1_only: false,
            lock_timeout_ms: 30_000,
            coordinator: 1,
            topic: "fault-topic".into(),
            heartbeat_interval_ms: 100,
        }
    }
}

impl FakeConfig {
    /// Nodes `nodes`, partition `i` led by `leaders[i]`.
    pub fn cluster(nodes: &[i32], leaders: &[i32]) -> FakeConfig {
        FakeConfig {
            nodes: nodes.to_vec(),
            partitions: leaders.len() as i32,
            leaders: leaders.to_vec(),
            coordinator: nodes[0],
            ..Default::default()
        }
    }

    /// `n` partitions, all on the first node.
    pub fn partitions(mut self, n: i32) -> Self {
        self.partitions = n;
        self
    }

    /// `n` records per partition at start.
    pub fn records(mut self, n: i64) -> Self {
        self.records_per_partition = n;
        self
    }

    /// Finalized `share.version`.
    pub fn share_version(mut self, level: i16) -> Self {
        self.share_version = level;
        self
    }

    /// ShareFetch / ShareAcknowledge v1 only.
    pub fn v1_only(mut self) -> Self {
        self.v1_only = true;
        self
    }

    /// AcquisitionLockTimeoutMs.
    pub fn lock_timeout_ms(mut self, ms: i32) -> Self {
        self.lock_timeout_ms = ms;
        self
    }
}
