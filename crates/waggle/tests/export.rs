//! The debug exporter on the real binary (issue 27): a client deploys, creates and completes;
//! every committed record appears once as a line of Zeebe's record JSON, in position order per
//! partition. Then `kill -9` under load while exporting, and a restart: every committed record
//! is in the file at least once, and after removing duplicates by (partition, position) the
//! positions of each partition are exactly 1..=its last (no gap, a duplicate identical to its
//! first copy), with every acknowledged creation and completion in it.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{deploy_one_task, Node};
use serde_json::Value;
use tonic::transport::Channel;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::*;

const ENVELOPE: [&str; 13] = [
    "partitionId",
    "position",
    "sourceRecordPosition",
    "key",
    "timestamp",
    "recordType",
    "valueType",
    "intent",
    "rejectionType",
    "rejectionReason",
    "brokerVersion",
    "recordVersion",
    "value",
];

/// The file's lines, each parsed (every line must be whole JSON).
fn read_lines(path: &Path) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(text.is_empty() || text.ends_with('\n'), "the file ends inside a line");
    text.lines().map(|l| (l.to_string(), serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))).collect()
}

/// Waits until every exporter on every partition has handed over and acknowledged every
/// committed entry (`/health`'s exporter list), then reads the file.
fn exported(node: &Node, path: &Path, partitions: usize) -> Vec<(String, Value)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = node.get("/health");
        let health: Value = serde_json::from_str(&body).expect("health json");
        // the query store exports too (on by default): only the debug exporter's entries
        let exporters: Vec<Value> =
            health["exporters"].as_array().cloned().unwrap_or_default().into_iter().filter(|e| e["exporter"] == "debug").collect();
        let caught_up = exporters.len() == partitions
            && exporters.iter().all(|e| e["lagEntries"] == 0 && e["unacknowledgedEntries"] == 0 && e["status"] == "EXPORTING");
        if caught_up {
            assert_eq!(code, 200, "{body}");
            return read_lines(path);
        }
        assert!(Instant::now() < deadline, "export did not catch up: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Per partition: position → the line, checking that a repeated position repeats its line.
fn dedup(lines: &[(String, Value)]) -> BTreeMap<u64, BTreeMap<u64, Value>> {
    let mut by_partition: BTreeMap<u64, BTreeMap<u64, (String, Value)>> = BTreeMap::new();
    for (text, v) in lines {
        let (p, pos) = (v["partitionId"].as_u64().expect("partitionId"), v["position"].as_u64().expect("position"));
        let first = by_partition.entry(p).or_default().entry(pos).or_insert_with(|| (text.clone(), v.clone()));
        assert_eq!(&first.0, text, "partition {p} position {pos} exported twice with different content");
    }
    by_partition.into_iter().map(|(p, m)| (p, m.into_iter().map(|(pos, (_, v))| (pos, v)).collect())).collect()
}

/// Every partition's positions are exactly 1..=last.
fn assert_contiguous(records: &BTreeMap<u64, BTreeMap<u64, Value>>) {
    for (p, m) in records {
        let last = *m.keys().last().expect("records");
        assert_eq!(m.len() as u64, last, "partition {p}: positions 1..={last} expected, {} found", m.len());
    }
}

fn has(records: &BTreeMap<u64, BTreeMap<u64, Value>>, f: impl Fn(&Value) -> bool) -> bool {
    records.values().flat_map(|m| m.values()).any(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_debug_exporter_writes_every_committed_record_once_and_survives_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("export").join("records.jsonl");
    let path_arg = path.to_str().expect("utf-8 path").to_string();
    let mut node = Node::start(&["--partitions", "2", "--snapshot-every-entries", "100", "--exporters-debug-path", &path_arg]);
    let mut c = common::grpc_client(&node).await;
    deploy_one_task(&mut c).await;
    let mut instances = HashSet::new();
    for i in 0..10 {
        let request = CreateProcessInstanceRequest { variables: format!(r#"{{"i": {i}}}"#), ..common::one_task_creation() };
        instances.insert(c.create_process_instance(request).await.expect("create").into_inner().process_instance_key);
    }
    let mut completed = 0;
    while completed < instances.len() {
        let mut stream = c.activate_jobs(common::one_task_activation(10)).await.expect("activate").into_inner();
        while let Some(batch) = stream.message().await.expect("jobs") {
            for job in batch.jobs {
                c.complete_job(CompleteJobRequest { job_key: job.key, variables: r#"{"done": true}"#.into() }).await.expect("complete");
                completed += 1;
            }
        }
    }

    // each committed record once, in Zeebe's shape
    let lines = exported(&node, &path, 2);
    let mut seen = HashSet::new();
    let mut last_position: HashMap<u64, u64> = HashMap::new();
    for (_, v) in &lines {
        assert_eq!(v.as_object().unwrap().keys().map(String::as_str).collect::<Vec<_>>(), ENVELOPE, "{v}");
        let (p, pos) = (v["partitionId"].as_u64().unwrap(), v["position"].as_u64().unwrap());
        assert!(seen.insert((p, pos)), "partition {p} position {pos} exported twice without a crash");
        let previous = last_position.insert(p, pos).unwrap_or(0);
        assert!(pos > previous, "partition {p}: position {pos} after {previous}");
        assert_eq!(v["brokerVersion"], "8.5.0");
    }
    let records = dedup(&lines);
    assert_eq!(records.len(), 2, "both partitions exported");
    assert_contiguous(&records);
    for value_type in ["DEPLOYMENT", "PROCESS", "PROCESS_INSTANCE_CREATION", "PROCESS_INSTANCE", "JOB", "JOB_BATCH", "VARIABLE"] {
        assert!(has(&records, |v| v["valueType"] == value_type), "no {value_type} record");
    }
    for key in &instances {
        assert!(
            has(&records, |v| v["key"] == *key
                && v["intent"] == "ELEMENT_COMPLETED"
                && v["value"]["bpmnElementType"] == "PROCESS"
                && v["value"]["bpmnProcessId"] == "benchmark"),
            "instance {key} did not complete in the export"
        );
    }
    assert!(has(&records, |v| v["valueType"] == "VARIABLE" && v["value"]["name"] == "done" && v["value"]["value"] == "true"));
    let metrics = node.get("/metrics").1;
    assert!(metrics.contains(r#"zeebe_exporter_last_updated_exported_position{exporter="debug",partition="1"}"#), "{metrics}");
    assert!(metrics.contains(r#"waggle_exporter_lag_entries{exporter="debug",partition="2"} 0"#), "{metrics}");

    // kill -9 while exporting under load, restart: at least once, nothing lost
    let acked = Arc::new(Mutex::new((HashSet::<i64>::new(), HashSet::<i64>::new())));
    let stop = Instant::now() + Duration::from_secs(30);
    let mut tasks = Vec::new();
    for _ in 0..3 {
        tasks.push(tokio::spawn(creator(c.clone(), acked.clone(), stop)));
    }
    tasks.push(tokio::spawn(worker(c.clone(), acked.clone(), stop)));
    let built_up = || {
        let a = acked.lock().unwrap();
        a.0.len() >= 300 && a.1.len() >= 50
    };
    common::kill9_under_load(&mut node, tasks, built_up, || format!("{} created", acked.lock().unwrap().0.len())).await;
    let (created, completed) = std::mem::take(&mut *acked.lock().unwrap());
    node.restart();
    let lines = exported(&node, &path, 2);
    let records = dedup(&lines);
    assert_contiguous(&records);
    let unique: usize = records.values().map(|m| m.len()).sum();
    eprintln!(
        "after kill -9: {} lines, {unique} records, {} written again; {} acknowledged creations, {} completions",
        lines.len(),
        lines.len() - unique,
        created.len(),
        completed.len()
    );
    for key in &created {
        assert!(
            has(&records, |v| v["key"] == *key && v["intent"] == "ELEMENT_ACTIVATED" && v["value"]["bpmnElementType"] == "PROCESS"),
            "acknowledged instance {key} is not in the export"
        );
    }
    for key in &completed {
        assert!(
            has(&records, |v| v["valueType"] == "JOB" && v["intent"] == "COMPLETED" && v["value"]["processInstanceKey"] == *key),
            "the acknowledged completion of instance {key}'s job is not in the export"
        );
    }
}

async fn creator(mut c: GatewayClient<Channel>, acked: Arc<Mutex<(HashSet<i64>, HashSet<i64>)>>, stop: Instant) {
    while Instant::now() < stop {
        if let Ok(r) = c.create_process_instance(common::one_task_creation()).await {
            acked.lock().unwrap().0.insert(r.into_inner().process_instance_key);
        }
    }
}

async fn worker(mut c: GatewayClient<Channel>, acked: Arc<Mutex<(HashSet<i64>, HashSet<i64>)>>, stop: Instant) {
    while Instant::now() < stop {
        let Ok(stream) = c.activate_jobs(ActivateJobsRequest { request_timeout: 200, ..common::one_task_activation(16) }).await else {
            continue;
        };
        let mut stream = stream.into_inner();
        while let Ok(Some(batch)) = stream.message().await {
            for job in batch.jobs {
                if c.complete_job(CompleteJobRequest { job_key: job.key, variables: "{}".into() }).await.is_ok() {
                    acked.lock().unwrap().1.insert(job.process_instance_key);
                }
            }
        }
    }
}
