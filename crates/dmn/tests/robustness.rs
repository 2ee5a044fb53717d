//! Parsing and evaluating damaged DMN never panics: every file of the differential corpus,
//! cut short at many points and with characters swapped (deterministically), is parsed, and
//! what parses is evaluated.

use std::path::PathBuf;

use waggle_feel::EvalContext;

fn corpus() -> Vec<(String, String)> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir.join("../../tests/dmn-diff/corpus"))
        .expect("corpus")
        .map(|e| e.expect("entry").path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).expect("file")))
        .collect();
    files.sort();
    files
}

fn parse_and_evaluate(xml: &str) {
    if let Ok(drg) = waggle_dmn::parse(xml) {
        let vars = serde_json::json!({"x": 3, "season": "Fall", "month": 10, "adults": 2, "children": 1});
        for d in drg.decisions() {
            let _ = drg.evaluate(&d.id, &vars, &EvalContext { now_millis: Some(0), seed: Some(0) });
        }
    }
}

#[test]
fn truncated_and_mangled_files_never_panic() {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const SWAPS: &[&str] = &["<", ">", "\"", "/", "&", "#", "-", " ", "x", "]]>", "<!--", "?"];
    for (_, xml) in corpus() {
        let chars: Vec<char> = xml.chars().collect();
        for cut in (0..chars.len()).step_by(97) {
            let s: String = chars[..cut].iter().collect();
            parse_and_evaluate(&s);
        }
        for _ in 0..40 {
            let at = (next() as usize) % chars.len();
            let swap = SWAPS[(next() as usize) % SWAPS.len()];
            let mut s: String = chars[..at].iter().collect();
            s.push_str(swap);
            s.extend(&chars[at + 1..]);
            parse_and_evaluate(&s);
        }
    }
}
