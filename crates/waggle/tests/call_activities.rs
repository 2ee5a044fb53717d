//! Call activities through the real binary with three partitions: instances are spread over the
//! partitions, each called instance runs on its caller's partition (as Zeebe creates it there),
//! its job carries its own process instance key, cancelling it alone is refused
//! (FAILED_PRECONDITION), and the caller's awaited result holds what the called instance handed
//! back. Models: tests/bpmn-diff/models/call_parent.bpmn and call_child.bpmn.

mod common;

use std::collections::HashMap;

use common::{grpc_client, repo_root, Node};
use tonic::Code;
use waggle_protocol::gateway::*;
use waggle_protocol::partition_of;

const SUFFIX: &str = "_it";

fn model(name: &str) -> Resource {
    let path = repo_root().join("tests/bpmn-diff/models").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Resource { name: name.into(), content: text.replace("__S__", SUFFIX).into_bytes() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn called_instances_run_on_their_callers_partition_and_hand_back_their_variables() {
    let node = Node::start(&["--partitions", "3"]);
    let mut client = grpc_client(&node).await;
    client
        .deploy_resource(DeployResourceRequest {
            resources: vec![model("call_parent.bpmn"), model("call_child.bpmn")],
            tenant_id: String::new(),
        })
        .await
        .expect("deploy");
    const N: i64 = 6;
    let mut results = Vec::new();
    for n in 0..N {
        let mut creator = client.clone();
        results.push(tokio::spawn(async move {
            let request = CreateProcessInstanceWithResultRequest {
                request: Some(CreateProcessInstanceRequest {
                    bpmn_process_id: format!("cap{SUFFIX}"),
                    version: -1,
                    variables: format!(r#"{{"n":{n}}}"#),
                    ..Default::default()
                }),
                request_timeout: 20_000,
                fetch_variables: vec![],
            };
            creator.create_process_instance_with_result(request).await.expect("the caller's result").into_inner()
        }));
    }
    // the called instances' jobs: their own instance key; n tells which caller they belong to
    let mut called: HashMap<i64, i64> = HashMap::new();
    let mut refused_once = false;
    while called.len() < N as usize {
        let activation = ActivateJobsRequest {
            r#type: format!("cac-work{SUFFIX}"),
            worker: "it".into(),
            timeout: 60_000,
            max_jobs_to_activate: 10,
            request_timeout: 1_000,
            ..Default::default()
        };
        let mut answers = client.activate_jobs(activation).await.expect("activate").into_inner();
        while let Some(batch) = answers.message().await.expect("activation stream") {
            for job in batch.jobs {
                assert_eq!(job.bpmn_process_id, format!("cac{SUFFIX}"));
                let variables: serde_json::Value = serde_json::from_str(&job.variables).expect("job variables");
                let n = variables["n"].as_i64().expect("the caller's variable n was copied");
                if !refused_once {
                    let refused = client
                        .cancel_process_instance(CancelProcessInstanceRequest { process_instance_key: job.process_instance_key })
                        .await
                        .expect_err("a called instance cannot be cancelled alone");
                    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
                    assert!(refused.message().contains("but it is created by a parent process instance"), "{}", refused.message());
                    refused_once = true;
                }
                called.insert(n, job.process_instance_key);
                let variables = format!(r#"{{"doubled":{}}}"#, n * 2);
                client.complete_job(CompleteJobRequest { job_key: job.key, variables }).await.expect("complete the called job");
            }
        }
    }
    // the callers go on after their call activity: their job sees what came back
    let mut after = 0;
    while after < N {
        let activation = ActivateJobsRequest {
            r#type: format!("cap-after{SUFFIX}"),
            worker: "it".into(),
            timeout: 60_000,
            max_jobs_to_activate: 10,
            request_timeout: 1_000,
            ..Default::default()
        };
        let mut answers = client.activate_jobs(activation).await.expect("activate").into_inner();
        while let Some(batch) = answers.message().await.expect("activation stream") {
            for job in batch.jobs {
                let variables: serde_json::Value = serde_json::from_str(&job.variables).expect("job variables");
                assert_eq!(variables["doubled"].as_i64(), variables["n"].as_i64().map(|n| n * 2), "{variables}");
                client.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await.expect("complete");
                after += 1;
            }
        }
    }
    let mut partitions = std::collections::HashSet::new();
    for result in results {
        let result = result.await.expect("creator task");
        let variables: serde_json::Value = serde_json::from_str(&result.variables).expect("result variables");
        let n = variables["n"].as_i64().expect("n");
        assert_eq!(variables["doubled"].as_i64(), Some(n * 2), "the called instance's variable came back: {variables}");
        let child = called[&n];
        assert_ne!(child, result.process_instance_key);
        assert_eq!(partition_of(child), partition_of(result.process_instance_key), "called on the caller's partition");
        partitions.insert(partition_of(result.process_instance_key));
    }
    assert!(partitions.len() > 1, "the callers were spread over the partitions: {partitions:?}");
}
