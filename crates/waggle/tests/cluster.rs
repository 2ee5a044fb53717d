//! A replicated cluster under load and a leader's `kill -9` (issue 25): three `waggle broker`
//! processes on loopback (3 partitions, replication factor 3), driven by the real Java client
//! through one broker's gateway (`tests/clients/ClusterDriver.java`: creations with and without
//! result, message publications, streaming workers). Mid-run the leader of partition 1, another
//! broker, is killed with `kill -9` and restarted. Every acknowledged creation, completion
//! and publication must be accounted for, no job handed out twice within its time-out, and the
//! restarted broker's state must equal the others' at the same applied index.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{client_models, free_port, peers, repo_root, Node};

const BROKERS: usize = 3;
const PARTITIONS: u16 = 3;

fn json(node: &Node, path: &str) -> serde_json::Value {
    let (status, body) = node.get(path);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// The leader of `partition` as broker `node` knows it.
fn leader_seen_by(node: &Node, partition: u16) -> Option<usize> {
    let partitions = json(node, "/v1/partitions");
    let item = partitions["items"].as_array()?.iter().find(|p| p["partitionId"] == partition)?.clone();
    item["leader"].as_u64().map(|l| l as usize)
}

/// Waits until every broker agrees on a leader for every partition, none of them `gone`;
/// returns them.
fn leaders(nodes: &[&Node], gone: Option<usize>) -> Vec<usize> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<Vec<Option<usize>>> = nodes.iter().map(|n| (1..=PARTITIONS).map(|p| leader_seen_by(n, p)).collect()).collect();
        if seen.iter().all(|s| s == &seen[0] && s.iter().all(|l| l.is_some() && *l != gone)) {
            return seen[0].iter().map(|l| l.expect("a leader")).collect();
        }
        assert!(Instant::now() < deadline, "no agreed leaders: {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until every broker's replica of `partition` has the same applied index and state digest.
fn digests_agree(nodes: &[&Node], partition: u16) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let digests: Vec<serde_json::Value> = nodes.iter().map(|n| json(n, &format!("/v1/partitions/{partition}/digest"))).collect();
        if digests.iter().all(|d| d == &digests[0]) {
            return digests[0].clone();
        }
        assert!(Instant::now() < deadline, "partition {partition}'s replicas differ: {digests:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_three_broker_cluster_keeps_every_acknowledged_command_through_a_leaders_kill_9() {
    let lib = peers().join("java-client/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let internal: Vec<String> = (0..BROKERS).map(|_| free_port().to_string()).collect();
    let contact_points = internal.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    let args = |i: usize| -> Vec<String> {
        [
            "broker",
            "--node-id",
            &i.to_string(),
            "--cluster-size",
            &BROKERS.to_string(),
            "--partitions",
            &PARTITIONS.to_string(),
            "--replication-factor",
            "3",
            "--contact-points",
            &contact_points,
            "--internal-port",
            &internal[i],
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let mut nodes: Vec<Node> = (0..BROKERS)
        .map(|i| {
            let a = args(i);
            Node::start(&a.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    let before = leaders(&nodes.iter().collect::<Vec<_>>(), None);
    eprintln!("leaders of partitions 1-{PARTITIONS}: brokers {before:?}");

    // the victim leads partition 1 (and maybe more); the client talks to another broker
    let victim = before[0];
    let gateway = (victim + 1) % BROKERS;
    let report = nodes[gateway].data_dir.parent().expect("a temp dir").join("cluster-report.json");
    let mut driver = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(repo_root().join("tests/clients/ClusterDriver.java"))
        .args(["--address", &nodes[gateway].address(), "--seconds", "20", "--report"])
        .arg(&report)
        .arg("--models")
        .arg(client_models())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java");
    // under load (the JVM compiles the driver first), kill the victim, then restart it
    std::thread::sleep(Duration::from_secs(10));
    let killed = Instant::now();
    nodes[victim].kill9();
    let survivors: Vec<&Node> = nodes.iter().enumerate().filter(|&(i, _)| i != victim).map(|(_, n)| n).collect();
    let after = leaders(&survivors, Some(victim));
    eprintln!("broker {victim} killed; leaders now {after:?}, agreed {} ms after the kill", killed.elapsed().as_millis());
    std::thread::sleep(Duration::from_secs(2));
    nodes[victim].restart_with(&args(victim).iter().map(String::as_str).collect::<Vec<_>>());

    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(status) = driver.try_wait().expect("the driver's state") {
            break status;
        }
        assert!(Instant::now() < deadline, "the driver did not finish");
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = driver.wait_with_output().expect("the driver's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let logs: String = nodes
        .iter()
        .map(|n| {
            let l = n.log();
            format!("--- {}\n{}\n", n.address(), &l[l.len().saturating_sub(3000)..])
        })
        .collect();
    assert!(
        status.success(),
        "the driver exited {status}\nstdout:\n{stdout}\nstderr:\n{}\nlogs:\n{logs}",
        &stderr[stderr.len().saturating_sub(4000)..]
    );
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).expect("JSON");
    eprintln!("driver: {report}");
    assert!(report["created"].as_u64() > Some(100) && report["published"].as_u64() > Some(10), "too little load: {report}");

    // the restarted broker caught up: every partition's replicas agree at the same applied index
    for partition in 1..=PARTITIONS {
        let digest = digests_agree(&nodes.iter().collect::<Vec<_>>(), partition);
        eprintln!("partition {partition}: {digest}");
    }
}
