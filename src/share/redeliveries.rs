//! Which delivery of an offset a share session holds now, so that a late acknowledgement of
//! an older delivery is refused instead of landing on the newer one.
//!
//! The broker knows a record by offset only. Say the application holds offset 7 from its
//! first delivery, works past the lock, and meanwhile this member acquires offset 7 again
//! (delivery count 3, say, into the buffer). Acknowledging the first delivery would then be
//! accepted by the broker, as if the application had processed delivery 3. So each
//! acknowledgement carries the delivery count of the record it is for, and is sent only when
//! that is the delivery the session holds.
//!
//! Cheap on the hot path: a first delivery (count 1) needs no entry, since any later delivery
//! of the same offset has a higher count and is the one recorded. Only acquisitions with a
//! count above 1 are recorded, and entries go when the session resets and when they are
//! older than the lock (their acknowledgements fail at the broker anyway). An acknowledged
//! one stays until then: the older delivery may still be in hand (a processing engine's
//! handler that ran on while the redelivery was processed and accepted), and its late
//! RENEW or outcome must still be refused, not sent to a record the broker has settled.
//!
//! It also keeps how far RENEWs extended locks, since the deadline a record carries is that
//! of its delivery: an acknowledgement is refused locally once the lock it relies on has
//! surely lapsed, because a broker may take a late one without complaint (when the group's
//! start offset has already moved past the record).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::TopicIdPartition;

/// The deliveries with a count above 1 acquired on one share session (one generation).
#[derive(Debug, Default)]
pub struct Redeliveries {
    held: HashMap<(TopicIdPartition, i64), (i16, Instant)>,
    /// Offsets renewed, and until when their lock lasts at the latest (conservative).
    renewed: HashMap<(TopicIdPartition, i64), Instant>,
}

impl Redeliveries {
    /// Offsets `first..=last` of `tp` were acquired at `now` with `delivery_count`.
    pub fn acquired(&mut self, tp: TopicIdPartition, first: i64, last: i64, delivery_count: i16, now: Instant) {
        if delivery_count <= 1 || last < first {
            return;
        }
        for offset in first..=last {
            self.held.insert((tp, offset), (delivery_count, now));
        }
    }

    /// Whether an acknowledgement for delivery `delivery_count` of this offset may be sent:
    /// `Err(newer)` when the session holds a later delivery of it.
    #[inline]
    pub fn check(&self, tp: TopicIdPartition, offset: i64, delivery_count: i16) -> Result<(), i16> {
        if self.held.is_empty() {
            return Ok(()); // the usual case: no hashing on the hot path
        }
        match self.held.get(&(tp, offset)) {
            Some(&(held, _)) if held != delivery_count => Err(held),
            _ => Ok(()),
        }
    }

    /// The offset was finally acknowledged (or released): its renewals are forgotten. Which
    /// delivery it was stays recorded (see the module doc).
    #[inline]
    pub fn settled(&mut self, tp: TopicIdPartition, offset: i64) {
        if !self.renewed.is_empty() {
            self.renewed.remove(&(tp, offset));
        }
    }

    /// A RENEW of this offset was sent: its lock lasts until `until` (conservative).
    pub fn renewed(&mut self, tp: TopicIdPartition, offset: i64, until: Instant) {
        self.renewed.insert((tp, offset), until);
    }

    /// When the lock of this offset ends at the latest: its delivery's `deadline`, or later
    /// if it was renewed since. None when unknown.
    #[inline]
    pub fn lock_until(&self, tp: TopicIdPartition, offset: i64, deadline: Option<Instant>) -> Option<Instant> {
        if self.renewed.is_empty() {
            return deadline;
        }
        match (deadline, self.renewed.get(&(tp, offset))) {
            (Some(d), Some(&r)) => Some(d.max(r)),
            (d, None) => d,
            (None, Some(&r)) => Some(r),
        }
    }

    /// Forgets acquisitions older than `lock`: their locks have lapsed, so the broker refuses
    /// acknowledgements for them whichever delivery they name.
    pub fn expire(&mut self, now: Instant, lock: Duration) {
        if !self.held.is_empty() && !lock.is_zero() {
            self.held.retain(|_, (_, at)| now.saturating_duration_since(*at) < lock);
        }
        if !self.renewed.is_empty() {
            self.renewed.retain(|_, until| *until > now);
        }
    }

    /// The session was reset: every delivery of it is gone.
    pub fn clear(&mut self) {
        self.held.clear();
        self.renewed.clear();
    }

    /// Whether nothing sets one offset apart from another: no redelivery recorded and no
    /// renewal. Then a run of offsets of one delivery is checked as a whole (`check` passes for
    /// each, and `lock_until` is each one's own deadline).
    #[inline]
    pub fn is_quiet(&self) -> bool {
        self.held.is_empty() && self.renewed.is_empty()
    }

    /// How many offsets are recorded.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> TopicIdPartition {
        TopicIdPartition { topic_id: uuid::Uuid::from_u128(7), partition: 0 }
    }

    #[test]
    fn a_first_delivery_needs_no_entry_and_passes() {
        let mut r = Redeliveries::default();
        r.acquired(tp(), 0, 99, 1, Instant::now());
        assert!(r.is_empty());
        assert_eq!(r.check(tp(), 5, 1), Ok(()));
    }

    #[test]
    fn an_older_delivery_is_refused_once_the_offset_came_again() {
        let t0 = Instant::now();
        let mut r = Redeliveries::default();
        r.acquired(tp(), 5, 6, 3, t0);
        assert_eq!(r.check(tp(), 5, 1), Err(3), "delivery 1 was superseded by delivery 3");
        assert_eq!(r.check(tp(), 5, 2), Err(3));
        assert_eq!(r.check(tp(), 5, 3), Ok(()), "the held delivery may be acknowledged");
        assert_eq!(r.check(tp(), 7, 1), Ok(()), "other offsets are not concerned");
        r.settled(tp(), 5);
        assert_eq!(r.check(tp(), 5, 2), Err(3), "settled, delivery 3 still supersedes the ones before");
        assert_eq!(r.len(), 2, "until it is older than the lock");
    }

    #[test]
    fn entries_older_than_the_lock_and_a_reset_forget_everything() {
        let t0 = Instant::now();
        let mut r = Redeliveries::default();
        r.acquired(tp(), 0, 0, 2, t0);
        r.acquired(tp(), 1, 1, 2, t0 + Duration::from_secs(20));
        r.expire(t0 + Duration::from_secs(31), Duration::from_secs(30));
        assert_eq!(r.len(), 1, "only the acquisition within the lock stays");
        r.clear();
        assert!(r.is_empty());
    }

    #[test]
    fn a_renewal_extends_the_deadline_an_acknowledgement_may_rely_on() {
        let t0 = Instant::now();
        let mut r = Redeliveries::default();
        let delivered = Some(t0 + Duration::from_secs(30));
        assert_eq!(r.lock_until(tp(), 3, delivered), delivered);
        r.renewed(tp(), 3, t0 + Duration::from_secs(50));
        assert_eq!(r.lock_until(tp(), 3, delivered), Some(t0 + Duration::from_secs(50)));
        assert_eq!(r.lock_until(tp(), 4, delivered), delivered, "other offsets keep their deadline");
        r.expire(t0 + Duration::from_secs(51), Duration::from_secs(30));
        assert_eq!(r.lock_until(tp(), 3, delivered), delivered, "a lapsed renewal is forgotten");
        r.renewed(tp(), 3, t0 + Duration::from_secs(80));
        r.settled(tp(), 3);
        assert_eq!(r.lock_until(tp(), 3, None), None);
    }
}
