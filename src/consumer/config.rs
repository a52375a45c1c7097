//! Share consumer settings: a typed builder, and the same settings by their Java names.

use std::time::Duration;

use crate::cluster::ClusterConfig;
use crate::config::{cluster_config, Properties, COMMON_KEYS};
use crate::error::{Error, Result};

/// `share.acknowledgement.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AcknowledgementMode {
    /// Every record a poll returned is accepted by the next poll or commit (the default).
    #[default]
    Implicit,
    /// The application acknowledges each record; polling with unacknowledged records is an
    /// error.
    Explicit,
}

/// `share.acquire.mode` (Kafka 4.2+, ShareFetch v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AcquireMode {
    /// The broker may hand out whole batches, and the consumer prefetches (the default).
    #[default]
    BatchOptimized,
    /// At most `max.poll.records` records are acquired per poll, with no prefetch: a hard cap.
    RecordLimit,
}

/// Everything a [`ShareConsumer`](super::ShareConsumer) needs.
#[derive(Debug, Clone)]
pub struct ShareConsumerConfig {
    /// Connection settings (`bootstrap.servers`, `client.id`, timeouts).
    pub cluster: ClusterConfig,
    /// `group.id` (required).
    pub group_id: String,
    /// `share.acknowledgement.mode`.
    pub acknowledgement_mode: AcknowledgementMode,
    /// `share.acquire.mode`.
    pub acquire_mode: AcquireMode,
    /// `max.poll.records` (default 500).
    pub max_poll_records: usize,
    /// `fetch.max.wait.ms` (default 500).
    pub fetch_max_wait: Duration,
    /// `fetch.min.bytes` (default 1).
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes` (default 52428800).
    pub fetch_max_bytes: i32,
    /// `client.rack`.
    pub client_rack: Option<String>,
    /// `check.crcs` (default true).
    pub check_crcs: bool,
}

impl ShareConsumerConfig {
    /// Defaults (as the Java client's) for a group on these bootstrap servers.
    pub fn new(bootstrap_servers: impl AsRef<str>, group_id: impl Into<String>) -> Self {
        ShareConsumerConfig {
            cluster: ClusterConfig {
                client_id: "kafka-share-consumer".into(),
                ..ClusterConfig::new(bootstrap_servers)
            },
            group_id: group_id.into(),
            acknowledgement_mode: AcknowledgementMode::Implicit,
            acquire_mode: AcquireMode::BatchOptimized,
            max_poll_records: 500,
            fetch_max_wait: Duration::from_millis(500),
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            client_rack: None,
            check_crcs: true,
        }
    }

    /// Sets `share.acknowledgement.mode`.
    pub fn acknowledgement_mode(mut self, m: AcknowledgementMode) -> Self {
        self.acknowledgement_mode = m;
        self
    }

    /// Sets `share.acquire.mode`.
    pub fn acquire_mode(mut self, m: AcquireMode) -> Self {
        self.acquire_mode = m;
        self
    }

    /// Sets `max.poll.records`.
    pub fn max_poll_records(mut self, n: usize) -> Self {
        self.max_poll_records = n;
        self
    }

    /// Sets `fetch.max.wait.ms`.
    pub fn fetch_max_wait(mut self, d: Duration) -> Self {
        self.fetch_max_wait = d;
        self
    }

    /// Sets `client.id`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.cluster.client_id = id.into();
        self
    }

    /// Sets `request.timeout.ms`.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.cluster.request_timeout = d;
        self
    }

    /// Checks the settings together; the error names the setting and what to use.
    pub fn validate(&self) -> Result<()> {
        if self.group_id.trim().is_empty() {
            return Err(Error::config("group.id", "required: share consumers always belong to a share group"));
        }
        if self.max_poll_records == 0 || self.max_poll_records > i32::MAX as usize {
            return Err(Error::config("max.poll.records", "must be at least 1"));
        }
        if self.fetch_max_bytes < 1 || self.fetch_min_bytes < 0 {
            return Err(Error::config("fetch.max.bytes", "fetch.max.bytes must be >= 1 and fetch.min.bytes >= 0"));
        }
        if self.fetch_max_wait >= self.cluster.request_timeout {
            return Err(Error::config(
                "fetch.max.wait.ms",
                format!(
                    "{} ms must be below request.timeout.ms ({} ms), or every long poll would time out",
                    self.fetch_max_wait.as_millis(),
                    self.cluster.request_timeout.as_millis()
                ),
            ));
        }
        Ok(())
    }

    /// Reads the settings from Java property names. Refuses the consumer-group settings that
    /// share groups do not use, saying what to use instead, and any unknown key.
    pub fn from_properties(p: &Properties) -> Result<Self> {
        for (key, why) in REFUSED {
            if p.contains(key) {
                return Err(Error::config(*key, *why));
            }
        }
        let cluster = cluster_config(p, "kafka-share-consumer")?;
        let group_id = p
            .get("group.id")
            .map(str::to_string)
            .ok_or_else(|| Error::config("group.id", "missing: a share consumer needs the share group's id"))?;
        let mut c = ShareConsumerConfig::new("", group_id);
        c.cluster = cluster;
        c.acknowledgement_mode =
            match p.choice("share.acknowledgement.mode", "implicit", &["implicit", "explicit"])?.as_str() {
                "explicit" => AcknowledgementMode::Explicit,
                _ => AcknowledgementMode::Implicit,
            };
        c.acquire_mode =
            match p.choice("share.acquire.mode", "batch_optimized", &["batch_optimized", "record_limit"])?.as_str() {
                "record_limit" => AcquireMode::RecordLimit,
                _ => AcquireMode::BatchOptimized,
            };
        c.max_poll_records = p.int("max.poll.records", 500, 1, i32::MAX as i64)? as usize;
        c.fetch_max_wait = p.millis("fetch.max.wait.ms", Duration::from_millis(500), 0, i32::MAX as i64)?;
        c.fetch_min_bytes = p.int("fetch.min.bytes", 1, 0, i32::MAX as i64)? as i32;
        c.fetch_max_bytes = p.int("fetch.max.bytes", 52_428_800, 1, i32::MAX as i64)? as i32;
        c.client_rack = p.get("client.rack").filter(|r| !r.is_empty()).map(str::to_string);
        c.check_crcs = p.bool("check.crcs", true)?;
        for k in ["key.deserializer", "value.deserializer"] {
            if let Some(v) = p.get(k) {
                if !v.ends_with("ByteArrayDeserializer")
                    && !v.ends_with("BytesDeserializer")
                    && !v.ends_with("StringDeserializer")
                {
                    return Err(Error::config(
                        k,
                        format!("{v} is a Java class; this client hands out bytes (Bytes) and leaves decoding to you"),
                    ));
                }
            }
        }
        let mut known: Vec<&str> = COMMON_KEYS.to_vec();
        known.extend(IGNORED);
        // session.timeout.ms and heartbeat.interval.ms are the broker's for share groups (group
        // configs share.session.timeout.ms / share.heartbeat.interval.ms): Java's share consumer
        // refuses them, but Confluent Cloud's client files set session.timeout.ms, so they are
        // ignored with a warning, as other clients' keys in a shared file are.
        crate::config::ignore_other_clients_keys(p, "share consumer");
        p.reject_unused("share consumer", &known)?;
        c.validate()?;
        Ok(c)
    }
}

/// Settings Java's KafkaShareConsumer refuses, with the reason and what to use instead.
const REFUSED: &[(&str, &str)] = &[
    ("auto.offset.reset", "not used by share groups: set the group config share.auto.offset.reset (latest | earliest | by_duration:<ISO-8601>) with the admin client or kafka-share-groups --alter-config"),
    ("enable.auto.commit", "not used by share groups: records are acknowledged (share.acknowledgement.mode implicit or explicit), not committed as offsets"),
    ("auto.commit.interval.ms", "not used by share groups: acknowledgements are sent on poll and commit_sync/commit_async"),
    ("group.instance.id", "static membership does not exist for share groups; remove it"),
    ("isolation.level", "not used by share consumers: set the group config share.isolation.level instead"),
    ("partition.assignment.strategy", "share groups are assigned by the broker's share-group assignor; remove it"),
    ("group.protocol", "share consumers always use the share-group protocol; remove it"),
    ("group.remote.assignor", "share groups are assigned by the broker; remove it"),
    ("max.poll.interval.ms", "share consumers have no poll-interval eviction; records return to others when their acquisition lock expires"),
];

/// Java settings accepted and ignored because they have no meaning here (documented).
const IGNORED: &[&str] = &[
    "metadata.max.age.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "send.buffer.bytes",
    "receive.buffer.bytes",
    "connections.max.idle.ms",
    "metrics.num.samples",
    "metrics.sample.window.ms",
    "metrics.recording.level",
    "enable.metrics.push",
    "default.api.timeout.ms",
    "max.partition.fetch.bytes",
    "key.deserializer",
    "value.deserializer",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Properties {
        Properties::from_pairs([("bootstrap.servers", "127.0.0.1:19092"), ("group.id", "g")])
    }

    #[test]
    fn java_names_map_to_settings() {
        let mut p = base();
        p.set("share.acknowledgement.mode", "explicit")
            .set("share.acquire.mode", "record_limit")
            .set("max.poll.records", "10")
            .set("fetch.max.wait.ms", "100")
            .set("client.id", "me");
        let c = ShareConsumerConfig::from_properties(&p).unwrap();
        assert_eq!(c.acknowledgement_mode, AcknowledgementMode::Explicit);
        assert_eq!(c.acquire_mode, AcquireMode::RecordLimit);
        assert_eq!(c.max_poll_records, 10);
        assert_eq!(c.fetch_max_wait, Duration::from_millis(100));
        assert_eq!(c.cluster.client_id, "me");
    }

    #[test]
    fn consumer_group_settings_are_refused_with_the_alternative() {
        let mut p = base();
        p.set("auto.offset.reset", "earliest");
        let e = ShareConsumerConfig::from_properties(&p).unwrap_err();
        assert!(e.to_string().contains("share.auto.offset.reset"), "{e}");
        for k in [
            "enable.auto.commit",
            "group.instance.id",
            "isolation.level",
            "partition.assignment.strategy",
            "group.protocol",
        ] {
            let mut p = base();
            p.set(k, "x");
            let e = ShareConsumerConfig::from_properties(&p).unwrap_err();
            assert!(matches!(&e, Error::Config { key, .. } if key == k), "{k}: {e}");
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let mut p = base();
        p.set("max.poll.record", "5");
        assert!(ShareConsumerConfig::from_properties(&p).unwrap_err().to_string().contains("max.poll.record"));
        let mut p = base();
        p.set("share.acknowledgement.mode", "manual");
        let e = ShareConsumerConfig::from_properties(&p).unwrap_err();
        assert!(e.to_string().contains("implicit, explicit"), "{e}");
        let mut p = base();
        p.set("max.poll.records", "0");
        assert!(ShareConsumerConfig::from_properties(&p).is_err());
        let p = Properties::from_pairs([("bootstrap.servers", "a:1")]);
        assert!(ShareConsumerConfig::from_properties(&p).unwrap_err().to_string().contains("group.id"));
    }

    #[test]
    fn wait_must_be_below_request_timeout() {
        let mut p = base();
        p.set("fetch.max.wait.ms", "40000");
        let e = ShareConsumerConfig::from_properties(&p).unwrap_err();
        assert!(e.to_string().contains("request.timeout.ms"), "{e}");
    }
}
