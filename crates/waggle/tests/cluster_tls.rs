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

use common::cluster::{broker_args, digests_agree, leaders_and_terms, log_tails, Cluster, ClusterDriver, ClusterOptions};
use common::free_port;
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

/// The flags of broker `node` of a cluster whose internal ports are `internal`, with `tls`.
fn tls_broker_args(node: usize, internal: &[u16], tls: &[String]) -> Vec<String> {
    let mut args = broker_args(node, internal, PARTITIONS, 3);
    args.extend(tls.iter().cloned());
    args
}

/// A process started in broker 1's place (its own internal port in the contact points), which
/// the cluster must not hear; its log goes to `log`.
fn impostor(dir: &Path, name: &str, internal: &[u16], tls: &[String]) -> (Child, PathBuf) {
    let mut ports = internal.to_vec();
    ports[1] = free_port();
    let log = dir.join(format!("{name}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_waggle"))
        .args(tls_broker_args(1, &ports, tls))
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
    let certs = tempfile::tempdir().unwrap();
    let ca = Ca::new(certs.path(), "cluster-ca");
    let other = Ca::new(certs.path(), "other-ca");
    let mut options = ClusterOptions::new(BROKERS, PARTITIONS);
    options.extra = (0..BROKERS).map(|i| ca.node_flags(certs.path(), &format!("broker-{i}"), &ca.file)).collect();
    let mut cluster = Cluster::start(options);
    let before = leaders_and_terms(&cluster.others(None), PARTITIONS, None);
    eprintln!("leaders and terms of partitions 1-{PARTITIONS}: {before:?}");
    assert!(cluster.nodes[0].log().contains("internal port: mutual TLS"), "{}", cluster.nodes[0].log());

    // an impostor with another CA's certificate (trusting the cluster's CA), and one in plaintext
    let rogue_tls = other.node_flags(certs.path(), "rogue", &ca.file);
    let (mut rogue, rogue_log) = impostor(certs.path(), "rogue", &cluster.internal, &rogue_tls);
    let (mut plain, plain_log) = impostor(certs.path(), "plain", &cluster.internal, &[]);
    wait_for_log(&rogue_log, "waggle is ready", Duration::from_secs(60));
    wait_for_log(&plain_log, "waggle is ready", Duration::from_secs(60));
    // they campaign and send as broker 1 for a while (election time-outs are about a second)
    std::thread::sleep(Duration::from_secs(8));
    let during = leaders_and_terms(&cluster.others(None), PARTITIONS, None);
    assert_eq!(during, before, "the impostors changed a partition's leader or term");
    for node in [&cluster.nodes[0], &cluster.nodes[2]] {
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
    let driver = ClusterDriver::start(&cluster.nodes[gateway].address(), &certs.path().join("cluster-report.json"));
    std::thread::sleep(Duration::from_secs(10));
    cluster.nodes[victim].kill9();
    let after = leaders_and_terms(&cluster.others(Some(victim)), PARTITIONS, Some(victim));
    eprintln!("broker {victim} killed; leaders and terms now {after:?}");
    std::thread::sleep(Duration::from_secs(2));
    cluster.restart(victim);
    driver.finish(|| log_tails(&cluster.nodes));
    for partition in 1..=PARTITIONS {
        let digest = digests_agree(&cluster.others(None), partition);
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
