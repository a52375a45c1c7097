#![doc = include_str!("../README.md")]
//!
//! # Behaviour
//! A [`ShareConsumer`] is a handle to a background driver task (see [`consumer`]). The driver
//! heartbeats to the group coordinator, keeps one share session per leader broker, prefetches
//! (in `batch_optimized` mode), and sends acknowledgements piggybacked on the next ShareFetch to
//! the broker that delivered the records. Connections are pipelined, and long-poll fetches use
//! their own connection per broker.
//!
//! # Delivery semantics
//! At least once. Each record is held under the broker's acquisition lock; unacknowledged
//! records are redelivered (delivery count + 1) after the lock expires, after `RELEASE`, or when
//! the consumer closes. `ACCEPT` and `REJECT` are final. Acknowledgement failures (for example
//! INVALID_RECORD_STATE after a lock expired) are reported per partition by `commit_sync`,
//! `commit_async` and the acknowledgement commit callback (which runs inside the consumer's
//! calls, as in Java); final ones are never retried. Only acknowledgements the broker could
//! not apply *yet* (its share coordinator loading) go again, until `default.api.timeout.ms`.
//! A record acknowledged with `RENEW` comes back from the next poll with its lock extended.
//!
//! # Cancel safety
//! Every public async method says what dropping its future does. In short: `poll` is
//! cancel-safe (records already handed over go back to the buffer for the next poll); the
//! acknowledgements of `poll`, `commit_sync` and `close` are handed to the background task
//! before their first await, so they are sent even if the future is dropped; `Producer::send`
//! either queued the record or did nothing; an admin request already sent may still be
//! applied by the broker.
//!
//! # Features
//! Kafka 4.1 (share RPCs v1) to 4.4 (v2: RENEW, `record_limit`). Compression: gzip, snappy,
//! lz4, zstd. PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (PLAIN, SCRAM-SHA-256/512,
//! OAUTHBEARER) with re-authentication; TLS needs the `tls` cargo feature (rustls on ring),
//! OIDC tokens the `oidc` feature, the OS trust store `tls-native-roots`. The `test-util`
//! feature adds `test_util`, a fake cluster to test consumer code without a broker;
//! `prometheus` the metrics in a Prometheus registry; `otel` trace propagation through
//! record headers (`trace`: W3C `traceparent`, each record's span a child of its producer's);
//! `json` the decode step's `decode::JsonDecoder` for serde types.
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
// docs.rs (package.metadata.docs.rs sets --cfg docsrs): each feature-gated item shows the
// feature it needs. Nightly only; a stable build never sees it.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layers under the public API: private, or public with the `unstable-internals` feature
// for benches, wire tests and the curious, with no stability promise. Without the feature the
// `unreachable_pub` lint does not apply to them (their `pub` is for that feature). Defined
// before the public modules so that they can keep internals of their own the same way
// (`security`'s SASL mechanisms and rustls glue).
macro_rules! internal_modules {
    ($($name:ident),*) => {$(
        #[cfg(feature = "unstable-internals")]
        pub mod $name;
        #[cfg(not(feature = "unstable-internals"))]
        #[allow(unreachable_pub, dead_code, unused_imports)]
        pub(crate) mod $name;
    )*};
}

mod acquire_mode;
pub mod admin;
// The runtime a blocking client owns, and the checks that keep tokio's panics out of reach.
mod blocking_runtime;
pub mod config;
pub mod consumer;
// The dead-letter copy and its error headers, shared by the engine and the sink runtime.
mod dead_letter;
pub mod decode;
pub mod error;
pub mod processor;
pub mod producer;
#[cfg(feature = "prometheus")]
pub mod prometheus;
// security.protocol, SASL and (with the `tls` feature) TLS; docs in security/mod.rs.
pub mod security;
#[cfg(feature = "sink")]
pub mod sink;
// W3C trace context through record headers, OpenTelemetry parents for `tracing` spans.
#[cfg(feature = "otel")]
pub mod trace;

// backoff: the retry backoff; cluster: bootstrap, metadata, the connection pool, SASL login;
// connection: one broker connection; metrics: the snapshot and the lock-free histogram every
// client's metrics are read into (its public types are re-exported by `consumer`); protocol:
// the wire codecs; share: the sans-IO share-group state machines. Each says more in its own
// module docs.
internal_modules!(backoff, cluster, connection, metrics, protocol, share);
// The broker-side share model (share partitions, locks, the delivery limit, share sessions)
// that the fake cluster serves from; clock-free (src/broker_model/mod.rs).
#[cfg(any(test, feature = "test-util"))]
#[cfg_attr(not(feature = "test-util"), allow(dead_code))]
mod broker_model;
// The deterministic simulation of the consumer's driver core (tests only; src/sim/mod.rs).
#[cfg(test)]
mod sim;
// An in-process fake cluster for users' tests (feature `test-util`); docs in test_util/mod.rs.
#[cfg(feature = "test-util")]
pub mod test_util;
mod topic_name;
mod topic_partition;

pub use cluster::ClusterConfig;
pub use consumer::{AcknowledgeType, ConsumerRecord, ShareConsumer, ShareConsumerConfig};
pub use error::{Context, Error, ErrorCode, Result};
pub use producer::{Producer, ProducerRecord, RecordMetadata};
pub use topic_partition::TopicPartition;
