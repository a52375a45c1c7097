//! What must hold at every step of a simulation, and the ledger the checks read.
//!
//! The brokers (`share.rs`) check that an acknowledgement goes only to the broker and
//! session that delivered the record, at most once per delivery. The ledger checks that what
//! a broker applied is what the application asked for (the same delivery, the same kind), and
//! that what the client reports agrees with the brokers: a completion or a commit result
//! `Ok` only for acks a broker applied (completions name offsets, not deliveries, so a
//! definite failure is not matched against the brokers).
//! The runner checks the rest: requests per virtual second, close within its timeout, and
//! at the end, that every record was accepted or archived.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::share::acks::AckKind;

use super::cluster::ClientId;

/// (client, partition, offset).
type Key = (ClientId, i32, i64);

/// Most transmits one client may make in one virtual second: a hot loop makes thousands.
pub(crate) const MAX_REQUESTS_PER_SECOND: u32 = 100;

/// What was delivered, acknowledged and applied, for the checks.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// What the application acknowledged: (client, partition, offset, delivery) -> kinds, in order.
    app: BTreeMap<(ClientId, i32, i64, i16), Vec<AckKind>>,
    /// Acks brokers applied, and completions reported `Ok`, per offset: never more of the
    /// second than of the first. (Completions name offsets, not deliveries; counting is
    /// what can be matched soundly.)
    applied_per_offset: BTreeMap<Key, u32>,
    ok_per_offset: BTreeMap<Key, u32>,
    /// Acks handed to the client, and completions it reported (any outcome), per offset.
    handed_per_offset: BTreeMap<Key, u32>,
    reported_per_offset: BTreeMap<Key, u32>,
    /// Deliveries served in a corrupted batch: the client REJECTs them on its own.
    corrupt: std::collections::BTreeSet<(ClientId, i32, i64, i16)>,
    /// Acks brokers applied: (client, partition, offset, delivery, kind).
    applied: BTreeMap<(ClientId, i32, i64, i16), Vec<AckKind>>,
    pub deliveries: u64,
    /// Rejects applied to deliveries served corrupted (the client's own, LANDSCAPE 12).
    pub corrupt_rejected: u64,
    pub applied_count: u64,
    pub refused_count: u64,
    pub violations: Vec<String>,
}

impl Ledger {
    pub(crate) fn delivered(&mut self, _client: ClientId, _node: i32, _session: u64, _p: i32, _o: i64, _d: i16) {
        self.deliveries += 1;
    }

    /// The application acknowledged delivery `d` of (p, o) with `kind`.
    pub(crate) fn app_acked(&mut self, client: ClientId, p: i32, o: i64, d: i16, kind: AckKind) {
        *self.handed_per_offset.entry((client, p, o)).or_default() += 1;
        self.app.entry((client, p, o, d)).or_default().push(kind);
    }

    /// Delivery `d` of (p, o) went to `client` in a corrupted batch.
    pub(crate) fn corrupted(&mut self, client: ClientId, p: i32, o: i64, d: i16) {
        self.corrupt.insert((client, p, o, d));
    }

    /// A broker refused an ack (the record was not held by that session any more).
    pub(crate) fn refused(&mut self, _client: ClientId, _p: i32, _o: i64, _kind: AckKind) {
        self.refused_count += 1;
    }

    /// A broker applied `kind` to delivery `d` of (p, o) for `client`: the application must
    /// have asked for exactly that, except a RELEASE of records it never saw (the client
    /// gives back what it buffered).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn applied(&mut self, client: ClientId, node: i32, session: u64, p: i32, o: i64, d: i16, kind: AckKind) {
        self.applied_count += 1;
        *self.applied_per_offset.entry((client, p, o)).or_default() += 1;
        self.applied.entry((client, p, o, d)).or_default().push(kind);
        let asked = self.app.get(&(client, p, o, d));
        let ok = match kind {
            AckKind::Release => asked.is_none_or(|k| k.contains(&AckKind::Release) || k == &[AckKind::Renew]),
            // A record the client could not decode: rejected by the client itself.
            AckKind::Reject if self.corrupt.contains(&(client, p, o, d)) => {
                self.corrupt_rejected += 1;
                true
            }
            other => asked.is_some_and(|k| k.contains(&other)),
        };
        if !ok {
            self.violations.push(format!(
                "broker {node} session {session} applied {kind:?} to p{p} offset {o} delivery {d} of client {client}; the application asked for {asked:?}"
            ));
        }
    }

    /// The client reported the outcome of acks of `offsets` of partition `p` (the
    /// acknowledgement commit callback's view): `Ok` only as often as a broker applied one.
    pub(crate) fn completed(&mut self, client: ClientId, p: i32, offsets: &[i64], result: &Result<()>) {
        for &o in offsets {
            *self.reported_per_offset.entry((client, p, o)).or_default() += 1;
        }
        if result.is_err() {
            return;
        }
        for &o in offsets {
            let oks = self.ok_per_offset.entry((client, p, o)).or_default();
            *oks += 1;
            let applied = self.applied_per_offset.get(&(client, p, o)).copied().unwrap_or(0);
            if *oks > applied {
                self.violations.push(format!(
                    "client {client}: acks of p{p} offset {o} reported done {oks} times, but brokers applied {applied}"
                ));
            }
        }
    }

    /// A client closed successfully: every ack the application handed it was reported, with
    /// some outcome (none silently lost: LANDSCAPE bugs 1, 3, 11).
    pub(crate) fn closed(&mut self, client: ClientId) {
        let lost: Vec<String> = self
            .handed_per_offset
            .range((client, i32::MIN, i64::MIN)..=(client, i32::MAX, i64::MAX))
            .filter(|(k, n)| self.reported_per_offset.get(k).copied().unwrap_or(0) < **n)
            .map(|((_, p, o), n)| format!("p{p} offset {o} ({n} handed)"))
            .collect();
        if !lost.is_empty() {
            self.violations.push(format!(
                "client {client} closed, but acks it was handed were never reported: {}",
                lost.join(", ")
            ));
        }
    }

    /// A commit answered `Ok` for partition `p`: every ack of `p` it carried was applied.
    pub(crate) fn committed_ok(&mut self, client: ClientId, p: i32, acks: &[(i64, i16, AckKind)]) {
        for &(o, d, kind) in acks {
            let done = self.applied.get(&(client, p, o, d)).is_some_and(|k| k.contains(&kind));
            if !done {
                self.violations.push(format!(
                    "client {client}: commit reported p{p} ok, but no broker applied {kind:?} to offset {o} delivery {d}"
                ));
            }
        }
    }
}

/// Counts transmits per virtual second; a client above [`MAX_REQUESTS_PER_SECOND`] loops hot.
#[derive(Debug, Default)]
pub(crate) struct RateGuard {
    second: u64,
    counts: BTreeMap<ClientId, u32>,
}

impl RateGuard {
    /// Notes a transmit of `client` at virtual millisecond `ms`; an error past the bound.
    pub(crate) fn note(&mut self, client: ClientId, ms: u64) -> std::result::Result<(), String> {
        let s = ms / 1000;
        if s != self.second {
            self.second = s;
            self.counts.clear();
        }
        let c = self.counts.entry(client).or_default();
        *c += 1;
        if *c > MAX_REQUESTS_PER_SECOND {
            return Err(format!(
                "client {client} sent more than {MAX_REQUESTS_PER_SECOND} requests in virtual second {s}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applied_must_match_what_the_app_asked() {
        let mut l = Ledger::default();
        l.app_acked(0, 1, 5, 1, AckKind::Accept);
        l.applied(0, 1, 1, 1, 5, 1, AckKind::Accept);
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        // A release of a record the app never saw is the client giving back its buffer.
        l.applied(0, 1, 1, 1, 6, 1, AckKind::Release);
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        // An accept of another delivery than the one the app accepted is a bug.
        l.applied(0, 1, 1, 1, 5, 2, AckKind::Accept);
        assert_eq!(l.violations.len(), 1);
    }

    #[test]
    fn completions_agree_with_the_broker() {
        let mut l = Ledger::default();
        l.app_acked(0, 0, 1, 1, AckKind::Accept);
        l.applied(0, 1, 1, 0, 1, 1, AckKind::Accept);
        l.completed(0, 0, &[1], &Ok(()));
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        l.completed(0, 0, &[2], &Ok(()));
        assert_eq!(l.violations.len(), 1, "ok without an applied ack");
    }

    #[test]
    fn the_rate_guard_trips_on_a_hot_loop() {
        let mut g = RateGuard::default();
        for i in 0..MAX_REQUESTS_PER_SECOND {
            g.note(0, u64::from(i)).unwrap();
        }
        assert!(g.note(0, 999).is_err());
        assert!(g.note(0, 1000).is_ok(), "a new second starts over");
    }
}
