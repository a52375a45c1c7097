//! Answers to ApiVersions, Metadata, FindCoordinator and ShareGroupHeartbeat, and the
//! dispatch of every request (scripted faults first).

use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiVersionsResponse, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, ListGroupsResponse,
    MetadataRequest, MetadataResponse, ShareGroupHeartbeatRequest, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use std::time::Instant;

use super::broker::FakeCoordinator;
use super::script::{Action, Effects};
use super::state::Shared;
use super::wire::{Decoded, Incoming, Out};
use super::{share, FIND_COORDINATOR, HEARTBEAT, LIST_GROUPS, METADATA, SHARE_ACKNOWLEDGE, SHARE_FETCH};
use crate::broker_model::broker::Cx;
use crate::broker_model::share_group_heartbeat;
use crate::error::ErrorCode;
use crate::protocol::share::{MAX_VERSION as SHARE_MAX_VERSION, MIN_VERSION as SHARE_MIN_VERSION};

pub(super) async fn handle(shared: &Shared, node: i32, conn: u64, inc: &Incoming) -> Out {
    let fx = {
        let mut st = shared.lock();
        Effects::fire(&mut st.rules, node, inc.api, &inc.ack_partitions)
    };
    if !fx.delay.is_zero() {
        tokio::time::sleep(fx.delay).await;
    }
    match &fx.terminal {
        Some(Action::DropConnection) => return Out::Drop,
        Some(Action::Garbage) => return Out::Raw(&[0xff; 9]),
        Some(Action::ShortBody) => return Out::Raw(&[0, 0, 0]),
        Some(Action::Truncated) => return Out::Truncated,
        _ => {}
    }
    match &inc.body {
        Decoded::ApiVersions => api_versions(shared),
        Decoded::Metadata(r) => metadata(shared, r, inc.version),
        Decoded::FindCoordinator(r) => find_coordinator(shared, r, inc.version),
        Decoded::ListGroups => list_groups(shared, inc.version),
        Decoded::Heartbeat(r) => heartbeat(shared, node, r, inc.version, &fx),
        Decoded::Fetch(r) => share::fetch(shared, node, conn, inc.version, r, &fx).await,
        Decoded::Ack(r) => share::acknowledge(shared, node, inc.version, r, &fx),
    }
}

/// Encodes a kafka-protocol response; an encoding failure is a bug in the fake.
pub(super) fn encode<T: Encodable>(shared: &Shared, msg: &T, version: i16) -> Out {
    let mut buf = BytesMut::new();
    match msg.encode(&mut buf, version) {
        Ok(()) => Out::Reply(buf),
        Err(e) => {
            shared.lock().violation(format!("fake broker failed to encode a response: {e}"));
            Out::Drop
        }
    }
}

fn api_versions(shared: &Shared) -> Out {
    let st = shared.lock();
    // Within what the codec speaks: the fake encodes its answers with it.
    let share_max = st.cfg.max_share_version.clamp(SHARE_MIN_VERSION, SHARE_MAX_VERSION);
    let keys = [
        (18, 0, 4),
        (METADATA, 10, 12),
        (FIND_COORDINATOR, 4, 6),
        (LIST_GROUPS, 5, 5),
        (HEARTBEAT, 1, 1),
        (SHARE_FETCH, SHARE_MIN_VERSION, share_max),
        (SHARE_ACKNOWLEDGE, SHARE_MIN_VERSION, share_max),
    ];
    let mut resp = ApiVersionsResponse::default().with_api_keys(
        keys.iter()
            .map(|&(k, lo, hi)| ApiVersion::default().with_api_key(k).with_min_version(lo).with_max_version(hi))
            .collect(),
    );
    resp.supported_features = vec![SupportedFeatureKey::default()
        .with_name(StrBytes::from_static_str("share.version"))
        .with_min_version(0)
        .with_max_version(1)];
    // A feature at level 0 is not finalized: brokers leave it out of the list.
    if st.cfg.share_version > 0 {
        resp.finalized_features_epoch = 1;
        resp.finalized_features = vec![FinalizedFeatureKey::default()
            .with_name(StrBytes::from_static_str("share.version"))
            .with_min_version_level(st.cfg.share_version)
            .with_max_version_level(st.cfg.share_version)];
    }
    drop(st);
    encode(shared, &resp, 3)
}

fn metadata(shared: &Shared, r: &MetadataRequest, version: i16) -> Out {
    let st = shared.lock();
    let brokers = st
        .ports
        .iter()
        .map(|(id, port)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(*id))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(*port as i32)
        })
        .collect();
    let ours = || {
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(st.cfg.topic.clone()))))
            .with_topic_id(st.topic_id)
            .with_partitions(
                st.parts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        MetadataResponsePartition::default()
                            .with_partition_index(i as i32)
                            .with_leader_id(BrokerId(p.leader))
                            .with_leader_epoch(p.leader_epoch)
                            .with_replica_nodes(vec![BrokerId(p.leader)])
                            .with_isr_nodes(vec![BrokerId(p.leader)])
                    })
                    .collect(),
            )
    };
    let topics = match &r.topics {
        None => vec![ours()],
        Some(ts) => ts
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.0.as_str()).unwrap_or_default();
                match st.topic_errors.get(name) {
                    Some(c) => MetadataResponseTopic::default().with_name(t.name.clone()).with_error_code(*c),
                    None if name == st.cfg.topic => ours(),
                    None => MetadataResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0),
                }
            })
            .collect(),
    };
    let resp = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_static_str("fake-cluster")))
        .with_controller_id(BrokerId(st.cfg.nodes[0]))
        .with_topics(topics);
    drop(st);
    encode(shared, &resp, version)
}

fn find_coordinator(shared: &Shared, r: &FindCoordinatorRequest, version: i16) -> Out {
    let st = shared.lock();
    let node = st.cfg.coordinator;
    let port = st.ports.get(&node).copied().unwrap_or(0) as i32;
    let resp = FindCoordinatorResponse::default().with_coordinators(
        r.coordinator_keys
            .iter()
            .map(|k| {
                Coordinator::default()
                    .with_key(k.clone())
                    .with_node_id(BrokerId(node))
                    .with_host(StrBytes::from_static_str("127.0.0.1"))
                    .with_port(port)
            })
            .collect(),
    );
    drop(st);
    encode(shared, &resp, version)
}

/// No groups, from every node (the fake keeps no group names).
fn list_groups(shared: &Shared, version: i16) -> Out {
    encode(shared, &ListGroupsResponse::default(), version)
}

/// By the broker model's handler (`broker_model::share_group_heartbeat`), over the fake's
/// lenient coordinator ([`FakeCoordinator`]).
fn heartbeat(shared: &Shared, node: i32, r: &ShareGroupHeartbeatRequest, version: i16, fx: &Effects) -> Out {
    let cx = Cx { node, conn: 0, version, now: Instant::now() };
    let member = r.member_id.to_string();
    let resp = share_group_heartbeat::handle(&mut FakeCoordinator { st: &mut shared.lock(), fx }, &cx, &member, r);
    encode(shared, &resp, version)
}
