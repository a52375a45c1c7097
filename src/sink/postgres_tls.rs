//! TLS for the `postgres` sink, with libpq's connection-string keys and meanings, on the
//! crate's rustls setup (ring, as for Kafka).
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (default) | if the server offers it | not checked (checked as `verify-ca` when `sslrootcert` is given) |
//! | `require` | always | not checked (checked as `verify-ca` when `sslrootcert` is given) |
//! | `verify-ca` | always | signed by a trusted CA |
//! | `verify-full` | always | signed by a trusted CA and naming the host dialled |
//!
//! `sslrootcert=<PEM file>` gives the trusted CAs (`system` for the operating system's store,
//! with the `tls-native-roots` feature; default: the bundled Mozilla roots), `sslcert` and
//! `sslkey` a client certificate (PEM). That is libpq's table, so a managed database's
//! usual `sslmode=require` URL works as it does with `psql`; `verify-full` with the
//! provider's CA bundle is the safe choice. `allow` (plain text first) is refused.
//!
//! tokio-postgres does not know the `ssl*` file keys nor the `verify-*` modes: they are
//! taken out of the connection string here, before it parses the rest.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres::config::SslMode;

use super::task::SinkError;
use crate::security::{ClientCert, Secret, TlsConfig, Trust};

/// How a connection is secured, from the connection string's `ssl*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgTls {
    pub mode: Mode,
    /// `sslrootcert`: a PEM file, or `system`.
    pub root_cert: Option<String>,
    /// `sslcert` / `sslkey`: the client certificate and key, PEM files.
    pub client_cert: Option<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

const SSL_KEYS: &[&str] = &["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Takes the `ssl*` keys out of a connection string (URL `?sslmode=..&..` or libpq
/// key-value form), giving the rest for tokio-postgres and what they asked for.
pub(crate) fn split(url: &str) -> Result<(String, PgTls), SinkError> {
    let mut found: Vec<(String, String)> = Vec::new();
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_string(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    if SSL_KEYS.contains(&k) {
                        found.push((k.to_string(), percent_decode(v)));
                    } else {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for (k, v, raw) in key_values(url)? {
            if SSL_KEYS.contains(&k.as_str()) {
                found.push((k, v));
            } else {
                kept.push(raw);
            }
        }
        kept.join(" ")
    };
    let get = |k: &str| found.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let mode = match get("sslmode").as_deref().unwrap_or("prefer") {
        "disable" => Mode::Disable,
        "prefer" => Mode::Prefer,
        "require" => Mode::Require,
        "verify-ca" => Mode::VerifyCa,
        "verify-full" => Mode::VerifyFull,
        "allow" => {
            return Err(SinkError::fatal(
                "connection.url: sslmode=allow (plain text first) is not supported: use prefer, require, verify-ca or verify-full",
            ))
        }
        other => {
            return Err(SinkError::fatal(format!(
                "connection.url: sslmode={other:?} is not one of disable, prefer, require, verify-ca, verify-full"
            )))
        }
    };
    let client_cert = match (get("sslcert"), get("sslkey")) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => {
            return Err(SinkError::fatal(
                "connection.url: sslcert and sslkey go together (the client certificate and its key)",
            ))
        }
    };
    Ok((rest, PgTls { mode, root_cert: get("sslrootcert"), client_cert }))
}

/// libpq key-value pairs: `key=value`, a value in single quotes may hold spaces, `\` escapes.
/// Each with its raw text, to put back the ones kept.
fn key_values(s: &str) -> Result<Vec<(String, String, String)>, SinkError> {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    loop {
        while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
            chars.next();
        }
        let Some(&(start, _)) = chars.peek() else { break };
        let mut key = String::new();
        while let Some(&(_, c)) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
            chars.next();
        }
        if chars.next().map(|(_, c)| c) != Some('=') {
            return Err(SinkError::fatal(format!("connection.url: {key:?} has no value (write key=value)")));
        }
        while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        let quoted = chars.peek().is_some_and(|(_, c)| *c == '\'');
        if quoted {
            chars.next();
        }
        let mut end = s.len();
        let mut closed = !quoted;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(n);
                    }
                }
                '\'' if quoted => {
                    closed = true;
                    end = i + 1;
                    break;
                }
                c if c.is_whitespace() && !quoted => {
                    end = i;
                    break;
                }
                c => value.push(c),
            }
        }
        if !closed {
            return Err(SinkError::fatal(format!("connection.url: the value of {key} has no closing quote")));
        }
        out.push((key, value, s[start..end].to_string()));
    }
    Ok(out)
}

/// A URL query value: `%XX` decoded (a `%` not followed by two hex digits stays as it is).
fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl PgTls {
    /// tokio-postgres's mode: whether TLS is tried, and whether it must succeed.
    pub(crate) fn ssl_mode(&self) -> SslMode {
        match self.mode {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        }
    }

    /// The rustls connector, or None for `disable`. Files are read here (at start), so a
    /// wrong path fails before the first record.
    pub(crate) fn connector(&self) -> Result<Option<tokio_postgres_rustls::MakeRustlsConnect>, SinkError> {
        if self.mode == Mode::Disable {
            return Ok(None);
        }
        let read = |key: &str, path: &str| {
            std::fs::read_to_string(path)
                .map_err(|e| SinkError::fatal(format!("connection.url: {key}={path}: cannot read it ({e})")))
        };
        let trust = match self.root_cert.as_deref() {
            None => Trust::WebPkiRoots,
            Some("system") => Trust::System,
            Some(path) => Trust::Pem { key: "sslrootcert".into(), pem: read("sslrootcert", path)? },
        };
        let client_cert = match &self.client_cert {
            None => None,
            Some((cert, key)) => Some(ClientCert {
                key_name: "sslcert".into(),
                chain_pem: read("sslcert", cert)?,
                key_pem: Secret::new(read("sslkey", key)?),
            }),
        };
        // libpq: prefer and require check nothing, unless a root certificate is given.
        let check = match self.mode {
            Mode::Prefer | Mode::Require => self.root_cert.is_some(),
            _ => true,
        };
        let tls = TlsConfig { trust, client_cert, verify_hostname: self.mode == Mode::VerifyFull };
        let built = crate::security::tls_client::client_config(&tls)
            .map_err(|e| SinkError::fatal(format!("connection.url: TLS setup: {e}")))?;
        let mut config = Arc::unwrap_or_clone(built);
        if !check {
            config.dangerous().set_certificate_verifier(Arc::new(Unchecked::new()));
        }
        Ok(Some(tokio_postgres_rustls::MakeRustlsConnect::new(config)))
    }
}

/// `sslmode=prefer` / `require` without `sslrootcert`: encrypted, the certificate not
/// checked (libpq's meaning). The handshake's signatures are still verified, so the
/// connection is with whoever holds the certificate's key.
#[derive(Debug)]
struct Unchecked {
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl Unchecked {
    fn new() -> Unchecked {
        Unchecked { algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms }
    }
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssl_keys_leave_the_url_and_the_rest_stays() {
        let (rest, tls) =
            split("postgres://u@h:5432/d?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem").unwrap();
        assert_eq!(rest, "postgres://u@h:5432/d?application_name=x");
        assert_eq!(tls.mode, Mode::VerifyFull);
        assert_eq!(tls.root_cert.as_deref(), Some("/tmp/ca.pem"));
        let (rest, tls) = split("postgres://u@h/d").unwrap();
        assert_eq!((rest.as_str(), tls.mode), ("postgres://u@h/d", Mode::Prefer), "libpq's default");
        let (rest, tls) = split("postgres://u@h/d?sslmode=require").unwrap();
        assert_eq!((rest.as_str(), tls.ssl_mode()), ("postgres://u@h/d", SslMode::Require));
    }

    #[test]
    fn key_value_strings_keep_their_quoting() {
        let (rest, tls) =
            split("host=127.0.0.1 user=u sslmode=verify-ca password='a b\\'c' sslrootcert='/x y/ca.pem' dbname=d")
                .unwrap();
        assert_eq!(rest, "host=127.0.0.1 user=u password='a b\\'c' dbname=d");
        assert_eq!(tls.mode, Mode::VerifyCa);
        assert_eq!(tls.root_cert.as_deref(), Some("/x y/ca.pem"));
        assert!(split("host=h user").is_err());
        assert!(split("host='h").is_err());
    }

    #[test]
    fn unknown_or_partial_settings_are_refused_saying_what_to_use() {
        for (url, says) in [
            ("postgres://u@h/d?sslmode=allow", "not supported"),
            ("postgres://u@h/d?sslmode=strict", "verify-full"),
            ("postgres://u@h/d?sslcert=/c.pem", "go together"),
        ] {
            let e = split(url).unwrap_err();
            assert!(e.to_string().contains(says), "{url}: {e}");
        }
        let tls = split("postgres://u@h/d?sslmode=verify-full&sslrootcert=/no/such/ca.pem").unwrap().1;
        let e = tls.connector().err().unwrap();
        assert!(e.to_string().contains("sslrootcert=/no/such/ca.pem"), "{e}");
    }
}
