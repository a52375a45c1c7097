//! The `http` sink task; its settings and behaviour are documented on [`HttpSink`], the one
//! public path (`kafka_share::sink::HttpSink`).

use std::time::Duration;

use base64::Engine as _;
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use serde_json::{json, Value};

use super::task::{RecordFailure, SinkError, SinkRecord, SinkTask, TaskConfig};

/// The URL setting.
pub(crate) const URL_CONFIG: &str = "http.url";
/// Batch (`true`) or per-record (`false`) requests.
pub(crate) const BATCH_CONFIG: &str = "http.batch";
/// Extra request headers.
pub(crate) const HEADERS_CONFIG: &str = "http.headers";
/// Request timeout in milliseconds.
pub(crate) const TIMEOUT_CONFIG: &str = "http.timeout.ms";
/// `utf8` or `base64`.
pub(crate) const ENCODING_CONFIG: &str = "http.encoding";

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How bytes become JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Base64,
}

/// The parsed settings.
#[derive(Debug, Clone)]
struct Settings {
    url: reqwest::Url,
    batch: bool,
    headers: HeaderMap,
    timeout: Duration,
    encoding: Encoding,
}

fn settings(config: &TaskConfig) -> Result<Settings, SinkError> {
    let raw = config.get(URL_CONFIG).map(|u| u.trim()).filter(|u| !u.is_empty()).ok_or_else(|| {
        SinkError::fatal("the http sink needs http.url, the address to POST records to (http://host:port/path)")
    })?;
    let url = reqwest::Url::parse(raw).map_err(|e| {
        SinkError::fatal(format!("http.url={raw:?} is not a URL ({e}): write it as http://host:port/path"))
    })?;
    match url.scheme() {
        "http" => {}
        "https" if cfg!(feature = "tls") => {}
        "https" => {
            return Err(SinkError::fatal(format!(
                "http.url={raw:?} is https, but this build has no TLS: build kafka-share with the `tls` feature, or use http://"
            )))
        }
        other => {
            return Err(SinkError::fatal(format!("http.url={raw:?}: scheme {other:?} is not supported; use http or https")))
        }
    }
    let batch = super::file::parse_bool(config, BATCH_CONFIG, true)?;
    let timeout = match config.get(TIMEOUT_CONFIG).map(|t| t.trim()) {
        None | Some("") => DEFAULT_TIMEOUT,
        Some(t) => match t.parse::<u64>() {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            _ => {
                return Err(SinkError::fatal(format!("http.timeout.ms={t:?}: give a positive number of milliseconds")))
            }
        },
    };
    let encoding = match config.get(ENCODING_CONFIG).map(|e| e.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("utf8") | Some("utf-8") => Encoding::Utf8,
        Some("base64") => Encoding::Base64,
        Some(other) => return Err(SinkError::fatal(format!("http.encoding={other:?}: use utf8 or base64"))),
    };
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for pair in config.get(HEADERS_CONFIG).map(String::as_str).unwrap_or("").split('|') {
        if pair.trim().is_empty() {
            continue;
        }
        let Some((name, value)) = pair.split_once(':') else {
            return Err(SinkError::fatal(format!(
                "http.headers: {pair:?} has no ':'; write Name:value pairs separated by |"
            )));
        };
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|e| SinkError::fatal(format!("http.headers: {:?} is not a header name ({e})", name.trim())))?;
        // The value is not echoed: it is often a credential.
        let value = HeaderValue::from_str(value.trim()).map_err(|_| {
            SinkError::fatal(format!("http.headers: the value of {name} has characters a header cannot carry"))
        })?;
        headers.append(name, value);
    }
    Ok(Settings { url, batch, headers, timeout, encoding })
}

/// A rustls config for reqwest, which is built without a crypto provider: ring, passed
/// explicitly. With the `tls` feature it trusts what the Kafka connections trust by default
/// (the bundled web PKI roots); without it there are no roots, and `settings` refused
/// https URLs already.
fn tls_config() -> Result<rustls::ClientConfig, SinkError> {
    #[cfg(feature = "tls")]
    {
        crate::security::tls_client::client_config(&crate::security::TlsConfig::default())
            .map(|c| (*c).clone())
            .map_err(|e| SinkError::fatal(format!("http sink TLS setup: {e}")))
    }
    #[cfg(not(feature = "tls"))]
    {
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth())
            .map_err(|e| SinkError::fatal(format!("http sink TLS setup: {e}")))
    }
}

/// The `http` sink (feature `sink-http`): POSTs records as JSON to a URL.
///
/// # Settings
///
/// | key | default | meaning |
/// |---|---|---|
/// | `http.url` | (required) | where to POST: `http://...`, or `https://...` when the crate is built with the `tls` feature (bundled web PKI roots) |
/// | `http.batch` | `true` | `true`: one POST per batch, a JSON array; `false`: one POST per record, a JSON object |
/// | `http.headers` | (none) | extra request headers, `Name:value` pairs separated by `\|`, e.g. `Authorization:Bearer abc\|X-Source:kafka` |
/// | `http.timeout.ms` | `30000` | how long one request may take, connecting included |
/// | `http.encoding` | `utf8` | how keys, values and header values are written: `utf8` (JSON strings; a record whose bytes are not UTF-8 fails alone) or `base64` (standard alphabet, padded) |
///
/// # The body
/// Each record is a JSON object:
/// `{"topic":"t","partition":0,"offset":42,"timestamp":1700000000000,"key":"k1","value":"v1","headers":[{"key":"h","value":"x"}]}`;
/// a null key, value or header value is JSON `null`. `Content-Type: application/json`.
///
/// # Answers
/// | answer | batch mode | per-record mode |
/// |---|---|---|
/// | 2xx | the batch is taken | the record is taken |
/// | 408, 429, 5xx | retriable: the batch is tried again, split in halves, until the records that fail alone are found | that record is tried again alone; the others go on |
/// | timeout, connection error | retriable, as above | the record and the rest of the batch are tried again |
/// | 401, 403, 407 | fatal: the task stops (fix the credentials in `http.headers`) | the same |
/// | other 4xx (and 3xx left after redirects) | every record of the batch fails (dead-letter path) | that record fails, the others go on |
///
/// Delivery into the endpoint is at-least-once: a retried batch is POSTed again whole, so the
/// receiver should key on (topic, partition, offset) to drop repeats.
///
/// The `http` sink task.
#[derive(Debug, Default)]
pub struct HttpSink {
    state: Option<(Settings, reqwest::Client)>,
}

impl HttpSink {
    /// The URL setting.
    pub const URL_CONFIG: &'static str = URL_CONFIG;
    /// Batch (`true`) or per-record (`false`) requests.
    pub const BATCH_CONFIG: &'static str = BATCH_CONFIG;
    /// Extra request headers.
    pub const HEADERS_CONFIG: &'static str = HEADERS_CONFIG;
    /// Request timeout in milliseconds.
    pub const TIMEOUT_CONFIG: &'static str = TIMEOUT_CONFIG;
    /// `utf8` or `base64`.
    pub const ENCODING_CONFIG: &'static str = ENCODING_CONFIG;

    /// A task that reads its settings in `start`.
    pub fn new() -> HttpSink {
        HttpSink::default()
    }

    /// Checks the settings (the registry's factory calls this).
    pub fn check_config(config: &TaskConfig) -> Result<(), SinkError> {
        settings(config).map(|_| ())
    }
}

fn bytes_json(b: Option<&[u8]>, encoding: Encoding) -> Result<Value, String> {
    match (b, encoding) {
        (None, _) => Ok(Value::Null),
        (Some(b), Encoding::Base64) => Ok(Value::String(base64::engine::general_purpose::STANDARD.encode(b))),
        (Some(b), Encoding::Utf8) => std::str::from_utf8(b)
            .map(|s| Value::String(s.to_string()))
            .map_err(|_| "its bytes are not UTF-8 (set http.encoding=base64 to send binary data)".to_string()),
    }
}

/// One record as JSON, or why it cannot be.
fn record_json(r: &SinkRecord, encoding: Encoding) -> Result<Value, String> {
    let key = bytes_json(r.key.as_deref(), encoding).map_err(|e| format!("key: {e}"))?;
    let value = bytes_json(r.value.as_deref(), encoding).map_err(|e| format!("value: {e}"))?;
    let mut headers = Vec::with_capacity(r.headers.len());
    for h in &r.headers {
        let name = String::from_utf8_lossy(&h.key);
        let v = bytes_json(h.value.as_deref(), encoding).map_err(|e| format!("header {name}: {e}"))?;
        headers.push(json!({ "key": name, "value": v }));
    }
    Ok(json!({
        "topic": &*r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": key,
        "value": value,
        "headers": headers,
    }))
}

/// What one POST came to.
enum Outcome {
    Ok,
    /// No answer at all (timeout, refused or reset connection, DNS): the endpoint may come
    /// back, and the next records of a per-record batch would fail the same way.
    Unreachable(String),
    /// An answer that may be different next time (408, 429, 5xx).
    Retriable(String),
    Rejected(String),
    Fatal(String),
}

async fn post(client: &reqwest::Client, s: &Settings, body: Vec<u8>) -> Outcome {
    let sent = client.post(s.url.clone()).headers(s.headers.clone()).body(body).send().await;
    let response = match sent {
        Ok(r) => r,
        // Timeouts, refused or reset connections, DNS: the endpoint may come back.
        Err(e) => return Outcome::Unreachable(format!("POST {}: {e}", s.url)),
    };
    let status = response.status();
    if status.is_success() {
        return Outcome::Ok;
    }
    // The start of the answer helps whoever reads the dead-letter headers or the log.
    let text = response.text().await.unwrap_or_default();
    let text: String = text.chars().take(200).collect();
    let what = format!("POST {} answered {status}: {text}", s.url);
    match status.as_u16() {
        408 | 429 => Outcome::Retriable(what),
        401 | 403 | 407 => Outcome::Fatal(format!("{what} (check the credentials in http.headers)")),
        s if s >= 500 => Outcome::Retriable(what),
        _ => Outcome::Rejected(what),
    }
}

impl SinkTask for HttpSink {
    fn start(&mut self, config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        let parsed = settings(config);
        Box::pin(async move {
            let s = parsed?;
            let client = reqwest::Client::builder()
                .use_preconfigured_tls(tls_config()?)
                .timeout(s.timeout)
                .build()
                .map_err(|e| SinkError::fatal(format!("http sink: the HTTP client cannot be built: {e}")))?;
            self.state = Some((s, client));
            Ok(())
        })
    }

    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let Some((s, client)) = self.state.as_ref() else {
                return Err(SinkError::fatal("the http sink was used before start"));
            };
            let mut failed = Vec::new();
            let mut bodies = Vec::with_capacity(records.len());
            for (index, r) in records.iter().enumerate() {
                match record_json(r, s.encoding) {
                    Ok(v) => bodies.push((index, v)),
                    Err(reason) => failed.push(RecordFailure { index, reason }),
                }
            }
            if s.batch {
                if !bodies.is_empty() {
                    let (indexes, values): (Vec<usize>, Vec<Value>) = bodies.into_iter().unzip();
                    let body = serde_json::to_vec(&Value::Array(values))
                        .map_err(|e| SinkError::fatal(format!("http sink: encoding the batch: {e}")))?;
                    match post(client, s, body).await {
                        Outcome::Ok => {}
                        Outcome::Retriable(why) | Outcome::Unreachable(why) => return Err(SinkError::retriable(why)),
                        Outcome::Fatal(why) => return Err(SinkError::fatal(why)),
                        Outcome::Rejected(why) => {
                            failed.extend(indexes.into_iter().map(|index| RecordFailure { index, reason: why.clone() }))
                        }
                    }
                }
            } else {
                // Each record's answer is its own: a 5xx for one record is that record's
                // failure, and the others go on. A failure to reach the endpoint at all
                // (connection refused, timeout) is the batch's: the rest is not tried.
                let mut retriable = Vec::new();
                let mut bodies = bodies.into_iter();
                while let Some((index, value)) = bodies.next() {
                    let body = serde_json::to_vec(&value)
                        .map_err(|e| SinkError::fatal(format!("http sink: encoding record {index}: {e}")))?;
                    match post(client, s, body).await {
                        Outcome::Ok => {}
                        Outcome::Unreachable(why) => {
                            retriable.push(RecordFailure { index, reason: why.clone() });
                            retriable
                                .extend(bodies.by_ref().map(|(index, _)| RecordFailure { index, reason: why.clone() }));
                        }
                        Outcome::Retriable(reason) => retriable.push(RecordFailure { index, reason }),
                        Outcome::Fatal(why) => return Err(SinkError::fatal(why)),
                        Outcome::Rejected(reason) => failed.push(RecordFailure { index, reason }),
                    }
                }
                if !retriable.is_empty() {
                    failed.sort_by_key(|f| f.index);
                    return Err(SinkError::RetriableRecords { retriable, failed });
                }
            }
            if failed.is_empty() {
                Ok(())
            } else {
                failed.sort_by_key(|f| f.index);
                Err(SinkError::Records { failed })
            }
        })
    }

    fn stop(&mut self) -> BoxFuture<'_, ()> {
        self.state = None;
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> TaskConfig {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn settings_are_checked_and_name_their_key() {
        assert!(settings(&config(&[])).unwrap_err().to_string().contains("http.url"));
        assert!(settings(&config(&[("http.url", "ftp://x")])).unwrap_err().to_string().contains("scheme"));
        let e = settings(&config(&[("http.url", "http://127.0.0.1:1/"), ("http.headers", "nocolon")])).unwrap_err();
        assert!(e.to_string().contains("http.headers"), "{e}");
        let e = settings(&config(&[("http.url", "http://127.0.0.1:1/"), ("http.timeout.ms", "0")])).unwrap_err();
        assert!(e.to_string().contains("http.timeout.ms"), "{e}");
        let s = settings(&config(&[
            ("http.url", "http://127.0.0.1:1/in"),
            ("http.headers", "Authorization:Bearer a:b|X-One: 1"),
            ("http.batch", "false"),
        ]))
        .unwrap();
        assert!(!s.batch);
        assert_eq!(s.headers.get("authorization").unwrap(), "Bearer a:b");
        assert_eq!(s.headers.get("x-one").unwrap(), "1");
        if !cfg!(feature = "tls") {
            assert!(settings(&config(&[("http.url", "https://x/")])).unwrap_err().to_string().contains("tls"));
        }
    }

    #[test]
    fn bytes_are_text_or_base64() {
        assert_eq!(bytes_json(Some(b"hi"), Encoding::Utf8).unwrap(), json!("hi"));
        assert_eq!(bytes_json(Some(&[0xff]), Encoding::Base64).unwrap(), json!("/w=="));
        assert!(bytes_json(Some(&[0xff]), Encoding::Utf8).unwrap_err().contains("http.encoding=base64"));
        assert_eq!(bytes_json(None, Encoding::Utf8).unwrap(), Value::Null);
    }
}
