//! Reset plans as CSV: what `--reset-offsets --export` writes and `--from-file` reads, in the
//! format of Java's ShareGroupCommand, so a plan moves between the two tools either way.
//!
//! Java writes one `topic,partition,offset` line per partition and no header
//! (`CsvUtils.CsvRecordNoGroup`, through Jackson's CSV writer), and reads either that or
//! `group,topic,partition,offset` lines (`CsvRecordWithGroup`, what kafka-consumer-groups.sh
//! exports for several groups), keeping the lines of the one `--group`
//! (`GroupOffsetsResetter.parseResetPlan`).

use std::collections::BTreeMap;

use kafka_share::admin::{PlannedReset, TopicPartition};

/// What every line must look like, for the end of an error message.
const EXPECTED: &str = "each line must be topic,partition,offset or group,topic,partition,offset, \
                        as --reset-offsets --dry-run --export writes it";

/// Jackson's CSV writer (default settings, as Java's tool uses it) quotes a text field longer
/// than this without looking inside it (`CsvEncoder.MAX_QUOTE_CHECK`).
const JACKSON_MAX_UNQUOTED: usize = 24;

/// Below this character Jackson quotes a field: one past the largest of the separator `,`,
/// the quote `"` and the line separator `\n` (`CsvEncoder._calcSafeChar`).
const JACKSON_MIN_SAFE: char = '-';

/// Why a reset plan file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    /// The file could not be read.
    #[error("cannot read the reset plan {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The file was read, but its content is not a usable plan.
    #[error("reset plan {path}: {source}")]
    Invalid {
        path: String,
        #[source]
        source: PlanError,
    },
}

/// Why the text of a reset plan is not a usable plan for the group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// One line is malformed (`line` counts from 1).
    #[error("line {line}: {problem}; {EXPECTED}")]
    Line { line: usize, problem: LineProblem },
    /// Nothing but blank lines.
    #[error("the file has no offsets; {EXPECTED}")]
    Empty,
    /// A `group,topic,partition,offset` file without a line for the group.
    #[error(
        "no reset plan for group {group:?} (the file's lines are for {}); pass one of those with \
         --group, or export a plan for this group",
        .groups.join(", ")
    )]
    NoPlanForGroup { group: String, groups: Vec<String> },
}

/// What is wrong with one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    /// Neither 3 nor 4 fields.
    #[error("{found} fields, expected 3 or 4")]
    FieldCount { found: usize },
    /// A different number of fields than the first line: the two formats are mixed.
    #[error("{found} fields, but line {first_line} has {expected}; use one format for the whole file")]
    MixedFormats { found: usize, expected: usize, first_line: usize },
    /// A field opens a quote and the line ends before it closes.
    #[error("a quoted field is not closed")]
    UnclosedQuote,
    /// Something other than `,` follows a closing quote.
    #[error("text after the closing quote of field {field}")]
    TextAfterQuote { field: usize },
    /// The topic field is empty.
    #[error("the topic is empty")]
    EmptyTopic,
    /// The partition is not a number from 0 up.
    #[error("partition {0:?} is not a partition number (0 or more)")]
    BadPartition(String),
    /// The offset is not a number from 0 up.
    #[error("offset {0:?} is not an offset (0 or more)")]
    BadOffset(String),
    /// The same partition twice for the group: which offset is meant is unclear.
    #[error("{tp} is listed twice (first on line {first_line}); keep one line per partition")]
    Duplicate { tp: String, first_line: usize },
}

/// The plan as `--export` writes it: `topic,partition,offset` lines, each ending in `\n`, no
/// header, the topic quoted where Jackson's writer would quote it, so the output is Java's
/// byte for byte (up to line order: Java's follows a hash map).
pub fn export(plan: &[PlannedReset]) -> String {
    plan.iter()
        .map(|p| format!("{},{},{}\n", jackson_text(&p.tp.topic), p.tp.partition, p.new))
        .collect()
}

/// A text field as Jackson's CSV writer writes it with default settings: quoted when longer
/// than 24 characters or holding a character below `-`, inner quotes doubled. Kafka topic
/// names (`[a-zA-Z0-9._-]`) are quoted only for their length.
fn jackson_text(s: &str) -> String {
    if s.chars().count() > JACKSON_MAX_UNQUOTED || s.chars().any(|c| c < JACKSON_MIN_SAFE) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Reads the plan file at `path` for `group`.
pub fn load(path: &str, group: &str) -> Result<BTreeMap<TopicPartition, i64>, PlanFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlanFileError::Read { path: path.into(), source })?;
    parse(&text, group).map_err(|source| PlanFileError::Invalid { path: path.into(), source })
}

/// The offsets `text` plans for `group`. Blank lines, `\r\n` line ends and a byte-order mark
/// are accepted; every other line is checked, also those for other groups.
pub fn parse(text: &str, group: &str) -> Result<BTreeMap<TopicPartition, i64>, PlanError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // (fields per line, the line that set it), from the first line with content.
    let mut format: Option<(usize, usize)> = None;
    let mut plan: BTreeMap<TopicPartition, (i64, usize)> = BTreeMap::new();
    let mut other_groups: Vec<String> = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = i + 1;
        let at = |problem| PlanError::Line { line, problem };
        let content = raw.trim();
        if content.is_empty() {
            continue;
        }
        let fields = split_fields(content).map_err(at)?;
        let (expected, first_line) = *format.get_or_insert((fields.len(), line));
        if fields.len() != expected {
            return Err(at(LineProblem::MixedFormats { found: fields.len(), expected, first_line }));
        }
        let (line_group, rest) = match fields.len() {
            3 => (None, &fields[..]),
            4 => (Some(fields[0].as_str()), &fields[1..]),
            found => return Err(at(LineProblem::FieldCount { found })),
        };
        let (tp, offset) = record(rest).map_err(at)?;
        match line_group {
            Some(g) if g != group => {
                if !other_groups.iter().any(|o| o == g) {
                    other_groups.push(g.to_string());
                }
            }
            _ => {
                if let Some((_, first_line)) = plan.get(&tp) {
                    let problem = LineProblem::Duplicate { tp: tp.to_string(), first_line: *first_line };
                    return Err(at(problem));
                }
                plan.insert(tp, (offset, line));
            }
        }
    }
    if plan.is_empty() {
        return Err(match format {
            None => PlanError::Empty,
            Some(_) => PlanError::NoPlanForGroup { group: group.to_string(), groups: other_groups },
        });
    }
    Ok(plan.into_iter().map(|(tp, (offset, _))| (tp, offset)).collect())
}

/// `topic`, `partition`, `offset`, checked.
fn record(fields: &[String]) -> Result<(TopicPartition, i64), LineProblem> {
    let [topic, partition, offset] = fields else {
        return Err(LineProblem::FieldCount { found: fields.len() });
    };
    if topic.is_empty() {
        return Err(LineProblem::EmptyTopic);
    }
    let partition: i32 = partition
        .parse()
        .ok()
        .filter(|p| *p >= 0)
        .ok_or_else(|| LineProblem::BadPartition(partition.clone()))?;
    let offset: i64 = offset.parse().ok().filter(|o| *o >= 0).ok_or_else(|| LineProblem::BadOffset(offset.clone()))?;
    Ok((TopicPartition::new(topic.as_str(), partition), offset))
}

/// Splits one line on `,`. A field may be quoted (`"a,b"`, `""` for a quote inside), as
/// Jackson writes long or special text; unquoted fields are trimmed.
fn split_fields(line: &str) -> Result<Vec<String>, LineProblem> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(LineProblem::UnclosedQuote),
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            fields.push(field);
            match chars.next() {
                None => return Ok(fields),
                Some(',') => continue,
                Some(_) => return Err(LineProblem::TextAfterQuote { field: fields.len() }),
            }
        }
        loop {
            match chars.next() {
                None => {
                    fields.push(field.trim().to_string());
                    return Ok(fields);
                }
                Some(',') => {
                    fields.push(field.trim().to_string());
                    break;
                }
                Some(c) => field.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(topic: &str, partition: i32, new: i64) -> PlannedReset {
        PlannedReset { tp: TopicPartition::new(topic, partition), current: Some(0), new, applied: None, adjusted: None }
    }

    fn offsets(pairs: &[(&str, i32, i64)]) -> BTreeMap<TopicPartition, i64> {
        pairs.iter().map(|(t, p, o)| (TopicPartition::new(*t, *p), *o)).collect()
    }

    fn problem(text: &str) -> (usize, LineProblem) {
        match parse(text, "g") {
            Err(PlanError::Line { line, problem }) => (line, problem),
            other => panic!("expected a line error for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn export_is_javas_format() {
        // Java 4.4 printed these two lines for the same topics (`scripts/kafka tool`, Jackson
        // 2.21): the 25-character name quoted, the 24-character one not.
        let plan = [planned("wtcli-probe-25-chars-abcd", 0, 0), planned("wtcli-probe-24-chars-abc", 0, 7)];
        assert_eq!(export(&plan), "\"wtcli-probe-25-chars-abcd\",0,0\nwtcli-probe-24-chars-abc,0,7\n");
        assert_eq!(export(&[]), "");
        assert_eq!(jackson_text("a\"b c"), "\"a\"\"b c\"");
    }

    #[test]
    fn export_reads_back() {
        let plan = [planned("orders", 0, 5), planned("a-topic-name-longer-than-24", 3, 12)];
        let back = parse(&format!("{}\n", export(&plan)), "g").unwrap();
        assert_eq!(back, offsets(&[("orders", 0, 5), ("a-topic-name-longer-than-24", 3, 12)]));
    }

    #[test]
    fn three_fields_are_for_the_group() {
        let text = "orders,0,5\r\norders,1,7\r\n\r\n\"pay ments\",0,0\n";
        assert_eq!(parse(text, "g").unwrap(), offsets(&[("orders", 0, 5), ("orders", 1, 7), ("pay ments", 0, 0)]));
        assert_eq!(parse("\u{feff} orders , 2 , 9 ", "g").unwrap(), offsets(&[("orders", 2, 9)]));
    }

    #[test]
    fn four_fields_keep_the_groups_lines() {
        // Java's own test file (ShareGroupCommandTest.testResetOffsetsExportImportComplexPlan).
        let text = "share-group,topic,0,10\nshare-group,topic2,0,20\nshare-group2,topic,0,30\n";
        assert_eq!(parse(text, "share-group").unwrap(), offsets(&[("topic", 0, 10), ("topic2", 0, 20)]));
        assert_eq!(parse("\"g,1\",t,0,4\n", "g,1").unwrap(), offsets(&[("t", 0, 4)]));
        match parse(text, "other") {
            Err(e @ PlanError::NoPlanForGroup { .. }) => {
                let m = e.to_string();
                assert!(m.contains("\"other\"") && m.contains("share-group, share-group2"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_lines_name_line_and_problem() {
        assert_eq!(problem("t,0\n"), (1, LineProblem::FieldCount { found: 2 }));
        assert_eq!(
            problem("t,0,1\n\ng,t,0,1\n"),
            (3, LineProblem::MixedFormats { found: 4, expected: 3, first_line: 1 })
        );
        assert_eq!(problem("t,0,1\nt,x,1\n"), (2, LineProblem::BadPartition("x".into())));
        assert_eq!(problem("t,-1,1\n"), (1, LineProblem::BadPartition("-1".into())));
        assert_eq!(problem("t,0,\n"), (1, LineProblem::BadOffset(String::new())));
        assert_eq!(problem("t,0,-5\n"), (1, LineProblem::BadOffset("-5".into())));
        assert_eq!(problem(",0,1\n"), (1, LineProblem::EmptyTopic));
        assert_eq!(problem("\"t,0,1\n"), (1, LineProblem::UnclosedQuote));
        assert_eq!(problem("\"t\"x,0,1\n"), (1, LineProblem::TextAfterQuote { field: 1 }));
        assert_eq!(problem("t,0,1\nt,0,2\n"), (2, LineProblem::Duplicate { tp: "t-0".into(), first_line: 1 }));
        // A header line is not part of the format.
        assert_eq!(problem("topic,partition,offset\nt,0,1\n"), (1, LineProblem::BadPartition("partition".into())));
        assert_eq!(parse("\n \n", "g"), Err(PlanError::Empty));
    }

    #[test]
    fn messages_say_what_to_do() {
        let e = PlanFileError::Invalid { path: "plan.csv".into(), source: parse("t,0,1\nt,0,x\n", "g").unwrap_err() };
        let m = e.to_string();
        assert!(m.starts_with("reset plan plan.csv: line 2: offset \"x\""), "{m}");
        assert!(m.contains("each line must be topic,partition,offset"), "{m}");
        let e = load("/nonexistent/plan.csv", "g").unwrap_err();
        assert!(matches!(e, PlanFileError::Read { .. }) && e.to_string().contains("/nonexistent/plan.csv"), "{e}");
    }
}
