//! The settings every client shares ([`ClusterConfig`], read from Java names by
//! `ClusterConfig::from_properties`), and what `Cluster::connect` makes of the security ones:
//! the rustls config and the SASL login.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::sasl::SaslLogin;
use crate::backoff::Backoff;
use crate::config::Properties;
use crate::error::{Error, Result};
use crate::security::{OAuthBearerConfig, SaslConfig, SecurityConfig, TokenProvider, TokenSource};

/// Connection-level settings shared by every client type (Java names in the docs).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `bootstrap.servers`: host:port list.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`.
    pub client_id: String,
    /// `request.timeout.ms`.
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms`.
    pub connect_timeout: Duration,
    /// `retry.backoff.ms`.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`.
    pub retry_backoff_max: Duration,
    /// `security.protocol` with its SASL and TLS settings (PLAINTEXT by default).
    pub security: SecurityConfig,
    /// A rustls client config built by the caller, used instead of the one built from
    /// `security.tls` (for a custom verifier, trust store or key source).
    #[cfg(feature = "tls")]
    pub tls_client_config: Option<Arc<rustls::ClientConfig>>,
    /// Where OAUTHBEARER tokens come from when the application supplies them (see
    /// [`ClusterConfig::with_oauth_token_provider`]); replaces the token settings.
    pub oauth_tokens: Option<TokenSource>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            bootstrap_servers: vec!["127.0.0.1:9092".into()],
            client_id: "kafka-share".into(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_millis(1000),
            security: SecurityConfig::default(),
            #[cfg(feature = "tls")]
            tls_client_config: None,
            oauth_tokens: None,
        }
    }
}

impl ClusterConfig {
    /// A config with these bootstrap servers and defaults otherwise.
    pub fn new(bootstrap: impl AsRef<str>) -> Self {
        ClusterConfig {
            bootstrap_servers: bootstrap
                .as_ref()
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            ..Default::default()
        }
    }

    /// Reads the settings shared by every client from their Java names (each client's
    /// `from_properties` reads its own keys, and this for the rest).
    pub(crate) fn from_properties(p: &Properties, default_client_id: &str) -> Result<ClusterConfig> {
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

    /// Uses `config` for TLS instead of one built from the `ssl.*` settings (a custom
    /// verifier, trust store or key source). Build it with an explicit crypto provider.
    #[cfg(feature = "tls")]
    pub fn with_tls_client_config(mut self, config: Arc<rustls::ClientConfig>) -> Self {
        self.tls_client_config = Some(config);
        self
    }

    /// Takes OAUTHBEARER tokens from `provider` (an async callback: token, expiry,
    /// principal, extensions), cached and refreshed before they expire. Needs
    /// `sasl.mechanism=OAUTHBEARER`.
    pub fn with_oauth_token_provider(mut self, provider: impl TokenProvider) -> Self {
        self.oauth_tokens = Some(TokenSource::new(provider));
        self
    }

    /// A fresh backoff with this config's bounds.
    pub(crate) fn backoff(&self) -> Backoff {
        Backoff::new(self.retry_backoff, self.retry_backoff_max)
    }
}

/// The SASL login of a SASL protocol, with its token source when tokens come from a
/// callback or an identity provider.
pub(super) fn sasl_login(config: &ClusterConfig, stats: Arc<NetworkStats>) -> Result<Option<Arc<SaslLogin>>> {
    let Some(sasl) = config.security.sasl.clone() else {
        if config.oauth_tokens.is_some() {
            return Err(Error::config("sasl.mechanism", "a token provider is set, but security.protocol has no SASL"));
        }
        return Ok(None);
    };
    let tokens = match (&sasl, &config.oauth_tokens) {
        (SaslConfig::OAuthBearer(_), Some(t)) => Some(t.clone()),
        (_, Some(_)) => {
            return Err(Error::config(
                "sasl.mechanism",
                format!("a token provider is set, but sasl.mechanism is {}: use OAUTHBEARER", sasl.mechanism().name()),
            ))
        }
        (SaslConfig::OAuthBearer(OAuthBearerConfig::ClientCredentials { .. }), None) => Some(oidc_tokens(&sasl)?),
        _ => None,
    };
    Ok(Some(Arc::new(SaslLogin::new(sasl, tokens, stats))))
}

#[cfg(feature = "oidc")]
fn oidc_tokens(sasl: &SaslConfig) -> Result<TokenSource> {
    crate::security::oidc::token_source(sasl)
}

#[cfg(not(feature = "oidc"))]
fn oidc_tokens(_sasl: &SaslConfig) -> Result<TokenSource> {
    Err(Error::config(
        "sasl.oauthbearer.token.endpoint.url",
        "fetching tokens from an identity provider needs kafka-share's `oidc` cargo feature (or pass tokens \
         yourself with ClusterConfig::with_oauth_token_provider)",
    ))
}

/// The rustls config of a TLS protocol: the caller's, or one built from the settings.
#[cfg(feature = "tls")]
pub(super) fn tls_client_config(config: &ClusterConfig) -> Result<Option<Arc<rustls::ClientConfig>>> {
    if !config.security.protocol.uses_tls() {
        return Ok(None);
    }
    if let Some(c) = &config.tls_client_config {
        return Ok(Some(c.clone()));
    }
    let tls = config.security.tls.clone().unwrap_or_default();
    crate::security::tls_client::client_config(&tls).map(Some)
}

/// Connection counters of one client, under the Java client's metric names.
#[derive(Debug, Default)]
pub struct NetworkStats {
    /// Connections opened (and, with SASL, logged in).
    pub connections_created: AtomicU64,
    /// Successful SASL logins on new connections.
    pub authentications: AtomicU64,
    /// Successful SASL re-authentications on live connections (KIP-368).
    pub reauthentications: AtomicU64,
    /// Failed re-authentications (each closed its connection).
    pub failed_reauthentications: AtomicU64,
    /// Requests sent through the cluster layer, by API key.
    pub requests: super::request_counts::RequestCounts,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{finish, Client};

    #[test]
    fn reads_common_settings() {
        let p = Properties::from_pairs([("bootstrap.servers", "127.0.0.1:19092, h:1"), ("request.timeout.ms", "5000")]);
        let c = ClusterConfig::from_properties(&p, "x").unwrap();
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
        ClusterConfig::from_properties(&p, "x").unwrap();
        let e = finish(&p, Client::Admin).unwrap_err();
        assert!(e.to_string().contains("bootstrp.servers"), "only the typo is refused: {e}");
        assert!(e.to_string().contains("did you mean bootstrap.servers?"), "{e}");
    }

    #[test]
    fn bad_bootstrap_and_security_are_explained() {
        let e = ClusterConfig::from_properties(&Properties::new(), "x").unwrap_err();
        assert!(e.to_string().contains("bootstrap.servers"), "{e}");
        let e = ClusterConfig::from_properties(&Properties::from_pairs([("bootstrap.servers", "nohost")]), "x").unwrap_err();
        assert!(e.to_string().contains("not host:port"), "{e}");
        let p = Properties::from_pairs([("bootstrap.servers", "a:1"), ("security.protocol", "SASL_SSL")]);
        assert!(ClusterConfig::from_properties(&p, "x").unwrap_err().to_string().contains("sasl.mechanism"));
    }
}
