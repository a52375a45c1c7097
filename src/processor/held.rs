//! The records the engine holds: one allocation per poll answer, not per record.
//!
//! A poll's records go into one [`HeldBatch`] (`Arc<[HeldRecord]>`); the ledger keeps the
//! batch once (`Blocks`: a slab of the batches it holds records of, each with its count of
//! records not settled) and each entry names its record by (block, index), so holding a
//! record costs no allocation and no reference count. A handler call's [`Delivery`]
//! (`super::Delivery`) shares the batch through a [`Held`] (one reference count per
//! delivery, the batch's, not the record's). The batch is freed when its last record is
//! settled and the last delivery of it dropped: the free happens once per answer, on
//! whichever thread that is.
//!
//! Before (issue 36, callgrind on the plain file sink): one `Arc<HeldRecord>` per record,
//! allocated on the engine's thread and mostly freed on a handler's, ~470 instructions a
//! record in the allocator, the engine's largest single cost.
//!
//! What a batch keeps alive: its records until the last of them is settled, so a record
//! that waits long (a retry backing off, a slow handler) keeps its batch-mates' `HeldRecord`s
//! (~200 bytes each) with it. Their keys and values were pinned anyway: they are slices of
//! the fetch answer's buffer, which lives as long as any record of it.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::dead_letter::Failure;
use crate::consumer::ConsumerRecord;

/// A record as the engine holds it, shared with the handler that runs it: handing it over
/// copies no record, and the lock deadline the handler sees is updated in place on renewal.
#[derive(Debug)]
pub(crate) struct HeldRecord {
    pub(super) record: ConsumerRecord,
    lock: Mutex<Option<Instant>>,
    /// Why the handler dead-letters it ([`super::Delivery::dead_letter`]), for the copy's
    /// headers.
    failure: Mutex<Option<Failure>>,
}

impl HeldRecord {
    pub(crate) fn new(record: ConsumerRecord) -> HeldRecord {
        let lock = Mutex::new(record.lock_deadline);
        HeldRecord { record, lock, failure: Mutex::new(None) }
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

/// The records of one poll answer, in one allocation.
pub(crate) type HeldBatch = Arc<[HeldRecord]>;

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
        (index < batch.len()).then(|| Held { batch: Arc::clone(batch), index })
    }

    /// A record alone, in a batch of its own.
    #[cfg(test)]
    pub(crate) fn one(record: ConsumerRecord) -> Held {
        Held { batch: Arc::new([HeldRecord::new(record)]), index: 0 }
    }

    pub(crate) fn get(&self) -> &HeldRecord {
        &self.batch[self.index]
    }

    /// The record by value: a copy (its batch stays with the engine until it is settled;
    /// the copy shares the key and value buffers).
    pub(crate) fn into_record(self) -> ConsumerRecord {
        self.get().record.clone()
    }
}

// By hand: the derived form would print every record of the batch.
impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
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
        let n = batch.len();
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

    /// Record `index` of the batch in `slot`.
    pub(crate) fn record(&self, slot: usize, index: usize) -> Option<&HeldRecord> {
        self.slots.get(slot)?.as_ref()?.0.get(index)
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
        (0..n).map(|o| HeldRecord::new(ConsumerRecord::for_test("t".into(), 0, o))).collect()
    }

    #[test]
    fn a_batch_goes_when_its_last_record_is_settled_and_its_slot_is_reused() {
        let mut b = Blocks::default();
        let first = b.insert(batch(2));
        let second = b.insert(batch(1));
        assert_eq!(b.record(first, 1).map(|h| h.record.offset), Some(1));
        let held = b.held(first, 0).expect("record 0");
        b.settled(first);
        assert_eq!(b.len(), 2, "one of its two records is still held");
        b.settled(first);
        assert_eq!(b.len(), 1);
        assert!(b.record(first, 1).is_none(), "let go");
        assert_eq!(held.get().record.offset, 0, "a delivery keeps its batch alive on its own");
        assert_eq!(b.insert(batch(1)), first, "the free slot is taken again");
        b.settled(second);
        b.settled(second); // a second settle of a slot let go is ignored
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn out_of_range_names_nothing() {
        let mut b = Blocks::default();
        let slot = b.insert(batch(2));
        assert!(b.record(slot, 2).is_none());
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
