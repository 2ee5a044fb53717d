//! The embedded query store: what Waggle's REST API v2 searches, kept by an exporter, in one
//! SQLite file in the node's data folder (`query-store.sqlite`), needing no other server.
//!
//! - [`schema`]: the tables, modelled on Camunda's RDBMS exporter (`db/rdbms-schema` in
//!   camunda/camunda): process definitions (with their XML), process instances, element (flow
//!   node) instances, variables, incidents, jobs, message subscriptions, exporter positions.
//! - [`exporter`]: the exporter writing them, a transaction per flushed batch, acknowledging
//!   once a commit synced to disk covers it; every write is an upsert keyed by the entity's key and records at or
//!   below the partition's stored position are skipped, so re-export after a crash leaves each
//!   entity once. History clean-up deletes finished instances older than a time to live.
//! - [`query`]: the searches (`filter` with Camunda 8.8's operators, `sort`, `page`) as JSON in
//!   the 8.8 Orchestration Cluster API's shape.

pub mod exporter;
pub mod overview;
pub mod query;
pub mod schema;

pub use rusqlite::Connection;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The store file in a data folder.
pub fn path_in(data_dir: &Path) -> PathBuf {
    data_dir.join("query-store.sqlite")
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("query store: {0}")]
    Sql(#[from] rusqlite::Error),
    /// The request is malformed (an unknown field, an operator on the wrong type, a bad cursor).
    #[error("{0}")]
    Invalid(String),
    #[error("not found: {0}")]
    NotFound(String),
}

/// Opens a connection in WAL mode (readers never wait for the exporter's transactions), with
/// the schema created if missing.
pub fn open(path: &Path) -> Result<rusqlite::Connection, StoreError> {
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
    conn.execute_batch(schema::SCHEMA)?;
    Ok(conn)
}

/// Read connections for the REST API, reused across requests.
pub struct Reader {
    path: PathBuf,
    idle: Mutex<Vec<rusqlite::Connection>>,
}

impl Reader {
    /// Opens (and creates, if missing) the store at `path`.
    pub fn new(path: PathBuf) -> Result<Self, StoreError> {
        let first = open(&path)?;
        Ok(Self { path, idle: Mutex::new(vec![first]) })
    }

    /// Runs `f` on a connection (blocking: call it off the async threads).
    pub fn with<T>(&self, f: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let conn = self.idle.lock().expect("reader pool").pop();
        let conn = match conn {
            Some(c) => c,
            None => open(&self.path)?,
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
