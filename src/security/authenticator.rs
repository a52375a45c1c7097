//! One sans-IO driver for every mechanism, the shape the connection layer needs: after
//! SaslHandshake v1 names [`Authenticator::mechanism`], send
//! [`Authenticator::initial_response`] in a SaslAuthenticate request, feed each response's
//! `auth_bytes` to [`Authenticator::handle`], and do what the [`Step`] says.
//!
//! Broker error codes on SaslHandshake / SaslAuthenticate become errors through
//! [`handshake_error`] and [`authenticate_error`]: none of them is retriable.

use std::collections::BTreeMap;

use super::config::{OAuthBearerConfig, SaslConfig, SaslMechanism};
use super::oauthbearer::{self, ServerAnswer};
use super::scram::ScramClient;
use super::unsecured_jwt::unsecured_jwt;
use super::{auth_failed, plain, Secret};
use crate::error::{Error, ErrorCode, Result};

/// What to do after a server message.
#[derive(Debug)]
pub enum Step {
    /// Send these bytes in the next SaslAuthenticate request.
    Send(Vec<u8>),
    /// Authenticated: the connection may carry other requests now.
    Done,
    /// Send `reply` in one more SaslAuthenticate (the protocol requires it), then fail the
    /// connection with `error` whatever the answer is.
    SendThenFail {
        /// The bytes to send.
        reply: Vec<u8>,
        /// The failure to report.
        error: Error,
    },
}

enum Stage {
    Plain { message: Vec<u8> },
    Scram { client: Box<ScramClient>, round: u8 },
    OAuthBearer { message: Vec<u8> },
}

/// The client side of one SASL exchange on one connection (a re-authentication is a new
/// `Authenticator`).
pub struct Authenticator {
    mechanism: SaslMechanism,
    stage: Stage,
    finished: bool,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("mechanism", &self.mechanism).finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Prepares an exchange. `token` is the OAUTHBEARER token for the OIDC and callback
    /// sources (fetched by the caller; required for [`OAuthBearerConfig::ClientCredentials`]);
    /// `now_unix_secs` dates an unsecured token.
    pub fn new(config: &SaslConfig, token: Option<&Secret>, now_unix_secs: u64) -> Result<Authenticator> {
        let mechanism = config.mechanism();
        let stage = match config {
            SaslConfig::Plain { username, password } => {
                Stage::Plain { message: plain::initial_response(username, password) }
            }
            SaslConfig::Scram { mechanism, username, password } => {
                Stage::Scram { client: Box::new(ScramClient::new(*mechanism, username, password.clone())), round: 0 }
            }
            SaslConfig::OAuthBearer(source) => {
                let (token, extensions): (Secret, &BTreeMap<String, String>) = match (source, token) {
                    (_, Some(t)) => (t.clone(), extensions_of(source)),
                    (OAuthBearerConfig::StaticToken { token, extensions }, None) => (token.clone(), extensions),
                    (OAuthBearerConfig::Unsecured { subject, lifetime_secs, extensions }, None) => {
                        (unsecured_jwt(subject, now_unix_secs, *lifetime_secs, &[])?, extensions)
                    }
                    (OAuthBearerConfig::ClientCredentials { .. }, None) => {
                        return Err(Error::config(
                            "sasl.oauthbearer.token.endpoint.url",
                            "OAUTHBEARER with a token endpoint needs the `oidc` feature (or a token provider)",
                        ))
                    }
                };
                Stage::OAuthBearer { message: oauthbearer::initial_response(&token, extensions)? }
            }
        };
        Ok(Authenticator { mechanism, stage, finished: false })
    }

    /// The mechanism to name in SaslHandshake.
    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    /// The first SaslAuthenticate payload.
    pub fn initial_response(&mut self) -> Vec<u8> {
        match &mut self.stage {
            Stage::Plain { message } | Stage::OAuthBearer { message } => message.clone(),
            Stage::Scram { client, round } => {
                *round = 1;
                client.client_first()
            }
        }
    }

    /// Takes the `auth_bytes` of a SaslAuthenticate response whose error code was 0.
    pub fn handle(&mut self, server: &[u8]) -> Result<Step> {
        if self.finished {
            return Err(auth_failed(self.mechanism.name(), "a server message arrived after the exchange ended"));
        }
        let step = match &mut self.stage {
            // PLAIN has one round: the broker's answer carries nothing.
            Stage::Plain { .. } => Step::Done,
            Stage::Scram { client, round } => match round {
                1 => {
                    *round = 2;
                    return client.handle_server_first(server).map(Step::Send);
                }
                _ => {
                    client.handle_server_final(server)?;
                    Step::Done
                }
            },
            Stage::OAuthBearer { .. } => match oauthbearer::handle_server_message(server) {
                ServerAnswer::Success => Step::Done,
                ServerAnswer::Refused { reply, error } => Step::SendThenFail { reply, error },
            },
        };
        self.finished = true;
        Ok(step)
    }
}

fn extensions_of(source: &OAuthBearerConfig) -> &BTreeMap<String, String> {
    match source {
        OAuthBearerConfig::StaticToken { extensions, .. }
        | OAuthBearerConfig::Unsecured { extensions, .. }
        | OAuthBearerConfig::ClientCredentials { extensions, .. } => extensions,
    }
}

/// The error for a SaslHandshake response with a non-zero code. `enabled` is the broker's
/// list of mechanisms from the response.
pub fn handshake_error(mechanism: SaslMechanism, code: i16, enabled: &[String]) -> Error {
    let name = mechanism.name();
    match ErrorCode(code) {
        ErrorCode::UNSUPPORTED_SASL_MECHANISM => auth_failed(
            name,
            format!(
                "the listener does not enable {name} (it enables: {}); set sasl.mechanism to one of those, or \
                 connect to the listener that has {name}",
                if enabled.is_empty() { "none".to_string() } else { enabled.join(", ") }
            ),
        ),
        ErrorCode::ILLEGAL_SASL_STATE => {
            auth_failed(name, "the broker did not expect a SaslHandshake here (ILLEGAL_SASL_STATE)")
        }
        _ => auth_failed(name, format!("SaslHandshake failed with error code {code}")),
    }
}

/// The error for a SaslAuthenticate response with a non-zero code and the broker's message.
pub fn authenticate_error(mechanism: SaslMechanism, code: i16, message: Option<&str>) -> Error {
    let name = mechanism.name();
    let said = message
        .map(|m| format!(" (broker: {:?})", m.chars().take(300).filter(|c| !c.is_control()).collect::<String>()))
        .unwrap_or_default();
    match ErrorCode(code) {
        ErrorCode::SASL_AUTHENTICATION_FAILED => auth_failed(
            name,
            format!(
                "the broker refused the credentials{said}; check the user name and password (or token) and that \
                 the user exists for {name}"
            ),
        ),
        ErrorCode::ILLEGAL_SASL_STATE => auth_failed(name, format!("the broker's SASL state machine disagreed{said}")),
        _ => auth_failed(name, format!("SaslAuthenticate failed with error code {code}{said}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::ScramMechanism;

    #[test]
    fn plain_is_one_round() {
        let config = SaslConfig::Plain { username: "u".into(), password: Secret::new("p") };
        let mut a = Authenticator::new(&config, None, 0).unwrap();
        assert_eq!(a.mechanism().name(), "PLAIN");
        assert_eq!(a.initial_response(), b"\0u\0p");
        assert!(matches!(a.handle(b"").unwrap(), Step::Done));
        assert!(a.handle(b"").is_err());
    }

    #[test]
    fn scram_is_two_rounds_and_checks_the_server() {
        let config =
            SaslConfig::Scram { mechanism: ScramMechanism::Sha256, username: "u".into(), password: Secret::new("p") };
        let mut a = Authenticator::new(&config, None, 0).unwrap();
        let first = a.initial_response();
        assert!(first.starts_with(b"n,,n=u,r="));
        let nonce = std::str::from_utf8(&first[9..]).unwrap().to_string();
        let server_first = format!("r={nonce}srv,s=c2FsdA==,i=4096");
        assert!(matches!(a.handle(server_first.as_bytes()).unwrap(), Step::Send(m) if m.starts_with(b"c=biws,r=")));
        let e = a.handle(b"v=AAAA").unwrap_err();
        assert!(e.to_string().contains("signature"), "{e}");
    }

    #[test]
    fn oauthbearer_unsecured_token_and_error_challenge() {
        let config = SaslConfig::OAuthBearer(OAuthBearerConfig::Unsecured {
            subject: "alice".into(),
            lifetime_secs: 60,
            extensions: BTreeMap::from([("traceId".into(), "t".into())]),
        });
        let mut a = Authenticator::new(&config, None, 1_700_000_000).unwrap();
        let first = a.initial_response();
        assert!(first.starts_with(b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0."), "{first:?}");
        assert!(first.ends_with(b".\x01traceId=t\x01\x01"), "{first:?}");
        let step = a.handle(br#"{"status":"invalid_token"}"#).unwrap();
        assert!(matches!(step, Step::SendThenFail { ref reply, .. } if reply == b"\x01"), "{step:?}");

        let mut a = Authenticator::new(&config, None, 1_700_000_000).unwrap();
        a.initial_response();
        assert!(matches!(a.handle(b"").unwrap(), Step::Done));
    }

    #[test]
    fn oidc_needs_a_fetched_token() {
        let config = SaslConfig::OAuthBearer(OAuthBearerConfig::ClientCredentials {
            token_endpoint_url: "https://idp/token".into(),
            client_id: "c".into(),
            client_secret: Secret::new("s"),
            scope: None,
            extensions: BTreeMap::new(),
        });
        assert!(matches!(Authenticator::new(&config, None, 0), Err(Error::Config { .. })));
        let mut a = Authenticator::new(&config, Some(&Secret::new("a.b.c")), 0).unwrap();
        assert_eq!(a.initial_response(), b"n,,\x01auth=Bearer a.b.c\x01\x01");
    }

    #[test]
    fn broker_error_codes_say_what_to_do() {
        let e = handshake_error(SaslMechanism::ScramSha512, 33, &["PLAIN".into(), "SCRAM-SHA-256".into()]);
        assert!(e.to_string().contains("does not enable SCRAM-SHA-512 (it enables: PLAIN, SCRAM-SHA-256)"), "{e}");
        let e =
            authenticate_error(SaslMechanism::Plain, 58, Some("Authentication failed: Invalid username or password"));
        assert!(e.to_string().contains("refused the credentials") && e.to_string().contains("Invalid username"), "{e}");
        assert!(authenticate_error(SaslMechanism::Plain, 34, None).to_string().contains("state"));
    }
}
