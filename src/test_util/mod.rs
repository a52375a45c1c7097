//! A fake Kafka cluster inside your test process, to test code that uses a [`ShareConsumer`]
//! without a broker (feature `test-util`), as Java's `MockShareConsumer` and franz-go's `kfake`
//! allow.
//!
//! ```toml
//! [dev-dependencies]
//! kafka-share = { version = "0.1", features = ["test-util"] }
//! tokio = { version = "1", features = ["macros", "rt"] }
//! ```
//!
//! A [`FakeCluster`] listens on one 127.0.0.1 port per node and speaks the real wire
//! protocol, so the consumer under test is the real one, connected with
//! [`consumer_config`](FakeCluster::consumer_config): membership, share sessions, fetching,
//! acknowledging and closing all run as against Kafka. The test puts records in
//! ([`produce`](FakeCluster::produce)), runs its code, and reads what happened: each
//! offset's [`RecordState`] ([`accepted`](FakeCluster::accepted),
//! [`states`](FakeCluster::states)), the acknowledgements on the wire
//! ([`acks_sent`](FakeCluster::acks_sent)), every request ([`log`](FakeCluster::log)), and any
//! protocol rule the client broke ([`assert_clean`](FakeCluster::assert_clean)).
//!
//! # Example
//! The code under test is one round of an application's consumer loop. The test produces
//! three records, runs the loop until it has handled them, and checks that the broker saw all
//! three accepted.
//!
//! ```rust,test_harness
//! use std::time::Duration;
//!
//! use kafka_share::consumer::AcknowledgementMode;
//! use kafka_share::test_util::FakeCluster;
//! use kafka_share::{AcknowledgeType, Result, ShareConsumer};
//!
//! /// The code under test: one round of the application's consumer loop. It processes what one
//! /// poll returns, accepts each record it could process and rejects the others, and commits.
//! /// Returns how many records it handled.
//! async fn process_batch(consumer: &ShareConsumer) -> Result<usize> {
//!     let records = consumer.poll(Duration::from_secs(1)).await?;
//!     for record in &records {
//!         let processed = record.value.is_some(); // the application's work
//!         let ack = if processed { AcknowledgeType::Accept } else { AcknowledgeType::Reject };
//!         consumer.acknowledge_with(record, ack)?;
//!     }
//!     consumer.commit_sync(Duration::from_secs(5)).await?.into_result()?;
//!     Ok(records.len())
//! }
//!
//! #[tokio::test]
//! async fn process_batch_accepts_what_it_polls() -> Result<()> {
//!     let fake = FakeCluster::single(1, 0).await; // one node, one empty partition
//!     for i in 0..3 {
//!         fake.produce(0, format!("key-{i}"), format!("value-{i}"));
//!     }
//!     let config = fake.consumer_config("my-group").acknowledgement_mode(AcknowledgementMode::Explicit);
//!     let consumer = ShareConsumer::connect(config).await?;
//!     consumer.subscribe([fake.topic()])?;
//!
//!     let mut handled = 0;
//!     for _ in 0..30 {
//!         handled += process_batch(&consumer).await?;
//!         if handled == 3 {
//!             break;
//!         }
//!     }
//!     consumer.close(Duration::from_secs(5)).await?;
//!
//!     assert_eq!(handled, 3);
//!     assert_eq!(fake.accepted(0), [0, 1, 2]); // the broker's view: all three ACCEPTed
//!     fake.assert_clean(); // and the consumer broke no protocol rule
//!     Ok(())
//! }
//! ```
//!
//! Start it inside a Tokio runtime (`#[tokio::test]` is enough): its nodes run as tasks there.
//! Dropping the `FakeCluster` stops it.
//!
//! # Faults
//! A [`Rule`] makes the nodes misbehave for matching requests: answer an error code
//! ([`Action::TopLevelError`], [`Action::PartitionError`], [`Action::AckError`]; codes in
//! [`code`]), wait ([`Action::Delay`]), drop the connection, or answer bytes that do not
//! parse. [`FakeCluster::move_leader`], [`drop_sessions`](FakeCluster::drop_sessions),
//! [`set_assignment`](FakeCluster::set_assignment) and
//! [`set_topic_error`](FakeCluster::set_topic_error) change the cluster under the consumer.
//!
//! ```rust
//! # async fn example(fake: &kafka_share::test_util::FakeCluster) {
//! use kafka_share::test_util::{code, Action, Rule, SHARE_ACKNOWLEDGE};
//!
//! // The next ShareAcknowledge refuses partition 0's acknowledgements.
//! let refuse = Action::AckError { partition: 0, code: code::INVALID_RECORD_STATE };
//! fake.script(Rule::on(SHARE_ACKNOWLEDGE, refuse));
//! # }
//! ```
//!
//! # What it is, and is not
//! One topic ([`FakeConfig::topic`]) of N partitions, each led by one of the nodes, with
//! per-offset share state: available, acquired by a member (delivery count + 1), or done.
//! Share sessions per (node, member) with their epochs, closed with their connection; group
//! members heartbeat to the coordinator and are all assigned every partition
//! ([`FakeCluster::set_assignment`] changes that). It serves ApiVersions, Metadata,
//! FindCoordinator, ShareGroupHeartbeat, ShareFetch and ShareAcknowledge (v1 and v2, or v1
//! only with [`FakeConfig::v1_only`]): enough for a [`ShareConsumer`], not for a producer or
//! the admin client. It is not a broker:
//! - acquisition locks never expire: a record stays acquired until it is acknowledged or its
//!   share session ends, and no delivery count limit archives it;
//! - a group reads every partition from offset 0 (a new group on Kafka starts at the latest
//!   offset unless `share.auto.offset.reset` says otherwise);
//! - no security protocols, no compression (it sends plain record batches).
//!
//! It watches the client: [`FakeCluster::problems`] lists every protocol rule broken (share
//! session epochs out of order, two requests in flight on one session, acknowledgements for
//! records the member does not hold or on an epoch-0 fetch, RENEW where not allowed,
//! malformed acknowledgement batches, requests it cannot decode).
//!
//! Misuse (a partition the topic lacks, a [`FakeConfig`] that makes no cluster) panics with a
//! message naming the method and the mistake, as a test assertion does; nothing a client
//! sends makes it panic.
//!
//! [`ShareConsumer`]: crate::ShareConsumer

mod cluster;
pub mod code;
mod config;
mod handlers;
mod log;
mod records;
mod script;
mod server;
mod share;
mod state;
mod wire;

pub use cluster::{eventually, FakeCluster};
pub use config::FakeConfig;
pub use log::{AckedOffset, Logged, Req};
pub use records::RecordState;
pub use script::{Action, Rule};
pub use share::record_value;

/// Metadata API key.
pub const METADATA: i16 = 3;
/// FindCoordinator API key.
pub const FIND_COORDINATOR: i16 = 10;
/// ShareGroupHeartbeat API key.
pub const HEARTBEAT: i16 = 76;
/// ShareFetch API key.
pub const SHARE_FETCH: i16 = 78;
/// ShareAcknowledge API key.
pub const SHARE_ACKNOWLEDGE: i16 = 79;
