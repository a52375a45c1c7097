//! ApiVersions negotiation and cluster features, per connection.

use std::collections::HashMap;

use kafka_protocol::messages::ApiVersionsResponse;

use crate::error::{Error, Result};
use crate::protocol::api::api_name;

/// What one broker said it supports: version ranges per API key, and finalized features.
#[derive(Debug, Clone, Default)]
pub struct ApiVersions {
    node_id: i32,
    ranges: HashMap<i16, (i16, i16)>,
    features: HashMap<String, i16>,
}

impl ApiVersions {
    /// Reads an ApiVersions response from broker `node_id` (-1 when unknown).
    pub fn from_response(node_id: i32, r: &ApiVersionsResponse) -> Self {
        ApiVersions {
            node_id,
            ranges: r.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect(),
            features: r.finalized_features.iter().map(|f| (f.name.to_string(), f.max_version_level)).collect(),
        }
    }

    /// Builds a table by hand (tests and fakes).
    pub fn from_ranges(node_id: i32, ranges: &[(i16, i16, i16)], features: &[(&str, i16)]) -> Self {
        ApiVersions {
            node_id,
            ranges: ranges.iter().map(|&(k, lo, hi)| (k, (lo, hi))).collect(),
            features: features.iter().map(|&(n, l)| (n.to_string(), l)).collect(),
        }
    }

    /// The broker's range for `api_key`, if it lists it.
    pub fn range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.ranges.get(&api_key).copied()
    }

    /// The highest version in both `client_min..=client_max` and the broker's range.
    pub fn pick(&self, api_key: i16, client_min: i16, client_max: i16) -> Result<i16> {
        match self.range(api_key) {
            Some((lo, hi)) if lo.max(client_min) <= hi.min(client_max) => Ok(hi.min(client_max)),
            other => {
                let (broker_min, broker_max) = other.unwrap_or((-1, -1));
                Err(Error::UnsupportedVersion {
                    api: api_name(api_key),
                    broker: self.node_id,
                    broker_min,
                    broker_max,
                    client_min,
                    client_max,
                })
            }
        }
    }

    /// The finalized level of a cluster feature (0 when the broker does not list it).
    pub fn feature_level(&self, name: &str) -> i16 {
        self.features.get(name).copied().unwrap_or(0)
    }

    /// Fails with a clear error unless share groups are enabled (`share.version` >= 1).
    pub fn require_share_groups(&self) -> Result<()> {
        let level = self.feature_level("share.version");
        if level >= 1 {
            return Ok(());
        }
        Err(Error::FeatureDisabled {
            feature: "share.version",
            level,
            needed: 1,
            hint: "enable share groups with `kafka-features.sh --bootstrap-server <addr> upgrade --feature share.version=1` \
                   (Kafka 4.1: or format storage with --feature share.version=1; 4.2+ enables it on new clusters)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_highest_common_version() {
        let v = ApiVersions::from_ranges(1, &[(78, 1, 2), (79, 1, 1)], &[("share.version", 1)]);
        assert_eq!(v.pick(78, 1, 2).unwrap(), 2);
        assert_eq!(v.pick(79, 1, 2).unwrap(), 1);
        assert_eq!(v.pick(78, 1, 1).unwrap(), 1);
    }

    #[test]
    fn no_common_version_is_a_clear_error() {
        let v = ApiVersions::from_ranges(3, &[(78, 0, 0)], &[]);
        let e = v.pick(78, 1, 2).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("broker 3 supports ShareFetch versions 0..=0"), "{text}");
        let e = v.pick(76, 1, 1).unwrap_err();
        assert!(matches!(e, Error::UnsupportedVersion { broker_min: -1, .. }));
    }

    #[test]
    fn share_feature_off_names_the_feature() {
        let v = ApiVersions::from_ranges(1, &[(78, 1, 2)], &[("share.version", 0)]);
        let e = v.require_share_groups().unwrap_err();
        assert!(e.to_string().contains("share.version"), "{e}");
        assert!(e.to_string().contains("upgrade --feature share.version=1"), "{e}");
        let v = ApiVersions::from_ranges(1, &[(78, 1, 2)], &[("share.version", 1)]);
        assert!(v.require_share_groups().is_ok());
    }
}
