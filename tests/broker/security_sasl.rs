//! SASL against the real broker's SASL_PLAINTEXT, SASL_SSL and REAUTH listeners
//! (`scripts/kafka up`): every client with every mechanism, re-authentication on the same
//! connection, ACLs, and each way a login goes wrong giving a typed error within seconds after
//! a bounded number of connection attempts.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::secured::{admin_error_via_proxy, props, props_with, round_trip};
use kafka_share::admin::Admin;
use kafka_share::cluster::ClusterConfig;
use kafka_share::config::Properties;
use kafka_share::security::{OAuthToken, SecurityConfig};
use kafka_share::{Error, ErrorCode, ShareConsumer, ShareConsumerConfig};

const CONSUMER: &str = "consumer-share-metrics";

#[tokio::test]
async fn every_client_works_over_sasl_plaintext_with_plain() {
    round_trip("sasl_plaintext-plain", 10).await;
}

#[tokio::test]
async fn every_client_works_over_sasl_plaintext_with_scram_sha_256() {
    round_trip("sasl_plaintext-scram-sha-256", 10).await;
}

#[tokio::test]
async fn every_client_works_over_sasl_plaintext_with_scram_sha_512() {
    round_trip("sasl_plaintext-scram-sha-512", 10).await;
}

#[tokio::test]
async fn every_client_works_over_sasl_plaintext_with_oauthbearer() {
    round_trip("sasl_plaintext-oauthbearer", 10).await;
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn every_client_works_over_sasl_ssl_with_plain() {
    round_trip("sasl_ssl-plain", 10).await;
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn every_client_works_over_sasl_ssl_with_scram_sha_512() {
    round_trip("sasl_ssl-scram-sha-512", 10).await;
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn every_client_works_over_sasl_ssl_with_oauthbearer() {
    round_trip("sasl_ssl-oauthbearer", 10).await;
}

#[tokio::test]
async fn librdkafka_names_work_too() {
    let p = props("sasl_plaintext-scram-sha-512");
    let bootstrap = p.get("bootstrap.servers").expect("bootstrap");
    let p = Properties::from_pairs([
        ("bootstrap.servers", bootstrap),
        ("security.protocol", "sasl_plaintext"),
        ("sasl.mechanisms", "SCRAM-SHA-512"),
        ("sasl.username", "alice"),
        ("sasl.password", "alice-secret"),
    ]);
    Admin::from_properties(&p).await.expect("librdkafka names").list_share_groups().await.expect("list");
}

/// The error of connecting through a counting proxy with `name`'s file and `overrides`: an
/// Error::Authentication, after at most two connection attempts.
async fn login_error_via_proxy(name: &str, overrides: &[(&str, &str)]) -> String {
    let e = admin_error_via_proxy(props_with(name, overrides)).await;
    let text = e.to_string();
    assert!(!text.contains("wrong-secret"), "the password leaked: {text}");
    match e {
        Error::Authentication { .. } => text,
        other => panic!("expected an authentication error, got {other:?}"),
    }
}

#[tokio::test]
async fn wrong_password_is_an_authentication_error() {
    let jaas =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="wrong-secret";"#;
    let m = login_error_via_proxy("sasl_plaintext-plain", &[("sasl.jaas.config", jaas)]).await;
    assert!(m.contains("refused the credentials"), "{m}");
    let jaas =
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="wrong-secret";"#;
    let m = login_error_via_proxy("sasl_plaintext-scram-sha-512", &[("sasl.jaas.config", jaas)]).await;
    assert!(m.contains("refused the credentials"), "{m}");
}

#[tokio::test]
async fn unknown_user_is_an_authentication_error() {
    let jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="mallory" password="wrong-secret";"#;
    let m = login_error_via_proxy("sasl_plaintext-scram-sha-256", &[("sasl.jaas.config", jaas)]).await;
    assert!(m.contains("SCRAM-SHA-256"), "{m}");
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn a_mechanism_the_listener_does_not_enable_is_an_authentication_error() {
    // The SASL_SSL listener has no SCRAM-SHA-256.
    let jaas =
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";"#;
    let m = login_error_via_proxy(
        "sasl_ssl-scram-sha-512",
        &[("sasl.mechanism", "SCRAM-SHA-256"), ("sasl.jaas.config", jaas)],
    )
    .await;
    assert!(m.contains("does not enable SCRAM-SHA-256") && m.contains("SCRAM-SHA-512"), "{m}");
}

/// Polls `consumer` until it fails or `deadline` passes; returns the error.
async fn poll_error(consumer: &ShareConsumer, deadline: Duration) -> Error {
    let end = Instant::now() + deadline;
    loop {
        match consumer.poll(Duration::from_millis(500)).await {
            Err(e) => return e,
            Ok(_) => assert!(Instant::now() < end, "poll never failed"),
        }
    }
}

/// A consumer of a fresh topic with a few records, logged in as `user`.
async fn consumer_as(user: &str) -> (ShareConsumer, String) {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "acl", 1).await;
    let group = common::new_group(&admin, "acl", None).await;
    common::produce(&common::bootstrap(), &topic, 1, 3, "r").await;
    let jaas = format!(
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{user}-secret";"#
    );
    let mut p = props_with("sasl_plaintext-scram-sha-512", &[("sasl.jaas.config", &jaas)]);
    p.set("group.id", &group);
    let consumer = ShareConsumer::from_properties(&p).await.expect("connect");
    consumer.subscribe([&topic]).expect("subscribe");
    (consumer, group)
}

#[tokio::test]
async fn no_read_on_the_group_fails_poll_with_group_authorization_failed() {
    let (consumer, group) = consumer_as("bob").await;
    let started = Instant::now();
    let e = poll_error(&consumer, Duration::from_secs(30)).await;
    assert_eq!(e.code(), Some(ErrorCode::GROUP_AUTHORIZATION_FAILED), "{e:?}");
    assert!(e.to_string().contains("grant this principal READ on the group"), "says what to grant: {e}");
    assert!(!e.is_retriable(), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    // The error stays: polling again does not retry in a loop behind the caller's back.
    let again = poll_error(&consumer, Duration::from_secs(5)).await;
    assert_eq!(again.code(), Some(ErrorCode::GROUP_AUTHORIZATION_FAILED), "{again:?} ({group})");
    let _ = consumer.close(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn no_read_on_the_topic_fails_poll_with_topic_authorization_failed() {
    let (consumer, _) = consumer_as("carol").await;
    let started = Instant::now();
    let e = poll_error(&consumer, Duration::from_secs(30)).await;
    assert_eq!(e.code(), Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    let _ = consumer.close(Duration::from_secs(5)).await;
}

/// Reads over the REAUTH listener (sessions of 5 s) until the consumer re-authenticated at
/// least twice: no new connection, the share session goes on, no record comes twice.
async fn reads_through_reauthentications(name: &str) {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "reauth", 1).await;
    let group = common::new_group(&admin, "reauth", None).await;
    common::produce(&common::bootstrap(), &topic, 1, 40, "r").await;
    let mut p = props(name);
    p.set("group.id", &group);
    p.set("share.acknowledgement.mode", "explicit");
    p.set("max.poll.records", "1");
    let consumer = ShareConsumer::from_properties(&p).await.expect("connect");
    consumer.subscribe([&topic]).expect("subscribe");

    let metric = |n: &str| consumer.metrics().get(CONSUMER, n).unwrap_or(-1.0);
    let mut got: BTreeMap<i64, i16> = BTreeMap::new();
    let mut connections_at_first_record = None;
    let mut first_epochs = None;
    let end = Instant::now() + Duration::from_secs(90);
    // Every connection of the consumer re-authenticates about every 4.5 s: wait until there
    // were at least two per connection.
    let reauthenticated_twice =
        || metric("successful-reauthentication-total") >= 2.0 * metric("connection-creation-total").max(1.0);
    while !reauthenticated_twice() || got.len() < 40 {
        assert!(
            Instant::now() < end,
            "only {} records and {} re-authentications",
            got.len(),
            metric("successful-reauthentication-total")
        );
        for r in consumer.poll(Duration::from_millis(500)).await.expect("poll") {
            assert!(got.insert(r.offset, r.delivery_count).is_none(), "offset {} came twice", r.offset);
            consumer.acknowledge(&r).expect("ack");
            if connections_at_first_record.is_none() {
                connections_at_first_record = Some(metric("connection-creation-total"));
                first_epochs = Some(consumer.share_sessions());
            }
        }
    }
    assert_eq!(metric("failed-reauthentication-total"), 0.0);
    assert_eq!(
        Some(metric("connection-creation-total")),
        connections_at_first_record,
        "a connection was dialed again instead of re-authenticated"
    );
    assert!(got.values().all(|&d| d == 1), "a record was redelivered: {got:?}");
    let (before, after) = (first_epochs.expect("epochs"), consumer.share_sessions());
    for (node, epoch) in &before {
        assert!(
            after.get(node).is_some_and(|e| e > epoch),
            "share session on {node} restarted: {before:?} -> {after:?}"
        );
    }
    consumer.commit_sync(Duration::from_secs(10)).await.expect("commit").into_result().expect("acks");
    consumer.close(Duration::from_secs(10)).await.expect("close");
}

#[tokio::test]
async fn scram_reauthenticates_on_the_same_connection() {
    reads_through_reauthentications("reauth-scram-sha-256").await;
}

#[tokio::test]
async fn oauthbearer_reauthenticates_on_the_same_connection() {
    reads_through_reauthentications("reauth-oauthbearer").await;
}

#[tokio::test]
async fn token_provider_callback_supplies_oauthbearer_tokens() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let provider = move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
            let jwt = kafka_share::security::unsecured_jwt::unsecured_jwt("alice", now, 3600, &[])?;
            Ok(OAuthToken::new(jwt.expose())
                .expires_at(SystemTime::now() + Duration::from_secs(3600))
                .principal("alice")
                .extension("logicalCluster", "lkc-test"))
        }
    };
    let p = props("sasl_plaintext-oauthbearer");
    let mut cc = ClusterConfig::new(p.get("bootstrap.servers").expect("bootstrap")).with_oauth_token_provider(provider);
    cc.security = SecurityConfig::from_properties(&p).expect("security");
    let admin = Admin::connect(cc).await.expect("admin with a token provider");
    admin.list_share_groups().await.expect("list");
    assert!(calls.load(Ordering::SeqCst) >= 1);
}

#[tokio::test]
async fn a_failing_token_provider_is_an_authentication_error() {
    let p = props("sasl_plaintext-oauthbearer");
    let mut cc =
        ClusterConfig::new(p.get("bootstrap.servers").expect("bootstrap")).with_oauth_token_provider(|| async {
            Err(Error::Authentication {
                mechanism: "OAUTHBEARER".into(),
                message: "identity provider unreachable".into(),
            })
        });
    cc.security = SecurityConfig::from_properties(&p).expect("security");
    let e = Admin::connect(cc).await.expect_err("no token, no login");
    assert!(matches!(e, Error::Authentication { .. }) && e.to_string().contains("unreachable"), "{e:?}");
}

#[tokio::test]
async fn consumer_config_takes_the_security_settings() {
    let p = props("sasl_plaintext-scram-sha-256");
    let mut cfg = ShareConsumerConfig::new(p.get("bootstrap.servers").expect("bootstrap"), common::unique("g"));
    cfg.cluster.security = SecurityConfig::from_properties(&p).expect("security");
    let c = ShareConsumer::connect(cfg).await.expect("connect with typed config");
    c.close(Duration::from_secs(5)).await.expect("close");
}

// The binary is built only with the `cli` feature (scripts/test enables it).
#[cfg(feature = "cli")]
#[tokio::test]
async fn cli_lists_groups_over_sasl() {
    let path = common::secured::security_dir().join("sasl_plaintext-scram-sha-512.properties");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-share-groups"))
        .args(["--command-config", path.to_str().expect("utf-8 path"), "--list"])
        .output()
        .expect("run kafka-share-groups");
    assert!(out.status.success(), "kafka-share-groups failed: {}", String::from_utf8_lossy(&out.stderr));
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!all.contains("alice-secret"), "the CLI printed the password");
}

/// An identity provider on 127.0.0.1 that answers every token request with an unsecured JWT
/// for `alice` (the test broker's validator accepts those); counts the requests.
#[cfg(feature = "oidc")]
async fn fake_identity_provider() -> (String, Arc<AtomicU32>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/oauth2/token", listener.local_addr().expect("addr"));
    let count = Arc::new(AtomicU32::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = s.read(&mut buf).await; // one small request: headers and form body
                let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
                let jwt = kafka_share::security::unsecured_jwt::unsecured_jwt("alice", now, 3600, &[]).expect("jwt");
                let body = format!(r#"{{"access_token":"{}","token_type":"Bearer","expires_in":3600}}"#, jwt.expose());
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    (url, count)
}

#[cfg(feature = "oidc")]
#[tokio::test]
async fn oidc_client_credentials_log_in() {
    let (url, requests) = fake_identity_provider().await;
    let bootstrap = props("sasl_plaintext-oauthbearer").get("bootstrap.servers").expect("bootstrap").to_string();
    let p = Properties::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.oauthbearer.token.endpoint.url", url.as_str()),
        (
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="c" clientSecret="s" scope="kafka";"#,
        ),
    ]);
    let admin = Admin::from_properties(&p).await.expect("admin with OIDC tokens");
    admin.list_share_groups().await.expect("list");
    assert_eq!(requests.load(Ordering::SeqCst), 1, "one token, cached for every connection");
}

#[tokio::test]
async fn every_client_fails_fast_on_a_wrong_password() {
    let jaas =
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="wrong-secret";"#;
    let mut p = props_with("sasl_plaintext-scram-sha-512", &[("sasl.jaas.config", jaas)]);
    let started = Instant::now();
    let e = kafka_share::producer::Producer::from_properties(&p)
        .await
        .expect_err("producer with a wrong password");
    assert!(matches!(e, Error::Authentication { .. }), "{e:?}");
    p.set("group.id", "g");
    let e = ShareConsumer::from_properties(&p).await.expect_err("consumer with a wrong password");
    assert!(matches!(e, Error::Authentication { .. }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_token_that_can_no_longer_be_had_fails_poll_after_reauthentication() {
    // Tokens of 2 s on the REAUTH listener: the first logins work, then the provider fails,
    // so the next re-authentication fails, its connection closes, and the redial cannot log
    // in either. poll must report that, not retry behind the caller's back.
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "reauth-fail", 1).await;
    let group = common::new_group(&admin, "reauth-fail", None).await;
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let provider = move || {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            if n >= 3 {
                return Err(Error::Authentication {
                    mechanism: "OAUTHBEARER".into(),
                    message: "the identity provider revoked this client".into(),
                });
            }
            let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
            let jwt = kafka_share::security::unsecured_jwt::unsecured_jwt("alice", now, 60, &[])?;
            Ok(OAuthToken::new(jwt.expose()).expires_at(SystemTime::now() + Duration::from_secs(2)))
        }
    };
    let p = props("reauth-oauthbearer");
    let mut cfg = ShareConsumerConfig::new(p.get("bootstrap.servers").expect("bootstrap"), &group);
    cfg.cluster = cfg.cluster.with_oauth_token_provider(provider);
    cfg.cluster.security = SecurityConfig::from_properties(&p).expect("security");
    let consumer = ShareConsumer::connect(cfg).await.expect("the first logins work");
    consumer.subscribe([&topic]).expect("subscribe");
    let e = poll_error(&consumer, Duration::from_secs(60)).await;
    assert!(matches!(e, Error::Authentication { .. }), "{e:?}");
    assert!(e.to_string().contains("revoked"), "{e}");
    // A failed consumer sends nothing more until it closes (no metadata, lookup or
    // heartbeat, each of which would dial and ask the provider again). Only a connection
    // still open may ask once more, at its own re-authentication, which fails and closes it:
    // the poll failed on a dial, so at most two of the three (bootstrap, control, fetch) are.
    let attempts = calls.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(calls.load(Ordering::SeqCst) <= attempts + 2, "the provider is asked again and again");
    let _ = consumer.close(Duration::from_secs(5)).await;
}
