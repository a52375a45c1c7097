//! The `kind` label of the exporter's error counter: a short, stable name for what failed.

use crate::error::Error;

/// `group_authorization_failed`, `group_id_not_found`, `timeout`, `connection`, ... : the
/// broker's error code in lower case when there is one, else the client-side cause.
pub(crate) fn error_kind(e: &Error) -> String {
    if let Some(code) = e.code() {
        return code.name().to_ascii_lowercase();
    }
    match e {
        Error::Io { .. } | Error::ConnectionClosed { .. } | Error::OutcomeUnknown { .. } => "connection",
        Error::Timeout { .. } => "timeout",
        Error::Malformed { .. } | Error::Codec { .. } | Error::IncompleteResponse { .. } => "malformed_response",
        Error::UnsupportedVersion { .. } | Error::Unsupported { .. } | Error::FeatureDisabled { .. } => "unsupported",
        Error::Authentication { .. } => "authentication",
        Error::Tls { .. } => "tls",
        Error::UnknownTopic(_) => "unknown_topic_or_partition",
        Error::UnknownBroker { .. } => "unknown_broker",
        Error::TaskFailed { .. } => "internal",
        _ => "other",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Context, ErrorCode};

    #[test]
    fn broker_codes_name_the_kind() {
        let e = Error::Broker {
            context: Context::api("DescribeShareGroupOffsets"),
            code: ErrorCode::GROUP_AUTHORIZATION_FAILED,
            message: None,
        };
        assert_eq!(error_kind(&e), "group_authorization_failed");
        assert_eq!(error_kind(&Error::UnknownTopic("t".into())), "unknown_topic_or_partition");
        assert_eq!(error_kind(&Error::InvalidArgument("x".into())), "other");
    }
}
