//! Moving a partition replica at run time under load (issue 31), with Zeebe 8.5's partition
//! endpoints on the management port (docs.camunda.io, "Cluster scaling" and the management
//! API's `cluster-api.yaml` of camunda-zeebe 8.5: `POST` / `DELETE
//! /actuator/cluster/brokers/{brokerId}/partitions/{partitionId}` answer 202 with `changeId`,
//! `currentTopology`, `plannedChanges` and `expectedTopology`, 409 while another change is in
//! progress, 400 for an invalid request; `GET /actuator/cluster` lists the brokers with their
//! partitions' `id`, `state` and `priority`, and the `lastChange` and `pendingChange`).
//!
//! Four `waggle broker` processes on loopback, 2 partitions, replication factor 3: partition 1
//! is on brokers 0, 1, 2 and lacks broker 3. While instances are created and their jobs
//! completed through broker 0's gateway, broker 3 joins partition 1 (a learner caught up by
//! snapshot and log, then promoted), then broker 0 (its preferred leader) leaves it. Every
//! acknowledged creation is accounted for (its job is activated); the new replica's state
//! equals the others'; with the old leader among the remaining old replicas killed, partition 1
//! still serves (broker 3 is in its quorum); and the new layout survives a restart of every
//! broker.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{deploy_one_task, free_port, grpc_client, http_json, one_task_activation, one_task_creation, Node};
use serde_json::Value;

const BROKERS: usize = 4;
const PARTITIONS: u16 = 2;

fn json(node: &Node, path: &str) -> Value {
    let (status, body) = node.get(path);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

fn request(node: &Node, method: &str, path: &str, body: &str) -> (u16, Value) {
    let port = node.management_url().rsplit(':').next().unwrap().parse().unwrap();
    let (status, text) = http_json(port, method, path, body).unwrap_or_else(|| panic!("{method} {path} failed"));
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The partitions broker `node` runs a replica of.
fn held(node: &Node) -> Vec<u64> {
    json(node, "/v1/partitions")["items"].as_array().unwrap().iter().map(|p| p["partitionId"].as_u64().unwrap()).collect()
}

/// `(broker, state, priority)` of each replica of `partition` in a `GET /actuator/cluster` body.
fn replicas(cluster: &Value, partition: u64) -> Vec<(u64, String, u64)> {
    let mut out = Vec::new();
    for b in cluster["brokers"].as_array().unwrap() {
        for p in b["partitions"].as_array().unwrap() {
            if p["id"] == partition {
                out.push((b["id"].as_u64().unwrap(), p["state"].as_str().unwrap().to_string(), p["priority"].as_u64().unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Waits until `node`'s topology has no pending change and its last change is `change`.
fn wait_completed(node: &Node, change: u64, what: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let cluster = json(node, "/actuator/cluster");
        if cluster["pendingChange"].is_null() && cluster["lastChange"]["id"] == change {
            assert_eq!(cluster["lastChange"]["status"], "COMPLETED");
            return cluster;
        }
        assert!(Instant::now() < deadline, "{what} not completed: {cluster}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The leader of `partition` as broker `node` knows it.
fn leader_seen_by(node: &Node, partition: u64) -> Option<u64> {
    let items = json(node, "/v1/partitions");
    items["items"].as_array()?.iter().find(|p| p["partitionId"] == partition)?["leader"].as_u64()
}

/// Waits until the replicas of `partition` on `nodes` have the same applied index and digest.
fn digests_agree(nodes: &[&Node], partition: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let digests: Vec<Value> = nodes.iter().map(|n| json(n, &format!("/v1/partitions/{partition}/digest"))).collect();
        if digests.iter().all(|d| d == &digests[0]) {
            return digests[0].clone();
        }
        assert!(Instant::now() < deadline, "partition {partition}'s replicas differ: {digests:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[derive(Default)]
struct Load {
    acknowledged: Vec<i64>,
    refused: u64,
    activated: HashSet<i64>,
    completed: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_moves_to_another_broker_under_load_and_the_layout_survives_a_restart() {
    let internal: Vec<String> = (0..BROKERS).map(|_| free_port().to_string()).collect();
    let contact_points = internal.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    let args = |i: usize| -> Vec<String> {
        let size = BROKERS.to_string();
        let partitions = PARTITIONS.to_string();
        let node = i.to_string();
        let a = ["broker", "--node-id", &node, "--cluster-size", &size, "--partitions", &partitions];
        let b = ["--replication-factor", "3", "--contact-points", &contact_points, "--internal-port", &internal[i]];
        a.iter().chain(b.iter()).map(|s| s.to_string()).collect()
    };
    let mut nodes: Vec<Node> = (0..BROKERS).map(|i| Node::start(&args(i).iter().map(String::as_str).collect::<Vec<_>>())).collect();

    // the initial topology is the static placement: partition 1 on brokers 0, 1, 2
    let cluster = json(&nodes[0], "/actuator/cluster");
    assert_eq!(cluster["version"], 1, "{cluster}");
    assert!(cluster["lastChange"].is_null() && cluster["pendingChange"].is_null(), "{cluster}");
    let initial: Vec<(u64, String, u64)> = vec![(0, "ACTIVE".into(), 3), (1, "ACTIVE".into(), 2), (2, "ACTIVE".into(), 1)];
    assert_eq!(replicas(&cluster, 1), initial);
    assert!(!held(&nodes[3]).contains(&1));

    // invalid changes: 400 with what is wrong, and nothing planned
    for (method, path, wants) in [
        ("DELETE", "/actuator/cluster/brokers/3/partitions/1", "does not replicate"),
        ("POST", "/actuator/cluster/brokers/9/partitions/1", "Broker 9"),
        ("POST", "/actuator/cluster/brokers/3/partitions/7", "Partition 7"),
    ] {
        let (status, body) = request(&nodes[0], method, path, "");
        assert_eq!(status, 400, "{method} {path}: {body}");
        assert!(body["message"].as_str().unwrap().contains(wants), "{method} {path}: {body}");
    }
    assert_eq!(json(&nodes[0], "/actuator/cluster")["version"], 1);

    // load through broker 0's gateway: creations, and a worker activating and completing
    let mut client = grpc_client(&nodes[0]).await;
    deploy_one_task(&mut client).await;
    let load = Arc::new(Mutex::new(Load::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let creator = {
        let (mut client, load, stop) = (client.clone(), load.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                match client.create_process_instance(one_task_creation()).await {
                    Ok(r) => load.lock().unwrap().acknowledged.push(r.into_inner().process_instance_key),
                    Err(_) => load.lock().unwrap().refused += 1,
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let worker = {
        let (mut client, load, stop) = (client.clone(), load.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok(stream) = client.activate_jobs(one_task_activation(32)).await else { continue };
                let mut stream = stream.into_inner();
                while let Ok(Some(response)) = stream.message().await {
                    for job in response.jobs {
                        load.lock().unwrap().activated.insert(job.process_instance_key);
                        let complete = waggle_protocol::gateway::CompleteJobRequest { job_key: job.key, ..Default::default() };
                        if client.complete_job(complete).await.is_ok() {
                            load.lock().unwrap().completed += 1;
                        }
                    }
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;

    // broker 3 joins partition 1; a second change meanwhile is refused
    let (status, join) = request(&nodes[0], "POST", "/actuator/cluster/brokers/3/partitions/1", r#"{"priority": 1}"#);
    assert_eq!(status, 202, "{join}");
    let join_id = join["changeId"].as_u64().expect("a change id");
    assert_eq!(
        join["plannedChanges"],
        serde_json::json!([{ "operation": "PARTITION_JOIN", "brokerId": 3, "partitionId": 1, "priority": 1 }])
    );
    let current = serde_json::json!({ "brokers": join["currentTopology"] });
    assert_eq!(replicas(&current, 1), initial, "{join}");
    let expected = serde_json::json!({ "brokers": join["expectedTopology"] });
    assert!(replicas(&expected, 1).contains(&(3, "ACTIVE".into(), 1)), "{join}");
    let (status, body) = request(&nodes[0], "DELETE", "/actuator/cluster/brokers/0/partitions/1", "");
    assert_eq!(status, 409, "a second change while one runs: {body}");
    let during = json(&nodes[0], "/actuator/cluster");
    assert_eq!(during["pendingChange"]["id"], join_id, "{during}");
    let joined = wait_completed(&nodes[0], join_id, "the join");
    assert!(replicas(&joined, 1).contains(&(3, "ACTIVE".into(), 1)), "{joined}");
    assert!(held(&nodes[3]).contains(&1));
    eprintln!("broker 3 joined partition 1: {:?}", replicas(&joined, 1));

    // broker 0, the preferred leader, leaves partition 1 (handing its leadership over first)
    let (status, leave) = request(&nodes[0], "DELETE", "/actuator/cluster/brokers/0/partitions/1", "");
    assert_eq!(status, 202, "{leave}");
    let leave_id = leave["changeId"].as_u64().expect("a change id");
    assert_eq!(leave["plannedChanges"], serde_json::json!([{ "operation": "PARTITION_LEAVE", "brokerId": 0, "partitionId": 1 }]));
    let left = wait_completed(&nodes[0], leave_id, "the leave");
    let moved: Vec<(u64, String, u64)> = vec![(1, "ACTIVE".into(), 2), (2, "ACTIVE".into(), 1), (3, "ACTIVE".into(), 1)];
    assert_eq!(replicas(&left, 1), moved, "{left}");
    assert!(left["version"].as_u64().unwrap() > joined["version"].as_u64().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while held(&nodes[0]).contains(&1) || nodes[0].data_dir.join("partitions/1").exists() {
        assert!(Instant::now() < deadline, "broker 0 still holds partition 1");
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("broker 0 left partition 1");

    // the load stops; every acknowledged creation's job is activated at last
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    creator.await.unwrap();
    worker.abort();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let missing: Vec<i64> = {
            let l = load.lock().unwrap();
            l.acknowledged.iter().copied().filter(|k| !l.activated.contains(k)).collect()
        };
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} acknowledged instances without their job: {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
        let mut request = one_task_activation(100);
        request.request_timeout = 1000;
        if let Ok(stream) = client.activate_jobs(request).await {
            let mut stream = stream.into_inner();
            while let Ok(Some(response)) = stream.message().await {
                let mut l = load.lock().unwrap();
                l.activated.extend(response.jobs.iter().map(|j| j.process_instance_key));
            }
        }
    }
    let (acknowledged, refused, completed) = {
        let l = load.lock().unwrap();
        (l.acknowledged.len(), l.refused, l.completed)
    };
    let on_one = load.lock().unwrap().acknowledged.iter().filter(|&&k| waggle_protocol::partition_of(k) == 1).count();
    eprintln!("{acknowledged} creations acknowledged ({on_one} on partition 1), {refused} refused, {completed} jobs completed");
    assert!(on_one >= 20, "too little load on partition 1: {on_one}");

    // the new replica holds what the others hold
    let digest = digests_agree(&[&nodes[1], &nodes[2], &nodes[3]], 1);
    eprintln!("partition 1's replicas agree: {digest}");

    // with an old replica killed (its leader, if one of them leads), partition 1 still serves:
    // its quorum needs broker 3
    let leader = leader_seen_by(&nodes[3], 1).expect("a leader of partition 1");
    let victim = if leader == 1 || leader == 2 { leader as usize } else { 1 };
    nodes[victim].kill9();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut served = false;
    while !served {
        assert!(Instant::now() < deadline, "partition 1 does not serve with broker {victim} down");
        if let Ok(r) = client.create_process_instance(one_task_creation()).await {
            served = waggle_protocol::partition_of(r.into_inner().process_instance_key) == 1;
        }
    }
    eprintln!("partition 1 serves with broker {victim} down");

    // every broker restarts: the new layout stays
    nodes[victim].restart();
    for node in nodes.iter_mut() {
        node.terminate();
    }
    for node in nodes.iter_mut() {
        node.restart();
    }
    for node in &nodes {
        let cluster = json(node, "/actuator/cluster");
        assert_eq!(cluster["version"], left["version"], "{cluster}");
        assert_eq!(cluster["lastChange"]["id"], leave_id, "{cluster}");
        assert_eq!(replicas(&cluster, 1), moved, "{cluster}");
    }
    assert!(!held(&nodes[0]).contains(&1) && held(&nodes[3]).contains(&1));
    let mut client = grpc_client(&nodes[0]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "partition 1 does not serve after the restart");
        if let Ok(r) = client.create_process_instance(one_task_creation()).await {
            if waggle_protocol::partition_of(r.into_inner().process_instance_key) == 1 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    digests_agree(&[&nodes[1], &nodes[2], &nodes[3]], 1);
}
