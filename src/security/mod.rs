//! Security settings: what a client is configured with to use TLS and SASL.
//!
//! - [`SecurityConfig`]: `security.protocol` ([`SecurityProtocol`]), the SASL mechanism with
//!   its credentials ([`SaslConfig`], [`SaslMechanism`], [`ScramMechanism`],
//!   [`OAuthBearerConfig`]) and the TLS settings ([`TlsConfig`], [`Trust`], [`ClientCert`]),
//!   read from Java / Confluent names (`sasl.jaas.config`) or librdkafka names
//!   (`sasl.username`) by [`SecurityConfig::from_properties`].
//! - [`TokenProvider`] and [`OAuthToken`]: OAUTHBEARER tokens from the application
//!   (`ClusterConfig::with_oauth_token_provider`), cached by a [`TokenSource`]; with the
//!   `oidc` feature, client-credentials settings fetch them from an identity provider.
//! - [`Secret`]: passwords and tokens never appear in `Debug`, `Display` or error messages.
//!
//! TLS (`SSL`, `SASL_SSL`) needs the `tls` feature. Failed logins are
//! [`Error::Authentication`] values.
//!
//! Inside (not API): the SASL mechanisms are sans-IO (no sockets, no clock), driven by
//! `cluster/sasl.rs` right after ApiVersions (SaslHandshake v1, then one SaslAuthenticate per
//! message) and again to re-authenticate; `tls_client.rs` turns a [`TlsConfig`] into a rustls
//! client config. They are public only with the `unstable-internals` feature (fuzz targets
//! and wire tests), with no stability promise.

mod config;
mod secret;
mod tls;
mod token;

// The mechanisms and the rustls glue (see above).
internal_modules!(authenticator, jaas, oauthbearer, plain, scram, unsecured_jwt);
#[cfg(feature = "oidc")]
internal_modules!(oidc);
#[cfg(feature = "tls")]
internal_modules!(tls_client);

pub use config::{OAuthBearerConfig, SaslConfig, SaslMechanism, SecurityConfig, SecurityProtocol};
pub use scram::ScramMechanism;
pub use secret::Secret;
pub use tls::{ClientCert, TlsConfig, Trust};
pub use token::{OAuthToken, TokenProvider, TokenSource};

use crate::error::Error;

/// The error for a login the server refused or an exchange that went wrong. `message` must
/// never contain a secret. It is not retriable: retrying would not help.
pub(crate) fn auth_failed(mechanism: &str, message: impl std::fmt::Display) -> Error {
    Error::Authentication { mechanism: mechanism.to_string(), message: message.to_string() }
}
