//! The simulated work of `scripts/bench process`, one definition for every side that runs in
//! Rust (`process`, `ceiling`), so the ceiling runs exactly the engine's handler.

use std::time::Duration;

/// The handler's work: `--work-ms`, or `--slow-ms` for the record at offset `o` with
/// `(o + 1) % slow_every == 0` (`slow_every` 0: no record is slow).
#[derive(Clone, Copy, Debug)]
pub struct Work {
    pub work: Duration,
    pub slow_every: i64,
    pub slow: Duration,
}

impl Work {
    pub fn of(&self, offset: i64) -> Duration {
        if self.slow_every > 0 && (offset + 1) % self.slow_every == 0 {
            self.slow
        } else {
            self.work
        }
    }

    /// What the handler does with a record at `offset`: sleep on tokio's timer.
    pub async fn handle(&self, offset: i64) {
        tokio::time::sleep(self.of(offset)).await;
    }
}
