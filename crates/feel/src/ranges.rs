//! DMN 1.4 range functions (`before`, `after`, `meets`, `overlaps`, `includes`, ...) on points
//! and ranges.

use std::cmp::Ordering;

use crate::eval::{self, Env};
use crate::value::{Range, Value};

enum Arg<'a> {
    Point(&'a Value),
    Range(&'a Range),
}

fn arg(v: &Value) -> Option<Arg<'_>> {
    match v {
        Value::Null => None,
        Value::Range(r) if !r.start.is_null() && !r.end.is_null() => Some(Arg::Range(r)),
        Value::Range(_) => None,
        p if eval::is_comparable(p) => Some(Arg::Point(p)),
        _ => None,
    }
}

fn cmp(a: &Value, b: &Value) -> Option<Ordering> {
    eval::compare(a, b)
}

fn lt(a: &Value, b: &Value) -> Option<bool> {
    cmp(a, b).map(|o| o == Ordering::Less)
}

fn gt(a: &Value, b: &Value) -> Option<bool> {
    cmp(a, b).map(|o| o == Ordering::Greater)
}

fn eq(a: &Value, b: &Value) -> Option<bool> {
    cmp(a, b).map(|o| o == Ordering::Equal)
}

fn before(a: &Arg, b: &Arg) -> Option<bool> {
    Some(match (a, b) {
        (Arg::Point(p1), Arg::Point(p2)) => lt(p1, p2)?,
        (Arg::Point(p), Arg::Range(r)) => lt(p, &r.start)? || (eq(p, &r.start)? && !r.start_closed),
        (Arg::Range(r), Arg::Point(p)) => lt(&r.end, p)? || (eq(&r.end, p)? && !r.end_closed),
        (Arg::Range(r1), Arg::Range(r2)) => lt(&r1.end, &r2.start)? || ((!r1.end_closed || !r2.start_closed) && eq(&r1.end, &r2.start)?),
    })
}

fn meets(r1: &Range, r2: &Range) -> Option<bool> {
    Some(r1.end_closed && r2.start_closed && eq(&r1.end, &r2.start)?)
}

fn overlaps(r1: &Range, r2: &Range) -> Option<bool> {
    let a = gt(&r1.end, &r2.start)? || (eq(&r1.end, &r2.start)? && r1.end_closed && r2.start_closed);
    let b = lt(&r1.start, &r2.end)? || (eq(&r1.start, &r2.end)? && r1.start_closed && r2.end_closed);
    Some(a && b)
}

fn overlaps_before(r1: &Range, r2: &Range) -> Option<bool> {
    let a = lt(&r1.start, &r2.start)? || (eq(&r1.start, &r2.start)? && r1.start_closed && !r2.start_closed);
    let b = gt(&r1.end, &r2.start)? || (eq(&r1.end, &r2.start)? && r1.end_closed && r2.start_closed);
    let c = lt(&r1.end, &r2.end)? || (eq(&r1.end, &r2.end)? && (!r1.end_closed || r2.end_closed));
    Some(a && b && c)
}

fn finishes(a: &Arg, b: &Arg) -> Option<bool> {
    match (a, b) {
        (Arg::Point(p), Arg::Range(r)) => Some(r.end_closed && eq(&r.end, p)?),
        (Arg::Range(r1), Arg::Range(r2)) => Some(
            r1.end_closed == r2.end_closed
                && eq(&r1.end, &r2.end)?
                && (gt(&r1.start, &r2.start)? || (eq(&r1.start, &r2.start)? && (!r1.start_closed || r2.start_closed))),
        ),
        _ => None,
    }
}

fn includes(a: &Arg, b: &Arg) -> Option<bool> {
    match (a, b) {
        (Arg::Range(r), Arg::Point(p)) => {
            Some((lt(&r.start, p)? && gt(&r.end, p)?) || (eq(&r.start, p)? && r.start_closed) || (eq(&r.end, p)? && r.end_closed))
        }
        (Arg::Range(r1), Arg::Range(r2)) => Some(
            (lt(&r1.start, &r2.start)? || (eq(&r1.start, &r2.start)? && (r1.start_closed || !r2.start_closed)))
                && (gt(&r1.end, &r2.end)? || (eq(&r1.end, &r2.end)? && (r1.end_closed || !r2.end_closed))),
        ),
        _ => None,
    }
}

fn starts(a: &Arg, b: &Arg) -> Option<bool> {
    match (a, b) {
        (Arg::Point(p), Arg::Range(r)) => Some(r.start_closed && eq(&r.start, p)?),
        (Arg::Range(r1), Arg::Range(r2)) => Some(
            r1.start_closed == r2.start_closed
                && eq(&r1.start, &r2.start)?
                && (lt(&r1.end, &r2.end)? || (eq(&r1.end, &r2.end)? && (!r1.end_closed || r2.end_closed))),
        ),
        _ => None,
    }
}

fn coincides(a: &Arg, b: &Arg) -> Option<bool> {
    match (a, b) {
        (Arg::Point(p1), Arg::Point(p2)) => eq(p1, p2),
        (Arg::Range(r1), Arg::Range(r2)) => {
            Some(eq(&r1.start, &r2.start)? && eq(&r1.end, &r2.end)? && r1.start_closed == r2.start_closed && r1.end_closed == r2.end_closed)
        }
        _ => None,
    }
}

fn ranges<'a>(a: &Arg<'a>, b: &Arg<'a>) -> Option<(&'a Range, &'a Range)> {
    match (a, b) {
        (Arg::Range(x), Arg::Range(y)) => Some((x, y)),
        _ => None,
    }
}

/// Applies the range function `name` to two arguments; `Null` for invalid arguments.
/// Applies a range function; argument kinds a function has no signature for fail the
/// evaluation (as in feel-scala), ranges of strings and null arguments give `null`.
pub(crate) fn apply(env: &mut Env, name: &str, x: &Value, y: &Value) -> Value {
    let string_range = |v: &Value| matches!(v, Value::Range(r) if matches!(r.start, Value::String(_)) || matches!(r.end, Value::String(_)));
    if string_range(x) || string_range(y) {
        return Value::Null;
    }
    let (Some(a), Some(b)) = (arg(x), arg(y)) else {
        return Value::Null;
    };
    let allowed = match (&a, &b) {
        (Arg::Range(_), Arg::Range(_)) => true,
        (Arg::Point(_), Arg::Point(_)) => matches!(name, "before" | "after" | "coincides"),
        (Arg::Point(_), Arg::Range(_)) => matches!(name, "before" | "after" | "finishes" | "during" | "starts" | "coincides"),
        (Arg::Range(_), Arg::Point(_)) => matches!(name, "before" | "after" | "finished by" | "includes" | "started by" | "coincides"),
    };
    if !allowed {
        return env.fail(format!("Failed to invoke function '{name}': illegal arguments"));
    }
    if name == "coincides" && matches!((&a, &b), (Arg::Point(_), Arg::Range(_)) | (Arg::Range(_), Arg::Point(_))) {
        return Value::Bool(false);
    }
    let r = match name {
        "before" => before(&a, &b),
        "after" => before(&b, &a),
        "meets" => ranges(&a, &b).and_then(|(r1, r2)| meets(r1, r2)),
        "met by" => ranges(&a, &b).and_then(|(r1, r2)| meets(r2, r1)),
        "overlaps" => ranges(&a, &b).and_then(|(r1, r2)| overlaps(r1, r2)),
        "overlaps before" => ranges(&a, &b).and_then(|(r1, r2)| overlaps_before(r1, r2)),
        "overlaps after" => ranges(&a, &b).and_then(|(r1, r2)| overlaps_before(r2, r1)),
        "finishes" => finishes(&a, &b),
        "finished by" => finishes(&b, &a),
        "includes" => includes(&a, &b),
        "during" => includes(&b, &a),
        "starts" => starts(&a, &b),
        "started by" => starts(&b, &a),
        "coincides" => coincides(&a, &b),
        _ => None,
    };
    r.map(Value::Bool).unwrap_or(Value::Null)
}
