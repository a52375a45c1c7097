//! PostgreSQL identifiers as SQL text: a leaf, so the settings (a table name from
//! `table.name.format`) and the statements quote alike without importing each other.

/// `name` as a quoted identifier (a `"` inside doubled): any text is a safe name.
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
