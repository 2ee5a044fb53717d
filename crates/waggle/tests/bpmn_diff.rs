//! Differential BPMN behaviour: the scenarios of `tests/bpmn-diff/` run on the real binary through
//! the gRPC client script (`run.py`, pyzeebe's generated stubs), and each outcome is compared
//! with the one recorded on the real Zeebe 8.5.8 in November 2026 (`expected/`, a record that is
//! no longer reproducible here: see tests/bpmn-diff/README.md). The set of differing scenarios
//! must be exactly the list in `known-differences.md`.

mod common;

use common::{peers, repo_root, run_with_timeout, Node};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Drops the fields meant for reading only (names starting with `_`, such as a rejection's full
/// message), as `run.py` documents.
fn comparable(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().filter(|(k, _)| !k.starts_with('_')).map(|(k, v)| (k.clone(), comparable(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(comparable).collect()),
        other => other.clone(),
    }
}

fn read_outcomes(dir: &Path) -> BTreeMap<String, Value> {
    let mut outcomes = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_stem().expect("stem").to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).expect("read outcome");
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        outcomes.insert(name, value);
    }
    outcomes
}

/// `- scenario_name: reason` lines of known-differences.md.
fn known_differences(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).expect("known-differences.md");
    text.lines()
        .filter_map(|line| line.strip_prefix("- "))
        .filter_map(|rest| rest.split_once(": "))
        .map(|(name, reason)| (name.trim().to_string(), reason.trim().to_string()))
        .collect()
}

/// The differing lines of two pretty-printed outcomes, step by step.
fn describe(expected: &Value, actual: &Value) -> String {
    let mut out = String::new();
    let steps = |v: &Value| v.get("steps").and_then(Value::as_array).cloned().unwrap_or_default();
    let (e_steps, a_steps) = (steps(expected), steps(actual));
    for i in 0..e_steps.len().max(a_steps.len()) {
        let (e, a) = (e_steps.get(i), a_steps.get(i));
        if e.map(comparable) != a.map(comparable) {
            let show = |v: Option<&Value>| v.map(|v| serde_json::to_string(v).expect("json")).unwrap_or_else(|| "(none)".into());
            out.push_str(&format!("    step {i}\n      zeebe:  {}\n      waggle: {}\n", show(e), show(a)));
        }
    }
    for key in ["instances", "error"] {
        let (e, a) = (expected.get(key), actual.get(key));
        if e != a {
            out.push_str(&format!(
                "    {key}\n      zeebe:  {}\n      waggle: {}\n",
                e.map(|v| v.to_string()).unwrap_or_default(),
                a.map(|v| v.to_string()).unwrap_or_default()
            ));
        }
    }
    out
}

#[test]
fn bpmn_behaviour_matches_zeebe_except_known_differences() {
    let python = peers().join("py/bin/python");
    assert!(python.exists(), "{} missing: run scripts/install-clients.sh python", python.display());
    let dir = repo_root().join("tests/bpmn-diff");
    let expected = read_outcomes(&dir.join("expected"));
    let known = known_differences(&dir.join("known-differences.md"));

    let node = Node::start(&[]);
    let out = tempfile::tempdir().expect("tempdir");
    let mut command = Command::new(python);
    command.arg(dir.join("run.py")).arg("--address").arg(node.address()).arg("--out").arg(out.path());
    command.arg("--rest").arg(format!("http://127.0.0.1:{}", node.rest_port));
    let output = run_with_timeout(&mut command, Duration::from_secs(300));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let actual = read_outcomes(out.path());

    let scenarios: BTreeSet<String> = std::fs::read_dir(dir.join("scenarios"))
        .expect("scenarios")
        .filter_map(|e| e.ok()?.path().file_stem().map(|s| s.to_string_lossy().to_string()))
        .collect();
    let missing: Vec<&String> = scenarios.iter().filter(|s| !expected.contains_key(*s)).collect();
    assert!(missing.is_empty(), "scenarios without an expected outcome (tests/bpmn-diff/README.md says how one is written): {missing:?}");

    let mut differing = BTreeSet::new();
    let mut report = String::new();
    for name in &scenarios {
        let zeebe = &expected[name];
        let waggle = actual.get(name).cloned().unwrap_or_else(|| serde_json::json!({"error": "no outcome written"}));
        if comparable(zeebe) != comparable(&waggle) {
            let reason = known.get(name).map(|r| format!("known: {r}")).unwrap_or_else(|| "NEW".into());
            report.push_str(&format!("  {name} ({reason})\n{}", describe(zeebe, &waggle)));
            differing.insert(name.clone());
        }
    }
    println!("{} scenarios, {} equal, {} differ:\n{report}", scenarios.len(), scenarios.len() - differing.len(), differing.len());

    let listed: BTreeSet<String> = known.keys().cloned().collect();
    let new: Vec<&String> = differing.difference(&listed).collect();
    let gone: Vec<&String> = listed.difference(&differing).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "the differing scenarios are not the list of tests/bpmn-diff/known-differences.md\n\
         new differences (fix Waggle, or add `- name: reason` to the list): {new:?}\n\
         differences that disappeared (remove them from the list): {gone:?}\n\
         differences:\n{report}\nrun.py stderr:\n{stderr}"
    );
}
