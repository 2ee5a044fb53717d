//! The exporter's writes of one round, as multi-row statements on PostgreSQL (issue 28: the
//! PostgreSQL store keeps up under W2).
//!
//! The exporter writes row by row through a [`Writer`]. On SQLite each write runs at once (a
//! prepared statement costs about a microsecond there). On PostgreSQL a statement costs the
//! server far more than a row, so the frequent statements ([`Batched`]: elements, instances,
//! variables, jobs) are gathered per table into chunks, each chunk one statement over arrays
//! (`INSERT … SELECT … FROM UNNEST($1::bigint[], …)`, `UPDATE … FROM UNNEST(…)`), a handful
//! per round instead of one per row; the other statements follow in their order.
//!
//! Why the result is the one the writes in their order give: the batched statements each touch
//! one row of one table, found by the key in their first parameter, and no statement reads
//! another table. Writes to different rows commute, so only each row's own writes must keep
//! their order: a row's write joins the latest chunk of its statement that comes after the
//! chunk of the row's previous write, or starts a new chunk (so no chunk touches a row twice,
//! which `ON CONFLICT DO UPDATE` forbids). The other statements run after every chunk: of those,
//! only the incident's mark on its element writes a batched table, and it needs the element's
//! row written first (other columns than the batched statements write).

use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::ops::Deref;

use crate::counts::Counts;
use crate::db::{Connection, Value};
use crate::pg::Column;
use crate::StoreError;

/// A statement the writer may batch: its single-row SQL (SQLite's form, `?1` the row's key),
/// the table it writes and its parameters' PostgreSQL types (`bigint` or `text`).
#[derive(Debug)]
pub struct Batched {
    pub sql: &'static str,
    pub table: &'static str,
    pub types: &'static [&'static str],
}

/// The exporter's connection during a round: [`Writer::execute`] writes or gathers a row;
/// anything else goes to the connection itself.
pub struct Writer<'a> {
    conn: &'a Connection,
    batched: &'static [Batched],
    /// PostgreSQL only: the gathered rows.
    round: Option<RefCell<Round>>,
    /// SQLite only: the round's count changes ([`crate::counts`]), written by
    /// [`Writer::finish`] (PostgreSQL's triggers keep its counts).
    counts: Option<RefCell<Counts>>,
    /// SQLite only: the statements the round ran, each taken from the connection's cache once
    /// per round and kept until the writer is dropped (a cache lookup hashes and compares the
    /// whole SQL text, twice per run: a tenth of the exporter's instructions when done per row).
    statements: RefCell<Vec<(Box<str>, rusqlite::CachedStatement<'a>)>>,
}

#[derive(Default)]
struct Round {
    tables: Vec<(&'static str, Table)>,
    /// Statements not batched, in their order: run after the chunks.
    others: Vec<(String, Vec<Value>)>,
}

#[derive(Default)]
struct Table {
    /// (statement index in `batched`, its rows), in the order they run.
    chunks: Vec<(usize, Vec<Vec<Value>>)>,
    /// Per row key, the chunk of its last write.
    last: HashMap<i64, usize>,
}

impl<'a> Writer<'a> {
    /// A writer over `conn`, batching `batched` if it is PostgreSQL.
    /// `WAGGLE_STORE_ROW_AT_A_TIME=1` (for measuring what the batching saves) sends every
    /// write as its own statement, as before.
    pub fn new(conn: &'a Connection, batched: &'static [Batched]) -> Self {
        static ROW_AT_A_TIME: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let single = *ROW_AT_A_TIME.get_or_init(|| std::env::var_os("WAGGLE_STORE_ROW_AT_A_TIME").is_some_and(|v| v == "1"));
        let round = (matches!(conn, Connection::Postgres(_)) && !single).then(RefCell::default);
        let counts = matches!(conn, Connection::Sqlite(_)).then(RefCell::default);
        Writer { conn, batched, round, counts, statements: RefCell::default() }
    }

    /// Runs `f` on the round's prepared SQLite statement for `sql` (`None` on PostgreSQL).
    fn with_statement<T>(
        &self,
        sql: &str,
        f: impl FnOnce(&mut rusqlite::Statement<'a>) -> rusqlite::Result<T>,
    ) -> Option<Result<T, StoreError>> {
        let Connection::Sqlite(c) = self.conn else {
            return None;
        };
        let mut statements = self.statements.borrow_mut();
        let at = match statements.iter().position(|(text, _)| **text == *sql) {
            Some(at) => at,
            None => match c.prepare_cached(sql) {
                Ok(statement) => {
                    statements.push((sql.into(), statement));
                    statements.len() - 1
                }
                Err(e) => return Some(Err(e.into())),
            },
        };
        Some(f(&mut statements[at].1).map_err(StoreError::from))
    }

    /// Runs a query (on SQLite through the round's statements); returns its rows.
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, StoreError> {
        let rows = self.with_statement(sql, |statement| crate::db::sqlite_rows(statement, params));
        rows.unwrap_or_else(|| self.conn.query(sql, params))
    }

    /// The round's count changes, on SQLite (whose statements then say what they changed:
    /// [`crate::counts`]); `None` on PostgreSQL, where triggers count.
    pub fn counts(&self) -> Option<RefMut<'_, Counts>> {
        self.counts.as_ref().map(RefCell::borrow_mut)
    }

    /// Writes a row (SQLite), or gathers it for [`Writer::finish`] (PostgreSQL). Returns the
    /// rows changed (0 when gathered).
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, StoreError> {
        let Some(round) = &self.round else {
            let run = |statement: &mut rusqlite::Statement<'a>| statement.execute(rusqlite::params_from_iter(params.iter()));
            return self.with_statement(sql, run).map_or_else(|| self.conn.execute(sql, params), |n| n.map(|n| n as u64));
        };
        let mut round = round.borrow_mut();
        let batched = self.batched.iter().position(|b| b.sql == sql);
        let key = params.first().and_then(Value::as_i64);
        match (batched, key) {
            (Some(statement), Some(key)) => {
                let name = self.batched[statement].table;
                let at = match round.tables.iter().position(|(t, _)| *t == name) {
                    Some(at) => at,
                    None => {
                        round.tables.push((name, Table::default()));
                        round.tables.len() - 1
                    }
                };
                let table = &mut round.tables[at].1;
                let after = table.last.get(&key).copied();
                let chunk =
                    table.chunks.iter().rposition(|(s, _)| *s == statement).filter(|&c| after.is_none_or(|a| c > a)).unwrap_or_else(|| {
                        table.chunks.push((statement, Vec::new()));
                        table.chunks.len() - 1
                    });
                table.chunks[chunk].1.push(params.to_vec());
                table.last.insert(key, chunk);
            }
            _ => round.others.push((sql.to_owned(), params.to_vec())),
        }
        Ok(0)
    }

    /// Sends what was gathered (on PostgreSQL, into the transaction's pipeline): every chunk as
    /// one statement over arrays, then the other statements in their order; on SQLite, writes
    /// the round's count changes.
    pub fn finish(self) -> Result<(), StoreError> {
        if let Some(counts) = &self.counts {
            counts.borrow_mut().write(self.conn)?;
        }
        let Some(round) = self.round else {
            return Ok(());
        };
        let round = round.into_inner();
        for (_, table) in round.tables {
            for (statement, rows) in table.chunks {
                let b = &self.batched[statement];
                if let [row] = rows.as_slice() {
                    self.conn.execute(b.sql, row)?;
                    continue;
                }
                let columns = b
                    .types
                    .iter()
                    .enumerate()
                    .map(|(i, ty)| {
                        let cells = rows.iter().map(|r| r.get(i).cloned().unwrap_or(Value::Null));
                        if *ty == "text" {
                            Column::Text(
                                cells
                                    .map(|v| match v {
                                        Value::Text(t) => Some(t),
                                        Value::Integer(n) => Some(n.to_string()),
                                        Value::Null => None,
                                    })
                                    .collect(),
                            )
                        } else {
                            Column::Int(cells.map(|v| v.as_i64()).collect())
                        }
                    })
                    .collect();
                self.conn.execute_columns(&unnest(b), columns)?;
            }
        }
        for (sql, params) in round.others {
            self.conn.execute(&sql, &params)?;
        }
        Ok(())
    }
}

/// Code written for a [`Connection`] takes a `&Writer` as one: its statements run (or, in the
/// transaction, are queued) at once, before the gathered chunks.
impl Deref for Writer<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

/// A single-row statement as its multi-row form over arrays, in PostgreSQL's dialect:
/// `?N` becomes `u.cN`, column N of `UNNEST($1::T1[], …) AS u(c1, …)`; an INSERT's
/// `VALUES (…)` becomes `SELECT … FROM` those, an UPDATE takes them `FROM` before `WHERE`.
pub fn unnest(b: &Batched) -> String {
    let arrays = b.types.iter().enumerate().map(|(i, t)| format!("${}::{t}[]", i + 1)).collect::<Vec<_>>().join(", ");
    let names = (1..=b.types.len()).map(|i| format!("c{i}")).collect::<Vec<_>>().join(", ");
    let from = format!("UNNEST({arrays}) AS u({names})");
    let mut sql = String::with_capacity(b.sql.len() + from.len() + 64);
    let mut chars = b.sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            sql.push_str("u.c");
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                sql.push(d);
            }
        } else {
            sql.push(c);
        }
    }
    if let Some(at) = sql.find("VALUES (") {
        let open = at + "VALUES ".len();
        let close = open + sql[open..].find(')').expect("a VALUES list");
        let list = sql[open + 1..close].to_owned();
        sql.replace_range(at..=close, &format!("SELECT {list} FROM {from}"));
    } else {
        let at = sql.find(" WHERE ").expect("an UPDATE's WHERE");
        sql.insert_str(at, &format!(" FROM {from}"));
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    static STATEMENTS: [Batched; 2] = [
        Batched {
            sql: "INSERT INTO job (job_key, kind, worker) VALUES (?1, 'BPMN_ELEMENT', ?2) ON CONFLICT (job_key) DO UPDATE SET worker = excluded.worker",
            table: "job",
            types: &["bigint", "text"],
        },
        Batched { sql: "UPDATE job SET worker = ?2 WHERE job_key = ?1", table: "job", types: &["bigint", "text"] },
    ];

    #[test]
    fn single_row_statements_become_unnest_statements() {
        assert_eq!(
            unnest(&STATEMENTS[0]),
            "INSERT INTO job (job_key, kind, worker) SELECT u.c1, 'BPMN_ELEMENT', u.c2 FROM UNNEST($1::bigint[], $2::text[]) AS u(c1, c2) \
             ON CONFLICT (job_key) DO UPDATE SET worker = excluded.worker"
        );
        assert_eq!(
            unnest(&STATEMENTS[1]),
            "UPDATE job SET worker = u.c2 FROM UNNEST($1::bigint[], $2::text[]) AS u(c1, c2) WHERE job_key = u.c1"
        );
    }

    #[test]
    fn a_rows_writes_keep_their_order_in_chunks() {
        let conn = Connection::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        let mut w = Writer::new(&conn, &STATEMENTS);
        w.round = Some(RefCell::default());
        let text = |s: &str| Value::Text(s.into());
        // jobs 1 and 2 created, 1 updated, 3 created, 1 upserted again, 2 updated
        for (s, key, worker) in [(0, 1, "a"), (0, 2, "b"), (1, 1, "c"), (0, 3, "d"), (0, 1, "e"), (1, 2, "f")] {
            w.execute(STATEMENTS[s].sql, &[Value::Integer(key), text(worker)]).unwrap();
        }
        let round = w.round.take().unwrap().into_inner();
        let chunks: Vec<(usize, Vec<i64>)> =
            round.tables[0].1.chunks.iter().map(|(s, rows)| (*s, rows.iter().map(|r| r[0].as_i64().unwrap()).collect())).collect();
        assert_eq!(chunks, vec![(0, vec![1, 2, 3]), (1, vec![1, 2]), (0, vec![1])]);
    }
}
