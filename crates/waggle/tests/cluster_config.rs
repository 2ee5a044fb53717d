//! `waggle broker`'s settings and the data folder's persisted configuration (`cluster.json`),
//! on the real binary: a restart that contradicts its data is refused naming each setting and
//! changes nothing, the right settings start it again with its data; broker flags are
//! validated; the `WAGGLE_*` variables and the TOML keys set them.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tonic::Code;
use waggle_protocol::gateway::{DeployResourceRequest, Resource};

use common::{free_port, grpc_client, one_task_activation, one_task_creation, run_with_timeout, tree_digest, Node};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Asserts the start was refused (a non-zero exit) with a message containing every one of `expected`.
fn assert_refused(output: &Output, expected: &[&str]) {
    let stderr = stderr(output);
    assert!(!output.status.success(), "the start was not refused: {}\n{stderr}", output.status);
    for e in expected {
        assert!(stderr.contains(e), "the refusal does not say {e:?}:\n{stderr}");
    }
}

fn cluster_json(node: &Node) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(node.data_dir.join("cluster.json")).expect("cluster.json")).expect("cluster.json is JSON")
}

/// Waits (20 s at most) until `/actuator/cluster` shows this node leading every partition (a
/// broker's partitions elect their leader after the node is ready).
async fn wait_for_leaders(node: &Node) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = node.get("/actuator/cluster");
        let topology: serde_json::Value = serde_json::from_str(&body).expect("cluster JSON");
        let partitions = topology["brokers"][0]["partitions"].as_array().cloned().unwrap_or_default();
        if !partitions.is_empty() && partitions.iter().all(|p| p["role"] == "LEADER") {
            return;
        }
        assert!(Instant::now() < deadline, "the partitions have no leader after 20 s: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Deploys one_task.bpmn and creates an instance: its key. A broker's partitions may answer
/// UNAVAILABLE until their Raft groups have a leader: retried for 20 s, as Zeebe's clients do.
async fn deploy_and_create(node: &Node) -> i64 {
    wait_for_leaders(node).await;
    let mut client = grpc_client(node).await;
    let content = std::fs::read(common::client_models().join("one_task.bpmn")).expect("one_task.bpmn");
    let deployment =
        DeployResourceRequest { resources: vec![Resource { name: "one_task.bpmn".into(), content }], tenant_id: String::new() };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.deploy_resource(deployment.clone()).await {
            Err(e) if e.code() == Code::Unavailable && Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            result => {
                result.expect("deploy");
                break;
            }
        };
    }
    client.create_process_instance(one_task_creation()).await.expect("create").into_inner().process_instance_key
}

/// The earlier instance's job is still there, and the deployed process still starts instances
/// (UNAVAILABLE retried for 20 s, as after [`deploy_and_create`]).
async fn assert_data_kept(node: &Node, instance: i64) {
    // an activation over every partition while one has no leader yet can fail as a whole
    wait_for_leaders(node).await;
    let mut client = grpc_client(node).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut keys = Vec::new();
    while keys.is_empty() && Instant::now() < deadline {
        match client.activate_jobs(one_task_activation(10)).await {
            Ok(response) => {
                let mut stream = response.into_inner();
                while let Some(response) = stream.message().await.expect("stream") {
                    keys.extend(response.jobs.iter().map(|j| j.process_instance_key));
                }
            }
            Err(e) if e.code() == Code::Unavailable => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("activate: {e:?}"),
        }
    }
    assert_eq!(keys, vec![instance], "the earlier instance's job");
    client.create_process_instance(one_task_creation()).await.expect("the deployed process is still there");
}

#[test]
fn a_restart_with_another_partition_count_is_refused_and_changes_nothing() {
    let mut node = Node::start(&["--partitions", "2"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let instance = runtime.block_on(deploy_and_create(&node));
    assert!(node.terminate().success());
    assert_eq!(cluster_json(&node), serde_json::json!({"format_version": 1, "partitions": 2, "role": "standalone"}));
    let before = tree_digest(&node.data_dir);

    let refused = node.run_instead(&["--partitions", "3"]);
    assert_refused(
        &refused,
        &[
            "refusing to start (nothing in it was changed)",
            "--partitions: the data folder has 2, this start gives 3",
            "Start with --partitions 2 as before, or point --data-dir at an empty folder.",
        ],
    );
    // the default (1 partition) contradicts it too
    assert_refused(&node.run_instead(&[]), &["--partitions: the data folder has 2, this start gives 1"]);
    // a standalone node's data is not a broker's
    let internal = free_port().to_string();
    assert_refused(
        &node.run_instead(&["broker", "--partitions", "2", "--internal-port", &internal]),
        &[
            "role: the data folder has a standalone node, this start gives a cluster broker (node 0 of 1)",
            "Start it as `waggle --partitions 2` (the standalone node) as before",
        ],
    );
    assert_eq!(tree_digest(&node.data_dir), before, "a refused start changed the data folder");

    node.restart_with(&["--partitions", "2"]);
    runtime.block_on(assert_data_kept(&node, instance));
}

#[test]
fn a_brokers_data_refuses_other_cluster_settings_and_the_standalone_node() {
    let internal = free_port().to_string();
    let mut node = Node::start(&["broker", "--partitions", "2", "--internal-port", &internal]);
    let (_, topology) = node.get("/actuator/cluster");
    assert!(topology.contains(r#""nodeId":0"#), "{topology}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let instance = runtime.block_on(deploy_and_create(&node));
    assert!(node.terminate().success());
    assert_eq!(
        cluster_json(&node),
        serde_json::json!({"format_version": 1, "partitions": 2, "role": "broker", "node_id": 0, "cluster_size": 1, "replication_factor": 1})
    );
    let before = tree_digest(&node.data_dir);

    let other = free_port().to_string();
    let contact_points = format!("127.0.0.1:{other},127.0.0.1:{internal}");
    let refused = node.run_instead(&[
        "broker",
        "--node-id",
        "1",
        "--cluster-size",
        "2",
        "--contact-points",
        &contact_points,
        "--internal-port",
        &internal,
        "--partitions",
        "2",
        "--replication-factor",
        "2",
    ]);
    assert_refused(
        &refused,
        &[
            "--node-id: the data folder has 0, this start gives 1",
            "--cluster-size: the data folder has 1, this start gives 2",
            "--replication-factor: the data folder has 1, this start gives 2",
            "Start with --node-id 0 --cluster-size 1 --replication-factor 1 as before, or point --data-dir at an empty folder.",
        ],
    );
    assert!(!stderr(&refused).contains("--partitions:"), "the partition count agrees:\n{}", stderr(&refused));
    assert_refused(
        &node.run_instead(&["--partitions", "2"]),
        &[
            "role: the data folder has a cluster broker (node 0 of 1), this start gives a standalone node",
            "`waggle broker --node-id 0 --cluster-size 1 --partitions 2 --replication-factor 1`",
        ],
    );
    assert_eq!(tree_digest(&node.data_dir), before, "a refused start changed the data folder");

    node.restart_with(&["broker", "--partitions", "2", "--internal-port", &internal]);
    runtime.block_on(assert_data_kept(&node, instance));
}

fn waggle(args: &[&str], envs: &[(&str, &str)]) -> Output {
    run_with_timeout(Command::new(env!("CARGO_BIN_EXE_waggle")).args(args).envs(envs.iter().copied()), Duration::from_secs(30))
}

#[test]
fn broker_flags_are_validated_with_clear_errors_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let three = "127.0.0.1:26502,127.0.0.1:26512,127.0.0.1:26522";
    let cases: [(&[&str], &str); 6] = [
        (&["--node-id", "3", "--contact-points", three], "--node-id 3 must be below --cluster-size 3 (node ids are 0 to 2)"),
        (&["--replication-factor", "4", "--contact-points", three], "--replication-factor 4 must be between 1 and --cluster-size 3"),
        (&["--cluster-size", "3", "--contact-points", "127.0.0.1:26502"], "--contact-points lists 1 address(es) but --cluster-size is 3"),
        (&["--cluster-size", "3"], "--cluster-size 3 needs --contact-points"),
        (
            &["--node-id", "2", "--contact-points", three],
            "--contact-points entry 2 (127.0.0.1:26522) is this broker's own internal address (--node-id 2), but --internal-port is 26502",
        ),
        (&["--contact-points", "127.0.0.1:26502,nowhere"], "--contact-points entry 1 (nowhere) is not a host:port address"),
    ];
    for (args, expected) in cases {
        let mut all = vec!["broker", "--data-dir", data_arg];
        all.extend_from_slice(args);
        assert_refused(&waggle(&all, &[]), &[expected]);
    }
    assert!(!data.exists(), "a refused start created the data folder");
    // the cluster flags are the broker's: the standalone node does not take them
    let output = waggle(&["--data-dir", data_arg, "--node-id", "1"], &[]);
    assert_refused(&output, &["--node-id"]);
    assert!(!data.exists());
}

#[test]
fn help_of_broker_names_every_cluster_flag_and_variable() {
    let output = waggle(&["broker", "--help"], &[]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for name in [
        "--node-id",
        "WAGGLE_NODE_ID",
        "--cluster-size",
        "WAGGLE_CLUSTER_SIZE",
        "--replication-factor",
        "WAGGLE_REPLICATION_FACTOR",
        "--contact-points",
        "WAGGLE_CONTACT_POINTS",
        "--internal-port",
        "WAGGLE_INTERNAL_PORT",
        "--internal-host",
        "WAGGLE_INTERNAL_HOST",
        "--partitions",
        "--data-dir",
        "--management-port",
    ] {
        assert!(help.contains(name), "`waggle broker --help` does not mention {name}:\n{help}");
    }
}

#[test]
fn environment_variables_set_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = ["broker", "--data-dir", data.to_str().unwrap()];
    let three = "127.0.0.1:26502,127.0.0.1:26512,127.0.0.1:26522";
    let refused = waggle(&broker, &[("WAGGLE_CONTACT_POINTS", three), ("WAGGLE_NODE_ID", "5")]);
    assert_refused(&refused, &["--node-id 5 must be below --cluster-size 3"]);
    let refused = waggle(&broker, &[("WAGGLE_CONTACT_POINTS", three), ("WAGGLE_CLUSTER_SIZE", "2")]);
    assert_refused(&refused, &["--contact-points lists 3 address(es) but --cluster-size is 2"]);
    let refused = waggle(&broker, &[("WAGGLE_CONTACT_POINTS", three), ("WAGGLE_REPLICATION_FACTOR", "4")]);
    assert_refused(&refused, &["--replication-factor 4 must be between 1 and --cluster-size 3"]);
    let refused = waggle(&broker, &[("WAGGLE_CONTACT_POINTS", three), ("WAGGLE_INTERNAL_PORT", "26512")]);
    assert_refused(
        &refused,
        &["entry 0 (127.0.0.1:26502) is this broker's own internal address (--node-id 0), but --internal-port is 26512"],
    );
    let refused = waggle(&broker, &[("WAGGLE_CONTACT_POINTS", three), ("WAGGLE_INTERNAL_HOST", "127.0.0.2")]);
    assert_refused(&refused, &["but --internal-host is 127.0.0.2"]);
    // the standalone node refuses a broker's variable instead of ignoring it
    let refused = waggle(&["--data-dir", data.to_str().unwrap()], &[("WAGGLE_CLUSTER_SIZE", "3")]);
    assert_refused(&refused, &["WAGGLE_CLUSTER_SIZE is set, a setting of a cluster broker: run `waggle broker`"]);
    assert!(!data.exists(), "a refused start created the data folder");

    // a one-broker cluster set up by its variables alone
    let internal = free_port().to_string();
    let contact_points = format!("127.0.0.1:{internal}");
    let node = Node::start_with_env(
        &["broker"],
        &[
            ("WAGGLE_NODE_ID", "0"),
            ("WAGGLE_CLUSTER_SIZE", "1"),
            ("WAGGLE_PARTITIONS", "3"),
            ("WAGGLE_REPLICATION_FACTOR", "1"),
            ("WAGGLE_CONTACT_POINTS", &contact_points),
            ("WAGGLE_INTERNAL_PORT", &internal),
            ("WAGGLE_INTERNAL_HOST", "127.0.0.1"),
        ],
    );
    assert_eq!(
        cluster_json(&node),
        serde_json::json!({"format_version": 1, "partitions": 3, "role": "broker", "node_id": 0, "cluster_size": 1, "replication_factor": 1})
    );
    assert!(node.log().contains(&format!("node 0 of 1, replication factor 1, internal 127.0.0.1:{internal}")), "{}", node.log());
}

#[test]
fn the_toml_file_sets_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.toml");
    let three = r#"["127.0.0.1:26502", "127.0.0.1:26512", "127.0.0.1:26522"]"#;
    std::fs::write(&file, format!("contact_points = {three}\nnode_id = 1\ninternal_port = 26512\nreplication_factor = 4\n")).unwrap();
    let data = dir.path().join("data");
    let refused = waggle(&["broker", "--config", file.to_str().unwrap(), "--data-dir", data.to_str().unwrap()], &[]);
    assert_refused(&refused, &["--replication-factor 4 must be between 1 and --cluster-size 3"]);
    // the standalone node refuses a broker's file
    let refused = waggle(&["--config", file.to_str().unwrap(), "--data-dir", data.to_str().unwrap()], &[]);
    assert_refused(&refused, &["sets node_id, a setting of a cluster broker"]);
    assert!(!data.exists(), "a refused start created the data folder");

    let internal = free_port();
    std::fs::write(
        &file,
        format!(
            "node_id = 0\ncluster_size = 1\npartitions = 2\nreplication_factor = 1\ncontact_points = \"127.0.0.1:{internal}\"\n\
             internal_port = {internal}\ninternal_host = \"127.0.0.1\"\n"
        ),
    )
    .unwrap();
    let node = Node::start(&["broker", "--config", file.to_str().unwrap()]);
    assert_eq!(
        cluster_json(&node),
        serde_json::json!({"format_version": 1, "partitions": 2, "role": "broker", "node_id": 0, "cluster_size": 1, "replication_factor": 1})
    );
    assert!(node.log().contains(&format!("internal 127.0.0.1:{internal}")), "{}", node.log());
}
