//! Security settings, SASL mechanisms and TLS configuration.
//!
//! The SASL mechanisms are sans-IO (no sockets, no clock): `cluster/sasl.rs` drives them
//! right after ApiVersions (SaslHandshake v1, then one SaslAuthenticate per message), and
//! again to re-authenticate. The rustls side is `tls_client` (feature `tls`).
//!
//! - [`SecurityConfig`]: `security.protocol`, `sasl.mechanism` and the credentials, read from
//!   Java / Confluent names (`sasl.jaas.config`) or librdkafka names (`sasl.username`).
//! - [`jaas`]: the `sasl.jaas.config` parser.
//! - [`plain`], [`scram`], [`oauthbearer`]: the client side of each mechanism, and
//!   [`Authenticator`], which drives any of them through SaslAuthenticate round trips.
//! - [`TlsConfig`]: the `ssl.*` settings; [`TokenSource`]: OAUTHBEARER tokens from a callback
//!   or (feature `oidc`) an identity provider, cached.
//! - [`Secret`]: passwords and tokens never appear in `Debug`, `Display` or error messages.
//!
//! Failed logins are [`Error::Authentication`] values (see [`auth_failed`]).

pub mod authenticator;
pub mod config;
pub mod jaas;
pub mod oauthbearer;
#[cfg(feature = "oidc")]
pub mod oidc;
pub mod plain;
pub mod scram;
mod secret;
pub mod tls;
#[cfg(feature = "tls")]
pub mod tls_client;
pub mod token;
pub mod unsecured_jwt;

pub use authenticator::{Authenticator, Step};
pub use config::{OAuthBearerConfig, SaslConfig, SaslMechanism, SecurityConfig, SecurityProtocol};
pub use secret::Secret;
pub use tls::{ClientCert, TlsConfig, Trust};
pub use token::{OAuthToken, TokenProvider, TokenSource};

use crate::error::Error;

/// The error for a login the server refused or an exchange that went wrong. `message` must
/// never contain a secret. It is not retriable: retrying would not help.
pub fn auth_failed(mechanism: &str, message: impl std::fmt::Display) -> Error {
    Error::Authentication { mechanism: mechanism.to_string(), message: message.to_string() }
}
