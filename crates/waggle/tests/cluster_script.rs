//! `scripts/cluster.sh`: starts N `waggle broker` processes (and with `--gateway` a standalone
//! gateway) on loopback with their own ports, data folders, logs and PID files, shows them,
//! stops them; a start on the same folder with other settings fails showing the brokers'
//! refusal. Runs this build's binary (`--bin`).

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{free_port, http_get, repo_root, run_with_timeout};

/// Port bases (gateway G, internal G + 2, management G + 5) whose ports for `count` brokers
/// (each base + 10 i) are all free now.
/// The tests here run one at a time: their port ranges come from the same allocator, one
/// after the other, so two clusters starting at once would take each other's ports.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn free_bases(count: u16) -> u16 {
    for _ in 0..100 {
        let base = free_port();
        let ports: Vec<u16> = (0..count).flat_map(|i| [base + 10 * i, base + 10 * i + 2, base + 10 * i + 5, base + 10 * i + 6]).collect();
        if ports.iter().all(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok()) {
            return base;
        }
    }
    panic!("no free port range");
}

fn script(args: &[&str], dir: &Path, base: u16) -> Output {
    let bases = [
        "--dir".to_string(),
        dir.display().to_string(),
        "--gateway-port".into(),
        base.to_string(),
        "--internal-port".into(),
        (base + 2).to_string(),
        "--management-port".into(),
        (base + 5).to_string(),
        "--rest-port".into(),
        (base + 6).to_string(),
    ];
    let mut command = Command::new(repo_root().join("scripts/cluster.sh"));
    command.args(args);
    if args[0] == "start" {
        command.args(&bases).args(["--bin", env!("CARGO_BIN_EXE_waggle"), "--wait", "60"]);
    } else {
        command.args(&bases[..2]);
    }
    run_with_timeout(&mut command, Duration::from_secs(120))
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

fn pid_of(dir: &Path, node: u16) -> u32 {
    std::fs::read_to_string(dir.join(format!("broker-{node}/waggle.pid"))).expect("PID file").trim().parse().expect("a PID")
}

/// Whether `pid` runs (an exited process not yet reaped by whoever adopted it has no command line).
fn alive(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
}

/// Stops the cluster even when an assertion failed.
struct Stop<'a>(&'a Path, u16);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        let _ = script(&["stop"], self.0, self.1);
    }
}

#[test]
fn the_cluster_script_starts_shows_and_stops_brokers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster-data");
    let base = free_bases(4);
    let _stop = Stop(&dir, base);

    let started = script(&["start", "3", "--partitions", "3", "--replication-factor", "2", "--gateway"], &dir, base);
    assert!(started.status.success(), "start failed:\n{}", text(&started));
    assert!(text(&started).contains("started 3 brokers"), "{}", text(&started));
    // the standalone gateway in slot 3, ready: it knows a leader of every partition
    assert!(text(&started).contains(&format!("started a standalone gateway: gRPC on 127.0.0.1:{}", base + 30)), "{}", text(&started));
    assert_eq!(http_get(base + 35, "/ready").map(|(code, _)| code), Some(200), "the gateway is not ready");
    let (_, cluster) = http_get(base + 35, "/actuator/cluster").expect("the gateway's /actuator/cluster");
    let cluster: serde_json::Value = serde_json::from_str(&cluster).expect("JSON");
    assert_eq!((cluster["brokers"].as_array().map(Vec::len), &cluster["partitionsCount"]), (Some(3), &serde_json::json!(3)), "{cluster}");
    let gateway_pid: u32 = std::fs::read_to_string(dir.join("gateway/waggle.pid")).expect("PID file").trim().parse().expect("a PID");
    let mut pids = Vec::new();
    for i in 0..3u16 {
        let stored: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("broker-{i}/data/cluster.json"))).expect("cluster.json")).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({"format_version": 1, "partitions": 3, "role": "broker", "node_id": i, "cluster_size": 3, "replication_factor": 2})
        );
        assert_eq!(http_get(base + 10 * i + 5, "/ready").map(|(code, _)| code), Some(200), "broker {i} is not ready");
        let log = std::fs::read_to_string(dir.join(format!("broker-{i}/waggle.log"))).unwrap();
        let internal = format!("node {i} of 3, replication factor 2, internal 127.0.0.1:{}", base + 10 * i + 2);
        assert!(log.contains(&internal), "broker {i}'s log does not say {internal:?}:\n{log}");
        assert!(log.contains(&format!("127.0.0.1:{}", base + 10 * i)), "broker {i}'s gateway port:\n{log}");
        pids.push(pid_of(&dir, i));
    }
    let status = script(&["status"], &dir, base);
    assert!(status.status.success(), "{}", text(&status));
    for (i, pid) in pids.iter().enumerate() {
        let row = text(&status).lines().find(|l| l.starts_with(&i.to_string())).map(str::to_string).unwrap_or_default();
        assert!(row.contains(&pid.to_string()) && row.contains("running") && row.contains("yes"), "status of broker {i}: {row}");
    }
    let row = text(&status).lines().find(|l| l.starts_with("gw")).map(str::to_string).unwrap_or_default();
    assert!(row.contains(&gateway_pid.to_string()) && row.contains("running") && row.contains("yes"), "status of the gateway: {row}");
    let again = script(&["start", "3"], &dir, base);
    assert!(!again.status.success() && text(&again).contains("a cluster is running"), "{}", text(&again));

    let stopped = script(&["stop"], &dir, base);
    assert!(stopped.status.success(), "{}", text(&stopped));
    for pid in &pids {
        assert!(!alive(*pid), "broker pid {pid} still runs after stop");
    }
    assert!(!alive(gateway_pid) && text(&stopped).contains("stopped the gateway"), "{}", text(&stopped));
    let status = script(&["status"], &dir, base);
    assert!(!status.status.success() && text(&status).matches("stopped").count() == 4, "{}", text(&status));

    // the same folder with another partition count: the brokers refuse, the script says why
    let refused = script(&["start", "3", "--partitions", "4", "--replication-factor", "2"], &dir, base);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("--partitions: the data folder has 3, this start gives 4"), "{}", text(&refused));
    // and with the settings it was created with, it starts again
    let restarted = script(&["start", "3", "--partitions", "3", "--replication-factor", "2"], &dir, base);
    assert!(restarted.status.success(), "{}", text(&restarted));
}

#[test]
fn the_cluster_script_starts_a_cluster_with_mutual_tls_between_brokers_and_gateway() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster-data");
    let base = free_bases(4);
    let _stop = Stop(&dir, base);

    let started = script(&["start", "3", "--tls", "--gateway"], &dir, base);
    assert!(started.status.success(), "start failed:\n{}", text(&started));
    assert!(text(&started).contains("mutual TLS between them"), "{}", text(&started));
    for file in ["ca.pem", "broker-0.pem", "broker-2.key", "gateway.pem"] {
        assert!(dir.join("tls").join(file).exists(), "{file} not made");
    }
    for i in 0..3 {
        let log = std::fs::read_to_string(dir.join(format!("broker-{i}/waggle.log"))).unwrap();
        assert!(log.contains("internal port: mutual TLS"), "broker {i} is not on mutual TLS:\n{log}");
    }
    // an instance created through the standalone gateway reaches its partition's leader over TLS
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = waggle_protocol::gateway::gateway_client::GatewayClient::connect(format!("http://127.0.0.1:{}", base + 30))
            .await
            .expect("the gateway");
        common::deploy_one_task(&mut client).await;
        for _ in 0..3 {
            client.create_process_instance(common::one_task_creation()).await.expect("an instance through the gateway");
        }
    });
}
