//! The exporter's log lines (`tracing`): one line per refresh failure with its cause, the
//! same (operation, kind) at most once a minute (saying how many were left out), and a line
//! when the cluster becomes reachable or unreachable.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::refresh::Refreshed;

/// The same (operation, kind) is logged at most once in this long.
const EVERY: Duration = Duration::from_secs(60);

/// Longest failure message logged whole (one may quote a group name of megabytes).
const MESSAGE: usize = 2048;

/// What was logged, to rate-limit the next lines.
#[derive(Debug, Default)]
pub(super) struct RefreshLog {
    /// (operation, kind) -> when last logged, and how many were left out since.
    last: HashMap<(&'static str, String), (Instant, u64)>,
    /// Whether the last refresh reached the cluster; `None` before the first.
    reached: Option<bool>,
}

impl RefreshLog {
    /// Logs what the refresh `r` found worth saying.
    pub(super) fn refreshed(&mut self, r: &Refreshed) {
        match (self.reached, r.reached) {
            (Some(true), true) | (Some(false), false) => {}
            (_, true) => tracing::info!(groups = r.groups.as_ref().map(Vec::len), "the cluster is reachable"),
            (_, false) => {
                let cause = r.errors.first().map_or("no answer".into(), |(_, _, m)| super::cut(m, MESSAGE));
                tracing::warn!(cause = %cause, "the cluster is unreachable: serving the last readings, marked unread; retrying");
            }
        }
        self.reached = Some(r.reached);
        for (operation, kind, message) in &r.errors {
            self.failure(operation, kind, message, Instant::now());
        }
        if !r.unread.is_empty() {
            tracing::debug!(groups = r.unread.len(), first = ?r.unread.first(), "groups not read in full");
        }
    }

    /// Logs one failure unless the same (operation, kind) was logged less than [`EVERY`] ago.
    fn failure(&mut self, operation: &'static str, kind: &str, message: &str, at: Instant) -> bool {
        match self.last.get_mut(&(operation, kind.to_string())) {
            Some((when, left_out)) if at.duration_since(*when) < EVERY => {
                *left_out += 1;
                false
            }
            Some((when, left_out)) => {
                let message = super::cut(message, MESSAGE);
                tracing::warn!(operation, kind, left_out = *left_out, "exporter refresh failed: {message}");
                (*when, *left_out) = (at, 0);
                true
            }
            None => {
                let message = super::cut(message, MESSAGE);
                tracing::warn!(operation, kind, "exporter refresh failed: {message}");
                self.last.insert((operation, kind.to_string()), (at, 0));
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_failure_is_logged_once_a_minute() {
        let mut log = RefreshLog::default();
        let t = Instant::now();
        assert!(log.failure("offsets", "timeout", "m", t));
        assert!(!log.failure("offsets", "timeout", "m", t + Duration::from_secs(1)));
        assert!(log.failure("offsets", "connection", "m", t + Duration::from_secs(1)), "another kind");
        assert!(!log.failure("offsets", "timeout", "m", t + Duration::from_secs(59)));
        assert!(log.failure("offsets", "timeout", "m", t + Duration::from_secs(61)));
        assert_eq!(log.last[&("offsets", "timeout".to_string())].1, 0, "the count left out starts again");
    }
}
