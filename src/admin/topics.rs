//! Creating and deleting topics.

use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use crate::error::{Context, Error, ErrorCode, Result};

/// A topic to create.
#[derive(Debug, Clone)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partition count (-1: broker default).
    pub partitions: i32,
    /// Replication factor (-1: broker default).
    pub replication_factor: i16,
    /// Topic configs (e.g. `retention.ms`).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions and the broker's default replication.
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        NewTopic { name: name.into(), partitions, replication_factor: -1, configs: Vec::new() }
    }

    /// Sets the replication factor.
    pub fn replication_factor(mut self, rf: i16) -> Self {
        self.replication_factor = rf;
        self
    }

    /// Adds a topic config.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), value.into()));
        self
    }
}

impl Admin {
    /// Creates topics; returns one result per topic, in order. TOPIC_ALREADY_EXISTS is an
    /// error in the result (match on `ErrorCode::TOPIC_ALREADY_EXISTS` to ignore it).
    /// Waits until metadata shows every created topic with leaders.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn create_topics(&self, topics: &[NewTopic]) -> Result<Vec<Result<()>>> {
        let req = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(
            topics
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.name.clone())))
                        .with_num_partitions(t.partitions)
                        .with_replication_factor(t.replication_factor)
                        .with_configs(
                            t.configs
                                .iter()
                                .map(|(k, v)| {
                                    CreatableTopicConfig::default()
                                        .with_name(StrBytes::from_string(k.clone()))
                                        .with_value(Some(StrBytes::from_string(v.clone())))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        let conn = self.cluster.any_broker().await?;
        let resp = self.cluster.send(&conn, &req, (2, 7)).await?;
        let mut out = Vec::with_capacity(topics.len());
        let mut created = Vec::new();
        for t in topics {
            let r = resp.topics.iter().find(|r| r.name.0.as_str() == t.name);
            out.push(match r {
                None => Err(Error::IncompleteResponse { api: "CreateTopics", missing: format!("topic {}", t.name) }),
                Some(r) => match Error::from_code(
                    r.error_code,
                    r.error_message.as_ref().map(|m| m.to_string()),
                    Context { topic: Some(t.name.clone()), ..Context::api("CreateTopics") },
                ) {
                    Some(e) => Err(e),
                    None => {
                        created.push(t.name.clone());
                        Ok(())
                    }
                },
            });
        }
        self.wait_for_leaders(&created, Duration::from_secs(30)).await?;
        Ok(out)
    }

    /// Creates one topic, treating "already exists" as success.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn create_topic(&self, name: &str, partitions: i32) -> Result<()> {
        let mut r = self.create_topics(&[NewTopic::new(name, partitions)]).await?;
        match r.pop() {
            Some(Err(e)) if e.code() == Some(ErrorCode::TOPIC_ALREADY_EXISTS) => Ok(()),
            Some(r) => r,
            None => Ok(()),
        }
    }

    /// Deletes topics by name; one result per topic, in order.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn delete_topics(&self, names: &[&str]) -> Result<Vec<Result<()>>> {
        let req = DeleteTopicsRequest::default().with_timeout_ms(30_000).with_topics(
            names
                .iter()
                .map(|n| DeleteTopicState::default().with_name(Some(TopicName(StrBytes::from_string(n.to_string())))))
                .collect(),
        );
        // Versions 6+ name topics in DeleteTopicState (v0-5 use topic_names).
        let conn = self.cluster.any_broker().await?;
        let resp = self.cluster.send(&conn, &req, (6, 6)).await?;
        Ok(names
            .iter()
            .map(|n| match resp.responses.iter().find(|r| r.name.as_ref().map(|x| x.0.as_str()) == Some(*n)) {
                None => Err(Error::IncompleteResponse { api: "DeleteTopics", missing: format!("topic {n}") }),
                Some(r) => match Error::from_code(
                    r.error_code,
                    r.error_message.as_ref().map(|m| m.to_string()),
                    Context { topic: Some(n.to_string()), ..Context::api("DeleteTopics") },
                ) {
                    Some(e) => Err(e),
                    None => Ok(()),
                },
            })
            .collect())
    }

    /// Polls metadata until each topic has a leader for every partition. Reads fresh
    /// descriptions, not the cluster's snapshot: the snapshot keeps a deleted topic's last
    /// entry, so a topic deleted and made again under its name looked ready at once.
    async fn wait_for_leaders(&self, topics: &[String], timeout: Duration) -> Result<()> {
        if topics.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let described = self.describe_topics(&names).await?;
            let ready = described.iter().all(|d| {
                d.as_ref()
                    .is_ok_and(|t| !t.partitions.is_empty() && t.partitions.iter().all(|p| p.leader.is_some()))
            });
            if ready {
                // The snapshot gets the new topics too (the admin's cluster handle is shared
                // with callers of `unstable-internals` that read it next).
                let _ = self.cluster.refresh_metadata(topics).await?;
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout { what: format!("waiting for leaders of {topics:?}"), after: timeout });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
