//! The query store: what Waggle's REST API v2 searches, kept by an exporter, embedded in one
//! SQLite file in the node's data folder (`query-store.sqlite`), needing no other server, or in
//! a PostgreSQL database for production (`--query-store postgres://…`).
//!
//! - [`schema`]: the tables, modelled on Camunda's RDBMS exporter (`db/rdbms-schema` in
//!   camunda/camunda): process definitions (with their XML), process instances, element (flow
//!   node) instances, variables, incidents, jobs, message subscriptions, exporter positions.
//! - [`exporter`]: the exporter writing them, a transaction per flushed batch, acknowledging
//!   once a commit synced to disk covers it; every write is an upsert keyed by the entity's key and records at or
//!   below the partition's stored position are skipped, so re-export after a crash leaves each
//!   entity once. History clean-up deletes finished instances older than a time to live.
//! - [`query`]: the searches (`filter` with Camunda 8.8's operators, `sort`, `page`) as JSON in
//!   the 8.8 Orchestration Cluster API's shape; [`instance_filter`]: the process instance
//!   filter's conditions on elements and variables.
//! - [`statistics`]: per element counts of a process definition's or instance's element
//!   instances; [`decisions`]: decision definitions, requirements and instances.
//! - [`db`], [`dialect`], [`pg`]: one connection interface over both databases; every statement
//!   is written once and turned into the connection's dialect.
//! - [`rows`]: the exporter's frequent writes as multi-row statements on PostgreSQL.
//! - [`counts`]: the instance counts on SQLite, kept by the exporter per transaction.
//! - [`changes`]: the exporter's signal that a commit changed rows, for the UI's live pages.
//! - [`test_cluster`]: a throw-away PostgreSQL server for tests.
//! - [`version`]: the schema's version, migrated forward at open; a newer store is refused.

pub mod changes;
pub mod counts;
pub mod db;
pub mod decisions;
pub mod dialect;
pub mod exporter;
pub mod instance_filter;
pub mod overview;
pub mod pg;
pub mod query;
pub mod rows;
pub mod schema;
pub mod statistics;
pub mod test_cluster;
pub mod version;

pub use changes::Changes;
pub use db::{Connection, Location};

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The store file in a data folder.
pub fn path_in(data_dir: &Path) -> PathBuf {
    data_dir.join("query-store.sqlite")
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("query store: {0}")]
    Sql(#[from] SqlError),
    /// The request is malformed (an unknown field, an operator on the wrong type, a bad cursor).
    #[error("{0}")]
    Invalid(String),
    #[error("not found: {0}")]
    NotFound(String),
    /// The store was written by a newer Waggle ([`version`]).
    #[error(
        "the query store has schema version {found}, written by a newer Waggle (this one knows versions up to {supported}): refusing to open it; run that Waggle, or point this one at another store"
    )]
    NewerSchema { found: i64, supported: i64 },
}

/// A database's error.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("PostgreSQL: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    #[error("PostgreSQL closed the connection during a transaction")]
    ClosedInTransaction,
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(e.into())
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        StoreError::Sql(e.into())
    }
}

/// Opens an SQLite store in WAL mode (readers never wait for the exporter's transactions),
/// with the schema created if missing or migrated to this Waggle's version ([`version`]).
pub fn open(path: &Path) -> Result<Connection, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // FULL: each commit syncs the WAL. The exporter's write connection switches to NORMAL for
    // the commits between synced ones, and acknowledges a position only once a FULL commit
    // covered it (exporter.rs): with NORMAL alone the last commits may be lost on power
    // failure while the log is compacted past them
    conn.pragma_update(None, "synchronous", "FULL")?;
    // `$like` is case-sensitive, as PostgreSQL's LIKE
    conn.pragma_update(None, "case_sensitive_like", true)?;
    conn.set_prepared_statement_cache_capacity(64);
    let conn = Connection::Sqlite(conn);
    version::prepare(&conn)?;
    Ok(conn)
}

/// Read connections for the REST API, reused across requests.
pub struct Reader {
    location: Location,
    idle: Mutex<Vec<Connection>>,
    changes: Option<Changes>,
}

impl Reader {
    /// Opens (and creates, if missing) the store at `location`.
    pub fn new(location: Location) -> Result<Self, StoreError> {
        let first = Connection::open(&location)?;
        Ok(Self { location, idle: Mutex::new(vec![first]), changes: None })
    }

    /// The same, with the commits of this node's exporters into the store (what the UI's live
    /// pages wait for).
    pub fn with_changes(mut self, changes: Changes) -> Self {
        self.changes = Some(changes);
        self
    }

    /// The commits of this node's exporters, if told ([`Reader::with_changes`]).
    pub fn changes(&self) -> Option<&Changes> {
        self.changes.as_ref()
    }

    /// The store's schema version (as recorded in it; see [`version`]).
    pub fn schema_version(&self) -> Result<Option<i64>, StoreError> {
        self.with(version::recorded)
    }

    /// Runs `f` on a connection (blocking: call it off the async threads).
    pub fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let conn = self.idle.lock().expect("reader pool").pop();
        let conn = match conn {
            Some(c) => c,
            None => Connection::open(&self.location)?,
        };
        let out = f(&conn);
        let mut idle = self.idle.lock().expect("reader pool");
        if idle.len() < 8 {
            idle.push(conn);
        }
        out
    }
}

#[cfg(test)]
mod tests;
