//! Java-style properties: `key=value` maps, read from a map or a `.properties` file, with
//! typed getters whose errors name the key and say what a good value looks like.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};

/// A set of Java-named settings. Each getter marks its key as used, so that
/// [`Properties::reject_unused`] can refuse keys nobody understood (typos, wrong client).
#[derive(Debug, Clone, Default)]
pub struct Properties {
    values: BTreeMap<String, String>,
    used: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

impl Properties {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// From (key, value) pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        let mut p = Properties::new();
        for (k, v) in pairs {
            p.set(k, v);
        }
        p
    }

    /// Parses `.properties` text as `java.util.Properties` does: `key=value`, `key: value` or
    /// `key value` lines; `#` and `!` comments; a line ending in an odd number of backslashes
    /// continues on the next one (its leading blanks dropped), so a long `sasl.jaas.config`
    /// may span lines; `\t`, `\n`, `\r`, `\f`, `\uXXXX` and `\<char>` escapes.
    pub fn parse(text: &str) -> Result<Self> {
        let mut p = Properties::new();
        let mut lines = text.lines().enumerate();
        while let Some((n, first)) = lines.next() {
            let first = first.trim_start();
            if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
                continue;
            }
            let mut logical = first.to_string();
            while ends_in_escape(&logical) {
                logical.pop();
                match lines.next() {
                    Some((_, next)) => logical.push_str(next.trim_start()),
                    None => break, // Java drops a trailing backslash on the last line
                }
            }
            let (k, v) = split_key_value(&logical);
            let key = unescape(k).map_err(|e| Error::config(format!("line {}", n + 1), e))?;
            let value = unescape(v).map_err(|e| Error::config(format!("line {}", n + 1), e))?;
            if key.is_empty() {
                return Err(Error::config(format!("line {}", n + 1), format!("expected key=value, found {logical:?}")));
            }
            p.set(key, value.trim_end());
        }
        Ok(p)
    }

    /// Reads a `.properties` file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::config(path.display().to_string(), format!("cannot read the properties file: {e}")))?;
        Self::parse(&text)
    }

    /// The keys that start with `prefix`, without it: one client's part of a file that holds
    /// several clients' settings and the application's own, as Java's
    /// `originalsWithPrefix`, Connect's `consumer.`/`producer.` and Spring's prefixes keep them.
    /// Only the prefixed keys are in the view (a key every client needs, such as
    /// `bootstrap.servers`, is written under each prefix); the view is a copy, with marks of
    /// its own (see [`unused_keys`](Self::unused_keys)).
    ///
    /// ```
    /// use kafka_share::config::Properties;
    ///
    /// let file = Properties::parse(
    ///     "app.name=orders\n\
    ///      consumer.bootstrap.servers=localhost:9092\n\
    ///      consumer.group.id=orders\n\
    ///      producer.bootstrap.servers=localhost:9092\n\
    ///      processor.concurrency=64\n",
    /// )?;
    /// let consumer = file.with_prefix("consumer.");
    /// assert_eq!(consumer.get("group.id"), Some("orders"));
    /// assert!(!consumer.contains("app.name") && !consumer.contains("concurrency"));
    /// # Ok::<(), kafka_share::Error>(())
    /// ```
    pub fn with_prefix(&self, prefix: &str) -> Properties {
        Properties::from_pairs(
            self.values.iter().filter_map(|(k, v)| k.strip_prefix(prefix).map(|k| (k.to_string(), v.clone()))),
        )
    }

    /// Runs one client's reader on a copy with no key marked used, then marks here what it
    /// read: its check of unread keys sees only its own reads, so what another client read
    /// first from a shared `Properties` does not hide a key from its warning, while
    /// [`unused_keys`](Self::unused_keys) here still lists what no client read.
    pub(crate) fn read_alone<T>(&self, read: impl FnOnce(&Properties) -> Result<T>) -> Result<T> {
        let own = Properties { values: self.values.clone(), used: Default::default() };
        let result = read(&own);
        self.used.borrow_mut().extend(own.used.into_inner());
        result
    }

    /// Sets a key.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.values.insert(key.into(), value.into());
        self
    }

    /// Whether a key is present.
    pub fn contains(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// The raw value of a key (marks it used).
    pub fn get(&self, key: &str) -> Option<&str> {
        let v = self.values.get(key).map(|s| s.as_str());
        if v.is_some() {
            self.used.borrow_mut().insert(key.to_string());
        }
        v
    }

    /// The keys no getter has asked for yet.
    pub fn unused_keys(&self) -> Vec<String> {
        let used = self.used.borrow();
        self.values.keys().filter(|k| !used.contains(*k)).cloned().collect()
    }

    /// All keys.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(|s| s.as_str())
    }

    /// A string value, or `default`.
    pub fn string(&self, key: &str, default: &str) -> String {
        self.get(key).unwrap_or(default).to_string()
    }

    /// An integer within `min..=max`, or `default`.
    pub fn int(&self, key: &str, default: i64, min: i64, max: i64) -> Result<i64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => {
                let n: i64 = v
                    .trim()
                    .parse()
                    .map_err(|_| Error::config(key, format!("{v:?} is not an integer (expected {min}..={max})")))?;
                if n < min || n > max {
                    return Err(Error::config(key, format!("{n} is out of range: allowed {min}..={max}")));
                }
                Ok(n)
            }
        }
    }

    /// A duration given in milliseconds, within `min_ms..=max_ms`.
    pub fn millis(&self, key: &str, default: Duration, min_ms: i64, max_ms: i64) -> Result<Duration> {
        let ms = self.int(key, default.as_millis() as i64, min_ms, max_ms)?;
        Ok(Duration::from_millis(ms as u64))
    }

    /// A boolean (`true` / `false`, any case).
    pub fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(Error::config(key, format!("{v:?} is not a boolean: use true or false"))),
            },
        }
    }

    /// One of `allowed` (case-insensitive), returned lower-cased.
    pub fn choice(&self, key: &str, default: &str, allowed: &[&str]) -> Result<String> {
        match self.get(key) {
            None => Ok(default.to_string()),
            Some(v) => {
                let lv = v.trim().to_ascii_lowercase();
                if allowed.contains(&lv.as_str()) {
                    Ok(lv)
                } else {
                    Err(Error::config(key, format!("{v:?} is not allowed: use one of {}", allowed.join(", "))))
                }
            }
        }
    }

    /// Fails on the first key no getter asked for, naming it. `known` lists keys that are
    /// accepted and ignored (documented as such by the caller).
    pub fn reject_unused(&self, client: &str, known: &[&str]) -> Result<()> {
        let used = self.used.borrow();
        for k in self.values.keys() {
            if !used.contains(k) && !known.contains(&k.as_str()) {
                return Err(Error::config(
                    k.clone(),
                    format!(
                        "unknown setting for a {client}; check the spelling against the Java client's config names"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Whether a line ends in an odd number of backslashes (a continuation).
fn ends_in_escape(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// The key ends at the first unescaped `=`, `:` or blank; then blanks and one `=` or `:`
/// are skipped.
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | 0x0c => break,
            _ => i += 1,
        }
    }
    let i = i.min(bytes.len());
    let key = &line[..i];
    let rest = line[i..].trim_start_matches([' ', '\t', '\u{c}']);
    let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
    (key, rest.trim_start_matches([' ', '\t', '\u{c}']))
}

fn unescape(s: &str) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("malformed \\uXXXX escape \\u{hex}"))?;
                out.push(code);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_properties_text() {
        let p = Properties::parse("# c\n! c\n\nbootstrap.servers = a:1,b:2\nclient.id: me\nempty=\n").unwrap();
        assert_eq!(p.get("bootstrap.servers"), Some("a:1,b:2"));
        assert_eq!(p.get("client.id"), Some("me"));
        assert_eq!(p.get("empty"), Some(""));
        // As in Java: a key alone has the empty value (and an unknown key is refused later).
        assert_eq!(Properties::parse("novalue").unwrap().get("novalue"), Some(""));
    }

    #[test]
    fn continuations_and_escapes_as_java_reads_them() {
        let text = "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n    \
                    username=\"k\" \\\n    password=\"s\";\nkey\\ with\\=odd = v\\u00e9\\\\x\npath=C:\\\\dir\nspaced value\n";
        let p = Properties::parse(text).unwrap();
        assert_eq!(
            p.get("sasl.jaas.config"),
            Some(r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="k" password="s";"#)
        );
        assert_eq!(p.get("key with=odd"), Some("v\u{e9}\\x"));
        assert_eq!(p.get("path"), Some("C:\\dir"));
        assert_eq!(p.get("spaced"), Some("value"));
        assert!(Properties::parse("a=\\uZZZZ").is_err());
    }

    #[test]
    fn typed_getters_explain_bad_values() {
        let p = Properties::from_pairs([("max.poll.records", "zero"), ("x", "0"), ("b", "yes"), ("m", "EXPLICIT")]);
        let e = p.int("max.poll.records", 500, 1, i32::MAX as i64).unwrap_err();
        assert!(e.to_string().contains("max.poll.records"), "{e}");
        assert!(e.to_string().contains("not an integer"), "{e}");
        let e = p.int("x", 500, 1, 10).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        assert!(p.bool("b", false).is_err());
        assert_eq!(p.choice("m", "implicit", &["implicit", "explicit"]).unwrap(), "explicit");
    }

    #[test]
    fn a_prefix_view_holds_the_prefixed_keys_without_the_prefix() {
        let p = Properties::from_pairs([
            ("consumer.group.id", "g"),
            ("consumer.", "empty"),
            ("group.id", "top"),
            ("consumer", "x"),
        ]);
        let v = p.with_prefix("consumer.");
        assert_eq!(v.keys().collect::<Vec<_>>(), vec!["", "group.id"]);
        assert_eq!(v.get("group.id"), Some("g"));
        // Marks are the view's own.
        assert!(p.unused_keys().contains(&"consumer.group.id".to_string()));
        assert!(p.with_prefix("producer.").keys().next().is_none());
    }

    #[test]
    fn unused_keys_are_refused() {
        let p = Properties::from_pairs([("bootstrap.servers", "a:1"), ("bootstrp.servers", "typo")]);
        let _ = p.get("bootstrap.servers");
        let e = p.reject_unused("share consumer", &[]).unwrap_err();
        assert!(e.to_string().contains("bootstrp.servers"), "{e}");
    }
}
