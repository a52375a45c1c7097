//! The predicates: TopicNameMatches, HasHeaderKey, RecordIsTombstone.

use regex::Regex;

use super::super::data::ConnectRecord;
use super::super::transform::{required, Predicate, TransformSettings};

/// TopicNameMatches: the topic matches `pattern` as a whole.
pub(crate) struct TopicNameMatches(Regex);

impl TopicNameMatches {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        let p = required(s, "pattern")?;
        Regex::new(&format!("^(?:{p})$")).map(TopicNameMatches).map_err(|e| format!("pattern {p:?}: {e}"))
    }
}

impl Predicate for TopicNameMatches {
    fn test(&self, r: &ConnectRecord) -> bool {
        self.0.is_match(&r.topic)
    }
}

/// HasHeaderKey: a header named `name` is present.
pub(crate) struct HasHeaderKey(String);

impl HasHeaderKey {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        Ok(HasHeaderKey(required(s, "name")?.to_string()))
    }
}

impl Predicate for HasHeaderKey {
    fn test(&self, r: &ConnectRecord) -> bool {
        r.header(&self.0).is_some()
    }
}

/// RecordIsTombstone: the value is null.
pub(crate) struct RecordIsTombstone;

impl Predicate for RecordIsTombstone {
    fn test(&self, r: &ConnectRecord) -> bool {
        r.value.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn each_predicate() {
        let mut r = super::super::fields_tests_record(json!({"a": 1}));
        let s = |k: &str, v: &str| [(k.to_string(), v.to_string())].into_iter().collect();
        assert!(TopicNameMatches::new(&s("pattern", "ord.*")).unwrap().test(&r));
        assert!(!TopicNameMatches::new(&s("pattern", "ord")).unwrap().test(&r), "a whole match");
        assert!(!HasHeaderKey::new(&s("name", "h")).unwrap().test(&r));
        r.headers.push(crate::protocol::records::Header::new(Bytes::from_static(b"h"), None));
        assert!(HasHeaderKey::new(&s("name", "h")).unwrap().test(&r));
        assert!(!RecordIsTombstone.test(&r));
        r.value = None;
        assert!(RecordIsTombstone.test(&r));
    }
}
