//! One connection to the store, SQLite or PostgreSQL, behind one interface: statements in
//! SQLite's form ([`crate::dialect`] turns them into the connection's dialect), parameters and
//! results as [`Value`]s, prepared statements cached per connection.

use std::fmt;
use std::path::PathBuf;

use crate::dialect::Dialect;
use crate::pg::PgConnection;
use crate::StoreError;

/// Where the store is.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file (embedded).
    Sqlite(PathBuf),
    /// A PostgreSQL database: `postgres://user[:password]@host[:port]/database[?options]`.
    Postgres(String),
}

impl Location {
    /// A URL starting `postgres://` or `postgresql://` is PostgreSQL's.
    pub fn is_postgres_url(text: &str) -> bool {
        text.starts_with("postgres://") || text.starts_with("postgresql://")
    }
}

/// The location for logs: a PostgreSQL URL without its password.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => f.write_str(&crate::pg::redact(url)),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A parameter or a result column. Booleans are integers 0 and 1 (PostgreSQL's `boolean`
/// arrives as one, and an integer parameter compared with a `boolean` is sent as one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Integer(i64),
    Text(String),
}

impl Value {
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Integer(i) => Some(*i),
            _ => None,
        }
    }
}

/// What a parameter is made from (by reference, as a statement's parameters are borrowed).
pub trait ToValue {
    fn to_value(&self) -> Value;
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}
impl ToValue for i64 {
    fn to_value(&self) -> Value {
        Value::Integer(*self)
    }
}
impl ToValue for i32 {
    fn to_value(&self) -> Value {
        Value::Integer((*self).into())
    }
}
impl ToValue for u32 {
    fn to_value(&self) -> Value {
        Value::Integer((*self).into())
    }
}
impl ToValue for u16 {
    fn to_value(&self) -> Value {
        Value::Integer((*self).into())
    }
}
impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_owned())
    }
}
impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}
impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}
impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Integer(v)
    }
}

/// Parameters of a statement: `params![a, b]` is a `&[Value]` of anything [`ToValue`], borrowed.
#[macro_export]
macro_rules! params {
    ($($v:expr),* $(,)?) => { &[$($crate::db::ToValue::to_value(&$v)),*] };
}

/// A connection to the store.
pub enum Connection {
    Sqlite(rusqlite::Connection),
    Postgres(Box<PgConnection>),
}

impl Connection {
    /// Opens the store at `location`, creating (or completing) its tables, or migrating them
    /// to this Waggle's schema version; a store of a newer version is refused
    /// ([`crate::version`]).
    pub fn open(location: &Location) -> Result<Connection, StoreError> {
        match location {
            Location::Sqlite(path) => crate::open(path),
            Location::Postgres(url) => {
                let conn = Connection::Postgres(Box::new(PgConnection::connect(url)?));
                crate::version::prepare(&conn)?;
                Ok(conn)
            }
        }
    }

    pub fn dialect(&self) -> Dialect {
        match self {
            Connection::Sqlite(_) => Dialect::Sqlite,
            Connection::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs a statement; returns the number of rows it changed.
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, StoreError> {
        match self {
            Connection::Sqlite(c) => Ok(c.prepare_cached(sql)?.execute(rusqlite::params_from_iter(params.iter()))? as u64),
            Connection::Postgres(c) => c.execute(&Dialect::Postgres.sql(sql), params),
        }
    }

    /// Runs a statement whose parameters are columns of rows (PostgreSQL's arrays; the
    /// statement in PostgreSQL's form, as [`crate::rows::unnest`] writes it).
    pub fn execute_columns(&self, sql: &str, columns: Vec<crate::pg::Column>) -> Result<u64, StoreError> {
        match self {
            Connection::Sqlite(_) => Err(StoreError::Invalid("multi-row statements over arrays are PostgreSQL's".into())),
            Connection::Postgres(c) => c.execute_columns(sql, columns),
        }
    }

    /// Runs a query; returns its rows.
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, StoreError> {
        match self {
            Connection::Sqlite(c) => Ok(sqlite_rows(&mut *c.prepare_cached(sql)?, params)?),
            Connection::Postgres(c) => c.query(&Dialect::Postgres.sql(sql), params),
        }
    }

    /// The first row of a query, if any.
    pub fn query_row(&self, sql: &str, params: &[Value]) -> Result<Option<Vec<Value>>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs `f` in a transaction: committed if it returns `Ok`, rolled back otherwise.
    pub fn transaction<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        /// Rolls the transaction back when `f` fails or panics (a supervised exporter that
        /// panicked is restarted on the same connection, which must not be left inside it).
        struct Open<'a>(&'a Connection, bool);
        impl Drop for Open<'_> {
            fn drop(&mut self) {
                if self.1 {
                    let _ = self.0.batch("ROLLBACK");
                }
            }
        }
        self.batch("BEGIN")?;
        let mut open = Open(self, true);
        let out = f(self)?;
        open.1 = false;
        self.batch("COMMIT")?;
        Ok(out)
    }

    /// Settings of the exporter's write connection. SQLite: statement journals in memory
    /// (`temp_store=MEMORY`). A statement that writes more than one b-tree (an upsert, an
    /// insert whose trigger keeps a count) journals each page it touches, so that it can be
    /// undone alone; past 64 KiB that journal went to a temporary file, two `pwrite`s per
    /// page, and under W2 those writes were ~40 % of the exporter thread's time (its CPU per
    /// record fell from ~5 to ~3 µs without them: docs/performance.md, "Data lag of the query
    /// store"). The journal lives only for one statement, so memory stays bounded.
    pub fn tune_for_writing(&self) -> Result<(), StoreError> {
        if let Connection::Sqlite(c) = self {
            c.pragma_update(None, "temp_store", "MEMORY")?;
        }
        Ok(())
    }

    /// Whether the next commits are synced to disk, asked as `synced`; returns whether they
    /// are. SQLite syncs a commit's WAL only with `synchronous=FULL` (`NORMAL`: durable against
    /// a crash of the process, not of the machine; a later synced commit makes it durable too);
    /// PostgreSQL's commits are always durable.
    pub fn sync_commits(&self, synced: bool) -> Result<bool, StoreError> {
        match self {
            Connection::Sqlite(c) => {
                c.pragma_update(None, "synchronous", if synced { "FULL" } else { "NORMAL" })?;
                Ok(synced)
            }
            Connection::Postgres(_) => Ok(true),
        }
    }

    /// Runs statements without parameters (the schema, BEGIN, COMMIT).
    pub fn batch(&self, sql: &str) -> Result<(), StoreError> {
        match self {
            Connection::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Connection::Postgres(c) => c.batch(sql),
        }
    }
}

/// Runs a prepared SQLite query with `params`; returns its rows.
pub(crate) fn sqlite_rows(stmt: &mut rusqlite::Statement<'_>, params: &[Value]) -> rusqlite::Result<Vec<Vec<Value>>> {
    let width = stmt.column_count();
    let rows = stmt.query_map(rusqlite::params_from_iter(params.iter()), |row| {
        (0..width).map(|i| row.get_ref(i).map(from_sqlite)).collect::<Result<Vec<_>, _>>()
    })?;
    rows.collect()
}

fn from_sqlite(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(r) => Value::Integer(r as i64),
        ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Integer(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}
