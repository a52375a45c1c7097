//! Share sessions on one cluster, keyed by (node, member) as each broker's
//! `ShareSessionCache` keys them by (group, member), with their epochs as Kafka 4.4 checks
//! them (`SharePartitionManager.newContext` for ShareFetch, `acknowledgeSessionUpdate` for
//! ShareAcknowledge):
//!
//! - epoch 0 opens a session, replacing the member's old one (whose records stay acquired:
//!   Kafka removes the session from its cache only; they go back when their locks lapse, or
//!   when the member leaves or its connection closes). A ShareFetch at epoch 0 must carry no
//!   acknowledgements (INVALID_REQUEST); a ShareAcknowledge never has epoch 0
//!   (INVALID_SHARE_SESSION_EPOCH).
//! - any other epoch needs the session (SHARE_SESSION_NOT_FOUND) and exactly its epoch
//!   (INVALID_SHARE_SESSION_EPOCH, and the session stays as it was: a client that lost an
//!   answer can still start anew at epoch 0); it moves the epoch on (wrapping to 1).
//! - epoch -1 (final) needs the session and no epoch; the caller applies the request's
//!   acknowledgements, then ends the session ([`ShareSessions::end`]) and releases what the
//!   member holds.
//!
//! A session belongs to the connection that opened it: when that closes, the session ends
//! (`ShareSessionCache`'s disconnect listener) and the member's records go back.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::ErrorCode;

/// A share session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    /// Unique in the cluster's life: acks can be told apart by the session that took them.
    pub(crate) id: u64,
    /// The epoch the next request must carry.
    pub(crate) epoch: i32,
    /// The connection that opened it.
    pub(crate) conn: u64,
    /// The partitions it fetches.
    pub(crate) parts: BTreeSet<i32>,
}

impl Session {
    /// A request's partitions to fetch join the session, its forgotten ones leave it.
    pub(crate) fn update(&mut self, added: impl IntoIterator<Item = i32>, forgotten: impl IntoIterator<Item = i32>) {
        self.parts.extend(added);
        for p in forgotten {
            self.parts.remove(&p);
        }
    }
}

/// Why a share request's session refused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionRefusal {
    /// No session for the member on this node.
    NotFound,
    /// The request's epoch is not the one the session expects.
    InvalidEpoch { expected: i32, got: i32 },
    /// A ShareAcknowledge at epoch 0.
    InitialAcknowledge,
    /// A ShareFetch at epoch 0 carrying acknowledgements.
    AcksOnInitialFetch,
}

impl SessionRefusal {
    /// The top-level error code Kafka answers.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            SessionRefusal::NotFound => ErrorCode::SHARE_SESSION_NOT_FOUND,
            SessionRefusal::InvalidEpoch { .. } | SessionRefusal::InitialAcknowledge => {
                ErrorCode::INVALID_SHARE_SESSION_EPOCH
            }
            SessionRefusal::AcksOnInitialFetch => ErrorCode::INVALID_REQUEST,
        }
    }
}

/// What a request did to its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionUse {
    /// Epoch 0: a new session (`replaced`: the member's old one on this node).
    Opened { id: u64, replaced: Option<Session> },
    /// The next request of a session (its epoch moved on).
    Next { id: u64 },
    /// Epoch -1: the session's last request; end it once the request is applied.
    Final { id: u64 },
}

/// The epoch after `e` (1 after `i32::MAX`: 0 and -1 have their own meaning).
pub(crate) fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX {
        1
    } else {
        e + 1
    }
}

/// The share sessions of a cluster, by key (node and member, as the wrapper names them).
#[derive(Debug, Clone)]
pub(crate) struct ShareSessions<K> {
    by_key: BTreeMap<K, Session>,
    next_id: u64,
}

impl<K> Default for ShareSessions<K> {
    fn default() -> Self {
        ShareSessions { by_key: BTreeMap::new(), next_id: 1 }
    }
}

/// The share request that uses a session: each API has its own rule at epoch 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionRequest {
    /// A ShareFetch on connection `conn` (epoch 0 opens a session there), carrying acks or not.
    Fetch { conn: u64, has_acks: bool },
    /// A ShareAcknowledge (never opens a session).
    Acknowledge,
}

impl SessionRequest {
    /// The API's name, for messages.
    pub(crate) fn api(self) -> &'static str {
        match self {
            SessionRequest::Fetch { .. } => "ShareFetch",
            SessionRequest::Acknowledge => "ShareAcknowledge",
        }
    }
}

impl<K: Ord + Clone> ShareSessions<K> {
    /// `request` of `key` at `epoch`: [`ShareSessions::fetch`] or [`ShareSessions::acknowledge`].
    pub(crate) fn take(&mut self, key: &K, epoch: i32, request: SessionRequest) -> Result<SessionUse, SessionRefusal> {
        match request {
            SessionRequest::Fetch { conn, has_acks } => self.fetch(key, conn, epoch, has_acks),
            SessionRequest::Acknowledge => self.acknowledge(key, epoch),
        }
    }

    /// A ShareFetch of `key` at `epoch` on connection `conn`.
    pub(crate) fn fetch(
        &mut self,
        key: &K,
        conn: u64,
        epoch: i32,
        has_acks: bool,
    ) -> Result<SessionUse, SessionRefusal> {
        if epoch == 0 {
            if has_acks {
                return Err(SessionRefusal::AcksOnInitialFetch);
            }
            let id = self.next_id;
            self.next_id += 1;
            let replaced = self.by_key.insert(key.clone(), Session { id, epoch: 1, conn, parts: BTreeSet::new() });
            return Ok(SessionUse::Opened { id, replaced });
        }
        self.next(key, epoch)
    }

    /// A ShareAcknowledge of `key` at `epoch`.
    pub(crate) fn acknowledge(&mut self, key: &K, epoch: i32) -> Result<SessionUse, SessionRefusal> {
        if epoch == 0 {
            return Err(SessionRefusal::InitialAcknowledge);
        }
        self.next(key, epoch)
    }

    fn next(&mut self, key: &K, epoch: i32) -> Result<SessionUse, SessionRefusal> {
        let s = self.by_key.get_mut(key).ok_or(SessionRefusal::NotFound)?;
        if epoch == -1 {
            return Ok(SessionUse::Final { id: s.id });
        }
        if epoch != s.epoch {
            return Err(SessionRefusal::InvalidEpoch { expected: s.epoch, got: epoch });
        }
        s.epoch = next_epoch(epoch);
        Ok(SessionUse::Next { id: s.id })
    }

    /// Ends `key`'s session (its final request was applied, the broker forgot it, the member
    /// left): returns it.
    pub(crate) fn end(&mut self, key: &K) -> Option<Session> {
        self.by_key.remove(key)
    }

    /// Connection `conn` closed: the sessions it opened end; returns them.
    pub(crate) fn conn_closed(&mut self, conn: u64) -> Vec<(K, Session)> {
        self.end_where(|_, s| s.conn == conn)
    }

    /// Ends every session `f` picks; returns them.
    pub(crate) fn end_where(&mut self, f: impl Fn(&K, &Session) -> bool) -> Vec<(K, Session)> {
        let gone: Vec<K> = self.by_key.iter().filter(|(k, s)| f(k, s)).map(|(k, _)| k.clone()).collect();
        gone.into_iter().filter_map(|k| self.by_key.remove(&k).map(|s| (k, s))).collect()
    }

    /// The keys of every session, in order. (The simulation's; the fake never lists them.)
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.by_key.keys()
    }

    pub(crate) fn get(&self, key: &K) -> Option<&Session> {
        self.by_key.get(key)
    }

    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut Session> {
        self.by_key.get_mut(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Key = (i32, &'static str);
    const A: Key = (1, "a");

    fn opened(s: &mut ShareSessions<Key>) -> u64 {
        match s.fetch(&A, 7, 0, false) {
            Ok(SessionUse::Opened { id, .. }) => id,
            other => panic!("not opened: {other:?}"),
        }
    }

    #[test]
    fn epochs_move_on_one_request_at_a_time() {
        let mut s = ShareSessions::default();
        let id = opened(&mut s);
        assert_eq!(s.fetch(&A, 7, 1, true), Ok(SessionUse::Next { id }));
        assert_eq!(s.acknowledge(&A, 2), Ok(SessionUse::Next { id }));
        assert_eq!(s.get(&A).map(|x| x.epoch), Some(3));
    }

    #[test]
    fn a_wrong_epoch_is_refused_and_the_session_kept() {
        let mut s = ShareSessions::default();
        let id = opened(&mut s);
        let refused = s.fetch(&A, 7, 5, false);
        assert_eq!(refused, Err(SessionRefusal::InvalidEpoch { expected: 1, got: 5 }));
        assert_eq!(refused.map_err(|e| e.code()), Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH));
        assert_eq!(s.fetch(&A, 7, 1, false), Ok(SessionUse::Next { id }), "kept as it was");
    }

    #[test]
    fn epoch_zero_rules() {
        let mut s: ShareSessions<Key> = ShareSessions::default();
        assert_eq!(s.acknowledge(&A, 0), Err(SessionRefusal::InitialAcknowledge));
        assert_eq!(s.fetch(&A, 7, 0, true).map_err(|e| e.code()), Err(ErrorCode::INVALID_REQUEST));
        assert_eq!(s.fetch(&A, 7, 3, false), Err(SessionRefusal::NotFound));
        let first = opened(&mut s);
        match s.fetch(&A, 8, 0, false) {
            Ok(SessionUse::Opened { replaced: Some(old), .. }) => assert_eq!(old.id, first),
            other => panic!("not replaced: {other:?}"),
        }
    }

    #[test]
    fn the_final_epoch_needs_a_session_and_no_epoch() {
        let mut s = ShareSessions::default();
        assert_eq!(s.acknowledge(&A, -1), Err(SessionRefusal::NotFound));
        let id = opened(&mut s);
        assert_eq!(s.acknowledge(&A, -1), Ok(SessionUse::Final { id }));
        assert!(s.end(&A).is_some());
        assert_eq!(s.fetch(&A, 7, -1, false), Err(SessionRefusal::NotFound));
    }

    #[test]
    fn a_closed_connection_ends_its_sessions_only() {
        let mut s = ShareSessions::default();
        opened(&mut s);
        assert!(s.fetch(&(2, "a"), 9, 0, false).is_ok());
        let gone = s.conn_closed(7);
        assert_eq!(gone.iter().map(|(k, _)| *k).collect::<Vec<_>>(), [A]);
        assert!(s.get(&(2, "a")).is_some());
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
