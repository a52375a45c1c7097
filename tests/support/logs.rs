//! Log capture for tests that check what the client says (shared by the `broker` and `offline`
//! binaries through `#[path]`): a `tracing` subscriber writing into a buffer the test reads.

use std::sync::{Arc, Mutex};

use tracing::subscriber::DefaultGuard;

/// A log writer into a shared buffer (a `MakeWriter` by cloning).
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Captures this thread's log lines at WARN and above until the guard drops. Use it in a
    /// current-thread test, so that the client's tasks log on the thread that set it.
    pub fn warnings() -> (Logs, DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// Captures this thread's events that `filter` (an `EnvFilter` directive such as
    /// `kafka_share::cycle=trace`) lets through until the guard drops; as [`Logs::warnings`],
    /// in a current-thread test.
    #[allow(dead_code)] // not every binary that includes this file uses it
    pub fn filtered(filter: &str) -> (Logs, DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        self.0.lock().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
