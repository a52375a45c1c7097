//! Settings under their Java names.
//!
//! Every client (share consumer, producer, admin) is configured either with a typed builder or
//! with the Java client's property names from a map or a `.properties` file. The settings all
//! clients share (bootstrap, timeouts, security) are read here into a [`ClusterConfig`]; which
//! client reads, ignores or refuses which key is one table, `keys.rs`.

pub(crate) mod keys;
mod properties;

use std::time::Duration;

/// Connection settings shared by every client (`bootstrap.servers`, `client.id`, timeouts,
/// security).
pub use crate::cluster::ClusterConfig;
pub(crate) use keys::{finish, refuse, Client};
pub use properties::Properties;

use crate::error::{Error, Result};
use crate::security::SecurityConfig;

/// Java's default `client.id` for a producer (`producer-<n>`) or an admin client
/// (`adminclient-<n>`): `n` counts such clients of this process, from 1, as Java's sequences do.
/// (The share consumer's, `consumer-<group>-<n>`, is in `consumer/config.rs`.)
pub(crate) fn numbered_client_id(client: Client) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static PRODUCERS: AtomicU64 = AtomicU64::new(1);
    static ADMINS: AtomicU64 = AtomicU64::new(1);
    let (prefix, sequence) = match client {
        Client::Producer => ("producer", &PRODUCERS),
        Client::Admin | Client::ShareConsumer => ("adminclient", &ADMINS),
    };
    format!("{prefix}-{}", sequence.fetch_add(1, Ordering::Relaxed))
}

/// The `client.id` a properties file sets, or (absent or empty, as in Java) `default()`.
pub(crate) fn client_id_or(p: &Properties, default: impl FnOnce() -> String) -> String {
    match p.get("client.id") {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => default(),
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
        let e = finish(&p, Client::Admin).unwrap_err();
        assert!(e.to_string().contains("bootstrp.servers"), "only the typo is refused: {e}");
        assert!(e.to_string().contains("did you mean bootstrap.servers?"), "{e}");
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
