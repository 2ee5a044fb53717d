//! Backups and restore on the real binary, after Zeebe's backup management API (docs.camunda.io,
//! "Backup and restore": `POST /actuator/backups` with `{"backupId": N}`, `GET
//! /actuator/backups[/{id}]`, `DELETE /actuator/backups/{id}`) and its restore step.
//!
//! A backup is taken while instances are created and their jobs completed; the data folder
//! restored from it (`waggle restore`) starts, and each partition's state digest equals the one
//! the source partition had at the backup's position (recorded by the partition thread when it
//! took the checkpoint, from its live state).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{deploy_one_task, grpc_client, http_json, one_task_activation, one_task_creation, Node};
use waggle_protocol::gateway::CompleteJobRequest;

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// Waits until backup `id` leaves IN_PROGRESS; returns its status.
fn wait_backup(node: &Node, id: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, body) = node.get(&format!("/actuator/backups/{id}"));
        assert_eq!(code, 200, "{body}");
        let v = json(&body);
        if v["state"] != "IN_PROGRESS" {
            return v;
        }
        assert!(Instant::now() < deadline, "backup {id} still in progress: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_load_restores_the_state_at_its_position_and_deleted_backups_are_gone() {
    let store = tempfile::tempdir().unwrap();
    let store_path = store.path().to_str().unwrap().to_string();
    let args = ["--partitions", "2", "--query-store", "false", "--backup-store", &store_path];
    let node = Node::start(&args);
    let mut client = grpc_client(&node).await;
    deploy_one_task(&mut client).await;

    // load: a creator and a worker that completes what it activates
    let stop = Arc::new(AtomicBool::new(false));
    let (created, completed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let creator = {
        let (mut client, stop, created) = (client.clone(), stop.clone(), created.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                client.create_process_instance(one_task_creation()).await.expect("create");
                created.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let worker = {
        let (mut client, stop, completed) = (client.clone(), stop.clone(), completed.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let mut activation = one_task_activation(32);
                activation.request_timeout = 200;
                let mut stream = client.activate_jobs(activation).await.expect("activate").into_inner();
                while let Some(batch) = stream.message().await.expect("jobs") {
                    for job in batch.jobs {
                        client.complete_job(CompleteJobRequest { job_key: job.key, ..Default::default() }).await.expect("complete");
                        completed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    while completed.load(Ordering::Relaxed) < 50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // no body, no id: refused
    let (code, _) = http_json(node.management_port, "POST", "/actuator/backups", "{}").unwrap();
    assert_eq!(code, 400);
    let (code, body) = http_json(node.management_port, "POST", "/actuator/backups", r#"{"backupId": 1}"#).unwrap();
    assert_eq!(code, 202, "{body}");
    assert!(json(&body)["message"].as_str().unwrap().contains("backup with id 1 has been scheduled"), "{body}");
    let backup = tokio::task::block_in_place(|| wait_backup(&node, 1));
    let at_backup = created.load(Ordering::Relaxed);
    // the load goes on a while after the backup
    let target = at_backup + 50;
    while created.load(Ordering::Relaxed) < target {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    creator.await.unwrap();
    worker.await.unwrap();
    assert_eq!(backup["state"], "COMPLETED", "{backup}");
    let details = backup["details"].as_array().unwrap();
    assert_eq!(details.len(), 2, "{backup}");
    for d in details {
        assert_eq!(d["state"], "COMPLETED", "{backup}");
        assert!(d["checkpointPosition"].as_u64().unwrap() > 0, "{backup}");
    }

    // ids increase: the same id again is a conflict
    let (code, _) = http_json(node.management_port, "POST", "/actuator/backups", r#"{"backupId": 1}"#).unwrap();
    assert_eq!(code, 409);
    // a second backup, listed, then deleted
    let (code, _) = http_json(node.management_port, "POST", "/actuator/backups", r#"{"backupId": 2}"#).unwrap();
    assert_eq!(code, 202);
    assert_eq!(tokio::task::block_in_place(|| wait_backup(&node, 2))["state"], "COMPLETED");
    let (code, list) = node.get("/actuator/backups");
    assert_eq!(code, 200);
    let ids: Vec<u64> = json(&list).as_array().unwrap().iter().map(|b| b["backupId"].as_u64().unwrap()).collect();
    assert_eq!(ids, [1, 2]);
    let (code, _) = http_json(node.management_port, "DELETE", "/actuator/backups/2", "").unwrap();
    assert_eq!(code, 204);
    assert_eq!(node.get("/actuator/backups/2").0, 404);
    assert!(!store.path().join("2").exists(), "the deleted backup's files are gone");
    let (_, list) = node.get("/actuator/backups");
    assert_eq!(json(&list).as_array().unwrap().len(), 1);

    // restore: refused into a folder that is not empty, done into a new one
    let restore = |data_dir: &std::path::Path, id: &str| {
        common::run_with_timeout(
            std::process::Command::new(env!("CARGO_BIN_EXE_waggle"))
                .args(["restore", "--backup-id", id, "--partitions", "2", "--backup-store", &store_path, "--data-dir"])
                .arg(data_dir),
            Duration::from_secs(60),
        )
    };
    let refused = restore(&node.data_dir, "1");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not empty"), "{}", String::from_utf8_lossy(&refused.stderr));
    let missing = restore(&store.path().join("nowhere"), "2");
    assert!(!missing.status.success(), "a deleted backup cannot be restored");
    let target = tempfile::tempdir().unwrap();
    let data = target.path().join("data");
    let done = restore(&data, "1");
    assert!(done.status.success(), "restore failed: {}", String::from_utf8_lossy(&done.stderr));
    drop(node);

    let restored = Node::start_at(data, &["--partitions", "2", "--query-store", "false"], &[]);
    for d in details {
        let partition = d["partitionId"].as_u64().unwrap();
        let (code, body) = restored.get(&format!("/v1/partitions/{partition}/digest"));
        assert_eq!(code, 200, "{body}");
        let digest = json(&body);
        // the restored node's new term adds an entry without records: only the index moves
        assert!(digest["appliedIndex"].as_u64().unwrap() >= d["checkpointPosition"].as_u64().unwrap(), "{digest} vs {d}");
        assert_eq!((&digest["rows"], &digest["hash"]), (&d["rows"], &d["hash"]), "partition {partition}: {digest} vs {d}");
    }
    // and it serves: the instances created before the backup have their jobs, new ones start
    let mut client = grpc_client(&restored).await;
    client.create_process_instance(one_task_creation()).await.expect("a creation on the restored node");
}
