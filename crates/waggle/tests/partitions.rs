//! Message correlation across partitions: with three partitions, instances are spread round
//! robin while each message lives on the partition of its correlation key, so most
//! correlations need the subscription handshake between partitions. Driven by the real
//! binary's `waggle bench run` (workload W5: message catch, publish after creation).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{run_with_timeout, Node};

#[test]
fn messages_correlate_across_partitions() {
    let node = Node::start(&["--partitions", "3"]);
    let (_, topology) = node.get("/actuator/cluster");
    assert_eq!(topology.matches("partitionId").count(), 3, "not 3 partitions: {topology}");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("w5.json");
    let out = run_with_timeout(
        Command::new(env!("CARGO_BIN_EXE_waggle")).args([
            "bench",
            "run",
            "--target",
            &node.address(),
            "--workload",
            "W5",
            "--rate",
            "20",
            "--warmup",
            "1s",
            "--duration",
            "3s",
            "--drain",
            "10s",
            "--json",
            json.to_str().unwrap(),
        ]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "bench failed: {}\n{}", String::from_utf8_lossy(&out.stderr), node.log());
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let report = if report.is_array() { report[0].clone() } else { report };
    assert_eq!(report["unsupported"], serde_json::Value::Null, "{report}");
    assert!(report["measured_instances"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["unfinished_instances"].as_u64(), Some(0), "instances left waiting for their message: {report}");
    assert_eq!(report["errors"].as_u64(), Some(0), "{report}");
}
