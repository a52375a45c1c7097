//! When the subscription's metadata is refreshed: wanted (an unknown topic, a partition with
//! no known leader, a moved partition, a lost broker), sent one at a time, and backed off
//! while it keeps being wanted, so a broken partition cannot turn into a metadata storm.

use std::time::Instant;

use crate::backoff::Backoff;

#[derive(Debug, Default)]
pub(super) struct MetadataRefresh {
    /// Someone needs fresher metadata than the last answer gave.
    wanted: bool,
    /// A refresh is on its way.
    in_flight: bool,
    /// Not before then (the backoff of refreshes that keep being wanted).
    retry_at: Option<Instant>,
    backoff: Backoff,
}

impl MetadataRefresh {
    /// Fresher metadata is needed (the refresh in flight, if any, may be too old).
    pub(super) fn want(&mut self) {
        self.wanted = true;
    }

    /// Whether a refresh should be sent now.
    pub(super) fn due(&self, now: Instant) -> bool {
        self.wanted && !self.in_flight && self.retry_at.is_none_or(|t| t <= now)
    }

    /// A refresh is sent now.
    pub(super) fn sent(&mut self, now: Instant) {
        self.wanted = false;
        self.in_flight = true;
        self.retry_at = Some(now + self.backoff.next_delay());
    }

    /// The refresh was answered; a failed one is wanted again.
    pub(super) fn answered(&mut self, ok: bool) {
        self.in_flight = false;
        if !ok {
            self.wanted = true;
        }
    }

    /// The metadata now covers everything the assignment needs: the backoff starts over.
    pub(super) fn settled(&mut self) {
        self.backoff.reset();
    }

    /// When a wanted refresh may go (for the core's timer).
    pub(super) fn wakeup(&self) -> Option<Instant> {
        self.retry_at.filter(|_| self.wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_at_a_time_and_backed_off_while_wanted() {
        let t0 = Instant::now();
        let mut m = MetadataRefresh::default();
        assert!(!m.due(t0), "nothing wanted");
        m.want();
        assert!(m.due(t0));
        m.sent(t0);
        m.want();
        assert!(!m.due(t0), "one in flight at a time");
        m.answered(true);
        let wake = m.wakeup().expect("still wanted: a timer");
        assert!(wake > t0 && !m.due(t0), "backed off");
        assert!(m.due(wake));
        m.sent(wake);
        m.answered(false);
        assert!(m.wakeup().is_some(), "a failed refresh is wanted again");
        m.settled();
        assert!(m.due(wake + Duration::from_secs(60)));
    }
}
