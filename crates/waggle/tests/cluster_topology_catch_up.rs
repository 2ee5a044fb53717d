//! A broker that is down while a topology change completes learns the change's result when it
//! is back, without waiting for the next change (issue 31): at start, and every few seconds
//! after, a broker asks the others for their cluster topology and adopts a newer version.
//! Zeebe 8.5's brokers gossip the cluster topology the same way, a newer version replacing an
//! older one (docs.camunda.io, "Cluster scaling": the topology is "gossiped to all brokers").
//!
//! Four `waggle broker` processes, one partition on brokers 0 and 1 (replication factor 2):
//! broker 3 is killed, broker 2 joins partition 1 (`POST
//! /actuator/cluster/brokers/2/partitions/1`), the change completes and its coordinator's own
//! pushes to the dead broker are over; broker 3, restarted with its old topology on disk,
//! reports the new version and layout within seconds.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{broker_args, get_json};
use common::{deploy_one_task, free_port, grpc_client, http_json, one_task_creation, Node};
use serde_json::Value;

/// The layout of a `GET /actuator/cluster` body: `(broker, partition, state)`.
fn layout(cluster: &Value) -> Vec<(u64, u64, String)> {
    let mut out = Vec::new();
    for b in cluster["brokers"].as_array().expect("brokers") {
        for p in b["partitions"].as_array().expect("partitions") {
            out.push((b["id"].as_u64().unwrap(), p["id"].as_u64().unwrap(), p["state"].as_str().unwrap().to_string()));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_down_while_a_change_completes_adopts_its_topology_when_back() {
    // brokers 2 and 3 hold no replica: started one by one (a cluster's start waits for every
    // broker to see every partition's leader among its own)
    let internal: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let mut nodes: Vec<Node> = (0..4)
        .map(|i| {
            let args = broker_args(i, &internal, 1, 2);
            Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    let before = get_json(&nodes[0], "/actuator/cluster");
    assert_eq!(before["version"], 1, "{before}");
    let active = |broker: u64| (broker, 1, "ACTIVE".to_string());
    assert_eq!(layout(&before), vec![active(0), active(1)], "{before}");

    // creations keep partition 1 busy while broker 2 joins (its leader takes the snapshot the
    // learner is sent as it processes)
    let mut client = grpc_client(&nodes[0]).await;
    deploy_one_task(&mut client).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let creator = {
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = client.create_process_instance(one_task_creation()).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    nodes[3].kill9();
    let port: u16 = nodes[0].management_url().rsplit(':').next().unwrap().parse().unwrap();
    let (status, body) = http_json(port, "POST", "/actuator/cluster/brokers/2/partitions/1", r#"{"priority": 1}"#).expect("POST answered");
    assert_eq!(status, 202, "{body}");
    let change = serde_json::from_str::<Value>(&body).expect("JSON")["changeId"].as_u64().expect("a change id");
    let deadline = Instant::now() + Duration::from_secs(90);
    let done = loop {
        let now = get_json(&nodes[0], "/actuator/cluster");
        if now["pendingChange"].is_null() && now["lastChange"]["id"] == change {
            break now;
        }
        assert!(Instant::now() < deadline, "the join did not complete: {now}");
        std::thread::sleep(Duration::from_millis(200));
    };
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    creator.await.expect("the creator ends");
    let joined = vec![active(0), active(1), active(2)];
    assert_eq!(layout(&done), joined, "{done}");
    let version = done["version"].as_u64().expect("a version");
    assert!(version > 1, "{done}");
    // the coordinator pushes the final version a few times only (within a second or two for a
    // broker that refuses connections): it is done long before broker 3 is back
    std::thread::sleep(Duration::from_secs(8));

    nodes[3].restart();
    let started = Instant::now();
    let caught_up = loop {
        let seen = get_json(&nodes[3], "/actuator/cluster");
        if seen["version"].as_u64() == Some(version) {
            break seen;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "broker 3 still has version {} of the topology, not {version}: {seen}",
            seen["version"]
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("broker 3 adopted version {version} {:?} after its restart", started.elapsed());
    assert_eq!(layout(&caught_up), joined, "{caught_up}");
    assert_eq!(caught_up["lastChange"]["id"], change, "{caught_up}");
    assert!(caught_up["pendingChange"].is_null(), "{caught_up}");
    // and it persisted it (the file a restart reads first)
    nodes[3].kill9();
    let file = nodes[3].data_dir.join("cluster-topology.json");
    let persisted: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("the topology file")).expect("JSON");
    assert_eq!(persisted["version"].as_u64(), Some(version), "{persisted}");
}
