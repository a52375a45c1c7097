//! The one error model of the crate.
//!
//! Every failure is a variant of [`Error`](enum@Error): matchable, with the context needed to act on it
//! (which API, which broker, which topic-partition) and a single answer to "should I retry?"
//! in [`Error::is_retriable`]. Nothing a broker or a user sends causes a panic: it becomes one
//! of these values.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use thiserror::Error;

use crate::acquire_mode::AcquireMode;
/// What went wrong decoding a response or encoding a request ([`Error::Malformed`],
/// [`Error::Codec`]).
pub use crate::protocol::CodecError;

/// Convenience alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A Kafka error code as a broker sent it (0 is never wrapped in this type).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub(crate) i16);

impl ErrorCode {
    // Every code the crate acts on, by its Kafka name, in code order.

    /// UNKNOWN_SERVER_ERROR (-1): the broker failed in a way it cannot say more about.
    pub const UNKNOWN_SERVER_ERROR: ErrorCode = ErrorCode(-1);
    /// UNKNOWN_TOPIC_OR_PARTITION (3).
    pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = ErrorCode(3);
    /// LEADER_NOT_AVAILABLE (5): the partition has no leader at the moment (an election).
    pub const LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode(5);
    /// NOT_LEADER_OR_FOLLOWER (6).
    pub const NOT_LEADER_OR_FOLLOWER: ErrorCode = ErrorCode(6);
    /// REQUEST_TIMED_OUT (7).
    pub const REQUEST_TIMED_OUT: ErrorCode = ErrorCode(7);
    /// COORDINATOR_LOAD_IN_PROGRESS (14).
    pub const COORDINATOR_LOAD_IN_PROGRESS: ErrorCode = ErrorCode(14);
    /// COORDINATOR_NOT_AVAILABLE (15).
    pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = ErrorCode(15);
    /// NOT_COORDINATOR (16).
    pub const NOT_COORDINATOR: ErrorCode = ErrorCode(16);
    /// INVALID_TOPIC_EXCEPTION (17): the topic name is not legal.
    pub const INVALID_TOPIC_EXCEPTION: ErrorCode = ErrorCode(17);
    /// INVALID_GROUP_ID (24).
    pub const INVALID_GROUP_ID: ErrorCode = ErrorCode(24);
    /// UNKNOWN_MEMBER_ID (25).
    pub const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode(25);
    /// REBALANCE_IN_PROGRESS (27): the share offset APIs answer it while the group changes.
    pub const REBALANCE_IN_PROGRESS: ErrorCode = ErrorCode(27);
    /// TOPIC_AUTHORIZATION_FAILED (29).
    pub const TOPIC_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(29);
    /// GROUP_AUTHORIZATION_FAILED (30): the principal may not READ (or DESCRIBE) the group.
    pub const GROUP_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(30);
    /// CLUSTER_AUTHORIZATION_FAILED (31).
    pub const CLUSTER_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(31);
    /// UNSUPPORTED_SASL_MECHANISM (33).
    pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode = ErrorCode(33);
    /// ILLEGAL_SASL_STATE (34).
    pub const ILLEGAL_SASL_STATE: ErrorCode = ErrorCode(34);
    /// UNSUPPORTED_VERSION (35).
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(35);
    /// TOPIC_ALREADY_EXISTS (36).
    pub const TOPIC_ALREADY_EXISTS: ErrorCode = ErrorCode(36);
    /// INVALID_REQUEST (42).
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(42);
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode = ErrorCode(45);
    /// DUPLICATE_SEQUENCE_NUMBER (46).
    pub const DUPLICATE_SEQUENCE_NUMBER: ErrorCode = ErrorCode(46);
    /// INVALID_PRODUCER_EPOCH (47).
    pub const INVALID_PRODUCER_EPOCH: ErrorCode = ErrorCode(47);
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53).
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(53);
    /// SASL_AUTHENTICATION_FAILED (58).
    pub const SASL_AUTHENTICATION_FAILED: ErrorCode = ErrorCode(58);
    /// UNKNOWN_PRODUCER_ID (59).
    pub const UNKNOWN_PRODUCER_ID: ErrorCode = ErrorCode(59);
    /// NON_EMPTY_GROUP (68).
    pub const NON_EMPTY_GROUP: ErrorCode = ErrorCode(68);
    /// GROUP_ID_NOT_FOUND (69).
    pub const GROUP_ID_NOT_FOUND: ErrorCode = ErrorCode(69);
    /// FENCED_LEADER_EPOCH (74): like NOT_LEADER_OR_FOLLOWER, the partition moved.
    pub const FENCED_LEADER_EPOCH: ErrorCode = ErrorCode(74);
    /// GROUP_MAX_SIZE_REACHED (81).
    pub const GROUP_MAX_SIZE_REACHED: ErrorCode = ErrorCode(81);
    /// UNKNOWN_TOPIC_ID (100).
    pub const UNKNOWN_TOPIC_ID: ErrorCode = ErrorCode(100);
    /// FENCED_MEMBER_EPOCH (110).
    pub const FENCED_MEMBER_EPOCH: ErrorCode = ErrorCode(110);
    /// INVALID_RECORD_STATE (121): the acquisition lock expired before the acknowledgement.
    pub const INVALID_RECORD_STATE: ErrorCode = ErrorCode(121);
    /// SHARE_SESSION_NOT_FOUND (122).
    pub const SHARE_SESSION_NOT_FOUND: ErrorCode = ErrorCode(122);
    /// INVALID_SHARE_SESSION_EPOCH (123).
    pub const INVALID_SHARE_SESSION_EPOCH: ErrorCode = ErrorCode(123);
    /// SHARE_SESSION_LIMIT_REACHED (133).
    pub const SHARE_SESSION_LIMIT_REACHED: ErrorCode = ErrorCode(133);

    /// Wraps a raw code; `None` for 0 (no error).
    pub fn from_code(code: i16) -> Option<ErrorCode> {
        (code != 0).then_some(ErrorCode(code))
    }

    /// The number the broker sent, e.g. 30.
    pub fn value(self) -> i16 {
        self.0
    }

    /// Kafka's name for the code, as Java's `Errors` enum spells it, e.g.
    /// `GROUP_AUTHORIZATION_FAILED`; `UNKNOWN_SERVER_ERROR` style names for every code Kafka
    /// defines, `UNKNOWN(<n>)` for one it does not.
    pub fn name(self) -> String {
        match ResponseError::try_from_code(self.0) {
            Some(kind) => {
                let camel = format!("{kind:?}");
                let mut out = String::with_capacity(camel.len() + 8);
                for (i, c) in camel.chars().enumerate() {
                    if c.is_ascii_uppercase() && i > 0 {
                        out.push('_');
                    }
                    out.push(c.to_ascii_uppercase());
                }
                out
            }
            None => format!("UNKNOWN({})", self.0),
        }
    }

    /// The `kafka-protocol` description of this code (kept inside: that crate's types are
    /// not this crate's API).
    pub(crate) fn kind(self) -> ResponseError {
        ResponseError::try_from_code(self.0).unwrap_or(ResponseError::Unknown(self.0))
    }

    /// Whether Kafka marks this code as retriable.
    pub fn is_retriable(self) -> bool {
        self.kind().is_retriable()
    }

    // How the crate acts on a code: every such decision is made here, by name.

    /// The partition has another leader now (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH): learn
    /// the leader the response names, or refresh metadata.
    pub(crate) fn is_partition_moved(self) -> bool {
        matches!(self, ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::FENCED_LEADER_EPOCH)
    }

    /// The broker does not know the topic or partition (UNKNOWN_TOPIC_OR_PARTITION,
    /// UNKNOWN_TOPIC_ID): our metadata may be stale; refresh it.
    pub(crate) fn is_unknown_topic_or_partition(self) -> bool {
        matches!(self, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION | ErrorCode::UNKNOWN_TOPIC_ID)
    }

    /// An acknowledgement error that passes with time while the acquisitions stay valid
    /// (share coordinator loading or moving, the state write timed out): worth resending the
    /// same acknowledgements to the same broker. Not so when the partition moved or is gone:
    /// a new leader does not know this member's acquisitions.
    pub(crate) fn is_transient_ack_error(self) -> bool {
        self.is_retriable() && !self.is_partition_moved() && !self.is_unknown_topic_or_partition()
    }

    /// The outcome of a request answered with this code may still happen (REQUEST_TIMED_OUT).
    pub(crate) fn is_outcome_unknown(self) -> bool {
        self == ErrorCode::REQUEST_TIMED_OUT
    }

    /// The group's coordinator is elsewhere or gone (NOT_COORDINATOR,
    /// COORDINATOR_NOT_AVAILABLE): find the coordinator again, then retry.
    pub(crate) fn is_coordinator_moved(self) -> bool {
        matches!(self, ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE)
    }

    /// The coordinator is busy (COORDINATOR_LOAD_IN_PROGRESS, REBALANCE_IN_PROGRESS): back off,
    /// then ask the same coordinator again, as the Java admin does.
    pub(crate) fn is_coordinator_busy(self) -> bool {
        matches!(self, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS | ErrorCode::REBALANCE_IN_PROGRESS)
    }

    /// The coordinator no longer counts this member in the group (FENCED_MEMBER_EPOCH,
    /// UNKNOWN_MEMBER_ID): rejoin with the same member id; the assignment is gone.
    pub(crate) fn is_member_fenced(self) -> bool {
        matches!(self, ErrorCode::FENCED_MEMBER_EPOCH | ErrorCode::UNKNOWN_MEMBER_ID)
    }

    /// A refusal of a topic that the consumer reports to the application rather than retries
    /// (INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED); [`Error::for_topic`] gives each
    /// its own variant.
    pub(crate) fn is_topic_refused(self) -> bool {
        matches!(self, ErrorCode::INVALID_TOPIC_EXCEPTION | ErrorCode::TOPIC_AUTHORIZATION_FAILED)
    }

    /// A ShareGroupHeartbeat code after which the member gives up, as the Java client does:
    /// TOPIC_ or GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID, UNSUPPORTED_VERSION,
    /// INVALID_REQUEST, GROUP_MAX_SIZE_REACHED. Surfaced to the user from poll.
    pub(crate) fn is_fatal_for_member(self) -> bool {
        matches!(
            self,
            ErrorCode::TOPIC_AUTHORIZATION_FAILED
                | ErrorCode::GROUP_AUTHORIZATION_FAILED
                | ErrorCode::INVALID_GROUP_ID
                | ErrorCode::UNSUPPORTED_VERSION
                | ErrorCode::INVALID_REQUEST
                | ErrorCode::GROUP_MAX_SIZE_REACHED
        )
    }

    /// A top-level ShareFetch or ShareAcknowledge code that retrying cannot fix, so the
    /// consumer turns fatal: TOPIC_ or GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION,
    /// INVALID_REQUEST.
    pub(crate) fn is_fatal_for_share_requests(self) -> bool {
        matches!(
            self,
            ErrorCode::TOPIC_AUTHORIZATION_FAILED
                | ErrorCode::GROUP_AUTHORIZATION_FAILED
                | ErrorCode::UNSUPPORTED_VERSION
                | ErrorCode::INVALID_REQUEST
        )
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}({})", self.kind(), self.0)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, text) = (format!("{:?}", self.kind()), self.kind().to_string());
        write!(f, "{name} ({})", self.0)?;
        // kafka-protocol's text is often the name again: say it only when it adds something.
        if text != name && !text.is_empty() {
            write!(f, ": {text}")?;
        }
        Ok(())
    }
}

impl ErrorCode {
    /// What to do about a refusal the user fixes outside the client (ACLs), for the codes
    /// that have one fix.
    pub(crate) fn hint(self) -> Option<&'static str> {
        Some(match self {
            ErrorCode::TOPIC_AUTHORIZATION_FAILED => {
                "grant this principal DESCRIBE and READ on the topic (WRITE to produce), or stop using it"
            }
            ErrorCode::GROUP_AUTHORIZATION_FAILED => {
                "grant this principal READ on the group (DESCRIBE to describe it, DELETE to delete it or its offsets)"
            }
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED => {
                "grant this principal the operation on the cluster resource (e.g. IDEMPOTENT_WRITE to produce idempotently, CREATE to create topics, ALTER_CONFIGS)"
            }
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => {
                "grant this principal WRITE and DESCRIBE on the transactional id"
            }
            ErrorCode::SASL_AUTHENTICATION_FAILED => "check the SASL mechanism, user name and password or token",
            _ => return None,
        })
    }
}

/// The tail of a broker error's message: the broker's text when it sent one (an empty text is
/// no text), then what to do when the code has one fix.
fn broker_detail(code: &ErrorCode, message: &Option<String>) -> String {
    let mut out = String::new();
    if let Some(m) = message.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        out.push_str(&format!(" ({m})"));
    }
    if let Some(h) = code.hint() {
        out.push_str(&format!(": {h}"));
    }
    out
}

/// Where an error happened: filled in as far as the layer that raised it knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// The API (request type) involved, e.g. "ShareFetch".
    pub api: Option<&'static str>,
    /// The broker (node id) involved, if known.
    pub broker: Option<i32>,
    /// The topic involved, if any.
    pub topic: Option<String>,
    /// The partition involved, if any.
    pub partition: Option<i32>,
}

impl Context {
    /// A context naming only the API.
    pub fn api(api: &'static str) -> Self {
        Context { api: Some(api), ..Default::default() }
    }

    /// Adds the broker.
    pub fn broker(mut self, broker: i32) -> Self {
        self.broker = Some(broker);
        self
    }

    /// Adds the topic-partition.
    pub fn partition(mut self, topic: impl Into<String>, partition: i32) -> Self {
        self.topic = Some(topic.into());
        self.partition = Some(partition);
        self
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(api) = self.api {
            write!(f, "{api}")?;
            sep = " ";
        }
        if let Some(b) = self.broker {
            write!(f, "{sep}broker {b}")?;
            sep = " ";
        }
        match (&self.topic, self.partition) {
            (Some(t), Some(p)) => write!(f, "{sep}{t}-{p}")?,
            (Some(t), None) => write!(f, "{sep}{t}")?,
            _ => {}
        }
        Ok(())
    }
}

/// Every error this crate returns.
#[derive(Debug, Error, Clone)]
#[non_exhaustive]
pub enum Error {
    /// A configuration key or value is wrong. The message says what to use instead.
    #[error("config {key}: {message}")]
    Config {
        /// The Java property name of the setting.
        key: String,
        /// What is wrong and what to do.
        message: String,
    },

    /// Could not connect to or talk to a broker.
    #[error("io with {addr}: {source}")]
    Io {
        /// host:port of the broker.
        addr: String,
        /// The underlying error.
        source: Arc<std::io::Error>,
    },

    /// The connection to a broker is gone (closed by the peer, or poisoned by an earlier
    /// error, which is given as the cause). Requests on it were not answered.
    #[error("connection to {addr} closed{}", cause.as_ref().map(|c| format!(": {c}")).unwrap_or_default())]
    ConnectionClosed {
        /// host:port of the broker.
        addr: String,
        /// What broke the connection, if it was not a clean close.
        cause: Option<Arc<Error>>,
    },

    /// The request was written in full, then its answer was lost: the connection failed or
    /// the answer did not come in time. The broker **may have applied it**, or not; nothing
    /// here can tell which. Requests that never left whole stay [`Error::ConnectionClosed`]
    /// or [`Error::Timeout`]: the broker cannot have applied those. So do requests that only
    /// read (Metadata, ListGroups, ShareGroupDescribe, DescribeShareGroupOffsets, ...): there
    /// is nothing to apply.
    ///
    /// Retriable in the sense of [`Error::is_retriable`] (a new connection may succeed), but
    /// only operations that are safe to apply twice should be retried blindly. The share
    /// consumer never resends acknowledgements: it reports them with this error, per
    /// partition; records the broker did not take are delivered again.
    #[error("{api} to {addr}: outcome unknown, the broker may have applied it (the request was sent, then {cause})")]
    OutcomeUnknown {
        /// The API of the request, e.g. "ShareAcknowledge".
        api: &'static str,
        /// host:port of the broker.
        addr: String,
        /// Why no answer came: [`Error::ConnectionClosed`] or [`Error::Timeout`].
        cause: Arc<Error>,
    },

    /// A broker's response could not be decoded (malformed, truncated). The connection it
    /// came on was closed; a retry on a new connection may succeed.
    #[error("{context}: malformed response: {source}")]
    Malformed {
        /// Where.
        context: Context,
        /// What.
        source: CodecError,
    },

    /// A request could not be encoded (a value the protocol version cannot carry).
    #[error("{context}: {source}")]
    Codec {
        /// Where.
        context: Context,
        /// What.
        source: CodecError,
    },

    /// The broker answered with an error code.
    #[error("{context}: {code}{}", broker_detail(code, message))]
    Broker {
        /// Where.
        context: Context,
        /// The Kafka error code.
        code: ErrorCode,
        /// The broker's error message, if it sent one.
        message: Option<String>,
    },

    /// No version of an API is supported by both this client and the broker.
    #[error("broker {broker} supports {api} versions {broker_min}..={broker_max}; this client needs {client_min}..={client_max}. Upgrade the broker (Kafka 4.1+ for share groups).")]
    UnsupportedVersion {
        /// The API name.
        api: &'static str,
        /// The broker's node id (-1 for a bootstrap connection).
        broker: i32,
        /// Lowest version the broker supports (-1 if it does not list the API).
        broker_min: i16,
        /// Highest version the broker supports (-1 if it does not list the API).
        broker_max: i16,
        /// Lowest version this client speaks.
        client_min: i16,
        /// Highest version this client speaks.
        client_max: i16,
    },

    /// A cluster feature the operation needs is off.
    #[error("the cluster feature {feature} is {level} but {needed} or higher is needed: {hint}")]
    FeatureDisabled {
        /// Feature name, e.g. `share.version`.
        feature: &'static str,
        /// The finalized level (0 when absent).
        level: i16,
        /// The level needed.
        needed: i16,
        /// How to turn it on.
        hint: &'static str,
    },

    /// The broker cannot do this operation (its version lacks it or gets it wrong); nothing
    /// was changed. `needs` says what would make it work.
    #[error("{what} is not possible on this broker: {needs}")]
    Unsupported {
        /// The operation, e.g. "altering share-group start offsets".
        what: String,
        /// What is needed instead, e.g. "Kafka 4.2+".
        needs: &'static str,
    },

    /// A RENEW (extending a record's acquisition lock) needs ShareAcknowledge v2 (Kafka 4.2+)
    /// and this cluster speaks v1: nothing was sent, and the record is still the
    /// application's to acknowledge within its lock. Not retriable: the cluster's version
    /// decides.
    #[error(
        "RENEW needs ShareAcknowledge v2 (Kafka 4.2+); this cluster speaks v1. Acknowledge within the lock instead, or raise share.record.lock.duration.ms"
    )]
    RenewUnsupported,

    /// The configured `share.acquire.mode` needs ShareFetch v2 (Kafka 4.2+) and the cluster
    /// speaks v1 only: found by `ShareConsumer::connect` (`broker` None), or by a fetch to a
    /// broker that speaks less than the one connect asked. Use `batch_optimized`, or upgrade
    /// the cluster; not retriable.
    #[error(
        "share.acquire.mode {} needs ShareFetch v2 (Kafka 4.2+); {} speaks v1 only: use batch_optimized",
        mode.name(),
        broker.map_or_else(|| "this cluster".to_string(), |b| format!("broker {b}"))
    )]
    AcquireModeUnsupported {
        /// The mode asked for (`record_limit`: the only one v1 lacks).
        mode: AcquireMode,
        /// The broker that refused it, when a fetch found it (None: the cluster, at connect).
        broker: Option<i32>,
    },

    /// The operation did not finish in time.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        /// What timed out.
        what: String,
        /// The limit that passed.
        after: Duration,
    },

    /// `poll` on a consumer that is subscribed to nothing. Call `subscribe` (or
    /// `subscribe_pattern`) first.
    #[error("not subscribed to any topic: call subscribe first")]
    NotSubscribed,

    /// A second `poll` while one is in progress on the same consumer (another task, or a
    /// `select!` that polls twice). Poll from one task and share the records, or use one
    /// consumer per task.
    #[error(
        "another poll is in progress on this consumer: poll from one task (share the records, not the polling), or use one consumer per task"
    )]
    ConcurrentPoll,

    /// Explicit mode: `poll` while records of the last poll are not acknowledged. Acknowledge
    /// each (ACCEPT, RELEASE or REJECT), then poll; nothing was lost.
    #[error(
        "{count} records of the last poll are not acknowledged; in explicit mode acknowledge every record (ACCEPT, RELEASE or REJECT) before polling again"
    )]
    UnacknowledgedRecords {
        /// How many records wait for their acknowledgement.
        count: usize,
    },

    /// `acknowledge` on a consumer in implicit mode (which accepts every record on the next
    /// poll or commit). Set `share.acknowledgement.mode=explicit` to acknowledge records.
    #[error(
        "acknowledge is for explicit mode; set share.acknowledgement.mode=explicit (implicit mode accepts every record on the next poll or commit)"
    )]
    ImplicitAcknowledgement,

    /// A record whose acknowledgement already left (by a poll, commit or close): it can no
    /// longer change. A renewed record comes back from a later poll: acknowledge that one.
    #[error(
        "{topic}-{partition} offset {offset} was already acknowledged and the acknowledgement sent (by a poll, commit or close): it can no longer change. A renewed record comes back from a later poll: acknowledge that one"
    )]
    AlreadyAcknowledged {
        /// The record's topic.
        topic: String,
        /// The record's partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
    },

    /// A consumer call from inside its own acknowledgement commit callback (which runs inside
    /// poll, commit or close). Record what you need there and act after that call returns.
    #[error(
        "the share consumer cannot be called from its acknowledgement commit callback (it runs inside poll, commit or close): record what you need there and act on it after that call returns"
    )]
    CalledFromCallback,

    /// A destructive admin call (delete the group, alter or delete its offsets) on a share
    /// group that has members (Kafka's NON_EMPTY_GROUP): stop them first; nothing changed.
    #[error("group {group} has active members; stop them first")]
    GroupNotEmpty {
        /// The group.
        group: String,
    },

    /// A broker's answer lacked an item the request asked about (a topic, a partition, a
    /// group): a broker bug or a race with a change on the broker. Nothing is known about
    /// that item; retrying may help.
    #[error("the {api} response left out {missing}")]
    IncompleteResponse {
        /// The API of the answer, e.g. "CreateTopics".
        api: &'static str,
        /// What it left out, e.g. "topic orders".
        missing: String,
    },

    /// A broker the client must talk to (a partition's leader, a coordinator) is not in the
    /// cluster metadata even after a refresh: it left the cluster. Retrying finds the new
    /// leader or coordinator.
    #[error("broker {node_id} is not in the cluster metadata (it left the cluster); retrying finds its successor")]
    UnknownBroker {
        /// The broker's node id.
        node_id: i32,
    },

    /// One of the client's background tasks ended without finishing its work: it panicked
    /// (a bug in this crate, or a panic in a handler the task ran) or its runtime shut down.
    /// What it held went back as on a lost connection.
    #[error("the {task} task ended early: {detail}")]
    TaskFailed {
        /// Which task, e.g. "processing engine" or "ShareFetch request".
        task: String,
        /// How it ended (the panic message, or "was cancelled").
        detail: String,
    },

    /// An argument was rejected before anything was sent: a bug in the calling code. The
    /// message names the argument and what a valid one looks like.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A reset relative to the current start offset (`OffsetResetSpec::Current` or
    /// `ShiftBy`) asked for partitions the share group has no start offset for yet (no
    /// consumer of the group has fetched from them). The arguments are fine; the group's
    /// state does not allow it. Nothing was changed.
    #[error(
        "share group {group} has no start offset yet for {} (no consumer of the group has fetched from it), \
         so a reset relative to the current start offset has nothing to start from; reset it to \
         earliest, latest, an offset or a timestamp, or leave it out",
        .partitions.iter().map(|tp| tp.to_string()).collect::<Vec<_>>().join(", ")
    )]
    NoStartOffset {
        /// The share group.
        group: String,
        /// Every partition asked for that has no start offset.
        partitions: Vec<crate::TopicPartition>,
    },

    /// A blocking call was interrupted by `wakeup()`.
    #[error("woken up by wakeup()")]
    Wakeup,

    /// The client was closed; no further calls are possible.
    #[error("the client is closed")]
    Closed,

    /// Metadata did not know a topic (by name or id) after a refresh.
    #[error("unknown topic {0}")]
    UnknownTopic(String),

    /// An acknowledgement for a delivery whose acquisition lock expired: nothing was sent
    /// for it. When `redelivered`, the broker has since delivered the record again (with a
    /// higher delivery count) and the acknowledgement would have landed on that newer
    /// delivery; acknowledge the newer one when it is processed. The broker's own answer to
    /// a late acknowledgement is INVALID_RECORD_STATE, and [`Error::code`] says the same.
    #[error(
        "{topic}-{partition} offset {offset}: the acquisition lock of delivery {delivery_count} expired{}; this acknowledgement was not applied",
        if *redelivered { " and the record was delivered again" } else { "" }
    )]
    LockExpired {
        /// The record's topic.
        topic: String,
        /// The record's partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
        /// The delivery count of the delivery that was acknowledged.
        delivery_count: i16,
        /// Whether the record was delivered again since.
        redelivered: bool,
    },

    /// SASL authentication failed (wrong credentials, a mechanism the listener does not
    /// enable, a refused token, a server that could not prove it knows the password).
    /// Retrying with the same settings cannot help: the message says what to fix.
    #[error("{mechanism} authentication failed: {message}")]
    Authentication {
        /// The SASL mechanism, e.g. "SCRAM-SHA-512".
        mechanism: String,
        /// What went wrong (never a secret).
        message: String,
    },

    /// A TLS connection could not be set up: an untrusted or invalid broker certificate, a
    /// name the certificate does not cover, a client certificate the broker wanted, or a
    /// listener that does not speak TLS (or speaks it when we do not). Retrying with the same
    /// settings cannot help: the message names the cause and the fix.
    #[error("TLS with {addr}: {message}")]
    Tls {
        /// host:port of the broker.
        addr: String,
        /// What went wrong and what to do.
        message: String,
    },

    /// A topic name Kafka does not accept: found before anything was sent (`subscribe`
    /// checks names as Kafka does), or refused by the broker (INVALID_TOPIC_EXCEPTION, 17).
    /// Retrying cannot help: fix the name.
    #[error("invalid topic name {topic:?}: {reason}")]
    InvalidTopic {
        /// The name as given.
        topic: String,
        /// Which rule it breaks.
        reason: String,
    },

    /// A record batch holding records this share consumer acquired could not be decoded:
    /// its CRC did not match (with `check.crcs`), it did not decompress, or its records did not
    /// parse. The consumer rejected (REJECT) the acquired records of the batch, so the broker
    /// archives them rather than delivering them again and again, and carries on with the
    /// records after it: the next poll goes on as usual. Reported once, by the poll after the
    /// one that returned the partition's records from before the batch (as Java's
    /// `CorruptRecordException`). Not retriable: those records are gone; read them with
    /// another tool if they matter.
    #[error(
        "record batch of {topic}-{partition} at offsets {first_offset}..={last_offset} is corrupt ({detail}); \
         the records of it this consumer acquired were rejected, and it carries on with the next ones"
    )]
    CorruptRecord {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The batch's first offset.
        first_offset: i64,
        /// The batch's last offset.
        last_offset: i64,
        /// What is wrong with the batch.
        detail: String,
    },

    /// The broker will not describe this topic to this client's principal
    /// (TOPIC_AUTHORIZATION_FAILED, 29).
    #[error(
        "not authorized to access topic {topic:?}: grant this principal DESCRIBE and READ on it, or stop using it"
    )]
    TopicAuthorizationFailed {
        /// The topic.
        topic: String,
    },

    /// A processing engine stopped because its batch handler asked it to
    /// ([`processor::Stop`](crate::processor::Stop)): the reason is the handler's. The batch
    /// it was handling went back to the group.
    #[error("the processing engine stopped: {reason}")]
    ProcessorStopped {
        /// The handler's reason.
        reason: String,
    },
}

impl Error {
    /// Whether trying the same operation again (after a backoff) can succeed.
    ///
    /// For [`Error::OutcomeUnknown`] this is true, as for any lost connection, but the first
    /// attempt may have taken effect: check [`Error::is_outcome_unknown`] before retrying an
    /// operation that must not be applied twice.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Io { .. }
            | Error::ConnectionClosed { .. }
            | Error::Timeout { .. }
            | Error::Malformed { .. }
            | Error::OutcomeUnknown { .. } => true,
            Error::Broker { code, .. } => code.is_retriable(),
            Error::UnknownTopic(_) | Error::IncompleteResponse { .. } | Error::UnknownBroker { .. } => true,
            _ => false,
        }
    }

    /// Whether the request was sent whole and its answer lost, so the broker may have
    /// applied it ([`Error::OutcomeUnknown`]).
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Error::OutcomeUnknown { .. })
    }

    /// The broker error code, if this is a broker error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Broker { code, .. } => Some(*code),
            Error::LockExpired { .. } => Some(ErrorCode::INVALID_RECORD_STATE),
            Error::InvalidTopic { .. } => Some(ErrorCode::INVALID_TOPIC_EXCEPTION),
            Error::TopicAuthorizationFailed { .. } => Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED),
            Error::GroupNotEmpty { .. } => Some(ErrorCode::NON_EMPTY_GROUP),
            _ => None,
        }
    }

    /// The error for a topic-level error code in a response about `topic`; `None` when the
    /// code is 0. The codes users act on per topic get their own variants.
    pub(crate) fn for_topic(code: i16, api: &'static str, topic: &str) -> Option<Error> {
        match ErrorCode::from_code(code)? {
            ErrorCode::INVALID_TOPIC_EXCEPTION => Some(Error::InvalidTopic {
                topic: topic.to_string(),
                reason: "the broker refused it (INVALID_TOPIC_EXCEPTION)".into(),
            }),
            ErrorCode::TOPIC_AUTHORIZATION_FAILED => Some(Error::TopicAuthorizationFailed { topic: topic.to_string() }),
            code => Some(Error::Broker {
                context: Context { topic: Some(topic.to_string()), ..Context::api(api) },
                code,
                message: None,
            }),
        }
    }

    /// Builds a broker error from a raw code; `None` when the code is 0.
    pub(crate) fn from_code(code: i16, message: Option<String>, context: Context) -> Option<Error> {
        ErrorCode::from_code(code).map(|code| Error::Broker { context, code, message })
    }

    pub(crate) fn config(key: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Config { key: key.into(), message: message.into() }
    }

    pub(crate) fn io(addr: impl Into<String>, e: std::io::Error) -> Error {
        Error::Io { addr: addr.into(), source: Arc::new(e) }
    }
}

/// Turns an error code from a response into a `Result`.
pub(crate) fn check(code: i16, message: Option<String>, context: impl FnOnce() -> Context) -> Result<()> {
    match ErrorCode::from_code(code) {
        None => Ok(()),
        Some(code) => Err(Error::Broker { context: context(), code, message }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_error_names_code_and_context() {
        let e = Error::from_code(
            121,
            Some("lock expired".into()),
            Context::api("ShareAcknowledge").broker(2).partition("orders", 3),
        )
        .unwrap();
        let text = e.to_string();
        assert!(text.contains("ShareAcknowledge broker 2 orders-3"), "{text}");
        assert!(text.contains("InvalidRecordState (121)"), "{text}");
        assert_eq!(e.code(), Some(ErrorCode::INVALID_RECORD_STATE));
        assert!(!e.is_retriable());
    }

    #[test]
    fn retriable_follows_kafka() {
        assert!(ErrorCode::NOT_LEADER_OR_FOLLOWER.is_retriable());
        assert!(!ErrorCode::FENCED_MEMBER_EPOCH.is_retriable());
        assert!(Error::Timeout { what: "x".into(), after: Duration::from_secs(1) }.is_retriable());
        assert!(!Error::Wakeup.is_retriable());
    }

    #[test]
    fn topic_codes_get_their_own_variants() {
        let invalid = Error::for_topic(17, "Metadata", "a b").unwrap();
        assert!(matches!(&invalid, Error::InvalidTopic { topic, .. } if topic == "a b"), "{invalid:?}");
        assert_eq!(invalid.code(), Some(ErrorCode::INVALID_TOPIC_EXCEPTION));
        let denied = Error::for_topic(29, "Metadata", "secret").unwrap();
        assert!(matches!(&denied, Error::TopicAuthorizationFailed { topic } if topic == "secret"), "{denied:?}");
        assert_eq!(denied.code(), Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED));
        assert!(!invalid.is_retriable() && !denied.is_retriable());
        let other = Error::for_topic(5, "Metadata", "t").unwrap();
        assert!(other.to_string().contains("Metadata t"), "{other}");
        assert!(other.is_retriable());
        assert!(Error::for_topic(0, "Metadata", "t").is_none());
    }

    /// Every named code with its Kafka name.
    const NAMED: &[(ErrorCode, &str)] = &[
        (ErrorCode::UNKNOWN_SERVER_ERROR, "UNKNOWN_SERVER_ERROR"),
        (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION"),
        (ErrorCode::LEADER_NOT_AVAILABLE, "LEADER_NOT_AVAILABLE"),
        (ErrorCode::NOT_LEADER_OR_FOLLOWER, "NOT_LEADER_OR_FOLLOWER"),
        (ErrorCode::COORDINATOR_LOAD_IN_PROGRESS, "COORDINATOR_LOAD_IN_PROGRESS"),
        (ErrorCode::COORDINATOR_NOT_AVAILABLE, "COORDINATOR_NOT_AVAILABLE"),
        (ErrorCode::NOT_COORDINATOR, "NOT_COORDINATOR"),
        (ErrorCode::INVALID_TOPIC_EXCEPTION, "INVALID_TOPIC_EXCEPTION"),
        (ErrorCode::INVALID_GROUP_ID, "INVALID_GROUP_ID"),
        (ErrorCode::UNKNOWN_MEMBER_ID, "UNKNOWN_MEMBER_ID"),
        (ErrorCode::REBALANCE_IN_PROGRESS, "REBALANCE_IN_PROGRESS"),
        (ErrorCode::TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED"),
        (ErrorCode::GROUP_AUTHORIZATION_FAILED, "GROUP_AUTHORIZATION_FAILED"),
        (ErrorCode::CLUSTER_AUTHORIZATION_FAILED, "CLUSTER_AUTHORIZATION_FAILED"),
        (ErrorCode::UNSUPPORTED_SASL_MECHANISM, "UNSUPPORTED_SASL_MECHANISM"),
        (ErrorCode::ILLEGAL_SASL_STATE, "ILLEGAL_SASL_STATE"),
        (ErrorCode::UNSUPPORTED_VERSION, "UNSUPPORTED_VERSION"),
        (ErrorCode::TOPIC_ALREADY_EXISTS, "TOPIC_ALREADY_EXISTS"),
        (ErrorCode::INVALID_REQUEST, "INVALID_REQUEST"),
        (ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
        (ErrorCode::DUPLICATE_SEQUENCE_NUMBER, "DUPLICATE_SEQUENCE_NUMBER"),
        (ErrorCode::INVALID_PRODUCER_EPOCH, "INVALID_PRODUCER_EPOCH"),
        (ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        (ErrorCode::SASL_AUTHENTICATION_FAILED, "SASL_AUTHENTICATION_FAILED"),
        (ErrorCode::UNKNOWN_PRODUCER_ID, "UNKNOWN_PRODUCER_ID"),
        (ErrorCode::NON_EMPTY_GROUP, "NON_EMPTY_GROUP"),
        (ErrorCode::GROUP_ID_NOT_FOUND, "GROUP_ID_NOT_FOUND"),
        (ErrorCode::FENCED_LEADER_EPOCH, "FENCED_LEADER_EPOCH"),
        (ErrorCode::GROUP_MAX_SIZE_REACHED, "GROUP_MAX_SIZE_REACHED"),
        (ErrorCode::UNKNOWN_TOPIC_ID, "UNKNOWN_TOPIC_ID"),
        (ErrorCode::FENCED_MEMBER_EPOCH, "FENCED_MEMBER_EPOCH"),
        (ErrorCode::INVALID_RECORD_STATE, "INVALID_RECORD_STATE"),
        (ErrorCode::SHARE_SESSION_NOT_FOUND, "SHARE_SESSION_NOT_FOUND"),
        (ErrorCode::INVALID_SHARE_SESSION_EPOCH, "INVALID_SHARE_SESSION_EPOCH"),
        (ErrorCode::SHARE_SESSION_LIMIT_REACHED, "SHARE_SESSION_LIMIT_REACHED"),
    ];

    #[test]
    fn an_authorization_refusal_says_what_to_grant_and_no_empty_message() {
        let e = Error::Broker {
            context: Context::api("FindCoordinator"),
            code: ErrorCode::GROUP_AUTHORIZATION_FAILED,
            message: Some(String::new()),
        };
        let text = e.to_string();
        assert!(!text.contains("()"), "an empty broker message is no message: {text}");
        assert_eq!(text.matches("GroupAuthorizationFailed").count(), 1, "the name once: {text}");
        assert!(text.contains("(30)") && text.contains("grant this principal READ on the group"), "{text}");
        let with_text = Error::Broker {
            context: Context::api("CreateTopics"),
            code: ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            message: Some("Authorization failed.".into()),
        };
        let text = with_text.to_string();
        assert!(text.contains("(Authorization failed.)") && text.contains("on the cluster"), "{text}");
        let plain =
            Error::Broker { context: Context::api("Metadata"), code: ErrorCode::NOT_COORDINATOR, message: None };
        assert_eq!(plain.to_string(), "Metadata: NotCoordinator (16)");
    }

    #[test]
    fn a_code_names_itself_as_kafka_does() {
        assert_eq!(ErrorCode::GROUP_AUTHORIZATION_FAILED.name(), "GROUP_AUTHORIZATION_FAILED");
        assert_eq!(ErrorCode::GROUP_AUTHORIZATION_FAILED.value(), 30);
        for (code, name) in NAMED {
            assert_eq!(code.name(), *name);
        }
        assert_eq!(ErrorCode(-9999).name(), "UNKNOWN(-9999)");
    }

    #[test]
    fn named_codes_carry_their_kafka_numbers() {
        // The `kafka-protocol` crate's table (from Kafka's `Errors.java`) is the reference.
        for (code, name) in NAMED {
            let camel: String = name.split('_').map(|w| w[..1].to_string() + &w[1..].to_lowercase()).collect();
            assert_eq!(format!("{:?}", code.kind()), camel, "{name} ({})", code.0);
        }
        let mut numbers: Vec<i16> = NAMED.iter().map(|(c, _)| c.0).collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "in code order, each once: {numbers:?}");
        numbers.dedup();
        assert_eq!(numbers.len(), NAMED.len());
    }

    /// The codes in -1..=200 that `class` accepts.
    fn accepted(class: fn(ErrorCode) -> bool) -> Vec<i16> {
        (-1..=200).filter(|c| class(ErrorCode(*c))).collect()
    }

    #[test]
    fn each_class_holds_exactly_its_codes() {
        assert_eq!(accepted(ErrorCode::is_partition_moved), [6, 74]);
        assert_eq!(accepted(ErrorCode::is_unknown_topic_or_partition), [3, 100]);
        assert_eq!(accepted(ErrorCode::is_coordinator_moved), [15, 16]);
        assert_eq!(accepted(ErrorCode::is_coordinator_busy), [14, 27]);
        assert_eq!(accepted(ErrorCode::is_member_fenced), [25, 110]);
        assert_eq!(accepted(ErrorCode::is_topic_refused), [17, 29]);
        assert_eq!(accepted(ErrorCode::is_fatal_for_member), [24, 29, 30, 35, 42, 81]);
        assert_eq!(accepted(ErrorCode::is_fatal_for_share_requests), [29, 30, 35, 42]);
    }

    #[test]
    fn classes_agree_with_kafkas_retriable_flag() {
        // Moves and unknown partitions are worth retrying once metadata catches up; fatal codes
        // and topic refusals are not.
        for c in accepted(ErrorCode::is_partition_moved)
            .into_iter()
            .chain(accepted(ErrorCode::is_unknown_topic_or_partition))
            .chain(accepted(ErrorCode::is_coordinator_moved))
        {
            assert!(ErrorCode(c).is_retriable(), "{c}");
        }
        for c in accepted(ErrorCode::is_fatal_for_member)
            .into_iter()
            .chain(accepted(ErrorCode::is_fatal_for_share_requests))
            .chain(accepted(ErrorCode::is_topic_refused))
            .chain(accepted(ErrorCode::is_member_fenced))
        {
            assert!(!ErrorCode(c).is_retriable(), "{c}");
        }
        assert!(!ErrorCode(0).is_partition_moved() && !ErrorCode(0).is_fatal_for_member());
    }

    #[test]
    fn a_corrupt_batch_is_neither_retriable_nor_a_broker_error() {
        let e = Error::CorruptRecord {
            topic: "orders".into(),
            partition: 2,
            first_offset: 10,
            last_offset: 14,
            detail: "crc mismatch".into(),
        };
        let text = e.to_string();
        assert!(text.contains("orders-2 at offsets 10..=14"), "{text}");
        assert!(text.contains("rejected") && text.contains("carries on"), "{text}");
        assert!(!e.is_retriable() && e.code().is_none() && !e.is_outcome_unknown());
    }

    #[test]
    fn versions_the_cluster_lacks_are_typed_and_final() {
        let renew = Error::RenewUnsupported;
        assert!(renew.to_string().starts_with("RENEW needs ShareAcknowledge v2 (Kafka 4.2+)"), "{renew}");
        let at_connect = Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, broker: None };
        assert_eq!(
            at_connect.to_string(),
            "share.acquire.mode record_limit needs ShareFetch v2 (Kafka 4.2+); this cluster speaks v1 only: use batch_optimized"
        );
        let at_fetch = Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, broker: Some(3) };
        assert!(at_fetch.to_string().contains("; broker 3 speaks v1 only"), "{at_fetch}");
        for e in [renew, at_connect, at_fetch] {
            assert!(!e.is_retriable() && !e.is_outcome_unknown() && !e.is_connection_error(), "{e}");
            assert_eq!(e.code(), None, "{e}");
        }
    }

    #[test]
    fn an_error_does_not_grow() {
        // Every `Result` of the crate carries one: 112 bytes on 64-bit targets (variants with
        // a `Context` are the largest). A new variant must fit, or box its payload.
        assert!(std::mem::size_of::<Error>() <= 112, "{} bytes", std::mem::size_of::<Error>());
    }

    #[test]
    fn zero_is_not_an_error() {
        assert!(check(0, None, || Context::api("x")).is_ok());
        assert!(Error::from_code(0, None, Context::default()).is_none());
    }

    #[test]
    fn a_broker_that_left_is_retriable_and_a_failed_task_is_not() {
        let gone = Error::UnknownBroker { node_id: 3 };
        assert!(gone.is_retriable());
        assert!(gone.to_string().contains("broker 3"), "{gone}");
        let task = Error::TaskFailed { task: "ShareFetch request".into(), detail: "panicked".into() };
        assert!(!task.is_retriable());
        assert_eq!(task.to_string(), "the ShareFetch request task ended early: panicked");
    }
}
