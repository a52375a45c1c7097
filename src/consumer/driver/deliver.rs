//! Handing buffered records to a waiting poll, and giving back records nobody will process.

use std::time::Instant;

use super::{Delivered, DriverCore, Fetched, PollAnswer, PollWaiter};

impl DriverCore {
    /// Answers a waiting poll if there is something to answer with.
    pub(super) fn try_deliver(&mut self, now: Instant) {
        let Some(w) = &self.waiter else { return };
        if w.abandoned {
            self.waiter = None; // the poll timed out or was woken up
            return;
        }
        if let Some(e) = &self.fatal {
            let e = e.clone();
            if let Some(w) = self.waiter.take() {
                self.reply_poll(w.id, Err(e));
            }
            return;
        }
        if w.renewing {
            // Renewals pending: no new records until one completes (as in Java 4.4).
            if self.renewed.is_empty() {
                return;
            }
            if let Some(w) = self.waiter.take() {
                self.answer(w, Vec::new());
            }
            return;
        }
        self.drop_expired(now);
        if self.buffer.is_empty() {
            return;
        }
        let Some(w) = self.waiter.take() else { return };
        // A consumer's poll asks for `max.poll.records` (500 by default): that much room, at
        // once. An engine asks for thousands (its prefetch); a vector grown by doubling past
        // 1024 copied every record once or twice more (95 instructions a record in the sink),
        // so such a poll counts what the buffer holds first (a few fetched batches).
        let room = if w.max <= 1024 { w.max } else { self.room_for(w.max) };
        let mut out: Vec<Delivered> = Vec::with_capacity(room);
        while out.len() < w.max {
            let Some(front) = self.buffer.front_mut() else {
                break;
            };
            let take = (w.max - out.len()).min(front.records.len());
            for record in front.records.drain(..take) {
                out.push(Delivered {
                    record,
                    tp: front.tp,
                    node: front.node,
                    generation: front.generation,
                    batch: front.batch,
                });
            }
            self.sessions.delivered(front.node, take);
            if front.records.is_empty() {
                self.buffer.pop_front();
            }
        }
        self.drain.record(out.len(), now);
        if !out.is_empty() {
            self.sessions.poll_served();
        }
        // The application has these now: its idle time counts from here.
        self.activity.last_poll = Some(now);
        self.answer(w, out);
    }

    /// The records an answer of at most `max` takes from the buffer (counted by batch, as far
    /// as `max`).
    fn room_for(&self, max: usize) -> usize {
        let mut room = 0;
        for b in &self.buffer {
            room += b.records.len();
            if room >= max {
                return max;
            }
        }
        room
    }

    /// Answers a poll with `records` and the renewal outcomes noted so far, or with the fatal
    /// error. A poll that gave up by the time the shell sends this gets nothing: the shell
    /// hands it all back (`Command::Requeue`) for the next one.
    pub(super) fn answer(&mut self, w: PollWaiter, records: Vec<Delivered>) {
        let answer = PollAnswer { records, renewed: std::mem::take(&mut self.renewed) };
        let answer = self.fatal.clone().map_or(Ok(answer), Err);
        self.reply_poll(w.id, answer);
    }

    /// Takes back what a poll could not hand out: records to the front of the buffer,
    /// renewal outcomes for the next poll.
    pub(super) fn requeue(&mut self, back: PollAnswer) {
        let mut renewed = back.renewed;
        renewed.append(&mut self.renewed);
        self.renewed = renewed;
        for d in back.records.into_iter().rev() {
            self.sessions.handed_back(d.node, 1);
            match self.buffer.front_mut() {
                Some(f) if f.tp == d.tp && f.node == d.node && f.generation == d.generation && f.batch == d.batch => {
                    f.records.push_front(d.record)
                }
                _ => self.buffer.push_front(Fetched {
                    tp: d.tp,
                    node: d.node,
                    generation: d.generation,
                    batch: d.batch,
                    records: std::iter::once(d.record).collect(),
                }),
            }
        }
    }

    /// Buffered records whose lock has surely expired are not ours any more: handing them out
    /// would only earn INVALID_RECORD_STATE on their acks. Drop them (the broker redelivers).
    ///
    /// Every record of one `Fetched` came in one response and shares its lock deadline, so
    /// one look per run suffices (this runs on every poll, over everything buffered).
    fn drop_expired(&mut self, now: Instant) {
        let expired = |f: &Fetched| f.records.front().and_then(|r| r.lock_deadline).is_some_and(|d| d <= now);
        let dropped: usize = self.buffer.iter().filter(|f| expired(f)).map(|f| f.records.len()).sum();
        if dropped > 0 {
            self.buffer.retain(|f| !expired(f));
            tracing::debug!(dropped, "buffered records expired before any poll took them");
        }
    }

    /// Releases buffered records matching `pred` back to the broker (RELEASE acks on their
    /// sessions) and drops them from the buffer.
    pub(super) fn release_buffer(&mut self, pred: impl Fn(&Fetched) -> bool) {
        let mut kept = std::collections::VecDeque::with_capacity(self.buffer.len());
        for f in std::mem::take(&mut self.buffer) {
            if !pred(&f) {
                kept.push_back(f);
                continue;
            }
            // The client's own RELEASEs, queued as such: their outcome is no acknowledgement
            // of the application's, whatever completes them.
            self.sessions.release(f.node, f.generation, f.tp, f.records.iter().map(|r| r.offset));
        }
        self.buffer = kept;
    }
}
