//! Worker and connector settings, by the names Kafka Connect and KIP-1302 use.
//!
//! A worker file carries what every client of the process shares (`bootstrap.servers`,
//! `security.protocol`, `sasl.*`, `ssl.*`, timeouts) plus `consumer.*` / `producer.*`
//! overrides, as a Connect worker file does. A connector file carries `name`,
//! `connector.class`, `topics` (or `topics.regex`), `tasks.max`, the `share.*` and `errors.*`
//! settings of KIP-1302, `consumer.override.*`, and the sink's own keys (kept as given in
//! [`ConnectorConfig::task_config`]).
//!
//! A worker file's `key.converter*` / `value.converter*` settings are every connector's
//! defaults (a connector's own win), as in Connect. Connect worker files also hold keys that
//! mean nothing here (`offset.storage.file.filename`, `plugin.path`, ...): they are ignored,
//! so a Connect user's file works unchanged; only the client keys reach the clients, whose
//! readers refuse typos.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::Properties;
use crate::error::{Error, Result};

use super::task::TaskConfig;

/// Worker keys that are client settings, passed to every consumer and producer (a key
/// matches when it equals an entry or starts with an entry that ends in `.`).
const CLIENT_KEYS: &[&str] = &[
    "bootstrap.servers",
    "client.dns.lookup",
    "security.protocol",
    "sasl.",
    "ssl.",
    "request.timeout.ms",
    "connections.max.idle.ms",
    "reconnect.backoff.",
    "retry.backoff.",
    "socket.connection.setup.timeout.",
    "metadata.max.age.ms",
];

fn is_converter_key(key: &str) -> bool {
    ["key.converter", "value.converter"]
        .iter()
        .any(|s| key == *s || key.strip_prefix(s).is_some_and(|r| r.starts_with('.')))
}

fn is_client_key(key: &str) -> bool {
    CLIENT_KEYS.iter().any(|k| if k.ends_with('.') { key.starts_with(k) } else { key == *k })
}

/// Checks a `*group.protocol` setting: this runtime runs share groups only (KIP-1302's
/// `WorkerShareSinkTask`); a classic or consumer group is Kafka Connect's own runtime.
fn check_group_protocol(key: &str, value: Option<&str>) -> Result<()> {
    match value.map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(()),
        Some(v) if v == "share" => Ok(()),
        Some(v) => Err(Error::config(
            key,
            format!(
                "{v:?}: this runtime only runs sink tasks on share groups (KIP-1302); set {key}=share, \
                 or run the connector on Kafka Connect for a classic/consumer group"
            ),
        )),
    }
}

/// What the worker process shares among its connectors: the cluster and security settings,
/// and client overrides.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The client settings every consumer and producer gets (`bootstrap.servers`, security).
    client: BTreeMap<String, String>,
    /// `consumer.*` overrides, prefix removed.
    consumer: BTreeMap<String, String>,
    /// `producer.*` overrides, prefix removed.
    producer: BTreeMap<String, String>,
    /// `key.converter*` / `value.converter*`: every connector's defaults.
    converters: BTreeMap<String, String>,
}

impl WorkerConfig {
    /// A worker on `bootstrap_servers` with no security and no overrides.
    pub fn new(bootstrap_servers: impl Into<String>) -> WorkerConfig {
        let mut client = BTreeMap::new();
        client.insert("bootstrap.servers".to_string(), bootstrap_servers.into());
        WorkerConfig { client, consumer: BTreeMap::new(), producer: BTreeMap::new(), converters: BTreeMap::new() }
    }

    /// Reads a worker properties file's settings. `bootstrap.servers` is required;
    /// `consumer.group.protocol`, when given, must be `share`.
    pub fn from_properties(p: &Properties) -> Result<WorkerConfig> {
        check_group_protocol("consumer.group.protocol", p.get("consumer.group.protocol"))?;
        if p.get("bootstrap.servers").map(str::trim).unwrap_or("").is_empty() {
            return Err(Error::config(
                "bootstrap.servers",
                "missing: the worker file must say where the cluster is (e.g. bootstrap.servers=127.0.0.1:9092)",
            ));
        }
        let mut w = WorkerConfig {
            client: BTreeMap::new(),
            consumer: BTreeMap::new(),
            producer: BTreeMap::new(),
            converters: BTreeMap::new(),
        };
        let keys: Vec<String> = p.keys().map(str::to_string).collect();
        for k in keys {
            let Some(v) = p.get(&k) else { continue };
            if k == "consumer.group.protocol" {
                continue;
            } else if let Some(rest) = k.strip_prefix("consumer.") {
                w.consumer.insert(rest.to_string(), v.to_string());
            } else if let Some(rest) = k.strip_prefix("producer.") {
                w.producer.insert(rest.to_string(), v.to_string());
            } else if is_converter_key(&k) {
                w.converters.insert(k, v.to_string());
            } else if is_client_key(&k) {
                w.client.insert(k, v.to_string());
            } else {
                tracing::debug!(key = %k, "worker setting ignored (not a client setting of this runtime)");
            }
        }
        Ok(w)
    }

    /// Sets a client setting every consumer and producer gets (e.g. `security.protocol`).
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.client.insert(key.into(), value.into());
        self
    }

    /// Fills in the worker's `key.converter*` / `value.converter*` settings a connector does
    /// not set itself. A connector that names its own converter class keeps that converter's
    /// settings apart from the worker's (Connect reads a converter's settings beside its class).
    pub(crate) fn default_converters(&self, connector: &mut TaskConfig) {
        for side in ["key.converter", "value.converter"] {
            if connector.contains_key(side) {
                continue;
            }
            for (k, v) in
                self.converters.iter().filter(|(k, _)| k.as_str() == side || k.starts_with(&format!("{side}.")))
            {
                connector.insert(k.clone(), v.clone());
            }
        }
    }

    /// `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> &str {
        self.client.get("bootstrap.servers").map(String::as_str).unwrap_or("")
    }

    /// The properties an admin client gets (the shared client settings).
    pub(crate) fn admin_properties(&self) -> Properties {
        Properties::from_pairs(self.client.clone())
    }

    /// The properties a producer gets: shared settings, then `producer.*`.
    pub(crate) fn producer_properties(&self) -> Properties {
        Properties::from_pairs(self.client.iter().chain(self.producer.iter()).map(|(k, v)| (k.clone(), v.clone())))
    }

    /// The properties a task's consumer gets: shared settings, `consumer.*`, then the
    /// connector's `consumer.override.*`.
    pub(crate) fn consumer_properties(&self, connector: &ConnectorConfig) -> Properties {
        let mut p =
            Properties::from_pairs(self.client.iter().chain(self.consumer.iter()).map(|(k, v)| (k.clone(), v.clone())));
        for (k, v) in &connector.consumer_overrides {
            p.set(k.clone(), v.clone());
        }
        p
    }
}

/// `share.acknowledgement.mode` of a connector's consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkAckMode {
    /// The runtime ACCEPTs a batch after `put` (and `flush`) succeeded, RELEASEs it on a
    /// retriable error, and dead-letters failed records (the default).
    Explicit,
    /// The consumer accepts every record on the next poll; each task has a consumer of its
    /// own. Failures are decided as in explicit mode, but a retry happens in place (the
    /// records cannot be released) and a failed record without a dead-letter topic is
    /// skipped (accepted, counted as rejected); a stopped task's batch is released.
    Implicit,
}

/// `errors.tolerance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorTolerance {
    /// `none` (Connect's default): a failed record stops the task; what the sink has of its
    /// batch (before it, for a conversion or transform failure) is ACCEPTed, the rest
    /// RELEASEd.
    None,
    /// `all`: a failed record goes the dead-letter path (the DLQ topic, else REJECT) and the
    /// task goes on.
    All,
}

/// `errors.deadletterqueue.mode`: who writes a failed record to the dead-letter topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterMode {
    /// `client` (default, as Connect): the runtime produces the record to the topic (with
    /// Connect's `__connect.errors.*` headers when asked), then ACCEPTs it.
    Client,
    /// `broker` (Kafka 4.4+): the runtime REJECTs the record and the broker writes it to the
    /// group's dead-letter topic with its `__dlq.errors.*` headers. The runtime sets the
    /// group up at start (the topic must start with the broker's prefix, `dlq.` by
    /// default); records that use up the group's `share.delivery.count.limit` go there too.
    /// No producer runs in the worker for it.
    Broker,
}

/// Connect's consumer setting for where a new group starts (after `consumer.override.`).
const OFFSET_RESET_OVERRIDE: &str = "auto.offset.reset";

/// Where the connector's group starts when it has no committed position:
/// `share.auto.offset.reset` (any value the group takes), else Connect's
/// `consumer.override.auto.offset.reset` mapped onto it. A share group knows `earliest`,
/// `latest` and `by_duration:`, a classic consumer `earliest`, `latest`, `none` and
/// `by_duration:`; only the first two mean the same on both, so the others are refused here
/// (validate and create) rather than by the consumer at run time.
fn offset_reset(p: &Properties) -> Result<Option<String>> {
    const SHARE: &str = "share.auto.offset.reset";
    let share = p.get(SHARE).map(str::trim).filter(|v| !v.is_empty());
    if let Some(v) = share {
        crate::admin::validate_group_config(SHARE, v)?;
    }
    let key = format!("consumer.override.{OFFSET_RESET_OVERRIDE}");
    let connect = match p.get(&key).map(|v| v.trim().to_ascii_lowercase()).filter(|v| !v.is_empty()) {
        None => None,
        Some(v) if v == "earliest" || v == "latest" => Some(v),
        Some(v) => {
            return Err(Error::config(
                key,
                format!(
                    "{v:?} has no share-group equivalent: a share group starts at earliest or latest (its \
                     {SHARE}); use earliest or latest here, or {SHARE}=by_duration:<ISO-8601 duration, e.g. P1D> \
                     to start a time back"
                ),
            ))
        }
    };
    match (share, connect) {
        (Some(s), Some(c)) if !s.eq_ignore_ascii_case(&c) => {
            Err(Error::config(key, format!("{c} contradicts {SHARE}={s}: set one of them")))
        }
        (Some(s), _) => Ok(Some(s.to_string())),
        (None, c) => Ok(c),
    }
}

/// One connector: which sink, on what topics, how many tasks, and the KIP-1302 settings.
#[derive(Debug, Clone)]
pub struct ConnectorConfig {
    pub(crate) name: String,
    pub(crate) connector_class: String,
    pub(crate) topics: Vec<String>,
    pub(crate) topics_regex: Option<String>,
    pub(crate) tasks_max: usize,
    /// `share.consumers.max` (explicit mode): how many share consumers, each a member of the
    /// group, the tasks are spread over; `None` is one per partition of `topics` at start.
    pub(crate) consumers_max: Option<usize>,
    pub(crate) group_id: String,
    pub(crate) ack_mode: SinkAckMode,
    pub(crate) lock_timeout: Duration,
    /// Whether the runtime may set the group's `share.record.lock.duration.ms` to
    /// `share.acquisition.lock.timeout.ms` (`share.group.config.update`).
    pub(crate) update_group_config: bool,
    /// `share.auto.offset.reset` (or Connect's `consumer.override.auto.offset.reset`
    /// mapped onto it), set on the group when given. `None`: the runtime sets `earliest` on
    /// a group that has no setting of its own yet, where Connect's consumer starts.
    pub(crate) auto_offset_reset: Option<String>,
    pub(crate) max_delivery_count: i16,
    pub(crate) dlq_topic: Option<String>,
    pub(crate) dlq_mode: DeadLetterMode,
    pub(crate) dlq_context_headers: bool,
    pub(crate) dlq_replication_factor: i16,
    pub(crate) tolerance: ErrorTolerance,
    pub(crate) consumer_overrides: BTreeMap<String, String>,
    pub(crate) task_config: TaskConfig,
}

impl ConnectorConfig {
    /// Reads a Connect-style connector properties file's settings.
    pub fn from_properties(p: &Properties) -> Result<ConnectorConfig> {
        Self::from_map(settings_of_properties(p))
    }

    /// Reads a connector from JSON as Connect's REST API takes it
    /// (`{"name": .., "config": {..}}`) or as a flat object of settings. Values may be
    /// strings, numbers or booleans.
    pub fn from_json(text: &str) -> Result<ConnectorConfig> {
        Self::from_map(settings_of_json(text)?)
    }

    /// From (key, value) pairs, as in a properties file.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<ConnectorConfig> {
        Self::from_map(pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }

    fn from_map(all: TaskConfig) -> Result<ConnectorConfig> {
        let p = Properties::from_pairs(all.clone());
        let name = p.get("name").map(str::trim).unwrap_or("").to_string();
        if name.is_empty() {
            return Err(Error::config("name", "missing: every connector needs a unique name"));
        }
        let connector_class = p.get("connector.class").map(str::trim).unwrap_or("").to_string();
        if connector_class.is_empty() {
            return Err(Error::config("connector.class", "missing: say which sink runs (e.g. connector.class=file)"));
        }
        let topics: Vec<String> = p
            .get("topics")
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        let topics_regex = p.get("topics.regex").map(str::trim).filter(|r| !r.is_empty()).map(str::to_string);
        match (topics.is_empty(), topics_regex.is_some()) {
            (true, false) => {
                return Err(Error::config("topics", "missing: set topics (a comma-separated list) or topics.regex"))
            }
            (false, true) => {
                return Err(Error::config(
                    "topics.regex",
                    "set either topics or topics.regex, not both (as in Connect)",
                ))
            }
            _ => {}
        }
        for t in &topics {
            crate::topic_name::validate_topic_name(t)?;
        }
        let tasks_max = p.int("tasks.max", 1, 1, 10_000)? as usize;
        check_group_protocol("consumer.override.group.protocol", p.get("consumer.override.group.protocol"))?;
        let group_id = match p.get("share.group.id").map(str::trim) {
            Some(g) if !g.is_empty() => g.to_string(),
            _ => format!("connect-{name}"),
        };
        let ack_mode = match p.choice("share.acknowledgement.mode", "explicit", &["explicit", "implicit"])?.as_str() {
            "implicit" => SinkAckMode::Implicit,
            _ => SinkAckMode::Explicit,
        };
        let consumers_max = match p.get("share.consumers.max").map(str::trim) {
            None | Some("") => None,
            Some(_) if ack_mode == SinkAckMode::Implicit => {
                return Err(Error::config(
                    "share.consumers.max",
                    "applies to share.acknowledgement.mode=explicit; implicit mode runs one consumer per task: \
                     drop the key",
                ))
            }
            Some(_) => Some(p.int("share.consumers.max", 1, 1, 10_000)? as usize),
        };
        // The broker's bounds for share.record.lock.duration.ms (1 s .. 1 h by default).
        let lock_timeout =
            p.millis("share.acquisition.lock.timeout.ms", Duration::from_millis(30_000), 1000, 3_600_000)?;
        let update_group_config = p.bool("share.group.config.update", false)?;
        let auto_offset_reset = offset_reset(&p)?;
        if p.choice("share.delivery.semantics", "at-least-once", &["at-least-once", "exactly-once"])? == "exactly-once"
        {
            return Err(Error::config(
                "share.delivery.semantics",
                "exactly-once needs transactional acknowledgements (KIP-1289), which no released broker has; \
                 use at-least-once, and make the sink idempotent (e.g. keyed by topic, partition and offset)",
            ));
        }
        let max_delivery_count = p.int("share.max.delivery.count", 5, 1, 10)? as i16;
        let dlq_topic = p
            .get("errors.deadletterqueue.topic.name")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if let Some(t) = &dlq_topic {
            crate::topic_name::validate_topic_name(t)?;
            if topics.contains(t) {
                return Err(Error::config(
                    "errors.deadletterqueue.topic.name",
                    format!("{t:?} is also in topics: a dead-lettered record would come back to the sink"),
                ));
            }
        }
        let dlq_context_headers = p.bool("errors.deadletterqueue.context.headers.enable", false)?;
        let dlq_mode = match p.choice("errors.deadletterqueue.mode", "client", &["client", "broker"])?.as_str() {
            "broker" => DeadLetterMode::Broker,
            _ => DeadLetterMode::Client,
        };
        if dlq_mode == DeadLetterMode::Broker {
            let Some(t) = &dlq_topic else {
                return Err(Error::config(
                    "errors.deadletterqueue.mode",
                    "broker needs errors.deadletterqueue.topic.name (a topic starting with the broker's \
                     errors.deadletterqueue.topic.name.prefix, dlq. by default)",
                ));
            };
            if dlq_context_headers {
                return Err(Error::config(
                    "errors.deadletterqueue.context.headers.enable",
                    format!(
                        "applies to errors.deadletterqueue.mode=client; with broker the broker writes its own \
                         __dlq.errors.* headers to {t}: drop the key"
                    ),
                ));
            }
            if ack_mode == SinkAckMode::Implicit {
                return Err(Error::config(
                    "errors.deadletterqueue.mode",
                    "broker dead-letters the records the task REJECTs, and implicit mode accepts whole batches: \
                     use share.acknowledgement.mode=explicit",
                ));
            }
        }
        let dlq_replication_factor = p.int("errors.deadletterqueue.topic.replication.factor", -1, -1, 32_767)? as i16;
        let tolerance = match p.choice("errors.tolerance", "none", &["none", "all"])?.as_str() {
            "all" => ErrorTolerance::All,
            _ => ErrorTolerance::None,
        };
        if dlq_topic.is_some() && tolerance == ErrorTolerance::None {
            return Err(Error::config(
                "errors.tolerance",
                "errors.deadletterqueue.topic.name is set but errors.tolerance=none stops the task on the first failed \
                 record, so nothing would reach the dead-letter topic; set errors.tolerance=all",
            ));
        }
        let mut consumer_overrides = BTreeMap::new();
        for (k, v) in &all {
            if let Some(rest) = k.strip_prefix("consumer.override.") {
                // auto.offset.reset is the group's share.auto.offset.reset (`offset_reset`).
                if rest != "group.protocol" && rest != OFFSET_RESET_OVERRIDE {
                    consumer_overrides.insert(rest.to_string(), v.clone());
                }
            }
        }
        for k in ["group.id", "share.acknowledgement.mode"] {
            if consumer_overrides.contains_key(k) {
                return Err(Error::config(
                    format!("consumer.override.{k}"),
                    format!("set by the runtime; use {} instead", if k == "group.id" { "share.group.id" } else { k }),
                ));
            }
        }
        Ok(ConnectorConfig {
            name,
            connector_class,
            topics,
            topics_regex,
            tasks_max,
            consumers_max,
            group_id,
            ack_mode,
            lock_timeout,
            update_group_config,
            auto_offset_reset,
            max_delivery_count,
            dlq_topic,
            dlq_mode,
            dlq_context_headers,
            dlq_replication_factor,
            tolerance,
            consumer_overrides,
            task_config: all,
        })
    }

    /// `name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `connector.class`.
    pub fn connector_class(&self) -> &str {
        &self.connector_class
    }

    /// `topics` (empty with `topics.regex`).
    pub fn topics(&self) -> &[String] {
        &self.topics
    }

    /// `topics.regex`.
    pub fn topics_regex(&self) -> Option<&str> {
        self.topics_regex.as_deref()
    }

    /// `tasks.max` (default 1): how many tasks start.
    pub fn tasks_max(&self) -> usize {
        self.tasks_max
    }

    /// `share.consumers.max` (explicit mode): at most this many share consumers, each a
    /// member of the group with share sessions of its own, never more than there are tasks.
    /// `None`, the default: one per partition of `topics` at start (one with
    /// `topics.regex`), each keeping two tasks or more so that one slow `put` never holds a
    /// partition back.
    pub fn consumers_max(&self) -> Option<usize> {
        self.consumers_max
    }

    /// `share.group.id` (default `connect-<name>`).
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// `share.acknowledgement.mode` (default explicit).
    pub fn ack_mode(&self) -> SinkAckMode {
        self.ack_mode
    }

    /// `share.acquisition.lock.timeout.ms` (default 30 s).
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// `share.max.delivery.count` (default 5).
    pub fn max_delivery_count(&self) -> i16 {
        self.max_delivery_count
    }

    /// `errors.deadletterqueue.topic.name`.
    pub fn dead_letter_topic(&self) -> Option<&str> {
        self.dlq_topic.as_deref()
    }

    /// `errors.deadletterqueue.mode` (default client).
    pub fn dead_letter_mode(&self) -> DeadLetterMode {
        self.dlq_mode
    }

    /// `errors.tolerance` (default none).
    pub fn error_tolerance(&self) -> ErrorTolerance {
        self.tolerance
    }

    /// Every key as given (the sinks read their own keys here).
    pub fn task_config(&self) -> &TaskConfig {
        &self.task_config
    }
}

/// A connector properties file's settings, unchecked.
pub(crate) fn settings_of_properties(p: &Properties) -> TaskConfig {
    p.keys().filter_map(|k| p.get(k).map(|v| (k.to_string(), v.to_string()))).collect()
}

/// A connector's JSON (`{"name": .., "config": {..}}` or flat settings) as its settings,
/// unchecked. Values may be strings, numbers or booleans.
pub(crate) fn settings_of_json(text: &str) -> Result<TaskConfig> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        Error::config("json", format!("not valid JSON: {e}; expected {{\"name\":..,\"config\":{{..}}}}"))
    })?;
    let obj = v
        .as_object()
        .ok_or_else(|| Error::config("json", "expected an object: {\"name\":..,\"config\":{..}} or flat settings"))?;
    let mut all = TaskConfig::new();
    let (settings, name) = match obj.get("config").and_then(|c| c.as_object()) {
        Some(cfg) => (cfg, obj.get("name").and_then(|n| n.as_str())),
        None => (obj, None),
    };
    for (k, v) in settings {
        let s = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            other => {
                return Err(Error::config(
                    k.clone(),
                    format!("{other} is not a setting value: use a string, number or boolean"),
                ))
            }
        };
        all.insert(k.clone(), s);
    }
    if let Some(n) = name {
        all.entry("name".to_string()).or_insert_with(|| n.to_string());
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![("name", "c1"), ("connector.class", "file"), ("topics", "a,b")]
    }

    fn with(extra: &[(&'static str, &'static str)]) -> Result<ConnectorConfig> {
        let mut v = base();
        v.extend_from_slice(extra);
        ConnectorConfig::from_pairs(v)
    }

    #[test]
    fn defaults_follow_kip_1302() {
        let c = with(&[]).unwrap();
        assert_eq!(c.group_id(), "connect-c1");
        assert_eq!(c.topics(), ["a", "b"]);
        assert_eq!(c.ack_mode(), SinkAckMode::Explicit);
        assert_eq!(c.lock_timeout(), Duration::from_secs(30));
        assert_eq!(c.max_delivery_count(), 5);
        assert_eq!(c.tasks_max(), 1);
        assert_eq!(c.error_tolerance(), ErrorTolerance::None);
        assert_eq!(c.task_config().get("topics").map(String::as_str), Some("a,b"));
    }

    #[test]
    fn exactly_once_is_refused_naming_kip_1289() {
        let e = with(&[("share.delivery.semantics", "exactly-once")]).unwrap_err();
        assert!(e.to_string().contains("KIP-1289"), "{e}");
    }

    #[test]
    fn only_share_groups() {
        let e = with(&[("consumer.override.group.protocol", "consumer")]).unwrap_err();
        assert!(e.to_string().contains("share groups"), "{e}");
        with(&[("consumer.override.group.protocol", "share")]).unwrap();
        let p = Properties::from_pairs([("bootstrap.servers", "x:1"), ("consumer.group.protocol", "classic")]);
        let e = WorkerConfig::from_properties(&p).unwrap_err();
        assert!(e.to_string().contains("consumer.group.protocol=share"), "{e}");
    }

    #[test]
    fn dead_letter_needs_tolerance_all() {
        let e = with(&[("errors.deadletterqueue.topic.name", "dlq")]).unwrap_err();
        assert!(e.to_string().contains("errors.tolerance=all"), "{e}");
        let c = with(&[("errors.deadletterqueue.topic.name", "dlq"), ("errors.tolerance", "all")]).unwrap();
        assert_eq!(c.dead_letter_topic(), Some("dlq"));
    }

    #[test]
    fn broker_dead_lettering_needs_a_topic_explicit_mode_and_no_connect_headers() {
        let dlq = [("errors.deadletterqueue.topic.name", "dlq.x"), ("errors.tolerance", "all")];
        assert_eq!(with(&dlq).unwrap().dead_letter_mode(), DeadLetterMode::Client);
        let broker = with(&[dlq[0], dlq[1], ("errors.deadletterqueue.mode", "broker")]).unwrap();
        assert_eq!(broker.dead_letter_mode(), DeadLetterMode::Broker);
        for (extra, says) in [
            (vec![("errors.tolerance", "all")], "needs errors.deadletterqueue.topic.name"),
            (vec![dlq[0], dlq[1], ("errors.deadletterqueue.context.headers.enable", "true")], "__dlq.errors"),
            (vec![dlq[0], dlq[1], ("share.acknowledgement.mode", "implicit")], "explicit"),
            (vec![dlq[0], dlq[1], ("errors.deadletterqueue.mode", "somewhere")], "client"),
        ] {
            let mut pairs = extra;
            if !pairs.iter().any(|(k, _)| *k == "errors.deadletterqueue.mode") {
                pairs.push(("errors.deadletterqueue.mode", "broker"));
            }
            let e = with(&pairs).unwrap_err();
            assert!(e.to_string().contains(says), "{pairs:?}: {e}");
        }
    }

    #[test]
    fn consumers_max_is_explicit_modes_and_at_least_one() {
        assert_eq!(with(&[]).unwrap().consumers_max(), None);
        assert_eq!(with(&[("share.consumers.max", "4")]).unwrap().consumers_max(), Some(4));
        for v in ["0", "-1", "many"] {
            let e = with(&[("share.consumers.max", v)]).unwrap_err();
            assert!(matches!(&e, Error::Config { key, .. } if key == "share.consumers.max"), "{v}: {e}");
        }
        let e = with(&[("share.consumers.max", "2"), ("share.acknowledgement.mode", "implicit")]).unwrap_err();
        assert!(e.to_string().contains("one consumer per task"), "{e}");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (k, v) in [("tasks.max", "0"), ("share.acknowledgement.mode", "sometimes"), ("errors.tolerance", "x")] {
            let e = with(&[(k, v)]).unwrap_err();
            assert!(matches!(&e, Error::Config { key, .. } if key == k), "{k}: {e}");
        }
        assert!(ConnectorConfig::from_pairs([("name", "x"), ("connector.class", "file")]).is_err());
    }

    #[test]
    fn json_in_connect_rest_form_or_flat() {
        let c = ConnectorConfig::from_json(
            r#"{"name":"j","config":{"connector.class":"file","topics":"t","tasks.max":3}}"#,
        )
        .unwrap();
        assert_eq!((c.name(), c.tasks_max()), ("j", 3));
        let c = ConnectorConfig::from_json(r#"{"name":"f","connector.class":"file","topics":"t"}"#).unwrap();
        assert_eq!(c.name(), "f");
        assert!(ConnectorConfig::from_json("[1]").is_err());
    }

    #[test]
    fn worker_splits_client_settings_and_overrides() {
        let p = Properties::from_pairs([
            ("bootstrap.servers", "h:1"),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
            ("consumer.max.poll.records", "7"),
            ("producer.linger.ms", "3"),
        ]);
        let w = WorkerConfig::from_properties(&p).unwrap();
        let c = with(&[("consumer.override.fetch.max.wait.ms", "100")]).unwrap();
        let cp = w.consumer_properties(&c);
        assert_eq!(cp.get("max.poll.records"), Some("7"));
        assert_eq!(cp.get("fetch.max.wait.ms"), Some("100"));
        assert_eq!(cp.get("security.protocol"), Some("SASL_PLAINTEXT"));
        assert!(!cp.contains("key.converter"));
        assert_eq!(w.producer_properties().get("linger.ms"), Some("3"));
        assert!(WorkerConfig::from_properties(&Properties::new()).is_err());
    }

    #[test]
    fn the_workers_converters_are_the_connectors_defaults() {
        let p = Properties::from_pairs([
            ("bootstrap.servers", "h:1"),
            ("key.converter", "string"),
            ("value.converter", "json"),
            ("value.converter.schemas.enable", "false"),
            ("key.converterx", "not a converter key"),
        ]);
        let w = WorkerConfig::from_properties(&p).unwrap();
        let mut own = TaskConfig::new();
        w.default_converters(&mut own);
        assert_eq!(own.get("key.converter").map(String::as_str), Some("string"));
        assert_eq!(own.get("value.converter.schemas.enable").map(String::as_str), Some("false"));
        assert!(!own.contains_key("key.converterx"));
        // A connector's own converter keeps its own settings, none of the worker's.
        let mut own: TaskConfig = [("value.converter".to_string(), "json".to_string())].into_iter().collect();
        w.default_converters(&mut own);
        assert!(!own.contains_key("value.converter.schemas.enable"), "{own:?}");
        assert_eq!(own.get("key.converter").map(String::as_str), Some("string"));
    }
}
