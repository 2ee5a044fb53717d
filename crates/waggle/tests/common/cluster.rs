//! A loopback cluster of `waggle broker` processes for the cluster tests: free internal ports,
//! each broker's flags (node id, cluster size, partitions, replication factor, contact points,
//! internal port, and whatever a test adds: TLS files, a backup store), its data folder, the
//! wait for every partition's leader; and what the tests ask of a running cluster (the leaders
//! the brokers agree on, replicas that agree, the real Java client's `ClusterDriver` under load).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{client_models, free_port, peers, repo_root, Node};

/// What a [`Cluster`] is started with.
pub struct ClusterOptions {
    pub brokers: usize,
    pub partitions: u16,
    pub replication_factor: usize,
    /// Flags added to each broker's (by node id; missing: none), e.g. its TLS files.
    pub extra: Vec<Vec<String>>,
    /// Flags added to every broker's, e.g. a backup store.
    pub common: Vec<String>,
    /// The brokers' environment.
    pub envs: Vec<(String, String)>,
    /// The folder the brokers' data folders go in (`broker-<i>`); `None`: each its own
    /// temporary folder.
    pub data_root: Option<PathBuf>,
    /// The brokers' internal ports (e.g. those of the cluster whose folders were restored);
    /// `None`: free ones.
    pub internal: Option<Vec<u16>>,
}

impl ClusterOptions {
    /// `brokers` brokers, `partitions` partitions, each on three brokers (all of them when fewer).
    pub fn new(brokers: usize, partitions: u16) -> ClusterOptions {
        ClusterOptions {
            brokers,
            partitions,
            replication_factor: brokers.min(3),
            extra: Vec::new(),
            common: Vec::new(),
            envs: Vec::new(),
            data_root: None,
            internal: None,
        }
    }
}

/// The flags of broker `node` (its `broker` subcommand first) of a cluster whose internal ports
/// are `internal`.
pub fn broker_args(node: usize, internal: &[u16], partitions: u16, replication_factor: usize) -> Vec<String> {
    let contact_points = internal.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    [
        "broker",
        "--node-id",
        &node.to_string(),
        "--cluster-size",
        &internal.len().to_string(),
        "--partitions",
        &partitions.to_string(),
        "--replication-factor",
        &replication_factor.to_string(),
        "--contact-points",
        &contact_points,
        "--internal-port",
        &internal[node].to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A running cluster: its brokers, by node id.
pub struct Cluster {
    pub nodes: Vec<Node>,
    /// Each broker's internal port.
    pub internal: Vec<u16>,
    pub options: ClusterOptions,
}

impl Cluster {
    /// Starts every broker (each waits until its node answers `/ready`) and waits until every
    /// partition has a leader every broker knows of.
    pub fn start(options: ClusterOptions) -> Cluster {
        let internal = options.internal.clone().unwrap_or_else(|| (0..options.brokers).map(|_| free_port()).collect());
        let mut cluster = Cluster { nodes: Vec::new(), internal, options };
        let envs: Vec<(&str, &str)> = cluster.options.envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        for i in 0..cluster.options.brokers {
            let args = cluster.args(i);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let node = match &cluster.options.data_root {
                Some(root) => Node::start_at(root.join(format!("broker-{i}")), &args, &envs),
                None => Node::start_with_env(&args, &envs),
            };
            cluster.nodes.push(node);
        }
        cluster.leaders(None);
        cluster
    }

    /// Broker `i`'s flags, its `broker` subcommand first.
    pub fn args(&self, i: usize) -> Vec<String> {
        let o = &self.options;
        let mut args = broker_args(i, &self.internal, o.partitions, o.replication_factor);
        args.extend(o.extra.get(i).into_iter().flatten().cloned());
        args.extend(o.common.iter().cloned());
        args
    }

    /// Restarts broker `i` (after a `kill -9`) with its flags.
    pub fn restart(&mut self, i: usize) {
        let args = self.args(i);
        self.nodes[i].restart_with(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// Every broker but `gone`.
    pub fn others(&self, gone: Option<usize>) -> Vec<&Node> {
        self.nodes.iter().enumerate().filter(|&(i, _)| Some(i) != gone).map(|(_, n)| n).collect()
    }

    /// Waits until every broker but `gone` agrees on a leader for every partition, none of them
    /// `gone`; returns them by partition.
    pub fn leaders(&self, gone: Option<usize>) -> Vec<usize> {
        leaders(&self.others(gone), self.options.partitions, gone)
    }
}

/// `GET path` on `node`, as JSON (asserting 200).
pub fn get_json(node: &Node, path: &str) -> serde_json::Value {
    let (status, body) = node.get(path);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// The leader of `partition` as broker `node` knows it.
pub fn leader_seen_by(node: &Node, partition: u16) -> Option<usize> {
    let partitions = get_json(node, "/v1/partitions");
    let item = partitions["items"].as_array()?.iter().find(|p| p["partitionId"] == partition)?.clone();
    item["leader"].as_u64().map(|l| l as usize)
}

/// Every partition's leader and term as broker `node` knows them.
pub fn roles(node: &Node, partitions: u16) -> Vec<(Option<u64>, u64)> {
    let items = get_json(node, "/v1/partitions");
    (1..=partitions)
        .map(|p| {
            let item = items["items"].as_array().and_then(|items| items.iter().find(|i| i["partitionId"] == p).cloned());
            item.map_or((None, 0), |i| (i["leader"].as_u64(), i["term"].as_u64().unwrap_or(0)))
        })
        .collect()
}

/// Waits (30 s at most) until `nodes` agree on what `view` reads of each and every partition
/// has a leader, none of them `gone`; returns it.
fn agreed<T: PartialEq + std::fmt::Debug>(
    nodes: &[&Node],
    gone: Option<usize>,
    view: impl Fn(&Node) -> Vec<T>,
    leader: impl Fn(&T) -> Option<usize>,
) -> Vec<T> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut seen: Vec<Vec<T>> = nodes.iter().map(|n| view(n)).collect();
        if seen.iter().all(|s| s == &seen[0] && s.iter().all(|x| leader(x).is_some() && leader(x) != gone)) {
            return seen.swap_remove(0);
        }
        assert!(Instant::now() < deadline, "no agreed leaders: {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `nodes` agree on a leader for every partition, none of them `gone`; returns them.
pub fn leaders(nodes: &[&Node], partitions: u16, gone: Option<usize>) -> Vec<usize> {
    let view = |n: &Node| (1..=partitions).map(|p| leader_seen_by(n, p)).collect();
    agreed(nodes, gone, view, |l: &Option<usize>| *l).into_iter().map(|l| l.expect("a leader")).collect()
}

/// As [`leaders`], with each partition's term (the same on every broker).
pub fn leaders_and_terms(nodes: &[&Node], partitions: u16, gone: Option<usize>) -> Vec<(Option<u64>, u64)> {
    agreed(nodes, gone, |n| roles(n, partitions), |(l, _)| l.map(|l| l as usize))
}

/// Waits (60 s at most) until every broker's replica of `partition` has the same applied index
/// and state digest; returns it.
pub fn digests_agree(nodes: &[&Node], partition: u16) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let digests: Vec<serde_json::Value> = nodes.iter().map(|n| get_json(n, &format!("/v1/partitions/{partition}/digest"))).collect();
        if digests.iter().all(|d| d == &digests[0]) {
            return digests[0].clone();
        }
        assert!(Instant::now() < deadline, "partition {partition}'s replicas differ: {digests:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A Java driver's process whose standard output and error go to files in a folder: pipes that
/// nobody reads until the exit fill up (64 KB), and a client that logs its retries while the
/// brokers are down then blocks for good.
pub struct JavaDriverProcess {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl JavaDriverProcess {
    /// Spawns `command` (a `java` command line) with its output in `dir`/`name`.stdout and .stderr.
    pub fn spawn(command: &mut Command, dir: &Path, name: &str) -> JavaDriverProcess {
        let (stdout, stderr) = (dir.join(format!("{name}.stdout")), dir.join(format!("{name}.stderr")));
        let child = command
            .stdout(Stdio::from(std::fs::File::create(&stdout).expect("the driver's stdout file")))
            .stderr(Stdio::from(std::fs::File::create(&stderr).expect("the driver's stderr file")))
            .spawn()
            .expect("java");
        JavaDriverProcess { child, stdout, stderr }
    }

    /// The exit status, if it has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("the driver's state")
    }

    /// Its standard output, and the last 4000 bytes of its standard error.
    pub fn output(&self) -> (String, String) {
        let stdout = std::fs::read_to_string(&self.stdout).unwrap_or_default();
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let mut from = stderr.len().saturating_sub(4000);
        while !stderr.is_char_boundary(from) {
            from += 1;
        }
        (stdout, stderr[from..].to_string())
    }

    /// Waits `limit` at most for the exit and asserts success; otherwise kills it and panics with
    /// its output and `logs`.
    pub fn wait_success(&mut self, limit: Duration, logs: impl FnOnce() -> String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.try_wait() {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if status.is_some_and(|s| s.success()) {
            return;
        }
        let (stdout, stderr) = self.output();
        let what = status.map_or_else(|| format!("did not finish in {limit:?}"), |s| format!("exited {s}"));
        panic!("the driver {what}\nstdout:\n{stdout}\nstderr:\n{stderr}\nlogs:\n{}", logs());
    }
}

/// The real Java client's `tests/clients/ClusterDriver.java` (deployment, creations with and
/// without result, message publications, streaming workers) against a gateway for 20 s.
pub struct ClusterDriver {
    process: JavaDriverProcess,
    report: PathBuf,
}

impl ClusterDriver {
    /// Starts the driver against `address` for 20 s; its report goes to `report`.
    pub fn start(address: &str, report: &Path) -> ClusterDriver {
        ClusterDriver::start_for(address, report, 20)
    }

    /// Starts the driver against `address` for `seconds` of load; its report goes to `report`,
    /// its output beside it.
    pub fn start_for(address: &str, report: &Path, seconds: u64) -> ClusterDriver {
        let lib = peers().join("java-client/lib");
        assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
        let mut command = Command::new("java");
        command
            .arg("-cp")
            .arg(format!("{}/*", lib.display()))
            .arg(repo_root().join("tests/clients/ClusterDriver.java"))
            .args(["--address", address, "--seconds", &seconds.to_string(), "--report"])
            .arg(report)
            .arg("--models")
            .arg(client_models());
        let dir = report.parent().expect("the report's folder");
        let process = JavaDriverProcess::spawn(&mut command, dir, "cluster-driver");
        ClusterDriver { process, report: report.to_path_buf() }
    }

    /// Waits (240 s at most) for the driver to finish, asserts that it succeeded (its output
    /// and `logs` shown if not) with enough load, and returns its report.
    pub fn finish(mut self, logs: impl FnOnce() -> String) -> serde_json::Value {
        self.process.wait_success(Duration::from_secs(240), logs);
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&self.report).expect("the report")).expect("JSON");
        eprintln!("driver: {report}");
        assert!(report["created"].as_u64() > Some(100) && report["published"].as_u64() > Some(10), "too little load: {report}");
        report
    }
}

/// The last 3000 bytes of each node's log, headed by its address.
pub fn log_tails(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| {
            let l = n.log();
            let mut from = l.len().saturating_sub(3000);
            while !l.is_char_boundary(from) {
                from += 1;
            }
            format!("--- {}\n{}\n", n.address(), &l[from..])
        })
        .collect()
}

/// The flags of broker `node`, one added to a running cluster later (Zeebe's scale-up): beyond
/// the initial brokers on `internal`, with their contact points and cluster size, and an internal
/// port of its own, `port`.
pub fn added_broker_args(node: usize, internal: &[u16], port: u16, partitions: u16, replication_factor: usize) -> Vec<String> {
    let mut args = broker_args(0, internal, partitions, replication_factor);
    args[2] = node.to_string();
    let last = args.len() - 1;
    args[last] = port.to_string();
    args
}

/// `method path` with a JSON `body` on `node`'s management port (20 s at most): the status and
/// the JSON answer (a string when it is not JSON).
pub fn management_request(node: &Node, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let (status, text) = super::http_json_within(node.management_port, method, path, body, Duration::from_secs(20))
        .unwrap_or_else(|| panic!("{method} {path} failed"));
    (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
}

/// Each of `partitions` partitions' replicas (broker ids, highest priority first) in a list of
/// Zeebe `BrokerState`s (`expectedTopology`) or a `GET /actuator/cluster` body's `brokers`.
pub fn replica_layout(brokers: &serde_json::Value, partitions: u16) -> Vec<Vec<u64>> {
    (1..=u64::from(partitions))
        .map(|p| {
            let mut replicas: Vec<(u64, u64)> = Vec::new();
            for b in brokers.as_array().expect("brokers") {
                for part in b["partitions"].as_array().expect("partitions") {
                    if part["id"] == p {
                        replicas.push((part["priority"].as_u64().unwrap_or(0), b["id"].as_u64().expect("an id")));
                    }
                }
            }
            replicas.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            replicas.into_iter().map(|(_, b)| b).collect()
        })
        .collect()
}

/// Waits (180 s at most) until `node`'s topology has no pending change and its last change,
/// COMPLETED, is `change`; returns the `GET /actuator/cluster` body.
pub fn wait_change_completed(node: &Node, change: u64, what: &str, logs: impl Fn() -> String) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let cluster = get_json(node, "/actuator/cluster");
        if cluster["pendingChange"].is_null() && cluster["lastChange"]["id"] == change {
            assert_eq!(cluster["lastChange"]["status"], "COMPLETED", "{cluster}");
            return cluster;
        }
        assert!(Instant::now() < deadline, "{what} not completed: {cluster}\nlogs:\n{}", logs());
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The partitions broker `node` runs a replica of.
pub fn held_partitions(node: &Node) -> Vec<u64> {
    get_json(node, "/v1/partitions")["items"].as_array().expect("items").iter().filter_map(|p| p["partitionId"].as_u64()).collect()
}

/// A standalone gateway (`waggle gateway`) in front of a cluster: its one contact point the
/// broker whose internal port is `contact_port` (it learns the others from the gossip), a gossip
/// port of its own; started and ready.
pub fn standalone_gateway(contact_port: u16) -> Node {
    let gossip_port = free_port().to_string();
    let contact = format!("127.0.0.1:{contact_port}");
    Node::start(&["gateway", "--contact-points", &contact, "--internal-port", &gossip_port])
}

/// The topology the real Java client reads through `address` (`newTopologyRequest()`,
/// `tests/clients/TopologyDriver.java`): its lines.
pub fn java_topology(address: &str) -> Vec<String> {
    let lib = peers().join("java-client/lib");
    let output = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(repo_root().join("tests/clients/TopologyDriver.java"))
        .args(["--address", address])
        .output()
        .expect("java");
    assert!(output.status.success(), "TopologyDriver failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect()
}
