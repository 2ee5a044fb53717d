//! Test certificates: a CA and a server certificate it signed (`rcgen`), for the TLS tests.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};

/// A CA and a server certificate it signed, for `localhost` and `127.0.0.1`, as PEM files.
pub struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "Waggle test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_key = KeyPair::generate().expect("CA key");
        let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
        let mut server = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).expect("server params");
        server.distinguished_name.push(DnType::CommonName, "localhost");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        let server_key = KeyPair::generate().expect("server key");
        let server_cert = server.signed_by(&server_key, &ca_cert, &ca_key).expect("server certificate");
        std::fs::write(dir.path().join("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(dir.path().join("chain.pem"), server_cert.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), server_key.serialize_pem()).unwrap();
        Certs { dir }
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn ca_str(&self) -> String {
        self.ca().display().to_string()
    }

    /// The node's flags for TLS with this certificate.
    pub fn node_args(&self) -> Vec<String> {
        let p = |f: &str| self.dir.path().join(f).display().to_string();
        vec![
            "--security-enabled".into(),
            "true".into(),
            "--security-certificate-chain-path".into(),
            p("chain.pem"),
            "--security-private-key-path".into(),
            p("key.pem"),
        ]
    }
}

impl Default for Certs {
    fn default() -> Self {
        Self::new()
    }
}
