//! `kill -9` under load: every acknowledged command is there after a restart (issue: single
//! node, point 3). Creators, workers and variable updates run concurrently and record what the
//! server acknowledged; the process is killed while requests are in flight, restarted on the
//! same data, and every acknowledged item is accounted for.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{deploy_one_task, Node};
use serde_json::Value;
use tonic::transport::Channel;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::*;

#[derive(Default)]
struct Acked {
    /// instance key → the `i` it was created with
    created: HashMap<i64, i64>,
    /// instance keys whose job completion was acknowledged
    completed: HashSet<i64>,
    /// instance keys whose job completion was sent (acknowledged or not)
    completion_sent: HashSet<i64>,
    /// instance key → value of `extra` acknowledged by SetVariables
    extra: HashMap<i64, i64>,
}

fn create_request(i: i64) -> CreateProcessInstanceRequest {
    CreateProcessInstanceRequest {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        variables: format!(r#"{{"i": {i}}}"#),
        ..Default::default()
    }
}

fn activate_request(max: i32) -> ActivateJobsRequest {
    ActivateJobsRequest {
        r#type: "benchmark-task".into(),
        worker: "crash-test".into(),
        timeout: 1_000,
        max_jobs_to_activate: max,
        request_timeout: 200,
        ..Default::default()
    }
}

async fn creator(mut c: GatewayClient<Channel>, acked: Arc<Mutex<Acked>>, first: i64, stop: Instant) {
    let mut i = first;
    while Instant::now() < stop {
        if let Ok(r) = c.create_process_instance(create_request(i)).await {
            let key = r.into_inner().process_instance_key;
            acked.lock().unwrap().created.insert(key, i);
            // every third instance also gets a variable update
            if i % 3 == 0 {
                let req = SetVariablesRequest { element_instance_key: key, variables: format!(r#"{{"extra": {i}}}"#), local: false };
                if c.set_variables(req).await.is_ok() {
                    acked.lock().unwrap().extra.insert(key, i);
                }
            }
        }
        i += 1;
    }
}

async fn worker(mut c: GatewayClient<Channel>, acked: Arc<Mutex<Acked>>, stop: Instant) {
    while Instant::now() < stop {
        let Ok(stream) = c.activate_jobs(activate_request(8)).await else { continue };
        let mut stream = stream.into_inner();
        while let Ok(Some(batch)) = stream.message().await {
            for job in batch.jobs {
                // only complete every other instance: the rest must still be there, waiting
                let vars: Value = serde_json::from_str(&job.variables).unwrap();
                if vars["i"].as_i64().unwrap_or(0) % 2 == 1 {
                    continue;
                }
                acked.lock().unwrap().completion_sent.insert(job.process_instance_key);
                let req = CompleteJobRequest { job_key: job.key, variables: r#"{"done": true}"#.into() };
                if c.complete_job(req).await.is_ok() {
                    acked.lock().unwrap().completed.insert(job.process_instance_key);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_no_acknowledged_command() {
    // frequent snapshots: the kill lands between snapshots taken (and the log compacted behind
    // them) during the load, so recovery starts from a snapshot plus the log after it
    let mut node = Node::start(&["--partitions", "2", "--snapshot-every-entries", "100"]);
    let mut c = common::grpc_client(&node).await;
    deploy_one_task(&mut c).await;
    let acked = Arc::new(Mutex::new(Acked::default()));
    let stop = Instant::now() + Duration::from_secs(30);
    let mut tasks = Vec::new();
    for n in 0..4 {
        tasks.push(tokio::spawn(creator(c.clone(), acked.clone(), n * 1_000_000, stop)));
    }
    for _ in 0..2 {
        tasks.push(tokio::spawn(worker(c.clone(), acked.clone(), stop)));
    }
    // let load build up, then kill while requests are in flight
    let built_up = || acked.lock().unwrap().created.len() >= 300 && acked.lock().unwrap().completed.len() >= 50;
    common::kill9_under_load(&mut node, tasks, built_up, || format!("{} created", acked.lock().unwrap().created.len())).await;
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    assert!(!acked.extra.is_empty());

    node.restart();
    let (_, cluster) = node.get("/actuator/cluster");
    let cluster: Value = serde_json::from_str(&cluster).expect("cluster json");
    for partition in cluster["brokers"][0]["partitions"].as_array().expect("partitions") {
        assert!(partition["snapshotIndex"].as_u64() > Some(0), "no snapshot was taken under load: {partition}");
    }
    let mut c = common::grpc_client(&node).await;
    // every acknowledged instance that was not (possibly) completed still waits at its task,
    // with its variables; acknowledged completions stay completed
    let mut waiting: HashMap<i64, Value> = HashMap::new();
    let must_wait: HashSet<i64> = acked.created.keys().filter(|k| !acked.completion_sent.contains(k)).copied().collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !must_wait.iter().all(|k| waiting.contains_key(k)) {
        assert!(
            Instant::now() < deadline,
            "{} acknowledged instances missing after restart, e.g. {:?}",
            must_wait.iter().filter(|k| !waiting.contains_key(k)).count(),
            must_wait.iter().find(|k| !waiting.contains_key(k))
        );
        let mut stream = c.activate_jobs(activate_request(1000)).await.expect("activate").into_inner();
        while let Some(batch) = stream.message().await.expect("stream") {
            for job in batch.jobs {
                waiting.insert(job.process_instance_key, serde_json::from_str(&job.variables).unwrap());
            }
        }
    }
    // jobs activated above time out after 1 s and return to the pool; collect everything that is
    // activatable once more, so that a job whose completion was lost would show up here
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let mut stream = c.activate_jobs(activate_request(10_000)).await.expect("activate").into_inner();
    let mut again = 0;
    while let Some(batch) = stream.message().await.expect("stream") {
        for job in batch.jobs {
            again += 1;
            waiting.insert(job.process_instance_key, serde_json::from_str(&job.variables).unwrap());
        }
    }
    assert!(again >= must_wait.len(), "only {again} of {} waiting jobs came back after their timeout", must_wait.len());
    for key in &acked.completed {
        assert!(!waiting.contains_key(key), "instance {key}: acknowledged completion lost");
    }
    for (key, i) in &acked.created {
        if let Some(vars) = waiting.get(key) {
            assert_eq!(vars["i"].as_i64(), Some(*i), "instance {key}: creation variables");
        }
    }
    for (key, extra) in &acked.extra {
        if let Some(vars) = waiting.get(key) {
            assert_eq!(vars["extra"].as_i64(), Some(*extra), "instance {key}: acknowledged SetVariables lost");
        }
    }

    // and the work continues: a new instance runs to its job, which completes
    let created = c.create_process_instance(create_request(-1)).await.expect("create after restart").into_inner();
    let deadline = Instant::now() + Duration::from_secs(30);
    'find: loop {
        assert!(Instant::now() < deadline, "the job of a new instance never came");
        let mut stream = c.activate_jobs(activate_request(1000)).await.expect("activate").into_inner();
        while let Some(batch) = stream.message().await.expect("stream") {
            if let Some(job) = batch.jobs.iter().find(|j| j.process_instance_key == created.process_instance_key) {
                c.complete_job(CompleteJobRequest { job_key: job.key, variables: "{}".into() }).await.expect("complete after restart");
                break 'find;
            }
        }
    }
}
