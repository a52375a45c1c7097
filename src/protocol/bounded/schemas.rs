//! The response layouts the walker knows, transcribed from the `kafka-protocol` 0.18 decoders
//! (`src/messages/*_response.rs`), which follow Apache Kafka's
//! `clients/src/main/resources/common/message/*Response.json`. Each covers every version the
//! crate decodes; the tests encode a populated response with the crate at each of them and check
//! that the walk takes exactly the encoded bytes.
//!
//! Covered: Produce (0) v3–13, Fetch (1) v4–18, ListOffsets (2) v1–10, Metadata (3) v0–13,
//! FindCoordinator (10) v0–6, ListGroups (16) v0–5, SaslHandshake (17) v0–1, ApiVersions (18)
//! v0–4, CreateTopics (19) v2–7, DeleteTopics (20) v1–6, DeleteRecords (21) v0–2, InitProducerId (22) v0–6,
//! DescribeConfigs (32) v1–4, SaslAuthenticate (36) v0–2, DeleteGroups (42) v0–2,
//! IncrementalAlterConfigs (44) v0–1, DescribeCluster (60) v0–2, ShareGroupHeartbeat (76) v1,
//! ShareGroupDescribe (77) v1, DescribeShareGroupOffsets (90) v0, AlterShareGroupOffsets (91) v0,
//! DeleteShareGroupOffsets (92) v0. Every other API (and ShareFetch and ShareAcknowledge, which
//! this crate decodes itself, with bounded allocations) passes unchecked.

use super::Ty::*;
use super::{f, Field, Schema};

/// The schema for API `key` at `version`, if there is one.
pub(super) fn lookup(key: i16, version: i16) -> Option<&'static Schema> {
    ALL.iter().find(|s| s.key == key && s.min <= version && version <= s.max)
}

/// Every schema.
pub(super) const ALL: &[Schema] = &[
    Schema { name: "ProduceResponse", key: 0, min: 3, max: 13, flexible: 9, fields: PRODUCE },
    Schema { name: "FetchResponse", key: 1, min: 4, max: 18, flexible: 12, fields: FETCH },
    Schema { name: "ListOffsetsResponse", key: 2, min: 1, max: 10, flexible: 6, fields: LIST_OFFSETS },
    Schema { name: "MetadataResponse", key: 3, min: 0, max: 13, flexible: 9, fields: METADATA },
    Schema { name: "FindCoordinatorResponse", key: 10, min: 0, max: 6, flexible: 3, fields: FIND_COORDINATOR },
    Schema { name: "ListGroupsResponse", key: 16, min: 0, max: 5, flexible: 3, fields: LIST_GROUPS },
    Schema { name: "SaslHandshakeResponse", key: 17, min: 0, max: 1, flexible: i16::MAX, fields: SASL_HANDSHAKE },
    Schema { name: "ApiVersionsResponse", key: 18, min: 0, max: 4, flexible: 3, fields: API_VERSIONS },
    Schema { name: "CreateTopicsResponse", key: 19, min: 2, max: 7, flexible: 5, fields: CREATE_TOPICS },
    Schema { name: "DeleteTopicsResponse", key: 20, min: 1, max: 6, flexible: 4, fields: DELETE_TOPICS },
    Schema { name: "DeleteRecordsResponse", key: 21, min: 0, max: 2, flexible: 2, fields: DELETE_RECORDS },
    Schema { name: "InitProducerIdResponse", key: 22, min: 0, max: 6, flexible: 2, fields: INIT_PRODUCER_ID },
    Schema { name: "DescribeConfigsResponse", key: 32, min: 1, max: 4, flexible: 4, fields: DESCRIBE_CONFIGS },
    Schema { name: "SaslAuthenticateResponse", key: 36, min: 0, max: 2, flexible: 2, fields: SASL_AUTHENTICATE },
    Schema { name: "DeleteGroupsResponse", key: 42, min: 0, max: 2, flexible: 2, fields: DELETE_GROUPS },
    Schema {
        name: "IncrementalAlterConfigsResponse",
        key: 44,
        min: 0,
        max: 1,
        flexible: 1,
        fields: INCREMENTAL_ALTER_CONFIGS,
    },
    Schema { name: "DescribeClusterResponse", key: 60, min: 0, max: 2, flexible: 0, fields: DESCRIBE_CLUSTER },
    Schema { name: "ShareGroupHeartbeatResponse", key: 76, min: 1, max: 1, flexible: 0, fields: SHARE_GROUP_HEARTBEAT },
    Schema { name: "ShareGroupDescribeResponse", key: 77, min: 1, max: 1, flexible: 0, fields: SHARE_GROUP_DESCRIBE },
    Schema {
        name: "DescribeShareGroupOffsetsResponse",
        key: 90,
        min: 0,
        max: 0,
        flexible: 0,
        fields: DESCRIBE_SHARE_GROUP_OFFSETS,
    },
    Schema {
        name: "AlterShareGroupOffsetsResponse",
        key: 91,
        min: 0,
        max: 0,
        flexible: 0,
        fields: ALTER_SHARE_GROUP_OFFSETS,
    },
    Schema {
        name: "DeleteShareGroupOffsetsResponse",
        key: 92,
        min: 0,
        max: 0,
        flexible: 0,
        fields: DELETE_SHARE_GROUP_OFFSETS,
    },
];

// ---- Produce (0) ----

const PRODUCE: &[Field] = &[
    f("Responses", Array(&Struct(PRODUCE_TOPIC))),
    f("ThrottleTimeMs", I32),
    f("NodeEndpoints", Array(&Struct(NODE_ENDPOINT))).since(10).tag(0),
];

const PRODUCE_TOPIC: &[Field] = &[
    f("Name", Str).until(12),
    f("TopicId", Uuid).since(13),
    f("PartitionResponses", Array(&Struct(PRODUCE_PARTITION))),
];

const PRODUCE_PARTITION: &[Field] = &[
    f("Index", I32),
    f("ErrorCode", I16),
    f("BaseOffset", I64),
    f("LogAppendTimeMs", I64),
    f("LogStartOffset", I64).since(5),
    f("RecordErrors", Array(&Struct(BATCH_INDEX_AND_ERROR_MESSAGE))).since(8),
    f("ErrorMessage", Str).since(8),
    f("CurrentLeader", Struct(LEADER_ID_AND_EPOCH)).since(10).tag(0),
];

const BATCH_INDEX_AND_ERROR_MESSAGE: &[Field] = &[f("BatchIndex", I32), f("BatchIndexErrorMessage", Str)];

/// `LeaderIdAndEpoch`, shared by Produce and Fetch.
const LEADER_ID_AND_EPOCH: &[Field] = &[f("LeaderId", I32), f("LeaderEpoch", I32)];

/// `NodeEndpoint`, shared by Produce and Fetch.
const NODE_ENDPOINT: &[Field] = &[f("NodeId", I32), f("Host", Str), f("Port", I32), f("Rack", Str)];

// ---- Fetch (1) ----

const FETCH: &[Field] = &[
    f("ThrottleTimeMs", I32),
    f("ErrorCode", I16).since(7),
    f("SessionId", I32).since(7),
    f("Responses", Array(&Struct(FETCH_TOPIC))),
    f("NodeEndpoints", Array(&Struct(NODE_ENDPOINT))).since(16).tag(0),
];

const FETCH_TOPIC: &[Field] =
    &[f("Topic", Str).until(12), f("TopicId", Uuid).since(13), f("Partitions", Array(&Struct(FETCH_PARTITION)))];

const FETCH_PARTITION: &[Field] = &[
    f("PartitionIndex", I32),
    f("ErrorCode", I16),
    f("HighWatermark", I64),
    f("LastStableOffset", I64),
    f("LogStartOffset", I64).since(5),
    f("DivergingEpoch", Struct(EPOCH_END_OFFSET)).since(12).tag(0),
    f("CurrentLeader", Struct(LEADER_ID_AND_EPOCH)).since(12).tag(1),
    f("SnapshotId", Struct(SNAPSHOT_ID)).since(12).tag(2),
    f("AbortedTransactions", Array(&Struct(ABORTED_TRANSACTION))),
    f("PreferredReadReplica", I32).since(11),
    f("Records", Bytes),
];

const EPOCH_END_OFFSET: &[Field] = &[f("Epoch", I32), f("EndOffset", I64)];

const SNAPSHOT_ID: &[Field] = &[f("EndOffset", I64), f("Epoch", I32)];

const ABORTED_TRANSACTION: &[Field] = &[f("ProducerId", I64), f("FirstOffset", I64)];

// ---- ListOffsets (2) ----

const LIST_OFFSETS: &[Field] = &[f("ThrottleTimeMs", I32).since(2), f("Topics", Array(&Struct(LIST_OFFSETS_TOPIC)))];

const LIST_OFFSETS_TOPIC: &[Field] = &[f("Name", Str), f("Partitions", Array(&Struct(LIST_OFFSETS_PARTITION)))];

const LIST_OFFSETS_PARTITION: &[Field] = &[
    f("PartitionIndex", I32),
    f("ErrorCode", I16),
    f("Timestamp", I64),
    f("Offset", I64),
    f("LeaderEpoch", I32).since(4),
];

// ---- Metadata (3) ----

const METADATA: &[Field] = &[
    f("ThrottleTimeMs", I32).since(3),
    f("Brokers", Array(&Struct(METADATA_BROKER))),
    f("ClusterId", Str).since(2),
    f("ControllerId", I32).since(1),
    f("Topics", Array(&Struct(METADATA_TOPIC))),
    f("ClusterAuthorizedOperations", I32).since(8).until(10),
    f("ErrorCode", I16).since(13),
];

const METADATA_BROKER: &[Field] = &[f("NodeId", I32), f("Host", Str), f("Port", I32), f("Rack", Str).since(1)];

const METADATA_TOPIC: &[Field] = &[
    f("ErrorCode", I16),
    f("Name", Str),
    f("TopicId", Uuid).since(10),
    f("IsInternal", Bool).since(1),
    f("Partitions", Array(&Struct(METADATA_PARTITION))),
    f("TopicAuthorizedOperations", I32).since(8),
];

const METADATA_PARTITION: &[Field] = &[
    f("ErrorCode", I16),
    f("PartitionIndex", I32),
    f("LeaderId", I32),
    f("LeaderEpoch", I32).since(7),
    f("ReplicaNodes", Array(&I32)),
    f("IsrNodes", Array(&I32)),
    f("OfflineReplicas", Array(&I32)).since(5),
];

// ---- FindCoordinator (10) ----

const FIND_COORDINATOR: &[Field] = &[
    f("ThrottleTimeMs", I32).since(1),
    f("ErrorCode", I16).until(3),
    f("ErrorMessage", Str).since(1).until(3),
    f("NodeId", I32).until(3),
    f("Host", Str).until(3),
    f("Port", I32).until(3),
    f("Coordinators", Array(&Struct(COORDINATOR))).since(4),
];

const COORDINATOR: &[Field] =
    &[f("Key", Str), f("NodeId", I32), f("Host", Str), f("Port", I32), f("ErrorCode", I16), f("ErrorMessage", Str)];

// ---- ListGroups (16) ----

const LIST_GROUPS: &[Field] =
    &[f("ThrottleTimeMs", I32).since(1), f("ErrorCode", I16), f("Groups", Array(&Struct(LISTED_GROUP)))];

const LISTED_GROUP: &[Field] =
    &[f("GroupId", Str), f("ProtocolType", Str), f("GroupState", Str).since(4), f("GroupType", Str).since(5)];

// ---- SaslHandshake (17) ----

const SASL_HANDSHAKE: &[Field] = &[f("ErrorCode", I16), f("Mechanisms", Array(&Str))];

// ---- ApiVersions (18) ----

const API_VERSIONS: &[Field] = &[
    f("ErrorCode", I16),
    f("ApiKeys", Array(&Struct(API_VERSION))),
    f("ThrottleTimeMs", I32).since(1),
    f("SupportedFeatures", Array(&Struct(SUPPORTED_FEATURE_KEY))).since(3).tag(0),
    f("FinalizedFeaturesEpoch", I64).since(3).tag(1),
    f("FinalizedFeatures", Array(&Struct(FINALIZED_FEATURE_KEY))).since(3).tag(2),
    f("ZkMigrationReady", Bool).since(3).tag(3),
];

const API_VERSION: &[Field] = &[f("ApiKey", I16), f("MinVersion", I16), f("MaxVersion", I16)];

const SUPPORTED_FEATURE_KEY: &[Field] = &[f("Name", Str), f("MinVersion", I16), f("MaxVersion", I16)];

const FINALIZED_FEATURE_KEY: &[Field] = &[f("Name", Str), f("MaxVersionLevel", I16), f("MinVersionLevel", I16)];

// ---- CreateTopics (19) ----

const CREATE_TOPICS: &[Field] = &[f("ThrottleTimeMs", I32), f("Topics", Array(&Struct(CREATABLE_TOPIC_RESULT)))];

const CREATABLE_TOPIC_RESULT: &[Field] = &[
    f("Name", Str),
    f("TopicId", Uuid).since(7),
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
    f("TopicConfigErrorCode", I16).since(5).tag(0),
    f("NumPartitions", I32).since(5),
    f("ReplicationFactor", I16).since(5),
    f("Configs", Array(&Struct(CREATABLE_TOPIC_CONFIGS))).since(5),
];

const CREATABLE_TOPIC_CONFIGS: &[Field] =
    &[f("Name", Str), f("Value", Str), f("ReadOnly", Bool), f("ConfigSource", I8), f("IsSensitive", Bool)];

// ---- DeleteTopics (20) ----

const DELETE_TOPICS: &[Field] = &[f("ThrottleTimeMs", I32), f("Responses", Array(&Struct(DELETABLE_TOPIC_RESULT)))];

const DELETABLE_TOPIC_RESULT: &[Field] =
    &[f("Name", Str), f("TopicId", Uuid).since(6), f("ErrorCode", I16), f("ErrorMessage", Str).since(5)];

// ---- DeleteRecords (21) ----

const DELETE_RECORDS: &[Field] = &[f("ThrottleTimeMs", I32), f("Topics", Array(&Struct(DELETE_RECORDS_TOPIC)))];

const DELETE_RECORDS_TOPIC: &[Field] = &[f("Name", Str), f("Partitions", Array(&Struct(DELETE_RECORDS_PARTITION)))];

const DELETE_RECORDS_PARTITION: &[Field] = &[f("PartitionIndex", I32), f("LowWatermark", I64), f("ErrorCode", I16)];

// ---- InitProducerId (22) ----

const INIT_PRODUCER_ID: &[Field] = &[
    f("ThrottleTimeMs", I32),
    f("ErrorCode", I16),
    f("ProducerId", I64),
    f("ProducerEpoch", I16),
    f("OngoingTxnProducerId", I64).since(6),
    f("OngoingTxnProducerEpoch", I16).since(6),
];

// ---- DescribeConfigs (32) ----

const DESCRIBE_CONFIGS: &[Field] = &[f("ThrottleTimeMs", I32), f("Results", Array(&Struct(DESCRIBE_CONFIGS_RESULT)))];

const DESCRIBE_CONFIGS_RESULT: &[Field] = &[
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
    f("ResourceType", I8),
    f("ResourceName", Str),
    f("Configs", Array(&Struct(DESCRIBE_CONFIGS_RESOURCE_RESULT))),
];

const DESCRIBE_CONFIGS_RESOURCE_RESULT: &[Field] = &[
    f("Name", Str),
    f("Value", Str),
    f("ReadOnly", Bool),
    f("ConfigSource", I8),
    f("IsSensitive", Bool),
    f("Synonyms", Array(&Struct(DESCRIBE_CONFIGS_SYNONYM))),
    f("ConfigType", I8).since(3),
    f("Documentation", Str).since(3),
];

const DESCRIBE_CONFIGS_SYNONYM: &[Field] = &[f("Name", Str), f("Value", Str), f("Source", I8)];

// ---- SaslAuthenticate (36) ----

const SASL_AUTHENTICATE: &[Field] =
    &[f("ErrorCode", I16), f("ErrorMessage", Str), f("AuthBytes", Bytes), f("SessionLifetimeMs", I64).since(1)];

// ---- DeleteGroups (42) ----

const DELETE_GROUPS: &[Field] = &[f("ThrottleTimeMs", I32), f("Results", Array(&Struct(DELETABLE_GROUP_RESULT)))];

const DELETABLE_GROUP_RESULT: &[Field] = &[f("GroupId", Str), f("ErrorCode", I16)];

// ---- IncrementalAlterConfigs (44) ----

const INCREMENTAL_ALTER_CONFIGS: &[Field] =
    &[f("ThrottleTimeMs", I32), f("Responses", Array(&Struct(ALTER_CONFIGS_RESOURCE_RESPONSE)))];

const ALTER_CONFIGS_RESOURCE_RESPONSE: &[Field] =
    &[f("ErrorCode", I16), f("ErrorMessage", Str), f("ResourceType", I8), f("ResourceName", Str)];

// ---- DescribeCluster (60) ----

const DESCRIBE_CLUSTER: &[Field] = &[
    f("ThrottleTimeMs", I32),
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
    f("EndpointType", I8).since(1),
    f("ClusterId", Str),
    f("ControllerId", I32),
    f("Brokers", Array(&Struct(DESCRIBE_CLUSTER_BROKER))),
    f("ClusterAuthorizedOperations", I32),
];

const DESCRIBE_CLUSTER_BROKER: &[Field] =
    &[f("BrokerId", I32), f("Host", Str), f("Port", I32), f("Rack", Str), f("IsFenced", Bool).since(2)];

// ---- ShareGroupHeartbeat (76) ----

const SHARE_GROUP_HEARTBEAT: &[Field] = &[
    f("ThrottleTimeMs", I32),
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
    f("MemberId", Str),
    f("MemberEpoch", I32),
    f("HeartbeatIntervalMs", I32),
    f("Assignment", NullableStruct(HEARTBEAT_ASSIGNMENT)),
];

const HEARTBEAT_ASSIGNMENT: &[Field] = &[f("TopicPartitions", Array(&Struct(HEARTBEAT_TOPIC_PARTITIONS)))];

const HEARTBEAT_TOPIC_PARTITIONS: &[Field] = &[f("TopicId", Uuid), f("Partitions", Array(&I32))];

// ---- ShareGroupDescribe (77) ----

const SHARE_GROUP_DESCRIBE: &[Field] = &[f("ThrottleTimeMs", I32), f("Groups", Array(&Struct(DESCRIBED_GROUP)))];

const DESCRIBED_GROUP: &[Field] = &[
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
    f("GroupId", Str),
    f("GroupState", Str),
    f("GroupEpoch", I32),
    f("AssignmentEpoch", I32),
    f("AssignorName", Str),
    f("Members", Array(&Struct(DESCRIBED_MEMBER))),
    f("AuthorizedOperations", I32),
];

const DESCRIBED_MEMBER: &[Field] = &[
    f("MemberId", Str),
    f("RackId", Str),
    f("MemberEpoch", I32),
    f("ClientId", Str),
    f("ClientHost", Str),
    f("SubscribedTopicNames", Array(&Str)),
    f("Assignment", Struct(DESCRIBED_ASSIGNMENT)),
];

const DESCRIBED_ASSIGNMENT: &[Field] = &[f("TopicPartitions", Array(&Struct(DESCRIBED_TOPIC_PARTITIONS)))];

const DESCRIBED_TOPIC_PARTITIONS: &[Field] = &[f("TopicId", Uuid), f("TopicName", Str), f("Partitions", Array(&I32))];

// ---- DescribeShareGroupOffsets (90) ----

const DESCRIBE_SHARE_GROUP_OFFSETS: &[Field] =
    &[f("ThrottleTimeMs", I32), f("Groups", Array(&Struct(DESCRIBE_SHARE_OFFSETS_GROUP)))];

const DESCRIBE_SHARE_OFFSETS_GROUP: &[Field] = &[
    f("GroupId", Str),
    f("Topics", Array(&Struct(DESCRIBE_SHARE_OFFSETS_TOPIC))),
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
];

const DESCRIBE_SHARE_OFFSETS_TOPIC: &[Field] =
    &[f("TopicName", Str), f("TopicId", Uuid), f("Partitions", Array(&Struct(DESCRIBE_SHARE_OFFSETS_PARTITION)))];

const DESCRIBE_SHARE_OFFSETS_PARTITION: &[Field] = &[
    f("PartitionIndex", I32),
    f("StartOffset", I64),
    f("LeaderEpoch", I32),
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
];

// ---- AlterShareGroupOffsets (91) ----

const ALTER_SHARE_GROUP_OFFSETS: &[Field] = &[
    f("ThrottleTimeMs", I32),
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
    f("Responses", Array(&Struct(ALTER_SHARE_OFFSETS_TOPIC))),
];

const ALTER_SHARE_OFFSETS_TOPIC: &[Field] =
    &[f("TopicName", Str), f("TopicId", Uuid), f("Partitions", Array(&Struct(ALTER_SHARE_OFFSETS_PARTITION)))];

const ALTER_SHARE_OFFSETS_PARTITION: &[Field] =
    &[f("PartitionIndex", I32), f("ErrorCode", I16), f("ErrorMessage", Str)];

// ---- DeleteShareGroupOffsets (92) ----

const DELETE_SHARE_GROUP_OFFSETS: &[Field] = &[
    f("ThrottleTimeMs", I32),
    f("ErrorCode", I16),
    f("ErrorMessage", Str),
    f("Responses", Array(&Struct(DELETE_SHARE_OFFSETS_TOPIC))),
];

const DELETE_SHARE_OFFSETS_TOPIC: &[Field] =
    &[f("TopicName", Str), f("TopicId", Uuid), f("ErrorCode", I16), f("ErrorMessage", Str)];
