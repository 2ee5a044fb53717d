//! The query store exporter under load on the real binary (crates/broker/src/export.rs):
//! - **back pressure in records** (issue 27): with the export backlog bounded low
//!   (`--exporter-max-backlog-records`), a real gRPC client's creations are refused
//!   (RESOURCE_EXHAUSTED) again and again, yet keep being taken between refusals at the
//!   exporter's pace, instead of stalling; the backlog stays near the bound.
//! - **supervision** (issue 30): a panic injected into the store exporter's thread under load
//!   (`WAGGLE_TEST_EXPORTER_PANIC_FILE`, read by debug builds only) shows it DOWN in `/health`
//!   and counted in `/metrics` while the partition goes on taking instances; it restarts from
//!   its acknowledged position, and the store ends with every acknowledged instance, each once
//!   (searched through `/v2/process-instances/search`).

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{deploy_one_task, grpc_client, http_json, one_task_creation, Node};
use serde_json::{json, Value};
use tonic::transport::Channel;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::*;

#[derive(Default)]
struct Load {
    /// Acknowledged creations' keys.
    created: Vec<i64>,
    /// Creations refused with RESOURCE_EXHAUSTED.
    refused: u64,
    /// Creations that failed otherwise (their outcome unknown).
    uncertain: u64,
    /// Times a creation was taken right after one was refused: the gate opened again.
    reopened: u64,
    /// Whether the last answer was a refusal.
    last_refused: bool,
}

async fn creator(mut c: GatewayClient<Channel>, load: Arc<Mutex<Load>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let answer = c.create_process_instance(one_task_creation()).await;
        let refused = {
            let mut l = load.lock().unwrap();
            match answer {
                Ok(r) => {
                    l.created.push(r.into_inner().process_instance_key);
                    if l.last_refused {
                        l.reopened += 1;
                    }
                    l.last_refused = false;
                    false
                }
                Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                    l.refused += 1;
                    l.last_refused = true;
                    true
                }
                Err(_) => {
                    l.uncertain += 1;
                    false
                }
            }
        };
        if refused {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// Completes every job (instances finish, and their completion is exported too).
async fn worker(mut c: GatewayClient<Channel>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let request = ActivateJobsRequest {
            r#type: "benchmark-task".into(),
            worker: "export-store-test".into(),
            timeout: 60_000,
            max_jobs_to_activate: 32,
            request_timeout: 200,
            ..Default::default()
        };
        let Ok(stream) = c.activate_jobs(request).await else { continue };
        let mut stream = stream.into_inner();
        while let Ok(Some(batch)) = stream.message().await {
            for job in batch.jobs {
                let _ = c.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await;
            }
        }
    }
}

fn health(node: &Node) -> (u16, Value) {
    let (code, body) = node.get("/health");
    (code, serde_json::from_str(&body).unwrap_or_else(|e| panic!("/health {body}: {e}")))
}

/// `/health`'s entry for the query store exporter of partition 1.
fn store_exporter(health: &Value) -> Value {
    health["exporters"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["exporter"] == "query-store" && e["partitionId"] == 1))
        .cloned()
        .unwrap_or_else(|| panic!("no query-store exporter in {health}"))
}

fn metric(node: &Node, line_start: &str) -> Option<f64> {
    let (_, body) = node.get("/metrics");
    body.lines().find(|l| l.starts_with(line_start)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

/// Waits (at most 120 s) until the store exporter runs and acknowledged everything committed.
fn caught_up(node: &Node) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, h) = health(node);
        let e = store_exporter(&h);
        if e["status"] == "EXPORTING" && e["lagEntries"] == 0 && e["unacknowledgedRecords"] == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "the query store did not catch up: {h}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every process instance key in the store, paged through with `after` cursors.
fn stored_instances(node: &Node) -> Vec<i64> {
    let mut keys = Vec::new();
    let mut page = json!({"limit": 1000});
    loop {
        let request = json!({"page": page}).to_string();
        let (status, body) = http_json(node.rest_port, "POST", "/v2/process-instances/search", &request).expect("search");
        assert_eq!(status, 200, "{body}");
        let r: Value = serde_json::from_str(&body).expect("search json");
        let items = r["items"].as_array().expect("items");
        if items.is_empty() {
            return keys;
        }
        keys.extend(items.iter().map(|i| i["processInstanceKey"].as_str().expect("string key").parse::<i64>().unwrap()));
        page = json!({"limit": 1000, "after": r["page"]["endCursor"]});
    }
}

/// The store holds every acknowledged creation exactly once, and nothing beyond the creations
/// whose outcome the client does not know.
fn assert_store_whole(node: &Node, load: &Load) {
    caught_up(node);
    let stored = stored_instances(node);
    let unique: HashSet<i64> = stored.iter().copied().collect();
    assert_eq!(unique.len(), stored.len(), "an instance is in the store twice");
    let missing: Vec<&i64> = load.created.iter().filter(|k| !unique.contains(k)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged instances not in the store: {:?}",
        missing.len(),
        load.created.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(
        stored.len() as u64 <= load.created.len() as u64 + load.uncertain,
        "{} stored, {} acknowledged + {} unknown",
        stored.len(),
        load.created.len(),
        load.uncertain
    );
}

async fn start_load(node: &Node, creators: usize) -> (Arc<Mutex<Load>>, Arc<AtomicBool>, Vec<tokio::task::JoinHandle<()>>) {
    let mut c = grpc_client(node).await;
    deploy_one_task(&mut c).await;
    let load = Arc::new(Mutex::new(Load::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..creators {
        tasks.push(tokio::spawn(creator(grpc_client(node).await, load.clone(), stop.clone())));
    }
    tasks.push(tokio::spawn(worker(grpc_client(node).await, stop.clone())));
    (load, stop, tasks)
}

async fn stop_load(stop: &AtomicBool, tasks: Vec<tokio::task::JoinHandle<()>>) {
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
    }
}

/// A bound far below the default: new instances are refused again and again, and taken again
/// each time the exporter acknowledges, so they keep flowing at its pace (the entries bound had
/// let the backlog grow, then admitted almost nothing); the backlog stays near the bound, and
/// the store ends whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_export_backlog_bound_throttles_new_instances_instead_of_stalling() {
    const BOUND: u64 = 5_000;
    let node = Node::start(&["--exporter-max-backlog-records", &BOUND.to_string()]);
    let (load, stop, tasks) = start_load(&node, 6).await;

    // the bound is hit: refusals start
    let deadline = Instant::now() + Duration::from_secs(120);
    while load.lock().unwrap().refused == 0 {
        assert!(Instant::now() < deadline, "never refused: {} created", load.lock().unwrap().created.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at_first_refusal = load.lock().unwrap().created.len();
    let reopened_then = load.lock().unwrap().reopened;
    // and creations go on: taken again after refusals many times over, and many of them
    let (mut max_backlog, mut acknowledged) = (0u64, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let (_, h) = health(&node);
        let e = store_exporter(&h);
        max_backlog = max_backlog.max(e["unacknowledgedRecords"].as_u64().expect("unacknowledgedRecords"));
        acknowledged.push(e["acknowledgedPosition"].as_u64().expect("acknowledgedPosition"));
        let (created, reopened, refused) = {
            let l = load.lock().unwrap();
            (l.created.len(), l.reopened, l.refused)
        };
        if created >= at_first_refusal + 1_000 && reopened >= reopened_then + 20 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "creations stalled behind the gate: {created} created ({at_first_refusal} at the first refusal), {refused} refused, gate reopened {reopened} times"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_load(&stop, tasks).await;
    let refused = metric(&node, r#"waggle_export_backpressure_refused_total{partition="1"}"#).expect("the refusal counter");
    assert!(refused >= 1.0, "refusals not counted");
    assert!(acknowledged.windows(2).filter(|w| w[1] > w[0]).count() >= 3, "the exporter did not move on: {acknowledged:?}");
    // what was taken while under the bound, and the completions always taken, overshoot it a
    // little; a stall would have let it grow far beyond
    assert!(max_backlog <= 10 * BOUND, "the backlog reached {max_backlog} records with a bound of {BOUND}");
    let load = load.lock().unwrap();
    eprintln!(
        "created {}, refused {}, gate reopened {} times, largest backlog sampled {max_backlog} records",
        load.created.len(),
        load.refused,
        load.reopened
    );
    assert_store_whole(&node, &load);
}

/// How long the injected panic keeps the exporter down at least.
const HOLD_MS: u64 = 3_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_store_exporter_restarts_and_the_store_ends_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("exporter-panic");
    let node = Node::start_with_env(&[], &[("WAGGLE_TEST_EXPORTER_PANIC_FILE", file.to_str().unwrap())]);
    let (load, stop, tasks) = start_load(&node, 3).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while load.lock().unwrap().created.len() < 300 {
        assert!(Instant::now() < deadline, "load did not build up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::write(&file, format!("query-store 1 {HOLD_MS}")).unwrap();

    // DOWN in /health (the node too), counted in /metrics, while the partition stays UP
    let deadline = Instant::now() + Duration::from_secs(60);
    let (code, h) = loop {
        let (code, h) = health(&node);
        if store_exporter(&h)["status"] == "DOWN" {
            break (code, h);
        }
        assert!(Instant::now() < deadline, "the exporter never showed DOWN: {h}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let created_when_down = load.lock().unwrap().created.len();
    assert_eq!(code, 503, "{h}");
    assert_eq!(h["status"], "DOWN", "{h}");
    let e = store_exporter(&h);
    assert!(e["lastPanic"].as_str().is_some_and(|p| p.contains("injected panic")), "{e}");
    assert_eq!(e["panics"], 1, "{e}");
    assert_eq!(h["partitions"][0]["status"], "UP", "the partition stays up: {h}");
    assert_eq!(metric(&node, r#"waggle_exporter_panics_total{exporter="query-store",partition="1"}"#), Some(1.0));
    assert!(!file.exists(), "the hook took the file");

    // restarted: EXPORTING again, the node UP, and instances were taken meanwhile
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, h) = health(&node);
        if store_exporter(&h)["status"] == "EXPORTING" && code == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the exporter did not restart: {h}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let created_when_up = load.lock().unwrap().created.len();
    assert!(created_when_up > created_when_down, "no instance was taken while the exporter was down");
    assert_eq!(metric(&node, r#"waggle_exporter_health{exporter="query-store",partition="1"}"#), Some(1.0));
    // more load after the restart, then the store is checked
    let deadline = Instant::now() + Duration::from_secs(60);
    while load.lock().unwrap().created.len() < created_when_up + 200 {
        assert!(Instant::now() < deadline, "load did not go on after the restart");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_load(&stop, tasks).await;
    let log = node.log();
    assert!(log.contains("exporter panicked; restarting it"), "{log}");
    assert!(log.contains("exporter restarted after a panic"), "{log}");
    let load = load.lock().unwrap();
    eprintln!("created {} ({created_when_down} when it panicked, {created_when_up} when it was back)", load.created.len());
    assert_store_whole(&node, &load);
    assert_eq!(store_exporter(&health(&node).1)["panics"], 1);
}
