//! Group coordinators looked up in one FindCoordinator (v4+ carries many keys): a caller with
//! many groups (the exporter, `describe_share_groups`) asks once, not once per group, and each
//! group's answer keeps its own error.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;

use super::{BrokerInfo, Cluster, FIND_COORDINATOR_VERSIONS};
use crate::error::{check, Context, Error, Result};

/// FindCoordinator's key type for a group (1 is a transaction).
const GROUP_KEY: i8 = 0;

impl Cluster {
    /// The coordinators of `groups` (key type 0) from one FindCoordinator, no retry: one
    /// result per group, in order. The whole call fails only when no answer came (no broker,
    /// a lost connection, a request-level error); a group the broker cannot place yet
    /// (COORDINATOR_NOT_AVAILABLE while `__consumer_offsets` loads) is that group's error.
    pub(crate) async fn find_group_coordinators(&self, groups: &[&str]) -> Result<Vec<Result<i32>>> {
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let conn = self.any_broker().await?;
        let req = FindCoordinatorRequest::default()
            .with_key_type(GROUP_KEY)
            .with_coordinator_keys(groups.iter().map(|g| StrBytes::from_string(g.to_string())).collect());
        let resp = self.send(&conn, &req, FIND_COORDINATOR_VERSIONS).await?;
        check(resp.error_code, resp.error_message.as_ref().map(|m| m.to_string()), || Context::api("FindCoordinator"))?;
        let found = groups
            .iter()
            .map(|g| match resp.coordinators.iter().find(|c| c.key.as_str() == *g) {
                None => Err(Error::IncompleteResponse {
                    api: "FindCoordinator",
                    missing: format!("the coordinator of {g}"),
                }),
                Some(c) => self.coordinator_of(c),
            })
            .collect();
        Ok(found)
    }

    /// One key's answer: its error, or its node id, which the pool can dial from then on even
    /// when the metadata has not seen that broker yet.
    fn coordinator_of(&self, c: &Coordinator) -> Result<i32> {
        check(c.error_code, c.error_message.as_ref().map(|m| m.to_string()), || Context::api("FindCoordinator"))?;
        let known = self.with_metadata(|m| m.brokers.contains_key(&c.node_id.0));
        if !known {
            self.learn_brokers([BrokerInfo { node_id: c.node_id.0, host: c.host.to_string(), port: c.port, rack: None }]);
        }
        Ok(c.node_id.0)
    }
}
