//! A connection to a PostgreSQL store (`--query-store postgres://…`), with rust-postgres's
//! `tokio-postgres` client driven by a small runtime of the connection's own.
//!
//! - The schema ([`crate::schema::ddl`] in PostgreSQL's form) is created, completed or
//!   migrated ([`crate::version`]) after every connect by [`crate::Connection::open`], in a
//!   transaction holding an advisory lock, so nodes starting together do not race on it.
//! - Inside a transaction, statements are queued and sent at `COMMIT` pipelined (all at once,
//!   the server runs them in order): a batch of thousands of upserts costs one round trip, not
//!   one each. Their row counts are not reported (0).
//! - Prepared statements are cached per connection. A connection the server closed is opened
//!   again: at once for a statement outside a transaction (run again on the new connection),
//!   on the next use for one inside (the transaction fails; its writer tries it again).
//! - The calls block on the connection's runtime, which the node's async runtime forbids on its
//!   threads: the connection is made and dropped on a thread of its own, its statements run on
//!   the exporter threads and the REST API's blocking pool.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::error::Error;

use bytes::BytesMut;
use tokio::runtime::Runtime;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};
use tokio_postgres::{Client, NoTls, Statement};

use crate::db::Value;
use crate::{SqlError, StoreError};

/// Statements kept prepared per connection at most (searches vary by filter).
const STATEMENT_CACHE: usize = 256;

/// A PostgreSQL connection (not shared between threads: each user takes one).
pub struct PgConnection {
    config: tokio_postgres::Config,
    client: RefCell<Option<(Runtime, Client)>>,
    statements: RefCell<HashMap<String, Statement>>,
    /// Between BEGIN and COMMIT or ROLLBACK: statements are queued, and not run again on a new
    /// connection.
    in_transaction: Cell<bool>,
    queued: RefCell<Vec<(String, Params)>>,
}

/// A queued statement's parameters: one row's values, or columns of many rows.
enum Params {
    Row(Vec<Value>),
    Columns(Vec<Column>),
}

/// A column of a multi-row statement's rows, sent as one array parameter (`bigint[]`,
/// `text[]`; [`crate::rows`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    Int(Vec<Option<i64>>),
    Text(Vec<Option<String>>),
}

impl ToSql for Column {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self {
            Column::Int(v) => v.to_sql(ty, out),
            Column::Text(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <Vec<Option<i64>> as ToSql>::accepts(ty) || <Vec<Option<String>> as ToSql>::accepts(ty)
    }

    tokio_postgres::types::to_sql_checked!();
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            format!("{scheme}://{}:***@{host}{tail}", user.split(':').next().unwrap_or_default())
        }
        _ => url.to_owned(),
    }
}

/// Connects (on a thread of its own: the caller may be on an async thread).
fn connect(config: &tokio_postgres::Config) -> Result<(Runtime, Client), tokio_postgres::Error> {
    let config = config.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime for PostgreSQL");
        let client = runtime.block_on(async {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(connection);
            Ok::<_, tokio_postgres::Error>(client)
        })?;
        Ok((runtime, client))
    })
    .join()
    .expect("the PostgreSQL connect thread panicked")
}

async fn prepared(client: &Client, cache: &mut HashMap<String, Statement>, sql: &str) -> Result<Statement, tokio_postgres::Error> {
    if let Some(s) = cache.get(sql) {
        return Ok(s.clone());
    }
    let statement = client.prepare(sql).await?;
    if cache.len() >= STATEMENT_CACHE {
        cache.clear();
    }
    cache.insert(sql.to_owned(), statement.clone());
    Ok(statement)
}

impl PgConnection {
    /// Connects to `url` (the schema is [`crate::Connection::open`]'s).
    pub fn connect(url: &str) -> Result<PgConnection, StoreError> {
        let config: tokio_postgres::Config =
            url.parse().map_err(|e| StoreError::Invalid(format!("invalid PostgreSQL URL {}: {e}", redact(url))))?;
        let client = connect(&config)?;
        Ok(PgConnection {
            config,
            client: RefCell::new(Some(client)),
            statements: RefCell::new(HashMap::new()),
            in_transaction: Cell::new(false),
            queued: RefCell::new(Vec::new()),
        })
    }

    /// Runs `f` on the client, opening it again first if the server closed it; outside a
    /// transaction, once more on a new connection if it failed because the server closed it.
    fn with<T>(
        &self,
        mut f: impl FnMut(&Runtime, &Client, &mut HashMap<String, Statement>) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut client = self.client.borrow_mut();
        let mut statements = self.statements.borrow_mut();
        let mut retried = false;
        loop {
            if client.as_ref().is_none_or(|(_, c)| c.is_closed()) {
                if self.in_transaction.get() {
                    return Err(StoreError::Sql(SqlError::ClosedInTransaction));
                }
                statements.clear();
                *client = None;
                *client = Some(connect(&self.config)?);
            }
            let (runtime, c) = client.as_ref().expect("connected");
            match f(runtime, c, &mut statements) {
                Err(e) if !retried && !self.in_transaction.get() && c.is_closed() => {
                    tracing::debug!(error = %e, "query store: PostgreSQL closed the connection; connecting again");
                    retried = true;
                }
                out => return Ok(out?),
            }
        }
    }

    /// Runs a statement in PostgreSQL's form (inside a transaction: queues it for `COMMIT`).
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, StoreError> {
        if self.in_transaction.get() {
            self.queued.borrow_mut().push((sql.to_owned(), Params::Row(params.to_vec())));
            return Ok(0);
        }
        self.with(|runtime, client, cache| {
            runtime.block_on(async {
                let statement = prepared(client, cache, sql).await?;
                client.execute(&statement, &refs(params)).await
            })
        })
    }

    /// Runs a statement in PostgreSQL's form whose parameters are arrays, one per column
    /// (inside a transaction: queues it for `COMMIT`).
    pub fn execute_columns(&self, sql: &str, columns: Vec<Column>) -> Result<u64, StoreError> {
        if self.in_transaction.get() {
            self.queued.borrow_mut().push((sql.to_owned(), Params::Columns(columns)));
            return Ok(0);
        }
        self.with(|runtime, client, cache| {
            runtime.block_on(async {
                let statement = prepared(client, cache, sql).await?;
                let params: Vec<&(dyn ToSql + Sync)> = columns.iter().map(|c| c as &(dyn ToSql + Sync)).collect();
                client.execute(&statement, &params).await
            })
        })
    }

    /// Runs a query in PostgreSQL's form.
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, StoreError> {
        self.with(|runtime, client, cache| {
            runtime.block_on(async {
                let statement = prepared(client, cache, sql).await?;
                let rows = client.query(&statement, &refs(params)).await?;
                rows.iter().map(|row| (0..row.len()).map(|i| row.try_get::<_, Value>(i)).collect()).collect()
            })
        })
    }

    /// Runs statements without parameters (`BEGIN`, `COMMIT` and `ROLLBACK` alone mark the
    /// transaction; `COMMIT` first sends the queued statements, pipelined).
    pub fn batch(&self, sql: &str) -> Result<(), StoreError> {
        match sql {
            "COMMIT" => {
                let queued = std::mem::take(&mut *self.queued.borrow_mut());
                let out = self.with(|runtime, client, cache| {
                    runtime.block_on(async {
                        let mut statements = Vec::with_capacity(queued.len());
                        for (sql, _) in &queued {
                            statements.push(prepared(client, cache, sql).await?);
                        }
                        let params: Vec<Vec<&(dyn ToSql + Sync)>> = queued
                            .iter()
                            .map(|(_, p)| match p {
                                Params::Row(values) => refs(values),
                                Params::Columns(columns) => columns.iter().map(|c| c as &(dyn ToSql + Sync)).collect(),
                            })
                            .collect();
                        let runs = statements.iter().zip(&params).map(|(s, p)| client.execute(s, p));
                        futures_util::future::try_join_all(runs).await?;
                        client.batch_execute("COMMIT").await
                    })
                });
                self.in_transaction.set(false);
                out
            }
            "ROLLBACK" => {
                self.queued.borrow_mut().clear();
                let out = self.with(|runtime, client, _| runtime.block_on(client.batch_execute(sql)));
                self.in_transaction.set(false);
                out
            }
            "BEGIN" => {
                self.with(|runtime, client, _| runtime.block_on(client.batch_execute(sql)))?;
                self.in_transaction.set(true);
                Ok(())
            }
            _ => self.with(|runtime, client, _| runtime.block_on(client.batch_execute(sql))),
        }
    }
}

impl Drop for PgConnection {
    fn drop(&mut self) {
        // dropping the runtime must not happen on an async thread
        if let Some(client) = self.client.get_mut().take() {
            let _ = std::thread::Builder::new().name("pg-close".into()).spawn(move || drop(client));
        }
    }
}

fn refs(params: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

type BoxError = Box<dyn Error + Sync + Send>;

/// A parameter takes the type PostgreSQL infers for its place: an integer is sent as any
/// integer type, a `boolean` (non-zero) or text; text as any text type.
impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                _ => i.to_string().to_sql(ty, out),
            },
            Value::Text(s) => s.as_str().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// A result column: integers, booleans (as 0 and 1) and text.
impl<'a> FromSql<'a> for Value {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(match *ty {
            Type::INT8 => Value::Integer(i64::from_sql(ty, raw)?),
            Type::INT4 => Value::Integer(i32::from_sql(ty, raw)?.into()),
            Type::INT2 => Value::Integer(i16::from_sql(ty, raw)?.into()),
            Type::BOOL => Value::Integer(bool::from_sql(ty, raw)?.into()),
            _ => Value::Text(<&str>::from_sql(ty, raw)?.to_owned()),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
        Ok(Value::Null)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::INT8 | Type::INT4 | Type::INT2 | Type::BOOL) || <&str as FromSql>::accepts(ty)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted() {
        assert_eq!(super::redact("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
