//! Writes the data-folder fixture that `tests/upgrade.rs` opens: starts the given `waggle`
//! binary (a build of the commit the fixture is named after) as a standalone node with one
//! partition, deploys `tests/fixtures/upgrade_waits.bpmn`, creates three instances that wait at a
//! job, a timer and a message, stops the node and packs `data/` and `instances.json` into the
//! output `.tar.gz`.
//!
//! `cargo run -p waggle --example upgrade_fixture -- <waggle binary> <out.tar.gz>`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::{CreateProcessInstanceRequest, DeployResourceRequest, Resource};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, binary, out] = args.as_slice() else {
        bail!("usage: upgrade_fixture <waggle binary> <out.tar.gz>");
    };
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let free_port = || waggle_bench::server::free_port();
    let (grpc, management, rest) = (free_port()?, free_port()?, free_port()?);
    let mut child = Command::new(binary)
        .arg("--data-dir")
        .arg(&data)
        .args(["--partitions", "1", "--host", "127.0.0.1", "--port", &grpc.to_string()])
        .args(["--management-port", &management.to_string(), "--rest-port", &rest.to_string()])
        .spawn()
        .with_context(|| format!("starting {binary}"))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready(management) {
        ensure!(Instant::now() < deadline, "{binary} not ready within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut client = GatewayClient::connect(format!("http://127.0.0.1:{grpc}")).await?;
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade_waits.bpmn");
    let content = std::fs::read(&model).with_context(|| format!("reading {}", model.display()))?;
    let resources = vec![Resource { name: "upgrade_waits.bpmn".into(), content }];
    client.deploy_resource(DeployResourceRequest { resources, tenant_id: String::new() }).await?;
    let mut waiting = Vec::new();
    for i in 1..=3 {
        let correlation_key = format!("order-{i}");
        let created = client
            .create_process_instance(CreateProcessInstanceRequest {
                bpmn_process_id: "upgrade-waits".into(),
                version: -1,
                variables: format!(r#"{{"key": "{correlation_key}"}}"#),
                ..Default::default()
            })
            .await?
            .into_inner();
        waiting.push(serde_json::json!({"instance": created.process_instance_key, "correlation_key": correlation_key}));
    }
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status()?;
    ensure!(child.wait()?.success(), "{binary} did not stop cleanly");
    std::fs::write(dir.path().join("instances.json"), serde_json::to_vec_pretty(&waiting)?)?;
    let out = PathBuf::from(out);
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&out)
        .arg("-C")
        .arg(dir.path())
        .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "data", "instances.json"])
        .status()?;
    ensure!(status.success(), "tar failed");
    println!("wrote {}", out.display());
    Ok(())
}

/// Whether the node's `/ready` answers 200.
fn ready(management: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", management)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(stream, "GET /ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.split_whitespace().nth(1) == Some("200")
}
