//! Fuzzing with proptest: arbitrary text and grammar-shaped random expressions are parsed and
//! evaluated; nothing may panic, overflow the stack or hang. The case count is small by default
//! so that CI stays fast; run longer with e.g.
//! `PROPTEST_CASES=100000 cargo test -p waggle-feel --release --test fuzz`.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use waggle_feel::{parse_unary_tests, EvalContext, Expression, Value};

/// Upper bound for one parse + evaluation; far above what any generated input needs.
const LIMIT: Duration = Duration::from_secs(5);

fn vars() -> serde_json::Value {
    serde_json::json!({
        "x": 5, "y": "a", "n": null, "b": true, "d": "2024-01-15",
        "xs": [1, 2, 3], "ctx": {"a": 1, "b": [1, {"c": "x"}]},
        "items": [{"price": 10, "qty": 2}, {"price": 5, "qty": 1}]
    })
}

/// Parses and evaluates `src` as an expression and as unary tests on a thread of its own; fails
/// naming `src` when that panics or takes longer than [`LIMIT`] (an evaluation that never ends
/// fails the test instead of hanging the suite).
fn check(src: &str) {
    let start = Instant::now();
    let owned = src.to_string();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        // the stack of a test thread: nesting must be bounded well within it
        .stack_size(2 << 20)
        .spawn(move || {
            let clock = EvalContext { now_millis: Some(1_706_700_000_000), seed: Some(1) };
            if let Ok(e) = Expression::parse(&owned) {
                let _ = e.evaluate_detailed(&vars(), &clock);
            }
            if let Ok(t) = parse_unary_tests(&owned) {
                let _ = t.evaluate_with(&Value::number(5), &vars(), &clock);
            }
            let _ = done.send(());
        })
        .expect("a thread");
    match finished.recv_timeout(LIMIT) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("evaluating {src:?} took longer than {LIMIT:?}"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("evaluating {src:?} panicked"),
    }
    assert!(start.elapsed() < LIMIT, "evaluating {src:?} took {:?}", start.elapsed());
}

/// Leaves of the expression grammar.
fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        (-1000i64..1000).prop_map(|n| n.to_string()),
        "[0-9]{1,40}\\.[0-9]{1,40}",
        "\"[a-z \\\\\"]{0,8}\"",
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        prop::sample::select(vec!["x", "y", "n", "b", "d", "xs", "ctx", "items", "item", "partial", "?", "missing", "`a b`"])
            .prop_map(str::to_string),
        prop::sample::select(vec![
            "@\"2024-01-01\"",
            "@\"10:00:00\"",
            "@\"2024-03-31T02:30:00@Europe/Berlin\"",
            "@\"P1Y2M\"",
            "@\"PT36H\"",
            "@\"2024-01-01T10:00:00Z\"",
        ])
        .prop_map(str::to_string),
    ]
}

const FUNCTIONS: &[&str] = &[
    "not",
    "string",
    "number",
    "date",
    "time",
    "date and time",
    "duration",
    "substring",
    "string length",
    "upper case",
    "contains",
    "matches",
    "replace",
    "split",
    "extract",
    "string join",
    "count",
    "min",
    "max",
    "sum",
    "mean",
    "median",
    "stddev",
    "mode",
    "all",
    "any",
    "sublist",
    "append",
    "concatenate",
    "insert before",
    "remove",
    "reverse",
    "index of",
    "union",
    "distinct values",
    "duplicate values",
    "flatten",
    "sort",
    "decimal",
    "floor",
    "ceiling",
    "abs",
    "modulo",
    "sqrt",
    "log",
    "exp",
    "odd",
    "even",
    "get value",
    "get entries",
    "context put",
    "context merge",
    "is defined",
    "get or else",
    "assert",
    "before",
    "after",
    "meets",
    "overlaps",
    "includes",
    "during",
    "coincides",
    "day of week",
    "week of year",
    "last day of month",
    "now",
    "today",
    "random number",
    "years and months duration",
    "context",
];

/// Grammar-shaped expressions: operators, lists, contexts, filters, loops, calls.
fn expr() -> impl Strategy<Value = String> {
    leaf().prop_recursive(6, 64, 4, |inner| {
        let two = (inner.clone(), inner.clone());
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "/", "**", "=", "!=", "<", "<=", ">", ">=", "and", "or"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.clone().prop_map(|a| format!("-{a}")),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|xs| format!("[{}]", xs.join(", "))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{{a: {a}, \"b c\": {b}}}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}[{b}]")),
            (inner.clone(), prop::sample::select(vec!["a", "b", "year", "days", "time offset", "start"]))
                .prop_map(|(a, p)| format!("{a}.{p}")),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(a, b, c)| format!("if {a} then {b} else {c}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("for i in {a} return {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("some i in {a} satisfies {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("every i in {a} satisfies {b}")),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(a, b, c)| format!("{a} between {b} and {c}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} in {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} in [{b}..10]")),
            (inner.clone(), prop::sample::select(vec!["number", "string", "date", "list", "context", "Any", "function"]))
                .prop_map(|(a, t)| format!("{a} instance of {t}")),
            (prop::sample::select(FUNCTIONS.to_vec()), prop::collection::vec(inner.clone(), 0..4))
                .prop_map(|(f, xs)| format!("{f}({})", xs.join(", "))),
            two.clone().prop_map(|(a, b)| format!("{{f: function(p, q) {a}, r: f({b}, 1)}}.r")),
            two.clone().prop_map(|(a, b)| format!("for i in {a}..{b} return i")),
            // unary comparisons and intervals as values, names with spaces and symbols
            (prop::sample::select(vec!["<", "<=", ">", ">="]), inner.clone()).prop_map(|(op, a)| format!("{op} {a}")),
            two.clone().prop_map(|(a, b)| format!("[< {a}, [{a}..{b}], ]{b}..{a}[]")),
            two.clone().prop_map(|(a, b)| format!("before([{a}..{b}], {a})")),
            two.clone().prop_map(|(a, b)| format!("{{a-b?: {a}, my func: function(first name) {b}, r: my func(first name: {a})}}.r")),
            two.prop_map(|(a, b)| format!("{a} in ({b}, < {a}, [{a}..{b}])")),
        ]
    })
}

/// 256 cases, or `PROPTEST_CASES` (an explicit count in the config would ignore it).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,64}") {
        check(&src);
    }

    #[test]
    fn feel_like_text_never_panics(src in "[-+*/()\\[\\]{}.,:<>=!\"@?a-z0-9 ]{0,48}") {
        check(&src);
    }

    #[test]
    fn grammar_shaped_expressions_never_panic(src in expr()) {
        check(&src);
    }

    /// Java-like patterns, flags and replacements through the four regex functions.
    #[test]
    fn regular_expressions_never_panic(
        s in "[a-c\n\r é]{0,12}",
        p in r"([-a-c()\[\]{}*+?.^$|&~#<>=!:,0-9 ]|\\[-a-zA-Z0-9{}<>\\.$]){0,16}",
        f in "[imsxq]{0,3}",
        r in r"[a$\\{}0-9]{0,6}",
    ) {
        let start = Instant::now();
        let vars = serde_json::json!({"s": s, "p": p, "f": f, "r": r});
        for src in ["matches(s, p, f)", "replace(s, p, r, f)", "split(s, p)", "extract(s, p)"] {
            let e = Expression::parse(src).expect("parses");
            let _ = e.evaluate(&vars);
        }
        prop_assert!(start.elapsed() < LIMIT, "pattern {p:?} took {:?}", start.elapsed());
    }
}

#[test]
fn deep_nesting_is_a_parse_error_not_a_crash() {
    for open in ["(", "[", "-", "not(", "{a: ", "if true then ", "[1, "] {
        let src = open.repeat(100_000);
        check(&src);
        let deep = format!("{}1{}", "(".repeat(50_000), ")".repeat(50_000));
        assert!(Expression::parse(&deep).is_err());
    }
}

#[test]
fn huge_iterations_are_cut_off() {
    for src in [
        "for i in 1..1000000000 return i",
        "for i in 1..100000, j in 1..100000 return i",
        "count(for i in 1..1000000 return i)",
        "some i in 1..1000000000 satisfies i < 0",
        "{f: function(n) f(n + 1), r: f(1)}.r",
        "string join(for i in 1..200000 return \"abcdefgh\")",
        "10 ** 100000000",
        "decimal(1, 1000000000)",
    ] {
        check(src);
    }
}

/// [`check`]s `src`, then evaluates it as an expression (the fixed clock) and expects `want`.
fn assert_evaluates_to(src: &str, want: Value) {
    check(src);
    let clock = EvalContext { now_millis: Some(1_706_700_000_000), seed: Some(1) };
    let expression = Expression::parse(src).unwrap_or_else(|e| panic!("{src}: {e:?}"));
    assert_eq!(expression.evaluate_detailed(&vars(), &clock).value, want, "{src}");
}

/// Scales and exponents at `i64::MIN`, which has no absolute value (found by the `feel` fuzz
/// target: `decimal(1.245, -(2 ** 63) - 4)` panicked), are out of range: null, not a panic.
#[test]
fn scales_and_exponents_at_the_edge_of_i64_are_null() {
    for src in [
        "decimal(1.245, -(2 ** 63) - 4)",
        "decimal(1.245, -(2 ** 63))",
        "round up(1.5, -(2 ** 64))",
        "round half even(-1.5, -(2 ** 63))",
        r#"number("1e-9223372036854775808")"#,
        r#"number("1E+9223372036854775807")"#,
    ] {
        assert_evaluates_to(src, Value::Null);
    }
}

/// Arithmetic on numbers whose digits lie far apart (up to FEEL's exponent bound, 10^±999999)
/// does not write out the digits between them: each of these took seconds, so a handful in a
/// loop stalled the partition evaluating them (the feel fuzz target timed out on a sum in a
/// filter). The results are those of the exact operations, rounded to 34 digits.
#[test]
fn arithmetic_on_numbers_far_apart_stays_cheap() {
    for src in [
        "10 ** 999999 + 0.1 ** 999999 = 10 ** 999999",
        "10 ** 999999 - 0.1 ** 999999 = 10 ** 999999",
        "0.1 ** 999999 + 1 = 1",
        "1 - 0.1 ** 999999 = 1",
        "sum([10 ** 999999, 0.1 ** 999999]) = 10 ** 999999",
        "modulo(10 ** 999999, 3) = 1",
        "modulo(-(10 ** 999999), 3) = 2",
        "modulo(10 ** 999999, -3) = -2",
        "even(10 ** 999999)",
        "not(odd(10 ** 999999))",
        "decimal(10 ** 999999, 999999) = 10 ** 999999",
        "floor(10 ** 999999) = 10 ** 999999",
        "round half up(10 ** 999999, 2) = 10 ** 999999",
        "decimal(0.1 ** 999999, 0) = 0",
        "substring(\"abc\", 10 ** 999999) = substring(\"abc\", 10 ** 30)",
        "every x in for i in 1..20 return 10 ** 999999 + 0.1 ** 999999 satisfies x = 10 ** 999999",
        "list contains([1990999999999999999999999999999999999999999 + 5 ** 4 / 99 ** 4 ** 99999], 1991000000000000000000000000000000000000000)",
    ] {
        assert_evaluates_to(src, Value::Bool(true));
    }
}
