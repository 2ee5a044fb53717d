//! The cluster as a standalone gateway knows it: from the brokers' gossip, which the gateway joins
//! under a name that is not a node id (`gateway/<member id>`), so that no broker lists it.
//!
//! The same view answers where the brokers are and who leads each partition (the
//! [`Directory`] the gateway routes by), what `Topology` and `/actuator/cluster` report (the alive
//! brokers, as a broker's embedded gateway reports them), and whether the gateway is ready.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::watch;
use waggle_broker::remote_cluster::Directory;
use waggle_gateway::{ClusterTopology, TopologySource};
use waggle_membership::{ClusterShape, ClusterView, Member, Membership, MembershipConfig, NodeState};

use super::config::GatewayConfig;
use crate::gossip::describe;

/// Joins the gossip through the contact points and waits until a broker has said the cluster's
/// shape (logging every few seconds while none has).
pub async fn join(config: &GatewayConfig, cluster_id: &str) -> anyhow::Result<(Membership, ClusterShape)> {
    let mut gossip = MembershipConfig::new(0, config.gossip_addr, cluster_id);
    gossip.gossip_id = Some(format!("gateway/{}", config.member_id));
    gossip.seeds = config.contact_points.clone();
    let own = NodeState {
        gateway_addr: format!("{}:{}", config.host, config.port),
        internal_addr: String::new(),
        version: env!("CARGO_PKG_VERSION").into(),
        partitions: Vec::new(),
        cluster: None,
    };
    let membership = Membership::start(gossip, own).await?;
    tracing::info!(gossip = %membership.gossip_addr(), contact_points = ?config.contact_points, "joining the cluster");
    let mut view = membership.subscribe();
    let mut waited = Duration::ZERO;
    loop {
        if let Some(shape) = shape(&view.borrow_and_update()) {
            return Ok((membership, shape));
        }
        const LOG_EVERY: Duration = Duration::from_secs(5);
        if tokio::time::timeout(LOG_EVERY, view.changed()).await.is_err() {
            waited += LOG_EVERY;
            tracing::warn!(waited_s = waited.as_secs(), contact_points = ?config.contact_points, "no broker heard from yet");
        }
    }
}

/// The cluster's shape as the alive brokers say it (the lowest node id's, should they differ).
fn shape(view: &ClusterView) -> Option<ClusterShape> {
    view.alive().find_map(|m| m.state.cluster)
}

/// A broker's internal address, as it announces it.
fn internal(member: &Member) -> Option<SocketAddr> {
    member.state.internal_addr.parse().ok()
}

/// The gossip view, as the gateway routes, describes and reports by it.
pub struct GossipCluster {
    pub view: watch::Receiver<ClusterView>,
    pub shape: ClusterShape,
    /// The gateway's client of the cluster, once started: its partition count follows the
    /// cluster topology (a grown count), where the gossiped shape keeps the count at start.
    pub remote: std::sync::OnceLock<std::sync::Weak<waggle_broker::RemoteCluster>>,
}

impl GossipCluster {
    /// The cluster's partition count: the topology's, once the client read it.
    fn partitions_count(&self) -> u32 {
        self.remote.get().and_then(std::sync::Weak::upgrade).map_or(self.shape.partitions_count, |r| u32::from(r.partition_count()))
    }

    /// The partitions no alive broker says it leads.
    pub fn leaderless(&self) -> Vec<u16> {
        let view = self.view.borrow();
        (1..=self.partitions_count() as u16).filter(|&p| view.leader_of(p).is_none()).collect()
    }
}

impl Directory for GossipCluster {
    fn brokers(&self) -> Vec<(u64, SocketAddr)> {
        self.view.borrow().alive().filter_map(|m| Some((m.node_id, internal(m)?))).collect()
    }

    fn leader(&self, partition: u16) -> Option<(u64, SocketAddr)> {
        let view = self.view.borrow();
        let leader = view.leader_of(partition)?;
        Some((leader.node_id, internal(leader)?))
    }
}

impl TopologySource for GossipCluster {
    fn topology(&self) -> ClusterTopology {
        let nodes: Vec<(u64, NodeState)> = self.view.borrow().alive().map(|m| (m.node_id, m.state.clone())).collect();
        describe(&nodes, self.shape.cluster_size, self.partitions_count(), self.shape.replication_factor)
    }
}
