//! The Raft network over mutual TLS on loopback (issue 29): two nodes whose certificates one CA
//! signed exchange messages; a node with a certificate of another CA, and a node speaking
//! plaintext, get nothing through; files that are missing or do not fit are refused by name.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
use waggle_replication::net::RaftNetwork;
use waggle_replication::tls::{MutualTls, MutualTlsFiles};
use waggle_replication::{Message, MessageType, Transport};

/// A CA writing node certificates (server and client use) into `dir`.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        Ca { cert, key }
    }

    fn node(&self, dir: &Path, ca_file: &str, node: &str) -> MutualTlsFiles {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, node);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let files = MutualTlsFiles {
            certificate_chain_path: dir.join(format!("{node}.pem")),
            private_key_path: dir.join(format!("{node}.key")),
            ca_certificate_path: dir.join(ca_file),
        };
        std::fs::write(&files.certificate_chain_path, cert.pem()).unwrap();
        std::fs::write(&files.private_key_path, key.serialize_pem()).unwrap();
        files
    }
}

fn heartbeat(from: u64, to: u64) -> Message {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgHeartbeat);
    m.from = from;
    m.to = to;
    m
}

/// Whether a message from `from` arrives in `inbox` while `send` is called every 50 ms, within `within`.
fn arrives(inbox: &Receiver<Message>, from: u64, within: Duration, mut send: impl FnMut()) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        send();
        if let Ok(m) = inbox.recv_timeout(Duration::from_millis(50)) {
            if m.from == from {
                return true;
            }
        }
    }
    false
}

#[test]
fn only_peers_with_a_certificate_of_the_ca_get_messages_through() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "cluster-ca");
    let other = Ca::new(dir.path(), "other-ca");
    let load = |files: &MutualTlsFiles| Some(Arc::new(MutualTls::load(files).expect("loads")));
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let bind = |id, tls| runtime.block_on(RaftNetwork::bind_secured(id, any, tls, |r| r)).unwrap();

    let one = bind(1, load(&ca.node(dir.path(), "cluster-ca.pem", "one")));
    let two = bind(2, load(&ca.node(dir.path(), "cluster-ca.pem", "two")));
    // trusts the cluster's CA, but its own certificate is another CA's
    let rogue = bind(3, load(&other.node(dir.path(), "cluster-ca.pem", "rogue")));
    let plain = bind(4, None);
    for (network, id) in [(&two, 2), (&rogue, 3), (&plain, 4)] {
        network.add_peer(1, one.local_addr());
        one.add_peer(id, network.local_addr());
    }
    let (_, inbox) = one.register(7);
    let (mut from_two, _two_inbox) = two.register(7);
    let (mut from_rogue, _rogue_inbox) = rogue.register(7);
    let (mut from_plain, _plain_inbox) = plain.register(7);
    let (mut from_one, two_inbox_of_one) = (one.register(8).0, two.register(8).1);

    assert!(arrives(&inbox, 2, Duration::from_secs(10), || from_two.send(vec![heartbeat(2, 1)])), "a peer of the CA is heard");
    assert!(arrives(&two_inbox_of_one, 1, Duration::from_secs(10), || from_one.send(vec![heartbeat(1, 2)])), "both ways");
    assert!(!arrives(&inbox, 3, Duration::from_secs(3), || from_rogue.send(vec![heartbeat(3, 1)])), "another CA's peer is refused");
    assert!(!arrives(&inbox, 4, Duration::from_secs(3), || from_plain.send(vec![heartbeat(4, 1)])), "a plaintext peer is refused");
    // the refused ones did not break the good stream
    assert!(arrives(&inbox, 2, Duration::from_secs(10), || from_two.send(vec![heartbeat(2, 1)])));
}

#[test]
fn missing_or_mismatched_files_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let files = ca.node(dir.path(), "ca.pem", "n");
    MutualTls::load(&files).expect("a good set loads");
    let missing = MutualTlsFiles { ca_certificate_path: dir.path().join("nope.pem"), ..files.clone() };
    let err = MutualTls::load(&missing).unwrap_err().to_string();
    assert!(err.contains("nope.pem"), "{err}");
    let other = ca.node(dir.path(), "ca.pem", "m");
    let mismatch = MutualTlsFiles { private_key_path: other.private_key_path, ..files.clone() };
    let err = MutualTls::load(&mismatch).unwrap_err().to_string();
    assert!(err.contains("does not fit"), "{err}");
    std::fs::write(dir.path().join("empty.pem"), "no PEM here").unwrap();
    let empty = MutualTlsFiles { ca_certificate_path: dir.path().join("empty.pem"), ..files };
    let err = MutualTls::load(&empty).unwrap_err().to_string();
    assert!(err.contains("holds no PEM certificate"), "{err}");
}
