//! The SQL of the postgres sink's `fields` layout, as pure functions (unit-tested here).
//!
//! Nothing from a record is ever part of the SQL text: identifiers are quoted (a `"` doubled)
//! and values travel as parameters, one `text[]` per column, read back row by row with
//! `unnest`, so a batch is one statement whatever its size. A value is cast to its column's
//! type in SQL (`cast`); the type names there come from the sink's own constants
//! (`ColType::sql`) or from PostgreSQL's catalog (`format_type`), never from a record.

use serde_json::Value;

use super::postgres_fields_config::InsertMode;
use super::postgres_fields_row::ColType;
use super::postgres_ident::quote_ident;

/// A column of a statement: its name and its type as the table has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Column {
    pub(super) name: String,
    /// `format_type`'s text, e.g. `bigint`, `timestamp with time zone`.
    pub(super) ty: String,
}

/// `text_expr` (a text parameter) as a value of column type `ty`. Bytes arrive as base64
/// (as JsonConverter writes them); a timestamp, date or time may arrive as Connect's number
/// (ms since the epoch, days since the epoch, ms since midnight) or as text PostgreSQL reads.
pub(super) fn cast(text_expr: &str, ty: &str) -> String {
    let x = text_expr;
    if ty == "bytea" {
        format!("decode({x}, 'base64')")
    } else if ty.starts_with("timestamp") {
        format!(
            "(CASE WHEN {x} ~ '^-?[0-9]+$' THEN to_timestamp({x}::bigint / 1000.0) ELSE {x}::timestamptz END)::{ty}"
        )
    } else if ty.starts_with("time without") {
        format!("(CASE WHEN {x} ~ '^-?[0-9]+$' THEN TIME '00:00' + {x}::bigint * INTERVAL '1 millisecond' ELSE {x}::time END)")
    } else if ty == "date" {
        format!("(CASE WHEN {x} ~ '^-?[0-9]+$' THEN DATE '1970-01-01' + {x}::integer ELSE {x}::date END)")
    } else {
        format!("{x}::{ty}")
    }
}

/// A JSON value as the text parameter of a column of type `ty` (None: NULL). A JSON column
/// gets JSON text (so a string keeps its quotes); any other gets a string's contents, and
/// the JSON text of anything else.
pub(super) fn param_text(v: &Value, ty: &str) -> Option<String> {
    match v {
        Value::Null => None,
        v if ty == "jsonb" || ty == "json" => Some(v.to_string()),
        Value::String(s) => Some(s.clone()),
        v => Some(v.to_string()),
    }
}

/// `CREATE TABLE IF NOT EXISTS`: `columns` (name, type, NOT NULL), and the key's columns as
/// the primary key.
pub(super) fn create_table(table: &str, columns: &[(String, ColType, bool)], pk: &[String]) -> String {
    let mut parts: Vec<String> = columns
        .iter()
        .map(|(name, ty, not_null)| {
            format!("{} {}{}", quote_ident(name), ty.sql(), if *not_null { " NOT NULL" } else { "" })
        })
        .collect();
    if !pk.is_empty() {
        parts.push(format!("PRIMARY KEY ({})", idents(pk.iter().map(String::as_str))));
    }
    format!("CREATE TABLE IF NOT EXISTS {table} ({})", parts.join(", "))
}

/// `auto.evolve`: a nullable column (a row written before it has no value for it).
pub(super) fn add_column(table: &str, name: &str, ty: ColType) -> String {
    format!("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {} {}", quote_ident(name), ty.sql())
}

fn idents<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.map(quote_ident).collect::<Vec<_>>().join(", ")
}

/// `unnest($1::text[], ..) AS _ks_u(c0, ..)`: the batch's rows, one text parameter per column.
fn rows(n: usize) -> String {
    let params = (1..=n).map(|i| format!("${i}::text[]")).collect::<Vec<_>>().join(", ");
    let names = (0..n).map(|i| format!("c{i}")).collect::<Vec<_>>().join(", ");
    format!("unnest({params}) AS _ks_u({names})")
}

fn casts(columns: &[&Column], first: usize) -> Vec<String> {
    columns.iter().enumerate().map(|(i, c)| cast(&format!("_ks_u.c{}", first + i), &c.ty)).collect()
}

/// The statement writing rows of `pk` then `cols` (parameters in that order), by `mode`;
/// None when there is nothing to do (an update of a table with only key columns).
/// `skip_conflicts`: an insert whose key is there already is skipped (`pk.mode=kafka`,
/// where that means a redelivered record).
pub(super) fn write(
    table: &str,
    mode: InsertMode,
    skip_conflicts: bool,
    pk: &[Column],
    cols: &[Column],
) -> Option<String> {
    let all: Vec<&Column> = pk.iter().chain(cols).collect();
    let names = idents(all.iter().map(|c| c.name.as_str()));
    let values = casts(&all, 0).join(", ");
    let pk_names = idents(pk.iter().map(|c| c.name.as_str()));
    let insert = format!("INSERT INTO {table} ({names}) SELECT {values} FROM {}", rows(all.len()));
    match mode {
        InsertMode::Insert if skip_conflicts && !pk.is_empty() => {
            Some(format!("{insert} ON CONFLICT ({pk_names}) DO NOTHING"))
        }
        InsertMode::Insert => Some(insert),
        InsertMode::Upsert if cols.is_empty() => Some(format!("{insert} ON CONFLICT ({pk_names}) DO NOTHING")),
        InsertMode::Upsert => {
            let set = cols
                .iter()
                .map(|c| format!("{0} = EXCLUDED.{0}", quote_ident(&c.name)))
                .collect::<Vec<_>>()
                .join(", ");
            Some(format!("{insert} ON CONFLICT ({pk_names}) DO UPDATE SET {set}"))
        }
        InsertMode::Update if cols.is_empty() => None,
        InsertMode::Update => {
            let pk_refs: Vec<&Column> = pk.iter().collect();
            let col_refs: Vec<&Column> = cols.iter().collect();
            let set = col_refs
                .iter()
                .zip(casts(&col_refs, pk.len()))
                .map(|(c, v)| format!("{} = {v}", quote_ident(&c.name)))
                .collect::<Vec<_>>()
                .join(", ");
            Some(format!("UPDATE {table} AS _ks_t SET {set} FROM {} WHERE {}", rows(all.len()), matches(&pk_refs)))
        }
    }
}

/// `_ks_t."a" = <c0 as a's type> AND ..`.
fn matches(pk: &[&Column]) -> String {
    pk.iter()
        .zip(casts(pk, 0))
        .map(|(c, v)| format!("_ks_t.{} = {v}", quote_ident(&c.name)))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The statement deleting the rows of the keys given as parameters (one `text[]` per key
/// column).
pub(super) fn delete(table: &str, pk: &[Column]) -> String {
    let refs: Vec<&Column> = pk.iter().collect();
    format!("DELETE FROM {table} AS _ks_t USING {} WHERE {}", rows(pk.len()), matches(&refs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn col(name: &str, ty: &str) -> Column {
        Column { name: name.to_string(), ty: ty.to_string() }
    }

    #[test]
    fn identifiers_are_quoted_and_quotes_doubled() {
        assert_eq!(quote_ident("id"), "\"id\"");
        assert_eq!(quote_ident("a\"; DROP TABLE x; --"), "\"a\"\"; DROP TABLE x; --\"");
    }

    #[test]
    fn upsert_is_insert_on_conflict_do_update() {
        let sql =
            write("\"t\"", InsertMode::Upsert, false, &[col("id", "text")], &[col("n", "bigint"), col("j", "jsonb")]);
        assert_eq!(
            sql.as_deref(),
            Some(
                "INSERT INTO \"t\" (\"id\", \"n\", \"j\") SELECT _ks_u.c0::text, _ks_u.c1::bigint, _ks_u.c2::jsonb \
                 FROM unnest($1::text[], $2::text[], $3::text[]) AS _ks_u(c0, c1, c2) \
                 ON CONFLICT (\"id\") DO UPDATE SET \"n\" = EXCLUDED.\"n\", \"j\" = EXCLUDED.\"j\""
            )
        );
        let only_key = write("\"t\"", InsertMode::Upsert, false, &[col("id", "text")], &[]).unwrap();
        assert!(only_key.ends_with("ON CONFLICT (\"id\") DO NOTHING"), "{only_key}");
    }

    #[test]
    fn insert_skips_conflicts_only_when_asked() {
        let pk =
            [col("__connect_topic", "text"), col("__connect_partition", "integer"), col("__connect_offset", "bigint")];
        let sql = write("\"t\"", InsertMode::Insert, true, &pk, &[col("a", "text")]).unwrap();
        assert!(
            sql.ends_with(
                "ON CONFLICT (\"__connect_topic\", \"__connect_partition\", \"__connect_offset\") DO NOTHING"
            ),
            "{sql}"
        );
        let sql = write("\"t\"", InsertMode::Insert, false, &[], &[col("a", "text")]).unwrap();
        assert_eq!(sql, "INSERT INTO \"t\" (\"a\") SELECT _ks_u.c0::text FROM unnest($1::text[]) AS _ks_u(c0)");
    }

    #[test]
    fn update_and_delete_match_the_key() {
        let sql =
            write("\"s\".\"t\"", InsertMode::Update, false, &[col("id", "integer")], &[col("n", "text")]).unwrap();
        assert_eq!(
            sql,
            "UPDATE \"s\".\"t\" AS _ks_t SET \"n\" = _ks_u.c1::text FROM unnest($1::text[], $2::text[]) AS _ks_u(c0, c1) \
             WHERE _ks_t.\"id\" = _ks_u.c0::integer"
        );
        assert_eq!(write("\"t\"", InsertMode::Update, false, &[col("id", "integer")], &[]), None);
        assert_eq!(
            delete("\"t\"", &[col("a", "text"), col("b", "bigint")]),
            "DELETE FROM \"t\" AS _ks_t USING unnest($1::text[], $2::text[]) AS _ks_u(c0, c1) \
             WHERE _ks_t.\"a\" = _ks_u.c0::text AND _ks_t.\"b\" = _ks_u.c1::bigint"
        );
    }

    #[test]
    fn create_and_evolve() {
        let cols = vec![("id".to_string(), ColType::Text, true), ("at".to_string(), ColType::TimestampTz, false)];
        assert_eq!(
            create_table("\"t\"", &cols, &["id".to_string()]),
            "CREATE TABLE IF NOT EXISTS \"t\" (\"id\" text NOT NULL, \"at\" timestamp with time zone, PRIMARY KEY (\"id\"))"
        );
        assert_eq!(
            add_column("\"t\"", "new", ColType::Double),
            "ALTER TABLE \"t\" ADD COLUMN IF NOT EXISTS \"new\" double precision"
        );
    }

    #[test]
    fn values_cast_by_their_columns_type() {
        assert_eq!(cast("x", "bytea"), "decode(x, 'base64')");
        assert!(cast("x", "timestamp with time zone").contains("to_timestamp(x::bigint / 1000.0)"));
        assert!(cast("x", "date").contains("DATE '1970-01-01' + x::integer"));
        assert!(cast("x", "time without time zone").contains("TIME '00:00' + x::bigint * INTERVAL '1 millisecond'"));
        assert_eq!(cast("x", "numeric(10,2)"), "x::numeric(10,2)");
        assert_eq!(param_text(&json!("a"), "text").as_deref(), Some("a"));
        assert_eq!(param_text(&json!("a"), "jsonb").as_deref(), Some("\"a\""));
        assert_eq!(param_text(&json!({"k": [1]}), "jsonb").as_deref(), Some("{\"k\":[1]}"));
        assert_eq!(param_text(&json!(1.5), "double precision").as_deref(), Some("1.5"));
        assert_eq!(param_text(&json!(true), "boolean").as_deref(), Some("true"));
        assert_eq!(param_text(&Value::Null, "text"), None);
    }
}
