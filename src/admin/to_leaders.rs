//! Partition requests sent to each partition's leader, asked again while a leader moves: the
//! one loop behind [`Admin::list_offsets`](super::Admin::list_offsets) and
//! [`Admin::delete_records`](super::Admin::delete_records) (and any later per-leader API).
//!
//! Each round refreshes the metadata of the topics still to do, groups the partitions by
//! their leader, and hands each leader's share to the API's `ask`, which sends one request
//! and answers one `Result` per partition. A retriable error (a leader that moved, a
//! partition without a leader) puts the partition in the next round, after the cluster's
//! backoff; after ten rounds it keeps the error it last had.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use super::offsets::TopicPartition;
use super::Admin;
use crate::error::{Context, Error, ErrorCode, Result};

/// Partitions (each with its argument) under their leaders, and those whose leader the
/// metadata does not name, each with the error that says so.
type ByLeader<P> = (BTreeMap<i32, Vec<(TopicPartition, P)>>, Vec<((TopicPartition, P), Error)>);

/// Rounds before a partition whose leader keeps failing keeps its last error.
const ROUNDS: u32 = 10;

impl Admin {
    /// Sends `parts` (each partition with its argument) to their leaders through `ask` until
    /// every partition has an answer that is not retriable, or [`ROUNDS`] rounds passed.
    /// `ask(leader, parts)` answers each of the given partitions (any order); a partition it
    /// leaves out is an [`Error::IncompleteResponse`] for the whole call, as a response that
    /// omits one is malformed. A request-level failure (connection, timeout) ends the call.
    pub(super) async fn to_leaders<P, T, F, Fut>(
        &self,
        api: &'static str,
        parts: &[(TopicPartition, P)],
        mut ask: F,
    ) -> Result<BTreeMap<TopicPartition, Result<T>>>
    where
        P: Clone,
        F: FnMut(i32, Vec<(TopicPartition, P)>) -> Fut,
        Fut: Future<Output = Result<Vec<(TopicPartition, Result<T>)>>>,
    {
        let mut done: BTreeMap<TopicPartition, Result<T>> = BTreeMap::new();
        let mut todo: Vec<(TopicPartition, P)> = parts.to_vec();
        let mut backoff = self.cluster.config().backoff();
        loop {
            let topics: Vec<String> =
                todo.iter().map(|(tp, _)| tp.topic.clone()).collect::<BTreeSet<_>>().into_iter().collect();
            self.cluster.refresh_metadata(&topics).await?;
            let (by_leader, mut retry) = self.by_leader(api, todo.drain(..));
            for (leader, sent) in by_leader {
                let mut args: BTreeMap<TopicPartition, P> = sent.iter().cloned().collect();
                for (tp, answer) in ask(leader, sent).await? {
                    // A partition answered twice, or one never asked, is ignored: only the
                    // ones still awaited count.
                    let Some(arg) = args.remove(&tp) else { continue };
                    match answer {
                        Err(e) if e.is_retriable() => retry.push(((tp, arg), e)),
                        answer => {
                            done.insert(tp, answer);
                        }
                    }
                }
                if let Some((tp, _)) = args.into_iter().next() {
                    return Err(Error::IncompleteResponse { api, missing: tp.to_string() });
                }
            }
            if retry.is_empty() {
                return Ok(done);
            }
            if backoff.attempts() >= ROUNDS {
                // Still failing: each partition keeps the error it last had.
                done.extend(retry.into_iter().map(|((tp, _), e)| (tp, Err(e))));
                return Ok(done);
            }
            tokio::time::sleep(backoff.next_delay()).await;
            todo = retry.into_iter().map(|(part, _)| part).collect();
        }
    }

    /// Each partition under its leader in the cluster's metadata as it stands (no refresh),
    /// or, when the metadata names none, with the retriable `LEADER_NOT_AVAILABLE` that says so.
    pub(super) fn by_leader<P>(
        &self,
        api: &'static str,
        parts: impl IntoIterator<Item = (TopicPartition, P)>,
    ) -> ByLeader<P> {
        let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, P)>> = BTreeMap::new();
        let mut leaderless = Vec::new();
        for (tp, arg) in parts {
            match self.cluster.with_metadata(|m| m.leader(&tp.topic, tp.partition)) {
                Some(l) => by_leader.entry(l).or_default().push((tp, arg)),
                None => {
                    let e = Error::Broker {
                        context: Context::api(api).partition(&tp.topic, tp.partition),
                        code: ErrorCode::LEADER_NOT_AVAILABLE,
                        message: Some("the cluster metadata names no leader".into()),
                    };
                    leaderless.push(((tp, arg), e));
                }
            }
        }
        (by_leader, leaderless)
    }
}
