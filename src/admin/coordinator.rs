//! Sending a group request to the group's coordinator, with the retries every group API
//! needs: find the coordinator again on NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, back
//! off on COORDINATOR_LOAD_IN_PROGRESS / REBALANCE_IN_PROGRESS, as the Java admin does.

use tokio::time::Instant;
use tracing::debug;

use super::Admin;
use crate::cluster::TrafficClass;
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::api::ApiRequest;

/// A response from a group's coordinator.
pub(crate) struct CoordinatorResponse<T> {
    /// The coordinator's node id.
    pub node: i32,
    /// The negotiated version the response was decoded at.
    pub version: i16,
    /// The response.
    pub response: T,
    /// What the coordinator negotiated, to explain version-specific broker behaviour.
    pub versions: std::sync::Arc<crate::cluster::ApiVersions>,
}

/// Whether a group-level code is retried: `Some(true)` after looking the coordinator up
/// again, `Some(false)` after a backoff; `None` when the caller interprets it.
pub(super) fn retriable_group_code(code: i16) -> Option<bool> {
    let code = ErrorCode(code);
    if code.is_coordinator_moved() {
        Some(true)
    } else if code.is_coordinator_busy() {
        Some(false)
    } else {
        None
    }
}

impl Admin {
    /// Sends `req` to `group`'s coordinator. `group_code` extracts the group-level error code
    /// of a response; coordinator-move and loading codes are retried until the cluster's
    /// request timeout, everything else is returned for the caller to interpret.
    pub(crate) async fn call_coordinator<R: ApiRequest>(
        &self,
        group: &str,
        req: &R,
        versions: (i16, i16),
        group_code: impl Fn(&R::Response) -> i16,
    ) -> Result<CoordinatorResponse<R::Response>> {
        if group.is_empty() {
            return Err(Error::InvalidArgument("the group id must not be empty".into()));
        }
        let timeout = self.cluster.config().request_timeout;
        let deadline = Instant::now() + timeout;
        let mut backoff = self.cluster.config().backoff();
        loop {
            let attempt = async {
                let node = self.cluster.find_group_coordinator(group).await?;
                let conn = self.cluster.broker(node, TrafficClass::Control).await?;
                let version = conn.versions.pick(R::KEY, versions.0, versions.1)?;
                let response = self.cluster.send(&conn, req, versions).await?;
                // Brokers with share groups switched off (`share.version` 0) answer the share
                // APIs with UNSUPPORTED_VERSION: name the feature and how to turn it on instead.
                if group_code(&response) == ErrorCode::UNSUPPORTED_VERSION.0 {
                    conn.versions.require_share_groups()?;
                }
                Ok::<_, Error>(CoordinatorResponse { node, version, response, versions: conn.versions.clone() })
            };
            let why = match attempt.await {
                Ok(r) => match retriable_group_code(group_code(&r.response)) {
                    None => return Ok(r),
                    Some(_) => Some(format!("group-level error {}", group_code(&r.response))),
                },
                // A request that timed out adds nothing to the deadline's own "timed out".
                Err(Error::Timeout { .. }) => None,
                Err(e) if e.is_retriable() => Some(e.to_string()),
                Err(e) => return Err(e),
            };
            if Instant::now() >= deadline {
                return Err(deadline_passed(R::NAME, group, why, timeout));
            }
            debug!(group, api = R::NAME, why = why.as_deref().unwrap_or("timed out"), "retrying at the coordinator");
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }
}

/// The error of a group request still failing at its deadline: it timed out, once, naming
/// the group, with the last retriable failure when it was something else than a timeout
/// (a moved coordinator, a lost connection; for a write, that its outcome is unknown).
pub(super) fn deadline_passed(api: &str, group: &str, last: Option<String>, after: std::time::Duration) -> Error {
    let what = match last {
        Some(why) => format!("{api} for group {group} ({why})"),
        None => format!("{api} for group {group}"),
    };
    Error::Timeout { what, after }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::deadline_passed;

    #[test]
    fn a_read_that_timed_out_says_so_once_naming_the_group() {
        let e = deadline_passed("ShareGroupDescribe", "orders", None, Duration::from_millis(1));
        assert_eq!(e.to_string(), "ShareGroupDescribe for group orders timed out after 1ms");
        let e = deadline_passed(
            "ShareGroupDescribe",
            "orders",
            Some("group-level error 14".into()),
            Duration::from_secs(30),
        );
        assert_eq!(e.to_string(), "ShareGroupDescribe for group orders (group-level error 14) timed out after 30s");
    }
}
