//! Failures as an operator reads them: the broker's own words, as Java's tool prints them
//! (`Error: There is no offset information to delete.`), not the request, broker id and error
//! code behind them, which are for logs and `--output json`.

use kafka_share::{Error, ErrorCode};

/// What the tool prints for `e`. A broker error says its message (Java prints the
/// exception's message, which is the broker's); an unknown topic says so by name; anything
/// else (a timeout, a connection, a refusal by this client) keeps its full text, which
/// already says what to do.
pub fn user_text(e: &Error) -> String {
    match e {
        Error::Broker { message: Some(m), .. } if !m.trim().is_empty() => m.trim().to_string(),
        Error::Broker { context, code, .. } if *code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => match &context.topic {
            Some(t) => format!("Topic {t} does not exist."),
            None => "The topic or partition does not exist.".into(),
        },
        Error::UnknownTopic(t) => format!("Topic {t} does not exist."),
        // Java's tool ends in a NullPointerException here: say what is missing and what works.
        Error::NoStartOffset { group, partitions } => format!(
            "Share group '{group}' has no start offset yet for {} (no consumer of the group has fetched \
             from it), and --to-current and --shift-by start from it: use --to-earliest, --to-latest, \
             --to-offset or --to-datetime, or leave the partition out (--topic TOPIC:PARTITION,...).",
            partitions.iter().map(|tp| tp.to_string()).collect::<Vec<_>>().join(", ")
        ),
        _ => e.to_string(),
    }
}

/// Whether [`user_text`] names the group itself (the broker's messages about a group do),
/// so a line about several groups need not name it again.
pub fn names_group(e: &Error, group: &str) -> bool {
    user_text(e).contains(group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_share::Context;

    fn broker(code: ErrorCode, topic: Option<&str>, message: Option<&str>) -> Error {
        let context = Context { topic: topic.map(String::from), ..Context::api("DeleteShareGroupOffsets").broker(1) };
        Error::Broker { context, code, message: message.map(String::from) }
    }

    #[test]
    fn broker_errors_say_the_brokers_words_only() {
        let e = broker(
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            Some("ta"),
            Some("There is no offset information to delete."),
        );
        assert_eq!(user_text(&e), "There is no offset information to delete.");
        let e = broker(ErrorCode::GROUP_ID_NOT_FOUND, None, Some("Group g not found."));
        assert_eq!(user_text(&e), "Group g not found.");
        assert!(names_group(&e, "g"));
    }

    #[test]
    fn an_unknown_topic_without_a_message_is_named() {
        let e = broker(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, Some("nope"), None);
        assert_eq!(user_text(&e), "Topic nope does not exist.");
        assert_eq!(user_text(&Error::UnknownTopic("nope".into())), "Topic nope does not exist.");
    }

    #[test]
    fn no_start_offset_names_the_options_that_work() {
        let e = Error::NoStartOffset { group: "g".into(), partitions: vec![kafka_share::TopicPartition::new("ta", 1)] };
        let t = user_text(&e);
        assert!(t.starts_with("Share group 'g' has no start offset yet for ta-1"), "{t}");
        assert!(t.contains("--to-earliest") && !t.contains("invalid argument"), "{t}");
    }

    #[test]
    fn other_errors_keep_their_text() {
        let e = Error::InvalidArgument("topic t has no partition 7".into());
        assert_eq!(user_text(&e), e.to_string());
    }
}
