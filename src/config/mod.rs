//! Settings under their Java names.
//!
//! Every client (share consumer, producer, admin) is configured either with a typed builder or
//! with the Java client's property names from a map or a `.properties` file. The settings all
//! clients share (bootstrap, timeouts, security) are read here into a [`ClusterConfig`].

mod properties;

use std::time::Duration;

pub use properties::Properties;

use crate::cluster::ClusterConfig;
use crate::error::{Error, Result};
use crate::security::SecurityConfig;

/// Keys every client understands (read by [`cluster_config`]).
pub const COMMON_KEYS: &[&str] = &[
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "security.protocol",
    // Accepted and ignored: connecting already tries every address a name resolves to
    // (what use_all_dns_ips asks for), and Confluent Cloud's client files set it.
    "client.dns.lookup",
];

/// The producer's keys (see `ProducerConfig::from_properties`).
pub const PRODUCER_KEYS: &[&str] = &[
    "acks",
    "linger.ms",
    "batch.size",
    "compression.type",
    "delivery.timeout.ms",
    "max.request.size",
    "max.in.flight.requests.per.connection",
    "buffer.memory",
    "max.block.ms",
    "retries",
    "partitioner.ignore.keys",
    "enable.idempotence",
    "transactional.id",
];

/// Keys of the consumers and of the serializers (Java's and Confluent's). With
/// [`PRODUCER_KEYS`], what a client file shared by producer, consumer and admin (as Confluent
/// Cloud hands out) carries: each client warns about the ones that are not its own and ignores
/// them, as the Java clients do, instead of refusing the file. Any other unknown key is still
/// refused (a typo must not pass silently).
const OTHER_CLIENTS_KEYS: &[&str] = &[
    "group.id",
    "max.poll.records",
    "fetch.max.wait.ms",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "share.acknowledgement.mode",
    "share.acquire.mode",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "value.serializer",
];
const OTHER_CLIENTS_PREFIXES: &[&str] = &["schema.registry.", "basic.auth.", "bearer.auth."];

/// Marks the keys of other clients (see [`OTHER_CLIENTS_KEYS`]) that `client` did not read as
/// used, with a warning each; call it after the client's own getters, before
/// [`Properties::reject_unused`].
pub(crate) fn ignore_other_clients_keys(p: &Properties, client: &str) {
    for key in p.unused_keys() {
        let foreign = OTHER_CLIENTS_KEYS.contains(&key.as_str())
            || PRODUCER_KEYS.contains(&key.as_str())
            || OTHER_CLIENTS_PREFIXES.iter().any(|prefix| key.starts_with(prefix));
        if foreign {
            let _ = p.get(&key);
            tracing::warn!(key, client, "ignoring a setting of another client type (shared client file)");
        }
    }
}

/// Reads the settings shared by every client.
pub fn cluster_config(p: &Properties, default_client_id: &str) -> Result<ClusterConfig> {
    let bootstrap = p
        .get("bootstrap.servers")
        .ok_or_else(|| Error::config("bootstrap.servers", "missing: set it to host:port[,host:port...]"))?;
    let mut c = ClusterConfig::new(bootstrap);
    if c.bootstrap_servers.is_empty() {
        return Err(Error::config("bootstrap.servers", "empty: set it to host:port[,host:port...]"));
    }
    for s in &c.bootstrap_servers {
        let ok = s.rsplit_once(':').map(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok()).unwrap_or(false);
        if !ok {
            return Err(Error::config("bootstrap.servers", format!("{s:?} is not host:port")));
        }
    }
    c.client_id = p.string("client.id", default_client_id);
    c.request_timeout = p.millis("request.timeout.ms", Duration::from_secs(30), 1, i32::MAX as i64)?;
    c.connect_timeout = p.millis("socket.connection.setup.timeout.ms", Duration::from_secs(10), 1, i32::MAX as i64)?;
    c.retry_backoff = p.millis("retry.backoff.ms", Duration::from_millis(100), 0, i32::MAX as i64)?;
    c.retry_backoff_max = p.millis("retry.backoff.max.ms", Duration::from_millis(1000), 0, i32::MAX as i64)?;
    c.security = SecurityConfig::from_properties(p)?;
    c.security.check_supported()?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_common_settings() {
        let p = Properties::from_pairs([("bootstrap.servers", "127.0.0.1:19092, h:1"), ("request.timeout.ms", "5000")]);
        let c = cluster_config(&p, "x").unwrap();
        assert_eq!(c.bootstrap_servers, vec!["127.0.0.1:19092", "h:1"]);
        assert_eq!(c.request_timeout, Duration::from_secs(5));
        assert_eq!(c.client_id, "x");
    }

    #[test]
    fn a_shared_client_file_keeps_other_clients_keys_out_of_the_way() {
        let p = Properties::from_pairs([
            ("bootstrap.servers", "a:1"),
            ("acks", "all"),
            ("schema.registry.url", "https://sr"),
            ("client.dns.lookup", "use_all_dns_ips"),
            ("bootstrp.servers", "typo"),
        ]);
        cluster_config(&p, "x").unwrap();
        ignore_other_clients_keys(&p, "admin client");
        let e = p.reject_unused("admin client", COMMON_KEYS).unwrap_err();
        assert!(e.to_string().contains("bootstrp.servers"), "only the typo is refused: {e}");
    }

    #[test]
    fn bad_bootstrap_and_security_are_explained() {
        let e = cluster_config(&Properties::new(), "x").unwrap_err();
        assert!(e.to_string().contains("bootstrap.servers"), "{e}");
        let e = cluster_config(&Properties::from_pairs([("bootstrap.servers", "nohost")]), "x").unwrap_err();
        assert!(e.to_string().contains("not host:port"), "{e}");
        let p = Properties::from_pairs([("bootstrap.servers", "a:1"), ("security.protocol", "SASL_SSL")]);
        assert!(cluster_config(&p, "x").unwrap_err().to_string().contains("sasl.mechanism"));
    }
}
