//! ShareGroupHeartbeat (key 76) as both fake brokers answer it: the coordinator checks, then
//! leave (epoch -1), join (epoch 0, with a subscription) or a member's next heartbeat, and the
//! answer: the member's epoch, the heartbeat interval, its assignment. What a member is, how
//! epochs move and who gets which partitions are each fake's ([`ShareCoordinator`]): the
//! simulation keeps a group epoch, fences stale epochs and assigns round-robin; the public
//! fake counts each member's joins and gives everyone the assignment the test set.

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use crate::error::ErrorCode;

use super::broker::Cx;

/// A group coordinator's membership, as the heartbeat handler uses it.
pub(crate) trait ShareCoordinator {
    /// Who heartbeats: the fake's member id, the simulation's client.
    type Member;

    /// The id of the topic the assignment names.
    fn topic_id(&self) -> uuid::Uuid;
    /// HeartbeatIntervalMs to answer.
    fn heartbeat_interval_ms(&self) -> i32;
    /// `member` leaves the group (epoch -1): what it holds goes back, if the fake says so.
    fn leave(&mut self, member: &Self::Member);
    /// `member` joins, or joins again, as `member_id` (epoch 0).
    fn join(&mut self, member: &Self::Member, member_id: &str, cx: &Cx);
    /// A heartbeat of `member` at `epoch` (> 0): accepted, or the error code to answer
    /// (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH).
    fn check_epoch(&self, member: &Self::Member, epoch: i32) -> Result<(), ErrorCode>;
    /// The member's epoch and partitions after this heartbeat (it was seen at `cx.now`);
    /// None: no such member.
    fn settle(&mut self, member: &Self::Member, cx: &Cx) -> Option<(i32, Vec<i32>)>;

    /// Whether broker `node` coordinates the group.
    fn coordinates(&self, _node: i32) -> bool {
        true
    }
    /// Whether the coordinator is still loading the group (a fault).
    fn loading(&self, _cx: &Cx) -> bool {
        false
    }
    /// A fault: a top-level error for this heartbeat.
    fn forced_error(&mut self) -> Option<i16> {
        None
    }
    /// Whether a join must name the topics it subscribes to (Kafka: INVALID_REQUEST).
    fn requires_subscription(&self) -> bool {
        true
    }
}

/// Answers heartbeat `r` from `member` as broker `cx.node` at `cx.now`.
pub(crate) fn handle<C: ShareCoordinator + ?Sized>(
    c: &mut C,
    cx: &Cx,
    member: &C::Member,
    r: &ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let mut resp = ShareGroupHeartbeatResponse::default();
    let refused = |mut resp: ShareGroupHeartbeatResponse, code: i16| {
        resp.error_code = code;
        resp.member_epoch = 0;
        resp
    };
    if let Some(code) = c.forced_error() {
        return refused(resp, code);
    }
    if !c.coordinates(cx.node) {
        return refused(resp, ErrorCode::NOT_COORDINATOR.0);
    }
    if c.loading(cx) {
        return refused(resp, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.0);
    }
    resp.member_id = Some(r.member_id.clone());
    match r.member_epoch {
        -1 => {
            c.leave(member);
            resp.member_epoch = -1;
            return resp;
        }
        0 => {
            let subscribes = r.subscribed_topic_names.as_ref().is_some_and(|t| !t.is_empty());
            if c.requires_subscription() && !subscribes {
                return refused(resp, ErrorCode::INVALID_REQUEST.0);
            }
            c.join(member, r.member_id.as_str(), cx);
        }
        epoch => {
            if let Err(code) = c.check_epoch(member, epoch) {
                return refused(resp, code.0);
            }
        }
    }
    let Some((epoch, partitions)) = c.settle(member, cx) else {
        return refused(resp, ErrorCode::UNKNOWN_MEMBER_ID.0);
    };
    resp.member_epoch = epoch;
    resp.heartbeat_interval_ms = c.heartbeat_interval_ms();
    resp.assignment = Some(Assignment::default().with_topic_partitions(vec![
        TopicPartitions::default().with_topic_id(c.topic_id()).with_partitions(partitions),
    ]));
    resp
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Instant;

    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    /// Kafka's rules in miniature: a group epoch, members fenced unless they send their last
    /// epoch, every member assigned partition 0.
    #[derive(Default)]
    struct Strict {
        epoch: i32,
        members: BTreeMap<u8, i32>,
        left: Vec<u8>,
    }

    impl ShareCoordinator for Strict {
        type Member = u8;
        fn topic_id(&self) -> uuid::Uuid {
            uuid::Uuid::from_u128(1)
        }
        fn heartbeat_interval_ms(&self) -> i32 {
            5000
        }
        fn leave(&mut self, m: &u8) {
            if self.members.remove(m).is_some() {
                self.epoch += 1;
                self.left.push(*m);
            }
        }
        fn join(&mut self, m: &u8, _id: &str, _cx: &Cx) {
            self.members.insert(*m, 0);
            self.epoch += 1;
        }
        fn check_epoch(&self, m: &u8, epoch: i32) -> Result<(), ErrorCode> {
            match self.members.get(m) {
                None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
                Some(e) if *e != epoch => Err(ErrorCode::FENCED_MEMBER_EPOCH),
                Some(_) => Ok(()),
            }
        }
        fn settle(&mut self, m: &u8, _cx: &Cx) -> Option<(i32, Vec<i32>)> {
            let e = self.members.get_mut(m)?;
            *e = self.epoch;
            Some((self.epoch, vec![0]))
        }
        fn coordinates(&self, node: i32) -> bool {
            node == 1
        }
    }

    fn beat(epoch: i32, subscribe: bool) -> ShareGroupHeartbeatRequest {
        let topics = subscribe.then(|| vec![TopicName(StrBytes::from_static_str("t"))]);
        ShareGroupHeartbeatRequest::default()
            .with_member_id(StrBytes::from_static_str("m"))
            .with_member_epoch(epoch)
            .with_subscribed_topic_names(topics)
    }

    fn cx(node: i32) -> Cx {
        Cx { node, conn: 0, version: 1, now: Instant::now() }
    }

    #[test]
    fn a_member_joins_heartbeats_is_fenced_on_a_stale_epoch_and_leaves() {
        let mut c = Strict::default();
        let r = handle(&mut c, &cx(2), &7, &beat(0, true));
        assert_eq!((r.error_code, r.member_id.is_none()), (ErrorCode::NOT_COORDINATOR.0, true));
        let r = handle(&mut c, &cx(1), &7, &beat(0, false));
        assert_eq!(r.error_code, ErrorCode::INVALID_REQUEST.0, "a join names its topics");
        let r = handle(&mut c, &cx(1), &7, &beat(0, true));
        assert_eq!((r.error_code, r.member_epoch, r.heartbeat_interval_ms), (0, 1, 5000));
        let parts = r.assignment.map(|a| a.topic_partitions[0].partitions.clone());
        assert_eq!(parts, Some(vec![0]));
        let r = handle(&mut c, &cx(1), &7, &beat(3, true));
        assert_eq!((r.error_code, r.member_epoch), (ErrorCode::FENCED_MEMBER_EPOCH.0, 0));
        let r = handle(&mut c, &cx(1), &8, &beat(1, true));
        assert_eq!(r.error_code, ErrorCode::UNKNOWN_MEMBER_ID.0);
        let r = handle(&mut c, &cx(1), &7, &beat(-1, false));
        assert_eq!((r.error_code, r.member_epoch, c.left.as_slice()), (0, -1, &[7u8][..]));
    }
}
