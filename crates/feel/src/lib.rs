//! FEEL (Friendly Enough Expression Language) in Camunda's dialect, following the semantics
//! of feel-scala 1.17 as Zeebe 8.5 uses it.
//!
//! Parse an expression once with [`Expression::parse`], then evaluate it many times with
//! [`Expression::evaluate`] against variables that are looked up lazily by name
//! ([`VariableLookup`]). Evaluation never fails: like feel-scala, errors (missing variables,
//! type mismatches, ...) evaluate to `null`.
//!
//! See `README.md` beside this crate for the supported language.

mod ast;
mod builtins;
mod eval;
mod java_regex;
mod lexer;
mod names;
mod number;
mod parser;
mod ranges;
mod temporal;
mod value;
mod zeebe_json;

use std::fmt;

pub use eval::MAX_EVALUATION_WORK;
pub use number::{Number, RoundMode};
pub use parser::MAX_NESTING_DEPTH;
pub use temporal::{Date, DateTime, DayTimeDuration, Time, YearMonthDuration};
pub use value::{Context, FunctionValue, Range, Value};

/// Looks variables up by name; `None` when there is no such variable.
pub trait VariableLookup {
    fn lookup(&self, name: &str) -> Option<Value>;

    /// The value that `steps` reach inside variable `name` (as in `doc.orders[3].total`), when
    /// every step lands: a key present in a context, an index within a list. `None` otherwise;
    /// the evaluator then looks the whole variable up and applies FEEL's general rules. Lets a
    /// lookup read a small part of a large variable without copying all of it.
    fn lookup_steps(&self, name: &str, steps: &[Step<'_>]) -> Option<Value> {
        let _ = (name, steps);
        None
    }
}

/// One step of a selector into a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// `.key` into a context.
    Key(&'a str),
    /// `[i]` into a list: 1-based, negative counts from the end.
    Index(i64),
}

/// The zero-based position `[i]` selects in a list of `len` items.
pub(crate) fn list_position(i: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let idx = if i > 0 { i - 1 } else { len + i };
    (i != 0 && idx >= 0 && idx < len).then_some(idx as usize)
}

/// Follows `steps` through a value by reference (see [`VariableLookup::lookup_steps`]).
pub fn select<'v>(mut value: &'v Value, steps: &[Step<'_>]) -> Option<&'v Value> {
    for step in steps {
        value = match (step, value) {
            (Step::Key(k), Value::Context(c)) => c.get(k)?,
            (Step::Index(i), Value::List(items)) => &items[list_position(*i, items.len())?],
            _ => return None,
        };
    }
    Some(value)
}

/// Follows `steps` through a JSON document by reference (see [`VariableLookup::lookup_steps`]).
pub fn select_json<'v>(mut value: &'v serde_json::Value, steps: &[Step<'_>]) -> Option<&'v serde_json::Value> {
    for step in steps {
        value = match (step, value) {
            (Step::Key(k), serde_json::Value::Object(m)) => m.get(*k)?,
            (Step::Index(i), serde_json::Value::Array(items)) => &items[list_position(*i, items.len())?],
            _ => return None,
        };
    }
    Some(value)
}

impl<T: VariableLookup + ?Sized> VariableLookup for &T {
    fn lookup(&self, name: &str) -> Option<Value> {
        (**self).lookup(name)
    }
    fn lookup_steps(&self, name: &str, steps: &[Step<'_>]) -> Option<Value> {
        (**self).lookup_steps(name, steps)
    }
}

/// What an evaluation may take from its surroundings besides variables: the clock (for
/// `now()` and `today()`) and a seed for random functions. Nothing is read from the system.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvalContext {
    /// The current time in milliseconds since the Unix epoch (UTC), for `now()` and `today()`.
    /// `None` falls back to the system clock; pass it for deterministic (replayable) results.
    pub now_millis: Option<i64>,
    /// Seed for `random number()` and `uuid()`; `None`: 0.
    pub seed: Option<u64>,
}

/// A failure to parse an expression. `message` is the whole text as Zeebe reports it, e.g.
/// `failed to parse expression 'x >': Expected an expression but found end of input at 1:4`;
/// `position` is the char offset where parsing failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub message: String,
    pub position: usize,
}

impl ParseError {
    fn new(source: &str, message: &str, position: usize) -> ParseError {
        let (mut line, mut col) = (1, 1);
        for c in source.chars().take(position) {
            if c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        let quoted = quoted_source(source);
        ParseError { message: format!("failed to parse expression '{quoted}': {message} at {line}:{col}"), position }
    }
}

/// Characters of an expression a parse error quotes in full; a longer one is cut (an error
/// message travels in a gRPC header, and a client refuses a header of a megabyte).
const QUOTED_SOURCE_CHARS: usize = 200;

/// The source as a parse error quotes it: whole, or its first characters and its length.
fn quoted_source(source: &str) -> std::borrow::Cow<'_, str> {
    match source.char_indices().nth(QUOTED_SOURCE_CHARS) {
        None => source.into(),
        Some((cut, _)) => format!("{}... ({} characters)", &source[..cut], source.chars().count()).into(),
    }
}

/// A parsed, ready-to-evaluate expression (parse once at deploy, evaluate many times).
#[derive(Clone)]
pub struct Expression {
    source: String,
    expr: ast::Expr,
}

impl fmt::Debug for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expression").field("source", &self.source).finish()
    }
}

impl PartialEq for Expression {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// The result of an evaluation with the failures that were suppressed into `null`.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub value: Value,
    /// Messages like feel-scala's "suppressed failures", e.g. `No variable found with name 'x'`.
    pub warnings: Vec<String>,
    /// Set when feel-scala would fail the evaluation instead of returning `null` (e.g. a
    /// failed `assert`, comparing incomparable values with `=`); `value` is then `Null`.
    pub failure: Option<String>,
}

impl Expression {
    /// Parses a FEEL expression (without the leading '=' that Zeebe uses in BPMN attributes).
    pub fn parse(source: &str) -> Result<Expression, ParseError> {
        match parser::parse_expression(source) {
            Ok(expr) => Ok(Expression { source: source.to_string(), expr }),
            Err(e) => Err(ParseError::new(source, &e.message, e.pos)),
        }
    }

    /// The text the expression was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The variable the expression reads when it is just a variable (`x`) or a property path
    /// of one (`x.a.b`): that variable's name (`x`); else `None`.
    pub fn variable_name(&self) -> Option<&str> {
        let mut expr = &self.expr;
        loop {
            match expr {
                ast::Expr::Name(name) => return Some(name),
                ast::Expr::Path(inner, _) => expr = inner,
                _ => return None,
            }
        }
    }

    /// Evaluates against variables looked up lazily by name. Never panics.
    pub fn evaluate(&self, vars: &dyn VariableLookup) -> Value {
        self.evaluate_with(vars, &EvalContext::default())
    }

    /// Evaluates with an explicit clock and seed.
    pub fn evaluate_with(&self, vars: &dyn VariableLookup, ctx: &EvalContext) -> Value {
        self.evaluate_detailed(vars, ctx).value
    }

    /// Evaluates and also returns the failures that were turned into `null`.
    pub fn evaluate_detailed(&self, vars: &dyn VariableLookup, ctx: &EvalContext) -> Evaluation {
        let mut env = eval::Env::new(vars, ctx);
        let value = env.eval(&self.expr);
        let value = if env.failure.is_some() { Value::Null } else { value.without_ranges() };
        Evaluation { value, warnings: env.warnings, failure: env.failure }
    }
}

/// Parsed unary tests (as in DMN input entries): `< 10`, `[1..5]`, `"a", "b"`, `not(3)`, `-`,
/// or any expression using `?` for the input value.
#[derive(Clone)]
pub struct UnaryTests {
    source: String,
    tests: Vec<ast::UnaryTest>,
}

impl fmt::Debug for UnaryTests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnaryTests").field("source", &self.source).finish()
    }
}

impl UnaryTests {
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Tests the input: `Bool(true)` when a test matches, `Bool(false)` when none does, `Null`
    /// when the tests can not be applied (e.g. incomparable types).
    pub fn evaluate(&self, input: &Value, vars: &dyn VariableLookup) -> Value {
        self.evaluate_with(input, vars, &EvalContext::default())
    }

    pub fn evaluate_with(&self, input: &Value, vars: &dyn VariableLookup, ctx: &EvalContext) -> Value {
        self.evaluate_detailed(input, vars, ctx).value
    }

    /// Tests the input and also returns the suppressed failures (see [`Evaluation`]).
    pub fn evaluate_detailed(&self, input: &Value, vars: &dyn VariableLookup, ctx: &EvalContext) -> Evaluation {
        let mut env = eval::Env::new(vars, ctx);
        let value = env.unary_tests(input, &self.tests);
        let value = if env.failure.is_some() { Value::Null } else { value };
        Evaluation { value, warnings: env.warnings, failure: env.failure }
    }
}

/// Parses unary tests such as `< 10`, `[1..5]`, `"a","b"`, `not("c")` or `-`.
pub fn parse_unary_tests(source: &str) -> Result<UnaryTests, ParseError> {
    match parser::parse_unary_tests(source) {
        Ok(tests) => Ok(UnaryTests { source: source.to_string(), tests }),
        Err(e) => Err(ParseError::new(source, &e.message, e.pos)),
    }
}

/// Parses and evaluates in one step; a parse failure evaluates to `Err`.
pub fn evaluate(source: &str, vars: &dyn VariableLookup) -> Result<Value, ParseError> {
    Ok(Expression::parse(source)?.evaluate(vars))
}

#[cfg(test)]
mod tests;
