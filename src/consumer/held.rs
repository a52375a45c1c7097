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
                            });
                            if ack == AcknowledgeType::Renew && unacked != Unacked::ReleaseAll {
                                // The record comes back from a poll once the broker renewed it.
                                if let Some(record) = self.renewal_copy(i) {
                                    renewing.push(Delivered {
                                        record,
                                        tp: run.tp,
                                        node: run.node,
                                        generation: run.generation,
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
                return Err(Error::InvalidState(format!(
                    "{pending} records of the last poll are not acknowledged; in explicit mode acknowledge every record (ACCEPT, RELEASE or REJECT) before polling again"
                )));
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
        Set::NotHeld => Err(already_sent(record.topic(), record.partition, record.offset)),
    })
}

/// The error for acknowledging a delivery whose lock expired and that was delivered again.
pub(super) fn superseded(record: &ConsumerRecord) -> Error {
    Error::LockExpired {
        topic: record.topic().to_string(),
        partition: record.partition,
        offset: record.offset,
        delivery_count: record.delivery_count,
        redelivered: true,
    }
}

/// The error for acknowledging a record whose acknowledgement was already sent.
pub(super) fn already_sent(topic: &str, partition: i32, offset: i64) -> Error {
    Error::InvalidState(format!(
        "{topic}-{partition} offset {offset} was already acknowledged and the acknowledgement sent (by a poll, commit or close): it can no longer change. A renewed record comes back from a later poll: acknowledge that one"
    ))
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    fn consumer(mode: AcknowledgementMode) -> (ShareConsumer, mpsc::UnboundedReceiver<Command>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::new(true, None));
        let cfg = ShareConsumerConfig::new("127.0.0.1:9092", "g").acknowledgement_mode(mode);
        (ShareConsumer::new(tx, shared, cfg), rx)
    }

    fn tp(partition: i32) -> TopicIdPartition {
        TopicIdPartition { topic_id: uuid::Uuid::from_u128(7), partition }
    }

    /// Records of topic "t" as a poll hands them out: (partition, offset), from node 1.
    fn deliver(c: &ShareConsumer, records: &[(i32, i64)]) -> Vec<ConsumerRecord> {
        let topic: Arc<str> = Arc::from("t");
        let delivered = records
            .iter()
            .map(|&(partition, offset)| Delivered {
                record: ConsumerRecord::for_test(topic.clone(), partition, offset),
                tp: tp(partition),
                node: 1,
                generation: 0,
            })
            .collect();
        c.lock().held.hold(c.id, delivered)
    }

    fn take(c: &ShareConsumer, unacked: Unacked) -> Vec<(i32, i64, i8)> {
        c.lock().held.take_acks(unacked).iter().map(|a| (a.tp.partition, a.offset, a.kind.wire())).collect()
    }

    fn pending(c: &ShareConsumer) -> usize {
        c.lock().held.unacknowledged()
    }

    const ACCEPT: i8 = AcknowledgeType::Accept.wire();
    const RELEASE: i8 = AcknowledgeType::Release.wire();
    const REJECT: i8 = AcknowledgeType::Reject.wire();
    const RENEW_WIRE: i8 = AcknowledgeType::Renew.wire();

    #[test]
    fn acks_are_taken_in_delivery_order_and_then_no_longer_held() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let recs = deliver(&c, &[(0, 5), (0, 6), (1, 3), (0, 7)]);
        assert_eq!(pending(&c), 4);
        c.acknowledge(&recs[1]).unwrap();
        c.acknowledge_with(&recs[2], AcknowledgeType::Reject).unwrap();
        c.acknowledge_offset("t", 0, 7, AcknowledgeType::Release).unwrap();
        assert_eq!(pending(&c), 1);
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 6, ACCEPT), (1, 3, REJECT), (0, 7, RELEASE)]);
        assert_eq!(c.lock().held.batches.len(), 1, "offset 5 is still held");
        let e = c.acknowledge(&recs[1]).unwrap_err();
        assert!(e.to_string().contains("t-0 offset 6 was already acknowledged and the acknowledgement sent"), "{e}");
        let e = c.acknowledge_offset("t", 1, 3, AcknowledgeType::Accept).unwrap_err();
        assert!(e.to_string().contains("not held"), "{e}");
        c.acknowledge(&recs[0].clone()).unwrap();
        assert_eq!(pending(&c), 0);
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 5, ACCEPT)]);
        assert!(c.lock().held.batches.is_empty(), "the batch goes once everything in it is sent");
        assert!(take(&c, Unacked::Keep).is_empty());
    }

    #[test]
    fn the_last_acknowledgement_wins_until_sent_then_none_changes_it() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let recs = deliver(&c, &[(0, 1), (0, 2)]);
        c.acknowledge(&recs[0]).unwrap();
        c.acknowledge(&recs[0]).unwrap(); // the same again is fine
        c.acknowledge_with(&recs[0], AcknowledgeType::Release).unwrap(); // as in Java: last wins
        c.acknowledge_offset("t", 0, 1, AcknowledgeType::Reject).unwrap();
        c.acknowledge_with(&recs[1], AcknowledgeType::Renew).unwrap();
        c.acknowledge_with(&recs[1], AcknowledgeType::Accept).unwrap(); // a renewal too
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, REJECT), (0, 2, ACCEPT)]);
        assert!(c.lock().held.renewing.is_empty(), "the RENEW was replaced before it was sent");
        for e in
            [c.acknowledge(&recs[0]).unwrap_err(), c.acknowledge_with(&recs[1], AcknowledgeType::Renew).unwrap_err()]
        {
            assert!(
                matches!(&e, Error::InvalidState(m) if m.contains("already acknowledged and the acknowledgement sent")),
                "{e}"
            );
        }
        let e = c.acknowledge_offset("t", 0, 1, AcknowledgeType::Accept).unwrap_err();
        assert!(e.to_string().contains("not held"), "{e}");
    }

    #[test]
    fn a_renewed_record_waits_for_its_renewal_and_then_comes_back() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let recs = deliver(&c, &[(0, 1), (0, 2)]);
        c.acknowledge_with(&recs[0], AcknowledgeType::Renew).unwrap();
        c.acknowledge(&recs[1]).unwrap();
        assert_eq!(pending(&c), 0, "a renewal counts as acknowledged");
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, RENEW_WIRE), (0, 2, ACCEPT)]);
        assert_eq!(pending(&c), 0);
        assert!(c.lock().held.batches.is_empty(), "the renewed record is not held by its old batch");
        assert_eq!(c.lock().held.renewing.iter().map(|d| d.record.offset).collect::<Vec<_>>(), vec![1]);
        // The broker renewed it: the next poll returns it again, held anew.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let answer = driver::PollAnswer {
            records: Vec::new(),
            renewed: vec![driver::Renewed { tp: tp(0), offset: 1, result: Ok(()), lock_deadline: Some(deadline) }],
        };
        let again = c.hand_out(answer);
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].offset, again[0].lock_deadline), (1, Some(deadline)));
        assert!(c.lock().held.renewing.is_empty());
        assert_eq!(pending(&c), 1, "the returned record must be acknowledged again");
        c.acknowledge(&again[0]).unwrap();
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, ACCEPT)]);
        // RENEW needs the record: by coordinates it is refused.
        let recs = deliver(&c, &[(0, 3)]);
        let e = c.acknowledge_offset("t", 0, 3, AcknowledgeType::Renew).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("acknowledge_with")), "{e}");
        // A renewal that failed: the record is not returned.
        c.acknowledge_with(&recs[0], AcknowledgeType::Renew).unwrap();
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 3, RENEW_WIRE)]);
        let answer = driver::PollAnswer {
            records: Vec::new(),
            renewed: vec![driver::Renewed { tp: tp(0), offset: 3, result: Err(Error::Closed), lock_deadline: None }],
        };
        assert!(c.hand_out(answer).is_empty());
        assert!(c.lock().held.renewing.is_empty());
    }

    #[test]
    fn implicit_mode_accepts_everything_and_refuses_acknowledge() {
        let (c, _rx) = consumer(AcknowledgementMode::Implicit);
        let recs = deliver(&c, &[(0, 1), (2, 9)]);
        assert!(matches!(c.acknowledge(&recs[0]), Err(Error::InvalidState(_))));
        assert!(matches!(c.acknowledge_offset("t", 0, 1, AcknowledgeType::Accept), Err(Error::InvalidState(_))));
        assert_eq!(take(&c, c.unacknowledged_on_poll()), vec![(0, 1, ACCEPT), (2, 9, ACCEPT)]);
        assert!(c.lock().held.batches.is_empty());
    }

    #[test]
    fn renew_needs_broker_support() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        c.shared.renew_supported.store(false, Ordering::Relaxed);
        let recs = deliver(&c, &[(0, 1)]);
        assert!(matches!(c.acknowledge_with(&recs[0], AcknowledgeType::Renew), Err(Error::InvalidArgument(_))));
        c.acknowledge(&recs[0]).unwrap();
    }

    #[test]
    fn close_releases_the_rest_and_then_acknowledge_says_closed() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let recs = deliver(&c, &[(0, 1), (0, 2), (0, 3)]);
        c.acknowledge_with(&recs[0], AcknowledgeType::Renew).unwrap();
        c.acknowledge(&recs[2]).unwrap();
        let acks = {
            let mut local = c.lock();
            c.closed.store(true, Ordering::Release);
            local.held.take_acks(Unacked::ReleaseAll)
        };
        let acks: Vec<_> = acks.iter().map(|a| (a.offset, a.kind.wire())).collect();
        assert_eq!(acks, vec![(1, RENEW_WIRE), (2, RELEASE), (3, ACCEPT)]);
        assert!(c.lock().held.batches.is_empty());
        assert!(matches!(c.acknowledge(&recs[1]), Err(Error::Closed)));
        assert!(matches!(c.acknowledge_offset("t", 0, 1, AcknowledgeType::Accept), Err(Error::Closed)));
    }

    #[test]
    fn a_record_of_another_consumer_is_not_held_by_this_one() {
        let (a, _rxa) = consumer(AcknowledgementMode::Explicit);
        let (b, _rxb) = consumer(AcknowledgementMode::Explicit);
        let from_a = deliver(&a, &[(0, 1), (0, 2)]);
        let e = b.acknowledge(&from_a[0]).unwrap_err();
        assert!(e.to_string().contains("not held by this consumer"), "{e}");
        assert_eq!(pending(&a), 2, "a's slots are untouched");
        // As before, by its coordinates: when b holds the same offset, that is what it acks.
        let _from_b = deliver(&b, &[(0, 2)]);
        b.acknowledge(&from_a[1]).unwrap();
        assert_eq!(pending(&b), 0);
        assert_eq!(pending(&a), 2);
        // And a record without a slot (built by hand) goes by its coordinates too.
        let mut bare = from_a[0].clone();
        bare.ack_slot = None;
        a.acknowledge(&bare).unwrap();
        assert_eq!(pending(&a), 1);
    }

    #[test]
    fn a_record_delivered_again_while_held_is_held_once_by_its_newest_delivery() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let first = deliver(&c, &[(0, 1), (0, 2), (1, 1)]);
        c.acknowledge(&first[1]).unwrap();
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 2, ACCEPT)]);
        // The lock of t-0@1 expired while it was held: it comes again, along with new offsets.
        let second = deliver(&c, &[(0, 0), (0, 1), (0, 3)]);
        assert_eq!(pending(&c), 4, "t-0@1 counts once, t-1@1 is still held");
        // Through the old record, the acknowledgement is refused: it would land on the newer
        // delivery, which the application has not processed.
        let e = c.acknowledge(&first[0]).unwrap_err();
        assert!(matches!(e, Error::LockExpired { offset: 1, redelivered: true, .. }), "{e}");
        assert_eq!(e.code(), Some(crate::error::ErrorCode::INVALID_RECORD_STATE));
        c.acknowledge_with(&second[1], AcknowledgeType::Release).unwrap();
        c.acknowledge(&second[1]).unwrap();
        c.acknowledge(&second[0]).unwrap();
        c.acknowledge(&second[2]).unwrap();
        c.acknowledge(&first[2]).unwrap();
        assert_eq!(pending(&c), 0);
        assert_eq!(take(&c, Unacked::Keep), vec![(1, 1, ACCEPT), (0, 0, ACCEPT), (0, 1, ACCEPT), (0, 3, ACCEPT)]);
        assert!(c.lock().held.batches.is_empty());
    }

    #[test]
    fn runs_split_where_offsets_do_not_ascend() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        // The same offset twice in one poll: the later delivery is the one held.
        let recs = deliver(&c, &[(0, 4), (0, 5), (0, 5), (0, 6)]);
        assert_eq!(c.lock().held.batches[0].runs.len(), 2);
        assert_eq!(pending(&c), 3);
        c.acknowledge_offset("t", 0, 5, AcknowledgeType::Reject).unwrap();
        let e = c.acknowledge(&recs[1]).unwrap_err();
        assert!(matches!(e, Error::LockExpired { offset: 5, .. }), "the earlier delivery is superseded: {e}");
        c.acknowledge(&recs[0]).unwrap();
        c.acknowledge(&recs[3]).unwrap();
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 4, ACCEPT), (0, 5, REJECT), (0, 6, ACCEPT)]);
    }

    #[test]
    fn acknowledgements_racing_with_takes_are_each_sent_once() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let records: Vec<(i32, i64)> = (0..4).flat_map(|p| (0..2_000).map(move |o| (p, o))).collect();
        let recs = deliver(&c, &records);
        let mut sent = Vec::new();
        std::thread::scope(|s| {
            for chunk in recs.chunks(recs.len() / 4) {
                let c = &c;
                s.spawn(move || {
                    for r in chunk {
                        c.acknowledge(r).unwrap();
                    }
                });
            }
            while sent.len() < records.len() {
                sent.extend(take(&c, Unacked::Keep));
                std::thread::yield_now();
            }
        });
        assert!(sent.iter().all(|a| a.2 == ACCEPT));
        let mut got: Vec<(i32, i64)> = sent.iter().map(|a| (a.0, a.1)).collect();
        got.sort_unstable();
        assert_eq!(got, records, "each record exactly once");
        assert!(c.lock().held.batches.is_empty());
    }

    #[test]
    fn a_poll_refuses_unacknowledged_records_in_explicit_mode_and_accepts_them_in_implicit() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let recs = deliver(&c, &[(0, 1), (0, 2)]);
        c.acknowledge(&recs[0]).unwrap();
        let e = c.lock().held.start_poll(AcknowledgementMode::Explicit).unwrap_err();
        assert!(matches!(&e, Error::InvalidState(m) if m.starts_with("1 records of the last poll")), "{e}");
        c.acknowledge_with(&recs[1], AcknowledgeType::Renew).unwrap();
        let (acks, renewing) = c.lock().held.start_poll(AcknowledgementMode::Explicit).unwrap();
        assert_eq!(
            acks.iter().map(|a| (a.offset, a.kind.wire())).collect::<Vec<_>>(),
            vec![(1, ACCEPT), (2, RENEW_WIRE)]
        );
        assert!(renewing, "the next poll waits for the renewal");
        let (c, _rx) = consumer(AcknowledgementMode::Implicit);
        deliver(&c, &[(0, 1), (0, 2)]);
        let (acks, renewing) = c.lock().held.start_poll(AcknowledgementMode::Implicit).unwrap();
        assert_eq!(acks.iter().map(|a| (a.offset, a.kind.wire())).collect::<Vec<_>>(), vec![(1, ACCEPT), (2, ACCEPT)]);
        assert!(!renewing);
    }

    #[test]
    fn close_in_implicit_mode_releases_what_the_last_poll_handed_out() {
        // LANDSCAPE bug 6: the application's processing of these failed, or never ran; a
        // close that accepted them would lose them. Only a poll or commit accepts.
        let (c, _rx) = consumer(AcknowledgementMode::Implicit);
        deliver(&c, &[(0, 1), (1, 5)]);
        let acks: Vec<_> =
            c.lock().held.take_acks(Unacked::ReleaseAll).iter().map(|a| (a.offset, a.kind.wire())).collect();
        assert_eq!(acks, vec![(1, RELEASE), (5, RELEASE)]);
        assert!(c.lock().held.batches.is_empty());
    }

    #[test]
    fn a_late_acknowledgement_of_a_record_delivered_again_is_refused_and_leaves_the_new_delivery_alone() {
        // LANDSCAPE bug 9: a record recycled (delivered again) while an old handle on it is
        // acknowledged. The old slot was sent: the acknowledgement must not reach the new one.
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let first = deliver(&c, &[(0, 1), (0, 2)]);
        c.acknowledge_with(&first[0], AcknowledgeType::Release).unwrap();
        c.acknowledge(&first[1]).unwrap();
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, RELEASE), (0, 2, ACCEPT)]);
        let again = deliver(&c, &[(0, 1)]);
        for kind in [AcknowledgeType::Accept, AcknowledgeType::Reject, AcknowledgeType::Release] {
            let e = c.acknowledge_with(&first[0], kind).unwrap_err();
            assert!(matches!(&e, Error::InvalidState(m) if m.contains("already acknowledged")), "{e}");
        }
        assert_eq!(pending(&c), 1, "the new delivery is untouched");
        assert!(take(&c, Unacked::Keep).is_empty());
        c.acknowledge(&again[0]).unwrap();
        assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, ACCEPT)]);
    }

    #[test]
    fn every_slot_reads_back_as_packed() {
        use AcknowledgeType::*;
        for slot in [
            Slot::Unacked,
            Slot::Acked(Accept),
            Slot::Acked(Release),
            Slot::Acked(Reject),
            Slot::Acked(Renew),
            Slot::Sent,
            Slot::Superseded,
        ] {
            assert_eq!(Slot::unpack(slot.pack()), slot);
        }
    }

    #[test]
    fn debug_leaves_the_slot_out() {
        let (c, _rx) = consumer(AcknowledgementMode::Explicit);
        let recs = deliver(&c, &[(0, 1)]);
        let s = format!("{:?}", recs[0]);
        assert!(s.starts_with("ConsumerRecord { topic: \"t\", partition: 0, offset: 1,"), "{s}");
        assert!(s.ends_with("lock_deadline: None }"), "{s}");
    }
}
