//! The topic matcher of a pattern subscription: [`TopicPattern`], a regex matched against
//! whole topic names, and [`PatternSubscription`], one `subscribe_pattern` call with the
//! names the driver matched last. The handle compiles one and hands it over
//! (`Command::SubscribePattern`); the driver (`pattern.rs`) lists the topics and keeps the
//! matches in it. A leaf: it knows neither of them.

use std::collections::BTreeSet;
use std::sync::Mutex;

use regex::Regex;

use crate::error::{Error, Result};

/// A compiled topic pattern, matched against whole topic names.
#[derive(Debug, Clone)]
pub(crate) struct TopicPattern {
    /// As the application wrote it (for messages).
    source: String,
    /// `^(?:source)$`.
    regex: Regex,
}

impl TopicPattern {
    /// Compiles `pattern` anchored at both ends, as Java's `Pattern.matcher(topic).matches()`
    /// (which the Java consumer uses for pattern subscriptions): `orders` matches the topic
    /// `orders` only, not `orders-eu`.
    pub(crate) fn new(pattern: &str) -> Result<TopicPattern> {
        let invalid =
            |e: regex::Error| Error::InvalidArgument(format!("invalid topic pattern `{pattern}` (regex syntax): {e}"));
        // Compiled alone first: a pattern that is not a regex by itself (`a)|(b`) would
        // otherwise close our group and escape the anchors, and the error positions are
        // then the application's.
        Regex::new(pattern).map_err(invalid)?;
        let regex = Regex::new(&format!("^(?:{pattern})$"))
            // A valid pattern that breaks the wrapping ends in a comment of verbose mode
            // (`(?x)orders.* # all regions`), which took our `)$`: a newline ends the comment
            // and, verbose mode being on there, means nothing else.
            .or_else(|_| Regex::new(&format!("^(?:{pattern}\n)$")))
            .map_err(invalid)?;
        Ok(TopicPattern { source: pattern.to_string(), regex })
    }

    /// Whether `topic` is subscribed by this pattern. Internal topics (names starting with
    /// `__`: `__consumer_offsets`, `__share_group_state`, ...) never are.
    pub(crate) fn matches(&self, topic: &str) -> bool {
        !topic.starts_with("__") && self.regex.is_match(topic)
    }

    /// The names among `topics` that match.
    pub(crate) fn select<'a>(&self, topics: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
        topics.into_iter().filter(|t| self.matches(t)).cloned().collect()
    }

    /// The pattern as given.
    pub(crate) fn as_str(&self) -> &str {
        &self.source
    }
}

/// One `subscribe_pattern` call: the pattern, and the topics the driver found matching last.
/// A new call makes a new one, so an answer for an older pattern never shows in
/// `subscription()`.
#[derive(Debug)]
pub(crate) struct PatternSubscription {
    pub(crate) pattern: TopicPattern,
    matched: Mutex<BTreeSet<String>>,
}

impl PatternSubscription {
    pub(crate) fn new(pattern: TopicPattern) -> PatternSubscription {
        PatternSubscription { pattern, matched: Mutex::new(BTreeSet::new()) }
    }

    /// The topics matched by the last listing (none before the first).
    pub(crate) fn matched(&self) -> BTreeSet<String> {
        self.matched.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn set_matched(&self, topics: BTreeSet<String>) {
        *self.matched.lock().unwrap_or_else(|p| p.into_inner()) = topics;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn matches_the_whole_name_only() {
        let p = TopicPattern::new(r"orders\..*").unwrap();
        assert!(p.matches("orders.eu"));
        assert!(p.matches("orders."));
        assert!(!p.matches("old-orders.eu"), "anchored at the start");
        assert!(!p.matches("orders"), "the dot is literal and required");
        assert!(!p.matches("ordersXeu"));
        let p = TopicPattern::new("orders").unwrap();
        assert!(p.matches("orders"));
        assert!(!p.matches("orders-eu"), "anchored at the end");
        assert!(!p.matches("my-orders"));
    }

    #[test]
    fn alternation_is_anchored_as_a_whole() {
        // Without the group, `^a|b$` would match "ab-x" (a prefix) and "x-b" (a suffix).
        let p = TopicPattern::new("a|b").unwrap();
        assert!(p.matches("a") && p.matches("b"));
        assert!(!p.matches("ab-x") && !p.matches("x-b"));
    }

    #[test]
    fn java_style_patterns_work() {
        let p = TopicPattern::new(r"(?i)events-\d+").unwrap();
        assert!(p.matches("EVENTS-12"));
        assert!(!p.matches("events-"));
        let p = TopicPattern::new(r"[a-z_]+\.v[0-9]").unwrap();
        assert!(p.matches("billing_raw.v2"));
        let p = TopicPattern::new(r"\w+-(eu|us)").unwrap();
        assert!(p.matches("clicks-eu") && !p.matches("clicks-asia"));
    }

    #[test]
    fn internal_topics_never_match() {
        let p = TopicPattern::new(".*").unwrap();
        assert!(p.matches("orders"));
        assert!(!p.matches("__consumer_offsets"));
        assert!(!p.matches("__share_group_state"));
        assert!(!TopicPattern::new("__.*").unwrap().matches("__transaction_state"));
        // One underscore is an ordinary topic.
        assert!(p.matches("_schemas"));
        let all = names(&["a", "__consumer_offsets", "b", "_c"]);
        assert_eq!(p.select(&all), names(&["_c", "a", "b"]).into_iter().collect());
    }

    #[test]
    fn invalid_pattern_names_the_pattern_and_the_problem() {
        for bad in ["orders(", "[a-", "*x", "a{2,1}"] {
            let e = TopicPattern::new(bad).unwrap_err();
            assert!(matches!(&e, Error::InvalidArgument(m) if m.contains(bad)), "{bad}: {e}");
        }
        let e = TopicPattern::new("orders(").unwrap_err().to_string();
        assert!(e.contains("unclosed group"), "{e}");
    }

    #[test]
    fn a_pattern_cannot_escape_its_anchors() {
        // `^(?:a)|(b)$` would be a valid regex matching any name starting with "a".
        let e = TopicPattern::new("a)|(b").unwrap_err();
        assert!(e.to_string().contains("a)|(b"), "{e}");
        // Flags set inside the pattern stay inside its group: (?m) does not make our `$`
        // match before a newline.
        let p = TopicPattern::new("(?m)a$").unwrap();
        assert!(p.matches("a") && !p.matches("a\nb"));
        assert_eq!(TopicPattern::new("a").unwrap().as_str(), "a");
    }

    #[test]
    fn verbose_mode_with_a_trailing_comment() {
        let p = TopicPattern::new("(?x) orders \\. .*   # every region").unwrap();
        assert!(p.matches("orders.eu"));
        assert!(!p.matches("x-orders.eu"));
        assert!(!p.matches("orders.eu\n"));
        // Verbose mode without a trailing comment: the wrapping needs no newline.
        let p = TopicPattern::new("(?x) a | b ").unwrap();
        assert!(p.matches("a") && !p.matches("ab"));
    }

    #[test]
    fn matched_set_starts_empty_and_is_replaced() {
        let s = PatternSubscription::new(TopicPattern::new("t.*").unwrap());
        assert!(s.matched().is_empty());
        s.set_matched(["t1".to_string()].into());
        assert_eq!(s.matched(), ["t1".to_string()].into());
    }
}
