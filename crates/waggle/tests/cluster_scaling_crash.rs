//! A scaling change survives `kill -9` of a broker half-way (issue 31). Zeebe's dynamic scaling
//! is "resilient to broker restarts ... the operation eventually succeeds with the expected
//! cluster topology as result" (zeebe-io/zeebe-chaos, "Dynamically scaling brokers",
//! 2023-12-18), and its brokers "keep cluster topology locally across restarts" (docs.camunda.io,
//! "Clustering"): a change is persisted by the coordinator and carried out step by step, so a
//! broker killed mid-way picks it up again once restarted.
//!
//! Three `waggle broker` processes on loopback, 3 partitions, replication factor 3, under load
//! from the real Java client through broker 1's gateway (`tests/clients/ClusterDriver.java`:
//! creations with and without result, instances waiting for a message and its publication,
//! streaming workers; broker 1 is never killed):
//! - 3 -> 6 partitions (`PATCH /actuator/cluster`): broker 2 is killed while the new partitions
//!   are bootstrapped (`PARTITION_BOOTSTRAP` pending) and restarted, then broker 0, the
//!   coordinator, while partition 1 redistributes the deployments
//!   (`AWAIT_REDISTRIBUTION_COMPLETION`), and restarted; in another run, every broker at once
//!   (a power loss) while partition 5 is bootstrapped, and all restarted;
//! - 3 -> 4 brokers (`POST /actuator/cluster/brokers`): broker 3, started later, is killed while
//!   a replica moves to it (`PARTITION_JOIN` of broker 3 pending, its learner running), and
//!   restarted; then broker 0, the coordinator, while its replica of partition 2 leaves
//!   (`PARTITION_LEAVE`), and restarted.
//!
//! Each time the change completes, every broker ends with the same topology (version and
//! replicas), each partition's replicas agree, and the driver accounts for every acknowledged
//! creation and publication (each message correlated once); the client saw only retryable
//! errors, time-outs of commands in flight at a kill, and NOT_FOUND for a job completion tried
//! again after its first try completed the job (its answer lost with the killed broker). A
//! replica's folder left behind by a kill after its broker persisted the topology that dropped
//! it is removed when the broker restarts.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{
    added_broker_args, digests_agree, get_json, held_partitions, log_tails, management_request, replica_layout, Cluster, ClusterDriver,
    ClusterOptions,
};
use common::{free_port, Node};
use serde_json::Value;

const PARTITIONS: u16 = 3;

/// Polls (10 ms apart, 120 s at most) `node`'s `GET /actuator/cluster` until change `change`'s
/// next operation satisfies `wanted`; returns that operation. Fails if the change completes
/// first (the step to crash in was missed).
fn wait_for_step(node: &Node, change: u64, wanted: impl Fn(&Value) -> bool, what: &str, logs: impl Fn() -> String) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let cluster = get_json(node, "/actuator/cluster");
        let pending = &cluster["pendingChange"];
        if pending["id"] == change {
            if let Some(next) = pending["pending"].as_array().and_then(|ops| ops.first()).filter(|op| wanted(op)) {
                return next.clone();
            }
        } else if cluster["lastChange"]["id"] == change {
            panic!("{what}: change {change} completed before the step: {cluster}");
        }
        assert!(Instant::now() < deadline, "{what}: not reached: {cluster}\nlogs:\n{}", logs());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A replica in a `GET /actuator/cluster` body: (partition, state, priority).
type Replica = (u64, String, u64);

/// Each broker's replicas in a `GET /actuator/cluster` body: `(broker, [replica])` (the
/// gossip's roles and terms left out).
fn replicas(cluster: &Value) -> Vec<(u64, Vec<Replica>)> {
    let brokers = cluster["brokers"].as_array().expect("brokers");
    let replica = |p: &Value| Some((p["id"].as_u64()?, p["state"].as_str()?.to_string(), p["priority"].as_u64()?));
    brokers.iter().filter_map(|b| Some((b["id"].as_u64()?, b["partitions"].as_array()?.iter().filter_map(replica).collect()))).collect()
}

/// Waits (180 s at most) until every broker of `nodes` has change `change` completed, with the
/// same topology (version and replicas), running exactly the replicas it gives it, and
/// `partitions` partitions; returns the topology.
fn same_topology_everywhere(nodes: &[&Node], change: u64, partitions: u16, what: &str, logs: impl Fn() -> String) -> Value {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let clusters: Vec<Value> = nodes.iter().map(|n| get_json(n, "/actuator/cluster")).collect();
        let done = clusters
            .iter()
            .all(|c| c["pendingChange"].is_null() && c["lastChange"]["id"] == change && c["partitionsCount"] == u64::from(partitions));
        let same = clusters.iter().all(|c| c["version"] == clusters[0]["version"] && replicas(c) == replicas(&clusters[0]));
        let layout = replica_layout(&clusters[0]["brokers"], partitions);
        let runs: Vec<Vec<u64>> = nodes.iter().map(|n| held_partitions(n)).collect();
        let wanted: Vec<Vec<u64>> = (0..nodes.len() as u64)
            .map(|b| (1..=u64::from(partitions)).filter(|&p| layout[p as usize - 1].contains(&b)).collect())
            .collect();
        if done && same && runs == wanted {
            return clusters.into_iter().next().expect("a broker");
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not completed alike everywhere (done {done}, same {same}); the brokers run {runs:?}, wanted {wanted:?}\n{}\nlogs:\n{}",
            clusters.iter().map(Value::to_string).collect::<Vec<_>>().join("\n"),
            logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The driver's report, checked: nothing acknowledged missing (the driver's exit), every message
/// correlated once, and no error but retryable ones, time-outs of commands in flight at a kill,
/// and NOT_FOUND for a job completion tried again after a try whose answer the kill lost had
/// completed it (the driver takes that as done).
fn finish(driver: ClusterDriver, nodes: &[Node]) -> Value {
    let report = driver.finish(|| log_tails(nodes));
    let failures = report["failures"].as_object().expect("failures");
    let retryable = ["UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "NOT_FOUND"];
    assert!(failures.keys().all(|k| retryable.contains(&k.as_str())), "the client saw only retryable errors: {report}");
    assert_eq!(report["correlatedTwice"], serde_json::json!([]), "{report}");
    report
}

#[test]
fn a_partition_growth_survives_brokers_killed_while_bootstrapping_and_redistributing() {
    let mut cluster = Cluster::start(ClusterOptions::new(3, PARTITIONS));
    let report = cluster.nodes[1].data_dir.parent().expect("a temp dir").join("grow-crash-report.json");
    let driver = ClusterDriver::start_for(&cluster.nodes[1].address(), &report, 60);
    std::thread::sleep(Duration::from_secs(8));

    let (status, planned) = management_request(&cluster.nodes[1], "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 6}}"#);
    assert_eq!(status, 202, "3 -> 6 partitions: {planned}");
    let change = planned["changeId"].as_u64().expect("a change id");

    // broker 2 killed while a new partition is bootstrapped (its replica among the new group's)
    let step =
        wait_for_step(&cluster.nodes[0], change, |op| op["operation"] == "PARTITION_BOOTSTRAP", "bootstrap", || log_tails(&cluster.nodes));
    cluster.nodes[2].kill9();
    eprintln!("broker 2 killed at {step}");
    std::thread::sleep(Duration::from_secs(2));
    cluster.restart(2);
    eprintln!("broker 2 restarted");

    // the coordinator killed while partition 1 redistributes the deployments
    let step = wait_for_step(
        &cluster.nodes[0],
        change,
        |op| op["operation"] == "AWAIT_REDISTRIBUTION_COMPLETION",
        "redistribution",
        || log_tails(&cluster.nodes),
    );
    cluster.nodes[0].kill9();
    eprintln!("broker 0 (the coordinator) killed at {step}");
    std::thread::sleep(Duration::from_secs(2));
    cluster.restart(0);
    eprintln!("broker 0 restarted");

    let nodes: Vec<&Node> = cluster.nodes.iter().collect();
    let done = same_topology_everywhere(&nodes, change, 6, "3 -> 6 through two kills", || log_tails(&cluster.nodes));
    assert!(
        done["brokers"].as_array().unwrap().iter().all(|b| {
            let partitions = b["partitions"].as_array().unwrap();
            partitions.len() == 6 && partitions.iter().all(|p| p["state"] == "ACTIVE")
        }),
        "{done}"
    );
    let report = finish(driver, &cluster.nodes);
    let created: Vec<u64> = (4..=6).map(|p| report["createdByPartition"][p.to_string()].as_u64().unwrap_or(0)).collect();
    assert!(created.iter().all(|&n| n > 0), "instances were created on partitions 4-6: {created:?} {report}");
    for p in 1..=6 {
        let digest = digests_agree(&nodes, p);
        eprintln!("partition {p}: replicas agree: {digest}");
    }
}

#[test]
fn a_broker_scale_up_survives_the_new_broker_killed_while_a_replica_moves_to_it_and_the_coordinator_while_one_leaves() {
    let internal: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut options = ClusterOptions::new(3, PARTITIONS);
    options.internal = Some(internal.clone());
    let cluster = Cluster::start(options);
    let mut nodes = cluster.nodes;
    let args = added_broker_args(3, &internal, free_port(), PARTITIONS, 3);
    nodes.push(Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let report = nodes[1].data_dir.parent().expect("a temp dir").join("scale-crash-report.json");
    let driver = ClusterDriver::start_for(&nodes[1].address(), &report, 60);
    std::thread::sleep(Duration::from_secs(8));

    // 3 -> 4 brokers (asked again while the coordinator does not know broker 3's address yet)
    let deadline = Instant::now() + Duration::from_secs(30);
    let planned = loop {
        let (status, planned) = management_request(&nodes[0], "POST", "/actuator/cluster/brokers", "[0, 1, 2, 3]");
        if status == 400 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        assert_eq!(status, 202, "3 -> 4 brokers: {planned}");
        break planned;
    };
    let change = planned["changeId"].as_u64().expect("a change id");
    // Zeebe's round-robin placement of 3 partitions over brokers 0-3, preferred first
    let four: Vec<Vec<u64>> = vec![vec![0, 1, 2], vec![1, 2, 3], vec![2, 3, 0]];
    assert_eq!(replica_layout(&planned["expectedTopology"], PARTITIONS), four, "{planned}");

    // broker 3 killed while a replica moves to it: its learner runs, catching up
    let step =
        wait_for_step(&nodes[0], change, |op| op["operation"] == "PARTITION_JOIN" && op["brokerId"] == 3, "join", || log_tails(&nodes));
    let partition = step["partitionId"].as_u64().expect("a partition");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !held_partitions(&nodes[3]).contains(&partition) {
        assert!(Instant::now() < deadline, "broker 3 does not run its joining replica of partition {partition}");
        std::thread::sleep(Duration::from_millis(10));
    }
    nodes[3].kill9();
    eprintln!("broker 3 killed at {step}");
    std::thread::sleep(Duration::from_secs(2));
    nodes[3].restart();
    eprintln!("broker 3 restarted");

    // then broker 0, the coordinator, killed while its own replica of partition 2 leaves
    let step =
        wait_for_step(&nodes[0], change, |op| op["operation"] == "PARTITION_LEAVE" && op["brokerId"] == 0, "leave", || log_tails(&nodes));
    nodes[0].kill9();
    eprintln!("broker 0 (the coordinator) killed at {step}");
    std::thread::sleep(Duration::from_secs(2));
    nodes[0].restart();
    eprintln!("broker 0 restarted");

    let all: Vec<&Node> = nodes.iter().collect();
    let done = same_topology_everywhere(&all, change, PARTITIONS, "3 -> 4 through two kills", || log_tails(&nodes));
    assert_eq!(replica_layout(&done["brokers"], PARTITIONS), four, "{done}");
    finish(driver, &nodes);
    for (p, replicas) in four.iter().enumerate() {
        let replicas: Vec<&Node> = replicas.iter().map(|&b| &nodes[b as usize]).collect();
        let digest = digests_agree(&replicas, p as u16 + 1);
        eprintln!("partition {}: replicas agree: {digest}", p + 1);
    }

    // a kill after broker 0 persisted the topology that dropped its replica of partition 2 and
    // before it removed the replica's folder leaves the folder behind: the restart removes it
    nodes[0].kill9();
    let stale = nodes[0].data_dir.join("partitions/2");
    assert!(!stale.exists(), "broker 0's replica of partition 2 was removed when it left");
    std::fs::create_dir_all(stale.join("log")).unwrap();
    std::fs::write(stale.join("log/left-behind"), b"a replica's log").unwrap();
    nodes[0].restart();
    assert!(!stale.exists(), "the restarted broker keeps the data of a replica it no longer holds");
    assert_eq!(held_partitions(&nodes[0]), vec![1, 3], "broker 0 runs its replicas");
}

/// Every broker killed at once while the second new partition is bootstrapped (a power loss),
/// then restarted: the change persisted by the coordinator resumes and completes.
#[test]
fn a_partition_growth_resumes_after_every_broker_is_killed_at_once() {
    let mut cluster = Cluster::start(ClusterOptions::new(3, PARTITIONS));
    let report = cluster.nodes[1].data_dir.parent().expect("a temp dir").join("grow-power-loss-report.json");
    let driver = ClusterDriver::start_for(&cluster.nodes[1].address(), &report, 40);
    std::thread::sleep(Duration::from_secs(8));

    let (status, planned) = management_request(&cluster.nodes[0], "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 6}}"#);
    assert_eq!(status, 202, "3 -> 6 partitions: {planned}");
    let change = planned["changeId"].as_u64().expect("a change id");
    let step = wait_for_step(
        &cluster.nodes[0],
        change,
        |op| op["operation"] == "PARTITION_BOOTSTRAP" && op["partitionId"] == 5,
        "bootstrap of partition 5",
        || log_tails(&cluster.nodes),
    );
    for node in cluster.nodes.iter_mut() {
        node.kill9();
    }
    eprintln!("every broker killed at {step}");
    std::thread::sleep(Duration::from_secs(1));
    for i in 0..3 {
        cluster.restart(i);
    }
    eprintln!("every broker restarted");

    let nodes: Vec<&Node> = cluster.nodes.iter().collect();
    same_topology_everywhere(&nodes, change, 6, "3 -> 6 through a power loss", || log_tails(&cluster.nodes));
    let report = finish(driver, &cluster.nodes);
    let created: Vec<u64> = (4..=6).map(|p| report["createdByPartition"][p.to_string()].as_u64().unwrap_or(0)).collect();
    assert!(created.iter().all(|&n| n > 0), "instances were created on partitions 4-6: {created:?} {report}");
    for p in 1..=6 {
        digests_agree(&nodes, p);
    }
}
