//! Acknowledgements held until they cover a whole acquired batch, sans-IO.
//!
//! A broker keeps one state per in-flight batch (an acquired range, usually one log batch:
//! ~2,400 records of 100 bytes from a 256 KiB producer batch) until an acknowledgement covers
//! only part of it. Then it splits the batch into one state per offset, each with its own
//! lock timer, and every later acknowledgement of it costs a state change per offset. The
//! engine finishes records out of order and in handler-sized pieces (a sink task's `put` of
//! 500), so its acknowledgements, sent as they came, split nearly every batch: measured on
//! Kafka 4.4 with the file sink (6M records, 3 partitions), the broker spent 5.4 CPU s on
//! the stream where the plain consumer, whose acknowledgements cover whole batches, cost it
//! 2.8 s, and its ShareFetch round trip doubled (p50 1.8 ms against 0.9 ms).
//!
//! So an ACCEPT waits here until every offset of its batch is settled, then the batch's
//! acknowledgements leave together (one range on the wire). A wait is short and bounded:
//! - after [`HOLD`] the held ones leave anyway (the batch is then split on the broker, and
//!   later acknowledgements of it are not held): a record running long (a slow handler)
//!   never holds its batch-mates' acknowledgements, and with them the broker's window of
//!   acquirable records, longer than that;
//! - any other outcome (RELEASE, REJECT) leaves at once and takes the held ones with it: the
//!   batch splits anyway (mixed types), and a RELEASE is for other members, now;
//! - shutting down sends everything.
//!
//! Bookkeeping is per batch, not per record: a map of the batches the engine holds records
//! of (a handful per partition). Held acknowledgements are runs (`AckEntry::len`): a handler
//! call that accepts its records in offset order adds one run, and a batch that completes
//! leaves as its runs sorted and merged, usually one acknowledgement for the whole batch,
//! which the driver routes in one step.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::deadline::later;
use crate::consumer::driver::AckEntry;
use crate::share::acks::AckKind;
use crate::share::TopicIdPartition;

/// How long an ACCEPT may wait for the rest of its batch. Far above what a batch takes to
/// finish once its first records are done when handlers are quick (about a millisecond for
/// the file sink), and far below anything that matters to a lock or to a record that waits.
pub(crate) const HOLD: Duration = Duration::from_millis(5);

/// A batch is forgotten this long after it was first seen if some of its offsets never
/// reach the engine (gaps the driver acknowledged itself, records dropped for a lapsed lock).
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// An acquired batch: partition, session generation, first and last offset.
pub(crate) type Key = (TopicIdPartition, u64, i64, i64);

/// The batch of a record delivered from partition `tp` under session `generation`, acquired
/// in the range `batch` (`Delivered::batch`).
pub(crate) fn batch_key(tp: TopicIdPartition, generation: u64, batch: (i64, i64)) -> Key {
    (tp, generation, batch.0, batch.1)
}

#[derive(Debug)]
struct Batch {
    /// Offsets not yet settled.
    left: u64,
    /// ACCEPTs waiting for the rest, as runs (in the order they were settled).
    held: Vec<AckEntry>,
    /// When the first of them was held.
    since: Option<Instant>,
    /// Partly acknowledged on the broker already: nothing more to gain by holding.
    split: bool,
    seen: Instant,
}

#[derive(Debug, Default)]
pub(crate) struct WholeBatches {
    /// The batch used last, kept out of the map: records come and finish in runs of one
    /// batch, so most calls find it here without hashing.
    hot: Option<(Key, Batch)>,
    batches: HashMap<Key, Batch>,
}

impl WholeBatches {
    /// The batch `k`, made the hot one.
    fn get(&mut self, k: Key) -> Option<&mut Batch> {
        if self.hot.as_ref().is_none_or(|(h, _)| *h != k) {
            let b = self.batches.remove(&k)?;
            if let Some((hk, hb)) = self.hot.replace((k, b)) {
                self.batches.insert(hk, hb);
            }
        }
        self.hot.as_mut().map(|(_, b)| b)
    }

    /// A record reached the engine: its batch is tracked from its first record on.
    pub(crate) fn received(&mut self, k: Key, now: Instant) {
        if self.get(k).is_some() {
            return;
        }
        let (first, last) = (k.2, k.3);
        let b = Batch {
            left: last.abs_diff(first).saturating_add(1),
            held: Vec::new(),
            since: None,
            split: last < first,
            seen: now,
        };
        if let Some((hk, hb)) = self.hot.replace((k, b)) {
            self.batches.insert(hk, hb);
        }
    }

    /// The final outcome of a record or a run of them (`AckEntry::len`): its acknowledgement
    /// goes to `out` now, or is held until its batch is complete (then the whole batch's go).
    pub(crate) fn settled(&mut self, k: Key, ack: AckEntry, now: Instant, out: &mut Vec<AckEntry>) {
        let Some(b) = self.get(k) else {
            AckEntry::push_into(out, ack);
            return;
        };
        b.left = b.left.saturating_sub(u64::from(ack.len.max(1)));
        if b.split || ack.kind != AckKind::Accept {
            b.split = true;
            out.append(&mut b.held);
            b.since = None;
            AckEntry::push_into(out, ack);
        } else {
            AckEntry::push_into(&mut b.held, ack);
            b.since.get_or_insert(now);
        }
        if b.left == 0 {
            if b.held.len() > 1 {
                // Handlers finish out of order: the runs, sorted, mostly make one.
                b.held.sort_unstable_by_key(|a| a.offset);
                b.held.dedup_by(|next, run| run.absorb(next));
            }
            if out.is_empty() {
                // The usual case (a batch completes, nothing else decided this step): the
                // held ones become the step's acknowledgements without a copy.
                std::mem::swap(out, &mut b.held);
            } else {
                out.append(&mut b.held);
            }
            self.hot = None; // `get` made it the hot one
        }
    }

    fn all(&mut self) -> impl Iterator<Item = &mut Batch> {
        self.hot.iter_mut().map(|(_, b)| b).chain(self.batches.values_mut())
    }

    /// Sends what has waited [`HOLD`], and forgets batches that will not complete.
    pub(crate) fn flush_due(&mut self, now: Instant, out: &mut Vec<AckEntry>) {
        for b in self.all() {
            if b.since.is_some_and(|t| now >= later(t, HOLD)) {
                b.split = true;
                b.since = None;
                out.append(&mut b.held);
            }
        }
        let keep = |b: &Batch| b.since.is_some() || now < later(b.seen, FORGET_AFTER);
        self.batches.retain(|_, b| keep(b));
        if self.hot.as_ref().is_some_and(|(_, b)| !keep(b)) {
            self.hot = None;
        }
    }

    /// Sends everything held (shutting down).
    pub(crate) fn flush_all(&mut self, out: &mut Vec<AckEntry>) {
        for b in self.all() {
            out.append(&mut b.held);
            b.since = None;
            b.split = true;
        }
    }

    /// When the oldest held acknowledgement must leave.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let hot = self.hot.iter().map(|(_, b)| b);
        hot.chain(self.batches.values()).filter_map(|b| b.since).min().map(|t| later(t, HOLD))
    }

    /// Acknowledgements held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.hot.iter().map(|(_, b)| b).chain(self.batches.values()).map(|b| b.held.len()).sum()
    }

    /// Batches tracked now.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.batches.len() + usize::from(self.hot.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> TopicIdPartition {
        TopicIdPartition { topic_id: uuid::Uuid::from_u128(9), partition: 0 }
    }

    /// The batch key of a record at `_offset` acquired in `batch` (the offset only reads
    /// well in the tests).
    fn delivered(_offset: i64, batch: (i64, i64)) -> Key {
        batch_key(tp(), 1, batch)
    }

    fn ack(offset: i64, kind: AckKind) -> AckEntry {
        AckEntry { tp: tp(), offset, delivery_count: 1, lock_deadline: None, kind, node: 1, generation: 1, len: 1 }
    }

    fn offsets(acks: &[AckEntry]) -> Vec<i64> {
        acks.iter().flat_map(|a| a.clone().singles()).map(|a| a.offset).collect()
    }

    #[test]
    fn a_batch_leaves_whole_once_its_last_offset_is_settled() {
        let t0 = Instant::now();
        let mut w = WholeBatches::default();
        let ds: Vec<Key> = (10..14).map(|o| delivered(o, (10, 13))).collect();
        for d in &ds {
            w.received(*d, t0);
        }
        let mut out = Vec::new();
        // Out of order, as handlers finish.
        for i in [2, 0, 3] {
            w.settled(ds[i], ack(10 + i as i64, AckKind::Accept), t0, &mut out);
        }
        assert!(out.is_empty(), "held while offset 11 is still running");
        assert_eq!(w.next_deadline(), Some(t0 + HOLD));
        w.settled(ds[1], ack(11, AckKind::Accept), t0, &mut out);
        let mut got = offsets(&out);
        got.sort_unstable();
        assert_eq!(got, vec![10, 11, 12, 13]);
        assert_eq!(w.held(), 0);
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn held_acks_leave_after_the_hold_and_the_batch_is_not_held_again() {
        let t0 = Instant::now();
        let mut w = WholeBatches::default();
        let ds: Vec<Key> = (0..3).map(|o| delivered(o, (0, 2))).collect();
        for d in &ds {
            w.received(*d, t0);
        }
        let mut out = Vec::new();
        w.settled(ds[0], ack(0, AckKind::Accept), t0, &mut out);
        w.flush_due(t0 + HOLD / 2, &mut out);
        assert!(out.is_empty());
        w.flush_due(t0 + HOLD, &mut out);
        assert_eq!(offsets(&out), vec![0], "a slow batch-mate does not hold it longer");
        out.clear();
        w.settled(ds[1], ack(1, AckKind::Accept), t0 + HOLD, &mut out);
        assert_eq!(offsets(&out), vec![1], "split on the broker already: sent at once");
    }

    #[test]
    fn a_release_goes_at_once_and_takes_the_held_ones_along() {
        let t0 = Instant::now();
        let mut w = WholeBatches::default();
        let ds: Vec<Key> = (0..3).map(|o| delivered(o, (0, 2))).collect();
        for d in &ds {
            w.received(*d, t0);
        }
        let mut out = Vec::new();
        w.settled(ds[0], ack(0, AckKind::Accept), t0, &mut out);
        w.settled(ds[2], ack(2, AckKind::Release), t0, &mut out);
        assert_eq!(offsets(&out), vec![0, 2]);
        assert_eq!(w.held(), 0);
    }

    #[test]
    fn a_record_of_an_unknown_batch_and_shutdown_send_everything() {
        let t0 = Instant::now();
        let mut w = WholeBatches::default();
        let mut out = Vec::new();
        w.settled(delivered(5, (0, 9)), ack(5, AckKind::Accept), t0, &mut out);
        assert_eq!(offsets(&out), vec![5], "never seen: nothing to wait for");
        out.clear();
        let d = delivered(20, (20, 29));
        w.received(d, t0);
        w.settled(d, ack(20, AckKind::Accept), t0, &mut out);
        assert!(out.is_empty());
        w.flush_all(&mut out);
        assert_eq!(offsets(&out), vec![20]);
    }

    #[test]
    fn interleaved_batches_are_each_held_until_whole() {
        let t0 = Instant::now();
        let mut w = WholeBatches::default();
        let a: Vec<Key> = (0..2).map(|o| delivered(o, (0, 1))).collect();
        let b: Vec<Key> = (2..4).map(|o| delivered(o, (2, 3))).collect();
        for d in a.iter().chain(&b) {
            w.received(*d, t0);
        }
        assert_eq!(w.tracked(), 2);
        let mut out = Vec::new();
        w.settled(a[0], ack(0, AckKind::Accept), t0, &mut out);
        w.settled(b[0], ack(2, AckKind::Accept), t0, &mut out);
        w.settled(a[1], ack(1, AckKind::Accept), t0, &mut out);
        assert_eq!(offsets(&out), vec![0, 1], "batch (0, 1) is whole; (2, 3) still waits");
        out.clear();
        w.settled(b[1], ack(3, AckKind::Accept), t0, &mut out);
        assert_eq!(offsets(&out), vec![2, 3]);
        assert_eq!(w.tracked(), 0);
    }

    #[test]
    fn batches_that_never_complete_are_forgotten() {
        let t0 = Instant::now();
        let mut w = WholeBatches::default();
        w.received(delivered(0, (0, 99)), t0);
        let mut out = Vec::new();
        w.flush_due(t0 + FORGET_AFTER, &mut out);
        assert_eq!(w.tracked(), 0);
        assert!(out.is_empty());
    }
}
