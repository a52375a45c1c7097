//! TLS settings from Java names (`ssl.truststore.*`, `ssl.keystore.*`,
//! `ssl.endpoint.identification.algorithm`) and librdkafka names (`ssl.ca.location`,
//! `ssl.certificate.location`, `ssl.key.location`).
//!
//! Files are read here, when the config is read, so that a wrong path fails at once with the
//! key that named it, not at the first connection. Only PEM is read: rustls has no JKS or
//! PKCS#12 reader, and the error for those says which command converts them. Turning the
//! settings into a rustls client config is `tls_client.rs`'s job (feature `tls`).

use std::path::Path;

use super::Secret;
use crate::config::Properties;
use crate::error::{Error, Result};

/// Keys a Java or Confluent file often carries that do not apply here: read and ignored.
/// (Protocol versions and ciphers are rustls's safe defaults: TLS 1.2 and 1.3.)
const IGNORED_KEYS: &[&str] = &[
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.truststore.password",
    "ssl.keystore.password",
];

/// Where trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The Mozilla roots bundled with the crate (webpki-roots): public CAs, as Confluent
    /// Cloud uses. The default when no trust store is set.
    WebPkiRoots,
    /// The operating system's store (`ssl.truststore.type=SYSTEM` or librdkafka's
    /// `ssl.ca.location=probe`; needs the `tls-native-roots` feature).
    System,
    /// PEM certificates from a file or an inline setting.
    Pem {
        /// Which key gave them (for error messages).
        key: String,
        /// The PEM text.
        pem: String,
    },
}

/// A client certificate and its key (mTLS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// Which key gave them (for error messages).
    pub key_name: String,
    /// The certificate chain, PEM, the client's certificate first.
    pub chain_pem: String,
    /// The private key, PEM (PKCS#8, PKCS#1 or SEC1), unencrypted.
    pub key_pem: Secret,
}

/// TLS settings of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// The CAs that may sign broker certificates.
    pub trust: Trust,
    /// A client certificate, for listeners with `ssl.client.auth=required`.
    pub client_cert: Option<ClientCert>,
    /// Whether the broker certificate must name the host we dial
    /// (`ssl.endpoint.identification.algorithm=https`, the default; empty turns it off).
    pub verify_hostname: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig { trust: Trust::WebPkiRoots, client_cert: None, verify_hostname: true }
    }
}

impl TlsConfig {
    /// Reads the TLS settings. Errors name the key and the fix; they never show a key.
    pub fn from_properties(p: &Properties) -> Result<TlsConfig> {
        for key in IGNORED_KEYS {
            let _ = p.get(key);
        }
        Ok(TlsConfig { trust: trust(p)?, client_cert: client_cert(p)?, verify_hostname: verify_hostname(p)? })
    }

    /// Reads and ignores every TLS key (for a protocol without TLS, as the Java client does:
    /// a file switched to SASL_PLAINTEXT for a local test keeps working).
    pub(crate) fn ignore_keys(p: &Properties) {
        for key in IGNORED_KEYS.iter().chain(TLS_KEYS) {
            let _ = p.get(key);
        }
    }
}

/// The TLS keys this module understands (besides [`IGNORED_KEYS`]).
const TLS_KEYS: &[&str] = &[
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "enable.ssl.certificate.verification",
];

fn trust(p: &Properties) -> Result<Trust> {
    let kind = p.get("ssl.truststore.type").map(|t| t.trim().to_ascii_uppercase());
    let location = p.get("ssl.truststore.location");
    let inline = p.get("ssl.truststore.certificates");
    let rd_location = p.get("ssl.ca.location");
    let rd_inline = p.get("ssl.ca.pem");
    if let Some(v) = p.get("enable.ssl.certificate.verification") {
        if !v.trim().eq_ignore_ascii_case("true") {
            return Err(Error::config(
                "enable.ssl.certificate.verification",
                "turning certificate verification off is not supported: trust the broker's CA with \
                 ssl.truststore.location (PEM) instead",
            ));
        }
    }
    match kind.as_deref() {
        None | Some("PEM") => {}
        Some("SYSTEM") => return Ok(Trust::System),
        Some(other @ ("JKS" | "PKCS12")) => {
            return Err(Error::config(
                "ssl.truststore.type",
                format!(
                    "{other} trust stores cannot be read (rustls reads PEM); convert it with \
                     `keytool -list -rfc -keystore {} > ca.pem`, then set ssl.truststore.type=PEM and \
                     ssl.truststore.location=ca.pem",
                    location.unwrap_or("truststore.jks")
                ),
            ))
        }
        Some(other) => {
            return Err(Error::config("ssl.truststore.type", format!("{other:?} is not a trust store type: use PEM")))
        }
    }
    let given: Vec<(&str, &str)> = [
        ("ssl.truststore.location", location),
        ("ssl.truststore.certificates", inline),
        ("ssl.ca.location", rd_location),
        ("ssl.ca.pem", rd_inline),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect();
    match given.as_slice() {
        [] => Ok(Trust::WebPkiRoots),
        [("ssl.ca.location", v)] if v.trim() == "probe" => Ok(Trust::System),
        [(key, value)] if key.ends_with("location") => {
            let pem = read_pem_file(key, value)?;
            if !pem.contains("-----BEGIN CERTIFICATE-----") {
                return Err(Error::config(
                    *key,
                    format!(
                        "{value} holds no PEM certificate (-----BEGIN CERTIFICATE-----); a JKS or PKCS12 \
                         store converts with `keytool -list -rfc -keystore {value} > ca.pem`"
                    ),
                ));
            }
            Ok(Trust::Pem { key: key.to_string(), pem })
        }
        [(key, value)] => {
            if !value.contains("-----BEGIN CERTIFICATE-----") {
                return Err(Error::config(*key, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
            }
            Ok(Trust::Pem { key: key.to_string(), pem: value.to_string() })
        }
        [(a, _), (b, _), ..] => Err(Error::config(*b, format!("set one trust store, not both {a} and {b}"))),
    }
}

fn client_cert(p: &Properties) -> Result<Option<ClientCert>> {
    let kind = p.get("ssl.keystore.type").map(|t| t.trim().to_ascii_uppercase());
    let location = p.get("ssl.keystore.location");
    let inline_key = p.get("ssl.keystore.key");
    let inline_chain = p.get("ssl.keystore.certificate.chain");
    let key_password = p.get("ssl.key.password");
    let rd_cert = p.get("ssl.certificate.location");
    let rd_key = p.get("ssl.key.location");
    let rd_cert_pem = p.get("ssl.certificate.pem");
    let rd_key_pem = p.get("ssl.key.pem");
    match kind.as_deref() {
        None | Some("PEM") => {}
        Some(other @ ("JKS" | "PKCS12")) => {
            let path = location.unwrap_or("keystore.p12");
            let first = if other == "JKS" {
                format!(
                    "`keytool -importkeystore -srckeystore {path} -destkeystore keystore.p12 -deststoretype PKCS12`, then "
                )
            } else {
                String::new()
            };
            return Err(Error::config(
                "ssl.keystore.type",
                format!(
                    "{other} key stores cannot be read (rustls reads PEM); convert it with {first}\
                     `openssl pkcs12 -in keystore.p12 -nodes -out keystore.pem`, then set ssl.keystore.type=PEM \
                     and ssl.keystore.location=keystore.pem"
                ),
            ));
        }
        Some(other) => {
            return Err(Error::config("ssl.keystore.type", format!("{other:?} is not a key store type: use PEM")))
        }
    }
    let (key_name, chain_pem, key_pem) =
        match (location, inline_key, inline_chain, rd_cert, rd_key, rd_cert_pem, rd_key_pem) {
            (None, None, None, None, None, None, None) => return Ok(None),
            (Some(path), None, None, None, None, None, None) => {
                let text = read_pem_file("ssl.keystore.location", path)?;
                ("ssl.keystore.location", text.clone(), text)
            }
            (None, Some(key), Some(chain), None, None, None, None) => {
                ("ssl.keystore.key", chain.to_string(), key.to_string())
            }
            (None, None, None, Some(cert), Some(key), None, None) => (
                "ssl.certificate.location",
                read_pem_file("ssl.certificate.location", cert)?,
                read_pem_file("ssl.key.location", key)?,
            ),
            (None, None, None, None, None, Some(cert), Some(key)) => {
                ("ssl.certificate.pem", cert.to_string(), key.to_string())
            }
            _ => {
                return Err(Error::config(
                    "ssl.keystore.location",
                    "give the client certificate one way: ssl.keystore.location (key and chain in one PEM file), or \
                 ssl.keystore.key with ssl.keystore.certificate.chain, or ssl.certificate.location with \
                 ssl.key.location",
                ))
            }
        };
    if !chain_pem.contains("-----BEGIN CERTIFICATE-----") {
        return Err(Error::config(key_name, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
    }
    if key_pem.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || key_pem.contains("Proc-Type: 4,ENCRYPTED") {
        let hint = if key_password.is_some() { "" } else { " (and ssl.key.password is not set)" };
        return Err(Error::config(
            key_name,
            format!(
                "the private key is encrypted{hint}; encrypted keys are not supported: decrypt it with \
                 `openssl pkcs8 -in key.pem -out key-plain.pem` (it asks for the password) and use that file"
            ),
        ));
    }
    if !key_pem.contains("PRIVATE KEY-----") {
        return Err(Error::config(key_name, "holds no PEM private key (-----BEGIN PRIVATE KEY-----)"));
    }
    Ok(Some(ClientCert { key_name: key_name.to_string(), chain_pem, key_pem: Secret::new(key_pem) }))
}

fn verify_hostname(p: &Properties) -> Result<bool> {
    match p.get("ssl.endpoint.identification.algorithm").map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(true),
        Some(v) if v == "https" => Ok(true),
        Some(v) if v.is_empty() || v == "none" => Ok(false),
        Some(v) => Err(Error::config(
            "ssl.endpoint.identification.algorithm",
            format!("{v:?} is not known: use https (check the broker's name, the default) or leave it empty (don't)"),
        )),
    }
}

fn read_pem_file(key: &str, path: &str) -> Result<String> {
    let path = path.trim();
    let bytes = std::fs::read(Path::new(path)).map_err(|e| Error::config(key, format!("cannot read {path}: {e}")))?;
    String::from_utf8(bytes).map_err(|_| {
        Error::config(
            key,
            format!(
                "{path} is not a PEM text file (binary: a JKS or PKCS12 store? convert it with \
                 `openssl pkcs12 -in {path} -nodes -out store.pem`)"
            ),
        )
    })
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
