//! The transforms that choose a record's topic or drop it: RegexRouter, TimestampRouter,
//! Filter.

use regex::Regex;

use super::super::data::ConnectRecord;
use super::super::transform::{required, TransformSettings, Transformation};

/// A Java regex replacement (`$1`) in Rust's syntax (`${1}`, so `$1a` stays group 1 then `a`).
fn java_replacement(r: &str) -> String {
    let mut out = String::with_capacity(r.len() + 4);
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push_str("${");
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    out.push(d);
                    chars.next();
                }
                out.push('}');
            }
            c => out.push(c),
        }
    }
    out
}

/// RegexRouter: a topic that matches `regex` as a whole becomes `replacement`.
pub(crate) struct RegexRouter {
    regex: Regex,
    replacement: String,
}

impl RegexRouter {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        let re = required(s, "regex")?;
        // Java's `Matcher.matches`: the whole topic.
        let regex = Regex::new(&format!("^(?:{re})$")).map_err(|e| format!("regex {re:?}: {e}"))?;
        let replacement = s.get("replacement").ok_or("missing setting \"replacement\"")?;
        Ok(RegexRouter { regex, replacement: java_replacement(replacement) })
    }
}

impl Transformation for RegexRouter {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        if self.regex.is_match(&r.topic) {
            r.topic = self.regex.replace(&r.topic, self.replacement.as_str()).into_owned();
        }
        Ok(Some(r))
    }
}

/// TimestampRouter: the topic becomes `topic.format` (default `${topic}-${timestamp}`), the
/// record's timestamp written in `timestamp.format` (Java's SimpleDateFormat letters `yyyy`,
/// `yy`, `MM`, `dd`, `HH`, `mm`, `ss`, `SSS`, quoted text; default `yyyyMMdd`), in UTC.
pub(crate) struct TimestampRouter {
    topic_format: String,
    timestamp_format: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Year4,
    Year2,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Millis,
}

fn parse_date_format(f: &str) -> Result<Vec<Piece>, String> {
    let chars: Vec<char> = f.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        if c == '\'' {
            let end = chars[i + 1..].iter().position(|&x| x == '\'').ok_or("an unclosed quote in timestamp.format")?;
            let text: String = chars[i + 1..i + 1 + end].iter().collect();
            out.push(Piece::Text(if text.is_empty() { "'".into() } else { text }));
            i += end + 2;
            continue;
        }
        let piece = match (c, run) {
            ('y', 2) => Piece::Year2,
            ('y', _) => Piece::Year4,
            ('M', 2) => Piece::Month,
            ('d', 2) => Piece::Day,
            ('H', 2) => Piece::Hour,
            ('m', 2) => Piece::Minute,
            ('s', 2) => Piece::Second,
            ('S', 3) => Piece::Millis,
            (c, _) if c.is_ascii_alphabetic() => {
                return Err(format!(
                    "timestamp.format: {} is not supported here (yyyy, yy, MM, dd, HH, mm, ss, SSS and 'text' are)",
                    std::iter::repeat_n(c, run).collect::<String>()
                ))
            }
            (c, n) => Piece::Text(std::iter::repeat_n(c, n).collect()),
        };
        out.push(piece);
        i += run;
    }
    Ok(out)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn format_timestamp(pieces: &[Piece], ms: i64) -> String {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, mo, d) = civil(days);
    let mut out = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Year4 => out.push_str(&format!("{y:04}")),
            Piece::Year2 => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Piece::Month => out.push_str(&format!("{mo:02}")),
            Piece::Day => out.push_str(&format!("{d:02}")),
            Piece::Hour => out.push_str(&format!("{:02}", in_day / 3_600_000)),
            Piece::Minute => out.push_str(&format!("{:02}", in_day / 60_000 % 60)),
            Piece::Second => out.push_str(&format!("{:02}", in_day / 1000 % 60)),
            Piece::Millis => out.push_str(&format!("{:03}", in_day % 1000)),
        }
    }
    out
}

impl TimestampRouter {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        Ok(TimestampRouter {
            topic_format: s.get("topic.format").cloned().unwrap_or_else(|| "${topic}-${timestamp}".to_string()),
            timestamp_format: parse_date_format(s.get("timestamp.format").map(String::as_str).unwrap_or("yyyyMMdd"))?,
        })
    }
}

impl Transformation for TimestampRouter {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        if r.timestamp < 0 {
            return Err(format!("Timestamp missing on record of {}-{}@{}", r.topic, r.partition, r.offset));
        }
        let ts = format_timestamp(&self.timestamp_format, r.timestamp);
        r.topic = self.topic_format.replace("${topic}", &r.topic).replace("${timestamp}", &ts);
        Ok(Some(r))
    }
}

/// Filter: drops every record it is applied to (with a predicate: the matching ones).
pub(crate) struct Filter;

impl Transformation for Filter {
    fn apply(&self, _r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> TransformSettings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn topic_after(t: &dyn Transformation, topic: &str) -> String {
        let mut r = super::super::fields_tests_record(serde_json::Value::Null);
        r.topic = topic.to_string();
        t.apply(r).unwrap().unwrap().topic
    }

    #[test]
    fn regex_router_replaces_whole_matches_with_java_group_syntax() {
        let t = RegexRouter::new(&settings(&[("regex", "(.*)-raw"), ("replacement", "$1a-clean")])).unwrap();
        assert_eq!(topic_after(&t, "orders-raw"), "ordersa-clean");
        assert_eq!(topic_after(&t, "orders-raw-x"), "orders-raw-x", "a partial match leaves it");
        assert!(RegexRouter::new(&settings(&[("regex", "(")])).is_err());
    }

    #[test]
    fn timestamp_router_formats_in_utc() {
        let t = TimestampRouter::new(&settings(&[])).unwrap();
        // 2023-11-14T22:13:20Z
        assert_eq!(topic_after(&t, "orders"), "orders-20231114");
        let t = TimestampRouter::new(&settings(&[
            ("topic.format", "${timestamp}_${topic}"),
            ("timestamp.format", "yy-MM-dd'T'HH:mm:ss.SSS"),
        ]))
        .unwrap();
        assert_eq!(topic_after(&t, "o"), "23-11-14T22:13:20.000_o");
        assert_eq!(civil(-1), (1969, 12, 31));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert!(TimestampRouter::new(&settings(&[("timestamp.format", "EEE")])).is_err());
    }

    #[test]
    fn filter_drops() {
        assert!(Filter.apply(super::super::fields_tests_record(serde_json::Value::Null)).unwrap().is_none());
    }
}
