//! SASL on a fresh connection (SaslHandshake v1, then SaslAuthenticate rounds, right after
//! ApiVersions) and re-authentication on the same connection before the broker's session
//! lifetime ends (KIP-368).
//!
//! Why re-authenticate instead of reconnecting: a share session lives on its connection. A
//! new connection would start a new share session, and the records acquired under the old one
//! would go back to the group and be delivered again, with a higher delivery count.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use rand::Rng;

use crate::protocol::api::ApiRequest;
use tracing::{debug, warn};

use super::versions::ApiVersions;
use super::NetworkStats;
use crate::connection::{Connection, WeakConnection};
use crate::error::{Error, Result};
use crate::security::authenticator::{authenticate_error, handshake_error, Authenticator, Step};
use crate::security::{OAuthBearerConfig, SaslConfig, TokenSource};

/// SaslHandshake v1: the broker then expects SaslAuthenticate requests (v0 sent raw tokens).
const HANDSHAKE_VERSION: i16 = 1;
/// SaslAuthenticate v1+ carries the session lifetime; v2 is flexible.
const AUTHENTICATE_VERSIONS: (i16, i16) = (1, 2);

/// What a connection needs to log in, shared by every connection of a cluster.
#[derive(Debug)]
pub struct SaslLogin {
    config: SaslConfig,
    tokens: Option<TokenSource>,
    stats: Arc<NetworkStats>,
}

impl SaslLogin {
    /// A login with `config`; `tokens` supplies OAUTHBEARER tokens when they come from a
    /// callback or an identity provider.
    pub fn new(config: SaslConfig, tokens: Option<TokenSource>, stats: Arc<NetworkStats>) -> SaslLogin {
        SaslLogin { config, tokens, stats }
    }

    /// An authenticator for one exchange, with a fresh token where tokens expire.
    async fn authenticator(&self) -> Result<Authenticator> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        match &self.tokens {
            Some(source) => {
                let token = source.token().await?;
                let config = SaslConfig::OAuthBearer(OAuthBearerConfig::StaticToken {
                    token: token.token,
                    extensions: token.extensions,
                });
                Authenticator::new(&config, None, now)
            }
            None => Authenticator::new(&self.config, None, now),
        }
    }
}

/// Logs in on a fresh connection and, when the broker gives the session a lifetime, keeps
/// it alive by re-authenticating in the background.
pub async fn authenticate(
    conn: &Connection,
    versions: &Arc<ApiVersions>,
    login: &Arc<SaslLogin>,
    timeout: Duration,
) -> Result<()> {
    let lifetime = exchange(conn, versions, login, timeout).await?;
    login.stats.authentications.fetch_add(1, Ordering::Relaxed);
    if let Some(lifetime) = lifetime {
        tokio::spawn(keep_alive(conn.downgrade(), versions.clone(), login.clone(), lifetime, timeout));
    }
    Ok(())
}

/// One SASL exchange with the other requests of the connection paused. Returns the session
/// lifetime the broker gave, if any.
async fn exchange(
    conn: &Connection,
    versions: &ApiVersions,
    login: &SaslLogin,
    timeout: Duration,
) -> Result<Option<Duration>> {
    let mut auth = login.authenticator().await?;
    let mechanism = auth.mechanism();
    versions.pick(SaslHandshakeRequest::KEY, HANDSHAKE_VERSION, HANDSHAKE_VERSION).map_err(|_| {
        crate::security::auth_failed(mechanism.name(), "the broker does not support SaslHandshake v1 (Kafka 1.0+)")
    })?;
    let auth_version = versions.pick(SaslAuthenticateRequest::KEY, AUTHENTICATE_VERSIONS.0, AUTHENTICATE_VERSIONS.1)?;
    let deadline = tokio::time::Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(tokio::time::Instant::now());

    let exclusive = conn.exclusive()?;
    let hs = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism.name()));
    let resp = exclusive.call_timeout(&hs, HANDSHAKE_VERSION, left()).await.map_err(Error::into_fatal_cause)?;
    if resp.error_code != 0 {
        let enabled: Vec<String> = resp.mechanisms.iter().map(|m| m.to_string()).collect();
        return Err(handshake_error(mechanism, resp.error_code, &enabled));
    }
    let mut out = auth.initial_response();
    loop {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(out.into());
        let resp = exclusive.call_timeout(&req, auth_version, left()).await.map_err(Error::into_fatal_cause)?;
        if resp.error_code != 0 {
            return Err(authenticate_error(mechanism, resp.error_code, resp.error_message.as_deref()));
        }
        let lifetime = (resp.session_lifetime_ms > 0).then(|| Duration::from_millis(resp.session_lifetime_ms as u64));
        match auth.handle(&resp.auth_bytes)? {
            Step::Send(next) => out = next,
            Step::Done => return Ok(lifetime),
            Step::SendThenFail { reply, error } => {
                // The protocol wants the client's answer; the broker then fails the exchange.
                let req = SaslAuthenticateRequest::default().with_auth_bytes(reply.into());
                let _ = exclusive.call_timeout(&req, auth_version, left()).await;
                return Err(error);
            }
        }
    }
}

/// Re-authenticates at a random 85-95% of each session lifetime, for as long as the
/// connection lives. A failed re-authentication closes the connection: the pool dials anew.
async fn keep_alive(
    conn: WeakConnection,
    versions: Arc<ApiVersions>,
    login: Arc<SaslLogin>,
    mut lifetime: Duration,
    timeout: Duration,
) {
    loop {
        let share = rand::thread_rng().gen_range(0.85..0.95);
        tokio::time::sleep(lifetime.mul_f64(share)).await;
        let Some(conn) = conn.upgrade() else { return };
        if conn.is_closed() {
            return;
        }
        match exchange(&conn, &versions, &login, timeout).await {
            Ok(next) => {
                login.stats.reauthentications.fetch_add(1, Ordering::Relaxed);
                debug!(addr = conn.addr(), ?next, "re-authenticated");
                match next {
                    Some(next) => lifetime = next,
                    None => return,
                }
            }
            Err(e) => {
                login.stats.failed_reauthentications.fetch_add(1, Ordering::Relaxed);
                warn!(addr = conn.addr(), error = %e, "re-authentication failed; closing the connection");
                conn.close(Some(e));
                return;
            }
        }
    }
}
