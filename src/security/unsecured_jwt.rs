//! Unsecured JWTs (`"alg":"none"`, empty signature) as Kafka's
//! `OAuthBearerUnsecuredLoginCallbackHandler` makes them and the broker's unsecured
//! validator (`OAuthBearerUnsecuredJws`) accepts them. For tests and development only: anyone
//! can forge one, so a broker must never accept them in production.
//!
//! The clock is an argument (`issued_at_secs`), so tokens are reproducible and the module
//! stays sans-IO.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::Secret;
use crate::error::{Error, Result};

/// Kafka's default lifetime for an unsecured token (`unsecuredLoginLifetimeSeconds`).
pub const DEFAULT_LIFETIME_SECS: u64 = 3600;

/// Builds `base64url(header).base64url(claims).` with claims `sub`, `iat`, `exp` and, when
/// `scope` is not empty, `scope` (a list, as the broker's validator reads it).
pub fn unsecured_jwt(subject: &str, issued_at_secs: u64, lifetime_secs: u64, scope: &[String]) -> Result<Secret> {
    if subject.trim().is_empty() {
        return Err(Error::config("sasl.jaas.config", "unsecuredLoginStringClaim_sub must not be empty"));
    }
    if lifetime_secs == 0 {
        return Err(Error::config("sasl.jaas.config", "unsecuredLoginLifetimeSeconds must be at least 1"));
    }
    let expires = issued_at_secs.saturating_add(lifetime_secs);
    let mut claims = serde_json::json!({ "sub": subject, "iat": issued_at_secs, "exp": expires });
    if !scope.is_empty() {
        claims["scope"] = serde_json::json!(scope);
    }
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    Ok(Secret::new(format!("{header}.{payload}.")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(part: &str) -> serde_json::Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn header_claims_and_empty_signature() {
        let token = unsecured_jwt("alice", 1_700_000_000, 60, &["read".to_string()]).unwrap();
        let parts: Vec<&str> = token.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "", "unsecured JWS: empty signature");
        assert!(!token.expose().contains('='), "base64url without padding");
        assert_eq!(decode(parts[0]), serde_json::json!({"alg": "none"}));
        let claims = decode(parts[1]);
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["iat"], 1_700_000_000u64);
        assert_eq!(claims["exp"], 1_700_000_060u64);
        assert_eq!(claims["scope"], serde_json::json!(["read"]));
        // The token passes the OAUTHBEARER framing check.
        super::super::oauthbearer::validate_token(&token).unwrap();
    }

    #[test]
    fn quotes_in_subjects_are_escaped_and_bad_input_refused() {
        let token = unsecured_jwt("a\"b", 0, 1, &[]).unwrap();
        let claims = decode(token.expose().split('.').nth(1).unwrap());
        assert_eq!(claims["sub"], "a\"b");
        assert!(claims.get("scope").is_none());
        assert!(unsecured_jwt(" ", 0, 1, &[]).is_err());
        assert!(unsecured_jwt("a", 0, 0, &[]).is_err());
    }
}
