//! A ScaledObject's scaler metadata, read into what the scaler answers with.

use std::collections::HashMap;
use std::time::SystemTime;

use super::super::shown;
use super::super::snapshot::Snapshot;

/// The default `lagThreshold`: KEDA's Kafka scaler's.
pub const DEFAULT_LAG_THRESHOLD: f64 = 10.0;

/// What one ScaledObject asks about.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Query {
    pub group: String,
    pub topic: Option<String>,
    pub lag_threshold: f64,
    pub age_threshold_seconds: Option<f64>,
    pub activation_lag_threshold: f64,
}

/// A metadata mistake, said as the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadMetadata(pub String);

/// Which numbers a key accepts.
#[derive(Clone, Copy)]
enum Bound {
    /// Above 0 (a threshold per replica).
    Positive,
    /// At or above 0.
    NonNegative,
}

fn number(m: &HashMap<String, String>, key: &str, bound: Bound) -> Result<Option<f64>, BadMetadata> {
    match m.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => match (v.parse::<f64>(), bound) {
            (Ok(n), Bound::Positive) if n.is_finite() && n > 0.0 => Ok(Some(n)),
            (Ok(n), Bound::NonNegative) if n.is_finite() && n >= 0.0 => Ok(Some(n)),
            (_, Bound::Positive) => {
                Err(BadMetadata(format!("scaler metadata {key} must be a number above 0, not {}", shown(v))))
            }
            (_, Bound::NonNegative) => {
                Err(BadMetadata(format!("scaler metadata {key} must be a number at or above 0, not {}", shown(v))))
            }
        },
    }
}

impl Query {
    /// Reads `group` (required), `topic`, `lagThreshold` (above 0), `ageThresholdSeconds`
    /// (above 0), `activationLagThreshold`. `bootstrapServers` is accepted for the manifests'
    /// sake: the exporter answers for the cluster it is connected to.
    pub(super) fn from_metadata(m: &HashMap<String, String>) -> Result<Query, BadMetadata> {
        let group = match m.get("group").map(|g| g.trim()).filter(|g| !g.is_empty()) {
            Some(g) => g.to_string(),
            None => return Err(BadMetadata("scaler metadata needs group: the share group to scale on".into())),
        };
        let topic = m.get("topic").map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
        let lag_threshold = number(m, "lagThreshold", Bound::Positive)?.unwrap_or(DEFAULT_LAG_THRESHOLD);
        let age_threshold_seconds = number(m, "ageThresholdSeconds", Bound::Positive)?;
        let activation_lag_threshold = number(m, "activationLagThreshold", Bound::NonNegative)?.unwrap_or(0.0);
        Ok(Query { group, topic, lag_threshold, age_threshold_seconds, activation_lag_threshold })
    }

    /// The lag metric's name: KEDA names the HPA's metric after it (`s0-<name>`).
    pub(super) fn lag_metric(&self) -> String {
        match &self.topic {
            None => format!("share-lag-{}", self.group),
            Some(t) => format!("share-lag-{}-{t}", self.group),
        }
    }

    /// The age metric's name.
    pub(super) fn age_metric(&self) -> String {
        match &self.topic {
            None => format!("share-age-{}", self.group),
            Some(t) => format!("share-age-{}-{t}", self.group),
        }
    }

    /// (lag, age in seconds) from the snapshot; `Err` says why there is none. A group whose
    /// backlog the last refresh could not read has no value (never 0): an autoscaler that
    /// read 0 would scale its workers away while the backlog is there.
    pub(super) fn read(&self, s: &Snapshot, now: SystemTime) -> Result<(f64, f64), Missing> {
        if s.refreshes == 0 {
            return Err(Missing::NotYet);
        }
        if let Some(u) = s.unread.get(&self.group) {
            return Err(Missing::Unread { cause: u.cause.clone(), last_read: u.last_read });
        }
        let Some(g) = s.group(&self.group) else {
            return Err(match &s.listing_failed {
                // Not found where nothing could be looked for: unknown, not absent.
                Some(cause) => Missing::Unlisted { cause: cause.clone(), last_success: s.last_success },
                None => Missing::NoGroup,
            });
        };
        let topic = self.topic.as_deref();
        if topic.is_some_and(|t| !g.partitions.iter().any(|p| p.topic == t)) {
            return Err(Missing::NoTopic);
        }
        let lag = g.lag(topic).map(|(l, _)| l as f64).unwrap_or(0.0);
        let age = g.oldest_age(topic, now).map(|a| a.as_secs_f64()).unwrap_or(0.0);
        Ok((lag, age))
    }

    /// Whether the workload should run: lag above the activation threshold.
    pub(super) fn is_active(&self, lag: f64) -> bool {
        lag > self.activation_lag_threshold
    }
}

/// Why a query has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Missing {
    /// No refresh has finished yet.
    NotYet,
    /// The group's backlog could not be read in full at the last refresh.
    Unread { cause: String, last_read: Option<SystemTime> },
    /// The groups could not be listed at the last refresh, and this one is not known.
    Unlisted { cause: String, last_success: Option<SystemTime> },
    /// The cluster says the group does not exist (or the exporter does not export it).
    NoGroup,
    /// The group has no share state on the topic.
    NoTopic,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn metadata_is_read_with_defaults_and_mistakes_say_the_fix() {
        let q = Query::from_metadata(&md(&[("group", "g"), ("bootstrapServers", "b:9092")])).unwrap();
        assert_eq!((q.lag_threshold, q.activation_lag_threshold, q.age_threshold_seconds), (10.0, 0.0, None));
        assert_eq!(q.lag_metric(), "share-lag-g");
        let q = Query::from_metadata(&md(&[
            ("group", "g"),
            ("topic", "t"),
            ("lagThreshold", "100"),
            ("ageThresholdSeconds", "30"),
            ("activationLagThreshold", "5"),
        ]))
        .unwrap();
        assert_eq!((q.lag_threshold, q.age_threshold_seconds, q.activation_lag_threshold), (100.0, Some(30.0), 5.0));
        assert_eq!(q.age_metric(), "share-age-g-t");
        assert!(!q.is_active(5.0) && q.is_active(6.0));
        for bad in [
            md(&[]),
            md(&[("group", " ")]),
            md(&[("group", "g"), ("lagThreshold", "0")]),
            md(&[("group", "g"), ("lagThreshold", "x")]),
            md(&[("group", "g"), ("lagThreshold", "-1")]),
            md(&[("group", "g"), ("ageThresholdSeconds", "0")]),
            md(&[("group", "g"), ("ageThresholdSeconds", "-1")]),
            md(&[("group", "g"), ("activationLagThreshold", "-1")]),
            md(&[("group", "g"), ("activationLagThreshold", "inf")]),
        ] {
            assert!(Query::from_metadata(&bad).is_err(), "{bad:?}");
        }
        // Each message says what the key accepts.
        let e = Query::from_metadata(&md(&[("group", "g"), ("lagThreshold", "-1")])).unwrap_err();
        assert!(e.0.contains("above 0") && !e.0.contains("at or above"), "{e:?}");
        let e = Query::from_metadata(&md(&[("group", "g"), ("activationLagThreshold", "-1")])).unwrap_err();
        assert!(e.0.contains("at or above 0"), "{e:?}");
        let huge = "x".repeat(3_000_000);
        let e = Query::from_metadata(&md(&[("group", "g"), ("lagThreshold", &huge)])).unwrap_err();
        assert!(e.0.len() < 400 && e.0.contains("3000000 bytes"), "{}", &e.0[..400.min(e.0.len())]);
    }

    #[test]
    fn nothing_read_before_the_first_refresh_or_for_an_unknown_group() {
        let q = Query::from_metadata(&md(&[("group", "g")])).unwrap();
        let mut s = Snapshot::default();
        assert_eq!(q.read(&s, SystemTime::now()), Err(Missing::NotYet));
        s.refreshes = 1;
        assert_eq!(q.read(&s, SystemTime::now()), Err(Missing::NoGroup));
        s.listing_failed = Some("list_groups: timeout".into());
        assert!(matches!(q.read(&s, SystemTime::now()), Err(Missing::Unlisted { .. })), "unknown, not absent");
    }

    #[test]
    fn an_unread_group_has_no_value_even_with_its_last_view_kept() {
        use crate::exporter::{GroupView, Unread};
        let q = Query::from_metadata(&md(&[("group", "g")])).unwrap();
        let mut s = Snapshot { refreshes: 2, ..Snapshot::default() };
        s.groups.push(GroupView {
            group: "g".into(),
            state: "Stable".into(),
            members: 0,
            assigned_partitions: 0,
            partitions: vec![],
            last_read: None,
        });
        assert_eq!(q.read(&s, SystemTime::now()), Ok((0.0, 0.0)));
        s.unread.insert("g".into(), Unread { cause: "offsets: timeout".into(), last_read: None });
        assert!(matches!(q.read(&s, SystemTime::now()), Err(Missing::Unread { .. })));
    }
}
