//! Job streams of a tenant across the brokers of a cluster (issue 29): three `waggle broker`
//! processes with multi-tenancy on, three partitions of replication factor 1 (each led by its
//! own broker). A streaming worker for tenant-x at broker 0 gets tenant-x's jobs from every
//! partition, those of the partitions brokers 1 and 2 lead included (the brokers announce each
//! stream with its tenants, as Zeebe's gateway registers a stream with its tenant ids at every
//! broker); a streaming worker for tenant-y beside it gets none of them.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use waggle_protocol::gateway as pb;

use common::{client_models, free_port, grpc_client, Node};

const BROKERS: usize = 3;

fn broker_args(i: usize, internal: &[u16]) -> Vec<String> {
    let contact_points = internal.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    [
        "broker",
        "--node-id",
        &i.to_string(),
        "--cluster-size",
        &BROKERS.to_string(),
        "--partitions",
        &BROKERS.to_string(),
        "--contact-points",
        &contact_points,
        "--internal-port",
        &internal[i].to_string(),
        "--multi-tenancy",
        "true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn stream_request(tenant: &str) -> pb::StreamActivatedJobsRequest {
    pb::StreamActivatedJobsRequest {
        r#type: "benchmark-task".into(),
        worker: format!("{tenant}-worker"),
        timeout: 60_000,
        tenant_ids: vec![tenant.into()],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_stream_at_one_broker_gets_its_jobs_from_every_partition() {
    let internal: Vec<u16> = (0..BROKERS).map(|_| free_port()).collect();
    let nodes: Vec<Node> = (0..BROKERS)
        .map(|i| {
            let args = broker_args(i, &internal);
            Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    let mut client = grpc_client(&nodes[0]).await;
    let deploy = pb::DeployResourceRequest {
        resources: vec![pb::Resource {
            name: "one_task.bpmn".into(),
            content: std::fs::read(client_models().join("one_task.bpmn")).expect("one_task.bpmn"),
        }],
        tenant_id: "tenant-x".into(),
    };
    client.deploy_resource(deploy).await.expect("deploy to tenant-x");

    // the streams open at broker 0; the other brokers learn of them (with their tenants)
    let mut x = grpc_client(&nodes[0]).await.stream_activated_jobs(stream_request("tenant-x")).await.expect("stream x").into_inner();
    let mut y = grpc_client(&nodes[0]).await.stream_activated_jobs(stream_request("tenant-y")).await.expect("stream y").into_inner();
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < BROKERS {
        assert!(Instant::now() < deadline, "tenant-x's stream got jobs of partitions {seen:?} only\n{}", nodes[1].log());
        // creations through each broker, so that every partition gets instances
        for node in &nodes {
            let create = pb::CreateProcessInstanceRequest {
                bpmn_process_id: "benchmark".into(),
                version: -1,
                tenant_id: "tenant-x".into(),
                ..Default::default()
            };
            grpc_client(node).await.create_process_instance(create).await.expect("create in tenant-x");
        }
        let until = Instant::now() + Duration::from_secs(5);
        while let Ok(job) = tokio::time::timeout(until.saturating_duration_since(Instant::now()), x.message()).await {
            let job = job.expect("the stream").expect("a pushed job");
            assert_eq!(job.tenant_id, "tenant-x");
            seen.insert(waggle_protocol::partition_of(job.key));
            client.complete_job(pb::CompleteJobRequest { job_key: job.key, variables: String::new() }).await.expect("complete");
            if seen.len() == BROKERS {
                break;
            }
        }
        eprintln!("tenant-x's stream has had jobs of partitions {seen:?}");
    }
    // tenant-y's stream got nothing of tenant-x's
    let none = tokio::time::timeout(Duration::from_millis(500), y.message()).await;
    assert!(none.is_err(), "tenant-y's stream got {none:?}");
}
