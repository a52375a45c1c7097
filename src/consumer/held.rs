//! The held set: what this consumer handed out and has not acknowledged-and-sent yet.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use super::driver::{AckEntry, Delivered, PollAnswer};
use super::{AcknowledgeType, AcknowledgementMode, ConsumerRecord};
use crate::error::{Error, Result};
use crate::share::acks::AckKind;
use crate::share::TopicIdPartition;

// ---------------------------------------------------------------------------------------------
// The held set: what this consumer handed out and has not acknowledged-and-sent yet.
//
// Each poll's records form one `PollBatch`, shared (`Arc`) by those records: per record its
// offset and one atomic ack slot, and per run of records of one partition (they come in runs)
// the routing tag the acks need (partition, broker, session generation). A record points at
// its slot (`ConsumerRecord::ack_slot`), so `acknowledge(&record)` is one compare-and-swap:
// no lock, no hashing, no allocation, where a map by topic, partition and offset cost a
// lookup per acknowledgement and an insert and a removal per record.
//
// The consumer keeps its live batches in a `Held`, oldest first; `take_acks` walks them
// (in poll order, runs ascending: the order `PartitionAcks` appends fastest) and drops a
// batch once all of its records are finally acknowledged. A batch outlives that while
// records point at it, but its slots then read SENT: nothing can acknowledge through it.
//
// The old map's semantics are kept: one record held per (topic, partition, offset), the
// newest delivery. When an offset still held comes again (the lock expired after a RENEW,
// say), the older slot is marked SUPERSEDED and acknowledging through it goes to the newer
// one by coordinates (see `supersede`), as the map's overwrite did.
// ---------------------------------------------------------------------------------------------

/// The state of one record's slot. It lives in an `AtomicU8` (acknowledging is lock-free),
/// packed by [`Slot::pack`]; the byte is never read but through [`Slot::unpack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// Delivered, not acknowledged.
    Unacked,
    /// Acknowledged that way, not yet taken for sending. A RENEW, once taken, leaves the slot
    /// SENT and the record waits in `Held::renewing` for the broker's answer: the poll after
    /// it comes back returns the record again, as a new delivery with its lock extended (as
    /// Java 4.4 does).
    Acked(AcknowledgeType),
    /// Acknowledged and taken for sending (or released on close): no longer held.
    Sent,
    /// Delivered again since, in a later slot, which is the one held now.
    Superseded,
}

impl Slot {
    #[inline(always)]
    const fn pack(self) -> u8 {
        match self {
            Slot::Unacked => 0,
            Slot::Acked(AcknowledgeType::Accept) => 1,
            Slot::Acked(AcknowledgeType::Release) => 2,
            Slot::Acked(AcknowledgeType::Reject) => 3,
            Slot::Acked(AcknowledgeType::Renew) => 4,
            Slot::Sent => 8,
            Slot::Superseded => 9,
        }
    }

    /// The slot a byte packs, by table: `take` reads one per record and the match this
    /// replaces cost as much as the rest of its loop. Only `pack` writes the byte; the values
    /// it never writes read as SUPERSEDED.
    #[inline(always)]
    fn unpack(byte: u8) -> Slot {
        const UNPACK: [Slot; 16] = {
            let mut t = [Slot::Superseded; 16];
            let all = [
                Slot::Unacked,
                Slot::Acked(AcknowledgeType::Accept),
                Slot::Acked(AcknowledgeType::Release),
                Slot::Acked(AcknowledgeType::Reject),
                Slot::Acked(AcknowledgeType::Renew),
                Slot::Sent,
                Slot::Superseded,
            ];
            let mut i = 0;
            while i < all.len() {
                t[all[i].pack() as usize] = all[i];
                i += 1;
            }
            t
        };
        UNPACK[usize::from(byte & 15)]
    }

    /// Whether the slot's record is still held: unacknowledged, or acknowledged and not sent.
    fn is_live(self) -> bool {
        matches!(self, Slot::Unacked | Slot::Acked(_))
    }

    #[inline(always)]
    fn load(cell: &AtomicU8) -> Slot {
        Slot::unpack(cell.load(Ordering::Acquire))
    }

    /// Swaps `from` for `to` if the slot still reads `from`; else returns what it reads now.
    #[inline(always)]
    fn swap(cell: &AtomicU8, from: Slot, to: Slot, weak: bool) -> Result<(), Slot> {
        let r = if weak {
            cell.compare_exchange_weak(from.pack(), to.pack(), Ordering::AcqRel, Ordering::Acquire)
        } else {
            cell.compare_exchange(from.pack(), to.pack(), Ordering::AcqRel, Ordering::Acquire)
        };
        r.map(drop).map_err(Slot::unpack)
    }
}

/// The records of one poll, with their ack slots (see the comment above).
pub(crate) struct PollBatch {
    /// The consumer that delivered them: a record of another consumer is not held by this one,
    /// whatever its slot says.
    pub(super) owner: u64,
    pub(super) runs: Vec<Run>,
    /// Per record, in delivery order: its offset (ascending within a run).
    pub(super) offsets: Vec<i64>,
    /// Per record: its delivery count, which names the delivery an acknowledgement is for
    /// (the driver refuses one for a delivery the broker has since superseded).
    pub(super) delivery_counts: Vec<i16>,
    /// Per record: its [`Slot`], packed.
    pub(super) slots: Vec<AtomicU8>,
    /// The records acknowledged as RENEW, by index (a renewed record is handed out again, so
    /// the batch keeps a copy; RENEW is rare, so this is usually empty and never locked).
    pub(super) renewals: Mutex<Vec<(usize, ConsumerRecord)>>,
}

/// Consecutive records of a batch from one partition, broker and session generation, with
/// ascending offsets (so an offset is found by binary search).
pub(super) struct Run {
    pub(super) topic: Arc<str>,
    pub(super) partition: i32,
    pub(super) tp: TopicIdPartition,
    pub(super) node: i32,
    pub(super) generation: u64,
    /// The conservative end of the records' acquisition lock (they came in one response).
    pub(super) lock_deadline: Option<std::time::Instant>,
    /// Indexes of the records, `start..end`.
    pub(super) start: usize,
    pub(super) end: usize,
}

/// A record's acknowledgement slot: its batch and its index there.
#[derive(Clone)]
pub(crate) struct AckSlot {
    pub(super) batch: Arc<PollBatch>,
    pub(super) index: usize,
}

/// What setting a slot did.
#[derive(Debug, PartialEq)]
pub(super) enum Set {
    /// Recorded; it replaces an earlier acknowledgement not sent yet (the last one wins, as
    /// in Java).
    Done,
    /// Not live: acknowledged and taken for sending already.
    NotHeld,
    /// The record was delivered again since (its lock had expired): this delivery can no
    /// longer be acknowledged; the newer one can.
    Superseded,
}

/// What `take_acks` does with records not acknowledged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Unacked {
    /// Keep them held (explicit mode).
    Keep,
    /// Accept them (implicit mode).
    Accept,
    /// Release them, and let go of every record (close): renewed ones are handed over with
    /// their RENEW and are not held any more either (the close sends it as a RELEASE: the
    /// session closes right after, releasing them).
    ReleaseAll,
}

impl Unacked {
    /// What a poll or commit does with the records not acknowledged, in `mode`.
    pub(crate) fn on_poll(mode: AcknowledgementMode) -> Unacked {
        match mode {
            AcknowledgementMode::Implicit => Unacked::Accept,
            AcknowledgementMode::Explicit => Unacked::Keep,
        }
    }
}

impl PollBatch {
    pub(super) fn new(owner: u64, delivered: &[Delivered]) -> PollBatch {
        let mut runs: Vec<Run> = Vec::new();
        let mut offsets: Vec<i64> = Vec::with_capacity(delivered.len());
        for (i, d) in delivered.iter().enumerate() {
            let r = &d.record;
            let continues = runs.last().is_some_and(|run| {
                run.tp == d.tp
                    && run.node == d.node
                    && run.generation == d.generation
                    && run.partition == r.partition
                    && run.lock_deadline == r.lock_deadline
                    && (Arc::ptr_eq(&run.topic, &r.topic) || run.topic == r.topic)
                    && offsets.last().is_some_and(|&last| last < r.offset)
            });
            if !continues {
                runs.push(Run {
                    topic: r.topic.clone(),
                    partition: r.partition,
                    tp: d.tp,
                    node: d.node,
                    generation: d.generation,
                    lock_deadline: r.lock_deadline,
                    start: i,
                    end: i,
                });
            }
            if let Some(run) = runs.last_mut() {
                run.end = i + 1;
            }
            offsets.push(r.offset);
        }
        let slots = delivered.iter().map(|_| AtomicU8::new(Slot::Unacked.pack())).collect();
        let delivery_counts = delivered.iter().map(|d| d.record.delivery_count).collect();
        PollBatch { owner, runs, offsets, delivery_counts, slots, renewals: Mutex::new(Vec::new()) }
    }

    /// Acknowledges record `index` with `ack` while it is held, replacing an earlier
    /// acknowledgement not sent yet (the last one wins, as in Java). A compare-and-swap, so
    /// that it races safely with other acknowledgements and with `take` (which swaps the slot
    /// to SENT under the lock).
    pub(super) fn set(&self, index: usize, ack: AcknowledgeType) -> Set {
        let slot = &self.slots[index];
        let mut state = Slot::load(slot);
        loop {
            match state {
                Slot::Superseded => return Set::Superseded,
                s if !s.is_live() => return Set::NotHeld,
                Slot::Acked(a) if a == ack => return Set::Done,
                _ => {}
            }
            match Slot::swap(slot, state, Slot::Acked(ack), true) {
                Ok(()) => return Set::Done,
                Err(now) => state = now,
            }
        }
    }

    /// The index of the live slot of this offset, if this batch has it.
    pub(super) fn find(&self, topic: &str, partition: i32, offset: i64) -> Option<usize> {
        self.runs.iter().filter(|r| r.partition == partition && &*r.topic == topic).find_map(|r| {
            let i = r.start + self.offsets[r.start..r.end].binary_search(&offset).ok()?;
            Slot::load(&self.slots[i]).is_live().then_some(i)
        })
    }

    /// Keeps a copy of record `index` for its renewal: called before its slot is set to RENEW,
    /// so that `take` always finds it.
    pub(super) fn keep_for_renewal(&self, index: usize, record: &ConsumerRecord) {
        self.renewals.lock().unwrap_or_else(|p| p.into_inner()).push((index, record.clone()));
    }

    /// The copy of record `index` kept for its renewal (the newest, if it was renewed twice).
    fn renewal_copy(&self, index: usize) -> Option<ConsumerRecord> {
        let kept = self.renewals.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter().rev().find(|(i, _)| *i == index).map(|(_, r)| r.clone())
    }

    /// Acknowledges with `ack` every record not acknowledged yet; returns how many.
    pub(super) fn acknowledge_unacknowledged(&self, ack: AcknowledgeType) -> usize {
        self.slots.iter().filter(|s| Slot::swap(s, Slot::Unacked, Slot::Acked(ack), false).is_ok()).count()
    }

    /// How many records are not acknowledged at all (RENEW counts as acknowledged).
    pub(super) fn unacknowledged(&self) -> usize {
        self.slots.iter().filter(|s| Slot::load(s) == Slot::Unacked).count()
    }

    /// Takes the acknowledgements out of the slots as ack entries (see `take_acks`), and the
    /// renewed records into `renewing`; returns whether the batch still holds records.
    pub(super) fn take(&self, unacked: Unacked, out: &mut Vec<AckEntry>, renewing: &mut Vec<Delivered>) -> bool {
        let mut held = false;
        for run in &self.runs {
            for i in run.start..run.end {
                let slot = &self.slots[i];
                let mut state = Slot::load(slot);
                loop {
                    let ack = match (state, unacked) {
                        (Slot::Sent | Slot::Superseded, _) => break,
                        (Slot::Unacked, Unacked::Keep) => {
                            held = true;
                            break;
                        }
                        (Slot::Unacked, Unacked::Accept) => AcknowledgeType::Accept,
                        (Slot::Unacked, Unacked::ReleaseAll) => AcknowledgeType::Release,
                        (Slot::Acked(ack), _) => ack,
                    };
                    // An acknowledgement may land between the load and here: then look again.
                    match Slot::swap(slot, state, Slot::Sent, true) {
                        Ok(()) => {
                            out.push(AckEntry {
                                tp: run.tp,
                                offset: self.offsets[i],
                                delivery_count: self.delivery_counts[i],
                                lock_deadline: run.lock_deadline,
                                kind: AckKind::of(ack),
                                node: run.node,
                                generation: run.generation,
                                len: 1,
                            });
                            if ack == AcknowledgeType::Renew && unacked != Unacked::ReleaseAll {
                                // The record comes back from a poll once the broker renewed it.
                                if let Some(record) = self.renewal_copy(i) {
                                    renewing.push(Delivered {
                                        record,
                                        tp: run.tp,
                                        node: run.node,
                                        generation: run.generation,
                                        // Renewed alone: its own batch as far as
                                        // acknowledging it goes.
                                        batch: (self.offsets[i], self.offsets[i]),
                                    });
                                }
                            }
                            break;
                        }
                        Err(now) => state = now,
                    }
                }
            }
        }
        held
    }
}

/// Marks SUPERSEDED the live slots, in `held` or earlier in `new`, of offsets that `new`
/// delivers (again): the newer delivery is the one held, as when a map by offset overwrote
/// the entry. It happens only when a lock expired while the record was still held, so the
/// work is in finding that nothing overlaps: runs are grouped by partition (a sort of the
/// runs, not of the records), and only runs of one partition with overlapping offsets are
/// looked into.
pub(super) fn supersede(held: &[Arc<PollBatch>], new: &PollBatch) {
    if held.is_empty() && new.runs.len() < 2 {
        return;
    }
    let batch = |pos: usize| held.get(pos).map_or(new, |b| &**b);
    let newest = held.len();
    // (partition, topic, batch position, run index): sorted, older runs come first in a group.
    let mut runs: Vec<(i32, &str, usize, usize)> = (0..=newest)
        .flat_map(|pos| batch(pos).runs.iter().enumerate().map(move |(i, r)| (r.partition, &*r.topic, pos, i)))
        .collect();
    runs.sort_unstable();
    for group in runs.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
        for (j, &(_, _, pos, i)) in group.iter().enumerate() {
            if pos != newest {
                continue;
            }
            let newer = &new.runs[i];
            let newer_offsets = &new.offsets[newer.start..newer.end];
            let (first, last) = (newer_offsets[0], newer_offsets[newer_offsets.len() - 1]);
            for &(_, _, old_pos, old_i) in &group[..j] {
                let old = batch(old_pos);
                let run = &old.runs[old_i];
                if old.offsets[run.start] > last || old.offsets[run.end - 1] < first {
                    continue;
                }
                for k in run.start..run.end {
                    let slot = &old.slots[k];
                    if Slot::load(slot).is_live() && newer_offsets.binary_search(&old.offsets[k]).is_ok() {
                        // Under the lock a live slot can only change to another live state
                        // (an acknowledgement), which the old map's overwrite lost as well.
                        slot.store(Slot::Superseded.pack(), Ordering::Release);
                    }
                }
            }
        }
    }
}

/// The handle's bookkeeping between polls, without IO: the batches of records handed out and
/// not acknowledged-and-sent yet, and the renewed records waiting for the broker's answer.
/// `ShareConsumer` keeps one under its lock; the simulation's application
/// (`src/sim/handle_app.rs`) drives one the same way, so the simulation runs this code and
/// not a copy of it.
#[derive(Default)]
pub(crate) struct Held {
    /// The batches of the polls whose records are not all acknowledged-and-sent yet, oldest
    /// first (see [`PollBatch`]). Usually none or one: a poll or commit takes every ack, and a
    /// batch goes once all of its records are finally acknowledged.
    pub(super) batches: Vec<Arc<PollBatch>>,
    /// Records whose RENEW was sent, waiting for the broker's answer: a poll returns each
    /// again once renewed (see `PollBatch::take`). While any wait, polls hand out nothing else.
    pub(super) renewing: Vec<Delivered>,
}

impl Held {
    /// What a poll does before it asks the driver: in explicit mode, refuses while records
    /// are not acknowledged; takes the acknowledgements (implicit mode: accepting every
    /// record); says whether renewals are pending (the poll then waits for them).
    pub(crate) fn start_poll(&mut self, mode: AcknowledgementMode) -> Result<(Vec<AckEntry>, bool)> {
        if mode == AcknowledgementMode::Explicit {
            let pending = self.unacknowledged();
            if pending > 0 {
                return Err(Error::UnacknowledgedRecords { count: pending });
            }
        }
        let acks = self.take_acks(Unacked::on_poll(mode));
        Ok((acks, !self.renewing.is_empty()))
    }

    /// How many records held are not acknowledged at all (RENEW counts as acknowledged).
    pub(crate) fn unacknowledged(&self) -> usize {
        self.batches.iter().map(|b| b.unacknowledged()).sum()
    }

    /// Takes every acknowledged record out of the held set as ack entries. Unacknowledged
    /// ones get accepted or released (`unacked`), or stay held. Renewed records wait in
    /// `renewing` for their renewal's outcome (on close they are let go: the session's close
    /// releases them).
    pub(crate) fn take_acks(&mut self, unacked: Unacked) -> Vec<AckEntry> {
        let mut out = Vec::new();
        let mut renewing = std::mem::take(&mut self.renewing);
        self.batches.retain(|b| b.take(unacked, &mut out, &mut renewing));
        if unacked == Unacked::ReleaseAll {
            renewing.clear();
        }
        self.renewing = renewing;
        out
    }

    /// Holds and returns a poll's records: the renewed ones first (a record whose renewal
    /// failed is not returned: its lock is gone, and the callback and commit results say
    /// why), then the new ones. `owner` is the consumer's id (see [`PollBatch::owner`]).
    pub(crate) fn hand_out(&mut self, owner: u64, answer: PollAnswer) -> Vec<ConsumerRecord> {
        if answer.renewed.is_empty() {
            // The usual case: no copy of the records.
            return self.hold(owner, answer.records);
        }
        let mut delivered = Vec::with_capacity(answer.records.len() + answer.renewed.len());
        for r in answer.renewed {
            let Some(pos) = self.renewing.iter().position(|d| d.tp == r.tp && d.record.offset == r.offset) else {
                continue;
            };
            let mut d = self.renewing.swap_remove(pos);
            if r.result.is_ok() {
                d.record.lock_deadline = r.lock_deadline.or(d.record.lock_deadline);
                delivered.push(d);
            }
        }
        delivered.extend(answer.records);
        self.hold(owner, delivered)
    }

    /// Holds a poll's records: makes their batch, points each record at its slot.
    pub(super) fn hold(&mut self, owner: u64, delivered: Vec<Delivered>) -> Vec<ConsumerRecord> {
        if delivered.is_empty() {
            return Vec::new();
        }
        let batch = Arc::new(PollBatch::new(owner, &delivered));
        supersede(&self.batches, &batch);
        let out = delivered
            .into_iter()
            .enumerate()
            .map(|(index, d)| ConsumerRecord { ack_slot: Some(AckSlot { batch: batch.clone(), index }), ..d.record })
            .collect();
        self.batches.push(batch);
        out
    }

    /// Acknowledges the record held at these coordinates, if any: the newest delivery of the
    /// offset. The slow path (a scan of the held batches: few, usually the last poll's); the
    /// caller holds the consumer's lock, so no slot is taken or superseded meanwhile.
    pub(crate) fn acknowledge_at(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        ack_type: AcknowledgeType,
    ) -> Result<()> {
        let set = self.batches.iter().rev().find_map(|b| b.find(topic, partition, offset).map(|i| b.set(i, ack_type)));
        match set {
            Some(Set::Done) => Ok(()),
            // (`find` found a live slot, and under the lock it stays live: NotHeld and
            // Superseded cannot be.)
            None | Some(Set::NotHeld | Set::Superseded) => Err(Error::InvalidArgument(format!(
                "{topic}-{partition} offset {offset} is not held by this consumer (never delivered to it, or already acknowledged and sent)"
            ))),
        }
    }

    /// Acknowledges with `ack_type` every record held and not acknowledged yet; returns how
    /// many.
    pub(crate) fn acknowledge_unacknowledged(&self, ack_type: AcknowledgeType) -> usize {
        self.batches.iter().map(|b| b.acknowledge_unacknowledged(ack_type)).sum()
    }
}

/// Acknowledges `record` through its slot, if it is a record of consumer `owner`: one
/// compare-and-swap, no lock. It decides only while the slot is live (held, not yet taken for
/// sending): then that slot is the one the consumer holds for the record's offset. A delivery
/// superseded by a newer one of the same offset (its lock expired, the broker delivered it
/// again) is refused: the acknowledgement would land on the newer delivery, which the
/// application has not processed; so is one already sent. None for a record without a slot of
/// this consumer (another consumer's, or built by hand): the caller looks it up by its
/// coordinates ([`Held::acknowledge_at`]).
#[inline]
pub(crate) fn acknowledge_in_slot(
    owner: u64,
    record: &ConsumerRecord,
    ack_type: AcknowledgeType,
) -> Option<Result<()>> {
    let slot = record.ack_slot.as_ref().filter(|s| s.batch.owner == owner)?;
    if ack_type == AcknowledgeType::Renew {
        // Before the slot says RENEW, so that `take` finds the copy to hand out again.
        slot.batch.keep_for_renewal(slot.index, record);
    }
    Some(match slot.batch.set(slot.index, ack_type) {
        Set::Done => Ok(()),
        Set::Superseded => Err(superseded(record)),
        Set::NotHeld => Err(already_sent(&record.topic, record.partition, record.offset)),
    })
}

/// The error for acknowledging a delivery whose lock expired and that was delivered again.
pub(super) fn superseded(record: &ConsumerRecord) -> Error {
    Error::LockExpired {
        topic: record.topic.to_string(),
        partition: record.partition,
        offset: record.offset,
        delivery_count: record.delivery_count,
        redelivered: true,
    }
}

/// The error for acknowledging a record whose acknowledgement was already sent.
pub(super) fn already_sent(topic: &str, partition: i32, offset: i64) -> Error {
    Error::AlreadyAcknowledged { topic: topic.to_string(), partition, offset }
}

#[cfg(test)]
mod tests;
