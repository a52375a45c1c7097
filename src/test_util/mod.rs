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
//! # Acquisition locks and the delivery limit
//! As on Kafka, a record a member acquired is locked for it for
//! [`FakeConfig::lock_timeout_ms`] (30 s by default, Kafka's `share.record.lock.duration.ms`):
//! if the member neither acknowledges it nor renews the lock in that time (on the fake's wall
//! clock, from the moment it acquired the record), the lock lapses and the record is
//! available again, to be delivered to whoever fetches next with its delivery count one
//! higher; the member's late acknowledgement is refused (INVALID_RECORD_STATE). A record given
//! back (RELEASE, a lapsed lock, a share session that ended) after
//! [`FakeConfig::delivery_limit`] deliveries (5 by default, Kafka's
//! `share.delivery.count.limit`) is archived instead ([`RecordState::Archived`]) and never
//! delivered again. So a test can show what its code does with a slow or stuck consumer:
//!
//! ```rust
//! # async fn example() -> kafka_share::Result<()> {
//! use std::time::Duration;
//! use kafka_share::test_util::{FakeCluster, FakeConfig};
//!
//! // A lock of one second, and a record that may be delivered twice.
//! let fake = FakeCluster::start(FakeConfig::default().records(1).lock_timeout_ms(1000).delivery_limit(2)).await;
//! let stuck = fake.consumer(fake.consumer_config("g")).await;
//! // ... `stuck` polls the record and never comes back: a second later another member of
//! // "g" gets it with `delivery_count` 2; if that one is stuck too, the record is archived.
//! # Ok(())
//! # }
//! ```
//!
//! `tests/offline/fake_redelivery.rs` in the crate's repository has both cases through a
//! [`ShareConsumer`].
//!
//! # What it is, and is not
//! One topic ([`FakeConfig::topic`]) of N partitions, each led by one of the nodes, with
//! per-offset share state as Kafka keeps it: available, acquired by a member under a lock
//! (delivery count + 1), accepted, or archived (rejected, a gap, or at the delivery limit).
//! Share sessions per (node, member) with their epochs as Kafka checks them (a request with
//! the wrong epoch is refused and the session kept; epoch 0 replaces the session, and what the
//! old one held stays acquired until its locks lapse), closed with their connection (what the
//! member held there goes back); group
//! members heartbeat to the coordinator and are all assigned every partition
//! ([`FakeCluster::set_assignment`] changes that). It serves ApiVersions, Metadata,
//! FindCoordinator, ShareGroupHeartbeat, ShareFetch and ShareAcknowledge (v1 up to
//! [`FakeConfig::max_share_version`], the codec's newest by default): enough for a [`ShareConsumer`], not for a producer or
//! the admin client. It is not a broker:
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
//!
//! Inside, the share state is the crate's one broker model (share partitions, locks, the
//! delivery limit, share sessions: `src/broker_model/`); this module adds TCP, the wall
//! clock, the request log and the scripted faults around it.

mod broker;
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
/// ListGroups API key (answered with no groups: the fake keeps no group names; script a
/// [`Action::Delay`] or an error on it to test an admin's failure paths).
pub const LIST_GROUPS: i16 = 16;
/// FindCoordinator API key.
pub const FIND_COORDINATOR: i16 = 10;
/// ShareGroupHeartbeat API key.
pub const HEARTBEAT: i16 = 76;
/// ShareFetch API key.
pub const SHARE_FETCH: i16 = 78;
/// ShareAcknowledge API key.
pub const SHARE_ACKNOWLEDGE: i16 = 79;
