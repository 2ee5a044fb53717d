//! Adding and removing brokers under load (issue 31), with Zeebe 8.5's broker scaling API on the
//! management port and 8.8's `PATCH /actuator/cluster` (docs.camunda.io, "Cluster scaling", and
//! the management API's `cluster-api.yaml` of camunda-zeebe 8.5: `POST
//! /actuator/cluster/brokers` with the wanted broker ids, `POST` / `DELETE
//! /actuator/cluster/brokers/{brokerId}`, each with `dryRun`, answering 202 with `changeId`,
//! `currentTopology`, `plannedChanges` and `expectedTopology`, 409 while another change is in
//! progress, 400 for an invalid request; 8.8's "Reconfigure cluster": `PATCH` with `brokers`
//! (`add`, `remove`, `count`) and `partitions` (`count`, `replicationFactor`)).
//!
//! Five `waggle broker` processes on loopback (their contact points name all five), 3
//! partitions, replication factor 3. The cluster is first scaled to brokers 0-2; then, while the
//! real Java client drives load through broker 0's gateway (`tests/clients/ClusterDriver.java`:
//! creations with and without result, message publications, streaming workers), it is scaled
//! 3 -> 5 (asked on broker 1, which forwards it to broker 0, the coordinator; a second change
//! asked meanwhile on broker 2 gets 409) and back 5 -> 3. Every acknowledged creation and
//! publication is accounted for by the driver, each partition's replicas agree, leadership is
//! back on each partition's preferred broker, and a replication factor change (PATCH) takes
//! each partition to two replicas. With the coordinator down, a change asked elsewhere is
//! refused (502) naming it.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::cluster::{digests_agree, get_json, leader_seen_by, log_tails, Cluster, ClusterDriver, ClusterOptions};
use common::{free_port, http_json_within, Node};
use serde_json::{json, Value};

const BROKERS: usize = 5;
const PARTITIONS: u16 = 3;

/// `method path` with a JSON `body` on `node`'s management port: the status and the JSON answer.
fn request(node: &Node, method: &str, path: &str, body: &str) -> (u16, Value) {
    let port = node.management_url().rsplit(':').next().unwrap().parse().unwrap();
    let (status, text) =
        http_json_within(port, method, path, body, Duration::from_secs(20)).unwrap_or_else(|| panic!("{method} {path} failed"));
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Each partition's replicas (broker ids, highest priority first) in a list of Zeebe
/// `BrokerState`s (`expectedTopology`) or a `GET /actuator/cluster` body's `brokers`.
fn layout(brokers: &Value) -> Vec<Vec<u64>> {
    (1..=u64::from(PARTITIONS))
        .map(|p| {
            let mut replicas: Vec<(u64, u64)> = Vec::new();
            for b in brokers.as_array().unwrap() {
                for part in b["partitions"].as_array().unwrap() {
                    if part["id"] == p {
                        replicas.push((part["priority"].as_u64().unwrap(), b["id"].as_u64().unwrap()));
                    }
                }
            }
            replicas.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            replicas.into_iter().map(|(_, b)| b).collect()
        })
        .collect()
}

/// The brokers the topology of a `GET /actuator/cluster` body names (those with an `id`).
fn members(cluster: &Value) -> BTreeSet<u64> {
    cluster["brokers"].as_array().unwrap().iter().filter_map(|b| b["id"].as_u64()).collect()
}

/// Waits (180 s at most) until `node`'s topology has no pending change and its last change is
/// `change`.
fn wait_completed(nodes: &[Node], change: u64, what: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let cluster = get_json(&nodes[0], "/actuator/cluster");
        if cluster["pendingChange"].is_null() && cluster["lastChange"]["id"] == change {
            assert_eq!(cluster["lastChange"]["status"], "COMPLETED");
            return cluster;
        }
        if Instant::now() >= deadline {
            let health: Vec<String> = nodes.iter().map(|n| n.get("/health").1).collect();
            panic!("{what} not completed: {cluster}\nhealth: {health:#?}\nlogs:\n{}", log_tails(nodes));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The partitions broker `node` runs a replica of.
fn held(node: &Node) -> Vec<u64> {
    get_json(node, "/v1/partitions")["items"].as_array().unwrap().iter().map(|p| p["partitionId"].as_u64().unwrap()).collect()
}

/// Scales to `wanted` by asking `node`, and waits until the change completed, every broker
/// runs exactly the replicas the topology gives it, and every partition is led by its
/// preferred broker; returns the planned change's answer.
fn scale(cluster: &Cluster, node: usize, body: &str, expected: &[Vec<u64>], what: &str) -> Value {
    let (status, planned) = request(&cluster.nodes[node], "POST", "/actuator/cluster/brokers", body);
    assert_eq!(status, 202, "{what}: {planned}");
    assert_eq!(layout(&planned["expectedTopology"]), expected, "{what}: {planned}");
    let id = planned["changeId"].as_u64().expect("a change id");
    let done = wait_completed(&cluster.nodes, id, what);
    assert_eq!(layout(&done["brokers"]), expected, "{what}: {done}");
    settled(cluster, expected, what);
    planned
}

/// Waits (60 s at most) until every broker runs exactly the replicas `expected` gives it and
/// each partition's leader, as its preferred replica (the first) knows it, is that replica
/// (with `rebalanced`; else any of its replicas).
fn settled(cluster: &Cluster, expected: &[Vec<u64>], what: &str) {
    settled_with(cluster, expected, what, true)
}

fn settled_with(cluster: &Cluster, expected: &[Vec<u64>], what: &str, rebalanced: bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs: Vec<Vec<u64>> = cluster.nodes.iter().map(held).collect();
        let wanted: Vec<Vec<u64>> =
            (0..BROKERS as u64).map(|b| (1..=u64::from(PARTITIONS)).filter(|&p| expected[p as usize - 1].contains(&b)).collect()).collect();
        let leaders: Vec<Option<usize>> = if runs == wanted {
            (1..=PARTITIONS).map(|p| leader_seen_by(&cluster.nodes[expected[p as usize - 1][0] as usize], p)).collect()
        } else {
            Vec::new()
        };
        let preferred: Vec<Option<usize>> = expected.iter().map(|r| Some(r[0] as usize)).collect();
        let led = leaders.iter().zip(expected).all(|(l, r)| l.is_some_and(|l| r.contains(&(l as u64))));
        if runs == wanted && led && (!rebalanced || leaders == preferred) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the brokers run {runs:?} (wanted {wanted:?}), leaders {leaders:?} (preferred {preferred:?})"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn brokers_are_added_and_removed_under_load_and_every_acknowledged_command_is_kept() {
    // five brokers, each a replica of some partitions only (so not `Cluster::start`, which
    // waits until every broker knows every partition's leader)
    let options = ClusterOptions::new(BROKERS, PARTITIONS);
    let internal: Vec<u16> = (0..BROKERS).map(|_| free_port()).collect();
    let mut cluster = Cluster { nodes: Vec::new(), internal, options };
    for i in 0..BROKERS {
        let args = cluster.args(i);
        cluster.nodes.push(Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    let node0 = &cluster.nodes[0];
    // Zeebe's round-robin placement of 3 partitions over 5 brokers and over 3
    let five: Vec<Vec<u64>> = vec![vec![0, 1, 2], vec![1, 2, 3], vec![2, 3, 4]];
    settled_with(&cluster, &five, "the start", false);
    let three: Vec<Vec<u64>> = vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1]];
    let initial = get_json(node0, "/actuator/cluster");
    assert_eq!(layout(&initial["brokers"]), five, "{initial}");

    // invalid requests: 400 naming what is wrong, and nothing planned
    for (method, path, body, wants) in [
        ("POST", "/actuator/cluster/brokers", "[0, 1]", "replication factor of 3"),
        ("POST", "/actuator/cluster/brokers", "[0, 1, 2, 3, 4, 5]", "Broker 5 cannot be added"),
        ("POST", "/actuator/cluster/brokers", "{\"brokers\": 3}", "wanted broker ids"),
        ("DELETE", "/actuator/cluster/brokers/9", "", "Broker 9 is not a member"),
        ("POST", "/actuator/cluster/brokers/7", "", "Broker 7 cannot be added"),
        ("PATCH", "/actuator/cluster", r#"{"partitions": {"count": 2}}"#, "Partition count can only be increased"),
        ("PATCH", "/actuator/cluster", r#"{"brokers": {"count": 3, "add": [4]}}"#, "cannot be combined"),
        ("PATCH", "/actuator/cluster", r#"{"partitions": {"replicationFactor": 4}, "brokers": {"count": 3}}"#, "replication factor of 4"),
        ("PATCH", "/actuator/cluster", r#"{"brokers": {"many": 3}}"#, "the body must be"),
    ] {
        let (status, answer) = request(node0, method, path, body);
        assert_eq!(status, 400, "{method} {path} {body}: {answer}");
        assert!(answer["message"].as_str().unwrap_or_default().contains(wants), "{method} {path} {body}: {answer}");
    }
    // a dry run (asked on broker 2, answered by the coordinator) plans and changes nothing
    let (status, dry) = request(&cluster.nodes[2], "POST", "/actuator/cluster/brokers?dryRun=true", "[0, 1, 2]");
    assert_eq!(status, 202, "{dry}");
    assert_eq!((dry["dryRun"].clone(), layout(&dry["expectedTopology"])), (json!(true), three.clone()), "{dry}");
    assert!(dry["plannedChanges"].as_array().unwrap().iter().any(|o| o["operation"] == "BROKER_REMOVE" && o["brokerId"] == 4), "{dry}");
    let after_dry = get_json(node0, "/actuator/cluster");
    assert_eq!(
        (after_dry["version"].clone(), after_dry["pendingChange"].clone()),
        (initial["version"].clone(), Value::Null),
        "{after_dry}"
    );

    // the cluster starts on brokers 0-2: brokers 3 and 4 run and hold nothing
    scale(&cluster, 0, "[0, 1, 2]", &three, "5 -> 3 before the load");
    let on_three = get_json(node0, "/actuator/cluster");
    assert_eq!(members(&on_three), BTreeSet::from([0, 1, 2]), "{on_three}");
    let (status, answer) = request(node0, "DELETE", "/actuator/cluster/brokers/2", "");
    assert_eq!(status, 400, "three brokers cannot lose one at replication factor 3: {answer}");
    eprintln!("on brokers 0-2: {:?}", layout(&on_three["brokers"]));

    // the load: the real Java client through broker 0's gateway
    let report = node0.data_dir.parent().expect("a temp dir").join("brokers-report.json");
    let driver = ClusterDriver::start_for(&node0.address(), &report, 60);
    std::thread::sleep(Duration::from_secs(12));

    // 3 -> 5, asked on broker 1 (forwarded to broker 0); a second change meanwhile gets 409
    let started = Instant::now();
    let (status, up) = request(&cluster.nodes[1], "POST", "/actuator/cluster/brokers", "[0, 1, 2, 3, 4]");
    assert_eq!(status, 202, "3 -> 5: {up}");
    assert_eq!(layout(&up["expectedTopology"]), five, "{up}");
    let (status, second) = request(&cluster.nodes[2], "DELETE", "/actuator/cluster/brokers/4", "");
    assert_eq!(status, 409, "a second change while one runs: {second}");
    let pending = get_json(&cluster.nodes[1], "/actuator/cluster");
    assert!(!pending["pendingChange"].is_null() || pending["lastChange"]["id"] == up["changeId"], "{pending}");
    wait_completed(&cluster.nodes, up["changeId"].as_u64().unwrap(), "3 -> 5");
    settled(&cluster, &five, "3 -> 5");
    eprintln!("3 -> 5 done in {} ms under load", started.elapsed().as_millis());

    // 5 -> 3 under load, on the coordinator
    let started = Instant::now();
    scale(&cluster, 0, "[0, 1, 2]", &three, "5 -> 3");
    eprintln!("5 -> 3 done in {} ms under load", started.elapsed().as_millis());
    for node in &cluster.nodes[3..] {
        assert!(held(node).is_empty(), "a removed broker still runs replicas");
        assert!(!node.data_dir.join("partitions/2").exists() && !node.data_dir.join("partitions/3").exists());
    }

    // every acknowledged creation, completion and publication is accounted for
    let report = driver.finish(|| log_tails(&cluster.nodes));
    eprintln!("the load through both changes: {report}");

    // each partition's replicas hold the same state
    for (p, replicas) in three.iter().enumerate() {
        let nodes: Vec<&Node> = replicas.iter().map(|&b| &cluster.nodes[b as usize]).collect();
        let digest = digests_agree(&nodes, p as u16 + 1);
        eprintln!("partition {}: replicas {replicas:?} agree: {digest}", p + 1);
    }

    // 8.8's PATCH: replication factor 3 -> 2 (each partition loses its lowest-priority replica)
    let (status, patched) = request(node0, "PATCH", "/actuator/cluster", r#"{"partitions": {"replicationFactor": 2}}"#);
    assert_eq!(status, 202, "{patched}");
    let two: Vec<Vec<u64>> = vec![vec![0, 1], vec![1, 2], vec![2, 0]];
    assert_eq!(layout(&patched["expectedTopology"]), two, "{patched}");
    let done = wait_completed(&cluster.nodes, patched["changeId"].as_u64().unwrap(), "replication factor 2");
    assert_eq!(layout(&done["brokers"]), two, "{done}");
    settled(&cluster, &two, "replication factor 2");
    // and a broker removed with DELETE at replication factor 2
    let (status, removed) = request(&cluster.nodes[1], "DELETE", "/actuator/cluster/brokers/2?dryRun=true", "");
    assert_eq!(status, 202, "{removed}");
    assert_eq!(layout(&removed["expectedTopology"]), vec![vec![0, 1], vec![1, 0], vec![0, 1]], "{removed}");

    // the coordinator down: a change asked on another broker is refused naming it (502, as
    // Zeebe's gateway answers when it cannot reach the broker), and nothing is planned
    cluster.nodes[0].kill9();
    let (status, refused) = request(&cluster.nodes[1], "POST", "/actuator/cluster/brokers/3", "");
    assert_eq!(status, 502, "{refused}");
    assert!(refused["message"].as_str().unwrap_or_default().contains("coordinated by broker 0"), "{refused}");
    assert!(get_json(&cluster.nodes[1], "/actuator/cluster")["pendingChange"].is_null());
}
