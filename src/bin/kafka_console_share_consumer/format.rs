//! The output of Java's `DefaultMessageFormatter` (kafka-tools), byte for byte: the same
//! properties, defaults, field order, labels and separators.
//!
//! One record is, in this order and each only if enabled: `CreateTime:<ms>` (or
//! `LogAppendTime:<ms>`, `NO_TIMESTAMP`), `Partition:<p>`, `Offset:<o>`, `Delivery:<n>`,
//! `Epoch:<e>` (`NOT_PRESENT` when unknown), the headers (`k:v` joined by
//! `headers.separator`, or `NO_HEADERS`), the key, the value. Fields are separated by
//! `key.separator`; after the last field comes `line.separator` if the value is printed, and
//! again `key.separator` otherwise (Java writes a column separator after a field whenever a
//! later one is enabled, and the line separator only after the value). A null key, value or
//! header value prints as `null.literal`.

use std::collections::BTreeMap;

use kafka_share::consumer::{Header, TimestampType};

/// The deserializer class names Java's tool takes that mean something here.
pub const STRING_DESERIALIZER: &str = "org.apache.kafka.common.serialization.StringDeserializer";
pub const BYTE_ARRAY_DESERIALIZER: &str = "org.apache.kafka.common.serialization.ByteArrayDeserializer";

/// The properties the formatter knows (the `--formatter-property` keys), listed when a key
/// is not one of them.
pub const KEYS: &[&str] = &[
    "print.timestamp",
    "print.key",
    "print.offset",
    "print.delivery",
    "print.epoch",
    "print.partition",
    "print.headers",
    "print.value",
    "key.separator",
    "line.separator",
    "headers.separator",
    "null.literal",
    "key.deserializer",
    "value.deserializer",
    "headers.deserializer",
];

/// Prefixes of deserializer settings: Java passes them to the deserializer, and its
/// StringDeserializer reads none of them once the prefix is stripped. Accepted, unused.
const DESERIALIZER_PREFIXES: &[&str] = &["key.deserializer.", "value.deserializer.", "headers.deserializer."];

/// How bytes become output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deserializer {
    /// As they are (no deserializer, or ByteArrayDeserializer).
    Bytes,
    /// Decoded as UTF-8 with invalid sequences replaced by U+FFFD, then encoded again
    /// (Java's StringDeserializer followed by `toString().getBytes(UTF_8)`).
    String,
}

impl Deserializer {
    /// The deserializer a Java class name stands for.
    pub fn from_class(setting: &str, class: &str) -> Result<Deserializer, String> {
        match class.trim() {
            STRING_DESERIALIZER => Ok(Deserializer::String),
            // Java would print the array's identity (`[B@1b6d3586`) through its toString();
            // the bytes themselves are what anyone means by it.
            BYTE_ARRAY_DESERIALIZER => Ok(Deserializer::Bytes),
            other => Err(format!(
                "{setting}: {other:?} is not supported; this tool prints bytes as they are \
                 ({BYTE_ARRAY_DESERIALIZER}, the default) or as UTF-8 text ({STRING_DESERIALIZER})"
            )),
        }
    }

    fn write(self, bytes: &[u8], out: &mut Vec<u8>) {
        match self {
            Deserializer::Bytes => out.extend_from_slice(bytes),
            Deserializer::String => out.extend_from_slice(String::from_utf8_lossy(bytes).as_bytes()),
        }
    }
}

/// What the formatter prints of one record.
#[derive(Debug, Clone)]
pub struct Message<'a> {
    /// None prints `NO_TIMESTAMP`.
    pub timestamp: Option<(TimestampType, i64)>,
    pub partition: i32,
    pub offset: i64,
    /// None prints `NOT_PRESENT`.
    pub delivery_count: Option<i16>,
    /// None prints `NOT_PRESENT`.
    pub leader_epoch: Option<i32>,
    pub headers: &'a [Header],
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// A configured `DefaultMessageFormatter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formatter {
    pub print_timestamp: bool,
    pub print_key: bool,
    pub print_offset: bool,
    pub print_delivery: bool,
    pub print_epoch: bool,
    pub print_partition: bool,
    pub print_headers: bool,
    pub print_value: bool,
    pub key_separator: Vec<u8>,
    pub line_separator: Vec<u8>,
    pub headers_separator: Vec<u8>,
    pub null_literal: Vec<u8>,
    pub key_deserializer: Deserializer,
    pub value_deserializer: Deserializer,
    pub headers_deserializer: Deserializer,
    /// Properties accepted and ignored, as Java's tool ignores them: one line each for main.
    pub warnings: Vec<String>,
}

impl Default for Formatter {
    /// Java's defaults: the value only, a tab between fields, a newline after each record.
    fn default() -> Self {
        Formatter {
            print_timestamp: false,
            print_key: false,
            print_offset: false,
            print_delivery: false,
            print_epoch: false,
            print_partition: false,
            print_headers: false,
            print_value: true,
            key_separator: b"\t".to_vec(),
            line_separator: b"\n".to_vec(),
            headers_separator: b",".to_vec(),
            null_literal: b"null".to_vec(),
            key_deserializer: Deserializer::Bytes,
            value_deserializer: Deserializer::Bytes,
            headers_deserializer: Deserializer::Bytes,
            warnings: Vec::new(),
        }
    }
}

impl Formatter {
    /// A formatter from its properties. Java takes any text for a `print.*` flag and treats
    /// everything but `true` as false, and ignores keys it does not know; both are mistakes
    /// here, refused with a message naming the property.
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Formatter, String> {
        let mut f = Formatter::default();
        for (key, value) in props {
            match key.as_str() {
                "print.timestamp" => f.print_timestamp = flag(key, value)?,
                "print.key" => f.print_key = flag(key, value)?,
                "print.offset" => f.print_offset = flag(key, value)?,
                "print.delivery" => f.print_delivery = flag(key, value)?,
                "print.epoch" => f.print_epoch = flag(key, value)?,
                "print.partition" => f.print_partition = flag(key, value)?,
                "print.headers" => f.print_headers = flag(key, value)?,
                "print.value" => f.print_value = flag(key, value)?,
                "key.separator" => f.key_separator = value.as_bytes().to_vec(),
                "line.separator" => f.line_separator = value.as_bytes().to_vec(),
                "headers.separator" => f.headers_separator = value.as_bytes().to_vec(),
                "null.literal" => f.null_literal = value.as_bytes().to_vec(),
                "key.deserializer" => f.key_deserializer = Deserializer::from_class(key, value)?,
                "value.deserializer" => f.value_deserializer = Deserializer::from_class(key, value)?,
                "headers.deserializer" => f.headers_deserializer = Deserializer::from_class(key, value)?,
                // Java's --help names header.deserializer, but its formatter reads only
                // headers.deserializer and ignores this one: so do we, and say so.
                "header.deserializer" => f.warnings.push(format!(
                    "warning: formatter property header.deserializer={value} is ignored, as Java's tool \
                     ignores it (its --help names it; its formatter reads headers.deserializer)"
                )),
                k if DESERIALIZER_PREFIXES.iter().any(|p| k.starts_with(p)) => {}
                other => return Err(unknown_key(other)),
            }
        }
        Ok(f)
    }

    /// Appends `m` as Java's formatter prints it.
    pub fn write(&self, m: &Message<'_>, out: &mut Vec<u8>) {
        // Which fields print, in their order; a field is followed by the column separator
        // when a later one prints too.
        let enabled = [
            self.print_timestamp,
            self.print_partition,
            self.print_offset,
            self.print_delivery,
            self.print_epoch,
            self.print_headers,
            self.print_key,
            self.print_value,
        ];
        let more_after = |i: usize| enabled[i + 1..].iter().any(|&e| e);
        let sep = |out: &mut Vec<u8>, i: usize| {
            out.extend_from_slice(if more_after(i) { &self.key_separator } else { &self.line_separator })
        };
        if self.print_timestamp {
            match m.timestamp {
                Some((kind, ts)) => out.extend_from_slice(format!("{}:{ts}", timestamp_type_name(kind)).as_bytes()),
                None => out.extend_from_slice(b"NO_TIMESTAMP"),
            }
            sep(out, 0);
        }
        if self.print_partition {
            out.extend_from_slice(format!("Partition:{}", m.partition).as_bytes());
            sep(out, 1);
        }
        if self.print_offset {
            out.extend_from_slice(format!("Offset:{}", m.offset).as_bytes());
            sep(out, 2);
        }
        if self.print_delivery {
            out.extend_from_slice(b"Delivery:");
            match m.delivery_count {
                Some(n) => out.extend_from_slice(n.to_string().as_bytes()),
                None => out.extend_from_slice(b"NOT_PRESENT"),
            }
            sep(out, 3);
        }
        if self.print_epoch {
            out.extend_from_slice(b"Epoch:");
            match m.leader_epoch {
                Some(e) => out.extend_from_slice(e.to_string().as_bytes()),
                None => out.extend_from_slice(b"NOT_PRESENT"),
            }
            sep(out, 4);
        }
        if self.print_headers {
            if m.headers.is_empty() {
                out.extend_from_slice(b"NO_HEADERS");
            }
            for (i, h) in m.headers.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(&self.headers_separator);
                }
                out.extend_from_slice(&h.key);
                out.push(b':');
                self.headers_deserializer.write(h.value.as_deref().unwrap_or(&self.null_literal), out);
            }
            sep(out, 5);
        }
        if self.print_key {
            self.key_deserializer.write(m.key.unwrap_or(&self.null_literal), out);
            sep(out, 6);
        }
        if self.print_value {
            self.value_deserializer.write(m.value.unwrap_or(&self.null_literal), out);
            out.extend_from_slice(&self.line_separator);
        }
    }
}

/// Java's `TimestampType.toString()`.
fn timestamp_type_name(t: TimestampType) -> &'static str {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

fn flag(key: &str, value: &str) -> Result<bool, String> {
    // Java: value.trim().equalsIgnoreCase("true").
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("formatter property {key} must be true or false, not {value:?}")),
    }
}

fn unknown_key(key: &str) -> String {
    format!("unknown formatter property {key:?}; the formatter knows {}", KEYS.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn fmt(pairs: &[(&str, &str)], m: &Message<'_>) -> Vec<u8> {
        let f = Formatter::from_properties(&props(pairs)).unwrap();
        let mut out = Vec::new();
        f.write(m, &mut out);
        out
    }

    fn msg(headers: &[Header]) -> Message<'_> {
        Message {
            timestamp: Some((TimestampType::CreateTime, 1_700_000_000_123)),
            partition: 2,
            offset: 41,
            delivery_count: Some(1),
            leader_epoch: None,
            headers,
            key: Some(b"k1"),
            value: Some(b"v1"),
        }
    }

    const ALL: &[(&str, &str)] = &[
        ("print.timestamp", "true"),
        ("print.partition", "true"),
        ("print.offset", "true"),
        ("print.delivery", "true"),
        ("print.epoch", "true"),
        ("print.headers", "true"),
        ("print.key", "true"),
    ];

    #[test]
    fn default_prints_the_value_and_a_newline() {
        assert_eq!(fmt(&[], &msg(&[])), b"v1\n");
    }

    #[test]
    fn every_field_in_java_order() {
        let h = [Header::new("h1", Some(Bytes::from_static(b"a"))), Header::new("h2", None)];
        assert_eq!(
            fmt(ALL, &msg(&h)),
            b"CreateTime:1700000000123\tPartition:2\tOffset:41\tDelivery:1\tEpoch:NOT_PRESENT\th1:a,h2:null\tk1\tv1\n"
        );
    }

    #[test]
    fn separators_and_null_literal() {
        let mut p = ALL.to_vec();
        p.extend([
            ("key.separator", " | "),
            ("line.separator", "\r\n"),
            ("headers.separator", ";"),
            ("null.literal", "<nil>"),
        ]);
        let h = [Header::new("a", None), Header::new("b", Some(Bytes::from_static(b"2")))];
        let mut m = msg(&h);
        m.key = None;
        m.value = None;
        m.timestamp = Some((TimestampType::LogAppendTime, 5));
        m.leader_epoch = Some(7);
        assert_eq!(
            fmt(&p, &m),
            b"LogAppendTime:5 | Partition:2 | Offset:41 | Delivery:1 | Epoch:7 | a:<nil>;b:2 | <nil> | <nil>\r\n"
        );
    }

    #[test]
    fn no_headers_and_no_timestamp() {
        let mut m = msg(&[]);
        m.timestamp = None;
        m.delivery_count = None;
        let p = [("print.timestamp", "true"), ("print.delivery", "true"), ("print.headers", "true")];
        assert_eq!(fmt(&p, &m), b"NO_TIMESTAMP\tDelivery:NOT_PRESENT\tNO_HEADERS\tv1\n");
    }

    #[test]
    fn without_the_value_the_last_field_ends_with_the_line_separator() {
        // Java writes the line separator after the last enabled field when the value is off.
        let p = [("print.value", "false"), ("print.key", "true"), ("print.offset", "true")];
        assert_eq!(fmt(&p, &msg(&[])), b"Offset:41\tk1\n");
        let p = [("print.value", "false"), ("print.partition", "true")];
        assert_eq!(fmt(&p, &msg(&[])), b"Partition:2\n");
        // Nothing enabled: nothing at all.
        assert_eq!(fmt(&[("print.value", "false")], &msg(&[])), b"");
    }

    #[test]
    fn flags_are_trimmed_and_case_blind_like_java() {
        let f = Formatter::from_properties(&props(&[("print.key", " TRUE "), ("print.value", "False")])).unwrap();
        assert!(f.print_key && !f.print_value);
    }

    #[test]
    fn a_flag_that_is_not_true_or_false_is_refused() {
        let e = Formatter::from_properties(&props(&[("print.key", "yes")])).unwrap_err();
        assert!(e.contains("print.key must be true or false"), "{e}");
        let e = Formatter::from_properties(&props(&[("print.offset", "")])).unwrap_err();
        assert!(e.contains("print.offset"), "{e}");
    }

    #[test]
    fn unknown_keys_are_refused_with_the_known_ones() {
        let e = Formatter::from_properties(&props(&[("print.keys", "true")])).unwrap_err();
        assert!(
            e.starts_with("unknown formatter property \"print.keys\"; the formatter knows print.timestamp, print.key,"),
            "{e}"
        );
        // Java's --help spelling: accepted and ignored (as Java), with a warning.
        let f = Formatter::from_properties(&props(&[("header.deserializer", STRING_DESERIALIZER)])).unwrap();
        assert_eq!(f.headers_deserializer, Deserializer::Bytes);
        assert_eq!(f.warnings.len(), 1);
        assert!(f.warnings[0].contains("headers.deserializer"), "{:?}", f.warnings);
        // Deserializer settings are the deserializer's business.
        Formatter::from_properties(&props(&[("value.deserializer.encoding", "UTF-8")])).unwrap();
    }

    #[test]
    fn string_and_byte_array_deserializers() {
        let p = [("value.deserializer", STRING_DESERIALIZER), ("key.deserializer", BYTE_ARRAY_DESERIALIZER)];
        let mut m = msg(&[]);
        m.value = Some(b"ok\xffend");
        m.key = Some(b"\xff");
        let out = fmt(&[p[0], p[1], ("print.key", "true")], &m);
        assert_eq!(out, b"\xff\tok\xef\xbf\xbdend\n");
        // Without a deserializer the bytes go out untouched.
        assert_eq!(fmt(&[], &m), b"ok\xffend\n");
    }

    #[test]
    fn headers_deserializer_applies_to_header_values() {
        let h = [Header::new("h", Some(Bytes::from_static(b"\xfe")))];
        let p = [("print.headers", "true"), ("print.value", "false"), ("headers.deserializer", STRING_DESERIALIZER)];
        assert_eq!(fmt(&p, &msg(&h)), "h:\u{fffd}\n".as_bytes());
    }

    #[test]
    fn other_deserializers_are_refused() {
        let e = Formatter::from_properties(&props(&[(
            "value.deserializer",
            "org.apache.kafka.common.serialization.LongDeserializer",
        )]))
        .unwrap_err();
        assert!(e.contains("LongDeserializer\" is not supported"), "{e}");
        assert!(e.contains(STRING_DESERIALIZER), "{e}");
    }

    #[test]
    fn empty_separators_are_allowed() {
        assert_eq!(fmt(&[("print.key", "true"), ("key.separator", ""), ("line.separator", "")], &msg(&[])), b"k1v1");
    }
}
