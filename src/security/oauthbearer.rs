//! OAUTHBEARER (RFC 7628) as Kafka uses it: one client message carrying the token and
//! optional SASL extensions, then either success or a JSON error challenge.
//!
//! Client message: `n,,\x01auth=Bearer <token>\x01key=value\x01...\x01\x01`.
//!
//! A server that refuses the token does not fail the SaslAuthenticate at once: it answers
//! with a JSON error (`{"status":"invalid_token",...}`), the client must answer `\x01`, and
//! only then does the broker fail the login. [`handle_server_message`] makes that reply and
//! the failure one value, so the connection layer cannot take the challenge for success.

use std::collections::BTreeMap;

use super::{auth_failed, Secret};
use crate::error::{Error, Result};

const MECHANISM: &str = "OAUTHBEARER";
const SEP: u8 = 0x01;

/// A token or extension this client will not send: refused as the broker would refuse it.
fn refused(message: impl Into<String>) -> Error {
    Error::Authentication { mechanism: MECHANISM.to_string(), message: message.into() }
}

/// Checks a token as Kafka's broker parses it (`[-_~+/.a-zA-Z0-9]+=*`: a compact JWT or
/// another base64 token). The error does not show the token.
pub fn validate_token(token: &Secret) -> Result<()> {
    let t = token.expose();
    let body = t.trim_end_matches('=');
    if body.is_empty() {
        return Err(refused("the OAUTHBEARER token is empty".to_string()));
    }
    if !body.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_~+/.".contains(&b)) {
        return Err(refused(
            "the OAUTHBEARER token holds characters other than letters, digits, '-', '_', '~', '+', '/', '.' \
             and trailing '=': pass the token itself, without a `Bearer ` prefix, quotes or spaces"
                .to_string(),
        ));
    }
    Ok(())
}

/// Checks a SASL extension as Kafka's `OAuthBearerClientInitialResponse` does: the key is
/// letters only and not `auth`, the value printable ASCII, space, tab, CR or LF.
pub fn validate_extension(key: &str, value: &str) -> Result<()> {
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
        let shown = if key.len() <= 64 && key.bytes().all(|b| b.is_ascii_graphic()) { key } else { "(not shown)" };
        return Err(refused(format!(
            "OAUTHBEARER extension name {shown:?} is invalid: use letters only (e.g. logicalCluster)"
        )));
    }
    if key == "auth" {
        return Err(refused(
            "OAUTHBEARER extension name \"auth\" is reserved for the token".to_string(),
        ));
    }
    if value.is_empty() || !value.bytes().all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b)) {
        return Err(refused(format!(
            "the value of OAUTHBEARER extension {key:?} must be non-empty printable ASCII"
        )));
    }
    Ok(())
}

/// The client's initial (and only) message, extensions in key order.
pub fn initial_response(token: &Secret, extensions: &BTreeMap<String, String>) -> Result<Vec<u8>> {
    validate_token(token)?;
    let mut out = Vec::with_capacity(32 + token.expose().len());
    out.extend_from_slice(b"n,,");
    out.push(SEP);
    out.extend_from_slice(b"auth=Bearer ");
    out.extend_from_slice(token.expose().as_bytes());
    out.push(SEP);
    for (key, value) in extensions {
        validate_extension(key, value)?;
        out.extend_from_slice(key.as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(SEP);
    }
    out.push(SEP);
    Ok(out)
}

/// What to do with the server's answer to the initial response.
#[derive(Debug)]
pub enum ServerAnswer {
    /// Empty answer: the login succeeded.
    Success,
    /// An error challenge: send `reply` (`\x01`) in one more SaslAuthenticate, then report
    /// `error` whatever the broker answers. Never a success.
    Refused {
        /// The bytes to send back: `\x01`.
        reply: Vec<u8>,
        /// The failure, with the server's status and scope.
        error: Error,
    },
}

/// Reads the server's answer to the initial response.
pub fn handle_server_message(message: &[u8]) -> ServerAnswer {
    if message.is_empty() {
        return ServerAnswer::Success;
    }
    ServerAnswer::Refused { reply: vec![SEP], error: auth_failed(MECHANISM, describe_challenge(message)) }
}

/// The server's JSON error (RFC 7628 section 3.2.2) in words: status, scope, and what to do.
fn describe_challenge(message: &[u8]) -> String {
    let json: Option<serde_json::Value> = serde_json::from_slice(message).ok();
    let field = |name: &str| {
        json.as_ref()
            .and_then(|j| j.get(name))
            .and_then(|v| v.as_str())
            .map(|s| s.chars().take(200).filter(|c| !c.is_control()).collect::<String>())
    };
    match field("status") {
        Some(status) => {
            let scope = field("scope").map(|s| format!(", required scope {s:?}")).unwrap_or_default();
            format!(
                "the broker refused the token (status {status:?}{scope}); check that it is not expired and \
                 was issued for this cluster"
            )
        }
        None => {
            let text: String = String::from_utf8_lossy(message).chars().take(200).filter(|c| !c.is_control()).collect();
            format!("the broker refused the token with {text:?}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn message_framing() {
        let token = Secret::new("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.");
        let none = BTreeMap::new();
        assert_eq!(
            initial_response(&token, &none).unwrap(),
            b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.\x01\x01"
        );
        let ext = BTreeMap::from([
            ("logicalCluster".to_string(), "lkc-123".to_string()),
            ("identityPoolId".to_string(), "pool-4".to_string()),
        ]);
        assert_eq!(
            initial_response(&Secret::new("t"), &ext).unwrap(),
            b"n,,\x01auth=Bearer t\x01identityPoolId=pool-4\x01logicalCluster=lkc-123\x01\x01"
        );
    }

    #[test]
    fn extensions_and_tokens_are_validated() {
        let t = Secret::new("t");
        for (k, v) in [("auth", "x"), ("log_cluster", "x"), ("", "x"), ("k1", "x"), ("k", ""), ("k", "a\x01b")] {
            let ext = BTreeMap::from([(k.to_string(), v.to_string())]);
            assert!(matches!(initial_response(&t, &ext), Err(Error::Authentication { .. })), "{k:?}={v:?}");
        }
        let ext = BTreeMap::from([("k".to_string(), "a b\tc".to_string())]);
        assert!(initial_response(&t, &ext).is_ok());
        assert!(validate_token(&Secret::new("a-b_c~d+e/f.g==")).is_ok());
        for bad in ["", "=", "Bearer abc", "a\x01b", "tok\"en", "a=b"] {
            let e = initial_response(&Secret::new(bad), &BTreeMap::new()).unwrap_err();
            if bad.len() > 2 {
                assert!(!e.to_string().contains(bad), "the token leaked: {e}");
            }
        }
    }

    #[test]
    fn empty_answer_is_success() {
        assert!(matches!(handle_server_message(b""), ServerAnswer::Success));
    }

    #[test]
    fn json_error_challenge_is_answered_and_fails() {
        let challenge = br#"{"status":"invalid_token","scope":"kafka","openid-configuration":"https://x"}"#;
        let ServerAnswer::Refused { reply, error } = handle_server_message(challenge) else {
            panic!("an error challenge was taken for success");
        };
        assert_eq!(reply, b"\x01");
        let text = error.to_string();
        assert!(matches!(error, Error::Authentication { .. }), "{text}");
        assert!(text.contains("OAUTHBEARER authentication failed"), "{text}");
        assert!(text.contains("invalid_token") && text.contains("kafka"), "{text}");
        // Not JSON: still a refusal, with the text.
        let ServerAnswer::Refused { error, .. } = handle_server_message(b"nope\x00\xff") else { panic!() };
        assert!(error.to_string().contains("nope"), "{error}");
    }

    proptest! {
        #[test]
        fn any_server_answer_is_handled(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            match handle_server_message(&bytes) {
                ServerAnswer::Success => prop_assert!(bytes.is_empty()),
                ServerAnswer::Refused { reply, .. } => prop_assert_eq!(reply, vec![1u8]),
            }
        }
    }
}
