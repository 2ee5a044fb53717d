//! Differential test against the real feel-scala 1.17.8: every entry of
//! `tests/feel-diff/expected.jsonl` (produced by `tests/feel-diff/regenerate.sh`, which runs
//! feel-scala on `tests/feel-diff/corpus/*.txt`) is evaluated with waggle-feel and compared in
//! the canonical form described in `tests/feel-diff/FeelDiff.java`, and in the JSON of the
//! variable Zeebe 8.5 writes from the result (the entry's `zeebe` field, which
//! `tests/diff-common/DiffJson.java` derives from feel-scala's Java objects as Zeebe's `FeelToMessagePackTransformer` does)
//! against `Value::to_json`.
//!
//! Every mismatch fails the test unless its id is in [`KNOWN_DIFFERENCES`] (with the reason);
//! a known difference that no longer differs fails the test too, so the list stays exact.

use std::path::PathBuf;

use waggle_feel::{parse_unary_tests, EvalContext, Expression, Value};

/// Entries where waggle-feel deliberately or knowingly differs from feel-scala: (id, reason).
/// Keep in sync with the list in crates/feel/README.md.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    ("arithmetic: 99999999999999999999999999999999999 * 10", "Scala's BigDecimal keeps the precision of a literal longer than 34 digits (here 35) for the operations on it; waggle always rounds results to 34 digits."),
    ("arithmetic: 1000000000000000000000 ** 0.000000001", "Java's Math.pow and Rust's powf differ in the last bit here (0x1.000000cfae1a1p0 and 0x1.000000cfae1a2p0); JDK 17's Double.toString prints Java's as 1.0000000483542881, which is the shortest text of Rust's, so only the variable (the double itself) differs."),
    ("builtins: string(-0.0)", "feel-scala keeps the scale of a decimal literal (`-0.0` prints as `0.0`); waggle normalises numbers (`0`)."),
    ("builtins: time(\"10:00:00@Europe/Berlin\")", "feel-scala fixes the offset of a time with a zone id using the current date; waggle keeps the zone id only (its offset is not defined without a date)."),
    ("builtins: time(\"10:00:00@UTC\")", "as above: zoned time with a zone id."),
    ("builtins: time(@\"2024-01-01T10:00:00@Europe/Berlin\")", "as above: zoned time with a zone id."),
    ("literals: @\"10:30:00@Europe/Berlin\"", "as above: zoned time with a zone id."),
    ("builtins: substring(\"a😀b\", 2, 1)", "Java strings may hold half of a surrogate pair; Rust strings can not (waggle gives U+FFFD)."),
    ("functions: for f in [function(x) x + 1, function(x) x * 2] return f(3)", "feel-scala does not invoke a function held by an iteration variable (null); waggle does."),
    ("names: x andy | {\"x\": true, \"y\": false, \"andy\": 1}", "feel-scala's parser matches `and` as a prefix of `andy` (`x and y`); waggle reads whole words (a parse error)."),
    ("ranges: 5 in [cellInput] | {\"cellInput\": 9}", "inside `in` feel-scala binds the input to the variable `cellInput`; waggle binds it to `?` only."),
    ("regex: matches(\"abc\", \"\\Gabc\")", "`\\G` (end of the previous match) has no counterpart in fancy-regex; the pattern is taken as invalid (null)."),
    ("unary: null ~ is defined(?)", "feel-scala treats the input variable `?` as defined even when the input is null; waggle's `is defined` looks at the value only."),
];

fn corpus_file() -> PathBuf {
    // at run time: a test binary reused from a clone at another path must read this clone's corpus
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    dir.join("../../tests/feel-diff/expected.jsonl")
}

/// The canonical form of a value (see FeelDiff.java).
fn canonical(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_plain_string(),
        Value::String(s) => quote(s),
        Value::Date(d) => format!("date({d})"),
        Value::Time(t) => format!("time({t})"),
        Value::DateTime(d) => format!("datetime({d})"),
        Value::YearMonthDuration(d) => format!("ym({})", d.months()),
        Value::DayTimeDuration(d) => {
            let n = waggle_feel::Number::parse(&d.nanos().to_string()).expect("nanos");
            let secs = n.div(&waggle_feel::Number::from(1_000_000_000i64)).expect("seconds");
            format!("dt({})", secs.to_plain_string())
        }
        Value::List(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(", ")),
        Value::Context(c) => {
            let mut entries: Vec<(String, String)> = c.iter().map(|(k, v)| (quote(k), canonical(v))).collect();
            entries.sort();
            format!("{{{}}}", entries.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", "))
        }
        Value::Range(r) => format!(
            "range({}{}..{}{})",
            if r.start_closed { "[" } else { "(" },
            canonical(&r.start),
            canonical(&r.end),
            if r.end_closed { "]" } else { ")" }
        ),
        Value::Function(_) => "function".into(),
        other => format!("unknown({other})"),
    }
}

/// JSON-like quoting as the harness does it (`tests/diff-common/DiffJson.java`).
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The kind of a canonical value, for entries compared by shape only (now(), uuid(), ...).
fn kind(canon: &str) -> String {
    match canon.chars().next() {
        Some('"') => "string".into(),
        Some(c) if c.is_ascii_digit() || c == '-' => "number".into(),
        _ => canon.split('(').next().unwrap_or(canon).to_string(),
    }
}

/// Evaluates one entry with waggle-feel: (succeeded, canonical value, Zeebe's variable JSON).
fn evaluate(expr: &str, ctx: Option<&str>, input: Option<&str>) -> (bool, Option<String>, Option<serde_json::Value>) {
    let vars: serde_json::Value = ctx.map(|c| serde_json::from_str(c).expect("ctx is JSON")).unwrap_or(serde_json::json!({}));
    let clock = EvalContext { now_millis: Some(1_706_700_000_000), seed: Some(7) };
    let evaluation = match input {
        Some(input) => {
            let input = match Expression::parse(input) {
                Ok(e) => e.evaluate_with(&vars, &clock),
                Err(_) => Value::Null,
            };
            match parse_unary_tests(expr) {
                Ok(t) => t.evaluate_detailed(&input, &vars, &clock),
                Err(_) => return (false, None, None),
            }
        }
        None => match Expression::parse(expr) {
            Ok(e) => e.evaluate_detailed(&vars, &clock),
            Err(_) => return (false, None, None),
        },
    };
    if evaluation.failure.is_some() {
        return (false, None, None);
    }
    (true, Some(canonical(&evaluation.value)), Some(evaluation.value.to_json()))
}

#[test]
fn matches_feel_scala() {
    let text = std::fs::read_to_string(corpus_file()).expect("tests/feel-diff/expected.jsonl");
    let (mut total, mut matched) = (0, 0);
    let mut mismatches = Vec::new();
    let mut known_seen = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line).expect("expected.jsonl line is JSON");
        let id = entry["id"].as_str().expect("id");
        let expr = entry["expr"].as_str().expect("expr");
        let ok = entry["ok"].as_bool().expect("ok");
        let value = entry["value"].as_str();
        let shape = entry["shape"].as_bool().unwrap_or(false);
        total += 1;
        let zeebe = entry.get("zeebe");
        let (got_ok, got, got_zeebe) = evaluate(expr, entry["ctx"].as_str(), entry["input"].as_str());
        let same = got_ok == ok
            && match (value, got.as_deref()) {
                (Some(a), Some(b)) if shape => kind(a) == kind(b),
                (a, b) => a == b,
            }
            && (shape || !ok || zeebe == got_zeebe.as_ref());
        let known = KNOWN_DIFFERENCES.iter().any(|(k, _)| *k == id);
        if known {
            known_seen.push(id.to_string());
        }
        if same {
            matched += 1;
            assert!(!known, "known difference now matches, remove it from KNOWN_DIFFERENCES: {id}");
        } else if !known {
            let fmt = |ok: bool, v: Option<&str>, z: Option<&serde_json::Value>| match ok {
                true => format!("{} (variable {})", v.unwrap_or("?"), z.map_or("?".to_string(), |z| z.to_string())),
                false => "FAILURE".to_string(),
            };
            mismatches.push(format!(
                "{id}\n    feel-scala: {}\n    waggle:     {}",
                fmt(ok, value, zeebe),
                fmt(got_ok, got.as_deref(), got_zeebe.as_ref())
            ));
        }
    }
    for (k, _) in KNOWN_DIFFERENCES {
        assert!(known_seen.iter().any(|s| s == k), "KNOWN_DIFFERENCES names an entry that is not in the corpus: {k}");
    }
    println!("differential: {matched} of {total} entries equal to feel-scala, {} known differences", KNOWN_DIFFERENCES.len());
    assert!(total >= 1500, "the corpus should have at least 1,500 entries, has {total}");
    assert!(mismatches.is_empty(), "{} entries differ from feel-scala:\n{}", mismatches.len(), mismatches.join("\n"));
}
