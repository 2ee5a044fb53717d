//! The cluster as the `Topology` RPC describes it, and where that description comes from.
//!
//! The gateway asks a [`TopologySource`] for a [`ClusterTopology`] on every `Topology` call. The
//! standalone node's is [`StandaloneTopology`] (one broker leading every partition); a cluster
//! broker's is built by the binary from the gossip membership (so that this crate need not know
//! the gossip), and set with [`crate::GatewayService::with_topology`].

use std::sync::Arc;

use waggle_broker::Broker;
use waggle_protocol::gateway as pb;

/// A broker's role in one partition (Zeebe's `PartitionBrokerRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionRole {
    Leader,
    Follower,
    Inactive,
}

/// A broker's health in one partition (Zeebe's `PartitionBrokerHealth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionHealth {
    Healthy,
    Unhealthy,
    Dead,
}

impl PartitionRole {
    /// Zeebe's name of the role (`LEADER`, ...).
    pub fn name(self) -> &'static str {
        match self {
            PartitionRole::Leader => "LEADER",
            PartitionRole::Follower => "FOLLOWER",
            PartitionRole::Inactive => "INACTIVE",
        }
    }
}

impl PartitionHealth {
    /// Zeebe's name of the health (`HEALTHY`, ...).
    pub fn name(self) -> &'static str {
        match self {
            PartitionHealth::Healthy => "HEALTHY",
            PartitionHealth::Unhealthy => "UNHEALTHY",
            PartitionHealth::Dead => "DEAD",
        }
    }
}

/// One partition as one broker holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyPartition {
    pub partition_id: u16,
    pub role: PartitionRole,
    pub health: PartitionHealth,
    /// The Raft term the broker is in (0 where there is none, as on the standalone node).
    pub term: u64,
}

/// One broker of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyBroker {
    pub node_id: u64,
    pub host: String,
    pub port: u16,
    pub version: String,
    /// Ordered by partition id.
    pub partitions: Vec<TopologyPartition>,
}

/// The cluster as one node knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterTopology {
    /// The brokers known and alive, ordered by node id; at most one is `Leader` of a partition.
    pub brokers: Vec<TopologyBroker>,
    pub cluster_size: u32,
    pub partitions_count: u32,
    pub replication_factor: u32,
}

impl ClusterTopology {
    /// Zeebe's `TopologyResponse`, with `gateway_version` this crate's version.
    pub fn to_response(&self) -> pb::TopologyResponse {
        let brokers = self
            .brokers
            .iter()
            .map(|b| pb::BrokerInfo {
                node_id: b.node_id as i32,
                host: b.host.clone(),
                port: i32::from(b.port),
                version: b.version.clone(),
                partitions: b
                    .partitions
                    .iter()
                    .map(|p| pb::Partition {
                        partition_id: i32::from(p.partition_id),
                        role: match p.role {
                            PartitionRole::Leader => pb::partition::PartitionBrokerRole::Leader,
                            PartitionRole::Follower => pb::partition::PartitionBrokerRole::Follower,
                            PartitionRole::Inactive => pb::partition::PartitionBrokerRole::Inactive,
                        } as i32,
                        health: match p.health {
                            PartitionHealth::Healthy => pb::partition::PartitionBrokerHealth::Healthy,
                            PartitionHealth::Unhealthy => pb::partition::PartitionBrokerHealth::Unhealthy,
                            PartitionHealth::Dead => pb::partition::PartitionBrokerHealth::Dead,
                        } as i32,
                    })
                    .collect(),
            })
            .collect();
        pb::TopologyResponse {
            brokers,
            cluster_size: self.cluster_size as i32,
            partitions_count: self.partitions_count as i32,
            replication_factor: self.replication_factor as i32,
            gateway_version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// Where the gateway's (and the management API's) description of the cluster comes from.
pub trait TopologySource: Send + Sync {
    /// The cluster now; cheap enough to call per request.
    fn topology(&self) -> ClusterTopology;
}

/// The standalone node: broker 0 at the gateway's host and port + 1 (Zeebe's command port),
/// leading every partition, healthy as the partition says.
pub struct StandaloneTopology {
    pub broker: Arc<Broker>,
    pub host: String,
    pub port: u16,
}

impl TopologySource for StandaloneTopology {
    fn topology(&self) -> ClusterTopology {
        let partitions = self
            .broker
            .status()
            .into_iter()
            .map(|s| TopologyPartition {
                partition_id: s.partition_id,
                role: PartitionRole::Leader,
                health: if s.healthy {
                    PartitionHealth::Healthy
                } else if s.dead {
                    PartitionHealth::Dead
                } else {
                    PartitionHealth::Unhealthy
                },
                term: s.term,
            })
            .collect();
        ClusterTopology {
            brokers: vec![TopologyBroker {
                node_id: 0,
                host: self.host.clone(),
                port: self.port.wrapping_add(1),
                version: env!("CARGO_PKG_VERSION").into(),
                partitions,
            }],
            cluster_size: 1,
            partitions_count: u32::from(self.broker.partition_count()),
            replication_factor: 1,
        }
    }
}
