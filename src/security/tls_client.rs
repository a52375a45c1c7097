//! The rustls side of TLS (feature `tls`): a client config built from [`TlsConfig`] with the
//! ring provider passed explicitly (the process-wide default panics when a dependency tree
//! enables two providers), the handshake, and its errors in words a user can act on.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::tls::{ClientCert, TlsConfig, Trust};
use crate::error::{Error, Result};

/// A rustls client config for `tls`.
pub fn client_config(tls: &TlsConfig) -> Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(root_store(&tls.trust)?);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config("security.protocol", format!("TLS setup failed: {e}")))?;
    let builder = if tls.verify_hostname {
        builder.with_root_certificates(roots)
    } else {
        tracing::warn!(
            "ssl.endpoint.identification.algorithm is empty: broker certificates are checked against the \
             trusted CAs but not against the broker's name"
        );
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| Error::config("ssl.truststore.location", format!("no usable CA certificate: {e}")))?;
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyName { inner }))
    };
    let config = match &tls.client_cert {
        None => builder.with_no_client_auth(),
        Some(cert) => {
            let (chain, key) = client_cert(cert)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| Error::config(cert.key_name.clone(), format!("unusable client certificate or key: {e}")))?
        }
    };
    Ok(Arc::new(config))
}

fn root_store(trust: &Trust) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match trust {
        Trust::WebPkiRoots => {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            // As OpenSSL, Go and librdkafka do: SSL_CERT_FILE adds a CA bundle to the
            // default trust (a corporate proxy's CA, or a test broker's).
            if let Some(path) = std::env::var_os("SSL_CERT_FILE") {
                let pem = std::fs::read(&path).map_err(|e| {
                    Error::config("SSL_CERT_FILE", format!("cannot read {}: {e}", path.to_string_lossy()))
                })?;
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert = cert.map_err(|e| Error::config("SSL_CERT_FILE", format!("bad PEM certificate: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| Error::config("SSL_CERT_FILE", format!("unusable CA certificate: {e}")))?;
                }
            }
        }
        Trust::System => system_roots(&mut roots)?,
        Trust::Pem { key, pem } => {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|e| Error::config(key.clone(), format!("bad PEM certificate: {e}")))?;
                roots.add(cert).map_err(|e| Error::config(key.clone(), format!("unusable CA certificate: {e}")))?;
            }
            if roots.is_empty() {
                return Err(Error::config(key.clone(), "holds no CA certificate"));
            }
        }
    }
    Ok(roots)
}

#[cfg(feature = "tls-native-roots")]
fn system_roots(roots: &mut RootCertStore) -> Result<()> {
    let found = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(Error::config("ssl.truststore.type", "the system certificate store has no usable CA certificate"));
    }
    Ok(())
}

#[cfg(not(feature = "tls-native-roots"))]
fn system_roots(_roots: &mut RootCertStore) -> Result<()> {
    Err(Error::config(
        "ssl.truststore.type",
        "the system certificate store needs kafka-share's `tls-native-roots` cargo feature",
    ))
}

fn client_cert(cert: &ClientCert) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let chain = CertificateDer::pem_slice_iter(cert.chain_pem.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::config(cert.key_name.clone(), format!("bad PEM certificate: {e}")))?;
    // The error of a key parse may quote the input: say only that it failed.
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.expose().as_bytes()).map_err(|_| {
        Error::config(cert.key_name.clone(), "the private key is not readable PEM (PKCS#8, PKCS#1 or SEC1)")
    })?;
    Ok((chain, key))
}

/// Checks the chain as usual but accepts a certificate that does not name the broker
/// (`ssl.endpoint.identification.algorithm=`). rustls checks the chain before the name, so a
/// name error means the chain was good.
#[derive(Debug)]
struct AnyName {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The host of `addr` (`host:port`, `[v6]:port`) as a TLS server name: an IP address is
/// checked against the certificate's IP SANs, a name against its DNS SANs.
pub fn server_name(addr: &str) -> Result<ServerName<'static>> {
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|_| Error::Tls { addr: addr.to_string(), message: format!("{host:?} is not a valid TLS server name") })
}

/// Runs the TLS handshake on `tcp` (the caller bounds it by the connect timeout).
pub async fn handshake(config: Arc<ClientConfig>, addr: &str, tcp: TcpStream) -> Result<TlsStream<TcpStream>> {
    let name = server_name(addr)?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| handshake_error(addr, e))
}

/// The error for a failed handshake: what went wrong and what to change.
fn handshake_error(addr: &str, e: std::io::Error) -> Error {
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    let message = match rustls_error(&e) {
        Some(rustls::Error::InvalidCertificate(cert)) => certificate_message(host, cert),
        Some(rustls::Error::AlertReceived(alert)) => alert_message(*alert),
        Some(rustls::Error::InvalidMessage(_)) | Some(rustls::Error::InappropriateMessage { .. }) => {
            "the broker did not answer in TLS: is this a PLAINTEXT or SASL_PLAINTEXT listener? Use the port of \
             its SSL / SASL_SSL listener, or set security.protocol to PLAINTEXT / SASL_PLAINTEXT"
                .to_string()
        }
        Some(other) => format!("handshake failed: {other}"),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the broker closed the connection during the TLS handshake: is this a PLAINTEXT or SASL_PLAINTEXT \
             listener (then set security.protocol to PLAINTEXT / SASL_PLAINTEXT or use its TLS port)?"
                .to_string()
        }
        None => return Error::io(addr, e),
    };
    Error::Tls { addr: addr.to_string(), message }
}

fn certificate_message(host: &str, cert: &CertificateError) -> String {
    match cert {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            "the broker's certificate is not signed by a CA this client trusts: set ssl.truststore.location \
             (ssl.truststore.type=PEM) to the CA that signed it"
                .to_string()
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => format!(
            "the broker's certificate is not valid for {host} (the address the cluster advertises): give the \
             broker a certificate whose subject alternative names include it (an IP address needs an IP SAN), \
             or set ssl.endpoint.identification.algorithm= (empty) to skip the name check"
        ),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the broker's certificate has expired: renew it on the broker".to_string()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the broker's certificate is not valid yet: check the clocks of the broker and this machine".to_string()
        }
        other => format!("the broker's certificate was refused: {other:?}"),
    }
}

fn alert_message(alert: rustls::AlertDescription) -> String {
    use rustls::AlertDescription as A;
    match alert {
        A::CertificateRequired | A::HandshakeFailure | A::BadCertificate | A::UnknownCA | A::CertificateUnknown => {
            format!(
                "the broker refused the handshake ({alert:?}): this listener may require a client certificate \
                 signed by a CA it trusts; set ssl.keystore.location (ssl.keystore.type=PEM, key and chain)"
            )
        }
        other => format!("the broker refused the handshake ({other:?})"),
    }
}

fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

/// A TLS error that arrived after the handshake (TLS 1.3 brokers refuse a missing client
/// certificate only then, on the first read), as an [`Error::Tls`]; `None` for other errors.
pub fn late_tls_error(addr: &str, e: &std::io::Error) -> Option<Error> {
    let message = match rustls_error(e)? {
        rustls::Error::AlertReceived(alert) => alert_message(*alert),
        other => format!("TLS failed: {other}"),
    };
    Some(Error::Tls { addr: addr.to_string(), message })
}
