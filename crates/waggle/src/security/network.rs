//! Settings of mutual TLS between the brokers (and a standalone gateway) on the internal port:
//! flags `--network-security-*` (each also `WAGGLE_NETWORK_SECURITY_*`) and the TOML file's
//! `[network.security]` table, named after Zeebe 8.5's `zeebe.broker.network.security.enabled`,
//! `certificateChainPath` and `privateKeyPath`
//! (<https://docs.camunda.io/docs/self-managed/zeebe-deployment/security/secure-cluster-communication/>),
//! plus the CA peers are verified against (Zeebe has no such setting). The connections
//! themselves: [`waggle_replication::tls`].
//!
//! The membership gossip runs over UDP and stays plaintext, as Zeebe's does (the page above):
//! it carries addresses and partition roles, no records. With TLS on, its cluster id is derived
//! from the CA certificate ([`gossip_cluster_id`]), so members of another CA's cluster (or of a
//! plaintext one) are not gossiped with; this separates clusters, it authenticates no one.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;
use waggle_replication::tls::{MutualTls, MutualTlsFiles};

/// The gossip's cluster id without TLS.
pub const PLAIN_CLUSTER_ID: &str = "waggle";

#[derive(Debug, Clone, Args, Default)]
pub struct NetworkSecurityArgs {
    /// Mutual TLS on every connection between brokers (Raft, forwarded commands, job streams),
    /// with --network-security-certificate-chain-path, --network-security-private-key-path and
    /// --network-security-ca-certificate-path; the same on every broker (Zeebe's
    /// `network.security.enabled`) [default: false].
    #[arg(long, env = "WAGGLE_NETWORK_SECURITY_ENABLED", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub network_security_enabled: Option<bool>,
    /// PEM file: this broker's certificate (usable as server and client certificate), then its
    /// intermediates (Zeebe's `network.security.certificateChainPath`).
    #[arg(long, env = "WAGGLE_NETWORK_SECURITY_CERTIFICATE_CHAIN_PATH", value_name = "PATH")]
    pub network_security_certificate_chain_path: Option<PathBuf>,
    /// PEM file: the certificate's private key (Zeebe's `network.security.privateKeyPath`).
    #[arg(long, env = "WAGGLE_NETWORK_SECURITY_PRIVATE_KEY_PATH", value_name = "PATH")]
    pub network_security_private_key_path: Option<PathBuf>,
    /// PEM file: the CA certificate a peer's certificate must be signed by; any certificate it
    /// signed is taken as a member, so use a CA of this cluster's own.
    #[arg(long, env = "WAGGLE_NETWORK_SECURITY_CA_CERTIFICATE_PATH", value_name = "PATH")]
    pub network_security_ca_certificate_path: Option<PathBuf>,
}

/// The environment variables of [`NetworkSecurityArgs`] (a standalone node refuses them).
pub const NETWORK_SECURITY_ENV: [&str; 4] = [
    "WAGGLE_NETWORK_SECURITY_ENABLED",
    "WAGGLE_NETWORK_SECURITY_CERTIFICATE_CHAIN_PATH",
    "WAGGLE_NETWORK_SECURITY_PRIVATE_KEY_PATH",
    "WAGGLE_NETWORK_SECURITY_CA_CERTIFICATE_PATH",
];

/// `[network]` in the TOML file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkFile {
    security: Option<NetworkSecurityFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkSecurityFile {
    enabled: Option<bool>,
    certificate_chain_path: Option<PathBuf>,
    private_key_path: Option<PathBuf>,
    ca_certificate_path: Option<PathBuf>,
}

impl NetworkSecurityArgs {
    /// Flags (and their environment variables) over the file's `[network.security]`: the files,
    /// if mutual TLS is on (all three are then needed).
    pub fn resolve(&self, file: Option<&NetworkFile>) -> anyhow::Result<Option<MutualTlsFiles>> {
        let file = file.and_then(|f| f.security.clone()).unwrap_or_default();
        if !self.network_security_enabled.or(file.enabled).unwrap_or(false) {
            return Ok(None);
        }
        let chain = self.network_security_certificate_chain_path.clone().or(file.certificate_chain_path);
        let key = self.network_security_private_key_path.clone().or(file.private_key_path);
        let ca = self.network_security_ca_certificate_path.clone().or(file.ca_certificate_path);
        match (chain, key, ca) {
            (Some(certificate_chain_path), Some(private_key_path), Some(ca_certificate_path)) => {
                Ok(Some(MutualTlsFiles { certificate_chain_path, private_key_path, ca_certificate_path }))
            }
            (chain, key, _) => {
                let missing = if chain.is_none() {
                    "--network-security-certificate-chain-path"
                } else if key.is_none() {
                    "--network-security-private-key-path"
                } else {
                    "--network-security-ca-certificate-path"
                };
                anyhow::bail!(
                    "--network-security-enabled needs --network-security-certificate-chain-path, \
                     --network-security-private-key-path and --network-security-ca-certificate-path (PEM files); {missing} is missing"
                )
            }
        }
    }
}

/// Reads the files (a missing or unreadable one stops the start-up, naming it).
pub fn load(files: &MutualTlsFiles) -> anyhow::Result<Arc<MutualTls>> {
    let tls = MutualTls::load(files).context("mutual TLS on the internal port (--network-security-*)")?;
    Ok(Arc::new(tls))
}

/// The gossip's cluster id: [`PLAIN_CLUSTER_ID`] without TLS, else one derived from the CA
/// certificate (members gossip only with members of the same id; see the module documentation).
pub fn gossip_cluster_id(tls: Option<&MutualTls>) -> String {
    match tls {
        None => PLAIN_CLUSTER_ID.to_string(),
        Some(tls) => {
            let mut hasher = crc32fast::Hasher::new();
            for ca in tls.ca_certificates() {
                hasher.update(ca.as_ref());
            }
            format!("{PLAIN_CLUSTER_ID}-tls-{:08x}", hasher.finalize())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_every_file_needed_when_on() {
        assert_eq!(NetworkSecurityArgs::default().resolve(None).unwrap(), None);
        let on = NetworkSecurityArgs {
            network_security_enabled: Some(true),
            network_security_certificate_chain_path: Some("c.pem".into()),
            network_security_private_key_path: Some("k.pem".into()),
            ..Default::default()
        };
        let err = on.resolve(None).unwrap_err().to_string();
        assert!(err.contains("--network-security-ca-certificate-path is missing"), "{err}");
        let file: NetworkFile =
            toml::from_str("[security]\nenabled = true\nca_certificate_path = \"ca.pem\"\nprivate_key_path = \"file.pem\"\n").unwrap();
        let files = on.resolve(Some(&file)).unwrap().expect("on");
        assert_eq!(files.ca_certificate_path, PathBuf::from("ca.pem"));
        assert_eq!(files.private_key_path, PathBuf::from("k.pem"), "a flag over the file");
    }
}
