//! Security settings and SASL mechanisms (issue 10: TLS and SASL).
//!
//! **Not yet wired into connections**: every client still connects in PLAINTEXT. What is here
//! is sans-IO (no sockets, no clock), so that the connection layer can drive it right after
//! ApiVersions (SaslHandshake v1, then one SaslAuthenticate per message):
//!
//! - [`SecurityConfig`]: `security.protocol`, `sasl.mechanism` and the credentials, read from
//!   Java / Confluent names (`sasl.jaas.config`) or librdkafka names (`sasl.username`).
//! - [`jaas`]: the `sasl.jaas.config` parser.
//! - [`plain`], [`scram`], [`oauthbearer`]: the client side of each mechanism, and
//!   [`Authenticator`], which drives any of them through SaslAuthenticate round trips.
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
/// never contain a secret. (Stands in for a future `Error::Authentication { mechanism,
/// message }`: it is not retriable, and retrying would not help.)
pub fn auth_failed(mechanism: &str, message: impl std::fmt::Display) -> Error {
    Error::Authentication { mechanism: mechanism.to_string(), message: message.to_string() }
}
