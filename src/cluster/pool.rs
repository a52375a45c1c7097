//! Dialing brokers and keeping one connection per (broker, traffic class).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;
use tracing::debug;

use super::sasl::SaslLogin;
use super::versions::ApiVersions;
use super::NetworkStats;
use crate::connection::{Connection, ConnectionConfig};
use crate::error::{check, Context, Error, Result};

/// Which traffic a connection carries. Long-poll ShareFetch requests sit on the broker for up
/// to `fetch.max.wait.ms`; heartbeats, acknowledgements and admin calls must never queue
/// behind them, so they get a connection of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrafficClass {
    /// Heartbeats, ShareAcknowledge, metadata, admin, produce.
    Control,
    /// ShareFetch long polls.
    Fetch,
}

/// A live connection with what its broker supports.
#[derive(Debug, Clone)]
pub struct BrokerConnection {
    /// The broker's node id (-1 for a bootstrap connection).
    pub node_id: i32,
    /// The connection.
    pub conn: Connection,
    /// Negotiated versions and features.
    pub versions: Arc<ApiVersions>,
}

/// How to open a connection: the socket settings, the login, the timeouts.
#[derive(Debug, Clone)]
pub struct DialConfig {
    /// Socket, framing and TLS settings.
    pub conn: ConnectionConfig,
    /// The SASL login, for SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<Arc<SaslLogin>>,
    /// Bounds TCP connect + TLS handshake, and then the SASL exchange.
    pub connect_timeout: Duration,
    /// Bounds ApiVersions.
    pub request_timeout: Duration,
}

/// Dials a broker, negotiates API versions, and logs in when SASL is configured.
pub async fn dial(node_id: i32, addr: &str, config: &DialConfig) -> Result<BrokerConnection> {
    let (connect_timeout, request_timeout) = (config.connect_timeout, config.request_timeout);
    let conn = Connection::connect(addr, config.conn.clone(), connect_timeout).await?;
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kafka-share"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    // A TLS or protocol mismatch shows up as the first answer failing: report that cause
    // itself (it is fatal), not the retriable "connection closed" around it.
    let resp = conn.call_timeout(&req, 3, request_timeout).await.map_err(|e| setup_error(e, addr, request_timeout))?;
    check(resp.error_code, None, || Context::api("ApiVersions").broker(node_id))?;
    let versions = Arc::new(ApiVersions::from_response(node_id, &resp));
    if let Some(login) = &config.sasl {
        if let Err(e) = super::sasl::authenticate(&conn, &versions, login, connect_timeout).await {
            conn.close(None);
            return Err(e);
        }
    }
    debug!(node_id, addr, "connected");
    Ok(BrokerConnection { node_id, conn, versions })
}

/// The error of a connection's first request (ApiVersions). A TLS or protocol mismatch
/// shows up as that answer failing: report that cause itself (it is fatal), not the
/// retriable "connection closed" around it. No answer in time is the connection's setup
/// timing out, not an "outcome unknown" (ApiVersions changes nothing on the broker): say so,
/// and what is usually wrong.
fn setup_error(e: Error, addr: &str, after: Duration) -> Error {
    let e = e.into_fatal_cause();
    let timed_out = match &e {
        Error::Timeout { .. } => true,
        Error::OutcomeUnknown { cause, .. } => matches!(**cause, Error::Timeout { .. }),
        _ => false,
    };
    if !timed_out {
        return e;
    }
    Error::Timeout {
        what: format!(
            "connection setup with {addr} (it accepted the connection but did not answer ApiVersions: \
             check that it is a Kafka listener and that security.protocol matches it, e.g. SSL for a TLS port)"
        ),
        after,
    }
}

/// One slot per (node, class); the slot's async mutex makes concurrent callers share one dial.
type Slot = Arc<tokio::sync::Mutex<Option<BrokerConnection>>>;

/// The pool of broker connections.
pub struct Pool {
    slots: Mutex<HashMap<(i32, TrafficClass), Slot>>,
    /// Brokers whose last dial or request failed, and when: "any broker" tries them last.
    failed: Mutex<HashMap<i32, Instant>>,
    stats: Arc<NetworkStats>,
}

impl Pool {
    /// An empty pool counting its connections in `stats`.
    pub fn new(stats: Arc<NetworkStats>) -> Pool {
        Pool { slots: Mutex::default(), failed: Mutex::default(), stats }
    }

    /// A live connection to `node_id` for `class`, dialing `addr` if there is none.
    pub async fn get(
        &self,
        node_id: i32,
        class: TrafficClass,
        addr: &str,
        config: &DialConfig,
    ) -> Result<BrokerConnection> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry((node_id, class)).or_default().clone()
        };
        let mut guard = slot.lock().await;
        if let Some(c) = guard.as_ref() {
            if !c.conn.is_closed() && c.conn.addr() == addr {
                return Ok(c.clone());
            }
        }
        match dial(node_id, addr, config).await {
            Ok(c) => {
                self.stats.connections_created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.note_success(node_id);
                *guard = Some(c.clone());
                Ok(c)
            }
            Err(e) => {
                self.note_failure(node_id);
                Err(e)
            }
        }
    }

    /// Notes that broker `node_id` could not be reached (dial or request failed).
    pub fn note_failure(&self, node_id: i32) {
        if node_id >= 0 {
            self.failed.lock().unwrap_or_else(|p| p.into_inner()).insert(node_id, Instant::now());
        }
    }

    fn note_success(&self, node_id: i32) {
        self.failed.lock().unwrap_or_else(|p| p.into_inner()).remove(&node_id);
    }

    /// Since when broker `node_id` has been failing, if its last dial or request failed.
    pub fn failing_since(&self, node_id: i32) -> Option<Instant> {
        self.failed.lock().unwrap_or_else(|p| p.into_inner()).get(&node_id).copied()
    }

    /// Closes every connection (their waiters get ConnectionClosed).
    pub fn close_all(&self) {
        let slots: Vec<Slot> = {
            let mut s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            s.drain().map(|(_, v)| v).collect()
        };
        for slot in slots {
            if let Ok(g) = slot.try_lock() {
                if let Some(c) = g.as_ref() {
                    c.conn.close(None);
                }
            }
        }
    }

    /// Closes the connections to one broker (e.g. after it stopped answering).
    pub fn close_node(&self, node_id: i32) {
        let slots: Vec<Slot> = {
            let s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            s.iter().filter(|((n, _), _)| *n == node_id).map(|(_, v)| v.clone()).collect()
        };
        for slot in slots {
            if let Ok(g) = slot.try_lock() {
                if let Some(c) = g.as_ref() {
                    c.conn.close(None);
                }
            }
        }
    }
}

impl Error {
    /// The error itself, or the fatal cause of a closed connection (a TLS failure), which
    /// retrying cannot fix and which says what to change.
    pub(crate) fn into_fatal_cause(self) -> Error {
        fn tls(e: &Error) -> Option<&Error> {
            match e {
                Error::Tls { .. } => Some(e),
                Error::ConnectionClosed { cause: Some(c), .. } | Error::OutcomeUnknown { cause: c, .. } => tls(c),
                _ => None,
            }
        }
        tls(&self).cloned().unwrap_or(self)
    }

    /// Whether the error means the connection is gone (so a redial may help).
    pub fn is_connection_error(&self) -> bool {
        matches!(
            self,
            Error::Io { .. } | Error::ConnectionClosed { .. } | Error::Malformed { .. } | Error::OutcomeUnknown { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listener_that_never_answers_is_a_setup_timeout_not_an_unknown_outcome() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // Accepts, keeps the socket open, never writes.
        let held = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
            drop(sock);
        });
        let config = DialConfig {
            conn: ConnectionConfig::default(),
            sasl: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_millis(200),
        };
        let e = dial(-1, &addr, &config).await.unwrap_err();
        assert!(matches!(&e, Error::Timeout { what, .. } if what.starts_with("connection setup with")), "{e:?}");
        assert!(!e.is_outcome_unknown());
        assert!(e.to_string().contains("security.protocol"), "{e}");
        held.abort();
    }
}
