//! Tests that need a real PostgreSQL (`scripts/postgres up`; env `KAFKA_SHARE_PG_URL`) beside
//! the broker: the PostgreSQL sink (feature `sink-postgres`). Run with
//! `scripts/test --test postgres` (it starts both).

#[path = "../common/mod.rs"]
mod common;

mod sink_postgres;
mod sink_postgres_fields;
mod sink_postgres_json_converter;
