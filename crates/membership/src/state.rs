//! What a node publishes about itself, and its encoding into gossip key-values.
//!
//! A node's state travels as two chitchat keys, each a small JSON document: [`INFO_KEY`] (the
//! addresses and version, set once at start) and [`PARTITIONS_KEY`] (the partition roles, which
//! change with elections). Splitting them keeps a role change's delta to the partitions alone.

use serde::{Deserialize, Serialize};

use crate::Error;

/// The key of a node's addresses and version.
pub(crate) const INFO_KEY: &str = "info";
/// The key of a node's partition roles.
pub(crate) const PARTITIONS_KEY: &str = "partitions";

/// A node's role in one partition's replication group, named as Zeebe's topology names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Role {
    Leader,
    Follower,
    Inactive,
}

/// One partition as a node sees itself in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub partition_id: u16,
    pub role: Role,
    /// The Raft term in which the node holds `role`; of two claimed leaders the higher term wins.
    pub term: u64,
    pub healthy: bool,
    /// Failed too often and left down until the node restarts (Zeebe's DEAD health); absent
    /// from the gossip of a node that does not say, read as false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dead: bool,
}

/// What a node tells the cluster about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeState {
    /// `host:port` clients reach the node's gateway at.
    pub gateway_addr: String,
    /// `host:port` of the node's internal (replication) endpoint.
    pub internal_addr: String,
    /// The node's software version.
    pub version: String,
    /// The node's partitions, ordered by id, each id once.
    pub partitions: Vec<PartitionState>,
    /// The cluster's shape as this broker was configured with it (`None` from a node that does not
    /// say): what a standalone gateway learns the partition count and the brokers from.
    pub cluster: Option<ClusterShape>,
}

/// The shape of the cluster a broker belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterShape {
    /// The number of brokers.
    pub cluster_size: u32,
    /// The number of partitions of the whole cluster.
    pub partitions_count: u32,
    pub replication_factor: u32,
}

impl NodeState {
    /// The node's state in `partition_id`, if it replicates that partition.
    pub fn partition(&self, partition_id: u16) -> Option<&PartitionState> {
        self.partitions.iter().find(|p| p.partition_id == partition_id)
    }
}

/// The [`INFO_KEY`] document.
#[derive(Serialize, Deserialize)]
struct Info {
    gateway_addr: String,
    internal_addr: String,
    version: String,
    /// Absent from nodes of versions before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster: Option<ClusterShape>,
}

/// Sorts `partitions` by id; an id given twice is an error.
pub(crate) fn normalise_partitions(mut partitions: Vec<PartitionState>) -> Result<Vec<PartitionState>, Error> {
    partitions.sort_by_key(|p| p.partition_id);
    if let Some(pair) = partitions.windows(2).find(|pair| pair[0].partition_id == pair[1].partition_id) {
        return Err(Error::DuplicatePartition(pair[0].partition_id));
    }
    Ok(partitions)
}

pub(crate) fn encode_info(state: &NodeState) -> Result<String, Error> {
    let info = Info {
        gateway_addr: state.gateway_addr.clone(),
        internal_addr: state.internal_addr.clone(),
        version: state.version.clone(),
        cluster: state.cluster,
    };
    serde_json::to_string(&info).map_err(Error::Encode)
}

pub(crate) fn encode_partitions(partitions: &[PartitionState]) -> Result<String, Error> {
    serde_json::to_string(partitions).map_err(Error::Encode)
}

/// The key-values announcing `state`.
pub(crate) fn encode(state: &NodeState) -> Result<Vec<(String, String)>, Error> {
    Ok(vec![(INFO_KEY.to_string(), encode_info(state)?), (PARTITIONS_KEY.to_string(), encode_partitions(&state.partitions)?)])
}

/// Reads a node's state back from its key-values (`get` looks a key up). `None` while a key has
/// not arrived yet or holds what this version cannot read.
pub(crate) fn decode<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<NodeState> {
    let info: Info = serde_json::from_str(get(INFO_KEY)?).ok()?;
    let partitions: Vec<PartitionState> = serde_json::from_str(get(PARTITIONS_KEY)?).ok()?;
    Some(NodeState {
        gateway_addr: info.gateway_addr,
        internal_addr: info.internal_addr,
        version: info.version,
        partitions,
        cluster: info.cluster,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn sample() -> NodeState {
        NodeState {
            gateway_addr: "broker-1:26500".into(),
            internal_addr: "broker-1:26502".into(),
            version: "8.5.0".into(),
            partitions: vec![
                PartitionState { partition_id: 1, role: Role::Leader, term: 3, healthy: true, dead: false },
                PartitionState { partition_id: 2, role: Role::Inactive, term: 0, healthy: false, dead: false },
            ],
            cluster: Some(ClusterShape { cluster_size: 3, partitions_count: 2, replication_factor: 3 }),
        }
    }

    #[test]
    fn encoding_round_trips() {
        let kvs: HashMap<String, String> = encode(&sample()).unwrap().into_iter().collect();
        assert_eq!(decode(|k| kvs.get(k).map(String::as_str)), Some(sample()));
        assert!(kvs[PARTITIONS_KEY].contains(r#""role":"LEADER""#), "{}", kvs[PARTITIONS_KEY]);
        // a node that does not say its cluster's shape (an older version) is still read
        let old = NodeState { cluster: None, ..sample() };
        let kvs: HashMap<String, String> = encode(&old).unwrap().into_iter().collect();
        assert!(!kvs[INFO_KEY].contains("cluster"), "{}", kvs[INFO_KEY]);
        assert_eq!(decode(|k| kvs.get(k).map(String::as_str)), Some(old));
    }

    #[test]
    fn missing_or_unreadable_keys_decode_to_none() {
        let mut kvs: HashMap<String, String> = encode(&sample()).unwrap().into_iter().collect();
        kvs.remove(PARTITIONS_KEY);
        assert_eq!(decode(|k| kvs.get(k).map(String::as_str)), None);
        kvs.insert(PARTITIONS_KEY.into(), "[{\"partition_id\":1,\"role\":\"CANDIDATE\"}]".into());
        assert_eq!(decode(|k| kvs.get(k).map(String::as_str)), None);
    }

    #[test]
    fn partitions_are_sorted_and_unique() {
        let p = |id| PartitionState { partition_id: id, role: Role::Follower, term: 1, healthy: true, dead: false };
        let sorted = normalise_partitions(vec![p(3), p(1), p(2)]).unwrap();
        assert_eq!(sorted.iter().map(|p| p.partition_id).collect::<Vec<_>>(), [1, 2, 3]);
        assert!(matches!(normalise_partitions(vec![p(2), p(1), p(2)]), Err(Error::DuplicatePartition(2))));
    }
}
