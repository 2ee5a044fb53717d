//! The built-in web UI (issue 28) in a real headless Chromium: `tests/ui/ui_test.cjs` drives
//! Debian's `chromium` through playwright-core (both installed by `scripts/install-clients.sh
//! browser`) against the real binary: the diagram with badges, the instance list filtered by
//! element and by a variable's value, an instance's incident, a variable edited, Retry, the instance completing without a reload, a cancel from the list and
//! one through the list's selection, the incidents grouped on their page.
//! Screenshots of every step go to `<target dir>/ui-screenshots/` (printed). Then the query store
//! is asked, over `/v2`, whether the browser's commands really happened. A second test walks
//! the instance page (`tests/ui/instance_test.cjs`): taken flows, the element instance tree,
//! token modification.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{client_models, http_request, peers, repo_root, run_with_timeout, Node};
use serde_json::Value;

/// Where the screenshots go: beside the test binary, in the target directory.
fn screenshot_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // <target>/debug/deps/ui-<hash>
    let target = exe.ancestors().nth(3).expect("target dir").to_path_buf();
    target.join("ui-screenshots")
}

/// A process instance read over `/v2`.
fn instance(node: &Node, key: i64) -> Value {
    let (status, body) = http_request(node.rest_port, "GET", &format!("/v2/process-instances/{key}")).expect("GET instance");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("instance json")
}

/// POSTs a JSON body to the REST port; expects 200 and returns the answer.
fn post_json(node: &Node, path: &str, body: &str) -> Value {
    let mut stream = TcpStream::connect(("127.0.0.1", node.rest_port)).expect("connect to the REST port");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, answer) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    assert!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "POST {path}: {response}");
    serde_json::from_str(answer).expect("json answer")
}

fn key_of(v: &Value) -> i64 {
    common::json_key(v)
}

#[test]
fn the_web_ui_shows_and_repairs_instances_live_in_chromium() {
    let chromium = PathBuf::from("/usr/bin/chromium");
    let modules = peers().join("node/node_modules");
    assert!(chromium.exists(), "{} is missing: run scripts/install-clients.sh browser", chromium.display());
    assert!(
        modules.join("playwright-core/package.json").exists(),
        "playwright-core is missing in {}: run scripts/install-clients.sh browser",
        modules.display()
    );

    let node = Node::start(&[]);
    // the pages and assets are served by the node itself
    let (status, html) = http_request(node.rest_port, "GET", "/").expect("GET /");
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("/ui/assets/bpmn-navigated-viewer.js"), "{html}");
    let (status, _) = http_request(node.rest_port, "GET", "/ui/assets/bpmn-navigated-viewer.js").expect("the viewer");
    assert_eq!(status, 200);
    let (status, _) = http_request(node.rest_port, "GET", "/instances/12ab").expect("a bad key");
    assert_eq!(status, 404);

    let shots = screenshot_dir();
    let _ = std::fs::remove_dir_all(&shots);
    let stdout = run_browser_script(&node, "ui_test.cjs", &shots, 12);

    // what the browser did, as the query store has it
    let keys: Value = serde_json::from_str(stdout.lines().find(|l| l.starts_with('{')).expect("keys line")).expect("keys json");
    let repaired = instance(&node, key_of(&keys["repaired"]));
    assert_eq!(repaired["state"], "COMPLETED", "{repaired}");
    let canceled = instance(&node, key_of(&keys["canceled"]));
    assert_eq!(canceled["state"], "TERMINATED", "{canceled}");
    let bulk = instance(&node, key_of(&keys["bulkCanceled"]));
    assert_eq!(bulk["state"], "TERMINATED", "{bulk}");
    let vars = post_json(
        &node,
        "/v2/variables/search",
        &format!(r#"{{"filter":{{"processInstanceKey":"{}","name":"card"}}}}"#, key_of(&keys["repaired"])),
    );
    assert_eq!(vars["items"][0]["value"], "\"valid\"", "{vars}");
}

/// The instance page (issue 28): `tests/ui/instance_test.cjs` in Chromium against the real
/// binary: the taken sequence flows marked on the diagram, the element instance tree (a call
/// activity linked to its called instance, a subprocess, a multi-instance body and its inner
/// instances), a node's scope selected, a refused activation's rejection shown, a token added
/// with a variable and one moved, the instance completing without a reload. Screenshots go to
/// `<target dir>/ui-screenshots-instance/`. Then the store is asked, over `/v2`, what happened.
#[test]
fn the_instance_page_draws_taken_flows_and_modifies_tokens_in_chromium() {
    let modules = peers().join("node/node_modules");
    assert!(PathBuf::from("/usr/bin/chromium").exists(), "/usr/bin/chromium is missing: run scripts/install-clients.sh browser");
    assert!(modules.join("playwright-core/package.json").exists(), "playwright-core is missing: run scripts/install-clients.sh browser");
    let node = Node::start(&[]);
    let shots = screenshot_dir().with_file_name("ui-screenshots-instance");
    let _ = std::fs::remove_dir_all(&shots);
    let stdout = run_browser_script(&node, "instance_test.cjs", &shots, 6);

    // what the browser did, as the query store has it
    let keys: Value = serde_json::from_str(stdout.lines().find(|l| l.starts_with('{')).expect("keys line")).expect("keys json");
    let key = key_of(&keys["instance"]);
    assert_eq!(instance(&node, key)["state"], "COMPLETED");
    let child = instance(&node, key_of(&keys["child"]));
    assert_eq!((child["parentProcessInstanceKey"].as_str(), child["state"].as_str()), (Some(key.to_string().as_str()), Some("COMPLETED")));
    let (status, body) =
        http_request(node.rest_port, "GET", &format!("/v2/process-instances/{key}/sequence-flows")).expect("sequence flows");
    assert_eq!(status, 200, "{body}");
    let flows: Value = serde_json::from_str(&body).expect("sequence flows json");
    let ids: Vec<&str> = flows["items"].as_array().expect("items").iter().map(|f| f["elementId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["f1", "f2", "f3", "f4", "f5", "f7"], "approve's token was moved, never taking f6: {flows}");
    let ships =
        post_json(&node, "/v2/element-instances/search", &format!(r#"{{"filter":{{"processInstanceKey":"{key}","elementId":"ship"}}}}"#));
    assert_eq!(ships["page"]["totalItems"], 2, "a token added at ship and one moved there: {ships}");
    let approve = post_json(
        &node,
        "/v2/element-instances/search",
        &format!(r#"{{"filter":{{"processInstanceKey":"{key}","elementId":"approve"}}}}"#),
    );
    assert_eq!(approve["items"][0]["state"], "TERMINATED", "{approve}");
    let extra = post_json(&node, "/v2/variables/search", &format!(r#"{{"filter":{{"processInstanceKey":"{key}","name":"extra"}}}}"#));
    assert_eq!(extra["items"][0]["value"], "7", "{extra}");
}

/// Runs `tests/ui/<script>` in Chromium against `node`, asserts that it printed `OK` and left
/// `screenshots` PNG screenshots in `shots`, and returns what it printed.
fn run_browser_script(node: &Node, script: &str, shots: &std::path::Path, screenshots: usize) -> String {
    let mut command = Command::new("node");
    command
        .env("NODE_PATH", peers().join("node/node_modules"))
        .arg(repo_root().join("tests/ui").join(script))
        .args(["--rest", &node.rest_port.to_string()])
        .arg("--models")
        .arg(client_models())
        .arg("--shots")
        .arg(shots);
    let started = Instant::now();
    let out = run_with_timeout(&mut command, Duration::from_secs(240));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    println!("{script} screenshots: {} ({:.1} s)", shots.display(), started.elapsed().as_secs_f64());
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "OK"),
        "the browser test {script} failed:\n{stdout}\n{stderr}\nnode log:\n{}",
        node.log()
    );
    let mut pngs: Vec<_> = std::fs::read_dir(shots).expect("screenshots").map(|e| e.expect("entry").path()).collect();
    pngs.sort();
    assert_eq!(pngs.len(), screenshots, "one screenshot per step: {pngs:?}");
    for p in &pngs {
        let bytes = std::fs::read(p).expect("png");
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 5_000, "{} is no screenshot", p.display());
    }
    stdout
}

/// Reads a server-sent event stream on a thread: first the response head, then each event's
/// name, as they arrive.
fn subscribe(port: u16) -> std::sync::mpsc::Receiver<(String, Instant)> {
    use std::io::BufRead;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the REST port");
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "GET /ui/api/changes HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stream).lines();
        let mut head = Vec::new();
        for line in lines.by_ref() {
            match line {
                Ok(l) if !l.is_empty() => head.push(l),
                _ => break,
            }
        }
        if tx.send((head.join("\n"), Instant::now())).is_err() {
            return;
        }
        for line in lines.map_while(Result::ok) {
            if let Some(event) = line.strip_prefix("event: ") {
                if tx.send((event.to_owned(), Instant::now())).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// Issue 28's live pages: `/ui/api/changes` sends `hello` at once and a `change` after the
/// store's commits; however many commits come, its events stay at least 100 ms apart (the
/// page refetches at most ten times a second). A node without the store answers 503 (the page
/// polls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_events_follow_the_stores_commits_at_a_bounded_rate() {
    let node = Node::start(&[]);
    let subscribed = Instant::now();
    let events = subscribe(node.rest_port);
    let (head, _) = events.recv_timeout(Duration::from_secs(10)).expect("the response head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/event-stream"), "{head}");
    assert_eq!(events.recv_timeout(Duration::from_secs(10)).expect("hello").0, "hello");

    let mut c = common::grpc_client(&node).await;
    common::deploy_one_task(&mut c).await;
    let (event, _) = events.recv_timeout(Duration::from_secs(10)).expect("a change after the deployment");
    assert_eq!(event, "change");

    // 300 instances as fast as they go: many commits
    let creations: Vec<_> = (0..300)
        .map(|_| {
            let mut c = c.clone();
            tokio::spawn(async move { c.create_process_instance(common::one_task_creation()).await.expect("create") })
        })
        .collect();
    for creation in creations {
        creation.await.unwrap();
    }
    let mut changes = 1;
    let mut last_read = Instant::now();
    while let Ok((event, at)) = events.recv_timeout(Duration::from_secs(2)) {
        assert_eq!(event, "change");
        changes += 1;
        last_read = at;
    }
    let bound = last_read.duration_since(subscribed).as_millis() / 100 + 1;
    assert!(changes >= 2, "the creations' commits were told");
    assert!(changes as u128 <= bound, "{changes} change events within {:?}: more than one per 100 ms", last_read - subscribed);

    let off = Node::start(&["--query-store", "false"]);
    let (status, body) = http_request(off.rest_port, "GET", "/ui/api/changes").expect("GET changes");
    assert_eq!(status, 503, "{body}");
}
