//! The records the engine holds: a poll answer's records stay in the vector the driver
//! handed over, shared, and cost no allocation or copy each.
//!
//! A poll's answer becomes one [`HeldBatch`] (`Arc<Block>`: the driver's `Vec<Delivered>`
//! as it came, and a [`RecordState`] per record beside it: two allocations per answer). The
//! ledger keeps the batch once (`Blocks`: a slab of the batches it holds records of, each
//! with its count of records not settled) and each entry names its record by (block,
//! index), so holding a record costs no reference count either. A handler call's
//! [`Delivery`](super::Delivery) shares the batch through a [`Held`] (one reference count
//! per delivery, the batch's). The batch is freed when its last record is settled and the
//! last delivery of it dropped: once per answer, on whichever thread that is.
//!
//! Before (issue 36, callgrind on the plain file sink, 3,070 instructions a record): one
//! `Arc<HeldRecord>` per record, the record moved into it, allocated on the engine's thread
//! and mostly freed on a handler's (~470 instructions a record in the allocator, the
//! engine's largest single cost); building a batch of moved records instead still cost
//! ~180 a record in moves.
//!
//! What a batch keeps alive: its records until the last of them is settled, so a record
//! that waits long (a retry backing off, a slow handler) keeps its batch-mates (~250 bytes
//! each) with it. Their keys and values were pinned anyway: they are slices of the fetch
//! answer's buffer, which lives as long as any record of it.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::dead_letter::Failure;
use crate::consumer::driver::Delivered;
use crate::consumer::ConsumerRecord;

/// What a handler may change or see change of a record it holds: the lock deadline (updated
/// in place on renewal) and why it dead-letters the record.
#[derive(Debug)]
pub(crate) struct RecordState {
    lock: Mutex<Option<Instant>>,
    /// Why the handler dead-letters it ([`super::Delivery::dead_letter`]), for the copy's
    /// headers.
    failure: Mutex<Option<Failure>>,
}

impl RecordState {
    fn new(lock: Option<Instant>) -> RecordState {
        RecordState { lock: Mutex::new(lock), failure: Mutex::new(None) }
    }

    pub(crate) fn set_lock(&self, deadline: Option<Instant>) {
        *self.lock.lock().unwrap_or_else(|p| p.into_inner()) = deadline;
    }

    pub(super) fn lock_deadline(&self) -> Option<Instant> {
        *self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set_failure(&self, failure: Failure) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure);
    }

    pub(super) fn take_failure(&self) -> Option<Failure> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// The records of one poll answer: the driver's own vector of them, kept as it came (no
/// record is moved), and each one's [`RecordState`] beside it.
#[derive(Debug)]
pub(crate) struct Block {
    pub(super) records: Vec<Delivered>,
    states: Box<[RecordState]>,
}

impl Block {
    pub(crate) fn new(records: Vec<Delivered>) -> HeldBatch {
        let states = records.iter().map(|d| RecordState::new(d.record.lock_deadline)).collect();
        Arc::new(Block { records, states })
    }
}

/// The records of one poll answer, shared by the ledger and the deliveries.
pub(crate) type HeldBatch = Arc<Block>;

/// One record of a [`HeldBatch`], as a [`super::Delivery`] holds it.
#[derive(Clone)]
pub(crate) struct Held {
    batch: HeldBatch,
    /// Always within `batch` (checked where it is made).
    index: usize,
}

impl Held {
    /// Record `index` of `batch`; None if it has no such record.
    pub(crate) fn new(batch: &HeldBatch, index: usize) -> Option<Held> {
        (index < batch.records.len() && index < batch.states.len()).then(|| Held { batch: Arc::clone(batch), index })
    }

    /// A record alone, in a batch of its own (the sink's batch handler tests).
    #[cfg(all(test, feature = "sink"))]
    pub(crate) fn one(record: ConsumerRecord) -> Held {
        let tp = crate::share::TopicIdPartition { topic_id: uuid::Uuid::nil(), partition: record.partition };
        let batch = (record.offset, record.offset);
        let d = Delivered { record, tp, node: 0, generation: 0, batch };
        Held { batch: Block::new(vec![d]), index: 0 }
    }

    pub(crate) fn record(&self) -> &ConsumerRecord {
        &self.batch.records[self.index].record
    }

    pub(crate) fn state(&self) -> &RecordState {
        &self.batch.states[self.index]
    }

    /// The record by value: a copy (its batch stays with the engine until it is settled;
    /// the copy shares the key and value buffers).
    pub(crate) fn into_record(self) -> ConsumerRecord {
        self.record().clone()
    }
}

// By hand: the derived form would print every record of the batch.
impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held").field("record", self.record()).field("state", self.state()).finish()
    }
}

/// The ledger's batches: a slab of the [`HeldBatch`]es it holds records of, each with its
/// count of records not yet settled (the batch is let go at zero).
#[derive(Default)]
pub(crate) struct Blocks {
    slots: Vec<Option<(HeldBatch, usize)>>,
    free: Vec<usize>,
}

impl Blocks {
    /// Holds `batch` until each of its records is settled; its slot.
    pub(crate) fn insert(&mut self, batch: HeldBatch) -> usize {
        let n = batch.records.len();
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some((batch, n));
                i
            }
            None => {
                self.slots.push(Some((batch, n)));
                self.slots.len() - 1
            }
        }
    }

    /// The state of record `index` of the batch in `slot`.
    pub(crate) fn state(&self, slot: usize, index: usize) -> Option<&RecordState> {
        self.slots.get(slot)?.as_ref()?.0.states.get(index)
    }

    /// A [`Held`] of record `index` of the batch in `slot`, for a delivery.
    pub(crate) fn held(&self, slot: usize, index: usize) -> Option<Held> {
        Held::new(&self.slots.get(slot)?.as_ref()?.0, index)
    }

    /// One record of the batch in `slot` is settled: the batch goes once all are.
    pub(crate) fn settled(&mut self, slot: usize) {
        let Some(s) = self.slots.get_mut(slot) else { return };
        let Some((_, left)) = s.as_mut() else { return };
        *left = left.saturating_sub(1);
        if *left == 0 {
            *s = None;
            self.free.push(slot);
        }
    }

    /// Batches held (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: i64) -> HeldBatch {
        let tp = crate::share::TopicIdPartition { topic_id: uuid::Uuid::nil(), partition: 0 };
        let records = (0..n)
            .map(|o| Delivered {
                record: ConsumerRecord::for_test("t".into(), 0, o),
                tp,
                node: 0,
                generation: 0,
                batch: (0, n - 1),
            })
            .collect();
        Block::new(records)
    }

    #[test]
    fn a_batch_goes_when_its_last_record_is_settled_and_its_slot_is_reused() {
        let mut b = Blocks::default();
        let first = b.insert(batch(2));
        let second = b.insert(batch(1));
        assert!(b.state(first, 1).is_some());
        let held = b.held(first, 0).expect("record 0");
        b.settled(first);
        assert_eq!(b.len(), 2, "one of its two records is still held");
        b.settled(first);
        assert_eq!(b.len(), 1);
        assert!(b.state(first, 1).is_none(), "let go");
        assert_eq!(held.record().offset, 0, "a delivery keeps its batch alive on its own");
        assert_eq!(b.insert(batch(1)), first, "the free slot is taken again");
        b.settled(second);
        b.settled(second); // a second settle of a slot let go is ignored
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn out_of_range_names_nothing() {
        let mut b = Blocks::default();
        let slot = b.insert(batch(2));
        assert!(b.state(slot, 2).is_none());
        assert!(b.held(slot, 2).is_none());
        assert!(b.held(slot + 1, 0).is_none());
        assert!(Held::new(&batch(1), 1).is_none());
        b.settled(slot + 7);
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn a_held_record_prints_itself_not_its_batch() {
        let held = Held::new(&batch(3), 1).expect("record 1");
        let printed = format!("{held:?}");
        assert!(printed.contains("offset: 1"), "{printed}");
        assert!(!printed.contains("offset: 2"), "{printed}");
    }
}
