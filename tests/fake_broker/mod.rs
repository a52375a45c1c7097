//! An in-process, scripted fake Kafka cluster for fault-injection tests of the share consumer.
//!
//! Each node listens on its own 127.0.0.1 port; all nodes share one state: one topic with a
//! fixed topic id and N partitions (each with a leader), per-offset share state (available,
//! acquired by a member, done), share sessions per (node, member), and group members. It
//! speaks the real wire protocol: ApiVersions v3, Metadata 10-12, FindCoordinator 4-6,
//! ShareGroupHeartbeat v1, ShareFetch and ShareAcknowledge v1-2 (the crate's own codec).
//!
//! Tests script faults with [`Rule`]s, and assert on the request [`Logged`] log and on
//! [`FakeCluster::problems`]: protocol violations the fake saw (bad epochs, two requests in
//! flight on one session, acks for records the member does not hold, acks on an epoch-0
//! fetch, Renew on v1, malformed batches).
#![allow(dead_code)]

mod handlers;
pub mod log;
pub mod script;
mod server;
mod share;
pub mod state;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kafka_share::consumer::{AckCallback, TopicPartition};
use kafka_share::{ConsumerRecord, ShareConsumer, ShareConsumerConfig};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

#[allow(unused_imports)]
pub use log::{check_epochs, AckedOffset, Logged, Req};
#[allow(unused_imports)]
pub use script::{Action, Rule};
#[allow(unused_imports)]
pub use share::record_value;
#[allow(unused_imports)]
pub use state::code;

/// How long a helper waits for a condition before it fails the test. Generous: the machine
/// may be loaded; a passing test never waits this long.
pub const WAIT: Duration = Duration::from_secs(30);

/// Metadata API key.
pub const METADATA: i16 = 3;
/// FindCoordinator API key.
pub const FIND_COORDINATOR: i16 = 10;
/// ShareGroupHeartbeat API key.
pub const HEARTBEAT: i16 = 76;
/// ShareFetch API key.
pub const SHARE_FETCH: i16 = 78;
/// ShareAcknowledge API key.
pub const SHARE_ACKNOWLEDGE: i16 = 79;

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
    /// Records a fetch acquires at least (when there are that many), whatever its
    /// `max_records`: a real broker in batch_optimized mode hands out whole batches.
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
            v1_only: false,
            lock_timeout_ms: 30_000,
            coordinator: 1,
            topic: "fault-topic".into(),
            heartbeat_interval_ms: 100,
            min_fetch_records: 0,
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

    /// Every fetch acquires at least `n` records (see [`FakeConfig::min_fetch_records`]).
    pub fn min_fetch_records(mut self, n: usize) -> Self {
        self.min_fetch_records = n;
        self
    }

    /// AcquisitionLockTimeoutMs.
    pub fn lock_timeout_ms(mut self, ms: i32) -> Self {
        self.lock_timeout_ms = ms;
        self
    }
}

/// The state every node of a fake cluster shares.
#[derive(Debug)]
pub struct Shared {
    state: Mutex<state::State>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, state::State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running fake cluster. Dropping it stops the listeners.
pub struct FakeCluster {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl FakeCluster {
    /// Starts one listener per node.
    pub async fn start(cfg: FakeConfig) -> FakeCluster {
        let nodes = cfg.nodes.clone();
        let shared = Arc::new(Shared { state: Mutex::new(state::State::new(cfg)) });
        let mut tasks = Vec::new();
        for node in nodes {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake broker");
            let port = listener.local_addr().expect("local addr").port();
            shared.lock().ports.insert(node, port);
            tasks.push(tokio::spawn(server::serve(listener, node, shared.clone())));
        }
        FakeCluster { shared, tasks }
    }

    /// A fake cluster with one node and `partitions` partitions of `records` records each.
    pub async fn single(partitions: i32, records: i64) -> FakeCluster {
        FakeCluster::start(FakeConfig::default().partitions(partitions).records(records)).await
    }

    fn lock(&self) -> MutexGuard<'_, state::State> {
        self.shared.lock()
    }

    /// host:port of a node.
    pub fn addr(&self, node: i32) -> String {
        format!("127.0.0.1:{}", self.lock().ports[&node])
    }

    /// The bootstrap address (the first node).
    pub fn bootstrap(&self) -> String {
        let first = self.lock().cfg.nodes[0];
        self.addr(first)
    }

    /// The topic name.
    pub fn topic(&self) -> String {
        self.lock().cfg.topic.clone()
    }

    /// A consumer config for this cluster with short waits (fetch.max.wait 100 ms).
    pub fn consumer_config(&self, group: &str) -> ShareConsumerConfig {
        ShareConsumerConfig::new(self.bootstrap(), group)
            .fetch_max_wait(Duration::from_millis(100))
            .request_timeout(Duration::from_secs(5))
    }

    /// Connects a consumer with `cfg` and subscribes it to the topic.
    ///
    /// As in Java, the group is joined by the first poll: the helper makes it, so tests can
    /// then wait for prefetched records. That poll must not take any: a test counts on
    /// finding every record in its own polls. `poll(ZERO)` alone cannot promise that, since
    /// on a loaded machine the driver may join, fetch and answer before the poll's zero
    /// timeout is even looked at. So the fake hands out nothing until the poll is over.
    pub async fn consumer(&self, cfg: ShareConsumerConfig) -> ShareConsumer {
        let c = ShareConsumer::connect(cfg).await.expect("connect to the fake cluster");
        c.subscribe([self.topic()]).expect("subscribe");
        // As in Java, the group is joined by the first poll: make it now. A zero-timeout
        // poll answers at once with what is buffered, and nothing is before the member joined.
        // It also asks each broker for one fetch (a poll that found nothing buffered), so
        // tests can wait for those records with `poll_all_at_once`.
        let first = c.poll(Duration::ZERO).await.expect("first poll");
        assert!(first.is_empty(), "nothing is buffered before the member joined");
        c
    }

    /// Makes Metadata answer `code` for the topic `name` (e.g. TOPIC_AUTHORIZATION_FAILED).
    pub fn set_topic_error(&self, name: &str, code: i16) {
        self.lock().topic_errors.insert(name.to_string(), code);
    }

    /// Metadata answers `name` normally again.
    pub fn clear_topic_error(&self, name: &str) {
        self.lock().topic_errors.remove(name);
    }

    /// Adds a scripted fault.
    pub fn script(&self, rule: Rule) {
        self.lock().rules.push(rule);
    }

    /// How many scripted faults can still fire.
    pub fn rules_left(&self) -> usize {
        self.lock().rules.iter().filter(|r| r.times != Some(0)).count()
    }

    /// Removes every scripted fault.
    pub fn clear_script(&self) {
        self.lock().rules.clear();
    }

    /// Appends `n` records to partition `p`.
    pub fn produce(&self, p: i32, n: usize) {
        let mut st = self.lock();
        let part = &mut st.parts[p as usize];
        part.offsets.extend(std::iter::repeat_with(Default::default).take(n));
    }

    /// Marks offsets of partition `p` as holding no record (compacted away).
    pub fn set_gaps(&self, p: i32, offsets: impl IntoIterator<Item = i64>) {
        self.lock().parts[p as usize].gaps.extend(offsets);
    }

    /// Covers gap runs of partition `p` with empty record batches.
    pub fn set_empty_batches(&self, p: i32) {
        self.lock().parts[p as usize].empty_batches = true;
    }

    /// Serves offsets of partition `p` in batches of their own with a CRC that does not match
    /// (consecutive ones share a batch).
    pub fn set_corrupt(&self, p: i32, offsets: impl IntoIterator<Item = i64>) {
        self.lock().parts[p as usize].corrupt.extend(offsets);
    }

    /// Puts non-acquired neighbour records of partition `p` in the batches it returns.
    pub fn set_pad(&self, p: i32) {
        self.lock().parts[p as usize].pad = true;
    }

    /// Moves the leadership of partition `p` to `node` (bumping the leader epoch); records
    /// acquired under the old leader are released.
    pub fn move_leader(&self, p: i32, node: i32) {
        self.lock().move_leader(p, node);
    }

    /// Sets the partitions assigned to every member from the next heartbeat on.
    pub fn set_assignment(&self, parts: Vec<i32>) {
        let mut st = self.lock();
        st.assignment = parts;
        for m in st.members.values_mut() {
            m.epoch += 1;
        }
    }

    /// Forgets every share session on `node` without telling anyone (a broker restart).
    pub fn drop_sessions(&self, node: i32) {
        let mut st = self.lock();
        let keys: Vec<(i32, String)> = st.sessions.keys().filter(|(n, _)| *n == node).cloned().collect();
        for (n, m) in keys {
            st.drop_session(n, &m);
        }
    }

    /// Offsets currently acquired by someone: (partition, offset).
    pub fn held(&self) -> Vec<(i32, i64)> {
        let st = self.lock();
        let mut out = Vec::new();
        for (p, part) in st.parts.iter().enumerate() {
            for (o, s) in part.offsets.iter().enumerate() {
                if s.holder.is_some() && !s.done {
                    out.push((p as i32, o as i64));
                }
            }
        }
        out
    }

    /// Waits until `n` offsets are acquired (the consumer prefetched them); panics after
    /// [`WAIT`].
    pub async fn wait_held(&self, n: usize) {
        if !eventually(WAIT, || self.held().len() >= n).await {
            panic!("{} records acquired, waited for {n}; log:\n{}", self.held().len(), self.dump());
        }
    }

    /// Offsets of partition `p` that are done (accepted, rejected, gap).
    pub fn done(&self, p: i32) -> Vec<i64> {
        let st = self.lock();
        st.parts[p as usize]
            .offsets
            .iter()
            .enumerate()
            .filter(|(_, s)| s.done)
            .map(|(o, _)| o as i64)
            .collect()
    }

    /// When offset `o` of partition `p` was last acquired.
    pub fn acquired_at(&self, p: i32, o: i64) -> Option<Instant> {
        self.lock().parts[p as usize].offsets[o as usize].acquired_at
    }

    /// How many times offset `o` of partition `p` was delivered.
    pub fn delivery(&self, p: i32, o: i64) -> i16 {
        self.lock().parts[p as usize].offsets[o as usize].delivery
    }

    /// A copy of the request log.
    pub fn log(&self) -> Vec<Logged> {
        self.lock().log.clone()
    }

    /// The share requests (ShareFetch and ShareAcknowledge) of the log.
    pub fn share_log(&self) -> Vec<Logged> {
        self.log().into_iter().filter(|l| l.is_share()).collect()
    }

    /// Every acknowledged offset on the wire: (node, sent on a ShareFetch, the ack).
    pub fn acks_sent(&self) -> Vec<(i32, bool, AckedOffset)> {
        self.lock()
            .log
            .iter()
            .flat_map(|l| l.acks().into_iter().map(move |a| (l.node, l.is_fetch(), a)))
            .collect()
    }

    /// How many logged requests satisfy `f`.
    pub fn count(&self, f: impl Fn(&Logged) -> bool) -> usize {
        self.lock().log.iter().filter(|l| f(l)).count()
    }

    /// Every protocol violation seen so far, plus epoch-sequence problems in the log.
    pub fn problems(&self) -> Vec<String> {
        let st = self.lock();
        let mut p = st.violations.clone();
        p.extend(st.unexplained_overlaps());
        p.extend(check_epochs(&st.log));
        p
    }

    /// Panics (with the share log) if [`problems`](Self::problems) is not empty.
    pub fn assert_clean(&self) {
        let p = self.problems();
        assert!(p.is_empty(), "protocol problems:\n  {}\nlog:\n{}", p.join("\n  "), self.dump());
    }

    /// The share requests, heartbeats and connection closes of the log, one per line.
    pub fn dump(&self) -> String {
        self.log()
            .iter()
            .filter(|l| l.is_share() || matches!(l.req, Req::Heartbeat { .. } | Req::ConnClosed))
            .map(|l| format!("  {}", l.summary()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until `f` holds for the log; panics after `timeout`.
    pub async fn wait_for(&self, what: &str, timeout: Duration, f: impl Fn(&[Logged]) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if f(&self.lock().log) {
                return;
            }
            if Instant::now() >= deadline {
                panic!("timed out waiting for {what}; log:\n{}", self.dump());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Polls until `n` records arrived in total or `timeout` passed; returns what arrived.
pub async fn poll_until(c: &ShareConsumer, n: usize, timeout: Duration) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        match c.poll(Duration::from_millis(200)).await {
            Ok(rs) => out.extend(rs),
            Err(e) => panic!("poll failed: {e}"),
        }
    }
    out
}

/// Keeps polling (which sends the acks of the previous poll) until `f` holds; false after
/// `timeout`. Records that arrive meanwhile are returned through `got`.
pub async fn poll_while_not(
    c: &ShareConsumer,
    timeout: Duration,
    got: &mut Vec<ConsumerRecord>,
    mut f: impl FnMut() -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() >= deadline {
            return false;
        }
        got.extend(c.poll(Duration::from_millis(50)).await.expect("poll"));
    }
    true
}

/// Records the consumer has buffered since it started (its records-consumed-total metric).
pub fn buffered_total(c: &ShareConsumer) -> usize {
    c.metrics().get(kafka_share::consumer::FETCH_MANAGER, "records-consumed-total").unwrap_or(0.0) as usize
}

/// Makes the consumer fetch `n` records and takes them all in one poll (explicit mode cannot
/// poll again before acknowledging): a zero-timeout poll that finds nothing buffered asks
/// every broker for one fetch; once `n` more records are buffered (from however many
/// brokers), one zero-timeout poll returns them all. No timing assumed: it waits for each
/// condition.
pub async fn poll_all_at_once(fake: &FakeCluster, c: &ShareConsumer, n: usize) -> Vec<ConsumerRecord> {
    let start = buffered_total(c);
    let first = c.poll(Duration::ZERO).await.expect("poll");
    if !first.is_empty() {
        assert_eq!(first.len(), n, "records were already buffered:\n{}", fake.dump());
        return first;
    }
    if !eventually(WAIT, || buffered_total(c) >= start + n).await {
        panic!("{} records buffered, waited for {n}; log:\n{}", buffered_total(c) - start, fake.dump());
    }
    let out = c.poll(Duration::ZERO).await.expect("poll");
    assert_eq!(out.len(), n, "one poll should return everything buffered:\n{}", fake.dump());
    out
}

/// Accepts every record of `records` and commits, expecting every partition's result to be ok.
pub async fn accept_and_commit(c: &ShareConsumer, records: &[ConsumerRecord], timeout: Duration) {
    for r in records {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(timeout).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
}

/// Keeps polling (sending the acks of each poll) until `n` more ShareFetch requests reached
/// the fake: the consumer had that many chances to do something it must not (resend an ack,
/// refetch a partition), however slow the machine. Returns the records that came meanwhile.
pub async fn poll_through_fetches(fake: &FakeCluster, c: &ShareConsumer, n: usize) -> Vec<ConsumerRecord> {
    let start = fake.count(|l| l.is_fetch());
    let mut got = Vec::new();
    let done = poll_while_not(c, WAIT, &mut got, || fake.count(|l| l.is_fetch()) >= start + n).await;
    assert!(done, "{n} more ShareFetch requests did not come:\n{}", fake.dump());
    got
}

/// Waits until `f` holds; false after `timeout`.
pub async fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One acknowledgement completion as the commit callback saw it.
#[derive(Debug, Clone)]
pub struct AckOutcome {
    /// The partition.
    pub tp: TopicPartition,
    /// The offsets.
    pub offsets: Vec<i64>,
    /// The outcome.
    pub result: kafka_share::Result<()>,
}

/// A commit callback that records every completion.
pub fn ack_recorder() -> (AckCallback, Arc<Mutex<Vec<AckOutcome>>>) {
    let seen: Arc<Mutex<Vec<AckOutcome>>> = Arc::default();
    let s = seen.clone();
    let cb: AckCallback = Arc::new(move |tp, offsets, result| {
        s.lock().unwrap_or_else(|p| p.into_inner()).push(AckOutcome {
            tp: tp.clone(),
            offsets: offsets.to_vec(),
            result: result.clone(),
        });
    });
    (cb, seen)
}

/// (partition, offset) of each record.
pub fn offsets(records: &[ConsumerRecord]) -> Vec<(i32, i64)> {
    records.iter().map(|r| (r.partition, r.offset)).collect()
}
