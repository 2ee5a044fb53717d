//! How a node joins the gossip, and how quickly it declares a silent peer dead.

use std::net::SocketAddr;
use std::time::Duration;

use chitchat::FailureDetectorConfig;

use crate::Error;

/// A node's gossip settings. [`MembershipConfig::new`] fills in the defaults.
#[derive(Debug, Clone)]
pub struct MembershipConfig {
    /// The node's id, unique in the cluster (Zeebe's broker id).
    pub node_id: u64,
    /// The id to gossip under instead of `node_id`. One that is not a number (a standalone
    /// gateway's, `gateway-<name>`) makes the node a member of no one's view (brokers do not list
    /// gateways), while the node still learns every broker's state.
    pub gossip_id: Option<String>,
    /// The UDP address to gossip on; port 0 picks a free port.
    pub gossip_addr: SocketAddr,
    /// The address peers reach this node's gossip at, when it differs from `gossip_addr` (which
    /// must then not be a wildcard address). Port 0 stands for the bound port.
    pub advertise_addr: Option<SocketAddr>,
    /// `host:port` of nodes to join through; host names are resolved again every minute. A node
    /// need not list itself, and the first node of a cluster may list none.
    pub seeds: Vec<String>,
    /// Nodes only gossip with nodes of the same cluster id.
    pub cluster_id: String,
    /// How often the node gossips with (up to three) peers.
    pub gossip_interval: Duration,
    /// A peer is declared dead once no news of its heartbeat has come for `phi_threshold` times the
    /// mean interval between its heartbeats' arrivals (chitchat's phi). News comes several times
    /// per gossip interval, so with the defaults a stopped peer is declared dead after about 2-3 s
    /// on loopback (see the crate documentation).
    pub phi_threshold: f64,
    /// How long a dead member stays listed (not alive) before it is forgotten.
    pub dead_node_grace_period: Duration,
}

impl MembershipConfig {
    /// Defaults: no seeds, gossip every 250 ms, phi threshold 20, dead members listed for an hour.
    pub fn new(node_id: u64, gossip_addr: SocketAddr, cluster_id: impl Into<String>) -> Self {
        MembershipConfig {
            node_id,
            gossip_id: None,
            gossip_addr,
            advertise_addr: None,
            seeds: Vec::new(),
            cluster_id: cluster_id.into(),
            gossip_interval: Duration::from_millis(250),
            phi_threshold: 20.0,
            dead_node_grace_period: Duration::from_secs(3600),
        }
    }

    /// Checks the settings, naming the first bad one.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let invalid = |setting: &'static str, reason: String| Err(Error::InvalidConfig { setting, reason });
        if self.cluster_id.is_empty() {
            return invalid("cluster_id", "must not be empty".into());
        }
        if self.gossip_id.as_deref().is_some_and(str::is_empty) {
            return invalid("gossip_id", "must not be empty".into());
        }
        if self.gossip_interval.is_zero() {
            return invalid("gossip_interval", "must be positive".into());
        }
        if !(self.phi_threshold.is_finite() && self.phi_threshold > 0.0) {
            return invalid("phi_threshold", format!("must be a positive number, not {}", self.phi_threshold));
        }
        match self.advertise_addr {
            Some(addr) if addr.ip().is_unspecified() => {
                invalid("advertise_addr", format!("{addr} is a wildcard address peers cannot reach"))
            }
            None if self.gossip_addr.ip().is_unspecified() => {
                invalid("advertise_addr", format!("must be set when gossip_addr ({}) is a wildcard address", self.gossip_addr))
            }
            _ => Ok(()),
        }
    }

    /// The failure detector's settings: heartbeat arrivals are expected about once per gossip
    /// interval from the start (chitchat's default prior, 5 s, would make the first detections
    /// take a minute), and a gap of more than ten intervals (a peer that was away) is not taken as
    /// the peer's rhythm.
    pub(crate) fn failure_detector(&self) -> FailureDetectorConfig {
        FailureDetectorConfig {
            phi_threshold: self.phi_threshold,
            sampling_window_size: 100,
            max_interval: self.gossip_interval * 10,
            initial_interval: self.gossip_interval,
            dead_node_grace_period: self.dead_node_grace_period,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MembershipConfig {
        MembershipConfig::new(1, SocketAddr::from(([127, 0, 0, 1], 0)), "c")
    }

    fn rejected_setting(config: MembershipConfig) -> &'static str {
        match config.validate() {
            Err(Error::InvalidConfig { setting, .. }) => setting,
            other => panic!("expected an invalid setting, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_valid() {
        config().validate().unwrap();
    }

    #[test]
    fn bad_settings_are_named() {
        assert_eq!(rejected_setting(MembershipConfig { cluster_id: String::new(), ..config() }), "cluster_id");
        assert_eq!(rejected_setting(MembershipConfig { gossip_interval: Duration::ZERO, ..config() }), "gossip_interval");
        assert_eq!(rejected_setting(MembershipConfig { phi_threshold: f64::NAN, ..config() }), "phi_threshold");
        let wildcard = SocketAddr::from(([0, 0, 0, 0], 26502));
        assert_eq!(rejected_setting(MembershipConfig { gossip_addr: wildcard, ..config() }), "advertise_addr");
        assert_eq!(rejected_setting(MembershipConfig { advertise_addr: Some(wildcard), ..config() }), "advertise_addr");
        MembershipConfig { gossip_addr: wildcard, advertise_addr: Some(SocketAddr::from(([10, 0, 0, 1], 0))), ..config() }
            .validate()
            .unwrap();
    }
}
