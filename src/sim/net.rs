//! The network between the simulated clients and brokers: connections per (client, broker,
//! traffic class), requests in flight on them, and what a lost answer looks like to the
//! client (as `src/connection/` reports it: `Error::OutcomeUnknown` with the timeout or the
//! closed connection as its cause when the request was written whole; the timeout also
//! closes the connection, so the broker drops the share session opened on it).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ShareGroupHeartbeatRequest;

use crate::error::Error;
use crate::protocol::share::{ShareAcknowledgeRequest, ShareFetchRequest};
use crate::share::session::Sent;

use super::faults::Fate;
use super::state::ClientId;

/// Which connection a request uses: share traffic has its own (the session lives on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    Share,
    Control,
}

/// What a request carries.
#[derive(Debug)]
pub(crate) enum Body {
    Fetch { request: ShareFetchRequest, sent: Sent, sent_at: Instant },
    Ack { request: ShareAcknowledgeRequest, sent: Sent },
    Heartbeat(ShareGroupHeartbeatRequest),
}

impl Body {
    pub(crate) fn api(&self) -> &'static str {
        match self {
            Body::Fetch { .. } => "ShareFetch",
            Body::Ack { .. } => "ShareAcknowledge",
            Body::Heartbeat(_) => "ShareGroupHeartbeat",
        }
    }
}

/// A request on its way or waiting for its answer.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub client: ClientId,
    pub node: i32,
    pub conn: u64,
    pub body: Body,
    pub fate: Fate,
    /// When the client stops waiting.
    pub deadline: Instant,
    /// Its timeout (for the error).
    pub timeout: Duration,
}

/// The connections of every client.
#[derive(Debug, Default)]
pub(crate) struct Net {
    conns: BTreeMap<(ClientId, i32, Class), u64>,
    next_conn: u64,
    /// Requests sent per (client, broker): the index of a request's fate.
    counts: BTreeMap<(ClientId, i32), u64>,
    pub inflight: BTreeMap<u64, InFlight>,
    /// Connections the client was told are muted (an answer's throttle time), until then.
    pub muted: BTreeMap<(ClientId, i32, Class), Instant>,
}

impl Net {
    /// An answer on (client, node, class) carried `throttle_ms`, delivered at `now`.
    pub(crate) fn throttled(&mut self, client: ClientId, node: i32, class: Class, throttle_ms: i32, now: Instant) {
        if throttle_ms > 0 {
            let until = now + Duration::from_millis(throttle_ms as u64);
            let e = self.muted.entry((client, node, class)).or_insert(until);
            *e = (*e).max(until);
        }
    }

    /// The client sends on a connection it was told is muted (KIP-219 says it must wait).
    pub(crate) fn check_not_muted(
        &self,
        client: ClientId,
        node: i32,
        class: Class,
        now: Instant,
    ) -> std::result::Result<(), String> {
        match self.muted.get(&(client, node, class)) {
            Some(until) if *until > now => Err(format!(
                "c{client} sent to b{node} on a {class:?} connection the broker muted (throttle) for {:?} more",
                *until - now
            )),
            _ => Ok(()),
        }
    }

    /// The connection a request of `class` uses (dialled if there is none).
    pub(crate) fn conn(&mut self, client: ClientId, node: i32, class: Class) -> u64 {
        let next = &mut self.next_conn;
        *self.conns.entry((client, node, class)).or_insert_with(|| {
            *next += 1;
            *next
        })
    }

    /// The next request's index on (client, broker).
    pub(crate) fn count(&mut self, client: ClientId, node: i32) -> u64 {
        let c = self.counts.entry((client, node)).or_default();
        *c += 1;
        *c
    }

    /// Closes a connection: returns the ids of the requests on it (their waiters fail).
    pub(crate) fn close(&mut self, conn: u64) -> Vec<u64> {
        self.conns.retain(|_, c| *c != conn);
        self.inflight.iter().filter(|(_, r)| r.conn == conn).map(|(id, _)| *id).collect()
    }

    /// Every open connection of `client`: (broker, conn).
    pub(crate) fn conns_of(&self, client: ClientId) -> Vec<(i32, u64)> {
        self.conns.iter().filter(|((c, _, _), _)| *c == client).map(|((_, n, _), id)| (*n, *id)).collect()
    }

    /// The open connections of `client` (all clients if None) to `node`: (class, conn).
    pub(crate) fn conns_to(&self, client: Option<ClientId>, node: i32) -> Vec<u64> {
        self.conns
            .iter()
            .filter(|((c, n, _), _)| *n == node && client.is_none_or(|x| x == *c))
            .map(|(_, id)| *id)
            .collect()
    }
}

pub(crate) fn addr(node: i32) -> String {
    format!("sim-broker-{node}:9092")
}

/// The error a request gets when its answer did not come in time (written whole).
pub(crate) fn timed_out(api: &'static str, node: i32, after: Duration) -> Error {
    Error::OutcomeUnknown {
        api,
        addr: addr(node),
        cause: Arc::new(Error::Timeout { what: format!("{api} to {}", addr(node)), after }),
    }
}

/// The error a request gets when its connection broke while it waited (written whole).
pub(crate) fn reset(api: &'static str, node: i32) -> Error {
    let closed = Error::ConnectionClosed {
        addr: addr(node),
        cause: Some(Arc::new(Error::Io {
            addr: addr(node),
            source: Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        })),
    };
    Error::OutcomeUnknown { api, addr: addr(node), cause: Arc::new(closed) }
}

/// The error a request gets when its broker is down (nothing written).
pub(crate) fn refused(node: i32) -> Error {
    Error::Io { addr: addr(node), source: Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)) }
}
