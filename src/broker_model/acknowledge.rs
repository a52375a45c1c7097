//! Acknowledgements on a share partition, checked as Kafka does, in two steps:
//!
//! 1. Their shape, before anything else (KafkaApis validates the batches of a request before
//!    it looks for the partition's leader): batches ascending and disjoint, one type or one
//!    per offset, known types, RENEW only in a renewing request. A broken shape is
//!    INVALID_REQUEST ([`validate_batches`]).
//! 2. Then, on the leader, the state ([`SharePartition::acknowledge`]): every offset must be
//!    acquired by the member that acknowledges it, under a lock that has not lapsed; else
//!    INVALID_RECORD_STATE and nothing is applied (all or nothing per partition).
//!
//! A refusal says why ([`AckRefusal`]), so a wrapper can tell a client bug (acks for records
//! it was never given) from a race a correct client can lose (a lock that lapsed meanwhile).

use std::time::Instant;

use crate::error::ErrorCode;
use crate::protocol::share::AcknowledgementBatch;
use crate::share::acks::AckKind;

use super::partition::{give_back, SharePartition};
use super::record_state::{Archived, ShareState};

/// Why acknowledgements were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AckRefusal {
    /// The batches are empty ranges, out of order, overlapping, or carry a wrong number of
    /// types.
    Malformed,
    /// A type that is not one, or RENEW outside a renewing request.
    TypeNotAllowed { offset: i64, ty: i8 },
    /// A batch reaches outside the log (`0..log_end`).
    OutsideLog { first: i64, last: i64, log_end: i64 },
    /// Offsets the member does not hold: never delivered to it, held by another member, or
    /// already done.
    NotHeld { offsets: Vec<i64> },
    /// Offsets whose lock, held by this member, lapsed before the acks came, whatever
    /// became of them since (delivered to another member, even accepted there); none of the
    /// refused ones is [`NotHeld`](AckRefusal::NotHeld).
    Lapsed { offsets: Vec<i64> },
}

impl AckRefusal {
    /// The partition error code Kafka answers.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            AckRefusal::Malformed | AckRefusal::TypeNotAllowed { .. } => ErrorCode::INVALID_REQUEST,
            AckRefusal::OutsideLog { .. } | AckRefusal::NotHeld { .. } | AckRefusal::Lapsed { .. } => {
                ErrorCode::INVALID_RECORD_STATE
            }
        }
    }
}

/// The type of offset `i` of batch `b` (`b` passed [`validate_batches`]).
fn type_at(b: &AcknowledgementBatch, i: usize) -> i8 {
    if b.acknowledge_types.len() == 1 {
        b.acknowledge_types[0]
    } else {
        b.acknowledge_types[i]
    }
}

/// The kind of wire type `t`, RENEW only where `renew_allowed`.
fn kind(t: i8, renew_allowed: bool) -> Option<AckKind> {
    match t {
        0 => Some(AckKind::Gap),
        1 => Some(AckKind::Accept),
        2 => Some(AckKind::Release),
        3 => Some(AckKind::Reject),
        4 if renew_allowed => Some(AckKind::Renew),
        _ => None,
    }
}

/// Checks the shape of one partition's batches without expanding their ranges (a client may
/// send any two offsets: a wild range costs nothing here).
pub(crate) fn validate_batches(batches: &[AcknowledgementBatch], renew_allowed: bool) -> Result<(), AckRefusal> {
    let mut prev_last: Option<i64> = None;
    for b in batches {
        // As i128: the distance between any two i64 offsets must not overflow.
        let len = i128::from(b.last_offset) - i128::from(b.first_offset) + 1;
        let types = b.acknowledge_types.len() as i128;
        if len < 1 || prev_last.is_some_and(|l| b.first_offset <= l) || !(types == 1 || types == len) {
            return Err(AckRefusal::Malformed);
        }
        prev_last = Some(b.last_offset);
        for (i, &ty) in b.acknowledge_types.iter().enumerate() {
            if kind(ty, renew_allowed).is_none() {
                return Err(AckRefusal::TypeNotAllowed { offset: b.first_offset.saturating_add(i as i64), ty });
            }
        }
    }
    Ok(())
}

impl<H: Clone + PartialEq> SharePartition<H> {
    /// Applies `holder`'s acknowledgements (`batches` passed [`validate_batches`] with the
    /// same `renew_allowed`) at `now`: all of them, or none with the reason. Returns the
    /// (offset, kind, delivery count) of each ack applied.
    pub(crate) fn acknowledge(
        &mut self,
        holder: &H,
        batches: &[AcknowledgementBatch],
        renew_allowed: bool,
        now: Instant,
    ) -> Result<Vec<(i64, AckKind, i16)>, AckRefusal> {
        self.expire(now);
        let log_end = self.log_end();
        if let Some(b) = batches.iter().find(|b| b.first_offset < 0 || b.last_offset >= log_end) {
            return Err(AckRefusal::OutsideLog { first: b.first_offset, last: b.last_offset, log_end });
        }
        let mut acks: Vec<(i64, AckKind)> = Vec::new();
        for b in batches {
            for (i, o) in (b.first_offset..=b.last_offset).enumerate() {
                match kind(type_at(b, i), renew_allowed) {
                    Some(k) => acks.push((o, k)),
                    None => return Err(AckRefusal::TypeNotAllowed { offset: o, ty: type_at(b, i) }),
                }
            }
        }
        let (mut not_held, mut lapsed) = (Vec::new(), Vec::new());
        for &(o, _) in &acks {
            let Some(s) = self.get(o) else {
                not_held.push(o);
                continue;
            };
            if s.holder() == Some(holder) {
                continue;
            }
            if s.lapsed.as_ref() == Some(holder) {
                lapsed.push(o);
            } else {
                not_held.push(o);
            }
        }
        if !not_held.is_empty() {
            return Err(AckRefusal::NotHeld { offsets: not_held });
        }
        if !lapsed.is_empty() {
            return Err(AckRefusal::Lapsed { offsets: lapsed });
        }
        let limits = self.limits();
        let renewed_until = now + limits.lock;
        let mut applied = Vec::with_capacity(acks.len());
        let mut renewed = false;
        for (o, k) in acks {
            let s = &mut self.offsets_mut()[o as usize];
            match k {
                AckKind::Renew => {
                    s.state = ShareState::Acquired { holder: holder.clone(), until: renewed_until };
                    renewed = true;
                }
                AckKind::Accept => s.state = ShareState::Acknowledged,
                AckKind::Release | AckKind::ReleaseUnseen => give_back(s, limits.delivery_limit),
                AckKind::Reject => s.state = ShareState::Archived(Archived::Rejected),
                AckKind::Gap => s.state = ShareState::Archived(Archived::Gap),
            }
            applied.push((o, k, s.delivery));
        }
        if renewed {
            self.lock_until(renewed_until);
        }
        self.advance_start();
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::broker_model::partition::ShareLimits;

    const LOCK: Duration = Duration::from_secs(30);

    fn batch(first: i64, last: i64, types: &[i8]) -> AcknowledgementBatch {
        AcknowledgementBatch { first_offset: first, last_offset: last, acknowledge_types: types.to_vec() }
    }

    fn held(len: usize, by: &'static str, now: Instant) -> SharePartition<&'static str> {
        let mut p = SharePartition::new(len, ShareLimits { lock: LOCK, delivery_limit: 3 });
        p.acquire(&by, len, now);
        p
    }

    #[test]
    fn malformed_batches_are_invalid_requests() {
        assert_eq!(validate_batches(&[batch(3, 2, &[1])], false), Err(AckRefusal::Malformed));
        assert_eq!(validate_batches(&[batch(0, 2, &[1]), batch(2, 3, &[1])], false), Err(AckRefusal::Malformed));
        assert_eq!(validate_batches(&[batch(0, 2, &[1, 1])], false), Err(AckRefusal::Malformed));
        assert_eq!(validate_batches(&[batch(0, i64::MAX, &[1])], false), Ok(()), "a wild range costs nothing");
        let renew = validate_batches(&[batch(5, 5, &[4])], false);
        assert_eq!(renew, Err(AckRefusal::TypeNotAllowed { offset: 5, ty: 4 }));
        assert_eq!(renew.map_err(|e| e.code()), Err(ErrorCode::INVALID_REQUEST));
        assert_eq!(validate_batches(&[batch(5, 5, &[4])], true), Ok(()));
    }

    #[test]
    fn acks_apply_all_or_nothing() {
        let now = Instant::now();
        let mut p = held(3, "a", now);
        let refused = p.acknowledge(&"b", &[batch(0, 0, &[1])], false, now);
        assert_eq!(refused, Err(AckRefusal::NotHeld { offsets: vec![0] }));
        assert_eq!(refused.map_err(|e| e.code()), Err(ErrorCode::INVALID_RECORD_STATE));
        let outside = p.acknowledge(&"a", &[batch(0, 3, &[1])], false, now);
        assert!(matches!(outside, Err(AckRefusal::OutsideLog { log_end: 3, .. })), "{outside:?}");
        let applied = p.acknowledge(&"a", &[batch(0, 2, &[1, 2, 3])], false, now).expect("applied");
        assert_eq!(applied, [(0, AckKind::Accept, 1), (1, AckKind::Release, 1), (2, AckKind::Reject, 1)]);
        assert_eq!(p.get(0).map(|o| &o.state), Some(&ShareState::Acknowledged));
        assert_eq!(p.get(1).map(|o| &o.state), Some(&ShareState::Available));
        assert_eq!(p.get(2).map(|o| &o.state), Some(&ShareState::Archived(Archived::Rejected)));
        assert_eq!(p.start_offset(), 1);
        let twice = p.acknowledge(&"a", &[batch(0, 0, &[1])], false, now);
        assert_eq!(twice, Err(AckRefusal::NotHeld { offsets: vec![0] }), "a done record is held by no one");
    }

    #[test]
    fn an_ack_after_the_lock_lapsed_is_refused_as_late() {
        let now = Instant::now();
        let mut p = held(1, "a", now);
        let late = p.acknowledge(&"a", &[batch(0, 0, &[1])], false, now + LOCK);
        assert_eq!(late, Err(AckRefusal::Lapsed { offsets: vec![0] }));
        assert_eq!(p.get(0).map(|o| &o.state), Some(&ShareState::Available));
    }

    #[test]
    fn a_late_ack_stays_late_after_another_member_accepted_the_record() {
        let now = Instant::now();
        let mut p = held(1, "a", now);
        let later = now + LOCK;
        p.acquire(&"b", 1, later);
        assert!(p.acknowledge(&"b", &[batch(0, 0, &[1])], false, later).is_ok());
        let late = p.acknowledge(&"a", &[batch(0, 0, &[1])], false, later);
        assert_eq!(late, Err(AckRefusal::Lapsed { offsets: vec![0] }));
    }

    #[test]
    fn a_record_acquired_again_by_its_lapsed_holder_is_its_own_again() {
        let now = Instant::now();
        let mut p = held(1, "a", now);
        let later = now + LOCK;
        p.acquire(&"a", 1, later);
        assert!(p.acknowledge(&"a", &[batch(0, 0, &[1])], false, later).is_ok());
        let twice = p.acknowledge(&"a", &[batch(0, 0, &[1])], false, later);
        assert_eq!(twice, Err(AckRefusal::NotHeld { offsets: vec![0] }), "a second ack is a client bug");
    }

    #[test]
    fn renew_extends_the_lock_and_keeps_the_delivery_count() {
        let now = Instant::now();
        let mut p = held(1, "a", now);
        let later = now + LOCK / 2;
        assert!(p.acknowledge(&"a", &[batch(0, 0, &[4])], true, later).is_ok());
        assert_eq!(p.expire(now + LOCK), 0, "renewed at half the lock");
        assert!(p.acknowledge(&"a", &[batch(0, 0, &[1])], false, later + LOCK - Duration::from_millis(1)).is_ok());
        assert_eq!(p.get(0).map(|o| o.delivery), Some(1));
    }

    #[test]
    fn release_at_the_delivery_limit_archives() {
        let mut now = Instant::now();
        let mut p = held(1, "a", now);
        for _ in 0..2 {
            assert!(p.acknowledge(&"a", &[batch(0, 0, &[2])], false, now).is_ok());
            now += Duration::from_millis(1);
            p.acquire(&"a", 1, now);
        }
        assert_eq!(p.get(0).map(|o| o.delivery), Some(3));
        assert!(p.acknowledge(&"a", &[batch(0, 0, &[2])], false, now).is_ok());
        assert_eq!(p.get(0).map(|o| &o.state), Some(&ShareState::Archived(Archived::DeliveryLimit)));
    }
}
