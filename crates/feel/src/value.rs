//! FEEL values and their conversion from and to JSON.

use std::collections::HashMap;
use std::fmt;

use std::sync::Arc;

use indexmap::IndexMap;

use crate::ast::FunctionDef;
use crate::eval::Frame;

use crate::number::Number;
use crate::temporal::{Date, DateTime, DayTimeDuration, Time, YearMonthDuration};
use crate::VariableLookup;

/// An ordered map from names to values (a FEEL context). Entries keep insertion order;
/// equality ignores the order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context(IndexMap<String, Value>);

impl Context {
    pub fn new() -> Context {
        Context(IndexMap::new())
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// Inserts or replaces an entry (a replaced entry keeps its position).
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        self.0.insert(key.into(), value);
    }

    /// Takes an entry out without keeping the order of the others (cheap).
    pub(crate) fn take(&mut self, key: &str) -> Option<Value> {
        self.0.swap_remove(key)
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.shift_remove(key)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(String, Value)> for Context {
    fn from_iter<T: IntoIterator<Item = (String, Value)>>(iter: T) -> Self {
        Context(iter.into_iter().collect())
    }
}

impl IntoIterator for Context {
    type Item = (String, Value);
    type IntoIter = indexmap::map::IntoIter<String, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Context {
    type Item = (&'a String, &'a Value);
    type IntoIter = indexmap::map::Iter<'a, String, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl VariableLookup for Context {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.get(name).cloned()
    }
    fn lookup_steps(&self, name: &str, steps: &[crate::Step<'_>]) -> Option<Value> {
        crate::select(self.get(name)?, steps).cloned()
    }
}

/// A FEEL value. Numbers are decimals (see [`Number`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    List(Vec<Value>),
    Context(Context),
    /// A calendar date: `date("2024-01-31")`, `@"2024-01-31"`.
    Date(Date),
    /// A time of day, local or with an offset / zone: `time("10:00:00+01:00")`.
    Time(Time),
    /// A date and time, local or with an offset / zone.
    DateTime(DateTime),
    /// `duration("P1Y2M")`.
    YearMonthDuration(YearMonthDuration),
    /// `duration("P1DT2H")`.
    DayTimeDuration(DayTimeDuration),
    /// An interval such as `[1..10)`.
    Range(Box<Range>),
    /// A function: built-in or defined with `function(a, b) ...`.
    Function(FunctionValue),
}

/// An interval of comparable values; a null endpoint means unbounded.
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    pub start: Value,
    pub start_closed: bool,
    pub end: Value,
    pub end_closed: bool,
}

/// A function value. Opaque: it can be invoked only by FEEL expressions.
#[derive(Clone)]
pub struct FunctionValue(pub(crate) FunctionKind);

#[derive(Clone)]
pub(crate) enum FunctionKind {
    Builtin(String),
    User { def: Arc<FunctionDef>, captured: Arc<Vec<Frame>> },
}

impl FunctionValue {
    pub(crate) fn builtin(name: &str) -> FunctionValue {
        FunctionValue(FunctionKind::Builtin(name.to_string()))
    }

    pub(crate) fn user(def: Arc<FunctionDef>, captured: Vec<Frame>) -> FunctionValue {
        FunctionValue(FunctionKind::User { def, captured: Arc::new(captured) })
    }
}

impl PartialEq for FunctionValue {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (FunctionKind::Builtin(a), FunctionKind::Builtin(b)) => a == b,
            (FunctionKind::User { def: a, .. }, FunctionKind::User { def: b, .. }) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl fmt::Debug for FunctionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            FunctionKind::Builtin(n) => write!(f, "Function({n})"),
            FunctionKind::User { def, .. } => write!(f, "Function({})", def.params.join(", ")),
        }
    }
}

impl Value {
    /// Converts a JSON document into a FEEL value (objects become contexts, keeping key order).
    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Number(Number::from(i))
                } else if let Some(u) = n.as_u64() {
                    Value::Number(Number::from(u))
                } else {
                    n.as_f64().and_then(Number::from_f64).map(Value::Number).unwrap_or(Value::Null)
                }
            }
            serde_json::Value::String(s) => Value::String(s.clone()),
            serde_json::Value::Array(items) => Value::List(items.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(map) => Value::Context(map.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect()),
        }
    }

    /// The JSON of the variable Zeebe 8.5 writes from this value as a FEEL result: whole
    /// numbers as Java's `long` (wrapping beyond 64 bits), other numbers as doubles, temporal
    /// values as their `java.time` text (`10:30`, `PT24H`, `P-4Y-4M`), functions and ranges as
    /// null. The rules are in `src/zeebe_json.rs`.
    pub fn to_json(&self) -> serde_json::Value {
        crate::zeebe_json::variable_json(self)
    }

    /// The type name as Zeebe prints it in incidents ("NULL", "BOOLEAN", "NUMBER", ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Bool(_) => "BOOLEAN",
            Value::Number(_) => "NUMBER",
            Value::String(_) => "STRING",
            Value::List(_) => "LIST",
            Value::Context(_) => "CONTEXT",
            Value::Date(_) => "DATE",
            Value::Time(_) => "TIME",
            Value::DateTime(_) => "DATE_TIME",
            Value::YearMonthDuration(_) => "PERIOD",
            Value::DayTimeDuration(_) => "DURATION",
            Value::Range(_) => "RANGE",
            Value::Function(_) => "FUNCTION",
        }
    }

    /// The FEEL type name as `instance of` and error messages use it ("number", "string", ...).
    pub fn feel_type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Context(_) => "context",
            Value::Date(_) => "date",
            Value::Time(_) => "time",
            Value::DateTime(_) => "date and time",
            Value::YearMonthDuration(_) => "years and months duration",
            Value::DayTimeDuration(_) => "days and time duration",
            Value::Range(_) => "range",
            Value::Function(_) => "function",
        }
    }

    /// The value as feel-scala hands a result out: ranges (also inside lists and contexts)
    /// become null; a value without ranges is returned as it is.
    #[inline]
    pub(crate) fn without_ranges(self) -> Value {
        if !matches!(self, Value::Range(_) | Value::List(_) | Value::Context(_)) {
            return self;
        }
        fn has_range(v: &Value) -> bool {
            match v {
                Value::Range(_) => true,
                Value::List(items) => items.iter().any(has_range),
                Value::Context(c) => c.iter().any(|(_, v)| has_range(v)),
                _ => false,
            }
        }
        if !has_range(&self) {
            return self;
        }
        match self {
            Value::Range(_) => Value::Null,
            Value::List(items) => Value::List(items.into_iter().map(Value::without_ranges).collect()),
            Value::Context(c) => Value::Context(c.into_iter().map(|(k, v)| (k, v.without_ranges())).collect()),
            other => other,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    pub fn as_context(&self) -> Option<&Context> {
        match self {
            Value::Context(c) => Some(c),
            _ => None,
        }
    }

    /// A number value from an integer.
    pub fn number(n: impl Into<Number>) -> Value {
        Value::Number(n.into())
    }

    /// A string value.
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }
}

fn write_feel_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

/// The FEEL notation of a value, as feel-scala's `string()` prints nested values:
/// strings are bare at the top level, lists are `[1, 2]`, contexts `{a:1, b:"x"}`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(n) => write!(f, "{n}"),
            Value::String(s) => f.write_str(s),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write_nested(f, item)?;
                }
                f.write_str("]")
            }
            Value::Context(ctx) => {
                f.write_str("{")?;
                for (i, (k, v)) in ctx.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}:")?;
                    write_nested(f, v)?;
                }
                f.write_str("}")
            }
            Value::Date(d) => write!(f, "{d}"),
            Value::Time(t) => write!(f, "{t}"),
            Value::DateTime(d) => write!(f, "{d}"),
            Value::YearMonthDuration(d) => write!(f, "{d}"),
            Value::DayTimeDuration(d) => write!(f, "{d}"),
            Value::Range(r) => {
                f.write_str(if r.start_closed { "[" } else { "(" })?;
                write_nested(f, &r.start)?;
                f.write_str("..")?;
                write_nested(f, &r.end)?;
                f.write_str(if r.end_closed { "]" } else { ")" })
            }
            Value::Function(_) => f.write_str("function"),
        }
    }
}

fn write_nested(f: &mut fmt::Formatter<'_>, v: &Value) -> fmt::Result {
    match v {
        Value::String(s) => write_feel_string(f, s),
        other => write!(f, "{other}"),
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<Number> for Value {
    fn from(n: Number) -> Self {
        Value::Number(n)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Number(n.into())
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::List(v)
    }
}

impl From<Context> for Value {
    fn from(c: Context) -> Self {
        Value::Context(c)
    }
}

impl VariableLookup for serde_json::Map<String, serde_json::Value> {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.get(name).map(Value::from_json)
    }
    fn lookup_steps(&self, name: &str, steps: &[crate::Step<'_>]) -> Option<Value> {
        crate::select_json(self.get(name)?, steps).map(Value::from_json)
    }
}

impl VariableLookup for HashMap<String, Value> {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.get(name).cloned()
    }
    fn lookup_steps(&self, name: &str, steps: &[crate::Step<'_>]) -> Option<Value> {
        crate::select(self.get(name)?, steps).cloned()
    }
}

impl VariableLookup for serde_json::Value {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.as_object().and_then(|m| m.get(name)).map(Value::from_json)
    }
    fn lookup_steps(&self, name: &str, steps: &[crate::Step<'_>]) -> Option<Value> {
        crate::select_json(self.as_object()?.get(name)?, steps).map(Value::from_json)
    }
}

/// No variables at all.
impl VariableLookup for () {
    fn lookup(&self, _name: &str) -> Option<Value> {
        None
    }
}
