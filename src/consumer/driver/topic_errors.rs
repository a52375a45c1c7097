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
//! group assigns its partitions once it exists (Java waits too). LEADER_NOT_AVAILABLE and
//! other retriable codes only mean "ask again", which the driver does when an assigned
//! partition has no known leader.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, ErrorCode};

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

    #[test]
    fn topics_no_longer_subscribed_are_not_reported() {
        let mut t = TopicErrors::default();
        t.on_metadata(&subs(&["gone"]), &[("gone".into(), 29)]);
        t.subscription_changed();
        t.on_metadata(&subs(&["other"]), &[]);
        assert!(t.take_next().is_none());
    }
}
