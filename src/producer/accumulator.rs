//! Per-partition batches: `send` appends under a short lock, the sender task drains the
//! batches that are ready (full, lingered long enough, flushed, or due for a retry).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::batch::Batch;
use super::partitioner::{to_positive, PartitionChoice, Sticky};
use super::record::BatchDone;
use super::sequences::Sequences;
use crate::backoff::Backoff;
use crate::cluster::Metadata;
use crate::error::{Error, Result};
use crate::protocol::records::RecordInput;

/// The settings the accumulator needs.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub batch_size: usize,
    pub linger: Duration,
    pub delivery_timeout: Duration,
    pub max_request_size: usize,
    pub max_in_flight: usize,
    pub retry_backoff: (Duration, Duration),
}

/// Where a record went.
pub(crate) struct Appended {
    pub done: Arc<BatchDone>,
    pub partition: i32,
    pub index: i32,
    /// The sender should look: a batch was created (linger timer) or filled.
    pub wake: bool,
}

struct TopicQueues {
    name: Arc<str>,
    partitions: Vec<VecDeque<Batch>>,
    sticky: Sticky,
}

/// What one drain pass found.
#[derive(Default)]
pub(crate) struct Drained {
    /// One request's worth of batches per leader, at most one batch per partition.
    pub requests: HashMap<i32, Vec<Batch>>,
    /// Batches past `delivery.timeout.ms` before they could be sent.
    pub expired: Vec<Batch>,
    /// Topics with a ready batch but no known leader.
    pub no_leader: Vec<Arc<str>>,
    /// When the next batch becomes ready or expires.
    pub next_wakeup: Option<Instant>,
}

/// A batch the sender took: its completion, and its records (for the metrics).
pub(crate) struct InFlight {
    pub done: Arc<BatchDone>,
    pub records: usize,
}

/// All unsent batches, by topic and partition.
pub(crate) struct Accumulator {
    topics: HashMap<Arc<str>, TopicQueues>,
    limits: Limits,
    memory: Arc<Semaphore>,
    /// Number of `flush` calls waiting: while non-zero, linger is ignored.
    pub flushing: usize,
    /// No more sends: everything is sent at once.
    pub closing: bool,
    /// The batches handed to the sender, for `flush` to wait on.
    pub in_flight: HashMap<usize, InFlight>,
    /// Sequence numbers, when idempotence is on.
    pub seqs: Option<Sequences>,
}

impl Accumulator {
    pub(super) fn new(limits: Limits, memory: Arc<Semaphore>) -> Self {
        Accumulator {
            topics: HashMap::new(),
            limits,
            memory,
            flushing: 0,
            closing: false,
            in_flight: HashMap::new(),
            seqs: None,
        }
    }

    /// Registers a topic, or grows it to `count` partitions (partitions are never removed).
    pub(super) fn set_partitions(&mut self, topic: &str, count: usize) {
        match self.topics.get_mut(topic) {
            Some(t) => {
                if count > t.partitions.len() {
                    t.partitions.resize_with(count, VecDeque::new);
                }
            }
            None => {
                let name: Arc<str> = Arc::from(topic);
                let mut partitions = Vec::with_capacity(count);
                partitions.resize_with(count, VecDeque::new);
                let q = TopicQueues { name: name.clone(), partitions, sticky: Sticky::new() };
                self.topics.insert(name, q);
            }
        }
    }

    /// Appends a record whose `reserved` bytes of buffer memory the caller already holds (the
    /// batch takes them over). `Ok(None)`: the topic is not known yet, load it and retry.
    pub(super) fn append(
        &mut self,
        topic: &str,
        choice: PartitionChoice,
        rec: &RecordInput,
        reserved: usize,
    ) -> Result<Option<Appended>> {
        if self.closing {
            return Err(Error::Closed);
        }
        let limits = &self.limits;
        let Some(tq) = self.topics.get_mut(topic) else {
            return Ok(None);
        };
        let n = tq.partitions.len() as i32;
        if n == 0 {
            return Ok(None);
        }
        let open_fits = |q: &VecDeque<Batch>| q.back().is_some_and(|b| !b.closed && b.fits(rec, limits.batch_size));
        // A new batch wakes the sender (to arm its linger timer); the batch it replaces was
        // full, and becomes sendable.
        let mut wake = false;
        let partition = match choice {
            PartitionChoice::Explicit(p) if p < 0 || p >= n => {
                return Err(Error::InvalidArgument(format!(
                    "partition {p} of topic {topic} does not exist (it has {n} partitions)"
                )));
            }
            PartitionChoice::Explicit(p) => p,
            PartitionChoice::Hash(h) => to_positive(h) % n,
            PartitionChoice::Sticky => match tq.sticky.current(n) {
                Some(p) if open_fits(&tq.partitions[p as usize]) => p,
                // The sticky batch was sent or is full: move on, as KIP-480 does, and let a
                // batch that cannot take this record go now rather than linger.
                current => {
                    if let Some(b) = current.and_then(|p| tq.partitions[p as usize].back_mut()).filter(|b| !b.closed) {
                        b.closed = true;
                        wake = true;
                    }
                    tq.sticky.advance(n)
                }
            },
        };
        let q = &mut tq.partitions[partition as usize];
        if !open_fits(q) {
            if let Some(b) = q.back_mut() {
                b.closed = true;
            }
            // A record larger than batch.size gets a batch of its own, as in Java.
            let capacity = limits.batch_size.max(reserved);
            let backoff = Backoff::new(limits.retry_backoff.0, limits.retry_backoff.1);
            q.push_back(Batch::new(tq.name.clone(), partition, capacity, self.memory.clone(), backoff));
            wake = true;
        }
        let Some(batch) = q.back_mut() else {
            return Ok(None);
        };
        let Some(index) = batch.append(rec, reserved)? else {
            return Ok(None);
        };
        if batch.size() >= limits.batch_size {
            batch.closed = true;
            wake = true;
        }
        Ok(Some(Appended { done: batch.done.clone(), partition, index, wake }))
    }

    /// Takes the batches that can go now. `in_flight(node)` counts requests already
    /// outstanding to a broker; brokers at `max.in.flight` get nothing this pass.
    pub(super) fn drain(&mut self, now: Instant, md: &Metadata, in_flight: impl Fn(i32) -> usize) -> Drained {
        let limits = &self.limits;
        let hurry = self.flushing > 0 || self.closing;
        let mut out = Drained::default();
        let mut sizes: HashMap<i32, usize> = HashMap::new();
        let wake_at = |t: Instant, out: &mut Drained| {
            out.next_wakeup = Some(out.next_wakeup.map_or(t, |w| w.min(t)));
        };
        for tq in self.topics.values_mut() {
            for q in tq.partitions.iter_mut() {
                while q.front().is_some_and(|b| now >= b.deadline(limits.delivery_timeout)) {
                    if let (Some(seqs), Some(b)) = (self.seqs.as_mut(), q.front()) {
                        seqs.failed(b, false);
                    }
                    out.expired.extend(q.pop_front());
                }
                let Some(front) = q.front() else { continue };
                let ready_at = front.ready_at(limits.linger, hurry);
                wake_at(front.deadline(limits.delivery_timeout), &mut out);
                if ready_at > now {
                    wake_at(ready_at, &mut out);
                    continue;
                }
                let Some(leader) = md.leader(&tq.name, front.partition) else {
                    if !out.no_leader.contains(&tq.name) {
                        out.no_leader.push(tq.name.clone());
                    }
                    continue;
                };
                let planned = out.requests.contains_key(&leader);
                if !planned && in_flight(leader) >= limits.max_in_flight {
                    continue; // a response will wake the sender
                }
                let size = sizes.entry(leader).or_default();
                if *size > 0 && *size + front.size() > limits.max_request_size {
                    continue; // next request
                }
                let partition = front.partition;
                if let Some(seqs) = self.seqs.as_mut() {
                    if !seqs.prepare(&tq.name, partition, q) {
                        continue; // no producer id yet, a reset waits, or an older batch first
                    }
                }
                if let Some(mut b) = q.pop_front() {
                    *size += b.size();
                    b.closed = true;
                    if let Some(seqs) = self.seqs.as_mut() {
                        seqs.sent(&b);
                    }
                    out.requests.entry(leader).or_default().push(b);
                }
            }
        }
        out
    }

    /// Puts a batch back at the front of its partition, for a retry at `retry_at`. A stamped
    /// batch goes in sequence order among the stamped ones (answers of one partition's
    /// requests may come back in any order), always ahead of unstamped batches.
    pub(super) fn requeue(&mut self, mut batch: Batch) {
        batch.closed = true;
        if let Some(q) = self.topics.get_mut(&batch.topic).and_then(|t| t.partitions.get_mut(batch.partition as usize))
        {
            match batch.stamp {
                None => q.push_front(batch),
                Some(_) => {
                    let at = q.iter().position(|b| b.stamp.is_none() || b.order > batch.order).unwrap_or(q.len());
                    q.insert(at, batch);
                }
            }
        }
        // else: unreachable (topics and partitions are never removed); the drop fails it.
    }

    /// Every unanswered batch's completion (queued and in flight), for `flush`.
    pub(super) fn incomplete(&self) -> Vec<Arc<BatchDone>> {
        let queued = self.topics.values().flat_map(|t| t.partitions.iter().flatten()).map(|b| b.done.clone());
        queued.chain(self.in_flight.values().map(|f| f.done.clone())).collect()
    }

    /// Whether no batch is queued.
    pub(super) fn is_empty(&self) -> bool {
        self.topics.values().all(|t| t.partitions.iter().all(|q| q.is_empty()))
    }

    /// Removes every queued batch (close timed out).
    pub(super) fn take_all(&mut self) -> Vec<Batch> {
        self.topics.values_mut().flat_map(|t| t.partitions.iter_mut().flat_map(|q| q.drain(..))).collect()
    }
}

#[cfg(test)]
#[path = "accumulator_tests.rs"]
mod tests;
