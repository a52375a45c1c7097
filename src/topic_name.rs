//! Kafka's rules for topic names, checked before a name is sent anywhere.
//!
//! The same rules as Kafka's `Topic.validate` (clients and brokers share them): not empty,
//! not "." or "..", at most 249 characters, only ASCII letters, digits, '.', '_' and '-'. A
//! name that breaks them never exists on any cluster, so a consumer subscribed to it would
//! wait forever for records: it is refused at once instead.

use crate::error::{Error, Result};

/// The longest legal topic name. 249, not 255: a partition's log directory is named
/// `<topic>-<partition>`, and a file system name is at most 255 bytes.
pub(crate) const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks `name` against Kafka's rules; the error names the topic and the rule it breaks.
pub(crate) fn validate_topic_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("the empty string is not a topic name".to_string())
    } else if name == "." || name == ".." {
        Some(format!("{name:?} is not allowed (it would name a directory of the log)"))
    } else if name.chars().count() > MAX_TOPIC_NAME_LEN {
        Some(format!("it is {} characters long; the limit is {MAX_TOPIC_NAME_LEN}", name.chars().count()))
    } else {
        name.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
            .map(|c| format!("{c:?} is not allowed; use only ASCII letters, digits, '.', '_' and '-'"))
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidTopic { topic: name.to_string(), reason }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(name: &str) -> String {
        match validate_topic_name(name) {
            Err(Error::InvalidTopic { topic, reason }) => {
                assert_eq!(topic, name);
                reason
            }
            other => panic!("{name:?}: expected InvalidTopic, got {other:?}"),
        }
    }

    #[test]
    fn legal_names_pass() {
        for name in ["orders", "a", "A.b_c-9", "__consumer_offsets", "...", ".a", "-", &"x".repeat(249)] {
            assert!(validate_topic_name(name).is_ok(), "{name:?}");
        }
    }

    #[test]
    fn illegal_characters_are_named() {
        assert!(reason("topic abc!").contains("' '"), "{}", reason("topic abc!"));
        assert!(reason("abc!").contains("'!'"));
        assert!(reason("a/b").contains("'/'"));
        assert!(reason("a:b").contains("':'"));
        assert!(reason("tab\tname").contains("'\\t'"));
        // Non-ASCII letters are letters to Unicode, not to Kafka.
        assert!(reason("thé").contains("'é'"));
    }

    #[test]
    fn empty_dot_and_dot_dot_are_refused() {
        assert!(reason("").contains("empty"));
        assert!(reason(".").contains("\".\""));
        assert!(reason("..").contains("\"..\""));
    }

    #[test]
    fn length_is_capped_at_249() {
        assert!(reason(&"x".repeat(250)).contains("250 characters"));
        // A long name with a bad character is refused for its length first (as Kafka does).
        assert!(reason(&format!("{}!", "x".repeat(249))).contains("limit is 249"));
    }

    #[test]
    fn the_error_is_typed_and_not_retriable() {
        let e = validate_topic_name("bad name").unwrap_err();
        assert_eq!(e.code(), Some(crate::error::ErrorCode::INVALID_TOPIC_EXCEPTION));
        assert!(!e.is_retriable());
        assert!(e.to_string().contains("\"bad name\""), "{e}");
    }
}
