//! Every setting name the clients know, in one table: which client reads it, which accepts it
//! without a use for it here, and which refuses it (with what to do instead).
//!
//! The aim is that a properties file the Java client accepts works unchanged. The Java names
//! come from the 4.4 clients' `ConsumerConfig` (with `ShareConsumerConfig`'s refusals),
//! `ProducerConfig` and `AdminClientConfig`. A key falls in one of these cases, per client:
//!
//! * **read**: the client's reader reads it (`ShareConsumerConfig::from_properties`,
//!   `ProducerConfig::from_properties`, `Admin::from_properties`, the security settings);
//! * **unused**: the Java client reads it, but it means nothing here (a JMX reporter, socket
//!   buffer sizes, a Java class): accepted, and listed once in a warning;
//! * **refused**: the Java client refuses it too (the share consumer's consumer-group settings),
//!   or ignoring it would silently change what the client does; the error says what to do;
//! * **another client's**: the key belongs to another client type. Confluent Cloud hands out
//!   one file for producer, consumer and admin, so such keys are accepted and listed in the
//!   same warning.
//!
//! Any other key is a near miss of a known name (at most two edits, e.g. `bootstrap.server`,
//! `max.poll.record`): refused, naming the known one, as a typo must not pass silently; or
//! the application's own (`app.auto.offset.reset`: services keep their keys in the same
//! file): listed in the same warning, and the client goes on, as Java's does ("supplied but
//! are not used").
//!
//! A share group's own configs (`share.auto.offset.reset`, `share.record.lock.duration.ms`,
//! ...) in a consumer's file are refused with how to set them on the group: the consumer
//! cannot apply them, and going on would start the group somewhere the user did not ask for.
//!
//! The `ssl.*` and `sasl.*` keys are the security reader's (`security/config.rs`,
//! `security/tls.rs`): it reads or ignores each of them for every client.

use super::properties::Properties;
use crate::error::{Error, Result};

/// A client type, for looking keys up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// `ShareConsumer` (Java's `KafkaShareConsumer`).
    ShareConsumer,
    /// `Producer` (Java's `KafkaProducer`).
    Producer,
    /// `Admin` and `kafka-share-groups` (Java's `Admin`).
    Admin,
}

impl Client {
    fn bit(self) -> u8 {
        match self {
            Client::ShareConsumer => C,
            Client::Producer => P,
            Client::Admin => A,
        }
    }

    /// The name error messages and warnings use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Client::ShareConsumer => "share consumer",
            Client::Producer => "producer",
            Client::Admin => "admin client",
        }
    }
}

const C: u8 = 1;
const P: u8 = 2;
const A: u8 = 4;
const ALL: u8 = C | P | A;

/// One key (or, for [`PREFIXES`], every key that starts with `name`).
#[derive(Debug)]
pub(crate) struct Key {
    pub name: &'static str,
    /// Clients whose reader reads it.
    read: u8,
    /// Clients that accept it without a use for it.
    unused: u8,
    /// Clients that refuse it, with `why`.
    refused: u8,
    /// For a refusal: why, and what to do instead.
    why: &'static str,
}

impl Key {
    /// Whether `client`'s reader reads this key.
    #[cfg(test)]
    pub(crate) fn reads(&self, client: Client) -> bool {
        self.read & client.bit() != 0
    }
}

const fn read(name: &'static str, read: u8, unused: u8) -> Key {
    Key { name, read, unused, refused: 0, why: "" }
}

const fn unused(name: &'static str, by: u8) -> Key {
    Key { name, read: 0, unused: by, refused: 0, why: "" }
}

const fn refused(name: &'static str, by: u8, unused: u8, why: &'static str) -> Key {
    Key { name, read: 0, unused, refused: by, why }
}

/// A key no client here uses: it belongs to a client type this crate does not have.
const fn foreign(name: &'static str) -> Key {
    Key { name, read: 0, unused: 0, refused: 0, why: "" }
}

/// Why a share group's config is refused in a consumer's settings.
const GROUP_CONFIG: &str = "a share group config, which the broker keeps per group, not a consumer setting: \
     set it on the group with Admin::set_group_config (share.auto.offset.reset: \
     Admin::set_share_auto_offset_reset) or `kafka-share-groups --alter-config --group G --config KEY=VALUE`, \
     and remove it here";

/// The table. Comments say why a key the Java client reads has no use here.
pub(crate) const KEYS: &[Key] = &[
    // Connection settings of every client.
    read("bootstrap.servers", ALL, 0),
    read("client.id", ALL, 0),
    read("request.timeout.ms", ALL, 0),
    read("socket.connection.setup.timeout.ms", ALL, 0),
    read("retry.backoff.ms", ALL, 0),
    read("retry.backoff.max.ms", ALL, 0),
    read("security.protocol", ALL, 0),
    // Dialing tries every address a name resolves to (what use_all_dns_ips asks for); names
    // are resolved when dialed; the socket buffers are the operating system's; a dial that
    // fails backs off with retry.backoff.*; connections stay open while the client lives.
    unused("client.dns.lookup", ALL),
    unused("bootstrap.resolve.timeout.ms", ALL),
    unused("socket.connection.setup.timeout.max.ms", ALL),
    unused("send.buffer.bytes", ALL),
    unused("receive.buffer.bytes", ALL),
    unused("reconnect.backoff.ms", ALL),
    unused("reconnect.backoff.max.ms", ALL),
    unused("connections.max.idle.ms", ALL),
    // The share consumer lists topics this often for a pattern subscription. Otherwise
    // metadata is refreshed when an answer says it is stale, and the bootstrap servers are
    // tried again when no known broker answers.
    read("metadata.max.age.ms", C, P | A),
    unused("metadata.recovery.strategy", ALL),
    unused("metadata.recovery.rebootstrap.trigger.ms", ALL),
    unused("metadata.cluster.check.enable", ALL),
    // Java's metrics machinery (reporters are Java classes; this crate has `metrics()`), and
    // its security providers (JCA classes).
    unused("metrics.sample.window.ms", ALL),
    unused("metrics.num.samples", ALL),
    unused("metrics.recording.level", ALL),
    unused("metric.reporters", ALL),
    unused("enable.metrics.push", ALL),
    unused("auto.include.jmx.reporter", ALL), // gone in Java 4.0; older files still set it
    unused("security.providers", ALL),
    refused(
        "config.providers",
        ALL,
        0,
        "config providers (${provider:path:key} variables) are not supported: write the values into the file",
    ),
    // The share consumer.
    read("group.id", C, 0),
    read("share.acknowledgement.mode", C, 0),
    read("share.acquire.mode", C, 0),
    read("max.poll.records", C, 0),
    read("max.poll.interval.ms", C, 0),
    read("fetch.min.bytes", C, 0),
    read("fetch.max.bytes", C, 0),
    read("fetch.max.wait.ms", C, 0),
    read("check.crcs", C, 0),
    read("key.deserializer", C, 0),
    read("value.deserializer", C, 0),
    read("default.api.timeout.ms", C, A),
    read("client.rack", C, P),
    // ShareFetch has no per-partition limit; Java's share consumer ignores the auto-commit
    // interval; there are no pattern subscriptions, and share consumers never create topics.
    unused("max.partition.fetch.bytes", C),
    unused("auto.commit.interval.ms", C),
    unused("exclude.internal.topics", C),
    unused("allow.auto.create.topics", C),
    // Java's share consumer refuses these two, but Confluent Cloud's client files set
    // session.timeout.ms, and a user's first file should work: the broker's group configs
    // share.session.timeout.ms and share.heartbeat.interval.ms rule (see DESIGN.md).
    unused("session.timeout.ms", C),
    unused("heartbeat.interval.ms", C),
    // Refused by Java's share consumer ("cannot be set when using a share group").
    refused(
        "auto.offset.reset",
        C,
        0,
        "not used by share groups: set the group config share.auto.offset.reset (latest | earliest | by_duration:<ISO-8601>) with the admin client or kafka-share-groups --alter-config",
    ),
    refused(
        "enable.auto.commit",
        C,
        0,
        "not used by share groups: records are acknowledged (share.acknowledgement.mode implicit or explicit), not committed as offsets",
    ),
    refused("group.instance.id", C, 0, "static membership does not exist for share groups; remove it"),
    refused("isolation.level", C, 0, "not used by share consumers: set the group config share.isolation.level instead"),
    refused(
        "partition.assignment.strategy",
        C,
        0,
        "share groups are assigned by the broker's share-group assignor; remove it",
    ),
    refused("group.protocol", C, 0, "share consumers always use the share-group protocol; remove it"),
    refused("group.remote.assignor", C, 0, "share groups are assigned by the broker; remove it"),
    // The broker's share-group configs (KIP-932): set on the group, not on a client; Java's
    // consumer ignores them with a warning, so the group silently keeps its defaults.
    refused("share.auto.offset.reset", C, 0, GROUP_CONFIG),
    refused("share.isolation.level", C, 0, GROUP_CONFIG),
    refused("share.record.lock.duration.ms", C, 0, GROUP_CONFIG),
    refused("share.delivery.count.limit", C, 0, GROUP_CONFIG),
    refused("share.session.timeout.ms", C, 0, GROUP_CONFIG),
    refused("share.heartbeat.interval.ms", C, 0, GROUP_CONFIG),
    // A producer's interceptors (often Confluent's monitoring ones) are Java classes: nothing
    // to run here, and records go out unchanged.
    refused("interceptor.classes", C, P, "share consumers take no interceptors (Java's refuses them too); remove it"),
    // The producer.
    read("acks", P, 0),
    read("linger.ms", P, 0),
    read("batch.size", P, 0),
    read("compression.type", P, 0),
    read("delivery.timeout.ms", P, 0),
    read("max.request.size", P, 0),
    read("max.in.flight.requests.per.connection", P, 0),
    read("buffer.memory", P, 0),
    read("max.block.ms", P, 0),
    read("retries", P, A),
    read("partitioner.ignore.keys", P, 0),
    read("enable.idempotence", P, 0),
    read("transactional.id", P, 0), // read to be refused: transactions are not supported yet
    // The codecs' default levels; Java's adaptive and rack-aware partitioning; records are
    // bytes (no serializer classes); transactions are refused with transactional.id.
    unused("compression.gzip.level", P),
    unused("compression.lz4.level", P),
    unused("compression.zstd.level", P),
    unused("partitioner.adaptive.partitioning.enable", P),
    unused("partitioner.availability.timeout.ms", P),
    unused("partitioner.rack.aware", P),
    unused("metadata.max.idle.ms", P),
    unused("key.serializer", P),
    unused("value.serializer", P),
    unused("buffer.memory.allocation.strategy", P),
    unused("transaction.timeout.ms", P),
    unused("transaction.two.phase.commit.enable", P),
    refused(
        "partitioner.class",
        P,
        0,
        "custom partitioners are Java classes; this producer partitions as Java's default does (murmur2 of the key, sticky batches without one): remove it",
    ),
    // The admin client.
    unused("bootstrap.controllers", A),
];

/// Key prefixes, for settings that come in families.
pub(crate) const PREFIXES: &[Key] = &[
    // Java's test hooks (e.g. internal.leave.group.on.close).
    unused("internal.", ALL),
    // Schema Registry serializers' settings (in Confluent's client files).
    foreign("schema.registry."),
    foreign("basic.auth."),
    foreign("bearer.auth."),
];

/// The row for `key`, if it is known.
pub(crate) fn lookup(key: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == key).or_else(|| PREFIXES.iter().find(|k| key.starts_with(k.name)))
}

/// Fails on the first key `client` refuses, saying why. Call it before reading anything, so
/// the refusal is what the user sees first.
pub(crate) fn refuse(p: &Properties, client: Client) -> Result<()> {
    for key in p.keys() {
        if let Some(k) = lookup(key).filter(|k| k.refused & client.bit() != 0) {
            return Err(Error::config(key, k.why));
        }
    }
    Ok(())
}

/// Call after the client's reader: refuses a key nobody read that is a near miss of a known
/// name (a typo), and lists in one warning the keys it goes on without (its own unused ones,
/// other client types', and keys no client knows).
pub(crate) fn finish(p: &Properties, client: Client) -> Result<()> {
    let ignored = ignored(p, client)?;
    if let Some(line) = ignored.warning() {
        tracing::warn!(client = client.name(), "the {} ignores {line}", client.name());
    }
    Ok(())
}

/// The keys a client goes on without, by kind (sorted, as the properties are).
#[derive(Debug, Default, PartialEq, Eq)]
struct Ignored {
    /// The client's own keys that mean nothing here.
    unused: Vec<String>,
    /// Other client types' keys.
    others: Vec<String>,
    /// Keys no client knows, and no near miss of one: the application's own.
    unknown: Vec<String>,
}

impl Ignored {
    /// The one warning line, if anything was ignored.
    fn warning(&self) -> Option<String> {
        let parts: Vec<String> = [
            ("settings it has no use for", &self.unused),
            ("settings of other client types", &self.others),
            ("settings no Kafka client knows (as Java's client, it goes on without them)", &self.unknown),
        ]
        .into_iter()
        .filter(|(_, keys)| !keys.is_empty())
        .map(|(what, keys)| format!("{what}: {}", keys.join(", ")))
        .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Sorts the keys nobody read; fails on a refused key or a near miss of a known one.
fn ignored(p: &Properties, client: Client) -> Result<Ignored> {
    let mut ignored = Ignored::default();
    let bit = client.bit();
    for key in p.unused_keys() {
        match lookup(&key) {
            Some(k) if k.refused & bit != 0 => return Err(Error::config(key, k.why)),
            // The readers read every key the table says they read (their tests check it);
            // one left unread would be listed here, not refused.
            Some(k) if k.read & bit != 0 || k.unused & bit != 0 => ignored.unused.push(key),
            Some(_) => ignored.others.push(key),
            None => match nearest(&key) {
                Some(near) => return Err(misspelt(&key, near, client)),
                None => ignored.unknown.push(key),
            },
        }
    }
    Ok(ignored)
}

fn misspelt(key: &str, near: &str, client: Client) -> Error {
    Error::config(
        key,
        format!(
            "unknown setting for a {} (did you mean {near}?); check the spelling against the Java client's config names",
            client.name()
        ),
    )
}

/// The known key closest to `key`, if it is a likely typo of it (at most two edits, and
/// fewer than a quarter of its length).
fn nearest(key: &str) -> Option<&'static str> {
    let limit = (key.len() / 4).clamp(1, 2);
    KEYS.iter()
        .map(|k| (edit_distance(key, k.name), k.name))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance over bytes (keys are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, &cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur.push(substitute.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_appears_once_and_says_why_it_is_refused() {
        let mut names: Vec<&str> = KEYS.iter().chain(PREFIXES).map(|k| k.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a key is listed twice");
        for k in KEYS.iter().chain(PREFIXES) {
            assert_eq!(k.refused != 0, !k.why.is_empty(), "{}: a refusal needs its reason", k.name);
            assert_eq!(k.read & k.unused, 0, "{}: read and unused by the same client", k.name);
            assert_eq!((k.read | k.unused) & k.refused, 0, "{}: refused and accepted by the same client", k.name);
        }
    }

    #[test]
    fn java_refusals_and_deviations() {
        let share = |key: &str| lookup(key).map(|k| (k.read & C != 0, k.unused & C != 0, k.refused & C != 0));
        for key in [
            "auto.offset.reset",
            "enable.auto.commit",
            "group.instance.id",
            "isolation.level",
            "partition.assignment.strategy",
            "interceptor.classes",
            "group.protocol",
            "group.remote.assignor",
        ] {
            assert_eq!(share(key), Some((false, false, true)), "{key}");
        }
        // Refused by Java, accepted here on purpose (Confluent Cloud's files set them).
        assert_eq!(share("session.timeout.ms"), Some((false, true, false)));
        assert_eq!(share("heartbeat.interval.ms"), Some((false, true, false)));
        assert_eq!(share("max.poll.interval.ms"), Some((true, false, false)));
        assert_eq!(share("acks"), Some((false, false, false)), "another client's key");
        assert!(lookup("internal.leave.group.on.close").is_some());
        assert!(lookup("schema.registry.url").is_some());
        assert!(lookup("max.poll.record").is_none());
    }

    #[test]
    fn refusals_name_the_key_and_why() {
        let p = Properties::from_pairs([("bootstrap.servers", "a:1"), ("auto.offset.reset", "earliest")]);
        let e = refuse(&p, Client::ShareConsumer).unwrap_err();
        assert!(matches!(&e, Error::Config { key, .. } if key == "auto.offset.reset"), "{e}");
        assert!(e.to_string().contains("share.auto.offset.reset"), "{e}");
        refuse(&p, Client::Producer).unwrap();
        let p = Properties::from_pairs([("config.providers", "file")]);
        assert!(refuse(&p, Client::Admin).is_err());
    }

    #[test]
    fn finish_accepts_known_keys_and_refuses_typos_with_a_hint() {
        let p = Properties::from_pairs([
            ("metric.reporters", "x"),
            ("acks", "all"),
            ("internal.leave.group.on.close", "false"),
            ("basic.auth.user.info", "u:p"),
        ]);
        finish(&p, Client::ShareConsumer).unwrap();
        let p = Properties::from_pairs([("max.poll.record", "5")]);
        let e = finish(&p, Client::ShareConsumer).unwrap_err();
        assert!(e.to_string().contains("did you mean max.poll.records?"), "{e}");
        let p = Properties::from_pairs([("bootstrap.server", "a:1")]);
        let e = finish(&p, Client::Producer).unwrap_err();
        assert!(e.to_string().contains("did you mean bootstrap.servers?"), "{e}");
    }

    #[test]
    fn keys_no_client_knows_are_listed_in_the_one_warning_as_java_does() {
        // A service's own keys beside the client's, in one file.
        let p = Properties::from_pairs([
            ("app.auto.offset.reset", "earliest"),
            ("app.name", "orders"),
            ("acks", "all"),
            ("metric.reporters", "x"),
        ]);
        let ignored = ignored(&p, Client::ShareConsumer).unwrap();
        assert_eq!(
            ignored,
            Ignored {
                unused: vec!["metric.reporters".into()],
                others: vec!["acks".into()],
                unknown: vec!["app.auto.offset.reset".into(), "app.name".into()],
            }
        );
        let line = ignored.warning().unwrap();
        assert_eq!(line.matches("app.auto.offset.reset").count(), 1, "{line}");
        assert!(line.contains("as Java's client, it goes on without them): app.auto.offset.reset, app.name"), "{line}");
        finish(&p, Client::ShareConsumer).unwrap();
        assert_eq!(ignored_of(&[("client.id", "x")]).warning(), None);
    }

    fn ignored_of(pairs: &[(&str, &str)]) -> Ignored {
        let p = Properties::from_pairs(pairs.iter().copied());
        for (k, _) in pairs {
            p.get(k);
        }
        ignored(&p, Client::Admin).unwrap()
    }

    #[test]
    fn group_configs_in_a_consumer_file_say_how_to_set_them_on_the_group() {
        for key in [
            "share.auto.offset.reset",
            "share.isolation.level",
            "share.record.lock.duration.ms",
            "share.delivery.count.limit",
            "share.session.timeout.ms",
            "share.heartbeat.interval.ms",
        ] {
            let p = Properties::from_pairs([(key, "1")]);
            let e = refuse(&p, Client::ShareConsumer).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(&e, Error::Config { key: k, .. } if k == key), "{e}");
            assert!(msg.contains("a share group config") && msg.contains("--alter-config"), "{msg}");
            assert!(!msg.contains("check the spelling"), "{msg}");
        }
        let p = Properties::from_pairs([("share.auto.offset.reset", "earliest")]);
        let msg = refuse(&p, Client::ShareConsumer).unwrap_err().to_string();
        assert!(msg.contains("Admin::set_share_auto_offset_reset"), "{msg}");
        // Another client's file keeps it as another client type's key.
        refuse(&p, Client::Producer).unwrap();
        assert_eq!(ignored(&p, Client::Producer).unwrap().others, vec!["share.auto.offset.reset".to_string()]);
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("linger.ms", "linger.ms"), 0);
        assert_eq!(edit_distance("lingr.ms", "linger.ms"), 1);
        assert_eq!(edit_distance("acks", "akcs"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
