//! The transforms that choose a record's topic or drop it: RegexRouter, TimestampRouter,
//! Filter.

use regex::Regex;

use super::super::data::ConnectRecord;
use super::super::transform::{required, TransformSettings, Transformation};
use super::date_format::{format_timestamp, parse_date_format, Piece};

/// A Java regex replacement (`$1`) in Rust's syntax (`${1}`, so `$1a` stays group 1 then `a`).
fn java_replacement(r: &str) -> String {
    let mut out = String::with_capacity(r.len() + 4);
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push_str("${");
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    out.push(d);
                    chars.next();
                }
                out.push('}');
            }
            c => out.push(c),
        }
    }
    out
}

/// RegexRouter: a topic that matches `regex` as a whole becomes `replacement`.
pub(crate) struct RegexRouter {
    regex: Regex,
    replacement: String,
}

impl RegexRouter {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        let re = required(s, "regex")?;
        // Java's `Matcher.matches`: the whole topic.
        let regex = Regex::new(&format!("^(?:{re})$")).map_err(|e| format!("regex {re:?}: {e}"))?;
        let replacement = s.get("replacement").ok_or("missing setting \"replacement\"")?;
        Ok(RegexRouter { regex, replacement: java_replacement(replacement) })
    }
}

impl Transformation for RegexRouter {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        if self.regex.is_match(&r.topic) {
            r.topic = self.regex.replace(&r.topic, self.replacement.as_str()).into_owned();
        }
        Ok(Some(r))
    }
}

/// TimestampRouter: the topic becomes `topic.format` (default `${topic}-${timestamp}`), the
/// record's timestamp written in `timestamp.format` (Java's SimpleDateFormat letters `yyyy`,
/// `yy`, `MM`, `dd`, `HH`, `mm`, `ss`, `SSS`, quoted text; default `yyyyMMdd`), in UTC.
pub(crate) struct TimestampRouter {
    topic_format: String,
    timestamp_format: Vec<Piece>,
}

impl TimestampRouter {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        Ok(TimestampRouter {
            topic_format: s.get("topic.format").cloned().unwrap_or_else(|| "${topic}-${timestamp}".to_string()),
            timestamp_format: parse_date_format(s.get("timestamp.format").map(String::as_str).unwrap_or("yyyyMMdd"))?,
        })
    }
}

impl Transformation for TimestampRouter {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        if r.timestamp < 0 {
            return Err(format!("Timestamp missing on record of {}-{}@{}", r.topic, r.partition, r.offset));
        }
        let ts = format_timestamp(&self.timestamp_format, r.timestamp);
        r.topic = self.topic_format.replace("${topic}", &r.topic).replace("${timestamp}", &ts);
        Ok(Some(r))
    }
}

/// Filter: drops every record it is applied to (with a predicate: the matching ones).
pub(crate) struct Filter;

impl Transformation for Filter {
    fn apply(&self, _r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> TransformSettings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn topic_after(t: &dyn Transformation, topic: &str) -> String {
        let mut r = super::super::fields_tests_record(serde_json::Value::Null);
        r.topic = topic.to_string();
        t.apply(r).unwrap().unwrap().topic
    }

    #[test]
    fn regex_router_replaces_whole_matches_with_java_group_syntax() {
        let t = RegexRouter::new(&settings(&[("regex", "(.*)-raw"), ("replacement", "$1a-clean")])).unwrap();
        assert_eq!(topic_after(&t, "orders-raw"), "ordersa-clean");
        assert_eq!(topic_after(&t, "orders-raw-x"), "orders-raw-x", "a partial match leaves it");
        assert!(RegexRouter::new(&settings(&[("regex", "(")])).is_err());
    }

    #[test]
    fn timestamp_router_formats_in_utc() {
        let t = TimestampRouter::new(&settings(&[])).unwrap();
        // 2023-11-14T22:13:20Z
        assert_eq!(topic_after(&t, "orders"), "orders-20231114");
        let t = TimestampRouter::new(&settings(&[
            ("topic.format", "${timestamp}_${topic}"),
            ("timestamp.format", "yy-MM-dd'T'HH:mm:ss.SSS"),
        ]))
        .unwrap();
        assert_eq!(topic_after(&t, "o"), "23-11-14T22:13:20.000_o");
        assert!(TimestampRouter::new(&settings(&[("timestamp.format", "EEE")])).is_err());
    }

    #[test]
    fn filter_drops() {
        assert!(Filter.apply(super::super::fields_tests_record(serde_json::Value::Null)).unwrap().is_none());
    }
}
