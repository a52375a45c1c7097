//! OAUTHBEARER tokens from the application (a callback) or an identity provider, cached and
//! refreshed before they expire.
//!
//! A token is fetched when a connection logs in or re-authenticates, not on a timer: the
//! broker's session lifetime (KIP-368) already bounds each login by the token's expiry, and
//! re-authentication asks for a fresh token once 80% of the cached one's life has passed.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;

use super::oauthbearer::{validate_extension, validate_token};
use super::{auth_failed, Secret};
use crate::error::Result;

/// An OAUTHBEARER token and what goes with it.
#[derive(Debug, Clone)]
pub struct OAuthToken {
    /// The token (a compact JWT, usually).
    pub token: Secret,
    /// When it expires, if known: the cache refreshes it after 80% of its life.
    pub expires_at: Option<SystemTime>,
    /// The principal it stands for, if known (for logs only).
    pub principal: Option<String>,
    /// SASL extensions sent with it (Confluent Cloud: `logicalCluster`, `identityPoolId`).
    pub extensions: BTreeMap<String, String>,
}

impl OAuthToken {
    /// A token with no known expiry, principal or extensions.
    pub fn new(token: impl Into<String>) -> OAuthToken {
        OAuthToken { token: Secret::new(token), expires_at: None, principal: None, extensions: BTreeMap::new() }
    }

    /// Sets when the token expires.
    pub fn expires_at(mut self, at: SystemTime) -> Self {
        self.expires_at = Some(at);
        self
    }

    /// Sets the principal (for logs).
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Adds a SASL extension.
    pub fn extension(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extensions.insert(key.into(), value.into());
        self
    }
}

/// Supplies OAUTHBEARER tokens. Any `Fn() -> impl Future<Output = Result<OAuthToken>>` is one.
pub trait TokenProvider: Send + Sync + 'static {
    /// A current token.
    fn token(&self) -> BoxFuture<'static, Result<OAuthToken>>;
}

impl<F, Fut> TokenProvider for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<OAuthToken>> + Send + 'static,
{
    fn token(&self) -> BoxFuture<'static, Result<OAuthToken>> {
        Box::pin(self())
    }
}

struct Cached {
    token: OAuthToken,
    refresh_at: Option<SystemTime>,
}

/// A [`TokenProvider`] with a cache, shared by every connection of a client.
#[derive(Clone)]
pub struct TokenSource {
    provider: Arc<dyn TokenProvider>,
    cache: Arc<tokio::sync::Mutex<Option<Cached>>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource").finish_non_exhaustive()
    }
}

impl TokenSource {
    /// A source backed by `provider`.
    pub fn new(provider: impl TokenProvider) -> TokenSource {
        TokenSource { provider: Arc::new(provider), cache: Arc::new(tokio::sync::Mutex::new(None)) }
    }

    /// The cached token while it is fresh (less than 80% of its life gone), else a new one.
    /// A token without an expiry is asked for anew each time (the provider may cache).
    pub async fn token(&self) -> Result<OAuthToken> {
        let mut cache = self.cache.lock().await;
        if let Some(c) = cache.as_ref() {
            if c.refresh_at.is_some_and(|at| SystemTime::now() < at) {
                return Ok(c.token.clone());
            }
        }
        let token = self.provider.token().await.map_err(|e| match e {
            e @ crate::error::Error::Authentication { .. } => e,
            e => auth_failed("OAUTHBEARER", format!("the token provider failed: {e}")),
        })?;
        validate_token(&token.token)
            .map_err(|e| auth_failed("OAUTHBEARER", format!("the token provider's token: {e}")))?;
        for (k, v) in &token.extensions {
            validate_extension(k, v).map_err(|e| auth_failed("OAUTHBEARER", format!("the token provider's {e}")))?;
        }
        let now = SystemTime::now();
        let refresh_at = token.expires_at.map(|exp| {
            let life = exp.duration_since(now).unwrap_or(Duration::ZERO);
            now + life.mul_f64(0.8)
        });
        *cache = Some(Cached { token: token.clone(), refresh_at });
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn caches_until_most_of_the_life_is_gone() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let source = TokenSource::new(move || {
            let n = c.fetch_add(1, Ordering::SeqCst);
            async move { Ok(OAuthToken::new(format!("a.b{n}.c")).expires_at(SystemTime::now() + Duration::from_secs(3600))) }
        });
        assert_eq!(source.token().await.unwrap().token.expose(), "a.b0.c");
        assert_eq!(source.token().await.unwrap().token.expose(), "a.b0.c");
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        // An already expired token is fetched again every time.
        let expired = TokenSource::new(|| async { Ok(OAuthToken::new("a.b.c").expires_at(SystemTime::UNIX_EPOCH)) });
        expired.token().await.unwrap();
        expired.token().await.unwrap();
    }

    #[tokio::test]
    async fn provider_errors_and_bad_tokens_are_authentication_errors() {
        let failing = TokenSource::new(|| async {
            Err(crate::error::Error::Timeout { what: "idp down".into(), after: std::time::Duration::from_secs(1) })
        });
        let e = failing.token().await.unwrap_err();
        assert!(matches!(e, crate::error::Error::Authentication { .. }) && e.to_string().contains("idp down"), "{e}");
        let bad = TokenSource::new(|| async { Ok(OAuthToken::new("has space")) });
        assert!(matches!(bad.token().await.unwrap_err(), crate::error::Error::Authentication { .. }));
        let bad_ext = TokenSource::new(|| async { Ok(OAuthToken::new("a.b.c").extension("auth", "x")) });
        assert!(bad_ext.token().await.is_err(), "the reserved extension name auth");
    }
}
