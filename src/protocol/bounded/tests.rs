//! The schemas match the crate (its encodings walk exactly), a hostile prefix is an error, and no
//! input makes the walker panic or lets the crate decoder allocate without bound.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{self as m, BrokerId, GroupId, ProducerId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;
use uuid::Uuid;

use super::schemas::ALL;
use super::{check, Schema, Walk};
use crate::protocol::CodecError;

fn s(x: &'static str) -> StrBytes {
    StrBytes::from_static_str(x)
}

fn topic(x: &'static str) -> TopicName {
    TopicName(s(x))
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// An unknown tagged field, in flexible versions only (the crate walks past it by its size).
fn tags(v: i16, flexible: i16) -> BTreeMap<i32, Bytes> {
    let mut t = BTreeMap::new();
    if v >= flexible {
        t.insert(90, Bytes::from_static(b"unknown"));
    }
    t
}

fn encode<T: Encodable>(msg: &T, v: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    msg.encode(&mut buf, v)
        .unwrap_or_else(|e| panic!("encoding {msg:?} at v{v}: {e}", msg = std::any::type_name::<T>()));
    buf.to_vec()
}

fn decode<T: Decodable>(v: i16, bytes: &[u8]) -> Result<(), String> {
    let mut buf = Bytes::copy_from_slice(bytes);
    T::decode(&mut buf, v).map(|_| ()).map_err(|e| e.to_string())
}

/// Runs the crate's decoder for API `key`. Only call it on bytes that passed [`check`].
fn crate_decode(key: i16, v: i16, bytes: &[u8]) -> Result<(), String> {
    match key {
        0 => decode::<m::ProduceResponse>(v, bytes),
        1 => decode::<m::FetchResponse>(v, bytes),
        2 => decode::<m::ListOffsetsResponse>(v, bytes),
        3 => decode::<m::MetadataResponse>(v, bytes),
        10 => decode::<m::FindCoordinatorResponse>(v, bytes),
        16 => decode::<m::ListGroupsResponse>(v, bytes),
        17 => decode::<m::SaslHandshakeResponse>(v, bytes),
        18 => decode::<m::ApiVersionsResponse>(v, bytes),
        19 => decode::<m::CreateTopicsResponse>(v, bytes),
        20 => decode::<m::DeleteTopicsResponse>(v, bytes),
        21 => decode::<m::DeleteRecordsResponse>(v, bytes),
        22 => decode::<m::InitProducerIdResponse>(v, bytes),
        32 => decode::<m::DescribeConfigsResponse>(v, bytes),
        36 => decode::<m::SaslAuthenticateResponse>(v, bytes),
        42 => decode::<m::DeleteGroupsResponse>(v, bytes),
        44 => decode::<m::IncrementalAlterConfigsResponse>(v, bytes),
        60 => decode::<m::DescribeClusterResponse>(v, bytes),
        76 => decode::<m::ShareGroupHeartbeatResponse>(v, bytes),
        77 => decode::<m::ShareGroupDescribeResponse>(v, bytes),
        90 => decode::<m::DescribeShareGroupOffsetsResponse>(v, bytes),
        91 => decode::<m::AlterShareGroupOffsetsResponse>(v, bytes),
        92 => decode::<m::DeleteShareGroupOffsetsResponse>(v, bytes),
        _ => panic!("no decoder wired for key {key}"),
    }
}

/// Encodings of API `key`'s response at `v`: an empty (default) one and populated ones, with
/// every field the version has set to a non-default value, so that every array, string and
/// tagged field is on the wire.
fn samples(key: i16, v: i16) -> Vec<Vec<u8>> {
    match key {
        0 => vec![encode(&m::ProduceResponse::default(), v), encode(&produce(v), v)],
        1 => vec![encode(&m::FetchResponse::default(), v), encode(&fetch(v), v)],
        2 => vec![encode(&m::ListOffsetsResponse::default(), v), encode(&list_offsets(v), v)],
        3 => vec![encode(&m::MetadataResponse::default(), v), encode(&metadata(v), v)],
        10 => vec![encode(&m::FindCoordinatorResponse::default(), v), encode(&find_coordinator(v), v)],
        16 => vec![encode(&m::ListGroupsResponse::default(), v), encode(&list_groups(v), v)],
        17 => vec![
            encode(&m::SaslHandshakeResponse::default(), v),
            encode(&m::SaslHandshakeResponse::default().with_mechanisms(vec![s("PLAIN"), s("SCRAM-SHA-512")]), v),
        ],
        18 => vec![encode(&m::ApiVersionsResponse::default(), v), encode(&api_versions(v), v)],
        19 => vec![encode(&m::CreateTopicsResponse::default(), v), encode(&create_topics(v), v)],
        20 => vec![encode(&m::DeleteTopicsResponse::default(), v), encode(&delete_topics(v), v)],
        21 => vec![encode(&m::DeleteRecordsResponse::default(), v), encode(&delete_records(v), v)],
        22 => vec![encode(&m::InitProducerIdResponse::default(), v), encode(&init_producer_id(v), v)],
        32 => vec![encode(&m::DescribeConfigsResponse::default(), v), encode(&describe_configs(v), v)],
        36 => vec![encode(&m::SaslAuthenticateResponse::default(), v), encode(&sasl_authenticate(v), v)],
        42 => vec![encode(&m::DeleteGroupsResponse::default(), v), encode(&delete_groups(v), v)],
        44 => vec![encode(&m::IncrementalAlterConfigsResponse::default(), v), encode(&incremental_alter_configs(v), v)],
        60 => vec![encode(&m::DescribeClusterResponse::default(), v), encode(&describe_cluster(v), v)],
        76 => vec![
            encode(&m::ShareGroupHeartbeatResponse::default(), v),
            encode(&share_group_heartbeat(v, false), v),
            encode(&share_group_heartbeat(v, true), v),
        ],
        77 => vec![encode(&m::ShareGroupDescribeResponse::default(), v), encode(&share_group_describe(v), v)],
        90 => vec![encode(&m::DescribeShareGroupOffsetsResponse::default(), v), encode(&describe_share_offsets(v), v)],
        91 => vec![encode(&m::AlterShareGroupOffsetsResponse::default(), v), encode(&alter_share_offsets(v), v)],
        92 => vec![encode(&m::DeleteShareGroupOffsetsResponse::default(), v), encode(&delete_share_offsets(v), v)],
        _ => panic!("no sample for key {key}"),
    }
}

fn produce(v: i16) -> m::ProduceResponse {
    use m::produce_response::*;
    let mut p = PartitionProduceResponse::default().with_index(2).with_base_offset(100).with_log_append_time_ms(17);
    if v >= 5 {
        p.log_start_offset = 3;
    }
    if v >= 8 {
        p.record_errors = vec![
            BatchIndexAndErrorMessage::default()
                .with_batch_index(1)
                .with_batch_index_error_message(Some(s("bad"))),
            BatchIndexAndErrorMessage::default().with_batch_index(4).with_unknown_tagged_fields(tags(v, 9)),
        ];
        p.error_message = Some(s("oops"));
    }
    if v >= 10 {
        p.current_leader = LeaderIdAndEpoch::default()
            .with_leader_id(BrokerId(3))
            .with_leader_epoch(7)
            .with_unknown_tagged_fields(tags(v, 9));
    }
    p.unknown_tagged_fields = tags(v, 9);
    let mut t = TopicProduceResponse::default().with_partition_responses(vec![p.clone(), p.with_index(3)]);
    if v <= 12 {
        t.name = topic("orders");
    } else {
        t.topic_id = id(1);
    }
    let mut r = ProduceResponse::default().with_responses(vec![t.clone(), t]).with_throttle_time_ms(5);
    if v >= 10 {
        r.node_endpoints = vec![
            NodeEndpoint::default()
                .with_node_id(BrokerId(3))
                .with_host(s("b3"))
                .with_port(9092)
                .with_rack(Some(s("r"))),
            NodeEndpoint::default().with_node_id(BrokerId(4)).with_host(s("b4")).with_port(9093),
        ];
    }
    r.with_unknown_tagged_fields(tags(v, 9))
}

fn fetch(v: i16) -> m::FetchResponse {
    use m::fetch_response::*;
    let mut p = PartitionData::default()
        .with_partition_index(1)
        .with_high_watermark(10)
        .with_last_stable_offset(9)
        .with_aborted_transactions(Some(vec![
            AbortedTransaction::default().with_producer_id(ProducerId(5)).with_first_offset(2),
            AbortedTransaction::default().with_producer_id(ProducerId(6)).with_first_offset(3),
        ]))
        .with_records(Some(Bytes::from_static(&[7; 61])));
    if v >= 5 {
        p.log_start_offset = 1;
    }
    if v >= 11 {
        p.preferred_read_replica = BrokerId(2);
    }
    if v >= 12 {
        p.diverging_epoch = EpochEndOffset::default().with_epoch(3).with_end_offset(8);
        p.current_leader = LeaderIdAndEpoch::default().with_leader_id(BrokerId(1)).with_leader_epoch(4);
        p.snapshot_id = SnapshotId::default().with_end_offset(5).with_epoch(6).with_unknown_tagged_fields(tags(v, 12));
    }
    p.unknown_tagged_fields = tags(v, 12);
    let mut t = FetchableTopicResponse::default().with_partitions(vec![p.clone(), p.with_records(None)]);
    if v <= 12 {
        t.topic = topic("orders");
    } else {
        t.topic_id = id(2);
    }
    let mut r = FetchResponse::default().with_throttle_time_ms(1).with_responses(vec![t]);
    if v >= 7 {
        r.session_id = 77;
    }
    if v >= 16 {
        r.node_endpoints = vec![NodeEndpoint::default()
            .with_node_id(BrokerId(1))
            .with_host(s("b1"))
            .with_port(1)
            .with_rack(Some(s("x")))];
    }
    r.with_unknown_tagged_fields(tags(v, 12))
}

fn list_offsets(v: i16) -> m::ListOffsetsResponse {
    use m::list_offsets_response::*;
    let mut p = ListOffsetsPartitionResponse::default().with_partition_index(0).with_timestamp(-1).with_offset(42);
    if v >= 4 {
        p.leader_epoch = 3;
    }
    p.unknown_tagged_fields = tags(v, 6);
    let t = ListOffsetsTopicResponse::default().with_name(topic("t")).with_partitions(vec![p.clone(), p]);
    let mut r = ListOffsetsResponse::default().with_topics(vec![t]);
    if v >= 2 {
        r.throttle_time_ms = 8;
    }
    r.with_unknown_tagged_fields(tags(v, 6))
}

fn metadata(v: i16) -> m::MetadataResponse {
    use m::metadata_response::*;
    let mut b = MetadataResponseBroker::default()
        .with_node_id(BrokerId(1))
        .with_host(s("localhost"))
        .with_port(9092);
    if v >= 1 {
        b.rack = Some(s("r1"));
    }
    b.unknown_tagged_fields = tags(v, 9);
    let mut p = MetadataResponsePartition::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(1))
        .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
        .with_isr_nodes(vec![BrokerId(1), BrokerId(2)]);
    if v >= 7 {
        p.leader_epoch = 5;
    }
    if v >= 5 {
        p.offline_replicas = vec![BrokerId(3)];
    }
    p.unknown_tagged_fields = tags(v, 9);
    let mut t = MetadataResponseTopic::default()
        .with_name(Some(topic("orders")))
        .with_partitions(vec![p.clone(), p]);
    if v >= 10 {
        t.topic_id = id(7);
    }
    if v >= 1 {
        t.is_internal = true;
    }
    if v >= 8 {
        t.topic_authorized_operations = 123;
    }
    let mut r = MetadataResponse::default().with_brokers(vec![b.clone(), b]).with_topics(vec![t.clone(), t]);
    if v >= 3 {
        r.throttle_time_ms = 4;
    }
    if v >= 2 {
        r.cluster_id = Some(s("cluster"));
    }
    if v >= 1 {
        r.controller_id = BrokerId(1);
    }
    if (8..=10).contains(&v) {
        r.cluster_authorized_operations = 456;
    }
    if v >= 13 {
        r.error_code = 0;
    }
    r.with_unknown_tagged_fields(tags(v, 9))
}

fn find_coordinator(v: i16) -> m::FindCoordinatorResponse {
    use m::find_coordinator_response::*;
    let mut r = FindCoordinatorResponse::default();
    if v >= 1 {
        r.throttle_time_ms = 2;
    }
    if v <= 3 {
        r.node_id = BrokerId(1);
        r.host = s("b1");
        r.port = 9092;
        if v >= 1 {
            r.error_message = Some(s("none"));
        }
    } else {
        let c = Coordinator::default()
            .with_key(s("g"))
            .with_node_id(BrokerId(1))
            .with_host(s("b1"))
            .with_port(9092)
            .with_error_message(Some(s("m")))
            .with_unknown_tagged_fields(tags(v, 3));
        r.coordinators = vec![c.clone(), c.with_key(s("h")).with_error_message(None)];
    }
    r.with_unknown_tagged_fields(tags(v, 3))
}

fn list_groups(v: i16) -> m::ListGroupsResponse {
    use m::list_groups_response::*;
    let mut g = ListedGroup::default().with_group_id(GroupId(s("g"))).with_protocol_type(s("consumer"));
    if v >= 4 {
        g.group_state = s("Stable");
    }
    if v >= 5 {
        g.group_type = s("share");
    }
    g.unknown_tagged_fields = tags(v, 3);
    let mut r = ListGroupsResponse::default().with_groups(vec![g.clone(), g]);
    if v >= 1 {
        r.throttle_time_ms = 3;
    }
    r.with_unknown_tagged_fields(tags(v, 3))
}

fn api_versions(v: i16) -> m::ApiVersionsResponse {
    use m::api_versions_response::*;
    let k = ApiVersion::default().with_api_key(76).with_min_version(1).with_max_version(1);
    let mut r = ApiVersionsResponse::default()
        .with_api_keys(vec![k.clone().with_unknown_tagged_fields(tags(v, 3)), k.with_api_key(0).with_max_version(12)]);
    if v >= 1 {
        r.throttle_time_ms = 9;
    }
    if v >= 3 {
        r.supported_features = vec![
            SupportedFeatureKey::default().with_name(s("share.version")).with_max_version(1),
            SupportedFeatureKey::default()
                .with_name(s("kraft.version"))
                .with_min_version(1)
                .with_unknown_tagged_fields(tags(v, 3)),
        ];
        r.finalized_features_epoch = 5;
        r.finalized_features = vec![FinalizedFeatureKey::default()
            .with_name(s("share.version"))
            .with_max_version_level(1)
            .with_min_version_level(1)
            .with_unknown_tagged_fields(tags(v, 3))];
        r.zk_migration_ready = true;
    }
    r.with_unknown_tagged_fields(tags(v, 3))
}

fn create_topics(v: i16) -> m::CreateTopicsResponse {
    use m::create_topics_response::*;
    let mut t = CreatableTopicResult::default()
        .with_name(topic("t"))
        .with_error_code(36)
        .with_error_message(Some(s("m")));
    if v >= 7 {
        t.topic_id = id(4);
    }
    if v >= 5 {
        t.topic_config_error_code = 3;
        t.num_partitions = 3;
        t.replication_factor = 1;
        t.configs = Some(vec![
            CreatableTopicConfigs::default()
                .with_name(s("cleanup.policy"))
                .with_value(Some(s("delete")))
                .with_config_source(5)
                .with_unknown_tagged_fields(tags(v, 5)),
            CreatableTopicConfigs::default().with_name(s("secret")).with_value(None).with_is_sensitive(true),
        ]);
    }
    t.unknown_tagged_fields = tags(v, 5);
    CreateTopicsResponse::default()
        .with_throttle_time_ms(1)
        .with_topics(vec![t.clone(), t.with_error_message(None)])
        .with_unknown_tagged_fields(tags(v, 5))
}

fn delete_topics(v: i16) -> m::DeleteTopicsResponse {
    use m::delete_topics_response::*;
    let mut t = DeletableTopicResult::default().with_name(Some(topic("t")));
    if v >= 6 {
        t.topic_id = id(5);
    }
    if v >= 5 {
        t.error_message = Some(s("m"));
    }
    t.unknown_tagged_fields = tags(v, 4);
    DeleteTopicsResponse::default()
        .with_throttle_time_ms(1)
        .with_responses(vec![t.clone(), t])
        .with_unknown_tagged_fields(tags(v, 4))
}

fn init_producer_id(v: i16) -> m::InitProducerIdResponse {
    let mut r = m::InitProducerIdResponse::default().with_producer_id(ProducerId(9)).with_producer_epoch(2);
    if v >= 6 {
        r.ongoing_txn_producer_id = ProducerId(8);
        r.ongoing_txn_producer_epoch = 1;
    }
    r.with_unknown_tagged_fields(tags(v, 2))
}

fn describe_configs(v: i16) -> m::DescribeConfigsResponse {
    use m::describe_configs_response::*;
    let syn = DescribeConfigsSynonym::default()
        .with_name(s("log.retention.ms"))
        .with_value(Some(s("1")))
        .with_source(5)
        .with_unknown_tagged_fields(tags(v, 4));
    let mut c = DescribeConfigsResourceResult::default()
        .with_name(s("retention.ms"))
        .with_value(Some(s("1000")))
        .with_config_source(1)
        .with_synonyms(vec![syn.clone(), syn.with_value(None)]);
    if v >= 3 {
        c.config_type = 5;
        c.documentation = Some(s("doc"));
    }
    c.unknown_tagged_fields = tags(v, 4);
    let res = DescribeConfigsResult::default()
        .with_error_message(Some(s("m")))
        .with_resource_type(2)
        .with_resource_name(s("t"))
        .with_configs(vec![c.clone(), c])
        .with_unknown_tagged_fields(tags(v, 4));
    DescribeConfigsResponse::default()
        .with_throttle_time_ms(1)
        .with_results(vec![res])
        .with_unknown_tagged_fields(tags(v, 4))
}

fn sasl_authenticate(v: i16) -> m::SaslAuthenticateResponse {
    let mut r = m::SaslAuthenticateResponse::default()
        .with_error_message(Some(s("m")))
        .with_auth_bytes(Bytes::from_static(b"server-first"));
    if v >= 1 {
        r.session_lifetime_ms = 1000;
    }
    r.with_unknown_tagged_fields(tags(v, 2))
}

fn delete_records(v: i16) -> m::DeleteRecordsResponse {
    use m::delete_records_response::*;
    let p = DeleteRecordsPartitionResult::default()
        .with_partition_index(3)
        .with_low_watermark(42)
        .with_unknown_tagged_fields(tags(v, 2));
    let t = DeleteRecordsTopicResult::default()
        .with_name(TopicName(s("t")))
        .with_partitions(vec![p.clone(), p.with_error_code(6)])
        .with_unknown_tagged_fields(tags(v, 2));
    DeleteRecordsResponse::default()
        .with_throttle_time_ms(1)
        .with_topics(vec![t.clone(), t])
        .with_unknown_tagged_fields(tags(v, 2))
}

fn delete_groups(v: i16) -> m::DeleteGroupsResponse {
    use m::delete_groups_response::*;
    let g = DeletableGroupResult::default()
        .with_group_id(GroupId(s("g")))
        .with_unknown_tagged_fields(tags(v, 2));
    DeleteGroupsResponse::default()
        .with_throttle_time_ms(1)
        .with_results(vec![g.clone(), g.with_error_code(69)])
        .with_unknown_tagged_fields(tags(v, 2))
}

fn incremental_alter_configs(v: i16) -> m::IncrementalAlterConfigsResponse {
    use m::incremental_alter_configs_response::*;
    let a = AlterConfigsResourceResponse::default()
        .with_error_message(Some(s("m")))
        .with_resource_type(2)
        .with_resource_name(s("t"))
        .with_unknown_tagged_fields(tags(v, 1));
    IncrementalAlterConfigsResponse::default()
        .with_throttle_time_ms(1)
        .with_responses(vec![a.clone(), a.with_error_message(None)])
        .with_unknown_tagged_fields(tags(v, 1))
}

fn describe_cluster(v: i16) -> m::DescribeClusterResponse {
    use m::describe_cluster_response::*;
    let mut b = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(1))
        .with_host(s("b1"))
        .with_port(9092)
        .with_rack(Some(s("r")))
        .with_unknown_tagged_fields(tags(v, 0));
    if v >= 2 {
        b.is_fenced = true;
    }
    let mut r = DescribeClusterResponse::default()
        .with_error_message(Some(s("m")))
        .with_cluster_id(s("c"))
        .with_controller_id(BrokerId(1))
        .with_brokers(vec![b.clone(), b.with_rack(None)])
        .with_cluster_authorized_operations(7);
    if v >= 1 {
        r.endpoint_type = 2;
    }
    r.with_unknown_tagged_fields(tags(v, 0))
}

fn share_group_heartbeat(v: i16, with_assignment: bool) -> m::ShareGroupHeartbeatResponse {
    use m::share_group_heartbeat_response::*;
    let tp = TopicPartitions::default().with_topic_id(id(3)).with_partitions(vec![0, 1, 2]);
    let assignment = Assignment::default()
        .with_topic_partitions(vec![tp.clone().with_unknown_tagged_fields(tags(v, 0)), tp.with_partitions(vec![])])
        .with_unknown_tagged_fields(tags(v, 0));
    ShareGroupHeartbeatResponse::default()
        .with_error_message(Some(s("m")))
        .with_member_id(Some(s("member")))
        .with_member_epoch(3)
        .with_heartbeat_interval_ms(5000)
        .with_assignment(with_assignment.then_some(assignment))
        .with_unknown_tagged_fields(tags(v, 0))
}

fn share_group_describe(v: i16) -> m::ShareGroupDescribeResponse {
    use m::share_group_describe_response::*;
    let tp = TopicPartitions::default()
        .with_topic_id(id(3))
        .with_topic_name(topic("t"))
        .with_partitions(vec![0, 1]);
    let member = Member::default()
        .with_member_id(s("m1"))
        .with_rack_id(Some(s("r")))
        .with_member_epoch(3)
        .with_client_id(s("c"))
        .with_client_host(s("/127.0.0.1"))
        .with_subscribed_topic_names(vec![topic("t"), topic("u")])
        .with_assignment(
            Assignment::default()
                .with_topic_partitions(vec![tp.clone(), tp])
                .with_unknown_tagged_fields(tags(v, 0)),
        )
        .with_unknown_tagged_fields(tags(v, 0));
    let g = DescribedGroup::default()
        .with_error_message(Some(s("m")))
        .with_group_id(GroupId(s("g")))
        .with_group_state(s("Stable"))
        .with_group_epoch(3)
        .with_assignment_epoch(3)
        .with_assignor_name(s("simple"))
        .with_members(vec![member.clone(), member.with_rack_id(None)])
        .with_authorized_operations(8);
    ShareGroupDescribeResponse::default().with_groups(vec![g]).with_unknown_tagged_fields(tags(v, 0))
}

fn describe_share_offsets(v: i16) -> m::DescribeShareGroupOffsetsResponse {
    use m::describe_share_group_offsets_response::*;
    let p = DescribeShareGroupOffsetsResponsePartition::default()
        .with_start_offset(5)
        .with_leader_epoch(1)
        .with_error_message(Some(s("m")))
        .with_unknown_tagged_fields(tags(v, 0));
    let t = DescribeShareGroupOffsetsResponseTopic::default()
        .with_topic_name(topic("t"))
        .with_topic_id(id(6))
        .with_partitions(vec![p.clone(), p.with_partition_index(1)]);
    let g = DescribeShareGroupOffsetsResponseGroup::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(vec![t]);
    DescribeShareGroupOffsetsResponse::default()
        .with_groups(vec![g])
        .with_unknown_tagged_fields(tags(v, 0))
}

fn alter_share_offsets(v: i16) -> m::AlterShareGroupOffsetsResponse {
    use m::alter_share_group_offsets_response::*;
    let p = AlterShareGroupOffsetsResponsePartition::default().with_error_message(Some(s("m")));
    let t = AlterShareGroupOffsetsResponseTopic::default()
        .with_topic_name(topic("t"))
        .with_topic_id(id(6))
        .with_partitions(vec![p.clone(), p.with_partition_index(1)])
        .with_unknown_tagged_fields(tags(v, 0));
    AlterShareGroupOffsetsResponse::default().with_error_message(Some(s("m"))).with_responses(vec![t])
}

fn delete_share_offsets(v: i16) -> m::DeleteShareGroupOffsetsResponse {
    use m::delete_share_group_offsets_response::*;
    let t = DeleteShareGroupOffsetsResponseTopic::default()
        .with_topic_name(topic("t"))
        .with_topic_id(id(6))
        .with_error_message(Some(s("m")))
        .with_unknown_tagged_fields(tags(v, 0));
    DeleteShareGroupOffsetsResponse::default()
        .with_responses(vec![t.clone(), t])
        .with_unknown_tagged_fields(tags(v, 0))
}

fn versions() -> impl Iterator<Item = (&'static Schema, i16)> {
    ALL.iter().flat_map(|s| (s.min..=s.max).map(move |v| (s, v)))
}

/// Walks `bytes`, returning the bytes consumed and the length prefixes met.
fn walk(schema: &'static Schema, v: i16, bytes: &[u8]) -> Result<(usize, Vec<super::Prefix>), CodecError> {
    let mut w = Walk::new(schema, v, bytes);
    let n = w.message()?;
    Ok((n, w.prefixes))
}

#[test]
fn the_crates_encoding_of_every_schema_walks_exactly_at_every_version() {
    let mut checked = 0;
    for (schema, v) in versions() {
        for (i, bytes) in samples(schema.key, v).iter().enumerate() {
            let (n, prefixes) =
                walk(schema, v, bytes).unwrap_or_else(|e| panic!("{} v{v} sample {i}: {e}", schema.name));
            assert_eq!(n, bytes.len(), "{} v{v} sample {i}: the walk stopped short", schema.name);
            assert!(i == 0 || !prefixes.is_empty() || schema.key == 22, "{} v{v}: no prefix met", schema.name);
            assert_eq!(check(schema.key, v, bytes), Ok(()));
            crate_decode(schema.key, v, bytes)
                .unwrap_or_else(|e| panic!("{} v{v} sample {i}: crate: {e}", schema.name));
            checked += 1;
        }
    }
    assert!(checked > 150, "{checked}");
}

#[test]
fn the_mandatory_schemas_cover_the_versions_the_client_uses() {
    for (key, lo, hi) in [(3, 0, 13), (10, 0, 6), (76, 1, 1), (18, 0, 4), (0, 3, 13), (77, 1, 1), (16, 5, 5)] {
        for v in lo..=hi {
            assert!(super::schemas::lookup(key, v).is_some(), "key {key} v{v}");
        }
    }
}

/// Overwrites the prefix at `p` with a huge count or length.
fn patch_huge(bytes: &[u8], p: &super::Prefix) -> Vec<u8> {
    let huge: &[u8] = match p.width {
        0 => &[0xff, 0xff, 0xff, 0xff, 0x0f],
        2 => &[0x7f, 0xff],
        _ => &[0x7f, 0xff, 0xff, 0xff],
    };
    let mut out = bytes[..p.at].to_vec();
    out.extend_from_slice(huge);
    out.extend_from_slice(&bytes[p.at + p.len..]);
    out
}

#[test]
fn every_count_and_length_set_huge_is_rejected() {
    let mut patched = 0;
    for (schema, v) in versions() {
        for bytes in samples(schema.key, v) {
            let (_, prefixes) = walk(schema, v, &bytes).unwrap();
            for p in &prefixes {
                let bad = patch_huge(&bytes, p);
                assert!(
                    check(schema.key, v, &bad).is_err(),
                    "{} v{v}: prefix {p:?} set huge was accepted",
                    schema.name
                );
                patched += 1;
            }
        }
    }
    assert!(patched > 1000, "{patched}");
}

#[test]
fn a_huge_array_count_is_an_invalid_error_naming_the_message() {
    // FindCoordinator v4: throttle time, then a compact array count of 2^32 - 2.
    let body = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0];
    match check(10, 4, &body) {
        Err(CodecError::Invalid { what, detail }) => {
            assert_eq!(what, "FindCoordinatorResponse");
            assert!(detail.contains("Coordinators") && detail.contains("4294967294"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // Metadata v1 (non-flexible): an int32 broker count of i32::MAX.
    assert!(matches!(check(3, 1, &[0x7f, 0xff, 0xff, 0xff, 0, 0]), Err(CodecError::Invalid { .. })));
    // A negative non-null count.
    assert!(matches!(check(3, 1, &[0xff, 0xff, 0xff, 0xfe, 0, 0]), Err(CodecError::Invalid { .. })));
}

#[test]
fn the_fake_brokers_garbage_is_rejected_at_every_find_coordinator_version() {
    for v in 0..=6 {
        assert!(check(10, v, &[0xff; 9]).is_err(), "v{v}");
    }
}

#[test]
fn a_string_longer_than_the_body_is_truncated() {
    // ShareGroupHeartbeat v1: throttle, error code, then an error message of 99 bytes in 3.
    let body = [0, 0, 0, 0, 0, 0, 100, b'a', b'b', b'c'];
    assert!(matches!(
        check(76, 1, &body),
        Err(CodecError::Truncated { what: "ErrorMessage", needed: 99, remaining: 3 })
    ));
}

/// ApiVersions v3 with no API keys, then the tagged section `tagged`.
fn api_versions_v3(tagged: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 1, 0, 0, 0, 0];
    b.extend_from_slice(tagged);
    b
}

#[test]
fn known_tagged_fields_are_walked_within_their_size() {
    // SupportedFeatures (tag 0) holding one feature: name "f", min 0, max 1, no tags.
    let ok = api_versions_v3(&[1, 0, 8, 2, 2, b'f', 0, 0, 0, 1, 0]);
    assert_eq!(check(18, 3, &ok), Ok(()));
    crate_decode(18, 3, &ok).unwrap();
    // The same content under a size that is one too big, or one too small.
    assert!(check(18, 3, &api_versions_v3(&[1, 0, 9, 2, 2, b'f', 0, 0, 0, 1, 0, 0])).is_err());
    assert!(check(18, 3, &api_versions_v3(&[1, 0, 7, 2, 2, b'f', 0, 0, 0, 1, 0])).is_err());
    // A huge feature count inside a small tagged field.
    assert!(check(18, 3, &api_versions_v3(&[1, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x0f])).is_err());
    assert!(check(18, 3, &api_versions_v3(&[1, 2, 5, 0xff, 0xff, 0xff, 0xff, 0x0f])).is_err());
    // FinalizedFeaturesEpoch (tag 1) is an int64: size 8 is right, size 4 is not.
    assert_eq!(check(18, 4, &api_versions_v3(&[1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 5])), Ok(()));
    assert!(check(18, 4, &api_versions_v3(&[1, 1, 4, 0, 0, 0, 5])).is_err());
    // ZkMigrationReady (tag 3) is one byte.
    assert_eq!(check(18, 4, &api_versions_v3(&[1, 3, 1, 1])), Ok(()));
}

#[test]
fn unknown_tags_are_skipped_by_size_and_bad_tag_sections_rejected() {
    let ok = api_versions_v3(&[2, 40, 3, 0xff, 0xff, 0xff, 41, 0]);
    assert_eq!(check(18, 3, &ok), Ok(()));
    crate_decode(18, 3, &ok).unwrap();
    // An unknown tag whose size runs past the body.
    assert!(matches!(check(18, 3, &api_versions_v3(&[1, 40, 9, 0])), Err(CodecError::Truncated { .. })));
    // A huge tagged-field count.
    assert!(check(18, 3, &api_versions_v3(&[0xff, 0xff, 0xff, 0xff, 0x0f])).is_err());
    // Produce v9 knows no tag 0 in a partition (CurrentLeader came in v10): the crate refuses it,
    // and so does the walk.
    let body = |v: i16, leader: &[u8]| {
        let mut b = vec![2, 2, b't', 2]; // one topic "t", one partition
        b.extend_from_slice(&[0; 30]); // index, error code, base offset, append time, log start offset
        b.extend_from_slice(&[1, 0]); // no record errors, null error message
        b.extend_from_slice(&[1, 0, leader.len() as u8]); // one tagged field: tag 0
        b.extend_from_slice(leader);
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // topic tags, throttle time, tags
        (v, b)
    };
    // LeaderIdAndEpoch: leader id, leader epoch, no tags.
    let leader = [0, 0, 0, 1, 0, 0, 0, 2, 0];
    let (v, ok) = body(10, &leader);
    assert_eq!(check(0, v, &ok), Ok(()));
    crate_decode(0, v, &ok).unwrap();
    let (v, body) = body(9, &leader);
    assert!(check(0, v, &body).is_err());
    assert!(crate_decode(0, v, &body).is_err());
}

#[test]
fn apis_and_versions_without_a_schema_pass() {
    let garbage = [0xff; 9];
    assert_eq!(check(78, 1, &garbage), Ok(()), "ShareFetch has its own decoder");
    assert_eq!(check(3, 14, &garbage), Ok(()), "a Metadata version past the crate's");
    assert_eq!(check(1000, 0, &garbage), Ok(()));
    assert_eq!(check(10, -1, &garbage), Ok(()));
}

#[test]
fn a_large_metadata_response_walks() {
    use m::metadata_response::*;
    let p = MetadataResponsePartition::default()
        .with_leader_id(BrokerId(1))
        .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
        .with_isr_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)]);
    let t = MetadataResponseTopic::default().with_name(Some(topic("orders"))).with_partitions(vec![p; 1000]);
    let r = MetadataResponse::default().with_topics(vec![t; 100]);
    for v in [1, 12] {
        let bytes = encode(&r, v);
        assert_eq!(check(3, v, &bytes), Ok(()));
    }
}

/// Runs the walk, and the crate's decoder if the walk accepted: neither may panic or abort.
fn check_then_decode(schema: &Schema, v: i16, bytes: &[u8]) {
    if check(schema.key, v, bytes).is_ok() {
        let _ = crate_decode(schema.key, v, bytes);
    }
}

fn schema_and_version() -> impl Strategy<Value = (&'static Schema, i16)> {
    (0..ALL.len()).prop_flat_map(|i| {
        let s = &ALL[i];
        (Just(s), s.min..=s.max)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic((schema, v) in schema_and_version(), bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check_then_decode(schema, v, &bytes);
    }

    #[test]
    fn corrupted_responses_never_panic(
        (schema, v) in schema_and_version(),
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let all = samples(schema.key, v);
        let mut bytes = all[pick.index(all.len())].clone();
        if !bytes.is_empty() {
            for (at, b) in &edits {
                let i = at.index(bytes.len());
                bytes[i] = *b;
            }
            if do_cut {
                bytes.truncate(cut.index(bytes.len()));
            }
        }
        check_then_decode(schema, v, &bytes);
    }
}
