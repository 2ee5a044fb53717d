//! Differential test against the real dmn-scala 1.9.0 (Zeebe 8.5.8's DMN engine): every case of
//! `tests/dmn-diff/expected.jsonl` (produced by `tests/dmn-diff/regenerate.sh`, which runs
//! dmn-scala on `tests/dmn-diff/cases.jsonl` and `tests/dmn-diff/corpus/*.dmn`, see
//! `tests/dmn-diff/DmnDiff.java`) is parsed and evaluated with waggle-dmn and compared:
//! - a file dmn-scala refuses must be refused (the messages may differ), and the reverse;
//! - an evaluation must agree on success or failure, the output (as the JSON Zeebe writes),
//!   the failure message and failed decision, and every evaluated decision (id, name, type,
//!   output, inputs, matched rules and their outputs).
//!
//! Every mismatch fails the test unless its id is in [`KNOWN_DIFFERENCES`] (with the reason);
//! a known difference that no longer differs fails the test too, so the list stays exact.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{json, Value as Json};
use waggle_dmn::{DecisionEvaluation, Drg};
use waggle_feel::EvalContext;

/// Cases where waggle-dmn knowingly differs from dmn-scala: (id, reason). Keep in sync with
/// tests/dmn-diff/README.md.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    ("h-unary-tests tests 2", UNARY_QUESTION_MARK_IN_CALL),
    ("h-unary-tests tests \"y\"", UNARY_QUESTION_MARK_IN_CALL),
    ("h-unary-tests tests true", UNARY_QUESTION_MARK_IN_CALL),
];

const UNARY_QUESTION_MARK_IN_CALL: &str = "FEEL, not DMN: feel-scala 1.17.8 evaluates a unary-test expression first without `?` (an error value that operators pass on, so it evaluates again with `?` bound, but that a function call takes as an argument: `list contains(allowed, ?)` is false for every input), while waggle-feel binds `?` from the start (true for an allowed input).";

fn dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    dir.join("../../tests/dmn-diff")
}

fn opt(s: &Option<String>) -> Json {
    s.as_ref().map(|s| Json::String(s.clone())).unwrap_or(Json::Null)
}

/// Waggle's evaluation in the harness's shape.
fn shape(e: &DecisionEvaluation) -> serde_json::Map<String, Json> {
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(e.failure.is_none()));
    match &e.failure {
        Some(f) => {
            m.insert("failure".into(), json!(f.message));
            m.insert("failed_decision".into(), json!(f.failed_decision_id));
        }
        None => {
            m.insert("output".into(), e.output.to_json());
        }
    }
    let evaluated: Vec<Json> = e
        .evaluated
        .iter()
        .map(|d| {
            json!({
                "id": d.decision_id,
                "name": opt(&d.decision_name),
                "type": d.decision_type,
                "output": d.output.to_json(),
                "inputs": d.inputs.iter().map(|i| json!({"id": opt(&i.input_id), "name": opt(&i.input_name), "value": i.value.to_json()})).collect::<Vec<_>>(),
                "rules": d.matched_rules.iter().map(|r| json!({
                    "id": opt(&r.rule_id),
                    "index": r.rule_index,
                    "outputs": r.outputs.iter().map(|o| json!({"id": opt(&o.output_id), "name": opt(&o.output_name), "value": o.value.to_json()})).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    m.insert("evaluated".into(), Json::Array(evaluated));
    m
}

/// JSON equality with numbers compared by value (`1` and `1.0` as Zeebe's doubles and longs
/// print them are different JSON, so they stay different).
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                x.is_f64() == y.is_f64() && x.as_f64() == y.as_f64()
            } else {
                x == y
            }
        }
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Json::Object(x), Json::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w))),
        _ => a == b,
    }
}

#[test]
fn waggle_dmn_agrees_with_dmn_scala() {
    let dir = dir();
    let expected = std::fs::read_to_string(dir.join("expected.jsonl")).expect("expected.jsonl");
    let mut parsed: HashMap<String, Result<Drg, String>> = HashMap::new();
    let mut failures = Vec::new();
    let mut known_seen = Vec::new();
    let mut count = 0;
    for line in expected.lines().filter(|l| !l.trim().is_empty()) {
        count += 1;
        let case: Json = serde_json::from_str(line).expect("json line");
        let id = case["id"].as_str().expect("id").to_string();
        let file = case["dmn"].as_str().expect("dmn").to_string();
        let drg = parsed.entry(file.clone()).or_insert_with(|| {
            let xml = std::fs::read_to_string(dir.join("corpus").join(&file)).expect("dmn file");
            waggle_dmn::parse(&xml).map_err(|e| e.message)
        });
        let mut problems = Vec::new();
        let expect_parsed = case["parsed"].as_bool().expect("parsed");
        match (&*drg, expect_parsed) {
            (Ok(_), false) => problems.push(format!("waggle parses it; dmn-scala: {}", case["parse_error"])),
            (Err(e), true) => problems.push(format!("waggle refuses it: {e}")),
            (Err(_), false) => {}
            (Ok(drg), true) => {
                if let Some(decision) = case["decision"].as_str() {
                    let vars = case.get("vars").cloned().unwrap_or(json!({}));
                    let ctx = EvalContext { now_millis: Some(1_700_000_000_000), seed: Some(0) };
                    let got = shape(&drg.evaluate(decision, &vars, &ctx));
                    for (key, want) in case.as_object().expect("object") {
                        if matches!(key.as_str(), "id" | "dmn" | "decision" | "vars" | "parsed") {
                            continue;
                        }
                        let have = got.get(key).cloned().unwrap_or(Json::Null);
                        if !same(&have, want) {
                            problems.push(format!("{key}: waggle {have}\n      dmn-scala {want}"));
                        }
                    }
                    for key in got.keys() {
                        if !case.as_object().expect("object").contains_key(key) {
                            problems.push(format!("{key}: waggle has {}, dmn-scala none", got[key]));
                        }
                    }
                }
            }
        }
        let known = KNOWN_DIFFERENCES.iter().any(|(k, _)| *k == id);
        if known {
            known_seen.push(id.clone());
        }
        if problems.is_empty() {
            assert!(!known, "known difference now matches, remove it from KNOWN_DIFFERENCES: {id}");
        } else if !known {
            failures.push(format!("{id} ({file}):\n    {}", problems.join("\n    ")));
        }
    }
    for (k, _) in KNOWN_DIFFERENCES {
        assert!(known_seen.iter().any(|s| s == k), "known difference not in the corpus: {k}");
    }
    assert!(count >= 500, "the corpus has {count} cases, expected at least 500");
    assert!(failures.is_empty(), "{} of {count} cases differ from dmn-scala:\n{}", failures.len(), failures.join("\n"));
}
