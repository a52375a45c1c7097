//! How a request to a broker goes out, as the core decides it from its config: the API
//! versions it may be sent at, how long it may take, and what its content needs of the
//! broker. The shell applies a [`Wire`] as it is (`Wire::version`, then a call with
//! `timeout`); the simulation reads the timeout off it. No decision is left outside the core.

use std::time::Duration;

use crate::cluster::ApiVersions;
use crate::error::{Error, Result};

/// How one request goes out.
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    /// The API versions it may be sent at, lowest and highest: the highest the broker also
    /// speaks is used.
    pub versions: (i16, i16),
    /// How long the request may take once sent, before it fails with `Error::Timeout`.
    pub timeout: Duration,
    /// What the request's content needs beyond the range, if anything.
    pub needs: Option<Needs>,
}

/// A version the request's content needs (a field older versions lack), and the error it
/// fails with on a broker that picks an older one.
#[derive(Debug, Clone)]
pub(crate) struct Needs {
    pub version: i16,
    pub error: Error,
}

impl Wire {
    /// A request at `versions`, allowed `timeout`, needing nothing more.
    pub(crate) fn new(versions: (i16, i16), timeout: Duration) -> Wire {
        Wire { versions, timeout, needs: None }
    }

    /// This, its content needing `version` at least (else it fails with `error`).
    pub(crate) fn needing(self, version: i16, error: Error) -> Wire {
        Wire { needs: Some(Needs { version, error }), ..self }
    }

    /// The version to send API `key` at to a broker that speaks `versions`, or why none fits.
    pub(crate) fn version(&self, key: i16, versions: &ApiVersions) -> Result<i16> {
        let v = versions.pick(key, self.versions.0, self.versions.1)?;
        match &self.needs {
            Some(needs) if v < needs.version => Err(needs.error.clone()),
            _ => Ok(v),
        }
    }
}
