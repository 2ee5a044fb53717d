//! Growing the partition count of a running cluster under load (issue 31), with Zeebe 8.8's
//! `PATCH /actuator/cluster` (docs.camunda.io, "Cluster scaling", 8.8: "Partition count can
//! only be increased and not decreased"; "Reconfigure cluster": `partitions.count`). The
//! correlation keys whose partition differs under the new count move there
//! (`AWAIT_RELOCATION_COMPLETION`, Zeebe 8.8's planned step) before messages are spread over it.
//!
//! Three `waggle broker` processes on loopback, 3 partitions, replication factor 3. While the
//! real Java client drives load through broker 0's gateway (`tests/clients/ClusterDriver.java`:
//! creations with and without result, instances waiting for a message and its publication,
//! streaming workers), the cluster grows to 6 partitions (asked on broker 1, which forwards it
//! to broker 0, the coordinator). Then: every acknowledged creation had its job and every
//! published message reached its instance once (the driver checks), the client saw no error but
//! retryable ones, instances were created on partitions 4-6 and the workers completed jobs of
//! them, the Java client's `Topology` shows 6 partitions, a standalone gateway started before
//! the growth routes to all 6 without a restart (a second load through it), each new
//! partition's replicas agree, and brokers restarted with the configured and with the grown
//! count come back with 6 partitions (a start contradicting the data folder still refuses).

mod common;

use std::time::{Duration, Instant};

use common::cluster::{digests_agree, get_json, java_topology, log_tails, standalone_gateway, Cluster, ClusterDriver, ClusterOptions};
use common::{http_json_within, Node};
use serde_json::Value;

const BROKERS: usize = 3;
const PARTITIONS: u16 = 3;
const GROWN: u16 = 6;

/// `method path` with a JSON `body` on `node`'s management port: the status and the JSON answer.
fn request(node: &Node, method: &str, path: &str, body: &str) -> (u16, Value) {
    let port = node.management_url().rsplit(':').next().unwrap().parse().unwrap();
    let (status, text) =
        http_json_within(port, method, path, body, Duration::from_secs(20)).unwrap_or_else(|| panic!("{method} {path} failed"));
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The partitions broker `node` runs a replica of.
fn held(node: &Node) -> Vec<u64> {
    get_json(node, "/v1/partitions")["items"].as_array().unwrap().iter().map(|p| p["partitionId"].as_u64().unwrap()).collect()
}

/// Waits (180 s at most) until every broker runs a replica of each of the 6 partitions, its
/// `/actuator/cluster` shows 6 partitions and the change `change` completed.
fn grown(nodes: &[Node], change: &Value, what: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(180);
    let all: Vec<u64> = (1..=u64::from(GROWN)).collect();
    loop {
        let clusters: Vec<Value> = nodes.iter().map(|n| get_json(n, "/actuator/cluster")).collect();
        let done = clusters.iter().all(|c| {
            c["pendingChange"].is_null() && c["lastChange"]["id"] == change["changeId"] && c["partitionsCount"] == u64::from(GROWN)
        });
        let runs: Vec<Vec<u64>> = nodes.iter().map(held).collect();
        if done && runs.iter().all(|r| *r == all) {
            return clusters.into_iter().next().unwrap();
        }
        if Instant::now() >= deadline {
            panic!("{what}: not grown: {:#}\nthe brokers run {runs:?}\nlogs:\n{}", clusters[0], log_tails(nodes));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits (20 s at most: leadership may be moving back to the preferred brokers) until the Java
/// client's topology through `address` shows 3 brokers and 6 partitions at replication factor
/// 3, each partition on every broker with one leader.
fn java_topology_shows_six(address: &str) {
    let shown = |lines: &[String]| {
        lines.first().map(String::as_str) == Some("cluster 3 6 3")
            && (1..=GROWN).all(|p| {
                let replicas: Vec<&String> =
                    lines.iter().filter(|l| l.starts_with("partition ") && l.split(' ').nth(2) == Some(&p.to_string())).collect();
                replicas.len() == BROKERS && replicas.iter().filter(|l| l.contains(" LEADER ")).count() == 1
            })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = java_topology(address);
        if shown(&lines) {
            return;
        }
        assert!(Instant::now() < deadline, "the Java client's topology through {address}: {lines:#?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The counts of a report's `byPartition` object for partitions 4 to 6.
fn on_new_partitions(report: &Value, field: &str) -> Vec<u64> {
    (PARTITIONS + 1..=GROWN).map(|p| report[field][p.to_string()].as_u64().unwrap_or(0)).collect()
}

#[test]
fn the_partition_count_grows_from_three_to_six_under_load_and_every_message_correlates_once() {
    let mut cluster = Cluster::start(ClusterOptions::new(BROKERS, PARTITIONS));
    // a standalone gateway too, started before the growth (it learns the grown count without
    // a restart)
    let gateway = standalone_gateway(cluster.internal[1]);
    let node0 = &cluster.nodes[0];

    // a smaller count is refused as Zeebe 8.8 refuses it, and a growth combined with a broker
    // change too; nothing is planned
    for (body, wants) in [
        (r#"{"partitions": {"count": 2}}"#, "Partition count can only be increased"),
        (r#"{"partitions": {"count": 6}, "brokers": {"remove": [2]}}"#, "cannot be changed together"),
    ] {
        let (status, answer) = request(node0, "PATCH", "/actuator/cluster", body);
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer["message"].as_str().unwrap_or_default().contains(wants), "{body}: {answer}");
    }
    let (status, same) = request(node0, "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 3}}"#);
    assert_eq!((status, same["plannedChanges"].as_array().map(Vec::len)), (202, Some(0)), "{same}");
    let (status, dry) = request(node0, "PATCH", "/actuator/cluster?dryRun=true", r#"{"partitions": {"count": 6}}"#);
    assert_eq!(status, 202, "{dry}");
    let operations: Vec<&str> = dry["plannedChanges"].as_array().unwrap().iter().map(|o| o["operation"].as_str().unwrap()).collect();
    assert_eq!(
        operations,
        [
            "PARTITION_BOOTSTRAP",
            "PARTITION_BOOTSTRAP",
            "PARTITION_BOOTSTRAP",
            "AWAIT_REDISTRIBUTION_COMPLETION",
            "AWAIT_RELOCATION_COMPLETION",
            "UPDATE_ROUTING_STATE"
        ],
        "{dry}"
    );
    assert_eq!(get_json(node0, "/actuator/cluster")["partitionsCount"], 3, "a dry run changes nothing");

    // the load: the real Java client through broker 0's gateway
    let report = node0.data_dir.parent().expect("a temp dir").join("grow-report.json");
    let driver = ClusterDriver::start_for(&node0.address(), &report, 45);
    std::thread::sleep(Duration::from_secs(10));

    // 3 -> 6 partitions, asked on broker 1 (forwarded to broker 0, the coordinator)
    let started = Instant::now();
    let (status, planned) = request(&cluster.nodes[1], "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 6}}"#);
    assert_eq!(status, 202, "3 -> 6 partitions: {planned}");
    let expected: Vec<u64> =
        planned["expectedTopology"].as_array().unwrap().iter().map(|b| b["partitions"].as_array().unwrap().len() as u64).collect();
    assert_eq!(expected, vec![6, 6, 6], "every broker holds every partition at replication factor 3: {planned}");
    // backups are refused while the partition count grows (Zeebe 8.8: "Backups are disallowed
    // during partition scaling")
    let (status, backup) = request(&cluster.nodes[1], "POST", "/actuator/backups", r#"{"backupId": 1}"#);
    assert_eq!(status, 409, "a backup during the growth: {backup}");
    assert!(backup["message"].as_str().unwrap_or_default().contains("partition count grows"), "{backup}");
    let (status, second) = request(&cluster.nodes[2], "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 7}}"#);
    assert_eq!(status, 409, "a second change while one runs: {second}");
    let done = grown(&cluster.nodes, &planned, "3 -> 6 partitions");
    eprintln!("3 -> 6 partitions done in {} ms under load", started.elapsed().as_millis());
    for broker in done["brokers"].as_array().unwrap() {
        let partitions = broker["partitions"].as_array().unwrap();
        assert_eq!(partitions.len(), 6, "{done}");
        assert!(partitions.iter().all(|p| p["state"] == "ACTIVE"), "{done}");
    }

    // the Java client's topology (gRPC `Topology`, through broker 2's gateway) shows the 6
    // partitions, each on every broker, each with one leader
    java_topology_shows_six(&cluster.nodes[2].address());

    // every acknowledged creation had its job, every message reached its instance once
    let report = driver.finish(|| log_tails(&cluster.nodes));
    eprintln!("the load through the growth: {report}");
    let failures = report["failures"].as_object().unwrap();
    assert!(failures.keys().all(|k| k == "UNAVAILABLE" || k == "RESOURCE_EXHAUSTED"), "the client saw only retryable errors: {report}");
    assert_eq!(report["correlatedTwice"], serde_json::json!([]), "{report}");
    let created = on_new_partitions(&report, "createdByPartition");
    assert!(created.iter().all(|&n| n > 0), "instances were created on partitions 4-6: {created:?} {report}");
    let jobs = on_new_partitions(&report, "jobsByPartition");
    assert!(jobs.iter().all(|&n| n > 0), "the workers completed jobs of partitions 4-6: {jobs:?} {report}");

    // the standalone gateway, started before the growth, routes to the 6 partitions now
    java_topology_shows_six(&gateway.address());
    let report = node0.data_dir.parent().expect("a temp dir").join("gateway-report.json");
    let report = ClusterDriver::start_for(&gateway.address(), &report, 20).finish(|| log_tails(&cluster.nodes));
    eprintln!("the load through the standalone gateway: {report}");
    assert!(report["failures"].as_object().unwrap().is_empty(), "{report}");
    let created = on_new_partitions(&report, "createdByPartition");
    assert!(created.iter().all(|&n| n > 0), "the standalone gateway created instances on partitions 4-6: {created:?}");
    let jobs = on_new_partitions(&report, "jobsByPartition");
    assert!(jobs.iter().all(|&n| n > 0), "its workers completed jobs of partitions 4-6: {jobs:?}");

    // each new partition's replicas hold the same state
    let nodes: Vec<&Node> = cluster.nodes.iter().collect();
    for p in PARTITIONS + 1..=GROWN {
        let digest = digests_agree(&nodes, p);
        eprintln!("partition {p}: replicas agree: {digest}");
    }

    // a broker restarted with the configured 3 partitions comes back with 6, and so does one
    // restarted with the grown count (its data folder was created with 3)
    cluster.restart(2);
    comes_back_grown(&cluster.nodes[2], "broker 2, --partitions 3");
    let mut args = cluster.args(1);
    let at = args.iter().position(|a| a == "--partitions").unwrap() + 1;
    args[at] = GROWN.to_string();
    cluster.nodes[1].restart_with(&args.iter().map(String::as_str).collect::<Vec<_>>());
    comes_back_grown(&cluster.nodes[1], "broker 1, --partitions 6");
    // and a start contradicting the folder still refuses
    let mut args = cluster.args(0);
    args[at] = "5".into();
    let refused = cluster.nodes[0].run_instead(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("the data folder has 3, this start gives 5"), "{stderr}");
}

/// Waits (60 s at most) until `node`, restarted, runs all 6 partitions and shows 6.
fn comes_back_grown(node: &Node, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = held(node);
        let count = get_json(node, "/actuator/cluster")["partitionsCount"].clone();
        if runs == (1..=u64::from(GROWN)).collect::<Vec<_>>() && count == u64::from(GROWN) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: runs {runs:?}, partitionsCount {count}");
        std::thread::sleep(Duration::from_millis(250));
    }
}
