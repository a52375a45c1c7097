//! kafka-share: a pure-Rust client for Apache Kafka share groups (KIP-932).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod backoff;
pub mod cluster;
pub mod config;
pub mod consumer;
pub mod connection;
pub mod error;
pub mod producer;
pub mod protocol;
pub mod share;

pub use error::{Context, Error, ErrorCode, Result};
pub use producer::{Producer, ProducerRecord, RecordMetadata};
pub use consumer::{AcknowledgeType, ConsumerRecord, ShareConsumer, ShareConsumerConfig};
