//! `waggle gateway`'s settings: defaults, then a TOML file, then `WAGGLE_*` environment
//! variables, then flags (each later source wins), named as the broker's.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

use crate::config::{socket_address, split_host_port, ContactPoints, DEFAULT_INTERNAL_PORT};
use crate::security::network::{NetworkFile, NetworkSecurityArgs};
use crate::security::{SecurityArgs, SecurityConfig, SecurityFile};
use waggle_replication::tls::MutualTlsFiles;

/// Settings of a standalone gateway. It holds no data and no partition: it learns the cluster
/// (brokers, partition count, replication factor, leaders) from the brokers' gossip, so it needs
/// only some of their internal addresses.
#[derive(Debug, Clone, Args, Default)]
pub struct GatewayArgs {
    /// Configuration file (TOML) with any of the keys below in snake_case, e.g. `port = 26500`.
    #[arg(long, env = "WAGGLE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address the gRPC gateway listens on [default: 127.0.0.1].
    #[arg(long, env = "WAGGLE_HOST")]
    pub host: Option<String>,
    /// Port of the gRPC gateway (Zeebe's) [default: 26500].
    #[arg(long, env = "WAGGLE_PORT")]
    pub port: Option<u16>,
    /// Port of the management HTTP server: /health, /ready (once every partition has a known
    /// leader), /metrics, /actuator/cluster [default: 9600].
    #[arg(long, env = "WAGGLE_MANAGEMENT_PORT")]
    pub management_port: Option<u16>,
    /// Address the management HTTP server listens on, apart from --host: loopback only unless
    /// set otherwise [default: 127.0.0.1].
    #[arg(long, env = "WAGGLE_MANAGEMENT_HOST")]
    pub management_host: Option<String>,
    /// Internal addresses (host:port) of brokers of the cluster to join through, comma-separated:
    /// one alive broker is enough, the gateway learns the others from it [default: 127.0.0.1:26502].
    #[arg(long, env = "WAGGLE_CONTACT_POINTS", value_delimiter = ',', value_name = "HOST:PORT,...")]
    pub contact_points: Option<Vec<String>>,
    /// UDP port the gateway gossips on with the brokers; 0 picks a free one, which the gateway
    /// announces (Zeebe's gateway cluster port) [default: 0].
    #[arg(long, env = "WAGGLE_INTERNAL_PORT")]
    pub internal_port: Option<u16>,
    /// Address the brokers reach the gateway's gossip at [default: 127.0.0.1].
    #[arg(long, env = "WAGGLE_INTERNAL_HOST")]
    pub internal_host: Option<String>,
    /// The gateway's name in the cluster's gossip; each gateway of a cluster needs its own
    /// (Zeebe's gateway memberId) [default: gateway].
    #[arg(long, env = "WAGGLE_MEMBER_ID")]
    pub member_id: Option<String>,
    /// Largest accepted gRPC request in bytes [default: 4194304].
    #[arg(long, env = "WAGGLE_MAX_MESSAGE_SIZE")]
    pub max_message_size: Option<usize>,
    /// Default long-polling time of ActivateJobs in milliseconds [default: 10000].
    #[arg(long, env = "WAGGLE_LONG_POLLING_TIMEOUT_MS")]
    pub long_polling_timeout_ms: Option<u64>,
    #[command(flatten)]
    pub security: SecurityArgs,
    // mutual TLS to the brokers' internal ports, as the brokers have it
    #[command(flatten)]
    pub network_security: NetworkSecurityArgs,
    /// Multi-tenancy (Zeebe 8.5's `multiTenancy.enabled`), as the brokers' [default: false].
    #[arg(long, env = "WAGGLE_MULTI_TENANCY", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub multi_tenancy: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    host: Option<String>,
    port: Option<u16>,
    management_port: Option<u16>,
    management_host: Option<String>,
    contact_points: Option<ContactPoints>,
    internal_port: Option<u16>,
    internal_host: Option<String>,
    member_id: Option<String>,
    max_message_size: Option<usize>,
    long_polling_timeout_ms: Option<u64>,
    security: Option<SecurityFile>,
    network: Option<NetworkFile>,
    multi_tenancy: Option<bool>,
}

/// The resolved settings of a standalone gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    pub host: String,
    pub port: u16,
    pub management_port: u16,
    /// Where the management server listens (loopback by default).
    pub management_host: String,
    pub security: SecurityConfig,
    /// The brokers to join the gossip through (`host:port`, resolved by the gossip).
    pub contact_points: Vec<String>,
    /// Where the gateway gossips (port 0: a free one).
    pub gossip_addr: SocketAddr,
    pub member_id: String,
    pub max_message_size: usize,
    pub long_polling_timeout_ms: u64,
    pub multi_tenancy: bool,
    /// Mutual TLS to the brokers' internal ports, if on.
    pub internal_tls: Option<MutualTlsFiles>,
}

impl GatewayArgs {
    pub fn resolve(&self) -> anyhow::Result<GatewayConfig> {
        let file: FileConfig = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str(&text).with_context(|| format!("invalid config file {} (a gateway's settings)", path.display()))?
            }
            None => FileConfig::default(),
        };
        let contact_points: Vec<String> = self
            .contact_points
            .clone()
            .or_else(|| file.contact_points.map(ContactPoints::into_vec))
            .unwrap_or_else(|| vec![format!("127.0.0.1:{DEFAULT_INTERNAL_PORT}")])
            .into_iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        anyhow::ensure!(!contact_points.is_empty(), "--contact-points must name at least one broker's internal address (host:port)");
        for (i, point) in contact_points.iter().enumerate() {
            split_host_port(point).with_context(|| format!("--contact-points entry {i} ({point}) is not a host:port address"))?;
        }
        let internal_host = self.internal_host.clone().or(file.internal_host).unwrap_or_else(|| "127.0.0.1".into());
        let internal_port = self.internal_port.or(file.internal_port).unwrap_or(0);
        let gossip_addr = socket_address(&internal_host, internal_port).with_context(|| format!("--internal-host {internal_host}"))?;
        anyhow::ensure!(
            !gossip_addr.ip().is_unspecified(),
            "--internal-host {internal_host} is a wildcard address: give the address the brokers reach the gateway at"
        );
        let member_id = self.member_id.clone().or(file.member_id).unwrap_or_else(|| "gateway".into());
        anyhow::ensure!(!member_id.trim().is_empty(), "--member-id must not be empty");
        let config = GatewayConfig {
            host: self.host.clone().or(file.host).unwrap_or_else(|| "127.0.0.1".into()),
            port: self.port.or(file.port).unwrap_or(26500),
            management_port: self.management_port.or(file.management_port).unwrap_or(9600),
            management_host: self.management_host.clone().or(file.management_host).unwrap_or_else(|| "127.0.0.1".into()),
            security: self.security.resolve(file.security.as_ref())?,
            contact_points,
            gossip_addr,
            member_id,
            max_message_size: self.max_message_size.or(file.max_message_size).unwrap_or(4 * 1024 * 1024),
            long_polling_timeout_ms: self.long_polling_timeout_ms.or(file.long_polling_timeout_ms).unwrap_or(10_000),
            multi_tenancy: self.multi_tenancy.or(file.multi_tenancy).unwrap_or(false),
            internal_tls: self.network_security.resolve(file.network.as_ref())?,
        };
        anyhow::ensure!(config.max_message_size >= 1024, "--max-message-size must be at least 1024 bytes");
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_then_file_then_flags() {
        let c = GatewayArgs::default().resolve().unwrap();
        assert_eq!((c.host.as_str(), c.port, c.management_port), ("127.0.0.1", 26500, 9600));
        assert_eq!(c.contact_points, ["127.0.0.1:26502"]);
        assert_eq!((c.gossip_addr, c.member_id.as_str()), (SocketAddr::from(([127, 0, 0, 1], 0)), "gateway"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gateway.toml");
        std::fs::write(&file, "port = 1234\ncontact_points = [\"127.0.0.1:3000\", \"127.0.0.1:3010\"]\ninternal_port = 3100\n").unwrap();
        let c = GatewayArgs { config: Some(file.clone()), internal_port: Some(3200), ..Default::default() }.resolve().unwrap();
        assert_eq!((c.port, c.gossip_addr.port()), (1234, 3200));
        assert_eq!(c.contact_points, ["127.0.0.1:3000", "127.0.0.1:3010"]);
    }

    #[test]
    fn a_brokers_setting_or_a_bad_address_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gateway.toml");
        std::fs::write(&file, "partitions = 3\n").unwrap();
        let err = format!("{:#}", GatewayArgs { config: Some(file), ..Default::default() }.resolve().unwrap_err());
        assert!(err.contains("partitions"), "{err}");
        let err = GatewayArgs { contact_points: Some(vec!["nowhere".into()]), ..Default::default() }.resolve().unwrap_err();
        assert!(format!("{err:#}").contains("--contact-points entry 0 (nowhere) is not a host:port address"), "{err:#}");
        let err = GatewayArgs { internal_host: Some("0.0.0.0".into()), ..Default::default() }.resolve().unwrap_err();
        assert!(err.to_string().contains("wildcard"), "{err}");
    }
}
