//! [`FakeCluster`]: the running fake, and everything a test does with it.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::config::MAX_RECORDS_PER_PARTITION;
use super::log::{check_epochs, AckedOffset, Logged, Req};
use super::records::{self, RecordState};
use super::script::Rule;
use super::state::{self, Shared, State};
use super::{server, FakeConfig};
use crate::broker_model::record_state::OffsetShare;
use crate::producer::ProducerRecord;
use crate::protocol::records::{Compression, RecordInput};
use crate::{ShareConsumer, ShareConsumerConfig};

/// How long the waiting helpers wait before they fail the test. Generous: the machine may be
/// loaded; a passing test never waits this long.
const WAIT: Duration = Duration::from_secs(30);

/// Waits until `f` holds, looking every 10 ms; false after `timeout`. For tests that wait
/// for a condition (never for a fixed time).
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

/// The index of partition `p`; panics, naming the misused method `what`, if the topic has no
/// such partition.
fn index(st: &State, what: &str, p: i32) -> usize {
    match usize::try_from(p).ok().filter(|i| *i < st.parts.len()) {
        Some(i) => i,
        None => {
            panic!("FakeCluster::{what}: partition {p} does not exist (the topic has partitions 0..{})", st.parts.len())
        }
    }
}

/// The state of offset `o` of partition `p`; panics, naming `what`, if there is no such offset.
fn offset<'a>(st: &'a State, what: &str, p: i32, o: i64) -> &'a OffsetShare<String> {
    let offsets = st.parts[index(st, what, p)].share.offsets();
    match usize::try_from(o).ok().and_then(|i| offsets.get(i)) {
        Some(s) => s,
        None => {
            panic!("FakeCluster::{what}: partition {p} has no offset {o} (its log holds offsets 0..{})", offsets.len())
        }
    }
}

/// Panics, naming `what`, unless `node` is one of the cluster's nodes.
fn check_node(st: &State, what: &str, node: i32) {
    if !st.cfg.nodes.contains(&node) {
        panic!("FakeCluster::{what}: node {node} is not one of the cluster's nodes {:?}", st.cfg.nodes);
    }
}

/// A running fake cluster. Dropping it stops it: its listeners and every open connection
/// close.
pub struct FakeCluster {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.stop_connections();
    }
}

impl std::fmt::Debug for FakeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock();
        f.debug_struct("FakeCluster")
            .field("ports", &st.ports)
            .field("topic", &st.cfg.topic)
            .field("partitions", &st.parts.len())
            .finish_non_exhaustive()
    }
}

impl FakeCluster {
    /// Starts one listener per node, each on its own 127.0.0.1 port. Must be called within a
    /// Tokio runtime (e.g. in a `#[tokio::test]`): the nodes run as tasks on it.
    ///
    /// # Panics
    /// If `cfg` is not a possible cluster (no nodes, a leader or coordinator that is not a
    /// node, no partitions, an invalid topic name, ...: the message says which), or if a
    /// listener cannot be bound.
    pub async fn start(cfg: FakeConfig) -> FakeCluster {
        if let Some(problem) = cfg.problem() {
            panic!("FakeCluster::start: this FakeConfig cannot make a cluster: {problem}");
        }
        let nodes = cfg.nodes.clone();
        let shared = Arc::new(Shared { state: Mutex::new(state::State::new(cfg)), connections: Default::default() });
        let mut tasks = Vec::new();
        for node in nodes {
            let listener = match TcpListener::bind("127.0.0.1:0").await {
                Ok(l) => l,
                Err(e) => panic!("FakeCluster::start: cannot listen on 127.0.0.1 for node {node}: {e}"),
            };
            let port = match listener.local_addr() {
                Ok(a) => a.port(),
                Err(e) => panic!("FakeCluster::start: the listener of node {node} has no address: {e}"),
            };
            shared.lock().ports.insert(node, port);
            tasks.push(tokio::spawn(server::serve(listener, node, shared.clone())));
        }
        FakeCluster { shared, tasks }
    }

    /// A fake cluster with one node and `partitions` partitions of `records` generated
    /// records each (`FakeCluster::single(1, 0)`: one empty partition, to
    /// [`produce`](Self::produce) into).
    ///
    /// # Panics
    /// If `partitions` is less than 1, or `records` is negative or more than 10,000,000.
    pub async fn single(partitions: i32, records: i64) -> FakeCluster {
        FakeCluster::start(FakeConfig::default().partitions(partitions).records(records)).await
    }

    /// The state, with the locks that lapsed by now given back: what the test reads is what
    /// the next request would find.
    fn lock(&self) -> MutexGuard<'_, state::State> {
        let mut st = self.shared.lock();
        st.expire_locks(Instant::now());
        st
    }

    /// host:port of a node.
    ///
    /// # Panics
    /// If `node` is not one of the cluster's nodes.
    pub fn addr(&self, node: i32) -> String {
        let st = self.lock();
        check_node(&st, "addr", node);
        format!("127.0.0.1:{}", st.ports[&node])
    }

    /// The bootstrap address (the first node).
    pub fn bootstrap(&self) -> String {
        let st = self.lock();
        // `start` checked there is a node, and bound a port for each.
        format!("127.0.0.1:{}", st.ports[&st.cfg.nodes[0]])
    }

    /// The topic name.
    pub fn topic(&self) -> String {
        self.lock().cfg.topic.clone()
    }

    /// A consumer config for this cluster and `group`, with short waits so tests run fast
    /// (`fetch.max.wait.ms` 100, `request.timeout.ms` 5000). Set anything else on it, such as
    /// the acknowledgement mode, as for a real cluster.
    pub fn consumer_config(&self, group: &str) -> ShareConsumerConfig {
        ShareConsumerConfig::new(self.bootstrap(), group)
            .fetch_max_wait(Duration::from_millis(100))
            .request_timeout(Duration::from_secs(5))
    }

    /// Connects a consumer with `cfg` and subscribes it to the topic.
    ///
    /// As in Java, the group is joined by the first poll: the helper makes it (a zero-timeout
    /// poll, which returns at once with nothing), so tests can then wait for prefetched
    /// records. (Or connect with [`ShareConsumer::connect`] and subscribe to
    /// [`topic`](Self::topic) yourself.)
    ///
    /// # Panics
    /// If connecting, subscribing or that first poll fails.
    pub async fn consumer(&self, cfg: ShareConsumerConfig) -> ShareConsumer {
        let c = match ShareConsumer::connect(cfg).await {
            Ok(c) => c,
            Err(e) => panic!("FakeCluster::consumer: connecting to the fake cluster failed: {e}"),
        };
        if let Err(e) = c.subscribe([self.topic()]) {
            panic!("FakeCluster::consumer: subscribing to the fake topic failed: {e}");
        }
        // As in Java, the group is joined by the first poll: make it now. A zero-timeout
        // poll answers at once with what is buffered, and nothing is before the member joined.
        // It also asks each broker for one fetch (a poll that found nothing buffered), so
        // tests can wait for those records.
        match c.poll(Duration::ZERO).await {
            Ok(first) => assert!(first.is_empty(), "FakeCluster::consumer: records before the member joined"),
            Err(e) => panic!("FakeCluster::consumer: the first poll (joining the group) failed: {e}"),
        }
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

    /// Adds a scripted fault: see [`Rule`]. Rules fire in the order added.
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

    /// Appends a record with `key` and `value` (timestamped now) to partition `partition`;
    /// returns its offset. Consumers get it like any other record.
    ///
    /// # Panics
    /// If the topic has no such partition, or it already holds 10,000,000 records.
    pub fn produce(&self, partition: i32, key: impl Into<Bytes>, value: impl Into<Bytes>) -> i64 {
        self.append(partition, "produce", records::keyed(key.into(), value.into()))
    }

    /// Appends `record` (key or null key, value or tombstone, headers, timestamp: now if it
    /// has none) to its partition (partition 0 if it names none: the fake has no
    /// partitioner); returns its offset.
    ///
    /// # Panics
    /// If the record names another topic than the fake's, a partition the topic lacks, or the
    /// partition already holds 10,000,000 records.
    pub fn produce_record(&self, record: ProducerRecord) -> i64 {
        let topic = self.topic();
        if record.topic != topic {
            panic!(
                "FakeCluster::produce_record: the record is for topic {:?}; the fake cluster has one topic, {topic:?}",
                record.topic
            );
        }
        let partition = record.partition.unwrap_or(0);
        self.append(partition, "produce_record", records::from_producer_record(record))
    }

    /// Appends `n` generated records to partition `p` (the kind the cluster starts with: key
    /// `k{offset}`, value [`record_value`](super::record_value)); returns their offsets.
    ///
    /// # Panics
    /// If the topic has no partition `p`, or it would hold more than 10,000,000 records.
    pub fn produce_generated(&self, p: i32, n: usize) -> Range<i64> {
        let mut st = self.lock();
        let i = index(&st, "produce_generated", p);
        let part = &mut st.parts[i];
        if part.records.len().saturating_add(n) > MAX_RECORDS_PER_PARTITION as usize {
            panic!("FakeCluster::produce_generated: partition {p} would hold more than {MAX_RECORDS_PER_PARTITION} records");
        }
        let first = part.share.log_end();
        part.share.push(n);
        part.records.resize(part.records.len() + n, None);
        first..part.share.log_end()
    }

    /// Appends one record to partition `p`; `what` names the public method for a panic.
    fn append(&self, p: i32, what: &str, record: RecordInput) -> i64 {
        let mut st = self.lock();
        let i = index(&st, what, p);
        let part = &mut st.parts[i];
        if part.records.len() >= MAX_RECORDS_PER_PARTITION as usize {
            panic!("FakeCluster::{what}: partition {p} already holds {MAX_RECORDS_PER_PARTITION} records");
        }
        part.push(Some(Arc::new(record)));
        part.share.log_end() - 1
    }

    /// Marks offsets of partition `p` as holding no record (compacted away).
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn set_gaps(&self, p: i32, offsets: impl IntoIterator<Item = i64>) {
        let mut st = self.lock();
        let i = index(&st, "set_gaps", p);
        st.parts[i].gaps.extend(offsets);
    }

    /// Covers gap runs of partition `p` with empty record batches.
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn set_empty_batches(&self, p: i32) {
        let mut st = self.lock();
        let i = index(&st, "set_empty_batches", p);
        st.parts[i].empty_batches = true;
    }

    /// Serves offsets of partition `p` in batches of their own with a CRC that does not match
    /// (consecutive ones share a batch), as if corrupted on the way.
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn set_corrupt(&self, p: i32, offsets: impl IntoIterator<Item = i64>) {
        let mut st = self.lock();
        let i = index(&st, "set_corrupt", p);
        st.parts[i].corrupt.extend(offsets);
    }

    /// Serves the batches of partition `p` compressed with `codec` (uncompressed by default).
    /// A big record of zeros makes a decompression bomb: the consumer refuses a batch that
    /// inflates past its limit (`fetch.max.bytes`, at least 16 MiB).
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn set_compression(&self, p: i32, codec: Compression) {
        let mut st = self.lock();
        let i = index(&st, "set_compression", p);
        st.parts[i].compression = codec;
    }

    /// Puts non-acquired neighbour records of partition `p` in the batches it returns.
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn set_pad(&self, p: i32) {
        let mut st = self.lock();
        let i = index(&st, "set_pad", p);
        st.parts[i].pad = true;
    }

    /// Moves the leadership of partition `p` to `node` (bumping the leader epoch); records
    /// acquired under the old leader are released.
    ///
    /// # Panics
    /// If the topic has no partition `p`, or `node` is not one of the cluster's nodes.
    pub fn move_leader(&self, p: i32, node: i32) {
        let mut st = self.lock();
        index(&st, "move_leader", p);
        check_node(&st, "move_leader", node);
        st.move_leader(p, node);
    }

    /// Sets the partitions assigned to every member from the next heartbeat on. Partitions
    /// the topic lacks may be assigned: fetching them answers UNKNOWN_TOPIC_OR_PARTITION.
    pub fn set_assignment(&self, parts: Vec<i32>) {
        let mut st = self.lock();
        st.assignment = parts;
        for m in st.members.values_mut() {
            m.epoch = m.epoch.saturating_add(1);
        }
    }

    /// Forgets every share session on `node` without telling anyone (a broker restart).
    ///
    /// # Panics
    /// If `node` is not one of the cluster's nodes.
    pub fn drop_sessions(&self, node: i32) {
        let mut st = self.lock();
        check_node(&st, "drop_sessions", node);
        for ((n, m), _) in st.sessions.end_where(|(n, _), _| *n == node) {
            st.release_member(n, &m);
        }
    }

    /// The offsets delivered and not yet acknowledged (held by some member), as (partition,
    /// offset).
    pub fn held(&self) -> Vec<(i32, i64)> {
        let st = self.lock();
        let mut out = Vec::new();
        for (p, part) in st.parts.iter().enumerate() {
            for (o, s) in part.share.offsets().iter().enumerate() {
                if s.holder().is_some() {
                    out.push((p as i32, o as i64));
                }
            }
        }
        out
    }

    /// Waits until `n` offsets are acquired (e.g. the consumer prefetched them).
    ///
    /// # Panics
    /// If that does not happen within 30 s (with the log in the message).
    pub async fn wait_held(&self, n: usize) {
        if !eventually(WAIT, || self.held().len() >= n).await {
            panic!("{} records acquired, waited for {n}; log:\n{}", self.held().len(), self.dump());
        }
    }

    /// Offsets of partition `p` that are done (accepted, rejected or acknowledged as a gap),
    /// ascending.
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn done(&self, p: i32) -> Vec<i64> {
        let st = self.lock();
        st.parts[index(&st, "done", p)]
            .share
            .offsets()
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_done())
            .map(|(o, _)| o as i64)
            .collect()
    }

    /// The share state of offset `o` of partition `p`.
    ///
    /// # Panics
    /// If partition `p` has no offset `o`.
    pub fn state(&self, p: i32, o: i64) -> RecordState {
        RecordState::of(offset(&self.lock(), "state", p, o))
    }

    /// The share state of every offset of partition `p`, by offset (index 0 is offset 0).
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn states(&self, p: i32) -> Vec<RecordState> {
        let st = self.lock();
        st.parts[index(&st, "states", p)].share.offsets().iter().map(RecordState::of).collect()
    }

    /// The offsets of partition `p` a consumer acknowledged with ACCEPT, ascending.
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn accepted(&self, p: i32) -> Vec<i64> {
        self.offsets_in(p, "accepted", RecordState::Accepted)
    }

    /// The offsets of partition `p` a consumer acknowledged with REJECT, ascending.
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn rejected(&self, p: i32) -> Vec<i64> {
        self.offsets_in(p, "rejected", RecordState::Rejected)
    }

    fn offsets_in(&self, p: i32, what: &str, state: RecordState) -> Vec<i64> {
        let st = self.lock();
        let offsets = st.parts[index(&st, what, p)].share.offsets();
        (0..offsets.len()).filter(|i| RecordState::of(&offsets[*i]) == state).map(|i| i as i64).collect()
    }

    /// The in-flight window of partition `p`'s share state: from the share-partition start
    /// offset (SPSO: every offset below it is accepted, rejected, a gap or archived) to the
    /// share-partition end offset (SPEO: one past the last offset ever acquired).
    ///
    /// # Panics
    /// If the topic has no partition `p`.
    pub fn share_window(&self, p: i32) -> Range<i64> {
        let st = self.lock();
        let share = &st.parts[index(&st, "share_window", p)].share;
        share.start_offset()..share.end_offset()
    }

    /// When offset `o` of partition `p` was last acquired (None: never).
    ///
    /// # Panics
    /// If partition `p` has no offset `o`.
    pub fn acquired_at(&self, p: i32, o: i64) -> Option<Instant> {
        offset(&self.lock(), "acquired_at", p, o).acquired_at
    }

    /// How many times offset `o` of partition `p` was delivered.
    ///
    /// # Panics
    /// If partition `p` has no offset `o`.
    pub fn delivery(&self, p: i32, o: i64) -> i16 {
        offset(&self.lock(), "delivery", p, o).delivery
    }

    /// A copy of the request log: every request the nodes received, and every connection
    /// closed, in arrival order.
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

    /// Every protocol violation seen so far, one message each: share session epochs out of
    /// sequence, two requests in flight on one share session, acknowledgements for records
    /// the member does not hold or on an epoch-0 request, RENEW where it is not allowed,
    /// malformed acknowledgement batches, requests the fake cannot decode. A correct client
    /// causes none.
    pub fn problems(&self) -> Vec<String> {
        let st = self.lock();
        let mut p = st.violations.clone();
        p.extend(st.unexplained_overlaps());
        p.extend(check_epochs(&st.log));
        p
    }

    /// Asserts that [`problems`](Self::problems) is empty.
    ///
    /// # Panics
    /// If it is not, with the problems and the share log in the message.
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

    /// Waits until `f` holds for the log.
    ///
    /// # Panics
    /// If it does not within `timeout`, naming `what` and showing the log.
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
