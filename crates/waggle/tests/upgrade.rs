//! Issue 30, "upgrades": a data folder written by an earlier build opens and carries on. The
//! fixture `tests/fixtures/upgrade-46bfcee.tar.gz` is the data folder of a standalone node (one
//! partition) built from commit 46bfcee, the last before the journal and the state carried
//! format versions (docs/operations.md, "Format versions"): `tests/fixtures/upgrade_waits.bpmn`
//! deployed and three instances waiting at a job, a timer (20 s, long due when the test runs)
//! and a message each, written by `examples/upgrade_fixture.rs`. The test starts today's
//! binary on a copy, sees its state's table files rewritten once (whole index and filter blocks
//! become partitioned ones), completes the waiting work and sees every instance finish; a folder
//! whose journal or state claims a newer format is refused with a clear message.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{free_port, grpc_client, manifest_dir, run_with_timeout, Node};
use serde::Deserialize;
use tonic::Code;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::*;

const FIXTURE: &str = "tests/fixtures/upgrade-46bfcee.tar.gz";

/// What the fixture's instances wait for: the instance key and its message's correlation key.
#[derive(Debug, Deserialize)]
struct Waiting {
    instance: i64,
    correlation_key: String,
}

/// Unpacks the fixture into a fresh directory: `data/` and `instances.json`.
fn unpack() -> (tempfile::TempDir, PathBuf, Vec<Waiting>) {
    let dir = tempfile::tempdir().unwrap();
    let fixture = manifest_dir().join(FIXTURE);
    let tar = Command::new("tar").arg("-xzf").arg(&fixture).arg("-C").arg(dir.path()).output().expect("tar");
    assert!(tar.status.success(), "unpacking {}: {}", fixture.display(), String::from_utf8_lossy(&tar.stderr));
    let waiting = serde_json::from_slice(&std::fs::read(dir.path().join("instances.json")).unwrap()).unwrap();
    let data = dir.path().join("data");
    (dir, data, waiting)
}

async fn exists(client: &mut GatewayClient<tonic::transport::Channel>, instance: i64) -> bool {
    let request = SetVariablesRequest { element_instance_key: instance, variables: r#"{"seen": true}"#.into(), local: true };
    match client.set_variables(request).await {
        Ok(_) => true,
        Err(s) if s.code() == Code::NotFound => false,
        Err(s) => panic!("SetVariables on {instance}: {s}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_folder_of_the_previous_format_opens_and_its_waiting_work_completes() {
    let (_dir, data, waiting) = unpack();
    assert_eq!(waiting.len(), 3);
    assert!(!data.join("partitions/1/log/format").exists(), "the fixture predates the journal's format file");
    let mut node = Node::start_at(data.clone(), &["--partitions", "1"], &[]);
    let mut client = grpc_client(&node).await;
    for w in &waiting {
        assert!(exists(&mut client, w.instance).await, "instance {} of the fixture is there", w.instance);
    }
    // the versions are recorded once the folder is opened
    assert_eq!(std::fs::read_to_string(data.join("partitions/1/log/format")).unwrap(), "waggle-journal 1\n");
    // and the state's table files, written with whole index and filter blocks, are rewritten
    // with partitioned ones in the background, then marked (docs/operations.md, "Memory")
    let mark = data.join("partitions/1/runtime/WAGGLE-PARTITIONED-TABLES");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !mark.exists() {
        assert!(Instant::now() < deadline, "the fixture's table files were not rewritten in 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // the jobs the instances wait at
    let mut completed = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while completed < waiting.len() {
        assert!(Instant::now() < deadline, "only {completed} jobs activated");
        let request = ActivateJobsRequest {
            r#type: "upgrade-task".into(),
            worker: "upgrade-test".into(),
            timeout: 60_000,
            max_jobs_to_activate: 10,
            request_timeout: 1_000,
            ..Default::default()
        };
        let mut stream = client.activate_jobs(request).await.expect("ActivateJobs").into_inner();
        while let Some(batch) = stream.message().await.expect("jobs") {
            for job in batch.jobs {
                assert!(waiting.iter().any(|w| w.instance == job.process_instance_key), "a job of the fixture's instances");
                client.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await.expect("CompleteJob");
                completed += 1;
            }
        }
    }
    // the messages they wait for (their timers, long due, fire by themselves)
    for w in &waiting {
        let request = PublishMessageRequest {
            name: "upgrade-message".into(),
            correlation_key: w.correlation_key.clone(),
            time_to_live: 60_000,
            ..Default::default()
        };
        client.publish_message(request).await.expect("PublishMessage");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for w in &waiting {
        while exists(&mut client, w.instance).await {
            assert!(Instant::now() < deadline, "instance {} did not complete", w.instance);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // new work on the upgraded folder, and a restart of it
    let created = client
        .create_process_instance(CreateProcessInstanceRequest {
            bpmn_process_id: "upgrade-waits".into(),
            version: -1,
            variables: r#"{"key": "after-upgrade"}"#.into(),
            ..Default::default()
        })
        .await
        .expect("a new instance of the fixture's process")
        .into_inner();
    node.restart();
    let mut client = grpc_client(&node).await;
    assert!(exists(&mut client, created.process_instance_key).await);
    assert!(!exists(&mut client, waiting[0].instance).await);
}

/// Runs the binary on `data` until it exits (a start expected to be refused) and returns its
/// standard error.
fn refused_start(data: &Path) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_waggle"));
    command.arg("--data-dir").arg(data).args(["--partitions", "1", "--host", "127.0.0.1"]);
    for (flag, port) in [("--port", free_port()), ("--management-port", free_port()), ("--rest-port", free_port())] {
        command.args([flag, &port.to_string()]);
    }
    let output = run_with_timeout(&mut command, Duration::from_secs(60));
    assert!(!output.status.success(), "the start was refused");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_newer_journal_or_state_format_is_refused_with_a_clear_message() {
    let (_dir, data, _) = unpack();
    std::fs::write(data.join("partitions/1/log/format"), "waggle-journal 7\n").unwrap();
    let stderr = refused_start(&data);
    assert!(stderr.contains("journal format version 7, written by a newer Waggle (this one reads up to version 1)"), "{stderr}");

    let (_dir, data, _) = unpack();
    // the state's format row, set as a newer build would set it: through the same store
    waggle_state_format::set(&data.join("partitions/1/runtime"), 7);
    let stderr = refused_start(&data);
    assert!(
        stderr.contains("the state was written by a newer Waggle (state format version 7; this one reads up to version 1)"),
        "{stderr}"
    );
}

/// Writes the state's format row in a partition's RocksDB folder.
mod waggle_state_format {
    pub fn set(runtime: &std::path::Path, version: u32) {
        let store = waggle_state::RocksStore::open(runtime).expect("the fixture's state");
        let mut writes = waggle_state::WriteSet::default();
        writes.put(b"X/state_format".to_vec(), version.to_be_bytes().to_vec());
        waggle_state::KvStore::commit_owned(&store, writes).expect("commit");
    }
}
