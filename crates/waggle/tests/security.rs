//! Issue 29's first slice against the real binary and real clients: TLS on the gRPC gateway,
//! the REST API and the management port (zbctl, the Java client, pyzeebe and the Node SDK each
//! run deploy → create → complete over TLS; plaintext clients fail), HTTP Basic authentication
//! on the REST API and the management port's changes, the management port on loopback, and the
//! REST body limit. The CA and the server certificate are made by the test (`rcgen`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::certs::Certs;
use common::{client_models, drive_steps, http_get, peers, repo_root, run_with_timeout, Node};

fn start(args: &[String]) -> Node {
    Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// curl's answer: (status, headers, body); `None` if curl failed (no connection, a refused
/// certificate, a failed handshake).
fn curl(args: &[&str]) -> Option<(u16, String, String)> {
    let output = run_with_timeout(Command::new("curl").args(["-s", "-i", "--max-time", "10"]).args(args), Duration::from_secs(20));
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, head.to_string(), body.to_string()))
}

const FLOW: &[&str] = &["deploy", "create", "complete", "result"];

fn zbctl(node: &Node, tls: Option<&Path>, args: &[&str]) -> Result<String, String> {
    let bin = peers().join("bin/zbctl");
    assert!(bin.exists(), "{} missing: run scripts/install-clients.sh", bin.display());
    let mut command = Command::new(bin);
    match tls {
        Some(ca) => command.arg("--certPath").arg(ca),
        None => command.arg("--insecure"),
    };
    command.args(["--address", &node.address()]).args(args);
    let output = run_with_timeout(&mut command, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{}{stdout}", String::from_utf8_lossy(&output.stderr)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_on_every_port_serves_zbctl_and_https_and_refuses_plaintext() {
    let certs = Certs::new();
    let node = start(&certs.node_args());
    let ca = certs.ca_str();
    // HTTPS with the CA: management and REST (HTTP/1.1 and HTTP/2)
    let ready = curl(&["--cacert", &ca, &format!("https://127.0.0.1:{}/ready", node.management_port)]);
    assert_eq!(ready.as_ref().map(|r| r.0), Some(200), "{ready:?}");
    let topology = curl(&["--http2", "--cacert", &ca, &format!("https://localhost:{}/v2/topology", node.rest_port)]);
    let (status, head, _) = topology.expect("REST over TLS");
    assert!(status == 200 && head.starts_with("HTTP/2"), "{head}");
    // without the CA the certificate is refused; plaintext gets no HTTP answer
    assert!(curl(&[&format!("https://127.0.0.1:{}/ready", node.management_port)]).is_none(), "an unknown CA was accepted");
    assert_eq!(http_get(node.management_port, "/ready").map(|r| r.0), None, "plaintext management answered");
    assert_eq!(http_get(node.rest_port, "/v2/topology").map(|r| r.0), None, "plaintext REST answered");
    // plaintext gRPC fails, with tonic and with zbctl
    let plaintext = async {
        let mut client = waggle_protocol::gateway::gateway_client::GatewayClient::connect(node.endpoint()).await?;
        client.topology(waggle_protocol::gateway::TopologyRequest {}).await.map_err(Box::<dyn std::error::Error>::from)
    };
    assert!(plaintext.await.is_err(), "plaintext gRPC answered");
    let insecure = zbctl(&node, None, &["status"]);
    assert!(insecure.is_err(), "zbctl --insecure answered: {insecure:?}");
    // zbctl over TLS: deploy → create → activate → complete
    let tls = Some(certs.ca());
    let tls = tls.as_deref();
    let model = client_models().join("one_task.bpmn");
    zbctl(&node, tls, &["deploy", &model.display().to_string()]).expect("deploy over TLS");
    let created = zbctl(&node, tls, &["create", "instance", "benchmark"]).expect("create over TLS");
    let created: serde_json::Value = serde_json::from_str(&created).expect("creation JSON");
    let instance = common::json_key(&created["processInstanceKey"]);
    let activated = zbctl(&node, tls, &["activate", "jobs", "benchmark-task", "--maxJobsToActivate", "1", "--timeout", "1m"])
        .expect("activate over TLS");
    let jobs: serde_json::Value = serde_json::from_str(&activated).expect("jobs JSON");
    let job = &jobs["jobs"][0];
    assert_eq!(common::json_key(&job["processInstanceKey"]), instance, "{activated}");
    let key = common::json_key(&job["key"]).to_string();
    zbctl(&node, tls, &["complete", "job", &key]).expect("complete over TLS");
    assert!(node.log().contains("tls=true"), "the start-up log names TLS:\n{}", node.log());
}

#[test]
fn the_java_client_runs_a_flow_over_tls() {
    let lib = peers().join("java-client/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let certs = Certs::new();
    let node = start(&certs.node_args());
    let mut command = Command::new("java");
    command.arg("-cp").arg(format!("{}/*", lib.display())).arg(repo_root().join("tests/clients/TlsFlow.java"));
    command.args(["--address", &node.address(), "--ca", &certs.ca_str()]).arg("--models").arg(client_models());
    drive_steps(&mut command, &node, Duration::from_secs(180), FLOW);
}

#[test]
fn pyzeebe_runs_a_flow_over_tls() {
    let python = peers().join("py/bin/python");
    assert!(python.exists(), "{} missing: run scripts/install-clients.sh", python.display());
    let certs = Certs::new();
    let node = start(&certs.node_args());
    let mut command = Command::new(python);
    command.arg(repo_root().join("tests/clients/tls_flow.py"));
    command.args(["--address", &node.address(), "--ca", &certs.ca_str()]).arg("--models").arg(client_models());
    drive_steps(&mut command, &node, Duration::from_secs(180), FLOW);
}

#[test]
fn the_node_sdk_runs_a_flow_over_tls() {
    let modules = peers().join("node/node_modules");
    assert!(modules.join("@camunda8/sdk").exists(), "{} missing: run scripts/install-clients.sh", modules.display());
    let certs = Certs::new();
    let node = start(&certs.node_args());
    let mut command = Command::new("node");
    command.env("NODE_PATH", &modules).arg(repo_root().join("tests/clients/tls_flow.cjs"));
    command.args(["--address", &node.address(), "--ca", &certs.ca_str()]).arg("--models").arg(client_models());
    drive_steps(&mut command, &node, Duration::from_secs(180), FLOW);
}

#[test]
fn the_camunda_8_8_java_client_runs_a_flow_over_rest_with_tls_and_basic_auth() {
    let lib = peers().join("java-client-88/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh java88", lib.display());
    let certs = Certs::new();
    let mut args = certs.node_args();
    args.extend(["--security-authentication-method", "basic", "--security-initialization-users", "demo:s3cret"].map(String::from));
    let node = start(&args);
    let mut command = Command::new("java");
    command.arg("-cp").arg(format!("{}/*", lib.display())).arg(repo_root().join("tests/clients/RestTls.java"));
    command.arg(node.rest_port.to_string()).arg(certs.ca()).arg(client_models()).args(["demo", "s3cret"]);
    drive_steps(&mut command, &node, Duration::from_secs(180), &["deploy", "create", "complete", "refused"]);
}

/// A 401 answer: an RFC 9457 problem whose detail contains `detail`, with a Basic challenge.
fn assert_unauthorized(answer: Option<(u16, String, String)>, detail: &str) {
    let (status, head, body) = answer.expect("an answer");
    assert_eq!(status, 401, "{head}\n{body}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("www-authenticate: basic realm=\"waggle\""), "{head}");
    assert!(head.contains("content-type: application/problem+json"), "{head}");
    let problem: serde_json::Value = serde_json::from_str(&body).expect("a JSON problem");
    assert_eq!((problem["status"].as_u64(), problem["title"].as_str()), (Some(401), Some("UNAUTHORIZED")), "{body}");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains(detail)), "{body}");
}

#[test]
fn basic_authentication_guards_rest_and_the_management_ports_changes() {
    let node = Node::start(&["--security-authentication-method", "basic", "--security-initialization-users", "demo:s3cret,ops:pa:ss"]);
    let rest = |path: &str| format!("http://127.0.0.1:{}{path}", node.rest_port);
    assert_unauthorized(curl(&[&rest("/v2/topology")]), "no credentials");
    assert_unauthorized(curl(&["-u", "demo:wrong", &rest("/v2/topology")]), "the username or the password is wrong");
    assert_unauthorized(curl(&["-u", "nobody:s3cret", &rest("/v2/topology")]), "the username or the password is wrong");
    assert_unauthorized(curl(&["-H", "Authorization: Bearer abc", &rest("/v2/topology")]), "scheme is not Basic");
    assert_unauthorized(curl(&["-H", "Authorization: Basic ###", &rest("/v2/topology")]), "not the base64");
    let unauthenticated = ["-X", "POST", "-H", "content-type: application/json", "-d", r#"{"processDefinitionId":"x"}"#];
    assert_unauthorized(curl(&[&unauthenticated[..], &[&rest("/v2/process-instances")]].concat()), "no credentials");
    assert_eq!(curl(&["-u", "demo:s3cret", &rest("/v2/topology")]).map(|r| r.0), Some(200));
    assert_eq!(curl(&["-u", "ops:pa:ss", &rest("/v2/topology")]).map(|r| r.0), Some(200), "a password with a colon");
    // management: reads stay open (probes, scrapers), changes need credentials
    let mgmt = |path: &str| format!("http://127.0.0.1:{}{path}", node.management_port);
    assert_eq!(curl(&[&mgmt("/health")]).map(|r| r.0), Some(200));
    assert_eq!(curl(&[&mgmt("/metrics")]).map(|r| r.0), Some(200));
    assert_eq!(curl(&[&mgmt("/actuator/cluster")]).map(|r| r.0), Some(200));
    assert_unauthorized(curl(&["-X", "POST", &mgmt("/actuator/rebalance")]), "no credentials");
    assert_unauthorized(curl(&["-X", "DELETE", &mgmt("/actuator/rebalance")]), "no credentials");
    assert_eq!(curl(&["-X", "POST", "-u", "demo:s3cret", &mgmt("/actuator/rebalance")]).map(|r| r.0), Some(200));
}

#[test]
fn without_authentication_everything_stays_open_as_before() {
    let node = Node::start(&[]);
    assert_eq!(curl(&[&format!("http://127.0.0.1:{}/v2/topology", node.rest_port)]).map(|r| r.0), Some(200));
    assert_eq!(node.post("/actuator/rebalance").0, 200);
}

/// The start-up log of the binary run with `args` (and free ports, a fresh data folder), once it
/// is ready; the process is killed then.
fn ready_log(args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("waggle.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_waggle"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--port", &common::free_port().to_string(), "--rest-port", &common::free_port().to_string()])
        .args(["--management-port", &common::free_port().to_string()])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn waggle");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("waggle is ready") || std::time::Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    text
}

#[test]
fn the_management_port_is_loopback_only_by_default_and_says_so() {
    // --host opens the gateway and REST to every interface; management stays on loopback
    let log = ready_log(&["--host", "0.0.0.0"]);
    assert!(log.contains("management listens on 127.0.0.1:") && log.contains(", loopback only"), "{log}");
    let log = ready_log(&["--management-host", "0.0.0.0"]);
    assert!(log.contains("management listens on 0.0.0.0:") && log.contains("reachable from other hosts"), "{log}");
}

#[test]
fn an_oversized_rest_body_is_413_with_a_problem_and_the_node_goes_on() {
    let node = Node::start(&["--rest-max-body-size", "4096"]);
    let url = format!("http://127.0.0.1:{}/v2/process-instances", node.rest_port);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    let big = format!(r#"{{"processDefinitionId":"benchmark","variables":{{"a":"{}"}}}}"#, "x".repeat(8192));
    std::fs::write(&body, &big).unwrap();
    let data = format!("@{}", body.display());
    let json = ["-H", "content-type: application/json"];
    for chunked in [false, true] {
        let mut args = vec!["-X", "POST", json[0], json[1], "--data-binary", &data, &url];
        if chunked {
            // no Content-Length: the body is cut off while it is read
            args.splice(0..0, ["-H", "Transfer-Encoding: chunked"]);
        }
        let (status, head, answer) = curl(&args).expect("an answer");
        assert_eq!(status, 413, "chunked {chunked}: {head}\n{answer}");
        let problem: serde_json::Value = serde_json::from_str(&answer).expect("a JSON problem");
        assert_eq!(problem["title"], "PAYLOAD_TOO_LARGE", "{answer}");
        assert!(problem["detail"].as_str().unwrap().contains("limit of 4096 bytes (rest_max_body_size)"), "{answer}");
    }
    // a body within the limit is read as before (the process is unknown: 404, not 413)
    let small = r#"{"processDefinitionId":"nothing-deployed"}"#;
    let (status, _, answer) = curl(&["-X", "POST", json[0], json[1], "-d", small, &url]).expect("an answer");
    assert_eq!(status, 404, "{answer}");
}

/// Zeebe's gateway (grpc-java) answers a request message over `maxMessageSize` with
/// RESOURCE_EXHAUSTED "gRPC message exceeds maximum size 4194304: <size>" (camunda/camunda#12108);
/// so does Waggle, at any size, without reading more of it than the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_grpc_messages_are_resource_exhausted_as_zeebe_answers() {
    use waggle_protocol::gateway::*;
    let node = Node::start(&[]);
    let mut client = common::grpc_client(&node).await;
    let exceeds = |status: tonic::Status| {
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert!(status.message().starts_with("gRPC message exceeds maximum size 4194304: "), "{}", status.message());
    };
    // 5 MB: between the limit and twice it; 9 MB: past twice it (a call of the fast path and one of tonic's)
    for mb in [5usize, 9] {
        let variables = format!("{{\"a\":\"{}\"}}", "x".repeat(mb << 20));
        let request = CreateProcessInstanceRequest { bpmn_process_id: "benchmark".into(), version: -1, variables, ..Default::default() };
        exceeds(client.create_process_instance(request).await.expect_err("refused"));
        let resource = Resource { name: "big.bpmn".into(), content: vec![b' '; mb << 20] };
        exceeds(
            client
                .deploy_resource(DeployResourceRequest { resources: vec![resource], tenant_id: String::new() })
                .await
                .expect_err("refused"),
        );
    }
    // a message that claims 4 GiB and sends 10 bytes is refused at once, nothing allocated for it
    let mut lying = vec![0u8, 0xff, 0xff, 0xff, 0xff];
    lying.extend_from_slice(&[0; 10]);
    for method in ["CreateProcessInstance", "DeployResource"] {
        let (status, message) = common::raw_h2::raw_call(&node.address(), method, lying.clone().into()).await;
        let message = message.replace("%20", " ");
        assert_eq!(status, "8", "{method}: {message}");
        assert!(message.contains("exceeds maximum size 4194304"), "{method}: {message}");
    }
    // a gzip bomb: 256 MB of variables compressed to ~250 KB; refused after inflating 4 MB
    let mut gzip = client.clone().send_compressed(tonic::codec::CompressionEncoding::Gzip);
    let variables = format!("{{\"a\":\"{}\"}}", "0".repeat(256 << 20));
    let request = CreateProcessInstanceRequest { bpmn_process_id: "benchmark".into(), version: -1, variables, ..Default::default() };
    let status = gzip.create_process_instance(request).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "Decompressed gRPC message exceeds maximum size 4194304");
    common::deploy_one_task(&mut client).await;
    client.create_process_instance(common::one_task_creation()).await.expect("the node goes on");
    assert!(node.log().contains("waggle is ready") && !node.log().contains("panicked"), "{}", node.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpc_message_limit_is_configurable() {
    use waggle_protocol::gateway::*;
    let node = Node::start(&["--max-message-size", "2048"]);
    let mut client = common::grpc_client(&node).await;
    let variables = format!("{{\"a\":\"{}\"}}", "x".repeat(3000));
    let request = CreateProcessInstanceRequest { bpmn_process_id: "benchmark".into(), version: -1, variables, ..Default::default() };
    let status = client.create_process_instance(request).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().starts_with("gRPC message exceeds maximum size 2048: "), "{}", status.message());
}
