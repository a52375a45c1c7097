//! TLS against the real broker's SSL, mTLS and NOIPSAN listeners (`scripts/kafka up`): every
//! client over TLS, and each way TLS goes wrong giving a typed error within seconds, after a
//! bounded number of connection attempts.
#![cfg(feature = "tls")]

use crate::common;

use std::sync::Arc;

use common::secured::{admin_error, admin_error_via_proxy, file, props, props_with, round_trip};
use kafka_share::admin::Admin;
use kafka_share::cluster::ClusterConfig;
use kafka_share::config::Properties;
use kafka_share::Error;
use rustls_pki_types::pem::PemObject;

/// An error from connecting through a counting proxy to the listener of `name`, with
/// `overrides`: it must be Error::Tls, and the client must have dialed at most twice.
async fn tls_error_via_proxy(name: &str, overrides: &[(&str, &str)]) -> String {
    match admin_error_via_proxy(props_with(name, overrides)).await {
        Error::Tls { message, .. } => message,
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[tokio::test]
async fn every_client_works_over_ssl() {
    round_trip("ssl", 20).await;
}

#[tokio::test]
async fn every_client_works_over_mtls() {
    round_trip("mtls", 20).await;
}

#[tokio::test]
async fn inline_pem_trust_and_key_work() {
    let ca = std::fs::read_to_string(file("ca.pem")).expect("ca.pem");
    let key = std::fs::read_to_string(file("client.key")).expect("client.key");
    let chain = std::fs::read_to_string(file("client.pem")).expect("client.pem");
    let mut p = props("mtls");
    let bootstrap = p.get("bootstrap.servers").expect("bootstrap").to_string();
    p = Properties::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("security.protocol", "SSL"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.certificates", ca.as_str()),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.key", key.as_str()),
        ("ssl.keystore.certificate.chain", chain.as_str()),
    ]);
    let admin = Admin::from_properties(&p).await.expect("admin with inline PEM");
    admin.list_share_groups().await.expect("list over mTLS");
}

#[tokio::test]
async fn caller_built_rustls_config_is_used() {
    let ca = std::fs::read(file("ca.pem")).expect("ca.pem");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(cert.expect("pem")).expect("add CA");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let bootstrap = props("ssl").get("bootstrap.servers").expect("bootstrap").to_string();
    let mut cc = ClusterConfig::new(&bootstrap).with_tls_client_config(Arc::new(config));
    cc.security.protocol = kafka_share::security::SecurityProtocol::Ssl;
    let admin = Admin::connect(cc).await.expect("admin with the caller's rustls config");
    admin.list_share_groups().await.expect("list");
}

#[tokio::test]
async fn hostname_check_can_be_turned_off() {
    let p = props_with("noipsan", &[("ssl.endpoint.identification.algorithm", "")]);
    let admin = Admin::from_properties(&p).await.expect("no name check: the chain is still verified");
    admin.list_share_groups().await.expect("list");
}

#[tokio::test]
async fn untrusted_ca_is_a_tls_error() {
    let untrusted = file("untrusted-ca.pem");
    let m = tls_error_via_proxy("ssl", &[("ssl.truststore.location", &untrusted)]).await;
    assert!(m.contains("not signed by a CA this client trusts"), "{m}");
}

#[tokio::test]
async fn certificate_without_the_ip_is_a_tls_error() {
    let m = tls_error_via_proxy("noipsan", &[]).await;
    assert!(m.contains("not valid for 127.0.0.1") && m.contains("ssl.endpoint.identification.algorithm"), "{m}");
}

#[tokio::test]
async fn default_trust_refuses_a_private_ca() {
    // No trust store: the bundled public roots, which never signed the test CA.
    let mut p = Properties::new();
    let bootstrap = props("ssl").get("bootstrap.servers").expect("bootstrap").to_string();
    p.set("bootstrap.servers", &bootstrap).set("security.protocol", "SSL");
    match admin_error(&p).await {
        Error::Tls { message, .. } => assert!(message.contains("not signed"), "{message}"),
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[tokio::test]
async fn missing_client_certificate_is_a_tls_error() {
    // The mTLS listener with the SSL file (no key store).
    let mtls = props("mtls").get("bootstrap.servers").expect("bootstrap").to_string();
    let m = tls_error_via_proxy("ssl", &[("bootstrap.servers", &mtls)]).await;
    assert!(m.contains("client certificate"), "{m}");
}

#[tokio::test]
async fn tls_client_on_a_plaintext_port_fails_fast() {
    let plaintext = common::bootstrap();
    let m = tls_error_via_proxy("ssl", &[("bootstrap.servers", &plaintext)]).await;
    assert!(m.contains("PLAINTEXT"), "{m}");
}

#[tokio::test]
async fn plaintext_client_on_a_tls_port_fails_fast() {
    let tls_port = props("ssl").get("bootstrap.servers").expect("bootstrap").to_string();
    let p = Properties::from_pairs([("bootstrap.servers", tls_port.as_str())]);
    match admin_error_via_proxy(p).await {
        Error::Tls { message, .. } => assert!(message.contains("security.protocol to SSL"), "{message}"),
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

// The binary is built only with the `cli` feature (scripts/test enables it).
#[cfg(feature = "cli")]
#[tokio::test]
async fn cli_lists_groups_over_ssl() {
    let path = common::secured::security_dir().join("ssl.properties");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-share-groups"))
        .args(["--command-config", path.to_str().expect("utf-8 path"), "--list"])
        .output()
        .expect("run kafka-share-groups");
    assert!(out.status.success(), "kafka-share-groups failed: {}", String::from_utf8_lossy(&out.stderr));
}
