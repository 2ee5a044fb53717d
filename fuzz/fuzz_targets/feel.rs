//! FEEL: any text parsed as an expression and as unary tests, and evaluated against a small
//! fixed context (numbers, strings, lists, a nested context, temporal strings) with a fixed
//! clock and seed. Property: no panic; every evaluation ends within libFuzzer's time bound
//! (the evaluator's own work limit, `MAX_EVALUATION_WORK`, stops runaway loops).
#![no_main]

use libfuzzer_sys::fuzz_target;
use waggle_feel::{parse_unary_tests, EvalContext, Expression, Value};
use waggle_fuzz::feel_context;

fuzz_target!(|data: &[u8]| {
    let source = String::from_utf8_lossy(data);
    let vars = feel_context();
    let ctx = EvalContext { now_millis: Some(1_700_000_000_000), seed: Some(7) };
    if let Ok(expression) = Expression::parse(&source) {
        let evaluation = expression.evaluate_detailed(&vars, &ctx);
        // a result must be writable as Zeebe writes it
        let _ = evaluation.value.to_json();
    }
    if let Ok(tests) = parse_unary_tests(&source) {
        for input in [Value::Null, Value::from_json(&vars["n"]), Value::from_json(&vars["s"])] {
            let _ = tests.evaluate_detailed(&input, &vars, &ctx);
        }
    }
});
