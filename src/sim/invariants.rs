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

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Result;
use crate::share::acks::AckKind;

use super::state::ClientId;

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
    /// The engine's RENEWs per offset: each may be reported, or not (its record's outcome
    /// may replace it while it is queued; its own outcome comes with a poll's answer).
    renews_per_offset: BTreeMap<Key, u32>,
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
    /// What applications that go through the handle's bookkeeping asked of it, per delivery
    /// (their acknowledge calls that it took; in implicit mode, the records they processed).
    intents: BTreeMap<(ClientId, i32, i64, i16), Vec<AckKind>>,
    /// Deliveries an application did not finish (its processing failed mid-batch, then it
    /// closed or was dropped): never to be ACCEPTed (LANDSCAPE bug 6).
    unfinished: BTreeSet<(ClientId, i32, i64, i16)>,
    /// Offsets with no record (compacted away): acquired like any other, acknowledged only by
    /// the client's own GAP (LANDSCAPE bug 9).
    gaps: BTreeSet<(i32, i64)>,
    /// Per client, the partitions of the last assignment it received (LANDSCAPE bug 8).
    assigned: BTreeMap<ClientId, BTreeSet<i32>>,
    /// Acks sent for partitions no longer assigned to their client, and ShareFetches that
    /// forgot partitions (how often LANDSCAPE bug 8's situation came up).
    pub moved_partition_acks: u64,
    pub forgets: u64,
    /// Acknowledgements through the handle of deliveries already sent or delivered again,
    /// refused as they must be (LANDSCAPE bug 9's late acks).
    pub stale_acks_refused: u64,
    /// GAP acknowledgements applied.
    pub gaps_acked: u64,
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

    /// The processing engine asked to RENEW delivery `d` of (p, o): a broker may apply it. Its
    /// outcome comes back with a poll's answer (`PollAnswer::renewed`), which the engine
    /// reads; not counted among the acks the commit callback must report.
    pub(crate) fn renew_asked(&mut self, client: ClientId, p: i32, o: i64, d: i16) {
        self.app.entry((client, p, o, d)).or_default().push(AckKind::Renew);
        *self.renews_per_offset.entry((client, p, o)).or_default() += 1;
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
        if kind == AckKind::Accept && self.unfinished.contains(&(client, p, o, d)) {
            self.violations.push(format!(
                "broker {node} session {session} applied Accept to p{p} offset {o} delivery {d} of client {client}, whose processing failed or never ran (LANDSCAPE bug 6: it must be released)"
            ));
        }
        let ok = match kind {
            AckKind::Release => asked.is_none_or(|k| k.contains(&AckKind::Release) || k == &[AckKind::Renew]),
            // An offset without a record, acknowledged by the client itself.
            AckKind::Gap if self.gaps.contains(&(p, o)) => {
                self.gaps_acked += 1;
                true
            }
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
    ///
    /// And never more often than the application handed acks of the offset: the client's own
    /// RELEASEs of records it never handed out are not the application's acknowledgements
    /// (issue 34). Its other own acks, GAPs and REJECTs of corrupt records, are reported.
    pub(crate) fn completed(&mut self, client: ClientId, p: i32, offsets: &[i64], result: &Result<()>) {
        for &o in offsets {
            let reported = {
                let n = self.reported_per_offset.entry((client, p, o)).or_default();
                *n += 1;
                *n
            };
            let handed = self.handed_per_offset.get(&(client, p, o)).copied().unwrap_or(0)
                + self.renews_per_offset.get(&(client, p, o)).copied().unwrap_or(0);
            if reported > handed && !self.clients_own_ack(client, p, o) {
                self.violations.push(format!(
                    "client {client}: p{p} offset {o} reported to the callback {reported} times, but the application handed {handed} acks of it (the client's own release reported as the application's)"
                ));
            }
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

    /// Whether the client acknowledges (p, o) on its own and reports it: a gap, or a record
    /// it got in a corrupt batch.
    fn clients_own_ack(&self, client: ClientId, p: i32, o: i64) -> bool {
        self.gaps.contains(&(p, o))
            || self.corrupt.range((client, p, o, i16::MIN)..=(client, p, o, i16::MAX)).next().is_some()
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

    /// Offset `o` of partition `p` has no record (a gap).
    pub(crate) fn gap(&mut self, p: i32, o: i64) {
        self.gaps.insert((p, o));
    }

    /// The application acknowledged delivery `d` of (p, o) with `kind` through the handle,
    /// which took it (in implicit mode: it processed the record, to be accepted).
    pub(crate) fn intended(&mut self, client: ClientId, p: i32, o: i64, d: i16, kind: AckKind) {
        self.intents.entry((client, p, o, d)).or_default().push(kind);
    }

    /// The application did not finish delivery `d` of (p, o): its processing failed, or it
    /// failed before it got to the record.
    pub(crate) fn unfinished(&mut self, client: ClientId, p: i32, o: i64, d: i16) {
        self.unfinished.insert((client, p, o, d));
    }

    /// The handle's bookkeeping handed this ack to the core: an ACCEPT, REJECT or RENEW must
    /// be what the application asked for that very delivery (an acknowledgement never moves
    /// to another delivery of the offset, LANDSCAPE bug 9, nor does implicit mode accept what
    /// the application did not process, bug 6). A RELEASE is always allowed (a poll, close or
    /// drop gives back what was not acknowledged). Then noted as any handed ack.
    pub(crate) fn handle_handed(&mut self, client: ClientId, p: i32, o: i64, d: i16, kind: AckKind) {
        let asked = self.intents.get(&(client, p, o, d));
        if kind != AckKind::Release && !asked.is_some_and(|k| k.contains(&kind)) {
            self.violations.push(format!(
                "client {client}: the handle sent {kind:?} for p{p} offset {o} delivery {d}; the application asked for {asked:?}"
            ));
        }
        self.app_acked(client, p, o, d, kind);
    }

    /// `client` received an assignment (a heartbeat answer without error).
    pub(crate) fn assigned(&mut self, client: ClientId, partitions: BTreeSet<i32>) {
        self.assigned.insert(client, partitions);
    }

    /// `client` sends a ShareFetch or ShareAcknowledge: counts the acks of partitions it is no
    /// longer assigned (the situation of LANDSCAPE bug 8).
    pub(crate) fn acks_sent(&mut self, client: ClientId, partitions: impl Iterator<Item = i32>) {
        let Some(assigned) = self.assigned.get(&client) else {
            return;
        };
        self.moved_partition_acks += partitions.filter(|p| !assigned.contains(p)).count() as u64;
    }

    /// `client` sends a ShareFetch that leaves its share session listing `after` (LANDSCAPE
    /// bug 8: a partition that appeared only in piggybacked acks was never forgotten, and the
    /// member acquired its records forever): only partitions of its last assignment, so
    /// nothing of a partition that moved away is acquired for it again.
    pub(crate) fn session_lists(&mut self, client: ClientId, node: i32, after: &BTreeSet<i32>) {
        let Some(assigned) = self.assigned.get(&client) else {
            return;
        };
        let stray: Vec<&i32> = after.iter().filter(|p| !assigned.contains(p)).collect();
        if !stray.is_empty() {
            self.violations.push(format!(
                "client {client}: a ShareFetch to broker {node} lists, or leaves its share session listing, partitions {stray:?} not assigned to it (assigned: {assigned:?}; LANDSCAPE bug 8)"
            ));
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
        assert_eq!(l.violations.len(), 2, "ok without an applied ack, of an ack never handed: {:?}", l.violations);
    }

    #[test]
    fn the_callback_hears_of_no_release_the_application_did_not_make() {
        // Issue 34: the client RELEASEs offset 4, which it buffered and never handed out; the
        // broker applies it (allowed), but reporting it is a violation. A gap is the client's
        // own too, and is reported.
        let mut l = Ledger::default();
        l.applied(0, 1, 1, 0, 4, 1, AckKind::Release);
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        l.gap(0, 6);
        l.applied(0, 1, 1, 0, 6, 1, AckKind::Gap);
        l.completed(0, 0, &[6], &Ok(()));
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        l.completed(0, 0, &[4], &Ok(()));
        assert_eq!(l.violations.len(), 1, "{:?}", l.violations);
        // Once the application itself acknowledges the redelivered record, one report is due.
        let mut l = Ledger::default();
        l.applied(0, 1, 1, 0, 4, 1, AckKind::Release);
        l.app_acked(0, 0, 4, 2, AckKind::Accept);
        l.applied(0, 1, 1, 0, 4, 2, AckKind::Accept);
        l.completed(0, 0, &[4], &Ok(()));
        assert!(l.violations.is_empty(), "{:?}", l.violations);
    }

    #[test]
    fn an_unfinished_record_is_never_accepted() {
        // LANDSCAPE bug 6: the application failed before it finished p0 offset 3.
        let mut l = Ledger::default();
        l.unfinished(0, 0, 3, 1);
        l.app_acked(0, 0, 3, 1, AckKind::Release);
        l.applied(0, 1, 1, 0, 3, 1, AckKind::Release);
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        l.app_acked(0, 0, 3, 1, AckKind::Accept);
        l.applied(0, 1, 1, 0, 3, 1, AckKind::Accept);
        assert!(l.violations[0].contains("LANDSCAPE bug 6"), "{:?}", l.violations);
    }

    #[test]
    fn the_handle_sends_only_what_the_application_asked_of_that_delivery() {
        let mut l = Ledger::default();
        l.intended(0, 0, 3, 1, AckKind::Accept);
        l.handle_handed(0, 0, 3, 1, AckKind::Accept);
        l.handle_handed(0, 0, 4, 1, AckKind::Release);
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        // LANDSCAPE bug 9: the accept of delivery 1 applied to delivery 2.
        l.handle_handed(0, 0, 3, 2, AckKind::Accept);
        assert_eq!(l.violations.len(), 1);
    }

    #[test]
    fn gaps_are_acknowledged_only_where_there_is_no_record() {
        let mut l = Ledger::default();
        l.gap(0, 7);
        l.applied(0, 1, 1, 0, 7, 1, AckKind::Gap);
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        assert_eq!(l.gaps_acked, 1);
        l.applied(0, 1, 1, 0, 8, 1, AckKind::Gap);
        assert_eq!(l.violations.len(), 1, "a record acknowledged as a gap");
    }

    #[test]
    fn a_session_lists_only_assigned_partitions() {
        // LANDSCAPE bug 8: after the assignment shrank to {0}, a fetch must forget 1.
        let mut l = Ledger::default();
        l.session_lists(0, 1, &[0, 1].into());
        assert!(l.violations.is_empty(), "nothing assigned yet: nothing to hold against it");
        l.assigned(0, [0].into());
        l.session_lists(0, 1, &[0].into());
        assert!(l.violations.is_empty(), "{:?}", l.violations);
        l.acks_sent(0, [1, 0].into_iter());
        assert_eq!(l.moved_partition_acks, 1);
        l.session_lists(0, 1, &[0, 1].into());
        assert!(l.violations[0].contains("LANDSCAPE bug 8"), "{:?}", l.violations);
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
