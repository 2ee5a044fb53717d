//! Zeebe user tasks through real clients against the real binary: the Zeebe 8.5.8 Java client's
//! user task commands (over REST, Zeebe 8.5's `/v1/user-tasks`) and the Camunda 8.8 Java
//! client's user task search and commands (`/v2/user-tasks`), both reading the query store.

mod common;

use std::time::Duration;

use common::Node;

fn run_java(lib: &str, program: &str, node: &Node) {
    let lib = common::peers().join(lib);
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let output = common::run_with_timeout(
        std::process::Command::new("java")
            .arg("-cp")
            .arg(format!("{}/*", lib.display()))
            .arg(common::repo_root().join("tests/clients").join(program))
            .arg(node.grpc_port.to_string())
            .arg(node.rest_port.to_string())
            .arg(common::client_models().join("review.bpmn")),
        Duration::from_secs(180),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.lines().any(|l| l == "OK"),
        "{program} failed ({}):\n{stdout}\n{}\nnode log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        node.log()
    );
}

/// The 8.5 client assigns, claims (refused), unassigns, updates and completes a Zeebe user task.
#[test]
fn the_zeebe_8_5_java_client_drives_a_zeebe_user_task() {
    let node = Node::start(&[]);
    run_java("java-client/lib", "UserTasks.java", &node);
}

/// The 8.8 client searches user tasks, gets one, assigns and completes it.
#[test]
fn the_camunda_8_8_java_client_searches_and_completes_user_tasks() {
    let node = Node::start(&[]);
    run_java("java-client-88/lib", "UserTaskSearch.java", &node);
}
