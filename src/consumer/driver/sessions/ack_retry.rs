//! Retrying acknowledgements the broker could not apply *yet*.
//!
//! A partition's acknowledgements can fail for a reason that passes: the share coordinator
//! that persists share-group state is loading or moving (COORDINATOR_LOAD_IN_PROGRESS,
//! COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR), or the broker timed out writing it
//! (REQUEST_TIMED_OUT). The records stay acquired by this member meanwhile, so the same acks
//! go again on the same session, after the broker's backoff, until
//! `default.api.timeout.ms` has passed since the first failure; only what failed is resent.
//!
//! Everything else is final and reported at once, never resent: INVALID_RECORD_STATE (the
//! lock is gone), and the errors that say the partition moved (NOT_LEADER_OR_FOLLOWER,
//! FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID): a new leader loads
//! the partition's state without this member's acquisitions, so the records are delivered
//! again and an ack sent there would only earn INVALID_RECORD_STATE (Java fails them too).
//!
//! An attempt that timed out may have been applied. If a retry after it then meets
//! INVALID_RECORD_STATE, the first attempt probably took effect (the records are no longer
//! acquired by us): that is reported as [`Error::OutcomeUnknown`], not as a failure.

use std::sync::Arc;
use std::time::Instant;

use tracing::debug;

use super::SessionManager;
use crate::consumer::driver::Topology;
use crate::error::{Error, ErrorCode, Result};
use crate::share::acks::PartitionAcks;
use crate::share::TopicIdPartition;

/// A partition's acks being retried on one session.
#[derive(Debug, Clone, Copy)]
pub(super) struct AckRetry {
    /// No attempt starts after this.
    until: Instant,
    /// Some attempt's outcome is unknown (it may have been applied).
    unknown: bool,
}

impl SessionManager {
    /// What a partition's acknowledgement answer means: `None` when its acks were queued
    /// again for another attempt, else the result to report.
    ///
    /// `closing`: the consumer is closing (nothing is retried then); `topology` names the
    /// broker in an [`Error::OutcomeUnknown`].
    #[allow(clippy::too_many_arguments)]
    pub(in crate::consumer::driver) fn ack_outcome(
        &mut self,
        node: i32,
        tp: TopicIdPartition,
        acks: &PartitionAcks,
        result: Result<()>,
        closing: bool,
        topology: &dyn Topology,
        now: Instant,
    ) -> Option<Result<()>> {
        let limit = self.settings.ack_retry_limit;
        let n = self.nodes.get_mut(&node)?;
        let retry = n.ack_retries.remove(&tp);
        let code = match &result {
            Ok(()) => return Some(result),
            Err(Error::Broker { code, .. }) => *code,
            Err(_) => return Some(result),
        };
        if code.is_transient_ack_error() {
            let until = retry.map_or(now + limit, |r| r.until);
            let unknown = retry.is_some_and(|r| r.unknown) || code.is_outcome_unknown();
            if now < until && !closing {
                debug!(node, %tp, code = code.0, "acknowledgements not applied yet; trying again");
                for (offset, ty) in acks.iter() {
                    n.session.queue_ack(tp, offset, ty);
                }
                n.ack_retries.insert(tp, AckRetry { until, unknown });
                let delay = n.backoff.next_delay();
                n.hold_until(now + delay);
                return None;
            }
            return Some(result);
        }
        if code == ErrorCode::INVALID_RECORD_STATE && retry.is_some_and(|r| r.unknown) {
            // The attempt that timed out most likely took effect.
            let addr = topology.broker_addr(node).unwrap_or_else(|| format!("node {node}"));
            return Some(Err(Error::OutcomeUnknown { api: "ShareAcknowledge", addr, cause: Arc::new(result.err()?) }));
        }
        Some(result)
    }
}
