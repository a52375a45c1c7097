//! Tests against one real Kafka broker (KRaft, `scripts/kafka up`; env `KAFKA_BOOTSTRAP`,
//! default 127.0.0.1:19092): the consumer, producer, admin, CLI tools, processing engine,
//! sinks, security and metrics. Every test fails when the broker is absent. Run with
//! `scripts/test --test broker` (it starts the broker), or one part with a filter:
//! `scripts/test --test broker -- processor::`.
//!
//! A new test joins this binary when it needs the single broker (and nothing else running):
//! add its file here and a `mod` line, gated on the features it needs.

#[path = "../common/mod.rs"]
mod common;

mod admin_support;
#[path = "../support/logs.rs"]
mod logs;
#[path = "../producer_support/mod.rs"]
mod producer_support;

#[cfg(feature = "cli")]
mod admin_cli;
mod admin_configs;
mod admin_java_crosscheck;
mod admin_share_groups;
mod admin_topics;
mod blocking_clients;
mod connect_to;
#[cfg(feature = "cli")]
mod console_share_consumer;
mod consumer_blocking;
mod consumer_callback;
mod consumer_cancel_safety;
mod consumer_pattern;
mod consumer_pause;
mod consumer_poll_interval;
#[cfg(feature = "exporter")]
mod deploy_support;
mod examples_run;
#[cfg(feature = "exporter")]
mod exporter;
#[cfg(feature = "exporter")]
mod exporter_age;
#[cfg(feature = "exporter")]
mod exporter_binary;
#[cfg(feature = "exporter")]
mod exporter_keda;
#[cfg(feature = "exporter")]
mod exporter_many_groups;
#[cfg(feature = "exporter")]
mod exporter_promtool;
#[cfg(all(feature = "exporter", feature = "tls"))]
mod exporter_security;
#[cfg(feature = "otel")]
mod otel;
mod processor;
mod processor_dead_letter;
mod producer_order;
#[cfg(feature = "prometheus")]
mod prometheus;
mod security_sasl;
mod security_tls;
mod share_consumer;
mod share_consumer_back_to_back;
mod share_consumer_idle;
mod share_cycle_trace;
#[cfg(feature = "sink")]
mod sink_binary;
#[cfg(feature = "sink")]
mod sink_connect_oracle;
#[cfg(feature = "sink")]
mod sink_connect_parity;
#[cfg(feature = "sink")]
mod sink_distributed;
#[cfg(feature = "sink")]
mod sink_file;
#[cfg(feature = "sink-http")]
mod sink_http;
#[cfg(feature = "sink")]
mod sink_kafka;
#[cfg(feature = "sink")]
mod sink_rest;
#[cfg(feature = "sink")]
mod sink_rest_client;
#[cfg(feature = "sink")]
mod sink_rest_oracle;
#[cfg(feature = "sink")]
mod sink_runtime;
mod topic_names;
mod wire_metadata;
mod wire_share;
