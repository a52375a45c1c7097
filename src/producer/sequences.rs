//! The idempotent producer's bookkeeping (`enable.idempotence=true`): the producer id and
//! epoch, and per partition the next sequence number and the batches not yet answered for
//! good. Sans-IO: the accumulator asks it before draining a batch and tells it each answer.
//!
//! Rules (those of the Java client's TransactionManager for a producer without transactions):
//! * A batch gets its id, epoch and base sequence when first drained, and keeps them across
//!   retries, so the broker recognises a resent batch as a duplicate.
//! * A retried batch goes back into its partition's queue in sequence order, ahead of newer
//!   batches, and is sent only when it is the oldest unanswered batch of its partition: later
//!   batches can never overtake it.
//! * Under a new producer id or epoch, a partition's first batch goes alone: until the broker
//!   acknowledged one batch, it may hold no state for us on the partition, and then it accepts
//!   *any* sequence. A second batch in flight could be written ahead of a first one that failed
//!   (NOT_LEADER_OR_FOLLOWER right after the topic was created), and the first one would then
//!   be refused as out of order forever. Once one batch is acknowledged, the broker enforces
//!   the order itself and up to `max.in.flight` batches may go.
//! * While a partition has a refused batch not yet answered for good, no new batch of it goes.
//!   The broker remembers only the last 5 batches of a partition to spot a resend: a batch
//!   whose answer was lost (connection cut) may have been written, and if more than 4 newer
//!   batches were written behind it before its resend arrives, the resend is refused as out of
//!   order instead of being recognised. Holding new batches back bounds those newer batches
//!   by the ones in flight with it (`max.in.flight` <= 5, one batch per partition a request).
//! * OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next one the broker expects only
//!   means an earlier batch failed: retry. For the next one it means a gap; so does
//!   UNKNOWN_PRODUCER_ID (the broker lost our state). Then the partition is *reset*: once none
//!   of its batches is on the wire, the epoch is bumped (new id when it would overflow) and its
//!   unanswered batches are restamped from sequence 0. A batch that fails for good also resets
//!   its partition, since its sequence left a gap. INVALID_PRODUCER_EPOCH asks for a new
//!   producer id.
//! * The broker writes a partition's sequences without gaps, so once it acknowledged a batch,
//!   every earlier batch of the epoch was written too. A resend of one of them refused as out
//!   of order (it fell out of the broker's 5-batch memory) is therefore a success whose offset
//!   is unknown (-1, as for DUPLICATE_SEQUENCE_NUMBER), never retried until
//!   `delivery.timeout.ms`; and one that fails for good leaves no gap, so no reset.
//!   Restamping after a reset may still duplicate a batch whose first send was written but
//!   unanswered; the two rules above keep resets to real gaps (a broker that lost data or our
//!   state, or a batch failing for good with no later batch acknowledged).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::batch::Batch;
use crate::error::{Error, ErrorCode};
use crate::protocol::records::ProducerStamp;

/// A producer id and epoch from InitProducerId.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerId {
    pub id: i64,
    pub epoch: i16,
}

/// What to do with a batch the broker refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Retry even though the error code is not retriable by itself.
    Retry,
    /// The broker has the batch (it acknowledged a later one) but no longer knows its offset:
    /// a success, already accounted for.
    Written,
    /// The usual rule: retry if the error is retriable, else fail.
    Default,
}

#[derive(Debug, Default)]
struct PartitionSeq {
    /// The id and epoch the partition's sequences belong to.
    pid: Option<ProducerId>,
    next_sequence: i32,
    /// The last sequence the broker acknowledged under `pid` (-1: none).
    last_acked: i32,
    /// The latest (by order) batch the broker acknowledged under `pid`.
    acked_order: Option<u64>,
    /// Unanswered batches that were refused at least once (queued for a resend or resent).
    retrying: Vec<u64>,
    /// Unanswered stamped batches (queued for a retry or on the wire), oldest first, by order.
    unanswered: VecDeque<u64>,
    next_order: u64,
    /// Stamped batches of this partition in requests now.
    on_wire: usize,
    /// Restart the sequences (with a new epoch) once nothing is on the wire.
    reset: bool,
}

/// The producer's id and every partition's sequences.
#[derive(Debug, Default)]
pub(crate) struct Sequences {
    /// `None` until InitProducerId answers (and after INVALID_PRODUCER_EPOCH or an epoch
    /// overflow): nothing is drained meanwhile.
    pub current: Option<ProducerId>,
    /// Why the last InitProducerId failed, for the error of batches that expire waiting.
    pub last_init_error: Option<Error>,
    partitions: HashMap<(Arc<str>, i32), PartitionSeq>,
}

/// Sequence numbers wrap to 0 after i32::MAX, as the broker expects.
fn add_sequence(seq: i32, records: usize) -> i32 {
    ((i64::from(seq) + records as i64) % (i64::from(i32::MAX) + 1)) as i32
}

impl Sequences {
    /// Whether the front batch of a partition's queue may be drained now; stamps it if it is
    /// new. Applies a pending reset first (restamping the queued batches).
    pub(super) fn prepare(&mut self, topic: &Arc<str>, partition: i32, queue: &mut VecDeque<Batch>) -> bool {
        let Some(mut current) = self.current else { return false };
        let st = self
            .partitions
            .entry((topic.clone(), partition))
            .or_insert_with(|| PartitionSeq { last_acked: -1, ..Default::default() });
        if st.reset {
            if st.on_wire > 0 {
                return false; // their answers come first: restamping now could reuse a sequence
            }
            if st.pid == Some(current) {
                // This partition is the first to need the bump since `current` was issued.
                if current.epoch == i16::MAX {
                    self.current = None; // a new producer id is needed
                    return false;
                }
                current.epoch += 1;
                self.current = Some(current);
            }
            let mut seq = 0;
            for b in queue.iter_mut().take_while(|b| b.stamp.is_some()) {
                b.stamp = Some(stamp(current, seq));
                seq = add_sequence(seq, b.records);
            }
            *st = PartitionSeq {
                pid: Some(current),
                next_sequence: seq,
                last_acked: -1,
                acked_order: None,
                retrying: std::mem::take(&mut st.retrying),
                unanswered: std::mem::take(&mut st.unanswered),
                next_order: st.next_order,
                on_wire: 0,
                reset: false,
            };
        }
        let Some(front) = queue.front_mut() else { return false };
        if front.stamp.is_some() {
            // A retry: only the oldest unanswered batch, so none overtakes an earlier one.
            return st.unanswered.front() == Some(&front.order);
        }
        if st.pid != Some(current) {
            if !st.unanswered.is_empty() {
                return false; // older batches under the old epoch finish first
            }
            st.pid = Some(current);
            st.next_sequence = 0;
            st.last_acked = -1;
            st.acked_order = None;
        }
        if st.last_acked < 0 && st.on_wire > 0 {
            return false; // the first batch of this epoch goes alone (see the module docs)
        }
        if !st.retrying.is_empty() {
            return false; // resends first, within the broker's memory of 5 batches
        }
        front.stamp = Some(stamp(current, st.next_sequence));
        front.order = st.next_order;
        st.next_order += 1;
        st.next_sequence = add_sequence(st.next_sequence, front.records);
        st.unanswered.push_back(front.order);
        true
    }

    /// A stamped batch went into a request.
    pub(super) fn sent(&mut self, b: &Batch) {
        if let Some(st) = self.stamped(b) {
            st.on_wire += 1;
        }
    }

    /// The broker wrote the batch (or already had it).
    pub(super) fn acked(&mut self, b: &Batch) {
        let Some(s) = b.stamp else { return };
        if let Some(st) = self.stamped(b) {
            st.on_wire = st.on_wire.saturating_sub(1);
            st.answered(b.order);
            let latest = st.acked_order.is_none_or(|o| o < b.order);
            // Answers are handled in any order: only the latest batch moves `last_acked`.
            if latest && st.pid.is_some_and(|p| p.epoch == s.producer_epoch && p.id == s.producer_id) {
                st.last_acked = add_sequence(s.base_sequence, b.records.saturating_sub(1));
                st.acked_order = Some(b.order);
            }
        }
    }

    /// The request carrying the batch failed or the broker refused it with `err`; the batch
    /// is not answered for good yet. Says whether to retry regardless of the code.
    pub(super) fn refused(&mut self, b: &Batch, err: &Error) -> Verdict {
        let Some(s) = b.stamp else { return Verdict::Default };
        let code = err.code();
        let Some(st) = self.stamped(b) else { return Verdict::Default };
        st.on_wire = st.on_wire.saturating_sub(1);
        if code == Some(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER) && st.went_past(&s, b.order) {
            st.answered(b.order);
            return Verdict::Written;
        }
        if !st.retrying.contains(&b.order) {
            st.retrying.push(b.order);
        }
        match code {
            Some(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER) => {
                // Next in line yet out of order: the broker has a gap before it.
                if s.base_sequence == add_sequence(st.last_acked, 1) {
                    st.reset = true;
                }
                Verdict::Retry
            }
            Some(ErrorCode::UNKNOWN_PRODUCER_ID) => {
                st.reset = true;
                Verdict::Retry
            }
            Some(ErrorCode::INVALID_PRODUCER_EPOCH) => {
                st.reset = true;
                let pid = ProducerId { id: s.producer_id, epoch: s.producer_epoch };
                if self.current.is_some_and(|c| c.id == pid.id) {
                    self.current = None;
                }
                Verdict::Retry
            }
            _ => Verdict::Default,
        }
    }

    /// The batch failed for good (or expired): unless the broker went past it, its sequence is
    /// a gap, so the partition resets.
    pub(super) fn failed(&mut self, b: &Batch, was_on_wire: bool) {
        let Some(s) = b.stamp else { return };
        if let Some(st) = self.stamped(b) {
            if was_on_wire {
                st.on_wire = st.on_wire.saturating_sub(1);
            }
            st.answered(b.order);
            if !st.went_past(&s, b.order) {
                st.reset = true;
            }
        }
    }

    fn stamped(&mut self, b: &Batch) -> Option<&mut PartitionSeq> {
        b.stamp?;
        self.partitions.get_mut(&(b.topic.clone(), b.partition))
    }
}

impl PartitionSeq {
    /// The batch is answered for good.
    fn answered(&mut self, order: u64) {
        self.unanswered.retain(|o| *o != order);
        self.retrying.retain(|o| *o != order);
    }

    /// Whether the broker acknowledged a later batch of the epoch the batch was stamped
    /// under: it then wrote this one too (see the module docs).
    fn went_past(&self, s: &ProducerStamp, order: u64) -> bool {
        let same_epoch = self.pid.is_some_and(|p| p.epoch == s.producer_epoch && p.id == s.producer_id);
        same_epoch && self.acked_order.is_some_and(|o| o > order)
    }
}

fn stamp(pid: ProducerId, base_sequence: i32) -> ProducerStamp {
    ProducerStamp { producer_id: pid.id, producer_epoch: pid.epoch, base_sequence }
}

#[cfg(test)]
#[path = "sequences_tests.rs"]
mod tests;
