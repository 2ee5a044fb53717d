//! The store's schema version: table `waggle_schema_version`, one row per version the store was
//! brought to (the version, the Waggle that did it, when), the store's version being the
//! highest. Every open ([`prepare`]) does, in one transaction (SQLite's write lock,
//! PostgreSQL's advisory lock: nodes opening one database together take turns):
//!
//! - reads the version; a store without the table but with the tables is version 1 (written
//!   before the store was versioned), a store without tables is new;
//! - refuses a store of a newer version than [`SCHEMA_VERSION`] (a newer Waggle wrote it; this
//!   one could misread or damage it) with [`StoreError::NewerSchema`], changing nothing;
//! - runs the [`MIGRATIONS`] after the store's version, in order, then the schema's
//!   idempotent DDL ([`crate::schema::ddl`]: what a version added is created where missing),
//!   and records [`SCHEMA_VERSION`].
//!
//! Versions: 1, the tables of issues 27-28 (process definitions to user tasks, the count tables
//! and their triggers); 2, this table; 3, SQLite's counts kept by the exporter (its count
//! triggers dropped, the counts computed once again: [`crate::counts`]).

use crate::db::{Connection, Value};
use crate::dialect::Dialect;
use crate::StoreError;

/// The schema version this Waggle writes and reads.
pub const SCHEMA_VERSION: i64 = 3;

/// The advisory lock PostgreSQL openers take (any fixed number: "waggle" in ASCII).
const SCHEMA_LOCK: i64 = 0x7761_6767_6c65;

const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS waggle_schema_version (
    version INTEGER PRIMARY KEY,
    waggle_version TEXT NOT NULL,
    applied_at INTEGER NOT NULL
);";

/// A step from the version before `to`: statements in SQLite's form (turned into the
/// connection's dialect), run before the idempotent DDL, so they may change existing tables
/// (an added column, a changed key) that the DDL's indexes then use; then `sqlite_only`'s on
/// SQLite.
pub struct Migration {
    pub to: i64,
    pub what: &'static str,
    pub sql: &'static str,
    pub sqlite_only: &'static str,
}

/// Every step after version 1, in order; the last one's `to` is [`SCHEMA_VERSION`].
pub const MIGRATIONS: &[Migration] = &[
    Migration { to: 2, what: "the schema version table (the tables themselves are completed by the DDL)", sql: "", sqlite_only: "" },
    Migration {
        to: 3,
        what: "SQLite: the instance counts kept by the exporter, not by triggers (counted again once)",
        sql: "",
        // the DDL makes the count tables again, and its backfill counts what the store holds
        sqlite_only: "DROP TRIGGER IF EXISTS process_instance_counted;
            DROP TRIGGER IF EXISTS process_instance_uncounted;
            DROP TRIGGER IF EXISTS process_instance_recounted;
            DROP TRIGGER IF EXISTS flow_node_counted;
            DROP TRIGGER IF EXISTS flow_node_uncounted;
            DROP TRIGGER IF EXISTS flow_node_recounted;
            DROP TABLE IF EXISTS process_instance_count;
            DROP TABLE IF EXISTS flow_node_count;",
    },
];

/// What [`prepare`] found and left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    /// The version the store had: `None` for a new store.
    pub found: Option<i64>,
    /// Its version now ([`SCHEMA_VERSION`]).
    pub version: i64,
}

/// Brings the store on `conn` to [`SCHEMA_VERSION`] (see the module's contract).
pub fn prepare(conn: &Connection) -> Result<Prepared, StoreError> {
    let dialect = conn.dialect();
    match dialect {
        Dialect::Sqlite => conn.batch("BEGIN IMMEDIATE")?,
        Dialect::Postgres => {
            conn.batch("BEGIN")?;
            conn.batch(&format!("SELECT pg_advisory_xact_lock({SCHEMA_LOCK})"))?;
        }
    }
    match migrate(conn, dialect) {
        Ok(prepared) => {
            conn.batch("COMMIT")?;
            if prepared.found.is_some_and(|v| v < prepared.version) {
                tracing::info!(from = prepared.found, to = prepared.version, "query store schema migrated");
            }
            Ok(prepared)
        }
        Err(e) => {
            let _ = conn.batch("ROLLBACK");
            Err(e)
        }
    }
}

fn migrate(conn: &Connection, dialect: Dialect) -> Result<Prepared, StoreError> {
    conn.batch(&dialect.schema(VERSION_TABLE))?;
    let found = match recorded(conn)? {
        Some(v) => Some(v),
        None => has_tables(conn, dialect)?.then_some(1),
    };
    if let Some(found) = found.filter(|v| *v > SCHEMA_VERSION) {
        return Err(StoreError::NewerSchema { found, supported: SCHEMA_VERSION });
    }
    if let Some(from) = found {
        for step in MIGRATIONS.iter().filter(|m| m.to > from) {
            tracing::info!(to = step.to, what = step.what, "query store schema: migrating");
            if !step.sql.is_empty() {
                conn.batch(&dialect.schema(step.sql))?;
            }
            if dialect == Dialect::Sqlite && !step.sqlite_only.is_empty() {
                conn.batch(step.sqlite_only)?;
            }
        }
    }
    conn.batch(&crate::schema::ddl(dialect))?;
    if found != Some(SCHEMA_VERSION) {
        let now = chrono::Utc::now().timestamp_millis();
        conn.execute(
            "INSERT INTO waggle_schema_version (version, waggle_version, applied_at) VALUES (?, ?, ?)",
            crate::params![SCHEMA_VERSION, env!("CARGO_PKG_VERSION"), now],
        )?;
    }
    Ok(Prepared { found, version: SCHEMA_VERSION })
}

/// The version recorded in the store's version table, if any.
pub fn recorded(conn: &Connection) -> Result<Option<i64>, StoreError> {
    let row = conn.query_row("SELECT MAX(version) FROM waggle_schema_version", &[])?;
    Ok(row.and_then(|r| r.into_iter().next()).and_then(|v| match v {
        Value::Integer(i) => Some(i),
        _ => None,
    }))
}

/// Whether the store holds the tables of a version before this table existed.
fn has_tables(conn: &Connection, dialect: Dialect) -> Result<bool, StoreError> {
    let sql = match dialect {
        Dialect::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'process_instance'",
        Dialect::Postgres => {
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'process_instance'"
        }
    };
    let count = conn.query_row(sql, &[])?.and_then(|r| r.into_iter().next()).and_then(|v| v.as_i64()).unwrap_or(0);
    Ok(count > 0)
}
