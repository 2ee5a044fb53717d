//! Disk watermarks on the real binary (docs.camunda.io, "Disk space"; Zeebe's
//! `DiskSpaceRecoveryIT` expects "RESOURCE_EXHAUSTED: Cannot accept requests for partition 1.
//! Broker is out of disk space").
//!
//! The data folder is a 200 MB tmpfs the test mounts (it runs as root on the project's
//! machines); a ballast file (`fallocate`) takes its free space below the processing watermark,
//! then below the replication watermark, and is removed again. Where mounting is not allowed,
//! the test falls back to the data folder's own file system, with watermarks set just under its
//! current free space, so that a 1 GB ballast crosses them (other writers on that disk could
//! disturb this variant); it says which variant ran on standard error.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{deploy_one_task, grpc_client, one_task_activation, one_task_creation, Node};
use waggle_protocol::gateway::{CancelProcessInstanceRequest, CompleteJobRequest, PublishMessageRequest};

/// Unmounts the tmpfs when the test ends (after the node, declared later, was killed).
struct Mount(Option<PathBuf>);

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = Command::new("umount").arg(&path).status();
        }
    }
}

/// Free bytes on `path`'s file system, as `df` reads them.
fn free_bytes(path: &Path) -> u64 {
    let out = Command::new("df").args(["-B1", "--output=avail"]).arg(path).output().expect("df");
    String::from_utf8_lossy(&out.stdout).lines().nth(1).and_then(|l| l.trim().parse().ok()).expect("df's free bytes")
}

fn fallocate(path: &Path, bytes: u64) {
    let ok = Command::new("fallocate").args(["-l", &bytes.to_string()]).arg(path).status().expect("fallocate").success();
    assert!(ok, "fallocate {} bytes at {}", bytes, path.display());
}

/// Waits until `/health`'s disk status is `status`; returns the body.
fn wait_disk_status(node: &Node, status: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, body) = node.get("/health");
        let v: serde_json::Value = serde_json::from_str(&body).expect("health JSON");
        if v["disk"]["status"] == status {
            assert_eq!(code, if status == "OK" { 200 } else { 503 }, "{body}");
            return v;
        }
        assert!(Instant::now() < deadline, "disk status never became {status}: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn metric(node: &Node, name: &str) -> f64 {
    let (_, text) = node.get("/metrics");
    text.lines().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse().ok())).unwrap_or_else(|| panic!("no metric {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_disk_refuses_new_work_lets_work_drain_and_recovers_by_itself() {
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=200m", "tmpfs"]).arg(&data).status().is_ok_and(|s| s.success());
    let _mount = Mount(mounted.then(|| data.clone()));
    // the ballast goes on the data folder's file system: inside it (tmpfs), or beside it
    let ballast = if mounted { data.join("ballast") } else { temp.path().join("ballast") };
    let (processing, replication, big, more) = if mounted {
        (100u64 << 20, 40u64 << 20, 0, 0)
    } else {
        let free = free_bytes(temp.path());
        (free - (256 << 20), free - (768 << 20), 512u64 << 20, 1024u64 << 20)
    };
    eprintln!("disk watermarks test: {}", if mounted { "on a 200 MB tmpfs" } else { "mount refused: thresholds near the free space" });
    let (p, r) = (processing.to_string(), replication.to_string());
    let node = Node::start_at(
        data.clone(),
        &["--disk-free-space-processing", &p, "--disk-free-space-replication", &r, "--disk-monitoring-interval-ms", "50"],
        &[],
    );
    let mut client = grpc_client(&node).await;
    deploy_one_task(&mut client).await;
    let first = client.create_process_instance(one_task_creation()).await.expect("create").into_inner();
    let second = client.create_process_instance(one_task_creation()).await.expect("create").into_inner();
    let mut jobs = Vec::new();
    while jobs.len() < 2 {
        let mut stream = client.activate_jobs(one_task_activation(2)).await.expect("activate").into_inner();
        while let Some(batch) = stream.message().await.expect("jobs") {
            jobs.extend(batch.jobs);
        }
    }
    let healthy = wait_disk_status(&node, "OK");
    assert_eq!(metric(&node, "waggle_disk_space_available"), 1.0);

    // below the processing watermark: new work is refused, work in progress drains
    let fill = if mounted { free_bytes(&data) - (70 << 20) } else { big };
    fallocate(&ballast, fill);
    let low = wait_disk_status(&node, "LOW_PROCESSING");
    assert_eq!(low["status"], "DOWN");
    assert!(low["disk"]["freeBytes"].as_u64().unwrap() < healthy["disk"]["freeBytes"].as_u64().unwrap());
    assert_eq!(metric(&node, "waggle_disk_space_available"), 0.0);
    let refused = client.create_process_instance(one_task_creation()).await.expect_err("a creation on a full disk");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert_eq!(refused.message(), "Cannot accept requests for partition 1. Broker is out of disk space");
    let message = PublishMessageRequest { name: "m".into(), correlation_key: "k".into(), time_to_live: 60_000, ..Default::default() };
    let refused = client.publish_message(message.clone()).await.expect_err("a message on a full disk");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(refused.message().contains("out of disk space"), "{}", refused.message());
    let job = jobs.iter().find(|j| j.process_instance_key == first.process_instance_key).expect("the first instance's job");
    client.complete_job(CompleteJobRequest { job_key: job.key, ..Default::default() }).await.expect("a completion drains");
    client
        .cancel_process_instance(CancelProcessInstanceRequest { process_instance_key: second.process_instance_key })
        .await
        .expect("a cancellation drains");
    // the REST API answers the same refusal
    let (status, body) =
        common::http_json(node.rest_port, "POST", "/v2/process-instances", r#"{"processDefinitionId":"benchmark"}"#).expect("REST");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("out of disk space"), "{body}");

    // below the replication watermark: every client command is refused
    let extra = data.with_extension("ballast2");
    let extra = if mounted { data.join("ballast2") } else { extra };
    let fill = if mounted { free_bytes(&data) - (20 << 20) } else { more - big };
    fallocate(&extra, fill);
    wait_disk_status(&node, "LOW_REPLICATION");
    let third = client.create_process_instance(one_task_creation()).await.expect_err("refused");
    assert_eq!(third.code(), tonic::Code::ResourceExhausted);
    let refused = client
        .cancel_process_instance(CancelProcessInstanceRequest { process_instance_key: second.process_instance_key })
        .await
        .expect_err("even a cancellation is refused at the last reserve");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);

    // space returns: work resumes without a restart
    std::fs::remove_file(&extra).unwrap();
    std::fs::remove_file(&ballast).unwrap();
    wait_disk_status(&node, "OK");
    assert_eq!(metric(&node, "waggle_disk_space_available"), 1.0);
    client.create_process_instance(one_task_creation()).await.expect("creations are taken again");
    client.publish_message(message).await.expect("messages are taken again");
    assert!(node.log().contains("disk space low"), "the node logs the refusal's cause");
}
