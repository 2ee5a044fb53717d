//! Mutual TLS between brokers (issue 29): three `waggle broker` processes on loopback whose
//! internal ports take only peers with a certificate of the cluster's CA
//! (`--network-security-*`). A fourth process claiming broker 1's place with a certificate of
//! another CA (while trusting the cluster's CA), and a fifth speaking plaintext, get nothing
//! through: the partitions' leaders and terms stay as they were, and the brokers log the
//! refusals. Then the real Java client drives the cluster (deployment, creations with result,
//! streaming workers completing jobs, publications) through a leader's `kill -9` and restart
//! (`tests/clients/ClusterDriver.java`, as `tests/cluster.rs` does in plaintext), and every
//! partition's replicas end in the same state. A broker whose TLS files are missing refuses to
//! start, naming the file.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{client_models, free_port, peers, repo_root, Node};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};

const BROKERS: usize = 3;
const PARTITIONS: u16 = 3;

/// A CA that writes node certificates (server and client use) into a folder.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    file: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let file = dir.join(format!("{name}.pem"));
        std::fs::write(&file, cert.pem()).unwrap();
        Ca { cert, key, file }
    }

    /// Writes `name`'s certificate and key; returns the flags for them, trusting `trusted`.
    fn node_flags(&self, dir: &Path, name: &str, trusted: &Path) -> Vec<String> {
        let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let (chain, key_file) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        std::fs::write(&chain, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        let path = |p: &Path| p.display().to_string();
        vec![
            "--network-security-enabled".into(),
            "true".into(),
            "--network-security-certificate-chain-path".into(),
            path(&chain),
            "--network-security-private-key-path".into(),
            path(&key_file),
            "--network-security-ca-certificate-path".into(),
            path(trusted),
        ]
    }
}

fn json(node: &Node, path: &str) -> serde_json::Value {
    let (status, body) = node.get(path);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// Every partition's leader and term as broker `node` knows them.
fn roles(node: &Node) -> Vec<(Option<u64>, u64)> {
    let partitions = json(node, "/v1/partitions");
    (1..=PARTITIONS)
        .map(|p| {
            let item = partitions["items"].as_array().and_then(|items| items.iter().find(|i| i["partitionId"] == p).cloned());
            item.map_or((None, 0), |i| (i["leader"].as_u64(), i["term"].as_u64().unwrap_or(0)))
        })
        .collect()
}

/// Waits until every broker agrees on a leader for every partition, none of them `gone`;
/// returns the leaders and terms.
fn agreed(nodes: &[&Node], gone: Option<usize>) -> Vec<(Option<u64>, u64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<_> = nodes.iter().map(|n| roles(n)).collect();
        if seen.iter().all(|s| s == &seen[0] && s.iter().all(|(l, _)| l.is_some() && l.map(|l| l as usize) != gone)) {
            return seen[0].clone();
        }
        assert!(Instant::now() < deadline, "no agreed leaders: {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until every broker's replica of `partition` has the same applied index and state digest.
fn digests_agree(nodes: &[&Node], partition: u16) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let digests: Vec<serde_json::Value> = nodes.iter().map(|n| json(n, &format!("/v1/partitions/{partition}/digest"))).collect();
        if digests.iter().all(|d| d == &digests[0]) {
            return digests[0].clone();
        }
        assert!(Instant::now() < deadline, "partition {partition}'s replicas differ: {digests:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The flags of broker `node` of a cluster whose internal ports are `internal`.
fn broker_args(node: usize, internal: &[String], tls: &[String]) -> Vec<String> {
    let contact_points = internal.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    let mut args: Vec<String> = [
        "broker",
        "--node-id",
        &node.to_string(),
        "--cluster-size",
        &BROKERS.to_string(),
        "--partitions",
        &PARTITIONS.to_string(),
        "--replication-factor",
        "3",
        "--contact-points",
        &contact_points,
        "--internal-port",
        &internal[node],
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(tls.iter().cloned());
    args
}

/// A process started in broker 1's place (its own internal port in the contact points), which
/// the cluster must not hear; its log goes to `log`.
fn impostor(dir: &Path, name: &str, internal: &[String], tls: &[String]) -> (Child, PathBuf) {
    let mut ports = internal.to_vec();
    ports[1] = free_port().to_string();
    let log = dir.join(format!("{name}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_waggle"))
        .args(broker_args(1, &ports, tls))
        .arg("--data-dir")
        .arg(dir.join(name))
        .args(["--host", "127.0.0.1", "--port", &free_port().to_string(), "--management-port", &free_port().to_string()])
        .args(["--rest-port", &free_port().to_string()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn waggle");
    (child, log)
}

fn wait_for_log(log: &Path, text: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let content = std::fs::read_to_string(log).unwrap_or_default();
        if content.contains(text) {
            return content;
        }
        assert!(Instant::now() < deadline, "{} never said {text:?}:\n{content}", log.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_cluster_over_mutual_tls_refuses_strangers_and_survives_a_leaders_kill_9() {
    let lib = peers().join("java-client/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let certs = tempfile::tempdir().unwrap();
    let ca = Ca::new(certs.path(), "cluster-ca");
    let other = Ca::new(certs.path(), "other-ca");
    let tls: Vec<Vec<String>> = (0..BROKERS).map(|i| ca.node_flags(certs.path(), &format!("broker-{i}"), &ca.file)).collect();
    let internal: Vec<String> = (0..BROKERS).map(|_| free_port().to_string()).collect();
    let args = |i: usize| broker_args(i, &internal, &tls[i]);
    let mut nodes: Vec<Node> = (0..BROKERS)
        .map(|i| {
            let a = args(i);
            Node::start(&a.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    let before = agreed(&nodes.iter().collect::<Vec<_>>(), None);
    eprintln!("leaders and terms of partitions 1-{PARTITIONS}: {before:?}");
    assert!(nodes[0].log().contains("internal port: mutual TLS"), "{}", nodes[0].log());

    // an impostor with another CA's certificate (trusting the cluster's CA), and one in plaintext
    let rogue_tls = other.node_flags(certs.path(), "rogue", &ca.file);
    let (mut rogue, rogue_log) = impostor(certs.path(), "rogue", &internal, &rogue_tls);
    let (mut plain, plain_log) = impostor(certs.path(), "plain", &internal, &[]);
    wait_for_log(&rogue_log, "waggle is ready", Duration::from_secs(60));
    wait_for_log(&plain_log, "waggle is ready", Duration::from_secs(60));
    // they campaign and send as broker 1 for a while (election time-outs are about a second)
    std::thread::sleep(Duration::from_secs(8));
    let during = agreed(&nodes.iter().collect::<Vec<_>>(), None);
    assert_eq!(during, before, "the impostors changed a partition's leader or term");
    for node in [&nodes[0], &nodes[2]] {
        let log = node.log();
        assert!(log.contains("refused a peer's connection"), "no refusal logged:\n{log}");
        assert!(log.contains("UnknownIssuer"), "another CA's certificate not named as the reason:\n{log}");
        assert!(log.contains("InvalidContentType") || log.contains("corrupt message"), "plaintext not named as the reason:\n{log}");
    }
    for child in [&mut rogue, &mut plain] {
        child.kill().unwrap();
        child.wait().unwrap();
    }

    // the real Java client under a leader's kill -9, over the cluster's mutual TLS
    let victim = before[0].0.expect("a leader") as usize;
    let gateway = (victim + 1) % BROKERS;
    let report = certs.path().join("cluster-report.json");
    let mut driver = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(repo_root().join("tests/clients/ClusterDriver.java"))
        .args(["--address", &nodes[gateway].address(), "--seconds", "20", "--report"])
        .arg(&report)
        .arg("--models")
        .arg(client_models())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java");
    std::thread::sleep(Duration::from_secs(10));
    nodes[victim].kill9();
    let survivors: Vec<&Node> = nodes.iter().enumerate().filter(|&(i, _)| i != victim).map(|(_, n)| n).collect();
    let after = agreed(&survivors, Some(victim));
    eprintln!("broker {victim} killed; leaders and terms now {after:?}");
    std::thread::sleep(Duration::from_secs(2));
    nodes[victim].restart_with(&args(victim).iter().map(String::as_str).collect::<Vec<_>>());

    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(status) = driver.try_wait().expect("the driver's state") {
            break status;
        }
        assert!(Instant::now() < deadline, "the driver did not finish");
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = driver.wait_with_output().expect("the driver's output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let logs: String = nodes
        .iter()
        .map(|n| {
            let l = n.log();
            format!("--- {}\n{}\n", n.address(), &l[l.len().saturating_sub(3000)..])
        })
        .collect();
    assert!(status.success(), "the driver exited {status}\nstderr:\n{}\nlogs:\n{logs}", &stderr[stderr.len().saturating_sub(4000)..]);
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).expect("JSON");
    eprintln!("driver: {report}");
    assert!(report["created"].as_u64() > Some(100) && report["published"].as_u64() > Some(10), "too little load: {report}");
    for partition in 1..=PARTITIONS {
        let digest = digests_agree(&nodes.iter().collect::<Vec<_>>(), partition);
        eprintln!("partition {partition}: {digest}");
    }
}

#[test]
fn a_broker_whose_tls_files_are_missing_refuses_to_start_naming_them() {
    let certs = tempfile::tempdir().unwrap();
    let ca = Ca::new(certs.path(), "ca");
    let mut tls = ca.node_flags(certs.path(), "b", &ca.file);
    let missing = certs.path().join("missing-key.pem").display().to_string();
    tls[5] = missing.clone();
    let internal = free_port().to_string();
    let mut args: Vec<String> = ["broker", "--internal-port", &internal, "--data-dir"].iter().map(|s| s.to_string()).collect();
    args.push(certs.path().join("data").display().to_string());
    args.extend(["--port".into(), free_port().to_string(), "--management-port".into(), free_port().to_string()]);
    args.extend(["--rest-port".into(), free_port().to_string()]);
    args.extend(tls.iter().cloned());
    let output = common::run_with_timeout(Command::new(env!("CARGO_BIN_EXE_waggle")).args(&args), Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started without its key: {stderr}");
    assert!(stderr.contains("mutual TLS on the internal port") && stderr.contains(&missing), "{stderr}");

    // enabled without the CA file: refused before anything is read
    let no_ca: Vec<String> = args.iter().take(args.len() - 2).cloned().collect();
    let output = common::run_with_timeout(Command::new(env!("CARGO_BIN_EXE_waggle")).args(&no_ca), Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("--network-security-ca-certificate-path is missing"), "{stderr}");
}
