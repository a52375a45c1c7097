//! Group configs (resource type GROUP = 32): describe, alter, and the two setters every test
//! uses. Known share keys are checked here first so a typo fails with the allowed values
//! instead of a terse broker INVALID_CONFIG; the broker's own bounds (e.g. the lock duration
//! range) are still enforced by the broker and passed through with its message.

use std::time::Duration;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use crate::cluster::TrafficClass;
use crate::error::{Context, Error, Result};

/// ConfigResource.Type.GROUP.
pub const GROUP_RESOURCE: i8 = 32;
/// ConfigResource.Type.TOPIC.
pub(crate) const TOPIC_RESOURCE: i8 = 2;
/// ConfigResource.Type.BROKER.
pub(crate) const BROKER_RESOURCE: i8 = 4;

/// How long the setters wait for the new value to reach every broker's metadata.
const PROPAGATION_TIMEOUT: Duration = Duration::from_secs(15);

/// Where a config value comes from (the broker's ConfigSource).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on this group (GROUP_CONFIG).
    Group,
    /// A broker-wide setting (static or dynamic) supplies the value.
    Broker,
    /// The built-in default.
    Default,
    /// Anything else, with the raw code.
    Other(i8),
}

impl ConfigSource {
    fn from_code(c: i8) -> Self {
        match c {
            8 => ConfigSource::Group,
            2..=4 => ConfigSource::Broker,
            5 => ConfigSource::Default,
            c => ConfigSource::Other(c),
        }
    }

    /// A short label, as `kafka-configs.sh` prints it.
    pub fn label(&self) -> String {
        match self {
            ConfigSource::Group => "DYNAMIC_GROUP_CONFIG".into(),
            ConfigSource::Broker => "BROKER_CONFIG".into(),
            ConfigSource::Default => "DEFAULT_CONFIG".into(),
            ConfigSource::Other(c) => format!("SOURCE_{c}"),
        }
    }
}

/// One group config as the broker describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Key, e.g. `share.auto.offset.reset`.
    pub name: String,
    /// Value (None when sensitive or unset).
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Whether it cannot be altered.
    pub read_only: bool,
    /// Whether the value is hidden.
    pub is_sensitive: bool,
}

/// Checks a known share-group key's value; unknown keys pass (the broker decides).
pub fn validate_group_config(key: &str, value: &str) -> Result<()> {
    let bad = |allowed: &str| Err(Error::config(key, format!("{value:?} is not allowed; use {allowed}")));
    match key {
        "share.auto.offset.reset" => {
            let v = value.to_ascii_lowercase();
            if v == "latest" || v == "earliest" {
                return Ok(());
            }
            match v.strip_prefix("by_duration:") {
                Some(d) if iso_duration_ok(d.trim()) => Ok(()),
                _ => bad("latest | earliest | by_duration:<ISO-8601 duration, e.g. PT1H or P1DT2H30M>"),
            }
        }
        "share.isolation.level" => match value.to_ascii_lowercase().as_str() {
            "read_uncommitted" | "read_committed" => Ok(()),
            _ => bad("read_uncommitted | read_committed"),
        },
        "share.renew.acknowledge.enable" | "errors.deadletterqueue.copy.record.enable" => {
            match value.to_ascii_lowercase().as_str() {
                "true" | "false" => Ok(()),
                _ => bad("true | false"),
            }
        }
        "share.record.lock.duration.ms"
        | "share.session.timeout.ms"
        | "share.heartbeat.interval.ms"
        | "share.delivery.count.limit"
        | "share.partition.max.record.locks" => match value.trim().parse::<i32>() {
            Ok(n) if n > 0 => Ok(()),
            _ => bad("a positive integer (the broker enforces its own min/max bounds)"),
        },
        "errors.deadletterqueue.topic.name" => {
            let ok = value.len() <= 249 && value.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if ok && value != "." && value != ".." {
                Ok(())
            } else {
                bad("a valid topic name (letters, digits, '.', '_', '-'; at most 249 chars), or delete the key")
            }
        }
        _ => Ok(()),
    }
}

/// Java `Duration.parse` accepts `[-]PnDTnHnMn.nS` (days and time parts only). Negative
/// durations are refused: a reset point in the future makes no sense.
fn iso_duration_ok(s: &str) -> bool {
    let s = s.to_ascii_uppercase();
    let Some(rest) = s.strip_prefix('P') else {
        return false;
    };
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let units_ok = |part: &str, units: &[char], frac_last: bool| -> Option<usize> {
        let mut count = 0;
        let mut num = String::new();
        let mut next_unit = 0;
        for c in part.chars() {
            if c.is_ascii_digit() || (c == '.' && frac_last) {
                num.push(c);
                continue;
            }
            let pos = units[next_unit..].iter().position(|u| *u == c)? + next_unit;
            if num.is_empty() || (num.contains('.') && c != 'S') || num.parse::<f64>().is_err() {
                return None;
            }
            num.clear();
            next_unit = pos + 1;
            count += 1;
        }
        num.is_empty().then_some(count)
    };
    let Some(d) = units_ok(date, &['D'], false) else {
        return false;
    };
    let t = match time {
        None => 0,
        Some(t) => match units_ok(t, &['H', 'M', 'S'], true) {
            Some(0) | None => return false, // "PT" alone is invalid
            Some(n) => n,
        },
    };
    d + t > 0
}

impl Admin {
    /// Describes the configs of a group (it need not exist yet: defaults are returned).
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn describe_group_configs(&self, group: &str) -> Result<Vec<ConfigEntry>> {
        let conn = self.cluster.any_broker().await?;
        self.describe_group_configs_on(&conn, group).await
    }

    async fn describe_group_configs_on(
        &self,
        conn: &crate::cluster::BrokerConnection,
        group: &str,
    ) -> Result<Vec<ConfigEntry>> {
        self.describe_configs_on(conn, GROUP_RESOURCE, group, group_ctx("DescribeConfigs", group)).await
    }

    /// The configs of one resource (a group, a topic, a broker by its id), sorted by name.
    pub(crate) async fn describe_configs_on(
        &self,
        conn: &crate::cluster::BrokerConnection,
        resource_type: i8,
        name: &str,
        ctx: Context,
    ) -> Result<Vec<ConfigEntry>> {
        let req = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(None)]);
        let resp = self.cluster.send(conn, &req, (1, 4)).await?;
        let r = resp.results.into_iter().next().ok_or_else(|| Error::IncompleteResponse {
            api: "DescribeConfigs",
            missing: format!("the resource {name}"),
        })?;
        if let Some(e) = Error::from_code(r.error_code, r.error_message.map(|m| m.to_string()), ctx) {
            return Err(e);
        }
        let mut out: Vec<ConfigEntry> = r
            .configs
            .into_iter()
            .map(|c| ConfigEntry {
                name: c.name.to_string(),
                value: c.value.map(|v| v.to_string()),
                source: ConfigSource::from_code(c.config_source),
                read_only: c.read_only,
                is_sensitive: c.is_sensitive,
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Sets (`Some`) or deletes back to the default (`None`) group configs in one request.
    /// Known share keys are validated locally first; nothing is sent if any is wrong. Returns
    /// once every broker's metadata shows the change, so a consumer started right after sees it.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn alter_group_configs(&self, group: &str, changes: &[(&str, Option<&str>)]) -> Result<()> {
        if group.is_empty() {
            return Err(Error::InvalidArgument("the group id must not be empty".into()));
        }
        for (k, v) in changes {
            if let Some(v) = v {
                validate_group_config(k, v)?;
            }
        }
        self.alter_configs(GROUP_RESOURCE, group, changes, group_ctx("IncrementalAlterConfigs", group))
            .await?;
        self.wait_for_group_configs(group, changes).await
    }

    /// Sets (`Some`) or deletes (`None`) configs of one resource in one request, unchecked.
    pub(crate) async fn alter_configs(
        &self,
        resource_type: i8,
        name: &str,
        changes: &[(&str, Option<&str>)],
        ctx: Context,
    ) -> Result<()> {
        let configs = changes
            .iter()
            .map(|(k, v)| {
                AlterableConfig::default()
                    .with_name(StrBytes::from_string(k.to_string()))
                    // 0 = SET, 1 = DELETE (back to the default).
                    .with_config_operation(if v.is_some() { 0 } else { 1 })
                    .with_value(v.map(|v| StrBytes::from_string(v.to_string())))
            })
            .collect();
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(configs)]);
        let conn = self.cluster.any_broker().await?;
        let resp = self.cluster.send(&conn, &req, (0, 1)).await?;
        for r in resp.responses {
            if let Some(e) = Error::from_code(r.error_code, r.error_message.map(|m| m.to_string()), ctx.clone()) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Sets one group config (validated as in [`Admin::alter_group_configs`]).
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn set_group_config(&self, group: &str, key: &str, value: &str) -> Result<()> {
        self.alter_group_configs(group, &[(key, Some(value))]).await
    }

    /// Sets `share.auto.offset.reset` (`earliest`, `latest` or `by_duration:<ISO-8601>`).
    /// Tests call this with `earliest` before starting consumers so earlier records are seen.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn set_share_auto_offset_reset(&self, group: &str, strategy: &str) -> Result<()> {
        self.set_group_config(group, "share.auto.offset.reset", strategy).await
    }

    /// The controller commits the change before answering, but each broker applies it from
    /// its metadata log a little later: poll every broker until it shows the new values.
    async fn wait_for_group_configs(&self, group: &str, changes: &[(&str, Option<&str>)]) -> Result<()> {
        let brokers: Vec<i32> = self.cluster.with_metadata(|m| m.brokers.keys().copied().collect());
        let deadline = tokio::time::Instant::now() + PROPAGATION_TIMEOUT;
        for node in brokers {
            let conn = self.cluster.broker(node, TrafficClass::Control).await?;
            loop {
                let entries = self.describe_group_configs_on(&conn, group).await?;
                let applied = changes.iter().all(|(k, v)| match entries.iter().find(|e| e.name == *k) {
                    // Keys the broker does not list (e.g. newer than it) cannot be checked.
                    None => true,
                    Some(e) => match v {
                        Some(v) => {
                            e.source == ConfigSource::Group
                                && e.value.as_deref().map(|x| x.eq_ignore_ascii_case(v)) == Some(true)
                        }
                        None => e.source != ConfigSource::Group,
                    },
                });
                if applied {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(Error::Timeout {
                        what: format!("broker {node} applying the configs of group {group}"),
                        after: PROPAGATION_TIMEOUT,
                    });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }
}

pub(crate) fn group_ctx(api: &'static str, group: &str) -> Context {
    // The context has no group field; the topic slot carries "group G" for the message.
    Context { topic: Some(format!("group {group}")), ..Context::api(api) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_reset_values() {
        for ok in ["latest", "EARLIEST", "by_duration:PT1H", "by_duration:P1DT2H30M", "by_duration:PT0.5S"] {
            assert!(validate_group_config("share.auto.offset.reset", ok).is_ok(), "{ok}");
        }
        for bad in ["none", "by_duration:", "by_duration:1h", "by_duration:PT", "by_duration:-PT1H", "by_duration:P1H"]
        {
            let e = validate_group_config("share.auto.offset.reset", bad).unwrap_err().to_string();
            assert!(e.contains("latest | earliest | by_duration"), "{bad}: {e}");
        }
    }

    #[test]
    fn typed_keys() {
        assert!(validate_group_config("share.isolation.level", "read_committed").is_ok());
        assert!(validate_group_config("share.isolation.level", "committed").is_err());
        assert!(validate_group_config("share.record.lock.duration.ms", "-5").is_err());
        assert!(validate_group_config("share.delivery.count.limit", "x").is_err());
        assert!(validate_group_config("share.renew.acknowledge.enable", "yes").is_err());
        assert!(validate_group_config("errors.deadletterqueue.topic.name", "dlq.topic").is_ok());
        assert!(validate_group_config("errors.deadletterqueue.topic.name", "bad name").is_err());
        assert!(validate_group_config("some.future.key", "anything").is_ok());
    }
}
