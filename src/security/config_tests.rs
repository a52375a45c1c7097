use super::*;

const SECRET: &str = "TOPSECRETvalue";

fn props(pairs: &[(&str, &str)]) -> Properties {
    Properties::from_pairs(pairs.iter().copied())
}

fn ok(pairs: &[(&str, &str)]) -> SecurityConfig {
    SecurityConfig::from_properties(&props(pairs)).unwrap_or_else(|e| panic!("{pairs:?}: {e}"))
}

/// The error, checked to be a Config error on `key` that does not show the secret.
fn err(pairs: &[(&str, &str)], key: &str, needle: &str) {
    let e = SecurityConfig::from_properties(&props(pairs)).unwrap_err();
    let text = e.to_string();
    assert!(matches!(&e, Error::Config { key: k, .. } if k == key), "{pairs:?}: wrong key: {text}");
    assert!(text.contains(needle), "{pairs:?}: {text}");
    assert!(!text.contains(SECRET), "{pairs:?} leaked the secret: {text}");
}

fn plain_jaas() -> String {
    format!("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"KEY\" password=\"{SECRET}\";")
}

#[test]
fn confluent_cloud_java_properties_file() {
    let text = format!(
        "# Required connection configs for Kafka producer, consumer, and admin\n\
         bootstrap.servers=pkc-xxxxx.us-east-1.aws.confluent.cloud:9092\n\
         security.protocol=SASL_SSL\n\
         sasl.mechanism=PLAIN\n\
         sasl.jaas.config={}\n\
         client.dns.lookup=use_all_dns_ips\n",
        plain_jaas()
    );
    let p = Properties::parse(&text).unwrap();
    let c = SecurityConfig::from_properties(&p).unwrap();
    assert_eq!(c.protocol, SecurityProtocol::SaslSsl);
    assert!(c.protocol.uses_tls() && c.protocol.uses_sasl());
    assert_eq!(c.sasl, Some(SaslConfig::Plain { username: "KEY".into(), password: Secret::new(SECRET) }));
    assert!(!format!("{c:?}").contains(SECRET), "{c:?}");
    // The keys it read are marked used; the caller's own keys are left to it.
    let e = p.reject_unused("test", &["bootstrap.servers"]).unwrap_err();
    assert!(e.to_string().contains("client.dns.lookup"), "{e}");
}

#[test]
fn confluent_cloud_librdkafka_names() {
    let c = ok(&[
        ("security.protocol", "sasl_ssl"),
        ("sasl.mechanisms", "PLAIN"),
        ("sasl.username", "KEY"),
        ("sasl.password", SECRET),
    ]);
    assert_eq!(c.sasl.as_ref().map(SaslConfig::mechanism), Some(SaslMechanism::Plain));
    assert_eq!(c.sasl, Some(SaslConfig::Plain { username: "KEY".into(), password: Secret::new(SECRET) }));
}

#[test]
fn protocols_any_case_and_the_default() {
    assert_eq!(ok(&[]).protocol, SecurityProtocol::Plaintext);
    assert_eq!(ok(&[("security.protocol", "ssl")]).protocol, SecurityProtocol::Ssl);
    assert_eq!(ok(&[("security.protocol", " Plaintext ")]).protocol, SecurityProtocol::Plaintext);
    err(&[("security.protocol", "TLS")], "security.protocol", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL");
}

#[test]
fn sasl_settings_without_a_sasl_protocol_are_ignored() {
    let p = props(&[("security.protocol", "SSL"), ("sasl.mechanism", "GSSAPI"), ("sasl.jaas.config", "junk")]);
    let c = SecurityConfig::from_properties(&p).unwrap();
    assert_eq!(c.sasl, None);
    p.reject_unused("test", &[]).unwrap();
}

#[test]
fn scram_from_jaas() {
    let jaas = format!(
        "org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=\"alice\"\n  password=\"{SECRET}\";"
    );
    for (name, mechanism) in [("SCRAM-SHA-256", ScramMechanism::Sha256), ("scram-sha-512", ScramMechanism::Sha512)] {
        let c = ok(&[("security.protocol", "SASL_PLAINTEXT"), ("sasl.mechanism", name), ("sasl.jaas.config", &jaas)]);
        assert_eq!(
            c.sasl,
            Some(SaslConfig::Scram { mechanism, username: "alice".into(), password: Secret::new(SECRET) })
        );
    }
}

#[test]
fn mechanism_errors() {
    let jaas = plain_jaas();
    err(
        &[("security.protocol", "SASL_SSL"), ("sasl.mechanism", "GSSAPI")],
        "sasl.mechanism",
        "Kerberos is not supported",
    );
    err(&[("security.protocol", "SASL_SSL"), ("sasl.mechanism", "MD5")], "sasl.mechanism", "not a SASL mechanism");
    err(&[("security.protocol", "SASL_SSL"), ("sasl.jaas.config", &jaas)], "sasl.mechanism", "required");
    err(
        &[("security.protocol", "SASL_SSL"), ("sasl.mechanism", "PLAIN"), ("sasl.mechanisms", "SCRAM-SHA-256")],
        "sasl.mechanism",
        "disagree",
    );
    // SCRAM mechanism with the PLAIN login module.
    err(
        &[("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-256"), ("sasl.jaas.config", &jaas)],
        "sasl.jaas.config",
        "needs org.apache.kafka.common.security.scram.ScramLoginModule",
    );
}

#[test]
fn credential_errors() {
    let base = [("security.protocol", "SASL_SSL"), ("sasl.mechanism", "PLAIN")];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        base.iter().chain(extra).copied().collect()
    };
    err(&with(&[]), "sasl.jaas.config", "needs credentials");
    err(&with(&[("sasl.username", "u")]), "sasl.password", "missing");
    err(&with(&[("sasl.password", SECRET)]), "sasl.username", "missing");
    err(&with(&[("sasl.username", ""), ("sasl.password", SECRET)]), "sasl.username", "empty");
    let jaas: &'static str = Box::leak(plain_jaas().into_boxed_str());
    err(&with(&[("sasl.jaas.config", jaas), ("sasl.password", SECRET)]), "sasl.username", "not both");
    let no_password: &'static str =
        Box::leak(format!("x.PlainLoginModule required username=\"u\" pass=\"{SECRET}\";").into_boxed_str());
    err(&with(&[("sasl.jaas.config", no_password)]), "sasl.jaas.config", "option password is missing");
    let broken: &'static str = Box::leak(format!("x.PlainLoginModule required password=\"{SECRET}").into_boxed_str());
    err(&with(&[("sasl.jaas.config", broken)]), "sasl.jaas.config", "not closed");
    err(&with(&[("sasl.username", "a\0b"), ("sasl.password", SECRET)]), "sasl.jaas.config", "NUL");
}

#[test]
fn oauthbearer_sources() {
    let base = [("security.protocol", "SASL_SSL"), ("sasl.mechanism", "OAUTHBEARER")];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        base.iter().chain(extra).copied().collect()
    };
    let c = ok(&with(&[("sasl.oauthbearer.token", "a.b.c"), ("sasl.oauthbearer.extensions", "logicalCluster=lkc-1")]));
    assert_eq!(
        c.sasl,
        Some(SaslConfig::OAuthBearer(OAuthBearerConfig::StaticToken {
            token: Secret::new("a.b.c"),
            extensions: BTreeMap::from([("logicalCluster".into(), "lkc-1".into())]),
        }))
    );
    let unsecured = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                     unsecuredLoginStringClaim_sub=\"alice\" unsecuredLoginLifetimeSeconds=\"5\" \
                     unsecuredLoginExtension_traceId=\"t1\";";
    let c = ok(&with(&[("sasl.jaas.config", unsecured)]));
    assert_eq!(
        c.sasl,
        Some(SaslConfig::OAuthBearer(OAuthBearerConfig::Unsecured {
            subject: "alice".into(),
            lifetime_secs: 5,
            extensions: BTreeMap::from([("traceId".into(), "t1".into())]),
        }))
    );
    let oidc = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                clientId=\"cid\" clientSecret=\"TOPSECRETvalue\" scope=\"kafka\" \
                extension_logicalCluster=\"lkc-1\" extension_identityPoolId=\"pool-2\";";
    let c = ok(&with(&[
        ("sasl.oauthbearer.token.endpoint.url", "https://idp.example/oauth2/token"),
        ("sasl.jaas.config", oidc),
    ]));
    let Some(SaslConfig::OAuthBearer(OAuthBearerConfig::ClientCredentials {
        token_endpoint_url,
        client_id,
        client_secret,
        scope,
        extensions,
    })) = &c.sasl
    else {
        panic!("{c:?}")
    };
    assert_eq!(token_endpoint_url, "https://idp.example/oauth2/token");
    assert_eq!((client_id.as_str(), client_secret.expose(), scope.as_deref()), ("cid", SECRET, Some("kafka")));
    assert_eq!(extensions.len(), 2);
    assert!(!format!("{c:?}").contains(SECRET));
}

#[test]
fn oauthbearer_errors() {
    let base = [("security.protocol", "SASL_SSL"), ("sasl.mechanism", "OAUTHBEARER")];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        base.iter().chain(extra).copied().collect()
    };
    err(&with(&[]), "sasl.jaas.config", "needs a token source");
    err(
        &with(&[("sasl.oauthbearer.token", "Bearer TOPSECRETvalue")]),
        "sasl.oauthbearer.token",
        "without a `Bearer ` prefix",
    );
    err(
        &with(&[("sasl.oauthbearer.token", "a.b.c"), ("sasl.oauthbearer.token.endpoint.url", "https://x")]),
        "sasl.oauthbearer.token",
        "not both",
    );
    err(&with(&[("sasl.oauthbearer.token.endpoint.url", "https://x")]), "sasl.jaas.config", "clientId");
    err(&with(&[("sasl.oauthbearer.token.endpoint.url", "ftp://x")]), "sasl.oauthbearer.token.endpoint.url", "http");
    err(&with(&[("sasl.oauthbearer.method", "oidc")]), "sasl.oauthbearer.token.endpoint.url", "required");
    err(
        &with(&[("sasl.oauthbearer.token", "t"), ("sasl.oauthbearer.extensions", "auth=x")]),
        "sasl.oauthbearer.extensions",
        "reserved",
    );
    err(
        &with(&[("sasl.oauthbearer.token", "t"), ("sasl.oauthbearer.extensions", "bad")]),
        "sasl.oauthbearer.extensions",
        "name=value",
    );
    let plain: &'static str = Box::leak(plain_jaas().into_boxed_str());
    err(
        &with(&[("sasl.jaas.config", plain)]),
        "sasl.jaas.config",
        "needs org.apache.kafka.common.security.oauthbearer",
    );
    err(
        &with(&[(
            "sasl.jaas.config",
            "x.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"a\" unsecuredLoginLifetimeSeconds=\"0\";",
        )]),
        "sasl.jaas.config",
        "positive",
    );
}

#[test]
fn confluent_cloud_oauth_file_with_the_java_oidc_callback_class() {
    let p = Properties::parse(
        "security.protocol=SASL_SSL\n\
         sasl.mechanism=OAUTHBEARER\n\
         sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
         sasl.login.connect.timeout.ms=15000\n\
         sasl.oauthbearer.token.endpoint.url=https://idp.example.com/oauth2/default/v1/token\n\
         sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\\n  \
         clientId='cid' clientSecret='TOPSECRETvalue' scope='api://cid/.default' \\\n  \
         extension_logicalCluster='lkc-1' extension_identityPoolId='pool-2';\n",
    )
    .unwrap();
    let c = SecurityConfig::from_properties(&p).unwrap();
    let Some(SaslConfig::OAuthBearer(OAuthBearerConfig::ClientCredentials { client_id, scope, extensions, .. })) =
        c.sasl
    else {
        panic!("{c:?}")
    };
    assert_eq!(client_id, "cid");
    assert_eq!(scope.as_deref(), Some("api://cid/.default"));
    assert_eq!(extensions.get("logicalCluster").map(String::as_str), Some("lkc-1"));
    assert_eq!(extensions.get("identityPoolId").map(String::as_str), Some("pool-2"));
    p.reject_unused("test", &["security.protocol"]).unwrap();
    err(
        &[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "u"),
            ("sasl.password", SECRET),
            ("sasl.login.callback.handler.class", "com.example.MyHandler"),
        ],
        "sasl.login.callback.handler.class",
        "with_oauth_token_provider",
    );
}
