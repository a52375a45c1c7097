//! Security settings from Java / Confluent and librdkafka property names:
//! `security.protocol`, `sasl.mechanism` (librdkafka: `sasl.mechanisms`), and credentials
//! from `sasl.jaas.config` or `sasl.username` / `sasl.password`.
//!
//! Crate-specific: `sasl.oauthbearer.token`, a static OAUTHBEARER token (no Java client
//! has one; it is the simplest way to pass a token obtained elsewhere).

use std::collections::BTreeMap;

use super::jaas::{JaasConfig, LoginModule};
use super::oauthbearer::validate_extension;
use super::scram::ScramMechanism;
use super::tls::TlsConfig;
use super::unsecured_jwt::DEFAULT_LIFETIME_SECS;
use super::Secret;
use crate::config::Properties;
use crate::error::{Error, Result};

/// Every SASL key this module reads. With a protocol without SASL they are read and
/// ignored, as the Java client ignores them (a file switched to PLAINTEXT for a local test
/// keeps working).
const SASL_KEYS: &[&str] = &[
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.token",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    // Java login tuning: our timeouts and refresh schedule are fixed (the token cache
    // refreshes after 80% of a token's life; the connect timeout bounds a login).
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.kerberos.service.name",
];

/// `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// No TLS, no SASL (the default).
    #[default]
    Plaintext,
    /// TLS, no SASL.
    Ssl,
    /// SASL without TLS (the password or token crosses the network in clear with PLAIN).
    SaslPlaintext,
    /// SASL over TLS: Confluent Cloud.
    SaslSsl,
}

impl SecurityProtocol {
    /// The Java spelling.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections start with a TLS handshake.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL after ApiVersions.
    pub fn uses_sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }

    /// Parses a value, any case.
    pub fn parse(value: &str) -> Result<SecurityProtocol> {
        match value.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            _ => Err(Error::config(
                "security.protocol",
                format!(
                    "{:?} is not a security protocol: use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
                    value.trim()
                ),
            )),
        }
    }
}

/// `sasl.mechanism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// PLAIN: user name and password (Confluent Cloud API key and secret).
    Plain,
    /// SCRAM-SHA-256
    ScramSha256,
    /// SCRAM-SHA-512
    ScramSha512,
    /// OAUTHBEARER: a bearer token (JWT).
    OAuthBearer,
}

impl SaslMechanism {
    /// The name SaslHandshake sends.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Parses a value, any case. GSSAPI is refused: Kerberos is not supported.
    pub fn parse(key: &str, value: &str) -> Result<SaslMechanism> {
        match value.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
            "OAUTHBEARER" => Ok(SaslMechanism::OAuthBearer),
            "GSSAPI" => Err(Error::config(
                key,
                "GSSAPI: Kerberos is not supported; use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
            )),
            _ => Err(Error::config(
                key,
                format!(
                    "{:?} is not a SASL mechanism: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
                    value.trim()
                ),
            )),
        }
    }

    fn login_module(self) -> LoginModule {
        match self {
            SaslMechanism::Plain => LoginModule::Plain,
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => LoginModule::Scram,
            SaslMechanism::OAuthBearer => LoginModule::OAuthBearer,
        }
    }
}

/// Where an OAUTHBEARER token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthBearerConfig {
    /// A token given as is (`sasl.oauthbearer.token`). It is not refreshed: when it
    /// expires, logins fail.
    StaticToken {
        /// The token (a compact JWT).
        token: Secret,
        /// SASL extensions sent with it.
        extensions: BTreeMap<String, String>,
    },
    /// An unsecured JWT made by the client (`unsecuredLoginStringClaim_sub` in
    /// `sasl.jaas.config`), for brokers with the unsecured validator: tests only.
    Unsecured {
        /// The `sub` claim: the principal.
        subject: String,
        /// `unsecuredLoginLifetimeSeconds`, 3600 by default.
        lifetime_secs: u64,
        /// SASL extensions (`unsecuredLoginExtension_<name>` options).
        extensions: BTreeMap<String, String>,
    },
    /// OIDC client credentials: `sasl.oauthbearer.token.endpoint.url` with `clientId` /
    /// `clientSecret` / `scope` in `sasl.jaas.config` (Java) or `sasl.oauthbearer.client.id`
    /// / `.client.secret` / `.scope` (librdkafka). Fetching the token is not built yet.
    ClientCredentials {
        /// The token endpoint.
        token_endpoint_url: String,
        /// The client id.
        client_id: String,
        /// The client secret.
        client_secret: Secret,
        /// The requested scope, if any.
        scope: Option<String>,
        /// SASL extensions (`extension_<name>` options, e.g. Confluent Cloud's
        /// `logicalCluster` and `identityPoolId`).
        extensions: BTreeMap<String, String>,
    },
}

/// A SASL mechanism with its credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslConfig {
    /// PLAIN.
    Plain {
        /// The user name (Confluent Cloud: the API key).
        username: String,
        /// The password (Confluent Cloud: the API secret).
        password: Secret,
    },
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    Scram {
        /// Which hash.
        mechanism: ScramMechanism,
        /// The user name.
        username: String,
        /// The password.
        password: Secret,
    },
    /// OAUTHBEARER.
    OAuthBearer(OAuthBearerConfig),
}

impl SaslConfig {
    /// The mechanism.
    pub fn mechanism(&self) -> SaslMechanism {
        match self {
            SaslConfig::Plain { .. } => SaslMechanism::Plain,
            SaslConfig::Scram { mechanism: ScramMechanism::Sha256, .. } => SaslMechanism::ScramSha256,
            SaslConfig::Scram { mechanism: ScramMechanism::Sha512, .. } => SaslMechanism::ScramSha512,
            SaslConfig::OAuthBearer(_) => SaslMechanism::OAuthBearer,
        }
    }
}

/// How connections are secured: the protocol and, for `SASL_*`, the SASL settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityConfig {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// Present exactly when the protocol uses SASL.
    pub sasl: Option<SaslConfig>,
    /// Present exactly when the protocol uses TLS.
    pub tls: Option<TlsConfig>,
}

impl SecurityConfig {
    /// Reads the security settings. Errors name the key and say what to write; they never
    /// show a password, secret or token. Whether this build can use them is
    /// [`check_supported`](Self::check_supported)'s question.
    pub fn from_properties(p: &Properties) -> Result<SecurityConfig> {
        let protocol = match p.get("security.protocol") {
            Some(v) => SecurityProtocol::parse(v)?,
            None => SecurityProtocol::Plaintext,
        };
        let tls = if protocol.uses_tls() {
            Some(TlsConfig::from_properties(p)?)
        } else {
            TlsConfig::ignore_keys(p);
            None
        };
        // Understood whether used or not (see SASL_KEYS).
        for key in SASL_KEYS {
            let _ = p.get(key);
        }
        if !protocol.uses_sasl() {
            return Ok(SecurityConfig { protocol, sasl: None, tls });
        }
        let mechanism = mechanism(p, protocol)?;
        login_callback_class(p, mechanism)?;
        let jaas = p.get("sasl.jaas.config").map(JaasConfig::parse).transpose()?;
        if let Some(jaas) = &jaas {
            if jaas.module != mechanism.login_module() {
                return Err(Error::config(
                    "sasl.jaas.config",
                    format!(
                        "sasl.mechanism={} needs {}, but sasl.jaas.config names {}: make the two agree",
                        mechanism.name(),
                        mechanism.login_module().class_name(),
                        jaas.module.class_name()
                    ),
                ));
            }
        }
        let sasl = match mechanism {
            SaslMechanism::Plain => {
                let (username, password) = user_and_password(p, jaas.as_ref(), mechanism)?;
                if username.contains('\0') || password.expose().contains('\0') {
                    return Err(Error::config(
                        "sasl.jaas.config",
                        "PLAIN user names and passwords cannot contain a NUL character",
                    ));
                }
                SaslConfig::Plain { username, password }
            }
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                if jaas.as_ref().and_then(|j| j.option("tokenauth")).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
                    return Err(Error::config(
                        "sasl.jaas.config",
                        "tokenauth=true (delegation tokens) is not supported; use a SCRAM user",
                    ));
                }
                let (username, password) = user_and_password(p, jaas.as_ref(), mechanism)?;
                let scram = if mechanism == SaslMechanism::ScramSha256 {
                    ScramMechanism::Sha256
                } else {
                    ScramMechanism::Sha512
                };
                SaslConfig::Scram { mechanism: scram, username, password }
            }
            SaslMechanism::OAuthBearer => SaslConfig::OAuthBearer(oauthbearer(p, jaas.as_ref())?),
        };
        Ok(SecurityConfig { protocol, sasl: Some(sasl), tls })
    }

    /// Fails when this build cannot do what the settings ask (TLS without the `tls` feature)
    /// or they contradict each other (a SASL protocol without SASL settings).
    pub fn check_supported(&self) -> Result<()> {
        if self.protocol.uses_tls() && !cfg!(feature = "tls") {
            return Err(Error::config(
                "security.protocol",
                format!(
                    "{} needs TLS, which this build of kafka-share leaves out: enable its `tls` cargo feature \
                     (kafka-share = {{ version = \"...\", features = [\"tls\"] }})",
                    self.protocol.name()
                ),
            ));
        }
        if self.protocol.uses_sasl() != self.sasl.is_some() {
            return Err(Error::config(
                "sasl.mechanism",
                format!("security.protocol={} and the SASL settings disagree", self.protocol.name()),
            ));
        }
        Ok(())
    }
}

/// Java names its OIDC login with a callback class; that one is built in here, any other
/// class cannot be loaded.
fn login_callback_class(p: &Properties, mechanism: SaslMechanism) -> Result<()> {
    let Some(class) = p.get("sasl.login.callback.handler.class").map(str::trim) else { return Ok(()) };
    if mechanism == SaslMechanism::OAuthBearer && class.ends_with(".OAuthBearerLoginCallbackHandler") {
        return Ok(());
    }
    Err(Error::config(
        "sasl.login.callback.handler.class",
        format!(
            "{class} is a Java class and cannot run here: for OIDC use sasl.oauthbearer.token.endpoint.url with \
             clientId/clientSecret (feature `oidc`), for anything else pass tokens with \
             ClusterConfig::with_oauth_token_provider"
        ),
    ))
}

fn mechanism(p: &Properties, protocol: SecurityProtocol) -> Result<SaslMechanism> {
    let java = p.get("sasl.mechanism").map(|v| SaslMechanism::parse("sasl.mechanism", v)).transpose()?;
    let librdkafka = p.get("sasl.mechanisms").map(|v| SaslMechanism::parse("sasl.mechanisms", v)).transpose()?;
    match (java, librdkafka) {
        (Some(a), Some(b)) if a != b => Err(Error::config(
            "sasl.mechanism",
            format!("sasl.mechanism={} and sasl.mechanisms={} disagree: keep one", a.name(), b.name()),
        )),
        (Some(m), _) | (None, Some(m)) => Ok(m),
        (None, None) => Err(Error::config(
            "sasl.mechanism",
            format!(
                "required with security.protocol={}: set PLAIN (Confluent Cloud API keys), SCRAM-SHA-256, \
                 SCRAM-SHA-512 or OAUTHBEARER (the Java default, GSSAPI, is Kerberos, which is not supported)",
                protocol.name()
            ),
        )),
    }
}

/// User name and password from `sasl.jaas.config` or from `sasl.username` / `sasl.password`,
/// not both (two sources that may disagree would make a wrong password hard to find).
fn user_and_password(p: &Properties, jaas: Option<&JaasConfig>, mechanism: SaslMechanism) -> Result<(String, Secret)> {
    let user = p.get("sasl.username");
    let password = p.get("sasl.password");
    if let Some(jaas) = jaas {
        if user.is_some() || password.is_some() {
            return Err(Error::config(
                "sasl.username",
                "set the credentials once: either sasl.jaas.config (Java) or sasl.username and sasl.password \
                 (librdkafka), not both",
            ));
        }
        let missing = |option: &str| {
            Error::config(
                "sasl.jaas.config",
                format!(
                    "option {option} is missing: write {} required username=\"...\" password=\"...\";",
                    jaas.module.class_name()
                ),
            )
        };
        let user = jaas.option("username").ok_or_else(|| missing("username"))?;
        let password = jaas.option("password").ok_or_else(|| missing("password"))?;
        return non_empty_user(user.to_string(), "sasl.jaas.config").map(|u| (u, Secret::new(password)));
    }
    match (user, password) {
        (Some(u), Some(pw)) => non_empty_user(u.to_string(), "sasl.username").map(|u| (u, Secret::new(pw))),
        (Some(_), None) => Err(Error::config("sasl.password", "is missing (sasl.username is set)")),
        (None, Some(_)) => Err(Error::config("sasl.username", "is missing (sasl.password is set)")),
        (None, None) => Err(Error::config(
            "sasl.jaas.config",
            format!(
                "sasl.mechanism={} needs credentials: set sasl.jaas.config={} required username=\"...\" \
                 password=\"...\"; or sasl.username and sasl.password",
                mechanism.name(),
                mechanism.login_module().class_name()
            ),
        )),
    }
}

fn non_empty_user(user: String, key: &str) -> Result<String> {
    if user.is_empty() {
        return Err(Error::config(key, "the user name is empty"));
    }
    Ok(user)
}

fn oauthbearer(p: &Properties, jaas: Option<&JaasConfig>) -> Result<OAuthBearerConfig> {
    let token = p.get("sasl.oauthbearer.token");
    let method = p.get("sasl.oauthbearer.method").map(|m| m.trim().to_ascii_lowercase());
    let endpoint = p.get("sasl.oauthbearer.token.endpoint.url");
    let extensions = extensions(p, jaas)?;
    let jaas_option = |name: &str| jaas.and_then(|j| j.option(name));
    if let Some(m) = &method {
        if m != "oidc" && m != "default" {
            return Err(Error::config("sasl.oauthbearer.method", "use default or oidc"));
        }
    }
    if let Some(token) = token {
        if endpoint.is_some() {
            return Err(Error::config(
                "sasl.oauthbearer.token",
                "set either a static token or sasl.oauthbearer.token.endpoint.url, not both",
            ));
        }
        let token = Secret::new(token.trim());
        super::oauthbearer::validate_token(&token)
            .map_err(|e| Error::config("sasl.oauthbearer.token", e.to_string()))?;
        return Ok(OAuthBearerConfig::StaticToken { token, extensions });
    }
    if let Some(url) = endpoint {
        let url = url.trim();
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(Error::config(
                "sasl.oauthbearer.token.endpoint.url",
                "must be an http:// or https:// URL of the identity provider's token endpoint",
            ));
        }
        let client_id = jaas_option("clientId").or(p.get("sasl.oauthbearer.client.id"));
        let client_secret = jaas_option("clientSecret").or(p.get("sasl.oauthbearer.client.secret"));
        let scope = jaas_option("scope").or(p.get("sasl.oauthbearer.scope")).map(str::to_string);
        let (Some(client_id), Some(client_secret)) = (client_id, client_secret) else {
            return Err(Error::config(
                "sasl.jaas.config",
                "OIDC client credentials need clientId=\"...\" and clientSecret=\"...\" in sasl.jaas.config \
                 (or sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret)",
            ));
        };
        return Ok(OAuthBearerConfig::ClientCredentials {
            token_endpoint_url: url.to_string(),
            client_id: client_id.to_string(),
            client_secret: Secret::new(client_secret),
            scope,
            extensions,
        });
    }
    if method.as_deref() == Some("oidc") {
        return Err(Error::config(
            "sasl.oauthbearer.token.endpoint.url",
            "is required with sasl.oauthbearer.method=oidc",
        ));
    }
    if let Some(subject) = jaas_option("unsecuredLoginStringClaim_sub") {
        let lifetime_secs = match jaas_option("unsecuredLoginLifetimeSeconds") {
            None => DEFAULT_LIFETIME_SECS,
            Some(v) => v.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::config("sasl.jaas.config", "unsecuredLoginLifetimeSeconds must be a positive whole number")
            })?,
        };
        return Ok(OAuthBearerConfig::Unsecured { subject: subject.to_string(), lifetime_secs, extensions });
    }
    Err(Error::config(
        "sasl.jaas.config",
        "OAUTHBEARER needs a token source: sasl.oauthbearer.token (a static token), \
         sasl.oauthbearer.token.endpoint.url with clientId and clientSecret (OIDC), or, for a test broker with \
         the unsecured validator, OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"user\";",
    ))
}

/// SASL extensions from `extension_<name>` and `unsecuredLoginExtension_<name>` options
/// (Java) and `sasl.oauthbearer.extensions=name=value,...` (librdkafka), each checked as
/// Kafka checks them.
fn extensions(p: &Properties, jaas: Option<&JaasConfig>) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut add = |key: &str, name: &str, value: &str| -> Result<()> {
        validate_extension(name, value).map_err(|e| Error::config(key, e.to_string()))?;
        if out.insert(name.to_string(), value.to_string()).is_some() {
            return Err(Error::config(key, format!("SASL extension {name:?} is given twice")));
        }
        Ok(())
    };
    if let Some(jaas) = jaas {
        for prefix in ["extension_", "unsecuredLoginExtension_"] {
            for (name, value) in jaas.options_with_prefix(prefix) {
                add("sasl.jaas.config", name, value)?;
            }
        }
    }
    if let Some(list) = p.get("sasl.oauthbearer.extensions") {
        for pair in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((name, value)) = pair.split_once('=') else {
                return Err(Error::config("sasl.oauthbearer.extensions", "expected name=value,name2=value2"));
            };
            add("sasl.oauthbearer.extensions", name.trim(), value.trim())?;
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
