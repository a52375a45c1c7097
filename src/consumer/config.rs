//! Share consumer settings: a typed builder, and the same settings by their Java names.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::acquire_mode::AcquireMode;
use crate::cluster::ClusterConfig;
use crate::config::{Client, Properties};
use crate::error::{Error, Result};

/// Numbers the default client ids, process-wide, as Java's consumer does.
static CLIENT_ID_SEQUENCE: AtomicU64 = AtomicU64::new(1);

/// Java's default `client.id` for a consumer of `group`: `consumer-<group>-<n>`, with `n`
/// counting up from 1 in this process. Brokers log and quote it, so a share consumer of this
/// crate shows up in them as a Java one would.
fn default_client_id(group: &str) -> String {
    format!("consumer-{group}-{}", CLIENT_ID_SEQUENCE.fetch_add(1, Ordering::Relaxed))
}

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

impl AcknowledgementMode {
    /// The value of `share.acknowledgement.mode` that selects it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            AcknowledgementMode::Implicit => "implicit",
            AcknowledgementMode::Explicit => "explicit",
        }
    }
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
    /// `metadata.max.age.ms` (default 300000): how often a pattern subscription lists the
    /// topics again. Not read from properties yet; tests shorten it.
    pub(crate) metadata_max_age: Duration,
    /// `fetch.max.wait.ms` (default 500).
    pub fetch_max_wait: Duration,
    /// `fetch.min.bytes` (default 1).
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes` (default 52428800). Also the most bytes one compressed batch may
    /// inflate to (at least 16 MiB): a batch inflating past it is rejected and reported as
    /// [`Error::CorruptRecord`](crate::Error::CorruptRecord).
    pub fetch_max_bytes: i32,
    /// `client.rack`.
    pub client_rack: Option<String>,
    /// `check.crcs` (default true): verify the CRC-32C of each record batch that holds
    /// acquired records. Off saves the checksum's CPU; a batch corrupted on the way is then
    /// found only if its contents do not parse.
    pub check_crcs: bool,
    /// `max.poll.interval.ms` (default 300000, 1 ms..=i32::MAX ms): the longest the
    /// application may go between polls. As in Java, a member that does not poll within it
    /// leaves the group (its records go to the others) and joins again at its next poll.
    pub max_poll_interval: Duration,
    /// `default.api.timeout.ms` (default 60000, 0..=i32::MAX ms): the timeout of calls that
    /// take none of their own, as Java's `commitSync()` without an argument.
    pub default_api_timeout: Duration,
}

impl ShareConsumerConfig {
    /// Defaults (as the Java client's) for a group on these bootstrap servers. The `client.id`
    /// is Java's default, `consumer-<group>-<n>` (`n` counts the consumers of this process).
    pub fn new(bootstrap_servers: impl AsRef<str>, group_id: impl Into<String>) -> Self {
        let group_id = group_id.into();
        let cluster =
            ClusterConfig { client_id: default_client_id(&group_id), ..ClusterConfig::new(bootstrap_servers) };
        Self::with_cluster(cluster, group_id)
    }

    fn with_cluster(cluster: ClusterConfig, group_id: String) -> Self {
        ShareConsumerConfig {
            cluster,
            group_id,
            acknowledgement_mode: AcknowledgementMode::Implicit,
            acquire_mode: AcquireMode::BatchOptimized,
            max_poll_records: 500,
            metadata_max_age: Duration::from_millis(300_000),
            fetch_max_wait: Duration::from_millis(500),
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            client_rack: None,
            check_crcs: true,
            max_poll_interval: Duration::from_millis(300_000),
            default_api_timeout: Duration::from_secs(60),
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

    /// Sets `check.crcs`.
    pub fn check_crcs(mut self, check: bool) -> Self {
        self.check_crcs = check;
        self
    }

    /// Sets `max.poll.interval.ms`.
    pub fn max_poll_interval(mut self, d: Duration) -> Self {
        self.max_poll_interval = d;
        self
    }

    /// Sets `default.api.timeout.ms`.
    pub fn default_api_timeout(mut self, d: Duration) -> Self {
        self.default_api_timeout = d;
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

    /// Sets `metadata.max.age.ms`: how often a pattern subscription looks for new and deleted
    /// topics. For tests; not part of the stable API yet.
    #[doc(hidden)]
    pub fn metadata_max_age(mut self, d: Duration) -> Self {
        self.metadata_max_age = d;
        self
    }

    /// The most bytes one compressed record batch may inflate to: `fetch.max.bytes`, never
    /// below 16 MiB. `fetch.max.bytes` is the memory the user gives one fetch, so a batch
    /// inflating past it is refused (rejected and reported as a corrupt batch) rather than
    /// allowed to exhaust memory. The floor is for users who lower `fetch.max.bytes` to cut
    /// latency: the broker still returns a first batch bigger than it (KIP-74), up to the
    /// topic's `max.message.bytes` (1 MiB by default) compressed, and 16 times that covers
    /// ordinary compression ratios, so lowering it never starts rejecting ordinary batches.
    pub(crate) fn max_decompressed(&self) -> usize {
        const FLOOR: usize = 16 << 20;
        usize::try_from(self.fetch_max_bytes).unwrap_or(0).max(FLOOR)
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
        let max_ms = Duration::from_millis(i32::MAX as u64);
        if self.max_poll_interval < Duration::from_millis(1) || self.max_poll_interval > max_ms {
            return Err(Error::config("max.poll.interval.ms", format!("must be 1..={} ms", i32::MAX)));
        }
        if self.default_api_timeout > max_ms {
            return Err(Error::config("default.api.timeout.ms", format!("must be 0..={} ms", i32::MAX)));
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

    /// Reads the settings from Java property names. Refuses, saying what to use instead, the
    /// consumer-group settings that Java's share consumer refuses too; accepts (with one
    /// warning listing them) the keys Java reads that have no use here and those of other
    /// client types; refuses any unknown key. See `config/keys.rs` for the table.
    pub fn from_properties(p: &Properties) -> Result<Self> {
        // Its own marks: what another client read from a shared `Properties` first must not
        // hide a key from this one's warning.
        p.read_alone(Self::read_properties)
    }

    fn read_properties(p: &Properties) -> Result<Self> {
        crate::config::refuse(p, Client::ShareConsumer)?;
        let group_id = p
            .get("group.id")
            .map(str::to_string)
            .ok_or_else(|| Error::config("group.id", "missing: a share consumer needs the share group's id"))?;
        // As in Java, an empty client.id is no client.id.
        let client_id = match p.get("client.id") {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => default_client_id(&group_id),
        };
        let mut cluster = ClusterConfig::from_properties(p, &client_id)?;
        cluster.client_id = client_id;
        let mut c = ShareConsumerConfig::with_cluster(cluster, group_id);
        // Every default below is the one `with_cluster` set: written once.
        c.acknowledgement_mode = match p
            .choice("share.acknowledgement.mode", c.acknowledgement_mode.name(), &["implicit", "explicit"])?
            .as_str()
        {
            "explicit" => AcknowledgementMode::Explicit,
            _ => AcknowledgementMode::Implicit,
        };
        c.acquire_mode = match p
            .choice("share.acquire.mode", c.acquire_mode.name(), &["batch_optimized", "record_limit"])?
            .as_str()
        {
            "record_limit" => AcquireMode::RecordLimit,
            _ => AcquireMode::BatchOptimized,
        };
        let max = i32::MAX as i64;
        c.max_poll_records = p.int("max.poll.records", c.max_poll_records as i64, 1, max)? as usize;
        c.max_poll_interval = p.millis("max.poll.interval.ms", c.max_poll_interval, 1, max)?;
        c.default_api_timeout = p.millis("default.api.timeout.ms", c.default_api_timeout, 0, max)?;
        c.fetch_max_wait = p.millis("fetch.max.wait.ms", c.fetch_max_wait, 0, max)?;
        c.fetch_min_bytes = p.int("fetch.min.bytes", c.fetch_min_bytes.into(), 0, max)? as i32;
        c.fetch_max_bytes = p.int("fetch.max.bytes", c.fetch_max_bytes.into(), 1, max)? as i32;
        c.client_rack = p.get("client.rack").filter(|r| !r.is_empty()).map(str::to_string);
        c.check_crcs = p.bool("check.crcs", c.check_crcs)?;
        c.metadata_max_age = p.millis("metadata.max.age.ms", c.metadata_max_age, 0, max)?;
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
        crate::config::finish(p, Client::ShareConsumer)?;
        c.validate()?;
        Ok(c)
    }
}

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
            "interceptor.classes",
            "group.protocol",
            "group.remote.assignor",
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

    /// A service's one file, as it keeps it: the client's keys beside its own.
    const SERVICE_FILE: &str = "bootstrap.servers=127.0.0.1:9092
group.id=orders-worker
max.poll.records=100
app.auto.offset.reset=earliest
app.metrics.port=9464
";

    #[test]
    fn a_services_own_keys_are_ignored_with_a_warning_as_java_does() {
        let p = Properties::parse(SERVICE_FILE).unwrap();
        let c = ShareConsumerConfig::from_properties(&p).expect("goes on without app.*");
        assert_eq!(c.max_poll_records, 100);
        // A near miss of a known key is still a typo.
        let p = Properties::parse(&format!("{SERVICE_FILE}bootstrap.server=a:1\n")).unwrap();
        let e = ShareConsumerConfig::from_properties(&p).unwrap_err();
        assert!(e.to_string().contains("did you mean bootstrap.servers?"), "{e}");
    }

    #[test]
    fn share_auto_offset_reset_in_a_consumer_file_says_it_is_a_group_config() {
        let p = Properties::parse(&format!("{SERVICE_FILE}share.auto.offset.reset=earliest\n")).unwrap();
        let e = ShareConsumerConfig::from_properties(&p).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(&e, Error::Config { key, .. } if key == "share.auto.offset.reset"), "{e}");
        assert!(msg.contains("share group config") && msg.contains("Admin::set_share_auto_offset_reset"), "{msg}");
        assert!(msg.contains("kafka-share-groups --alter-config"), "{msg}");
        assert!(!msg.contains("check the spelling"), "{msg}");
    }

    #[test]
    fn wait_must_be_below_request_timeout() {
        let mut p = base();
        p.set("fetch.max.wait.ms", "40000");
        let e = ShareConsumerConfig::from_properties(&p).unwrap_err();
        assert!(e.to_string().contains("request.timeout.ms"), "{e}");
    }

    #[test]
    fn a_java_share_consumer_file_works() {
        // Keys Java's share consumer reads that mean nothing here, the two it refuses that
        // Confluent's files set, and a producer's key.
        let mut p = base();
        for (k, v) in [
            ("client.dns.lookup", "use_all_dns_ips"),
            ("metric.reporters", "x.Reporter"),
            ("reconnect.backoff.ms", "50"),
            ("socket.connection.setup.timeout.max.ms", "30000"),
            ("max.partition.fetch.bytes", "1048576"),
            ("auto.commit.interval.ms", "5000"),
            ("internal.leave.group.on.close", "true"),
            ("session.timeout.ms", "45000"),
            ("heartbeat.interval.ms", "3000"),
            ("acks", "all"),
            ("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer"),
        ] {
            p.set(k, v);
        }
        ShareConsumerConfig::from_properties(&p).unwrap();
    }

    #[test]
    fn poll_interval_and_api_timeout_are_read() {
        let c = ShareConsumerConfig::from_properties(&base()).unwrap();
        assert_eq!(c.max_poll_interval, Duration::from_secs(300));
        assert_eq!(c.default_api_timeout, Duration::from_secs(60));
        let mut p = base();
        p.set("max.poll.interval.ms", "1000").set("default.api.timeout.ms", "0");
        let c = ShareConsumerConfig::from_properties(&p).unwrap();
        assert_eq!(c.max_poll_interval, Duration::from_secs(1));
        assert_eq!(c.default_api_timeout, Duration::ZERO);
        for (k, v) in
            [("max.poll.interval.ms", "0"), ("max.poll.interval.ms", "2147483648"), ("default.api.timeout.ms", "-1")]
        {
            let mut p = base();
            p.set(k, v);
            let e = ShareConsumerConfig::from_properties(&p).unwrap_err();
            assert!(matches!(&e, Error::Config { key, .. } if key == k), "{k}={v}: {e}");
        }
        let c = ShareConsumerConfig::new("a:1", "g").max_poll_interval(Duration::from_secs(10));
        assert_eq!(c.max_poll_interval, Duration::from_secs(10));
        assert!(c.max_poll_interval(Duration::ZERO).validate().is_err());
        let c = ShareConsumerConfig::new("a:1", "g").default_api_timeout(Duration::from_secs(5));
        assert_eq!(c.default_api_timeout, Duration::from_secs(5));
    }

    #[test]
    fn default_client_id_is_javas() {
        // Other tests create consumers concurrently: the numbers only go up, one per consumer.
        let number = |id: &str, group: &str| -> u64 {
            let n = id.strip_prefix(&format!("consumer-{group}-")).unwrap_or_else(|| panic!("{id}"));
            n.parse().unwrap_or_else(|_| panic!("{id}"))
        };
        let a = number(&ShareConsumerConfig::new("a:1", "orders").cluster.client_id, "orders");
        let b = number(&ShareConsumerConfig::from_properties(&base()).unwrap().cluster.client_id, "g");
        assert!(a >= 1 && b > a, "{a} then {b}");
        let mut p = base();
        p.set("client.id", "");
        let c = ShareConsumerConfig::from_properties(&p).unwrap();
        assert!(number(&c.cluster.client_id, "g") > b);
        p.set("client.id", "mine");
        assert_eq!(ShareConsumerConfig::from_properties(&p).unwrap().cluster.client_id, "mine");
    }

    #[test]
    fn metadata_max_age_sets_the_pattern_listing_interval() {
        let mut p = base();
        p.set("metadata.max.age.ms", "5000");
        let c = ShareConsumerConfig::from_properties(&p).unwrap();
        assert_eq!(c.metadata_max_age, Duration::from_secs(5));
    }

    #[test]
    fn every_key_the_table_says_the_share_consumer_reads_is_read() {
        let sample = |key: &str| match key {
            "bootstrap.servers" => "a:1",
            "security.protocol" => "PLAINTEXT",
            "group.id" | "client.id" | "client.rack" => "x",
            "share.acknowledgement.mode" => "explicit",
            "share.acquire.mode" => "record_limit",
            "check.crcs" => "false",
            "key.deserializer" | "value.deserializer" => "org.apache.kafka.common.serialization.BytesDeserializer",
            "request.timeout.ms" => "30000",
            _ => "100",
        };
        let mut p = Properties::new();
        let keys = crate::config::keys::KEYS.iter().filter(|k| k.reads(Client::ShareConsumer));
        for k in keys {
            p.set(k.name, sample(k.name));
        }
        ShareConsumerConfig::from_properties(&p).unwrap();
        let unread = p.unused_keys();
        assert!(unread.is_empty(), "the table says the share consumer reads {unread:?}");
    }
}
