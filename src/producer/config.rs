//! Producer settings: a typed builder, and the Java client's property names.

use std::time::Duration;

use crate::cluster::ClusterConfig;
use crate::config::{Client, Properties};
use crate::error::{Error, Result};
use crate::protocol::records::Compression;

/// How many replicas must have a batch before the broker answers (`acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Acks {
    /// `acks=all` (or `-1`): every in-sync replica has the batch. The Java default.
    #[default]
    All,
    /// `acks=1`: the leader has written the batch.
    Leader,
}

impl Acks {
    /// The wire value of the ProduceRequest `acks` field.
    pub fn wire(self) -> i16 {
        match self {
            Acks::All => -1,
            Acks::Leader => 1,
        }
    }
}

/// Settings of a [`Producer`](super::Producer). Every field has the Java client's default
/// unless its doc says otherwise; the builder methods share the fields' names.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Connection settings (`bootstrap.servers`, `client.id`, `request.timeout.ms`, ...).
    pub cluster: ClusterConfig,
    /// `acks` (default all).
    pub acks: Acks,
    /// `linger.ms` (default 5 ms): how long a batch that is not full waits for more records.
    pub linger: Duration,
    /// `batch.size` (default 16384 bytes): a partition's batch is sent once it holds this many
    /// (uncompressed) bytes. The Java default suits latency; for throughput raise it (e.g.
    /// 262144) together with `linger.ms`.
    pub batch_size: usize,
    /// `compression.type` (default none).
    pub compression: Compression,
    /// `delivery.timeout.ms` (default 120 s): upper bound from `send` to success or failure,
    /// retries included. Must be at least `linger.ms` + `request.timeout.ms`.
    pub delivery_timeout: Duration,
    /// `max.request.size` (default 1048576 bytes): the largest record accepted and the
    /// largest ProduceRequest built.
    pub max_request_size: usize,
    /// `max.in.flight.requests.per.connection` (default 5): requests pipelined per broker.
    pub max_in_flight: usize,
    /// `buffer.memory` (default 32 MiB): bytes of records waiting to be delivered; `send` waits
    /// when they are exhausted.
    pub buffer_memory: usize,
    /// `max.block.ms` (default 60 s): how long `send` waits for buffer memory or for topic
    /// metadata before failing with a timeout.
    pub max_block: Duration,
    /// `retries` (default `i32::MAX`): retries of a batch after a retriable error; in practice
    /// `delivery.timeout.ms` bounds them.
    pub retries: u32,
    /// `partitioner.ignore.keys` (default false): when true, keyed records are spread like
    /// keyless ones instead of by key hash.
    pub partitioner_ignore_keys: bool,
    /// `enable.idempotence` (default true): each batch carries a producer id and sequence
    /// number, so retries neither duplicate nor reorder records. Needs `acks=all`,
    /// `max.in.flight.requests.per.connection` <= 5 and `retries` >= 1.
    pub enable_idempotence: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            // Empty: `Producer::connect` names the producer `producer-<n>`, as Java does.
            cluster: ClusterConfig { client_id: String::new(), ..ClusterConfig::default() },
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 16_384,
            compression: Compression::None,
            delivery_timeout: Duration::from_secs(120),
            max_request_size: 1_048_576,
            max_in_flight: 5,
            buffer_memory: 32 * 1024 * 1024,
            max_block: Duration::from_secs(60),
            retries: i32::MAX as u32,
            partitioner_ignore_keys: false,
            enable_idempotence: true,
        }
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.$name = value;
            self
        }
    };
}

impl ProducerConfig {
    /// Defaults with these bootstrap servers (host:port[,host:port...]).
    pub fn new(bootstrap: impl AsRef<str>) -> Self {
        let mut c = ProducerConfig::default();
        c.cluster.bootstrap_servers = ClusterConfig::new(bootstrap).bootstrap_servers;
        c
    }

    setter!(/// Sets `acks`.
        acks: Acks);
    setter!(/// Sets `linger.ms`.
        linger: Duration);
    setter!(/// Sets `batch.size` in bytes.
        batch_size: usize);
    setter!(/// Sets `compression.type`.
        compression: Compression);
    setter!(/// Sets `delivery.timeout.ms`.
        delivery_timeout: Duration);
    setter!(/// Sets `max.request.size` in bytes.
        max_request_size: usize);
    setter!(/// Sets `max.in.flight.requests.per.connection`.
        max_in_flight: usize);
    setter!(/// Sets `buffer.memory` in bytes.
        buffer_memory: usize);
    setter!(/// Sets `max.block.ms`.
        max_block: Duration);
    setter!(/// Sets `retries`.
        retries: u32);
    setter!(/// Sets `partitioner.ignore.keys`.
        partitioner_ignore_keys: bool);
    setter!(/// Sets `enable.idempotence`.
        enable_idempotence: bool);

    /// Sets `client.id`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.cluster.client_id = id.into();
        self
    }

    /// Sets `request.timeout.ms`.
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.cluster.request_timeout = t;
        self
    }

    /// Reads Java-named properties. Refuses unknown keys, and refuses `transactional.id` (not
    /// supported yet) rather than silently ignoring it. As in Java, idempotence is on unless
    /// `enable.idempotence=false`, or it was left unset and `acks`, `retries` or
    /// `max.in.flight.requests.per.connection` conflict with it (then it is off).
    pub fn from_properties(p: &Properties) -> Result<ProducerConfig> {
        // Its own marks: what another client read from a shared `Properties` first must not
        // hide a key from this one's warning.
        p.read_alone(Self::read_properties)
    }

    fn read_properties(p: &Properties) -> Result<ProducerConfig> {
        crate::config::refuse(p, Client::Producer)?;
        let d = ProducerConfig::default();
        let idempotence_set = p.get("enable.idempotence").is_some();
        if p.get("transactional.id").is_some() {
            return Err(Error::config(
                "transactional.id",
                "transactions are not supported yet; remove transactional.id",
            ));
        }
        let acks = match p.choice("acks", "all", &["all", "-1", "1", "0"])?.as_str() {
            "1" => Acks::Leader,
            "0" => return Err(Error::config(
                "acks",
                "acks=0 is not supported yet (fire-and-forget requests are not implemented); use acks=1 or acks=all",
            )),
            _ => Acks::All,
        };
        let compression = p
            .choice("compression.type", "none", &["none", "gzip", "snappy", "lz4", "zstd"])?
            .parse::<Compression>()
            .map_err(|e| Error::config("compression.type", e.to_string()))?;
        let max = i32::MAX as i64;
        let c = ProducerConfig {
            cluster: {
                let id = crate::config::client_id_or(p, String::new);
                let mut c = ClusterConfig::from_properties(p, &id)?;
                c.client_id = id;
                c
            },
            acks,
            linger: p.millis("linger.ms", d.linger, 0, max)?,
            batch_size: p.int("batch.size", d.batch_size as i64, 0, max)? as usize,
            compression,
            delivery_timeout: p.millis("delivery.timeout.ms", d.delivery_timeout, 0, max)?,
            max_request_size: p.int("max.request.size", d.max_request_size as i64, 1, max)? as usize,
            max_in_flight: p.int("max.in.flight.requests.per.connection", d.max_in_flight as i64, 1, max)? as usize,
            buffer_memory: p.int("buffer.memory", d.buffer_memory as i64, 1, i64::MAX)? as usize,
            max_block: p.millis("max.block.ms", d.max_block, 0, i64::MAX)?,
            retries: p.int("retries", d.retries as i64, 0, max)? as u32,
            partitioner_ignore_keys: p.bool("partitioner.ignore.keys", false)?,
            enable_idempotence: p.bool("enable.idempotence", true)?,
        };
        let mut c = c;
        if !idempotence_set && c.idempotence_conflict().is_some() {
            c.enable_idempotence = false;
        }
        crate::config::finish(p, Client::Producer)?;
        c.validate()?;
        Ok(c)
    }

    /// Checks the settings against each other, as the Java client does at construction.
    pub fn validate(&self) -> Result<()> {
        let needed = self.linger.saturating_add(self.cluster.request_timeout);
        if self.delivery_timeout < needed {
            return Err(Error::config(
                "delivery.timeout.ms",
                format!(
                    "{} ms is less than linger.ms + request.timeout.ms ({} ms); raise it",
                    self.delivery_timeout.as_millis(),
                    needed.as_millis()
                ),
            ));
        }
        let checks = [
            (self.max_request_size == 0, "max.request.size", "must be at least 1"),
            (self.max_request_size > i32::MAX as usize, "max.request.size", "must fit in an i32"),
            (self.batch_size > i32::MAX as usize, "batch.size", "must fit in an i32"),
            (self.max_in_flight == 0, "max.in.flight.requests.per.connection", "must be at least 1"),
            (self.buffer_memory == 0, "buffer.memory", "must be at least 1"),
        ];
        if let Some((_, key, msg)) = checks.iter().find(|c| c.0) {
            return Err(Error::config(*key, *msg));
        }
        match self.idempotence_conflict() {
            Some((key, msg)) if self.enable_idempotence => Err(Error::config(
                key,
                format!("{msg} when enable.idempotence is true; change it or set enable.idempotence=false"),
            )),
            _ => Ok(()),
        }
    }

    /// A setting idempotence cannot work with, as Java checks it: the broker keeps only the
    /// last 5 batches per producer and partition to recognise duplicates.
    fn idempotence_conflict(&self) -> Option<(&'static str, &'static str)> {
        if self.acks != Acks::All {
            Some(("acks", "must be all (-1)"))
        } else if self.max_in_flight > 5 {
            Some(("max.in.flight.requests.per.connection", "must be at most 5"))
        } else if self.retries == 0 {
            Some(("retries", "must be at least 1"))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(extra: &[(&str, &str)]) -> Properties {
        let mut p = Properties::from_pairs([("bootstrap.servers", "127.0.0.1:19092")]);
        for (k, v) in extra {
            p.set(*k, *v);
        }
        p
    }

    #[test]
    fn java_defaults() {
        let c = ProducerConfig::from_properties(&props(&[])).unwrap();
        assert_eq!(c.acks, Acks::All);
        assert_eq!(c.linger, Duration::from_millis(5));
        assert_eq!(c.batch_size, 16384);
        assert_eq!(c.compression, Compression::None);
        assert_eq!(c.delivery_timeout, Duration::from_secs(120));
        assert_eq!(c.max_request_size, 1_048_576);
        assert_eq!(c.max_in_flight, 5);
        assert_eq!(c.buffer_memory, 32 << 20);
        // Named producer-<n> when it connects (`Producer::connect`), as Java names it.
        assert_eq!(c.cluster.client_id, "");
        assert!(c.enable_idempotence);
    }

    #[test]
    fn idempotence_conflicts_as_in_java() {
        // Left unset, a conflicting setting turns idempotence off.
        let c = ProducerConfig::from_properties(&props(&[("acks", "1")])).unwrap();
        assert!(!c.enable_idempotence);
        let c = ProducerConfig::from_properties(&props(&[("max.in.flight.requests.per.connection", "6")])).unwrap();
        assert!(!c.enable_idempotence);
        // Set explicitly, the conflict is a typed config error naming the setting.
        let err = |kv: &[(&str, &str)]| ProducerConfig::from_properties(&props(kv)).unwrap_err();
        let e = err(&[("enable.idempotence", "true"), ("acks", "1")]);
        assert!(matches!(&e, Error::Config { key, .. } if key == "acks"), "{e}");
        let e = err(&[("enable.idempotence", "true"), ("max.in.flight.requests.per.connection", "6")]);
        assert!(matches!(&e, Error::Config { key, .. } if key == "max.in.flight.requests.per.connection"), "{e}");
        let e = err(&[("enable.idempotence", "true"), ("retries", "0")]);
        assert!(matches!(&e, Error::Config { key, .. } if key == "retries"), "{e}");
        // The typed builder cannot tell a default from a choice: a conflict is an error.
        let e = ProducerConfig::new("a:1").acks(Acks::Leader).validate().unwrap_err();
        assert!(e.to_string().contains("enable.idempotence=false"), "{e}");
        assert!(ProducerConfig::new("a:1").acks(Acks::Leader).enable_idempotence(false).validate().is_ok());
        let c = ProducerConfig::from_properties(&props(&[("enable.idempotence", "false"), ("acks", "1")])).unwrap();
        assert!(!c.enable_idempotence);
    }

    #[test]
    fn reads_java_names() {
        let c = ProducerConfig::from_properties(&props(&[
            ("acks", "1"),
            ("linger.ms", "10"),
            ("batch.size", "262144"),
            ("compression.type", "ZSTD"),
            ("max.in.flight.requests.per.connection", "2"),
            ("buffer.memory", "1000000"),
            ("partitioner.ignore.keys", "true"),
            ("request.timeout.ms", "1000"),
            ("client.id", "me"),
        ]))
        .unwrap();
        assert_eq!(c.acks, Acks::Leader);
        assert_eq!(c.linger, Duration::from_millis(10));
        assert_eq!(c.batch_size, 262144);
        assert_eq!(c.compression, Compression::Zstd);
        assert_eq!(c.max_in_flight, 2);
        assert_eq!(c.buffer_memory, 1_000_000);
        assert!(c.partitioner_ignore_keys);
        assert_eq!(c.cluster.request_timeout, Duration::from_secs(1));
        assert_eq!(c.cluster.client_id, "me");
        assert_eq!(ProducerConfig::from_properties(&props(&[("acks", "-1")])).unwrap().acks, Acks::All);
    }

    #[test]
    fn refuses_what_is_not_supported() {
        let err = |kv: &[(&str, &str)]| ProducerConfig::from_properties(&props(kv)).unwrap_err().to_string();
        let e = err(&[("transactional.id", "tx")]);
        assert!(e.contains("transactional.id") && e.contains("not supported yet"), "{e}");
        let e = err(&[("acks", "0")]);
        assert!(e.contains("acks=0 is not supported yet"), "{e}");
        let e = err(&[("acks", "2")]);
        assert!(e.contains("not allowed"), "{e}");
        let e = err(&[("compression.type", "brotli")]);
        assert!(e.contains("compression.type"), "{e}");
        let e = err(&[("lingr.ms", "5")]);
        assert!(e.contains("lingr.ms") && e.contains("unknown setting"), "{e}");
        let e = err(&[("delivery.timeout.ms", "1000")]);
        assert!(e.contains("linger.ms + request.timeout.ms"), "{e}");
        let e = err(&[("max.in.flight.requests.per.connection", "0")]);
        assert!(e.contains("out of range"), "{e}");
        let e = err(&[("partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner")]);
        assert!(e.contains("partitioner.class") && e.contains("Java classes"), "{e}");
    }

    #[test]
    fn a_java_producer_file_works() {
        // Keys Java's producer reads that mean nothing here, and a consumer's key (shared file).
        let c = ProducerConfig::from_properties(&props(&[
            ("key.serializer", "org.apache.kafka.common.serialization.StringSerializer"),
            ("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer"),
            ("interceptor.classes", "io.confluent.monitoring.clients.interceptor.MonitoringProducerInterceptor"),
            ("compression.zstd.level", "3"),
            ("metric.reporters", "x.Reporter"),
            ("client.rack", "use1-az1"),
            ("group.id", "g"),
            ("auto.offset.reset", "earliest"),
        ]))
        .unwrap();
        assert_eq!(c.acks, Acks::All);
    }

    #[test]
    fn every_key_the_table_says_the_producer_reads_is_read() {
        let sample = |key: &str| match key {
            "bootstrap.servers" => "a:1",
            "security.protocol" => "PLAINTEXT",
            "acks" => "all",
            "compression.type" => "lz4",
            "partitioner.ignore.keys" | "enable.idempotence" => "true",
            "client.id" => "me",
            "max.in.flight.requests.per.connection" => "5",
            _ => "1000",
        };
        let mut p = Properties::new();
        let keys: Vec<&str> = crate::config::keys::KEYS
            .iter()
            .filter(|k| k.reads(Client::Producer) && k.name != "transactional.id")
            .map(|k| k.name)
            .collect();
        for k in &keys {
            p.set(*k, sample(k));
        }
        p.set("delivery.timeout.ms", "120000");
        ProducerConfig::from_properties(&p).unwrap();
        let unread: Vec<String> = p.unused_keys();
        assert!(unread.is_empty(), "the table says the producer reads {unread:?}");
    }

    #[test]
    fn builder_sets_fields() {
        let c = ProducerConfig::new("a:1,b:2")
            .enable_idempotence(false)
            .acks(Acks::Leader)
            .linger(Duration::from_millis(10))
            .batch_size(1 << 18)
            .compression(Compression::Lz4)
            .client_id("x")
            .request_timeout(Duration::from_secs(5));
        assert_eq!(c.cluster.bootstrap_servers, vec!["a:1", "b:2"]);
        assert_eq!((c.acks, c.batch_size, c.compression), (Acks::Leader, 1 << 18, Compression::Lz4));
        assert!(c.validate().is_ok());
        assert!(c.clone().max_request_size(0).validate().is_err());
    }

    /// What the producer's reader logs at WARN, captured.
    fn producer_warnings(p: &Properties) -> String {
        use std::sync::{Arc, Mutex};
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || Capture(sink.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, || ProducerConfig::from_properties(p).map(drop))
            .expect("the producer's settings");
        let out = buf.lock().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        out
    }

    /// A log writer into a shared buffer.
    struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut v) = self.0.lock() {
                v.extend_from_slice(b);
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// One `Properties` for a consumer and a producer: the producer names the consumer's
    /// keys it ignores whether or not the consumer read them first.
    #[test]
    fn the_other_clients_keys_warning_does_not_depend_on_who_read_first() {
        let p = props(&[("group.id", "g")]);
        let alone = producer_warnings(&p);
        assert!(alone.contains("settings of other client types: group.id"), "{alone}");
        crate::consumer::ShareConsumerConfig::from_properties(&p).expect("the consumer's settings");
        let after = producer_warnings(&p);
        assert!(after.contains("settings of other client types: group.id"), "{after}");
        // What no client read is still listed on the shared set.
        assert!(p.unused_keys().is_empty(), "{:?}", p.unused_keys());
    }
}
