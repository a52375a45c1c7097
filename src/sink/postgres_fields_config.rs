//! The settings of the postgres sink's `fields` layout (`postgres_fields.rs`), by the names of
//! Confluent's JDBC sink connector, checked together so that a combination Connect refuses is
//! refused here before any task starts, with the fix in the message.

use std::collections::BTreeSet;

use super::task::{SinkError, TaskConfig};

/// `insert`, `upsert` or `update`.
pub(crate) const INSERT_MODE_CONFIG: &str = "insert.mode";
/// Create the table when missing (both layouts; defined here, where the fields layout reads
/// it, so this file needs nothing of `postgres.rs`).
pub(crate) const AUTO_CREATE_CONFIG: &str = "auto.create";
/// `none`, `kafka`, `record_key` or `record_value`.
pub(crate) const PK_MODE_CONFIG: &str = "pk.mode";
/// The primary key's columns (their meaning depends on `pk.mode`).
pub(crate) const PK_FIELDS_CONFIG: &str = "pk.fields";
/// The value fields written (empty: all).
pub(crate) const FIELDS_WHITELIST_CONFIG: &str = "fields.whitelist";
/// Another name of `fields.whitelist`, accepted the same.
pub(crate) const FIELDS_INCLUDE_CONFIG: &str = "fields.include";
/// The table of a record: `${topic}` is replaced by its topic.
pub(crate) const TABLE_NAME_FORMAT_CONFIG: &str = "table.name.format";
/// Add a column when a record has a field the table lacks.
pub(crate) const AUTO_EVOLVE_CONFIG: &str = "auto.evolve";
/// Delete the row of a tombstone's key.
pub(crate) const DELETE_ENABLED_CONFIG: &str = "delete.enabled";

/// The column names of `pk.mode=kafka` when `pk.fields` is empty (Connect's).
pub(super) const KAFKA_PK_DEFAULT: [&str; 3] = ["__connect_topic", "__connect_partition", "__connect_offset"];
/// The column of a primitive (non-object) key when `pk.fields` is empty.
pub(super) const KEY_COLUMN_DEFAULT: &str = "__connect_key";

/// How a record becomes a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InsertMode {
    /// `INSERT`: a row per record (with `pk.mode=kafka`, a redelivered record is skipped).
    Insert,
    /// `INSERT .. ON CONFLICT (pk) DO UPDATE`: the row of a key takes the record's fields.
    Upsert,
    /// `UPDATE .. WHERE pk = ..`: only rows that exist change.
    Update,
}

/// Where the primary key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PkMode {
    None,
    /// Topic, partition and offset.
    Kafka,
    /// The record key (an object's fields, or one column for any other key).
    RecordKey,
    /// Fields of the value.
    RecordValue,
}

/// A combination of settings the fields layout refuses; the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum FieldsConfigError {
    #[error("{key}={value:?} is not one of {expected}: set one of them")]
    NotOneOf { key: &'static str, value: String, expected: &'static str },
    #[error(
        "delete.enabled=true needs pk.mode=record_key (a tombstone has only its key to find the row by), \
         not pk.mode={pk_mode}: set pk.mode=record_key, or delete.enabled=false"
    )]
    DeleteNeedsRecordKey { pk_mode: &'static str },
    #[error(
        "insert.mode={insert_mode} needs a primary key to find the row by, and pk.mode=none has none: set \
         pk.mode=record_key (or record_value, or kafka), or insert.mode=insert"
    )]
    ModeNeedsPk { insert_mode: &'static str },
    #[error(
        "pk.mode=kafka takes three pk.fields (the topic, partition and offset columns), not {count}: list three \
         names, or leave pk.fields empty for __connect_topic,__connect_partition,__connect_offset"
    )]
    KafkaPkFields { count: usize },
    #[error("pk.fields={fields:?} with pk.mode=none: a table without a primary key takes no pk.fields; remove it, or set pk.mode")]
    PkFieldsWithoutPk { fields: String },
    #[error("fields.whitelist and fields.include are one setting under two names: keep one of them")]
    WhitelistTwice,
    #[error(
        "table={table:?} is the records layout's table; the fields layout names tables by table.name.format \
         (default ${{topic}}): use table.name.format={table}"
    )]
    TableInFieldsLayout { table: String },
    #[error("table.name.format={format:?} {why}: e.g. ${{topic}}, kafka_${{topic}} or myschema.${{topic}}")]
    BadTableFormat { format: String, why: &'static str },
    #[error("{key}={value:?} is not a boolean: set it to true or false")]
    NotBoolean { key: &'static str, value: String },
}

impl From<FieldsConfigError> for SinkError {
    fn from(e: FieldsConfigError) -> SinkError {
        SinkError::fatal(e.to_string())
    }
}

/// The fields layout's parsed settings.
#[derive(Debug, Clone)]
pub(super) struct FieldsSettings {
    pub(super) insert_mode: InsertMode,
    pub(super) pk_mode: PkMode,
    /// As given (for `record_key` / `record_value`: empty means every field).
    pub(super) pk_fields: Vec<String>,
    /// The value fields written besides the key's (None: all).
    pub(super) include: Option<BTreeSet<String>>,
    /// `table.name.format` split at `.` (schema, table), each part still holding `${topic}`.
    pub(super) table_format: Vec<String>,
    pub(super) auto_create: bool,
    pub(super) auto_evolve: bool,
    pub(super) delete_enabled: bool,
}

fn list(config: &TaskConfig, key: &str) -> Vec<String> {
    config
        .get(key)
        .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect())
        .unwrap_or_default()
}

fn boolean(config: &TaskConfig, key: &'static str) -> Result<bool, FieldsConfigError> {
    match config.get(key).map(|v| v.trim()) {
        None | Some("") => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(FieldsConfigError::NotBoolean { key, value: v.to_string() }),
    }
}

fn one_of<T: Copy>(
    config: &TaskConfig,
    key: &'static str,
    choices: &[(&str, T)],
    default: T,
    expected: &'static str,
) -> Result<T, FieldsConfigError> {
    let Some(v) = config.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) else { return Ok(default) };
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(v))
        .map(|(_, t)| *t)
        .ok_or_else(|| FieldsConfigError::NotOneOf { key, value: v.to_string(), expected })
}

fn pk_mode_name(m: PkMode) -> &'static str {
    match m {
        PkMode::None => "none",
        PkMode::Kafka => "kafka",
        PkMode::RecordKey => "record_key",
        PkMode::RecordValue => "record_value",
    }
}

/// Reads and cross-checks the fields layout's settings.
pub(super) fn fields_settings(config: &TaskConfig) -> Result<FieldsSettings, FieldsConfigError> {
    if let Some(table) = config.get("table").map(|t| t.trim()).filter(|t| !t.is_empty()) {
        return Err(FieldsConfigError::TableInFieldsLayout { table: table.to_string() });
    }
    let insert_mode = one_of(
        config,
        INSERT_MODE_CONFIG,
        &[("insert", InsertMode::Insert), ("upsert", InsertMode::Upsert), ("update", InsertMode::Update)],
        InsertMode::Insert,
        "insert, upsert, update",
    )?;
    let pk_mode = one_of(
        config,
        PK_MODE_CONFIG,
        &[
            ("none", PkMode::None),
            ("kafka", PkMode::Kafka),
            ("record_key", PkMode::RecordKey),
            ("record_value", PkMode::RecordValue),
        ],
        PkMode::None,
        "none, kafka, record_key, record_value",
    )?;
    let pk_fields = list(config, PK_FIELDS_CONFIG);
    let delete_enabled = boolean(config, DELETE_ENABLED_CONFIG)?;
    if delete_enabled && pk_mode != PkMode::RecordKey {
        return Err(FieldsConfigError::DeleteNeedsRecordKey { pk_mode: pk_mode_name(pk_mode) });
    }
    match (insert_mode, pk_mode) {
        (InsertMode::Upsert, PkMode::None) => return Err(FieldsConfigError::ModeNeedsPk { insert_mode: "upsert" }),
        (InsertMode::Update, PkMode::None) => return Err(FieldsConfigError::ModeNeedsPk { insert_mode: "update" }),
        _ => {}
    }
    match pk_mode {
        PkMode::Kafka if !pk_fields.is_empty() && pk_fields.len() != 3 => {
            return Err(FieldsConfigError::KafkaPkFields { count: pk_fields.len() })
        }
        PkMode::None if !pk_fields.is_empty() => {
            return Err(FieldsConfigError::PkFieldsWithoutPk { fields: pk_fields.join(",") })
        }
        _ => {}
    }
    let include = match (list(config, FIELDS_WHITELIST_CONFIG), list(config, FIELDS_INCLUDE_CONFIG)) {
        (w, i) if !w.is_empty() && !i.is_empty() => return Err(FieldsConfigError::WhitelistTwice),
        (w, i) if w.is_empty() && i.is_empty() => None,
        (w, i) => Some(w.into_iter().chain(i).collect()),
    };
    let format = config
        .get(TABLE_NAME_FORMAT_CONFIG)
        .map(|f| f.trim())
        .filter(|f| !f.is_empty())
        .unwrap_or("${topic}");
    let table_format = table_format(format)?;
    Ok(FieldsSettings {
        insert_mode,
        pk_mode,
        pk_fields,
        include,
        table_format,
        auto_create: boolean(config, AUTO_CREATE_CONFIG)?,
        auto_evolve: boolean(config, AUTO_EVOLVE_CONFIG)?,
        delete_enabled,
    })
}

/// Splits `table.name.format` at `.` before `${topic}` is replaced, so that a topic with dots
/// (`orders.v1`) is one table name, never a schema and a table.
fn table_format(format: &str) -> Result<Vec<String>, FieldsConfigError> {
    let bad = |why| FieldsConfigError::BadTableFormat { format: format.to_string(), why };
    let parts: Vec<String> = format.split('.').map(str::to_string).collect();
    if parts.len() > 2 {
        return Err(bad("has more than schema.table"));
    }
    if parts.iter().any(|p| p.is_empty()) {
        return Err(bad("has an empty part"));
    }
    if parts.iter().any(|p| p.contains('\0')) {
        return Err(bad("holds a NUL character"));
    }
    Ok(parts)
}

impl FieldsSettings {
    /// The quoted table of records of `topic`.
    pub(super) fn table_for(&self, topic: &str) -> String {
        self.table_format
            .iter()
            .map(|p| super::postgres_ident::quote_ident(&p.replace("${topic}", topic)))
            .collect::<Vec<_>>()
            .join(".")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> TaskConfig {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn err(pairs: &[(&str, &str)]) -> FieldsConfigError {
        fields_settings(&config(pairs)).expect_err("refused")
    }

    #[test]
    fn defaults_are_connects() {
        let s = fields_settings(&config(&[])).unwrap();
        assert_eq!((s.insert_mode, s.pk_mode), (InsertMode::Insert, PkMode::None));
        assert_eq!(s.table_for("orders"), "\"orders\"");
        assert!(!s.auto_create && !s.auto_evolve && !s.delete_enabled && s.include.is_none());
    }

    #[test]
    fn combinations_connect_refuses_are_refused_with_the_fix() {
        assert_eq!(
            err(&[("delete.enabled", "true"), ("pk.mode", "kafka")]),
            FieldsConfigError::DeleteNeedsRecordKey { pk_mode: "kafka" }
        );
        assert!(err(&[("delete.enabled", "true")]).to_string().contains("set pk.mode=record_key"));
        assert_eq!(err(&[("insert.mode", "upsert")]), FieldsConfigError::ModeNeedsPk { insert_mode: "upsert" });
        assert_eq!(err(&[("insert.mode", "update")]), FieldsConfigError::ModeNeedsPk { insert_mode: "update" });
        assert_eq!(err(&[("pk.mode", "kafka"), ("pk.fields", "a,b")]), FieldsConfigError::KafkaPkFields { count: 2 });
        assert!(matches!(err(&[("pk.fields", "id")]), FieldsConfigError::PkFieldsWithoutPk { .. }));
        assert!(matches!(err(&[("insert.mode", "merge")]), FieldsConfigError::NotOneOf { key: "insert.mode", .. }));
        assert!(matches!(err(&[("pk.mode", "key")]), FieldsConfigError::NotOneOf { key: "pk.mode", .. }));
        assert_eq!(err(&[("fields.whitelist", "a"), ("fields.include", "b")]), FieldsConfigError::WhitelistTwice);
        assert!(matches!(err(&[("table", "t")]), FieldsConfigError::TableInFieldsLayout { .. }));
        assert!(matches!(err(&[("table.name.format", "a.b.${topic}")]), FieldsConfigError::BadTableFormat { .. }));
        assert!(matches!(err(&[("auto.evolve", "yes")]), FieldsConfigError::NotBoolean { key: "auto.evolve", .. }));
    }

    #[test]
    fn a_full_jdbc_config_is_read() {
        let s = fields_settings(&config(&[
            ("insert.mode", "UPSERT"),
            ("pk.mode", "record_key"),
            ("pk.fields", "id, region"),
            ("fields.whitelist", "name,price"),
            ("table.name.format", "sales.kafka_${topic}"),
            ("auto.create", "true"),
            ("auto.evolve", "true"),
            ("delete.enabled", "true"),
        ]))
        .unwrap();
        assert_eq!((s.insert_mode, s.pk_mode), (InsertMode::Upsert, PkMode::RecordKey));
        assert_eq!(s.pk_fields, vec!["id", "region"]);
        assert_eq!(s.include.unwrap().into_iter().collect::<Vec<_>>(), vec!["name", "price"]);
        assert!(s.auto_create && s.auto_evolve && s.delete_enabled);
        let s = fields_settings(&config(&[("table.name.format", "sales.kafka_${topic}")])).unwrap();
        // A topic's dots stay in the table's name; a quote is doubled.
        assert_eq!(s.table_for("orders.v1"), "\"sales\".\"kafka_orders.v1\"");
        assert_eq!(s.table_for("a\"b"), "\"sales\".\"kafka_a\"\"b\"");
    }
}
