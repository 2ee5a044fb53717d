//! The real Zeebe clients (the Java client with a polling and a streaming worker, pyzeebe with
//! both, the Node SDK with both) drive the real binary through every flow of the single-node issue.
//! Each driver lives in `tests/clients/` and prints `OK <step>` per step it verified.

mod common;

use common::{client_models, drive_steps, peers, repo_root, Node};
use std::process::Command;
use std::time::Duration;

/// The steps each driver verifies, in order.
const STEPS: &[&str] = &[
    "topology",
    "deploy",
    "create-and-complete",
    "create-with-result",
    "incident",
    "set-variables",
    "modify-process-instance",
    "migrate-process-instance",
    "cancel",
    "publish-message",
    "decisions",
    "bad-input",
    "all",
];

/// The steps only the Java driver verifies (pyzeebe has no ModifyProcessInstance,
/// MigrateProcessInstance or EvaluateDecision).
const JAVA_ONLY: &[&str] = &["modify-process-instance", "migrate-process-instance", "decisions"];

/// The steps a driver verifies: all of them for the Java driver.
fn steps(java: bool) -> Vec<&'static str> {
    STEPS.iter().copied().filter(|s| java || !JAVA_ONLY.contains(s)).collect()
}

fn drive(mut command: Command, node: &Node, stream: bool, steps: &[&str]) {
    command.arg("--address").arg(node.address()).arg("--models").arg(client_models()).arg("--management").arg(node.management_url());
    if stream {
        command.arg("--stream");
    }
    drive_steps(&mut command, node, Duration::from_secs(240), steps);
}

fn java(stream: bool) {
    let lib = peers().join("java-client/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let node = Node::start(&[]);
    let mut command = Command::new("java");
    command.arg("-cp").arg(format!("{}/*", lib.display())).arg(repo_root().join("tests/clients/Driver.java"));
    drive(command, &node, stream, &steps(true));
}

fn python(stream: bool) {
    let python = peers().join("py/bin/python");
    assert!(python.exists(), "{} missing: run scripts/install-clients.sh", python.display());
    let node = Node::start(&[]);
    let mut command = Command::new(python);
    command.arg(repo_root().join("tests/clients/driver.py"));
    drive(command, &node, stream, &steps(false));
}

fn nodejs(stream: bool) {
    let modules = peers().join("node/node_modules");
    assert!(modules.join("@camunda8/sdk").exists(), "{} missing: run scripts/install-clients.sh", modules.display());
    let node = Node::start(&[]);
    let mut command = Command::new("node");
    command.env("NODE_PATH", &modules).arg(repo_root().join("tests/clients/driver.cjs"));
    drive(command, &node, stream, &steps(false));
}

#[test]
fn java_client_with_polling_worker() {
    java(false);
}

#[test]
fn java_client_with_streaming_worker() {
    java(true);
}

#[test]
fn pyzeebe_with_polling_worker() {
    python(false);
}

#[test]
fn pyzeebe_with_streaming_worker() {
    python(true);
}

#[test]
fn node_sdk_with_polling_worker() {
    nodejs(false);
}

#[test]
fn node_sdk_with_streaming_worker() {
    nodejs(true);
}

/// The cluster tests' load driver (`tests/clients/ClusterDriver.java`) against one node, with a
/// `kill -9` and restart in the middle: every creation, completion and publication it had
/// acknowledged is accounted for afterwards, and no job was handed out twice within its time-out.
#[test]
fn cluster_driver_accounts_for_everything_through_a_kill_9() {
    let lib = peers().join("java-client/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let mut node = Node::start(&[]);
    let report = node.data_dir.parent().expect("the node's temp dir").join("report.json");
    let mut command = Command::new("java");
    command
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(repo_root().join("tests/clients/ClusterDriver.java"))
        .args(["--address", &node.address(), "--seconds", "12", "--report"])
        .arg(&report)
        .arg("--models")
        .arg(client_models())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let driver = command.spawn().expect("java");
    // under load (the driver starts in a few seconds: the JVM compiles the source first)
    std::thread::sleep(Duration::from_secs(9));
    node.restart();
    let output = driver.wait_with_output().expect("the driver's exit");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the driver exited {}\nstdout:\n{stdout}\nstderr:\n{}\nwaggle log:\n{}",
        output.status,
        &stderr[stderr.len().saturating_sub(4000)..],
        node.log()
    );
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).expect("JSON");
    assert!(report["created"].as_u64() > Some(100) && report["published"].as_u64() > Some(10), "too little load: {report}");
}
