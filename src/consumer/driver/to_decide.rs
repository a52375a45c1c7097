//! What the next `drive` must decide: one mark per decider of the core, set by the inputs and
//! the timers that can change what that decider would do, cleared when it runs.
//!
//! `drive(now)` used to run every decider after every input. Now each input marks the
//! deciders it can affect, `drive` adds the owners of every timer whose deadline is `<= now`
//! (`timers.rs`), and runs only the marked ones, in the fixed order below. A decider that
//! changes what a later one reads marks it, and the later one runs in the same `drive`; one
//! that changes what an earlier one reads marks it for the next `drive`, which a timer or an
//! input brings (where such a change leaves the earlier decider something to do, it arms
//! that decider's timer too: the leave heartbeat of a close or a missed poll interval is
//! due at once, so the shell drives again in the same instant, as before).
//!
//! A missed mark stalls a consumer (a fetch never sent, a poll never answered); an extra one
//! costs a decider that decides nothing. So where an input might matter, it marks.
//!
//! # The deciders, in the order `drive` runs them, and what each reads
//!
//! | decider | runs | reads |
//! |---|---|---|
//! | `GROUP` | `drive_group` | subscription, membership (next heartbeat), coordinator, metadata and pattern refreshes |
//! | `TOPIC_ERRORS` | `report_topic_error` | the waiting poll, `fatal`, topic errors pending, the buffer |
//! | `DELIVER` | `try_deliver` | the waiting poll (and whether it gave up), `fatal`, renewal outcomes, the buffer |
//! | `IDLE` | `release_if_idle` | the buffer, the waiting poll, `busy`, the last poll, the lock duration |
//! | `POLL_INTERVAL` | `enforce_poll_interval` | closing, member stale or active, the waiting poll, the last poll call |
//! | `SESSIONS` | `drive_sessions` | every session (in flight, backoff, queued acks, pacing), the [`Demand`](super::sessions::Demand): buffer, waiting poll, idleness, drain rate, poll size, lock, group active, `fatal`, commit waiters |
//! | `CLOSE` | `drive_close` | the close phase and deadline, requests in flight |
//! | `EPOCHS` | `tell_session_epochs` | the sessions' epochs |
//!
//! # Who marks what, and why
//!
//! Commands (`handle_command`):
//!
//! | input | marks | why |
//! |---|---|---|
//! | `Subscribe`, `SubscribePattern`, `Paused`, `Close`, the handle gone | all | rare; they change the subscription, the assignment or everything at once |
//! | `Poll` | [`ToDecide::WAITER`] | a poll waits now (or was answered at once); it grants refills, routes acks, sets the poll size and the last poll; a stale member rejoins (`GROUP`, through the assignment) |
//! | `Commit`, `Outcomes` | `SESSIONS` | acks queued, a commit waiter (urgent acks), `eager_acks` |
//! | `Requeue` | [`ToDecide::BUFFER`] | records and renewal outcomes back in the buffer: delivery and the fetch plan see them (the shell drives again after it) |
//! | `Busy` | `IDLE`, `SESSIONS` | idleness reads `busy`, and leaving the last call counts as a poll |
//! | `PollAbandoned` | `DELIVER` | the waiting poll gave up (the shell saw its receiver close): delivery drops it, which marks what reads "a poll waits" (below) |
//!
//! Events (`handle_event`):
//!
//! | input | marks | why |
//! |---|---|---|
//! | `Coordinator` | `GROUP` | the heartbeat may go now (a fatal lookup marks as `set_fatal` does) |
//! | `Heartbeat` | `GROUP`; `SESSIONS`, `POLL_INTERVAL` if the member became active or not | the next heartbeat's time; only membership's activity is read by others (an assignment, a fence or a fatal error mark through `reconcile_assignment`, `reset_session`, `set_fatal`) |
//! | `Fetch` | [`ToDecide::BUFFER`], `EPOCHS` | records in the buffer, acks answered, the session free again and its epoch moved, the lock learned |
//! | `Ack` | `SESSIONS`, `IDLE`, `EPOCHS` | acks answered, the session free and its epoch moved, the lock learned |
//! | `Metadata`, `TopicList` | all | rare; topic errors, the subscription and the assignment may change |
//!
//! What the core does on the way (`mod.rs`, `answers.rs`, `assignment.rs`, `commits.rs`,
//! `deliver.rs`), whichever input called it:
//!
//! | change | marks | why |
//! |---|---|---|
//! | the assignment mapped again (`reconcile_assignment`) | `GROUP`, `SESSIONS`, `EPOCHS` | metadata wanted or settled; fetch sets, new sessions |
//! | metadata wanted (`want_metadata`) | `GROUP` | a refresh may go now |
//! | records released or dropped from the buffer (`release_buffer`, `reset_session`) | [`ToDecide::BUFFER`] | RELEASE acks queued; what is buffered changed |
//! | a session reset (`reset_session`) | `SESSIONS`, `EPOCHS`, `CLOSE` | its epoch, its acks, its request in flight |
//! | a renewal's outcome noted (`note_renewals`) | `DELIVER` | a poll waiting for renewals gets its answer |
//! | a fatal error (`set_fatal`) | `DELIVER`, `SESSIONS` | the poll gets the error; nothing more is fetched |
//!
//! Deciders marking deciders (`drive`):
//!
//! | decider | marks | why |
//! |---|---|---|
//! | `TOPIC_ERRORS`, `DELIVER` answered the poll (or dropped one that gave up) | `IDLE`, `POLL_INTERVAL`, `SESSIONS` | no poll waits: idleness, the poll interval and the fetch plan read that |
//! | `DELIVER` | `SESSIONS` | records handed out free buffer room and feed the drain rate |
//! | `POLL_INTERVAL` left the group | `GROUP`, `SESSIONS`, `EPOCHS` | the leave heartbeat; sessions closed and reset |
//! | `SESSIONS` | `EPOCHS` | a request sent moves its session's epoch |
//! | `CLOSE` | `GROUP`, `EPOCHS` | the leave heartbeat (or heartbeats stopped); final acks end the sessions |
//!
//! And `drive` itself marks:
//! - the owner of every armed timer whose deadline is `<= now` (see [`ToDecide::of_timer`]);
//! - `CLOSE` on every drive while closing: each phase waits for requests in flight, which any
//!   answer may end (closing is short, so this costs nothing worth a finer rule).
//!
//! # Time without a timer
//!
//! Some decisions change as time passes with no timer of their own (`timers.rs`): a buffer
//! ageing past three quarters of its lock stops a prefetch, a decaying drain rate shrinks
//! the next fetch, an application going idle stops a refill, buffered records whose lock
//! lapsed are dropped before a delivery. Each only *stops* an action (or, for the expired
//! records, acts only as part of a delivery), so a decider that decided nothing before
//! decides nothing later for want of time alone: the next input that marks it finds it so,
//! and every input that could make it act marks it (the tables above).

use std::fmt;
use std::ops::BitOr;

use super::timers::Timer;
use super::{Command, Event};

/// A set of deciders (one bit each) that the next `drive` must run.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ToDecide(u8);

impl ToDecide {
    pub(crate) const NONE: ToDecide = ToDecide(0);
    /// `drive_group`: metadata, topic listings, coordinator lookups, heartbeats.
    pub(crate) const GROUP: ToDecide = ToDecide(1 << 0);
    /// `report_topic_error`: a topic refusal or corrupt batch for the waiting poll.
    pub(crate) const TOPIC_ERRORS: ToDecide = ToDecide(1 << 1);
    /// `try_deliver`: buffered records (or the error, or renewals) to the waiting poll.
    pub(crate) const DELIVER: ToDecide = ToDecide(1 << 2);
    /// `release_if_idle`: the buffer back to the group once the application stopped.
    pub(crate) const IDLE: ToDecide = ToDecide(1 << 3);
    /// `enforce_poll_interval`: leave the group when no poll came in time.
    pub(crate) const POLL_INTERVAL: ToDecide = ToDecide(1 << 4);
    /// `drive_sessions`: what each broker's share session sends.
    pub(crate) const SESSIONS: ToDecide = ToDecide(1 << 5);
    /// `drive_close`: the close's phases and deadline.
    pub(crate) const CLOSE: ToDecide = ToDecide(1 << 6);
    /// `tell_session_epochs`: the open sessions' epochs, if they changed.
    pub(crate) const EPOCHS: ToDecide = ToDecide(1 << 7);
    pub(crate) const ALL: ToDecide = ToDecide(u8::MAX);

    /// What reads the buffer: it gained, lost or got back records.
    pub(crate) const BUFFER: ToDecide =
        ToDecide(Self::TOPIC_ERRORS.0 | Self::DELIVER.0 | Self::IDLE.0 | Self::SESSIONS.0);
    /// What reads the waiting poll: one came (or went).
    pub(crate) const WAITER: ToDecide = ToDecide(Self::BUFFER.0 | Self::POLL_INTERVAL.0);
    /// What reads whether a poll waits, once none does.
    pub(crate) const WAITER_GONE: ToDecide = ToDecide(Self::IDLE.0 | Self::POLL_INTERVAL.0 | Self::SESSIONS.0);

    const NAMES: [&'static str; 8] =
        ["GROUP", "TOPIC_ERRORS", "DELIVER", "IDLE", "POLL_INTERVAL", "SESSIONS", "CLOSE", "EPOCHS"];

    /// The decider that acts when `timer` expires.
    pub(crate) fn of_timer(timer: Timer) -> ToDecide {
        match timer {
            Timer::Heartbeat | Timer::Metadata | Timer::Pattern => ToDecide::GROUP,
            Timer::SessionRetry(_) | Timer::Pace => ToDecide::SESSIONS,
            Timer::Idle => ToDecide::IDLE,
            Timer::PollInterval => ToDecide::POLL_INTERVAL,
            Timer::Close => ToDecide::CLOSE,
        }
    }

    /// What a command can change (the commands' table above).
    pub(crate) fn of_command(cmd: &Command) -> ToDecide {
        match cmd {
            Command::Subscribe(_) | Command::SubscribePattern(_) | Command::Paused(_) | Command::Close { .. } => {
                ToDecide::ALL
            }
            Command::Poll { .. } => ToDecide::WAITER,
            Command::Commit { .. } | Command::Outcomes(_) | Command::AcquireMode { .. } => ToDecide::SESSIONS,
            Command::Requeue(_) => ToDecide::BUFFER,
            Command::PollAbandoned(_) => ToDecide::DELIVER,
            Command::Busy(_) => ToDecide::IDLE | ToDecide::SESSIONS,
        }
    }

    /// What a finished request can change (the events' table above; a heartbeat's answer
    /// marks more when the member's activity changed, `on_heartbeat`).
    pub(crate) fn of_event(ev: &Event) -> ToDecide {
        match ev {
            Event::Coordinator(_) | Event::Heartbeat(_) => ToDecide::GROUP,
            Event::Fetch { .. } => ToDecide::BUFFER | ToDecide::EPOCHS,
            Event::Ack { .. } => ToDecide::SESSIONS | ToDecide::IDLE | ToDecide::EPOCHS,
            Event::Metadata(_) | Event::TopicList(_) => ToDecide::ALL,
        }
    }

    pub(crate) fn mark(&mut self, d: ToDecide) {
        self.0 |= d.0;
    }

    /// Whether all of `d` is marked.
    #[cfg(test)]
    pub(crate) fn contains(self, d: ToDecide) -> bool {
        self.0 & d.0 == d.0
    }

    /// Whether `d` is marked; clears it (its decider runs now).
    pub(crate) fn take(&mut self, d: ToDecide) -> bool {
        let marked = self.0 & d.0 != 0;
        self.0 &= !d.0;
        marked
    }
}

impl BitOr for ToDecide {
    type Output = ToDecide;
    fn bitor(self, rhs: ToDecide) -> ToDecide {
        ToDecide(self.0 | rhs.0)
    }
}

impl fmt::Debug for ToDecide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = (0..8).filter(|i| self.0 & (1 << i) != 0).map(|i| Self::NAMES[i]).collect();
        if names.is_empty() {
            return f.write_str("NONE");
        }
        f.write_str(&names.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_clears_only_what_it_takes() {
        let mut d = ToDecide::GROUP | ToDecide::SESSIONS;
        assert!(d.take(ToDecide::SESSIONS));
        assert!(!d.take(ToDecide::SESSIONS));
        assert_eq!(d, ToDecide::GROUP);
        assert_eq!(format!("{d:?}"), "GROUP");
        assert_eq!(format!("{:?}", ToDecide::IDLE | ToDecide::EPOCHS), "IDLE | EPOCHS");
        assert!(ToDecide::WAITER.contains(ToDecide::BUFFER | ToDecide::POLL_INTERVAL));
        assert!(ToDecide::ALL.contains(ToDecide::EPOCHS) && !ToDecide::NONE.contains(ToDecide::GROUP));
    }
}
