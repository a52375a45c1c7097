//! OAUTHBEARER tokens from an OIDC identity provider with the client-credentials grant
//! (`sasl.oauthbearer.token.endpoint.url`, client id and secret, optional scope), as Java's
//! OAuthBearerLoginCallbackHandler and librdkafka's `sasl.oauthbearer.method=oidc` fetch them.
//! Feature `oidc`. The [`TokenSource`] cache refreshes a token after 80% of its life.

use std::time::{Duration, SystemTime};

use super::config::{OAuthBearerConfig, SaslConfig};
use super::tls::TlsConfig;
use super::token::{OAuthToken, TokenSource};
use super::{auth_failed, Secret};
use crate::error::{Error, Result};

/// How long one token request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A token source for `sasl` (which must be OAUTHBEARER with client credentials). HTTPS
/// endpoints are verified against the bundled public roots (and `SSL_CERT_FILE`).
pub fn token_source(sasl: &SaslConfig) -> Result<TokenSource> {
    let SaslConfig::OAuthBearer(OAuthBearerConfig::ClientCredentials {
        token_endpoint_url,
        client_id,
        client_secret,
        scope,
        extensions,
    }) = sasl
    else {
        return Err(Error::config(
            "sasl.oauthbearer.token.endpoint.url",
            "an OIDC token source needs OAUTHBEARER client credentials (client id and secret)",
        ));
    };
    let tls = super::tls_client::client_config(&TlsConfig::default())?;
    let client = reqwest::Client::builder()
        .use_preconfigured_tls((*tls).clone())
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| Error::config("sasl.oauthbearer.token.endpoint.url", format!("HTTP client setup failed: {e}")))?;
    let request = TokenRequest {
        client,
        url: token_endpoint_url.clone(),
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scope: scope.clone(),
        extensions: extensions.clone(),
    };
    Ok(TokenSource::new(move || {
        let request = request.clone();
        async move { request.fetch().await }
    }))
}

#[derive(Clone)]
struct TokenRequest {
    client: reqwest::Client,
    url: String,
    client_id: String,
    client_secret: Secret,
    scope: Option<String>,
    extensions: std::collections::BTreeMap<String, String>,
}

impl TokenRequest {
    async fn fetch(&self) -> Result<OAuthToken> {
        let fail = |what: String| auth_failed("OAUTHBEARER", format!("token endpoint {}: {what}", self.url));
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope.as_str()));
        }
        let resp = self
            .client
            .post(&self.url)
            .basic_auth(&self.client_id, Some(self.client_secret.expose()))
            .form(&form)
            .send()
            .await
            // reqwest's error names the URL, never the request's credentials.
            .map_err(|e| fail(format!("request failed: {e}")))?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| fail(format!("reading the answer failed: {e}")))?;
        if !status.is_success() {
            let said: String = body.chars().take(300).filter(|c| !c.is_control()).collect();
            return Err(fail(format!(
                "the identity provider answered {status}: {said:?}; check the client id, secret and scope"
            )));
        }
        parse_token(&body, &self.extensions).map_err(fail)
    }
}

/// Reads `access_token` and `expires_in` from a token endpoint's JSON answer.
fn parse_token(
    body: &str,
    extensions: &std::collections::BTreeMap<String, String>,
) -> std::result::Result<OAuthToken, String> {
    let json: serde_json::Value = serde_json::from_str(body).map_err(|_| "the answer is not JSON".to_string())?;
    let token = json
        .get("access_token")
        .and_then(|t| t.as_str())
        .ok_or_else(|| "the answer has no access_token".to_string())?;
    let mut out = OAuthToken::new(token);
    if let Some(secs) = json.get("expires_in").and_then(|e| e.as_u64()) {
        out.expires_at = Some(SystemTime::now() + Duration::from_secs(secs));
    }
    out.extensions = extensions.clone();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-shot HTTP server: answers the first request with `status` and `body`, and hands
    /// back the request it got.
    async fn serve_once(status: &'static str, body: &'static str) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            // Read the headers, then the body its Content-Length announces.
            loop {
                let n = s.read(&mut buf).await.unwrap();
                req.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&req).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
                        })
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    if req.len() >= end + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let answer = format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
            s.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&req).to_string()
        });
        (url, task)
    }

    fn config(url: &str) -> SaslConfig {
        SaslConfig::OAuthBearer(OAuthBearerConfig::ClientCredentials {
            token_endpoint_url: url.to_string(),
            client_id: "my-client".into(),
            client_secret: Secret::new("my-secret"),
            scope: Some("kafka".into()),
            extensions: BTreeMap::from([("logicalCluster".into(), "lkc-1".into())]),
        })
    }

    #[tokio::test]
    async fn fetches_a_token_with_client_credentials() {
        let (url, server) =
            serve_once("200 OK", r#"{"access_token":"aaa.bbb.ccc","token_type":"bearer","expires_in":3600}"#).await;
        let token = token_source(&config(&url)).unwrap().token().await.unwrap();
        assert_eq!(token.token.expose(), "aaa.bbb.ccc");
        assert!(token.expires_at.is_some());
        assert_eq!(token.extensions.get("logicalCluster").map(String::as_str), Some("lkc-1"));
        let request = server.await.unwrap();
        assert!(request.starts_with("POST /token"), "{request}");
        // Basic auth of my-client:my-secret, and the grant in the form body.
        assert!(request.contains("Basic bXktY2xpZW50Om15LXNlY3JldA=="), "{request}");
        assert!(request.contains("grant_type=client_credentials&scope=kafka"), "{request}");
    }

    #[tokio::test]
    async fn a_refusal_is_an_authentication_error_without_the_secret() {
        let (url, _server) = serve_once("401 Unauthorized", r#"{"error":"invalid_client"}"#).await;
        let e = token_source(&config(&url)).unwrap().token().await.unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(matches!(e, Error::Authentication { .. }), "{text}");
        assert!(text.contains("401") && text.contains("invalid_client"), "{text}");
        assert!(!text.contains("my-secret"), "{text}");
    }

    #[test]
    fn answers_without_a_token_are_explained() {
        assert!(parse_token("nope", &BTreeMap::new()).unwrap_err().contains("not JSON"));
        assert!(parse_token("{}", &BTreeMap::new()).unwrap_err().contains("access_token"));
    }
}
