//! Correlation keys move to the new partition layout exactly once while the partition count
//! grows (issue 31 ★; the step Zeebe 8.8 plans as `AWAIT_RELOCATION_COMPLETION`, "message
//! correlation key relocation"), with the real Java client.
//!
//! Three `waggle broker` processes on loopback, 3 partitions, replication factor 3. The Java
//! client (`tests/clients/RelocationDriver.java`, through broker 0's gateway) first opens
//! instances waiting for a message for many correlation keys (subscriptions open before the
//! growth) and publishes messages with a time to live and no subscriber yet for as many others
//! (buffered); then, while the cluster grows to 6 partitions, it keeps creating instances and
//! publishing their messages for fresh keys; once grown, it publishes the first keys' messages
//! and creates the instances the buffered messages wait for. Broker 2 is killed (`kill -9`)
//! while the keys move and restarted. Then: every published message reached exactly one
//! instance, the client saw only retryable errors, messages published after the growth live on
//! partitions 4-6 too (their keys' partition bits), the cluster's routing state spreads
//! messages over 6 partitions, and the new partitions' replicas agree.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::cluster::{
    digests_agree, get_json, log_tails, management_request, wait_change_completed, Cluster, ClusterOptions, JavaDriverProcess,
};
use common::{peers, repo_root, Node};
use serde_json::Value;

const BROKERS: usize = 3;
const PARTITIONS: u16 = 3;
const GROWN: u16 = 6;
/// Correlation keys waiting before the growth (and as many buffered messages).
const KEYS: usize = 300;

/// The Java client's `RelocationDriver.java` against a gateway.
struct Driver {
    process: JavaDriverProcess,
    ready: PathBuf,
    grown: PathBuf,
    report: PathBuf,
}

impl Driver {
    fn start(address: &str, dir: &Path) -> Driver {
        let lib = peers().join("java-client/lib");
        assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
        let (ready, grown, report) = (dir.join("relocation-ready"), dir.join("relocation-grown"), dir.join("relocation-report.json"));
        let mut command = Command::new("java");
        command
            .arg("-cp")
            .arg(format!("{}/*", lib.display()))
            .arg(repo_root().join("tests/clients/RelocationDriver.java"))
            .args(["--address", address, "--keys", &KEYS.to_string(), "--ready"])
            .arg(&ready)
            .arg("--grown")
            .arg(&grown)
            .arg("--report")
            .arg(&report);
        let process = JavaDriverProcess::spawn(&mut command, dir, "relocation-driver");
        Driver { process, ready, grown, report }
    }

    /// Waits (180 s at most) until the instances wait and the messages are buffered.
    fn wait_ready(&mut self, logs: impl Fn() -> String) {
        let deadline = Instant::now() + Duration::from_secs(180);
        while !self.ready.exists() {
            if let Some(status) = self.process.try_wait() {
                let (stdout, stderr) = self.process.output();
                panic!("the driver exited {status} before it was ready\nstdout:\n{stdout}\nstderr:\n{stderr}\nlogs:\n{}", logs());
            }
            assert!(Instant::now() < deadline, "the driver was not ready\nlogs:\n{}", logs());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Tells the driver the count grew, waits (300 s at most) for it to finish, and returns its
    /// report (asserting that it succeeded).
    fn finish(mut self, logs: impl FnOnce() -> String) -> Value {
        std::fs::write(&self.grown, "grown").unwrap();
        self.process.wait_success(Duration::from_secs(300), logs);
        serde_json::from_str(&std::fs::read_to_string(&self.report).expect("the report")).expect("JSON")
    }
}

/// Waits (120 s at most) until `node`'s pending change carries out `operation`; false when the
/// change completed first.
fn wait_for_step(node: &Node, operation: &str, logs: impl Fn() -> String) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let cluster = get_json(node, "/actuator/cluster");
        if cluster["pendingChange"].is_null() {
            return false;
        }
        if cluster["pendingChange"]["pending"][0]["operation"] == operation {
            return true;
        }
        assert!(Instant::now() < deadline, "no {operation}: {cluster}\nlogs:\n{}", logs());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn correlation_keys_move_to_six_partitions_and_every_message_correlates_once() {
    let mut cluster = Cluster::start(ClusterOptions::new(BROKERS, PARTITIONS));
    let dir = cluster.nodes[0].data_dir.parent().expect("a temp dir").to_path_buf();
    let mut driver = Driver::start(&cluster.nodes[0].address(), &dir);
    driver.wait_ready(|| log_tails(&cluster.nodes));

    // 3 -> 6 partitions while the lanes create and publish
    let started = Instant::now();
    let (status, planned) = management_request(&cluster.nodes[0], "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 6}}"#);
    assert_eq!(status, 202, "3 -> 6 partitions: {planned}");
    let operations: Vec<&str> = planned["plannedChanges"].as_array().unwrap().iter().map(|o| o["operation"].as_str().unwrap()).collect();
    assert_eq!(operations[4], "AWAIT_RELOCATION_COMPLETION", "{planned}");
    let change = planned["changeId"].as_u64().unwrap();
    // broker 2 dies while the keys move (the step shows in /actuator/cluster) and comes back
    let seen = wait_for_step(&cluster.nodes[0], "AWAIT_RELOCATION_COMPLETION", || log_tails(&cluster.nodes));
    cluster.nodes[2].kill9();
    eprintln!("broker 2 killed {} ms after the growth began (relocation step seen: {seen})", started.elapsed().as_millis());
    std::thread::sleep(Duration::from_secs(2));
    cluster.restart(2);
    let done = wait_change_completed(&cluster.nodes[0], change, "3 -> 6 partitions", || log_tails(&cluster.nodes));
    eprintln!("3 -> 6 partitions with the keys moved in {} ms under load", started.elapsed().as_millis());
    let routing = &done["routingState"];
    assert_eq!(
        (&routing["routedPartitions"], &routing["messagePartitions"], &routing["firstPartitions"]),
        (&6.into(), &6.into(), &3.into()),
        "{done}"
    );
    // the gateway publishes by 6 once its broker adopted the final topology
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.nodes.iter().any(|n| get_json(n, "/actuator/cluster")["routingState"]["messagePartitions"] != 6) {
        assert!(Instant::now() < deadline, "a broker does not spread messages over 6 partitions");
        std::thread::sleep(Duration::from_millis(200));
    }

    let report = driver.finish(|| log_tails(&cluster.nodes));
    eprintln!("the messages through the relocation: {report}");
    assert_eq!(report["missingCorrelations"], serde_json::json!([]), "{report}");
    assert_eq!(report["correlatedTwice"], serde_json::json!([]), "{report}");
    assert!(report["published"].as_u64().unwrap() >= 2 * KEYS as u64, "{report}");
    let failures = report["failures"].as_object().unwrap();
    assert!(
        failures.keys().all(|k| ["UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "ALREADY_EXISTS"].contains(&k.as_str())),
        "the client saw only retryable errors (ALREADY_EXISTS: a retried publication taken before): {report}"
    );
    let on_new: Vec<u64> = (PARTITIONS + 1..=GROWN).map(|p| report["publishedByPartition"][p.to_string()].as_u64().unwrap_or(0)).collect();
    assert!(on_new.iter().all(|&n| n > 0), "messages live on partitions 4-6 now: {on_new:?} {report}");

    let nodes: Vec<&Node> = cluster.nodes.iter().collect();
    for p in 1..=GROWN {
        let digest = digests_agree(&nodes, p);
        eprintln!("partition {p}: replicas agree: {digest}");
    }
}
