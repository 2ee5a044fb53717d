//! A cluster broker's gossip: announces this broker's addresses and partition roles to the
//! others (`waggle-membership`), and describes the cluster from what they all announce.
//!
//! Gossip runs on UDP at the broker's internal address (the host and port number of its internal
//! TCP server, as Zeebe's 26502 serves both), with the other contact points as seeds. The
//! standalone node does not gossip. Every round, the alive brokers' internal addresses go to
//! the broker's address book ([`Broker::learn_addresses`]): a broker started later (a node id
//! beyond the contact points) or moved is reached as soon as the gossip brings it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use waggle_broker::{Broker, ClusterSpec, PartitionStatus};
use waggle_gateway::{ClusterTopology, PartitionHealth, PartitionRole, TopologyBroker, TopologyPartition, TopologySource};
use waggle_membership::{ClusterShape, ClusterView, Membership, MembershipConfig, NodeState, PartitionState, Role};

/// How often the broker's partition roles are compared with what it announced last.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(150);

/// The running gossip of this broker; [`Gossip::shutdown`] stops it.
pub struct Gossip {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Gossip {
    /// Starts gossiping as broker `spec.node_id` under `cluster_id` (a cluster is the brokers its
    /// contact points name, which no other cluster's seeds point at; with mutual TLS the id is
    /// derived from the CA, [`crate::security::network::gossip_cluster_id`]), whose gateway clients reach at
    /// `gateway_host:gateway_port` (a wildcard host stands for the internal address's host), and
    /// keeps announcing `broker`'s partition roles. Returns the gossip and the cluster's
    /// description from it.
    pub async fn start(
        spec: &ClusterSpec,
        cluster_id: &str,
        gateway_host: &str,
        gateway_port: u16,
        broker: Arc<Broker>,
    ) -> Result<(Gossip, Arc<MembershipTopology>), waggle_membership::Error> {
        let internal = spec.address();
        let gateway_addr = match gateway_host.parse::<IpAddr>() {
            Ok(ip) if ip.is_unspecified() => std::net::SocketAddr::new(internal.ip(), gateway_port).to_string(),
            Ok(ip) => std::net::SocketAddr::new(ip, gateway_port).to_string(),
            Err(_) => format!("{gateway_host}:{gateway_port}"),
        };
        let mut config = MembershipConfig::new(spec.node_id, internal, cluster_id);
        config.seeds = spec.other_members().iter().map(|m| m.to_string()).collect();
        let own = NodeState {
            gateway_addr,
            internal_addr: internal.to_string(),
            version: env!("CARGO_PKG_VERSION").into(),
            partitions: partition_states(&broker.status()),
            // what a standalone gateway learns the cluster's shape from
            cluster: Some(ClusterShape {
                cluster_size: spec.cluster_size() as u32,
                partitions_count: u32::from(broker.partition_count()),
                replication_factor: spec.replication_factor,
            }),
        };
        let membership = Membership::start(config, own.clone()).await?;
        let topology = Arc::new(MembershipTopology {
            view: membership.subscribe(),
            broker: broker.clone(),
            node_id: spec.node_id,
            own,
            cluster_size: spec.cluster_size() as u32,
            replication_factor: spec.replication_factor,
        });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(publish(membership, broker, stopped));
        Ok((Gossip { stop, task }, topology))
    }

    /// Stops announcing and gossiping; the others declare this broker dead within seconds.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Announces `broker`'s partitions whenever they differ from the last announced, and hands it
/// the alive brokers' internal addresses, until `stop` changes (or its sender is gone); then
/// leaves the gossip.
async fn publish(membership: Membership, broker: Arc<Broker>, mut stop: watch::Receiver<bool>) {
    let view = membership.subscribe();
    let mut announced = partition_states(&broker.status());
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        let addresses: Vec<(u64, std::net::SocketAddr)> =
            view.borrow().alive().filter_map(|m| Some((m.node_id, m.state.internal_addr.parse().ok()?))).collect();
        broker.learn_addresses(addresses);
        let now = partition_states(&broker.status());
        if now != announced {
            match membership.update_partitions(now.clone()).await {
                Ok(()) => announced = now,
                Err(e) => tracing::warn!(error = %e, "announcing the partition roles failed"),
            }
        }
    }
    if let Err(e) = membership.shutdown().await {
        tracing::warn!(error = %e, "stopping the gossip failed");
    }
}

/// The gossip form of this broker's partitions: its role and term in each, healthy while the
/// partition runs.
fn partition_states(status: &[PartitionStatus]) -> Vec<PartitionState> {
    status
        .iter()
        .map(|s| PartitionState {
            partition_id: s.partition_id,
            role: if s.role == waggle_broker::LEADER { Role::Leader } else { Role::Follower },
            term: s.term,
            healthy: s.healthy,
            dead: s.dead,
        })
        .collect()
}

/// The cluster as the gossip shows it: the alive members' announcements, this broker's own
/// partitions read fresh from the broker.
pub struct MembershipTopology {
    view: watch::Receiver<ClusterView>,
    broker: Arc<Broker>,
    node_id: u64,
    /// This broker's addresses and version.
    own: NodeState,
    cluster_size: u32,
    replication_factor: u32,
}

impl TopologySource for MembershipTopology {
    fn topology(&self) -> ClusterTopology {
        let mut nodes: Vec<(u64, NodeState)> =
            self.view.borrow().alive().filter(|m| m.node_id != self.node_id).map(|m| (m.node_id, m.state.clone())).collect();
        nodes.push((self.node_id, NodeState { partitions: partition_states(&self.broker.status()), ..self.own.clone() }));
        nodes.sort_by_key(|(id, _)| *id);
        // the brokers the cluster topology has now (brokers added or removed since the start)
        let cluster_size = self.broker.cluster_topology().map_or(self.cluster_size, |t| t.brokers.len() as u32);
        describe(&nodes, cluster_size, u32::from(self.broker.partition_count()), self.replication_factor)
    }
}

/// The topology of the alive `nodes` (ordered by node id). Of several claims to lead a partition
/// (stale gossip of a deposed leader) only the highest term's is a leader, the lower node id
/// winning a tie (as [`ClusterView::leader_of`]); the others are shown as followers.
pub(crate) fn describe(nodes: &[(u64, NodeState)], cluster_size: u32, partitions_count: u32, replication_factor: u32) -> ClusterTopology {
    let mut leaders: HashMap<u16, (u64, u64)> = HashMap::new();
    for (node_id, state) in nodes {
        for p in state.partitions.iter().filter(|p| p.role == Role::Leader) {
            let claim = (p.term, *node_id);
            leaders
                .entry(p.partition_id)
                .and_modify(|best| {
                    if claim.0 > best.0 || (claim.0 == best.0 && claim.1 < best.1) {
                        *best = claim;
                    }
                })
                .or_insert(claim);
        }
    }
    let brokers = nodes
        .iter()
        .map(|(node_id, state)| {
            let (host, port) = split_host_port(&state.gateway_addr);
            TopologyBroker {
                node_id: *node_id,
                host,
                port,
                version: state.version.clone(),
                partitions: state
                    .partitions
                    .iter()
                    .map(|p| TopologyPartition {
                        partition_id: p.partition_id,
                        role: match p.role {
                            Role::Leader if leaders.get(&p.partition_id).is_some_and(|(_, n)| n == node_id) => PartitionRole::Leader,
                            Role::Leader | Role::Follower => PartitionRole::Follower,
                            Role::Inactive => PartitionRole::Inactive,
                        },
                        health: if p.healthy {
                            PartitionHealth::Healthy
                        } else if p.dead {
                            PartitionHealth::Dead
                        } else {
                            PartitionHealth::Unhealthy
                        },
                        term: p.term,
                    })
                    .collect(),
            }
        })
        .collect();
    ClusterTopology { brokers, cluster_size, partitions_count, replication_factor }
}

/// `host:port` split at its last colon, IPv6 brackets removed; port 0 when it has none.
fn split_host_port(addr: &str) -> (String, u16) {
    match addr.rsplit_once(':') {
        Some((host, port)) => {
            let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
            (host.to_string(), port.parse().unwrap_or(0))
        }
        None => (addr.to_string(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u64, partitions: &[(u16, Role, u64)]) -> (u64, NodeState) {
        let state = NodeState {
            gateway_addr: format!("10.0.0.{id}:2650{id}"),
            internal_addr: String::new(),
            version: "v".into(),
            partitions: partitions
                .iter()
                .map(|&(partition_id, role, term)| PartitionState { partition_id, role, term, healthy: true, dead: false })
                .collect(),
            cluster: None,
        };
        (id, state)
    }

    fn roles(t: &ClusterTopology, partition: u16) -> Vec<(u64, PartitionRole)> {
        t.brokers.iter().filter_map(|b| b.partitions.iter().find(|p| p.partition_id == partition).map(|p| (b.node_id, p.role))).collect()
    }

    #[test]
    fn a_stale_leader_claim_is_shown_as_a_follower() {
        let nodes = [
            node(0, &[(1, Role::Leader, 2), (2, Role::Follower, 5)]),
            node(1, &[(1, Role::Leader, 3), (2, Role::Leader, 5)]),
            node(2, &[(1, Role::Follower, 3), (2, Role::Leader, 5)]),
        ];
        let t = describe(&nodes, 3, 2, 3);
        assert_eq!(roles(&t, 1), [(0, PartitionRole::Follower), (1, PartitionRole::Leader), (2, PartitionRole::Follower)]);
        assert_eq!(roles(&t, 2), [(0, PartitionRole::Follower), (1, PartitionRole::Leader), (2, PartitionRole::Follower)]);
        assert_eq!((t.brokers[2].host.as_str(), t.brokers[2].port), ("10.0.0.2", 26502));
        assert_eq!((t.cluster_size, t.partitions_count, t.replication_factor), (3, 2, 3));
    }

    #[test]
    fn addresses_split_at_the_last_colon() {
        assert_eq!(split_host_port("[::1]:26500"), ("::1".to_string(), 26500));
        assert_eq!(split_host_port("broker-1:26500"), ("broker-1".to_string(), 26500));
    }
}
