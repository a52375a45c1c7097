//! Per-topic errors from Metadata answers, kept until a poll reports them.
//!
//! Only the errors a user must act on are kept: TOPIC_AUTHORIZATION_FAILED (grant access or
//! unsubscribe) and INVALID_TOPIC_EXCEPTION (fix the name). Before this, the driver dropped
//! them and a poll on such a topic returned nothing for as long as one waited.
//!
//! Each is reported **once**, by the next poll, and the consumer goes on with its other
//! topics: neither error stops the member (the group and the other topics are fine), and
//! repeating it on every poll would bury the records of the healthy topics. This is Java's
//! behaviour too: its `Metadata` keeps the invalid and unauthorized topics of the last answer
//! and the next poll throws them once, then clears them. It is reported again when:
//! - a new subscription (any `subscribe` call) still names the topic, or
//! - a later answer refuses the topic again after one had accepted it.
//!
//! UNKNOWN_TOPIC_OR_PARTITION is no error here: the topic may be created later, and the
//! group assigns its partitions once it exists (Java waits too). It is logged at WARN, once
//! per Metadata answer, naming the topic ([`missing`]): else a worker on a misspelt or
//! not yet created topic idles with no word (Java's client warns too). LEADER_NOT_AVAILABLE and
//! other retriable codes only mean "ask again", which the driver does when an assigned
//! partition has no known leader.
//!
//! **Corrupt batches** take the same road: a record batch of a subscribed topic that could not
//! be decoded has had its acquired records rejected already (`fetch.rs`), and the poll is told
//! once with [`Error::CorruptRecord`]. Unlike a refusal it is not reported ahead of the
//! buffered records, but where Java reports it: after the records of its partition that came
//! before the bad batch, and before those that came after it. So while such an error waits,
//! a poll is handed at most the records buffered ahead of the batch's successors
//! ([`PollAnswer::UpTo`]), and the poll after that gets the error.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::error::{Error, ErrorCode};
use crate::share::TopicIdPartition;

/// Whether a topic-level Metadata error code is one to report to the application.
fn reported(code: i16) -> bool {
    ErrorCode(code).is_topic_refused()
}

#[derive(Debug, Default)]
pub(crate) struct TopicErrors {
    /// The reportable error each subscribed topic had in the last Metadata answer.
    current: BTreeMap<String, i16>,
    /// Topics whose current error a poll has already returned.
    told: BTreeSet<String>,
    /// Corrupt batches not yet reported, oldest first.
    corrupt: VecDeque<CorruptReport>,
}

/// A corrupt batch, waiting for the records of its partition ahead of it to be handed out.
#[derive(Debug)]
struct CorruptReport {
    tp: TopicIdPartition,
    /// The batch's first offset: buffered records of `tp` below it came before the batch.
    first_offset: i64,
    /// An [`Error::CorruptRecord`].
    error: Error,
}

/// What a waiting poll gets.
#[derive(Debug)]
pub(crate) enum PollAnswer {
    /// This error, instead of records.
    Error(Error),
    /// Records, at most this many: those buffered ahead of a corrupt batch's successors.
    UpTo(usize),
    /// Records, as many as it asks for.
    Records,
}

impl TopicErrors {
    /// A new subscription: everything is reported afresh.
    pub(crate) fn subscription_changed(&mut self) {
        self.current.clear();
        self.told.clear();
    }

    /// Takes the per-topic error codes of a Metadata answer for `subscription`. A subscribed
    /// topic the answer does not list as failed is fine now: a later refusal is news again.
    pub(crate) fn on_metadata<'a>(
        &mut self,
        subscription: impl IntoIterator<Item = &'a String>,
        errors: &[(String, i16)],
    ) {
        let failed: BTreeMap<&str, i16> = errors.iter().map(|(t, c)| (t.as_str(), *c)).collect();
        for topic in subscription {
            match failed.get(topic.as_str()) {
                Some(&code) if reported(code) => {
                    if self.current.insert(topic.clone(), code) != Some(code) {
                        self.told.remove(topic); // a different refusal than the one told
                    }
                }
                _ => {
                    self.current.remove(topic);
                    self.told.remove(topic);
                }
            }
        }
    }

    /// The next error a poll should return (topics in name order, one per poll), marked as
    /// told.
    pub(crate) fn take_next(&mut self) -> Option<Error> {
        let (topic, code) = self.current.iter().find(|(t, _)| !self.told.contains(*t))?;
        let e = Error::for_topic(*code, "Metadata", topic);
        self.told.insert(topic.clone());
        e
    }

    /// Whether a poll would get an error now.
    pub(crate) fn has_untold(&self) -> bool {
        self.current.keys().any(|t| !self.told.contains(t))
    }

    /// A corrupt batch of `tp` starting at `first_offset` (its acquired records already
    /// rejected), to report with `error`.
    pub(crate) fn corrupt_batch(&mut self, tp: TopicIdPartition, first_offset: i64, error: Error) {
        self.corrupt.push_back(CorruptReport { tp, first_offset, error });
    }

    /// Whether a poll may get anything but [`PollAnswer::Records`].
    pub(crate) fn has_pending(&self) -> bool {
        !self.corrupt.is_empty() || self.has_untold()
    }

    /// What a waiting poll gets, given the buffered runs of records in the order polls take
    /// them: (partition, offsets). A refusal comes first; then the oldest corrupt batch whose
    /// partition has no record from before it left in the buffer ahead of its successors.
    /// An error returned is marked as told.
    pub(crate) fn poll_answer<R, O>(&mut self, runs: R) -> PollAnswer
    where
        R: Iterator<Item = (TopicIdPartition, O)> + Clone,
        O: ExactSizeIterator<Item = i64> + Clone,
    {
        if let Some(e) = self.take_next() {
            return PollAnswer::Error(e);
        }
        let mut cap: Option<usize> = None;
        for i in 0..self.corrupt.len() {
            let r = &self.corrupt[i];
            match ahead_of(r.tp, r.first_offset, runs.clone()) {
                None => {
                    if let Some(r) = self.corrupt.remove(i) {
                        return PollAnswer::Error(r.error);
                    }
                }
                Some(Some(n)) => cap = Some(cap.map_or(n, |c| c.min(n))),
                Some(None) => {}
            }
        }
        cap.map_or(PollAnswer::Records, PollAnswer::UpTo)
    }
}

/// The subscribed topics a Metadata answer says do not exist (UNKNOWN_TOPIC_OR_PARTITION or
/// UNKNOWN_TOPIC_ID), in the answer's order.
pub(crate) fn missing<'a>(subscription: &BTreeSet<String>, errors: &'a [(String, i16)]) -> Vec<&'a str> {
    errors
        .iter()
        .filter(|(t, c)| ErrorCode(*c).is_unknown_topic_or_partition() && subscription.contains(t))
        .map(|(t, _)| t.as_str())
        .collect()
}

/// Walks the buffered runs in delivery order up to the first record of `tp` at or after
/// `first_offset` (a successor of the corrupt batch). `None` when no record of `tp` from
/// before the batch comes ahead of it: the error is due. Otherwise `Some` of how many records
/// come ahead of the successor (`None` without a successor buffered): at least one, so polls
/// make progress toward the error.
fn ahead_of<R, O>(tp: TopicIdPartition, first_offset: i64, runs: R) -> Option<Option<usize>>
where
    R: Iterator<Item = (TopicIdPartition, O)>,
    O: ExactSizeIterator<Item = i64> + Clone,
{
    let mut count = 0;
    let mut earlier = false;
    for (run_tp, offsets) in runs {
        let len = offsets.len();
        if run_tp == tp {
            let before = offsets.take_while(|&o| o < first_offset).count();
            earlier |= before > 0;
            if before < len {
                return earlier.then_some(Some(count + before));
            }
        }
        count += len;
    }
    earlier.then_some(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_refusal_is_reported_once() {
        let mut t = TopicErrors::default();
        let s = subs(&["denied", "fine"]);
        t.on_metadata(&s, &[("denied".into(), 29)]);
        assert!(t.has_untold());
        assert!(matches!(t.take_next(), Some(Error::TopicAuthorizationFailed { topic }) if topic == "denied"));
        assert!(t.take_next().is_none());
        // The same answer again is no news.
        t.on_metadata(&s, &[("denied".into(), 29)]);
        assert!(t.take_next().is_none());
    }

    #[test]
    fn several_topics_come_one_per_poll() {
        let mut t = TopicErrors::default();
        let s = subs(&["a", "b"]);
        t.on_metadata(&s, &[("b".into(), 17), ("a".into(), 29)]);
        assert!(matches!(t.take_next(), Some(Error::TopicAuthorizationFailed { topic }) if topic == "a"));
        assert!(matches!(t.take_next(), Some(Error::InvalidTopic { topic, .. }) if topic == "b"));
        assert!(t.take_next().is_none());
    }

    #[test]
    fn unknown_and_retriable_topics_are_not_errors() {
        let mut t = TopicErrors::default();
        let s = subs(&["later", "moving"]);
        t.on_metadata(&s, &[("later".into(), 3), ("moving".into(), 5)]);
        assert!(!t.has_untold());
        assert!(t.take_next().is_none());
    }

    #[test]
    fn missing_subscribed_topics_are_named_for_the_warning() {
        let s: BTreeSet<String> = subs(&["orders", "ordres", "denied"]).into_iter().collect();
        let errors = [("ordres".into(), 3), ("denied".into(), 29), ("other".into(), 3), ("byid".into(), 100)];
        assert_eq!(missing(&s, &errors), vec!["ordres"], "subscribed, and unknown to the broker");
        assert!(missing(&s, &[]).is_empty());
    }

    #[test]
    fn a_new_subscription_reports_again() {
        let mut t = TopicErrors::default();
        let s = subs(&["denied"]);
        t.on_metadata(&s, &[("denied".into(), 29)]);
        assert!(t.take_next().is_some());
        t.subscription_changed();
        assert!(t.take_next().is_none(), "nothing until the new subscription's metadata");
        t.on_metadata(&s, &[("denied".into(), 29)]);
        assert!(t.take_next().is_some());
    }

    #[test]
    fn refused_again_after_accepted_is_news() {
        let mut t = TopicErrors::default();
        let s = subs(&["flaky"]);
        t.on_metadata(&s, &[("flaky".into(), 29)]);
        assert!(t.take_next().is_some());
        t.on_metadata(&s, &[]);
        assert!(!t.has_untold());
        t.on_metadata(&s, &[("flaky".into(), 29)]);
        assert!(t.take_next().is_some());
    }

    #[test]
    fn a_different_refusal_is_news() {
        let mut t = TopicErrors::default();
        let s = subs(&["x"]);
        t.on_metadata(&s, &[("x".into(), 29)]);
        assert!(t.take_next().is_some());
        t.on_metadata(&s, &[("x".into(), 17)]);
        assert!(matches!(t.take_next(), Some(Error::InvalidTopic { .. })));
    }

    fn tp(partition: i32) -> TopicIdPartition {
        TopicIdPartition { topic_id: uuid::Uuid::from_u128(7), partition }
    }

    fn corrupt(partition: i32, first: i64) -> Error {
        Error::CorruptRecord {
            topic: "t".into(),
            partition,
            first_offset: first,
            last_offset: first + 4,
            detail: "bad".into(),
        }
    }

    /// Asks `t` with the buffer `buffer`: (partition, offsets) runs.
    fn answer(t: &mut TopicErrors, buffer: &[(i32, Vec<i64>)]) -> PollAnswer {
        t.poll_answer(buffer.iter().map(|(p, o)| (tp(*p), o.iter().copied())))
    }

    #[test]
    fn a_corrupt_batch_waits_for_the_records_before_it() {
        let mut t = TopicErrors::default();
        t.corrupt_batch(tp(0), 10, corrupt(0, 10));
        assert!(t.has_pending());
        // Partition 0's records before the batch, another partition's, then the successors.
        let buffer = vec![(0, vec![7, 8, 9]), (1, vec![3, 4]), (0, vec![15, 16])];
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::UpTo(5)));
        // Those taken: the error, once, even with the successors still buffered.
        let buffer = vec![(0, vec![15, 16])];
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::Error(Error::CorruptRecord { partition: 0, .. })));
        assert!(!t.has_pending());
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::Records));
    }

    #[test]
    fn a_corrupt_batch_with_nothing_before_it_is_reported_at_once() {
        let mut t = TopicErrors::default();
        t.corrupt_batch(tp(0), 10, corrupt(0, 10));
        let buffer = vec![(1, vec![1]), (0, vec![15, 16])];
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::Error(_)));
        // Earlier records with no successor buffered: no cap, but no error yet.
        t.corrupt_batch(tp(0), 10, corrupt(0, 10));
        assert!(matches!(answer(&mut t, &[(0, vec![8, 9])]), PollAnswer::Records));
        assert!(matches!(answer(&mut t, &[]), PollAnswer::Error(_)));
    }

    #[test]
    fn a_refusal_comes_before_a_corrupt_batch_and_caps_combine() {
        let mut t = TopicErrors::default();
        t.corrupt_batch(tp(0), 10, corrupt(0, 10));
        t.corrupt_batch(tp(1), 5, corrupt(1, 5));
        t.on_metadata(&subs(&["denied"]), &[("denied".into(), 29)]);
        let buffer = vec![(1, vec![2, 3]), (0, vec![8, 9, 10]), (1, vec![5])];
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::Error(Error::TopicAuthorizationFailed { .. })));
        // Partition 0's successor comes after 4 records, partition 1's after 5.
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::UpTo(4)));
        let buffer = vec![(0, vec![10]), (1, vec![5])];
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::Error(Error::CorruptRecord { partition: 0, .. })));
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::Error(Error::CorruptRecord { partition: 1, .. })));
        assert!(matches!(answer(&mut t, &buffer), PollAnswer::Records));
    }

    #[test]
    fn topics_no_longer_subscribed_are_not_reported() {
        let mut t = TopicErrors::default();
        t.on_metadata(&subs(&["gone"]), &[("gone".into(), 29)]);
        t.subscription_changed();
        t.on_metadata(&subs(&["other"]), &[]);
        assert!(t.take_next().is_none());
    }
}
