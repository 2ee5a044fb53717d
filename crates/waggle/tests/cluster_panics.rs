//! Issue 30, "panics contained", in a cluster: three `waggle broker` processes (3 partitions,
//! replication factor 3) under load from gRPC clients on every broker's gateway. A panic is
//! injected (`WAGGLE_TEST_PANIC_FILE`, debug builds only) into one partition's replica on its
//! leader, and later into another partition's replica on a follower. Each time the replica
//! shows DOWN in its broker's `/health`, `zeebe_health` and the Topology RPC, the other
//! partitions keep creating and completing instances, the group goes on without it (a new
//! leader takes over when it led), and the replica restarts from its journal and state and
//! comes back UP once the test lets it. Afterwards every acknowledged instance is there and every partition's
//! replicas have equal state digests at equal applied index.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{deploy_one_task, free_port, grpc_client, one_task_creation, Node};
use tonic::transport::Channel;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::partition::PartitionBrokerHealth;
use waggle_protocol::gateway::*;
use waggle_protocol::keys::partition_of;

const BROKERS: usize = 3;
const PARTITIONS: u16 = 3;
/// The longest an injected panic keeps the replica down; the test releases it sooner, once it
/// has seen the others serve without it (a release file next to the panic file).
const HOLD_MS: u64 = 60_000;

#[derive(Default)]
struct Load {
    /// Acknowledged creations: instance key → when the acknowledgement arrived.
    created: HashMap<i64, Instant>,
    /// Acknowledged job completions: (partition, when).
    completed: Vec<(u16, Instant)>,
}

impl Load {
    fn created_on(&self, partition: u16, after: Instant) -> usize {
        self.created.iter().filter(|(k, at)| **at > after && partition_of(**k) == partition).count()
    }

    fn completed_on(&self, partition: u16, after: Instant) -> usize {
        self.completed.iter().filter(|(p, at)| *at > after && *p == partition).count()
    }
}

async fn creator(mut c: GatewayClient<Channel>, load: Arc<Mutex<Load>>) {
    loop {
        let mut request = tonic::Request::new(one_task_creation());
        request.set_timeout(Duration::from_secs(5));
        match c.create_process_instance(request).await {
            Ok(r) => {
                load.lock().unwrap().created.insert(r.into_inner().process_instance_key, Instant::now());
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Completes the jobs of even instances (the odd ones stay, waiting at their job).
async fn worker(mut c: GatewayClient<Channel>, load: Arc<Mutex<Load>>) {
    loop {
        let request = ActivateJobsRequest {
            r#type: "benchmark-task".into(),
            worker: "cluster-panics-test".into(),
            timeout: 60_000,
            max_jobs_to_activate: 16,
            request_timeout: 200,
            ..Default::default()
        };
        let Ok(stream) = c.activate_jobs(request).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let mut stream = stream.into_inner();
        while let Ok(Some(batch)) = stream.message().await {
            for job in batch.jobs {
                if job.process_instance_key % 2 == 1 {
                    continue;
                }
                let request = CompleteJobRequest { job_key: job.key, variables: String::new() };
                if c.complete_job(request).await.is_ok() {
                    load.lock().unwrap().completed.push((partition_of(job.key), Instant::now()));
                }
            }
        }
    }
}

fn json(node: &Node, path: &str) -> serde_json::Value {
    let (_, body) = node.get(path);
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// `partition`'s entry in `node`'s `/health`.
fn partition_health(node: &Node, partition: u16) -> serde_json::Value {
    let body = json(node, "/health");
    body["partitions"].as_array().expect("partitions").iter().find(|p| p["partitionId"] == partition).expect("the partition").clone()
}

fn zeebe_health(node: &Node, partition: u16) -> String {
    let (_, metrics) = node.get("/metrics");
    let name = format!("zeebe_health{{partition=\"{partition}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&name)).unwrap_or_else(|| panic!("no {name} in /metrics")).to_string()
}

/// Broker `broker`'s health in `partition` as `c`'s gateway's Topology shows it.
async fn topology_health(c: &mut GatewayClient<Channel>, broker: usize, partition: u16) -> Option<PartitionBrokerHealth> {
    let topology = c.topology(TopologyRequest {}).await.ok()?.into_inner();
    let b = topology.brokers.iter().find(|b| b.node_id == broker as i32)?;
    b.partitions.iter().find(|p| p.partition_id == i32::from(partition)).map(|p| p.health())
}

/// The leader of `partition` as broker `node` knows it.
fn leader_seen_by(node: &Node, partition: u16) -> Option<usize> {
    let partitions = json(node, "/v1/partitions");
    let item = partitions["items"].as_array()?.iter().find(|p| p["partitionId"] == partition)?.clone();
    item["leader"].as_u64().map(|l| l as usize)
}

/// Waits until `nodes` agree on a leader of every partition, none of them `not` for
/// `partition_not`; returns them (index `p - 1` for partition `p`).
fn leaders(nodes: &[&Node], not: Option<(u16, usize)>) -> Vec<usize> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<Vec<Option<usize>>> = nodes.iter().map(|n| (1..=PARTITIONS).map(|p| leader_seen_by(n, p)).collect()).collect();
        let agreed = seen.iter().all(|s| s == &seen[0] && s.iter().all(Option::is_some));
        let moved = not.is_none_or(|(p, gone)| seen[0][usize::from(p) - 1] != Some(gone));
        if agreed && moved {
            return seen[0].iter().map(|l| l.expect("a leader")).collect();
        }
        assert!(Instant::now() < deadline, "no agreed leaders (not {not:?}): {seen:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until every broker's replica of `partition` has the same applied index and digest.
fn digests_agree(nodes: &[Node], partition: u16) -> serde_json::Value {
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

fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn inject(file: &Path, partition: u16, hold_ms: u64) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{partition} {hold_ms}")).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// Lets the replica held down by the panic injected through `file` restart.
fn release(file: &Path) {
    let mut release = file.as_os_str().to_owned();
    release.push(".release");
    std::fs::write(release, "").unwrap();
}

/// Injects a panic into `victim`'s replica of `partition` and checks what the module's doc
/// says while it is down and after it is back. Returns when it serves again.
async fn panic_one_replica(nodes: &[Node], files: &[PathBuf], load: &Arc<Mutex<Load>>, victim: usize, partition: u16, led: bool) {
    let observer = (victim + 1) % BROKERS;
    let mut client = grpc_client(&nodes[observer]).await;
    inject(&files[victim], partition, HOLD_MS);
    let injected = Instant::now();
    wait_until("the replica DOWN in /health", Duration::from_secs(10), || partition_health(&nodes[victim], partition)["status"] == "DOWN");
    let down = partition_health(&nodes[victim], partition);
    assert_eq!(down["health"], "UNHEALTHY", "{down}");
    assert!(down["failure"].as_str().unwrap_or_default().contains("injected panic"), "{down}");
    assert_eq!(zeebe_health(&nodes[victim], partition), "0");
    for other in (1..=PARTITIONS).filter(|p| *p != partition) {
        assert_eq!(partition_health(&nodes[victim], other)["status"], "UP", "partition {other} on broker {victim}");
    }
    // the gossip carries the victim's health to the other brokers' gateways
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let seen = topology_health(&mut client, victim, partition).await;
        if seen == Some(PartitionBrokerHealth::Unhealthy) {
            break;
        }
        assert!(Instant::now() < deadline, "broker {victim}'s partition {partition} is {seen:?} in broker {observer}'s Topology");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // the group goes on without the replica: a new leader if it led, the same one otherwise
    let others: Vec<&Node> = nodes.iter().enumerate().filter(|&(i, _)| i != victim).map(|(_, n)| n).collect();
    let now_leading = leaders(&others, led.then_some((partition, victim)));
    assert_ne!(now_leading[usize::from(partition) - 1], victim);
    eprintln!(
        "broker {victim}'s replica of partition {partition} down; leaders now {now_leading:?} ({} ms)",
        injected.elapsed().as_millis()
    );
    let serving = Instant::now();
    wait_until("every partition creates and completes while the replica is down", Duration::from_secs(20), || {
        let l = load.lock().unwrap();
        (1..=PARTITIONS).all(|p| l.created_on(p, serving) > 0 && l.completed_on(p, serving) > 0)
    });
    assert_eq!(partition_health(&nodes[victim], partition)["status"], "DOWN", "still held down while the others served");
    release(&files[victim]);

    wait_until("the replica UP again", Duration::from_secs(30), || partition_health(&nodes[victim], partition)["status"] == "UP");
    assert_eq!(partition_health(&nodes[victim], partition)["health"], "HEALTHY");
    assert_eq!(zeebe_health(&nodes[victim], partition), "1");
    assert_eq!(nodes[victim].get("/health").0, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    while topology_health(&mut client, victim, partition).await != Some(PartitionBrokerHealth::Healthy) {
        assert!(Instant::now() < deadline, "broker {victim}'s partition {partition} not healthy in the Topology again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = nodes[victim].log();
    assert!(log.contains("partition failed; restarting it from its log and state"), "{log}");
    assert!(log.contains("partition restarted from its log and state"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panicking_replica_restarts_in_place_on_a_leader_and_on_a_follower() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..BROKERS).map(|i| dir.path().join(format!("panic-{i}"))).collect();
    let internal: Vec<String> = (0..BROKERS).map(|_| free_port().to_string()).collect();
    let contact_points = internal.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    let nodes: Vec<Node> = (0..BROKERS)
        .map(|i| {
            let (id, size, partitions) = (i.to_string(), BROKERS.to_string(), PARTITIONS.to_string());
            let args = [
                "broker",
                "--node-id",
                &id,
                "--cluster-size",
                &size,
                "--partitions",
                &partitions,
                "--replication-factor",
                "3",
                "--contact-points",
                &contact_points,
                "--internal-port",
                &internal[i],
            ];
            Node::start_with_env(&args, &[("WAGGLE_TEST_PANIC_FILE", files[i].to_str().unwrap())])
        })
        .collect();
    let all: Vec<&Node> = nodes.iter().collect();
    let before = leaders(&all, None);
    eprintln!("leaders of partitions 1-{PARTITIONS}: brokers {before:?}");

    let mut client = grpc_client(&nodes[0]).await;
    deploy_one_task(&mut client).await;
    let load = Arc::new(Mutex::new(Load::default()));
    let mut tasks = Vec::new();
    for node in &nodes {
        for _ in 0..2 {
            tasks.push(tokio::spawn(creator(grpc_client(node).await, load.clone())));
        }
        tasks.push(tokio::spawn(worker(grpc_client(node).await, load.clone())));
    }
    let start = Instant::now();
    wait_until("load on every partition", Duration::from_secs(30), || {
        let l = load.lock().unwrap();
        (1..=PARTITIONS).all(|p| l.created_on(p, start) >= 50 && l.completed_on(p, start) >= 10)
    });

    // the leader's replica of partition 2
    let leader = before[1];
    panic_one_replica(&nodes, &files, &load, leader, 2, true).await;
    // a follower's replica of partition 3
    let now = leaders(&all, None);
    let follower = (0..BROKERS).find(|b| *b != now[2]).expect("a follower");
    panic_one_replica(&nodes, &files, &load, follower, 3, false).await;
    // both serve again after their restart
    let back = Instant::now();
    wait_until("every partition creates and completes after the restarts", Duration::from_secs(20), || {
        let l = load.lock().unwrap();
        (1..=PARTITIONS).all(|p| l.created_on(p, back) > 0 && l.completed_on(p, back) > 0)
    });
    for t in tasks {
        t.abort();
    }

    // nothing acknowledged is lost: every odd instance waits at its job (SetVariables on it
    // is refused NOT_FOUND if it is gone)
    let waiting: Vec<i64> = load.lock().unwrap().created.keys().copied().filter(|k| k % 2 == 1).collect();
    eprintln!("{} acknowledged creations; checking the {} waiting instances", load.lock().unwrap().created.len(), waiting.len());
    for key in waiting {
        let request = SetVariablesRequest { element_instance_key: key, variables: r#"{"checked": true}"#.into(), local: false };
        if let Err(e) = client.set_variables(request).await {
            panic!("acknowledged instance {key} (partition {}) is gone: {e}", partition_of(key));
        }
    }
    // the restarted replicas caught up: equal state at equal applied index everywhere
    for partition in 1..=PARTITIONS {
        let digest = digests_agree(&nodes, partition);
        eprintln!("partition {partition}: {digest}");
    }
}
