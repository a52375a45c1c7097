//! Acknowledgement types and the batches they travel in.
//!
//! Acks are gathered per partition as `offset -> type`, then sent as
//! `AcknowledgementBatches`: ascending, non-overlapping ranges of contiguous offsets, each with
//! either one type for the whole range (when every offset has the same type) or one type per
//! offset. That is the form the broker validates (KafkaApis.validateAcknowledgementBatches)
//! and the one the Java client builds.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::protocol::share::{AcknowledgementBatch, ACK_ACCEPT, ACK_GAP, ACK_REJECT, ACK_RELEASE, ACK_RENEW};

/// What to do with a delivered record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AcknowledgeType {
    /// Processed: never deliver it again.
    Accept,
    /// Not processed: make it available for redelivery (the delivery count goes up).
    Release,
    /// Unprocessable: never deliver it again (archived, or dead-lettered on 4.4 with a DLQ).
    Reject,
    /// Still working on it: extend the acquisition lock (brokers with ShareAcknowledge v2,
    /// Kafka 4.2+; on an older cluster the acknowledgement fails with
    /// [`Error::RenewUnsupported`]). The record stays held
    /// and must still be acknowledged later.
    Renew,
}

impl AcknowledgeType {
    /// The wire value (1 Accept, 2 Release, 3 Reject, 4 Renew).
    pub const fn wire(self) -> i8 {
        AckKind::of(self).wire()
    }

    /// Whether this type ends the consumer's hold on the record.
    pub fn is_final(self) -> bool {
        self != AcknowledgeType::Renew
    }
}

impl fmt::Display for AcknowledgeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AcknowledgeType::Accept => "ACCEPT",
            AcknowledgeType::Release => "RELEASE",
            AcknowledgeType::Reject => "REJECT",
            AcknowledgeType::Renew => "RENEW",
        })
    }
}

impl FromStr for AcknowledgeType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_uppercase().as_str() {
            "ACCEPT" => Ok(AcknowledgeType::Accept),
            "RELEASE" => Ok(AcknowledgeType::Release),
            "REJECT" => Ok(AcknowledgeType::Reject),
            "RENEW" => Ok(AcknowledgeType::Renew),
            _ => Err(Error::InvalidArgument(format!(
                "{s:?} is not an acknowledge type: use ACCEPT, RELEASE, REJECT or RENEW"
            ))),
        }
    }
}

/// An acknowledgement as it waits to be sent: one of the application's types, or one the
/// client decides itself: a Gap for an acquired offset with no record (compacted away, or an
/// aborted transaction's), or the release of a record it never handed out. The kind travels
/// with the ack from the queue to its completion, so who decided it is known there and no
/// table beside the queue has to remember it. The wire's `i8` appears only at the codec
/// boundary ([`PartitionAcks::to_batches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckKind {
    /// No record at an acquired offset.
    Gap,
    /// [`AcknowledgeType::Accept`].
    Accept,
    /// [`AcknowledgeType::Release`].
    Release,
    /// [`AcknowledgeType::Reject`].
    Reject,
    /// The one kind that travels in requests of its own (IsRenewAck).
    Renew,
    /// A RELEASE the client sends on its own for a record it acquired and never handed to the
    /// application (buffered when the application stopped polling or closed, or when the
    /// partition went; an acquired range it could not read). On the wire a RELEASE; its
    /// outcome is no acknowledgement of the application's, so the acknowledgement commit
    /// callback and commit results never hear of it ([`AckKind::is_reported`]).
    ReleaseUnseen,
}

impl AckKind {
    /// The kind of an application's acknowledgement.
    pub const fn of(ack: AcknowledgeType) -> AckKind {
        match ack {
            AcknowledgeType::Accept => AckKind::Accept,
            AcknowledgeType::Release => AckKind::Release,
            AcknowledgeType::Reject => AckKind::Reject,
            AcknowledgeType::Renew => AckKind::Renew,
        }
    }

    /// The wire value.
    pub const fn wire(self) -> i8 {
        match self {
            AckKind::Gap => ACK_GAP,
            AckKind::Accept => ACK_ACCEPT,
            AckKind::Release | AckKind::ReleaseUnseen => ACK_RELEASE,
            AckKind::Reject => ACK_REJECT,
            AckKind::Renew => ACK_RENEW,
        }
    }

    /// Whether the application is told the outcome of an ack of this kind (the
    /// acknowledgement commit callback, a commit's results): every ack of a record it was
    /// handed, and the client's acks of offsets it could never be handed (a Gap; a corrupt
    /// record's REJECT, which poll reports as an error). Never the client's release of a
    /// record it withheld: the application did not decide it, and Java never reports a
    /// record it did not deliver.
    pub const fn is_reported(self) -> bool {
        !matches!(self, AckKind::ReleaseUnseen)
    }
}

/// What an acknowledgement answer settles of one partition, by who decided it
/// ([`AckKind::is_reported`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// The offsets whose outcome the application is told, ascending.
    pub reported: Vec<i64>,
    /// The offsets the client released on its own, never having handed their records out
    /// (empty, and so never allocated, on the usual path), ascending.
    pub unseen: Vec<i64>,
}

impl Settled {
    /// Offsets all of whose acks are the application's (failures found before sending).
    pub fn reported(offsets: Vec<i64>) -> Settled {
        Settled { reported: offsets, unseen: Vec::new() }
    }

    /// Acks counted, whoever decided them.
    pub fn count(&self) -> usize {
        self.reported.len() + self.unseen.len()
    }

    /// The lowest offset settled, whoever decided it.
    pub fn first(&self) -> Option<i64> {
        match (self.reported.first(), self.unseen.first()) {
            (Some(&a), Some(&b)) => Some(a.min(b)),
            (a, b) => a.or(b).copied(),
        }
    }

    /// Takes in what `other` settles (of the same partition).
    pub fn merge(&mut self, other: Settled) {
        let sorted = |v: &mut Vec<i64>, more: Vec<i64>| {
            let ascending = v.last().zip(more.first()).is_none_or(|(a, b)| a < b);
            v.extend(more);
            if !ascending {
                v.sort_unstable();
            }
        };
        sorted(&mut self.reported, other.reported);
        sorted(&mut self.unseen, other.unseen);
    }

    fn add(&mut self, offset: i64, kind: AckKind) {
        if kind.is_reported() {
            self.reported.push(offset);
        } else {
            self.unseen.push(offset);
        }
    }
}

impl From<AcknowledgeType> for AckKind {
    fn from(ack: AcknowledgeType) -> AckKind {
        AckKind::of(ack)
    }
}

/// How far from the end of the runs an out-of-order ack may still go into them (rather than
/// become a stray): bounds the shifting it costs. Small in tests, so they take both ways.
const NEAR_RUNS: usize = if cfg!(test) { 2 } else { 32 };

/// Offsets `first..=last`, all acknowledged with one wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    first: i64,
    last: i64,
    ty: AckKind,
}

impl Run {
    /// Number of offsets. Saturates: only `i64::MIN..=i64::MAX` (2^64 offsets) does not fit.
    fn span(&self) -> u64 {
        self.last.abs_diff(self.first).saturating_add(1)
    }
}

/// Appends `run` to ascending runs, merging it into the last one when it continues it with
/// the same type: runs built this way are maximal, so a set of acks has one form.
fn append(runs: &mut Vec<Run>, run: Run) {
    match runs.last_mut() {
        Some(last) if last.ty == run.ty && last.last.checked_add(1) == Some(run.first) => last.last = run.last,
        _ => runs.push(run),
    }
}

/// Acks for one partition, waiting to be sent.
///
/// Acks mostly arrive in ascending order, often contiguous with one type, so they are kept as
/// ascending runs that such an ack extends in O(1), where a map paid an insert per record. An
/// ack a little out of order (a new offset among the last runs) still goes into the runs, for
/// a short shift. Any other ack at or below the end of the runs, overwrites included, is a
/// "stray": one map insert, overriding the runs at its offset. Acks in any order then cost
/// what the map of offsets did, never a long shift or a run split. Counters keep `len`,
/// `has_renew` and the usual `split_renew` free of scans.
#[derive(Debug, Clone, Default)]
pub struct PartitionAcks {
    /// Ascending, non-overlapping, maximal (see [`append`]).
    runs: Vec<Run>,
    /// Acks added out of order: each at or below the end of `runs`, and winning over it.
    strays: BTreeMap<i64, AckKind>,
    /// Distinct offsets held (saturating, see [`Run::span`]).
    len: u64,
    /// How many of them are Renews (saturating likewise).
    renews: u64,
}

// Equal when they hold the same acks, however they were added.
impl PartialEq for PartitionAcks {
    fn eq(&self, other: &Self) -> bool {
        self.canonical() == other.canonical()
    }
}

impl Eq for PartitionAcks {}

impl PartitionAcks {
    /// Records (or overwrites) the ack of one offset.
    pub fn add(&mut self, offset: i64, kind: AckKind) {
        self.add_range(offset, offset, kind);
    }

    /// Records an inclusive range of offsets with one kind.
    pub fn add_range(&mut self, first: i64, last: i64, kind: AckKind) {
        if first > last {
            return;
        }
        let run = Run { first, last, ty: kind };
        match self.runs.last() {
            // Past everything held (strays lie below the last run's end): the usual case.
            None => self.push(run),
            Some(tail) if first > tail.last => self.push(run),
            Some(_) if first == last => self.add_below(first, kind),
            // A range back over held offsets: rare, so simply rebuilt.
            Some(_) => *self = self.overwritten(run),
        }
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        // Strays only exist below a run.
        self.runs.is_empty()
    }

    /// Number of offsets.
    pub fn len(&self) -> usize {
        usize::try_from(self.len).unwrap_or(usize::MAX)
    }

    /// Whether any pending ack is a Renew.
    pub fn has_renew(&self) -> bool {
        self.renews > 0
    }

    /// Takes out the acks of one kind: renews (`true`) or everything else (`false`). Renews
    /// travel in requests of their own (IsRenewAck), so they are split off before sending.
    pub fn split_renew(&mut self, renew: bool) -> PartitionAcks {
        // All of one kind (the usual case): nothing to sort out. A saturated `len` could
        // equal `renews` without every offset being a Renew, hence the bound.
        let all_renew = self.renews == self.len && self.len < u64::MAX;
        if self.renews == 0 || all_renew {
            return if all_renew == renew { std::mem::take(self) } else { PartitionAcks::default() };
        }
        let (mut taken, mut kept) = (PartitionAcks::default(), PartitionAcks::default());
        for &run in self.canonical().iter() {
            // Ascending still, so both sides come out canonical.
            if (run.ty == AckKind::Renew) == renew {
                taken.push(run)
            } else {
                kept.push(run)
            }
        }
        *self = kept;
        taken
    }

    /// Takes out the acks of offsets `first..=last`; returns those offsets, ascending, with
    /// who decided them. Rare (a queued ack superseded by a redelivery of its record), so the
    /// rest is rebuilt.
    pub fn take_range(&mut self, first: i64, last: i64) -> Settled {
        let canonical = self.canonical().into_owned();
        let mut taken = Settled::default();
        if !canonical.iter().any(|r| r.first <= last && r.last >= first) {
            return taken;
        }
        let mut kept = PartitionAcks::default();
        for run in canonical {
            // Ascending: the parts before and after the range keep their order.
            if run.first < first {
                kept.push(Run { last: run.last.min(first - 1), ..run });
            }
            let (from, to) = (run.first.max(first), run.last.min(last));
            for o in from..=to {
                taken.add(o, run.ty);
            }
            if run.last > last {
                kept.push(Run { first: run.first.max(last + 1), ..run });
            }
        }
        *self = kept;
        taken
    }

    /// The offsets and kinds, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (i64, AckKind)> + '_ {
        self.canonical().into_owned().into_iter().flat_map(|r| (r.first..=r.last).map(move |o| (o, r.ty)))
    }

    /// What an answer to these acks settles: the offsets reported to the application,
    /// ascending, and the count of the client's own releases among them.
    pub fn settled(&self) -> Settled {
        let runs = self.canonical();
        let mut out = Settled::default();
        for run in runs.iter() {
            if run.ty.is_reported() {
                out.reported.extend(run.first..=run.last);
            } else {
                out.unseen.extend(run.first..=run.last);
            }
        }
        out
    }

    /// Builds wire batches: contiguous offsets merged; a run of one type collapses to one
    /// element; a mixed run carries one type per offset.
    pub fn to_batches(&self) -> Vec<AcknowledgementBatch> {
        let runs = self.canonical();
        let mut runs = runs.iter().copied().peekable();
        let mut out = Vec::new();
        while let Some(run) = runs.next() {
            let mut batch = AcknowledgementBatch {
                first_offset: run.first,
                last_offset: run.last,
                acknowledge_types: vec![run.ty.wire()],
            };
            // Touching runs differ in type (they are maximal), so a batch of several is mixed:
            // one type per offset.
            while let Some(next) = runs.next_if(|n| batch.last_offset.checked_add(1) == Some(n.first)) {
                if batch.last_offset == run.last {
                    batch.acknowledge_types = types(run).collect();
                }
                batch.acknowledge_types.extend(types(next));
                batch.last_offset = next.last;
            }
            // Touching runs of one wire type (the application's RELEASE beside the client's
            // own) need no type per offset.
            if batch.acknowledge_types.len() > 1 && batch.acknowledge_types.windows(2).all(|w| w[0] == w[1]) {
                batch.acknowledge_types.truncate(1);
            }
            out.push(batch);
        }
        out
    }

    /// Appends a run past everything held.
    fn push(&mut self, run: Run) {
        append(&mut self.runs, run);
        self.len = self.len.saturating_add(run.span());
        if run.ty == AckKind::Renew {
            self.renews = self.renews.saturating_add(run.span());
        }
    }

    /// Records one offset at or below the end of the runs.
    fn add_below(&mut self, offset: i64, ty: AckKind) {
        // The first run ending at or after `offset` (the last run does, unless called amiss).
        let i = self.runs.partition_point(|r| r.last < offset);
        let Some(&next) = self.runs.get(i) else { return self.push(Run { first: offset, last: offset, ty }) };
        let near = self.runs.len() - i <= NEAR_RUNS;
        let old = if next.first > offset && near && !self.strays.contains_key(&offset) {
            // A new offset just behind the end, as parallel workers produce: into the runs,
            // at the cost of shifting a few of them. No overflow below: the run before ends
            // below `offset`, and `next.first > offset`.
            let joins_prev = i > 0 && self.runs[i - 1].ty == ty && self.runs[i - 1].last + 1 == offset;
            let joins_next = next.ty == ty && next.first - 1 == offset;
            match (joins_prev, joins_next) {
                (true, true) => {
                    self.runs[i - 1].last = next.last;
                    self.runs.remove(i);
                }
                (true, false) => self.runs[i - 1].last = offset,
                (false, true) => self.runs[i].first = offset,
                (false, false) => self.runs.insert(i, Run { first: offset, last: offset, ty }),
            }
            None
        } else {
            // Anything else (an overwrite, or far back) is a stray: one map insert.
            let held = Some(next.ty).filter(|_| next.first <= offset);
            self.strays.insert(offset, ty).or(held)
        };
        if old.is_none() {
            self.len = self.len.saturating_add(1);
        }
        if old == Some(AckKind::Renew) {
            self.renews = self.renews.saturating_sub(1);
        }
        if ty == AckKind::Renew {
            self.renews = self.renews.saturating_add(1);
        }
    }

    /// The acks as ascending, maximal runs, strays folded in: one form per set of acks.
    fn canonical(&self) -> Cow<'_, [Run]> {
        if self.strays.is_empty() {
            return Cow::Borrowed(&self.runs);
        }
        let mut out = Vec::with_capacity(self.runs.len() + self.strays.len());
        let mut strays = self.strays.iter().map(|(&o, &ty)| Run { first: o, last: o, ty }).peekable();
        for &run in &self.runs {
            // The first offset of `run` not yet written; None past `i64::MAX`.
            let mut rest = Some(run.first);
            while let Some(stray) = strays.next_if(|s| s.first <= run.last) {
                if let Some(from) = rest.filter(|&from| from <= stray.first) {
                    if from < stray.first {
                        append(&mut out, Run { first: from, last: stray.first - 1, ty: run.ty });
                    }
                    rest = stray.first.checked_add(1);
                }
                append(&mut out, stray);
            }
            if let Some(from) = rest.filter(|&from| from <= run.last) {
                append(&mut out, Run { first: from, ..run });
            }
        }
        // None are left (all lie below the last run's end), but losing one would be worse.
        for stray in strays {
            append(&mut out, stray);
        }
        Cow::Owned(out)
    }

    /// These acks with the offsets of `new` set to its type.
    fn overwritten(&self, new: Run) -> PartitionAcks {
        let mut out = PartitionAcks::default();
        let mut placed = false;
        for &run in self.canonical().iter() {
            // The part before `new` (`new.first > run.first`, so no overflow).
            if run.first < new.first {
                out.push(Run { last: run.last.min(new.first - 1), ..run });
            }
            // The part after it (`run.last > new.last`, so no overflow).
            if run.last > new.last {
                if !placed {
                    out.push(new);
                    placed = true;
                }
                out.push(Run { first: run.first.max(new.last + 1), ..run });
            }
        }
        if !placed {
            out.push(new);
        }
        out
    }
}

/// The wire type of each offset of a run. (A run too long to list could never be sent anyway.)
fn types(run: Run) -> impl Iterator<Item = i8> {
    std::iter::repeat_n(run.ty.wire(), usize::try_from(run.span()).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The tests speak wire values, as the batches they check do.
    const RENEW: i8 = AckKind::Renew.wire();

    fn kind(wire: i8) -> AckKind {
        [AckKind::Gap, AckKind::Accept, AckKind::Release, AckKind::Reject, AckKind::Renew]
            .into_iter()
            .find(|k| k.wire() == wire)
            .expect("a wire type the tests use")
    }

    impl PartitionAcks {
        fn add_wire(&mut self, offset: i64, wire: i8) {
            self.add(offset, kind(wire));
        }

        fn add_range_wire(&mut self, first: i64, last: i64, wire: i8) {
            self.add_range(first, last, kind(wire));
        }

        fn iter_wire(&self) -> Vec<(i64, i8)> {
            self.iter().map(|(o, k)| (o, k.wire())).collect()
        }
    }

    #[test]
    fn merges_contiguous_and_collapses_runs() {
        let mut a = PartitionAcks::default();
        for o in [5, 3, 4, 10, 11] {
            a.add_wire(o, 1);
        }
        a.add_wire(12, 2);
        let b = a.to_batches();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].first_offset, b[0].last_offset, b[0].acknowledge_types.clone()), (3, 5, vec![1]));
        assert_eq!((b[1].first_offset, b[1].last_offset, b[1].acknowledge_types.clone()), (10, 12, vec![1, 1, 2]));
    }

    #[test]
    fn a_range_taken_out_leaves_the_rest_and_its_counts() {
        let mut a = PartitionAcks::default();
        a.add_range_wire(0, 9, 1);
        a.add_wire(12, RENEW);
        a.add_wire(3, 2); // a stray inside the first run
        assert_eq!(a.take_range(20, 30), Settled::default(), "nothing there: nothing taken");
        assert_eq!(a.take_range(2, 4).reported, vec![2, 3, 4]);
        assert_eq!(a.take_range(12, 12).reported, vec![12]);
        assert_eq!(a.iter_wire(), [(0, 1), (1, 1), (5, 1), (6, 1), (7, 1), (8, 1), (9, 1)]);
        assert_eq!(a.len(), 7);
        assert!(!a.has_renew(), "the renew went with its offset");
        assert_eq!(a.take_range(i64::MIN, i64::MAX).count(), 7);
        assert!(a.is_empty());
    }

    #[test]
    fn what_an_answer_settles_says_who_decided_each_ack() {
        // The client's own release of offset 5 (a record it fetched ahead and never handed
        // out) and the application's release of offset 4: one RELEASE batch on the wire, but
        // only the application's is reported. An ack of the same offset, whoever decides it
        // last, is what the completion says: here the application's ACCEPT of 7 replaces the
        // client's release of an older delivery.
        let mut a = PartitionAcks::default();
        a.add(3, AckKind::Accept);
        a.add(4, AckKind::Release);
        a.add_range(5, 7, AckKind::ReleaseUnseen);
        a.add(7, AckKind::Accept);
        a.add(9, AckKind::Gap);
        let settled = a.settled();
        assert_eq!(settled.reported, vec![3, 4, 7, 9]);
        assert_eq!(settled.unseen, vec![5, 6]);
        assert_eq!(settled.first(), Some(3));
        assert_eq!(settled.count(), 6);
        let b = a.to_batches();
        assert_eq!((b[0].first_offset, b[0].last_offset), (3, 7));
        assert_eq!(b[0].acknowledge_types, vec![1, 2, 2, 2, 1], "both releases are RELEASE on the wire");
        // Runs that touch with one wire type collapse to one type.
        let mut r = PartitionAcks::default();
        r.add_range(0, 1, AckKind::Release);
        r.add_range(2, 3, AckKind::ReleaseUnseen);
        let b = r.to_batches();
        assert_eq!((b[0].first_offset, b[0].last_offset, b[0].acknowledge_types.clone()), (0, 3, vec![2]));
        let taken = r.take_range(1, 2);
        assert_eq!((taken.reported, taken.unseen), (vec![1], vec![2]), "taken out with who decided them");
    }

    #[test]
    fn renews_split_off() {
        let mut a = PartitionAcks::default();
        a.add_wire(1, 1);
        a.add_wire(2, 4);
        a.add_wire(3, 4);
        let r = a.split_renew(true);
        assert_eq!(r.iter_wire(), vec![(2, 4), (3, 4)]);
        assert_eq!(a.iter_wire(), vec![(1, 1)]);
        assert!(!a.has_renew());
    }

    #[test]
    fn extremes_do_not_overflow() {
        let mut a = PartitionAcks::default();
        a.add_range_wire(i64::MAX - 2, i64::MAX, 1);
        a.add_wire(i64::MAX, 2); // overwrite at the very end
        a.add_range_wire(i64::MAX - 1, i64::MAX, 3);
        a.add_wire(i64::MIN, 4); // far below: a stray
        a.add_range_wire(i64::MIN, i64::MIN + 1, 4);
        assert_eq!(a.len(), 5);
        assert!(a.has_renew());
        let b = a.to_batches();
        assert_eq!(
            (b[0].first_offset, b[0].last_offset, b[0].acknowledge_types.clone()),
            (i64::MIN, i64::MIN + 1, vec![4])
        );
        assert_eq!(
            (b[1].first_offset, b[1].last_offset, b[1].acknowledge_types.clone()),
            (i64::MAX - 2, i64::MAX, vec![1, 3, 3])
        );
        let r = a.split_renew(true);
        assert_eq!(r.len(), 2);
        assert_eq!(a.len(), 3);
        assert!(!a.has_renew());

        // Every offset there is: the counters saturate, nothing else gives way.
        let mut all = PartitionAcks::default();
        all.add_range_wire(i64::MIN, i64::MAX, 1);
        all.add_wire(0, 4);
        assert_eq!(all.len(), usize::MAX);
        assert!(all.has_renew());
        assert_eq!(all.split_renew(true).to_batches().len(), 1);
        assert_eq!(all.to_batches().len(), 2);
    }

    #[test]
    fn split_without_renews_moves_or_leaves_everything() {
        let mut a = PartitionAcks::default();
        a.add_range_wire(10, 20, 1);
        a.add_wire(5, 2);
        let before = a.clone();
        assert!(a.split_renew(true).is_empty());
        assert_eq!(a, before, "nothing to take: left alone");
        assert_eq!(a.split_renew(false), before);
        assert!(a.is_empty());

        let mut r = PartitionAcks::default();
        r.add_range_wire(1, 3, 4);
        assert!(r.split_renew(false).is_empty());
        assert_eq!(r.split_renew(true).len(), 3);
        assert!(r.is_empty());
    }

    #[test]
    fn out_of_order_equals_in_order() {
        let mut a = PartitionAcks::default();
        let mut b = PartitionAcks::default();
        for (o, t) in [(7, 1), (3, 1), (5, 2), (4, 1), (6, 1), (3, 1)] {
            a.add_wire(o, t);
        }
        for (o, t) in [(3, 1), (4, 1), (5, 2), (6, 1), (7, 1)] {
            b.add_wire(o, t);
        }
        assert_eq!(a, b);
        assert_eq!(a.to_batches(), b.to_batches());
        assert_eq!(a.len(), 5);
    }

    #[test]
    fn stray_in_a_gap_is_overwritten_in_place() {
        let mut a = PartitionAcks::default();
        for o in [0, 2, 4, 6] {
            a.add_wire(o, 1);
        }
        a.add_wire(1, 2); // far behind the end (in tests): a stray
        a.add_wire(5, 1); // joins the last runs, bringing offset 1 near the end
        a.add_wire(1, 4); // must replace the stray, not shadow it
        assert_eq!(a.iter_wire(), vec![(0, 1), (1, 4), (2, 1), (4, 1), (5, 1), (6, 1)]);
        assert_eq!(a.len(), 6);
        assert!(a.has_renew());
    }

    #[test]
    fn parses_java_names() {
        assert_eq!("accept".parse::<AcknowledgeType>().unwrap(), AcknowledgeType::Accept);
        assert!("ok".parse::<AcknowledgeType>().unwrap_err().to_string().contains("ACCEPT"));
    }

    proptest! {
        /// Whatever order acks arrive in, the batches are valid for the broker and carry
        /// exactly the acks given (last write wins per offset).
        #[test]
        fn batches_are_valid_and_lossless(acks in proptest::collection::vec((0i64..300, 0i8..5), 0..400)) {
            let mut a = PartitionAcks::default();
            let mut expect = BTreeMap::new();
            for &(o, t) in &acks {
                a.add_wire(o, t);
                expect.insert(o, t);
            }
            let batches = a.to_batches();
            let mut got = BTreeMap::new();
            let mut prev_last = i64::MIN;
            for b in &batches {
                prop_assert!(b.first_offset <= b.last_offset);
                prop_assert!(b.first_offset > prev_last.saturating_add(1) || prev_last == i64::MIN,
                    "batches must be ascending, non-overlapping and maximal");
                let n = (b.last_offset - b.first_offset + 1) as usize;
                prop_assert!(b.acknowledge_types.len() == 1 || b.acknowledge_types.len() == n);
                if b.acknowledge_types.len() == n && n > 1 {
                    prop_assert!(b.acknowledge_types.iter().any(|&t| t != b.acknowledge_types[0]));
                }
                for (i, o) in (b.first_offset..=b.last_offset).enumerate() {
                    let t = if b.acknowledge_types.len() == 1 { b.acknowledge_types[0] } else { b.acknowledge_types[i] };
                    got.insert(o, t);
                }
                prev_last = b.last_offset;
            }
            prop_assert_eq!(got, expect);
        }

        /// Any mix of adds, range adds, splits and builds behaves exactly like the map of
        /// offsets it replaced.
        #[test]
        fn matches_map_model(ops in proptest::collection::vec(op(), 0..120)) {
            let mut a = PartitionAcks::default();
            let mut model = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Add(o, t) => {
                        a.add_wire(o, t);
                        model.insert(o, t);
                    }
                    Op::AddRange(first, last, t) => {
                        a.add_range_wire(first, last, t);
                        for o in first..=last {
                            model.insert(o, t);
                        }
                    }
                    Op::Split(renew) => {
                        let part = a.split_renew(renew);
                        let (taken, kept): (BTreeMap<i64, i8>, BTreeMap<i64, i8>) =
                            std::mem::take(&mut model).into_iter().partition(|&(_, t)| (t == RENEW) == renew);
                        model = kept;
                        check(&part, &taken)?;
                    }
                    Op::Build => prop_assert_eq!(a.to_batches(), reference_batches(&model)),
                }
                check(&a, &model)?;
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(i64, i8),
        AddRange(i64, i64, i8),
        Split(bool),
        Build,
    }

    /// Offsets that collide often, including both ends of i64.
    fn offset() -> impl Strategy<Value = i64> {
        prop_oneof![6 => 0i64..40, 1 => (i64::MAX - 12)..=i64::MAX, 1 => i64::MIN..=(i64::MIN + 12)]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (offset(), 0i8..5).prop_map(|(o, t)| Op::Add(o, t)),
            // Short ranges, now and then empty (first > last).
            2 => (offset(), -2i64..8, 0i8..5).prop_map(|(o, d, t)| Op::AddRange(o, o.saturating_add(d), t)),
            1 => any::<bool>().prop_map(Op::Split),
            1 => Just(Op::Build),
        ]
    }

    /// Everything observable agrees with the model, and the representation is sound.
    fn check(a: &PartitionAcks, model: &BTreeMap<i64, i8>) -> Result<(), TestCaseError> {
        prop_assert_eq!(a.iter_wire(), model.iter().map(|(&o, &t)| (o, t)).collect::<Vec<_>>());
        prop_assert_eq!(a.len(), model.len());
        prop_assert_eq!(a.is_empty(), model.is_empty());
        prop_assert_eq!(a.has_renew(), model.values().any(|&t| t == RENEW));
        prop_assert_eq!(a.renews as usize, model.values().filter(|&&t| t == RENEW).count());
        prop_assert_eq!(a.to_batches(), reference_batches(model));
        // Same acks added in order: equal, whatever the history.
        let mut fresh = PartitionAcks::default();
        for (&o, &t) in model {
            fresh.add_wire(o, t);
        }
        prop_assert_eq!(a, &fresh);
        prop_assert!(fresh.strays.is_empty());
        // Runs ascending and maximal; strays below the last run's end.
        for w in a.runs.windows(2) {
            prop_assert!(w[0].first <= w[0].last && w[0].last < w[1].first);
            prop_assert!(w[0].last + 1 < w[1].first || w[0].ty != w[1].ty, "runs not maximal: {:?}", w);
        }
        if let (Some(&top), Some(tail)) = (a.strays.keys().next_back(), a.runs.last()) {
            prop_assert!(top <= tail.last);
        }
        Ok(())
    }

    /// The map-based implementation this one replaced, kept as the reference.
    fn reference_batches(acks: &BTreeMap<i64, i8>) -> Vec<AcknowledgementBatch> {
        let mut out: Vec<AcknowledgementBatch> = Vec::new();
        let mut cur: Option<(i64, i64, Vec<i8>)> = None;
        for (&offset, &t) in acks {
            match &mut cur {
                Some((_, last, types)) if last.checked_add(1) == Some(offset) => {
                    *last = offset;
                    types.push(t);
                }
                _ => {
                    out.extend(cur.take().map(finish));
                    cur = Some((offset, offset, vec![t]));
                }
            }
        }
        out.extend(cur.map(finish));
        out
    }

    fn finish((first, last, mut types): (i64, i64, Vec<i8>)) -> AcknowledgementBatch {
        if types.iter().all(|&t| t == types[0]) {
            types.truncate(1);
        }
        AcknowledgementBatch { first_offset: first, last_offset: last, acknowledge_types: types }
    }
}
