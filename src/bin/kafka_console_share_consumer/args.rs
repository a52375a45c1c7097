//! Command-line parsing with the option names and checks of Java's
//! `kafka-console-share-consumer.sh` (ConsoleShareConsumerOptions, Kafka 4.4).
//!
//! Hand-written, as `kafka-share-groups`' parser: both `--flag value` and `--flag=value`,
//! unambiguous prefixes of an option name (Java's jopt-simple takes them too), and every
//! mistake one line naming the option.

use std::collections::BTreeMap;

use kafka_share::config::Properties;

use super::format::{Formatter, BYTE_ARRAY_DESERIALIZER, STRING_DESERIALIZER};

/// The group Java's tool joins when none is given.
pub const DEFAULT_GROUP: &str = "console-share-consumer";
/// The client.id Java's tool sets when the properties set none.
pub const DEFAULT_CLIENT_ID: &str = "console-share-consumer";
/// The only formatter there is.
pub const DEFAULT_FORMATTER: &str = "org.apache.kafka.tools.consumer.DefaultMessageFormatter";

// A usage mistake is printed as one line, exit code 1.
use crate::usage::usage;
pub use crate::usage::Usage;

/// How each printed record is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ack {
    #[default]
    Accept,
    Release,
    Reject,
}

/// A parsed command line (nothing read from files yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    pub bootstrap: Option<String>,
    pub topic: Option<String>,
    pub group: Option<String>,
    /// None: no limit.
    pub max_messages: Option<u64>,
    /// None: wait for ever.
    pub timeout_ms: Option<u64>,
    pub reject_message_on_error: bool,
    pub ack: Ack,
    pub formatter_config: Option<String>,
    /// `--formatter-property` (or the deprecated `--property`) pairs, in order.
    pub formatter_properties: Vec<(String, String)>,
    pub key_deserializer: Option<String>,
    pub value_deserializer: Option<String>,
    /// `--command-config` (or the deprecated `--consumer-config`).
    pub command_config: Option<String>,
    /// `--command-property` (or the deprecated `--consumer-property`) pairs, in order.
    pub command_properties: Vec<(String, String)>,
    /// Deprecation notices to print (the deprecated spellings used).
    pub warnings: Vec<String>,
    pub help: bool,
    pub version: bool,
}

pub const HELP: &str = "kafka-console-share-consumer: reads records of a topic through a share group and prints them.

Usage: kafka-console-share-consumer --bootstrap-server HOST:PORT --topic TOPIC [OPTIONS]

  --bootstrap-server HOST:PORT[,...]  REQUIRED: the server(s) to connect to
  --topic TOPIC                  REQUIRED: the topic to consume from
  --group GROUP                  the share group (default console-share-consumer)
  --max-messages N               exit after N records (default: no limit; -1 no limit, any
                                   other negative reads nothing, as Java)
  --timeout-ms MS                exit when no record arrives for MS milliseconds
  --release                      release each record once printed (it is delivered again)
  --reject                       reject each record once printed (never delivered again)
                                 (default: accept each record once printed)
  --reject-message-on-error      reject a record that cannot be acknowledged instead of stopping
  --formatter-property K=V       formatter setting, repeatable:
                                   print.timestamp, print.key, print.offset, print.delivery,
                                   print.epoch, print.partition, print.headers,
                                   print.value=true|false; key.separator, line.separator,
                                   headers.separator, null.literal=TEXT; key.deserializer,
                                   value.deserializer, headers.deserializer=CLASS
  --formatter-config FILE        formatter settings file (--formatter-property wins)
  --key-deserializer CLASS       as key.deserializer; --value-deserializer CLASS likewise.
                                 CLASS: org.apache.kafka.common.serialization.StringDeserializer
                                 (UTF-8 text) or ...ByteArrayDeserializer (bytes, the default)
  --command-config FILE          consumer properties file (Java names: security.protocol, ...)
  --command-property K=V         consumer property, repeatable (wins over the file)
  --property, --consumer-config, --consumer-property
                                 deprecated spellings of --formatter-property,
                                 --command-config and --command-property
  --formatter CLASS              only org.apache.kafka.tools.consumer.DefaultMessageFormatter
  --version                      print the version and exit
  --help                         print this help and exit

Records go to stdout, then \"Processed a total of N messages\" to stderr. Exit code 0 when
--max-messages or --timeout-ms ends the run, on Ctrl-C / SIGTERM (what was printed is
acknowledged, the rest released) and when stdout closes; 1 on bad usage or an error.
Where Java's tool differs: --help exits 1, and an error after the start is logged and exits 0.
header.deserializer (the spelling of Java's --help) is ignored with a warning, as Java's
formatter ignores it.";

/// Every option, with whether it takes a value.
const OPTIONS: &[(&str, bool)] = &[
    ("bootstrap-server", true),
    ("topic", true),
    ("group", true),
    ("max-messages", true),
    ("timeout-ms", true),
    ("reject", false),
    ("release", false),
    ("reject-message-on-error", false),
    ("formatter", true),
    ("formatter-config", true),
    ("formatter-property", true),
    ("property", true),
    ("key-deserializer", true),
    ("value-deserializer", true),
    ("command-config", true),
    ("command-property", true),
    ("consumer-config", true),
    ("consumer-property", true),
    ("enable-systest-events", false),
    ("help", false),
    ("version", false),
];

/// The option `name` (without `--`) stands for: itself, or the one option it is a prefix of.
fn resolve(name: &str) -> Result<(&'static str, bool), Usage> {
    if let Some(&(n, v)) = OPTIONS.iter().find(|(n, _)| *n == name) {
        return Ok((n, v));
    }
    let matches: Vec<_> = OPTIONS.iter().filter(|(n, _)| !name.is_empty() && n.starts_with(name)).collect();
    match matches.as_slice() {
        [&(n, v)] => Ok((n, v)),
        [] => usage(format!("unknown option --{name}")),
        many => usage(format!(
            "option --{name} is ambiguous: {}",
            many.iter().map(|(n, _)| format!("--{n}")).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Parses `argv` (without the program name).
pub fn parse(argv: &[String]) -> Result<Args, Usage> {
    let mut a = Args::default();
    let mut formatter_property = Vec::new();
    let mut property = Vec::new();
    let mut command_property = Vec::new();
    let mut consumer_property = Vec::new();
    let mut command_config = None;
    let mut consumer_config = None;
    let mut max_messages = None;
    let mut timeout_ms = None;
    let (mut reject, mut release) = (false, false);
    let mut it = argv.iter();
    while let Some(raw) = it.next() {
        let Some(body) = raw.strip_prefix("--") else {
            return usage(format!("unexpected argument {raw:?} (options start with --)"));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let (name, takes_value) = resolve(name)?;
        let value = if takes_value {
            match inline {
                Some(v) => Some(v),
                None => match it.next() {
                    Some(v) if !v.starts_with("--") => Some(v.clone()),
                    _ => return usage(format!("--{name} needs a value")),
                },
            }
        } else if inline.is_some() {
            return usage(format!("--{name} takes no value"));
        } else {
            None
        };
        let v = value.unwrap_or_default();
        let once = |slot: &mut Option<String>, v: String| -> Result<(), Usage> {
            if slot.replace(v).is_some() {
                return usage(format!("--{name} given more than once"));
            }
            Ok(())
        };
        match name {
            "bootstrap-server" => once(&mut a.bootstrap, v)?,
            "topic" => once(&mut a.topic, v)?,
            "group" => once(&mut a.group, v)?,
            "max-messages" => once(&mut max_messages, v)?,
            "timeout-ms" => once(&mut timeout_ms, v)?,
            "reject" => reject = true,
            "release" => release = true,
            "reject-message-on-error" => a.reject_message_on_error = true,
            "formatter" => {
                if v != DEFAULT_FORMATTER {
                    return usage(format!("--formatter {v:?} is not supported; the formatter is {DEFAULT_FORMATTER}"));
                }
            }
            "formatter-config" => once(&mut a.formatter_config, v)?,
            "formatter-property" => formatter_property.push(key_value(&v)),
            "property" => property.push(key_value(&v)),
            "key-deserializer" => once(&mut a.key_deserializer, v)?,
            "value-deserializer" => once(&mut a.value_deserializer, v)?,
            "command-config" => once(&mut command_config, v)?,
            "command-property" => command_property.push(key_value(&v)),
            "consumer-config" => once(&mut consumer_config, v)?,
            "consumer-property" => consumer_property.push(key_value(&v)),
            "enable-systest-events" => {
                return usage("--enable-systest-events (Kafka's system tests only) is not supported")
            }
            "help" => a.help = true,
            "version" => a.version = true,
            _ => unreachable!("every name in OPTIONS is matched"),
        }
    }
    // As Java (CommandLineUtils.maybePrintHelpOrVersion): --help and --version need nothing else.
    if a.help || a.version {
        return Ok(a);
    }
    if a.topic.is_none() {
        return usage("--topic is required");
    }
    if a.bootstrap.is_none() {
        return usage("--bootstrap-server is required");
    }
    a.ack = match (reject, release) {
        (true, true) => return usage("at most one of --reject and --release may be given"),
        (true, false) => Ack::Reject,
        (false, true) => Ack::Release,
        (false, false) => Ack::Accept,
    };
    // Java reads while `count < max || max == -1`: any other negative reads nothing.
    a.max_messages = match count("--max-messages", max_messages.clone()) {
        Err(_) if max_messages.as_deref().and_then(|v| v.trim().parse::<i32>().ok()).is_some_and(|n| n < -1) => Some(0),
        other => other?,
    };
    a.timeout_ms = count("--timeout-ms", timeout_ms)?;
    a.formatter_properties =
        deprecated(&mut a.warnings, ("--formatter-property", formatter_property), ("--property", property))?;
    a.command_properties = deprecated(
        &mut a.warnings,
        ("--command-property", command_property),
        ("--consumer-property", consumer_property),
    )?;
    let configs = deprecated(
        &mut a.warnings,
        ("--command-config", command_config.into_iter().collect()),
        ("--consumer-config", consumer_config.into_iter().collect()),
    )?;
    a.command_config = configs.into_iter().next();
    // Deserializer names are checked here, before anything connects.
    for (setting, class) in
        [("--key-deserializer", &a.key_deserializer), ("--value-deserializer", &a.value_deserializer)]
    {
        if let Some(c) = class {
            super::format::Deserializer::from_class(setting, c).map_err(Usage)?;
        }
    }
    Ok(a)
}

/// Java's `CommandLineUtils.parseKeyValueArgs`: split at the first `=`; no `=` is an empty value.
fn key_value(s: &str) -> (String, String) {
    match s.split_once('=') {
        Some((k, v)) => (k.to_string(), v.to_string()),
        None => (s.to_string(), String::new()),
    }
}

/// A non-negative count; -1 means "not given", as Java's tool reads it.
fn count(name: &str, v: Option<String>) -> Result<Option<u64>, Usage> {
    let Some(v) = v else { return Ok(None) };
    match v.trim().parse::<i32>() {
        Ok(-1) => Ok(None),
        Ok(n) if n >= 0 => Ok(Some(n as u64)),
        Ok(n) => usage(format!("{name} must be 0 or more (or -1 for no limit), not {n}")),
        Err(_) => usage(format!("{name} needs a whole number (at most {}), not {v:?}", i32::MAX)),
    }
}

/// The values of an option or of its deprecated spelling, never both (as Java).
fn deprecated<T>(
    warnings: &mut Vec<String>,
    (new, new_values): (&str, Vec<T>),
    (old, old_values): (&str, Vec<T>),
) -> Result<Vec<T>, Usage> {
    match (new_values.is_empty(), old_values.is_empty()) {
        (false, false) => usage(format!("options {old} and {new} cannot be given together")),
        (true, false) => {
            warnings
                .push(format!("option {old} is deprecated and will be removed in a future version; use {new} instead"));
            Ok(old_values)
        }
        _ => Ok(new_values),
    }
}

impl Args {
    /// The formatter: the `--formatter-config` file, then `--key-deserializer` /
    /// `--value-deserializer`, then `--formatter-property` (each wins over the one before,
    /// as in Java).
    pub fn formatter(&self) -> Result<Formatter, Usage> {
        let mut props = BTreeMap::new();
        if let Some(path) = &self.formatter_config {
            let file = Properties::load(path).map_err(|e| Usage(format!("--formatter-config: {e}")))?;
            for k in file.keys() {
                props.insert(k.to_string(), file.get(k).unwrap_or_default().to_string());
            }
        }
        if let Some(c) = self.key_deserializer.as_ref().filter(|c| !c.is_empty()) {
            props.insert("key.deserializer".to_string(), c.clone());
        }
        if let Some(c) = self.value_deserializer.as_ref().filter(|c| !c.is_empty()) {
            props.insert("value.deserializer".to_string(), c.clone());
        }
        for (k, v) in &self.formatter_properties {
            props.insert(k.clone(), v.clone());
        }
        Formatter::from_properties(&props).map_err(Usage)
    }

    /// The consumer's properties: the `--command-config` file, then `--command-property`;
    /// `bootstrap.servers` from `--bootstrap-server`; `client.id` console-share-consumer
    /// unless set; the group from wherever it is given (all the same) or
    /// console-share-consumer; explicit acknowledgement (the tool acknowledges each record).
    pub fn consumer_properties(&self) -> Result<Properties, Usage> {
        let mut p = match &self.command_config {
            Some(path) => Properties::load(path).map_err(|e| Usage(format!("--command-config: {e}")))?,
            None => Properties::new(),
        };
        let from_file = p.get("group.id").map(str::to_string);
        let mut from_props = None;
        for (k, v) in &self.command_properties {
            if k == "group.id" {
                from_props = Some(v.clone());
            }
            p.set(k.clone(), v.clone());
        }
        let mut groups: Vec<String> = Vec::new();
        for g in [self.group.clone(), from_file, from_props].into_iter().flatten() {
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        if groups.len() > 1 {
            let list = groups.iter().map(|g| format!("{g:?}")).collect::<Vec<_>>().join(", ");
            return usage(format!(
                "the group ids given in different places (--group, group.id in --command-property \
                 or in --command-config) do not match: {list}"
            ));
        }
        let group = groups.pop().unwrap_or_else(|| DEFAULT_GROUP.to_string());
        p.set("bootstrap.servers", self.bootstrap.clone().unwrap_or_default());
        if p.get("client.id").is_none() {
            p.set("client.id", DEFAULT_CLIENT_ID);
        }
        p.set("group.id", group);
        p.set("share.acknowledgement.mode", "explicit");
        // The tool deserializes nothing: the consumer hands out bytes. A Java properties file
        // may name Java's classes; any other deserializer is refused, not ignored.
        for key in ["key.deserializer", "value.deserializer"] {
            if let Some(c) = p.get(key) {
                if c.trim() != BYTE_ARRAY_DESERIALIZER && c.trim() != STRING_DESERIALIZER {
                    return usage(format!(
                        "consumer property {key}={c} is not supported; the tool reads bytes \
                         (use --formatter-property {key}={STRING_DESERIALIZER} to print text)"
                    ));
                }
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Result<Args, Usage> {
        parse(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>())
    }

    fn ok(s: &[&str]) -> Args {
        args(s).unwrap()
    }

    fn err(s: &[&str]) -> String {
        args(s).unwrap_err().0
    }

    const BASE: &[&str] = &["--bootstrap-server", "h:1", "--topic", "t"];

    fn with(extra: &[&str]) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = BASE.to_vec();
        v.extend(extra.iter().map(|s| &*Box::leak(s.to_string().into_boxed_str())));
        v
    }

    #[test]
    fn minimal_run() {
        let a = ok(BASE);
        assert_eq!(a.bootstrap.as_deref(), Some("h:1"));
        assert_eq!(a.topic.as_deref(), Some("t"));
        assert_eq!((a.max_messages, a.timeout_ms, a.ack), (None, None, Ack::Accept));
        let p = a.consumer_properties().unwrap();
        assert_eq!(p.get("group.id"), Some("console-share-consumer"));
        assert_eq!(p.get("client.id"), Some("console-share-consumer"));
        assert_eq!(p.get("bootstrap.servers"), Some("h:1"));
        assert_eq!(p.get("share.acknowledgement.mode"), Some("explicit"));
        assert_eq!(a.formatter().unwrap(), Formatter::default());
    }

    #[test]
    fn values_inline_and_separate_and_prefixes() {
        let a = ok(&["--bootstrap-server=h:1", "--topic", "t", "--max-messages=5", "--timeout", "100", "--grou", "g"]);
        assert_eq!(a.max_messages, Some(5));
        assert_eq!(a.timeout_ms, Some(100));
        assert_eq!(a.group.as_deref(), Some("g"));
        // `--reject` is an option of its own, not a prefix of --reject-message-on-error.
        assert_eq!(ok(&with(&["--reject"])).ack, Ack::Reject);
        assert!(err(&with(&["--re"])).contains("ambiguous"));
    }

    #[test]
    fn required_options() {
        assert_eq!(err(&["--bootstrap-server", "h:1"]), "--topic is required");
        assert_eq!(err(&["--topic", "t"]), "--bootstrap-server is required");
        assert!(ok(&["--help"]).help);
        assert!(ok(&["--version"]).version);
    }

    #[test]
    fn bad_options() {
        assert_eq!(err(&with(&["--bogus"])), "unknown option --bogus");
        assert_eq!(err(&with(&["--group"])), "--group needs a value");
        assert_eq!(err(&with(&["--group", "--reject"])), "--group needs a value");
        assert_eq!(err(&with(&["--reject=yes"])), "--reject takes no value");
        assert!(err(&with(&["stray"])).contains("unexpected argument \"stray\""));
        assert_eq!(err(&with(&["--topic", "u"])), "--topic given more than once");
        assert!(err(&with(&["--release", "--reject"])).contains("at most one of --reject and --release"));
        assert!(err(&with(&["--formatter", "x.Y"])).contains("not supported"));
        assert!(err(&with(&["--enable-systest-events"])).contains("not supported"));
    }

    #[test]
    fn numbers() {
        assert!(err(&with(&["--max-messages", "abc"])).contains("--max-messages needs a whole number"));
        assert!(err(&with(&["--timeout-ms", "1.5"])).contains("--timeout-ms needs a whole number"));
        assert!(err(&with(&["--max-messages", "99999999999"])).contains("at most 2147483647"));
        // As Java: -1 is no limit, any other negative reads nothing.
        assert_eq!(ok(&with(&["--max-messages", "-3"])).max_messages, Some(0));
        assert!(err(&with(&["--timeout-ms", "-2"])).contains("0 or more"));
        assert_eq!(ok(&with(&["--max-messages", "-1"])).max_messages, None);
        assert_eq!(ok(&with(&["--max-messages", "0"])).max_messages, Some(0));
        assert_eq!(ok(&with(&["--timeout-ms", "0"])).timeout_ms, Some(0));
    }

    #[test]
    fn ack_modes() {
        assert_eq!(ok(&with(&["--release"])).ack, Ack::Release);
        assert_eq!(ok(&with(&["--reject"])).ack, Ack::Reject);
        assert!(ok(&with(&["--reject-message-on-error"])).reject_message_on_error);
    }

    #[test]
    fn formatter_properties_and_their_order() {
        let a = ok(&with(&[
            "--formatter-property",
            "print.key=true",
            "--formatter-property",
            "key.separator= = ",
            "--value-deserializer",
            STRING_DESERIALIZER,
            "--formatter-property",
            "value.deserializer=org.apache.kafka.common.serialization.ByteArrayDeserializer",
        ]));
        let f = a.formatter().unwrap();
        assert!(f.print_key);
        // Split at the first '=' only.
        assert_eq!(f.key_separator, b" = ");
        // --formatter-property wins over --value-deserializer.
        assert_eq!(f.value_deserializer, super::super::format::Deserializer::Bytes);
        let e = ok(&with(&["--formatter-property", "print.key=maybe"])).formatter().unwrap_err();
        assert!(e.0.contains("print.key must be true or false"), "{e}");
        let e = ok(&with(&["--formatter-property", "print.key"])).formatter().unwrap_err();
        assert!(e.0.contains("print.key must be true or false, not \"\""), "{e}");
    }

    #[test]
    fn formatter_config_file_loses_to_properties() {
        let dir = std::env::temp_dir().join(format!("kcsc-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("formatter.properties");
        std::fs::write(&file, "print.key=true\nprint.offset=true\nkey.separator=\\t|\n").unwrap();
        let path = file.to_str().unwrap();
        let f = ok(&with(&["--formatter-config", path, "--formatter-property", "print.offset=false"]))
            .formatter()
            .unwrap();
        assert!(f.print_key && !f.print_offset);
        // The file is a Java properties file: \t is a tab there.
        assert_eq!(f.key_separator, b"\t|");
        let e = ok(&with(&["--formatter-config", "/nonexistent/f.properties"])).formatter().unwrap_err();
        assert!(e.0.starts_with("--formatter-config:"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn deserializers_are_checked() {
        assert!(err(&with(&["--key-deserializer", "com.example.Avro"])).contains("not supported"));
        ok(&with(&["--key-deserializer", BYTE_ARRAY_DESERIALIZER]));
    }

    #[test]
    fn deprecated_spellings() {
        let a = ok(&with(&["--property", "print.key=true", "--consumer-property", "client.id=me"]));
        assert!(a.formatter().unwrap().print_key);
        assert_eq!(a.consumer_properties().unwrap().get("client.id"), Some("me"));
        assert_eq!(a.warnings.len(), 2);
        assert!(a.warnings[0].contains("--property is deprecated"), "{:?}", a.warnings);
        assert!(err(&with(&["--property", "a=b", "--formatter-property", "c=d"])).contains("cannot be given together"));
        assert!(err(&with(&["--consumer-property", "a=b", "--command-property", "c=d"]))
            .contains("cannot be given together"));
        assert!(err(&with(&["--consumer-config", "a", "--command-config", "b"])).contains("cannot be given together"));
    }

    #[test]
    fn group_from_anywhere_but_only_one() {
        let a = ok(&with(&["--command-property", "group.id=g1"]));
        assert_eq!(a.consumer_properties().unwrap().get("group.id"), Some("g1"));
        let a = ok(&with(&["--group", "g1", "--command-property", "group.id=g1"]));
        assert_eq!(a.consumer_properties().unwrap().get("group.id"), Some("g1"));
        let a = ok(&with(&["--group", "g1", "--command-property", "group.id=g2"]));
        let e = a.consumer_properties().unwrap_err();
        assert!(e.0.contains("do not match: \"g1\", \"g2\""), "{e}");
    }

    #[test]
    fn command_config_then_properties_and_bootstrap_wins() {
        let dir = std::env::temp_dir().join(format!("kcsc-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("consumer.properties");
        std::fs::write(&file, "bootstrap.servers=other:9\nclient.id=from-file\nfetch.max.wait.ms=100\ngroup.id=fg\n")
            .unwrap();
        let path = file.to_str().unwrap();
        let a = ok(&with(&["--command-config", path, "--command-property", "fetch.max.wait.ms=200"]));
        let p = a.consumer_properties().unwrap();
        assert_eq!(p.get("bootstrap.servers"), Some("h:1"));
        assert_eq!(p.get("client.id"), Some("from-file"));
        assert_eq!(p.get("fetch.max.wait.ms"), Some("200"));
        assert_eq!(p.get("group.id"), Some("fg"));
        assert!(ok(&with(&["--command-config", path, "--group", "other"])).consumer_properties().is_err());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn consumer_deserializers() {
        let a = ok(&with(&["--command-property", &format!("key.deserializer={BYTE_ARRAY_DESERIALIZER}")]));
        a.consumer_properties().unwrap();
        let a = ok(&with(&["--command-property", "value.deserializer=com.example.Avro"]));
        assert!(a.consumer_properties().unwrap_err().0.contains("not supported"));
    }
}
