//! The background task: drains ready batches, sends one ProduceRequest per leader (up to
//! `max.in.flight` pipelined per broker), matches the answers to batches, and retries.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::ProduceResponse;
use tokio::sync::{oneshot, Notify, Semaphore};
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;
use tracing::debug;

use super::accumulator::{Accumulator, InFlight};
use super::batch::Batch;
use super::config::ProducerConfig;
use super::metrics::ProducerMetrics;
use super::record::BatchDone;
use super::record::BatchOutcome;
use super::request::{find_partition, init_producer_id, partition_result, produce, Done, Turn};
use super::sequences::{ProducerId, Verdict};
use crate::backoff::Backoff;
use crate::cluster::{BrokerInfo, Cluster};
use crate::error::{Error, ErrorCode, Result};

/// State shared by the `Producer` handles and the sender task.
pub(crate) struct Shared {
    pub cluster: Arc<Cluster>,
    pub config: ProducerConfig,
    pub acc: Mutex<Accumulator>,
    /// Wakes the sender: a batch was created or filled, a flush began, or closing.
    pub wake: Notify,
    /// `buffer.memory`, in bytes.
    pub memory: Arc<Semaphore>,
    /// `send` refuses new records.
    pub closed: AtomicBool,
    /// Close timed out: drop everything that is left.
    pub abort: AtomicBool,
    /// Close the cluster's connections when the task ends (the producer dialed them).
    pub owns_cluster: bool,
    pub metrics: Arc<ProducerMetrics>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Accumulator> {
        // Every critical section leaves the accumulator consistent, so a panic elsewhere
        // while holding the lock does not make its state unusable.
        self.acc.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Sender {
    shared: Arc<Shared>,
    tasks: JoinSet<Done>,
    /// Requests outstanding per broker.
    per_node: HashMap<i32, usize>,
    /// Per broker, the signal that the last request created for it is queued on its connection.
    line: HashMap<i32, oneshot::Receiver<()>>,
    /// What each task is.
    task_kind: HashMap<Id, Kind>,
    want_metadata: HashSet<Arc<str>>,
    metadata_busy: bool,
    metadata_not_before: Instant,
    /// Idempotence: an InitProducerId is in flight.
    init_busy: bool,
    init_not_before: Instant,
    init_backoff: Backoff,
}

/// What a background task does.
#[derive(Clone, Copy)]
enum Kind {
    Produce { node: i32 },
    Metadata,
    ProducerId,
}

fn key(done: &Arc<BatchDone>) -> usize {
    Arc::as_ptr(done) as usize
}

/// Runs until the producer is closed (or dropped) and everything is answered or failed.
pub(crate) async fn run(shared: Arc<Shared>) {
    let retry = (shared.cluster.config().retry_backoff, shared.cluster.config().retry_backoff_max);
    let mut s = Sender {
        shared,
        tasks: JoinSet::new(),
        per_node: HashMap::new(),
        line: HashMap::new(),
        task_kind: HashMap::new(),
        want_metadata: HashSet::new(),
        metadata_busy: false,
        metadata_not_before: Instant::now(),
        init_busy: false,
        init_not_before: Instant::now(),
        init_backoff: Backoff::new(retry.0, retry.1),
    };
    s.run().await;
    if s.shared.owns_cluster {
        s.shared.cluster.close();
    }
}

impl Sender {
    async fn run(&mut self) {
        loop {
            if self.shared.abort.load(Ordering::Acquire) {
                return self.abort_all().await;
            }
            let now = Instant::now();
            let (drained, stop) = {
                let mut acc = self.shared.lock();
                let per_node = &self.per_node;
                let d = self
                    .shared
                    .cluster
                    .with_metadata(|md| acc.drain(now, md, |n| per_node.get(&n).copied().unwrap_or(0)));
                for b in d.requests.values().flatten() {
                    acc.in_flight.insert(key(&b.done), InFlight { done: b.done.clone(), records: b.records });
                }
                let stop = acc.closing && acc.is_empty() && d.requests.is_empty() && self.tasks.is_empty();
                (d, stop)
            };
            let timeout = self.shared.config.delivery_timeout;
            let waiting_for_id = self.shared.lock().seqs.as_ref().and_then(|s| s.last_init_error.clone());
            for b in drained.expired {
                let why = match (&waiting_for_id, b.attempts) {
                    (Some(e), 0) => format!("never sent: no producer id, InitProducerId failed: {e}"),
                    (_, 0) => "never sent".to_string(),
                    _ => format!("waiting for a retry after {} attempts", b.attempts),
                };
                let what = format!("delivering {} records to {}-{} ({why})", b.records, b.topic, b.partition);
                self.shared.metrics.failed(b.records);
                b.done.complete(Err(Error::Timeout { what, after: timeout }));
            }
            let sent_any = !drained.requests.is_empty();
            for (node, batches) in drained.requests {
                self.spawn_produce(node, batches);
            }
            self.want_metadata.extend(drained.no_leader);
            self.maybe_refresh_metadata(now);
            let need_id = self.maybe_init_producer_id(now);
            if stop {
                return;
            }
            if sent_any {
                continue; // more may be ready for brokers with room in flight
            }
            let mut deadline = drained.next_wakeup;
            if !self.want_metadata.is_empty() && !self.metadata_busy {
                deadline = Some(deadline.map_or(self.metadata_not_before, |d| d.min(self.metadata_not_before)));
            }
            if need_id {
                deadline = Some(deadline.map_or(self.init_not_before, |d| d.min(self.init_not_before)));
            }
            tokio::select! {
                biased;
                Some(res) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => self.on_task(res),
                _ = self.shared.wake.notified() => {}
                _ = tokio::time::sleep_until(deadline.unwrap_or(now)), if deadline.is_some() => {}
            }
        }
    }

    fn spawn_produce(&mut self, node: i32, batches: Vec<Batch>) {
        let cfg = &self.shared.config;
        // Chain this request behind the previous one to the broker: tasks run in any order,
        // but each queues its request on the connection only after its predecessor did.
        let (mine, next) = oneshot::channel();
        let after = self.line.insert(node, next);
        let turn = Turn { after, mine };
        let metrics = self.shared.metrics.clone();
        let task = produce(self.shared.cluster.clone(), node, batches, cfg.acks.wire(), cfg.compression, turn, metrics);
        self.shared.metrics.in_flight(true);
        let handle = self.tasks.spawn(task);
        self.task_kind.insert(handle.id(), Kind::Produce { node });
        *self.per_node.entry(node).or_default() += 1;
    }

    fn maybe_refresh_metadata(&mut self, now: Instant) {
        if self.want_metadata.is_empty() || self.metadata_busy || now < self.metadata_not_before {
            return;
        }
        let topics: Vec<Arc<str>> = self.want_metadata.drain().collect();
        let cluster = self.shared.cluster.clone();
        let handle = self.tasks.spawn(async move {
            let names: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
            let result = cluster.refresh_metadata(&names).await.map(|_| ());
            Done::Metadata { topics, result }
        });
        self.task_kind.insert(handle.id(), Kind::Metadata);
        self.metadata_busy = true;
    }

    /// Idempotence: asks for a producer id when there is none. Returns whether one is needed
    /// but could not be asked for yet (backing off).
    fn maybe_init_producer_id(&mut self, now: Instant) -> bool {
        let needed = self.shared.lock().seqs.as_ref().is_some_and(|s| s.current.is_none());
        if !needed || self.init_busy {
            return false;
        }
        if now < self.init_not_before {
            return true;
        }
        let handle = self.tasks.spawn(init_producer_id(self.shared.cluster.clone()));
        self.task_kind.insert(handle.id(), Kind::ProducerId);
        self.init_busy = true;
        false
    }

    fn on_producer_id(&mut self, result: Result<ProducerId>) {
        let mut acc = self.shared.lock();
        let Some(seqs) = acc.seqs.as_mut() else { return };
        match result {
            Ok(pid) => {
                debug!(producer_id = pid.id, epoch = pid.epoch, "producer id");
                seqs.current = Some(pid);
                seqs.last_init_error = None;
                self.init_backoff.reset();
            }
            Err(e) => {
                debug!(error = %e, "InitProducerId failed");
                seqs.last_init_error = Some(e);
                self.init_not_before = Instant::now() + self.init_backoff.next_delay();
            }
        }
    }

    fn on_task(&mut self, res: std::result::Result<(Id, Done), JoinError>) {
        let id = match &res {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        match self.task_kind.remove(&id) {
            Some(Kind::Produce { node }) => {
                if let Some(n) = self.per_node.get_mut(&node) {
                    *n = n.saturating_sub(1);
                }
                self.shared.metrics.in_flight(false);
            }
            Some(Kind::Metadata) => self.metadata_busy = false,
            Some(Kind::ProducerId) => self.init_busy = false,
            None => {}
        }
        match res {
            Ok((_, Done::Produce { node, batches, failed, result })) => {
                if !failed.is_empty() {
                    let mut acc = self.shared.lock();
                    for b in &failed {
                        acc.in_flight.remove(&key(&b.done));
                        if let Some(seqs) = acc.seqs.as_mut() {
                            seqs.failed(b, true);
                        }
                    }
                }
                self.on_produce(node, batches, result)
            }
            Ok((_, Done::Metadata { topics, result })) => self.on_metadata(topics, result),
            Ok((_, Done::ProducerId(result))) => self.on_producer_id(result),
            // A task that panicked dropped its batches, which failed their futures.
            Err(_) => self.shared.lock().in_flight.retain(|_, f| !f.done.is_done()),
        }
    }

    fn on_metadata(&mut self, topics: Vec<Arc<str>>, result: Result<()>) {
        self.metadata_not_before = Instant::now() + self.shared.cluster.config().retry_backoff;
        if let Err(e) = result {
            debug!(error = %e, "producer metadata refresh failed");
            self.want_metadata.extend(topics);
            return;
        }
        let counts: Vec<(Arc<str>, usize)> = self.shared.cluster.with_metadata(|md| {
            topics
                .iter()
                .filter_map(|t| md.topics.get(&**t).map(|ti| (t.clone(), ti.partitions.len())))
                .collect()
        });
        let mut acc = self.shared.lock();
        for (t, n) in counts {
            acc.set_partitions(&t, n);
        }
    }

    fn on_produce(&mut self, node: i32, batches: Vec<Batch>, result: Result<ProduceResponse>) {
        let cluster = &self.shared.cluster;
        let now = Instant::now();
        let mut outcomes = Vec::with_capacity(batches.len());
        match result {
            Err(e) => outcomes.extend(batches.into_iter().map(|b| (b, Err(e.clone())))),
            Ok(resp) => {
                cluster.learn_brokers(resp.node_endpoints.iter().map(|n| BrokerInfo {
                    node_id: n.node_id.0,
                    host: n.host.to_string(),
                    port: n.port,
                    rack: n.rack.as_ref().map(|r| r.to_string()),
                }));
                for b in batches {
                    let r = partition_result(&resp, node, &b);
                    if let Some(p) =
                        find_partition(&resp, &b).filter(|p| p.error_code != 0 && p.current_leader.leader_id.0 >= 0)
                    {
                        cluster.learn_leader(
                            &b.topic,
                            b.partition,
                            p.current_leader.leader_id.0,
                            p.current_leader.leader_epoch,
                        );
                    }
                    outcomes.push((b, r));
                }
            }
        }
        let mut retries = Vec::new();
        let mut finished = Vec::new();
        // Under the lock: the sequences must see every answer before the next drain, and
        // completion before leaving `in_flight` means a flush never misses a batch.
        let shared = self.shared.clone();
        let mut acc = shared.lock();
        for (mut b, r) in outcomes {
            let r = match r {
                // The broker had the batch already but no longer knows its offset.
                Err(e) if b.stamp.is_some() && e.code() == Some(ErrorCode::DUPLICATE_SEQUENCE_NUMBER) => {
                    Ok(BatchOutcome { base_offset: -1, log_append_time: -1 })
                }
                r => r,
            };
            match r {
                Ok(o) => {
                    if let Some(seqs) = acc.seqs.as_mut() {
                        seqs.acked(&b);
                    }
                    b.done.complete(Ok(o));
                    finished.push(b);
                }
                Err(e) => {
                    let verdict = acc.seqs.as_mut().map_or(Verdict::Default, |s| s.refused(&b, &e));
                    if verdict == Verdict::Written {
                        b.done.complete(Ok(BatchOutcome { base_offset: -1, log_append_time: -1 }));
                        finished.push(b);
                        continue;
                    }
                    match self.retry(&mut b, e, now, verdict == Verdict::Retry) {
                        Ok(()) => {
                            self.shared.metrics.retried(b.records);
                            retries.push(b)
                        }
                        Err(e) => {
                            if let Some(seqs) = acc.seqs.as_mut() {
                                seqs.failed(&b, false);
                            }
                            self.shared.metrics.failed(b.records);
                            b.done.complete(Err(e));
                            finished.push(b);
                        }
                    }
                }
            }
        }
        for b in finished.iter().chain(&retries) {
            acc.in_flight.remove(&key(&b.done));
        }
        for b in retries {
            acc.requeue(b);
        }
        drop(acc);
        drop(finished); // releases buffer memory
    }

    /// Schedules a retry of `b` after a retriable error, or says why it is final.
    fn retry(&mut self, b: &mut Batch, err: Error, now: Instant, force: bool) -> Result<()> {
        let cfg = &self.shared.config;
        schedule_retry(b, err, now, cfg.retries, cfg.delivery_timeout, force)?;
        // Leadership may have moved (or the connection died): look again before retrying.
        self.want_metadata.insert(b.topic.clone());
        Ok(())
    }

    /// Close timed out: fail everything still queued or in flight.
    async fn abort_all(&mut self) {
        let (left, unanswered) = {
            let mut acc = self.shared.lock();
            // Only this task completes in-flight batches (a request task fails just the ones
            // it could not encode, before this), so the ones not done yet fail below.
            let unanswered: usize = acc.in_flight.values().filter(|f| !f.done.is_done()).map(|f| f.records).sum();
            (acc.take_all(), unanswered)
        };
        self.shared.metrics.failed(left.iter().map(|b| b.records).sum::<usize>() + unanswered);
        drop(left); // each dropped batch fails its futures with Closed
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        self.shared.lock().in_flight.clear();
    }
}

/// How long `close` gives the task to stop after the flush, before giving up on it.
pub(crate) const TASK_STOP_GRACE: Duration = Duration::from_secs(5);

/// Schedules a retry of `b` after `err`, or says why the error is final: not retriable (unless
/// `force`: the idempotent producer retries some sequence errors), `retries` used up, or the
/// backoff would end past `delivery.timeout.ms`.
fn schedule_retry(
    b: &mut Batch,
    err: Error,
    now: Instant,
    retries: u32,
    delivery_timeout: Duration,
    force: bool,
) -> Result<()> {
    if !(force || err.is_retriable()) || b.attempts >= retries {
        return Err(err);
    }
    let at = now + b.backoff.next_delay();
    if at >= b.deadline(delivery_timeout) {
        return Err(Error::Timeout {
            what: format!("delivering {} records to {}-{} (last error: {err})", b.records, b.topic, b.partition),
            after: delivery_timeout,
        });
    }
    debug!(topic = %b.topic, partition = b.partition, attempt = b.attempts + 1, error = %err, "retrying produce");
    b.attempts += 1;
    b.retry_at = Some(at);
    Ok(())
}

#[cfg(test)]
#[path = "sender_tests.rs"]
mod tests;
