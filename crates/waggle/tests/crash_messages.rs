//! `kill -9` while messages correlate across partitions: with three partitions, instances wait
//! on one partition for messages that live on another, so the subscription handshake is in
//! flight between partitions when the process dies. After a restart, every instance whose
//! creation and whose message were both acknowledged must go on to its task exactly once: what
//! a partition had sent another and not seen acknowledged is sent again, and a copy the
//! receiver already processed is not processed twice.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{repo_root, Node};
use tonic::transport::Channel;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::*;

#[derive(Default)]
struct Acked {
    /// instance key → its correlation key
    created: HashMap<i64, String>,
    /// correlation keys whose message was acknowledged
    published: HashSet<String>,
}

fn publish_request(correlation_key: &str) -> PublishMessageRequest {
    PublishMessageRequest {
        name: "benchmark-message".into(),
        correlation_key: correlation_key.into(),
        time_to_live: 3_600_000,
        message_id: format!("id-{correlation_key}"),
        variables: "{}".into(),
        tenant_id: String::new(),
    }
}

/// Creates instances and publishes their messages, half of them before the instance exists (the
/// message waits, buffered) and half after (the subscription waits).
async fn load(mut c: GatewayClient<Channel>, acked: Arc<Mutex<Acked>>, first: u64, stop: Instant) {
    let mut i = first;
    while Instant::now() < stop {
        let correlation_key = format!("c-{i}");
        let before = i.is_multiple_of(2);
        if before && c.publish_message(publish_request(&correlation_key)).await.is_ok() {
            acked.lock().unwrap().published.insert(correlation_key.clone());
        }
        let create = CreateProcessInstanceRequest {
            bpmn_process_id: "benchmark-message".into(),
            version: -1,
            variables: format!(r#"{{"correlationKey": "{correlation_key}"}}"#),
            ..Default::default()
        };
        if let Ok(r) = c.create_process_instance(create).await {
            acked.lock().unwrap().created.insert(r.into_inner().process_instance_key, correlation_key.clone());
        }
        if !before && c.publish_message(publish_request(&correlation_key)).await.is_ok() {
            acked.lock().unwrap().published.insert(correlation_key);
        }
        i += 1;
    }
}

fn activate_request() -> ActivateJobsRequest {
    ActivateJobsRequest {
        r#type: "benchmark-task".into(),
        worker: "crash-messages".into(),
        // long enough that no job comes back within the test: each is seen once
        timeout: 600_000,
        max_jobs_to_activate: 1_000,
        request_timeout: 200,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_message_handshakes_loses_and_repeats_nothing() {
    let mut node = Node::start(&["--partitions", "3", "--snapshot-every-entries", "200"]);
    let mut c = common::grpc_client(&node).await;
    let content = std::fs::read(repo_root().join("workloads/message_one_task.bpmn")).unwrap();
    c.deploy_resource(DeployResourceRequest {
        resources: vec![Resource { name: "message_one_task.bpmn".into(), content }],
        tenant_id: String::new(),
    })
    .await
    .expect("deploy");
    let acked = Arc::new(Mutex::new(Acked::default()));
    let stop = Instant::now() + Duration::from_secs(30);
    let tasks: Vec<_> = (0..32).map(|n| tokio::spawn(load(c.clone(), acked.clone(), n * 1_000_000, stop))).collect();
    let built_up = || acked.lock().unwrap().created.len() >= 600;
    common::kill9_under_load(&mut node, tasks, built_up, || format!("{} created", acked.lock().unwrap().created.len())).await;
    let acked = std::mem::take(&mut *acked.lock().unwrap());

    let killed = Instant::now();
    node.restart();
    eprintln!("restarted in {:?}", killed.elapsed());
    let mut c = common::grpc_client(&node).await;
    // every instance whose creation and message were acknowledged reaches its task
    let must_reach: HashSet<i64> = acked.created.iter().filter(|(_, k)| acked.published.contains(*k)).map(|(i, _)| *i).collect();
    assert!(must_reach.len() >= 300, "only {} instances had both acknowledged", must_reach.len());
    let mut jobs_per_instance: HashMap<i64, u32> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !must_reach.iter().all(|k| jobs_per_instance.contains_key(k)) {
        let missing: Vec<_> = must_reach.iter().filter(|k| !jobs_per_instance.contains_key(k)).collect();
        assert!(Instant::now() < deadline, "{} acknowledged instances never got their message, e.g. {:?}", missing.len(), missing.first());
        let mut stream = c.activate_jobs(activate_request()).await.expect("activate").into_inner();
        while let Some(batch) = stream.message().await.expect("stream") {
            for job in batch.jobs {
                *jobs_per_instance.entry(job.process_instance_key).or_default() += 1;
            }
        }
    }
    eprintln!("all reached {:?} after the kill", killed.elapsed());
    // give a repeated correlation time to show up, then collect what is left
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut stream = c.activate_jobs(activate_request()).await.expect("activate").into_inner();
    while let Some(batch) = stream.message().await.expect("stream") {
        for job in batch.jobs {
            *jobs_per_instance.entry(job.process_instance_key).or_default() += 1;
        }
    }
    let repeated: Vec<_> = jobs_per_instance.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "instances that passed their message catch more than once: {repeated:?}");
}
