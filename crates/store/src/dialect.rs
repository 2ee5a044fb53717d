//! The SQL dialects the store speaks: SQLite (embedded) and PostgreSQL (production).
//!
//! Every statement is written once, in SQLite's form (`?` or `?N` placeholders, the DDL of
//! [`crate::schema::SCHEMA`]), and turned into the other dialect here, so a table or query added
//! later reaches both. Where the dialects disagree on what a query returns, this module makes
//! them agree: text sorts bytewise (PostgreSQL's `COLLATE "C"`, SQLite's `BINARY`), `NULL`s sort
//! first ascending and last descending in both, and `$like` is case-sensitive in both.

use std::borrow::Cow;

/// A SQL dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `sql` (SQLite's placeholders: `?` numbered in order of appearance, or `?N`) in this
    /// dialect: PostgreSQL's `$N`. Text in single quotes is left alone.
    pub fn sql(self, sql: &str) -> Cow<'_, str> {
        if self == Dialect::Sqlite || !sql.contains('?') {
            return Cow::Borrowed(sql);
        }
        let mut out = String::with_capacity(sql.len() + 8);
        let (mut next, mut quoted) = (0u32, false);
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    out.push(c);
                }
                '?' if !quoted => {
                    out.push('$');
                    if chars.peek().is_some_and(char::is_ascii_digit) {
                        while let Some(d) = chars.next_if(char::is_ascii_digit) {
                            out.push(d);
                        }
                    } else {
                        next += 1;
                        out.push_str(&next.to_string());
                    }
                }
                c => out.push(c),
            }
        }
        Cow::Owned(out)
    }

    /// The schema's DDL in this dialect: SQLite's `INTEGER` (64-bit, and a rowid alias as a
    /// primary key) is PostgreSQL's `BIGINT`.
    pub fn schema(self, ddl: &str) -> String {
        match self {
            Dialect::Sqlite => ddl.to_owned(),
            Dialect::Postgres => replace_word(ddl, "INTEGER", "BIGINT"),
        }
    }

    /// An `ORDER BY` term: `expr` ascending or descending, text compared bytewise, `NULL`s
    /// first ascending and last descending (SQLite's order, asked of both).
    pub fn order_term(self, expr: &str, text: bool, descending: bool) -> String {
        let collate = if text && self == Dialect::Postgres { " COLLATE \"C\"" } else { "" };
        let dir = if descending { "DESC NULLS LAST" } else { "ASC NULLS FIRST" };
        format!("{expr}{collate} {dir}")
    }
}

/// `text` with each whole word `word` replaced by `by`.
fn replace_word(text: &str, word: &str, by: &str) -> String {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + word.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_word) || after.is_some_and(is_word) {
            out.push_str(word);
        } else {
            out.push_str(by);
        }
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::Dialect::*;

    #[test]
    fn placeholders_per_dialect() {
        assert_eq!(Sqlite.sql("a = ? AND b = ?"), "a = ? AND b = ?");
        assert_eq!(Postgres.sql("a = ? AND b IN (?, ?)"), "a = $1 AND b IN ($2, $3)");
        assert_eq!(Postgres.sql("SET s = ?2 WHERE k = ?1 AND t = '?'"), "SET s = $2 WHERE k = $1 AND t = '?'");
        assert_eq!(Postgres.sql("x LIKE ? ESCAPE '\\'"), "x LIKE $1 ESCAPE '\\'");
    }

    #[test]
    fn schema_types_per_dialect() {
        let ddl = "k INTEGER PRIMARY KEY, n INTEGER NOT NULL, my_INTEGER TEXT";
        assert_eq!(Postgres.schema(ddl), "k BIGINT PRIMARY KEY, n BIGINT NOT NULL, my_INTEGER TEXT");
        assert_eq!(Sqlite.schema(ddl), ddl);
    }
}
