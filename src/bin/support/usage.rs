//! A command-line usage mistake, shared by the command-line tools (each includes this file
//! with `#[path]`, as `stop_signal.rs`).

use std::fmt;

/// A usage mistake: one line on stderr; each tool picks its exit code (as its Java peer).
#[derive(Debug, PartialEq, Eq)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Fails with a usage mistake.
pub fn usage<T>(msg: impl Into<String>) -> Result<T, Usage> {
    Err(Usage(msg.into()))
}
