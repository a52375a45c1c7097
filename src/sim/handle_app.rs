//! The application as a user of the public handle's bookkeeping (`consumer::held::Held`, the
//! code `ShareConsumer` runs under its lock): it holds `ConsumerRecord`s and acknowledges
//! through them (explicit mode) or lets polls accept them (implicit mode), and what a poll,
//! commit, close or drop hands the core is what `Held` takes, as in the real handle.
//!
//! The scenarios it plays (`HandlePlan`, drawn in `faults.rs`):
//! - LANDSCAPE bug 6: processing fails mid-batch, then the application closes or drops its
//!   consumer. The records it did not finish are noted in the ledger; a broker that applies
//!   an ACCEPT to one of them is a violation (they must be released, and come back).
//! - LANDSCAPE bug 9: a record acknowledged again late, through a `ConsumerRecord` of an
//!   earlier poll (its acknowledgement was sent; often the offset was delivered again since):
//!   the handle must refuse it with an error, never let it land on the newer delivery. Every
//!   ack the bookkeeping hands the core is checked against what the application asked of that
//!   very delivery (`Ledger::handle_handed`).

use std::collections::{BTreeSet, VecDeque};

use rand::Rng;

use crate::consumer::driver::{AckEntry, PollAnswer};
use crate::consumer::held::{acknowledge_in_slot, Held, Unacked};
use crate::consumer::{AcknowledgeType, AcknowledgementMode, ConsumerRecord};
use crate::error::Error;
use crate::share::acks::AckKind;

use super::cluster::{record_value, TOPIC};
use super::faults::HandlePlan;
use super::invariants::Ledger;
use super::rng::SplitMix;
use super::state::ClientId;

/// Records of earlier polls kept for late acknowledgements.
const OLD_RECORDS: usize = 32;

/// One consumer handle's bookkeeping and the records the application holds.
#[derive(Default)]
pub(crate) struct HandleUser {
    plan: Option<HandlePlan>,
    client: ClientId,
    /// Tags this consumer's poll batches (as `ShareConsumer::id`).
    owner: u64,
    held: Held,
    /// The last poll's records, being processed.
    batch: Vec<ConsumerRecord>,
    /// Records of earlier polls (`stale_acks`).
    old: VecDeque<ConsumerRecord>,
    /// Deliveries renewed once already: accepted when they come back.
    renewed: BTreeSet<(i32, i64, i16)>,
}

impl std::fmt::Debug for HandleUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandleUser").field("plan", &self.plan).field("batch", &self.batch.len()).finish()
    }
}

impl HandleUser {
    pub(crate) fn new(plan: HandlePlan, client: ClientId) -> HandleUser {
        HandleUser { plan: Some(plan), client, owner: (1 << 32) | client as u64, ..Default::default() }
    }

    /// `ShareConsumer::acknowledge_with` past its checks (mode, RENEW support, closed): through
    /// the record's slot, else by its coordinates.
    fn acknowledge(&self, record: &ConsumerRecord, kind: AcknowledgeType) -> crate::error::Result<()> {
        if let Some(done) = acknowledge_in_slot(self.owner, record, kind) {
            return done;
        }
        if kind == AcknowledgeType::Renew {
            return Err(Error::InvalidArgument("RENEW needs the record".into()));
        }
        self.held.acknowledge_at(TOPIC, record.partition, record.offset, kind)
    }

    /// Whether the application holds records of the last poll (being processed).
    pub(crate) fn holds_records(&self) -> bool {
        !self.batch.is_empty()
    }

    /// Whether the brokers take RENEW.
    pub(crate) fn renew_ok(&self) -> bool {
        self.plan.is_some_and(|p| p.renew_ok)
    }

    /// Whether a failing application closes its consumer (else it drops it).
    pub(crate) fn closes_on_failure(&self) -> bool {
        self.plan.is_some_and(|p| p.fail_closes)
    }

    fn mode(&self) -> AcknowledgementMode {
        self.plan.map_or(AcknowledgementMode::Explicit, |p| p.mode)
    }

    fn explicit(&self) -> bool {
        self.mode() == AcknowledgementMode::Explicit
    }

    /// Notes what the bookkeeping took, checking each ack against what the application asked.
    fn handed(&self, acks: &[AckEntry], ledger: &mut Ledger) {
        for a in acks {
            ledger.handle_handed(self.client, a.tp.partition, a.offset, a.delivery_count, a.kind);
        }
    }

    /// What `ShareConsumer::poll` does before it asks the driver: the acks and whether
    /// renewals are pending. An error is a problem: the application acknowledged every record.
    pub(crate) fn start_poll(&mut self, ledger: &mut Ledger) -> Result<(Vec<AckEntry>, bool), String> {
        let (acks, renewing) = self.held.start_poll(self.mode()).map_err(|e| format!("poll refused: {e}"))?;
        self.handed(&acks, ledger);
        Ok((acks, renewing))
    }

    /// What `commit_sync` hands the driver (nothing to commit: empty).
    pub(crate) fn take_for_commit(&mut self, ledger: &mut Ledger) -> Vec<AckEntry> {
        let acks = self.held.take_acks(Unacked::on_poll(self.mode()));
        self.handed(&acks, ledger);
        acks
    }

    /// What `close` (and a drop) hands the driver. The batch being processed is unfinished.
    pub(crate) fn take_for_close(&mut self, ledger: &mut Ledger) -> Vec<AckEntry> {
        self.unfinished(0, ledger);
        let acks = self.held.take_acks(Unacked::ReleaseAll);
        self.handed(&acks, ledger);
        acks
    }

    /// Marks the batch's records from `from` on as not finished (LANDSCAPE bug 6).
    fn unfinished(&mut self, from: usize, ledger: &mut Ledger) {
        for r in self.batch.drain(..).skip(from) {
            ledger.unfinished(self.client, r.partition, r.offset, r.delivery_count);
        }
    }

    /// A poll's answer, held as `ShareConsumer::hand_out` holds it; returns how many records
    /// came and the problems with their values. Then a late acknowledgement of an earlier
    /// poll's record (`stale_acks`), which must be refused.
    pub(crate) fn hand_out(
        &mut self,
        answer: PollAnswer,
        rng: &mut SplitMix,
        ledger: &mut Ledger,
    ) -> (usize, Vec<String>) {
        let mut problems = Vec::new();
        self.old.extend(self.batch.drain(..));
        while self.old.len() > OLD_RECORDS {
            self.old.pop_front();
        }
        self.batch = self.held.hand_out(self.owner, answer);
        for r in &self.batch {
            let want = record_value(r.partition, r.offset);
            if r.value.as_deref() != Some(want.as_bytes()) {
                problems.push(format!("p{} offset {}: value {:?}, want {want}", r.partition, r.offset, r.value));
            }
        }
        if self.plan.is_some_and(|p| p.stale_acks) && self.explicit() && !self.old.is_empty() {
            // Preferably one delivered again by this very poll (its newer slot is live now).
            let again = self
                .old
                .iter()
                .position(|o| self.batch.iter().any(|r| (r.partition, r.offset) == (o.partition, o.offset)));
            let i = again.unwrap_or_else(|| rng.gen_range(0..self.old.len()));
            let old = &self.old[i];
            let kind = if rng.gen_bool(0.5) { AcknowledgeType::Accept } else { AcknowledgeType::Release };
            match self.acknowledge(old, kind) {
                Err(_) => ledger.stale_acks_refused += 1,
                Ok(()) => problems.push(format!(
                    "LANDSCAPE bug 9: a late {kind:?} of p{} offset {} delivery {} (acknowledged and sent{}) was taken by the handle; it must be refused",
                    old.partition,
                    old.offset,
                    old.delivery_count,
                    if again.is_some() { ", and delivered again since" } else { "" }
                )),
            }
        }
        (self.batch.len(), problems)
    }

    /// The batch is processed, each record acknowledged as the plan draws (explicit mode) or
    /// done with (implicit: the next poll or commit accepts it). With `fail`, processing fails
    /// at a record drawn at random: the rest of the batch is unfinished.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn process(
        &mut self,
        rng: &mut SplitMix,
        ledger: &mut Ledger,
        release_permille: u32,
        reject_permille: u32,
        renew: bool,
        fail: bool,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        let upto = if fail { rng.gen_range(0..self.batch.len().max(1)) } else { self.batch.len() };
        let by_offset = self.plan.is_some_and(|p| p.by_offset);
        for i in 0..upto {
            let r = &self.batch[i];
            let (p, o, d) = (r.partition, r.offset, r.delivery_count);
            if !self.explicit() {
                ledger.intended(self.client, p, o, d, AckKind::Accept);
                continue;
            }
            let roll = rng.gen_range(0..1000);
            let kind = if roll < release_permille {
                AcknowledgeType::Release
            } else if roll < release_permille + reject_permille {
                AcknowledgeType::Reject
            } else if renew && !self.renewed.contains(&(p, o, d)) {
                AcknowledgeType::Renew
            } else {
                AcknowledgeType::Accept
            };
            let (result, delivery) = if by_offset && kind != AcknowledgeType::Renew {
                // By coordinates: the newest delivery of the offset held (the last of this batch).
                let newest =
                    self.batch.iter().rev().find(|x| (x.partition, x.offset) == (p, o)).map_or(d, |x| x.delivery_count);
                (self.held.acknowledge_at(TOPIC, p, o, kind), newest)
            } else {
                (self.acknowledge(r, kind), d)
            };
            match result {
                Ok(()) => {
                    ledger.intended(self.client, p, o, delivery, AckKind::of(kind));
                    if kind == AcknowledgeType::Renew {
                        self.renewed.insert((p, o, d));
                    }
                }
                // The same offset came again later in this poll: this delivery is superseded.
                Err(Error::LockExpired { redelivered: true, .. }) => ledger.stale_acks_refused += 1,
                other => problems.push(format!("acknowledging p{p} offset {o} delivery {d} with {kind:?}: {other:?}")),
            }
        }
        if fail {
            self.unfinished(upto, ledger);
        } else {
            self.old.extend(self.batch.drain(..));
        }
        problems
    }
}
