//! Brokers started later, beyond the initial cluster (issue 31), as Zeebe 8.5's documented
//! scale-up does it (docs.camunda.io 8.5, "Cluster scaling": "Start new brokers" with ids 3, 4,
//! 5 beside a cluster deployed with clusterSize 3, then `POST /actuator/cluster/brokers` with
//! the wanted broker ids; scale down the same way, then stop the brokers removed).
//!
//! Three `waggle broker` processes on loopback, 5 partitions, replication factor 3, under load
//! from the real Java client through broker 0's gateway (`tests/clients/ClusterDriver.java`:
//! creations with and without result, message publications, streaming workers). Brokers 3 and 4
//! start later with only the first three's contact points and an internal port of their own;
//! the others learn their addresses from the gossip. The cluster is scaled 3 -> 5 (partitions
//! 4 and 5 then led by brokers 3 and 4, so forwarded commands, commands between partitions and
//! job streams all cross to them), a standalone gateway started with one contact point routes
//! to them, broker 4 is restarted at another internal port (the others follow its new address),
//! and the cluster is scaled back 5 -> 3 (asked on broker 3, forwarded to the coordinator) and
//! brokers 3 and 4 stopped. Every acknowledged creation and publication is accounted for by the
//! driver, and each partition's replicas agree.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{
    added_broker_args, digests_agree, get_json, held_partitions, leader_seen_by, log_tails, management_request, replica_layout,
    standalone_gateway, wait_change_completed, Cluster, ClusterDriver, ClusterOptions,
};
use common::{deploy_one_task, free_port, grpc_client, one_task_creation, Node};

const PARTITIONS: u16 = 5;

/// Zeebe's round-robin placement of 5 partitions over brokers 0-2 and over 0-4 (preferred first).
fn on_three() -> Vec<Vec<u64>> {
    vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1], vec![0, 1, 2], vec![1, 2, 0]]
}

fn on_five() -> Vec<Vec<u64>> {
    vec![vec![0, 1, 2], vec![1, 2, 3], vec![2, 3, 4], vec![3, 4, 0], vec![4, 0, 1]]
}

/// Waits (90 s at most) until each of `nodes` (broker `i` at index `i`) runs exactly the
/// replicas `expected` gives it and every partition is led by its preferred broker.
fn settled(nodes: &[&Node], expected: &[Vec<u64>], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let runs: Vec<Vec<u64>> = nodes.iter().map(|n| held_partitions(n)).collect();
        let wanted: Vec<Vec<u64>> = (0..nodes.len() as u64)
            .map(|b| (1..=u64::from(PARTITIONS)).filter(|&p| expected[p as usize - 1].contains(&b)).collect())
            .collect();
        let leaders: Vec<Option<usize>> =
            (1..=PARTITIONS).map(|p| leader_seen_by(nodes[expected[p as usize - 1][0] as usize], p)).collect();
        let preferred: Vec<Option<usize>> = expected.iter().map(|r| Some(r[0] as usize)).collect();
        if runs == wanted && leaders == preferred {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the brokers run {runs:?} (wanted {wanted:?}), leaders {leaders:?} (preferred {preferred:?})\n{}",
            leadership_lines(nodes)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The lines of each broker's log about leadership (for a failure's message).
fn leadership_lines(nodes: &[&Node]) -> String {
    let words = ["rebalance", "lead", "transfer", "elected", "became", "learned"];
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let lines: Vec<String> = n.log().lines().filter(|l| words.iter().any(|w| l.contains(w))).map(String::from).collect();
            format!("--- broker {i}\n{}\n", lines[lines.len().saturating_sub(40)..].join("\n"))
        })
        .collect()
}

/// Asks `node` for exactly `brokers` (`POST /actuator/cluster/brokers`), again while the
/// coordinator does not know a new broker's address yet (30 s at most); the planned change.
fn ask_brokers(node: &Node, brokers: &str, expected: &[Vec<u64>], what: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, planned) = management_request(node, "POST", "/actuator/cluster/brokers", brokers);
        let unknown = status == 400 && planned["message"].as_str().unwrap_or_default().contains("internal address is not known");
        if unknown && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        assert_eq!(status, 202, "{what}: {planned}");
        assert_eq!(replica_layout(&planned["expectedTopology"], PARTITIONS), expected, "{what}: {planned}");
        return planned["changeId"].as_u64().expect("a change id");
    }
}

#[test]
fn brokers_started_later_are_added_and_removed_under_load_with_nothing_acknowledged_lost() {
    let internal: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut options = ClusterOptions::new(3, PARTITIONS);
    options.internal = Some(internal.clone());
    let cluster = Cluster::start(options);
    let mut nodes = cluster.nodes;

    // the load: the real Java client through broker 0's gateway
    let report = nodes[0].data_dir.parent().expect("a temp dir").join("added-brokers-report.json");
    let driver = ClusterDriver::start_for(&nodes[0].address(), &report, 90);
    std::thread::sleep(Duration::from_secs(10));

    // brokers 3 and 4 start beside the cluster: the contact points of brokers 0-2 and an internal
    // port of their own; they hold nothing until a change gives them replicas
    for node in 3..5 {
        let args = added_broker_args(node, &internal, free_port(), PARTITIONS, 3);
        nodes.push(Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>()));
        assert!(held_partitions(&nodes[node]).is_empty(), "broker {node} holds replicas before any change");
    }
    // 3 -> 5 under load
    let started = Instant::now();
    let up = ask_brokers(&nodes[0], "[0, 1, 2, 3, 4]", &on_five(), "3 -> 5");
    let done = wait_change_completed(&nodes[0], up, "3 -> 5", || log_tails(&nodes));
    assert_eq!(replica_layout(&done["brokers"], PARTITIONS), on_five(), "{done}");
    settled(&nodes.iter().collect::<Vec<_>>(), &on_five(), "3 -> 5");
    eprintln!("3 -> 5 with brokers started later: {} ms under load", started.elapsed().as_millis());
    // broker 5 never started: no address, refused naming it
    let (status, refused) = management_request(&nodes[0], "POST", "/actuator/cluster/brokers", "[0, 1, 2, 3, 4, 5]");
    assert_eq!(status, 400, "{refused}");
    assert!(refused["message"].as_str().unwrap_or_default().contains("Broker 5 cannot be added"), "{refused}");
    // the added brokers learned the topology and show it (the coordinator's version)
    for node in &nodes[3..] {
        let seen = get_json(node, "/actuator/cluster");
        assert_eq!(seen["version"], done["version"], "{seen}");
    }

    // a standalone gateway given one contact point sees brokers 3 and 4 and routes to them:
    // a creation on each partition, 4 and 5 led by the added brokers
    let gateway = standalone_gateway(internal[1]);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let shown = get_json(&gateway, "/actuator/cluster");
            let ids: Vec<u64> = shown["brokers"].as_array().unwrap().iter().filter_map(|b| b["nodeId"].as_u64()).collect();
            if ids == [0, 1, 2, 3, 4] {
                break;
            }
            assert!(Instant::now() < deadline, "the gateway does not see brokers 3 and 4: {shown}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // and a broker's own gateway answers Topology with the brokers the cluster has now
        let mut broker0 = grpc_client(&nodes[0]).await;
        let topology = broker0.topology(waggle_protocol::gateway::TopologyRequest {}).await.expect("topology").into_inner();
        assert_eq!((topology.cluster_size, topology.brokers.len()), (5, 5), "{topology:?}");
        let mut client = grpc_client(&gateway).await;
        deploy_one_task(&mut client).await;
        let mut partitions = std::collections::BTreeSet::new();
        for _ in 0..2 * PARTITIONS {
            let created = client.create_process_instance(one_task_creation()).await.expect("a creation through the gateway");
            partitions.insert(waggle_protocol::partition_of(created.into_inner().process_instance_key));
        }
        assert!(partitions.contains(&4) && partitions.contains(&5), "creations through the gateway reached partitions {partitions:?}");
    });

    // broker 4 restarted at another internal port: the others follow its new address (the
    // gossip), so its replicas catch up with their leaders again
    let moved = free_port();
    let args = added_broker_args(4, &internal, moved, PARTITIONS, 3);
    nodes[4].restart_with(&args.iter().map(String::as_str).collect::<Vec<_>>());
    // (entries its leader, broker 2, appended after the restart: sent to the new address)
    let leader_index = get_json(&nodes[2], "/v1/partitions/3/digest")["appliedIndex"].as_u64().unwrap() + 50;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let index = get_json(&nodes[4], "/v1/partitions/3/digest")["appliedIndex"].as_u64().unwrap_or(0);
        if index >= leader_index {
            eprintln!("broker 4 at port {moved}: partition 3 applied {index} (its leader had {} at the restart)", leader_index - 50);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker 4 at its new address does not catch up: {index} < {leader_index}\n{}",
            log_tails(&nodes)
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // each broker learns the new address from its own gossip round: wait for all of them
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, node) in nodes.iter().enumerate().take(4) {
        let followed = || {
            node.log().lines().any(|l| l.contains("internal address changed") && l.contains("node=4") && l.contains(&format!(":{moved}")))
        };
        while !followed() {
            assert!(Instant::now() < deadline, "broker {i} did not follow broker 4 to port {moved}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    // 5 -> 3 under load, asked on an added broker (forwarded to broker 0, the coordinator)
    let started = Instant::now();
    let down = ask_brokers(&nodes[3], "[0, 1, 2]", &on_three(), "5 -> 3");
    let done = wait_change_completed(&nodes[0], down, "5 -> 3", || log_tails(&nodes));
    assert_eq!(replica_layout(&done["brokers"], PARTITIONS), on_three(), "{done}");
    settled(&nodes.iter().collect::<Vec<_>>(), &on_three(), "5 -> 3");
    eprintln!("5 -> 3: {} ms under load", started.elapsed().as_millis());
    for node in &mut nodes[3..] {
        assert!(held_partitions(node).is_empty(), "a removed broker still runs replicas");
        assert!(node.terminate().success(), "a removed broker stops cleanly");
    }

    // every acknowledged creation, completion and publication is accounted for
    let report = driver.finish(|| log_tails(&nodes[..3]));
    eprintln!("the load through both changes: {report}");
    drop(gateway);
    for (p, replicas) in on_three().iter().enumerate() {
        let replicas: Vec<&Node> = replicas.iter().map(|&b| &nodes[b as usize]).collect();
        let digest = digests_agree(&replicas, p as u16 + 1);
        eprintln!("partition {}: replicas agree: {digest}", p + 1);
    }
}
