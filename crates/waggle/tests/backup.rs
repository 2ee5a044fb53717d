//! Backups and restore on the real binary, after Zeebe's backup management API (docs.camunda.io,
//! "Backup and restore": `POST /actuator/backups` with `{"backupId": N}`, `GET
//! /actuator/backups[/{id}]`, `DELETE /actuator/backups/{id}`) and its restore step.
//!
//! A backup is taken while instances are created and their jobs completed; the data folder
//! restored from it (`waggle restore`) starts, and each partition's state digest equals the one
//! the backup recorded for the partition at its position (read from the checkpoint it took).
//! A backup is a CHECKPOINT record in every partition's log (Zeebe's CheckpointRecord): every
//! replica applies it (`lastCheckpointId` in `/v1/partitions`), so after the leader of a
//! partition is killed its new leader knows it, and a restored cluster refuses a backup id not
//! greater than its last checkpoint even with an empty backup store.
//! Each scenario runs against a directory store and against an S3-compatible server, s3rver
//! (`scripts/s3-server.sh`, which installs it from npm on first use); the cluster's runs three
//! brokers, takes the backup through one of them and restores every broker's folder.
//!
//! A backup survives its leader's failure (Zeebe, docs.camunda.io "Backup and restore": the
//! checkpoint is a record in the replicated log, and whichever broker leads the partition when
//! it is processed takes the partition's backup): a partition's leader is killed (`kill -9`)
//! just before the request, at once after it and a moment after it, under load; each backup
//! still completes, every replica drops its copy of the checkpoint, and each backup restores
//! into a cluster whose state digests are the backup's and that has every instance
//! acknowledged before the request.
//!
//! A backup taken after the cluster grew from 3 to 6 partitions restores the six with the
//! topology's routing state: new instances on every partition, messages on the first three.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::{
    added_broker_args, broker_args, digests_agree, get_json, held_partitions, leader_seen_by, log_tails, management_request,
    replica_layout, wait_change_completed, Cluster, ClusterOptions,
};
use common::{deploy_one_task, free_port, grpc_client, http_json, http_json_within, one_task_creation, repo_root, Node};
use waggle_protocol::gateway::{ActivateJobsRequest, CompleteJobRequest, SetVariablesRequest};

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// The bucket `scripts/s3-server.sh` creates.
const BUCKET: &str = "waggle-backups";
/// Every test's keys go under this folder of the bucket (`--backup-s3-base-path`).
const BASE_PATH: &str = "tests/backups";

/// An s3rver process on a loopback port, keeping its objects in a temporary folder; killed
/// when dropped.
struct S3Server {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl S3Server {
    fn start() -> S3Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("s3-server.log")).expect("log");
        let child = Command::new(repo_root().join("scripts/s3-server.sh"))
            .arg(dir.path().join("objects"))
            .arg(port.to_string())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("scripts/s3-server.sh");
        let mut server = S3Server { child, port, dir };
        // the first use installs s3rver from npm
        let deadline = Instant::now() + Duration::from_secs(180);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait().expect("try_wait") {
                panic!("scripts/s3-server.sh exited ({status}): {}", server.log());
            }
            assert!(Instant::now() < deadline, "the S3 server did not start: {}", server.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("s3-server.log")).unwrap_or_default()
    }

    /// The flags of a node whose backups go to this server (the keys come from the environment,
    /// see [`S3Server::envs`]).
    fn args(&self) -> Vec<String> {
        [
            "--backup-s3-bucket",
            BUCKET,
            "--backup-s3-endpoint",
            &format!("http://127.0.0.1:{}", self.port),
            "--backup-s3-region",
            "us-east-1",
            "--backup-s3-base-path",
            BASE_PATH,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// s3rver's credentials, which it checks each request's signature with.
    fn envs() -> [(&'static str, &'static str); 2] {
        [("WAGGLE_BACKUP_S3_ACCESS_KEY", "S3RVER"), ("WAGGLE_BACKUP_S3_SECRET_KEY", "S3RVER")]
    }

    /// The files s3rver keeps for the objects under `folder` of the base path.
    fn files_under(&self, folder: &str) -> usize {
        count_files(&self.dir.path().join("objects").join(BUCKET).join(BASE_PATH).join(folder))
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| if e.path().is_dir() { count_files(&e.path()) } else { 1 }).sum()
}

/// Where a test's backups go: a directory, or an S3 server.
enum Store {
    Dir(tempfile::TempDir),
    S3(S3Server),
}

impl Store {
    fn dir() -> Store {
        Store::Dir(tempfile::tempdir().expect("tempdir"))
    }

    fn s3() -> Store {
        Store::S3(S3Server::start())
    }

    fn args(&self) -> Vec<String> {
        match self {
            Store::Dir(dir) => vec!["--backup-store".into(), dir.path().to_str().unwrap().into()],
            Store::S3(server) => server.args(),
        }
    }

    fn envs(&self) -> Vec<(&'static str, &'static str)> {
        match self {
            Store::Dir(_) => Vec::new(),
            Store::S3(_) => S3Server::envs().to_vec(),
        }
    }

    /// Whether any file of backup `id` is left in the store.
    fn holds(&self, id: u64) -> bool {
        match self {
            Store::Dir(dir) => dir.path().join(id.to_string()).exists(),
            Store::S3(server) => server.files_under(&id.to_string()) > 0,
        }
    }
}

/// Waits until backup `id` leaves IN_PROGRESS (as `node` reports it); returns its status. A
/// status request left unanswered for 5 s is asked again (within the deadline): in about one
/// run in 20 of the S3 cluster test, one such request, just after a broker's kill, got no answer
/// in 5 s while the next, at once, was answered in milliseconds.
fn wait_backup(node: &Node, id: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let asked = Instant::now();
        let Some((code, body)) = common::http_get(node.management_port, &format!("/actuator/backups/{id}")) else {
            eprintln!("GET /actuator/backups/{id}: no answer after {:?}; asking again", asked.elapsed());
            assert!(Instant::now() < deadline, "backup {id}: no status answered");
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        assert_eq!(code, 200, "{body}");
        let v = json(&body);
        if v["state"] != "IN_PROGRESS" {
            return v;
        }
        assert!(Instant::now() < deadline, "backup {id} still in progress: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Jobs of `one_task.bpmn` locked for ten minutes: none times out while a test restores and
/// compares state.
fn activation() -> ActivateJobsRequest {
    ActivateJobsRequest {
        r#type: "benchmark-task".into(),
        worker: "backup-test".into(),
        timeout: 600_000,
        max_jobs_to_activate: 32,
        request_timeout: 200,
        ..Default::default()
    }
}

/// How long a test waits for its load to make progress before it fails.
const LOAD_DEADLINE: Duration = Duration::from_secs(60);

/// Creations and a worker completing what it activates, through `client`, until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    created: Arc<AtomicU64>,
    completed: Arc<AtomicU64>,
    /// The instances whose creation was acknowledged and whose job is never completed (a
    /// load through a failover's: see [`Load::through_failover`]).
    waiting: Arc<Mutex<Vec<i64>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Every creation and completion must succeed; every job is completed.
    fn start(client: &waggle_protocol::gateway::gateway_client::GatewayClient<tonic::transport::Channel>) -> Load {
        Load::spawn(client, false)
    }

    /// A load that goes on through a broker's kill: a creation or completion that fails (its
    /// partition without a leader for a moment) is tried again; the jobs of odd instances are
    /// never completed, so that those instances stay in the state, waiting.
    fn through_failover(client: &waggle_protocol::gateway::gateway_client::GatewayClient<tonic::transport::Channel>) -> Load {
        Load::spawn(client, true)
    }

    fn spawn(client: &waggle_protocol::gateway::gateway_client::GatewayClient<tonic::transport::Channel>, failover: bool) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let (created, completed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let waiting = Arc::new(Mutex::new(Vec::new()));
        let creator = {
            let (mut client, stop, created, waiting) = (client.clone(), stop.clone(), created.clone(), waiting.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match client.create_process_instance(one_task_creation()).await {
                        Ok(r) => {
                            let key = r.into_inner().process_instance_key;
                            if failover && key % 2 == 1 {
                                waiting.lock().unwrap().push(key);
                            }
                            created.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if failover => {
                            eprintln!("creation during the failover: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Err(e) => panic!("create: {e}"),
                    }
                }
            })
        };
        let worker = {
            let (mut client, stop, completed) = (client.clone(), stop.clone(), completed.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let stream = match client.activate_jobs(activation()).await {
                        Ok(stream) => stream,
                        Err(e) if failover => {
                            eprintln!("activation during the failover: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        Err(e) => panic!("activate: {e}"),
                    };
                    let mut stream = stream.into_inner();
                    loop {
                        let batch = match stream.message().await {
                            Ok(Some(batch)) => batch,
                            Ok(None) => break,
                            Err(e) if failover => {
                                eprintln!("jobs during the failover: {e}");
                                break;
                            }
                            Err(e) => panic!("jobs: {e}"),
                        };
                        for job in batch.jobs.into_iter().filter(|j| !failover || j.process_instance_key % 2 == 0) {
                            match client.complete_job(CompleteJobRequest { job_key: job.key, ..Default::default() }).await {
                                Ok(_) => {
                                    completed.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) if failover => eprintln!("completion during the failover: {e}"),
                                Err(e) => panic!("complete: {e}"),
                            }
                        }
                    }
                }
            })
        };
        Load { stop, created, completed, waiting, tasks: vec![creator, worker] }
    }

    /// The instances left waiting whose creation was acknowledged so far.
    fn waiting(&self) -> Vec<i64> {
        self.waiting.lock().unwrap().clone()
    }

    /// Fails the test, instead of waiting for good, when the load's creator or worker ended
    /// (a failed call panics its task: the message is in the test's output above) or `what`
    /// did not happen by `deadline`.
    fn still_running(&self, deadline: Instant, what: &str) {
        assert!(
            !self.tasks.iter().any(|t| t.is_finished()),
            "the load stopped while waiting for {what}: a call failed (see the panic above)"
        );
        let (created, completed) = (self.created.load(Ordering::Relaxed), self.completed.load(Ordering::Relaxed));
        assert!(Instant::now() < deadline, "no {what} within {LOAD_DEADLINE:?}: {created} created, {completed} completed");
    }

    async fn until_completed(&self, n: u64) {
        let deadline = Instant::now() + LOAD_DEADLINE;
        while self.completed.load(Ordering::Relaxed) < n {
            self.still_running(deadline, &format!("{n} completions"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Lets `n` more creations happen, then stops.
    async fn stop_after(self, n: u64) {
        let target = self.created.load(Ordering::Relaxed) + n;
        let deadline = Instant::now() + LOAD_DEADLINE;
        while self.created.load(Ordering::Relaxed) < target {
            self.still_running(deadline, &format!("{n} more creations"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
    }
}

/// `(lastCheckpointId, lastCheckpointPosition)` of each of `node`'s replicas, by partition.
fn checkpoints(node: &Node) -> Vec<(u64, Option<i64>, Option<i64>)> {
    let (code, body) = node.get("/v1/partitions");
    assert_eq!(code, 200, "{body}");
    json(&body)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["partitionId"].as_u64().unwrap(), p["lastCheckpointId"].as_i64(), p["lastCheckpointPosition"].as_i64()))
        .collect()
}

/// Waits until every replica on `nodes` has applied checkpoint `id`.
fn wait_checkpoint(nodes: &[&Node], id: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<_> = nodes.iter().map(|n| checkpoints(n)).collect();
        if seen.iter().flatten().all(|(_, c, position)| *c == Some(id) && position.is_some_and(|p| p > 0)) {
            return;
        }
        assert!(Instant::now() < deadline, "not every replica applied checkpoint {id}: {seen:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn restore_cmd(store: &Store, id: u64, data_dir: &Path, extra: &[String]) -> std::process::Output {
    common::run_with_timeout(
        Command::new(env!("CARGO_BIN_EXE_waggle"))
            .args(["restore", "--backup-id", &id.to_string()])
            .args(store.args())
            .args(extra)
            .arg("--data-dir")
            .arg(data_dir)
            .envs(store.envs()),
        Duration::from_secs(120),
    )
}

/// Each partition's digest on `node` has the rows and hash `backup` recorded for it.
fn assert_digests(node: &Node, backup: &serde_json::Value) {
    for d in backup["details"].as_array().unwrap() {
        let partition = d["partitionId"].as_u64().unwrap();
        let (code, body) = node.get(&format!("/v1/partitions/{partition}/digest"));
        assert_eq!(code, 200, "{body}");
        let digest = json(&body);
        // the restored node's new term adds an entry without records: only the index moves
        assert!(digest["appliedIndex"].as_u64().unwrap() >= d["checkpointPosition"].as_u64().unwrap(), "{digest} vs {d}");
        assert_eq!((&digest["rows"], &digest["hash"]), (&d["rows"], &d["hash"]), "partition {partition}: {digest} vs {d}");
    }
}

async fn a_backup_under_load_restores_the_state_at_its_position(store: Store) {
    let mut args: Vec<String> = ["--partitions", "2", "--query-store", "false"].iter().map(|s| s.to_string()).collect();
    args.extend(store.args());
    let node = Node::start_with_env(&args.iter().map(String::as_str).collect::<Vec<_>>(), &store.envs());
    let mut client = grpc_client(&node).await;
    deploy_one_task(&mut client).await;
    let load = Load::start(&client);
    load.until_completed(50).await;

    // no body, no id: refused
    let (code, _) = http_json(node.management_port, "POST", "/actuator/backups", "{}").unwrap();
    assert_eq!(code, 400);
    let (code, body) = http_json(node.management_port, "POST", "/actuator/backups", r#"{"backupId": 1}"#).unwrap();
    assert_eq!(code, 202, "{body}");
    assert!(json(&body)["message"].as_str().unwrap().contains("backup with id 1 has been scheduled"), "{body}");
    let backup = tokio::task::block_in_place(|| wait_backup(&node, 1));
    // the load goes on a while after the backup
    load.stop_after(50).await;
    assert_eq!(backup["state"], "COMPLETED", "{backup}");
    let details = backup["details"].as_array().unwrap();
    assert_eq!(details.len(), 2, "{backup}");
    for d in details {
        assert_eq!(d["state"], "COMPLETED", "{backup}");
        assert!(d["checkpointPosition"].as_u64().unwrap() > 0, "{backup}");
    }
    // the backup's CHECKPOINT record is in each partition's state
    tokio::task::block_in_place(|| wait_checkpoint(&[&node], 1));

    // ids increase: the same id again is a conflict
    let (code, _) = http_json(node.management_port, "POST", "/actuator/backups", r#"{"backupId": 1}"#).unwrap();
    assert_eq!(code, 409);
    // a second backup, listed, then deleted: its files go, its id is not taken again (Zeebe's
    // rule: ids above every completed, failed or deleted backup's)
    let (code, _) = http_json(node.management_port, "POST", "/actuator/backups", r#"{"backupId": 2}"#).unwrap();
    assert_eq!(code, 202);
    assert_eq!(tokio::task::block_in_place(|| wait_backup(&node, 2))["state"], "COMPLETED");
    tokio::task::block_in_place(|| wait_checkpoint(&[&node], 2));
    let (code, list) = node.get("/actuator/backups");
    assert_eq!(code, 200);
    let ids: Vec<u64> = json(&list).as_array().unwrap().iter().map(|b| b["backupId"].as_u64().unwrap()).collect();
    assert_eq!(ids, [1, 2]);
    assert!(store.holds(2));
    let (code, _) = http_json(node.management_port, "DELETE", "/actuator/backups/2", "").unwrap();
    assert_eq!(code, 204);
    assert_eq!(node.get("/actuator/backups/2").0, 404);
    assert!(!store.holds(2), "the deleted backup's files are gone");
    let (_, list) = node.get("/actuator/backups");
    assert_eq!(json(&list).as_array().unwrap().len(), 1);
    let (code, body) = http_json(node.management_port, "POST", "/actuator/backups", r#"{"backupId": 2}"#).unwrap();
    assert_eq!(code, 409, "a deleted backup's id is not taken again: {body}");

    // restore: refused into a folder that is not empty, done into a new one
    let partitions = ["--partitions".to_string(), "2".to_string()];
    let refused = restore_cmd(&store, 1, &node.data_dir, &partitions);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not empty"), "{}", String::from_utf8_lossy(&refused.stderr));
    let target = tempfile::tempdir().unwrap();
    let missing = restore_cmd(&store, 2, &target.path().join("nowhere"), &partitions);
    assert!(!missing.status.success(), "a deleted backup cannot be restored");
    let data = target.path().join("data");
    let done = restore_cmd(&store, 1, &data, &partitions);
    assert!(done.status.success(), "restore failed: {}", String::from_utf8_lossy(&done.stderr));
    drop(node);

    let restored = Node::start_at(data, &["--partitions", "2", "--query-store", "false"], &[]);
    assert_digests(&restored, &backup);
    // and it serves: new instances start
    let mut client = grpc_client(&restored).await;
    client.create_process_instance(one_task_creation()).await.expect("a creation on the restored node");
    // a single node's partition count does not grow (it has no cluster topology; a grown
    // cluster's backup: `a_backup_after_the_partition_count_grew_...`)
    let (code, body) = http_json(restored.management_port, "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 3}}"#).unwrap();
    assert!(code == 400 && body.contains("no cluster topology"), "{code} {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_load_in_a_directory_restores_the_state_at_its_position() {
    a_backup_under_load_restores_the_state_at_its_position(Store::dir()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_load_in_s3_restores_the_state_at_its_position() {
    a_backup_under_load_restores_the_state_at_its_position(Store::s3()).await;
}

const BROKERS: usize = 3;
const PARTITIONS: u16 = 3;

/// Waits until every broker's replica of every partition has the same state digest; returns
/// them by partition.
fn replicas_agree(nodes: &[Node]) -> Vec<serde_json::Value> {
    (1..=PARTITIONS)
        .map(|p| {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let digests: Vec<serde_json::Value> = nodes
                    .iter()
                    .map(|n| {
                        let (code, body) = n.get(&format!("/v1/partitions/{p}/digest"));
                        assert_eq!(code, 200, "{body}");
                        let mut d = json(&body);
                        d.as_object_mut().unwrap().remove("appliedIndex");
                        d
                    })
                    .collect();
                if digests.iter().all(|d| d == &digests[0]) {
                    break digests[0].clone();
                }
                assert!(Instant::now() < deadline, "partition {p}'s replicas differ: {digests:?}");
                std::thread::sleep(Duration::from_millis(200));
            }
        })
        .collect()
}

/// A cluster of three brokers (3 partitions, replication factor 3) whose backups go to
/// `store`, its data folders in `root`.
fn backup_cluster(store: &Store, root: &Path) -> Cluster {
    let mut options = ClusterOptions::new(BROKERS, PARTITIONS);
    options.common = store.args();
    options.envs = store.envs().into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    options.data_root = Some(root.to_path_buf());
    Cluster::start(options)
}

/// Restores every broker's folder of a cluster on `internal` ports from backup `id` into
/// `root` (`broker-<i>`), then starts the cluster on them, its backups going to `new_store`.
fn restored_cluster(store: &Store, id: u64, root: &Path, internal: &[u16], new_store: &Path) -> Cluster {
    for i in 0..BROKERS {
        let args = broker_args(i, internal, PARTITIONS, 3);
        let done = restore_cmd(store, id, &root.join(format!("broker-{i}")), &args[1..]);
        assert!(done.status.success(), "restoring broker {i}: {}", String::from_utf8_lossy(&done.stderr));
    }
    let mut options = ClusterOptions::new(BROKERS, PARTITIONS);
    options.common = vec!["--backup-store".to_string(), new_store.to_str().unwrap().to_string()];
    options.envs = store.envs().into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    options.data_root = Some(root.to_path_buf());
    options.internal = Some(internal.to_vec());
    Cluster::start(options)
}

async fn a_cluster_backup_under_load_restores_every_broker(store: Store) {
    let temp = tempfile::tempdir().unwrap();
    let cluster = tokio::task::block_in_place(|| backup_cluster(&store, temp.path()));
    let (internal, mut nodes) = (cluster.internal.clone(), cluster.nodes);
    let mut client = grpc_client(&nodes[0]).await;
    deploy_one_task(&mut client).await;
    let load = Load::start(&client);
    load.until_completed(50).await;

    // the backup through broker 1, its status through broker 2: every partition, whoever leads
    let (code, body) = http_json(nodes[1].management_port, "POST", "/actuator/backups", r#"{"backupId": 7}"#).unwrap();
    assert_eq!(code, 202, "{body}");
    let backup = tokio::task::block_in_place(|| wait_backup(&nodes[2], 7));
    load.stop_after(50).await;
    assert_eq!(backup["state"], "COMPLETED", "{backup}");
    let details = backup["details"].as_array().unwrap();
    assert_eq!(details.len(), usize::from(PARTITIONS), "{backup}");
    let (code, _) = http_json(nodes[0].management_port, "POST", "/actuator/backups", r#"{"backupId": 7}"#).unwrap();
    assert_eq!(code, 409, "the id is taken, on any broker");
    // followers applied the checkpoint too
    tokio::task::block_in_place(|| wait_checkpoint(&nodes.iter().collect::<Vec<_>>(), 7));

    // the leader of partition 1 is killed: its successor knows the last checkpoint, and the
    // next backup's checkpoints come after it in every partition's log
    let (_, body) = nodes[0].get("/v1/partitions");
    let leader = json(&body)["items"].as_array().unwrap().iter().find(|p| p["partitionId"] == 1).unwrap()["leader"].as_u64().unwrap();
    let leader = leader as usize;
    nodes[leader].kill9();
    let survivors: Vec<&Node> = nodes.iter().enumerate().filter(|&(i, _)| i != leader).map(|(_, n)| n).collect();
    // every partition led by a survivor, as every survivor sees it (partition 1 first)
    let new_leader = tokio::task::block_in_place(|| common::cluster::leaders(&survivors, PARTITIONS, Some(leader)))[0];
    assert_eq!(checkpoints(&nodes[new_leader]).iter().find(|c| c.0 == 1).unwrap().1, Some(7), "the new leader knows the checkpoint");
    let (code, body) = http_json(nodes[new_leader].management_port, "POST", "/actuator/backups", r#"{"backupId": 8}"#).unwrap();
    assert_eq!(code, 202, "{body}");
    let next = tokio::task::block_in_place(|| wait_backup(&nodes[new_leader], 8));
    assert_eq!(next["state"], "COMPLETED", "{next}");
    for (d, before) in next["details"].as_array().unwrap().iter().zip(details) {
        assert!(d["checkpointPosition"].as_u64() > before["checkpointPosition"].as_u64(), "{d} after {before}");
    }
    tokio::task::block_in_place(|| wait_checkpoint(&survivors, 8));
    drop(survivors);
    drop(nodes);

    // every broker's folder restored (its replicas), then the cluster started on them; it
    // backs up into a new, empty store
    let new_store = tempfile::tempdir().unwrap();
    let restored = tokio::task::block_in_place(|| restored_cluster(&store, 7, &temp.path().join("restored"), &internal, new_store.path()));
    let nodes = restored.nodes;
    let digests = replicas_agree(&nodes);
    for (d, b) in digests.iter().zip(details) {
        assert_eq!((&d["rows"], &d["hash"]), (&b["rows"], &b["hash"]), "partition {}: {d} vs {b}", b["partitionId"]);
    }
    // its state holds checkpoint 7: an id not greater is refused (Zeebe's rule), a greater one taken
    tokio::task::block_in_place(|| wait_checkpoint(&nodes.iter().collect::<Vec<_>>(), 7));
    for id in [5, 7] {
        let (code, body) = http_json(nodes[0].management_port, "POST", "/actuator/backups", &format!(r#"{{"backupId": {id}}}"#)).unwrap();
        assert_eq!(code, 409, "{body}");
        assert!(body.contains("last checkpoint 7"), "{body}");
    }
    assert_eq!(count_files(new_store.path()), 0, "a refused backup writes nothing");
    let (code, body) = http_json(nodes[0].management_port, "POST", "/actuator/backups", r#"{"backupId": 9}"#).unwrap();
    assert_eq!(code, 202, "{body}");
    let status = tokio::task::block_in_place(|| wait_backup(&nodes[1], 9));
    assert_eq!(status["state"], "COMPLETED", "{status}");
    let mut client = grpc_client(&nodes[2]).await;
    for _ in 0..PARTITIONS {
        client.create_process_instance(one_task_creation()).await.expect("a creation on the restored cluster");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_backup_under_load_in_a_shared_directory_restores_every_broker() {
    a_cluster_backup_under_load_restores_every_broker(Store::dir()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_backup_under_load_in_s3_restores_every_broker() {
    a_cluster_backup_under_load_restores_every_broker(Store::s3()).await;
}

/// When a backup's partition leader is killed, relative to the backup's request.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// Just before the request (its checkpoint goes to the next leader).
    Before,
    /// This long after the request was sent (its checkpoint may be written, committed,
    /// applied, or uploaded by then, or not).
    After(Duration),
}

/// The backup copies the replicas on broker `root` keep (see `crates/broker/src/backup.rs`).
fn pending_copies(root: &Path) -> usize {
    (1..=PARTITIONS).map(|p| count_files(&root.join("partitions").join(p.to_string()).join("backups"))).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_backup_completes_and_restores_when_a_partition_leader_is_killed_around_its_request() {
    let store = Store::dir();
    let temp = tempfile::tempdir().unwrap();
    let mut cluster = tokio::task::block_in_place(|| backup_cluster(&store, temp.path()));
    let timings = [Kill::Before, Kill::After(Duration::ZERO), Kill::After(Duration::from_millis(30))];
    let mut taken = Vec::new();
    for (n, &timing) in timings.iter().enumerate() {
        let id = n as u64 + 1;
        // the leader of another partition each time; the load and the request through another broker
        let leaders = tokio::task::block_in_place(|| cluster.leaders(None));
        let victim = leaders[n % usize::from(PARTITIONS)];
        let via = (victim + 1) % BROKERS;
        let mut client = grpc_client(&cluster.nodes[via]).await;
        if n == 0 {
            deploy_one_task(&mut client).await;
        }
        let load = Load::through_failover(&client);
        load.until_completed(30).await;
        let acknowledged = load.waiting();
        let port = cluster.nodes[via].management_port;
        let body = format!(r#"{{"backupId": {id}}}"#);
        // the request waits for every checkpoint, a failover's election included
        let request = move || http_json_within(port, "POST", "/actuator/backups", &body, Duration::from_secs(60));
        let answer = tokio::task::block_in_place(|| match timing {
            Kill::Before => {
                cluster.nodes[victim].kill9();
                request()
            }
            Kill::After(after) => {
                let sent = std::thread::spawn(request);
                std::thread::sleep(after);
                cluster.nodes[victim].kill9();
                sent.join().unwrap()
            }
        });
        let (code, answer) = answer.expect("an answer to the backup request");
        assert_eq!(code, 202, "backup {id}, broker {victim} killed {timing:?}: {answer}");
        let backup = tokio::task::block_in_place(|| wait_backup(&cluster.nodes[via], id));
        assert_eq!(backup["state"], "COMPLETED", "backup {id}, broker {victim} killed {timing:?}: {backup}");
        for d in backup["details"].as_array().unwrap() {
            assert_eq!(d["state"], "COMPLETED", "{backup}");
            assert!(d["checkpointPosition"].as_u64() > Some(0), "{backup}");
        }
        eprintln!("backup {id} with broker {victim} killed {timing:?}: {backup}");
        load.stop_after(20).await;
        tokio::task::block_in_place(|| cluster.restart(victim));
        taken.push((id, backup, acknowledged));
    }
    // every replica, the restarted ones too, drops its copies once the parts are in the store
    let deadline = Instant::now() + Duration::from_secs(30);
    let roots: Vec<PathBuf> = cluster.nodes.iter().map(|n| n.data_dir.clone()).collect();
    while roots.iter().map(|r| pending_copies(r)).sum::<usize>() > 0 {
        assert!(Instant::now() < deadline, "backup copies left: {:?}", roots.iter().map(|r| pending_copies(r)).collect::<Vec<_>>());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let internal = cluster.internal.clone();
    drop(cluster);

    // each backup restores: the state it recorded, with every instance acknowledged before it
    for (id, backup, acknowledged) in taken {
        let new_store = tempfile::tempdir().unwrap();
        let root = temp.path().join(format!("restored-{id}"));
        let restored = tokio::task::block_in_place(|| restored_cluster(&store, id, &root, &internal, new_store.path()));
        for d in backup["details"].as_array().unwrap() {
            let partition = d["partitionId"].as_u64().unwrap() as u16;
            let nodes: Vec<&Node> = restored.nodes.iter().collect();
            let digest = tokio::task::block_in_place(|| digests_agree(&nodes, partition));
            assert_eq!((&digest["rows"], &digest["hash"]), (&d["rows"], &d["hash"]), "backup {id}, partition {partition}: {digest} vs {d}");
        }
        let mut client = grpc_client(&restored.nodes[0]).await;
        assert!(!acknowledged.is_empty());
        for key in acknowledged {
            let request = SetVariablesRequest { element_instance_key: key, variables: r#"{"checked": true}"#.into(), local: false };
            if let Err(e) = client.set_variables(request).await {
                panic!("backup {id}: instance {key}, acknowledged before the request, is not in the restored state: {e}");
            }
        }
    }
}

/// Waits (90 s at most) until each of `nodes` (broker `i` at index `i`) runs exactly the
/// replicas `expected` (each partition's broker ids) gives it and every partition has a leader
/// among its replicas that they know of.
fn runs_layout(nodes: &[Node], expected: &[Vec<u64>], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let runs: Vec<Vec<u64>> = nodes.iter().map(held_partitions).collect();
        let wanted: Vec<Vec<u64>> = (0..nodes.len() as u64)
            .map(|b| (1..=u64::from(PARTITIONS)).filter(|&p| expected[p as usize - 1].contains(&b)).collect())
            .collect();
        let led = (1..=PARTITIONS).all(|p| {
            let replicas = &expected[p as usize - 1];
            replicas.iter().all(|&b| leader_seen_by(&nodes[b as usize], p).is_some_and(|l| replicas.contains(&(l as u64))))
        });
        if runs == wanted && led {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the brokers run {runs:?} (wanted {wanted:?}), led: {led}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits until every partition's replicas see its preferred replica (the first of `expected`'s
/// list) as its leader.
fn led_by_preferred(nodes: &[Node], expected: &[Vec<u64>], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen: Vec<Vec<Option<usize>>> =
            (1..=PARTITIONS).map(|p| expected[p as usize - 1].iter().map(|&b| leader_seen_by(&nodes[b as usize], p)).collect()).collect();
        let preferred = seen.iter().zip(expected).all(|(leaders, replicas)| leaders.iter().all(|l| *l == Some(replicas[0] as usize)));
        if preferred {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: leaders seen by each replica {seen:?}, preferred {expected:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A backup taken after the cluster was scaled from 3 to 4 brokers (broker 3 started later with
/// the first three's contact points, replicas moved onto it) records the cluster topology in
/// force; `waggle restore` gives each broker back the replicas that topology gave it (broker 3
/// partitions 2 and 3, which the static placement of a 3-broker cluster gives it none of) and
/// writes the topology into its folder, so the restored cluster has the layout it had, each
/// partition the backup's state; a broker the topology does not name is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_after_a_scale_up_restores_the_recorded_layout() {
    let store = Store::dir();
    let temp = tempfile::tempdir().unwrap();
    let cluster = tokio::task::block_in_place(|| backup_cluster(&store, temp.path()));
    let (internal, mut nodes) = (cluster.internal.clone(), cluster.nodes);
    let port3 = free_port();
    let args3 = |internal: &[u16]| added_broker_args(3, internal, port3, PARTITIONS, 3);
    let envs = store.envs();
    let mut started = args3(&internal);
    started.extend(store.args());
    nodes.push(Node::start_at(temp.path().join("broker-3"), &started.iter().map(String::as_str).collect::<Vec<_>>(), &envs));
    // Zeebe's round-robin placement of 3 partitions over brokers 0-3, preferred first
    let four: Vec<Vec<u64>> = vec![vec![0, 1, 2], vec![1, 2, 3], vec![2, 3, 0]];
    let change = tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, planned) = management_request(&nodes[0], "POST", "/actuator/cluster/brokers", "[0, 1, 2, 3]");
            if status == 400 && Instant::now() < deadline {
                // broker 3's address is not known to the coordinator yet (the gossip brings it)
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            assert_eq!(status, 202, "{planned}");
            break planned["changeId"].as_u64().unwrap();
        }
    });
    let scaled = tokio::task::block_in_place(|| wait_change_completed(&nodes[0], change, "3 -> 4", || log_tails(&nodes)));
    assert_eq!(replica_layout(&scaled["brokers"], PARTITIONS), four, "{scaled}");
    tokio::task::block_in_place(|| runs_layout(&nodes, &four, "3 -> 4"));
    // the coordinator rebalances leadership once the change completed: the load starts after
    // that, not during a handover
    tokio::task::block_in_place(|| led_by_preferred(&nodes, &four, "3 -> 4"));

    // the backup under load, through the added broker
    let mut client = grpc_client(&nodes[0]).await;
    deploy_one_task(&mut client).await;
    let load = Load::start(&client);
    load.until_completed(30).await;
    let (code, body) = http_json(nodes[3].management_port, "POST", "/actuator/backups", r#"{"backupId": 3}"#).unwrap();
    assert_eq!(code, 202, "{body}");
    let backup = tokio::task::block_in_place(|| wait_backup(&nodes[1], 3));
    load.stop_after(30).await;
    assert_eq!(backup["state"], "COMPLETED", "{backup}");
    drop(nodes);

    // broker 4 is not in the recorded topology: refused, nothing restored
    let root = temp.path().join("restored");
    let args4 = added_broker_args(4, &internal, free_port(), PARTITIONS, 3);
    let refused = restore_cmd(&store, 3, &root.join("broker-4"), &args4[1..]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("broker 4 is not in the cluster topology backup 3 recorded"), "{stderr}");
    assert!(!root.join("broker-4").join("partitions").exists());
    // every broker of the topology restores the replicas it gave it, and the topology itself
    for i in 0..4 {
        let args = if i < 3 { broker_args(i, &internal, PARTITIONS, 3) } else { args3(&internal) };
        let dir = root.join(format!("broker-{i}"));
        let done = restore_cmd(&store, 3, &dir, &args[1..]);
        assert!(done.status.success(), "restoring broker {i}: {}", String::from_utf8_lossy(&done.stderr));
        let restored: Vec<u64> = (1..=u64::from(PARTITIONS)).filter(|p| dir.join(format!("partitions/{p}")).exists()).collect();
        let wanted: Vec<u64> = (1..=u64::from(PARTITIONS)).filter(|&p| four[p as usize - 1].contains(&(i as u64))).collect();
        assert_eq!(restored, wanted, "broker {i}'s restored partitions");
        assert!(dir.join("cluster-topology.json").exists(), "broker {i}: the recorded topology written");
    }
    let restored: Vec<Node> = (0..4)
        .map(|i| {
            let args = if i < 3 { broker_args(i, &internal, PARTITIONS, 3) } else { args3(&internal) };
            Node::start_at(root.join(format!("broker-{i}")), &args.iter().map(String::as_str).collect::<Vec<_>>(), &envs)
        })
        .collect();
    tokio::task::block_in_place(|| runs_layout(&restored, &four, "the restored cluster"));
    let shown = get_json(&restored[0], "/actuator/cluster");
    assert_eq!(replica_layout(&shown["brokers"], PARTITIONS), four, "{shown}");
    for (p, replicas) in four.iter().enumerate() {
        let replicas: Vec<&Node> = replicas.iter().map(|&b| &restored[b as usize]).collect();
        let mut digest = tokio::task::block_in_place(|| digests_agree(&replicas, p as u16 + 1));
        let recorded = &backup["details"][p];
        digest.as_object_mut().unwrap().remove("appliedIndex");
        assert_eq!(
            (&digest["rows"], &digest["hash"]),
            (&recorded["rows"], &recorded["hash"]),
            "partition {}: {digest} vs {recorded}",
            p + 1
        );
    }
    let mut client = grpc_client(&restored[3]).await;
    for _ in 0..PARTITIONS {
        client.create_process_instance(one_task_creation()).await.expect("a creation on the restored cluster");
    }
}

/// `workloads/message_one_task.bpmn` (process `benchmark-message`: a message catch with the
/// instance's `correlationKey`, then a task), its task's job type `after-message`, apart from
/// the load's.
fn message_model() -> Vec<u8> {
    let model = std::fs::read_to_string(repo_root().join("workloads/message_one_task.bpmn")).expect("message_one_task.bpmn");
    model.replace(r#"type="benchmark-task""#, r#"type="after-message""#).into_bytes()
}

/// Creates an instance of [`message_model`] waiting for the message of `key`; its key.
async fn create_waiting(client: &mut waggle_protocol::gateway::gateway_client::GatewayClient<tonic::transport::Channel>, key: &str) -> i64 {
    let request = waggle_protocol::gateway::CreateProcessInstanceRequest {
        bpmn_process_id: "benchmark-message".into(),
        version: -1,
        variables: format!(r#"{{"correlationKey": "{key}"}}"#),
        ..Default::default()
    };
    client.create_process_instance(request).await.expect("a waiting instance").into_inner().process_instance_key
}

const GROWN: u16 = 6;

/// A backup taken after the cluster grew from 3 to 6 partitions under load (Zeebe 8.8's `PATCH
/// /actuator/cluster` `partitions.count`, docs.camunda.io "Cluster scaling") records the grown
/// topology with its routing state (new instances and messages on all 6 partitions once the
/// correlation keys moved; the 3 the cluster was created with kept as `firstPartitions`);
/// `waggle restore` rebuilds every broker's 6 replicas and writes
/// that routing state into its folder, with `--partitions` the grown count (brokers 0 and 1) or
/// the configured one (broker 2), no other. The restored cluster, started with 6, has each
/// partition's state digest at the backup's position and every instance acknowledged before
/// the backup; it creates new instances on partitions 4-6 too, and a message published after
/// the restore correlates to an instance waiting since before the backup (its correlation key
/// chosen so that its partition among 6 is not its partition among 3: its subscription moved in
/// the growth, and routing messages by 3 would miss it). The restored cluster grows again (6 -> 7); a broker restarts with the
/// configured count; a start contradicting its folder (5 partitions) is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_after_the_partition_count_grew_restores_six_partitions_and_their_routing() {
    use waggle_protocol::keys::partition_of_correlation_key;
    use waggle_protocol::partition_of;
    let store = Store::dir();
    let temp = tempfile::tempdir().unwrap();
    let cluster = tokio::task::block_in_place(|| backup_cluster(&store, temp.path()));
    let (internal, nodes) = (cluster.internal.clone(), cluster.nodes);
    let mut client = grpc_client(&nodes[0]).await;
    deploy_one_task(&mut client).await;
    let resources = vec![waggle_protocol::gateway::Resource { name: "message_one_task.bpmn".into(), content: message_model() }];
    client.deploy_resource(waggle_protocol::gateway::DeployResourceRequest { resources, tenant_id: String::new() }).await.expect("deploy");
    let keys: Vec<String> = (0..)
        .map(|i| format!("grown-{i}"))
        .filter(|k| partition_of_correlation_key(k, 3) != partition_of_correlation_key(k, u32::from(GROWN)))
        .take(8)
        .collect();
    // instances waiting for their message since before the growth
    let mut waiting_for_message = Vec::new();
    for key in &keys[..4] {
        waiting_for_message.push(create_waiting(&mut client, key).await);
    }
    let load = Load::through_failover(&client);
    load.until_completed(30).await;

    // 3 -> 6 partitions under the load, asked on broker 1 (the coordinator, broker 0, runs it)
    let (status, planned) =
        tokio::task::block_in_place(|| management_request(&nodes[1], "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 6}}"#));
    assert_eq!(status, 202, "{planned}");
    let change = planned["changeId"].as_u64().unwrap();
    for node in &nodes {
        tokio::task::block_in_place(|| wait_change_completed(node, change, "3 -> 6 partitions", || log_tails(&nodes)));
    }
    // the load reaches the new partitions, and more instances wait for their message
    let deadline = Instant::now() + Duration::from_secs(60);
    while load.waiting().iter().filter(|&&k| partition_of(k) > PARTITIONS).count() < 6 {
        assert!(Instant::now() < deadline, "no load on partitions 4-6: {:?}", load.waiting());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for key in &keys[4..] {
        waiting_for_message.push(create_waiting(&mut client, key).await);
    }
    // Each of these opens its message subscription on another partition (commands between
    // partitions, acknowledged back). A checkpoint taken while one is unacknowledged is right,
    // but its restored partition re-sends it and, on the answer, changes a row, so the state
    // may no longer be the backup's when the test reads it: the likely cause of a failure seen
    // once in CI (partition 5: 112 -> 111 rows at applied index 50, checkpoint 48). The
    // exchanges take milliseconds.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // the backup under load, through broker 2
    let acknowledged = load.waiting();
    let (code, body) = http_json(nodes[2].management_port, "POST", "/actuator/backups", r#"{"backupId": 1}"#).unwrap();
    assert_eq!(code, 202, "{body}");
    let backup = tokio::task::block_in_place(|| wait_backup(&nodes[0], 1));
    load.stop_after(30).await;
    assert_eq!(backup["state"], "COMPLETED", "{backup}");
    let details = backup["details"].as_array().unwrap().clone();
    assert_eq!(details.len(), usize::from(GROWN), "{backup}");
    drop(nodes);

    // a count the recorded topology does not run with is refused, nothing restored
    let root = temp.path().join("restored");
    let args = broker_args(0, &internal, 5, 3);
    let refused = restore_cmd(&store, 1, &root.join("broker-0"), &args[1..]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("restore with --partitions 3 or 6"), "{stderr}");
    assert!(!root.join("broker-0").join("partitions").exists());
    // every broker's six replicas, and the recorded topology with its routing state
    for i in 0..BROKERS {
        let partitions = if i < 2 { GROWN } else { PARTITIONS };
        let args = broker_args(i, &internal, partitions, 3);
        let dir = root.join(format!("broker-{i}"));
        let done = restore_cmd(&store, 1, &dir, &args[1..]);
        assert!(done.status.success(), "restoring broker {i} with --partitions {partitions}: {}", String::from_utf8_lossy(&done.stderr));
        let restored: Vec<u16> = (1..=GROWN).filter(|p| dir.join(format!("partitions/{p}")).exists()).collect();
        assert_eq!(restored, (1..=GROWN).collect::<Vec<_>>(), "broker {i}'s restored partitions");
        let topology = json(&std::fs::read_to_string(dir.join("cluster-topology.json")).expect("the recorded topology written"));
        let routing = &topology["routing"];
        assert_eq!(
            (&routing["routedPartitions"], &routing["messagePartitions"], &routing["firstPartitions"]),
            (&serde_json::json!(6), &serde_json::json!(6), &serde_json::json!(3)),
            "broker {i}: {topology}"
        );
    }
    let new_store = tempfile::tempdir().unwrap();
    let mut options = ClusterOptions::new(BROKERS, GROWN);
    options.common = vec!["--backup-store".to_string(), new_store.path().to_str().unwrap().to_string()];
    options.data_root = Some(root.clone());
    options.internal = Some(internal.clone());
    let mut restored = tokio::task::block_in_place(|| Cluster::start(options));
    let shown = get_json(&restored.nodes[0], "/actuator/cluster");
    assert_eq!((&shown["partitionsCount"], &shown["pendingChange"]), (&serde_json::json!(6), &serde_json::Value::Null), "{shown}");

    // each partition's state at the backup's position, every acknowledged instance in it
    let nodes: Vec<&Node> = restored.nodes.iter().collect();
    for d in &details {
        let partition = d["partitionId"].as_u64().unwrap() as u16;
        let digest = tokio::task::block_in_place(|| digests_agree(&nodes, partition));
        assert_eq!((&digest["rows"], &digest["hash"]), (&d["rows"], &d["hash"]), "partition {partition}: {digest} vs {d}");
    }
    assert!(acknowledged.iter().any(|&k| partition_of(k) > PARTITIONS), "instances on partitions 4-6 before the backup");
    let mut client = grpc_client(&restored.nodes[1]).await;
    for &key in acknowledged.iter().chain(&waiting_for_message) {
        let request = SetVariablesRequest { element_instance_key: key, variables: r#"{"checked": true}"#.into(), local: false };
        if let Err(e) = client.set_variables(request).await {
            panic!("instance {key}, acknowledged before the backup, is not in the restored state: {e}");
        }
    }

    // new instances go to all six partitions
    let mut created = std::collections::BTreeSet::new();
    for _ in 0..4 * GROWN {
        created.insert(partition_of(
            client.create_process_instance(one_task_creation()).await.expect("a creation").into_inner().process_instance_key,
        ));
    }
    assert_eq!(created, (1..=GROWN).collect(), "the restored cluster routes new instances to every partition");

    // messages go by the recorded message count (6): each waiting instance gets its message once
    for key in &keys {
        let publish = waggle_protocol::gateway::PublishMessageRequest {
            name: "benchmark-message".into(),
            correlation_key: key.clone(),
            time_to_live: 0,
            message_id: String::new(),
            variables: "{}".into(),
            tenant_id: String::new(),
        };
        client.publish_message(publish).await.expect("a publication");
    }
    let mut reached: std::collections::BTreeMap<i64, u32> = std::collections::BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !waiting_for_message.iter().all(|k| reached.contains_key(k)) {
        assert!(Instant::now() < deadline, "instances whose message did not reach them: {waiting_for_message:?}, reached {reached:?}");
        let request = ActivateJobsRequest { r#type: "after-message".into(), ..activation() };
        let mut stream = client.activate_jobs(request).await.expect("activate").into_inner();
        while let Some(batch) = stream.message().await.expect("jobs") {
            for job in batch.jobs {
                *reached.entry(job.process_instance_key).or_default() += 1;
            }
        }
    }
    assert!(reached.values().all(|&n| n == 1) && reached.len() == keys.len(), "each message correlated once: {reached:?}");

    // the restored cluster grows again (Zeebe 8.8, "Cluster scaling": "After restoring, you can
    // request scaling again")
    let (status, planned) = tokio::task::block_in_place(|| {
        management_request(&restored.nodes[2], "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 7}}"#)
    });
    assert_eq!(status, 202, "6 -> 7 partitions after the restore: {planned}");
    let change = planned["changeId"].as_u64().unwrap();
    for node in &restored.nodes {
        tokio::task::block_in_place(|| wait_change_completed(node, change, "6 -> 7", || log_tails(&restored.nodes)));
    }
    let seven: Vec<u64> = (1..=7).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let created = client.create_process_instance(one_task_creation()).await.expect("a creation").into_inner();
        if partition_of(created.process_instance_key) == 7 {
            break;
        }
        assert!(Instant::now() < deadline, "no instance created on partition 7");
    }

    // a broker restarts with the configured count (its folder restored with the grown one);
    // a start contradicting its folder is refused
    let mut args = restored.args(0);
    let at = args.iter().position(|a| a == "--partitions").unwrap() + 1;
    args[at] = PARTITIONS.to_string();
    tokio::task::block_in_place(|| restored.nodes[0].restart_with(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let deadline = Instant::now() + Duration::from_secs(60);
    while held_partitions(&restored.nodes[0]) != seven {
        assert!(Instant::now() < deadline, "broker 0 restarted with --partitions 3 runs {:?}", held_partitions(&restored.nodes[0]));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    args[at] = "5".into();
    let refused = tokio::task::block_in_place(|| restored.nodes[0].run_instead(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("the data folder has 6, this start gives 5"), "{stderr}");
}

/// The single-node case: the standalone node's partition count does not grow (it has no
/// cluster topology: `a_backup_under_load_restores_the_state_at_its_position` checks the
/// refusal), a one-broker cluster's (`waggle broker --cluster-size 1`) does; a backup taken
/// after it grew from 1 to 2 partitions restores both, with their state and instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_one_broker_cluster_grown_to_two_partitions_restores_both() {
    use waggle_protocol::partition_of;
    let store = Store::dir();
    let temp = tempfile::tempdir().unwrap();
    let mut options = ClusterOptions::new(1, 1);
    options.common = store.args();
    options.data_root = Some(temp.path().to_path_buf());
    let cluster = tokio::task::block_in_place(|| Cluster::start(options));
    let (internal, nodes) = (cluster.internal.clone(), cluster.nodes);
    let mut client = grpc_client(&nodes[0]).await;
    deploy_one_task(&mut client).await;
    let (status, planned) =
        tokio::task::block_in_place(|| management_request(&nodes[0], "PATCH", "/actuator/cluster", r#"{"partitions": {"count": 2}}"#));
    assert_eq!(status, 202, "1 -> 2 partitions: {planned}");
    let change = planned["changeId"].as_u64().unwrap();
    tokio::task::block_in_place(|| wait_change_completed(&nodes[0], change, "1 -> 2", || log_tails(&nodes)));
    let mut created = Vec::new();
    for _ in 0..10 {
        created.push(client.create_process_instance(one_task_creation()).await.expect("a creation").into_inner().process_instance_key);
    }
    assert!(created.iter().any(|&k| partition_of(k) == 2), "instances on partition 2: {created:?}");
    let (code, body) = http_json(nodes[0].management_port, "POST", "/actuator/backups", r#"{"backupId": 1}"#).unwrap();
    assert_eq!(code, 202, "{body}");
    let backup = tokio::task::block_in_place(|| wait_backup(&nodes[0], 1));
    assert_eq!((backup["state"].as_str(), backup["details"].as_array().map(Vec::len)), (Some("COMPLETED"), Some(2)), "{backup}");
    drop(nodes);

    let root = temp.path().join("restored");
    let args = broker_args(0, &internal, 2, 1);
    let done = restore_cmd(&store, 1, &root.join("broker-0"), &args[1..]);
    assert!(done.status.success(), "restoring the broker: {}", String::from_utf8_lossy(&done.stderr));
    let mut options = ClusterOptions::new(1, 2);
    options.data_root = Some(root);
    options.internal = Some(internal);
    let restored = tokio::task::block_in_place(|| Cluster::start(options));
    assert_digests(&restored.nodes[0], &backup);
    let mut client = grpc_client(&restored.nodes[0]).await;
    for key in created {
        let request = SetVariablesRequest { element_instance_key: key, variables: r#"{"checked": true}"#.into(), local: false };
        if let Err(e) = client.set_variables(request).await {
            panic!("instance {key}, created before the backup, is not in the restored state: {e}");
        }
    }
}
