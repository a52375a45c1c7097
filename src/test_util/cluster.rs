//! [`FakeCluster`]: the running fake, and everything a test does with it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::log::{check_epochs, AckedOffset, Logged, Req};
use super::script::Rule;
use super::state::{self, Shared};
use super::{server, FakeConfig};
use crate::{ShareConsumer, ShareConsumerConfig};

/// How long the waiting helpers wait before they fail the test. Generous: the machine may be
/// loaded; a passing test never waits this long.
const WAIT: Duration = Duration::from_secs(30);

/// Waits until `f` holds; false after `timeout`.
async fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
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
    /// As in Java, the group is joined by the first poll: the helper makes it (a zero-timeout
    /// poll, which returns at once with nothing), so tests can then wait for prefetched
    /// records.
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
    /// 30 s.
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
