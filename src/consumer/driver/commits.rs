//! Commit waiters and acknowledgement completions: every acknowledgement's outcome goes to
//! the commits waiting for its broker, the commit callback and the metrics, here.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::output::Output;
use super::{AckEntry, DriverCore, Renewed, ReplyId, TopicPartition};
use crate::error::{Error, Result};
use crate::share::acks::{AckKind, Settled};
use crate::share::TopicIdPartition;

/// Results of one commit, per partition: `Ok(())`, or why the broker did not take the
/// acknowledgements (e.g. INVALID_RECORD_STATE when the lock had expired). Derefs to the map.
#[derive(Debug, Clone, Default)]
pub struct CommitResults(HashMap<TopicPartition, Result<()>>);

impl CommitResults {
    /// Whether every partition succeeded.
    pub fn is_ok(&self) -> bool {
        self.0.values().all(|r| r.is_ok())
    }

    /// The first failure, if any (partitions in no particular order).
    pub fn first_error(&self) -> Option<(&TopicPartition, &Error)> {
        self.0.iter().find_map(|(tp, r)| r.as_ref().err().map(|e| (tp, e)))
    }

    /// `Ok(())` when every partition succeeded, else the first error.
    pub fn into_result(self) -> Result<()> {
        match self.first_error() {
            Some((_, e)) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The per-partition map.
    pub fn into_inner(self) -> HashMap<TopicPartition, Result<()>> {
        self.0
    }
}

impl IntoIterator for CommitResults {
    type Item = (TopicPartition, Result<()>);
    type IntoIter = std::collections::hash_map::IntoIter<TopicPartition, Result<()>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a CommitResults {
    type Item = (&'a TopicPartition, &'a Result<()>);
    type IntoIter = std::collections::hash_map::Iter<'a, TopicPartition, Result<()>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl std::ops::Deref for CommitResults {
    type Target = HashMap<TopicPartition, Result<()>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

pub(crate) struct CommitWaiter {
    pub nodes: HashSet<i32>,
    pub results: CommitResults,
    /// The commit command's id, if it wants its results.
    pub id: Option<ReplyId>,
}

impl DriverCore {
    /// Hands completed acknowledgement results to commit waiters, the callback and metrics.
    ///
    /// Each result says who decided its acks ([`Settled`]): the client's own RELEASEs of
    /// records it never handed out are counted, and neither the callback nor a commit hears
    /// of them, as Java never reports records it did not deliver. Whatever path completes
    /// them (an answer, a request lost or timed out, a session reset, a redelivery that
    /// superseded them), the kind they were queued with decides, not the offset: the same
    /// offset may be the application's ack of one delivery and the client's release of
    /// another.
    pub(super) fn complete_acks(
        &mut self,
        node: Option<i32>,
        results: BTreeMap<TopicIdPartition, (Settled, Result<()>)>,
    ) {
        for (tp, (settled, r)) in results {
            let Settled { reported: offsets, unseen } = settled;
            self.shared.metrics.record_acks((offsets.len() + unseen.len()) as u64, r.is_err());
            if offsets.is_empty() {
                continue;
            }
            if !self.renewing.is_empty() {
                self.note_renewals(node, tp, &offsets, &r);
            }
            let name = self.to_topic_partition(&tp);
            for w in &mut self.commits {
                if node.is_none_or(|n| w.nodes.contains(&n)) {
                    match (w.results.get(&name), &r) {
                        (Some(Err(_)), Ok(())) => {} // keep the first failure
                        _ => {
                            w.results.0.insert(name.clone(), r.clone());
                        }
                    }
                }
            }
            // Queued before any reply this completion settles: the handle runs the callback
            // when that reply arrives, and the shell performs outputs in order.
            self.events.push_back(Output::AckCompleted { tp: name, offsets, result: r });
        }
        self.settle_commits();
    }

    /// Keeps the outcomes of the renewals among completed acks, for the next poll: answers
    /// from the broker each renewal went to (`node` None: failed here, before sending).
    pub(super) fn note_renewals(&mut self, node: Option<i32>, tp: TopicIdPartition, offsets: &[i64], r: &Result<()>) {
        for &offset in offsets {
            let sent_to = self.renewing.get(&(tp, offset)).copied();
            if sent_to.is_some_and(|to| node.is_none_or(|n| n == to)) {
                self.renewing.remove(&(tp, offset));
                let lock_deadline = node.and_then(|n| self.sessions.lock_until(n, tp, offset));
                self.renewed.push(Renewed { tp, offset, result: r.clone(), lock_deadline });
            }
        }
    }

    /// Completes commit waiters whose nodes have nothing left in flight or queued.
    pub(super) fn settle_commits(&mut self) {
        let sessions = &self.sessions;
        for w in &mut self.commits {
            w.nodes.retain(|id| sessions.has_pending_acks(*id));
        }
        let (done, pending): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.commits).into_iter().partition(|w| w.nodes.is_empty());
        self.commits = pending;
        for mut w in done {
            if let Some(r) = w.id.take() {
                self.reply_commit(r, w.results);
            }
        }
    }

    pub(super) fn report_local_failures(&mut self, failed: Vec<(AckEntry, Error)>, waiter: Option<&mut CommitWaiter>) {
        if failed.is_empty() {
            return;
        }
        // The application's acks, every one (the client's own never come this way).
        let mut by_tp: BTreeMap<TopicIdPartition, (Settled, Result<()>)> = BTreeMap::new();
        for (a, _) in &failed {
            if a.kind == AckKind::Renew {
                // A renewal that failed here still has an outcome for the poll waiting on it:
                // without one, that poll (which hands out nothing while renewals are pending)
                // would wait for good.
                self.renewing.insert((a.tp, a.offset), a.node);
            }
        }
        for (a, e) in failed {
            by_tp.entry(a.tp).or_insert_with(|| (Settled::default(), Err(e))).0.reported.push(a.offset);
        }
        if let Some(w) = waiter {
            for (tp, (_, r)) in &by_tp {
                w.results.0.insert(self.to_topic_partition(tp), r.clone());
            }
        }
        self.complete_acks(None, by_tp);
    }
}
