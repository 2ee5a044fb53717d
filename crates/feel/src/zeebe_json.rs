//! A FEEL result as the variable Zeebe 8.5 writes from it.
//!
//! Zeebe hands feel-scala's result to its `FeelToMessagePackTransformer`, which converts it
//! through Java's types; the variable's JSON is that MessagePack printed. The rules (checked
//! against feel-scala 1.17.8's Java objects by `tests/feel-diff`, field `zeebe`):
//!
//! * a whole number is `BigDecimal.longValue()`: the low 64 bits, so numbers beyond `long`
//!   wrap (`2 ** 64` → `0`); any other number is `doubleValue()`;
//! * temporal values are the `toString()` of their `java.time` objects: `LocalTime` drops zero
//!   seconds and prints a fraction in 3, 6 or 9 digits (`10:30`, `10:30:15.500`), `LocalDateTime`
//!   and `ZonedDateTime` likewise (`2024-01-01T10:30Z`, `2024-01-01T10:30+01:00[Europe/Berlin]`),
//!   `Duration` counts hours, minutes and seconds, each part signed (`PT24H`, `PT-5M`,
//!   `PT-1.5S`), `Period` years and months, each part signed (`P1Y2M`, `P-4Y-4M`, zero `P0D`);
//!   a time with an offset is feel-scala's `ZonedTime.format` (`10:30:00+01:00`);
//! * functions, ranges (and errors) are null; a context literal holds no functions (the
//!   evaluator leaves them out), so `{f: function(x) x}` is `{}`.

use std::fmt::Write;

use chrono::{NaiveDateTime, NaiveTime, Timelike};
use serde_json::Value as Json;

use crate::temporal::{fmt_offset, Date, DateTime, DayTimeDuration, Time, YearMonthDuration, Zone};
use crate::value::Value;

/// The JSON of the variable Zeebe writes from `value` (see the module's rules).
pub(crate) fn variable_json(value: &Value) -> Json {
    match value {
        Value::Null | Value::Range(_) | Value::Function(_) => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Number(n) => match n.wrapping_i64() {
            Some(i) => Json::from(i),
            None => serde_json::Number::from_f64(n.to_f64()).map_or(Json::Null, Json::Number),
        },
        Value::String(s) => Json::String(s.clone()),
        Value::List(items) => Json::Array(items.iter().map(variable_json).collect()),
        Value::Context(ctx) => Json::Object(ctx.iter().map(|(k, v)| (k.clone(), variable_json(v))).collect()),
        Value::Date(d) => Json::String(d.to_string()),
        Value::Time(t) => Json::String(java_time(t)),
        Value::DateTime(d) => Json::String(java_date_time(d)),
        Value::YearMonthDuration(d) => Json::String(java_period(d)),
        Value::DayTimeDuration(d) => Json::String(java_duration(d)),
    }
}

/// `java.time.LocalTime.toString()`: `HH:mm`, then `:ss` unless seconds and fraction are zero,
/// the fraction in 3, 6 or 9 digits.
fn java_local_time(t: &NaiveTime) -> String {
    let mut s = format!("{:02}:{:02}", t.hour(), t.minute());
    let (sec, nano) = (t.second(), t.nanosecond() % 1_000_000_000);
    if sec != 0 || nano != 0 {
        let _ = write!(s, ":{sec:02}");
        if nano % 1_000_000 == 0 && nano != 0 {
            let _ = write!(s, ".{:03}", nano / 1_000_000);
        } else if nano % 1_000 == 0 && nano != 0 {
            let _ = write!(s, ".{:06}", nano / 1_000);
        } else if nano != 0 {
            let _ = write!(s, ".{nano:09}");
        }
    }
    s
}

/// A local time as `LocalTime.toString()`; a time with an offset or zone as feel-scala's
/// `ZonedTime.format` (seconds always, the fraction without trailing zeros, then the offset).
fn java_time(t: &Time) -> String {
    match t.zone {
        None => java_local_time(&t.time),
        Some(_) => t.to_string(),
    }
}

/// `LocalDateTime.toString()`, or `ZonedDateTime.toString()`: the local date-time, the offset
/// (`Z`, `+01:00`) and, for a region zone, its id in brackets.
fn java_date_time(d: &DateTime) -> String {
    let mut s = java_local_date_time(&d.local);
    match &d.zone {
        None => {}
        Some(Zone::Offset(o)) => s.push_str(&fmt_offset(o)),
        Some(zone @ Zone::Id(tz)) => {
            let _ = write!(s, "{}[{}]", fmt_offset(&zone.offset_at_local(&d.local)), tz.name());
        }
    }
    s
}

fn java_local_date_time(d: &NaiveDateTime) -> String {
    format!("{}T{}", Date(d.date()), java_local_time(&d.time()))
}

/// `java.time.Duration.toString()`: `PT` then hours, minutes and seconds, each present only
/// when not zero (`PT0S` for zero) and each carrying the sign (`PT-5M`, `PT-1.5S`; a negative
/// fraction of a second alone is `PT-0.5S`).
fn java_duration(d: &DayTimeDuration) -> String {
    let nanos = d.nanos();
    if nanos == 0 {
        return "PT0S".into();
    }
    let negative = nanos < 0;
    let magnitude = nanos.unsigned_abs();
    let total_secs = magnitude / 1_000_000_000;
    let frac = magnitude % 1_000_000_000;
    let (hours, minutes, secs) = (total_secs / 3600, (total_secs % 3600) / 60, total_secs % 60);
    let sign = if negative { "-" } else { "" };
    let mut s = String::from("PT");
    if hours != 0 {
        let _ = write!(s, "{sign}{hours}H");
    }
    if minutes != 0 {
        let _ = write!(s, "{sign}{minutes}M");
    }
    if secs != 0 || frac != 0 {
        let _ = write!(s, "{sign}{secs}");
        if frac != 0 {
            let digits = format!("{frac:09}");
            let _ = write!(s, ".{}", digits.trim_end_matches('0'));
        }
        s.push('S');
    }
    s
}

/// `java.time.Period.toString()` of feel-scala's normalised period: years and months, each
/// carrying the sign (`P1Y2M`, `P-4Y-4M`), `P0D` for zero.
fn java_period(d: &YearMonthDuration) -> String {
    let months = d.months();
    if months == 0 {
        return "P0D".into();
    }
    let (years, rest) = (months / 12, months % 12);
    let mut s = String::from("P");
    if years != 0 {
        let _ = write!(s, "{years}Y");
    }
    if rest != 0 {
        let _ = write!(s, "{rest}M");
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::{evaluate, Value};
    use serde_json::json;

    fn zeebe(expr: &str) -> serde_json::Value {
        evaluate(expr, &()).expect("parses").to_json()
    }

    #[test]
    fn local_times_and_date_times_as_java_prints_them() {
        assert_eq!(zeebe(r#"@"10:30:00""#), json!("10:30"));
        assert_eq!(zeebe(r#"@"10:30:15""#), json!("10:30:15"));
        assert_eq!(zeebe(r#"@"10:30:15.5""#), json!("10:30:15.500"));
        assert_eq!(zeebe(r#"@"10:30:15.123456""#), json!("10:30:15.123456"));
        assert_eq!(zeebe(r#"@"10:30:15.0000001""#), json!("10:30:15.000000100"));
        assert_eq!(zeebe(r#"@"2024-01-01T10:30:00""#), json!("2024-01-01T10:30"));
        assert_eq!(zeebe(r#"@"2024-01-01T10:30:00Z""#), json!("2024-01-01T10:30Z"));
        assert_eq!(zeebe(r#"@"2024-01-01T10:30:00+01:00""#), json!("2024-01-01T10:30+01:00"));
        assert_eq!(zeebe(r#"@"2024-01-01T10:30:00@Europe/Berlin""#), json!("2024-01-01T10:30+01:00[Europe/Berlin]"));
        assert_eq!(zeebe(r#"@"2024-07-01T10:30:15.25@Europe/Berlin""#), json!("2024-07-01T10:30:15.250+02:00[Europe/Berlin]"));
        assert_eq!(zeebe(r#"@"10:30:00+01:00""#), json!("10:30:00+01:00"));
        assert_eq!(zeebe(r#"@"2024-01-01""#), json!("2024-01-01"));
    }

    #[test]
    fn durations_in_hours_and_signed_parts() {
        assert_eq!(zeebe(r#"@"P1D""#), json!("PT24H"));
        assert_eq!(zeebe(r#"duration("P2DT3H")"#), json!("PT51H"));
        assert_eq!(zeebe(r#"date("2024-03-10") - date("2024-03-01")"#), json!("PT216H"));
        assert_eq!(zeebe(r#"@"-PT5M""#), json!("PT-5M"));
        assert_eq!(zeebe(r#"@"PT90M""#), json!("PT1H30M"));
        assert_eq!(zeebe(r#"@"PT0S""#), json!("PT0S"));
        assert_eq!(zeebe(r#"@"-PT1.5S""#), json!("PT-1.5S"));
        assert_eq!(zeebe(r#"@"-PT0.5S""#), json!("PT-0.5S"));
        assert_eq!(zeebe(r#"@"-P1DT2H3M4.005S""#), json!("PT-26H-3M-4.005S"));
        assert_eq!(zeebe(r#"duration("P14M")"#), json!("P1Y2M"));
        assert_eq!(zeebe(r#"duration("-P4Y4M")"#), json!("P-4Y-4M"));
        assert_eq!(zeebe(r#"@"P0Y""#), json!("P0D"));
    }

    #[test]
    fn whole_numbers_wrap_as_java_long() {
        assert_eq!(zeebe("100000000000000000000"), json!(7766279631452241920i64));
        assert_eq!(zeebe("2 ** 64"), json!(0));
        assert_eq!(zeebe("2 ** 63"), json!(i64::MIN));
        assert_eq!(zeebe("-(2 ** 63) - 1"), json!(i64::MAX));
        assert_eq!(zeebe("10 ** 30"), json!(5076944270305263616i64));
        assert_eq!(zeebe("123456789012345678901234567890"), json!(-4362896299872285998i64));
        assert_eq!(zeebe("1.0"), json!(1));
        assert_eq!(zeebe("1.5"), json!(1.5));
        let big = serde_json::json!({"x": 18446744073709551615u64});
        assert_eq!(evaluate("x", &big).expect("parses").to_json(), json!(-1));
    }

    #[test]
    fn functions_are_no_variables() {
        assert_eq!(zeebe("{f: function(x) x}"), json!({}));
        assert_eq!(zeebe("{f: function(x) x, a: 1, r: f(2)}"), json!({"a": 1, "r": 2}));
        assert_eq!(zeebe("[function(x) x]"), json!([null]));
        assert_eq!(zeebe(r#"context put({}, "f", function(x) x)"#), json!({"f": null}));
        assert_eq!(Value::Null.to_json(), json!(null));
    }
}
