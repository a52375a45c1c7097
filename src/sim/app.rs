//! The application model: one consumer's user code, speaking to the driver core only through
//! `Command`s; each command that wants an answer carries a `ReplyId`, and the runner hands
//! the application the core's replies ([`Reply`]) before each of its steps (no runtime, no
//! waiting). A poll that gives up says so (`Command::PollAbandoned`), as the shell does
//! when the handle's poll drops its receiver.
//!
//! In most seeds it plays the public handle's part too (it builds the `AckEntry`s itself,
//! explicitly); in others it goes through the handle's own bookkeeping (`handle_app.rs`,
//! implicit or explicit mode). It polls, processes each record for a while, acknowledges it
//! (ACCEPT mostly; RELEASE or REJECT in some seeds; RENEW first in others), commits now and
//! then, and closes at the end. Faulty plans make it stall past the lock, hand in its acks a
//! poll late, crash, fail mid-batch, or acknowledge stale records.

use std::time::{Duration, Instant};

use crate::consumer::driver::{AckEntry, Command, Delivered, PollAnswer, ReplyId};
use crate::share::acks::AckKind;
use rand::Rng;

use super::cluster::record_value;
use super::engine_app::EngineApp;
use super::faults::{AppApi, AppPlan};
use super::handle_app::HandleUser;
use super::invariants::Ledger;
use super::reply::Reply;
use super::rng::{mix, SplitMix};
use super::state::ClientId;

/// How long a poll waits before the application gives up and polls again.
pub(crate) const POLL_TIMEOUT: Duration = Duration::from_secs(1);
/// The close timeout the application gives.
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the application is.
#[derive(Debug)]
enum Phase {
    /// Will do its next thing at this time.
    Idle(Instant),
    Polling {
        id: ReplyId,
        until: Instant,
        renewing: bool,
    },
    Processing {
        until: Instant,
        records: Vec<Delivered>,
    },
    Committing {
        id: ReplyId,
        acks: Vec<AckEntry>,
    },
    Closing {
        id: ReplyId,
        deadline: Instant,
    },
    Closed,
    /// Dropped without close.
    Crashed,
}

/// One consumer's application.
#[derive(Debug)]
pub(crate) struct App {
    pub client: ClientId,
    calm_from: Instant,
    plan: AppPlan,
    phase: Phase,
    /// Acks for the next poll, commit or close.
    acks: Vec<AckEntry>,
    /// Acks held back one more poll (`late_acks`).
    late: Vec<AckEntry>,
    polls: u32,
    /// Records whose RENEW was handed in: accepted once the renewal succeeds.
    renewals: Vec<Delivered>,
    rng: SplitMix,
    /// Records received, for the report.
    pub received: u64,
    /// A close that did not finish in time, or a problem with what a poll returned.
    pub problems: Vec<String>,
    /// What the client reported that is allowed but worth a look (a close's error).
    pub notes: Vec<String>,
    /// The close answered Ok: everything it had to do is done.
    pub closed_ok: bool,
    /// The processing engine (`AppApi::Engine`), if so: every call goes to it.
    engine: Option<Box<EngineApp>>,
    /// Through the handle's bookkeeping (`AppApi::Handle`), if so.
    handle: Option<HandleUser>,
    /// When its processing fails (`HandlePlan::fail_at`; only the first consumers fail).
    fail_at: Option<Instant>,
    /// It failed and closed or dropped its consumer: a new one is to join.
    pub replace: bool,
    /// The id of the last command that wants an answer (ids count up from 1).
    last_id: u64,
    /// The reply to the command it waits for, once the core sent it and until it is read.
    reply: Option<(ReplyId, Reply)>,
}

impl App {
    /// `calm_from`: when the faults end (the application stops stalling then too).
    pub(crate) fn new(client: ClientId, plan: AppPlan, seed: u64, now: Instant, calm_from: Instant) -> App {
        let engine = match plan.api {
            AppApi::Engine(e) => {
                Some(Box::new(EngineApp::new(client, e, client < plan.consumers, seed, now, calm_from)))
            }
            _ => None,
        };
        let (handle, fail_at) = match plan.api {
            AppApi::Entries | AppApi::Engine(_) => (None, None),
            AppApi::Handle(h) => {
                (Some(HandleUser::new(h, client)), h.fail_at.filter(|_| client < plan.consumers).map(|d| now + d))
            }
        };
        App {
            engine,
            handle,
            fail_at,
            replace: false,
            calm_from,
            client,
            plan,
            phase: Phase::Idle(now),
            acks: Vec::new(),
            late: Vec::new(),
            polls: 0,
            renewals: Vec::new(),
            rng: SplitMix::new(mix(seed ^ ((client as u64) << 32))),
            received: 0,
            problems: Vec::new(),
            notes: Vec::new(),
            closed_ok: false,
            last_id: 0,
            reply: None,
        }
    }

    /// A new id for a command that wants an answer.
    fn next_id(&mut self) -> ReplyId {
        next_id(&mut self.last_id)
    }

    /// The core replied to command `id`. A reply to a command it waits for no more (a poll
    /// it left for a close) is dropped, as the handle drops a receiver with its value.
    pub(crate) fn replied(&mut self, id: ReplyId, reply: Reply) {
        if let Some(e) = self.engine.as_mut() {
            return e.replied(id, reply);
        }
        let waits = match &self.phase {
            Phase::Polling { id: w, .. } | Phase::Committing { id: w, .. } | Phase::Closing { id: w, .. } => *w == id,
            _ => false,
        };
        if waits {
            self.reply = Some((id, reply));
        }
    }

    /// The reply to command `id`, if it came.
    fn take_reply(&mut self, id: ReplyId) -> Option<Reply> {
        match self.reply.take() {
            Some((of, reply)) if of == id => Some(reply),
            other => {
                self.reply = other;
                None
            }
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        if let Some(e) = self.engine.as_ref() {
            return e.is_closed();
        }
        matches!(self.phase, Phase::Closed | Phase::Crashed)
    }

    /// When the application next acts on its own (a timer), if it waits for one.
    pub(crate) fn wakeup(&self) -> Option<Instant> {
        if let Some(e) = self.engine.as_ref() {
            return e.wake;
        }
        match &self.phase {
            Phase::Idle(t) => Some(*t),
            Phase::Polling { until, .. } => Some(*until),
            Phase::Processing { until, .. } => Some(*until),
            Phase::Closing { deadline, .. } => Some(*deadline),
            _ => None,
        }
    }

    /// Where the application is, in a word (for reports).
    pub(crate) fn phase_name(&self) -> &'static str {
        if let Some(e) = self.engine.as_ref() {
            return e.phase_name();
        }
        match self.phase {
            Phase::Idle(_) => "idle",
            Phase::Polling { .. } => "polling",
            Phase::Processing { .. } => "processing",
            Phase::Committing { .. } => "committing",
            Phase::Closing { .. } => "closing",
            Phase::Closed => "closed",
            Phase::Crashed => "crashed",
        }
    }

    /// The application dies: its consumer is dropped without close. Through the handle, the
    /// drop releases what it held (`Drop for ShareConsumer`): the command for the core.
    pub(crate) fn crash(&mut self, now: Instant, ledger: &mut Ledger) -> Vec<Command> {
        if let Some(e) = self.engine.as_mut() {
            return e.crash(now);
        }
        let mut out: Vec<Command> = self.leave_commit().into_iter().collect();
        self.phase = Phase::Crashed;
        if let Some(h) = self.handle.as_mut() {
            let acks = h.take_for_close(ledger);
            out.push(Command::Close { acks, deadline: now + Duration::from_secs(5), id: None });
        }
        out
    }

    /// A call to the engine application; what it found and whether it is to be replaced
    /// come back into this application's fields.
    fn through_engine(
        &mut self,
        f: impl FnOnce(&mut EngineApp, &mut Ledger) -> Vec<Command>,
        ledger: &mut Ledger,
    ) -> Vec<Command> {
        let Some(e) = self.engine.as_mut() else { return Vec::new() };
        let out = f(e, ledger);
        self.problems.append(&mut e.problems);
        self.closed_ok |= e.closed_ok;
        self.replace |= std::mem::take(&mut e.replace);
        out
    }

    /// A commit the application gives up (it crashes or closes meanwhile): as the dropped
    /// `commit_sync` future's `BusyGuard`, the application leaves the call first.
    fn leave_commit(&self) -> Option<Command> {
        matches!(self.phase, Phase::Committing { .. }).then_some(Command::Busy(false))
    }

    /// Starts closing with the acks it has (unacknowledged records are released: the
    /// handle's close does that).
    pub(crate) fn close(&mut self, now: Instant, ledger: &mut Ledger) -> Vec<Command> {
        if self.engine.is_some() {
            return self.through_engine(|e, l| e.close(now, l), ledger);
        }
        if self.is_closed() || matches!(self.phase, Phase::Closing { .. }) {
            return Vec::new();
        }
        let mut out: Vec<Command> = self.leave_commit().into_iter().collect();
        if let Phase::Processing { records, .. } = std::mem::replace(&mut self.phase, Phase::Closed) {
            for d in records {
                self.acks.push(ack_of(&d, AckKind::Release, None));
            }
        }
        let acks = if let Some(h) = self.handle.as_mut() {
            h.take_for_close(ledger)
        } else {
            let mut acks = std::mem::take(&mut self.late);
            acks.append(&mut self.acks);
            self.note(&acks, ledger);
            acks
        };
        let id = self.next_id();
        let deadline = now + CLOSE_TIMEOUT;
        self.phase = Phase::Closing { id, deadline };
        out.push(Command::Close { acks, deadline, id: Some(id) });
        out
    }

    /// Takes what the core answered, and does the next thing if its time has come. Returns
    /// the commands to hand the core.
    pub(crate) fn step(&mut self, now: Instant, ledger: &mut Ledger) -> Vec<Command> {
        if self.engine.is_some() {
            return self.through_engine(|e, l| e.step(now, l), ledger);
        }
        let mut out = Vec::new();
        loop {
            let before = out.len();
            let progressed = self.advance(now, ledger, &mut out);
            if !progressed && out.len() == before {
                return out;
            }
        }
    }

    fn advance(&mut self, now: Instant, ledger: &mut Ledger, out: &mut Vec<Command>) -> bool {
        match std::mem::replace(&mut self.phase, Phase::Closed) {
            Phase::Idle(t) if t <= now && self.handle.is_some() => {
                self.polls += 1;
                self.poll_through_handle(now, ledger, out);
                true
            }
            Phase::Idle(t) if t <= now => {
                self.polls += 1;
                let commit = self.plan.commit_every > 0 && self.polls.is_multiple_of(self.plan.commit_every);
                if commit && !self.acks.is_empty() {
                    let acks = std::mem::take(&mut self.acks);
                    self.note(&acks, ledger);
                    let id = self.next_id();
                    out.push(Command::Commit { acks: acks.clone(), id: Some(id) });
                    // As `commit_sync`: the application waits inside it (`BusyGuard`).
                    out.push(Command::Busy(true));
                    self.phase = Phase::Committing { id, acks };
                    return true;
                }
                let mut acks = if self.plan.late_acks {
                    std::mem::replace(&mut self.late, std::mem::take(&mut self.acks))
                } else {
                    std::mem::take(&mut self.acks)
                };
                // As the handle: a poll waits for renewals while any is pending.
                let renewing = acks.iter().any(|a| a.kind == AckKind::Renew) || !self.renewals.is_empty();
                if renewing {
                    // RENEWs go at once, never held back.
                    acks.append(&mut self.late);
                }
                self.note(&acks, ledger);
                let id = self.next_id();
                out.push(Command::Poll { max: self.plan.max_poll_records, wait: true, renewing, acks, id });
                self.phase = Phase::Polling { id, until: now + POLL_TIMEOUT, renewing };
                true
            }
            Phase::Polling { id, until, renewing } => match self.take_reply(id) {
                Some(Reply::Poll(Ok(answer))) if self.handle.is_some() => {
                    self.take_through_handle(answer, now, ledger);
                    true
                }
                Some(Reply::Poll(Ok(answer))) => {
                    self.take(answer, now, renewing);
                    true
                }
                Some(Reply::Poll(Err(e))) => {
                    // Poll errors are the client telling the application something (a
                    // refused topic, a fatal error): note it, poll again a little later.
                    self.problems.push(format!("poll failed: {e}"));
                    self.phase = Phase::Idle(now + Duration::from_millis(100));
                    true
                }
                None if now < until => {
                    self.phase = Phase::Polling { id, until, renewing };
                    false
                }
                // The poll timed out (or got another command's reply, which cannot be): the
                // handle drops its receiver; what the core sends meanwhile goes back into its
                // buffer.
                _ => {
                    out.push(Command::PollAbandoned(id));
                    self.phase = Phase::Idle(now);
                    true
                }
            },
            Phase::Processing { until, .. } if until <= now && self.handle.is_some() => {
                self.process_through_handle(now, ledger, out);
                true
            }
            Phase::Processing { until, records } if until <= now => {
                self.process(records, ledger);
                self.phase = Phase::Idle(now);
                true
            }
            Phase::Committing { id, acks } => match self.take_reply(id) {
                Some(Reply::Commit(results)) => {
                    for (tp, r) in results.iter() {
                        if r.is_ok() {
                            let mine: Vec<(i64, i16, AckKind)> = acks
                                .iter()
                                .filter(|a| a.tp.partition == tp.partition && a.kind != AckKind::Renew)
                                .map(|a| (a.offset, a.delivery_count, a.kind))
                                .collect();
                            ledger.committed_ok(self.client, tp.partition, &mine);
                        }
                    }
                    out.push(Command::Busy(false));
                    self.phase = Phase::Idle(now);
                    true
                }
                None => {
                    self.phase = Phase::Committing { id, acks };
                    false
                }
                Some(_) => {
                    self.problems.push("commit answered with another command's reply".into());
                    out.push(Command::Busy(false));
                    self.phase = Phase::Idle(now);
                    true
                }
            },
            Phase::Closing { id, deadline } => match self.take_reply(id) {
                Some(Reply::Close(r)) => {
                    // In time is what matters: a close may report what it could not finish
                    // (a leave stuck behind a heartbeat whose answer was lost).
                    match r {
                        Ok(()) => self.closed_ok = true,
                        Err(e) => self.notes.push(format!("close: {e}")),
                    }
                    self.phase = Phase::Closed;
                    true
                }
                None if now <= deadline + Duration::from_millis(1) => {
                    self.phase = Phase::Closing { id, deadline };
                    false
                }
                _ => {
                    self.problems.push(format!("close did not finish within its timeout ({CLOSE_TIMEOUT:?})"));
                    self.phase = Phase::Closed;
                    true
                }
            },
            other => {
                self.phase = other;
                false
            }
        }
    }

    /// A poll or commit through the handle's bookkeeping (`ShareConsumer::poll` /
    /// `commit_sync`): the acks come out of the held set as the mode says.
    fn poll_through_handle(&mut self, now: Instant, ledger: &mut Ledger, out: &mut Vec<Command>) {
        let Some(h) = self.handle.as_mut() else { return };
        let commit = self.plan.commit_every > 0 && self.polls.is_multiple_of(self.plan.commit_every);
        if commit {
            let acks = h.take_for_commit(ledger);
            if !acks.is_empty() {
                let id = next_id(&mut self.last_id);
                out.push(Command::Commit { acks: acks.clone(), id: Some(id) });
                out.push(Command::Busy(true));
                self.phase = Phase::Committing { id, acks };
                return;
            }
        }
        match h.start_poll(ledger) {
            Ok((acks, renewing)) => {
                let id = next_id(&mut self.last_id);
                out.push(Command::Poll { max: self.plan.max_poll_records, wait: true, renewing, acks, id });
                self.phase = Phase::Polling { id, until: now + POLL_TIMEOUT, renewing };
            }
            Err(e) => {
                self.problems.push(e);
                self.phase = Phase::Idle(now + Duration::from_millis(100));
            }
        }
    }

    /// A poll answered, through the handle's bookkeeping: its records are held and processed
    /// for a while.
    fn take_through_handle(&mut self, answer: PollAnswer, now: Instant, ledger: &mut Ledger) {
        let Some(h) = self.handle.as_mut() else { return };
        let (n, problems) = h.hand_out(answer, &mut self.rng, ledger);
        self.problems.extend(problems);
        self.received += n as u64;
        let mut busy = self.plan.per_record * n as u32;
        if let Some(s) = self.plan.stall {
            if n > 0 && now < self.calm_from && self.rng.gen_ratio(1, 20) {
                busy += s;
            }
        }
        self.phase = Phase::Processing { until: now + busy, records: Vec::new() };
    }

    /// The batch is processed through the handle, or processing fails mid-batch (once, before
    /// the faults end: LANDSCAPE bug 6); then the application closes or drops its consumer,
    /// and a new one joins.
    fn process_through_handle(&mut self, now: Instant, ledger: &mut Ledger, out: &mut Vec<Command>) {
        let Some(h) = self.handle.as_mut() else { return };
        let fail = self.fail_at.is_some_and(|t| t <= now) && now < self.calm_from && h.holds_records();
        let renew = self.plan.renew && h.renew_ok() && self.rng.gen_ratio(1, 4);
        let (release, reject) = (self.plan.release_permille, self.plan.reject_permille);
        let problems = h.process(&mut self.rng, ledger, release, reject, renew, fail);
        self.problems.extend(problems);
        self.phase = Phase::Idle(now);
        if !fail {
            return;
        }
        self.fail_at = None;
        self.replace = true;
        let closes = h.closes_on_failure();
        if closes {
            out.extend(self.close(now, ledger));
        } else {
            out.extend(self.crash(now, ledger));
        }
    }

    /// A poll answered: renewal outcomes become acks, records are processed for a while.
    fn take(&mut self, answer: PollAnswer, now: Instant, _renewing: bool) {
        for r in answer.renewed {
            // A renewed record is accepted now; a failed renewal lost the record (it comes
            // back by redelivery).
            if let Some(a) = self.renewals.iter().position(|d| d.tp == r.tp && d.record.offset == r.offset) {
                let d = self.renewals.swap_remove(a);
                if r.result.is_ok() {
                    self.acks.push(ack_of(&d, AckKind::Accept, r.lock_deadline));
                }
            }
        }
        let n = answer.records.len();
        self.received += n as u64;
        for d in &answer.records {
            let want = record_value(d.tp.partition, d.record.offset);
            if d.record.value.as_deref() != Some(want.as_bytes()) {
                self.problems.push(format!(
                    "p{} offset {}: value {:?}, want {want}",
                    d.tp.partition, d.record.offset, d.record.value
                ));
            }
        }
        let mut busy = self.plan.per_record * n as u32;
        if let Some(s) = self.plan.stall {
            if n > 0 && now < self.calm_from && self.rng.gen_ratio(1, 20) {
                busy += s;
            }
        }
        self.phase = Phase::Processing { until: now + busy, records: answer.records };
    }

    /// The records are processed: each gets its acknowledgement.
    fn process(&mut self, records: Vec<Delivered>, _ledger: &mut Ledger) {
        let renew = self.plan.renew && self.rng.gen_ratio(1, 4);
        for d in records {
            let roll = self.rng.gen_range(0..1000);
            let kind = if roll < self.plan.release_permille {
                AckKind::Release
            } else if roll < self.plan.release_permille + self.plan.reject_permille {
                AckKind::Reject
            } else if renew {
                AckKind::Renew
            } else {
                AckKind::Accept
            };
            self.acks.push(ack_of(&d, kind, None));
            if kind == AckKind::Renew {
                self.renewals.push(d);
            }
        }
    }

    /// Notes in the ledger the acks handed to the core.
    fn note(&self, acks: &[AckEntry], ledger: &mut Ledger) {
        for a in acks {
            ledger.app_acked(self.client, a.tp.partition, a.offset, a.delivery_count, a.kind);
        }
    }
}

/// The id after `last` (a borrow of the counter alone, for where the handle is borrowed).
fn next_id(last: &mut u64) -> ReplyId {
    *last += 1;
    ReplyId(*last)
}

/// The acknowledgement of a delivered record, as the handle builds it.
fn ack_of(d: &Delivered, kind: AckKind, renewed_until: Option<Instant>) -> AckEntry {
    AckEntry {
        tp: d.tp,
        offset: d.record.offset,
        delivery_count: d.record.delivery_count,
        lock_deadline: renewed_until.or(d.record.lock_deadline),
        kind,
        node: d.node,
        generation: d.generation,
        len: 1,
    }
}
