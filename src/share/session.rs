//! One share session with one broker, as a sans-IO state machine.
//!
//! A member keeps one share session per broker it fetches from, keyed on the broker by
//! (group, member). Epoch 0 opens (or replaces) it and lists every partition; each later
//! request carries epoch + 1 (wrapping MAX -> 1) and lists only partitions that were added
//! or carry acks; `ForgottenTopicsData` drops partitions; epoch -1 closes it, releasing
//! whatever the member still holds there.
//!
//! Invariants this type keeps:
//! - At most one request in flight (the broker checks epochs in order, so a second request
//!   would race the first and earn INVALID_SHARE_SESSION_EPOCH).
//! - Acks live in the session of the broker that delivered their records. A session reset
//!   (error, lost connection) bumps its `generation` and fails the queued acks at once: the
//!   broker released those records when it dropped the session, so sending the acks would
//!   only earn INVALID_RECORD_STATE (LANDSCAPE bug 3).
//! - Acks never ride on an epoch-0 fetch (INVALID_REQUEST), and Renew acks only travel in a
//!   ShareAcknowledge with IsRenewAck (a renew on a fetch would fetch nothing).
//! - A partition that only carries acks is acknowledged with ShareAcknowledge, never added to
//!   the fetch session, so it cannot linger there (LANDSCAPE bug 8).

use std::collections::{BTreeMap, BTreeSet};

use crate::protocol::share::{
    AcknowledgePartition, AcknowledgeTopic, FetchPartition, FetchTopic, ForgottenTopic, ShareAcknowledgeRequest,
    ShareFetchRequest,
};

use super::acks::{AckKind, PartitionAcks, Settled};
use super::TopicIdPartition;

/// The epoch that opens a session.
pub const OPEN_EPOCH: i32 = 0;
/// The epoch that closes a session.
pub const CLOSE_EPOCH: i32 = -1;

/// Fetch limits copied into every ShareFetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchParams {
    /// `fetch.max.wait.ms`.
    pub max_wait_ms: i32,
    /// `fetch.min.bytes`.
    pub min_bytes: i32,
    /// `fetch.max.bytes`.
    pub max_bytes: i32,
    /// MaxRecords (`max.poll.records`).
    pub max_records: i32,
    /// BatchSize (`max.poll.records`).
    pub batch_size: i32,
    /// 0 batch_optimized, 1 record_limit (v2 only).
    pub acquire_mode: i8,
}

/// What went out in the request in flight; handed back on completion.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    /// The epoch it carried.
    pub epoch: i32,
    /// Whether it was a ShareFetch (else ShareAcknowledge).
    pub is_fetch: bool,
    /// The acks it carried, per partition.
    pub acks: BTreeMap<TopicIdPartition, PartitionAcks>,
    /// The session generation it belongs to.
    pub generation: u64,
    /// The partitions the broker will know after it succeeds.
    known_after: BTreeSet<TopicIdPartition>,
}

/// A share session with one broker.
#[derive(Debug)]
pub struct ShareSession {
    node_id: i32,
    epoch: i32,
    generation: u64,
    known: BTreeSet<TopicIdPartition>,
    wanted: BTreeSet<TopicIdPartition>,
    acks: BTreeMap<TopicIdPartition, PartitionAcks>,
    in_flight: bool,
    /// The broker may still hold a session of ours that we reset (see [`Self::abandon`]): a
    /// close must still end it, even while no new one is open.
    left_open: bool,
}

impl ShareSession {
    /// A session not yet opened.
    pub fn new(node_id: i32) -> Self {
        ShareSession {
            node_id,
            epoch: OPEN_EPOCH,
            generation: 0,
            known: BTreeSet::new(),
            wanted: BTreeSet::new(),
            acks: BTreeMap::new(),
            in_flight: false,
            left_open: false,
        }
    }

    /// The broker.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The generation: bumped on every reset; acks of records delivered under an older
    /// generation are stale.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The epoch the next request will carry.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// Whether the broker holds an open session for us.
    pub fn is_open(&self) -> bool {
        self.epoch != OPEN_EPOCH
    }

    /// Whether a request is in flight.
    pub fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// The partitions to fetch from this broker.
    pub fn wanted(&self) -> &BTreeSet<TopicIdPartition> {
        &self.wanted
    }

    /// Sets the partitions to fetch here (those assigned to us and led by this broker).
    pub fn set_wanted(&mut self, wanted: BTreeSet<TopicIdPartition>) {
        self.wanted = wanted;
    }

    /// Queues an ack for a record delivered under the current generation.
    pub fn queue_ack(&mut self, tp: TopicIdPartition, offset: i64, kind: AckKind) {
        self.acks.entry(tp).or_default().add(offset, kind);
    }

    /// Queues one kind for `tp`'s offsets `first..=last`, records delivered under the current
    /// generation (a whole batch given one outcome).
    pub fn queue_ack_range(&mut self, tp: TopicIdPartition, first: i64, last: i64, kind: AckKind) {
        self.acks.entry(tp).or_default().add_range(first, last, kind);
    }

    /// Takes out the queued acks of `tp`'s offsets `first..=last`; returns those offsets, by
    /// who decided them.
    pub fn take_queued(&mut self, tp: TopicIdPartition, first: i64, last: i64) -> Settled {
        self.acks.get_mut(&tp).map_or_else(Settled::default, |a| a.take_range(first, last))
    }

    /// Whether acks are waiting to be sent.
    pub fn has_acks(&self) -> bool {
        self.acks.values().any(|a| !a.is_empty())
    }

    /// Whether queued acks include partitions this session no longer fetches: those can only
    /// go by ShareAcknowledge, so they must not wait behind fetch after fetch.
    pub fn has_acks_outside_wanted(&self) -> bool {
        self.acks.iter().any(|(tp, a)| !a.is_empty() && !self.wanted.contains(tp))
    }

    /// Whether queued acks include renewals.
    pub fn has_renew(&self) -> bool {
        self.acks.values().any(|a| a.has_renew())
    }

    /// Whether the session has partitions to forget (assignment shrank).
    pub fn has_forgotten(&self) -> bool {
        self.is_open() && self.known.iter().any(|tp| !self.wanted.contains(tp))
    }

    /// Whether the broker's view of the session is behind: partitions to add or to forget.
    pub fn has_changes(&self) -> bool {
        self.has_forgotten() || (self.is_open() && self.wanted.iter().any(|tp| !self.known.contains(tp)))
    }

    /// Whether there is any reason to keep this session (something to fetch, ack or forget).
    pub fn is_idle(&self) -> bool {
        self.wanted.is_empty() && !self.has_acks() && !self.in_flight
    }

    /// Builds the next ShareFetch, piggybacking the (non-renew) acks of fetched partitions.
    /// None while a request is in flight.
    pub fn build_fetch(
        &mut self,
        group_id: &str,
        member_id: &str,
        p: FetchParams,
    ) -> Option<(ShareFetchRequest, Sent)> {
        if self.in_flight || (self.wanted.is_empty() && !self.has_forgotten()) {
            return None;
        }
        let epoch = self.epoch;
        let mut acks = BTreeMap::new();
        if epoch != OPEN_EPOCH {
            for tp in &self.wanted {
                if let Some(a) = self.acks.get_mut(tp) {
                    let normal = a.split_renew(false);
                    if !normal.is_empty() {
                        acks.insert(*tp, normal);
                    }
                }
            }
            self.acks.retain(|_, a| !a.is_empty());
        }
        // Epoch 0 lists everything; later requests list added partitions and those with acks.
        let listed: BTreeSet<TopicIdPartition> = if epoch == OPEN_EPOCH {
            self.wanted.clone()
        } else {
            self.wanted.iter().filter(|tp| !self.known.contains(tp) || acks.contains_key(tp)).copied().collect()
        };
        let forgotten: Vec<TopicIdPartition> = if epoch == OPEN_EPOCH {
            Vec::new()
        } else {
            self.known.iter().filter(|tp| !self.wanted.contains(tp)).copied().collect()
        };
        let req = ShareFetchRequest {
            group_id: group_id.to_string(),
            member_id: member_id.to_string(),
            share_session_epoch: epoch,
            max_wait_ms: p.max_wait_ms,
            min_bytes: p.min_bytes,
            max_bytes: p.max_bytes,
            max_records: p.max_records,
            batch_size: p.batch_size,
            share_acquire_mode: p.acquire_mode,
            is_renew_ack: false,
            topics: group_topics(listed.iter().copied(), |tp| FetchPartition {
                partition_index: tp.partition,
                acknowledgement_batches: acks.get(&tp).map(|a: &PartitionAcks| a.to_batches()).unwrap_or_default(),
            })
            .into_iter()
            .map(|(topic_id, partitions)| FetchTopic { topic_id, partitions })
            .collect(),
            forgotten_topics_data: group_topics(forgotten.iter().copied(), |tp| tp.partition)
                .into_iter()
                .map(|(topic_id, partitions)| ForgottenTopic { topic_id, partitions })
                .collect(),
        };
        self.in_flight = true;
        Some((req, Sent { epoch, is_fetch: true, acks, generation: self.generation, known_after: self.wanted.clone() }))
    }

    /// Builds a ShareAcknowledge for queued acks: renewals (`renew = true`, needs v2) or the
    /// rest. None if there is nothing of that kind, the session is not open, or a request is
    /// in flight.
    pub fn build_ack(
        &mut self,
        group_id: &str,
        member_id: &str,
        renew: bool,
    ) -> Option<(ShareAcknowledgeRequest, Sent)> {
        if self.in_flight || !self.is_open() {
            return None;
        }
        let acks = self.take_acks(renew);
        if acks.is_empty() {
            return None;
        }
        let req = ack_request(group_id, member_id, self.epoch, renew, &acks);
        self.in_flight = true;
        Some((
            req,
            Sent {
                epoch: self.epoch,
                is_fetch: false,
                acks,
                generation: self.generation,
                known_after: self.known.clone(),
            },
        ))
    }

    /// Builds the final ShareAcknowledge (epoch -1) carrying every queued ack. It closes the
    /// session and releases the rest of what the member holds on this broker. None when no
    /// session is open and none was abandoned open (nothing to close).
    ///
    /// Renewing on close is pointless (the records go back to the group), so a queued RENEW
    /// goes as a RELEASE: dropped instead, its outcome was never reported (the handle hands
    /// the RENEWs the application made before closing to the close, with everything else).
    pub fn build_close(&mut self, group_id: &str, member_id: &str) -> Option<(ShareAcknowledgeRequest, Sent)> {
        if !(self.is_open() || self.left_open) || self.in_flight {
            return None;
        }
        self.left_open = false;
        for (tp, renews) in self.take_acks(true) {
            let acks = self.acks.entry(tp).or_default();
            for (offset, _) in renews.iter() {
                acks.add(offset, AckKind::Release);
            }
        }
        let acks = self.take_acks(false);
        let req = ack_request(group_id, member_id, CLOSE_EPOCH, false, &acks);
        self.in_flight = true;
        Some((
            req,
            Sent {
                epoch: CLOSE_EPOCH,
                is_fetch: false,
                acks,
                generation: self.generation,
                known_after: BTreeSet::new(),
            },
        ))
    }

    fn take_acks(&mut self, renew: bool) -> BTreeMap<TopicIdPartition, PartitionAcks> {
        let mut out = BTreeMap::new();
        for (tp, a) in self.acks.iter_mut() {
            let part = a.split_renew(renew);
            if !part.is_empty() {
                out.insert(*tp, part);
            }
        }
        self.acks.retain(|_, a| !a.is_empty());
        out
    }

    /// The request in flight succeeded at the session level.
    pub fn on_success(&mut self, sent: &Sent) {
        self.in_flight = false;
        if sent.generation != self.generation {
            return; // a reset happened meanwhile
        }
        if sent.epoch == CLOSE_EPOCH {
            self.reset_keep_generation();
            return;
        }
        self.known = sent.known_after.clone();
        self.epoch = if self.epoch == i32::MAX { 1 } else { self.epoch + 1 };
    }

    /// The session is gone on the broker (session error, lost connection, or the request
    /// failed so we cannot know its epoch). The next request reopens at epoch 0. Returns the
    /// queued acks, which can no longer be sent: the caller fails them.
    ///
    /// A request still in flight stays marked as such: its (stale) answer must come back
    /// before the next request goes out, so the broker never sees two at once.
    pub fn reset(&mut self) -> BTreeMap<TopicIdPartition, PartitionAcks> {
        self.generation += 1;
        self.reset_keep_generation();
        std::mem::take(&mut self.acks)
    }

    /// [`Self::reset`] of a session the broker still holds: the member was fenced, and a
    /// share-partition leader does not hear of that, so the session and the records it
    /// acquired stay there (until their locks lapse, the member leaves, or the connection
    /// closes). A rejoin opens a new session at epoch 0; a close, whatever is open then,
    /// still sends epoch -1, which releases what the member holds here.
    pub fn abandon(&mut self) -> BTreeMap<TopicIdPartition, PartitionAcks> {
        self.left_open |= self.is_open() || self.in_flight;
        self.reset()
    }

    fn reset_keep_generation(&mut self) {
        self.epoch = OPEN_EPOCH;
        self.known.clear();
    }

    /// Marks the in-flight request as finished without changing the session (used when the
    /// response is handled by `reset`).
    pub fn clear_in_flight(&mut self) {
        self.in_flight = false;
    }
}

fn ack_request(
    group_id: &str,
    member_id: &str,
    epoch: i32,
    renew: bool,
    acks: &BTreeMap<TopicIdPartition, PartitionAcks>,
) -> ShareAcknowledgeRequest {
    ShareAcknowledgeRequest {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
        share_session_epoch: epoch,
        is_renew_ack: renew,
        topics: group_topics(acks.keys().copied(), |tp| AcknowledgePartition {
            partition_index: tp.partition,
            acknowledgement_batches: acks.get(&tp).map(|a| a.to_batches()).unwrap_or_default(),
        })
        .into_iter()
        .map(|(topic_id, partitions)| AcknowledgeTopic { topic_id, partitions })
        .collect(),
    }
}

/// Groups partitions by topic id, keeping topic order stable.
fn group_topics<T>(
    tps: impl Iterator<Item = TopicIdPartition>,
    mut f: impl FnMut(TopicIdPartition) -> T,
) -> Vec<(uuid::Uuid, Vec<T>)> {
    let mut out: Vec<(uuid::Uuid, Vec<T>)> = Vec::new();
    for tp in tps {
        match out.last_mut() {
            Some((id, v)) if *id == tp.topic_id => v.push(f(tp)),
            _ => out.push((tp.topic_id, vec![f(tp)])),
        }
    }
    out
}

#[cfg(test)]
mod tests;
