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

    /// Parses `.properties` text: `key=value` or `key: value` lines, `#`/`!` comments, blank
    /// lines ignored. (Line continuations and unicode escapes are not supported: a trailing
    /// backslash is an error rather than a silent misread.)
    pub fn parse(text: &str) -> Result<Self> {
        let mut p = Properties::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            if line.ends_with('\\') {
                return Err(Error::config(
                    format!("line {}", n + 1),
                    "line continuations (trailing '\\') are not supported; put the value on one line",
                ));
            }
            let split = line.find(['=', ':']).ok_or_else(|| {
                Error::config(format!("line {}", n + 1), format!("expected key=value, found {line:?}"))
            })?;
            let (k, v) = line.split_at(split);
            p.set(k.trim(), v[1..].trim());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_properties_text() {
        let p = Properties::parse("# c\n! c\n\nbootstrap.servers = a:1,b:2\nclient.id: me\nempty=\n").unwrap();
        assert_eq!(p.get("bootstrap.servers"), Some("a:1,b:2"));
        assert_eq!(p.get("client.id"), Some("me"));
        assert_eq!(p.get("empty"), Some(""));
        assert!(Properties::parse("novalue").is_err());
        assert!(Properties::parse("a=b\\").is_err());
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
    fn unused_keys_are_refused() {
        let p = Properties::from_pairs([("bootstrap.servers", "a:1"), ("bootstrp.servers", "typo")]);
        let _ = p.get("bootstrap.servers");
        let e = p.reject_unused("share consumer", &[]).unwrap_err();
        assert!(e.to_string().contains("bootstrp.servers"), "{e}");
    }
}
