//! The postgres sink's `fields` layout (`table.layout=fields`, or Connect's JDBC sink class):
//! a record's fields are columns, as in Confluent's JDBC sink connector. The settings are in
//! `postgres_fields_config.rs`, a record's row in `postgres_fields_row.rs`, the SQL in
//! `postgres_fields_sql.rs`; this file talks to the database: it learns the tables' columns
//! from the catalog, creates and evolves tables, and writes a batch in one transaction.
//!
//! # A batch
//! 1. Each record becomes an operation (`record_op`); one that cannot (not JSON, no key for
//!    `pk.mode=record_key`, ...) fails alone.
//! 2. Each table is looked up in the catalog (cached per connection, looked up again when a
//!    record has a field the cache does not know, so another task's `auto.evolve` is seen);
//!    a missing table is created (`auto.create`), a missing column added (`auto.evolve`, always
//!    nullable) or the record fails saying so. A schemaless null names no type: a field that is
//!    null and has no column is left out.
//! 3. With a primary key, the operations of one key collapse to their net effect in batch
//!    order (a later write's fields over an earlier one's; a delete forgets the earlier
//!    writes): PostgreSQL refuses to touch a row twice in one `ON CONFLICT DO UPDATE`, and one
//!    statement per operation would cost a round trip each.
//! 4. In one transaction: the deletes, then one statement per table and set of columns.
//!
//! A data error (a value its column cannot take) fails the transaction whole; then each
//! record is written alone, in order, to find the ones that fail.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::data::RecordSchemas;
use super::postgres_fields_config::{FieldsSettings, PkMode};
use super::postgres_fields_row::{record_op, Field, Op};
use super::postgres_fields_sql::{self as sql, Column};
use super::task::{RecordFailure, SinkRecord};

/// What the connection knows: tables' columns and prepared statements. Dropped with the
/// connection (statements belong to it).
#[derive(Default)]
pub(super) struct Cache {
    /// Quoted table -> column -> type (`format_type`'s text).
    tables: HashMap<String, BTreeMap<String, String>>,
    statements: HashMap<String, Statement>,
}

/// Why a batch could not be written as a whole.
pub(super) enum Failure {
    /// PostgreSQL refused: `doing` says what the sink was doing.
    Pg(tokio_postgres::Error, String),
    /// The settings and the database disagree in a way no retry fixes; says what to change.
    Fatal(String),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Failure {
        Failure::Pg(e, "writing the batch".to_string())
    }
}

/// The operations of `records` (index, op), and the records that cannot be written.
/// `schemas[i]`, when there, is what `records[i]`'s converters read.
pub(super) fn plan(
    s: &FieldsSettings,
    records: &[&SinkRecord],
    schemas: &[RecordSchemas],
) -> (Vec<(usize, Op)>, Vec<RecordFailure>) {
    let mut ops = Vec::with_capacity(records.len());
    let mut failed = Vec::new();
    for (index, r) in records.iter().enumerate() {
        match record_op(s, r, schemas.get(index)) {
            Ok(Op::Skip) => {}
            Ok(op) => ops.push((index, op)),
            Err(reason) => failed.push(RecordFailure { index, reason }),
        }
    }
    (ops, failed)
}

/// The columns of `table` (None: no such table).
async fn columns(client: &Client, table: &str) -> Result<Option<BTreeMap<String, String>>, tokio_postgres::Error> {
    let exists: bool = client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table]).await?.get(0);
    if !exists {
        return Ok(None);
    }
    let rows = client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
            &[&table],
        )
        .await?;
    Ok(Some(rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, String>(1))).collect()))
}

fn op_parts(op: &Op) -> (&str, &[Field], &[Field]) {
    match op {
        Op::Write { table, pk, fields } => (table, pk, fields),
        Op::Delete { table, pk } => (table, pk, &[]),
        Op::Skip => ("", &[], &[]),
    }
}

/// Step 2: every table there, every field a column (or left out, or its record failed).
pub(super) async fn prepare_tables(
    s: &FieldsSettings,
    cache: &mut Cache,
    client: &Client,
    ops: &mut Vec<(usize, Op)>,
    failed: &mut Vec<RecordFailure>,
) -> Result<(), Failure> {
    let mut tables: Vec<String> = ops.iter().map(|(_, op)| op_parts(op).0.to_string()).collect();
    tables.sort();
    tables.dedup();
    for table in tables {
        let knows_all = cache.tables.get(&table).is_some_and(|cols| {
            ops.iter()
                .map(|(_, op)| op_parts(op))
                .filter(|(t, _, _)| *t == table)
                .all(|(_, pk, fields)| pk.iter().chain(fields).all(|f| cols.contains_key(&f.name)))
        });
        if !knows_all {
            let found = columns(client, &table).await.map_err(|e| Failure::Pg(e, format!("reading table {table}")))?;
            match found {
                Some(cols) => {
                    cache.tables.insert(table.clone(), cols);
                }
                None if s.auto_create => create(s, cache, client, &table, ops).await?,
                None => {
                    return Err(Failure::Fatal(format!(
                        "table {table} does not exist: create it, or set auto.create=true to have it made from the \
                         records' fields"
                    )))
                }
            }
        }
        evolve(s, cache, client, &table, ops, failed).await?;
    }
    Ok(())
}

/// `auto.create`: the table with the fields of this batch's records for it (the first
/// record that names a field gives its type).
async fn create(
    s: &FieldsSettings,
    cache: &mut Cache,
    client: &Client,
    table: &str,
    ops: &[(usize, Op)],
) -> Result<(), Failure> {
    let mut cols: Vec<(String, super::postgres_fields_row::ColType, bool)> = Vec::new();
    let mut pk_names: Vec<String> = Vec::new();
    for (_, op) in ops {
        let (t, pk, fields) = op_parts(op);
        if t != table {
            continue;
        }
        if pk_names.is_empty() {
            pk_names = pk.iter().map(|f| f.name.clone()).collect();
        }
        for f in pk.iter().chain(fields) {
            if let Some(ty) = f.ty {
                if !cols.iter().any(|(n, _, _)| *n == f.name) {
                    let key = pk.iter().any(|p| p.name == f.name);
                    cols.push((f.name.clone(), ty, key || !f.optional));
                }
            }
        }
    }
    if cols.is_empty() {
        return Err(Failure::Fatal(format!(
            "auto.create cannot make table {table}: its records have no field with a type (only nulls); create it"
        )));
    }
    if s.pk_mode == PkMode::None {
        pk_names.clear();
    }
    let ddl = sql::create_table(table, &cols, &pk_names);
    if let Err(e) = client.batch_execute(&ddl).await {
        // Two tasks creating the table at once: one loses the race on the catalog's unique
        // index, and the table is there all the same.
        let raced = e.code().is_some_and(|c| c == &SqlState::UNIQUE_VIOLATION || c == &SqlState::DUPLICATE_TABLE);
        if !raced {
            return Err(Failure::Pg(e, format!("creating table {table}")));
        }
    }
    tracing::info!(%table, columns = cols.len(), "postgres sink: created the table (auto.create)");
    let found = columns(client, table).await.map_err(|e| Failure::Pg(e, format!("reading table {table}")))?;
    cache.tables.insert(table.to_string(), found.unwrap_or_default());
    Ok(())
}

/// `auto.evolve`, or leaving out unknown nulls, or failing records with fields the table
/// lacks.
async fn evolve(
    s: &FieldsSettings,
    cache: &mut Cache,
    client: &Client,
    table: &str,
    ops: &mut Vec<(usize, Op)>,
    failed: &mut Vec<RecordFailure>,
) -> Result<(), Failure> {
    let mut refused: Vec<usize> = Vec::new();
    for (index, op) in ops.iter_mut() {
        let (pk, fields) = match op {
            Op::Write { table: t, pk, fields } if t == table => (pk, fields),
            Op::Delete { table: t, pk } if t == table => (pk, &mut Vec::new()),
            _ => continue,
        };
        let Some(cols) = cache.tables.get(table) else { continue };
        let missing_key: Vec<&str> =
            pk.iter().filter(|f| !cols.contains_key(&f.name)).map(|f| f.name.as_str()).collect();
        if !missing_key.is_empty() {
            failed.push(RecordFailure {
                index: *index,
                reason: format!("table {table} has no column {missing_key:?} of the primary key (pk.mode, pk.fields)"),
            });
            refused.push(*index);
            continue;
        }
        let mut add = Vec::new();
        let mut lacking = Vec::new();
        fields.retain(|f| {
            if cols.contains_key(&f.name) {
                return true;
            }
            match f.ty {
                // A null without a type: nothing to write, nothing to create.
                None => false,
                Some(ty) if s.auto_evolve => {
                    add.push((f.name.clone(), ty));
                    true
                }
                Some(_) => {
                    lacking.push(f.name.clone());
                    true
                }
            }
        });
        if !lacking.is_empty() {
            failed.push(RecordFailure {
                index: *index,
                reason: format!(
                    "table {table} has no column for field(s) {lacking:?}: add them, set auto.evolve=true, or leave \
                     them out with fields.whitelist"
                ),
            });
            refused.push(*index);
            continue;
        }
        for (name, ty) in add {
            if cache.tables.get(table).is_some_and(|c| c.contains_key(&name)) {
                continue;
            }
            match client.batch_execute(&sql::add_column(table, &name, ty)).await {
                Ok(()) => {}
                // Another task added it between our look and our ALTER.
                Err(e) if e.code() == Some(&SqlState::DUPLICATE_COLUMN) => {}
                Err(e) => return Err(Failure::Pg(e, format!("adding column {name:?} to table {table}"))),
            }
            tracing::info!(%table, column = %name, r#type = ty.sql(), "postgres sink: added a column (auto.evolve)");
            if let Some(cols) = cache.tables.get_mut(table) {
                cols.insert(name, ty.sql().to_string());
            }
        }
    }
    ops.retain(|(i, _)| !refused.contains(i));
    Ok(())
}

/// The net effect of a key's operations in one batch.
struct Net {
    table: String,
    pk: Vec<Field>,
    /// Delete the row before writing (a delete came before the last writes).
    delete_first: bool,
    /// The fields to write, merged in order (None: only a delete).
    fields: Option<Vec<Field>>,
}

/// Step 3: one entry per (table, key), in order of first appearance.
fn collapse(ops: &[(usize, Op)]) -> Vec<Net> {
    let mut out: Vec<Net> = Vec::new();
    let mut at: HashMap<(String, String), usize> = HashMap::new();
    for (_, op) in ops {
        let (table, pk, fields) = op_parts(op);
        let id =
            (table.to_string(), serde_json::Value::Array(pk.iter().map(|f| f.value.clone()).collect()).to_string());
        let i = *at.entry(id).or_insert_with(|| {
            out.push(Net { table: table.to_string(), pk: pk.to_vec(), delete_first: false, fields: None });
            out.len() - 1
        });
        let Some(net) = out.get_mut(i) else { continue };
        match op {
            Op::Delete { .. } => {
                net.delete_first = true;
                net.fields = None;
            }
            Op::Write { .. } => match &mut net.fields {
                None => net.fields = Some(fields.to_vec()),
                Some(have) => {
                    for f in fields {
                        match have.iter_mut().find(|h| h.name == f.name) {
                            Some(h) => *h = f.clone(),
                            None => have.push(f.clone()),
                        }
                    }
                }
            },
            Op::Skip => {}
        }
    }
    out
}

/// One statement's rows: SQL and one text array per column.
struct Stmt {
    sql: String,
    params: Vec<Vec<Option<String>>>,
}

fn column(cache: &Cache, table: &str, f: &Field) -> Column {
    let ty = cache.tables.get(table).and_then(|c| c.get(&f.name)).cloned().unwrap_or_else(|| "text".to_string());
    Column { name: f.name.clone(), ty }
}

/// A statement's identity: its table, its columns, how many of them are the key's.
type Group = (String, Vec<String>, usize, Stmt);

/// Adds a row to the statement for its table and columns (made on first use); the first
/// `npk` of `cols` are the key's.
fn add_row(
    groups: &mut Vec<Group>,
    cache: &Cache,
    table: &str,
    cols: Vec<&Field>,
    npk: usize,
    sql: impl FnOnce(&[Column]) -> Option<String>,
) {
    let names: Vec<String> = cols.iter().map(|f| f.name.clone()).collect();
    let columns: Vec<Column> = cols.iter().map(|f| column(cache, table, f)).collect();
    let i = match groups.iter().position(|(t, n, k, _)| t == table && *n == names && *k == npk) {
        Some(i) => i,
        None => {
            let Some(text) = sql(&columns) else { return };
            groups.push((table.to_string(), names, npk, Stmt { sql: text, params: vec![Vec::new(); columns.len()] }));
            groups.len() - 1
        }
    };
    if let Some((_, _, _, stmt)) = groups.get_mut(i) {
        for ((p, f), c) in stmt.params.iter_mut().zip(&cols).zip(&columns) {
            p.push(sql::param_text(&f.value, &c.ty));
        }
    }
}

/// Steps 3 and 4: the statements for `ops`, deletes first.
fn statements(s: &FieldsSettings, cache: &Cache, ops: &[(usize, Op)]) -> Vec<Stmt> {
    let mut deletes: Vec<Group> = Vec::new();
    let mut writes: Vec<Group> = Vec::new();
    let skip_conflicts = s.pk_mode == PkMode::Kafka;
    let mode = s.insert_mode;
    let write_sql = |table: &str, npk: usize| {
        let table = table.to_string();
        move |cols: &[Column]| sql::write(&table, mode, skip_conflicts, &cols[..npk], &cols[npk..])
    };
    if s.pk_mode == PkMode::None {
        for (_, op) in ops {
            if let Op::Write { table, fields, .. } = op {
                add_row(&mut writes, cache, table, fields.iter().collect(), 0, write_sql(table, 0));
            }
        }
    } else {
        for net in collapse(ops) {
            let table = net.table.as_str();
            if net.delete_first {
                let npk = net.pk.len();
                add_row(&mut deletes, cache, table, net.pk.iter().collect(), npk, |cols| {
                    Some(sql::delete(table, cols))
                });
            }
            if let Some(fields) = &net.fields {
                let cols: Vec<&Field> = net.pk.iter().chain(fields).collect();
                add_row(&mut writes, cache, table, cols, net.pk.len(), write_sql(table, net.pk.len()));
            }
        }
    }
    deletes.into_iter().chain(writes).map(|(_, _, _, st)| st).collect()
}

/// Step 4: writes `ops` in one transaction.
pub(super) async fn apply(
    s: &FieldsSettings,
    cache: &mut Cache,
    client: &mut Client,
    ops: &[(usize, Op)],
) -> Result<(), tokio_postgres::Error> {
    let stmts = statements(s, cache, ops);
    // Prepared outside the transaction, so that a failed statement leaves none half-made.
    let mut prepared = Vec::with_capacity(stmts.len());
    for st in &stmts {
        let statement = match cache.statements.get(&st.sql) {
            Some(p) => p.clone(),
            None => {
                let p = client.prepare(&st.sql).await?;
                cache.statements.insert(st.sql.clone(), p.clone());
                p
            }
        };
        prepared.push(statement);
    }
    let tx = client.transaction().await?;
    for (st, statement) in stmts.iter().zip(&prepared) {
        let params: Vec<&(dyn ToSql + Sync)> = st.params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        tx.execute(statement, &params).await?;
    }
    tx.commit().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::postgres_fields_config::fields_settings;
    use serde_json::json;

    fn settings(pairs: &[(&str, &str)]) -> FieldsSettings {
        fields_settings(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap()
    }

    fn field(name: &str, v: serde_json::Value) -> Field {
        Field { name: name.into(), ty: super::super::postgres_fields_row::ColType::infer(&v), optional: true, value: v }
    }

    fn write(k: &str, fields: Vec<Field>) -> Op {
        Op::Write { table: "\"t\"".into(), pk: vec![field("id", json!(k))], fields }
    }

    fn del(k: &str) -> Op {
        Op::Delete { table: "\"t\"".into(), pk: vec![field("id", json!(k))] }
    }

    fn cache() -> Cache {
        let mut c = Cache::default();
        let cols = [("id", "text"), ("a", "bigint"), ("b", "text")];
        c.tables.insert("\"t\"".into(), cols.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect());
        c
    }

    #[test]
    fn a_keys_operations_collapse_to_their_net_effect_in_order() {
        let ops: Vec<(usize, Op)> = vec![
            write("k1", vec![field("a", json!(1)), field("b", json!("x"))]),
            write("k2", vec![field("a", json!(2))]),
            write("k1", vec![field("a", json!(3))]),
            del("k2"),
            del("k3"),
            write("k3", vec![field("b", json!("y"))]),
        ]
        .into_iter()
        .enumerate()
        .collect();
        let net = collapse(&ops);
        assert_eq!(net.len(), 3);
        // k1: a from the later write, b kept from the earlier.
        assert!(!net[0].delete_first);
        assert_eq!(net[0].fields, Some(vec![field("a", json!(3)), field("b", json!("x"))]));
        // k2: only a delete.
        assert!(net[1].delete_first && net[1].fields.is_none());
        // k3: deleted, then written afresh.
        assert!(net[2].delete_first);
        assert_eq!(net[2].fields, Some(vec![field("b", json!("y"))]));
    }

    #[test]
    fn a_batch_is_deletes_then_one_statement_per_column_set() {
        let s = settings(&[("pk.mode", "record_key"), ("insert.mode", "upsert"), ("delete.enabled", "true")]);
        let ops: Vec<(usize, Op)> = vec![
            write("k1", vec![field("a", json!(1))]),
            write("k2", vec![field("a", json!(2))]),
            write("k3", vec![field("b", json!("z"))]),
            del("k4"),
        ]
        .into_iter()
        .enumerate()
        .collect();
        let st = statements(&s, &cache(), &ops);
        assert_eq!(st.len(), 3);
        assert!(st[0].sql.starts_with("DELETE FROM \"t\""), "{}", st[0].sql);
        assert_eq!(st[0].params, vec![vec![Some("k4".to_string())]]);
        assert!(st[1].sql.contains("ON CONFLICT (\"id\") DO UPDATE SET \"a\" = EXCLUDED.\"a\""), "{}", st[1].sql);
        assert_eq!(
            st[1].params,
            vec![vec![Some("k1".into()), Some("k2".into())], vec![Some("1".into()), Some("2".into())]]
        );
        assert_eq!(st[2].params, vec![vec![Some("k3".into())], vec![Some("z".into())]]);
    }

    #[test]
    fn without_a_key_every_record_is_a_row() {
        let s = settings(&[]);
        let ops: Vec<(usize, Op)> = vec![
            Op::Write { table: "\"t\"".into(), pk: vec![], fields: vec![field("a", json!(1))] },
            Op::Write { table: "\"t\"".into(), pk: vec![], fields: vec![field("a", json!(1))] },
        ]
        .into_iter()
        .enumerate()
        .collect();
        let st = statements(&s, &cache(), &ops);
        assert_eq!(st.len(), 1);
        assert_eq!(st[0].params, vec![vec![Some("1".to_string()), Some("1".to_string())]]);
        assert!(!st[0].sql.contains("ON CONFLICT"));
    }
}
