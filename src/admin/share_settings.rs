//! A share group's settings, typed, and the broker's dead-letter queue for share groups
//! (Kafka 4.4).
//!
//! The broker's dead-letter queue: a record the group REJECTs, or that used up
//! `share.delivery.count.limit` deliveries, is written by the broker to the group's
//! `errors.deadletterqueue.topic.name` (with `__dlq.errors.*` headers naming its topic,
//! partition, offset, group, delivery count and why; its key and value too with
//! `errors.deadletterqueue.copy.record.enable=true`). The broker accepts a topic only if
//! its name starts with the broker's `errors.deadletterqueue.topic.name.prefix` (default
//! `dlq.`) and the topic itself carries `errors.deadletterqueue.group.enable=true`;
//! otherwise it logs the failure and archives the record without a copy. So
//! [`Admin::enable_share_dead_letter_queue`] checks the prefix, creates the topic with that
//! setting (or sets it on an existing topic), and only then points the group at it.

use std::time::Duration;

use super::configs::{ConfigEntry, BROKER_RESOURCE, TOPIC_RESOURCE};
use super::{Admin, NewTopic};
use crate::error::{Context, Error, ErrorCode, Result};

/// The group key naming the dead-letter topic.
pub const DLQ_TOPIC_KEY: &str = "errors.deadletterqueue.topic.name";
/// The group key that copies the record's key and value into the dead-letter topic.
pub const DLQ_COPY_RECORD_KEY: &str = "errors.deadletterqueue.copy.record.enable";
/// The topic key a dead-letter topic must carry (`true`) for the broker to write to it.
pub const DLQ_TOPIC_ENABLE_KEY: &str = "errors.deadletterqueue.group.enable";
/// The broker key: the prefix every dead-letter topic's name must start with.
pub const DLQ_PREFIX_KEY: &str = "errors.deadletterqueue.topic.name.prefix";

/// A share group's settings as the broker applies them (the group's own value, else the
/// broker's, else the default). A field is `None` when this broker does not know the key
/// (older Kafka), or, for the dead-letter topic, when none is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShareGroupSettings {
    /// `share.auto.offset.reset`: `latest`, `earliest` or `by_duration:<ISO-8601>`.
    pub auto_offset_reset: Option<String>,
    /// `share.isolation.level`: `read_uncommitted` or `read_committed`.
    pub isolation_level: Option<String>,
    /// `share.record.lock.duration.ms`: how long an acquisition lock lasts.
    pub record_lock_duration: Option<Duration>,
    /// `share.delivery.count.limit`: deliveries before a record is archived (or
    /// dead-lettered).
    pub delivery_count_limit: Option<u32>,
    /// `share.partition.max.record.locks`: records in flight per partition.
    pub partition_max_record_locks: Option<u32>,
    /// `share.renew.acknowledge.enable`: whether RENEW is taken (Kafka 4.2+).
    pub renew_acknowledge_enable: Option<bool>,
    /// `share.session.timeout.ms`.
    pub session_timeout: Option<Duration>,
    /// `share.heartbeat.interval.ms`.
    pub heartbeat_interval: Option<Duration>,
    /// `errors.deadletterqueue.topic.name` (Kafka 4.4+): where the broker writes rejected
    /// and exhausted records; `None` when unset.
    pub dead_letter_topic: Option<String>,
    /// `errors.deadletterqueue.copy.record.enable` (Kafka 4.4+).
    pub dead_letter_copy_record: Option<bool>,
}

impl ShareGroupSettings {
    /// Reads the described configs; a value that does not parse is left out (`None`).
    pub fn from_entries(entries: &[ConfigEntry]) -> ShareGroupSettings {
        let get = |k: &str| entries.iter().find(|e| e.name == k).and_then(|e| e.value.clone());
        let int = |k: &str| get(k).and_then(|v| v.trim().parse::<u64>().ok());
        let ms = |k: &str| int(k).map(Duration::from_millis);
        let count = |k: &str| int(k).and_then(|n| u32::try_from(n).ok());
        let flag = |k: &str| get(k).and_then(|v| v.trim().parse::<bool>().ok());
        ShareGroupSettings {
            auto_offset_reset: get("share.auto.offset.reset"),
            isolation_level: get("share.isolation.level"),
            record_lock_duration: ms("share.record.lock.duration.ms"),
            delivery_count_limit: count("share.delivery.count.limit"),
            partition_max_record_locks: count("share.partition.max.record.locks"),
            renew_acknowledge_enable: flag("share.renew.acknowledge.enable"),
            session_timeout: ms("share.session.timeout.ms"),
            heartbeat_interval: ms("share.heartbeat.interval.ms"),
            dead_letter_topic: get(DLQ_TOPIC_KEY).filter(|t| !t.trim().is_empty()),
            dead_letter_copy_record: flag(DLQ_COPY_RECORD_KEY),
        }
    }
}

/// How [`Admin::enable_share_dead_letter_queue`] sets up the dead-letter topic.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeadLetterQueue {
    /// The topic (its name must start with the broker's prefix, `dlq.` by default).
    pub topic: String,
    /// Copy each record's key and value, not only the `__dlq.errors.*` headers.
    pub copy_record: bool,
    /// Partitions, if the topic must be created.
    pub partitions: i32,
    /// Replication factor, if the topic must be created (-1: the broker's default).
    pub replication_factor: i16,
}

impl DeadLetterQueue {
    /// A dead-letter topic `topic` that gets the records' keys and values (one partition,
    /// the broker's replication factor, if it is created).
    pub fn new(topic: impl Into<String>) -> DeadLetterQueue {
        DeadLetterQueue { topic: topic.into(), copy_record: true, partitions: 1, replication_factor: -1 }
    }

    /// Whether to copy the records' keys and values (default true; false: headers only).
    pub fn copy_record(mut self, copy: bool) -> Self {
        self.copy_record = copy;
        self
    }

    /// Partitions and replication factor for a topic that does not exist yet.
    pub fn created_with(mut self, partitions: i32, replication_factor: i16) -> Self {
        self.partitions = partitions;
        self.replication_factor = replication_factor;
        self
    }
}

impl Admin {
    /// The group's share settings, typed (see [`ShareGroupSettings`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn share_group_settings(&self, group: &str) -> Result<ShareGroupSettings> {
        Ok(ShareGroupSettings::from_entries(&self.describe_group_configs(group).await?))
    }

    /// The configs of a topic, sorted by name.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn describe_topic_configs(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        let conn = self.cluster.any_broker().await?;
        let ctx = Context { topic: Some(topic.to_string()), ..Context::api("DescribeConfigs") };
        self.describe_configs_on(&conn, TOPIC_RESOURCE, topic, ctx).await
    }

    /// The configs of broker `id`, sorted by name.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn describe_broker_configs(&self, id: i32) -> Result<Vec<ConfigEntry>> {
        let conn = self.cluster.any_broker().await?;
        let ctx = Context::api("DescribeConfigs").broker(id);
        self.describe_configs_on(&conn, BROKER_RESOURCE, &id.to_string(), ctx).await
    }

    /// Makes the broker dead-letter the group's rejected and exhausted records into
    /// `dlq.topic` (Kafka 4.4+): checks the name against the broker's
    /// `errors.deadletterqueue.topic.name.prefix`, creates the topic with
    /// `errors.deadletterqueue.group.enable=true` (or sets that on an existing topic), then
    /// sets the group's `errors.deadletterqueue.topic.name` and
    /// `errors.deadletterqueue.copy.record.enable`. Returns once every broker applies them.
    ///
    /// Errors: [`Error::Unsupported`] on a broker without the feature,
    /// [`Error::Config`] for a name without the prefix (nothing changed then); the broker's
    /// refusals (e.g. no ALTER_CONFIGS on the topic) as they come.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the topic may be
    /// created or set up without the group pointing at it yet. Call it again to finish.
    pub async fn enable_share_dead_letter_queue(&self, group: &str, dlq: &DeadLetterQueue) -> Result<()> {
        let prefix = self.dead_letter_prefix().await?;
        if !dlq.topic.starts_with(&prefix) {
            return Err(Error::config(
                DLQ_TOPIC_KEY,
                format!(
                    "{:?} does not start with the broker's {DLQ_PREFIX_KEY} {prefix:?}: the broker would not write to it; \
                     name it {prefix}{}",
                    dlq.topic, dlq.topic
                ),
            ));
        }
        crate::topic_name::validate_topic_name(&dlq.topic)?;
        let new = NewTopic::new(dlq.topic.clone(), dlq.partitions)
            .replication_factor(dlq.replication_factor)
            .config(DLQ_TOPIC_ENABLE_KEY, "true");
        match self.create_topics(&[new]).await?.pop() {
            Some(Err(e)) if e.code() == Some(ErrorCode::TOPIC_ALREADY_EXISTS) => {
                let enabled = self
                    .describe_topic_configs(&dlq.topic)
                    .await?
                    .into_iter()
                    .find(|e| e.name == DLQ_TOPIC_ENABLE_KEY)
                    .and_then(|e| e.value)
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"));
                if !enabled {
                    let ctx = Context { topic: Some(dlq.topic.clone()), ..Context::api("IncrementalAlterConfigs") };
                    self.alter_configs(TOPIC_RESOURCE, &dlq.topic, &[(DLQ_TOPIC_ENABLE_KEY, Some("true"))], ctx)
                        .await?;
                }
            }
            Some(Err(e)) => return Err(e),
            Some(Ok(())) | None => {}
        }
        let copy = if dlq.copy_record { "true" } else { "false" };
        self.alter_group_configs(group, &[(DLQ_TOPIC_KEY, Some(&dlq.topic)), (DLQ_COPY_RECORD_KEY, Some(copy))])
            .await
    }

    /// Stops the broker dead-lettering the group's records (they are archived again); the
    /// topic and what it holds stay.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it.
    pub async fn disable_share_dead_letter_queue(&self, group: &str) -> Result<()> {
        self.alter_group_configs(group, &[(DLQ_TOPIC_KEY, None), (DLQ_COPY_RECORD_KEY, None)]).await
    }

    /// The broker's prefix for dead-letter topics; Unsupported when it has no such setting.
    async fn dead_letter_prefix(&self) -> Result<String> {
        let conn = self.cluster.any_broker().await?;
        let id = match conn.node_id {
            -1 => self.cluster.with_metadata(|m| m.brokers.keys().next().copied()).unwrap_or(-1),
            id => id,
        };
        let entries = self
            .describe_configs_on(&conn, BROKER_RESOURCE, &id.to_string(), Context::api("DescribeConfigs").broker(id))
            .await?;
        match entries.into_iter().find(|e| e.name == DLQ_PREFIX_KEY) {
            Some(e) => Ok(e.value.unwrap_or_default()),
            None => Err(Error::Unsupported {
                what: "the broker's dead-letter queue for share groups".into(),
                needs: "Kafka 4.4+",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::ConfigSource;

    fn entry(name: &str, value: &str) -> ConfigEntry {
        ConfigEntry {
            name: name.into(),
            value: Some(value.into()),
            source: ConfigSource::Default,
            read_only: false,
            is_sensitive: false,
        }
    }

    #[test]
    fn settings_are_typed_and_what_a_broker_lacks_is_none() {
        let s = ShareGroupSettings::from_entries(&[
            entry("share.auto.offset.reset", "earliest"),
            entry("share.record.lock.duration.ms", "2000"),
            entry("share.delivery.count.limit", "5"),
            entry("share.partition.max.record.locks", "2000"),
            entry("share.renew.acknowledge.enable", "true"),
            entry(DLQ_TOPIC_KEY, ""),
            entry(DLQ_COPY_RECORD_KEY, "false"),
        ]);
        assert_eq!(s.auto_offset_reset.as_deref(), Some("earliest"));
        assert_eq!(s.record_lock_duration, Some(Duration::from_secs(2)));
        assert_eq!((s.delivery_count_limit, s.partition_max_record_locks), (Some(5), Some(2000)));
        assert_eq!(s.renew_acknowledge_enable, Some(true));
        assert_eq!(s.dead_letter_topic, None, "an empty name is no topic");
        assert_eq!(s.dead_letter_copy_record, Some(false));
        assert_eq!(s.session_timeout, None, "not described: unknown");
        let bad = ShareGroupSettings::from_entries(&[entry("share.delivery.count.limit", "many")]);
        assert_eq!(bad.delivery_count_limit, None);
    }
}
