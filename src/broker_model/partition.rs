//! A share partition as its leader keeps it (`SharePartition.java`): the share state of each
//! offset, the share-partition start offset (SPSO: every offset below it is done) and end
//! offset (SPEO: one past the last offset ever acquired), acquisition with a lock of
//! `share.record.lock.duration.ms`, lock expiry, and the delivery limit
//! (`share.delivery.count.limit`): a record given back after its last allowed delivery is
//! archived instead of made available.
//!
//! Locks lapse lazily: every call that depends on time takes `now` and first expires what is
//! due (`expire`), so a wrapper on the wall clock needs no timer task, and one in virtual time
//! asks [`SharePartition::next_expiry`] when to look again.

use std::time::{Duration, Instant};

use crate::protocol::share::AcquiredRecords;

use super::record_state::{Archived, OffsetShare, ShareState};

/// The group's share settings a partition applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShareLimits {
    /// `share.record.lock.duration.ms`: how long an acquisition lock lasts.
    pub(crate) lock: Duration,
    /// `share.delivery.count.limit`: deliveries before a released record is archived.
    pub(crate) delivery_limit: i16,
}

impl Default for ShareLimits {
    /// Kafka's defaults: a 30 s lock, 5 deliveries.
    fn default() -> Self {
        ShareLimits { lock: Duration::from_secs(30), delivery_limit: 5 }
    }
}

/// One share partition: the share state of offsets `0..len`.
#[derive(Debug, Clone)]
pub(crate) struct SharePartition<H> {
    offsets: Vec<OffsetShare<H>>,
    limits: ShareLimits,
    /// SPSO: the first offset not done.
    start: usize,
    /// SPEO: one past the last offset ever acquired (no offset at or past it is in flight).
    end: usize,
    /// No lock lapses before this; None: no offset is acquired. A lower bound (a RENEW or an
    /// ack leaves it early): `expire` finds nothing then, and computes it again.
    next_expiry: Option<Instant>,
}

impl<H: Clone + PartialEq> SharePartition<H> {
    /// A partition of `len` offsets, none delivered yet.
    pub(crate) fn new(len: usize, limits: ShareLimits) -> Self {
        let offsets = std::iter::repeat_with(OffsetShare::new).take(len).collect();
        SharePartition { offsets, limits, start: 0, end: 0, next_expiry: None }
    }

    pub(crate) fn limits(&self) -> ShareLimits {
        self.limits
    }

    /// The log end offset: how many offsets the partition has.
    pub(crate) fn log_end(&self) -> i64 {
        self.offsets.len() as i64
    }

    /// Appends `n` offsets, none delivered yet.
    pub(crate) fn push(&mut self, n: usize) {
        self.offsets.extend(std::iter::repeat_with(OffsetShare::new).take(n));
    }

    /// The state of offset `o`, if the log has it.
    pub(crate) fn get(&self, o: i64) -> Option<&OffsetShare<H>> {
        usize::try_from(o).ok().and_then(|i| self.offsets.get(i))
    }

    /// Every offset's state, by offset.
    pub(crate) fn offsets(&self) -> &[OffsetShare<H>] {
        &self.offsets
    }

    /// SPSO: every offset below it is acknowledged or archived.
    pub(crate) fn start_offset(&self) -> i64 {
        self.start as i64
    }

    /// SPEO: one past the last offset ever acquired.
    pub(crate) fn end_offset(&self) -> i64 {
        self.end as i64
    }

    /// The earliest moment a lock may lapse (None: nothing is acquired): when a wrapper in
    /// virtual time must look again. (The fake cluster on the wall clock never asks.)
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.next_expiry
    }

    /// The earliest deadline of a lock held now, exactly (a scan of the in-flight window,
    /// where [`next_expiry`](Self::next_expiry) is a bound): for a simulation that must wake
    /// at the moment a record goes back, and not before.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn earliest_lock_deadline(&self) -> Option<Instant> {
        self.offsets[self.start..self.end]
            .iter()
            .filter_map(|o| match &o.state {
                ShareState::Acquired { until, .. } => Some(*until),
                _ => None,
            })
            .min()
    }

    /// Locks that lapsed by `now` give their records back: available again, or archived at
    /// the delivery limit. Returns how many lapsed.
    pub(crate) fn expire(&mut self, now: Instant) -> usize {
        if self.next_expiry.is_none_or(|t| t > now) {
            return 0;
        }
        let limit = self.limits.delivery_limit;
        let mut lapsed = 0;
        let mut next: Option<Instant> = None;
        for o in &mut self.offsets[self.start..self.end] {
            let ShareState::Acquired { holder, until } = &o.state else {
                continue;
            };
            if *until <= now {
                o.lapsed = Some(holder.clone());
                give_back(o, limit);
                lapsed += 1;
            } else {
                next = Some(next.map_or(*until, |n| n.min(*until)));
            }
        }
        self.next_expiry = next;
        self.advance_start();
        lapsed
    }

    /// Acquires up to `max` available offsets, lowest first, for `holder` until `now` + the
    /// lock; returns them as runs of one delivery count each.
    pub(crate) fn acquire(&mut self, holder: &H, max: usize, now: Instant) -> Vec<AcquiredRecords> {
        self.expire(now);
        let until = now + self.limits.lock;
        let mut got: Vec<AcquiredRecords> = Vec::new();
        let mut taken = 0;
        for (i, o) in self.offsets.iter_mut().enumerate().skip(self.start) {
            if taken >= max {
                break;
            }
            if o.state != ShareState::Available {
                continue;
            }
            o.delivery = o.delivery.saturating_add(1);
            if o.lapsed.as_ref() == Some(holder) {
                o.lapsed = None; // its own again: a second ack of it is no late one
            }
            o.state = ShareState::Acquired { holder: holder.clone(), until };
            o.acquired_at = Some(now);
            taken += 1;
            self.end = self.end.max(i + 1);
            let off = i as i64;
            match got.last_mut() {
                Some(r) if r.last_offset + 1 == off && r.delivery_count == o.delivery => r.last_offset = off,
                _ => got.push(AcquiredRecords { first_offset: off, last_offset: off, delivery_count: o.delivery }),
            }
        }
        if taken > 0 {
            self.next_expiry = Some(self.next_expiry.map_or(until, |n| n.min(until)));
        }
        got
    }

    /// Undoes an [`acquire`](Self::acquire) that could not be answered: the offsets are
    /// available again and the delivery is not counted.
    pub(crate) fn unacquire(&mut self, got: &[AcquiredRecords]) {
        for r in got {
            for o in r.first_offset..=r.last_offset {
                if let Some(s) = usize::try_from(o).ok().and_then(|i| self.offsets.get_mut(i)) {
                    if matches!(s.state, ShareState::Acquired { .. }) {
                        s.state = ShareState::Available;
                        s.delivery = s.delivery.saturating_sub(1);
                    }
                }
            }
        }
    }

    /// Gives back every record acquired by a holder `f` picks (its session ended, it left
    /// the group, the leadership moved): available again, or archived at the delivery limit.
    /// Returns how many.
    pub(crate) fn release_where(&mut self, f: impl Fn(&H) -> bool) -> usize {
        let limit = self.limits.delivery_limit;
        let mut n = 0;
        for o in &mut self.offsets[self.start..self.end] {
            if o.holder().is_some_and(&f) {
                give_back(o, limit);
                n += 1;
            }
        }
        self.advance_start();
        n
    }

    /// Mutable access for the acknowledgements (`acknowledge.rs`).
    pub(super) fn offsets_mut(&mut self) -> &mut [OffsetShare<H>] {
        &mut self.offsets
    }

    /// A RENEW moved a lock's deadline to `until`.
    pub(super) fn lock_until(&mut self, until: Instant) {
        self.next_expiry = Some(self.next_expiry.map_or(until, |n| n.min(until)));
    }

    /// Moves SPSO past the offsets that are done.
    pub(super) fn advance_start(&mut self) {
        while self.offsets.get(self.start).is_some_and(|o| o.is_done()) {
            self.start += 1;
        }
        self.end = self.end.max(self.start);
    }
}

/// A record goes back: available again, or archived once delivered as often as `limit`
/// allows (Kafka checks at every release: RELEASE, a lapsed lock, a member leaving).
pub(super) fn give_back<H>(o: &mut OffsetShare<H>, limit: i16) {
    o.state = if o.delivery >= limit { ShareState::Archived(Archived::DeliveryLimit) } else { ShareState::Available };
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: Duration = Duration::from_secs(30);

    fn part(len: usize, limit: i16) -> SharePartition<&'static str> {
        SharePartition::new(len, ShareLimits { lock: LOCK, delivery_limit: limit })
    }

    fn range(first: i64, last: i64, delivery: i16) -> AcquiredRecords {
        AcquiredRecords { first_offset: first, last_offset: last, delivery_count: delivery }
    }

    #[test]
    fn acquisition_takes_the_lowest_available_offsets_and_counts_a_delivery() {
        let now = Instant::now();
        let mut p = part(5, 5);
        assert_eq!(p.acquire(&"a", 2, now), [range(0, 1, 1)]);
        assert_eq!(p.acquire(&"b", 10, now), [range(2, 4, 1)]);
        assert_eq!(p.get(3).and_then(|o| o.holder()), Some(&"b"));
        assert_eq!((p.start_offset(), p.end_offset()), (0, 5));
        assert_eq!(p.next_expiry(), Some(now + LOCK));
        assert!(p.acquire(&"c", 10, now).is_empty());
    }

    #[test]
    fn a_lapsed_lock_makes_the_record_available_again_with_its_delivery_counted() {
        let now = Instant::now();
        let mut p = part(2, 5);
        p.acquire(&"a", 1, now);
        assert_eq!(p.expire(now + LOCK - Duration::from_millis(1)), 0);
        assert_eq!(p.expire(now + LOCK), 1);
        assert_eq!(p.get(0).map(|o| &o.state), Some(&ShareState::Available));
        assert_eq!(p.get(0).and_then(|o| o.lapsed), Some("a"));
        assert_eq!(p.next_expiry(), None);
        assert_eq!(p.acquire(&"b", 1, now + LOCK), [range(0, 0, 2)]);
    }

    #[test]
    fn the_delivery_limit_archives_a_record_given_back_after_its_last_delivery() {
        let mut now = Instant::now();
        let mut p = part(1, 2);
        p.acquire(&"a", 1, now);
        now += LOCK;
        assert_eq!(p.acquire(&"a", 1, now), [range(0, 0, 2)]);
        now += LOCK;
        assert_eq!(p.expire(now), 1);
        assert_eq!(p.get(0).map(|o| &o.state), Some(&ShareState::Archived(Archived::DeliveryLimit)));
        assert_eq!(p.start_offset(), 1, "SPSO moves past the archived record");
        assert!(p.acquire(&"b", 1, now).is_empty());
    }

    #[test]
    fn releasing_a_holder_gives_back_only_its_records() {
        let now = Instant::now();
        let mut p = part(4, 5);
        p.acquire(&"a", 2, now);
        p.acquire(&"b", 2, now);
        assert_eq!(p.release_where(|h| *h == "a"), 2);
        assert_eq!(p.acquire(&"c", 10, now), [range(0, 1, 2)]);
        assert_eq!(p.get(2).and_then(|o| o.holder()), Some(&"b"));
    }

    #[test]
    fn an_undone_acquisition_is_not_counted() {
        let now = Instant::now();
        let mut p = part(2, 5);
        let got = p.acquire(&"a", 2, now);
        p.unacquire(&got);
        assert_eq!(p.acquire(&"a", 2, now), [range(0, 1, 1)]);
    }
}
