//! DMN XML: any text parsed as a DMN file; when it parses, each of its decisions (the first
//! eight) is evaluated against a small fixed context. Property: no panic, bounded time and
//! memory (the parser's size, depth and count limits; the evaluation's work limits).
#![no_main]

use libfuzzer_sys::fuzz_target;
use waggle_feel::EvalContext;

fuzz_target!(|data: &[u8]| {
    let Ok(xml) = std::str::from_utf8(data) else { return };
    let Ok(drg) = waggle_dmn::parse(xml) else { return };
    let vars = waggle_fuzz::feel_context();
    let ctx = EvalContext { now_millis: Some(1_700_000_000_000), seed: Some(7) };
    for decision in drg.decisions().iter().take(8) {
        let result = drg.evaluate(&decision.id, &vars, &ctx);
        let _ = result.output.to_json();
    }
});
