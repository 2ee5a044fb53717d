//! Shared harness of the integration tests: starts the real `waggle` binary on free loopback
//! ports with its own data directory, waits until it is ready, kills it (`kill -9`) and restarts
//! it on the same data; runs the real Zeebe clients installed by `scripts/install-clients.sh`.
#![allow(dead_code)]

pub mod certs;
pub mod cluster;
pub mod fault_proxy;
pub mod raw_h2;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running `waggle` standalone node.
pub struct Node {
    child: Option<Child>,
    pub grpc_port: u16,
    pub management_port: u16,
    /// The REST API's port (not a standalone gateway's: it has none).
    pub rest_port: u16,
    pub data_dir: PathBuf,
    extra_args: Vec<String>,
    envs: Vec<(String, String)>,
    _temp: Option<tempfile::TempDir>,
}

/// A loopback port nothing listens on, below Linux's ephemeral range (the bench's picker: a
/// port from `bind(0)` could be taken by an outgoing connection before the node binds it; a test
/// once failed with "Address already in use").
pub fn free_port() -> u16 {
    waggle_bench::server::free_port().expect("a free loopback port")
}

impl Node {
    /// Starts a node with a fresh data directory and waits until `/ready` answers 200.
    pub fn start(extra_args: &[&str]) -> Node {
        Node::start_with_env(extra_args, &[])
    }

    /// As [`Node::start`], with extra environment variables for the process.
    pub fn start_with_env(extra_args: &[&str], envs: &[(&str, &str)]) -> Node {
        let temp = tempfile::tempdir().expect("tempdir");
        let mut node = Node {
            child: None,
            grpc_port: free_port(),
            management_port: free_port(),
            rest_port: free_port(),
            data_dir: temp.path().join("data"),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            envs: envs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            _temp: Some(temp),
        };
        node.spawn();
        node
    }

    /// As [`Node::start_with_env`], on `data_dir` (made by the caller, e.g. on a file system of its
    /// own; the node's log goes beside it).
    pub fn start_at(data_dir: PathBuf, extra_args: &[&str], envs: &[(&str, &str)]) -> Node {
        let mut node = Node {
            child: None,
            grpc_port: free_port(),
            management_port: free_port(),
            rest_port: free_port(),
            data_dir,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            envs: envs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            _temp: None,
        };
        node.spawn();
        node
    }

    /// The node's command: a leading subcommand of its arguments (`broker`, `standalone`,
    /// `gateway`), its data directory (not a gateway's) and ports, the rest of its arguments, its environment.
    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_waggle"));
        let rest = match self.extra_args.first().map(String::as_str) {
            Some(sub @ ("broker" | "standalone")) => {
                command.arg(sub).arg("--data-dir").arg(&self.data_dir).args(["--rest-port", &self.rest_port.to_string()]);
                &self.extra_args[1..]
            }
            // a standalone gateway has no data (its log still goes beside `data_dir`)
            Some("gateway") => {
                command.arg("gateway");
                &self.extra_args[1..]
            }
            _ => {
                command.arg("--data-dir").arg(&self.data_dir).args(["--rest-port", &self.rest_port.to_string()]);
                &self.extra_args[..]
            }
        };
        command
            .args(["--host", "127.0.0.1", "--port", &self.grpc_port.to_string()])
            .args(["--management-port", &self.management_port.to_string()])
            .args(rest)
            .envs(self.envs.iter().map(|(k, v)| (k, v)));
        command
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.data_dir.with_extension("log")).expect("log file");
        let child = self.command().stdout(Stdio::null()).stderr(log).spawn().expect("spawn waggle");
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(60));
    }

    /// Restarts the node (after `kill -9`) with `args` as its arguments from now on.
    pub fn restart_with(&mut self, args: &[&str]) {
        self.kill9();
        self.extra_args = args.iter().map(|s| s.to_string()).collect();
        self.spawn();
    }

    /// Stops the node (`kill -9`) and runs the binary on its data directory and ports with `args`
    /// in place of its own, until it exits (within 60 s): a start expected to be refused.
    pub fn run_instead(&mut self, args: &[&str]) -> Output {
        self.kill9();
        let mut node_args = args.iter().map(|s| s.to_string()).collect();
        std::mem::swap(&mut self.extra_args, &mut node_args);
        let mut command = self.command();
        self.extra_args = node_args;
        run_with_timeout(&mut command, Duration::from_secs(60))
    }

    /// Waits until `/ready` answers 200 or, on a node with TLS on (its management port speaks
    /// only TLS), until its log says it is ready.
    fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let tls = self.extra_args.iter().any(|a| a == "--security-enabled");
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().expect("try_wait")) {
                panic!("waggle exited before it was ready ({status}); log:\n{}", self.log());
            }
            let ready = if tls {
                self.log().contains("waggle is ready")
            } else {
                matches!(http_get(self.management_port, "/ready"), Some((200, _)))
            };
            if ready {
                return;
            }
            assert!(Instant::now() < deadline, "waggle not ready after {timeout:?}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("log")).unwrap_or_default()
    }

    /// The node's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.grpc_port)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    pub fn management_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.management_port)
    }

    /// `kill -9`: no shutdown code runs.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL");
            child.wait().expect("wait");
        }
    }

    /// Starts the binary again on the same data directory and ports.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "no exit 20 s after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.management_port, path).unwrap_or_else(|| panic!("GET {path} failed"))
    }

    pub fn post(&self, path: &str) -> (u16, String) {
        http_request(self.management_port, "POST", path).unwrap_or_else(|| panic!("POST {path} failed"))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Every file under `dir` with a digest of its contents, in path order: equal before and after
/// means nothing was written, created or removed.
pub fn tree_digest(dir: &std::path::Path) -> Vec<(PathBuf, u64, u64)> {
    use std::hash::{Hash, Hasher};
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("reading {}: {e}", d.display())) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                files.push((path.clone(), 0, 0));
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut hasher);
                files.push((path, bytes.len() as u64, hasher.finish()));
            }
        }
    }
    files.sort();
    files
}

/// A minimal HTTP/1.0 GET on loopback: (status, body).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_request(port, "GET", path)
}

/// A minimal HTTP/1.0 request without a body on loopback: (status, body).
pub fn http_request(port: u16, method: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// An HTTP/1.0 request with a JSON body on loopback: (status, body).
pub fn http_json(port: u16, method: &str, path: &str, json: &str) -> Option<(u16, String)> {
    http_json_within(port, method, path, json, Duration::from_secs(10))
}

/// As [`http_json`], waiting up to `timeout` for the answer.
pub fn http_json_within(port: u16, method: &str, path: &str, json: &str, timeout: Duration) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
        json.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// Deploys the workloads' `one_task.bpmn` (process `benchmark`, job type `benchmark-task`).
pub async fn deploy_one_task(client: &mut waggle_protocol::gateway::gateway_client::GatewayClient<tonic::transport::Channel>) {
    use waggle_protocol::gateway::{DeployResourceRequest, Resource};
    let content = std::fs::read(client_models().join("one_task.bpmn")).expect("one_task.bpmn");
    client
        .deploy_resource(DeployResourceRequest {
            resources: vec![Resource { name: "one_task.bpmn".into(), content }],
            tenant_id: String::new(),
        })
        .await
        .expect("deploy");
}

/// A creation of `one_task.bpmn`'s latest version, without variables.
pub fn one_task_creation() -> waggle_protocol::gateway::CreateProcessInstanceRequest {
    waggle_protocol::gateway::CreateProcessInstanceRequest { bpmn_process_id: "benchmark".into(), version: -1, ..Default::default() }
}

/// Long-polls (5 s) for at most `max_jobs` jobs of `one_task.bpmn`'s type, locked for a minute.
pub fn one_task_activation(max_jobs: i32) -> waggle_protocol::gateway::ActivateJobsRequest {
    waggle_protocol::gateway::ActivateJobsRequest {
        r#type: "benchmark-task".into(),
        worker: "cli-test".into(),
        timeout: 60_000,
        max_jobs_to_activate: max_jobs,
        request_timeout: 5_000,
        ..Default::default()
    }
}

/// A gRPC client of the node's gateway (the connection retried for up to 20 s).
pub async fn grpc_client(node: &Node) -> waggle_protocol::gateway::gateway_client::GatewayClient<tonic::transport::Channel> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match waggle_protocol::gateway::gateway_client::GatewayClient::connect(node.endpoint()).await {
            Ok(c) => return c,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("connect: {e}"),
        }
    }
}

/// Lets load build up until `built_up` holds (at most 20 s; `progress` says how far it got),
/// then kills the node with `kill -9` while requests are in flight and stops the load's tasks.
pub async fn kill9_under_load(
    node: &mut Node,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    built_up: impl Fn() -> bool,
    progress: impl Fn() -> String,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !built_up() {
        assert!(Instant::now() < deadline, "load did not build up: {}", progress());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.kill9();
    for t in tasks {
        t.abort();
    }
}

/// Where `scripts/install-clients.sh` put the real clients.
pub fn peers() -> PathBuf {
    match std::env::var_os("WAGGLE_PEERS") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/waggle-peers"),
    }
}

pub fn repo_root() -> PathBuf {
    manifest_dir().join("../..").canonicalize().expect("repo root")
}

pub fn client_models() -> PathBuf {
    repo_root().join("tests/clients/models")
}

/// Runs a command to completion, killing it after `timeout`.
pub fn run_with_timeout(command: &mut Command, timeout: Duration) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || read_all(stdout));
    let err = std::thread::spawn(move || read_all(stderr));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = out.join().expect("stdout reader");
            let stderr = err.join().expect("stderr reader");
            panic!(
                "{command:?} timed out after {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: out.join().expect("stdout reader"), stderr: err.join().expect("stderr reader") }
}

/// Runs a client driver (a program that prints `OK <step>` per step done) against `node` and
/// returns the steps it did; fails, with the driver's output and the node's log, if it exits
/// unsuccessfully or runs longer than `timeout`.
pub fn run_driver(command: &mut Command, node: &Node, timeout: Duration) -> Vec<String> {
    let output = run_with_timeout(command, timeout);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{command:?} exited {}\nstdout:\n{stdout}\nstderr:\n{}\nwaggle log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        node.log()
    );
    stdout.lines().filter_map(|l| l.strip_prefix("OK ")).map(str::to_string).collect()
}

/// [`run_driver`], checking that the driver did exactly `steps`, in order.
pub fn drive_steps(command: &mut Command, node: &Node, timeout: Duration, steps: &[&str]) {
    let done = run_driver(command, node, timeout);
    assert_eq!(done, steps, "{command:?}: steps done\nwaggle log:\n{}", node.log());
}

fn read_all(mut r: impl Read) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = r.read_to_end(&mut buf);
    buf
}

/// Reads a key that clients print either as a JSON number or as a decimal string.
pub fn json_key(v: &serde_json::Value) -> i64 {
    match v {
        serde_json::Value::Number(n) => n.as_i64().expect("integer key"),
        serde_json::Value::String(s) => s.parse().unwrap_or_else(|_| panic!("key '{s}' is not a number")),
        other => panic!("expected a key, got {other}"),
    }
}

/// This crate's directory, read at run time: `cargo test` sets `CARGO_MANIFEST_DIR` for the test
/// process. The compile-time value can be stale when clones at different paths share one
/// `CARGO_TARGET_DIR` (cargo reuses the test binary across them).
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
