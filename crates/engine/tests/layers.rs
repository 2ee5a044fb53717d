//! The engine's files form layers (ARCHITECTURE.md, "Engine layers"): each module uses only
//! modules of lower layers, so that no set of files calls each other in a circle. Reads the
//! crate's own sources and checks every `crate::` path against the table below.

use std::collections::BTreeMap;
use std::path::Path;

/// Modules by layer, lowest first. A module may use only modules of a lower layer.
const LAYERS: &[&[&str]] = &[
    &["batch", "json_doc", "limits", "tables"],
    &["processes"],
    &["appliers"],
    &["processing"],
    &["variables", "distribution"],
    &["behaviors::incidents", "behaviors::flows"],
    &["behaviors::catches", "behaviors::expressions"],
    &["behaviors::jobs", "behaviors::waits", "behaviors::decisions"],
    &["behaviors::starts"],
    &["behaviors"],
    &["elements::behavior"],
    &["elements::event_trigger"],
    &[
        "elements::tasks",
        "elements::gateways",
        "elements::boundary",
        "elements::subprocesses",
        "elements::process",
        "elements::call_activity",
        "elements::multi_instance",
        "elements::compensation",
        "elements::user_task",
    ],
    &["elements::events"],
    &["elements::table"],
    &["elements::lifecycle"],
    &["elements"],
    &[
        "processors::job_batch",
        "processors::signal",
        "processors::subscription",
        "processors::timer",
        "processors::resources",
        "processors::decision",
    ],
    &[
        "processors::deployment",
        "processors::instance",
        "processors::job",
        "processors::message",
        "processors::user_task",
        "processors::scale",
        "processors::relocation",
    ],
    &["processors"],
];

/// The module a source file belongs to (`a/mod.rs` → `a`; a file in the directory of a
/// non-`mod.rs` module, such as its tests, → that module).
fn module_of(relative: &str, ranks: &BTreeMap<String, usize>) -> Option<String> {
    let path = relative.trim_end_matches(".rs").trim_end_matches("/mod");
    let module = path.replace('/', "::");
    if ranks.contains_key(&module) {
        return Some(module);
    }
    let parent = module.rsplit_once("::").map(|(p, _)| p.to_string())?;
    ranks.contains_key(&parent).then_some(parent)
}

/// The modules a line names through `crate::` paths (`crate::a::b::item`, `crate::a::{b, c}`).
fn used_modules(line: &str, ranks: &BTreeMap<String, usize>) -> Vec<String> {
    let mut found = Vec::new();
    for (start, _) in line.match_indices("crate::") {
        let rest = &line[start + "crate::".len()..];
        let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        let path = path.trim_end_matches(':');
        let segments: Vec<&str> = path.split("::").collect();
        let mut longest = None;
        for n in 1..=segments.len() {
            let candidate = segments[..n].join("::");
            if ranks.contains_key(&candidate) {
                longest = Some(candidate);
            }
        }
        let Some(module) = longest else { continue };
        let after = &rest[path.len()..];
        if let Some(group) = after.strip_prefix("::{") {
            // `crate::a::{b, c}`: the submodules named in the group, and `a` itself when the
            // group names anything else (`self`, an item)
            let names = group.split('}').next().unwrap_or("");
            let mut itself = false;
            for name in names.split(',').map(|n| n.trim().split("::").next().unwrap_or("").trim()).filter(|n| !n.is_empty()) {
                let child = format!("{module}::{name}");
                if ranks.contains_key(&child) {
                    found.push(child);
                } else {
                    itself = true;
                }
            }
            if !itself {
                continue;
            }
        }
        found.push(module);
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn engine_modules_form_layers() {
    let ranks: BTreeMap<String, usize> =
        LAYERS.iter().enumerate().flat_map(|(rank, modules)| modules.iter().map(move |m| (m.to_string(), rank))).collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
        if relative == "lib.rs" {
            continue; // the top: the engine itself
        }
        let module = module_of(&relative, &ranks).unwrap_or_else(|| panic!("{relative} is in no layer: add it to LAYERS"));
        let rank = ranks[&module];
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for used in used_modules(line, &ranks) {
                if used != module && ranks[&used] >= rank {
                    violations.push(format!("{relative}:{}: {module} (layer {rank}) uses {used} (layer {})", n + 1, ranks[&used]));
                }
            }
        }
    }
    assert!(violations.is_empty(), "modules used from the same or a lower layer:\n{}", violations.join("\n"));
}

#[test]
fn a_use_group_names_its_submodules() {
    let ranks: BTreeMap<String, usize> =
        LAYERS.iter().enumerate().flat_map(|(rank, modules)| modules.iter().map(move |m| (m.to_string(), rank))).collect();
    assert_eq!(used_modules("use crate::elements::{boundary, gateways};", &ranks), ["elements::boundary", "elements::gateways"]);
    assert_eq!(used_modules("use crate::behaviors::waits::{self, close};", &ranks), ["behaviors::waits"]);
    assert_eq!(used_modules("use crate::elements::{self, ThrownError};", &ranks), ["elements"]);
    assert_eq!(used_modules("x(crate::json_doc::document_texts(t))", &ranks), ["json_doc"]);
}
