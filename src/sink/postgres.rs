//! The `postgres` sink task; its settings and behaviour are documented on [`PostgresSink`], the one
//! public path (`kafka_share::sink::PostgresSink`).

use std::str::FromStr;

use base64::Engine as _;
use futures::future::BoxFuture;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls, Statement};

use super::data::RecordSchemas;
use super::postgres_fields::{self as fields, Failure};
use super::postgres_fields_config::{fields_settings, FieldsSettings};
use super::task::{RecordFailure, SinkError, SinkRecord, SinkTask, TaskConfig};

/// The connection setting.
pub(crate) const URL_CONFIG: &str = "connection.url";
/// Overrides the connection's user.
pub(crate) const USER_CONFIG: &str = "connection.user";
/// Overrides the connection's password.
pub(crate) const PASSWORD_CONFIG: &str = "connection.password";
/// The table.
pub(crate) const TABLE_CONFIG: &str = "table";
pub(crate) use super::postgres_fields_config::AUTO_CREATE_CONFIG;
/// `records` (the default: one row per record, bytes) or `fields` (a record's fields are
/// columns, as Connect's JDBC sink; `postgres_fields.rs`).
pub(crate) const TABLE_LAYOUT_CONFIG: &str = "table.layout";
/// Confluent's JDBC sink class: the `fields` layout, so a JDBC sink connector file works.
pub const CONNECT_JDBC_SINK_CLASS: &str = "io.confluent.connect.jdbc.JdbcSinkConnector";

pub(crate) use super::postgres_fields_config::{
    AUTO_EVOLVE_CONFIG, DELETE_ENABLED_CONFIG, FIELDS_INCLUDE_CONFIG, FIELDS_WHITELIST_CONFIG, INSERT_MODE_CONFIG,
    PK_FIELDS_CONFIG, PK_MODE_CONFIG, TABLE_NAME_FORMAT_CONFIG,
};

/// The parsed settings.
#[derive(Clone)]
struct Settings {
    pg: tokio_postgres::Config,
    /// The TLS connector (None: `sslmode=disable`).
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    /// The records layout: the quoted (possibly schema-qualified) table name, ready for SQL.
    table: String,
    auto_create: bool,
    /// The fields layout's settings (None: the records layout).
    fields: Option<FieldsSettings>,
}

/// Which layout: `table.layout`, else the class's default.
fn fields_layout(config: &TaskConfig, default_fields: bool) -> Result<bool, SinkError> {
    match config.get(TABLE_LAYOUT_CONFIG).map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") => Ok(default_fields),
        Some("records") => Ok(false),
        Some("fields") => Ok(true),
        Some(v) => Err(SinkError::fatal(format!(
            "table.layout={v:?}: set records (one row per record: topic, partition, offset, key, value, headers, \
             timestamp) or fields (the value's fields as columns, as Connect's JDBC sink)"
        ))),
    }
}

fn settings(config: &TaskConfig, default_fields: bool) -> Result<Settings, SinkError> {
    let url = config.get(URL_CONFIG).map(|u| u.trim()).filter(|u| !u.is_empty()).ok_or_else(|| {
        SinkError::fatal("the postgres sink needs connection.url, e.g. postgres://user@127.0.0.1:5432/database")
    })?;
    // Connect's JDBC URL (jdbc:postgresql://host/db?user=u) is a libpq URL behind a prefix.
    let url = url.strip_prefix("jdbc:").unwrap_or(url);
    // tokio-postgres knows neither the ssl* file keys nor the verify-* modes: taken out first.
    let (url, tls) = super::postgres_tls::split(url)?;
    // The parse error does not echo the URL: it may hold a password.
    let mut pg = tokio_postgres::Config::from_str(&url).map_err(|e| {
        SinkError::fatal(format!(
            "connection.url is not a PostgreSQL connection string ({e}): write postgres://user@host:port/database \
             or host=... port=... user=... dbname=..."
        ))
    })?;
    if let Some(user) = config.get(USER_CONFIG).filter(|u| !u.is_empty()) {
        pg.user(user);
    }
    if let Some(password) = config.get(PASSWORD_CONFIG).filter(|p| !p.is_empty()) {
        pg.password(password);
    }
    pg.ssl_mode(tls.ssl_mode());
    let tls = tls.connector()?;
    if pg.get_user().is_none() {
        return Err(SinkError::fatal("connection.url names no user: add user@ to the URL, or set connection.user"));
    }
    if fields_layout(config, default_fields)? {
        let fields = fields_settings(config)?;
        let auto_create = fields.auto_create;
        return Ok(Settings { pg, tls, table: String::new(), auto_create, fields: Some(fields) });
    }
    // A JDBC sink setting on the records layout would do nothing: say which layout reads it.
    let fields_keys = [
        INSERT_MODE_CONFIG,
        PK_MODE_CONFIG,
        PK_FIELDS_CONFIG,
        FIELDS_WHITELIST_CONFIG,
        FIELDS_INCLUDE_CONFIG,
        TABLE_NAME_FORMAT_CONFIG,
        AUTO_EVOLVE_CONFIG,
        DELETE_ENABLED_CONFIG,
    ];
    if let Some(key) = fields_keys.iter().find(|k| config.get(**k).is_some_and(|v| !v.trim().is_empty())) {
        return Err(SinkError::fatal(format!(
            "{key} is a setting of the fields layout (a record's fields as columns), and this connector uses the \
             records layout: set table.layout=fields, or remove {key}"
        )));
    }
    let raw = config.get(TABLE_CONFIG).map(|t| t.trim()).filter(|t| !t.is_empty()).ok_or_else(|| {
        SinkError::fatal(
            "the postgres sink needs table, the table to insert into (set auto.create=true to have it created)",
        )
    })?;
    let table = quote_table(raw)?;
    let auto_create = super::file::parse_bool(config, AUTO_CREATE_CONFIG, false)?;
    Ok(Settings { pg, tls, table, auto_create, fields: None })
}

/// `schema.table` or `table`, each part quoted (a `"` doubled), so a name is never SQL.
fn quote_table(raw: &str) -> Result<String, SinkError> {
    let parts: Vec<&str> = raw.split('.').collect();
    if parts.len() > 2 || parts.iter().any(|p| p.is_empty() || p.contains('\0')) {
        return Err(SinkError::fatal(format!("table={raw:?}: give a table name, or schema.table")));
    }
    Ok(parts.iter().map(|p| format!("\"{}\"", p.replace('"', "\"\""))).collect::<Vec<_>>().join("."))
}

fn create_sql(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\
           \"topic\" text NOT NULL, \"partition\" integer NOT NULL, \"offset\" bigint NOT NULL, \
           \"key\" bytea, \"value\" bytea, \"headers\" jsonb NOT NULL, \"timestamp\" timestamptz, \
           PRIMARY KEY (\"topic\", \"partition\", \"offset\"))"
    )
}

fn insert_sql(table: &str) -> String {
    // One statement for the batch: atomic, one round trip, and ON CONFLICT makes a
    // redelivered record a no-op.
    format!(
        "INSERT INTO {table} (\"topic\", \"partition\", \"offset\", \"key\", \"value\", \"headers\", \"timestamp\") \
         SELECT t, p, o, k, v, h::jsonb, CASE WHEN ts >= 0 THEN to_timestamp(ts / 1000.0) END \
         FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bytea[], $5::bytea[], $6::text[], $7::bigint[]) \
           AS u(t, p, o, k, v, h, ts) \
         ON CONFLICT (\"topic\", \"partition\", \"offset\") DO NOTHING"
    )
}

/// The headers of a record as the `headers` column's JSON text.
fn headers_json(r: &SinkRecord) -> String {
    let list: Vec<serde_json::Value> = r
        .headers
        .iter()
        .map(|h| {
            let key = String::from_utf8_lossy(&h.key).replace('\0', "\u{FFFD}");
            match h.value.as_deref() {
                None => serde_json::json!({ "key": key, "value": null }),
                Some(v) => match std::str::from_utf8(v) {
                    Ok(s) if !s.contains('\0') => serde_json::json!({ "key": key, "value": s }),
                    _ => serde_json::json!({
                        "key": key,
                        "value_base64": base64::engine::general_purpose::STANDARD.encode(v),
                    }),
                },
            }
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// What a PostgreSQL error means.
enum Verdict {
    /// Passing: release the batch; `reconnect` when the connection is gone.
    Retriable {
        reconnect: bool,
    },
    /// About the data: find the records.
    Data,
    Fatal,
}

fn classify(e: &tokio_postgres::Error) -> Verdict {
    if tls_refused(e) {
        // An untrusted certificate, a name it does not cover, a server without TLS for
        // sslmode=require: the same settings fail the same way.
        return Verdict::Fatal;
    }
    let Some(code) = e.code() else {
        // No SQLSTATE: IO, a closed connection, a protocol error.
        return Verdict::Retriable { reconnect: true };
    };
    // `get`: a SQLSTATE is five characters, but it comes from the server.
    match code.code().get(..2).unwrap_or("") {
        "08" => Verdict::Retriable { reconnect: true },
        "22" | "23" => Verdict::Data,
        "42" | "28" | "3D" | "3F" | "0A" => Verdict::Fatal,
        // 40 (serialization, deadlock), 53 (resources), 55 (lock not available), 57 (admin
        // shutdown, query canceled) and anything unknown: try again later.
        _ => Verdict::Retriable { reconnect: e.is_closed() || code == &SqlState::ADMIN_SHUTDOWN },
    }
}

/// Whether the connection failed on TLS in a way retrying cannot fix.
/// The error's causes, outermost first. tokio-rustls wraps rustls's error in an io::Error
/// whose `source` skips it, so an io::Error's inner error stands in for it.
fn causes(e: &tokio_postgres::Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(e), |c| c.source()).map(|c| {
        match c.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => inner as &(dyn std::error::Error + 'static),
            None => c,
        }
    })
}

fn tls_refused(e: &tokio_postgres::Error) -> bool {
    causes(e).any(|c| c.downcast_ref::<rustls::Error>().is_some())
        || e.to_string().contains("server does not support TLS")
}

fn describe(e: &tokio_postgres::Error) -> String {
    if e.as_db_error().is_none() {
        // The cause says what went wrong (e.g. which certificate check failed).
        let mut text = e.to_string();
        for more in causes(e).map(|c| c.to_string()) {
            if !text.contains(&more) {
                text = format!("{text}: {more}");
            }
        }
        return text;
    }
    match e.as_db_error() {
        Some(db) => format!(
            "{} ({}){}",
            db.message(),
            db.code().code(),
            db.hint().map(|h| format!("; hint: {h}")).unwrap_or_default()
        ),
        None => e.to_string(),
    }
}

/// Connects with `tls`; the connection's IO runs on its own task, which ends when the client
/// is dropped or the server goes away (then `is_closed` tells the next put to reconnect).
async fn open<T>(pg: &tokio_postgres::Config, tls: T) -> Result<Client, tokio_postgres::Error>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
    T::Stream: Send + 'static,
{
    let (client, connection) = pg.connect(tls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "postgres sink: connection ended");
        }
    });
    Ok(client)
}

/// A live connection and its prepared insert (records layout) or what it knows of the
/// tables (fields layout).
struct Conn {
    client: Client,
    insert: Option<Statement>,
    fields: fields::Cache,
}

/// The `postgres` sink (feature `sink-postgres`): inserts records into a PostgreSQL table,
/// keyed by (topic, partition, offset) so that redeliveries never duplicate a row.
///
/// # Settings
///
/// | key | default | meaning |
/// |---|---|---|
/// | `connection.url` | (required) | `postgres://user[:password]@host:port/database`, or libpq key-values `host=127.0.0.1 port=5432 user=u dbname=d` |
/// | `connection.user`, `connection.password` | | override the URL's user and password (Connect's JDBC sink names) |
/// | `table` | (required) | the table, optionally schema-qualified (`schema.table`); quoted, so its case is kept |
/// | `auto.create` | `false` | `true`: create the table (below) if it does not exist |
/// | `table.layout` | `records` | `records`: the table below; `fields`: the value's fields as columns (next section) |
///
/// A `connection.url` of Connect's JDBC form (`jdbc:postgresql://host:5432/db?user=u`) is
/// read without its `jdbc:` prefix.
///
/// # The fields layout (Connect's JDBC sink)
/// `table.layout=fields`, the default of the class `io.confluent.connect.jdbc.JdbcSinkConnector`
/// (so a JDBC sink connector file runs as it is): each record's value is a JSON object whose
/// fields are columns, with Confluent's JDBC sink settings:
///
/// | key | default | meaning |
/// |---|---|---|
/// | `table.name.format` | `${topic}` | the table of a record; `${topic}` is its topic (after transforms); `schema.table` allowed, a topic's dots stay in the name |
/// | `insert.mode` | `insert` | `insert`; `upsert` (`INSERT .. ON CONFLICT (key) DO UPDATE`); `update` (`UPDATE .. WHERE key = ..`) |
/// | `pk.mode` | `none` | `none`; `kafka` (columns `__connect_topic`, `__connect_partition`, `__connect_offset`); `record_key`; `record_value` |
/// | `pk.fields` | | the key's columns: for `kafka` three names; for `record_key` fields of an object key (default all), or the one column of any other key (default `__connect_key`); for `record_value` fields of the value (default all) |
/// | `fields.whitelist` (or `fields.include`) | all | the value's fields written (the key's columns always are) |
/// | `auto.create` | `false` | create a missing table from the batch's fields, key columns as its primary key |
/// | `auto.evolve` | `false` | add a column (nullable) when a record has a field the table lacks; without it such a record fails, saying which field |
/// | `delete.enabled` | `false` | a tombstone deletes its key's row (needs `pk.mode=record_key`, as in Connect); without it a tombstone is skipped |
///
/// Refused at start, with the fix in the message: `upsert` or `update` without a primary key,
/// `delete.enabled` without `pk.mode=record_key`, `pk.mode=kafka` with other than three
/// `pk.fields`, `pk.fields` with `pk.mode=none`, `table` in this layout (it names tables by
/// `table.name.format`); and in the records layout, any of these settings (set
/// `table.layout=fields`).
///
/// **Column types.** A value in Connect's JSON envelope (`{"schema": .., "payload": ..}`, as
/// JsonConverter writes with `schemas.enable=true`, seen by the sink when the connector's
/// value converter is the default ByteArrayConverter) types each field by its schema:
/// int8/int16 `smallint`, int32 `integer`, int64 `bigint`, float32 `real`, float64
/// `double precision`, boolean, string `text`, bytes `bytea` (base64 in JSON), struct, map and
/// array `jsonb`, Connect's logical `Timestamp` `timestamptz`, `Date` `date`, `Time` `time` and
/// `Decimal` `numeric` (its scale kept exactly); a field that is not
/// `optional` is `NOT NULL`. Any other JSON object (plain JSON, or the payload a JsonConverter
/// in the connector already unwrapped) is typed from its values: `true`/`false` `boolean`, an
/// integer `bigint`, any other number `double precision`, a string `text`, an object or array
/// `jsonb`, and a null says nothing (the field is left out until a record gives it a value).
/// A key that is not a JSON object is one `text` column (its text, so `7` and `"7"` are one
/// key). Values are cast by the column's type in the table, so a table of your own may use
/// other types PostgreSQL can read the text as (`numeric`, `varchar(n)`, `uuid`, ...).
///
/// **A batch** is one transaction: the deletes, then one `INSERT .. SELECT FROM unnest(..)`
/// (or `UPDATE`) per table and set of columns. Several records of one key in a batch act as
/// they would one after another (the last write's fields win; a tombstone forgets what came
/// before it). With `pk.mode=kafka` and `insert.mode=insert` a redelivered record is skipped
/// (`ON CONFLICT DO NOTHING`), so the table is effectively-once as in the records layout; with
/// another key, `insert` fails on a row that is there (as Connect's does), a redelivered record
/// included: use `upsert` when records may come twice (at least once, they may). A
/// value a column cannot take fails the transaction; then the records are written one at a
/// time to find the ones that fail (they take the dead-letter path), the others stay.
///
/// **Order.** A share group delivers the records of one key in no set order across batches
/// and tasks (two batches run at once; a batch released by a failure comes back after later
/// ones). Upserts and deletes of one key in flight at the same time may be applied in either
/// order; the last value wins only for versions that are not in flight together.
///
/// The table (what `auto.create` makes; a table of your own needs these columns and a
/// unique constraint on the first three):
///
/// ```sql
/// CREATE TABLE "records" (
///     "topic"       text        NOT NULL,
///     "partition"   integer     NOT NULL,
///     "offset"      bigint      NOT NULL,
///     "key"         bytea,
///     "value"       bytea,
///     "headers"     jsonb       NOT NULL,  -- [{"key":"h","value":"text"} or {"key":"h","value_base64":"..."}]
///     "timestamp"   timestamptz,           -- null when the record has none
///     PRIMARY KEY ("topic", "partition", "offset")
/// );
/// ```
///
/// A header value is a JSON string when it is UTF-8 without NUL characters (which `jsonb`
/// cannot hold), else base64 under `value_base64`; a null header value is JSON `null`.
///
/// # Effectively once
/// A batch is one `INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING`: one statement,
/// so one transaction, and a row that a previous delivery inserted is skipped. The share
/// group delivers at least once (a batch is redelivered when the task fails after the insert
/// but before the ACCEPT reached the broker); the table still holds each record once.
///
/// # Errors
/// - connection lost or refused, serialization failures, deadlocks, the server shutting down
///   or out of resources: retriable (the batch is released; the next `put` reconnects);
/// - a data or constraint error (class 22 or 23, e.g. a CHECK constraint of your table): the
///   batch is retried one record at a time, and only the records that fail go the
///   dead-letter path;
/// - a missing table or column, missing privileges, bad credentials, an unknown database
///   (classes 42, 28, 3D): fatal, the message says what to fix.
///
/// # TLS
/// libpq's keys in the connection string: `sslmode` (`disable`, `prefer` the default,
/// `require`, `verify-ca`, `verify-full`), `sslrootcert`, `sslcert`, `sslkey`, with libpq's
/// meanings: e.g.
/// `postgres://u@db.example.com/d?sslmode=verify-full&sslrootcert=/etc/ssl/rds-ca.pem`.
///
/// | `sslmode` | TLS | the server's certificate |
/// |---|---|---|
/// | `disable` | never | - |
/// | `prefer` (default) | if the server offers it | not checked (checked as `verify-ca` when `sslrootcert` is given) |
/// | `require` | always | not checked (checked as `verify-ca` when `sslrootcert` is given) |
/// | `verify-ca` | always | signed by a trusted CA |
/// | `verify-full` | always | signed by a trusted CA and naming the host dialled |
///
/// `sslrootcert` is a PEM file of trusted CAs (`system`: the operating system's store, with
/// the `tls-native-roots` feature; default: the bundled Mozilla roots); `sslcert` and
/// `sslkey` a client certificate and key (PEM). A managed database's usual `sslmode=require`
/// URL works as with `psql`; `verify-full` with the provider's CA bundle is the safe choice.
///
/// The `postgres` sink task.
#[derive(Default)]
pub struct PostgresSink {
    settings: Option<Settings>,
    conn: Option<Conn>,
    /// The layout when `table.layout` is not set: fields for Connect's JDBC sink class.
    default_fields: bool,
}

impl std::fmt::Debug for PostgresSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the settings: the connection config holds the password.
        f.debug_struct("PostgresSink")
            .field("table", &self.settings.as_ref().map(|s| s.table.as_str()))
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

impl PostgresSink {
    /// The connection setting.
    pub const URL_CONFIG: &'static str = URL_CONFIG;
    /// Overrides the connection's user.
    pub const USER_CONFIG: &'static str = USER_CONFIG;
    /// Overrides the connection's password.
    pub const PASSWORD_CONFIG: &'static str = PASSWORD_CONFIG;
    /// The table.
    pub const TABLE_CONFIG: &'static str = TABLE_CONFIG;
    /// `records` (the default: one row per record, bytes) or `fields` (a record's fields are
    /// columns, as Connect's JDBC sink; `postgres_fields.rs`).
    pub const TABLE_LAYOUT_CONFIG: &'static str = TABLE_LAYOUT_CONFIG;
    /// `insert`, `upsert` or `update`.
    pub const INSERT_MODE_CONFIG: &'static str = INSERT_MODE_CONFIG;
    /// Create the table when missing (both layouts; defined here, where the fields layout reads
    /// it, so this file needs nothing of `postgres.rs`).
    pub const AUTO_CREATE_CONFIG: &'static str = AUTO_CREATE_CONFIG;
    /// Add a column when a record has a field the table lacks.
    pub const AUTO_EVOLVE_CONFIG: &'static str = AUTO_EVOLVE_CONFIG;
    /// `none`, `kafka`, `record_key` or `record_value`.
    pub const PK_MODE_CONFIG: &'static str = PK_MODE_CONFIG;
    /// The primary key's columns (their meaning depends on `pk.mode`).
    pub const PK_FIELDS_CONFIG: &'static str = PK_FIELDS_CONFIG;
    /// The value fields written (empty: all).
    pub const FIELDS_WHITELIST_CONFIG: &'static str = FIELDS_WHITELIST_CONFIG;
    /// Another name of `fields.whitelist`, accepted the same.
    pub const FIELDS_INCLUDE_CONFIG: &'static str = FIELDS_INCLUDE_CONFIG;
    /// The table of a record: `${topic}` is replaced by its topic.
    pub const TABLE_NAME_FORMAT_CONFIG: &'static str = TABLE_NAME_FORMAT_CONFIG;
    /// Delete the row of a tombstone's key.
    pub const DELETE_ENABLED_CONFIG: &'static str = DELETE_ENABLED_CONFIG;

    /// A task that reads its settings in `start`.
    pub fn new() -> PostgresSink {
        PostgresSink::default()
    }

    /// A task whose layout is `fields` unless `table.layout` says otherwise (Connect's JDBC
    /// sink class, [`CONNECT_JDBC_SINK_CLASS`]).
    pub fn jdbc() -> PostgresSink {
        PostgresSink { default_fields: true, ..PostgresSink::default() }
    }

    /// Checks the settings (the registry's factory calls this).
    pub fn check_config(config: &TaskConfig) -> Result<(), SinkError> {
        settings(config, false).map(|_| ())
    }

    /// Checks the settings of a [`PostgresSink::jdbc`] task.
    pub fn check_jdbc_config(config: &TaskConfig) -> Result<(), SinkError> {
        settings(config, true).map(|_| ())
    }

    /// The connection, opened (and the table created, if asked) when there is none or the
    /// last one died.
    /// What a failure that is not about one record's data means for the whole batch:
    /// retriable (dropping a connection that is gone, so the next `put` reconnects) or fatal.
    fn batch_error(&mut self, verdict: Verdict, e: &tokio_postgres::Error, doing: &str) -> SinkError {
        match verdict {
            Verdict::Retriable { reconnect } => {
                if reconnect {
                    self.conn = None;
                }
                SinkError::retriable(format!("postgres sink: insert: {}", describe(e)))
            }
            _ => SinkError::fatal(format!("postgres sink: {doing}: {}", describe(e))),
        }
    }

    /// The fields layout's `put` (postgres_fields.rs): plan, make the tables fit, write in one
    /// transaction; on a data error, one record at a time to find the ones that fail.
    /// `schemas[i]` (when there) is what `records[i]`'s converters read.
    async fn put_fields(&mut self, records: &[&SinkRecord], schemas: &[RecordSchemas]) -> Result<(), SinkError> {
        let Some(s) = self.settings.as_ref().and_then(|s| s.fields.clone()) else {
            return Err(SinkError::fatal("the postgres sink was used before start"));
        };
        let (mut ops, mut failed) = fields::plan(&s, records, schemas);
        let conn = self.connection().await?;
        let prepared = fields::prepare_tables(&s, &mut conn.fields, &conn.client, &mut ops, &mut failed).await;
        if let Err(f) = prepared {
            return Err(self.failure(f));
        }
        if ops.is_empty() {
            return records_result(failed);
        }
        let conn = self.connection().await?;
        let e = match fields::apply(&s, &mut conn.fields, &mut conn.client, &ops).await {
            Ok(()) => return records_result(failed),
            Err(e) => e,
        };
        match classify(&e) {
            Verdict::Data => {
                // The transaction failed whole: nothing of it is in the table. Each record
                // alone, in order, to find the bad ones; the good ones are kept.
                for one in ops {
                    let index = one.0;
                    let conn = self.connection().await?;
                    if let Err(e) = fields::apply(&s, &mut conn.fields, &mut conn.client, &[one]).await {
                        match classify(&e) {
                            Verdict::Data => failed.push(RecordFailure { index, reason: describe(&e) }),
                            verdict => return Err(self.batch_error(verdict, &e, "writing a record")),
                        }
                    }
                }
                failed.sort_by_key(|f| f.index);
                records_result(failed)
            }
            verdict => {
                let doing = if e.code() == Some(&SqlState::INVALID_COLUMN_REFERENCE) {
                    "writing the batch (insert.mode=upsert needs a primary key or unique index on the key's columns: \
                     add one, or let auto.create make the table)"
                } else {
                    "writing the batch"
                };
                Err(self.batch_error(verdict, &e, doing))
            }
        }
    }

    /// A failure of the fields layout outside a record's data, as the task's error.
    fn failure(&mut self, f: Failure) -> SinkError {
        match f {
            Failure::Fatal(why) => SinkError::fatal(format!("postgres sink: {why}")),
            Failure::Pg(e, doing) => match classify(&e) {
                verdict @ Verdict::Retriable { .. } => self.batch_error(verdict, &e, &doing),
                _ => verdict_error(&e, &doing),
            },
        }
    }

    async fn connection(&mut self) -> Result<&mut Conn, SinkError> {
        let Some(s) = self.settings.as_ref() else {
            return Err(SinkError::fatal("the postgres sink was used before start"));
        };
        if self.conn.as_ref().is_some_and(|c| c.client.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let connected = match &s.tls {
                Some(tls) => open(&s.pg, tls.clone()).await,
                None => open(&s.pg, NoTls).await,
            };
            let client = connected.map_err(|e| match classify(&e) {
                Verdict::Fatal => {
                    SinkError::fatal(format!("postgres sink: connecting: {}; check connection.url", describe(&e)))
                }
                _ => SinkError::retriable(format!("postgres sink: connecting: {}", describe(&e))),
            })?;
            if s.fields.is_some() {
                // Tables are looked up, created and evolved per batch (postgres_fields.rs).
                self.conn = Some(Conn { client, insert: None, fields: fields::Cache::default() });
            } else {
                if s.auto_create {
                    if let Err(e) = client.batch_execute(&create_sql(&s.table)).await {
                        // Two tasks creating the table at once: one loses the race on the
                        // catalog's unique index, and the table is there all the same.
                        let raced = e
                            .code()
                            .is_some_and(|c| c == &SqlState::UNIQUE_VIOLATION || c == &SqlState::DUPLICATE_TABLE);
                        if !raced {
                            return Err(verdict_error(&e, &format!("creating table {}", s.table)));
                        }
                    }
                }
                let insert = client.prepare(&insert_sql(&s.table)).await.map_err(|e| {
                    let hint = if s.auto_create { "" } else { " (set auto.create=true to have it created)" };
                    verdict_error(&e, &format!("preparing the insert into table {}{hint}", s.table))
                })?;
                self.conn = Some(Conn { client, insert: Some(insert), fields: fields::Cache::default() });
            }
        }
        match self.conn.as_mut() {
            Some(c) => Ok(c),
            None => Err(SinkError::retriable("postgres sink: no connection")),
        }
    }
}

/// `Ok`, or the records that failed.
fn records_result(failed: Vec<RecordFailure>) -> Result<(), SinkError> {
    if failed.is_empty() {
        Ok(())
    } else {
        Err(SinkError::Records { failed })
    }
}

fn verdict_error(e: &tokio_postgres::Error, doing: &str) -> SinkError {
    match classify(e) {
        Verdict::Fatal => SinkError::fatal(format!("postgres sink: {doing}: {}", describe(e))),
        _ => SinkError::retriable(format!("postgres sink: {doing}: {}", describe(e))),
    }
}

/// Inserts `records` in one statement.
async fn insert(conn: &Conn, records: &[&SinkRecord]) -> Result<u64, tokio_postgres::Error> {
    let Some(statement) = conn.insert.as_ref() else {
        // The records layout's connections always prepare it; a fields layout never gets here.
        return Ok(0);
    };
    let topics: Vec<&str> = records.iter().map(|r| &*r.topic).collect();
    let partitions: Vec<i32> = records.iter().map(|r| r.partition).collect();
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    let keys: Vec<Option<&[u8]>> = records.iter().map(|r| r.key.as_deref()).collect();
    let values: Vec<Option<&[u8]>> = records.iter().map(|r| r.value.as_deref()).collect();
    let headers: Vec<String> = records.iter().map(|r| headers_json(r)).collect();
    let timestamps: Vec<i64> = records.iter().map(|r| r.timestamp).collect();
    conn.client
        .execute(statement, &[&topics, &partitions, &offsets, &keys, &values, &headers, &timestamps])
        .await
}

impl SinkTask for PostgresSink {
    fn start(&mut self, config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        let parsed = settings(config, self.default_fields);
        Box::pin(async move {
            self.settings = Some(parsed?);
            // Connect now so that bad credentials or a missing table stop the task before it
            // takes records; a server that is down only delays the first put.
            match self.connection().await {
                Ok(_) => Ok(()),
                Err(SinkError::Retriable { reason }) => {
                    tracing::warn!(%reason, "postgres sink: not connected yet; the first put tries again");
                    Ok(())
                }
                Err(e @ (SinkError::Records { .. } | SinkError::RetriableRecords { .. } | SinkError::Fatal { .. })) => {
                    Err(e)
                }
            }
        })
    }

    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            if records.is_empty() {
                return Ok(());
            }
            if self.settings.as_ref().is_some_and(|s| s.fields.is_some()) {
                return self.put_fields(records, &[]).await;
            }
            let conn = self.connection().await?;
            let e = match insert(&*conn, records).await {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            match classify(&e) {
                Verdict::Data => {
                    // The statement failed whole, so nothing of it is in the table. Insert one
                    // record at a time to find the bad ones; the good ones are kept (a later
                    // redelivery of them is a no-op).
                    let mut failed = Vec::new();
                    for (index, r) in records.iter().enumerate() {
                        let conn = self.connection().await?;
                        if let Err(e) = insert(&*conn, &[r]).await {
                            match classify(&e) {
                                Verdict::Data => failed.push(RecordFailure { index, reason: describe(&e) }),
                                verdict => return Err(self.batch_error(verdict, &e, "insert")),
                            }
                        }
                    }
                    if failed.is_empty() {
                        // The batch failed and every record alone passed: a conflict between
                        // records of the batch itself; they are all in now.
                        Ok(())
                    } else {
                        Err(SinkError::Records { failed })
                    }
                }
                verdict => Err(self.batch_error(verdict, &e, "insert into the table")),
            }
        })
    }

    fn put_with_schemas<'a>(
        &'a mut self,
        records: &'a [&'a SinkRecord],
        schemas: &'a [RecordSchemas],
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        // The fields layout types its columns by the converters' schemas; the records layout
        // stores bytes and has no use for them.
        if records.is_empty() || self.settings.as_ref().is_none_or(|s| s.fields.is_none()) {
            return self.put(records);
        }
        Box::pin(self.put_fields(records, schemas))
    }

    fn stop(&mut self) -> BoxFuture<'_, ()> {
        // Dropping the client ends the connection task.
        self.conn = None;
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings_of(config: &TaskConfig) -> Result<Settings, SinkError> {
        settings(config, false)
    }

    fn config(pairs: &[(&str, &str)]) -> TaskConfig {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn table_names_are_quoted() {
        assert_eq!(quote_table("records").unwrap(), "\"records\"");
        assert_eq!(quote_table("s.Rec\"x").unwrap(), "\"s\".\"Rec\"\"x\"");
        assert!(quote_table("a.b.c").is_err());
        assert!(quote_table("a.").is_err());
    }

    #[test]
    fn settings_name_their_key() {
        assert!(settings_of(&config(&[])).err().unwrap().to_string().contains("connection.url"));
        let no_table = config(&[("connection.url", "postgres://u@127.0.0.1:5432/d")]);
        assert!(settings_of(&no_table).err().unwrap().to_string().contains("table"));
        let tls = config(&[("connection.url", "postgres://u@127.0.0.1/d?sslmode=require"), ("table", "t")]);
        assert_eq!(settings_of(&tls).ok().unwrap().pg.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
        let bad = config(&[("connection.url", "postgres://u@127.0.0.1/d?sslmode=maybe"), ("table", "t")]);
        assert!(settings_of(&bad).err().unwrap().to_string().contains("sslmode"));
        let kv = config(&[
            ("connection.url", "host=127.0.0.1 port=5432 dbname=d"),
            ("connection.user", "u"),
            ("table", "t"),
        ]);
        assert!(settings_of(&kv).is_ok());
        let secret = config(&[("connection.url", "postgres://u:hunter2@127.0.0.1:notaport/d"), ("table", "t")]);
        let e = settings_of(&secret).err().unwrap().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let jdbc_url = config(&[("connection.url", "jdbc:postgresql://u@127.0.0.1:5432/d"), ("table", "t")]);
        assert!(settings_of(&jdbc_url).is_ok(), "Connect's jdbc: prefix is read");
        let stray =
            config(&[("connection.url", "postgres://u@127.0.0.1/d"), ("table", "t"), ("insert.mode", "upsert")]);
        let e = settings_of(&stray).err().unwrap().to_string();
        assert!(e.contains("insert.mode") && e.contains("table.layout=fields"), "{e}");
        let fields = config(&[("connection.url", "postgres://u@127.0.0.1/d"), ("table.layout", "fields")]);
        assert!(settings_of(&fields).ok().unwrap().fields.is_some());
        let bad = config(&[("connection.url", "postgres://u@127.0.0.1/d"), ("table.layout", "columns")]);
        assert!(settings_of(&bad).err().unwrap().to_string().contains("table.layout"));
        let jdbc = config(&[("connection.url", "postgres://u@127.0.0.1/d"), ("delete.enabled", "true")]);
        let e = settings(&jdbc, true).err().unwrap().to_string();
        assert!(e.contains("pk.mode=record_key"), "{e}");
    }
}
