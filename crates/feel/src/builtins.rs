//! Built-in functions and the hooks for temporal values.

use crate::ast::ArithOp;
use crate::eval::{self, Env};
use crate::java_regex::JavaRegex;
use crate::number::{Number, RoundMode};
use crate::ranges;
use crate::temporal;
use crate::value::{Context, Value};

type BuiltinFn = fn(&mut Env, Vec<Value>) -> Value;

/// One signature of a built-in function. Functions with optional parameters have one entry
/// per arity; `var` marks a function taking any number of arguments as a list.
struct Builtin {
    name: &'static str,
    params: &'static [&'static str],
    var: bool,
    f: BuiltinFn,
}

macro_rules! b {
    ($name:expr, [$($p:expr),*], $f:expr) => {
        Builtin { name: $name, params: &[$($p),*], var: false, f: $f }
    };
    ($name:expr, var [$($p:expr),*], $f:expr) => {
        Builtin { name: $name, params: &[$($p),*], var: true, f: $f }
    };
}

static BUILTINS: &[Builtin] = &[
    // ---- boolean ----
    b!("not", ["negand"], |_, a| match &a[0] {
        Value::Bool(b) => Value::Bool(!b),
        _ => Value::Null,
    }),
    b!("is defined", ["value"], |_, a| Value::Bool(!a[0].is_null())),
    b!("get or else", ["value", "default"], |_, mut a| {
        if a[0].is_null() {
            a.swap_remove(1)
        } else {
            a.swap_remove(0)
        }
    }),
    b!("assert", ["value", "condition"], |env, mut a| match a[1] {
        Value::Bool(true) => a.swap_remove(0),
        Value::Bool(false) => env.fail(format!("Assertion failure on evaluate the expression '{}'", a[0])),
        _ => env.fail("Expected the condition of assert() to be a boolean".into()),
    }),
    b!("assert", ["value", "condition", "cause"], |env, mut a| match a[1] {
        Value::Bool(true) => a.swap_remove(0),
        Value::Bool(false) => env.fail(format!("Assertion failure on evaluate the expression: {}", a[2])),
        _ => env.fail("Expected the condition of assert() to be a boolean".into()),
    }),
    // ---- conversion ----
    b!("string", ["from"], |_, a| match &a[0] {
        Value::Null => Value::Null,
        v => Value::String(feel_string(v, true)),
    }),
    b!("number", ["from"], |_, a| match &a[0] {
        Value::String(s) => parse_number(s),
        _ => Value::Null,
    }),
    b!("number", ["from", "grouping separator"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(g)) if is_grouping(g) => parse_number(&s.replace(g.as_str(), "")),
        _ => Value::Null,
    }),
    b!("number", ["from", "grouping separator", "decimal separator"], |_, a| match (&a[0], &a[1], &a[2]) {
        (Value::String(s), Value::String(g), Value::String(d)) if is_grouping(g) && is_decimal_sep(d) && g != d => {
            parse_number(&s.replace(g.as_str(), "").replace(d.as_str(), "."))
        }
        (Value::String(s), Value::Null, Value::String(d)) if is_decimal_sep(d) => parse_number(&s.replace(d.as_str(), ".")),
        (Value::String(s), Value::String(g), Value::Null) if is_grouping(g) => parse_number(&s.replace(g.as_str(), "")),
        _ => Value::Null,
    }),
    b!("context", ["entries"], |_, a| {
        let Value::List(entries) = &a[0] else {
            return Value::Null;
        };
        let mut ctx = Context::new();
        for e in entries {
            let Value::Context(c) = e else {
                return Value::Null;
            };
            match (c.get("key"), c.get("value")) {
                (Some(Value::String(k)), Some(v)) => ctx.insert(k.clone(), v.clone()),
                _ => return Value::Null,
            }
        }
        Value::Context(ctx)
    }),
    b!("date", ["from"], |_, a| temporal::date_from(&a[0]).unwrap_or(Value::Null)),
    b!("date", ["year", "month", "day"], |_, a| match (&a[0], &a[1], &a[2]) {
        (Value::Number(y), Value::Number(m), Value::Number(d)) => temporal::date_ymd(y, m, d).unwrap_or(Value::Null),
        _ => Value::Null,
    }),
    b!("time", ["from"], |_, a| temporal::time_from(&a[0]).unwrap_or(Value::Null)),
    b!("time", ["hour", "minute", "second"], |_, a| match (&a[0], &a[1], &a[2]) {
        (Value::Number(h), Value::Number(m), Value::Number(s)) => temporal::time_hms(h, m, s, None).unwrap_or(Value::Null),
        _ => Value::Null,
    }),
    b!("time", ["hour", "minute", "second", "offset"], |_, a| match (&a[0], &a[1], &a[2]) {
        (Value::Number(h), Value::Number(m), Value::Number(s)) => {
            temporal::time_hms(h, m, s, Some(&a[3])).unwrap_or(Value::Null)
        }
        _ => Value::Null,
    }),
    b!("date and time", ["from"], |_, a| match &a[0] {
        Value::String(s) => temporal::parse_date_time(s).unwrap_or(Value::Null),
        Value::DateTime(d) => Value::DateTime(*d),
        _ => Value::Null,
    }),
    b!("date and time", ["date", "time"], |_, a| { temporal::date_and_time2(&a[0], &a[1]).unwrap_or(Value::Null) }),
    b!("date and time", ["date time", "timezone"], |_, a| { temporal::date_and_time2(&a[0], &a[1]).unwrap_or(Value::Null) }),
    b!("duration", ["from"], |_, a| match &a[0] {
        Value::String(s) => temporal::parse_duration(s).unwrap_or(Value::Null),
        _ => Value::Null,
    }),
    b!("years and months duration", ["from", "to"], |_, a| { temporal::years_and_months(&a[0], &a[1]).unwrap_or(Value::Null) }),
    // ---- temporal ----
    b!("now", [], |env, _| temporal::now(now_millis(env)).unwrap_or(Value::Null)),
    b!("today", [], |env, _| temporal::today(now_millis(env)).unwrap_or(Value::Null)),
    b!("day of week", ["date"], |_, a| temporal::day_of_week(&a[0]).unwrap_or(Value::Null)),
    b!("day of year", ["date"], |_, a| temporal::day_of_year(&a[0]).unwrap_or(Value::Null)),
    b!("week of year", ["date"], |_, a| temporal::week_of_year(&a[0]).unwrap_or(Value::Null)),
    b!("month of year", ["date"], |_, a| temporal::month_of_year(&a[0]).unwrap_or(Value::Null)),
    b!("last day of month", ["date"], |_, a| { temporal::last_day_of_month(&a[0]).unwrap_or(Value::Null) }),
    // Camunda's (Zeebe's) extension for timer cycles: "R/" or "R<n>/" and the interval as
    // Java prints it (`cycle(duration("PT1H"))` → "R/PT1H", `cycle(3, @"PT10M")` → "R3/PT10M")
    b!("cycle", ["repetitions"], |_, a| cycle(None, &a[0])),
    b!("cycle", ["repetitions", "interval"], |_, a| match &a[0] {
        Value::Null => cycle(None, &a[1]),
        Value::Number(n) => cycle(Some(n), &a[1]),
        _ => Value::Null,
    }),
    // ---- range ----
    b!("before", ["point1", "point2"], |env, a| ranges::apply(env, "before", &a[0], &a[1])),
    b!("before", ["point", "range"], |env, a| ranges::apply(env, "before", &a[0], &a[1])),
    b!("before", ["range", "point"], |env, a| ranges::apply(env, "before", &a[0], &a[1])),
    b!("before", ["range1", "range2"], |env, a| ranges::apply(env, "before", &a[0], &a[1])),
    b!("after", ["point1", "point2"], |env, a| ranges::apply(env, "after", &a[0], &a[1])),
    b!("after", ["point", "range"], |env, a| ranges::apply(env, "after", &a[0], &a[1])),
    b!("after", ["range", "point"], |env, a| ranges::apply(env, "after", &a[0], &a[1])),
    b!("after", ["range1", "range2"], |env, a| ranges::apply(env, "after", &a[0], &a[1])),
    b!("meets", ["range1", "range2"], |env, a| ranges::apply(env, "meets", &a[0], &a[1])),
    b!("met by", ["range1", "range2"], |env, a| ranges::apply(env, "met by", &a[0], &a[1])),
    b!("overlaps", ["range1", "range2"], |env, a| ranges::apply(env, "overlaps", &a[0], &a[1])),
    b!("overlaps before", ["range1", "range2"], |env, a| ranges::apply(env, "overlaps before", &a[0], &a[1])),
    b!("overlaps after", ["range1", "range2"], |env, a| ranges::apply(env, "overlaps after", &a[0], &a[1])),
    b!("finishes", ["point", "range"], |env, a| ranges::apply(env, "finishes", &a[0], &a[1])),
    b!("finishes", ["range1", "range2"], |env, a| ranges::apply(env, "finishes", &a[0], &a[1])),
    b!("finished by", ["range", "point"], |env, a| ranges::apply(env, "finished by", &a[0], &a[1])),
    b!("finished by", ["range1", "range2"], |env, a| ranges::apply(env, "finished by", &a[0], &a[1])),
    b!("includes", ["range", "point"], |env, a| ranges::apply(env, "includes", &a[0], &a[1])),
    b!("includes", ["range1", "range2"], |env, a| ranges::apply(env, "includes", &a[0], &a[1])),
    b!("during", ["point", "range"], |env, a| ranges::apply(env, "during", &a[0], &a[1])),
    b!("during", ["range1", "range2"], |env, a| ranges::apply(env, "during", &a[0], &a[1])),
    b!("starts", ["point", "range"], |env, a| ranges::apply(env, "starts", &a[0], &a[1])),
    b!("starts", ["range1", "range2"], |env, a| ranges::apply(env, "starts", &a[0], &a[1])),
    b!("started by", ["range", "point"], |env, a| ranges::apply(env, "started by", &a[0], &a[1])),
    b!("started by", ["range1", "range2"], |env, a| ranges::apply(env, "started by", &a[0], &a[1])),
    b!("coincides", ["point1", "point2"], |env, a| ranges::apply(env, "coincides", &a[0], &a[1])),
    b!("coincides", ["range1", "range2"], |env, a| ranges::apply(env, "coincides", &a[0], &a[1])),
    // ---- string ----
    b!("substring", ["string", "start position"], |env, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::Number(start)) => substring(env, s, start, None),
        _ => Value::Null,
    }),
    b!("substring", ["string", "start position", "length"], |env, a| match (&a[0], &a[1], &a[2]) {
        (Value::String(s), Value::Number(start), Value::Number(len)) => substring(env, s, start, Some(len)),
        _ => Value::Null,
    }),
    b!("string length", ["string"], |_, a| match &a[0] {
        Value::String(s) => Value::number(s.encode_utf16().count()),
        _ => Value::Null,
    }),
    b!("upper case", ["string"], |_, a| match &a[0] {
        Value::String(s) => Value::String(s.to_uppercase()),
        _ => Value::Null,
    }),
    b!("lower case", ["string"], |_, a| match &a[0] {
        Value::String(s) => Value::String(s.to_lowercase()),
        _ => Value::Null,
    }),
    b!("substring before", ["string", "match"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(m)) => match s.find(m.as_str()) {
            Some(i) if i > 0 => Value::String(s[..i].to_string()),
            _ => Value::string(""),
        },
        _ => Value::Null,
    }),
    b!("substring after", ["string", "match"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(m)) => match s.find(m.as_str()) {
            Some(i) => Value::String(s[i + m.len()..].to_string()),
            None => Value::string(""),
        },
        _ => Value::Null,
    }),
    b!("contains", ["string", "match"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(m)) => Value::Bool(s.contains(m.as_str())),
        _ => Value::Null,
    }),
    b!("starts with", ["string", "match"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(m)) => Value::Bool(s.starts_with(m.as_str())),
        _ => Value::Null,
    }),
    b!("ends with", ["string", "match"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(m)) => Value::Bool(s.ends_with(m.as_str())),
        _ => Value::Null,
    }),
    b!("matches", ["input", "pattern"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(p)) => regex_matches(s, p, ""),
        _ => Value::Null,
    }),
    b!("matches", ["input", "pattern", "flags"], |_, a| match (&a[0], &a[1], &a[2]) {
        (Value::String(s), Value::String(p), Value::String(f)) => regex_matches(s, p, f),
        _ => Value::Null,
    }),
    b!("replace", ["input", "pattern", "replacement"], |_, a| match (&a[0], &a[1], &a[2]) {
        (Value::String(s), Value::String(p), Value::String(r)) => replace(s, p, r, ""),
        _ => Value::Null,
    }),
    b!("replace", ["input", "pattern", "replacement", "flags"], |_, a| match (&a[0], &a[1], &a[2], &a[3]) {
        (Value::String(s), Value::String(p), Value::String(r), Value::String(f)) => replace(s, p, r, f),
        _ => Value::Null,
    }),
    b!("split", ["string", "delimiter"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(d)) => strings(JavaRegex::cached(d, "").and_then(|r| r.split(s))),
        _ => Value::Null,
    }),
    b!("extract", ["input", "pattern"], |_, a| match (&a[0], &a[1]) {
        (Value::String(s), Value::String(p)) => strings(JavaRegex::cached(p, "").and_then(|r| r.extract(s))),
        _ => Value::Null,
    }),
    // ---- list ----
    b!("list contains", ["list", "element"], |_, a| match &a[0] {
        Value::List(l) => Value::Bool(l.iter().any(|x| eval::equals(x, &a[1]) == Some(true))),
        _ => Value::Null,
    }),
    b!("count", ["list"], |_, a| match &a[0] {
        Value::List(l) => Value::number(l.len()),
        _ => Value::Null,
    }),
    b!("min", var["list"], |env, a| extreme(env, &a[0], std::cmp::Ordering::Less)),
    b!("max", var["list"], |env, a| extreme(env, &a[0], std::cmp::Ordering::Greater)),
    b!("sum", var["list"], |_, a| fold_numbers(&a[0], Number::zero(), Number::add)),
    b!("product", var["list"], |_, a| fold_numbers(&a[0], Number::from(1), Number::mul)),
    b!("mean", var["list"], |_, a| {
        let Some(nums) = numbers(&a[0]) else {
            return Value::Null;
        };
        let n = nums.len();
        match fold_numbers(&a[0], Number::zero(), Number::add) {
            Value::Number(sum) if n > 0 => sum.div(&Number::from(n)).map(Value::Number).unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }),
    b!("median", var["list"], |_, a| {
        let Some(mut nums) = numbers(&a[0]) else {
            return Value::Null;
        };
        if nums.is_empty() {
            return Value::Null;
        }
        nums.sort_by(|x, y| x.compare(y));
        let n = nums.len();
        if n % 2 == 1 {
            Value::Number(nums[n / 2].clone())
        } else {
            nums[n / 2 - 1].add(nums[n / 2]).and_then(|s| s.div(&Number::from(2))).map(Value::Number).unwrap_or(Value::Null)
        }
    }),
    b!("stddev", var["list"], |env, a| {
        let Some(nums) = numbers(&a[0]) else {
            return Value::Null;
        };
        let n = nums.len();
        if n == 1 {
            return env.fail("Failed to invoke function 'stddev': needs at least two numbers".into());
        }
        if n < 2 {
            return Value::Null;
        }
        let Value::Number(sum) = fold_numbers(&a[0], Number::zero(), Number::add) else {
            return Value::Null;
        };
        let Some(mean) = sum.div(&Number::from(n)) else {
            return Value::Null;
        };
        let mut d = Number::zero();
        for x in nums {
            let Some(diff) = x.sub(&mean) else {
                return Value::Null;
            };
            let Some(sq) = diff.mul(&diff) else {
                return Value::Null;
            };
            let Some(next) = d.add(&sq) else {
                return Value::Null;
            };
            d = next;
        }
        let Some(var) = d.div(&Number::from(n - 1)) else {
            return Value::Null;
        };
        Number::from_f64(var.to_f64().sqrt()).map(Value::Number).unwrap_or(Value::Null)
    }),
    b!("mode", var["list"], |env, a| {
        let Some(nums) = numbers(&a[0]) else {
            return Value::Null;
        };
        let mut counts: Vec<(Number, usize)> = Vec::new();
        for x in nums {
            // each number is compared with the distinct ones so far
            if !env.charge(counts.len() as u64) {
                return Value::Null;
            }
            match counts.iter_mut().find(|(n, _)| n == x) {
                Some((_, c)) => *c += 1,
                None => counts.push((x.clone(), 1)),
            }
        }
        let max = counts.iter().map(|(_, c)| *c).max().unwrap_or(0);
        let mut modes: Vec<Number> = counts.into_iter().filter(|(_, c)| *c == max).map(|(n, _)| n).collect();
        modes.sort_by(|x, y| x.compare(y));
        Value::List(modes.into_iter().map(Value::Number).collect())
    }),
    b!("and", var["list"], |_, a| all(&a[0])),
    b!("all", var["list"], |_, a| all(&a[0])),
    b!("or", var["list"], |_, a| any(&a[0])),
    b!("any", var["list"], |_, a| any(&a[0])),
    b!("sublist", ["list", "start"], |_, a| match (&a[0], &a[1]) {
        (Value::List(l), Value::Number(s)) => sublist(l, s, None),
        _ => Value::Null,
    }),
    b!("sublist", ["list", "start", "length"], |_, a| match (&a[0], &a[1], &a[2]) {
        (Value::List(l), Value::Number(s), Value::Number(n)) => sublist(l, s, Some(n)),
        _ => Value::Null,
    }),
    b!("append", var["list", "items"], |_, a| match (&a[0], &a[1]) {
        (Value::List(_), Value::List(items)) if items.is_empty() => Value::Null,
        (Value::List(l), Value::List(items)) => Value::List(l.iter().chain(items).cloned().collect()),
        _ => Value::Null,
    }),
    b!("concatenate", var["lists"], |_, a| match &a[0] {
        Value::List(lists) if lists.is_empty() => Value::Null,
        Value::List(lists) => Value::List(
            lists
                .iter()
                .flat_map(|l| match l {
                    Value::List(items) => items.clone(),
                    v => vec![v.clone()],
                })
                .collect(),
        ),
        _ => Value::Null,
    }),
    b!("insert before", ["list", "position", "newItem"], |_, a| match (&a[0], &a[1]) {
        (Value::List(l), Value::Number(p)) => {
            let i = list_index(l.len(), p).clamp(0, l.len() as i64) as usize;
            let mut out = l.clone();
            out.insert(i, a[2].clone());
            Value::List(out)
        }
        _ => Value::Null,
    }),
    b!("remove", ["list", "position"], |_, a| match (&a[0], &a[1]) {
        // feel-scala's quirk: position 0 gives the list twice
        (Value::List(l), Value::Number(p)) if p.is_zero() => Value::List(l.iter().chain(l).cloned().collect()),
        (Value::List(l), Value::Number(p)) => {
            let i = list_index(l.len(), p);
            let mut out = l.clone();
            if i >= 0 && (i as usize) < out.len() {
                out.remove(i as usize);
            }
            Value::List(out)
        }
        _ => Value::Null,
    }),
    b!("reverse", ["list"], |_, a| match &a[0] {
        Value::List(l) => Value::List(l.iter().rev().cloned().collect()),
        _ => Value::Null,
    }),
    b!("index of", ["list", "match"], |_, a| match &a[0] {
        Value::List(l) => Value::List(
            l.iter().enumerate().filter(|(_, x)| eval::equals(x, &a[1]) == Some(true)).map(|(i, _)| Value::number(i + 1)).collect(),
        ),
        _ => Value::Null,
    }),
    b!("union", var["lists"], |env, a| match &a[0] {
        Value::List(lists) if lists.is_empty() => Value::Null,
        Value::List(lists) => {
            let all: Vec<Value> = lists
                .iter()
                .flat_map(|l| match l {
                    Value::List(items) => items.clone(),
                    v => vec![v.clone()],
                })
                .collect();
            distinct(env, all)
        }
        _ => Value::Null,
    }),
    b!("distinct values", ["list"], |env, a| match &a[0] {
        Value::List(l) => distinct(env, l.clone()),
        _ => Value::Null,
    }),
    b!("duplicate values", ["list"], |env, a| match &a[0] {
        Value::List(l) => duplicates(env, l),
        _ => Value::Null,
    }),
    b!("flatten", ["list"], |_, a| match &a[0] {
        Value::List(l) => {
            let mut out = Vec::new();
            flatten(l, &mut out);
            Value::List(out)
        }
        _ => Value::Null,
    }),
    b!("sort", ["list", "precedes"], |env, a| match (&a[0], &a[1]) {
        (Value::List(l), Value::Function(f)) => sort(env, l, f),
        _ => Value::Null,
    }),
    b!("string join", ["list"], |_, a| join(&a[0], "", "", "")),
    b!("string join", ["list", "delimiter"], |_, a| match &a[1] {
        Value::String(d) => join(&a[0], d, "", ""),
        Value::Null => join(&a[0], "", "", ""),
        _ => Value::Null,
    }),
    b!("string join", ["list", "delimiter", "prefix", "suffix"], |_, a| {
        let s = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Null => Some(String::new()),
            _ => None,
        };
        match (s(&a[1]), s(&a[2]), s(&a[3])) {
            (Some(d), Some(p), Some(x)) => join(&a[0], &d, &p, &x),
            _ => Value::Null,
        }
    }),
    // ---- numeric ----
    b!("decimal", ["n", "scale"], |_, a| round(&a[0], &a[1], RoundMode::HalfEven)),
    b!("decimal", ["n", "scale", "mode"], |_, a| {
        let mode = match &a[2] {
            Value::String(m) => match m.to_ascii_uppercase().as_str() {
                "UP" => RoundMode::Up,
                "DOWN" => RoundMode::Down,
                "CEILING" => RoundMode::Ceiling,
                "FLOOR" => RoundMode::Floor,
                "HALF_UP" => RoundMode::HalfUp,
                "HALF_DOWN" => RoundMode::HalfDown,
                "HALF_EVEN" => RoundMode::HalfEven,
                _ => return Value::Null,
            },
            _ => return Value::Null,
        };
        round(&a[0], &a[1], mode)
    }),
    b!("floor", ["n"], |_, a| round(&a[0], &Value::number(0), RoundMode::Floor)),
    b!("floor", ["n", "scale"], |_, a| round(&a[0], &a[1], RoundMode::Floor)),
    b!("ceiling", ["n"], |_, a| round(&a[0], &Value::number(0), RoundMode::Ceiling)),
    b!("ceiling", ["n", "scale"], |_, a| round(&a[0], &a[1], RoundMode::Ceiling)),
    b!("round up", ["n", "scale"], |_, a| round(&a[0], &a[1], RoundMode::Up)),
    b!("round down", ["n", "scale"], |_, a| round(&a[0], &a[1], RoundMode::Down)),
    b!("round half up", ["n", "scale"], |_, a| round(&a[0], &a[1], RoundMode::HalfUp)),
    b!("round half down", ["n", "scale"], |_, a| round(&a[0], &a[1], RoundMode::HalfDown)),
    b!("abs", ["n"], |_, a| abs(&a[0])),
    b!("abs", ["number"], |_, a| abs(&a[0])),
    b!("abs", ["duration"], |_, a| abs(&a[0])),
    b!("modulo", ["dividend", "divisor"], |env, a| match (&a[0], &a[1]) {
        (Value::Number(_), Value::Number(y)) if y.is_zero() => env.fail("Failed to invoke function 'modulo': division by zero".into()),
        (Value::Number(x), Value::Number(y)) => x.modulo(y).map(Value::Number).unwrap_or(Value::Null),
        _ => Value::Null,
    }),
    b!("sqrt", ["number"], |_, a| match &a[0] {
        // through a double, as feel-scala does
        Value::Number(n) if !n.is_negative() => Number::from_f64(n.to_f64().sqrt()).map(Value::Number).unwrap_or(Value::Null),
        _ => Value::Null,
    }),
    b!("log", ["number"], |env, a| match &a[0] {
        Value::Number(n) if n.is_positive() => Number::from_f64(n.to_f64().ln()).map(Value::Number).unwrap_or(Value::Null),
        Value::Number(_) => env.fail("Failed to invoke function 'log': not a positive number".into()),
        _ => Value::Null,
    }),
    b!("exp", ["number"], |env, a| match &a[0] {
        Value::Number(n) => match Number::from_f64(n.to_f64().exp()) {
            Some(r) => Value::Number(r),
            None => env.fail("Failed to invoke function 'exp': the result is infinite".into()),
        },
        _ => Value::Null,
    }),
    b!("odd", ["number"], |_, a| match &a[0] {
        Value::Number(n) if n.is_integer() => Value::Bool(n.modulo(&Number::from(2)).is_some_and(|r| !r.is_zero())),
        Value::Number(_) => Value::Bool(false),
        _ => Value::Null,
    }),
    b!("even", ["number"], |_, a| match &a[0] {
        Value::Number(n) if n.is_integer() => Value::Bool(n.modulo(&Number::from(2)).is_some_and(|r| r.is_zero())),
        Value::Number(_) => Value::Bool(false),
        _ => Value::Null,
    }),
    b!("random number", [], |env, _| Value::Number(env.random())),
    // ---- context ----
    b!("get value", ["context", "key"], |_, a| match (&a[0], &a[1]) {
        (Value::Context(c), Value::String(k)) => c.get(k).cloned().unwrap_or(Value::Null),
        (Value::Context(_), Value::List(keys)) if keys.is_empty() => Value::Null,
        (Value::Context(c), Value::List(keys)) => {
            let mut cur = Value::Context(c.clone());
            for k in keys {
                cur = match (&cur, k) {
                    (Value::Context(c), Value::String(k)) => c.get(k).cloned().unwrap_or(Value::Null),
                    _ => return Value::Null,
                };
            }
            cur
        }
        _ => Value::Null,
    }),
    b!("get value", ["m", "key"], |_, a| match (&a[0], &a[1]) {
        (Value::Context(c), Value::String(k)) => c.get(k).cloned().unwrap_or(Value::Null),
        _ => Value::Null,
    }),
    b!("get entries", ["context"], |_, a| entries(&a[0])),
    b!("get entries", ["m"], |_, a| entries(&a[0])),
    b!("context put", ["context", "key", "value"], |_, a| match (&a[0], &a[1]) {
        (Value::Context(c), Value::String(k)) => {
            let mut c = c.clone();
            c.insert(k.clone(), a[2].clone());
            Value::Context(c)
        }
        (Value::Context(c), Value::List(keys)) => {
            let keys: Option<Vec<&str>> = keys.iter().map(|k| k.as_str()).collect();
            match keys {
                // a path nests the context once per key: bounded as an expression's nesting is
                Some(keys) if !keys.is_empty() && keys.len() <= crate::MAX_NESTING_DEPTH => put_path(c, &keys, a[2].clone()),
                _ => Value::Null,
            }
        }
        _ => Value::Null,
    }),
    b!("put", ["context", "key", "value"], |_, a| match (&a[0], &a[1]) {
        (Value::Context(c), Value::String(k)) => {
            let mut c = c.clone();
            c.insert(k.clone(), a[2].clone());
            Value::Context(c)
        }
        _ => Value::Null,
    }),
    b!("context merge", var["contexts"], |_, a| merge(&a[0])),
    b!("put all", var["contexts"], |_, a| merge(&a[0])),
];

/// `string(x)` as feel-scala prints values: zoned date-times as `...@Zone/Id`, days-time
/// durations in whole seconds (`P0D` for zero), functions with their parameters, strings inside
/// lists and contexts quoted without escaping.
fn feel_string(v: &Value, top: bool) -> String {
    use crate::value::FunctionKind;
    match v {
        Value::String(s) if top => s.clone(),
        Value::String(s) => format!("\"{s}\""),
        Value::DateTime(d) => d.feel_string(),
        Value::DayTimeDuration(d) => {
            let secs = d.nanos() / 1_000_000_000;
            if secs == 0 {
                return "P0D".into();
            }
            let whole = temporal::DayTimeDuration::from_seconds(secs);
            whole.to_string()
        }
        Value::Function(f) => match &f.0 {
            FunctionKind::User { def, .. } => format!("function({})", def.params.join(", ")),
            FunctionKind::Builtin(_) => "function".into(),
        },
        Value::List(items) => format!("[{}]", items.iter().map(|i| feel_string(i, false)).collect::<Vec<_>>().join(", ")),
        Value::Context(c) => {
            format!("{{{}}}", c.iter().map(|(k, v)| format!("{k}:{}", feel_string(v, false))).collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

fn parse_number(s: &str) -> Value {
    if s.trim() != s {
        return Value::Null;
    }
    Number::parse(s).map(Value::Number).unwrap_or(Value::Null)
}

fn is_grouping(s: &str) -> bool {
    matches!(s, " " | "," | ".")
}

fn is_decimal_sep(s: &str) -> bool {
    matches!(s, "," | ".")
}

/// Java-like (UTF-16 based) substring with FEEL's 1-based (or negative) start.
fn substring(env: &mut Env, s: &str, start: &Number, len: Option<&Number>) -> Value {
    let units: Vec<u16> = s.encode_utf16().collect();
    let n = units.len() as i64;
    let st = start.trunc_i64();
    let from = if st > 0 { st - 1 } else { n + st };
    if from < 0 || len.is_some_and(|l| l.is_negative()) {
        return env.fail("Failed to invoke function 'substring': index out of range".into());
    }
    if from > n {
        return Value::Null;
    }
    let to = match len {
        None => n,
        Some(l) => {
            let l = l.trunc_i64();
            if l < 0 {
                return Value::Null;
            }
            from.saturating_add(l).min(n)
        }
    };
    Value::String(String::from_utf16_lossy(&units[from as usize..to as usize]))
}

fn regex_matches(s: &str, pattern: &str, flags: &str) -> Value {
    JavaRegex::cached(pattern, flags).and_then(|r| r.find(s)).map(Value::Bool).unwrap_or(Value::Null)
}

fn replace(s: &str, pattern: &str, replacement: &str, flags: &str) -> Value {
    JavaRegex::cached(pattern, flags).and_then(|r| r.replace_all(s, replacement)).map(Value::String).unwrap_or(Value::Null)
}

fn strings(list: Option<Vec<String>>) -> Value {
    list.map(|l| Value::List(l.into_iter().map(Value::String).collect())).unwrap_or(Value::Null)
}

fn numbers(v: &Value) -> Option<Vec<&Number>> {
    match v {
        Value::List(l) => l.iter().map(|x| x.as_number()).collect(),
        _ => None,
    }
}

fn fold_numbers(list: &Value, init: Number, op: fn(&Number, &Number) -> Option<Number>) -> Value {
    let Some(nums) = numbers(list) else {
        return Value::Null;
    };
    if nums.is_empty() {
        return Value::Null;
    }
    let mut acc = init;
    for n in nums {
        match op(&acc, n) {
            Some(x) => acc = x,
            None => return Value::Null,
        }
    }
    Value::Number(acc)
}

fn extreme(env: &mut Env, list: &Value, want: std::cmp::Ordering) -> Value {
    let Value::List(l) = list else {
        return Value::Null;
    };
    if l.len() > 1 && l.iter().all(|x| matches!(x, Value::List(_))) {
        return env.fail("Failed to invoke function: lists can not be compared".into());
    }
    let mut best: Option<&Value> = None;
    for x in l {
        match best {
            None => {
                if !eval::is_comparable(x) {
                    return Value::Null;
                }
                best = Some(x);
            }
            Some(b) => match eval::compare(x, b) {
                Some(o) if o == want => best = Some(x),
                Some(_) => {}
                None => return Value::Null,
            },
        }
    }
    best.cloned().unwrap_or(Value::Null)
}

fn all(list: &Value) -> Value {
    let Value::List(l) = list else {
        return Value::Null;
    };
    let mut acc = Value::Bool(true);
    for x in l {
        acc = match (&acc, x) {
            (Value::Bool(false), _) => Value::Bool(false),
            (Value::Bool(true), Value::Bool(b)) => Value::Bool(*b),
            (Value::Null, Value::Bool(false)) => Value::Bool(false),
            _ => Value::Null,
        };
    }
    acc
}

fn any(list: &Value) -> Value {
    let Value::List(l) = list else {
        return Value::Null;
    };
    let mut acc = Value::Bool(false);
    for x in l {
        acc = match (&acc, x) {
            (Value::Bool(true), _) => Value::Bool(true),
            (Value::Bool(false), Value::Bool(b)) => Value::Bool(*b),
            (Value::Null, Value::Bool(true)) => Value::Bool(true),
            _ => Value::Null,
        };
    }
    acc
}

fn list_index(len: usize, p: &Number) -> i64 {
    let p = p.trunc_i64();
    if p > 0 {
        p - 1
    } else {
        len as i64 + p
    }
}

/// feel-scala's `list.slice(index, index + length)`: positions outside the list are cut off,
/// so a start past the end gives `[]` (`sublist([1, 2, 3], 5)`), a start before it the head.
fn sublist(l: &[Value], start: &Number, len: Option<&Number>) -> Value {
    let from = list_index(l.len(), start);
    let until = match len {
        None => l.len() as i64,
        Some(n) => from.saturating_add(n.trunc_i64()),
    };
    let (lo, hi) = (from.clamp(0, l.len() as i64) as usize, until.clamp(0, l.len() as i64) as usize);
    Value::List(if lo < hi { l[lo..hi].to_vec() } else { Vec::new() })
}

/// The items without repetitions, in order of first appearance (`Null` when the work budget
/// runs out: every item is compared with the distinct ones before it).
fn distinct(env: &mut Env, items: Vec<Value>) -> Value {
    let mut out: Vec<Value> = Vec::new();
    for x in items {
        if !env.charge(out.len() as u64) {
            return Value::Null;
        }
        if !out.iter().any(|y| eval::equals(&x, y) == Some(true)) {
            out.push(x);
        }
    }
    Value::List(out)
}

/// The items that appear more than once, each once, in order of first appearance.
fn duplicates(env: &mut Env, items: &[Value]) -> Value {
    let mut counted: Vec<(&Value, usize)> = Vec::new();
    for x in items {
        if !env.charge(counted.len() as u64) {
            return Value::Null;
        }
        match counted.iter_mut().find(|(y, _)| eval::equals(x, y) == Some(true)) {
            Some((_, n)) => *n += 1,
            None => counted.push((x, 1)),
        }
    }
    Value::List(counted.into_iter().filter(|(_, n)| *n > 1).map(|(x, _)| x.clone()).collect())
}

fn flatten(items: &[Value], out: &mut Vec<Value>) {
    for x in items {
        match x {
            Value::List(inner) => flatten(inner, out),
            other => out.push(other.clone()),
        }
    }
}

fn sort(env: &mut Env, l: &[Value], f: &crate::value::FunctionValue) -> Value {
    // insertion-based merge sort that calls `precedes(a, b)`; stops on a non-boolean result
    let mut items: Vec<Value> = l.to_vec();
    let mut failed = false;
    // stable merge sort with an explicit comparator
    let mut width = 1;
    let n = items.len();
    while width < n && !failed {
        let mut merged = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            let mid = (i + width).min(n);
            let end = (i + 2 * width).min(n);
            let (mut a, mut b) = (i, mid);
            while a < mid && b < end {
                // take from b only if b precedes a (keeps the sort stable)
                match env.invoke(f, vec![items[b].clone(), items[a].clone()]) {
                    Value::Bool(true) => {
                        merged.push(items[b].clone());
                        b += 1;
                    }
                    Value::Bool(false) => {
                        merged.push(items[a].clone());
                        a += 1;
                    }
                    _ => {
                        failed = true;
                        break;
                    }
                }
            }
            if failed {
                break;
            }
            merged.extend_from_slice(&items[a..mid]);
            merged.extend_from_slice(&items[b..end]);
            i = end;
        }
        if !failed {
            items = merged;
        }
        width *= 2;
    }
    if failed {
        Value::Null
    } else {
        Value::List(items)
    }
}

fn join(list: &Value, delimiter: &str, prefix: &str, suffix: &str) -> Value {
    let Value::List(l) = list else {
        return Value::Null;
    };
    let mut parts = Vec::new();
    for x in l {
        match x {
            Value::String(s) => parts.push(s.as_str()),
            Value::Null => {}
            _ => return Value::Null,
        }
    }
    Value::String(format!("{prefix}{}{suffix}", parts.join(delimiter)))
}

fn round(n: &Value, scale: &Value, mode: RoundMode) -> Value {
    match (n, scale) {
        (Value::Number(n), Value::Number(s)) => n.round(s.trunc_i64(), mode).map(Value::Number).unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

fn abs(v: &Value) -> Value {
    match v {
        Value::Number(n) => Value::Number(n.abs()),
        other => abs_temporal(other),
    }
}

fn entries(v: &Value) -> Value {
    match v {
        Value::Context(c) => Value::List(
            c.iter()
                .map(|(k, v)| {
                    let mut e = Context::new();
                    e.insert("key", Value::String(k.clone()));
                    e.insert("value", v.clone());
                    Value::Context(e)
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

fn put_path(c: &Context, keys: &[&str], value: Value) -> Value {
    let mut c = c.clone();
    if keys.len() == 1 {
        c.insert(keys[0], value);
        return Value::Context(c);
    }
    let inner = match c.get(keys[0]) {
        Some(Value::Context(inner)) => inner.clone(),
        _ => Context::new(),
    };
    match put_path(&inner, &keys[1..], value) {
        Value::Context(updated) => {
            c.insert(keys[0], Value::Context(updated));
            Value::Context(c)
        }
        other => other,
    }
}

fn merge(list: &Value) -> Value {
    let Value::List(l) = list else {
        return Value::Null;
    };
    let mut out = Context::new();
    for x in l {
        let Value::Context(c) = x else {
            return Value::Null;
        };
        for (k, v) in c {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Context(out)
}

/// The signatures of the built-in function `name`, in the order [`BUILTINS`] lists them
/// (an index built once: a linear search by name was most of a cheap call's cost).
fn signatures(name: &str) -> &'static [&'static Builtin] {
    static INDEX: std::sync::OnceLock<std::collections::HashMap<&'static str, Vec<&'static Builtin>>> = std::sync::OnceLock::new();
    let index = INDEX.get_or_init(|| {
        let mut index: std::collections::HashMap<&'static str, Vec<&'static Builtin>> = std::collections::HashMap::new();
        for b in BUILTINS {
            index.entry(b.name).or_default().push(b);
        }
        index
    });
    index.get(name).map(Vec::as_slice).unwrap_or(&[])
}

/// Whether a built-in function with this name exists.
pub(crate) fn exists(name: &str) -> bool {
    !signatures(name).is_empty()
}

/// Invokes a built-in function with positional arguments.
pub(crate) fn call(env: &mut Env, name: &str, args: Vec<Value>) -> Value {
    let n = args.len();
    let candidates = signatures(name);
    let found = candidates
        .iter()
        .find(|b| !b.var && b.params.len() == n)
        .or_else(|| candidates.iter().find(|b| b.var && n >= b.params.len().saturating_sub(1)));
    let Some(b) = found else {
        env.warn(format!("No function found with name '{name}' and {n} parameters"));
        return Value::Null;
    };
    if b.var {
        let fixed = b.params.len() - 1;
        let mut args = args;
        let rest: Vec<Value> = args.split_off(fixed);
        let list = if fixed == 0 && rest.len() == 1 && matches!(rest[0], Value::List(_)) {
            rest.into_iter().next().unwrap_or(Value::Null)
        } else {
            Value::List(rest)
        };
        args.push(list);
        return (b.f)(env, args);
    }
    (b.f)(env, args)
}

/// Invokes a built-in function with named arguments.
pub(crate) fn call_named(env: &mut Env, name: &str, args: Vec<(String, Value)>) -> Value {
    for b in signatures(name) {
        if !args.iter().all(|(n, _)| b.params.contains(&n.as_str())) {
            continue;
        }
        // every parameter of this signature must be given (optional ones are separate entries),
        // except a variable argument list
        let needed = if b.var { b.params.len() - 1 } else { b.params.len() };
        if !b.params[..needed].iter().all(|p| args.iter().any(|(n, _)| n == p)) {
            continue;
        }
        let vals: Vec<Value> =
            b.params.iter().map(|p| args.iter().find(|(n, _)| n == p).map(|(_, v)| v.clone()).unwrap_or(Value::Null)).collect();
        if b.var && vals.last().is_some_and(|v| !matches!(v, Value::List(_))) {
            let mut vals = vals;
            let last = vals.pop().unwrap_or(Value::Null);
            vals.push(if last.is_null() { Value::List(Vec::new()) } else { Value::List(vec![last]) });
            return (b.f)(env, vals);
        }
        return (b.f)(env, vals);
    }
    env.warn(format!("No function found with name '{name}' and the given parameters"));
    Value::Null
}

// ---- temporal hooks ----

pub(crate) fn temporal_literal(env: &mut Env, s: &str) -> Value {
    match temporal::literal(s) {
        Some(v) => v,
        None => {
            env.warn(format!("Failed to parse temporal literal '@\"{s}\"'"));
            Value::Null
        }
    }
}

fn abs_temporal(v: &Value) -> Value {
    temporal::abs(v).unwrap_or(Value::Null)
}

pub(crate) fn property(v: &Value, key: &str) -> Option<Value> {
    temporal::property(v, key)
}

pub(crate) fn is_temporal(v: &Value) -> bool {
    temporal::is_temporal(v)
}

pub(crate) fn compare_temporal(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    temporal::compare(a, b)
}

pub(crate) fn equals_temporal(a: &Value, b: &Value) -> Option<bool> {
    temporal::equals(a, b)
}

pub(crate) fn arith_temporal(op: ArithOp, a: &Value, b: &Value) -> Option<Value> {
    temporal::arith(op, a, b)
}

fn now_millis(env: &Env) -> i64 {
    env.ctx
        .now_millis
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0))
}

/// Zeebe's `cycle()`: the ISO 8601 repeating interval of a duration, `repetitions` cut to a
/// Java `int` (`intValue`); null unless the interval is a duration.
fn cycle(repetitions: Option<&Number>, interval: &Value) -> Value {
    let text = match interval {
        Value::DayTimeDuration(_) | Value::YearMonthDuration(_) => match interval.to_json() {
            serde_json::Value::String(s) => s,
            _ => return Value::Null,
        },
        _ => return Value::Null,
    };
    match repetitions {
        None => Value::String(format!("R/{text}")),
        Some(n) => Value::String(format!("R{}/{text}", n.trunc_i64() as i32)),
    }
}
