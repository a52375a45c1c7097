use super::*;

const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";

fn tls(pairs: &[(&str, &str)]) -> Result<TlsConfig> {
    TlsConfig::from_properties(&Properties::from_pairs(pairs.iter().copied()))
}

fn temp_file(name: &str, text: &str) -> String {
    let path = std::env::temp_dir().join(format!("kafka-share-tls-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn defaults_to_public_roots_and_name_checks() {
    let c = tls(&[]).unwrap();
    assert_eq!(c.trust, Trust::WebPkiRoots);
    assert!(c.verify_hostname);
    assert!(c.client_cert.is_none());
}

#[test]
fn reads_a_pem_trust_store_file_and_inline_certificates() {
    let path = temp_file("ca.pem", CERT);
    let c = tls(&[("ssl.truststore.type", "PEM"), ("ssl.truststore.location", &path)]).unwrap();
    assert!(matches!(c.trust, Trust::Pem { ref key, .. } if key == "ssl.truststore.location"));
    let c = tls(&[("ssl.truststore.certificates", CERT)]).unwrap();
    assert!(matches!(c.trust, Trust::Pem { ref key, .. } if key == "ssl.truststore.certificates"));
    let c = tls(&[("ssl.ca.location", &path)]).unwrap();
    assert!(matches!(c.trust, Trust::Pem { .. }));
    assert_eq!(tls(&[("ssl.ca.location", "probe")]).unwrap().trust, Trust::System);
}

#[test]
fn jks_and_pkcs12_stores_say_how_to_convert() {
    let e = tls(&[("ssl.truststore.type", "JKS"), ("ssl.truststore.location", "/x/t.jks")]).unwrap_err();
    assert!(e.to_string().contains("keytool -list -rfc -keystore /x/t.jks"), "{e}");
    let e = tls(&[("ssl.keystore.type", "PKCS12"), ("ssl.keystore.location", "/x/k.p12")]).unwrap_err();
    assert!(e.to_string().contains("openssl pkcs12"), "{e}");
    let e = tls(&[("ssl.keystore.type", "JKS"), ("ssl.keystore.location", "/x/k.jks")]).unwrap_err();
    assert!(e.to_string().contains("keytool -importkeystore"), "{e}");
    // A binary store behind a PEM type is caught too.
    let path = temp_file("store.p12", "");
    std::fs::write(&path, [0x30u8, 0x82, 0xff, 0xfe]).unwrap();
    let e = tls(&[("ssl.truststore.location", &path)]).unwrap_err();
    assert!(e.to_string().contains("PEM"), "{e}");
}

#[test]
fn client_certificate_from_one_file_inline_or_librdkafka_names() {
    let both = temp_file("keystore.pem", &format!("{KEY}{CERT}"));
    let c = tls(&[("ssl.keystore.type", "PEM"), ("ssl.keystore.location", &both)]).unwrap();
    assert!(c.client_cert.is_some());
    let c = tls(&[("ssl.keystore.key", KEY), ("ssl.keystore.certificate.chain", CERT)]).unwrap();
    assert!(c.client_cert.is_some());
    let cert = temp_file("c.pem", CERT);
    let key = temp_file("k.pem", KEY);
    let c = tls(&[("ssl.certificate.location", &cert), ("ssl.key.location", &key)]).unwrap();
    assert!(c.client_cert.is_some());
    assert!(tls(&[("ssl.keystore.key", KEY)]).is_err(), "a key without its chain");
}

#[test]
fn an_encrypted_key_is_refused_with_the_command_that_decrypts_it_and_no_secret() {
    let key = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nSECRETBYTES\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let e = tls(&[("ssl.keystore.key", key), ("ssl.keystore.certificate.chain", CERT), ("ssl.key.password", "pw")])
        .unwrap_err();
    let text = format!("{e} {e:?}");
    assert!(text.contains("openssl pkcs8"), "{text}");
    assert!(!text.contains("SECRETBYTES") && !text.contains("pw\""), "{text}");
}

#[test]
fn hostname_verification_can_be_turned_off_only_explicitly() {
    assert!(!tls(&[("ssl.endpoint.identification.algorithm", "")]).unwrap().verify_hostname);
    assert!(tls(&[("ssl.endpoint.identification.algorithm", "HTTPS")]).unwrap().verify_hostname);
    assert!(tls(&[("ssl.endpoint.identification.algorithm", "ldap")]).is_err());
    assert!(tls(&[("enable.ssl.certificate.verification", "false")]).is_err());
}

#[test]
fn debug_output_hides_the_private_key() {
    let c = tls(&[("ssl.keystore.key", KEY), ("ssl.keystore.certificate.chain", CERT)]).unwrap();
    assert!(!format!("{c:?}").contains("MIIB\n-----END PRIVATE KEY"), "{c:?}");
}

#[test]
fn a_java_ssl_file_parses_with_its_usual_extra_keys() {
    let p = Properties::from_pairs([
        ("security.protocol", "SSL"),
        ("ssl.protocol", "TLSv1.3"),
        ("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"),
        ("ssl.truststore.password", "changeit"),
    ]);
    let c = crate::security::SecurityConfig::from_properties(&p).unwrap();
    assert!(c.tls.is_some());
    p.reject_unused("test", &["security.protocol"]).unwrap();
    if cfg!(feature = "tls") {
        c.check_supported().unwrap();
    } else {
        assert!(c.check_supported().unwrap_err().to_string().contains("`tls` cargo feature"));
    }
}
