//! What goes in and out of the engine's core as values: the [`Event`]s it emits (taken with
//! `EngineCore::poll_event`, performed by the shell or the simulation), and how a handler
//! call ended ([`Finished`]), named by the [`UnitId`] its `Event::Start` carried.

use crate::acquire_mode::AcquireMode;
use crate::consumer::driver::AckEntry;
use crate::processor::{Delivery, Outcome};

/// Names one handler call from its `Event::Start` to its end (`handle_finished`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct UnitId {
    pub(super) slot: usize,
    pub(super) serial: u64,
}

/// How a handler call ended.
#[derive(Debug)]
pub(crate) enum Finished {
    /// A per-record call answered (no allocation per record on the hot path).
    One(Outcome),
    /// The handler answered: one outcome per record, in order (missing ones: RELEASE). A
    /// per-record call answers one.
    Outcomes(Vec<Outcome>),
    /// A batch handler asked the engine to stop: the outcomes of the records it finished
    /// before (`BatchHandler::outcomes_at_stop`), the others are released.
    Stopped(String, Vec<Outcome>),
    /// The call panicked (its records are released).
    Panicked,
    /// The call was aborted at the engine's end (`Event::AbortHandlers`).
    Aborted,
}

/// One thing the core decided, for the world outside it.
#[derive(Debug)]
pub(crate) enum Event {
    /// Set the consumer's acquisition mode (at start): `sized` fetches ask for the room the
    /// engine asks for.
    AcquireMode { mode: AcquireMode, sized: bool },
    /// Start a handler call on these records (one for the per-record form).
    Start { unit: UnitId, deliveries: Vec<Delivery> },
    /// Poll the consumer for at most `max` records, with these acknowledgements; `wait`: the
    /// poll waits for records; `renewing`: it comes back at once with renewal outcomes (the
    /// keep-alive). Its answer comes in through `handle_poll_answer` (or
    /// `handle_poll_failed`), unless the core gives it up first (`ExpirePoll`).
    Poll { max: usize, wait: bool, renewing: bool, acks: Vec<AckEntry> },
    /// Hand these acknowledgements to the consumer now (outcomes, RENEWs, RELEASEs).
    Acknowledge(Vec<AckEntry>),
    /// The poll under way ran out of time (or the engine ends): stop waiting for it, and
    /// hand in its answer if one came meanwhile (`handle_poll_answer`).
    ExpirePoll,
    /// A handler runs (true) or none does: the consumer must not take the engine for an
    /// application that stopped taking records (its keep-alive polls take none while every
    /// slot is busy) and give the records it buffered back to the group.
    Busy(bool),
    /// Abort every handler call still running; each ends with `Finished::Aborted` (or
    /// `Panicked`, or its outcomes if it ended first).
    AbortHandlers,
    /// Close the consumer with these last acknowledgements (it releases everything else it
    /// holds), then `handle_closed`. The last event.
    Close(Vec<AckEntry>),
}
